// How deep JSON text nests, read from the text itself, before it is parsed.
//
// nlohmann's parser keeps its own stack, but copying, masking, dumping or
// walking a parsed value recurses once per level: a reply of 30,000 nested
// arrays (60 KB) overflowed a worker's stack. Text from outside (a plugin's
// output, a row written by something else) is measured first and refused
// past a bound. Malformed text is measured as far as it goes; the parser
// refuses it afterwards.
// Thread-safety: a pure function.
#pragma once

#include <algorithm>
#include <string_view>

namespace ratchet::common {

inline int json_text_depth(std::string_view text) {
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
  return deepest;
}

}  // namespace ratchet::common
