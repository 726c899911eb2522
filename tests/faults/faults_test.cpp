// Fault injection against `ratchet run` as a child process. Each test is
// seeded, bounded in time, prints its figures ([fault] lines) and checks
// what must hold after any fault (harness.hpp).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "harness.hpp"

namespace ratchet::faults {
namespace {

using namespace std::chrono_literals;

const std::map<std::string, std::string> kTwoSteps = {{"imdb", "imdb"}, {"rt", "rotten_tomatoes"}};

std::vector<std::string> names(const std::string& prefix, int from, int n) {
  std::vector<std::string> out;
  for (int i = from; i < from + n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

const char* kEngine = "lease = \"1s\"\nheartbeat = \"200ms\"\npoll_interval = \"20ms\"\n";
const char* kRateMovie =
    "[job.rate_movie]\nsteps = [\n"
    "  { name = \"imdb\", call = \"imdb.get_rating\", args = { name = \"{{args.name}}\" } },\n"
    "  { name = \"rt\", call = \"rotten_tomatoes.get_rating\", args = { name = \"{{args.name}}\" } },\n"
    "]\n";

void expect_sound(const Invariants& inv, int jobs) {
  EXPECT_EQ(inv.integrity, "ok");
  EXPECT_EQ(inv.jobs, jobs) << "no job is lost";
  EXPECT_EQ(inv.reruns_after_commit, 0) << inv.first_problem;
}

TEST(Fault, SigkillFiftyTimesInEveryPhase_NoJobLostOrDeadNoCommittedStepRunsAgain) {
  mock_portal::PortalOptions slow;
  slow.latency = 40ms;
  mock_portal::PortalOptions rt = slow;
  rt.window = 1000ms;
  Workbench w({{"imdb", slow}, {"rotten_tomatoes", rt}});
  // A database-scope limit on rotten_tomatoes makes steps park; it holds
  // across the kills, counted at the server.
  w.write_config(kEngine, "[[plugin.rotten_tomatoes.limit]]\nrate = 40\nper = \"1s\"\nscope = \"database\"\n",
                 kRateMovie);
  int enqueued = 0;
  w.enqueue("rate_movie", names("m", enqueued, 300));
  enqueued += 300;
  std::mt19937 rng(20261201);
  const std::vector<std::string> phases = {"claim", "call in flight", "checkpoint commit", "park",
                                           "completion"};
  std::map<std::string, int> landed;
  constexpr int kKills = 50;
  for (int k = 0; k < kKills; ++k) {
    if (w.unfinished() < 80) {
      w.enqueue("rate_movie", names("m", enqueued, 150));
      enqueued += 150;
    }
    const std::string phase = phases[rng() % phases.size()];
    const std::size_t before = w.server().requests().size();
    auto child = w.run();
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    std::string at = "timeout";
    while (std::chrono::steady_clock::now() < deadline) {
      const auto reqs = w.server().requests();
      const bool fresh = reqs.size() > before;
      if (phase == "claim" && !fresh && w.states()["running"] > 0) {
        at = phase;
        break;
      }
      if (phase == "call in flight" && fresh && w.server().in_flight() > 0) {
        at = phase;
        break;
      }
      if ((phase == "checkpoint commit" || phase == "completion") && fresh) {
        const auto& last = reqs.back();
        const bool want_imdb = phase == "checkpoint commit";
        if (last.answered_us != 0 && (last.portal == "imdb") == want_imdb) {
          at = phase;
          break;
        }
      }
      if (phase == "park" && fresh && w.states()["scheduled"] > 0) {
        at = phase;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 800));
    }
    child->signal(SIGKILL);
    child->wait(5000);
    ++landed[at];
  }
  auto last = w.run({"--until-empty"});
  EXPECT_EQ(last->wait(90000), 0) << last->err();
  std::printf("[fault] sigkill: %d kills:", kKills);
  for (const auto& [phase, n] : landed) std::printf(" %s=%d", phase.c_str(), n);
  std::printf("\n");
  const auto stats = w.server().stats();
  std::printf("[fault] sigkill: rotten_tomatoes max %lld requests in a 1s window (declared 40), imdb %lld\n",
              static_cast<long long>(stats.portals.at("rotten_tomatoes").max_in_window),
              static_cast<long long>(stats.portals.at("imdb").max_in_window));
  Invariants inv = w.check(kTwoSteps);
  print_invariants("sigkill", inv);
  expect_sound(inv, enqueued);
  EXPECT_EQ(inv.states["completed"], enqueued);
  EXPECT_EQ(inv.states["dead"], 0) << "an outside kill makes no job dead";
  EXPECT_EQ(inv.overlapping, 0) << "no job runs in two places";
  EXPECT_LE(stats.portals.at("rotten_tomatoes").max_in_window, 40);
  for (const auto& [phase, n] : landed) {
    if (phase != "timeout") EXPECT_GT(n, 0) << phase;
  }
}

TEST(Fault, PluginCrashingOnOneArgument_AfterRestartsOnlyThatJobIsDead) {
  Workbench w;
  w.write_config("lease = \"1s\"\nheartbeat = \"200ms\"\npoll_interval = \"20ms\"\nworkers = 4\n", "",
                 "[job.crash_or_rate]\nsteps = [ { name = \"imdb\", call = \"crasher.get_rating\", args = { "
                 "name = \"{{args.name}}\" } } ]\n");
  std::vector<std::string> jobs = names("ok", 0, 30);
  jobs.insert(jobs.begin() + 12, "abort");
  w.enqueue("crash_or_rate", jobs);
  int crashes = 0;
  int exit = -1;
  for (int run = 0; run < 25; ++run) {
    auto child = w.run({"--until-empty"});
    exit = child->wait(30000);
    if (exit == 0 || exit == 1) break;
    ++crashes;
  }
  Invariants inv = w.check({{"imdb", "imdb"}});
  print_invariants("crashing plugin", inv);
  std::printf("[fault] crashing plugin: %d process crashes before the run ended (exit %d)\n", crashes, exit);
  expect_sound(inv, 31);
  EXPECT_EQ(inv.states["dead"], 1);
  EXPECT_EQ(inv.states["completed"], 30);
  EXPECT_GE(crashes, 3);
}

}  // namespace
}  // namespace ratchet::faults
