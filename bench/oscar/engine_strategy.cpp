// The engine row: ratchet itself runs the N "rate a movie" jobs.
//
// ===================================================================
// INTEGRATION SLOT. This build has no job engine (store and runtime are
// assembled elsewhere), so run_engine reports itself unavailable and the
// table shows the row with that note. To fill it in against the assembled
// engine:
//   1. setup.write_engine_toml(setup.work_dir / "oscar.toml",
//                              setup.work_dir / "oscar.db")
//      (remove any oscar.db left by the previous engine row first); the
//      TOML declares the portals' limits when setup.engine_limits is
//      EngineLimits::kDeclared and none when kLearned, so the two engine
//      rows differ only there. Plugins load from setup.plugin_dir.
//   2. open the engine on that file with setup.workers workers, enqueue
//      one `rate_movie` job per setup.movies[i] with args {"name": movie},
//      and time from the first enqueue until the last job succeeds or
//      setup.deadline passes.
//   3. fill RunResult::jobs[i].ratings[p] from step p's output
//      ({"rating": x}; portals in setup.portals order) and `completed`.
// The harness already resets the server before the row and reads the
// requests, 429s and max-in-window counts from its /_stats afterwards.
// ===================================================================
#include "strategies.hpp"

namespace ratchet::bench {

RunResult run_engine([[maybe_unused]] const BenchSetup& setup) {
  RunResult result;
  result.available = false;
  result.note = "not available in this build";
  return result;
}

}  // namespace ratchet::bench
