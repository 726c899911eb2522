#include "harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "limit/make_limiter.hpp"
#include "ratchet/engine.hpp"
#include "ratchet_test_paths.hpp"

extern char** environ;

namespace ratchet::faults {

std::string ratchet_binary() { return std::string(RATCHET_BINARY_DIR) + "/bin/ratchet"; }

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  fs::rename(tmp, path);
}

namespace {
sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}
}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

bool wait_for_port(int port, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(port);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

Child::~Child() {
  if (!reaped_) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void Child::signal(int sig) const {
  if (!reaped_) ::kill(pid_, sig);
}

namespace {

// A thread's state letter from /proc/<pid>/task/<tid>/stat: the field after
// the parenthesised name, which may itself hold ')' and spaces.
char task_state(const fs::path& stat) {
  std::ifstream in(stat);
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

bool all_threads_stopped(pid_t pid) {
  std::error_code ec;
  fs::directory_iterator tasks(fs::path("/proc") / std::to_string(pid) / "task", ec);
  if (ec) return false;
  bool any = false;
  for (const auto& task : tasks) {
    const char state = task_state(task.path() / "stat");
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return any;
}

}  // namespace

bool Child::stop(int timeout_ms) const {
  if (reaped_) return false;
  ::kill(pid_, SIGSTOP);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!all_threads_stopped(pid_)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool Child::running() {
  if (reaped_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

int Child::wait(int timeout_ms) {
  if (reaped_) return status_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (true) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      reaped_ = true;
      status_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reaped_ = true;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return status_;
}

std::string Child::err() const {
  std::ifstream in(err_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::unique_ptr<Child> spawn(const std::vector<std::string>& argv, const fs::path& err_file,
                             const SpawnOptions& options) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& e : options.env) {
    // Replaces a variable already set: the first of two would win.
    const std::string name = e.substr(0, e.find('=') + 1);
    std::erase_if(env, [&](const std::string& have) { return have.starts_with(name); });
    env.push_back(e);
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  const std::string err = err_file.string();
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    if (options.fsize_limit >= 0) {
      // SIGXFSZ left at its default: `ratchet` itself must turn a write past
      // the limit into EFBIG, as it does for a user's `ulimit -f`.
      rlimit r{static_cast<rlim_t>(options.fsize_limit), static_cast<rlim_t>(options.fsize_limit)};
      ::setrlimit(RLIMIT_FSIZE, &r);
    }
    ::execve(argp[0], argp.data(), envp.data());
    ::_exit(127);
  }
  return std::make_unique<Child>(pid, err_file);
}

Workbench::Workbench(std::map<std::string, mock_portal::PortalOptions> portals) {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("ratchet-fault-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_ / "plugins");
  for (const char* p : {"imdb.so", "rotten_tomatoes.so"}) {
    fs::copy_file(fs::path(RATCHET_PLUGIN_DIR) / p, dir_ / "plugins" / p);
  }
  fs::copy_file(fs::path(RATCHET_FAULT_FIXTURE_DIR) / "crasher.so", dir_ / "plugins" / "crasher.so");
  mock_portal::ServerOptions o;
  o.portals = std::move(portals);
  o.threads = 64;  // hung answers must not starve the others
  auto s = mock_portal::MockPortalServer::start(o);
  if (!s) throw std::runtime_error(s.error().to_string());
  server_ = std::move(*s);
}

Workbench::~Workbench() {
  if (server_) server_->stop();
  std::error_code ec;
  if (std::getenv("RATCHET_FAULT_KEEP") == nullptr) fs::remove_all(dir_, ec);
}

void Workbench::write_config(const std::string& engine, const std::string& plugin_extra,
                             const std::string& jobs, const std::string& base_url,
                             const std::map<std::string, std::string>& plugin_keys) {
  std::ostringstream out;
  out << "[engine]\ndatabase = \"" << database_ << "\"\nplugins = \"plugins\"\nplugin_rescan = \"0s\"\n"
      << engine << "\n";
  for (const char* p : {"imdb", "rotten_tomatoes", "crasher"}) {
    const std::string portal = std::string(p) == "crasher" ? "imdb" : p;
    out << "[plugin." << p << "]\nbase_url = \""
        << (base_url.empty() ? server_->portal_url(portal) : base_url + "/" + portal) << "\"\n";
    if (auto it = plugin_keys.find(p); it != plugin_keys.end()) out << it->second << "\n";
  }
  out << plugin_extra << "\n" << jobs << "\n";
  write_file(config(), out.str());
}

void Workbench::enqueue(const std::string& type, const std::vector<std::string>& names) {
  auto engine = Engine::open_config(config());
  if (!engine) throw std::runtime_error(engine.error().to_string());
  std::vector<nlohmann::json> args;
  for (const auto& n : names) args.push_back({{"name", n}});
  auto ids = (*engine)->enqueue_many(type, args);
  if (!ids) throw std::runtime_error(ids.error().to_string());
}

std::unique_ptr<Child> Workbench::run(std::vector<std::string> extra, const SpawnOptions& options) {
  // Debug logs carry each request's send time on the limiters' clock
  // (sent_times()), what the limits were kept against.
  std::vector<std::string> argv = {ratchet_binary(),  "--log-level", "debug", "run", "-c",
                                   config().string(), "--progress",  "never"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return spawn(argv, dir_ / ("run-" + std::to_string(runs_++) + ".log"), options);
}

std::vector<std::int64_t> Workbench::sent_times(const std::string& plugin) const {
  const std::string needle = "plugin " + plugin + ": request leaves at ";
  std::vector<std::int64_t> out;
  for (int i = 0; i < runs_; ++i) {
    std::ifstream in(dir_ / ("run-" + std::to_string(i) + ".log"));
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find(needle);
      if (at == std::string::npos) continue;
      out.push_back(std::strtoll(line.c_str() + at + needle.size(), nullptr, 10));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, int> Workbench::states() const {
  std::map<std::string, int> out;
  SQLite::Database conn(db().string(), SQLite::OPEN_READONLY, 10000);
  SQLite::Statement q(conn, "SELECT state, COUNT(*) FROM jobs GROUP BY state");
  while (q.executeStep()) out[q.getColumn(0).getString()] = q.getColumn(1).getInt();
  return out;
}

int Workbench::unfinished() const {
  SQLite::Database conn(db().string(), SQLite::OPEN_READONLY, 10000);
  return conn.execAndGet("SELECT COUNT(*) FROM jobs WHERE state NOT IN ('completed', 'dead', 'cancelled')")
      .getInt();
}

std::int64_t Workbench::scalar(const std::string& sql) const {
  SQLite::Database conn(db().string(), SQLite::OPEN_READONLY, 10000);
  return conn.execAndGet(sql).getInt64();
}

std::int64_t Workbench::timeline_us() const {
  SQLite::Database conn(db().string(), SQLite::OPEN_READONLY, 10000);
  SQLite::Statement base(conn, "SELECT base_ns FROM machine_clock");
  if (!base.executeStep()) return wall_us();
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000 + base.getColumn(0).getInt64() / 1000;
}

Invariants Workbench::check(const std::map<std::string, std::string>& steps) const {
  Invariants inv;
  SQLite::Database conn(db().string(), SQLite::OPEN_READONLY, 10000);
  inv.integrity = conn.execAndGet("PRAGMA integrity_check").getString();
  inv.jobs = conn.execAndGet("SELECT COUNT(*) FROM jobs").getInt();
  inv.states = states();
  CommittedSteps committed;
  SQLite::Statement q(conn,
                      "SELECT json_extract(j.args, '$.name'), s.name, s.finished_us FROM steps s "
                      "JOIN jobs j ON j.id = s.job_id WHERE s.state = 'completed'");
  while (q.executeStep()) {
    auto it = steps.find(q.getColumn(1).getString());
    if (it == steps.end()) continue;
    committed[{it->second, q.getColumn(0).getString()}] = q.getColumn(2).getInt64();
  }
  std::optional<std::int64_t> base_us;
  SQLite::Statement base(conn, "SELECT base_ns FROM machine_clock");
  if (base.executeStep()) base_us = base.getColumn(0).getInt64() / 1000;
  check_requests(committed, server_->requests(), steps, inv, base_us);
  return inv;
}

void check_requests(const CommittedSteps& committed, const std::vector<mock_portal::RequestRecord>& requests,
                    const std::map<std::string, std::string>& steps, Invariants& inv,
                    std::optional<std::int64_t> timeline_base_us) {
  inv.committed_steps = static_cast<int>(committed.size());
  std::map<std::pair<std::string, std::string>, std::vector<mock_portal::RequestRecord>> by_step;
  std::size_t calls = 0;
  for (const auto& r : requests) {
    bool ours = false;
    for (const auto& [_, portal] : steps) ours = ours || portal == r.portal;
    if (!ours) continue;
    ++calls;
    by_step[{r.portal, r.movie}].push_back(r);
  }
  for (const auto& [key, reqs] : by_step) {
    auto c = committed.find(key);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const std::int64_t arrived =
          timeline_base_us ? reqs[i].arrived_boot_us + *timeline_base_us : reqs[i].arrived_us;
      if (c != committed.end() && arrived > c->second) {
        ++inv.reruns_after_commit;
        if (inv.first_problem.empty())
          inv.first_problem = key.first + " " + key.second + " requested after its step was committed";
      }
      if (i > 0 && reqs[i - 1].answered_us != 0 && reqs[i].arrived_us < reqs[i - 1].answered_us) {
        ++inv.overlapping;
      }
    }
  }
  inv.calls_per_step =
      committed.empty() ? 0 : static_cast<double>(calls) / static_cast<double>(committed.size());
}

// Most of the sorted times `t` in any half-open interval of `window_us`.
std::int64_t most_in_window(const std::vector<std::int64_t>& t, std::int64_t window_us) {
  std::int64_t most = 0;
  std::size_t j = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    while (j < t.size() && t[j] - t[i] < window_us) ++j;
    most = std::max<std::int64_t>(most, static_cast<std::int64_t>(j - i));
  }
  return most;
}

// The declared limit, counted twice: at the server (its window is the
// limit's `per`), and at ratchet's own send times (the runs' debug logs, on
// the limiters' clock), which must keep it exactly in every build.
//
// In sanitizer builds the server that counts runs inside the instrumented
// test process and stamps requests on new connections late: in the SIGHUP
// scenario under TSan with the other core busy, four requests sent at 55 to
// 69 ms were stamped at 394 ms, so the server counted 11 in one second where
// ratchet had sent 10 (and 15 was seen in CI). There the server's count only
// has to stay under twice the limit (a limit not kept at all shows there);
// the default build holds it exactly at the server too.
bool server_count_tolerated(std::int64_t max, int declared) {
  return kSanitized && max > declared && max < 2 * std::int64_t{declared};
}

std::int64_t least_lag_spread_us(std::vector<std::int64_t> sent, std::vector<std::int64_t> arrived) {
  if (arrived.empty() || sent.size() < arrived.size()) return 0;
  std::ranges::sort(sent);
  std::ranges::sort(arrived);
  // The k-th arrival and every one after it came from distinct sends, one
  // of them at most the (k + extra)-th: that one took at least arrived[k] -
  // sent[k + extra]. Likewise one of the first k took at most arrived[k] -
  // sent[k].
  const std::size_t extra = sent.size() - arrived.size();
  std::int64_t slowest = std::numeric_limits<std::int64_t>::min();
  std::int64_t fastest = std::numeric_limits<std::int64_t>::max();
  for (std::size_t k = 0; k < arrived.size(); ++k) {
    slowest = std::max(slowest, arrived[k] - sent[k + extra]);
    fastest = std::min(fastest, arrived[k] - sent[k]);
  }
  return std::max<std::int64_t>(0, slowest - fastest);
}

void expect_limit_at_server(Workbench& w, const std::string& test, const std::string& portal, int declared) {
  const auto stats = w.server().stats();
  const auto max = stats.portals.at(portal).max_in_window;
  const auto window_ms = static_cast<std::int64_t>(stats.portals.at(portal).window.count());
  std::printf("[fault] %s: %s max %lld requests in any %lld ms at the server (declared %d)\n", test.c_str(),
              portal.c_str(), static_cast<long long>(max), static_cast<long long>(window_ms), declared);
  if (server_count_tolerated(max, declared)) {
    std::printf(
        "[fault] %s: under a sanitizer, %s over its limit at the server is not failed (see expect_limit)\n",
        test.c_str(), portal.c_str());
    return;
  }
  if (max > declared) {
    // The limits absorb a lag of up to their margin between a send and its
    // arrival (docs/semantics.md, rule 7). A machine that stalled the run or
    // this server longer (a disk busy with writeback stalls every process
    // that touches memory) is shown by the times themselves.
    std::vector<std::int64_t> arrived;
    for (const auto& r : w.server().requests()) {
      if (r.portal == portal) arrived.push_back(r.arrived_boot_us);
    }
    const std::int64_t spread = least_lag_spread_us(w.sent_times(portal), std::move(arrived));
    const std::int64_t margin = limit::jitter_margin_us(window_ms * 1000);
    if (spread > margin) {
      std::printf(
          "[fault] %s: one %s request took at least %lld ms longer than another from its send to the server, "
          "past the %lld ms the limits absorb: the server's count is not failed\n",
          test.c_str(), portal.c_str(), static_cast<long long>(spread / 1000),
          static_cast<long long>(margin / 1000));
      return;
    }
  }
  EXPECT_LE(max, declared) << portal << " limit at the server";
}

void expect_limit(Workbench& w, const std::string& test, const std::string& portal, int declared) {
  const auto window_ms = static_cast<std::int64_t>(w.server().stats().portals.at(portal).window.count());
  const std::vector<std::int64_t> sent = w.sent_times(portal);
  const std::int64_t own = most_in_window(sent, window_ms * 1000);
  std::printf("[fault] %s: %s max %lld requests in any %lld ms as sent by ratchet (%zu sent; declared %d)\n",
              test.c_str(), portal.c_str(), static_cast<long long>(own), static_cast<long long>(window_ms),
              sent.size(), declared);
  EXPECT_FALSE(sent.empty()) << "the runs' debug logs name no request of " << portal;
  EXPECT_LE(own, declared) << portal << " limit at ratchet's send times";
  expect_limit_at_server(w, test, portal, declared);
}

void print_invariants(const std::string& test, const Invariants& inv) {
  std::string states;
  for (const auto& [s, n] : inv.states) states += " " + s + "=" + std::to_string(n);
  std::printf(
      "[fault] %s: jobs %d:%s; committed steps %d, calls per step %.3f, requests after commit %d, "
      "overlapping requests %d, integrity %s\n",
      test.c_str(), inv.jobs, states.c_str(), inv.committed_steps, inv.calls_per_step,
      inv.reruns_after_commit, inv.overlapping, inv.integrity.c_str());
  std::fflush(stdout);
}

}  // namespace ratchet::faults
