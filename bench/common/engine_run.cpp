#include "engine_run.hpp"

namespace ratchet::bench {

Result<EngineRun> run_jobs(const std::filesystem::path& config, const std::string& job_type,
                           const std::vector<nlohmann::json>& args, std::chrono::seconds deadline) {
  EngineRun run;
  auto engine = Engine::open_config(config);
  if (!engine) return fail(engine.error());
  run.engine = std::move(*engine);
  run.began = std::chrono::system_clock::now();
  auto ids = run.engine->enqueue_many(job_type, args);
  if (!ids) return fail(ids.error());
  run.ids = std::move(*ids);
  (void)run.engine->start();
  (void)run.engine->drain(deadline);
  run.makespan_s = std::chrono::duration<double>(std::chrono::system_clock::now() - run.began).count();
  run.engine->stop();
  return run;
}

JobTally tally_jobs(const EngineRun& run) {
  JobTally t;
  for (JobId id : run.ids) {
    auto job = run.engine->get(id);
    if (!job) continue;
    for (const auto& row : job->timeline) t.parks += row.kind == "parked" ? 1 : 0;
    if (job->state == JobState::kCompleted) ++t.completed;
  }
  return t;
}

}  // namespace ratchet::bench
