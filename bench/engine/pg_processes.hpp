// The engine benchmark on PostgreSQL with several worker processes: jobs
// are enqueued once, then P child processes (this program again, in its
// worker mode) drain them; and the claim time with a million jobs queued.
//
// Each run uses a fresh schema of the database, dropped afterwards. Results
// are printed as "RESULT key=value ..." lines (tools/bench_pg.sh gathers
// them into one table with the peers' lines).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/postgres/connection.hpp"

namespace ratchet::bench {

// A fresh schema on `url`'s database for one run; dropped by its destructor.
struct Schema {
  std::string url;  // `url` with the schema first on the search_path
  std::string name;
  std::optional<store::pg::Connection> admin;
  ~Schema();
};
std::unique_ptr<Schema> fresh_schema(const std::string& url, const std::string& tag);

// The value of `SHOW synchronous_commit` on `url`'s server.
std::string synchronous_commit(const std::string& url);

// This process's peak resident memory (VmHWM of /proc/self/status) in KiB.
long vmhwm_kib();

struct ProcessesOptions {
  std::string url;
  std::string self;  // this program, run again as the workers
  int jobs = 10000;
  int concurrency = 32;  // workers over all processes
  std::vector<int> processes{1, 2, 4};
  std::vector<int> steps{1, 5};
  int poll_ms = 10;
};
// P processes of concurrency/P workers each drain `jobs` pre-enqueued no-op
// jobs, for each process count and step count.
void processes_table(const ProcessesOptions& o);

// The worker process of processes_table and million_postgres: opens the
// engine, says "ready", starts at "go" on stdin and stops at "stop" (or
// after `stop_after` completions), then prints what it did.
struct WorkerOptions {
  std::string url;
  int workers = 8;
  int steps = 1;
  int poll_ms = 10;
  long stop_after = 0;  // 0: until told to stop
};
int worker_main(const WorkerOptions& o);

// Claim time (median of a 16-job claim) with 10^3 and 10^6 jobs queued, and
// a worker process's VmHWM while it runs jobs off the million.
void million_postgres(const std::string& url, const std::string& self, int workers);

}  // namespace ratchet::bench
