#include "runtime/engine_report.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "store/job_store.hpp"

namespace ratchet::runtime {

namespace {

using nlohmann::json;
using store::from_micros;
using store::to_micros;

constexpr auto kKeepMinutes = std::chrono::minutes(61);
// A worker that stopped writing a day ago is forgotten.
constexpr auto kForgetAfter = std::chrono::hours(24);

json micros(Duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }
Duration duration_of(const json& j) { return std::chrono::microseconds(j.get<std::int64_t>()); }

json histogram_json(const DurationHistogram& h) {
  json bounds = json::array();
  for (auto b : h.bounds) bounds.push_back(micros(b));
  return {{"bounds_us", bounds}, {"counts", h.counts}, {"sum_us", micros(h.sum)}, {"count", h.count}};
}

DurationHistogram histogram_from(const json& j) {
  DurationHistogram h;
  for (const auto& b : j.at("bounds_us")) h.bounds.push_back(duration_of(b));
  h.counts = j.at("counts").get<std::vector<std::uint64_t>>();
  h.sum = duration_of(j.at("sum_us"));
  h.count = j.at("count").get<std::uint64_t>();
  return h;
}

}  // namespace

std::string report_to_json(const EngineReport& r) {
  json plugins = {
      {"folder", r.plugins.folder.string()}, {"loaded", json::array()}, {"failed", json::array()}};
  for (const auto& p : r.plugins.loaded) {
    plugins["loaded"].push_back({{"name", p.name},
                                 {"version", p.version},
                                 {"file", p.file.string()},
                                 {"operations", p.operations},
                                 {"configured", p.configured}});
  }
  for (const auto& f : r.plugins.failed)
    plugins["failed"].push_back({{"file", f.file.string()}, {"reason", f.reason}});
  json limits = json::array();
  for (const auto& l : r.limits) {
    limits.push_back({{"plugin", l.plugin},
                      {"operation", l.operation},
                      {"declared", l.declared},
                      {"key", l.key},
                      {"next_free_us", to_micros(l.next_free)}});
  }
  json calls = json::array();
  for (const auto& c : r.calls) {
    json durations = json::array();
    for (const auto& d : c.step_durations) {
      durations.push_back({{"operation", d.operation}, {"durations", histogram_json(d.durations)}});
    }
    calls.push_back({{"plugin", c.plugin},
                     {"calls", c.calls},
                     {"throttled", c.throttled},
                     {"retries", c.retries},
                     {"parks", c.parks},
                     {"parked_now", c.parked_now},
                     {"limiter_wait_us", micros(c.limiter_wait)},
                     {"step_durations", durations}});
  }
  json minutes = json::array();
  for (const auto& m : r.throttled_per_minute) {
    minutes.push_back({{"plugin", m.plugin}, {"minute_us", to_micros(m.minute)}, {"throttled", m.throttled}});
  }
  return json{{"version", 1},     {"running", r.running}, {"plugins", plugins},
              {"limits", limits}, {"calls", calls},       {"throttled_per_minute", minutes}}
      // A file name in the plugin folder may be any bytes: shown with
      // U+FFFD, never a throw in the writer's thread.
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<EngineReport> report_from_json(std::string_view worker, TimePoint updated,
                                             std::string_view text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != 1) return std::nullopt;
  EngineReport r;
  r.worker = std::string(worker);
  r.updated_at = updated;
  try {
    r.running = j.at("running").get<bool>();
    const auto& p = j.at("plugins");
    r.plugins.folder = p.at("folder").get<std::string>();
    for (const auto& l : p.at("loaded")) {
      r.plugins.loaded.push_back({l.at("name").get<std::string>(), l.at("version").get<std::string>(),
                                  l.at("file").get<std::string>(),
                                  l.at("operations").get<std::vector<std::string>>(),
                                  l.at("configured").get<bool>()});
    }
    for (const auto& f : p.at("failed")) {
      r.plugins.failed.push_back({f.at("file").get<std::string>(), f.at("reason").get<std::string>()});
    }
    for (const auto& l : j.at("limits")) {
      r.limits.push_back({l.at("plugin").get<std::string>(), l.at("operation").get<std::string>(),
                          l.at("declared").get<std::string>(),
                          from_micros(l.at("next_free_us").get<std::int64_t>()),
                          l.at("key").get<std::string>()});
    }
    for (const auto& c : j.at("calls")) {
      PluginCallStats s;
      s.plugin = c.at("plugin").get<std::string>();
      s.calls = c.at("calls").get<std::uint64_t>();
      s.throttled = c.at("throttled").get<std::uint64_t>();
      s.retries = c.at("retries").get<std::uint64_t>();
      s.parks = c.at("parks").get<std::uint64_t>();
      s.parked_now = c.at("parked_now").get<std::uint64_t>();
      s.limiter_wait = duration_of(c.at("limiter_wait_us"));
      for (const auto& d : c.at("step_durations")) {
        s.step_durations.push_back({d.at("operation").get<std::string>(), histogram_from(d.at("durations"))});
      }
      r.calls.push_back(std::move(s));
    }
    for (const auto& m : j.at("throttled_per_minute")) {
      r.throttled_per_minute.push_back({m.at("plugin").get<std::string>(),
                                        from_micros(m.at("minute_us").get<std::int64_t>()),
                                        m.at("throttled").get<std::uint64_t>()});
    }
  } catch (const json::exception&) {
    // A report another version wrote in another shape is left out, not fatal.
    return std::nullopt;
  }
  return r;
}

void ReportWriter::start(std::function<void(EngineReport&)> fill, store::Store& store, const Clock& clock,
                         std::string worker, Duration interval) {
  stop();
  fill_ = std::move(fill);
  store_ = &store;
  clock_ = &clock;
  worker_ = std::move(worker);
  interval_ = interval;
  // The first report comes one interval in, on the writer's thread: not in
  // start(), where it would sit in the way of the first claims and calls.
  thread_ = std::jthread([this](std::stop_token st) { loop(st); });
}

void ReportWriter::stop() {
  if (!fill_) return;
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  write(false);
  fill_ = nullptr;
}

void ReportWriter::loop(std::stop_token stop) {
  while (clock_->wait_until(clock_->now() + interval_, stop)) write(true);
}

void ReportWriter::write(bool running) {
  // This thread must never end the process: what goes wrong costs a report.
  try {
    write_once(running);
  } catch (const std::exception& e) {
    spdlog::warn("this engine's report was not written: {}", e.what());
  }
}

void ReportWriter::write_once(bool running) {
  // While the disk refuses writes, a report small enough to fit would tell
  // the store that writing works again and keep Engine::write_failure from
  // seeing a full disk. So the report waits until the failure is known (5 s
  // of it, as Engine::write_failure reports it), then tries only every 30 s
  // in case space came back while no other write was made.
  const auto real_now = std::chrono::steady_clock::now();
  if (store_->write_failure(1, std::chrono::steady_clock::duration::zero())) {
    const bool known = store_->write_failure(3, std::chrono::seconds(5)).has_value();
    if (!known || real_now - last_try_while_failing_ < std::chrono::seconds(30)) return;
    last_try_while_failing_ = real_now;
  }
  const TimePoint now = clock_->now();
  EngineReport r;
  r.worker = worker_;
  r.updated_at = now;
  r.running = running;
  fill_(r);
  // The 429s since the last report count in this minute: reports come a few
  // seconds apart, so a minute's count is off by at most those seconds.
  const TimePoint minute = std::chrono::floor<std::chrono::minutes>(now);
  for (const auto& c : r.calls) {
    auto& seen = throttled_seen_[c.plugin];
    if (c.throttled > seen) throttled_minutes_[{c.plugin, minute}] += c.throttled - seen;
    seen = c.throttled;
  }
  std::erase_if(throttled_minutes_, [&](const auto& m) { return m.first.second + kKeepMinutes <= now; });
  for (const auto& [at, n] : throttled_minutes_) r.throttled_per_minute.push_back({at.first, at.second, n});
  const std::string text = report_to_json(r);
  const store::Micros now_us = to_micros(now);
  const store::Micros forget = to_micros(now - kForgetAfter);
  auto written = store_->write([&](store::JobStore& s) {
    s.put_report(worker_, now_us, text, forget);
    return true;
  });
  // Only tools that show the engine read it: a failed write costs them one
  // report, never a job.
  if (!written) spdlog::warn("writing this engine's report failed: {}", written.error().to_string());
}

}  // namespace ratchet::runtime
