// ratchet-demo: rates movies on five mock portals with the ratchet command,
// kills its worker halfway with SIGKILL, resumes from the checkpoints, and
// prints what the portals saw. See README.md ("The demo").
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "child.hpp"
#include "declared_limits.hpp"
#include "demo_config.hpp"
#include "mock_portal/server.hpp"
#include "ratchet/engine.hpp"

namespace ratchet::demo {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using mock_portal::Dialect;
using mock_portal::PortalOptions;

const char* const kMovies[] = {"Oppenheimer",
                               "Everything Everywhere All at Once",
                               "CODA",
                               "Nomadland",
                               "Parasite",
                               "Green Book",
                               "The Shape of Water",
                               "Moonlight",
                               "Spotlight",
                               "Birdman",
                               "12 Years a Slave",
                               "Argo",
                               "The Artist",
                               "The King's Speech",
                               "The Hurt Locker",
                               "Slumdog Millionaire",
                               "No Country for Old Men",
                               "The Departed",
                               "Crash",
                               "Million Dollar Baby",
                               "Chicago",
                               "A Beautiful Mind",
                               "Gladiator",
                               "American Beauty",
                               "Shakespeare in Love",
                               "Titanic",
                               "The English Patient",
                               "Braveheart",
                               "Forrest Gump",
                               "Schindler's List",
                               "Unforgiven",
                               "The Silence of the Lambs",
                               "Dances with Wolves",
                               "Driving Miss Daisy",
                               "Rain Man",
                               "The Last Emperor",
                               "Platoon",
                               "Out of Africa",
                               "Amadeus",
                               "Terms of Endearment"};

PortalOptions portal(Dialect dialect, std::int64_t limit, std::chrono::milliseconds latency) {
  PortalOptions p;
  p.dialect = dialect;
  p.limit = limit;
  p.window = 1s;
  p.latency = latency;
  return p;
}

// Each portal at its own limit, in its own header dialect; the limits match
// what config/oscar.toml declares.
std::map<std::string, PortalOptions> portals() {
  std::map<std::string, PortalOptions> m;
  m["imdb"] = portal(Dialect::kFixedWindow, 20, 15ms);
  m["rotten_tomatoes"] = portal(Dialect::kTokenBucket, 10, 25ms);
  m["rotten_tomatoes"].burst = 5;
  m["sify"] = portal(Dialect::kIetf, 5, 40ms);
  m["netflix"] = portal(Dialect::kBare429, 8, 20ms);
  m["amazon_prime"] = portal(Dialect::kFixedWindow, 15, 10ms);
  m["amazon_prime"].reset_style = mock_portal::ResetStyle::kDeltaSeconds;
  m["amazon_prime"].retry_after_style = mock_portal::RetryAfterStyle::kHttpDate;
  return m;
}

std::string dialect_text(const PortalOptions& p) {
  switch (p.dialect) {
    case Dialect::kFixedWindow:
      return p.reset_style == mock_portal::ResetStyle::kUnixTime ? "X-RateLimit-* (reset: unix time)"
                                                                 : "X-RateLimit-* (reset: seconds)";
    case Dialect::kTokenBucket: return "token bucket, 429 + Retry-After";
    case Dialect::kIetf: return "IETF RateLimit / RateLimit-Policy";
    case Dialect::kBare429: return "bare 429, no headers";
    case Dialect::kRetryAfter: return "fixed window, 429 + Retry-After";
    case Dialect::kNone: return "no limit";
  }
  return "";
}

struct Flags {
  int jobs = 200;
  std::string dir = RATCHET_DEMO_DIR;
  std::string ratchet;
  double kill_at = 0.5;
  bool quiet = false;
  std::string database;  // empty: oscar.db in dir
};

std::string self_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int64_t count_of(Engine& engine, JobState state) {
  auto counts = engine.counts();
  if (!counts) return 0;
  for (auto [s, n] : *counts) {
    if (s == state) return n;
  }
  return 0;
}

// After the child's progress line, start on a fresh line.
void newline_after_child() {
  if (::isatty(STDERR_FILENO)) std::fputs("\n", stderr);
  std::fflush(stderr);
}

int run_demo(const Flags& f) {
  if (f.jobs < 1) {
    fmt::print(stderr, "ratchet-demo: --jobs must be at least 1\n");
    return 2;
  }
  std::string ratchet = f.ratchet.empty() ? self_dir() + "/ratchet" : f.ratchet;
  if (!fs::exists(ratchet)) {
    fmt::print(
        stderr,
        "ratchet-demo: the ratchet command is not at {}; build it (target ratchet-cli) or pass --ratchet\n",
        ratchet);
    return 2;
  }

  mock_portal::ServerOptions options;
  options.portals = portals();
  // Each kept-alive connection holds a server thread. The engine keeps one
  // per worker (config/oscar.toml: 16) and portal, and the worker started
  // after the kill opens its own before the killed one's have timed out:
  // with fewer threads, requests would queue in the server, reach it late
  // and bunched, and the counts below would show the server's queue rather
  // than the engine's pace.
  options.threads = 2 * 16 * 5 + 8;
  auto server = mock_portal::MockPortalServer::start(options);
  if (!server) {
    fmt::print(stderr, "ratchet-demo: {}\n", server.error().to_string());
    return 1;
  }

  fs::path dir = fs::absolute(f.dir);
  fs::create_directories(dir);
  for (const char* name : {"oscar.toml", "oscar.db", "oscar.db-wal", "oscar.db-shm"}) fs::remove(dir / name);
  auto text = demo_config(read_file(fs::path(RATCHET_SOURCE_DIR) / "config" / "oscar.toml"),
                          (*server)->base_url(), RATCHET_PLUGIN_DIR);
  if (!text) {
    fmt::print(stderr, "ratchet-demo: {}\n", text.error().message());
    return 1;
  }
  const auto declared = allowed_per_second(*text);
  if (!f.database.empty()) {
    // The example's file setting gives way to the server database asked for.
    const std::string file_setting = "database = \"oscar.db\"";
    const auto at = text->find(file_setting);
    if (at == std::string::npos) {
      fmt::print(stderr, "ratchet-demo: config/oscar.toml has no line {} to replace\n", file_setting);
      return 1;
    }
    text->replace(at, file_setting.size(), "database = \"" + f.database + "\"");
  }
  fs::path config = dir / "oscar.toml";
  std::ofstream(config) << *text;

  fmt::print("ratchet demo: {} rate_movie jobs, each rating one movie on five portals\n", f.jobs);
  fmt::print("  mock portal server at {} (in this process)\n", (*server)->base_url());
  double slowest = 1e9;
  for (const auto& [name, p] : options.portals) {
    double rate = static_cast<double>(p.limit) / std::chrono::duration<double>(p.window).count();
    slowest = std::min(slowest, rate);
    fmt::print("    {:<16} {:>3}/s  {}\n", name, p.limit, dialect_text(p));
  }
  auto engine = Engine::open_config(config);
  if (!engine) {
    fmt::print(stderr, "ratchet-demo: {}\n", engine.error().to_string());
    return 1;
  }
  fmt::print("  config   {}\n  database {}\n\n", config.string(), (*engine)->database());
  std::fflush(stdout);
  if (!f.database.empty()) {
    // The summary counts what this run did, so it starts from an empty database.
    auto held = (*engine)->counts();
    std::int64_t jobs = 0;
    for (const auto& [state, n] : held.value_or(decltype(held)::value_type{})) jobs += n;
    if (jobs > 0) {
      fmt::print(stderr,
                 "ratchet-demo: {} already holds {} jobs; give --database an empty database, or a URL whose "
                 "options=-csearch_path%3DNAME names an empty schema\n",
                 (*engine)->database(), jobs);
      return 1;
    }
  }
  std::vector<nlohmann::json> args;
  constexpr std::size_t kTitles = std::size(kMovies);
  for (int i = 0; i < f.jobs; ++i) {
    std::string name = kMovies[static_cast<std::size_t>(i) % kTitles];
    if (static_cast<std::size_t>(i) >= kTitles)
      name += fmt::format(" (take {})", static_cast<std::size_t>(i) / kTitles + 1);
    args.push_back({{"name", name}});
  }
  auto ids = (*engine)->enqueue_many("rate_movie", args);
  if (!ids) {
    fmt::print(stderr, "ratchet-demo: {}\n", ids.error().to_string());
    return 1;
  }
  fmt::print("enqueued {} jobs; `ratchet run` works them:\n", ids->size());
  std::fflush(stdout);

  std::vector<std::string> run_argv = {ratchet,          "run", "-c", config.string(), "--until-empty",
                                       "--status-every", "2s"};
  auto started = std::chrono::steady_clock::now();
  auto first = Child::spawn(run_argv);
  if (!first) {
    fmt::print(stderr, "ratchet-demo: {}\n", first.error().to_string());
    return 1;
  }
  auto kill_when = static_cast<std::int64_t>(f.jobs * f.kill_at);
  bool killed = false;
  std::optional<int> first_exit;
  while (!(first_exit = first->poll())) {
    if (count_of(**engine, JobState::kCompleted) >= kill_when && f.kill_at < 1.0) {
      pid_t pid = first->pid();
      first->kill_now();
      killed = true;
      newline_after_child();
      fmt::print(
          "\n*** killed the worker (pid {}) with SIGKILL at {} of {} jobs completed; its running jobs keep "
          "their committed steps ***\n*** starting a new worker: it takes them over when their leases "
          "expire (3s) and resumes after their last checkpoint ***\n\n",
          pid, count_of(**engine, JobState::kCompleted), f.jobs);
      std::fflush(stdout);
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  int exit_code = first_exit.value_or(0);
  if (killed) {
    auto second = Child::spawn(run_argv);
    if (!second) {
      fmt::print(stderr, "ratchet-demo: {}\n", second.error().to_string());
      return 1;
    }
    exit_code = second->wait();
  }
  double makespan = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  newline_after_child();

  auto stats = (*server)->stats();
  std::int64_t completed = count_of(**engine, JobState::kCompleted);
  fmt::print("\n=== summary ===\n");
  fmt::print("jobs completed: {}/{}{}\n", completed, f.jobs,
             killed ? " (one worker killed with SIGKILL halfway, a second one resumed)" : "");
  fmt::print("{:<16} {:>9} {:>6} {:>6} {:>10} {:>8}  {:<30} {:>8}\n", "portal", "requests", "429s", "5xx",
             "max in 1s", "allowed", "declared limit", "req/rating");
  for (const auto& name : mock_portal::portal_names()) {
    const auto& p = stats.portals[name];
    double per =
        completed > 0 ? static_cast<double>(p.requests - p.throttled) / static_cast<double>(completed) : 0;
    // A fixed window is counted, as declared, in the seconds of the clock.
    std::string busiest = std::to_string(p.max_in_window);
    std::string allowed = "-";
    std::string shape = "none";
    if (auto it = declared.find(name); it != declared.end()) {
      if (it->second.aligned) busiest = std::to_string(p.max_in_aligned_window) + " (aligned)";
      const std::int64_t seen = it->second.aligned ? p.max_in_aligned_window : p.max_in_window;
      allowed = std::to_string(it->second.calls) + (seen > it->second.calls ? " !" : "");
      shape = it->second.shape;
    }
    fmt::print("{:<16} {:>9} {:>6} {:>6} {:>10} {:>8}  {:<30} {:>8.2f}\n", name, p.requests, p.throttled,
               p.errors, busiest, allowed, shape, per);
  }
  fmt::print(
      "(max in 1s: the most requests the portal received in any second, or in one second of the clock for a "
      "fixed window; allowed: what the declared limit lets through in it, a burst's calls included)\n");
  fmt::print(
      "(requests/rating leaves out 429s; above 1.00 means a step ran again after the kill, at-least-once "
      "for the step in flight)\n");
  double bound = f.jobs / slowest;
  fmt::print("makespan: {:.1f}s; theoretical bound {:.1f}s ({} jobs / slowest portal's {:.0f}/s): {:.2f}x\n",
             makespan, bound, f.jobs, slowest, makespan / bound);

  // The job with the most eventful life: parked, taken over after the kill.
  JobId chosen = ids->front();
  std::size_t events = 0;
  std::int64_t parks = 0;
  for (JobId id : *ids) {
    auto job = (*engine)->get(id);
    if (!job) continue;
    for (const auto& t : job->timeline) parks += t.kind == "parked" ? 1 : 0;
    std::size_t n = job->timeline.size() + static_cast<std::size_t>(job->lease_expiries) * 10;
    if (n > events) {
      events = n;
      chosen = id;
    }
  }
  // A step that must wait for its slot parks once: more parks than calls
  // would mean steps sent back to wait again.
  const auto calls = completed * static_cast<std::int64_t>(mock_portal::portal_names().size());
  fmt::print("parks: {} for {} calls ({:.2f} per call; a step waiting for its slot parks once)\n", parks,
             calls, calls > 0 ? static_cast<double>(parks) / static_cast<double>(calls) : 0.0);
  fmt::print("\none job's steps and timeline (`ratchet jobs show {} -c {}`):\n", chosen, config.string());
  std::fflush(stdout);
  (void)run_to_end({ratchet, "jobs", "show", std::to_string(chosen), "-c", config.string()});

  fmt::print("\nthe database stays in {}; try next:\n", dir.string());
  fmt::print("  {} jobs list -c {}\n", ratchet, config.string());
  fmt::print("  {} jobs show {} -c {}\n", ratchet, chosen, config.string());
  fmt::print("  {} limits -c {}\n", ratchet, config.string());
  fmt::print("  {} plugins -c {}\n", ratchet, config.string());
  fmt::print("(the mock portals stop with the demo, so `ratchet run` on this config has nothing to call)\n");
  if (completed != f.jobs) {
    fmt::print(stderr, "ratchet-demo: only {} of {} jobs completed (the worker exited with {})\n", completed,
               f.jobs, exit_code);
    return 1;
  }
  return exit_code == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ratchet::demo

int main(int argc, char** argv) {
  ratchet::demo::Flags f;
  CLI::App app{
      "ratchet-demo: rates movies on five mock portals with the ratchet command, kills its worker halfway "
      "with SIGKILL, resumes from the checkpoints and prints what the portals saw"};
  app.add_option("--jobs", f.jobs, "rate_movie jobs to enqueue (default 200)");
  app.add_option("--dir", f.dir,
                 "Folder for the config and database (default: the build tree's demo folder)");
  app.add_option("--database", f.database,
                 "Keep the jobs in this server database (postgresql://user@host/db) instead of oscar.db in "
                 "--dir; the password comes from PGPASSWORD or ~/.pgpass");
  app.add_option("--ratchet", f.ratchet, "The ratchet command (default: next to this program)");
  app.add_option("--kill-at", f.kill_at,
                 "Kill the worker when this share of jobs completed; 1: never (default 0.5)");
  CLI11_PARSE(app, argc, argv);
  return ratchet::demo::run_demo(f);
}
