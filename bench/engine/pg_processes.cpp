#include "pg_processes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "claim_time.hpp"
#include "ratchet/engine.hpp"
#include "store/open_store.hpp"

namespace ratchet::bench {
namespace {

using Steady = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench: %s\n", what.c_str());
  std::exit(1);
}

std::int64_t steady_ns(Steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

store::pg::Connection connect_or_die(const std::string& url) {
  auto c = store::pg::connect({url, std::nullopt, std::chrono::seconds(10)});
  if (!c) die(c.error().error().to_string());
  return std::move(*c);
}

std::int64_t query_int(store::pg::Connection& c, const std::string& sql) {
  auto r = c.exec(sql);
  if (!r) die(r.error().error().to_string());
  auto v = r->get_int64(0, 0);
  if (!v) die(v.error().to_string());
  return *v;
}

// Enqueues `jobs` no-op jobs through the engine, in transactions of 1000.
void enqueue_noop(const std::string& url, int jobs) {
  EngineOptions o;
  o.database = url;
  auto e = Engine::open(o);
  if (!e) die(e.error().to_string());
  if (!(*e)->define("noop", [](StepContext&) { return nlohmann::json(); })) die("define failed");
  std::vector<nlohmann::json> batch;
  for (int i = 0; i < jobs; i += 1000) {
    batch.assign(static_cast<std::size_t>(std::min(1000, jobs - i)), nlohmann::json::object());
    if (auto ids = (*e)->enqueue_many("noop", batch); !ids) die(ids.error().to_string());
  }
}

// A worker process: this program in its worker mode, spoken to through its
// stdin and stdout.
struct Child {
  pid_t pid = -1;
  int in = -1;          // the child's stdin
  FILE* out = nullptr;  // the child's stdout

  static Child spawn(const std::vector<std::string>& args) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) die("pipe failed");
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
      ::dup2(to[0], 0);
      ::dup2(from[1], 1);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    Child c;
    c.pid = pid;
    c.in = to[1];
    c.out = ::fdopen(from[0], "r");
    return c;
  }

  void say(const char* line) const {
    const std::size_t n = std::strlen(line);
    if (::write(in, line, n) != static_cast<ssize_t>(n)) die("a worker process is gone");
  }

  // The next line the child prints; dies when it exits first.
  std::string hear() const {
    char buf[512];
    if (std::fgets(buf, sizeof buf, out) == nullptr) die("a worker process exited early");
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }

  void finish() {
    ::close(in);
    std::fclose(out);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("a worker process failed");
  }

  bool exited() const {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) == pid;
  }
};

// "key=value" of a child's "done" line.
std::int64_t field(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    if (word.starts_with(key + "=")) return std::stoll(word.substr(key.size() + 1));
  }
  die("worker said '" + line + "' without " + key);
}

struct Drained {
  double rate = 0;
  long max_vmhwm_kib = 0;
  std::string vmhwm_list;  // each process's, in MiB
  std::int64_t completed = 0;
};

// Starts `processes` worker processes on `url`, lets them go at once, waits
// until no job is left unfinished (or each stopped after stop_after), stops
// them and reads their figures. Jobs/s from the go to the last completion.
Drained run_workers(const std::string& self, const std::string& url, int processes, int workers, int steps,
                    int poll_ms, long stop_after, long expected) {
  std::vector<Child> children;
  for (int i = 0; i < processes; ++i) {
    children.push_back(Child::spawn({self, "--pg-worker", url, "--workers", std::to_string(workers),
                                     "--steps", std::to_string(steps), "--poll-ms", std::to_string(poll_ms),
                                     "--stop-after", std::to_string(stop_after)}));
  }
  for (auto& c : children) {
    if (c.hear() != "ready") die("a worker process did not get ready");
  }
  auto conn = connect_or_die(url);
  const auto go = Steady::now();
  for (auto& c : children) c.say("go\n");
  if (stop_after == 0) {
    // Asks the database every 50 ms whether every job has ended, then stops
    // the workers (each notes when its own last job completed).
    while (query_int(conn,
                     "SELECT COUNT(*) FROM ratchet_jobs WHERE state NOT IN ('completed', 'dead', "
                     "'cancelled')") > 0) {
      for (auto& c : children) {
        if (c.exited()) die("a worker process exited early");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& c : children) c.say("stop\n");
  }
  Drained d;
  std::int64_t last_ns = 0;
  for (auto& c : children) {
    std::string done = c.hear();
    d.completed += field(done, "completed");
    last_ns = std::max(last_ns, field(done, "last_ns"));
    const long hwm = static_cast<long>(field(done, "vmhwm_kib"));
    d.max_vmhwm_kib = std::max(d.max_vmhwm_kib, hwm);
    d.vmhwm_list += (d.vmhwm_list.empty() ? "" : ",") + std::to_string((hwm + 512) / 1024);
    c.finish();
  }
  if (expected > 0) {
    const std::int64_t ok = query_int(conn, "SELECT COUNT(*) FROM ratchet_jobs WHERE state = 'completed'");
    if (ok != expected || d.completed != expected) {
      die("expected " + std::to_string(expected) + " completed jobs, the database has " + std::to_string(ok) +
          " and the workers report " + std::to_string(d.completed));
    }
  }
  const double secs = static_cast<double>(last_ns - steady_ns(go)) / 1e9;
  d.rate = secs > 0 ? static_cast<double>(d.completed) / secs : 0;
  return d;
}

}  // namespace

Schema::~Schema() {
  if (admin) (void)admin->exec("SET client_min_messages = warning; DROP SCHEMA " + name + " CASCADE");
}

std::unique_ptr<Schema> fresh_schema(const std::string& url, const std::string& tag) {
  auto s = std::make_unique<Schema>();
  s->name = "ratchet_bench_" + std::to_string(::getpid()) + "_" + tag;
  auto c = connect_or_die(url);
  if (auto made = c.exec("CREATE SCHEMA " + s->name); !made) die(made.error().error().to_string());
  s->admin.emplace(std::move(c));
  s->url = url + (url.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + s->name;
  return s;
}

std::string synchronous_commit(const std::string& url) {
  auto c = connect_or_die(url);
  auto r = c.exec("SHOW synchronous_commit");
  if (!r) die(r.error().error().to_string());
  return std::string(r->get_text(0, 0));
}

long vmhwm_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
  }
  return 0;
}

void processes_table(const ProcessesOptions& o) {
  std::printf(
      "ratchet on PostgreSQL: synchronous_commit = %s; %d pre-enqueued no-op jobs per run, %d workers "
      "over all processes, poll interval %d ms\n",
      synchronous_commit(o.url).c_str(), o.jobs, o.concurrency, o.poll_ms);
  std::fflush(stdout);
  for (int procs : o.processes) {
    if (procs <= 0 || o.concurrency % procs != 0) die("the concurrency must divide by each process count");
    for (int steps : o.steps) {
      auto schema = fresh_schema(o.url, std::to_string(procs) + "_" + std::to_string(steps));
      enqueue_noop(schema->url, o.jobs);
      Drained d = run_workers(o.self, schema->url, procs, o.concurrency / procs, steps, o.poll_ms, 0, o.jobs);
      std::printf(
          "RESULT system=ratchet processes=%d concurrency=%d steps=%d jobs=%d rate=%.1f vmhwm_kib=%ld "
          "vmhwm_mib_each=%s settings=workers=%d/process,poll_interval=%dms\n",
          procs, o.concurrency, steps, o.jobs, d.rate, d.max_vmhwm_kib, d.vmhwm_list.c_str(),
          o.concurrency / procs, o.poll_ms);
      std::fflush(stdout);
    }
  }
}

int worker_main(const WorkerOptions& o) {
  EngineOptions eo;
  eo.database = o.url;
  eo.workers = o.workers;
  eo.poll_interval = std::chrono::milliseconds(o.poll_ms);
  auto e = Engine::open(eo);
  if (!e) die(e.error().to_string());
  Engine& engine = **e;
  std::vector<std::string> names;
  for (int i = 0; i < o.steps; ++i) names.push_back("s" + std::to_string(i));
  auto defined = engine.define("noop", [&](StepContext& ctx) {
    for (const auto& n : names) ctx.step(n, [] { return nlohmann::json(); });
    return nlohmann::json();
  });
  if (!defined) die(defined.error().to_string());

  std::mutex mu;
  std::condition_variable cv;
  long completed = 0;
  std::int64_t last_ns = 0;
  engine.subscribe([&](const JobEvent& ev) {
    if (ev.kind != JobEvent::Kind::kCompleted) return;
    const std::int64_t now = steady_ns(Steady::now());
    std::lock_guard lock(mu);
    ++completed;
    last_ns = now;
    if (o.stop_after > 0 && completed >= o.stop_after) cv.notify_all();
  });

  std::printf("ready\n");
  std::fflush(stdout);
  char line[64];
  if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "go", 2) != 0) return 1;
  if (auto st = engine.start(); !st) die(st.error().to_string());
  if (o.stop_after > 0) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return completed >= o.stop_after; });
  } else if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "stop", 4) != 0) {
    return 1;
  }
  engine.stop();
  long done = 0;
  std::int64_t last = 0;
  {
    std::lock_guard lock(mu);
    done = completed;
    last = last_ns;
  }
  std::printf("done completed=%ld last_ns=%lld vmhwm_kib=%ld\n", done, static_cast<long long>(last),
              vmhwm_kib());
  std::fflush(stdout);
  return 0;
}

void million_postgres(const std::string& url, const std::string& self, int workers) {
  std::printf(
      "ratchet on PostgreSQL: claim time and a worker process's memory with jobs queued "
      "(synchronous_commit = %s)\n",
      synchronous_commit(url).c_str());
  std::printf("%10s | %17s | %12s | %17s | %16s | %14s\n", "queued", "claim 16 (median)", "claim (max)",
              "claims > 10x med.", "worker VmHWM", "worker jobs/s");
  std::fflush(stdout);
  double first_median = 0;
  for (int queued : {1000, 1000000}) {
    auto schema = fresh_schema(url, "million_" + std::to_string(queued));
    enqueue_noop(schema->url, 1000);
    if (queued > 1000) {
      // The rest are copies of the engine's first row, made by the server,
      // each due a microsecond before the one after it, as jobs enqueued
      // one by one are. The table has no statistics yet (no ANALYZE ran),
      // which is what a claim right after a large load meets.
      auto c = connect_or_die(schema->url);
      auto copied = c.exec(
          "INSERT INTO ratchet_jobs (type, queue, args, state, priority, run_at_us, max_attempts, "
          "created_us, "
          "updated_us) SELECT j.type, j.queue, j.args, j.state, j.priority, j.run_at_us - g, j.max_attempts, "
          "j.created_us, j.updated_us FROM (SELECT * FROM ratchet_jobs ORDER BY id LIMIT 1) j, "
          "generate_series(1, " +
          std::to_string(queued - 1000) + ") g");
      if (!copied) die(copied.error().error().to_string());
    }
    ClaimTimes t;
    {
      store::StoreOptions so;
      so.database = schema->url;
      auto s = store::open_store(so);
      if (!s) die(s.error().to_string());
      t = claim_ms(**s, 16, 200);
    }
    // A worker process runs 1000 jobs (the whole queue of a thousand).
    Drained d = run_workers(self, schema->url, 1, workers, 1, 10, 1000, 0);
    std::printf("%10d | %14.3f ms | %9.1f ms | %17d | %11.1f MiB | %7.0f jobs/s\n", queued, t.median_ms,
                t.max_ms, t.over_10x, static_cast<double>(d.max_vmhwm_kib) / 1024, d.rate);
    std::printf(
        "RESULT system=ratchet-million queued=%d claim_ms=%.3f claim_max_ms=%.1f claims_over_10x=%d "
        "vmhwm_kib=%ld rate=%.1f workers=%d\n",
        queued, t.median_ms, t.max_ms, t.over_10x, d.max_vmhwm_kib, d.rate, workers);
    if (queued == 1000) first_median = t.median_ms;
    if (queued == 1000000) {
      std::printf("claim time with 10^6 queued / with 10^3: %.2f (median of 200 claims each)\n",
                  t.median_ms / first_median);
    }
    std::fflush(stdout);
  }
}

}  // namespace ratchet::bench
