#include "store/job_store.hpp"

namespace ratchet::store {

std::vector<LeaseWrite> JobStore::write_runs(const std::vector<const RunWrite*>& runs, Micros now) {
  std::vector<LeaseWrite> out;
  out.reserve(runs.size());
  for (const RunWrite* run : runs) {
    LeaseWrite w{true, false};
    if (run->steps.empty() && !run->result_json) {
      // Nothing but the renewal.
      auto held = renew(run->fence.owner, {{run->id, run->fence.token}}, now + run->lease, now);
      w = held.empty() ? LeaseWrite{} : LeaseWrite{true, held.front().cancel_requested};
    }
    for (const StepDone& step : run->steps) {
      // The run's claim fences its steps, whatever a step says; a step that
      // names it already (every one the engine writes) is not copied.
      const bool own =
          step.id == run->id && step.fence.owner == run->fence.owner && step.fence.token == run->fence.token;
      if (own) {
        w = checkpoint(step, now + run->lease, now);
      } else {
        StepDone fenced = step;
        fenced.id = run->id;
        fenced.fence = run->fence;
        w = checkpoint(fenced, now + run->lease, now);
      }
      if (!w.held) break;
    }
    if (w.held && run->result_json) w = complete(run->id, run->fence, *run->result_json, now);
    out.push_back(w);
  }
  return out;
}

}  // namespace ratchet::store
