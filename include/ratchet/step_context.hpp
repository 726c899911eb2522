// What a C++ job handler receives: its job's arguments and identity, and
// checkpointed steps.
//
//   engine.define("rate_movie", [](ratchet::StepContext& ctx) {
//     auto imdb = ctx.call("imdb", "imdb.get_rating", {{"name", ctx.args()["name"]}});
//     auto sum = ctx.step("combine", [&] { return nlohmann::json{{"imdb", imdb}}; });
//     return sum;  // the job's result
//   });
//
// A handler is ordinary sequential code that may run more than once for the
// same job (after a crash, a failed attempt, a park or a restart). Every step
// whose output was committed before is not run again: step() and call()
// return the stored output instead. Code outside steps runs on every attempt,
// so keep side effects inside steps. Step names must be unique within a job.
//
// step() and call() may end the handler early by throwing an internal signal
// (the job was cancelled, parked, lost its lease or the engine is stopping).
// These signals do not derive from std::exception; let them pass (do not
// catch (...) and carry on; if you do, the engine still honours the signal
// and ignores the handler's return value).
//
// Thread-safety: a context belongs to one handler invocation. step() may be
// called from threads the handler starts, as long as they finish before the
// handler returns.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ratchet/export.hpp"
#include "ratchet/job.hpp"

namespace ratchet {

class RATCHET_API StepContext {
 public:
  virtual ~StepContext() = default;

  virtual JobId job_id() const = 0;
  virtual const std::string& job_type() const = 0;
  virtual const nlohmann::json& args() const = 0;
  // 1 for the first attempt; a park or restart continues the same attempt.
  virtual int attempt() const = 0;

  // "<job id>:<step>", the same on every attempt: send it to APIs that
  // deduplicate requests.
  virtual std::string idempotency_key(std::string_view step) const = 0;

  // Runs fn once for this job and step name and returns its output; on
  // replay returns the committed output without calling fn. The output is
  // committed before the next step starts, or with the write that ends the
  // run (completed, failed, parked...), whichever comes first: one commit
  // fewer per step, and no step starts before the ones before it are
  // durable. A crash before that commit runs the step again, like a step in
  // flight. An exception from fn fails the job attempt (the job retries
  // with backoff).
  virtual nlohmann::json step(std::string_view name, const std::function<nlohmann::json()>& fn) = 0;

  // A step that calls a plugin operation ("plugin.operation") through the
  // engine's limiters and retries. A long throttling wait parks the job
  // instead of holding the worker; the handler is replayed when it resumes.
  virtual nlohmann::json call(std::string_view name, std::string_view operation,
                              const nlohmann::json& args) = 0;

  // True once cancel() was called for this job; the next step() throws.
  virtual bool cancel_requested() const = 0;
  // Stops when the job must give up its work quickly (engine stopping after
  // its grace period, lease lost, cancellation). Long step functions should
  // watch it.
  virtual std::stop_token stop_token() const = 0;
};

// A C++ job type: returns the job's result.
using JobHandler = std::function<nlohmann::json(StepContext&)>;

}  // namespace ratchet
