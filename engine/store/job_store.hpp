// Every SQL statement on jobs, steps, attempt errors and the timeline, as
// methods over one connection. Methods do not open transactions: the caller
// (the Writer's group commit, or a read snapshot) provides one. Each write
// that a worker makes while running a job first checks that its lease is
// still held, so a worker that lost its job cannot change it.
//
// Times are Unix microseconds passed in by the caller (from its Clock).
// SQLite exceptions propagate; the Writer turns them into Error values.
//
// Ownership: borrows the connection, which must outlive it. Thread-safety:
// one thread at a time (it caches prepared statements).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <nlohmann/json.hpp>

#include "ratchet/job.hpp"

namespace ratchet::store {

class Quarantine;

using Micros = std::int64_t;

Micros to_micros(TimePoint t);
TimePoint from_micros(Micros us);

struct NewJob {
  std::string type;
  std::string queue;
  std::string args_json;
  int priority = 0;
  Micros run_at = 0;
  int max_attempts = 1;
  std::string unique_key;  // empty: none
};

struct Inserted {
  JobId id = 0;
  bool existing = false;  // the unique key was held by this live job
};

struct ClaimRequest {
  std::string owner;
  Micros now = 0;
  Micros lease_until = 0;
  int limit = 1;
  std::vector<std::string> types;   // only these job types
  std::vector<std::string> queues;  // empty: any queue
  // A job is dead once its lease expired this often while it ran alone
  // (store/quarantine.hpp); expiries beside other jobs make it a suspect.
  int max_lease_expiries = 3;
};

// A job handed to a worker with everything it needs to resume.
struct ClaimedJob {
  JobId id = 0;
  std::string type;
  std::string queue;
  nlohmann::json args;
  int attempt = 0;
  int max_attempts = 0;
  bool cancel_requested = false;
  bool resumed = false;                               // parked or released mid-run, not a fresh attempt
  std::map<std::string, nlohmann::json> checkpoints;  // committed steps
  // Set by the scheduler that took the claim: its order among that
  // engine's claims (a lease renewal speaks only for claims made before it).
  std::uint64_t claim_seq = 0;
};

// What happened to jobs whose lease expired while claiming.
struct Expired {
  JobId id = 0;
  std::string type;
  int attempt = 0;
  bool dead = false;
  std::string error;
};

struct ClaimResult {
  std::vector<ClaimedJob> jobs;
  std::vector<Expired> expired;
  // When the next pending job (of any type or queue) falls due after `now`;
  // nullopt: none is scheduled ahead.
  std::optional<Micros> next_run_at;
};

// Result of a write made under a lease.
struct LeaseWrite {
  bool held = false;  // false: the job is no longer ours; nothing was written
  bool cancel_requested = false;
};

struct StepDone {
  JobId id = 0;
  std::string owner;
  std::string step;
  std::string output_json;
  Micros started = 0;
  Micros finished = 0;
  Micros lease_until = 0;
};

struct AttemptFailure {
  JobId id = 0;
  std::string owner;
  std::string step;  // empty when not inside a step
  std::string error;
  Micros now = 0;
  std::optional<Micros> retry_at;  // nullopt: the job is dead
};

class JobStore {
 public:
  explicit JobStore(SQLite::Database& db);
  ~JobStore();

  Inserted insert(const NewJob& job, Micros now);
  ClaimResult claim(const ClaimRequest& req);
  // Renews the leases of `ids`; returns those still held, with their
  // cancel flag, in the same order (absent ones were lost).
  std::vector<std::pair<JobId, bool>> renew(const std::string& owner, const std::vector<JobId>& ids,
                                            Micros lease_until, Micros now);
  LeaseWrite checkpoint(const StepDone& step);
  LeaseWrite complete(JobId id, const std::string& owner, const std::string& result_json, Micros now);
  LeaseWrite fail_attempt(const AttemptFailure& failure);
  LeaseWrite park(JobId id, const std::string& owner, Micros until, const std::string& reason, Micros now);
  // Gives a running job back (engine stopping) without using up its attempt.
  LeaseWrite release(JobId id, const std::string& owner, const std::string& reason, Micros now);
  LeaseWrite finish_cancelled(JobId id, const std::string& owner, Micros now);

  // Host actions. Each returns the state the job is in afterwards, or
  // nullopt when there is no such job.
  std::optional<JobState> cancel(JobId id, Micros now);
  std::optional<JobState> retry(JobId id, Micros now, int max_attempts_floor);
  std::int64_t purge(Micros finished_before);

  std::optional<JobRecord> get(JobId id);
  std::vector<JobRecord> list(const JobFilter& filter);
  std::vector<std::pair<JobState, std::int64_t>> counts();
  // Whether any job of these types (and queues; empty: any) is pending or
  // running: 1 or 0.
  std::int64_t pending(const std::vector<std::string>& types, const std::vector<std::string>& queues);
  void add_timeline(JobId id, Micros at, const std::string& kind, const std::string& detail);

 private:
  SQLite::Statement& stmt(const char* sql);  // prepared once per connection
  std::vector<std::int64_t> pending_priorities();
  // Due jobs in claim order: by priority, resumed before fresh, then by time;
  // each with whether it is a resumed one.
  std::vector<std::pair<JobId, bool>> due_ids(const ClaimRequest& req,
                                              const std::vector<std::int64_t>& priorities);
  std::optional<Micros> next_run_at(Micros now, const std::vector<std::int64_t>& priorities);
  std::map<std::string, nlohmann::json> load_checkpoints(JobId id);

  SQLite::Database& db_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache_;
  std::unique_ptr<Quarantine> quarantine_;
};

}  // namespace ratchet::store
