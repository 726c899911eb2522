#include "runtime/dag_runner.hpp"

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ratchet::runtime {
namespace {

nlohmann::json context_of(const JobRun& run) {
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& [name, output] : run.checkpoints()) steps[name] = {{"output", output}};
  return {{"args", run.args()}, {"steps", steps}};
}

void run_one(JobRun& run, const config::StepSpec& step, const TemplateRenderer& render,
             JobRun::Siblings siblings) {
  auto args = render(step.args, context_of(run));
  if (!args) throw StepFailed(step.name, "arguments: " + args.error().message());
  run.call_step(step.name, step.plugin, step.operation, *args, step.max_wait, siblings);
}

}  // namespace

nlohmann::json run_dag(JobRun& run, const config::JobTypeSpec& spec, const TemplateRenderer& render) {
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> done;
  std::set<std::string> started;
  int in_flight = 0;
  std::exception_ptr failure;  // the first step failure
  bool stop_launching = false;
  std::vector<std::jthread> threads;

  auto ready = [&](const config::StepSpec& s) {
    if (started.contains(s.name)) return false;
    for (const auto& dep : s.after) {
      if (!done.contains(dep)) return false;
    }
    return true;
  };

  std::unique_lock lock(mu);
  while (true) {
    std::vector<const config::StepSpec*> launch;
    // Committed steps are replayed here without a thread.
    for (bool progressed = true; progressed && !stop_launching;) {
      progressed = false;
      for (const auto& s : spec.steps) {
        if (ready(s) && run.checkpoint(s.name)) {
          started.insert(s.name);
          done.insert(s.name);
          progressed = true;
        }
      }
    }
    if (!stop_launching) {
      for (const auto& s : spec.steps) {
        if (ready(s)) launch.push_back(&s);
      }
    }
    for (std::size_t i = 0; i < launch.size(); ++i) {
      const config::StepSpec* s = launch[i];
      started.insert(s->name);
      ++in_flight;
      const auto siblings =
          launch.size() > 1 || in_flight > 1 ? JobRun::Siblings::kConcurrent : JobRun::Siblings::kSequential;
      auto body = [&, s, siblings] {
        std::exception_ptr error;
        try {
          run_one(run, *s, render, siblings);
        } catch (...) {
          error = std::current_exception();
        }
        std::lock_guard g(mu);
        --in_flight;
        if (error) {
          stop_launching = true;
          try {
            std::rethrow_exception(error);
          } catch (const RunSignal&) {
            // Recorded in the run; the executor acts on it.
          } catch (...) {
            if (!failure) failure = error;
          }
        } else {
          done.insert(s->name);
        }
        cv.notify_all();
      };
      if (launch.size() == 1 && in_flight == 1) {
        // A lone step (the common sequential case) runs on this thread.
        lock.unlock();
        body();
        lock.lock();
      } else {
        threads.emplace_back(body);
      }
    }
    if (in_flight == 0) {
      if (!launch.empty()) continue;  // a lone step ran inline; its dependents may be ready
      break;
    }
    cv.wait(lock);
  }
  lock.unlock();
  threads.clear();  // joins

  // A step's failure outranks a sibling's park: parking would resume the
  // job and call the failing step again, for ever if it fails every time.
  // The parked siblings' slots are given back when the attempt fails.
  if (failure && run.signal() == SignalKind::kParked) run.clear_park();
  if (SignalKind s = run.signal(); s != SignalKind::kNone) throw RunSignal{s};
  if (failure) std::rethrow_exception(failure);
  if (done.size() != spec.steps.size()) {
    std::string missing;
    for (const auto& s : spec.steps) {
      if (!done.contains(s.name)) missing += (missing.empty() ? "" : ", ") + s.name;
    }
    throw std::runtime_error("job type \"" + spec.name + "\": steps " + missing +
                             " can never start: their `after` names an unknown step or forms a cycle");
  }
  nlohmann::json result = nlohmann::json::object();
  for (const auto& [name, output] : run.checkpoints()) result[name] = output;
  return result;
}

}  // namespace ratchet::runtime
