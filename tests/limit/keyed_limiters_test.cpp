// A keyed limit keeps one limiter per key and drops a key only when its
// limiter holds nothing that still counts: memory stays bounded however many
// keys a run meets, and no key's budget is ever forgotten early.
#include "limit/keyed_limiters.hpp"

#include <gtest/gtest.h>

#include "limit/adaptive_pacer.hpp"
#include "limit/fixed_window.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

KeyedLimiters sliding(std::int64_t rate, std::int64_t per) {
  return KeyedLimiters(
      [=](const std::string&, std::int64_t) -> Result<std::shared_ptr<Limiter>> {
        return std::make_shared<SlidingWindowLimiter>(rate, per);
      },
      per);
}

void start_now(Limiter& l, std::int64_t now) {
  auto s = l.reserve(now, now);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->at_us, now);
  auto u = l.start(*s, now);
  ASSERT_TRUE(u);
  ASSERT_EQ(*u, UseResult::kStarted);
}

TEST(KeyedLimiters, AHundredThousandKeysUsedOnceAreDroppedOnceTheirWindowPassed) {
  auto keys = sliding(5, kSec);
  for (int i = 0; i < 100'000; ++i) {
    auto l = keys.get("account-" + std::to_string(i), kT0);
    ASSERT_TRUE(l);
    start_now(**l, kT0);
  }
  // Within the window every key still counts its call.
  EXPECT_EQ(keys.sweep(kT0 + kSec / 2), 0u);
  EXPECT_EQ(keys.size(), 100'000u);
  EXPECT_EQ(keys.sweep(kT0 + kSec + 1), 100'000u);
  EXPECT_EQ(keys.size(), 0u);
}

TEST(KeyedLimiters, AKeyIsNeverDroppedWhileItsWindowCountsACallOrASlotIsHeld) {
  auto keys = sliding(1, kSec);
  {
    auto busy = keys.get("busy", kT0);
    ASSERT_TRUE(busy);
    start_now(**busy, kT0);
  }
  auto held = keys.get("held", kT0);
  ASSERT_TRUE(held);
  auto r = LimiterStack({*held}).reserve(from_micros(kT0 + 2 * kSec));
  ASSERT_TRUE(r);
  held->reset();  // only the reservation holds it now
  EXPECT_EQ(keys.sweep(kT0 + kSec / 2), 0u);
  EXPECT_EQ(keys.size(), 2u);
  // The busy key's budget is still spent when asked again.
  auto again = keys.get("busy", kT0 + kSec / 2);
  ASSERT_TRUE(again);
  auto e = (*again)->earliest(kT0 + kSec / 2, kT0 + kSec / 2);
  ASSERT_TRUE(e);
  EXPECT_EQ(*e, kT0 + kSec);
  again->reset();
  EXPECT_EQ(keys.sweep(kT0 + 3 * kSec), 1u);  // busy's window passed; held still holds a slot
  ASSERT_TRUE(r->cancel());
  r = fail(Error::cancelled("dropped"));
  EXPECT_EQ(keys.sweep(kT0 + 3 * kSec), 1u);
  EXPECT_EQ(keys.size(), 0u);
}

TEST(KeyedLimiters, SweepsRunByThemselvesAsKeysComeAndGo) {
  auto keys = sliding(1, kSec);
  // A stream of new keys, one per millisecond for 20 s: never more than
  // about one window's worth (plus a sweep's slack) is kept.
  std::size_t most = 0;
  for (int i = 0; i < 20'000; ++i) {
    const std::int64_t now = kT0 + i * 1000;
    auto l = keys.get("k" + std::to_string(i), now);
    ASSERT_TRUE(l);
    start_now(**l, now);
    most = std::max(most, keys.size());
  }
  EXPECT_LE(most, 2'100u);
}

TEST(LimiterForgettable, EachAlgorithmIsForgettableExactlyWhenANewLimiterWouldDecideTheSame) {
  SlidingWindowLimiter s(2, kSec);
  TokenBucketLimiter b(2, kSec, 2);
  FixedWindowLimiter f(2, kSec);
  for (Limiter* l : std::initializer_list<Limiter*>{&s, &b, &f}) {
    EXPECT_TRUE(l->forgettable(kT0)) << l->describe();
    start_now(*l, kT0);
    EXPECT_FALSE(l->forgettable(kT0 + 1)) << l->describe();
  }
  EXPECT_TRUE(s.forgettable(kT0 + kSec + 1));
  EXPECT_TRUE(b.forgettable(kT0 + kSec / 2));   // one token refilled: full again
  EXPECT_FALSE(f.forgettable(kT0 + kSec - 1));  // still the window of its call
  EXPECT_TRUE(f.forgettable(kT0 + kSec));
}

// What the keys keep outside memory is tidied by the decisions themselves:
// once per interval, a batch a second while more is left, again at the next
// interval after a failure (the database was locked), and a decision never
// fails because its tidy did.
TEST(KeyedLimiters, TidyRunsOncePerIntervalAndSoonerWhileMoreIsLeft) {
  std::vector<std::int64_t> runs;
  std::vector<Result<bool>> answers;
  KeyedLimiters keys(
      [](const std::string&, std::int64_t) -> Result<std::shared_ptr<Limiter>> {
        return std::make_shared<SlidingWindowLimiter>(5, kSec);
      },
      kSec,
      [&](std::int64_t now) -> Result<bool> {
        runs.push_back(now);
        Result<bool> r = answers.empty() ? Result<bool>(true) : answers.front();
        if (!answers.empty()) answers.erase(answers.begin());
        return r;
      },
      60 * kSec);
  auto decide_at = [&](std::int64_t t) { EXPECT_TRUE(keys.get("alice", kT0 + t)); };
  answers = {false, fail(Error::database("database is locked")), true};
  for (std::int64_t t = 0; t <= 200 * kSec; t += kSec / 2) decide_at(t);
  // First at a minute in; more was left: a second later; that one failed:
  // a minute later; then every minute.
  EXPECT_EQ(runs, (std::vector<std::int64_t>{kT0 + 60 * kSec, kT0 + 61 * kSec, kT0 + 121 * kSec,
                                             kT0 + 181 * kSec}));
}

// One learned pace a key, packed while the key is idle (as
// retry::make_key_pacers makes them).
KeyedLimiters key_paces() {
  auto options = std::make_shared<const PacerOptions>(plugin_pacing(std::chrono::milliseconds(10)));
  return KeyedLimiters(
      [options](const std::string&, std::int64_t) -> Result<std::shared_ptr<Limiter>> {
        return std::make_shared<AdaptivePacer>(options);
      },
      to_micros(AdaptivePacer::kForgetAfter),
      [options](const PackedLimiter& packed) { return AdaptivePacer::unpack(options, packed); });
}

// Key i's server says its quota is i % 7 + 1 a second, none left until 1 s on.
void teach(KeyedLimiters& keys, int i, std::int64_t now) {
  auto l = keys.get("account-" + std::to_string(i), now);
  ASSERT_TRUE(l);
  auto& pace = static_cast<AdaptivePacer&>(**l);
  PaceHint h;
  h.limit = i % 7 + 1;
  h.remaining = 0;
  h.window = std::chrono::seconds(1);
  h.interval = std::chrono::microseconds(kSec / (i % 7 + 1));
  h.resume_at = from_micros(now + kSec);
  h.source = HintSource::kXRateLimit;
  pace.observe(h, from_micros(now), from_micros(now));
}

TEST(KeyedLimiters, IdleKeysPacesArePackedAndComeBackUnchangedAtTheirNextCall) {
  auto keys = key_paces();
  auto held = keys.get("held", kT0);  // a caller holds this one throughout
  ASSERT_TRUE(held);
  for (int i = 0; i < 5'000; ++i) teach(keys, i, kT0 + i);
  EXPECT_EQ(keys.size(), 5'001u);
  // Most are packed; the one held and those since the last pass are not.
  EXPECT_GT(keys.packed(), 3'000u);
  EXPECT_EQ(keys.find("held"), *held);

  const std::int64_t now = kT0 + 10'000;
  for (int i : {0, 1, 2, 3, 4'321}) {
    auto l = keys.find("account-" + std::to_string(i));
    ASSERT_NE(l, nullptr) << i;
    // What its server said, kept: nothing before the reset, then the quota's pace.
    auto next = l->earliest(now, now);
    ASSERT_TRUE(next);
    EXPECT_EQ(*next, kT0 + i + kSec) << i;
    EXPECT_EQ(static_cast<AdaptivePacer&>(*l).interval(),
              std::chrono::microseconds(kSec / (i % 7 + 1) * 102 / 100))
        << i;
  }
}

TEST(KeyedLimiters, PackedKeysAreListedWithoutUnpackingAndForgottenAsTheirPaceWouldBe) {
  auto keys = key_paces();
  for (int i = 0; i < 3'000; ++i) teach(keys, i, kT0);
  const std::size_t packed = keys.packed();
  ASSERT_GT(packed, 1'000u);
  auto listed = keys.snapshot();
  EXPECT_EQ(listed.size(), 3'000u);
  EXPECT_EQ(keys.packed(), packed);
  for (const auto& [key, l] : listed) ASSERT_NE(l, nullptr) << key;
  listed.clear();  // a key listed is held, and kept while it is

  // A learned pace is kept for kForgetAfter after its server last spoke.
  const std::int64_t forget = to_micros(AdaptivePacer::kForgetAfter);
  EXPECT_EQ(keys.sweep(kT0 + forget - kSec), 0u);
  EXPECT_EQ(keys.size(), 3'000u);
  EXPECT_EQ(keys.sweep(kT0 + forget + kSec), 3'000u);
  EXPECT_EQ(keys.size(), 0u);
}

}  // namespace
}  // namespace ratchet::limit
