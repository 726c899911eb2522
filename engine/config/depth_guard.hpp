// Bounds on a config file's size and nesting, checked before and right
// after it is parsed.
//
// toml++ and the readers walk tables recursively. Arrays and inline tables
// are bounded by toml++ (256 levels), but a dotted key or a table header
// nests one table per dot with no bound: `a.a.a…` thirty thousand levels
// deep (a 60 KB file) overflowed the stack, and two hundred thousand
// overflowed it inside toml++ itself. No config needs more than a few
// levels, so a key of more than kMaxKeyDots dots is refused before parsing
// (a scan of the text, since the parse itself is what crashes), and any
// value more than kMaxConfigDepth tables or arrays deep after it (a walk
// with a stack of its own, not the call stack).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "config/diagnostic.hpp"

namespace ratchet::config::detail {

inline constexpr std::size_t kMaxConfigBytes = 4 * 1024 * 1024;
inline constexpr std::size_t kMaxKeyDots = 64;
inline constexpr std::size_t kMaxConfigDepth = 64;

// The first dotted key (bare or quoted parts, in a header or before `=`)
// with more than kMaxKeyDots dots, as an error at its line and column.
std::optional<Diagnostic> find_too_dotted_key(std::string_view text, const std::string& file);

// The first value nested more than kMaxConfigDepth tables or arrays deep.
std::optional<Diagnostic> find_too_deep_value(const toml::table& doc, const std::string& file);

}  // namespace ratchet::config::detail
