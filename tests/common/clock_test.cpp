#include "ratchet/clock.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace ratchet {
namespace {

using namespace std::chrono_literals;

TEST(FakeClock_Advance, MovesOnlyWhenTold) {
  FakeClock clock;
  TimePoint t0 = clock.now();
  EXPECT_EQ(clock.now(), t0);
  clock.advance(5s);
  EXPECT_EQ(clock.now(), t0 + 5s);
}

TEST(FakeClock_WaitUntil, WakesWhenTimeReachesTheDeadline) {
  FakeClock clock;
  TimePoint deadline = clock.now() + 10s;
  std::stop_source stop;
  bool reached = false;
  std::thread waiter([&] { reached = clock.wait_until(deadline, stop.get_token()); });
  clock.advance(4s);
  clock.advance(6s);
  waiter.join();
  EXPECT_TRUE(reached);
}

TEST(FakeClock_WaitUntil, ReturnsFalseWhenStopped) {
  FakeClock clock;
  std::stop_source stop;
  bool reached = true;
  std::thread waiter([&] { reached = clock.wait_until(clock.now() + 1h, stop.get_token()); });
  stop.request_stop();
  waiter.join();
  EXPECT_FALSE(reached);
}

TEST(SystemClock_WaitUntil, ReturnsAtOnceForAPastDeadline) {
  std::stop_source stop;
  auto clock = SystemClock::instance();
  EXPECT_TRUE(clock->wait_until(clock->now() - 1s, stop.get_token()));
}

}  // namespace
}  // namespace ratchet
