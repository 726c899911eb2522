// The embedding API: a durable job engine in one SQLite file, or in a
// PostgreSQL database shared by many machines.
//
//   ratchet::EngineOptions opts;
//   opts.database = "jobs.db";
//   auto engine = ratchet::Engine::open(opts);          // Result<std::unique_ptr<Engine>>
//   if (!engine) return fail(engine.error());
//   ratchet::JobTypeOptions type;
//   type.args = {{"name", ratchet::ArgKind::kString}};
//   if (auto st = (*engine)->define("rate_movie", handler, type); !st) ...
//   if (auto st = (*engine)->start(); !st) ...
//   auto id = (*engine)->enqueue("rate_movie", {{"name", "Heat"}});  // Result<JobId>
//   if (auto st = (*engine)->drain(); !st) ...
//   (*engine)->stop();
//
// Every Result and Status is [[nodiscard]]: an error ignored is a warning.
//
// Guarantees (docs/semantics.md states them all): a step whose output was committed never
// runs again for its job; a step interrupted by a crash runs again; every job
// ends in exactly one terminal state or is still pending; a running job is
// held by one lease at a time, so several processes (each with its own
// Engine) may share one database file.
//
// Ownership: the Engine owns its database connections and worker threads;
// destroying it calls stop(). Thread-safety: every member function may be
// called from any thread, except that stop() and the destructor must not be
// called from a handler or an event callback.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/clock.hpp"
#include "ratchet/export.hpp"
#include "ratchet/job.hpp"
#include "ratchet/plugins.hpp"
#include "ratchet/status.hpp"
#include "ratchet/step_context.hpp"

namespace ratchet {

// Settings only the embedded SQLite backend reads (the database is a file).
struct SqliteOptions {
  // PRAGMA synchronous=FULL: a committed step survives power loss, at the
  // cost of an fsync per commit. NORMAL (the default) survives a crash of
  // the process, not of the machine.
  bool synchronous_full = false;
};

// Settings only the PostgreSQL backend reads (the database is a URL).
struct PostgresOptions {
  // How long one attempt to connect may take (libpq counts whole seconds,
  // at least 2). Reconnects after a dropped connection use the same bound.
  Duration connect_timeout = std::chrono::seconds(10);
};

struct EngineOptions {
  // Where jobs are kept: a file (created with mode 0600 when missing; the
  // embedded default, no server), or a PostgreSQL URL,
  // postgresql://user@host[:port]/db, for several machines on one database
  // (tables ratchet_* in the first schema of the search_path, which
  // ?options=-csearch_path%3DNAME chooses). The password comes from
  // PGPASSWORD, ~/.pgpass (PGPASSFILE) or the URL, never from argv.
  std::filesystem::path database = "ratchet.db";
  SqliteOptions sqlite;      // read when `database` is a file
  PostgresOptions postgres;  // read when `database` is a URL
  int workers = 8;           // jobs run at once by this engine
  // How long a write or read waits for the database: for another process's
  // lock on SQLite, for an unreachable server on PostgreSQL.
  Duration busy_timeout = std::chrono::seconds(5);
  Duration lease = std::chrono::seconds(30);                // a running job's claim lasts this long ...
  Duration heartbeat = std::chrono::seconds(10);            // ... and is renewed this often
  Duration park_threshold = std::chrono::milliseconds(50);  // longer waits park the job
  Duration poll_interval = std::chrono::milliseconds(200);  // look for due jobs at least this often
  Duration report_interval = std::chrono::seconds(5);  // write this engine's report (reports()) this often
  Duration shutdown_grace = std::chrono::seconds(10);  // stop() lets steps finish this long
  // A job is dead once its process crashed this often while it ran alone.
  // A job whose lease expires while it ran beside other jobs (a crash, an
  // OOM kill, a redeploy) is a *suspect*: it keeps its attempt and from then
  // on runs only as the one suspect on the database (normal jobs run beside
  // it). A lease expiry counts against a job only when it ran alone in its
  // process or as that one suspect; then it also uses up the attempt. A
  // lease that ran out while the database was out of reach (its renewal
  // failed, and so did the writes of the process that finds it expired)
  // counts for nothing: the job keeps its attempt and its standing.
  int max_lease_expiries = 3;
  // On a crash signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) the engine
  // appends the owner, signal and job of the crashing thread to
  // "<database>-crashes" (PostgreSQL: a file per database under
  // $XDG_STATE_HOME/ratchet or ~/.local/state/ratchet, read by the engines
  // of this host) and passes the signal on to the handler installed
  // before (or the default action). That crash is then counted against the
  // job that caused it alone, and the jobs that ran beside it are not even
  // suspects. The handlers are installed at the first start() in the
  // process; false: no handler, every crash is judged as an outside kill.
  bool record_crashes = true;
  std::vector<std::string> queues;  // queues this engine works; empty: all
  // Time source for run-at, leases, backoff and parking. Null: a SystemClock
  // of the engine's own. A SystemClock (own or passed here) is anchored at
  // open to the timeline the database holds for this boot
  // (ratchet/clock.hpp), so a SystemClock shared with other code moves with
  // it; a FakeClock or a host's own Clock is used as it is.
  std::shared_ptr<const Clock> clock;
  // This engine's lease owner name; empty: "<hostname>:<pid>:<random>".
  std::string worker_id;
  // Seed of the backoff jitter; 0: random.
  std::uint64_t seed = 0;
};

class RATCHET_API Engine {
 public:
  // Opens (creating or migrating) the database. Fails with kDatabase when the
  // file is locked, read-only, not a database, corrupt or from a newer ratchet.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> open(EngineOptions options);

  // Opens the engine a TOML config file declares: its database, its plugin
  // folder (every plugin loaded, each wrapped in the limiters, retry and
  // circuit breaker the file declares for it) and its job types. Fails with
  // kConfig listing every problem of the file (each with file:line:column and
  // key), or with kPlugin when a configured plugin has no file.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> open_config(const std::filesystem::path& file,
                                                                   ConfigOverrides overrides = {});

  // Opens the database and the job types a TOML config file declares, but
  // no plugin: no plugin file is read or loaded, so a plugin whose file is
  // missing or broken does not keep anyone from looking at the jobs or
  // acting on them. Such an engine enqueues (arguments checked against the
  // job type as declared), gets, lists, counts, cancels, retries and purges
  // jobs, and limits() lists the limits the file declares with their state
  // (database-scope limits as the database holds them); plugins() names the
  // folder only, call_stats() is empty, and it runs nothing: start() fails
  // with kInvalidArgument. Fails with kConfig like open_config, for the file
  // itself.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> inspect_config(const std::filesystem::path& file,
                                                                      ConfigOverrides overrides = {});

  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Defines (or redefines) a C++ job type. Only job types defined in this
  // engine are claimed by it.
  [[nodiscard]] Status define(std::string type, JobHandler handler, JobTypeOptions options = {});

  // Enqueues a job of a defined type. Refuses an unknown type or arguments
  // that do not match the type's declared arguments (nothing is written).
  // With a unique key held by a live job, returns that job's id.
  [[nodiscard]] Result<JobId> enqueue(std::string_view type, nlohmann::json args,
                                      EnqueueOptions options = {});
  // Enqueues many jobs of one type in one transaction: all or none.
  [[nodiscard]] Result<std::vector<JobId>> enqueue_many(std::string_view type,
                                                        const std::vector<nlohmann::json>& args,
                                                        EnqueueOptions options = {});

  // Starts the workers, heartbeat and claiming. Idempotent. kInvalidArgument
  // for an engine opened by inspect_config.
  [[nodiscard]] Status start();
  // Blocks until no job that this engine would run (its job types, in its
  // queues) is pending or running in the database, including such jobs of
  // other processes and jobs scheduled in the future; or until `timeout`
  // (real time) passes: then kTimeout. Jobs of types defined elsewhere are
  // not waited for.
  [[nodiscard]] Status drain(std::optional<std::chrono::steady_clock::duration> timeout = std::nullopt);
  // Stops claiming, lets running steps finish within shutdown_grace, then
  // releases unfinished jobs with their checkpoints for another worker.
  // Idempotent; start() may be called again afterwards.
  void stop();

  // One job with its steps, attempt errors and timeline; kNotFound if absent.
  [[nodiscard]] Result<JobRecord> get(JobId id);
  [[nodiscard]] Result<std::vector<JobRecord>> list(const JobFilter& filter = {});
  // Jobs per state.
  [[nodiscard]] Result<std::vector<std::pair<JobState, std::int64_t>>> counts();
  // `job` as it may be shown to people: the values of the arguments its job
  // type lists in `redact` replaced by "[redacted]".
  JobRecord redacted(JobRecord job) const;
  // The plugin call ("imdb.get_rating") of each step a job type declares in
  // its config, by step name; empty for a type defined in C++ or unknown.
  std::map<std::string, std::string> step_calls(std::string_view type) const;
  // The minutes since `since` in which a job completed or died or an attempt
  // failed, oldest first (minutes with nothing are left out).
  [[nodiscard]] Result<std::vector<MinuteActivity>> activity(TimePoint since);

  // Cancels a pending job now, or a running job at its next step boundary.
  // kInvalidArgument when the job already ended.
  [[nodiscard]] Status cancel(JobId id);
  // Puts a dead or cancelled job back to available with a fresh set of
  // attempts; its committed steps are kept and not run again.
  [[nodiscard]] Status retry(JobId id);
  // Deletes terminal jobs (with their steps, errors and timeline) that
  // finished before now - older_than. Returns how many.
  [[nodiscard]] Result<std::int64_t> purge(Duration older_than);

  // Calls `callback` after each event is committed, in commit order, from
  // the engine thread that records how jobs end (the dispatcher, for jobs
  // whose lease expired). It may call the engine (enqueue, get, cancel...)
  // but not stop(), and should be short: while it runs, the ends of other
  // jobs wait to be reported.
  using Subscription = std::uint64_t;
  Subscription subscribe(std::function<void(const JobEvent&)> callback);
  void unsubscribe(Subscription id);

  // Re-reads the config file this engine was opened from. New limits,
  // policies, plugin settings and job types apply from the next call; an
  // invalid file is refused with all its errors (kConfig) and the running
  // config stays. Returns what changed. kInvalidArgument without a file.
  [[nodiscard]] Result<std::string> reload_config();

  // The plugin folder: loaded plugins and refused files. Rescans the folder
  // first, so a file dropped in since the last call is included.
  PluginReport plugins();
  // Every limiter in use, with its next free start time.
  std::vector<LimiterInfo> limits();
  // Calls, 429s, retries, parks, limiter waits and step durations per plugin
  // since the engine opened, and the steps parked now. A parked job that
  // another process cancels or takes over is noticed in the database, which
  // is read for that at most once a second (of the engine's clock).
  std::vector<PluginCallStats> call_stats();
  // The time on the engine's clock: with a SystemClock, the timeline the
  // database holds for this boot, on which every time this engine and the
  // others sharing the database write is read. A tool that compares those
  // times with "now" takes it from here, not from the wall clock, which
  // may have stepped since the timeline was laid down.
  TimePoint now() const;
  // The reports of every engine sharing the database that wrote one in the
  // last `within` (a running engine writes one every `report_interval`),
  // this one's included, by worker id. An unreadable report is left out.
  [[nodiscard]] Result<std::vector<EngineReport>> reports(Duration within = std::chrono::minutes(1));

  // The database's last error when it has refused every write for at least
  // 5 s (3 transactions in a row or more) for a reason that waiting for a
  // lock does not cure: the disk or the file size limit is full, an I/O
  // error, the file became read-only. Nothing written is lost (a refused
  // transaction leaves nothing behind); the engine goes on trying, since
  // space may come back, and a host that would rather stop calls stop() and
  // reports the error. nullopt while writes succeed.
  std::optional<Error> write_failure() const;

  // This engine's lease owner name.
  const std::string& worker_id() const;
  // Where its jobs are kept, for messages: the file's path, or the server
  // database's URL with any password masked.
  std::string database() const;

 private:
  // The engine's internals reach its state through EngineAccess
  // (engine/runtime/engine_access.hpp), which is not installed.
  friend struct EngineAccess;
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratchet
