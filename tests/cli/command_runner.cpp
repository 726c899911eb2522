#include "command_runner.hpp"

#include "ratchet_test_paths.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

extern char** environ;

namespace ratchet::cli_test {

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string tool_path(const std::string& name) { return std::string(RATCHET_BINARY_DIR) + "/bin/" + name; }

namespace {

int spawn(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
          const std::vector<std::string>& env, std::string& out_file, std::string& err_file) {
  static int counter = 0;
  auto base = std::filesystem::temp_directory_path() /
              ("ratchet-cli-out-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  out_file = base.string() + ".out";
  err_file = base.string() + ".err";

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s(*e);
    if (s.rfind("RATCHET_CONFIG=", 0) == 0) continue;  // tests say which config they mean
    // A variable the caller sets replaces the inherited one (getenv would
    // find whichever comes first).
    const std::string name = s.substr(0, s.find('=') + 1);
    if (std::any_of(env.begin(), env.end(), [&](const std::string& set) { return set.rfind(name, 0) == 0; }))
      continue;
    env_strings.push_back(std::move(s));
  }
  for (const auto& e : env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

}  // namespace

Outcome run_command(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                    const std::vector<std::string>& env, int timeout_ms) {
  std::string out_file, err_file;
  int pid = spawn(argv, cwd, env, out_file, err_file);
  if (pid < 0) return Outcome{-1, "", "cannot start " + argv[0]};
  return Started(pid, out_file, err_file).wait(timeout_ms);
}

std::unique_ptr<Started> start_command(const std::vector<std::string>& argv) {
  std::string out_file, err_file;
  int pid = spawn(argv, {}, {}, out_file, err_file);
  if (pid < 0) return nullptr;
  return std::make_unique<Started>(pid, out_file, err_file);
}

Started::~Started() {
  if (pid_ > 0) wait(0);
}

std::string Started::err_so_far() const { return slurp(err_file_); }

std::string Started::out_so_far() const { return slurp(out_file_); }

Outcome Started::wait(int timeout_ms) {
  Outcome o;
  int status = 0;
  for (int waited = 0;; waited += 10) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) break;
    if (waited >= timeout_ms) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    ::usleep(10000);
  }
  pid_ = -1;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = slurp(out_file_);
  o.err = slurp(err_file_);
  std::filesystem::remove(out_file_);
  std::filesystem::remove(err_file_);
  return o;
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string raw_exchange(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return got;
}

}  // namespace ratchet::cli_test
