#include "trial.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine_run.hpp"
#include "mock_portal/server.hpp"
#include "nginx_limiter.hpp"
#include "ratchet/engine.hpp"

namespace ratchet::bench {
namespace {

namespace fs = std::filesystem;

// What a user writes who knows nothing of the server's limit: no limit, the
// default retry policy and worker count.
std::string config_toml(const TrialSetup& setup, const std::string& url, const fs::path& db) {
  std::ostringstream t;
  t << "[engine]\ndatabase = " << nlohmann::json(db.string()).dump()
    << "\nplugins = " << nlohmann::json(setup.plugin_dir.string()).dump() << "\nworkers = " << setup.workers
    << "\n\n[plugin.http_json]\nurl = " << nlohmann::json(url + "/movies/{{args.name}}").dump()
    << "\nextract = \"/rating\"\noutput = \"rating\"\n\n"
    << "[job.rate]\nsteps = [{ name = \"rate\", call = \"http_json.request\", args = { name = "
       "\"{{args.name}}\" } }]\n";
  return t.str();
}

double seconds_between(std::chrono::system_clock::time_point a, std::chrono::system_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

double TrialResult::share_429() const {
  return requests > 0 ? static_cast<double>(throttled) / static_cast<double>(requests) : 0.0;
}

double TrialResult::ratio() const { return bound_s > 0 ? makespan_s / bound_s : 0.0; }

bool TrialResult::passed() const {
  return ran && completed == server.jobs && share_429() <= server.max_429_share() && ratio() <= 1.15;
}

TrialResult run_trial(const TrialSetup& setup, const BedServer& s) {
  TrialResult r;
  r.server = s;
  const std::string name = "bed-" + std::to_string(s.seed) + "-" + std::to_string(s.jobs);
  const fs::path dir = setup.work_dir / name;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);

  mock_portal::ServerOptions options;
  options.seed = s.seed;
  options.threads = 2 * setup.workers + 8;
  options.portals["imdb"] = s.portal();
  auto server = mock_portal::MockPortalServer::start(options);
  if (!server) {
    r.note = server.error().to_string();
    return r;
  }
  std::unique_ptr<NginxLimiter> nginx;
  std::string url = (*server)->portal_url("imdb");
  if (s.kind == BedKind::kNginx) {
    auto n = NginxLimiter::start(
        dir / "nginx", (*server)->port(),
        {.rate = s.nginx_rate, .burst = s.nginx_burst, .retry_after = s.nginx_retry_after});
    if (!n) {
      r.note = n.error().to_string();
      return r;
    }
    nginx = std::move(*n);
    url = nginx->url() + "/imdb";
  }
  const fs::path config = dir / "ratchet.toml";
  std::ofstream(config) << config_toml(setup, url, dir / "ratchet.db");
  std::vector<nlohmann::json> args;
  for (int j = 0; j < s.jobs; ++j) args.push_back({{"name", "movie-" + std::to_string(j)}});
  const auto deadline = std::chrono::seconds(60 + s.jobs);
  auto run = run_jobs(config, "rate", args, deadline);
  if (!run) {
    r.note = run.error().to_string();
    return r;
  }
  const JobTally tally = tally_jobs(*run);
  r.parks = tally.parks;
  r.completed = tally.completed;
  const auto stats = (*server)->stats().portals.at("imdb");
  for (const auto& rec : (*server)->requests()) {
    r.arrivals_us.push_back(rec.arrived_us);
    r.arrived_at_us.push_back(rec.arrived_us);
    r.statuses.push_back(rec.status);
  }
  if (!r.arrivals_us.empty()) {
    const auto first = r.arrivals_us.front();
    for (auto& a : r.arrivals_us) a -= first;
  }
  if (nginx) {
    auto log = nginx->finish();
    if (!log) {
      r.note = log.error().to_string();
      return r;
    }
    for (const auto& [status, n] : log->statuses) {
      r.requests += n;
      if (status == 429) r.throttled += n;
      if (status >= 500) r.errors += n;
    }
    r.makespan_s = seconds_between(log->first_arrival, log->last_answer);
    r.bound_s = s.bound_seconds(log->first_arrival, r.errors);
  } else {
    r.requests = stats.requests;
    r.throttled = stats.throttled;
    r.errors = stats.errors;
    r.makespan_s = seconds_between(stats.first_arrival, stats.last_arrival) +
                   std::chrono::duration<double>(s.latency).count();
    r.bound_s = s.bound_seconds(stats.first_arrival, r.errors);
  }
  r.ran = true;
  if (r.completed != s.jobs) r.note = std::to_string(s.jobs - r.completed) + " jobs not completed";
  return r;
}

}  // namespace ratchet::bench
