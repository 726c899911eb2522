#include "harness.hpp"

#include <sys/resource.h>

#include <cmath>

#include "mock_portal/bodies.hpp"

namespace ratchet::bench {

double Row::requests_per_rating() const {
  const auto ratings = static_cast<double>(jobs_completed) * static_cast<double>(kPortals);
  return ratings > 0 ? static_cast<double>(requests) / ratings : 0;
}

double Row::parks_per_call() const {
  const auto calls = static_cast<double>(jobs_completed) * static_cast<double>(kPortals);
  return calls > 0 && parks >= 0 ? static_cast<double>(parks) / calls : 0;
}

std::vector<std::string> Row::over_limit() const {
  std::vector<std::string> out;
  for (const auto& p : portals) {
    if (p.max_in_window > p.allowed) {
      out.push_back(p.name + " " + std::to_string(p.max_in_window) + " > " + std::to_string(p.allowed));
    }
  }
  return out;
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

Result<std::unique_ptr<Harness>> Harness::start(BenchSetup& setup) {
  mock_portal::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.seed = setup.seed;
  // Each kept-alive connection holds a server thread; leave room for every
  // strategy's and the engine's connections (five plugins' clients).
  options.threads = 6 * setup.workers + 8;
  for (const auto& p : setup.portals) options.portals[p.name] = p.options;
  auto server = mock_portal::MockPortalServer::start(std::move(options));
  if (!server) return fail(server.error().with_context("starting the mock portal server"));
  setup.server_url = (*server)->base_url();
  for (auto& p : setup.portals) p.url = (*server)->portal_url(p.name);
  auto client = http::Client::create({.timeout = std::chrono::seconds(10)});
  if (!client) return fail(client.error());
  return std::unique_ptr<Harness>(new Harness(std::move(*server), std::move(*client)));
}

Status Harness::reset_server(const BenchSetup& setup) {
  auto r = client_->perform({.method = "POST", .url = setup.server_url + "/_reset"});
  if (!r) return fail(http::to_error(r.error()).with_context("POST /_reset"));
  if (r->status != 200) {
    return fail(Error::io("POST " + setup.server_url + "/_reset answered " + std::to_string(r->status)));
  }
  return {};
}

Result<mock_portal::Stats> Harness::server_stats(const BenchSetup& setup) {
  auto r = client_->perform({.url = setup.server_url + "/_stats"});
  if (!r) return fail(http::to_error(r.error()).with_context("GET /_stats"));
  const auto doc = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (r->status != 200 || doc.is_discarded()) {
    return fail(Error::io("GET " + setup.server_url + "/_stats answered " + std::to_string(r->status) +
                          " without JSON"));
  }
  return mock_portal::stats_from_json(doc);
}

Row Harness::run(const std::string& name, const BenchSetup& setup,
                 const std::function<RunResult(const BenchSetup&)>& strategy) {
  Row row;
  row.strategy = name;
  row.jobs = setup.jobs;
  row.bound_s = setup.bound_seconds();
  if (auto s = reset_server(setup); !s) {
    row.available = false;
    row.note = s.error().message();
    return row;
  }
  const RunResult result = strategy(setup);
  row.available = result.available;
  row.note = result.note;
  row.peak_rss_kib = peak_rss_kib();
  if (!result.available) return row;
  row.makespan_s = result.makespan_s;
  row.parks = result.parks;

  // Every rating obtained is checked, not a sample: it is cheap.
  for (std::size_t job = 0; job < result.jobs.size() && job < setup.movies.size(); ++job) {
    const auto& record = result.jobs[job];
    if (record.completed) ++row.jobs_completed;
    for (std::size_t p = 0; p < kPortals; ++p) {
      if (!record.ratings[p]) continue;
      ++row.ratings_checked;
      const double expected = mock_portal::expected_rating(setup.portals[p].name, setup.movies[job]);
      if (std::abs(*record.ratings[p] - expected) > 1e-9) ++row.ratings_wrong;
    }
  }

  auto stats = server_stats(setup);
  if (!stats) {
    row.note += (row.note.empty() ? "" : "; ") + stats.error().message();
    return row;
  }
  for (const auto& p : setup.portals) {
    const auto it = stats->portals.find(p.name);
    if (it == stats->portals.end()) continue;
    const auto& s = it->second;
    row.portals.push_back(
        {p.name, s.requests, s.throttled, s.errors, s.max_in_window, p.allowed_in_window()});
    row.requests += s.requests;
    row.throttled += s.throttled;
    row.errors += s.errors;
  }
  return row;
}

}  // namespace ratchet::bench
