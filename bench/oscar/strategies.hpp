// The rows of the benchmark: each runs setup.jobs "rate a movie" jobs (one
// call to each of the five portals per job) on setup.workers threads against
// the mock server, and returns the ratings it got and its makespan. The
// harness resets the server before each row and reads its counts after.
//
//   run_job_retry    retry the whole job with a per-job cache and backoff
//   run_barrier      one blocking barrier per portal that reads the reset header
//   run_blind_retry  retry any failed call after a random 1-5 s sleep
//   run_engine       the ratchet engine (engine_strategy.cpp)
//
// A strategy stops at setup.deadline and reports the jobs finished by then.
// Thread-safety: each call owns its threads; calls must not overlap (they
// share the server).
#pragma once

#include "setup.hpp"

namespace ratchet::bench {

RunResult run_job_retry(const BenchSetup& setup);
RunResult run_barrier(const BenchSetup& setup);
RunResult run_blind_retry(const BenchSetup& setup);

// The engine row: setup.engine_limits says whether the limits are declared
// in the TOML or left to be learned from the servers' headers.
RunResult run_engine(const BenchSetup& setup);

}  // namespace ratchet::bench
