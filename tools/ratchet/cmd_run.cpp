// `ratchet run`: starts the workers and runs until stopped.
//
// Signals are blocked in every thread and taken synchronously here with
// sigtimedwait, so no handler runs inside the engine's threads:
//   SIGINT, SIGTERM  stop claiming, let running steps finish within the
//                    grace period, release the rest with their checkpoints;
//                    a second one exits at once (leases then expire).
//   SIGHUP           reload the config file and log what changed, or why the
//                    new file was refused (the running config stays).
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "commands.hpp"
#include "config/bounds.hpp"
#include "exit_codes.hpp"
#include "metrics.hpp"
#include "progress.hpp"
#include "text.hpp"
#include "web/web_server.hpp"

namespace ratchet::cli {

namespace {

struct RunFlags {
  std::string config;
  bool until_empty = false;
  std::optional<int> workers;
  std::string metrics;
  std::string web;
  std::string web_token_env;
  std::string progress = "auto";
  std::string status_every = "5s";
};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Waits up to `timeout` for one of the blocked signals; 0 when none came.
int wait_signal(const sigset_t& set, std::chrono::milliseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1000000);
  int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

const char* event_name(JobEvent::Kind k) {
  switch (k) {
    case JobEvent::Kind::kCompleted: return "completed";
    case JobEvent::Kind::kFailed: return "failed";
    case JobEvent::Kind::kDead: return "dead";
    case JobEvent::Kind::kCancelled: return "cancelled";
  }
  return "?";
}

int run(const RunFlags& f, const Globals& g) {
  auto every = parse_duration(f.status_every);
  if (!every || *every <= Duration{0}) return usage_error("--status-every must be a duration such as 5s");
  if (f.workers && (*f.workers < 1 || *f.workers > config::kMaxWorkers)) {
    // Each worker is a thread: 100,000 of them ran the machine out of threads.
    return usage_error("--workers must be between 1 and " + std::to_string(config::kMaxWorkers) + ", got " +
                       std::to_string(*f.workers));
  }

  // Before any thread exists, so every engine thread inherits the mask.
  sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  bool live = f.progress == "always" || (f.progress == "auto" && ::isatty(STDERR_FILENO) == 1);
  auto status = std::make_shared<StatusLine>(live);
  if (auto s = setup_logging(g.log_level_given ? g.log_level : "info", g.format(), status); !s)
    return report(s.error());

  ConfigOverrides overrides;
  overrides.workers = f.workers;
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kRun, overrides);
  if (!engine) return code;

  std::unique_ptr<web::WebServer> web;
  if (!f.web.empty()) {
    const config::WebSpec spec = web_spec(f.config);
    web::WebOptions options;
    options.read_only = spec.read_only;
    options.token = spec.token;
    if (code = web_token(f.web_token_env, options.token); code != kOk) return code;
    web = start_web(f.web, *engine, options, f.web_token_env.empty() ? "[web] token" : "$" + f.web_token_env,
                    code);
    if (!web) return code;
  }

  std::unique_ptr<MetricsServer> metrics;
  if (!f.metrics.empty()) {
    auto m = MetricsServer::start(f.metrics, *engine);
    if (!m) return report(m.error());
    metrics = std::move(*m);
    spdlog::info("serving Prometheus metrics at http://{}:{}/metrics",
                 f.metrics.substr(0, f.metrics.rfind(':')), metrics->port());
  }

  auto sub = engine->subscribe([](const JobEvent& e) {
    if (e.kind == JobEvent::Kind::kCompleted) {
      spdlog::debug("job {} ({}) completed on attempt {}", e.id, e.type, e.attempt);
    } else if (e.kind == JobEvent::Kind::kCancelled) {
      spdlog::info("job {} ({}) cancelled", e.id, e.type);
    } else {
      spdlog::warn("job {} ({}) attempt {} {}: {}", e.id, e.type, e.attempt, event_name(e.kind), e.error);
    }
  });

  Progress progress(*engine);
  if (auto s = engine->start(); !s) return report(s.error());
  spdlog::info("worker {} started from {}{}", engine->worker_id(), f.config,
               f.until_empty ? "; stops when no job is pending" : "; Ctrl-C stops it");

  auto start = std::chrono::steady_clock::now();
  auto last_status = start;
  const auto tick = live ? std::chrono::milliseconds(250) : std::chrono::milliseconds(200);
  bool stop_requested = false;
  std::optional<Error> write_failure;
  std::int64_t others_pending = 0;  // at --until-empty's end: jobs this config does not run
  std::optional<ProgressSample> last;
  while (true) {
    int sig = wait_signal(signals, tick);
    if (sig == SIGHUP) {
      auto changed = engine->reload_config();
      if (changed) {
        spdlog::info("config reloaded from {}: {}", f.config,
                     changed->empty() ? "nothing changed" : *changed);
      } else {
        spdlog::error("config reload refused, the running config stays: {}", changed.error().message());
      }
    } else if (sig == SIGINT || sig == SIGTERM) {
      stop_requested = true;
      break;
    }
    if (auto s = progress.sample()) {
      last = s;
      auto now = std::chrono::steady_clock::now();
      if (live) {
        status->set(s->line);
      } else if (now - last_status >= *every) {
        spdlog::info("{}", s->line);
        last_status = now;
      }
      // Jobs of types or queues this config does not run wait for a process
      // whose config does: counting them, --until-empty never ended.
      if (f.until_empty && (s->pending == 0 || engine->drain(std::chrono::steady_clock::duration::zero()))) {
        others_pending = s->pending;
        break;
      }
    }
    // A database that refuses every write (a full disk) makes no progress
    // however long the run waits: stop, and say why.
    if ((write_failure = engine->write_failure())) break;
  }

  if (write_failure) {
    status->finish();
    spdlog::error("stopping: every write to the database failed for 5 s: {}", write_failure->message());
  }
  if (stop_requested) {
    status->finish();
    spdlog::info(
        "stopping: claiming no new jobs; running steps may finish, then unfinished jobs are released "
        "with their checkpoints (press Ctrl-C again to exit at once)");
  }
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    engine->stop();
    stopped = true;
  });
  while (!stopped) {
    int sig = wait_signal(signals, std::chrono::milliseconds(100));
    if (sig == SIGINT || sig == SIGTERM) {
      std::fprintf(
          stderr, "\nratchet: exiting at once; jobs still running are taken over when their lease expires\n");
      std::fflush(stderr);
      std::_Exit(kFailure);
    }
  }
  stopper.join();
  engine->unsubscribe(sub);
  metrics.reset();
  web.reset();

  if (auto s = progress.sample()) last = s;
  if (last && live) status->set(last->line);
  status->finish();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::int64_t done = last ? last->done : 0;
  std::int64_t dead = last ? last->dead : 0;
  spdlog::info("stopped after {:.1f}s: {} job{} finished ({} dead), {} still pending", secs, done,
               done == 1 ? "" : "s", dead, last ? last->pending : 0);
  if (others_pending > 0) {
    spdlog::warn(
        "{} pending job{} of job types or queues this config does not run; they wait for a process whose "
        "config declares them (`ratchet jobs list --state available` shows their types)",
        others_pending, others_pending == 1 ? " is" : "s are");
  }
  if (write_failure) {
    return report(*write_failure,
                  "nothing committed is lost: run `ratchet run` again once the database can be written; "
                  "jobs that were running are taken over when their lease expires");
  }
  if (dead > 0) {
    spdlog::error(
        "{} job{} ended dead; `ratchet jobs list --state dead` shows them, `ratchet jobs retry --dead` "
        "retries them",
        dead, dead == 1 ? "" : "s");
    return kFailure;
  }
  return kOk;
}

}  // namespace

void add_run(CLI::App& app, const Globals& globals, Action& action) {
  auto f = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand(
      "run",
      "Start the workers and run jobs until stopped. SIGINT/SIGTERM: stop claiming, let running steps finish "
      "within the grace period ([engine] shutdown_grace), release the rest with their checkpoints (a second "
      "signal exits at once). SIGHUP: reload the config file. Exits 1 if a job ended dead during the run, or "
      "when every write to the database failed for 5 s (a full disk).");
  add_config_option(*cmd, f->config);
  cmd->add_flag("--until-empty", f->until_empty,
                "Stop when no job is pending (scheduled, available, running or retryable)");
  cmd->add_option("--workers", f->workers, "Jobs run at once (default: [engine] workers)");
  cmd->add_option(
      "--metrics", f->metrics,
      "Serve Prometheus metrics at http://HOST:PORT/metrics, e.g. 127.0.0.1:9464: jobs by state; per "
      "plugin calls, 429s, retries, parks, steps parked now, limiter waits and step durations");
  cmd->add_option("--web", f->web,
                  "Serve the dashboard and its API (as `ratchet web`) beside the workers at HOST:PORT, e.g. "
                  "127.0.0.1:8077");
  cmd->add_option("--web-token-env", f->web_token_env,
                  "The dashboard's access token from this environment variable (as `ratchet web "
                  "--token-env`); without it, a one-time login link is printed");
  cmd->add_option(
         "--progress", f->progress,
         "The live progress line on stderr: auto (on a terminal), always, never. Without it, a status "
         "line is logged every --status-every")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--status-every", f->status_every,
                  "How often to log the status line off a terminal (default 5s)");
  cmd->callback([f, &globals, &action] { action = [f, &globals] { return run(*f, globals); }; });
}

}  // namespace ratchet::cli
