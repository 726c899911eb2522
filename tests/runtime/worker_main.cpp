// A small program the process tests start as children:
// DB is an SQLite file or a postgresql:// URL.
//   worker DB enqueue N              enqueue N five-step jobs
//   worker DB enqueue-crash N        enqueue one job whose step crashes its
//                                    process (SIGSEGV) while N slow one-step
//                                    jobs, also enqueued, run beside it
//   worker DB work RUNS LEASE_MS     run jobs until none is pending, then exit 0
// Each step appends "RUN <job> <step> <pid>" to the RUNS file before it
// returns, and first checks (on its own connection) whether that step's
// checkpoint is already committed: if so it appends "VIOLATION ...", because
// a committed step must never run again.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <SQLiteCpp/Database.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "ratchet/engine.hpp"
#include "store/postgres/connection.hpp"

namespace {

int g_runs_fd = -1;
std::string g_db;

void append(const std::string& line) {
  std::string l = line + "\n";
  // O_APPEND writes of one short line are atomic and survive SIGKILL (they
  // are in the page cache once write returns).
  if (::write(g_runs_fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) std::abort();
}

// On a PostgreSQL database (DB is a postgresql:// URL): the same question of
// ratchet_steps, on a connection of this thread's own.
bool already_committed_on_server(ratchet::JobId id, const std::string& step) {
  thread_local std::optional<ratchet::store::pg::Connection> c;
  // The server may be restarting (a failover test): ask again on a new session.
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (!c) {
      auto opened = ratchet::store::pg::connect({g_db, std::nullopt, std::chrono::seconds(10)});
      if (!opened) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      c.emplace(std::move(*opened));
    }
    auto rows =
        c->exec_params("SELECT 1 FROM ratchet_steps WHERE job_id = $1 AND name = $2 AND state = 'completed'",
                       {std::to_string(id), step});
    if (rows) return rows->size() > 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)c->reset();
  }
  std::abort();
}

bool already_committed(ratchet::JobId id, const std::string& step) {
  if (g_db.starts_with("postgresql://")) return already_committed_on_server(id, step);
  thread_local std::unique_ptr<SQLite::Database> db;
  if (!db) db = std::make_unique<SQLite::Database>(g_db, SQLite::OPEN_READONLY, 10000);
  SQLite::Statement q(*db, "SELECT 1 FROM steps WHERE job_id = ? AND name = ? AND state = 'completed'");
  q.bind(1, id);
  q.bind(2, step);
  return q.executeStep();
}

ratchet::JobTypeOptions five_options() {
  ratchet::JobTypeOptions o;
  o.attempts = 1000;
  o.backoff.initial = std::chrono::milliseconds(5);
  o.backoff.max = std::chrono::milliseconds(50);
  o.args = {{"n", ratchet::ArgKind::kInteger, true}};
  return o;
}

nlohmann::json five_steps(ratchet::StepContext& ctx) {
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < 5; ++i) {
    std::string name = "s" + std::to_string(i);
    out.push_back(ctx.step(name, [&] {
      std::string where = std::to_string(ctx.job_id()) + " " + name + " " + std::to_string(::getpid());
      if (already_committed(ctx.job_id(), name)) append("VIOLATION " + where);
      append("RUN " + where);
      return nlohmann::json(i);
    }));
  }
  return out;
}

// Slow steps of this process in the middle of their sleep.
std::atomic<int> g_slow_running{0};

// Crashes its process once a slow job of the process is in the middle of
// its step (or after 3 s without one): a process that starts its workers
// slowly (a sanitizer's) would otherwise crash before claiming them.
nlohmann::json crashing(ratchet::StepContext& ctx) {
  return ctx.step("boom", [] {
    for (int i = 0; i < 300 && g_slow_running.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::raise(SIGSEGV);
    return nlohmann::json(nullptr);
  });
}

nlohmann::json slow(ratchet::StepContext& ctx) {
  return ctx.step("wait", [] {
    g_slow_running.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    g_slow_running.fetch_sub(1);
    return nlohmann::json(true);
  });
}

ratchet::JobTypeOptions many_attempts() {
  ratchet::JobTypeOptions o;
  o.attempts = 20;
  o.backoff.initial = std::chrono::milliseconds(5);
  o.backoff.max = std::chrono::milliseconds(50);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DB enqueue N | DB work RUNS LEASE_MS\n", argv[0]);
    return 2;
  }
  g_db = argv[1];
  std::string mode = argv[2];
  ratchet::EngineOptions o;
  o.database = g_db;
  o.workers = 4;
  o.busy_timeout = std::chrono::seconds(20);
  o.poll_interval = std::chrono::milliseconds(20);
  // max_lease_expiries keeps its default: thirty outside kills make no job
  // dead (store/quarantine.hpp).
  if (mode == "work") {
    if (argc < 5) return 2;
    o.lease = std::chrono::milliseconds(std::atoi(argv[4]));
    o.heartbeat = o.lease / 5;
  }
  auto engine = ratchet::Engine::open(o);
  if (!engine) {
    std::fprintf(stderr, "%s\n", engine.error().to_string().c_str());
    return 1;
  }
  auto& e = **engine;
  if (auto st = e.define("five", five_steps, five_options()); !st) return 1;
  if (auto st = e.define("crash", crashing, many_attempts()); !st) return 1;
  if (auto st = e.define("slow", slow, many_attempts()); !st) return 1;
  if (mode == "enqueue-crash") {
    // The crashing job first, so that every claim takes it with the slow ones.
    if (!e.enqueue("crash", nlohmann::json::object())) return 1;
    std::vector<nlohmann::json> args(static_cast<std::size_t>(std::atoi(argv[3])), nlohmann::json::object());
    return e.enqueue_many("slow", args) ? 0 : 1;
  }
  if (mode == "enqueue") {
    std::vector<nlohmann::json> args;
    for (int i = 0; i < std::atoi(argv[3]); ++i) args.push_back({{"n", i}});
    auto ids = e.enqueue_many("five", args);
    if (!ids) {
      std::fprintf(stderr, "%s\n", ids.error().to_string().c_str());
      return 1;
    }
    return 0;
  }
  if (mode != "work") return 2;
  g_runs_fd = ::open(argv[3], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (g_runs_fd < 0) return 1;
  if (auto st = e.start(); !st) return 1;
  auto drained = e.drain(std::chrono::seconds(100));
  e.stop();
  if (!drained) {
    std::fprintf(stderr, "%s\n", drained.error().to_string().c_str());
    return 1;
  }
  return 0;
}
