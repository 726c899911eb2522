// A PostgreSQL outage longer than a running job's lease: the server is down
// (a failover that takes too long, a restart after a crash), the process
// running the job lives on but cannot renew its lease. Once the server is
// back, the claim that finds the lease expired must not take it for its
// process's crash (store/quarantine_rules.hpp). Runs under RESOURCE_LOCK
// postgres_restart: every session on the cluster is cut meanwhile.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fresh_schema.hpp"
#include "pg_test_env.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/engine.hpp"
#include "runtime/engine_access.hpp"
#include "runtime/engine_impl.hpp"

namespace ratchet::testing {
namespace {

using namespace std::chrono_literals;

class PgOutage : public PgTest {
 protected:
  void TearDown() override {
    // A failed assertion between down and up must not leave the cluster down
    // for the tests after this one.
    if (down_) cluster("up");
  }
  void cluster(const std::string& what) {
    const std::string cmd = env_.cluster_script() + " " + what + " " + env_.dir;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    down_ = what == "down";
  }
  // A fresh schema, a lease of 30 s renewed every 10 s, on the fake clock.
  EngineOptions options(int workers) const {
    EngineOptions o;
    o.database = fresh_postgres_schema();
    o.workers = workers;
    o.clock = clock_;
    o.lease = 30s;
    o.heartbeat = 10s;
    o.busy_timeout = 200ms;
    o.record_crashes = false;
    o.shutdown_grace = 2s;
    return o;
  }

  bool down_ = false;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

// Waits, in real time, at most 20 s, for `done`.
template <typename F>
bool eventually(F done) {
  for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return done();
}

// Before: the job ran alone in its process, so the expiry was counted
// against it, and with max_lease_expiries = 1 it ended dead; beside other
// jobs it would have become a suspect, run one at a time.
TEST_F(PgOutage, ServerDownPastTheLease_TheExpiryIsNoCrashAndTheJobCompletes) {
  EngineOptions o = options(1);
  o.max_lease_expiries = 1;
  auto e = Engine::open(o);
  ASSERT_TRUE(e) << e.error().to_string();
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  ASSERT_TRUE((*e)->define("slow", [&](StepContext& ctx) {
    return ctx.step("s", [&] {
      if (++calls == 1) {
        while (!release) std::this_thread::sleep_for(1ms);
      }
      return nlohmann::json(1);
    });
  }));
  auto id = (*e)->enqueue("slow", nlohmann::json::object());
  ASSERT_TRUE(id) << id.error().to_string();
  ASSERT_TRUE((*e)->start());
  ASSERT_TRUE(eventually([&] { return calls > 0; }));

  cluster("down");
  auto& store = *EngineAccess::impl(**e).store;
  // A heartbeat: its renewal cannot reach the server, and is tried again...
  clock_->advance(10s);
  ASSERT_TRUE(eventually([&] { return store.stalled(); }));
  // ...until the lease runs out, and it is given up.
  clock_->advance(21s);
  ASSERT_TRUE(eventually([&] { return !store.stalled(); }));
  cluster("up");
  release = true;

  JobRecord j;
  const bool completed = eventually([&] {
    auto r = (*e)->get(*id);
    if (r) j = *r;
    return r && r->state == JobState::kCompleted;
  });
  std::string timeline;
  bool told = false;
  for (const auto& t : j.timeline) {
    timeline += "\n  " + t.kind + ": " + t.detail;
    told = told || t.detail.find("while the database was out of reach") != std::string::npos;
  }
  EXPECT_TRUE(completed) << "job is " << to_string(j.state) << "; timeline:" << timeline;
  EXPECT_EQ(j.attempt, 1) << "the outage used up no attempt";
  EXPECT_EQ(j.lease_expiries, 1);
  EXPECT_TRUE(told) << "the timeline says why the lease expired:" << timeline;
  (*e)->stop();
}

// Two processes (two engines, each with its own connections and owner),
// each running two jobs, through one outage: whichever claims first after
// it finds all four leases expired, the other's too, and takes none of
// them for a crash. Before, each became a suspect, to be run one at a time.
TEST_F(PgOutage, ServerDownPastTheLeaseOfTwoProcesses_NoJobBecomesASuspect) {
  EngineOptions o = options(2);
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  auto slow = [&](StepContext& ctx) {
    return ctx.step("s", [&] {
      if (++calls <= 4) {
        while (!release) std::this_thread::sleep_for(1ms);
      }
      return nlohmann::json(1);
    });
  };
  std::vector<std::unique_ptr<Engine>> engines;
  for (int i = 0; i < 2; ++i) {
    o.queues = {"q" + std::to_string(i)};  // two jobs each
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().to_string();
    ASSERT_TRUE((*e)->define("slow", slow));
    engines.push_back(std::move(*e));
  }
  std::vector<JobId> ids;
  for (int i = 0; i < 4; ++i) {
    EnqueueOptions q;
    q.queue = "q" + std::to_string(i % 2);
    auto id = engines[0]->enqueue("slow", nlohmann::json::object(), q);
    ASSERT_TRUE(id) << id.error().to_string();
    ids.push_back(*id);
  }
  for (auto& e : engines) ASSERT_TRUE(e->start());
  ASSERT_TRUE(eventually([&] { return calls == 4; })) << "each engine runs two of the jobs";

  cluster("down");
  clock_->advance(10s);
  for (auto& e : engines) {
    auto& store = *EngineAccess::impl(*e).store;
    ASSERT_TRUE(eventually([&] { return store.stalled(); }));
  }
  clock_->advance(21s);
  for (auto& e : engines) {
    auto& store = *EngineAccess::impl(*e).store;
    ASSERT_TRUE(eventually([&] { return !store.stalled(); }));
  }
  cluster("up");
  release = true;

  for (JobId id : ids) {
    JobRecord j;
    const bool completed = eventually([&] {
      auto r = engines[0]->get(id);
      if (r) j = *r;
      return r && r->state == JobState::kCompleted;
    });
    std::string timeline;
    for (const auto& t : j.timeline) timeline += "\n  " + t.kind + ": " + t.detail;
    EXPECT_TRUE(completed) << "job " << id << " is " << to_string(j.state) << "; timeline:" << timeline;
    EXPECT_EQ(j.attempt, 1) << "job " << id;
    EXPECT_EQ(timeline.find("suspect"), std::string::npos) << "job " << id << ":" << timeline;
    EXPECT_NE(timeline.find("while the database was out of reach"), std::string::npos)
        << "job " << id << ":" << timeline;
  }
  for (auto& e : engines) e->stop();
}

}  // namespace
}  // namespace ratchet::testing
