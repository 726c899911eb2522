// Runs a program as a child process with its stdout and stderr captured,
// for tests of the ratchet command and the demo.
// Not thread-safe: one call at a time per object; free function is reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ratchet::cli_test {

struct Outcome {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};

// Runs argv[0] with `env` added to the environment (NAME=VALUE each), in
// `cwd` when not empty, and waits for it.
Outcome run_command(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {},
                    const std::vector<std::string>& env = {});

// build/<preset>/bin/<name>
std::string tool_path(const std::string& name);

}  // namespace ratchet::cli_test
