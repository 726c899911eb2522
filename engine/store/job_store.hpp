// The store's interface for jobs, steps and checkpoints, attempt errors, the
// timeline, leases and claims: every backend (store/sqlite/, store/postgres/)
// implements JobStore, and the runtime sees only this file and store.hpp.
// Methods do not open transactions: the Store that hands a JobStore to a
// write or a read provides one (the writer's group transaction, or a read
// snapshot).
//
// The fence. Every claim of a job takes a claim token: the job's previous
// token plus one, so tokens only grow, and two claims of one job never share
// one, even when the same owner name makes both (an engine whose own lease
// expired while it was paused, stalled or its clock jumped, and that claims
// the job again). A claim is the pair (owner, token) in Fence. Every write
// of a run (checkpoint, renew, complete, fail_attempt, park, release,
// finish_cancelled) names its claim and changes the job only while the job
// is running under exactly that claim and its lease has not expired at the
// write's `now`; otherwise it writes nothing and returns held = false. So a
// run whose lease expired can no longer commit anything for that job, and
// the run that took the job over is the only one that can.
//
// Claim order is part of the contract: due jobs by priority (lower first),
// resumed jobs (parked or released mid-run) before fresh ones, then by
// run-at and id. A job whose lease expired is judged by the quarantine
// rules (store/quarantine_rules.hpp) before it is claimed again.
//
// Times are Unix microseconds passed in by the caller (from its Clock).
// A backend's failures propagate as exceptions out of these methods; the
// Store that ran them turns them into Error values.
//
// Thread-safety: one thread at a time (a backend caches prepared statements).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/job.hpp"

namespace ratchet::store {

using Micros = std::int64_t;

Micros to_micros(TimePoint t);
TimePoint from_micros(Micros us);
inline constexpr Micros kMicrosPerMinute = 60'000'000;

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

// The claim a run holds, which fences its writes (see the top of this file).
struct Fence {
  std::string owner;
  std::int64_t token = 0;  // the job's claim count when this claim took it
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
  // A job another process parked is claimed only once it has been due this
  // long: the process that parked it holds the slot it waits for (a
  // reserved limiter slot lives in that process), and taken by another it
  // would wait for a slot of its own while the one reserved goes unused.
  // A process stopped by a signal or gone leaves its parked jobs to the
  // others after it; one that stops cleanly hands them over (disown_parked).
  Micros others_parked_after = 1'000'000;
  // Spans [from, to] in which this process's writes could not reach the
  // database (Store::write_outages), widened at their end by one heartbeat:
  // a lease that ran out in one may have been its owner's, alive but unable
  // to renew it (a server restarting, a lock held past the lease, a full
  // disk), so its expiry is not judged a crash (quarantine_rules.hpp).
  std::vector<std::pair<Micros, Micros>> outages{};
};

// A job handed to a worker with everything it needs to resume.
struct ClaimedJob {
  JobId id = 0;
  std::string type;
  std::string queue;
  nlohmann::json args;
  // Why the stored arguments were not loaded (nested past what can be read
  // back without recursing); empty when `args` holds them.
  std::string args_problem;
  int attempt = 0;
  int max_attempts = 0;
  bool cancel_requested = false;
  bool resumed = false;                               // parked or released mid-run, not a fresh attempt
  std::int64_t token = 0;                             // this claim's token (Fence::token)
  Micros lease_until = 0;                             // the lease as claimed
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
  // The claim took its limit and more jobs it could take were due: the
  // engine's limits hear that calls are still to come (StepCaller::set_backlog).
  // Looked for only when the claim took its limit.
  bool more_due = false;
};

// Result of a write made under a lease.
struct LeaseWrite {
  bool held = false;  // false: the job is no longer ours; nothing was written
  bool cancel_requested = false;
  // Where a run write (Store::write_run_async) left the lease when held and
  // the run goes on: now + lease at the time it was written; 0 otherwise.
  Micros renewed_to = 0;
};

struct Renewed {
  JobId id = 0;
  std::int64_t token = 0;
  bool cancel_requested = false;
};

struct StepDone {
  JobId id = 0;
  Fence fence;
  std::string step;
  std::string output_json;
  Micros started = 0;
  Micros finished = 0;
};

// A run's write of its finished steps: their checkpoints (each as
// checkpoint() would write it, the lease renewed to now + lease), then,
// when `result_json` is set, the job completed with that result (as
// complete()). Fenced by (id, fence) as a whole: once the claim is gone
// nothing of it is written. The run's id and fence are its steps' too
// (whatever a StepDone of it says).
struct RunWrite {
  JobId id = 0;
  Fence fence;
  std::vector<StepDone> steps;
  std::optional<std::string> result_json;  // nullopt: the run goes on
  Micros lease = 0;                        // the lease length the renewal extends to from `now`
};

struct AttemptFailure {
  JobId id = 0;
  Fence fence;
  std::string step;  // empty when not inside a step
  std::string error;
  Micros now = 0;
  std::optional<Micros> retry_at;  // nullopt: the job is dead
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  virtual Inserted insert(const NewJob& job, Micros now) = 0;
  virtual ClaimResult claim(const ClaimRequest& req) = 0;
  // Renews the leases of `claims` (job id and claim token, all of `owner`)
  // to lease_until; returns those still held, with their cancel flag, in the
  // same order (absent ones were lost).
  virtual std::vector<Renewed> renew(const std::string& owner,
                                     const std::vector<std::pair<JobId, std::int64_t>>& claims,
                                     Micros lease_until, Micros now) = 0;
  // Commits a finished step's output and renews the lease to lease_until.
  virtual LeaseWrite checkpoint(const StepDone& step, Micros lease_until, Micros now) = 0;
  virtual LeaseWrite complete(JobId id, const Fence& fence, const std::string& result_json, Micros now) = 0;
  // Writes each run (RunWrite) at `now` and returns what each got, in
  // order. The runs are of distinct jobs. The default writes them one by one
  // with checkpoint() and complete(); a backend whose every statement is a
  // round trip to a server writes them all in a few statements instead.
  virtual std::vector<LeaseWrite> write_runs(const std::vector<const RunWrite*>& runs, Micros now);
  virtual LeaseWrite fail_attempt(const AttemptFailure& failure) = 0;
  virtual LeaseWrite park(JobId id, const Fence& fence, Micros until, const std::string& reason,
                          Micros now) = 0;
  // Moves a job parked by `attempt` to `now` when its time is later: what it
  // waited for freed up sooner (`now` may be a time ahead: what it waits
  // for comes then). False if it is not parked by that attempt.
  virtual bool resume_parked(JobId id, int attempt, Micros now) = 0;
  // Moves each job parked by its attempt, and due before `until`, to
  // `until`: what it waits for has no known end, and the process that
  // parked it, still alive, resumes it when it comes. A process that dies
  // stops moving them, so they wake soon after. Returns how many moved.
  // The jobs `owner` parked fall due for any process at their time, not a
  // second later (ClaimRequest::others_parked_after): it stops, and will
  // claim none of them. Returns how many it had parked.
  virtual std::int64_t disown_parked(const std::string& owner) = 0;
  virtual std::int64_t extend_parked(const std::vector<std::pair<JobId, int>>& jobs, Micros until,
                                     Micros now) = 0;
  // Gives a running job back (engine stopping) without using up its attempt.
  virtual LeaseWrite release(JobId id, const Fence& fence, const std::string& reason, Micros now) = 0;
  virtual LeaseWrite finish_cancelled(JobId id, const Fence& fence, Micros now) = 0;

  // Host actions; nullopt when there is no such job. cancel returns the
  // state the job is in afterwards. retry returns the state the job was in:
  // dead or cancelled (it is available now), or another, left as it was
  // (one already available must not read as retried).
  virtual std::optional<JobState> cancel(JobId id, Micros now) = 0;
  virtual std::optional<JobState> retry(JobId id, Micros now, int max_attempts_floor) = 0;
  // Deletes up to `limit` terminal jobs that finished before
  // finished_before (oldest first), with their rows; returns how many. The
  // caller purges in chunks, one transaction each, so that no transaction
  // holds the write lock for long.
  virtual std::int64_t purge(Micros finished_before, int limit) = 0;

  virtual std::optional<JobRecord> get(JobId id) = 0;
  virtual std::vector<JobRecord> list(const JobFilter& filter) = 0;
  virtual std::vector<std::pair<JobState, std::int64_t>> counts() = 0;
  // Jobs completed and dead and attempts failed per minute since `since`.
  virtual std::vector<MinuteActivity> activity(Micros since) = 0;
  // Replaces `worker`'s report (a JSON text) and deletes reports not
  // updated since `forget_before`.
  virtual void put_report(const std::string& worker, Micros now, const std::string& report,
                          Micros forget_before) = 0;
  struct StoredReport {
    std::string worker;
    Micros updated = 0;
    std::string report;
  };
  // Reports updated at or after `since`, by worker.
  virtual std::vector<StoredReport> reports(Micros since) = 0;
  // Whether any job of these types (and queues; empty: any) is pending or
  // running: 1 or 0.
  virtual std::int64_t pending(const std::vector<std::string>& types,
                               const std::vector<std::string>& queues) = 0;
  virtual void add_timeline(JobId id, Micros at, const std::string& kind, const std::string& detail) = 0;

  // The base of the timeline of the machine's boot `boot_id`: the one stored,
  // or `wall_base_ns` when this is the first process of that boot (the base
  // of an earlier boot is dropped).
  virtual std::int64_t machine_clock_base(const std::string& boot_id, std::int64_t wall_base_ns) = 0;
  virtual std::optional<std::int64_t> stored_clock_base(const std::string& boot_id) = 0;
};

}  // namespace ratchet::store
