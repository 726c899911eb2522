#include "child.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace ratchet::demo {

namespace {

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Result<Child> Child::spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) return fail(Error::io("cannot start " + argv[0] + ": " + std::strerror(rc)));
  return Child(pid);
}

Child::Child(Child&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }

Child::~Child() {
  if (pid_ > 0) kill_now();
}

void Child::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  wait();
}

int Child::wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return exit_code(status);
}

std::optional<int> Child::poll() {
  if (pid_ <= 0) return -1;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return std::nullopt;
  pid_ = -1;
  return exit_code(status);
}

Result<int> run_to_end(const std::vector<std::string>& argv) {
  auto child = Child::spawn(argv);
  if (!child) return fail(child.error());
  return child->wait();
}

}  // namespace ratchet::demo
