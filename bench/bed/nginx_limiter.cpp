#include "nginx_limiter.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace ratchet::bench {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string conf(const fs::path& prefix, int port, int upstream_port, const NginxOptions& o) {
  const std::string p = prefix.string();
  std::ostringstream c;
  c << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << p << "/nginx.pid;\n"
    << "error_log " << p << "/error.log warn;\nevents { worker_connections 1024; }\n"
    << "http {\n"
    << "  log_format timed '$msec $request_time $status';\n"
    << "  access_log " << p << "/access.log timed;\n";
  for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
    c << "  " << temp << "_temp_path " << p << "/" << temp << ";\n";
  }
  c << "  limit_req_zone $server_name zone=portal:1m rate=" << o.rate << "r/s;\n"
    << "  limit_req_status 429;\n"
    << "  server {\n    listen 127.0.0.1:" << port << ";\n    server_name portal;\n"
    << "    location / {\n      limit_req zone=portal burst=" << o.burst << " nodelay;\n";
  if (o.retry_after) c << "      error_page 429 = @throttled;\n";
  c << "      proxy_pass http://127.0.0.1:" << upstream_port << ";\n"
    << "      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }\n";
  if (o.retry_after) {
    c << "    location @throttled {\n      add_header Retry-After 1 always;\n"
      << "      return 429 '{\"error\":\"rate limited\"}';\n    }\n";
  }
  c << "  }\n}\n";
  return c.str();
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

bool accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::chrono::system_clock::time_point at_seconds(double s) {
  return std::chrono::system_clock::time_point(
      std::chrono::microseconds(static_cast<std::int64_t>(std::llround(s * 1e6))));
}

}  // namespace

bool NginxLimiter::installed() { return ::access(kProgram, X_OK) == 0; }

NginxLimiter::NginxLimiter(fs::path prefix, int port, pid_t pid)
    : prefix_(std::move(prefix)), port_(port), pid_(pid) {}

NginxLimiter::~NginxLimiter() { stop(); }

Result<std::unique_ptr<NginxLimiter>> NginxLimiter::start(const fs::path& prefix, int upstream_port,
                                                          const NginxOptions& options) {
  if (!installed())
    return fail(Error::unavailable(std::string(kProgram) + " is missing (tools/deps.sh installs nginx)"));
  std::error_code ec;
  fs::create_directories(prefix, ec);
  const int port = free_port();
  if (port < 0) return fail(Error::unavailable("no free loopback port for nginx"));
  const fs::path conf_path = prefix / "nginx.conf";
  std::ofstream(conf_path) << conf(prefix, port, upstream_port, options);
  std::vector<std::string> args = {
      kProgram, "-p", prefix.string() + "/", "-e", (prefix / "error.log").string(), "-c", conf_path.string()};
  const pid_t pid = ::fork();
  if (pid < 0) return fail(Error::unavailable("fork for nginx failed"));
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(kProgram, argv.data());
    ::_exit(127);
  }
  std::unique_ptr<NginxLimiter> nginx(new NginxLimiter(prefix, port, pid));
  for (int i = 0; i < 500; ++i) {
    if (accepts(port)) return nginx;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      nginx->pid_ = -1;
      return fail(Error::unavailable("nginx exited at start; see " + (prefix / "error.log").string()));
    }
    std::this_thread::sleep_for(10ms);
  }
  return fail(Error::unavailable("nginx did not listen within 5 s; see " + (prefix / "error.log").string()));
}

std::string NginxLimiter::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void NginxLimiter::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGQUIT);  // graceful: the access log is complete
  for (int i = 0; i < 1000; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

Result<NginxLog> NginxLimiter::finish() {
  stop();
  std::ifstream in(prefix_ / "access.log");
  if (!in) return fail(Error::unavailable("nginx wrote no access log in " + prefix_.string()));
  NginxLog log;
  double msec = 0, request_time = 0;
  int status = 0;
  bool any = false;
  while (in >> msec >> request_time >> status) {
    ++log.statuses[status];
    const auto arrival = at_seconds(msec - request_time), answer = at_seconds(msec);
    if (!any || arrival < log.first_arrival) log.first_arrival = arrival;
    if (!any || answer > log.last_answer) log.last_answer = answer;
    any = true;
  }
  return log;
}

}  // namespace ratchet::bench
