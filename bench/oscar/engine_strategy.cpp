// The engine row: ratchet itself runs the N "rate a movie" jobs, from a TOML
// file that declares the portals' limits (or, for the "learned" row, none),
// with the portal plugins of the build tree.
#include <chrono>
#include <filesystem>

#include "ratchet/engine.hpp"
#include "strategies.hpp"

namespace ratchet::bench {

RunResult run_engine(const BenchSetup& setup) {
  RunResult result;
  namespace fs = std::filesystem;
  const fs::path config = setup.work_dir / "oscar.toml";
  const fs::path database = setup.work_dir / "oscar.db";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(database.string() + suffix);
  if (auto st = setup.write_engine_toml(config, database); !st) {
    result.available = false;
    result.note = st.error().message();
    return result;
  }
  auto engine = Engine::open_config(config);
  if (!engine) {
    result.available = false;
    result.note = engine.error().to_string();
    return result;
  }
  std::vector<nlohmann::json> args;
  for (const auto& movie : setup.movies) args.push_back({{"name", movie}});

  auto t0 = std::chrono::steady_clock::now();
  auto ids = (*engine)->enqueue_many("rate_movie", args);
  if (!ids) {
    result.available = false;
    result.note = ids.error().to_string();
    return result;
  }
  (void)(*engine)->start();
  (void)(*engine)->drain(setup.deadline);
  result.makespan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  (*engine)->stop();

  result.parks = 0;
  for (JobId id : *ids) {
    JobRecord record;
    auto job = (*engine)->get(id);
    if (job) {
      record.completed = job->state == JobState::kCompleted;
      for (const auto& t : job->timeline) result.parks += t.kind == "parked" ? 1 : 0;
      for (const auto& step : job->steps) {
        for (std::size_t p = 0; p < setup.portals.size(); ++p) {
          if (setup.portals[p].name == step.name && step.output.contains("rating")) {
            record.ratings[p] = step.output["rating"].get<double>();
          }
        }
      }
    }
    result.jobs.push_back(record);
  }
  return result;
}

}  // namespace ratchet::bench
