// A child process of the demo: started with posix_spawn, sharing the demo's
// stdin, stdout and stderr.
//
// Ownership: the Child owns the process; destroying a running Child kills
// it with SIGKILL and reaps it. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "ratchet/status.hpp"

namespace ratchet::demo {

class Child {
 public:
  static Result<Child> spawn(const std::vector<std::string>& argv);
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // Sends SIGKILL and reaps the process.
  void kill_now();
  // Waits for the exit; returns the exit code (128 + signal if killed).
  int wait();
  // The exit code if the process has ended, without blocking.
  std::optional<int> poll();

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

// Runs a program to its end and returns its exit code.
Result<int> run_to_end(const std::vector<std::string>& argv);

}  // namespace ratchet::demo
