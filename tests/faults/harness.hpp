// What every fault test needs: a temp folder with a config pointed at the
// mock portals, `ratchet run` started as a child (with signals, an RLIMIT or
// an environment of the test's choosing), and the checks that must hold
// after any fault: no job lost, no committed step run again, no job run in
// two places at once, and a database that passes integrity_check.
//
// Not thread-safe: one test thread drives it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Exception.h>
#include <sqlite3.h>

#include "mock_portal/server.hpp"

namespace ratchet::faults {

// Runs a read of the database the engines under test write, again while it
// fails with SQLITE_PROTOCOL: a reader that meets a new process's recovery
// of the WAL index after a kill can lose that lock race for seconds, and
// SQLite's answer is to try again ("locking protocol", seen once in a
// fresh-clone CI run during the fifty-kill test).
template <typename Read>
auto reading_past_lock_races(Read&& read) -> decltype(read()) {
  for (int attempt = 1;; ++attempt) {
    try {
      return read();
    } catch (const SQLite::Exception& e) {
      if (e.getErrorCode() != SQLITE_PROTOCOL || attempt == 100) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// Sanitizer builds (RATCHET_FAULT_SANITIZED) run the same scenarios with
// fewer jobs and longer bounds, and hold the server's count to less
// (expect_limit).
#ifdef RATCHET_FAULT_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

namespace fs = std::filesystem;

struct SpawnOptions {
  std::vector<std::string> env;  // NAME=VALUE, added or replacing the test's own
  long fsize_limit = -1;         // RLIMIT_FSIZE in bytes (SIGXFSZ ignored, so writes fail with EFBIG)
};

// A child process; killed with SIGKILL and reaped when dropped.
class Child {
 public:
  Child(pid_t pid, fs::path err) : pid_(pid), err_(std::move(err)) {}
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // SIGSTOP, then waits until every thread of the child is stopped: kill()
  // returns before the stop lands, and a thread still running may yet take
  // a lock. False when that takes longer than `timeout_ms`.
  bool stop(int timeout_ms = 5000) const;
  // Exit code, 128 + signal when killed by one, -1 when still running after
  // `timeout_ms` (then it is killed). Once reaped, the same answer again.
  int wait(int timeout_ms);
  bool running();
  std::string err() const;

 private:
  pid_t pid_;
  fs::path err_;
  bool reaped_ = false;
  int status_ = -1;
};

std::unique_ptr<Child> spawn(const std::vector<std::string>& argv, const fs::path& err_file,
                             const SpawnOptions& options = {});

// (portal, movie) -> when its step was committed (finished_us: µs on
// ratchet's timeline, CLOCK_BOOTTIME plus the database's base).
using CommittedSteps = std::map<std::pair<std::string, std::string>, std::int64_t>;

struct Invariants {
  int jobs = 0;
  std::map<std::string, int> states;
  int committed_steps = 0;
  int reruns_after_commit = 0;  // requests that reached a portal after the step was committed
  int overlapping = 0;          // a step's requests in flight at once (two runners)
  double calls_per_step = 0;
  std::string integrity;
  std::string first_problem;
};

class Workbench {
 public:
  // Starts the mock portals with `portals` and lays out dir/plugins with the
  // portal plugins (and the crasher fixture).
  explicit Workbench(std::map<std::string, mock_portal::PortalOptions> portals = {});
  ~Workbench();

  // Writes dir/ratchet.toml (through a rename): [engine] with `engine` lines
  // added, the imdb, rotten_tomatoes and crasher plugins (the crasher calls
  // the imdb portal), each with its `plugin_keys` lines, then `plugin_extra`
  // (limit, retry, ... tables) and `jobs` (TOML job tables). `base_url`
  // replaces the mock portal's (e.g. nginx in front of it).
  // The [engine] database every run uses: "jobs.db" (SQLite, in dir())
  // unless set before write_config(), e.g. to a PostgreSQL URL. The readers
  // below (states() to check()) read the SQLite file only; a test on
  // another database reads it itself and checks the portals' request log
  // against its committed steps with check_requests().
  void set_database(std::string database) { database_ = std::move(database); }

  void write_config(const std::string& engine, const std::string& plugin_extra, const std::string& jobs,
                    const std::string& base_url = "",
                    const std::map<std::string, std::string>& plugin_keys = {});
  // Enqueues one job of `type` per name (args {"name": NAME}).
  void enqueue(const std::string& type, const std::vector<std::string>& names);
  std::unique_ptr<Child> run(std::vector<std::string> extra = {}, const SpawnOptions& options = {});
  // The times (µs on the limiters' clock) at which every run so far sent a
  // request of `plugin`, sorted, from the runs' debug logs.
  std::vector<std::int64_t> sent_times(const std::string& plugin) const;
  // Counts by state straight from the database (read-only connection).
  std::map<std::string, int> states() const;
  int unfinished() const;
  // One number from the database (read-only connection), e.g. a COUNT(*).
  std::int64_t scalar(const std::string& sql) const;
  // Now on ratchet's timeline, which the times in the database are on
  // (CLOCK_BOOTTIME plus the database's base, ratchet/clock.hpp): what is
  // compared with them must not follow a step of the wall clock. The wall
  // clock before any engine laid the timeline down.
  std::int64_t timeline_us() const;
  // The checks after a fault; steps map step name -> portal name.
  Invariants check(const std::map<std::string, std::string>& steps) const;

  mock_portal::MockPortalServer& server() { return *server_; }
  const fs::path& dir() const { return dir_; }
  fs::path db() const { return dir_ / "jobs.db"; }
  fs::path config() const { return dir_ / "ratchet.toml"; }

 private:
  fs::path dir_;
  std::string database_ = "jobs.db";
  std::unique_ptr<mock_portal::MockPortalServer> server_;
  int runs_ = 0;
};

// Sets inv.committed_steps, reruns_after_commit, overlapping,
// calls_per_step and first_problem from the server's request log: a request
// to a step's portal for its movie that arrived after the step was
// committed ran a committed step again. `steps` maps step name -> portal.
// `timeline_base_us`: the database's base of ratchet's timeline
// (machine_clock), so that arrivals and commits are compared on one clock
// that a step of the wall clock moves neither of; without it, arrivals are
// taken on the wall clock.
void check_requests(const CommittedSteps& committed, const std::vector<mock_portal::RequestRecord>& requests,
                    const std::map<std::string, std::string>& steps, Invariants& inv,
                    std::optional<std::int64_t> timeline_base_us = std::nullopt);

// Most of the sorted times `t` in any half-open interval of `window_us`.
std::int64_t most_in_window(const std::vector<std::int64_t>& t, std::int64_t window_us);
// A lower bound, over every way to pair `arrived` with the sends they came
// from (`sent` may name sends that never arrived), on how much longer the
// slowest request took than the fastest, on clocks that differ by a constant.
std::int64_t least_lag_spread_us(std::vector<std::int64_t> sent, std::vector<std::int64_t> arrived);
// True when a server count over the declared limit is not failed (sanitizer
// builds only, below twice the limit; see expect_limit).
bool server_count_tolerated(std::int64_t max, int declared);
// Expects `portal`'s declared limit (per the server's window) kept at
// ratchet's send times and at the server, printing both counts.
void expect_limit(Workbench& w, const std::string& test, const std::string& portal, int declared);
// The same at the server only, where a request counts once it arrived: the
// runs' logs can miss a send (a process killed after it, before the line
// was written) or name one twice (a transfer tried again after its first
// connection failed unsent). A count over the limit is not failed when the
// arrivals prove that some request took longer to arrive than another by
// more than the limits' margin (least_lag_spread_us).
void expect_limit_at_server(Workbench& w, const std::string& test, const std::string& portal, int declared);

std::string ratchet_binary();
std::int64_t wall_us();
// Writes through a temp file and a rename, so a reader never sees half a file.
void write_file(const fs::path& path, const std::string& text);
// A loopback TCP port nobody listens on right now.
int free_port();
// True once something accepts connections on 127.0.0.1:port.
bool wait_for_port(int port, int timeout_ms);
void print_invariants(const std::string& test, const Invariants& inv);

}  // namespace ratchet::faults
