#include "metrics.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <thread>

namespace ratchet::cli {

std::string render_metrics(Engine& engine, const std::vector<std::string>& plugins) {
  std::string out;
  out += "# HELP ratchet_jobs Jobs in the database by state.\n# TYPE ratchet_jobs gauge\n";
  if (auto counts = engine.counts()) {
    for (auto [state, n] : *counts)
      out += fmt::format("ratchet_jobs{{state=\"{}\"}} {}\n", to_string(state), n);
  }
  // Plugins without a call yet are listed with zeros, so every series exists
  // from the first scrape.
  auto stats = engine.call_stats();
  for (const auto& name : plugins) {
    if (std::ranges::none_of(stats, [&](const PluginCallStats& p) { return p.plugin == name; })) {
      stats.push_back(PluginCallStats{.plugin = name});
    }
  }
  std::ranges::sort(stats, {}, &PluginCallStats::plugin);
  auto counter = [&](std::string_view name, std::string_view help, auto field) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
    for (const auto& p : stats) out += fmt::format("{}{{plugin=\"{}\"}} {}\n", name, p.plugin, field(p));
  };
  counter("ratchet_plugin_calls_total", "Plugin calls made by this process.",
          [](const PluginCallStats& p) { return p.calls; });
  counter("ratchet_plugin_throttled_total", "Plugin calls answered 429 or throttled.",
          [](const PluginCallStats& p) { return p.throttled; });
  counter("ratchet_plugin_retries_total", "Plugin calls retried after a failure.",
          [](const PluginCallStats& p) { return p.retries; });
  counter("ratchet_plugin_parks_total", "Steps parked waiting for a slot, a backoff or a circuit.",
          [](const PluginCallStats& p) { return p.parks; });
  return out;
}

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const noexcept { return impl_->port; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(std::string_view address, Engine& engine) {
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
  auto impl = std::make_unique<Impl>();
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
