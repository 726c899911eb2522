// How the ratchet command shows jobs: JSON for scripts (--json) and text
// for people (a table for `jobs list`, a report for `jobs show`).
// Pure functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/job.hpp"

namespace ratchet::cli {

// Every field of the record; steps, errors and timeline when present.
nlohmann::json to_json(const JobRecord& job);

// One header line and one line per job.
std::string list_table(const std::vector<JobRecord>& jobs, TimePoint now);

// Arguments, state, attempts, steps (output, attempts, duration, last
// error), attempt errors and the timeline of waits and parks.
std::string show_report(const JobRecord& job, TimePoint now);

}  // namespace ratchet::cli
