// Turns between processes that share a database-scope limit: each process
// has its own TurnQueue and its own connections, as two engines on one
// database do, and a key gets its weight's share of the shared limit
// whichever process holds its steps. Runs on every store backend, on a
// clock of the test's own.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "limit/database_limiter.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/micros.hpp"
#include "limit/turn_shares.hpp"
#include "limiter_tables.hpp"
#include "retry/turn_queue.hpp"

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;

// Ten calls a second, one at a time (a token bucket without burst).
config::LimitSpec shared_spec() {
  config::LimitSpec s;
  s.algorithm = config::LimitAlgorithm::kTokenBucket;
  s.rate = 10;
  s.per = 1s;
  s.burst = 1;
  s.scope = config::LimitScope::kDatabase;
  return s;
}

// One engine process: its queue, its connection to the shared limit, and
// its steps (each key's steps ask in order; a woken step asks again).
struct Process {
  Process(const limit::testing::LimiterTables& db, const std::string& name, bool shared_turns) {
    auto l = limit::DatabaseLimiter::open(shared_spec(), "portal/limit/10per1s", db.connect());
    if (!l) throw std::runtime_error(l.error().to_string());
    limiter = *l;
    if (shared_turns) {
      auto shares = limit::DatabaseTurnShares::open("turns/portal/limit/10per1s", db.connect(), name);
      if (!shares) throw std::runtime_error(shares.error().to_string());
      queue.share_with(*shares);
    }
  }
  struct Step {
    std::string key;
    double weight = 1;
    std::shared_ptr<Turn> turn;
    bool woken = false;
    bool done = false;
  };
  std::shared_ptr<limit::Limiter> limiter;
  TurnQueue queue{500ms};
  std::vector<std::unique_ptr<Step>> steps;
  bool stopped = false;  // SIGSTOP: asks nothing, grants nothing
};

struct Grant {
  std::string key;
  TimePoint at;
};

// Several processes on one clock: at every tick each (in a random order)
// grants what is due and its woken steps take their slots, which start on time.
struct Bed {
  explicit Bed(const store::testing::Backend& backend) : db(backend) {}

  Process& process(const std::string& name, bool shared_turns = true) {
    procs.push_back(std::make_unique<Process>(db, name, shared_turns));
    return *procs.back();
  }
  void add_steps(Process& p, const std::string& key, int n, double weight = 1) {
    for (int i = 0; i < n; ++i) {
      p.steps.push_back(std::make_unique<Process::Step>());
      p.steps.back()->key = key;
      p.steps.back()->weight = weight;
      ask(p, *p.steps.back());
    }
  }
  void ask(Process& p, Process::Step& s) {
    Process::Step* sp = &s;
    auto got = p.queue.ask(s.turn,
                           TurnQueue::Ask{s.key,
                                          s.weight,
                                          {p.limiter},
                                          0,
                                          0,
                                          1,
                                          [sp](TimePoint) { sp->woken = true; },
                                          nullptr,
                                          0,
                                          nullptr},
                           clock.now());
    ASSERT_TRUE(got) << got.error().to_string();
    s.woken = false;
    if (!*got) return;
    s.done = true;
    grants.push_back({s.key, (*got)->at()});
    pending.push_back({p.limiter, std::move(**got)});
  }
  void run_until(TimePoint end) {
    std::mt19937 rng(7);
    while (clock.now() < end) {
      clock.advance(5ms);
      const TimePoint now = clock.now();
      // The calls whose slots came start.
      for (auto it = pending.begin(); it != pending.end();) {
        if (it->second.at() > now) {
          ++it;
          continue;
        }
        limit::LimiterStack stack({it->first});
        auto started = stack.start(it->second, now);
        ASSERT_TRUE(started) << started.error().to_string();
        it = pending.erase(it);
      }
      std::vector<Process*> order;
      for (auto& p : procs) order.push_back(p.get());
      std::shuffle(order.begin(), order.end(), rng);
      for (Process* p : order) {
        if (p->stopped) continue;
        if (auto next = p->queue.next_grant(); next && *next <= now) p->queue.grant(now);
        for (auto& s : p->steps) {
          if (s->woken && !s->done) ask(*p, *s);
        }
      }
    }
  }
  // Slots by key among the grants whose slots are in [from, to).
  std::map<std::string, int> share(TimePoint from, TimePoint to) const {
    std::map<std::string, int> out;
    for (const Grant& g : grants) {
      if (g.at >= from && g.at < to) ++out[g.key];
    }
    return out;
  }

  limit::testing::LimiterTables db;
  FakeClock clock{TimePoint{} + std::chrono::seconds(1'700'000'000)};
  std::vector<std::unique_ptr<Process>> procs;
  std::vector<Grant> grants;
  std::vector<std::pair<std::shared_ptr<limit::Limiter>, limit::Reservation>> pending;
};

class SharedTurnsTest : public ::testing::TestWithParam<store::testing::Backend> {};

TEST_P(SharedTurnsTest, EachKeyGetsItsShareWhicheverProcessHoldsItsSteps) {
  for (const bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "turns shared" : "turns kept by each process");
    Bed bed(GetParam());
    Process& one = bed.process("one", shared);
    Process& two = bed.process("two", shared);
    for (const char* key : {"a", "b", "c"}) bed.add_steps(one, key, 60);
    bed.add_steps(two, "d", 60);
    const TimePoint t0 = bed.clock.now();
    bed.run_until(t0 + 14s);
    // From the first second on, 10 slots a second: about 30 for each key
    // over 12 s, wherever it waits.
    auto got = bed.share(t0 + 1s, t0 + 13s);
    int total = 0;
    for (auto& [key, n] : got) total += n;
    EXPECT_GE(total, 118) << "slots of the shared limit went unused";
    if (shared) {
      for (const char* key : {"a", "b", "c", "d"}) {
        EXPECT_NEAR(got[key], total / 4, 4) << key << " of " << total;
      }
    } else {
      // Each process takes half, so d alone gets as much as a, b and c together.
      EXPECT_GT(got["d"], total / 3) << "the test no longer tells shared turns apart";
    }
  }
}

TEST_P(SharedTurnsTest, WeightsHoldAcrossProcesses) {
  Bed bed(GetParam());
  Process& one = bed.process("one");
  Process& two = bed.process("two");
  bed.add_steps(one, "free", 80, 1);
  bed.add_steps(one, "trial", 80, 1);
  bed.add_steps(two, "gold", 120, 3);
  const TimePoint t0 = bed.clock.now();
  bed.run_until(t0 + 12s);
  auto got = bed.share(t0 + 1s, t0 + 11s);
  const int total = got["free"] + got["trial"] + got["gold"];
  // Gold's weight of 3 takes three fifths, free and trial one fifth each
  // (a half and two quarters were each process to take half).
  EXPECT_NEAR(got["gold"], 3 * total / 5, 4) << "gold " << got["gold"] << " of " << total;
  EXPECT_NEAR(got["free"], total / 5, 3);
  EXPECT_NEAR(got["trial"], total / 5, 3);
}

TEST_P(SharedTurnsTest, AStoppedProcessLosesNoSlotToOthers) {
  Bed bed(GetParam());
  Process& one = bed.process("one");
  Process& two = bed.process("two");
  bed.add_steps(one, "a", 200);
  bed.add_steps(two, "b", 200);
  const TimePoint t0 = bed.clock.now();
  bed.run_until(t0 + 3s);
  two.stopped = true;  // its row still says it waits, with the lowest pass
  bed.run_until(t0 + 9s);
  auto got = bed.share(t0 + 3500ms, t0 + 9s);
  // Every slot of the limit goes to `one` meanwhile, ten a second, also
  // while the stopped process's row still counts.
  EXPECT_GE(got["a"], 54) << "slots left for a process that no longer asks";
  EXPECT_EQ(got["b"], 0);
  // Back, it takes its turns again.
  two.stopped = false;
  bed.run_until(t0 + 15s);
  auto after = bed.share(t0 + 11s, t0 + 15s);
  EXPECT_NEAR(after["a"], after["b"], 4);
}

TEST_P(SharedTurnsTest, AProcessWithNothingWaitingLeavesItsTurns) {
  Bed bed(GetParam());
  Process& one = bed.process("one");
  Process& two = bed.process("two");
  bed.add_steps(one, "a", 100);
  bed.add_steps(two, "b", 5);  // done within about a second
  const TimePoint t0 = bed.clock.now();
  bed.run_until(t0 + 6s);
  auto got = bed.share(t0 + 2s, t0 + 6s);
  EXPECT_EQ(got["b"], 0);
  EXPECT_GE(got["a"], 39) << "slots left for a process with nothing waiting";
}

INSTANTIATE_TEST_SUITE_P(Backends, SharedTurnsTest, ::testing::ValuesIn(store::testing::backends()),
                         store::testing::backend_name);

}  // namespace
}  // namespace ratchet::retry
