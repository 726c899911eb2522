#include "limit/fixed_window.hpp"

#include <gtest/gtest.h>

namespace ratchet::limit {
namespace {

constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;  // a whole second: windows align here

Slot must(Result<Slot> r) {
  EXPECT_TRUE(r.has_value());
  return r.value_or(Slot{});
}

TEST(FixedWindow_Reserve, FullWindowPushesToTheNextEpochAlignedWindow) {
  FixedWindowLimiter l(2, kSec);
  const std::int64_t mid = kT0 + 600'000;
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, mid);
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, mid);
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, kT0 + kSec);  // start of the next window
}

TEST(FixedWindow_Reserve, ANewQuotaAppliesToTheWindowUnderWayAndKeepsWhatIsCounted) {
  FixedWindowLimiter l(2, kSec);
  const std::int64_t mid = kT0 + 600'000;
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, mid);
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, mid);
  l.set_rate(3);
  EXPECT_EQ(l.rate(), 3);
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, mid);  // room at once in the window under way
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, kT0 + kSec);
  l.set_rate(1);  // back: the three counted stay counted, the next window holds one
  EXPECT_EQ(must(l.reserve(mid, mid)).at_us, kT0 + 2 * kSec);
}

TEST(FixedWindow_Reserve, WindowsFillInOrder) {
  FixedWindowLimiter l(1, 60 * kSec);
  const std::int64_t minute = (kT0 / (60 * kSec)) * 60 * kSec;  // the window kT0 is in
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, minute + i * 60 * kSec);
}

TEST(FixedWindow_Reserve, WindowsAtAnOffsetBeginThereAndKeepTheirGuardBeforeTheNext) {
  // Windows from 300 ms past each second, none starting in the last 100 ms
  // of one (a window learned from a server's refusals, AdaptivePacer).
  FixedWindowLimiter l(2, kSec, 100'000, 300'000);
  const std::int64_t before = kT0 + 250'000;  // in the window that began at kT0 - 700 ms, in its guard
  EXPECT_EQ(must(l.reserve(before, before)).at_us, kT0 + 300'000);
  EXPECT_EQ(must(l.reserve(before, before)).at_us, kT0 + 300'000);
  EXPECT_EQ(must(l.reserve(before, before)).at_us, kT0 + kSec + 300'000);
  // An offset beyond the window's length is the same phase.
  FixedWindowLimiter m(1, kSec, 0, 3 * kSec + 300'000);
  EXPECT_EQ(must(m.reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(m.reserve(kT0, kT0)).at_us, kT0 + 300'000);
}

TEST(FixedWindow_Cancel, FreesItsWindowCount) {
  FixedWindowLimiter l(1, kSec);
  auto a = must(l.reserve(kT0, kT0));
  ASSERT_TRUE(l.cancel(a));
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0);
}

TEST(FixedWindow_Start, LateUseInTheSameWindowStarts) {
  FixedWindowLimiter l(1, kSec);
  auto a = must(l.reserve(kT0, kT0));
  EXPECT_EQ(*l.start(a, kT0 + 500'000), UseResult::kStarted);
}

TEST(FixedWindow_Start, LateUseInAFullLaterWindowIsMoved) {
  FixedWindowLimiter l(1, kSec);
  auto a = must(l.reserve(kT0, kT0));
  must(l.reserve(kT0, kT0));  // takes the next window
  EXPECT_EQ(*l.start(a, kT0 + kSec + 1), UseResult::kMoved);
  EXPECT_EQ(a.at_us, kT0 + 2 * kSec);
}

}  // namespace
}  // namespace ratchet::limit
