// The weighted rows of the oscar benchmark: N jobs, each one query that
// costs the portal 1 to `max_cost` units (seeded), against a portal that
// allows `portal_rate` units a second in clock-aligned windows (IETF
// headers) and says what each query cost (X-Query-Cost). The engine
// declares the portal's limit through http_json and knows the cost four
// ways, one row each:
//   - declared: the operation's cost is a job argument (`cost =
//     "{{args.points}}"`), read before the call is admitted;
//   - estimated: the plugin estimates each call's cost from the job
//     (http_json `estimate`) before it is admitted, and the reply confirms
//     it (`cost_header`);
//   - reported: only the reply says what a call cost: a call is admitted
//     in turn at the least the calls before it cost (one unit before the
//     first reply) and corrected at once (an overdraft the next calls wait
//     for);
//   - ignored: every call counts one unit, whatever it cost.
//
// Measured: makespan against the bound (the units of all jobs over the
// portal's rate), 429s, the busiest aligned second in units, parks per call.
//
// Thread-safety: one thread runs a row.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ratchet::bench {

struct WeightedSetup {
  int jobs = 500;
  int workers = 16;
  std::int64_t portal_rate = 100;  // units a second
  std::int64_t max_cost = 6;       // a query costs 1..max_cost units
  std::uint64_t seed = 42;
  std::chrono::seconds deadline{120};
  std::filesystem::path plugin_dir;
  std::filesystem::path work_dir;

  std::int64_t cost_of(int job) const;
  std::int64_t units() const;  // of every job
  double bound_seconds() const;
};

struct WeightedRow {
  std::string name;
  bool available = true;
  std::string note;
  int jobs_completed = 0;
  double makespan_s = 0;
  std::int64_t requests = 0;
  std::int64_t units = 0;  // as the portal counted them, refused requests too
  std::int64_t throttled = 0;
  std::int64_t parks = 0;
  std::int64_t max_in_second = 0;  // units in the portal's busiest aligned second
};

// `knows` is "declared", "estimated", "reported" or "ignored" (see above).
WeightedRow run_weighted(const WeightedSetup& setup, const std::string& knows);
void print_weighted(std::ostream& out, const WeightedSetup& setup, const std::vector<WeightedRow>& rows);
nlohmann::json weighted_json(const WeightedSetup& setup, const std::vector<WeightedRow>& rows);

}  // namespace ratchet::bench
