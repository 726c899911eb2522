#include "metrics.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include "bounded_server.hpp"

#include <algorithm>
#include <charconv>
#include <thread>

namespace ratchet::cli {

namespace {

// A label value quoted as the text format wants it.
std::string label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram(std::string& out, std::string_view name, const std::string& labels,
               const DurationHistogram& h) {
  // Buckets are cumulative in the text format: each counts every
  // observation up to its bound.
  std::uint64_t below = 0;
  for (std::size_t i = 0; i < h.bounds.size(); ++i) {
    if (i < h.counts.size()) below += h.counts[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, seconds(h.bounds[i]), below);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, h.count);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, seconds(h.sum));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, h.count);
}

}  // namespace

std::string render_metrics(const MetricsInput& input) {
  std::string out;
  header(out, "ratchet_jobs", "gauge", "Jobs in the database by state.");
  if (input.jobs) {
    for (auto [state, n] : *input.jobs)
      out += fmt::format("ratchet_jobs{{state=\"{}\"}} {}\n", to_string(state), n);
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
  auto per_plugin = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    header(out, name, type, help);
    for (const auto& p : stats)
      out += fmt::format("{}{{plugin=\"{}\"}} {}\n", name, label(p.plugin), value(p));
  };
  per_plugin("ratchet_plugin_calls_total", "counter", "Plugin calls made by this process.",
             [](const PluginCallStats& p) { return p.calls; });
  per_plugin("ratchet_plugin_throttled_total", "counter", "Plugin calls answered 429 or throttled.",
             [](const PluginCallStats& p) { return p.throttled; });
  per_plugin("ratchet_plugin_retries_total", "counter", "Plugin calls retried after a failure.",
             [](const PluginCallStats& p) { return p.retries; });
  per_plugin("ratchet_plugin_parks_total", "counter",
             "Steps parked waiting for a slot, a backoff or a circuit.",
             [](const PluginCallStats& p) { return p.parks; });
  per_plugin("ratchet_plugin_parked_steps", "gauge",
             "Steps parked now: their last call parked and their job has not come back for them yet.",
             [](const PluginCallStats& p) { return p.parked_now; });
  per_plugin("ratchet_plugin_limiter_wait_seconds_total", "counter",
             "Seconds steps waited for a limiter slot (rate or concurrency limit), in place or parked, "
             "waits going on included.",
             [](const PluginCallStats& p) { return seconds(p.limiter_wait); });

  header(out, "ratchet_step_duration_seconds", "histogram",
         "Plugin step calls from their first admission in this process to their output or failure, "
         "with their waits, parks and retries.");
  for (const auto& p : stats) {
    auto operations = p.step_durations;
    std::ranges::sort(operations, {}, &OperationDurations::operation);
    for (const auto& op : operations) {
      histogram(out, "ratchet_step_duration_seconds",
                fmt::format("plugin=\"{}\",operation=\"{}\"", label(p.plugin), label(op.operation)),
                op.durations);
    }
  }
  return out;
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
  std::thread thread;
  int port = 0;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const noexcept { return impl_->port; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(std::string_view address, Engine& engine,
                                                            MetricsServerOptions options) {
  auto colon = address.rfind(':');
  int port = -1;
  if (colon != std::string_view::npos) {
    auto [p, ec] = std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
    if (ec != std::errc{} || p != address.data() + address.size()) port = -1;
  }
  if (colon == std::string_view::npos || colon == 0 || port < 0 || port > 65535) {
    return fail(Error::invalid_argument(
        fmt::format("--metrics \"{}\" is not HOST:PORT, e.g. 127.0.0.1:9464", address)));
  }
  std::string host(address.substr(0, colon));
  auto impl = std::make_unique<Impl>(options);
  std::vector<std::string> plugins;
  for (const auto& p : engine.plugins().loaded) {
    if (p.configured) plugins.push_back(p.name);
  }
  impl->server.Get("/metrics", [&engine, plugins](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(engine, plugins), "text/plain; version=0.0.4");
  });
  if (port == 0) {
    impl->port = impl->server.bind_to_any_port(host);
  } else {
    impl->port = impl->server.bind_to_port(host, port) ? port : -1;
  }
  if (impl->port <= 0) {
    return fail(
        Error::io(fmt::format("--metrics: cannot listen on {} (in use, or not a local address)", address)));
  }
  auto* server = &impl->server;
  impl->thread = std::thread([server] { server->listen_after_bind(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace ratchet::cli
