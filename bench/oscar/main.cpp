// ratchet-bench-oscar: N "rate a movie" jobs, each calling five mock portals
// with five different limits and header dialects, run side by side by the
// three hand-made strategies the engine replaces and by the engine (with its
// limits declared, and learning them from the servers), in one table.
//
//   ratchet-bench-oscar                      # N = 200, 16 workers
//   ratchet-bench-oscar --n 50 --scale 0.5   # quicker: fewer jobs, half the rates
//   ratchet-bench-oscar --json               # the same as one JSON document
//   ratchet-bench-oscar --only barrier --only engine
//   ratchet-bench-oscar --only accounts --spread skewed   # 1000 jobs over 50 accounts
//   ratchet-bench-oscar --only weighted                   # queries of 1-6 units each
//
// Progress goes to stderr, the table (or JSON) to stdout. Exits 0, 1 when
// the server cannot start, 3 when a strategy got a rating the server never
// gave.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "accounts_row.hpp"
#include "harness.hpp"
#include "strategies.hpp"
#include "table.hpp"
#include "weighted_row.hpp"

namespace {

using namespace ratchet;
using namespace ratchet::bench;

// A scratch folder for the engine's TOML and database, removed on exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ratchet-bench-oscar-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

int run(int argc, char** argv) {
  CLI::App app{"Side-by-side benchmark of the hand-made rate-limit strategies and the ratchet engine"};
  int jobs = 200;
  int workers = 16;
  double scale = 1.0;
  int deadline_s = 120;
  std::uint64_t seed = 42;
  bool json = false;
  std::vector<std::string> only;
  std::string print_toml;
  std::int64_t burst = 0;
  app.add_option("-n,--n", jobs, "jobs (movies to rate)")->check(CLI::Range(1, 100000));
  app.add_option("--workers", workers, "worker threads of every strategy")->check(CLI::Range(1, 256));
  app.add_option("--scale", scale, "multiplies every portal's rate (1: the slowest admits 40/s)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--deadline", deadline_s, "seconds after which a strategy is cut off")
      ->check(CLI::Range(1, 3600));
  app.add_option("--seed", seed, "seed of the strategies' jitter and random sleeps");
  app.add_flag("--json", json, "print JSON instead of the table");
  app.add_option("--only", only,
                 "run only these rows: job_retry, barrier, blind_retry, engine, accounts, weighted")
      ->check(CLI::IsMember({"job_retry", "barrier", "blind_retry", "engine", "accounts", "weighted"}));
  WeightedSetup weighted;
  app.add_option("--weighted-jobs", weighted.jobs, "jobs of the weighted rows")->check(CLI::Range(1, 100000));
  app.add_option("--max-cost", weighted.max_cost, "a weighted row's query costs 1 to this many units")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}));
  AccountsSetup accounts;
  std::vector<std::string> spreads{"even"};
  app.add_option("--account-jobs", accounts.jobs, "jobs of the accounts rows")->check(CLI::Range(1, 100000));
  app.add_option("--accounts", accounts.accounts, "accounts the accounts rows spread their jobs over")
      ->check(CLI::Range(1, 10000));
  app.add_option("--account-rate", accounts.account_rate, "calls a second the portal allows each account")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
  app.add_option("--portal-rate", accounts.portal_rate, "calls a second the portal allows all accounts")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
  app.add_option("--spread", spreads,
                 "how the accounts rows spread jobs: even, skewed (one in ten to one account)")
      ->check(CLI::IsMember({"even", "skewed"}));
  app.add_option("--burst", burst,
                 "bucket size of the two token-bucket portals (default: a sixth of their rate)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
  app.add_option("--print-engine-toml", print_toml,
                 "print the engine row's TOML (declared or learned) and exit; its URLs name "
                 "this run's server, which exits with it")
      ->check(CLI::IsMember({"declared", "learned"}));
  CLI11_PARSE(app, argc, argv);

  TempDir scratch;
  if (scratch.path().empty()) {
    std::cerr << "ratchet-bench-oscar: cannot create a scratch folder in "
              << std::filesystem::temp_directory_path() << "\n";
    return 1;
  }
  BenchSetup setup;
  setup.portals = default_portals(scale);
  for (auto& p : setup.portals) {
    if (burst > 0 && p.options.burst) p.options.burst = burst;
  }
  setup.jobs = jobs;
  setup.workers = workers;
  setup.movies = movie_names(jobs);
  setup.deadline = std::chrono::seconds(deadline_s);
  setup.seed = seed;
  setup.plugin_dir = RATCHET_PLUGIN_DIR;
  setup.work_dir = scratch.path();

  auto harness = Harness::start(setup);
  if (!harness) {
    std::cerr << "ratchet-bench-oscar: " << harness.error().message() << "\n";
    return 1;
  }

  if (!print_toml.empty()) {
    setup.engine_limits = print_toml == "declared" ? EngineLimits::kDeclared : EngineLimits::kLearned;
    std::cout << setup.engine_toml(setup.work_dir / "oscar.db");
    return 0;
  }

  auto wanted = [&](const std::string& key) {
    return only.empty() || std::find(only.begin(), only.end(), key) != only.end();
  };
  std::vector<Row> rows;
  auto add = [&](const std::string& key, const std::string& name, const BenchSetup& s,
                 RunResult (*strategy)(const BenchSetup&)) {
    if (!wanted(key)) return;
    std::cerr << "running: " << name << "\n";
    rows.push_back((*harness)->run(name, s, strategy));
  };
  add("job_retry", "job retry + per-job cache", setup, run_job_retry);
  add("barrier", "barrier per portal", setup, run_barrier);
  add("blind_retry", "blind retry, 1-5 s sleep", setup, run_blind_retry);
  for (const auto mode : {EngineLimits::kDeclared, EngineLimits::kLearned}) {
    BenchSetup engine_setup = setup;
    engine_setup.engine_limits = mode;
    const std::string name =
        mode == EngineLimits::kDeclared ? "engine, limits declared" : "engine, limits learned";
    add("engine", name, engine_setup, run_engine);
  }

  std::vector<AccountsRow> account_rows;
  if (wanted("accounts")) {
    accounts.workers = workers;
    accounts.deadline = setup.deadline;
    accounts.plugin_dir = setup.plugin_dir;
    accounts.work_dir = setup.work_dir;
    for (const auto& spread : spreads) {
      AccountsSetup s = accounts;
      s.spread = spread;
      std::cerr << "running: engine, " << spread << " accounts\n";
      account_rows.push_back(run_accounts(s));
    }
  }
  std::vector<WeightedRow> weighted_rows;
  if (wanted("weighted")) {
    weighted.workers = workers;
    weighted.seed = seed;
    weighted.deadline = setup.deadline;
    weighted.plugin_dir = setup.plugin_dir;
    weighted.work_dir = setup.work_dir;
    for (const std::string knows : {"declared", "estimated", "reported", "ignored"}) {
      std::cerr << "running: engine, cost " << knows << "\n";
      weighted_rows.push_back(run_weighted(weighted, knows));
    }
  }
  if (json) {
    nlohmann::json doc = to_json(setup, rows);
    if (!account_rows.empty()) doc["accounts"] = accounts_json(accounts, account_rows);
    if (!weighted_rows.empty()) doc["weighted"] = weighted_json(weighted, weighted_rows);
    std::cout << doc.dump(2) << "\n";
  } else {
    if (!rows.empty()) print_table(std::cout, setup, rows);
    if (!account_rows.empty()) print_accounts(std::cout, accounts, account_rows);
    if (!weighted_rows.empty()) print_weighted(std::cout, weighted, weighted_rows);
  }
  for (const auto& r : rows) {
    if (r.ratings_wrong > 0) return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
