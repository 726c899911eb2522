#include "store/stored_json.hpp"

#include <algorithm>

namespace ratchet::store {
namespace {

// Far above what ratchet writes itself (arguments stop at 64 levels).
constexpr int kMaxStoredDepth = 1000;

}  // namespace

std::string stored_json_problem(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  if (deepest <= kMaxStoredDepth) return {};
  return "nested " + std::to_string(deepest) + " levels deep, past the " + std::to_string(kMaxStoredDepth) +
         " levels ratchet reads back";
}

}  // namespace ratchet::store
