// Runs a program as a child process with its stdout and stderr captured,
// for tests of the ratchet command and the demo.
// Not thread-safe: one call at a time per object; free function is reentrant.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ratchet::cli_test {

struct Outcome {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};

// Runs argv[0] with `env` added to the environment (NAME=VALUE each,
// replacing an inherited NAME), in `cwd` when not empty, and waits for it
// (SIGKILL after `timeout_ms`).
Outcome run_command(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {},
                    const std::vector<std::string>& env = {}, int timeout_ms = 60000);

// A command started without waiting for it, for signals and servers.
class Started {
 public:
  Started(int pid, std::string out_file, std::string err_file)
      : pid_(pid), out_file_(std::move(out_file)), err_file_(std::move(err_file)) {}
  ~Started();
  Started(const Started&) = delete;
  Started& operator=(const Started&) = delete;
  int pid() const { return pid_; }
  // What it wrote to stderr so far.
  std::string err_so_far() const;
  // What it wrote to stdout so far.
  std::string out_so_far() const;
  // Waits for its end (SIGKILL after `timeout_ms`).
  Outcome wait(int timeout_ms = 60000);

 private:
  int pid_;
  std::string out_file_, err_file_;
};

std::unique_ptr<Started> start_command(const std::vector<std::string>& argv);

// build/<preset>/bin/<name>
std::string tool_path(const std::string& name);

// A free loopback port: bound by the test process, then freed.
int free_port();

// Sends `request` to 127.0.0.1:port on a new connection; what comes back
// until the server closes it (at most 3s).
std::string raw_exchange(int port, const std::string& request);

}  // namespace ratchet::cli_test
