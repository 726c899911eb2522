// Engine throughput against the raw SQLite ceiling on this disk.
//
//   ratchet_engine_bench [--jobs N] [--workers N] [--dir PATH]
//   ratchet_engine_bench --million [--dir PATH]
//   ratchet_engine_bench --postgres URL [--jobs N] [--workers N]
//   ratchet_engine_bench --postgres URL --processes 1,2,4 [--concurrency C]
//                        [--steps 1,5] [--jobs N] [--poll-ms MS]
//   ratchet_engine_bench --postgres URL --million [--workers N]
//
// (a) raw: the eight single-row commits a naive five-step job needs
//     (enqueue, claim, five checkpoints, complete), same schema and pragmas,
//     in a tight loop; (b) the engine running no-op five-step jobs from
//     enqueue to completed, each checkpoint durable before the next step;
//     (c) the engine running no-op one-step jobs. At synchronous NORMAL and
//     FULL. --million: resident memory and claim time with 10^6 jobs queued
//     versus 10^3.
// On PostgreSQL, --processes: jobs enqueued first, then drained by P worker
// processes of C/P workers each (pg_processes.hpp); with --million, the
// claim time and a worker process's VmHWM with 10^6 jobs queued versus 10^3.
#include <sys/resource.h>
#include <unistd.h>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "claim_time.hpp"
#include "common/database_url.hpp"
#include "pg_processes.hpp"
#include "ratchet/engine.hpp"
#include "runtime/engine_impl.hpp"
#include "store/sqlite/database.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

long peak_rss_kib() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

long current_rss_kib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

void remove_db(const fs::path& p) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
}

// (a) eight autocommit single-row writes per job.
double raw_ceiling(const fs::path& path, bool full, int jobs) {
  remove_db(path);
  ratchet::store::DatabaseOptions o;
  o.path = path;
  o.synchronous_full = full;
  auto db = ratchet::store::open_database(o);
  if (!db) {
    std::fprintf(stderr, "%s\n", db.error().to_string().c_str());
    std::exit(1);
  }
  SQLite::Database& d = **db;
  SQLite::Statement ins(
      d,
      "INSERT INTO jobs (type, queue, args, state, priority, run_at_us, max_attempts, created_us, "
      "updated_us) VALUES ('noop', 'default', '{}', 'available', 0, 1, 20, 1, 1)");
  SQLite::Statement claim(d,
                          "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = 'w', "
                          "lease_expires_us = 2 WHERE id = ?");
  SQLite::Statement step(d,
                         "INSERT INTO steps (job_id, name, state, output, attempts, started_us, finished_us) "
                         "VALUES (?, ?, 'completed', 'null', 1, 1, 1)");
  SQLite::Statement done(
      d,
      "UPDATE jobs SET state = 'completed', result = 'null', lease_owner = NULL, finished_us = 3 "
      "WHERE id = ?");
  const char* names[] = {"s0", "s1", "s2", "s3", "s4"};
  auto start = Clock::now();
  for (int j = 0; j < jobs; ++j) {
    ins.reset();
    ins.exec();
    auto id = d.getLastInsertRowid();
    claim.reset();
    claim.bind(1, id);
    claim.exec();
    for (const char* n : names) {
      step.reset();
      step.bind(1, id);
      step.bind(2, n);
      step.exec();
    }
    done.reset();
    done.bind(1, id);
    done.exec();
  }
  return jobs / seconds_since(start);
}

// (b)/(c) the engine from enqueue to completed.
double engine_rate(const std::string& path, bool full, int jobs, int workers, int steps) {
  if (!ratchet::common::is_server_url(path)) remove_db(path);
  ratchet::EngineOptions o;
  o.database = path;
  o.sqlite.synchronous_full = full;
  o.workers = workers;
  o.poll_interval = std::chrono::milliseconds(50);
  auto e = ratchet::Engine::open(o);
  if (!e) {
    std::fprintf(stderr, "%s\n", e.error().to_string().c_str());
    std::exit(1);
  }
  auto& engine = **e;
  std::vector<std::string> names;
  for (int i = 0; i < steps; ++i) names.push_back("s" + std::to_string(i));
  auto st = engine.define("noop", [&](ratchet::StepContext& ctx) {
    for (const auto& n : names) ctx.step(n, [] { return nlohmann::json(); });
    return nlohmann::json();
  });
  if (!st) std::exit(1);
  std::vector<nlohmann::json> args(static_cast<std::size_t>(jobs), nlohmann::json::object());
  auto start = Clock::now();
  if (!engine.start()) std::exit(1);
  // Enqueued in batches, as a producer would, while the workers run.
  for (std::size_t i = 0; i < args.size(); i += 500) {
    std::vector<nlohmann::json> batch(args.begin() + static_cast<long>(i),
                                      args.begin() + static_cast<long>(std::min(args.size(), i + 500)));
    if (!engine.enqueue_many("noop", batch)) std::exit(1);
  }
  if (!engine.drain(std::chrono::minutes(10))) std::exit(1);
  double rate = jobs / seconds_since(start);
  if (std::getenv("RATCHET_BENCH_VERBOSE") != nullptr) {
    std::fprintf(stderr, "  %d jobs x %d steps: %.0f jobs/s, %llu commits\n", jobs, steps, rate,
                 static_cast<unsigned long long>(ratchet::EngineAccess::impl(engine).store->commits()));
  }
  engine.stop();
  auto counts = engine.counts();
  for (const auto& [state, n] : *counts) {
    if (state != ratchet::JobState::kCompleted) {
      std::fprintf(stderr, "bench: %lld jobs ended %s\n", static_cast<long long>(n),
                   std::string(ratchet::to_string(state)).c_str());
      std::exit(1);
    }
  }
  return rate;
}

void table(const fs::path& dir, int jobs, int workers) {
  std::printf("ratchet engine benchmark: %d jobs per run, %d workers, database in %s\n", jobs, workers,
              dir.c_str());
  std::printf("%-8s | %18s | %18s | %6s | %18s | %6s | %9s\n", "sync", "(a) raw 8 commits",
              "(b) engine 5-step", "b/a", "(c) engine 1-step", "c/a", "peak RSS");
  for (bool full : {false, true}) {
    auto db = dir / "bench.db";
    int raw_jobs = full ? std::max(200, jobs / 10) : std::max(1000, jobs / 3);
    double a = raw_ceiling(db, full, raw_jobs);
    double b = engine_rate(db.string(), full, jobs, workers, 5);
    double c = engine_rate(db.string(), full, jobs * 2, workers, 1);
    std::printf("%-8s | %12.0f jobs/s | %12.0f jobs/s | %5.2fx | %12.0f jobs/s | %5.2fx | %6ld MiB\n",
                full ? "FULL" : "NORMAL", a, b, b / a, c, c / a, peak_rss_kib() / 1024);
    std::fflush(stdout);
    remove_db(db);
  }
}

void million(const fs::path& dir) {
  auto db = dir / "million.db";
  std::printf("ratchet engine benchmark: claim time and memory with jobs queued\n");
  std::printf("%10s | %16s | %12s | %12s\n", "queued", "claim 16 (median)", "RSS now", "peak RSS");
  for (int queued : {1000, 1000000}) {
    remove_db(db);
    ratchet::EngineOptions o;
    o.database = db;
    auto e = ratchet::Engine::open(o);
    if (!e) std::exit(1);
    if (!(*e)->define("noop", [](ratchet::StepContext&) { return nlohmann::json(); })) std::exit(1);
    std::vector<nlohmann::json> batch(10000, nlohmann::json{{"n", 1}});
    for (int i = 0; i < queued; i += 10000) {
      batch.resize(static_cast<std::size_t>(std::min(10000, queued - i)));
      if (!(*e)->enqueue_many("noop", batch)) std::exit(1);
    }
    ratchet::store::DatabaseOptions so;
    so.path = db;
    auto store = ratchet::store::SqliteStore::open(so);
    if (!store) std::exit(1);
    double ms = ratchet::bench::claim_ms(**store, 16, 200).median_ms;
    if (ms <= 0) std::exit(1);
    std::printf("%10d | %13.3f ms | %8ld MiB | %8ld MiB\n", queued, ms, current_rss_kib() / 1024,
                peak_rss_kib() / 1024);
    std::fflush(stdout);
  }
  remove_db(db);
}

void postgres_table(const std::string& url, int jobs, int workers) {
  std::printf("ratchet engine benchmark on PostgreSQL: %d jobs per run, %d workers, one process\n", jobs,
              workers);
  std::printf("%18s | %18s | %9s\n", "engine 5-step", "engine 1-step", "peak RSS");
  auto five = ratchet::bench::fresh_schema(url, "1");
  const double b = engine_rate(five->url, false, jobs, workers, 5);
  five.reset();
  auto one = ratchet::bench::fresh_schema(url, "2");
  const double c = engine_rate(one->url, false, jobs * 2, workers, 1);
  one.reset();
  std::printf("%12.0f jobs/s | %12.0f jobs/s | %6ld MiB\n", b, c, peak_rss_kib() / 1024);
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    std::size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::stoi(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

std::string self_path(const char* argv0) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 20000;
  int workers = 128;
  bool one_million = false;
  std::string postgres;
  fs::path dir = fs::temp_directory_path();
  std::optional<std::vector<int>> processes;
  ratchet::bench::ProcessesOptions po;
  std::optional<ratchet::bench::WorkerOptions> worker;
  bool workers_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--jobs") {
      jobs = std::stoi(next());
    } else if (a == "--workers") {
      workers = std::stoi(next());
      workers_given = true;
    } else if (a == "--dir") {
      dir = next();
    } else if (a == "--million") {
      one_million = true;
    } else if (a == "--postgres") {
      postgres = next();
    } else if (a == "--processes") {
      processes = int_list(next());
    } else if (a == "--concurrency") {
      po.concurrency = std::stoi(next());
    } else if (a == "--steps") {
      po.steps = int_list(next());
    } else if (a == "--poll-ms") {
      po.poll_ms = std::stoi(next());
    } else if (a == "--pg-worker") {
      // Internal: one worker process of --processes and --million.
      worker.emplace();
      worker->url = next();
    } else if (a == "--stop-after" && worker) {
      worker->stop_after = std::stol(next());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--jobs N] [--workers N] [--dir PATH] [--million] [--postgres URL "
                   "[--processes 1,2,4] [--concurrency C] [--steps 1,5] [--poll-ms MS]]\n",
                   argv[0]);
      return 2;
    }
  }
  if (worker) {
    worker->workers = workers;
    worker->steps = po.steps.front();
    worker->poll_ms = po.poll_ms;
    return ratchet::bench::worker_main(*worker);
  }
  if (!postgres.empty() && one_million) {
    ratchet::bench::million_postgres(postgres, self_path(argv[0]), workers_given ? workers : 32);
  } else if (!postgres.empty() && processes) {
    po.url = postgres;
    po.self = self_path(argv[0]);
    po.jobs = jobs;
    po.processes = *processes;
    ratchet::bench::processes_table(po);
  } else if (!postgres.empty()) {
    postgres_table(postgres, jobs, workers);
  } else if (one_million) {
    million(dir);
  } else {
    table(dir, jobs, workers);
  }
  return 0;
}
