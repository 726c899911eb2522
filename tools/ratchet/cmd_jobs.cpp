// `ratchet jobs list|show|retry|cancel|purge`.
#include <fmt/format.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "job_view.hpp"
#include "text.hpp"

namespace ratchet::cli {

namespace {

struct JobsFlags {
  std::string config;
  bool json = false;
  // list
  std::string state;
  std::string type;
  std::string queue;
  int limit = 50;
  // show, retry, cancel
  JobId id = 0;
  bool dead = false;
  // purge
  std::string older_than;
};

int list_jobs(const JobsFlags& f) {
  JobFilter filter;
  if (!f.state.empty()) {
    filter.state = parse_job_state(f.state);
    if (!filter.state) {
      return usage_error(fmt::format(
          "unknown state \"{}\" (use scheduled, available, running, retryable, completed, dead or cancelled)",
          f.state));
    }
  }
  if (f.limit < 1) return usage_error("--limit must be at least 1");
  filter.type = f.type;
  filter.queue = f.queue;
  filter.limit = f.limit;
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  auto jobs = engine->list(filter);
  if (!jobs) return report(jobs.error());
  if (f.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& job : *jobs) j.push_back(to_json(engine->redacted(job)));
    fmt::print("{}\n", j.dump(2));
    return kOk;
  }
  if (jobs->empty()) {
    fmt::print("no jobs match\n");
    return kOk;
  }
  std::vector<JobRecord> shown;
  shown.reserve(jobs->size());
  for (auto& job : *jobs) shown.push_back(engine->redacted(std::move(job)));
  fmt::print("{}", list_table(shown, engine->now()));
  if (static_cast<int>(jobs->size()) == f.limit) {
    fmt::print("(first {} shown; raise --limit for more)\n", f.limit);
  }
  return kOk;
}

int not_found_hint(const Error& e) { return report(e, "`ratchet jobs list` shows the jobs there are"); }

int show_job(const JobsFlags& f) {
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  auto job = engine->get(f.id);
  if (!job) return not_found_hint(job.error());
  *job = engine->redacted(std::move(*job));
  if (f.json) {
    fmt::print("{}\n", to_json(*job).dump(2));
  } else {
    fmt::print("{}", show_report(*job, engine->now()));
  }
  return kOk;
}

int retry_jobs(const JobsFlags& f) {
  if ((f.id == 0) == !f.dead) return usage_error("give either a job id or --dead (every dead job)");
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  if (f.id != 0) {
    if (auto s = engine->retry(f.id); !s) {
      return s.error().code() == ErrorCode::kNotFound ? not_found_hint(s.error()) : report(s.error());
    }
    fmt::print("job {} is available again; its committed steps are kept\n", f.id);
    return kOk;
  }
  std::int64_t retried = 0;
  JobFilter filter;
  filter.state = JobState::kDead;
  filter.limit = 500;
  while (true) {
    auto page = engine->list(filter);
    if (!page) return report(page.error());
    if (page->empty()) break;
    for (const auto& job : *page) {
      if (auto s = engine->retry(job.id); !s)
        return report(s.error().with_context(fmt::format("job {}", job.id)));
      ++retried;
    }
    filter.after_id = page->back().id;
  }
  fmt::print("{} dead job{} available again\n", retried, retried == 1 ? "" : "s");
  return kOk;
}

int cancel_job(const JobsFlags& f) {
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  if (auto s = engine->cancel(f.id); !s) {
    return s.error().code() == ErrorCode::kNotFound ? not_found_hint(s.error()) : report(s.error());
  }
  auto job = engine->get(f.id);
  if (job && job->state == JobState::kRunning) {
    fmt::print("job {} is running; it stops at its next step boundary\n", f.id);
  } else {
    fmt::print("job {} cancelled\n", f.id);
  }
  return kOk;
}

int purge_jobs(const JobsFlags& f) {
  auto d = parse_duration(f.older_than);
  if (!d) return report(d.error().with_context("--older-than"));
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  auto n = engine->purge(*d);
  if (!n) return report(n.error());
  if (f.json) {
    fmt::print("{}\n", nlohmann::json{{"purged", *n}}.dump());
  } else {
    fmt::print("purged {} finished job{} older than {}\n", *n, *n == 1 ? "" : "s", f.older_than);
  }
  return kOk;
}

CLI::App* sub(CLI::App& jobs, const std::shared_ptr<JobsFlags>& f, Action& action, std::string name,
              std::string help, int (*fn)(const JobsFlags&)) {
  auto* cmd = jobs.add_subcommand(std::move(name), std::move(help));
  add_config_option(*cmd, f->config);
  cmd->callback([f, fn, &action] { action = [f, fn] { return fn(*f); }; });
  return cmd;
}

}  // namespace

void add_jobs(CLI::App& app, Action& action) {
  auto* jobs = app.add_subcommand("jobs", "List, show, retry, cancel and purge jobs");
  jobs->require_subcommand(1, 1);
  auto f = std::make_shared<JobsFlags>();

  auto* list = sub(*jobs, f, action, "list", "List jobs, newest last", list_jobs);
  list->add_option(
      "--state", f->state,
      "Only jobs in this state: scheduled, available, running, retryable, completed, dead, cancelled");
  list->add_option("--type", f->type, "Only jobs of this type");
  list->add_option("--queue", f->queue, "Only jobs of this queue");
  list->add_option("--limit", f->limit, "At most this many jobs (default 50)");
  list->add_flag("--json", f->json, "Print JSON instead of a table");

  auto* show = sub(*jobs, f, action, "show",
                   "Show one job: arguments, state, attempts, each step (output, attempts, duration, last "
                   "error), attempt errors and the timeline of waits and parks",
                   show_job);
  show->add_option("ID", f->id, "The job id")->required();
  show->add_flag("--json", f->json, "Print JSON instead of text");

  auto* retry =
      sub(*jobs, f, action, "retry",
          "Put a dead or cancelled job back to available with fresh attempts (its committed steps are "
          "kept), or every dead job with --dead",
          retry_jobs);
  auto* rid = retry->add_option("ID", f->id, "The job id");
  retry->add_flag("--dead", f->dead, "Retry every dead job")->excludes(rid);

  auto* cancel = sub(*jobs, f, action, "cancel",
                     "Cancel a pending job now, or a running job at its next step boundary", cancel_job);
  cancel->add_option("ID", f->id, "The job id")->required();

  auto* purge =
      sub(*jobs, f, action, "purge",
          "Delete finished jobs (completed, dead, cancelled) that ended longer ago than --older-than",
          purge_jobs);
  purge->add_option("--older-than", f->older_than, "An age such as 7d, 12h or 30m")->required();
  purge->add_flag("--json", f->json, "Print JSON instead of text");
}

}  // namespace ratchet::cli
