// Checks a job's arguments against its type's declared arguments before
// anything is written: the arguments must be a JSON object, every required
// field present, every field of its declared type, and no undeclared field.
// An empty declaration accepts any object.
//
// Whatever the declaration, arguments are bounded: at most kMaxArgsDepth
// levels of nesting (code that walks JSON recursively, such as dump() and the
// template renderer, would overflow the stack on 60,000 levels), at most
// kMaxArgsBytes as JSON text, and every string and key valid UTF-8 (JSON text
// cannot carry anything else). A refusal names the job type and the field.
#pragma once

#include <cstddef>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/spec.hpp"
#include "ratchet/status.hpp"

namespace ratchet::runtime {

inline constexpr int kMaxArgsDepth = 64;
inline constexpr std::size_t kMaxArgsBytes = 1 << 20;  // 1 MiB

// Only the bounds above, walking the value without recursion: used on
// arguments read back from the database (written by an older version) before
// anything recursive touches them.
[[nodiscard]] Status check_args_bounds(const std::string& job_type, const nlohmann::json& args);

[[nodiscard]] Status check_args(const std::string& job_type, const std::vector<config::ArgSpec>& declared,
                                const nlohmann::json& args);

}  // namespace ratchet::runtime
