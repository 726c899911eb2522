// ratchet-bench-bed: the learned pace on servers it was never tuned on.
// Each seed draws one rate-limited server (server_draw.hpp: kind, rate,
// burst, window alignment, latency, error share; nginx limit_req among them);
// the engine, with no limit declared, runs N one-call jobs against it; the
// table gives the 429 share and the makespan against the bound, and every
// seed must pass. The first seed is new on every run and printed; --seed
// runs the same servers again. One seed's server, met again, can pass once
// and fail the next time (the engine's threads, the network and the
// server's window alignment against the first call all move): --runs K
// runs each trial K times, and a seed passes only when every run does.
//
//   ratchet-bench-bed                          # 12 seeds, N = 50 and N = 1000
//   ratchet-bench-bed --seed 4711 --seeds 1 --jobs 1000 --runs 3
//   ratchet-bench-bed --json                   # also each request the portal saw: [us after the first,
//   status]
//
// Exit code: 0 when every trial met its targets, 1 when one did not, 2 when
// one could not run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "fixed.hpp"
#include "trial.hpp"

namespace {

using ratchet::bench::fixed;
using ratchet::bench::TrialResult;

void print_row(const TrialResult& r) {
  const auto& s = r.server;
  std::cout << std::setw(20) << s.seed << std::setw(6) << s.jobs << "  " << std::left << std::setw(52)
            << s.describe() << std::right;
  if (!r.ran) {
    std::cout << "  not run: " << r.note << "\n";
    return;
  }
  std::cout << std::setw(9) << r.requests << std::setw(6) << r.throttled << std::setw(8)
            << fixed(100.0 * r.share_429(), 1) << "%" << std::setw(4) << "/"
            << fixed(100 * s.max_429_share(), 0) << "%" << std::setw(6) << r.errors << std::setw(9)
            << fixed(r.makespan_s, 2) << std::setw(8) << fixed(r.bound_s, 2) << std::setw(7)
            << fixed(r.ratio(), 2) << std::setw(8)
            << fixed(static_cast<double>(r.parks) / std::max(1, r.completed), 2) << std::setw(6)
            << r.completed << "  " << (r.passed() ? "pass" : "FAIL") << (r.note.empty() ? "" : "  " + r.note)
            << "\n";
  std::cout.flush();
}

void print_trace(const TrialResult& r) {
  std::vector<int> bins;
  for (auto a : r.arrivals_us) {
    const auto b = static_cast<std::size_t>(a / 250000);
    if (bins.size() <= b) bins.resize(b + 1);
    ++bins[b];
  }
  std::cout << "      arrivals per 250 ms:";
  for (int b : bins) std::cout << ' ' << b;
  std::cout << "\n";
  const auto& s = r.server;
  if (!s.fixed_window() || r.arrived_at_us.empty()) return;
  // Each of the server's windows: what it counted, when (ms into it), and
  // its answers other than 200. A request counts once its latency is over.
  const std::int64_t w = std::chrono::duration_cast<std::chrono::microseconds>(s.window).count();
  const std::int64_t shift =
      std::chrono::duration_cast<std::chrono::microseconds>(s.latency - s.window_offset).count();
  std::int64_t current = -1;
  std::int64_t base = 0;
  for (std::size_t i = 0; i < r.arrived_at_us.size(); ++i) {
    const std::int64_t t = r.arrived_at_us[i] + shift;
    const std::int64_t k = t / w;
    if (current < 0) base = k;
    if (k != current) {
      std::cout << (current < 0 ? "" : "\n") << "      window " << (k - base) << ":";
      current = k;
    }
    std::cout << ' ' << (t - k * w) / 1000;
    if (r.statuses[i] != 200) std::cout << '/' << r.statuses[i];
  }
  std::cout << "\n";
}

nlohmann::json to_json(const TrialResult& r) {
  const auto& s = r.server;
  // Every request as the portal saw it: microseconds after the first, and
  // its answer, to read a failing seed's trial from.
  nlohmann::json arrivals = nlohmann::json::array();
  for (std::size_t i = 0; i < r.arrivals_us.size() && i < r.statuses.size(); ++i) {
    arrivals.push_back({r.arrivals_us[i], r.statuses[i]});
  }
  return {{"seed", s.seed},
          {"jobs", s.jobs},
          {"server", s.describe()},
          {"ran", r.ran},
          {"note", r.note},
          {"requests", r.requests},
          {"throttled", r.throttled},
          {"share_429", r.share_429()},
          {"max_share_429", s.max_429_share()},
          {"errors", r.errors},
          {"makespan_s", r.makespan_s},
          {"bound_s", r.bound_s},
          {"ratio", r.ratio()},
          {"parks", r.parks},
          {"completed", r.completed},
          {"passed", r.passed()},
          {"arrivals", std::move(arrivals)}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ratchet-bench-bed: the learned pace against servers drawn from seeds"};
  std::uint64_t seed = std::random_device{}() % 1000000;
  int seeds = 12;
  std::vector<int> jobs;
  int workers = 8;
  int runs = 1;
  bool json = false;
  bool trace = false;
  std::string work_dir;
  app.add_option("--seed", seed, "first seed (default: a new one, printed)");
  app.add_option("--seeds", seeds, "seeds in a row from the first")->check(CLI::Range(1, 10000));
  app.add_option("--jobs", jobs, "jobs of each trial; repeat for more sizes (default 50 and 1000)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--workers", workers, "engine worker threads")->check(CLI::Range(1, 256));
  app.add_option("--runs", runs, "times each trial runs; a seed passes only when every run does")
      ->check(CLI::Range(1, 100));
  app.add_option("--work-dir", work_dir, "where databases and configs go (default: a temp folder)");
  app.add_flag("--json", json, "print JSON instead of the table");
  app.add_flag("--trace", trace, "under each row, the arrivals at the portal in each 250 ms");
  CLI11_PARSE(app, argc, argv);
  if (jobs.empty()) jobs = {50, 1000};
  // The table is the output; the engine's own log only where it warns.
  spdlog::set_level(spdlog::level::warn);

  ratchet::bench::TrialSetup setup;
  setup.plugin_dir = RATCHET_PLUGIN_DIR;
  setup.workers = workers;
  setup.work_dir = work_dir.empty() ? std::filesystem::temp_directory_path() /
                                          ("ratchet-bed-" + std::to_string(::getpid()))
                                    : std::filesystem::path(work_dir);
  std::filesystem::create_directories(setup.work_dir);

  if (!json) {
    std::cout << "learned-pace test bed: seeds " << seed << " to " << seed + seeds - 1
              << " (run again with --seed " << seed << " --seeds " << seeds << "), " << workers
              << " workers, no limit declared"
              << (runs > 1 ? ", each trial run " + std::to_string(runs) + " times" : "") << "\n"
              << std::setw(20) << "seed" << std::setw(6) << "N"
              << "  " << std::left << std::setw(52) << "server" << std::right
              << "  requests  429s   share/max   5xx  makespan   bound  ratio  parks/call  done\n";
  }
  std::vector<TrialResult> results;
  long trials = 0;         // a seed at one N, over all its runs
  long trials_passed = 0;  // every run of it passed
  for (int n : jobs) {
    for (int i = 0; i < seeds; ++i) {
      bool every_run = true;
      for (int k = 0; k < runs; ++k) {
        results.push_back(ratchet::bench::run_trial(setup, ratchet::bench::draw_server(seed + i, n)));
        every_run = every_run && results.back().passed();
        if (!json) print_row(results.back());
        if (!json && trace) print_trace(results.back());
      }
      ++trials;
      if (every_run) ++trials_passed;
    }
  }
  const bool all_ran = std::all_of(results.begin(), results.end(), [](const auto& r) { return r.ran; });
  if (json) {
    nlohmann::json out = {{"first_seed", seed},      {"seeds", seeds},
                          {"workers", workers},      {"runs", runs},
                          {"passed", trials_passed}, {"trials", nlohmann::json::array()}};
    for (std::size_t i = 0; i < results.size(); ++i) {
      nlohmann::json t = to_json(results[i]);
      t["run"] = static_cast<int>(i) % runs + 1;
      out["trials"].push_back(std::move(t));
    }
    std::cout << out.dump(2) << "\n";
  } else if (runs > 1) {
    const auto runs_passed =
        std::count_if(results.begin(), results.end(), [](const auto& r) { return r.passed(); });
    std::cout << trials_passed << " of " << trials << " trials met their targets in every run ("
              << runs_passed << " of " << results.size() << " runs)\n";
  } else {
    std::cout << trials_passed << " of " << trials << " trials met their targets\n";
  }
  if (work_dir.empty()) std::filesystem::remove_all(setup.work_dir);
  if (!all_ran) return 2;
  return trials_passed == trials ? 0 : 1;
}
