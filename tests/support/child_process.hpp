// Child processes for the multi-process tests: a program started with its
// arguments, and its exit waited for within a bound (SIGKILL past it).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace ratchet::testing {

inline pid_t spawn_program(const std::string& program, const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string exe = program;
    std::vector<std::string> copy = args;
    std::vector<char*> argv{exe.data()};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit code, 128 for a signal, or -1 (after SIGKILL) past `limit`.
inline int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace ratchet::testing
