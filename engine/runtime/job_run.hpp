// One run of one claimed job: the StepContext a handler sees, the committed
// checkpoints it replays, and the signals that end the run early.
//
// A run ends early by a signal (lease lost, cancelled, engine stopping,
// parked), thrown as RunSignal from step()/call() at a step boundary and also
// recorded in the run, so the executor honours it even if a handler swallows
// the exception. When several concurrent steps raise signals, the most severe
// wins (lost > cancelled > stopping > parked; of two parks the earlier time).
//
// A finished step's checkpoint is written when the run next needs it
// durable: before its next step starts, or together with the write that ends
// the run (take_unwritten()), so a one-step job costs one commit and a step
// is never started before the checkpoints of the steps before it are
// committed. Until then it exists only here, like a step still in flight: a
// crash runs it again (at-least-once), never a committed one.
//
// Every write of the run is fenced by its claim (store::Fence: the owner and
// the claim's token) and made under its lease: while another process holds
// the database's write lock, a checkpoint waits as long as the lease lasts,
// then is given up, naming the steps that will run again. The run knows
// until when its lease lasts (the claim, then each renewal that committed);
// once that time is past it stops at its next step boundary as lost: no
// write of it could commit any more, so a step started then would only be
// called again by the run that takes the job over.
//
// A step function's failure is thrown as StepFailed (a std::runtime_error
// that names the step); a handler may catch it and carry on.
//
// Thread-safety: step()/call() may run concurrently (declarative DAG steps);
// mark_lost/request_cancel/request_stop are called from the heartbeat and
// stop() threads.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ratchet/clock.hpp"
#include "ratchet/step_context.hpp"
#include "runtime/step_caller.hpp"
#include "store/crash_record.hpp"
#include "store/store.hpp"

namespace ratchet::runtime {

// What a run needs from its engine.
struct RunEnv {
  store::Store* store = nullptr;
  const Clock* clock = nullptr;
  std::string owner;
  Duration lease{};
  Duration park_threshold{};
  StepCaller* caller = nullptr;                   // null: plugin calls fail
  const store::CrashRecorder* crashes = nullptr;  // null: crashes are not recorded
};

enum class SignalKind { kNone = 0, kParked = 1, kStopping = 2, kCancelled = 3, kLost = 4 };

// Not a std::exception, so `catch (const std::exception&)` in a handler does
// not swallow it.
struct RunSignal {
  SignalKind kind;
};

class StepFailed : public std::runtime_error {
 public:
  StepFailed(std::string step, const std::string& error)
      : std::runtime_error("step \"" + step + "\": " + error), step_(std::move(step)), error_(error) {}
  const std::string& step() const { return step_; }
  const std::string& error() const { return error_; }

 private:
  std::string step_;
  std::string error_;
};

// Thrown at a step boundary of a run past its attempt timeout.
class AttemptTimedOut : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes finished steps' checkpoints under the job's lease, renewing it to
// `lease_until`; stops at the first refused (the lease is gone).
store::LeaseWrite write_steps(store::JobStore& s, const std::vector<store::StepDone>& steps,
                              store::Micros lease_until, store::Micros now);

// The names of `steps`, for a log line: "a", "b".
std::string step_names(const std::vector<store::StepDone>& steps);

class JobRun final : public StepContext {
 public:
  JobRun(const RunEnv& env, store::ClaimedJob job);

  // StepContext
  JobId job_id() const override { return job_.id; }
  const std::string& job_type() const override { return job_.type; }
  const nlohmann::json& args() const override { return job_.args; }
  int attempt() const override { return job_.attempt; }
  std::string idempotency_key(std::string_view step) const override;
  nlohmann::json step(std::string_view name, const std::function<nlohmann::json()>& fn) override;
  nlohmann::json call(std::string_view name, std::string_view operation, const nlohmann::json& args) override;
  bool cancel_requested() const override { return cancel_.load(); }
  std::stop_token stop_token() const override { return stop_.get_token(); }

  // Whether a step runs beside others of the same run (declarative steps
  // without a dependency between them). A park raised by one of those ends
  // the run only once they have all finished or parked: a sibling launched
  // with it still takes its own limiter slot, which may come sooner.
  enum class Siblings { kSequential, kConcurrent };

  // A plugin call as a checkpointed step (declarative steps use this).
  nlohmann::json call_step(const std::string& name, const std::string& plugin, const std::string& operation,
                           const nlohmann::json& args, std::optional<Duration> max_wait,
                           Siblings siblings = Siblings::kSequential);

  // The committed output of a step, if any.
  std::optional<nlohmann::json> checkpoint(const std::string& name) const;
  std::map<std::string, nlohmann::json> checkpoints() const;

  // Checkpoints of finished steps not written yet; the caller writes them in
  // the transaction that records how the run ended.
  std::vector<store::StepDone> take_unwritten();

  const store::ClaimedJob& job() const { return job_; }
  // The claim this run's writes are fenced by.
  store::Fence fence() const { return {env_.owner, job_.token}; }
  // Until when the lease is known to hold: as claimed, then as last renewed.
  TimePoint lease_until() const { return store::from_micros(lease_until_.load()); }
  // A renewal to `until` committed (the heartbeat's, or a checkpoint's).
  void lease_renewed(store::Micros until);
  SignalKind signal() const;
  // Drops a park raised by a run that is failing anyway (timed out).
  void clear_park();
  TimePoint park_until() const;
  std::string park_reason() const;

  // Whether the run was given up because its checkpoints could not be
  // written (the database refused them), not because its lease was lost.
  bool gave_up_unwritten() const { return gave_up_unwritten_.load(); }

  // From other threads.
  void mark_lost();
  void request_cancel() { cancel_.store(true); }
  void request_stop() { stopping_.store(true); }  // at the next step boundary
  bool stopping() const { return stopping_.load(); }
  void abort() { stop_.request_stop(); }  // also interrupt work in flight
  // The attempt ran past its job type's timeout: work in flight is
  // interrupted and the next step boundary throws AttemptTimedOut.
  void time_out() {
    timed_out_.store(true);
    stop_.request_stop();
  }
  bool timed_out() const { return timed_out_.load(); }

 private:
  [[noreturn]] void raise(SignalKind kind, TimePoint until = {}, std::string reason = {});
  void check_boundary(Siblings siblings = Siblings::kSequential);
  void claim_name(const std::string& name);
  void commit(const std::string& name, const nlohmann::json& output, TimePoint started);
  // Writes the unwritten checkpoints and waits for the commit.
  void write_checkpoints();

  RunEnv env_;
  store::ClaimedJob job_;
  std::stop_source stop_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lost_{false};
  std::atomic<bool> gave_up_unwritten_{false};
  std::atomic<bool> timed_out_{false};
  std::atomic<store::Micros> lease_until_{0};

  mutable std::mutex mu_;
  std::set<std::string> used_;  // step names run or replayed in this run
  SignalKind signal_ = SignalKind::kNone;
  TimePoint park_until_{};
  std::string park_reason_;
  std::vector<store::StepDone> unwritten_;
  // Held across a checkpoint write, so a step that starts while a sibling's
  // write is on its way waits for it.
  std::mutex write_mu_;
};

}  // namespace ratchet::runtime
