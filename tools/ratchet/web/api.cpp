#include "web/api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <tuple>

#include "job_view.hpp"
#include "text.hpp"

namespace ratchet::cli::web {

namespace {

// The ids an action lists in its reply; the count covers them all.
constexpr std::size_t kMaxIdsShown = 1000;
// A running engine writes its report every 5 s by default: one not heard
// of for this long is taken as gone.
constexpr auto kLiveFor = std::chrono::seconds(15);
constexpr auto kThrottledBeyond = std::chrono::seconds(1);

// The status an engine error maps to, for a read (`action` false) or an
// action on a job: an action its state does not allow is a conflict.
int status_of(const Error& e, bool action) {
  switch (e.code()) {
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kInvalidArgument: return action ? 409 : 400;
    default: return 503;
  }
}

Reply from_error(const Error& e, bool action) { return error_reply(status_of(e, action), e.message()); }

// A slot a moment ahead is a pace being kept, not a plugin held back; a
// second also covers the clocks of other machines a little ahead of this one.
bool throttled(const LimiterInfo& l, TimePoint now) { return l.next_free > now + kThrottledBeyond; }

nlohmann::json limit_json(const LimiterInfo& l, TimePoint now) {
  return {{"plugin", l.plugin},
          {"operation", l.operation},
          {"declared", l.declared},
          {"key", l.key},
          {"next_free", format_time(l.next_free)},
          {"throttled", throttled(l, now)}};
}

// Reports of engines still running: written within a few report intervals.
std::vector<const EngineReport*> live(const std::vector<EngineReport>& reports, TimePoint now) {
  std::vector<const EngineReport*> out;
  for (const auto& r : reports) {
    if (r.running && r.updated_at + kLiveFor > now) out.push_back(&r);
  }
  return out;
}

}  // namespace

std::vector<EngineReport> engine_reports(Engine& engine) {
  auto r = engine.reports(std::chrono::minutes(61));
  return r ? std::move(*r) : std::vector<EngineReport>{};
}

std::vector<LimiterInfo> merged_limits(Engine& engine, const std::vector<EngineReport>& reports,
                                       TimePoint now) {
  // By plugin, operation, limit and key: the latest next free slot any
  // running engine (or the database) knows of.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, LimiterInfo> rows;
  auto add = [&](const LimiterInfo& l) {
    auto [it, fresh] = rows.try_emplace({l.plugin, l.operation, l.declared, l.key}, l);
    if (!fresh) it->second.next_free = std::max(it->second.next_free, l.next_free);
  };
  for (const auto& l : engine.limits()) add(l);
  for (const auto* r : live(reports, now)) {
    for (const auto& l : r->limits) add(l);
  }
  std::vector<LimiterInfo> out;
  out.reserve(rows.size());
  for (auto& [k, l] : rows) out.push_back(std::move(l));
  return out;
}

std::vector<PluginCallStats> summed_calls(const std::vector<EngineReport>& reports, TimePoint now) {
  std::map<std::string, PluginCallStats> by_plugin;
  for (const auto* r : live(reports, now)) {
    for (const auto& c : r->calls) {
      auto& s = by_plugin[c.plugin];
      s.plugin = c.plugin;
      s.calls += c.calls;
      s.throttled += c.throttled;
      s.retries += c.retries;
      s.parks += c.parks;
      s.parked_now += c.parked_now;
      s.limiter_wait += c.limiter_wait;
      for (const auto& op : c.step_durations) {
        auto it = std::find_if(s.step_durations.begin(), s.step_durations.end(),
                               [&](const OperationDurations& d) { return d.operation == op.operation; });
        if (it == s.step_durations.end()) {
          s.step_durations.push_back(op);
          continue;
        }
        auto& h = it->durations;
        if (h.bounds != op.durations.bounds) continue;  // another version's buckets
        for (std::size_t i = 0; i < h.counts.size() && i < op.durations.counts.size(); ++i) {
          h.counts[i] += op.durations.counts[i];
        }
        h.sum += op.durations.sum;
        h.count += op.durations.count;
      }
    }
  }
  std::vector<PluginCallStats> out;
  for (auto& [name, s] : by_plugin) out.push_back(std::move(s));
  return out;
}

Result<std::vector<MinuteActivity>> ActivityCache::read(Engine& engine, TimePoint first, TimePoint now) {
  using std::chrono::minutes;
  // Writes that commit a little late land in the minute before.
  const TimePoint recent = std::chrono::floor<minutes>(now) - minutes(2);
  std::lock_guard lock(mu_);
  const bool whole = first < first_ || now - whole_read_ >= minutes(1) || now < whole_read_;
  const TimePoint from = whole ? first : std::max(first, recent);
  auto read = engine.activity(from);
  if (!read) return read;
  if (whole) {
    minutes_.clear();
    first_ = first;
    whole_read_ = now;
  }
  std::erase_if(minutes_, [&](const auto& m) { return m.first >= from || m.first < first; });
  for (const auto& m : *read) minutes_[m.minute] = m;
  std::vector<MinuteActivity> out;
  out.reserve(minutes_.size());
  for (const auto& [at, m] : minutes_) out.push_back(m);
  return out;
}

void ActivityCache::clear() {
  std::lock_guard lock(mu_);
  whole_read_ = {};
}

Reply overview(Engine& engine, TimePoint now, ActivityCache* cache) {
  auto counts = engine.counts();
  if (!counts) return from_error(counts.error(), false);
  nlohmann::json by_state = nlohmann::json::object();
  for (auto s : {JobState::kScheduled, JobState::kAvailable, JobState::kRunning, JobState::kRetryable,
                 JobState::kCompleted, JobState::kDead, JobState::kCancelled}) {
    by_state[std::string(to_string(s))] = 0;
  }
  for (const auto& [state, n] : *counts) by_state[std::string(to_string(state))] = n;

  // The last 60 whole minutes and the current one, every one listed.
  using std::chrono::minutes;
  const auto current = std::chrono::floor<minutes>(now);
  const TimePoint first = current - minutes(60);
  auto activity = cache != nullptr ? cache->read(engine, first, now) : engine.activity(first);
  if (!activity) return from_error(activity.error(), false);
  const auto reports = engine_reports(engine);
  // 429s per minute, from every engine's report of the last hour (stopped
  // ones too: what they met still happened).
  std::map<TimePoint, std::uint64_t> throttled_at;
  for (const auto& r : reports) {
    for (const auto& m : r.throttled_per_minute) throttled_at[m.minute] += m.throttled;
  }
  nlohmann::json series = nlohmann::json::array();
  auto next = activity->begin();
  for (TimePoint m = first; m <= current; m += minutes(1)) {
    MinuteActivity a{.minute = m};
    while (next != activity->end() && next->minute < m) ++next;
    if (next != activity->end() && next->minute == m) a = *next;
    auto t = throttled_at.find(m);
    series.push_back({{"at", format_time(m)},
                      {"completed", a.completed},
                      {"failed", a.failed},
                      {"dead", a.dead},
                      {"throttled", t == throttled_at.end() ? 0 : t->second}});
  }

  nlohmann::json held = nlohmann::json::array();
  for (const auto& l : merged_limits(engine, reports, now)) {
    if (throttled(l, now)) held.push_back(limit_json(l, now));
  }
  nlohmann::json plugins = nlohmann::json::array();
  for (const auto& c : summed_calls(reports, now)) {
    plugins.push_back({{"plugin", c.plugin},
                       {"calls", c.calls},
                       {"throttled", c.throttled},
                       {"retries", c.retries},
                       {"parks", c.parks},
                       {"parked_now", c.parked_now}});
  }
  nlohmann::json engines = nlohmann::json::array();
  for (const auto& r : reports) {
    engines.push_back({{"worker", r.worker},
                       {"updated_at", format_time(r.updated_at)},
                       {"running", r.running && r.updated_at + kLiveFor > now}});
  }
  return {200,
          {{"now", format_time(now)},
           {"counts", by_state},
           {"minutes", series},
           {"throttled", held},
           {"plugins", plugins},
           {"engines", engines}}};
}

Reply list_jobs(Engine& engine, const Params& params) {
  JobFilter filter;
  if (auto bad = read_filter(params, filter)) return *bad;
  filter.newest_first = true;
  const int page = filter.limit;
  // One more than the page tells whether an older page exists.
  filter.limit = page + 1;
  auto jobs = engine.list(filter);
  if (!jobs) return from_error(jobs.error(), false);
  nlohmann::json out = nlohmann::json::array();
  nlohmann::json next = nullptr;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    if (static_cast<int>(i) == page) {
      next = (*jobs)[i - 1].id;
      break;
    }
    out.push_back(to_json(engine.redacted((*jobs)[i])));
  }
  return {200, {{"jobs", std::move(out)}, {"next_before", next}}};
}

Reply show_job(Engine& engine, const std::string& id) {
  auto n = parse_job_id(id);
  if (!n) return error_reply(404, fmt::format("no job with id \"{}\"", id));
  auto job = engine.get(*n);
  if (!job) return from_error(job.error(), false);
  nlohmann::json j = to_json(engine.redacted(*job));
  // The plugin each step calls, for the page's links to it.
  const auto calls = engine.step_calls(job->type);
  if (j.contains("steps")) {
    for (auto& step : j["steps"]) {
      auto it = calls.find(step.value("name", ""));
      if (it != calls.end()) step["call"] = it->second;
    }
  }
  return {200, std::move(j)};
}

Reply retry_job(Engine& engine, const std::string& id) {
  auto n = parse_job_id(id);
  if (!n) return error_reply(404, fmt::format("no job with id \"{}\"", id));
  if (auto s = engine.retry(*n); !s) return from_error(s.error(), true);
  auto job = engine.get(*n);
  if (!job) return from_error(job.error(), false);
  return {200,
          {{"job", to_json(engine.redacted(*job))},
           {"changed", fmt::format("job {} is available again; its committed steps are kept", *n)}}};
}

Reply cancel_job(Engine& engine, const std::string& id) {
  auto n = parse_job_id(id);
  if (!n) return error_reply(404, fmt::format("no job with id \"{}\"", id));
  if (auto s = engine.cancel(*n); !s) return from_error(s.error(), true);
  auto job = engine.get(*n);
  if (!job) return from_error(job.error(), false);
  std::string changed = job->state == JobState::kRunning
                            ? fmt::format("job {} is running; it stops at its next step boundary", *n)
                            : fmt::format("job {} cancelled", *n);
  return {200, {{"job", to_json(engine.redacted(*job))}, {"changed", std::move(changed)}}};
}

Reply retry_matching(Engine& engine, const std::string& body) {
  auto params = parse_body(body);
  if (!params) {
    return error_reply(
        400,
        "the body is not a JSON object of strings, e.g. {\"state\": \"dead\", \"type\": \"rate_movie\"}");
  }
  // A key it does not know is refused, not dropped: a misspelt "typ" (or
  // a "limit" meant to retry a few) retried every dead job.
  for (const auto& [key, value] : *params) {
    if (key == "state" || key == "type" || key == "queue" || key == "id" || key == "q") continue;
    return error_reply(400,
                       fmt::format("unknown key \"{}\": a retry takes every job that matches state, type, "
                                   "queue, id and q (all optional; state dead by default), nothing else",
                                   key));
  }
  if (!params->contains("state")) (*params)["state"] = "dead";
  JobFilter filter;
  if (auto bad = read_filter(*params, filter)) return *bad;
  if (filter.state != JobState::kDead && filter.state != JobState::kCancelled) {
    return error_reply(400, "state must be dead or cancelled: only those jobs can be retried");
  }
  filter.limit = kMaxPage;
  std::int64_t retried = 0;
  nlohmann::json ids = nlohmann::json::array();
  // Oldest first, by id: a retried job leaves the state matched, so the
  // pages after it are unaffected.
  while (true) {
    auto page = engine.list(filter);
    if (!page) return from_error(page.error(), false);
    if (page->empty()) break;
    for (const auto& job : *page) {
      // A job that another process retried or purged meanwhile is skipped.
      if (auto s = engine.retry(job.id); !s) continue;
      ++retried;
      if (ids.size() < kMaxIdsShown) ids.push_back(job.id);
    }
    filter.after_id = page->back().id;
  }
  return {200,
          {{"retried", retried},
           {"ids", std::move(ids)},
           {"changed", fmt::format("{} job{} available again", retried, retried == 1 ? "" : "s")}}};
}

Reply purge(Engine& engine, const std::string& body) {
  auto params = parse_body(body);
  if (!params || !params->contains("older_than")) {
    return error_reply(400, "the body must name an age: {\"older_than\": \"7d\"}");
  }
  const std::string& age = (*params)["older_than"];
  auto d = parse_duration(age);
  if (!d) return error_reply(400, "older_than: " + d.error().message());
  auto n = engine.purge(*d);
  if (!n) return from_error(n.error(), false);
  return {200,
          {{"purged", *n},
           {"changed", fmt::format("{} finished job{} older than {} deleted", *n, *n == 1 ? "" : "s", age)}}};
}

Reply plugins(Engine& engine, TimePoint now) {
  PluginReport r = engine.plugins();
  nlohmann::json reported_by = nullptr;
  if (r.loaded.empty() && r.failed.empty()) {
    // This process loads no plugin code: what the latest running engine saw.
    const auto reports = engine_reports(engine);
    const EngineReport* latest = nullptr;
    for (const auto* report : live(reports, now)) {
      if (latest == nullptr || report->updated_at > latest->updated_at) latest = report;
    }
    if (latest != nullptr) {
      r = latest->plugins;
      reported_by = {{"worker", latest->worker}, {"updated_at", format_time(latest->updated_at)}};
    }
  }
  nlohmann::json j = {{"folder", r.folder.string()},
                      {"loaded", nlohmann::json::array()},
                      {"failed", nlohmann::json::array()},
                      {"reported_by", reported_by}};
  for (const auto& p : r.loaded) {
    j["loaded"].push_back({{"name", p.name},
                           {"version", p.version},
                           {"file", p.file.string()},
                           {"operations", p.operations},
                           {"configured", p.configured}});
  }
  for (const auto& f : r.failed) j["failed"].push_back({{"file", f.file.string()}, {"reason", f.reason}});
  return {200, std::move(j)};
}

Reply limits(Engine& engine, TimePoint now) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& l : merged_limits(engine, engine_reports(engine), now)) j.push_back(limit_json(l, now));
  return {200, std::move(j)};
}

}  // namespace ratchet::cli::web
