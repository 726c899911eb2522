// `ratchet` connecting to PostgreSQL while the machine's wall clock steps
// forward, as an NTP step at boot does while workers start. libpq times its
// connect_timeout with time(): after the step, the wait for the server's
// next reply is already over, and the connect ends with "timeout expired"
// though the server answers in milliseconds. The step is made by libfaketime
// in the `ratchet` process only, at the moment a relay in this test sees the
// connection's first bytes; the monotonic clock is not faked.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "command_runner.hpp"
#include "fresh_schema.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::cli_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Fd tcp_socket() { return Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)); }

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

// Relays loopback connections to the cluster's port, one at a time. On the
// first connection, `on_first_bytes` runs when the client's first bytes
// come, before they are passed on, and the server's replies are held 30 ms
// each, so that the client is waiting for them when the clock has stepped.
class Relay {
 public:
  Relay(int to_port, std::function<void()> on_first_bytes)
      : to_port_(to_port), on_first_bytes_(std::move(on_first_bytes)), listener_(tcp_socket()) {
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_.get(), 8) != 0 ||
        ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Relay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& t : relays_) t.join();
  }
  int port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (client.get() < 0) continue;
      const bool first = ++connections_ == 1;
      relays_.emplace_back([this, first, c = std::move(client)] {
        Fd server = tcp_socket();
        sockaddr_in to = loopback(to_port_);
        if (::connect(server.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) == 0)
          relay(c, server, first);
      });
    }
  }

  void relay(const Fd& client, const Fd& server, bool first) {
    bool stepped = false;
    char buf[16384];
    while (!stop_) {
      pollfd p[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n <= 0) return;  // either side closed: the connection is over
        if (first && i == 0 && !stepped) {
          stepped = true;
          on_first_bytes_();
        }
        if (first && i == 1) std::this_thread::sleep_for(30ms);
        const int to = i == 0 ? server.get() : client.get();
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w = ::write(to, buf + sent, static_cast<std::size_t>(n - sent));
          if (w <= 0) return;
          sent += w;
        }
      }
    }
  }

  const int to_port_;
  std::function<void()> on_first_bytes_;
  Fd listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<std::thread> relays_;  // one a connection, touched by thread_ and the destructor after it
  std::thread thread_;
};

TEST(RatchetOnPostgres, WallClockStepsForwardWhileConnecting_TheConnectionIsMadeAnyway) {
  const fs::path lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  ASSERT_TRUE(fs::exists(lib)) << lib << " missing (tools/deps.sh installs faketime)";
  const std::string url = testing::fresh_postgres_schema();  // sets PGPASSFILE for the child
  std::string why;
  const auto env = testing::load_pg_test_env(why);
  ASSERT_TRUE(env) << why;

  const fs::path dir = fs::temp_directory_path() / ("ratchet-pg-step-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path stamp = dir / "faketime";
  std::ofstream(stamp) << "+0\n";
  Relay relay(std::stoi(env->port), [&] { std::ofstream(stamp) << "+60s\n"; });
  ASSERT_GT(relay.port(), 0);

  // The cluster's URL, through the relay.
  std::string relayed = url;
  const std::string at = "127.0.0.1:" + env->port;
  ASSERT_NE(relayed.find(at), std::string::npos) << relayed;
  relayed.replace(relayed.find(at), at.size(), "127.0.0.1:" + std::to_string(relay.port()));
  // libpq finds the password by host and port: the relay's port too.
  const fs::path passfile = dir / "pgpass";
  std::ofstream(passfile) << "127.0.0.1:" << relay.port() << ":*:ratchet:" << env->password() << "\n";
  fs::permissions(passfile, fs::perms::owner_read | fs::perms::owner_write);
  const fs::path config = dir / "ratchet.toml";
  std::ofstream(config)
      << "[engine]\ndatabase = \"" << relayed << "\"\nplugins = \"" << RATCHET_PLUGIN_DIR
      << "\"\n[engine.postgres]\nconnect_timeout = \"10s\"\n"
      << "[plugin.imdb]\nbase_url = \"http://127.0.0.1:1\"\n"
      << "[job.rate]\nsteps = [{ name = \"imdb\", call = \"imdb.get_rating\", args = { name = "
         "\"x\" } }]\n";

  std::vector<std::string> faked = {"PGPASSFILE=" + passfile.string(),
                                    "LD_PRELOAD=" + lib.string(),
                                    "FAKETIME_TIMESTAMP_FILE=" + stamp.string(),
                                    "FAKETIME_NO_CACHE=1",
                                    "FAKETIME_CACHE_DURATION=0",
                                    "FAKETIME_DONT_FAKE_MONOTONIC=1",
                                    "FAKETIME_DONT_RESET=1"};
  // libfaketime is loaded ahead of the ASan runtime, which is then told not
  // to insist on coming first.
  const char* asan = std::getenv("ASAN_OPTIONS");
  faked.push_back(std::string("ASAN_OPTIONS=") + (asan != nullptr ? std::string(asan) + ":" : "") +
                  "verify_asan_link_order=0");
  const auto began = std::chrono::steady_clock::now();
  const Outcome o =
      run_command({tool_path("ratchet"), "jobs", "list", "-c", config.string()}, dir, faked, 60000);
  const auto took = std::chrono::steady_clock::now() - began;

  EXPECT_GE(relay.connections(), 2) << "the first connection was cut short by the step and made again";
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("as the wall clock stepped forward; connecting again")) << o.err;
  EXPECT_LT(took, 10s) << "made again at once, not after the connect timeout";
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ratchet::cli_test
