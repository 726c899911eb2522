#include "metrics.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "bounded_server.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <thread>

namespace ratchet::cli {

namespace {

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// One scrape's metrics, in a registry of its own (the input is a snapshot).
// Its text lists the families and their series in the order they were added,
// and every family with its HELP and TYPE even before its first series: the
// registry alone groups families by type, keeps series in hash order and
// leaves out families without series, and a scrape should name every metric
// ratchet has and read the same way from one scrape to the next.
class Scrape {
 public:
  template <typename Builder>
  auto& family(Builder builder, const std::string& name, const std::string& help) {
    auto& family = builder.Name(name).Help(help).Register(registry_);
    prometheus::MetricFamily header;
    header.name = name;
    header.help = help;
    header.type = type_of(family);
    headers_.push_back(std::move(header));
    return family;
  }

  // The series of `family` with `labels`; `args` make it (a histogram's bounds).
  template <typename Metric, typename... Args>
  Metric& series(prometheus::Family<Metric>& family, const prometheus::Labels& labels, Args&&... args) {
    order_.emplace(labels, order_.size());
    return family.Add(labels, std::forward<Args>(args)...);
  }

  std::string text() const {
    auto collected = registry_.Collect();
    std::vector<prometheus::MetricFamily> families;
    for (const auto& header : headers_) {
      auto found = std::ranges::find(collected, header.name, &prometheus::MetricFamily::name);
      auto family = found != collected.end() ? std::move(*found) : header;
      std::ranges::sort(family.metric, {},
                        [this](const prometheus::ClientMetric& m) { return order_.at(labels_of(m)); });
      families.push_back(std::move(family));
    }
    return prometheus::TextSerializer().Serialize(families);
  }

 private:
  template <typename Metric>
  static prometheus::MetricType type_of(const prometheus::Family<Metric>&) {
    return Metric::metric_type;
  }

  static prometheus::Labels labels_of(const prometheus::ClientMetric& metric) {
    prometheus::Labels labels;
    for (const auto& l : metric.label) labels.emplace(l.name, l.value);
    return labels;
  }

  prometheus::Registry registry_;
  std::vector<prometheus::MetricFamily> headers_;
  std::map<prometheus::Labels, std::size_t> order_;
};

}  // namespace

std::string render_metrics(const MetricsInput& input) {
  Scrape scrape;
  auto& jobs = scrape.family(prometheus::BuildGauge(), "ratchet_jobs", "Jobs in the database by state.");
  if (input.jobs) {
    for (auto [state, n] : *input.jobs)
      scrape.series(jobs, {{"state", std::string(to_string(state))}}).Set(static_cast<double>(n));
  }
  // Plugins without a call yet are listed with zeros, so every series exists
  // from the first scrape.
  auto stats = input.calls;
  for (const auto& name : input.plugins) {
    if (std::ranges::none_of(stats, [&](const PluginCallStats& p) { return p.plugin == name; })) {
      stats.push_back(PluginCallStats{.plugin = name});
    }
  }
  std::ranges::sort(stats, {}, &PluginCallStats::plugin);
  auto per_plugin = [&](auto builder, const std::string& name, const std::string& help, auto value) {
    auto& family = scrape.family(builder, name, help);
    // Every series of a fresh registry starts at zero, so adding the value
    // sets a gauge as well as a counter.
    for (const auto& p : stats)
      scrape.series(family, {{"plugin", p.plugin}}).Increment(static_cast<double>(value(p)));
  };
  per_plugin(prometheus::BuildCounter(), "ratchet_plugin_calls_total", "Plugin calls made by this process.",
             [](const PluginCallStats& p) { return p.calls; });
  per_plugin(prometheus::BuildCounter(), "ratchet_plugin_throttled_total",
             "Plugin calls answered 429 or throttled.", [](const PluginCallStats& p) { return p.throttled; });
  per_plugin(prometheus::BuildCounter(), "ratchet_plugin_retries_total",
             "Plugin calls retried after a failure.", [](const PluginCallStats& p) { return p.retries; });
  per_plugin(prometheus::BuildCounter(), "ratchet_plugin_parks_total",
             "Steps parked waiting for a slot, a backoff or a circuit.",
             [](const PluginCallStats& p) { return p.parks; });
  per_plugin(prometheus::BuildGauge(), "ratchet_plugin_parked_steps",
             "Steps parked now: their last call parked and their job has not come back for them yet.",
             [](const PluginCallStats& p) { return p.parked_now; });
  per_plugin(prometheus::BuildCounter(), "ratchet_plugin_limiter_wait_seconds_total",
             "Seconds steps waited for a limiter slot (rate or concurrency limit), in place or parked, "
             "waits going on included.",
             [](const PluginCallStats& p) { return seconds(p.limiter_wait); });

  auto& durations = scrape.family(
      prometheus::BuildHistogram(), "ratchet_step_duration_seconds",
      "Plugin step calls from their first admission in this process to their output or failure, "
      "with their waits, parks and retries.");
  for (const auto& p : stats) {
    auto operations = p.step_durations;
    std::ranges::sort(operations, {}, &OperationDurations::operation);
    for (const auto& op : operations) {
      const DurationHistogram& h = op.durations;
      prometheus::Histogram::BucketBoundaries bounds;
      for (auto bound : h.bounds) bounds.push_back(seconds(bound));
      // One increment per bucket plus the one above every bound, whatever
      // the length of `counts`: ObserveMultiple throws on any other length.
      std::vector<double> increments(bounds.size() + 1, 0.0);
      for (std::size_t i = 0; i < increments.size() && i < h.counts.size(); ++i)
        increments[i] = static_cast<double>(h.counts[i]);
      scrape.series(durations, {{"plugin", p.plugin}, {"operation", op.operation}}, bounds)
          .ObserveMultiple(increments, seconds(h.sum));
    }
  }
  return scrape.text();
}

std::string render_metrics(Engine& engine, const std::vector<std::string>& plugins) {
  MetricsInput input;
  if (auto counts = engine.counts()) input.jobs = std::move(*counts);
  input.calls = engine.call_stats();
  input.plugins = plugins;
  return render_metrics(input);
}

struct MetricsServer::Impl {
  explicit Impl(const MetricsServerOptions& o) : server(BoundedServerOptions{.timeout = o.timeout}) {}
  BoundedServer server;
  int port = 0;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { impl_->server.halt(); }

int MetricsServer::port() const noexcept { return impl_->port; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(std::string_view address, Engine& engine,
                                                            MetricsServerOptions options) {
  auto at = BoundedServer::parse_address(address, "--metrics", "127.0.0.1:9464");
  if (!at) return fail(at.error());
  auto impl = std::make_unique<Impl>(options);
  std::vector<std::string> plugins;
  for (const auto& p : engine.plugins().loaded) {
    if (p.configured) plugins.push_back(p.name);
  }
  impl->server.Get("/metrics", [&engine, plugins](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(engine, plugins), "text/plain; version=0.0.4");
  });
  auto port = impl->server.serve(*at, "--metrics");
  if (!port) return fail(port.error());
  impl->port = *port;
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace ratchet::cli
