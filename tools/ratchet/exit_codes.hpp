// The ratchet command's exit codes, and how an engine Error maps onto them.
//   0  ok
//   1  a job or runtime failure (a job ended dead, the database is locked, ...)
//   2  a usage or config error (bad flag, missing or invalid config file,
//      unknown job type, bad job argument, unknown job id)
// Stateless; safe from any thread.
#pragma once

#include <string_view>

#include "ratchet/status.hpp"

namespace ratchet::cli {

enum ExitCode : int { kOk = 0, kFailure = 1, kUsage = 2 };

// The text `ratchet --help` prints about exit codes.
inline constexpr std::string_view kExitCodeHelp =
    "Exit codes: 0 ok; 1 job or runtime failure; 2 usage or config error "
    "(bad flag, missing or invalid config, unknown job type, bad argument, unknown job id).";

// kUsage for errors the user fixes on the command line or in the config
// file, kFailure for everything else.
ExitCode exit_code_for(const Error& error) noexcept;

// Prints "ratchet: <message>" (and the hint, if any) on stderr and returns
// the exit code for the error.
int report(const Error& error, std::string_view hint = {});

// Prints "ratchet: <message>" on stderr and returns kUsage.
int usage_error(std::string_view message);

}  // namespace ratchet::cli
