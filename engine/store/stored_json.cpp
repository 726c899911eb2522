#include "store/stored_json.hpp"

#include "common/json_depth.hpp"

namespace ratchet::store {
namespace {

// Far above what ratchet writes itself (arguments stop at 64 levels).
constexpr int kMaxStoredDepth = 1000;

}  // namespace

std::string stored_json_problem(std::string_view text) {
  const int deepest = common::json_text_depth(text);
  if (deepest <= kMaxStoredDepth) return {};
  return "nested " + std::to_string(deepest) + " levels deep, past the " + std::to_string(kMaxStoredDepth) +
         " levels ratchet reads back";
}

}  // namespace ratchet::store
