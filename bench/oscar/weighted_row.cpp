#include "weighted_row.hpp"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "engine_run.hpp"
#include "mock_portal/server.hpp"
#include "ratchet/engine.hpp"
#include "table.hpp"

namespace ratchet::bench {
namespace {

std::string engine_toml(const WeightedSetup& s, const std::string& knows, const std::string& url,
                        const std::filesystem::path& db) {
  std::ostringstream t;
  t << "[engine]\ndatabase = " << nlohmann::json(db.string()).dump()
    << "\nplugins = " << nlohmann::json(s.plugin_dir.string()).dump() << "\nworkers = " << s.workers << "\n\n"
    << "[plugin.http_json]\nurl = "
    << nlohmann::json(url + "/movies/{{args.name}}?cost={{args.points}}").dump()
    << "\nextract = \"/rating\"\noutput = \"rating\"\n";
  if (knows == "estimated") t << "estimate = \"{{args.points}}\"\n";
  if (knows == "declared") t << "cost = \"{{args.points}}\"\n";
  if (knows != "ignored") t << "cost_header = \"X-Query-Cost\"\n";
  // The portal counts units in windows aligned to the clock (IETF dialect).
  t << "\n[[plugin.http_json.limit]]\nrate = " << s.portal_rate
    << "\nper = \"1s\"\nalgorithm = \"fixed_window\"\n\n"
    << "[job.query]\nsteps = [{ name = \"query\", call = \"http_json.request\", args = { name = "
       "\"{{args.name}}\", points = \"{{args.points}}\" } }]\n";
  return t.str();
}

}  // namespace

std::int64_t WeightedSetup::cost_of(int job) const {
  std::mt19937_64 random(seed ^ (static_cast<std::uint64_t>(job) * 0x9E3779B97F4A7C15ULL));
  return std::uniform_int_distribution<std::int64_t>(1, max_cost)(random);
}

std::int64_t WeightedSetup::units() const {
  std::int64_t sum = 0;
  for (int j = 0; j < jobs; ++j) sum += cost_of(j);
  return sum;
}

double WeightedSetup::bound_seconds() const {
  return static_cast<double>(units()) / static_cast<double>(portal_rate);
}

WeightedRow run_weighted(const WeightedSetup& setup, const std::string& knows) {
  WeightedRow row;
  row.name = "engine, cost " + knows;
  mock_portal::ServerOptions options;
  options.threads = 2 * setup.workers + 8;
  mock_portal::PortalOptions portal;
  portal.dialect = mock_portal::Dialect::kIetf;
  portal.limit = setup.portal_rate;
  portal.window = std::chrono::seconds(1);
  options.portals["imdb"] = portal;
  auto server = mock_portal::MockPortalServer::start(options);
  if (!server) {
    row.available = false;
    row.note = server.error().to_string();
    return row;
  }
  const auto config = setup.work_dir / ("weighted-" + knows + ".toml");
  const auto database = setup.work_dir / ("weighted-" + knows + ".db");
  std::ofstream(config) << engine_toml(setup, knows, (*server)->portal_url("imdb"), database);
  std::vector<nlohmann::json> args;
  for (int j = 0; j < setup.jobs; ++j) {
    args.push_back({{"name", "movie-" + std::to_string(j)}, {"points", setup.cost_of(j)}});
  }
  auto run = run_jobs(config, "query", args, setup.deadline);
  if (!run) {
    row.available = false;
    row.note = run.error().to_string();
    return row;
  }
  row.makespan_s = run->makespan_s;
  const JobTally tally = tally_jobs(*run);
  row.parks = tally.parks;
  row.jobs_completed = tally.completed;
  const auto stats = (*server)->stats().portals.at("imdb");
  row.requests = stats.requests;
  row.units = stats.units;
  row.throttled = stats.throttled;
  row.max_in_second = stats.max_in_aligned_window;
  return row;
}

void print_weighted(std::ostream& out, const WeightedSetup& setup, const std::vector<WeightedRow>& rows) {
  out << "\nweighted: " << setup.jobs << " jobs, each one query of 1-" << setup.max_cost
      << " units, one portal (IETF headers) allowing " << setup.portal_rate << " units/s; " << setup.units()
      << " units, bound " << fixed(setup.bound_seconds(), 2) << " s\n";
  out << "  row                     makespan s  x bound  requests  units at portal  429s  parks/call  "
         "max units/s  jobs done\n";
  for (const auto& r : rows) {
    if (!r.available) {
      out << "  " << r.name << ": not run (" << r.note << ")\n";
      continue;
    }
    const double calls = std::max(1, r.jobs_completed);
    out << "  " << std::left << std::setw(23) << r.name << std::right << std::setw(12)
        << fixed(r.makespan_s, 2) << std::setw(9) << fixed(r.makespan_s / setup.bound_seconds(), 2)
        << std::setw(10) << r.requests << std::setw(17) << r.units << std::setw(6) << r.throttled
        << std::setw(12) << fixed(static_cast<double>(r.parks) / calls, 2) << std::setw(10) << r.max_in_second
        << "/" << setup.portal_rate << std::setw(8) << r.jobs_completed << "/" << setup.jobs << "\n";
  }
}

nlohmann::json weighted_json(const WeightedSetup& setup, const std::vector<WeightedRow>& rows) {
  nlohmann::json out = {
      {"jobs", setup.jobs},     {"max_cost", setup.max_cost},       {"portal_rate", setup.portal_rate},
      {"units", setup.units()}, {"bound_s", setup.bound_seconds()}, {"rows", nlohmann::json::array()}};
  for (const auto& r : rows) {
    out["rows"].push_back({{"row", r.name},
                           {"available", r.available},
                           {"note", r.note},
                           {"makespan_s", r.makespan_s},
                           {"requests", r.requests},
                           {"units", r.units},
                           {"throttled", r.throttled},
                           {"parks", r.parks},
                           {"max_in_second", r.max_in_second},
                           {"jobs_completed", r.jobs_completed}});
  }
  return out;
}

}  // namespace ratchet::bench
