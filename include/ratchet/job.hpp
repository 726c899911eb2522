// The values a host sees about jobs: states, enqueue options, the stored
// record of a job with its steps, errors and timeline, list filters, events
// and the declaration of a job type defined in C++.
//
// All types here are plain values: copy them freely between threads.
// Times are wall-clock TimePoints (see ratchet/clock.hpp); the database keeps
// them as Unix microseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/clock.hpp"
#include "ratchet/export.hpp"

namespace ratchet {

using JobId = std::int64_t;

// The life of a job:
//   scheduled  waits for its run-at time (delayed, or parked by a limiter)
//   available  may run now
//   running    held by a worker under a lease
//   retryable  an attempt failed; waits for its backoff to pass
//   completed, dead, cancelled: terminal (dead jobs can be retried by hand)
enum class JobState { kScheduled, kAvailable, kRunning, kRetryable, kCompleted, kDead, kCancelled };

// "scheduled", "available", ... as stored in the database and shown by the CLI.
RATCHET_API std::string_view to_string(JobState state) noexcept;
// The inverse of to_string; nullopt for an unknown name.
RATCHET_API std::optional<JobState> parse_job_state(std::string_view name) noexcept;
// True for completed, dead and cancelled.
RATCHET_API bool is_terminal(JobState state) noexcept;

// Options of one enqueue; every field has a default from the job type.
// How far ahead a job may be scheduled, and how far back purge may reach: a
// TimePoint counts nanoseconds in 64 bits (about 292 years from 1970), so a
// larger span would wrap; enqueue and purge refuse one beyond this.
inline constexpr Duration kMaxScheduleSpan = std::chrono::hours(24 * 36'500);  // 100 years

struct EnqueueOptions {
  std::string queue;                // empty: the job type's queue
  std::optional<int> priority;      // smaller runs first; default: the job type's
  std::optional<TimePoint> run_at;  // not before this time (from 1970 to kMaxScheduleSpan from now)
  std::optional<Duration> delay;    // or: not before now + delay, 0 to kMaxScheduleSpan (run_at wins if both)
  std::optional<int> max_attempts;  // default: the job type's attempts
  // While a job with this key is pending or running, enqueueing another one
  // with the same key returns the existing job's id instead. Empty: no key.
  std::string unique_key;
};

// One step's checkpoint (or last failure) as stored.
struct StepRecord {
  std::string name;
  std::string state;  // "completed" or "failed"
  nlohmann::json output;
  int attempts = 0;  // how many times the step ran
  std::optional<TimePoint> started_at;
  std::optional<TimePoint> finished_at;
  std::string last_error;
};

// The error that ended one job attempt.
struct AttemptError {
  int attempt = 0;
  std::string step;  // empty when the failure was not inside a step
  std::string error;
  TimePoint at;
};

// A wait, park, lease expiry or manual action in a job's life, for `jobs show`.
struct TimelineEntry {
  TimePoint at;
  std::string kind;  // "parked", "retry_scheduled", "lease_expired", "released", "cancel_requested", ...
  std::string detail;
};

struct JobRecord {
  JobId id = 0;
  std::string type;
  std::string queue;
  nlohmann::json args;
  JobState state = JobState::kAvailable;
  int priority = 0;
  TimePoint run_at;
  int attempt = 0;  // attempts started so far
  int max_attempts = 0;
  std::string unique_key;
  std::string lease_owner;  // empty unless running
  std::optional<TimePoint> lease_expires_at;
  int lease_expiries = 0;  // attempts that ended because the worker vanished
  bool cancel_requested = false;
  nlohmann::json result;  // null until completed
  std::string last_error;
  TimePoint created_at;
  TimePoint updated_at;
  std::optional<TimePoint> finished_at;
  // Filled by Engine::get only (list leaves them empty).
  std::vector<StepRecord> steps;
  std::vector<AttemptError> errors;
  std::vector<TimelineEntry> timeline;
};

struct JobFilter {
  std::optional<JobState> state;
  std::string type;   // empty: any
  std::string queue;  // empty: any
  JobId id = 0;       // 0: any; else that job only
  // Empty: any; else only jobs whose arguments (as JSON text) or last error
  // hold it, ignoring the case of ASCII letters.
  std::string text;
  JobId after_id = 0;         // for paging: only ids greater than this
  JobId before_id = 0;        // 0: no bound; else only ids smaller than this
  bool newest_first = false;  // by id, descending (oldest first when false)
  int limit = 100;
};

// What ended in one minute: jobs completed, attempts that failed (the last
// one of a job that died too) and jobs that died.
struct MinuteActivity {
  TimePoint minute;  // its start, a whole minute of Unix time
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  std::int64_t dead = 0;
};

// Something that happened to a job, delivered to subscribers after it is
// committed.
struct JobEvent {
  enum class Kind {
    kCompleted,  // `result` holds the job's result
    kFailed,     // an attempt failed and the job will be retried; `error` says why
    kDead,       // the last attempt failed; `error` says why
    kCancelled,
  };
  Kind kind = Kind::kCompleted;
  JobId id = 0;
  std::string type;
  int attempt = 0;
  std::string error;
  nlohmann::json result;
};

// Declared arguments of a job type: enqueue refuses arguments that miss a
// required field, give a field of the wrong type or add an undeclared field.
enum class ArgKind { kString, kNumber, kInteger, kBoolean, kObject, kArray, kAny };

struct ArgDecl {
  std::string name;
  ArgKind type = ArgKind::kAny;
  bool required = true;
};

// How long a job waits after a failed attempt: exponential from `initial`,
// capped at `max`, with full jitter (a uniform draw in [0, delay]) unless
// `jitter` is false.
struct JobBackoff {
  Duration initial = std::chrono::seconds(1);
  Duration max = std::chrono::hours(1);
  double multiplier = 2.0;
  bool jitter = true;
};

// A job type defined in C++ (Engine::define).
struct JobTypeOptions {
  int attempts = 20;  // job attempts before the job is dead; >= 1
  JobBackoff backoff;
  std::string queue = "default";
  int priority = 0;
  // Bounds one run of an attempt, from its claim until it completes, fails
  // or parks (time parked does not count: waiting never uses an attempt).
  // Past it, calls in flight are cancelled and the attempt fails.
  std::optional<Duration> timeout;
  // Empty: any JSON object is accepted.
  std::vector<ArgDecl> args;
  // Arguments whose values are shown as "[redacted]" wherever jobs are shown
  // (`ratchet jobs`, the dashboard and its API: Engine::redacted), and as
  // "***" where an error, an output or the timeline echoes them (in any form
  // a secret is found in, such as percent-encoded in a URL; values of at
  // least 4 characters); the job's handler still gets them.
  std::vector<std::string> redact;
};

}  // namespace ratchet
