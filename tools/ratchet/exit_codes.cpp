#include "exit_codes.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace ratchet::cli {

ExitCode exit_code_for(const Error& error) noexcept {
  switch (error.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kConfig:
    case ErrorCode::kPlugin:  // at open: a configured plugin has no file
      return kUsage;
    default: return kFailure;
  }
}

int report(const Error& error, std::string_view hint) {
  std::string text = error.message();
  // Config errors arrive as one problem per line: keep them as a list.
  if (text.find('\n') != std::string::npos) {
    fmt::print(stderr, "ratchet: {} error:\n{}\n", to_string(error.code()), text);
  } else {
    fmt::print(stderr, "ratchet: {}\n", text);
  }
  if (!hint.empty()) fmt::print(stderr, "ratchet: {}\n", hint);
  return exit_code_for(error);
}

int usage_error(std::string_view message) {
  fmt::print(stderr, "ratchet: {}\n", message);
  return kUsage;
}

}  // namespace ratchet::cli
