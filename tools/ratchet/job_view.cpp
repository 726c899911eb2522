#include "job_view.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "text.hpp"

namespace ratchet::cli {

namespace {

nlohmann::json time_or_null(const std::optional<TimePoint>& t) {
  return t ? nlohmann::json(format_time(*t)) : nlohmann::json(nullptr);
}

std::string shorten(std::string s, std::size_t width) {
  if (s.size() <= width) return s;
  s.resize(width - 3);
  return s + "...";
}

}  // namespace

nlohmann::json to_json(const JobRecord& job) {
  nlohmann::json j = {
      {"id", job.id},
      {"type", job.type},
      {"queue", job.queue},
      {"state", std::string(to_string(job.state))},
      {"args", job.args},
      {"priority", job.priority},
      {"run_at", format_time(job.run_at)},
      {"attempt", job.attempt},
      {"max_attempts", job.max_attempts},
      {"unique_key", job.unique_key},
      {"lease_owner", job.lease_owner},
      {"lease_expires_at", time_or_null(job.lease_expires_at)},
      {"lease_expiries", job.lease_expiries},
      {"cancel_requested", job.cancel_requested},
      {"result", job.result},
      {"last_error", job.last_error},
      {"created_at", format_time(job.created_at)},
      {"updated_at", format_time(job.updated_at)},
      {"finished_at", time_or_null(job.finished_at)},
  };
  if (!job.steps.empty() || !job.timeline.empty() || !job.errors.empty()) {
    auto& steps = j["steps"] = nlohmann::json::array();
    for (const auto& s : job.steps) {
      nlohmann::json step = {{"name", s.name},
                             {"state", s.state},
                             {"output", s.output},
                             {"attempts", s.attempts},
                             {"started_at", time_or_null(s.started_at)},
                             {"finished_at", time_or_null(s.finished_at)},
                             {"last_error", s.last_error}};
      if (s.started_at && s.finished_at) {
        step["duration_ms"] =
            std::chrono::duration<double, std::milli>(*s.finished_at - *s.started_at).count();
      }
      steps.push_back(std::move(step));
    }
    auto& errors = j["errors"] = nlohmann::json::array();
    for (const auto& e : job.errors) {
      errors.push_back(
          {{"attempt", e.attempt}, {"step", e.step}, {"error", e.error}, {"at", format_time(e.at)}});
    }
    auto& timeline = j["timeline"] = nlohmann::json::array();
    for (const auto& t : job.timeline) {
      timeline.push_back({{"at", format_time(t.at)}, {"kind", t.kind}, {"detail", t.detail}});
    }
  }
  return j;
}

std::string list_table(const std::vector<JobRecord>& jobs, TimePoint now) {
  std::string out = fmt::format("{:>8}  {:<10}  {:<16}  {:>7}  {:<12}  {}\n", "ID", "STATE", "TYPE",
                                "ATTEMPT", "RUN AT", "ARGS / LAST ERROR");
  for (const auto& j : jobs) {
    std::string when = is_terminal(j.state) ? "-" : format_relative(j.run_at, now);
    std::string tail = j.args.dump();
    if (!j.last_error.empty() && j.state != JobState::kCompleted) tail += "  " + j.last_error;
    out += fmt::format("{:>8}  {:<10}  {:<16}  {:>7}  {:<12}  {}\n", j.id, to_string(j.state),
                       shorten(j.type, 16), fmt::format("{}/{}", j.attempt, j.max_attempts), when,
                       shorten(tail, 100));
  }
  return out;
}

std::string show_report(const JobRecord& job, TimePoint now) {
  std::string out;
  out += fmt::format("job {}  {}  {}\n", job.id, job.type, to_string(job.state));
  out += fmt::format("  arguments   {}\n", job.args.dump());
  out += fmt::format("  queue       {}   priority {}   attempt {} of {}\n", job.queue, job.priority,
                     job.attempt, job.max_attempts);
  if (!job.unique_key.empty()) out += fmt::format("  unique key  {}\n", job.unique_key);
  out += fmt::format("  created     {}\n", format_time(job.created_at));
  if (job.finished_at) {
    out += fmt::format("  finished    {}  (took {})\n", format_time(*job.finished_at),
                       format_duration(*job.finished_at - job.created_at));
  } else {
    out += fmt::format("  run at      {}  ({})\n", format_time(job.run_at), format_relative(job.run_at, now));
  }
  if (!job.lease_owner.empty()) {
    out += fmt::format("  held by     {}", job.lease_owner);
    if (job.lease_expires_at)
      out += fmt::format("  lease ends {}", format_relative(*job.lease_expires_at, now));
    out += "\n";
  }
  if (job.lease_expiries > 0) out += fmt::format("  lease expiries {}\n", job.lease_expiries);
  if (job.cancel_requested) out += "  cancel requested\n";
  if (!job.result.is_null()) out += fmt::format("  result      {}\n", job.result.dump());
  if (!job.last_error.empty()) out += fmt::format("  last error  {}\n", job.last_error);

  out += "steps\n";
  if (job.steps.empty()) out += "  (none committed yet)\n";
  std::size_t width = 4;
  for (const auto& s : job.steps) width = std::max(width, s.name.size());
  for (const auto& s : job.steps) {
    std::string took =
        (s.started_at && s.finished_at) ? format_duration(*s.finished_at - *s.started_at) : "-";
    out += fmt::format("  {:<{}}  {:<9}  attempts {}  {:>8}  {}\n", s.name, width, s.state, s.attempts, took,
                       s.output.is_null() ? "" : s.output.dump());
    if (!s.last_error.empty()) out += fmt::format("  {:<{}}  last error: {}\n", "", width, s.last_error);
  }
  if (!job.errors.empty()) {
    out += "attempt errors\n";
    for (const auto& e : job.errors) {
      out += fmt::format("  {}  attempt {}{}: {}\n", format_time(e.at), e.attempt,
                         e.step.empty() ? "" : " step " + e.step, e.error);
    }
  }
  out += "timeline\n";
  if (job.timeline.empty()) out += "  (no waits, parks or interruptions)\n";
  for (const auto& t : job.timeline) {
    out += fmt::format("  {}  {:<16}  {}\n", format_time(t.at), t.kind, t.detail);
  }
  return out;
}

}  // namespace ratchet::cli
