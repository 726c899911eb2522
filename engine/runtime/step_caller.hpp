// The seam between the job runtime and whatever performs a plugin operation
// call (in the assembled engine: circuit breaker, retry, limiters and the
// plugin itself). The runtime only needs to know the outcome of one step's
// call: its output, that the job must wait, or that the step failed after
// its own retries.
//
// Ownership: the Engine holds the caller in a shared_ptr for its lifetime.
// Thread-safety: call() is invoked from many worker threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/clock.hpp"
#include "ratchet/job.hpp"
#include "ratchet/status.hpp"

namespace ratchet::runtime {

struct StepCall {
  std::string plugin;     // "imdb"
  std::string operation;  // "get_rating"
  nlohmann::json args;    // rendered arguments
  JobId job_id = 0;
  std::string step;                  // step name within the job
  std::string idempotency_key;       // "<job id>:<step>", stable across attempts
  int attempt = 0;                   // job attempt
  std::optional<Duration> max_wait;  // the step's bound on throttling waits, if declared
  // Until when the run's lease is known to hold, read right before each
  // request leaves: past it another process may own the job. Empty: no lease.
  std::function<TimePoint()> lease_until{};
  // The job's arguments (keyed limits read their keys there); null: none.
  const nlohmann::json* job_args = nullptr;
};

class CallOutcome {
 public:
  enum class Kind {
    kOk,      // output holds the step's output
    kPark,    // the call may not start before `until`: the job waits (limiter
              // slot, backoff, open circuit); the caller keeps any reservation
              // it made for that time
    kFailed,  // the step failed for good (its retries are exhausted)
  };

  static CallOutcome ok(nlohmann::json output) {
    return CallOutcome(Kind::kOk, std::move(output), {}, {}, {});
  }
  static CallOutcome park_until(TimePoint until, std::string reason) {
    return CallOutcome(Kind::kPark, nullptr, until, std::move(reason), {});
  }
  static CallOutcome failed(Error error) {
    return CallOutcome(Kind::kFailed, nullptr, {}, {}, std::move(error));
  }

  Kind kind() const { return kind_; }
  const nlohmann::json& output() const { return output_; }
  TimePoint until() const { return until_; }
  const std::string& reason() const { return reason_; }
  const Error& error() const { return *error_; }  // only for kFailed

 private:
  CallOutcome(Kind k, nlohmann::json o, TimePoint u, std::string r, std::optional<Error> e)
      : kind_(k), output_(std::move(o)), until_(u), reason_(std::move(r)), error_(std::move(e)) {}

  Kind kind_;
  nlohmann::json output_;
  TimePoint until_;
  std::string reason_;
  std::optional<Error> error_;
};

class StepCaller {
 public:
  virtual ~StepCaller() = default;
  // Performs one step's call. `stop` is requested when the job must give up
  // quickly (engine stopping after its grace period, lease lost).
  virtual CallOutcome call(const StepCall& call, std::stop_token stop) = 0;
  // What a caller keeps across parks (retry state, a reserved slot) serves
  // only a step that comes back. The engine calls this when attempts up to
  // `attempt` of job `job` can no longer come back to this engine: the run
  // ended without parking, or the job was cancelled while it waited.
  virtual void forget(JobId /*job*/, int /*attempt*/) {}

  // A caller may park a step whose wait has no known end (a concurrency
  // permit, a half-open breaker's probe) until a late fallback time and
  // resume it sooner, when what it waits for frees up, through `resume`:
  // the engine then moves the job's time to now, if that attempt is still
  // parked, and wakes its dispatcher. Empty: resume nothing (the engine
  // stopped). Called by the engine, never from inside call(). `at`: the
  // time to resume it at (now, or later: a slot granted ahead), sooner or
  // later than it was parked for.
  using Resume = std::function<void(JobId job, int attempt, TimePoint at)>;
  virtual void set_resume(Resume /*resume*/) {}
  // A caller may also park steps with a short fallback and keep moving it
  // later while it is alive (a wait for a turn, whose end only this process
  // knows), so that after a crash they wake soon: through `extend`, which
  // moves each listed attempt, still parked and due sooner, to `until`.
  using Extend = std::function<void(std::vector<std::pair<JobId, int>> jobs, TimePoint until)>;
  virtual void set_extend(Extend /*extend*/) {}
  // How many jobs the engine holds that no worker runs yet, more when the
  // database holds more than its last claim took: the calls a caller's
  // limits may still see beside those waiting now (a learned pace keeps
  // probing a window's end while they come). Must not block. Empty: none.
  using Backlog = std::function<std::int64_t()>;
  virtual void set_backlog(Backlog /*backlog*/) {}
  // The park of `attempt` of `job` has committed: a resume from now on finds
  // the job parked in the database.
  virtual void parked(JobId /*job*/, int /*attempt*/) {}
};

}  // namespace ratchet::runtime
