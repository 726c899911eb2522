// Shared set-up of the engine tests: a database in a temporary folder, a
// FakeClock, a scripted StepCaller, and a bounded wait for a job's state
// (the engine works on its own threads).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fake_caller.hpp"
#include "ratchet/engine.hpp"
#include "runtime/engine_impl.hpp"
#include "temp_dir.hpp"

namespace ratchet::testing {

using namespace std::chrono_literals;

class EngineFixture : public ::testing::Test {
 protected:
  EngineOptions options(int workers = 2) {
    EngineOptions o;
    o.database = dir_.file("engine.db");
    o.workers = workers;
    o.clock = clock_;
    o.seed = 42;
    o.lease = 30s;
    o.heartbeat = 10s;
    o.poll_interval = 1s;
    o.shutdown_grace = 5s;
    o.busy_timeout = 200ms;
    return o;
  }

  std::unique_ptr<Engine> open(EngineOptions o) {
    auto e = runtime::open_engine(std::move(o), {caller_, {}});
    EXPECT_TRUE(e) << e.error().to_string();
    return e ? std::move(*e) : nullptr;
  }

  std::unique_ptr<Engine> open(int workers = 2) { return open(options(workers)); }

  // Waits (real time, bounded) until the job reaches `state`.
  static JobRecord wait_state(Engine& e, JobId id, JobState state) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    JobRecord last;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = e.get(id);
      if (r) {
        last = *r;
        if (r->state == state) return *r;
      }
      std::this_thread::sleep_for(1ms);
    }
    std::string timeline;
    for (const auto& t : last.timeline) timeline += "\n  " + t.kind + ": " + t.detail;
    ADD_FAILURE() << "job " << id << " never reached " << to_string(state) << "; it is "
                  << to_string(last.state) << " (" << last.last_error << "), attempt " << last.attempt
                  << "; timeline:" << timeline;
    return last;
  }

  TempDir dir_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::shared_ptr<FakeCaller> caller_ = std::make_shared<FakeCaller>();
};

}  // namespace ratchet::testing
