#include "limit/concurrency.hpp"

#include <gtest/gtest.h>

namespace ratchet::limit {
namespace {

TEST(Concurrency_TryAcquire, HandsOutAtMostMaxPermits) {
  auto cap = ConcurrencyLimiter::make(2);
  auto a = cap->try_acquire();
  auto b = cap->try_acquire();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(cap->try_acquire());
  EXPECT_EQ(cap->in_use(), 2);
}

TEST(Concurrency_Permit, ReleasesWhenDestroyedAndTellsTheListener) {
  auto cap = ConcurrencyLimiter::make(1);
  int released = 0;
  cap->on_release([&] { ++released; });
  {
    auto p = cap->try_acquire();
    ASSERT_TRUE(p);
    EXPECT_FALSE(cap->try_acquire());
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(cap->in_use(), 0);
  EXPECT_TRUE(cap->try_acquire());
}

TEST(Concurrency_Permit, MovedPermitReleasesOnce) {
  auto cap = ConcurrencyLimiter::make(1);
  int released = 0;
  cap->on_release([&] { ++released; });
  auto p = cap->try_acquire();
  Permit moved = std::move(*p);
  p.reset();
  EXPECT_EQ(released, 0);
  moved.release();
  moved.release();
  EXPECT_EQ(released, 1);
}

TEST(Concurrency_Permit, KeepsItsLimiterAlive) {
  std::optional<Permit> p;
  {
    auto cap = ConcurrencyLimiter::make(1);
    p = cap->try_acquire();
  }
  ASSERT_TRUE(p && p->held());
  p.reset();  // releasing touches the limiter: a use after free fails under ASan
}

}  // namespace
}  // namespace ratchet::limit
