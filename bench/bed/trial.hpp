// One trial of the test bed: the engine, with no limit declared, runs N jobs
// of one call each against the server a seed drew, and the trial reads back
// what the server saw.
//
// Thread-safety: one thread runs a trial.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "server_draw.hpp"

namespace ratchet::bench {

struct TrialResult {
  BedServer server;
  bool ran = false;
  std::string note;  // why it did not run, or what went wrong
  std::int64_t requests = 0;
  std::int64_t throttled = 0;  // 429s
  std::int64_t errors = 0;     // 5xx
  int completed = 0;
  std::int64_t parks = 0;  // park transitions over every job
  double makespan_s = 0;   // first request's arrival to last answer
  double bound_s = 0;
  // Arrivals at the portal, in microseconds from the first (behind nginx:
  // the ones nginx let through).
  std::vector<std::int64_t> arrivals_us;
  // The same arrivals' Unix microseconds and answers' statuses.
  std::vector<std::int64_t> arrived_at_us;
  std::vector<int> statuses;

  double share_429() const;
  double ratio() const;  // makespan over bound
  bool passed() const;
};

struct TrialSetup {
  std::filesystem::path work_dir;
  std::filesystem::path plugin_dir;
  int workers = 8;
};

TrialResult run_trial(const TrialSetup& setup, const BedServer& server);

}  // namespace ratchet::bench
