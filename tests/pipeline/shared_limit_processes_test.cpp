// Several `ratchet run` processes on one database share database-scope
// limits: the mock portal server counts the arrivals of every portal in any
// sliding interval of one second, and none may ever hold more than the
// declared rate, whichever process sent them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fresh_schema.hpp"
#include "mock_portal/server.hpp"
#include "portal_run.hpp"
#include "ratchet/engine.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::testing {
namespace {

using namespace std::chrono_literals;

// Starts `ratchet ARGS...` with its output sent to `log`.
pid_t spawn_ratchet(const std::vector<std::string>& args, const std::filesystem::path& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::string exe = RATCHET_BINARY_DIR "/bin/ratchet";
    std::vector<std::string> copy = args;
    std::vector<char*> argv{exe.data()};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The child's exit code, or -1 (after SIGKILL) if it did not end within `limit`.
int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

const char* kRateMovie = R"(
[job.rate_movie]
attempts = 10
steps = [
  { name = "imdb", call = "imdb.get_rating", args = { name = "{{args.name}}" } },
  { name = "rt", call = "rotten_tomatoes.get_rating", args = { name = "{{args.name}}" } },
  { name = "sify", call = "sify.get_rating", args = { name = "{{args.name}}" } },
  { name = "netflix", call = "netflix.get_rating", args = { name = "{{args.name}}" } },
  { name = "amazon", call = "amazon_prime.get_rating", args = { name = "{{args.name}}" } },
]
)";

// The longest this process went unscheduled while it ran: a thread that
// asks to sleep 2 ms at a time measures how much longer it slept. The mock
// server answers in this process, so a stall here is a stall of the server,
// and every arrival it counts during one comes that much late.
class StallProbe {
 public:
  StallProbe()
      : thread_([this](std::stop_token stop) {
          while (!stop.stop_requested()) {
            const auto before = std::chrono::steady_clock::now();
            std::this_thread::sleep_for(2ms);
            const auto over = std::chrono::steady_clock::now() - before - 2ms;
            auto seen = longest_.load();
            while (over > seen && !longest_.compare_exchange_weak(seen, over)) {
            }
          }
        }) {}
  std::chrono::steady_clock::duration longest() const { return longest_.load(); }

 private:
  std::atomic<std::chrono::steady_clock::duration> longest_{std::chrono::steady_clock::duration::zero()};
  std::jthread thread_;
};

// The most arrivals any portal's server counted in one second, and the
// longest stall of the server's process meanwhile.
struct SharedRun {
  long long most_in_a_second = 0;
  std::chrono::steady_clock::duration longest_stall{};
};

// `database`: the [engine] database setting every process uses.
SharedRun four_processes_share_one_limit(const std::string& database, int rate) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // Instrumented engines are several times slower; half the jobs still keep
  // every portal at its limit for several seconds.
  constexpr int kJobs = 100;
#else
  constexpr int kJobs = 200;
#endif
  constexpr int kProcesses = 4;
  SharedRun out;
  constexpr int kWorkers = 16;
  // The server refuses nothing and counts every arrival in sliding 1 s windows.
  mock_portal::ServerOptions options;
  // A thread per connection, and one for every connection the engines may
  // hold open: each worker keeps one to each portal. With fewer, a request
  // on a new connection waits unread until a kept-alive one goes idle for a
  // second, and the first second's burst is counted in the next (16 threads:
  // 44 and 48 of 40 in two runs of three; 64: 41 to 47 now and then).
  options.threads = kProcesses * kWorkers * static_cast<int>(mock_portal::portal_names().size());
  for (const auto& p : mock_portal::portal_names()) {
    mock_portal::PortalOptions o;
    o.dialect = mock_portal::Dialect::kNone;
    o.window = 1000ms;
    options.portals[p] = o;
  }
  auto run = open_run("shared-db-limit", options, [&](const mock_portal::MockPortalServer& server) {
    std::string text = engine_section(kWorkers);
    const std::string file_setting = "database = \"jobs.db\"";
    text.replace(text.find(file_setting), file_setting.size(), "database = \"" + database + "\"");
    for (const auto& p : mock_portal::portal_names()) {
      text += "[plugin." + p + "]\nbase_url = \"" + server.portal_url(p) + "\"\n\n[[plugin." + p +
              ".limit]]\nrate = " + std::to_string(rate) + "\nper = \"1s\"\nscope = \"database\"\n\n";
    }
    return text + kRateMovie;
  });
  EXPECT_TRUE(run.engine);
  if (!run.engine) return out;
  enqueue_films(run, "rate_movie", film_names(kJobs));
  run.engine.reset();  // the jobs are in the database; the processes run them

  const auto config = run.dir.path() / "ratchet.toml";
  std::vector<pid_t> children;
  {
    StallProbe probe;
    for (int i = 0; i < kProcesses; ++i) {
      children.push_back(spawn_ratchet(
          {"run", "-c", config.string(), "--until-empty", "--progress", "never", "--log-level", "warn"},
          run.dir.path() / ("run" + std::to_string(i) + ".log")));
    }
    for (pid_t pid : children) EXPECT_EQ(wait_exit(pid, 150s), 0);
    out.longest_stall = probe.longest();
  }

  auto engine = Engine::open_config(config);
  EXPECT_TRUE(engine.has_value()) << engine.error().to_string();
  if (!engine) return out;
  auto counts = (*engine)->counts();
  EXPECT_TRUE(counts.has_value());
  if (!counts) return out;
  for (auto [state, n] : *counts) {
    if (state != JobState::kCompleted) {
      EXPECT_EQ(n, 0) << to_string(state);
    }
  }
  const auto stats = run.server->stats();
  for (const auto& p : mock_portal::portal_names()) {
    const auto& s = stats.portals.at(p);
    std::printf("%s: %lld requests, at most %lld in any %lld ms\n", p.c_str(),
                static_cast<long long>(s.requests), static_cast<long long>(s.max_in_window),
                static_cast<long long>(s.window.count()));
    EXPECT_GE(s.requests, kJobs) << p;
    out.most_in_a_second = std::max<long long>(out.most_in_a_second, s.max_in_window);
  }
  std::printf("the server's process stalled for at most %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(out.longest_stall).count()));
  return out;
}

// `fresh_database` gives the [engine] database setting of one run.
void never_over_the_limit_at_the_server(const std::function<std::string()>& fresh_database) {
  constexpr int kRate = 40;
  // The limits promise the count at the server for arrivals up to 50 ms
  // behind their starts (docs/semantics.md point 7). A run in which the
  // server's own process stalled for longer, on a loaded machine, delayed
  // arrivals past that and proves nothing either way: it is run again, at
  // most twice. A count over the limit without such a stall fails at once.
  constexpr auto kPromisedLag = 50ms;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // Instrumented, the four engines and the server share two cores at a
  // fraction of their speed: a request can reach the server's handler more
  // than the promised lag after it left without the server's process
  // stalling (41 of 40, once, in a CI run under ThreadSanitizer). A count
  // over the limit is run again there too; three in a row still fail.
  constexpr bool kLagNotMeasured = true;
#else
  constexpr bool kLagNotMeasured = false;
#endif
  for (int run = 1; run <= 3; ++run) {
    const SharedRun r = four_processes_share_one_limit(fresh_database(), kRate);
    if (::testing::Test::HasFailure()) return;
    if (r.most_in_a_second <= kRate) return;
    if ((r.longest_stall <= kPromisedLag && !kLagNotMeasured) || run == 3) {
      ADD_FAILURE() << r.most_in_a_second << " arrivals in one second at a limit of " << kRate
                    << ", the server's process stalled for at most "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(r.longest_stall).count()
                    << " ms";
      return;
    }
    std::printf("run %d: %lld of %d while the server stalled for %lld ms: running again\n", run,
                r.most_in_a_second, kRate,
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(r.longest_stall).count()));
  }
}

TEST(SharedDatabaseLimit, FourProcessesOnOneDatabase_NeverExceedTheLimitInAnySecondAtTheServer) {
  never_over_the_limit_at_the_server([] { return std::string("jobs.db"); });
}

TEST(SharedDatabaseLimit, FourProcessesOnOnePostgresDatabase_NeverExceedTheLimitInAnySecondAtTheServer) {
  never_over_the_limit_at_the_server([] { return fresh_postgres_schema(); });
}

}  // namespace
}  // namespace ratchet::testing
