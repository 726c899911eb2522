// One run of the engine over a batch of jobs, as the oscar rows that start
// their own portal server do it: open the config, enqueue every job, start,
// drain (up to a deadline) and stop. The engine stays open for reading the
// jobs back.
//
// Thread-safety: one thread runs it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/engine.hpp"
#include "ratchet/status.hpp"

namespace ratchet::bench {

struct EngineRun {
  std::unique_ptr<Engine> engine;
  std::vector<JobId> ids;  // in the order of the jobs' arguments
  std::chrono::system_clock::time_point began;
  double makespan_s = 0;  // from the enqueue to the end of the drain
};

// What the run's jobs came to: how many completed, and their parks (timeline
// rows of kind "parked") over every job.
struct JobTally {
  int completed = 0;
  std::int64_t parks = 0;
};
JobTally tally_jobs(const EngineRun& run);

[[nodiscard]] Result<EngineRun> run_jobs(const std::filesystem::path& config, const std::string& job_type,
                                         const std::vector<nlohmann::json>& args,
                                         std::chrono::seconds deadline);

}  // namespace ratchet::bench
