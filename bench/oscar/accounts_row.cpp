#include "accounts_row.hpp"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "engine_run.hpp"
#include "mock_portal/server.hpp"
#include "ratchet/engine.hpp"
#include "table.hpp"

namespace ratchet::bench {
namespace {

std::string account_name(int a) {
  std::ostringstream out;
  out << "acct-" << std::setw(3) << std::setfill('0') << a;
  return out.str();
}

std::string engine_toml(const AccountsSetup& s, const std::string& url, const std::filesystem::path& db) {
  std::ostringstream t;
  t << "[engine]\ndatabase = " << nlohmann::json(db.string()).dump()
    << "\nplugins = " << nlohmann::json(s.plugin_dir.string()).dump() << "\nworkers = " << s.workers << "\n\n"
    << "[plugin.http_json]\nurl = "
    << nlohmann::json(url + "/movies/{{args.name}}?account={{args.account}}").dump()
    << "\nextract = \"/rating\"\noutput = \"rating\"\n\n"
    // The portal counts windows aligned to the clock (the IETF dialect).
    << "[[plugin.http_json.limit]]\nrate = " << s.portal_rate
    << "\nper = \"1s\"\nalgorithm = \"fixed_window\"\n\n"
    << "[[plugin.http_json.limit]]\nrate = " << s.account_rate
    << "\nper = \"1s\"\nalgorithm = \"fixed_window\"\nkey = \"{{args.account}}\"\n\n"
    << "[job.rate]\nsteps = [{ name = \"rating\", call = \"http_json.request\", args = { name = "
       "\"{{args.name}}\", account = \"{{args.account}}\" } }]\n";
  return t.str();
}

}  // namespace

int AccountsSetup::account_of(int job) const {
  if (spread == "skewed" && job % 10 == 0) return 0;
  return job % accounts;
}

int AccountsSetup::jobs_of(int account) const {
  int n = 0;
  for (int j = 0; j < jobs; ++j) n += account_of(j) == account ? 1 : 0;
  return n;
}

double AccountsSetup::bound_seconds() const {
  double bound = static_cast<double>(jobs) / static_cast<double>(portal_rate);
  for (int a = 0; a < accounts; ++a) bound = std::max(bound, account_bound_seconds(a));
  return bound;
}

double AccountsSetup::account_bound_seconds(int account) const {
  return std::max(static_cast<double>(jobs_of(account)) / static_cast<double>(account_rate),
                  static_cast<double>(jobs) / static_cast<double>(portal_rate));
}

AccountsRow run_accounts(const AccountsSetup& setup) {
  AccountsRow row;
  row.name = "engine, " + setup.spread + " accounts";
  row.bound_s = setup.bound_seconds();
  mock_portal::ServerOptions options;
  options.threads = 2 * setup.workers + 8;  // a kept-alive connection per worker, and spares
  mock_portal::PortalOptions portal;
  portal.dialect = mock_portal::Dialect::kIetf;
  portal.limit = setup.portal_rate;
  portal.window = std::chrono::seconds(1);
  portal.account_limit = setup.account_rate;
  options.portals["imdb"] = portal;
  auto server = mock_portal::MockPortalServer::start(options);
  if (!server) {
    row.available = false;
    row.note = server.error().to_string();
    return row;
  }
  const auto config = setup.work_dir / ("accounts-" + setup.spread + ".toml");
  const auto database = setup.work_dir / ("accounts-" + setup.spread + ".db");
  std::ofstream(config) << engine_toml(setup, (*server)->portal_url("imdb"), database);
  std::vector<nlohmann::json> args;
  for (int j = 0; j < setup.jobs; ++j) {
    args.push_back({{"name", "movie-" + std::to_string(j)}, {"account", account_name(setup.account_of(j))}});
  }
  auto run = run_jobs(config, "rate", args, setup.deadline);
  if (!run) {
    row.available = false;
    row.note = run.error().to_string();
    return row;
  }
  row.makespan_s = run->makespan_s;
  const auto t0 = run->began;
  auto& engine = run->engine;
  const auto& ids = run->ids;

  std::map<int, double> finish;  // account -> its last job's finish, seconds after t0
  for (std::size_t j = 0; j < ids.size(); ++j) {
    auto job = engine->get(ids[j]);
    if (!job) continue;
    for (const auto& t : job->timeline) row.parks += t.kind == "parked" ? 1 : 0;
    if (job->state != JobState::kCompleted || !job->finished_at) continue;
    ++row.jobs_completed;
    const int a = setup.account_of(static_cast<int>(j));
    finish[a] = std::max(finish[a], std::chrono::duration<double>(*job->finished_at - t0).count());
  }
  for (const auto& [a, at] : finish) {
    const double ratio = at / setup.account_bound_seconds(a);
    if (ratio > row.slowest_over_bound) {
      row.slowest_over_bound = ratio;
      row.slowest_account = account_name(a);
      row.slowest_finish_s = at;
    }
  }
  const auto stats = (*server)->stats();
  for (const auto& [name, p] : stats.portals) {
    if (name == "imdb") {
      row.throttled += p.throttled;
      row.max_in_second = p.max_in_aligned_window;
    } else if (name.rfind("imdb@", 0) == 0) {
      row.requests += p.requests;  // every request meets its account first
      row.throttled += p.throttled;
      row.max_account_in_second = std::max(row.max_account_in_second, p.max_in_aligned_window);
    }
  }
  return row;
}

void print_accounts(std::ostream& out, const AccountsSetup& setup, const std::vector<AccountsRow>& rows) {
  out << "\naccounts: " << setup.jobs << " jobs over " << setup.accounts << " accounts, one portal (IETF "
      << "headers) limiting each account to " << setup.account_rate << "/s and all to " << setup.portal_rate
      << "/s; bound " << fixed(setup.bound_seconds(), 2) << " s\n";
  out << "  row                    makespan s  x bound  requests  429s  parks/call  max/s (all, account)  "
         "slowest account (finish s, x its bound)  jobs done\n";
  for (const auto& r : rows) {
    if (!r.available) {
      out << "  " << r.name << ": not run (" << r.note << ")\n";
      continue;
    }
    const double calls = std::max(1, r.jobs_completed);
    out << "  " << std::left << std::setw(22) << r.name << std::right << std::setw(12)
        << fixed(r.makespan_s, 2) << std::setw(9) << fixed(r.bound_s > 0 ? r.makespan_s / r.bound_s : 0, 2)
        << std::setw(10) << r.requests << std::setw(6) << r.throttled << std::setw(12)
        << fixed(static_cast<double>(r.parks) / calls, 2) << std::setw(12) << r.max_in_second << "/"
        << setup.portal_rate << ", " << r.max_account_in_second << "/" << setup.account_rate << "      "
        << r.slowest_account << " (" << fixed(r.slowest_finish_s, 2) << ", " << fixed(r.slowest_over_bound, 2)
        << ")" << std::setw(12) << r.jobs_completed << "/" << setup.jobs << "\n";
  }
}

nlohmann::json accounts_json(const AccountsSetup& setup, const std::vector<AccountsRow>& rows) {
  nlohmann::json out = {{"jobs", setup.jobs},
                        {"accounts", setup.accounts},
                        {"account_rate", setup.account_rate},
                        {"portal_rate", setup.portal_rate},
                        {"bound_s", setup.bound_seconds()},
                        {"rows", nlohmann::json::array()}};
  for (const auto& r : rows) {
    out["rows"].push_back({{"row", r.name},
                           {"available", r.available},
                           {"note", r.note},
                           {"makespan_s", r.makespan_s},
                           {"bound_s", r.bound_s},
                           {"requests", r.requests},
                           {"throttled", r.throttled},
                           {"parks", r.parks},
                           {"max_in_second", r.max_in_second},
                           {"max_account_in_second", r.max_account_in_second},
                           {"slowest_account", r.slowest_account},
                           {"slowest_finish_s", r.slowest_finish_s},
                           {"slowest_over_bound", r.slowest_over_bound},
                           {"jobs_completed", r.jobs_completed}});
  }
  return out;
}

}  // namespace ratchet::bench
