// Reading back JSON text a store holds: text nested deeper than ratchet
// itself ever writes (a row written by something else) is refused before it
// is parsed, since copying, dumping or destroying such a value would recurse
// once per level, past the stack. Every backend reads stored JSON through it.
#pragma once

#include <string>
#include <string_view>

namespace ratchet::store {

// Why the stored JSON text is not loaded; empty when it is fine to parse.
std::string stored_json_problem(std::string_view text);

}  // namespace ratchet::store
