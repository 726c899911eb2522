// Wake-ups across processes on PostgreSQL: a job enqueued, retried or
// released by another engine on the database is picked up at once by an
// idle engine, not at its next poll.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <thread>

#include "fresh_schema.hpp"
#include "ratchet/engine.hpp"

namespace ratchet::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

EngineOptions on(const std::string& url, Duration poll) {
  EngineOptions o;
  o.database = url;
  o.workers = 2;
  o.poll_interval = poll;
  o.shutdown_grace = 2s;
  o.record_crashes = false;
  return o;
}

// Waits (bounded) for `id` to reach `state`; how long it took.
std::optional<SteadyClock::duration> time_to(Engine& e, JobId id, JobState state, Duration at_most) {
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < at_most) {
    if (auto r = e.get(id); r && r->state == state) return SteadyClock::now() - t0;
    std::this_thread::sleep_for(2ms);
  }
  return std::nullopt;
}

long long ms(SteadyClock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

nlohmann::json no_op(StepContext&) { return nlohmann::json::object(); }

TEST(PgWakeup, AJobEnqueuedByAnotherEngine_RunsLongBeforeThePollInterval) {
  const std::string url = fresh_postgres_schema();
  // The worker polls only every 30 s: without a wake-up the job would wait.
  auto worker = Engine::open(on(url, 30s));
  ASSERT_TRUE(worker) << worker.error().to_string();
  ASSERT_TRUE((*worker)->define("noop", no_op));
  ASSERT_TRUE((*worker)->start());
  std::this_thread::sleep_for(300ms);  // its first claim found nothing: it sleeps now

  auto producer = Engine::open(on(url, 30s));
  ASSERT_TRUE(producer) << producer.error().to_string();
  ASSERT_TRUE((*producer)->define("noop", no_op));
  for (int i = 0; i < 3; ++i) {
    auto id = (*producer)->enqueue("noop", nlohmann::json::object());
    ASSERT_TRUE(id) << id.error().to_string();
    const auto took = time_to(**producer, *id, JobState::kCompleted, 10s);
    ASSERT_TRUE(took) << "job " << *id << " was not run within 10 s by the idle engine (poll interval 30 s)";
    std::printf("[wakeup] job %lld enqueued by another engine completed after %lld ms\n",
                static_cast<long long>(*id), ms(*took));
    EXPECT_LT(*took, 2s);
  }
  (*worker)->stop();
}

TEST(PgWakeup, ADeadJobRetriedByHandElsewhere_RunsAtOnce) {
  const std::string url = fresh_postgres_schema();
  auto worker = Engine::open(on(url, 30s));
  ASSERT_TRUE(worker) << worker.error().to_string();
  std::atomic<bool> fail = true;
  JobTypeOptions once;
  once.attempts = 1;
  ASSERT_TRUE((*worker)->define(
      "flaky",
      [&fail](StepContext&) -> nlohmann::json {
        if (fail) throw std::runtime_error("first time fails");
        return nlohmann::json::object();
      },
      once));
  ASSERT_TRUE((*worker)->start());
  auto id = (*worker)->enqueue("flaky", nlohmann::json::object());
  ASSERT_TRUE(id);
  ASSERT_TRUE(time_to(**worker, *id, JobState::kDead, 10s)) << "the job did not die on its one attempt";
  fail = false;
  std::this_thread::sleep_for(300ms);

  auto admin = Engine::open(on(url, 30s));
  ASSERT_TRUE(admin) << admin.error().to_string();
  ASSERT_TRUE((*admin)->retry(*id));
  const auto took = time_to(**admin, *id, JobState::kCompleted, 10s);
  ASSERT_TRUE(took) << "the retried job was not run within 10 s (poll interval 30 s)";
  EXPECT_LT(*took, 2s);
  (*worker)->stop();
}

}  // namespace
}  // namespace ratchet::testing
