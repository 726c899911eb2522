// A keyed limit packs the learned pace of a key no one uses into a few bytes
// and unpacks it at the key's next call. Packing must lose nothing: a pace
// unpacked decides exactly as the one packed would have, through every kind
// of reply a server sends.
#include "limit/packed_state.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "limit/adaptive_pacer.hpp"
#include "limit/micros.hpp"
#include "limit/rate_headers.hpp"
#include "limit/time_queue.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;

// A state of every kind of field, more than 64 of them (two masks of groups).
struct Fields {
  std::vector<std::int64_t> numbers;
  std::vector<std::int64_t> times;
  std::vector<bool> flags;
  double real = 0;
  std::uint64_t big = 0;
  int small = 0;
  TimeQueue<std::pair<std::int64_t, std::int64_t>> pairs;
  std::vector<std::int64_t> bare;

  template <typename Self, typename Io>
  static void each_field(Self& self, Io& io) {
    for (auto& n : self.numbers) io.number(n);
    for (auto& t : self.times) io.time(t);
    for (std::size_t i = 0; i < self.flags.size(); ++i) {
      bool b = self.flags[i];
      io.flag(b);
      if constexpr (!std::is_const_v<Self>) self.flags[i] = b;
    }
    io.real(self.real);
    io.number(self.big);
    io.number(self.small);
    io.times(self.pairs);
    io.times(self.bare);
  }
};

Fields round_trip(const Fields& in, std::int64_t forget_at, std::string_view name) {
  PackWriter w;
  Fields::each_field(in, w);
  const PackedLimiter packed = w.finish(name, forget_at);
  EXPECT_EQ(packed.name(), name);
  EXPECT_GE(packed.forget_at_us(), forget_at);
  EXPECT_LT(packed.forget_at_us(), forget_at + 1'000'000);  // rounded up to a whole second at most
  Fields out;
  out.numbers.resize(in.numbers.size(), 99);  // what the reader must overwrite
  out.times.resize(in.times.size(), 99);
  out.flags.resize(in.flags.size(), true);
  out.real = 99;
  out.pairs.push_back({1, 1});
  FieldCounter count;
  Fields::each_field(out, count);
  PackReader r(packed, count.fields);
  Fields::each_field(out, r);
  return out;
}

TEST(PackedState, EveryKindOfFieldComesBackAsItWas) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    Fields f;
    const std::int64_t base = 1'700'000'000'000'000 + static_cast<std::int64_t>(rng() % 1'000'000'000);
    for (int i = 0; i < 30; ++i) {
      const std::int64_t kinds[] = {0,
                                    -1,
                                    1,
                                    std::numeric_limits<std::int64_t>::min(),
                                    std::numeric_limits<std::int64_t>::max(),
                                    static_cast<std::int64_t>(rng())};
      f.numbers.push_back(kinds[rng() % 6]);
    }
    for (int i = 0; i < 30; ++i) {
      // Times near each other, far apart, before the first, and unset.
      const std::int64_t offsets[] = {0, 1, -5'000'000, 3'600'000'000, -base};
      f.times.push_back(base + offsets[rng() % 5]);
    }
    for (int i = 0; i < 20; ++i) f.flags.push_back(rng() % 2 == 0);
    f.real = round % 3 == 0 ? 0.0 : -1.0 / static_cast<double>(rng() % 1000 + 1);
    f.big = round % 2 == 0 ? std::numeric_limits<std::uint64_t>::max() : rng() % 3;
    f.small = static_cast<int>(rng() % 5) - 2;
    for (std::uint64_t i = 0, n = rng() % 4; i < n; ++i)
      f.pairs.push_back({base + static_cast<std::int64_t>(i) * 10, static_cast<std::int64_t>(rng() % 7) - 1});
    for (std::uint64_t i = 0, n = rng() % 3; i < n; ++i)
      f.bare.push_back(base - static_cast<std::int64_t>(i));
    const std::int64_t forget_at = base + static_cast<std::int64_t>(rng() % 700'000'000) - 1'000;
    const Fields g = round_trip(f, forget_at, "account-" + std::to_string(round));
    EXPECT_EQ(g.numbers, f.numbers);
    EXPECT_EQ(g.times, f.times);
    EXPECT_EQ(g.flags, f.flags);
    EXPECT_EQ(g.real, f.real);
    EXPECT_EQ(g.big, f.big);
    EXPECT_EQ(g.small, f.small);
    EXPECT_EQ(std::vector(g.pairs.begin(), g.pairs.end()), std::vector(f.pairs.begin(), f.pairs.end()));
    EXPECT_EQ(g.bare, f.bare);
  }
}

// Two pacers fed the same calls and replies, one packed and unpacked
// whenever it can be: every answer either gives must be the same.
class PackedPacerRun {
 public:
  PackedPacerRun(PacerOptions options, std::uint64_t seed)
      : refusals_(seed % 3 == 0),
        options_(std::make_shared<const PacerOptions>(options)),
        plain_(std::make_shared<AdaptivePacer>(options_)),
        packed_(std::make_shared<AdaptivePacer>(options_)),
        rng_(seed) {}

  int packs() const { return packs_; }

  void step() {
    now_ += static_cast<std::int64_t>(rng_() % 300'000);
    switch (rng_() % 10) {
      case 0:
      case 1:
      case 2: call(); break;
      case 3:
        if (!held_.empty()) start(held_.size() - 1);
        break;
      case 4:
        if (!held_.empty()) {
          EXPECT_EQ(plain_->cancel(held_.back().first).has_value(),
                    packed_->cancel(held_.back().second).has_value());
          held_.pop_back();
        }
        break;
      case 5: {
        const auto calls = static_cast<std::int64_t>(rng_() % 20);
        plain_->waiting(calls, now_);
        packed_->waiting(calls, now_);
        break;
      }
      case 6:
        plain_->replied(from_micros(now_));
        packed_->replied(from_micros(now_));
        break;
      default: reply(); break;
    }
    compare();
    pack_packed();
  }

 private:
  void call() {
    const std::int64_t units = rng_() % 5 == 0 ? 3 : 1;
    auto a = plain_->reserve(now_, now_, units);
    auto b = packed_->reserve(now_, now_, units);
    ASSERT_EQ(a.has_value(), b.has_value());
    if (!a) return;
    EXPECT_EQ(a->at_us, b->at_us);
    EXPECT_EQ(a->generation, b->generation);
    EXPECT_EQ(a->quota_until_us, b->quota_until_us);
    held_.emplace_back(*a, *b);
    // Most calls start at their slot and the clock moves there.
    if (rng_() % 4 != 0) {
      now_ = std::max(now_, a->at_us);
      start(held_.size() - 1);
    }
  }

  void start(std::size_t i) {
    auto [a, b] = held_[i];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    auto ra = plain_->ready_at(a, now_);
    auto rb = packed_->ready_at(b, now_);
    ASSERT_EQ(ra.has_value(), rb.has_value());
    if (ra) {
      EXPECT_EQ(*ra, *rb);
    }
    auto ua = plain_->start(a, now_);
    auto ub = packed_->start(b, now_);
    ASSERT_EQ(ua.has_value(), ub.has_value());
    if (!ua) return;
    ASSERT_EQ(*ua, *ub);
    if (*ua == UseResult::kStarted) {
      flying_.emplace_back(a, b);
    } else {
      held_.emplace_back(a, b);
    }
  }

  void reply() {
    if (flying_.empty()) return;
    const std::size_t i = rng_() % flying_.size();
    auto [a, b] = flying_[i];
    flying_.erase(flying_.begin() + static_cast<std::ptrdiff_t>(i));
    if (rng_() % 6 == 0) {
      const std::int64_t cost = static_cast<std::int64_t>(rng_() % 4);
      EXPECT_EQ(plain_->adjust(a, cost, now_).has_value(), packed_->adjust(b, cost, now_).has_value());
    }
    const TimePoint now = from_micros(now_);
    std::vector<HttpHeader> headers;
    int status = 200;
    // A reply that says nothing of the limits (a bare 429 or none) makes
    // the pacer read refusals, which stays unpacked: rare, in a third of
    // the runs.
    switch (rng_() % (refusals_ ? 12 : 100)) {
      case 0:
        status = 429;  // bare
        break;
      case 1:
        status = 429;
        headers.push_back({"Retry-After", std::to_string(rng_() % 3 + 1)});
        break;
      case 2: break;  // says nothing
      default: {
        const std::int64_t limit = 10;
        const std::int64_t remaining = static_cast<std::int64_t>(rng_() % 11);
        if (remaining == 0 && rng_() % 2 == 0) status = 429;
        headers.push_back({"X-RateLimit-Limit", std::to_string(limit)});
        headers.push_back({"X-RateLimit-Remaining", std::to_string(remaining)});
        if (rng_() % 2 == 0) {
          headers.push_back({"X-RateLimit-Reset", std::to_string(rng_() % 2 + 1)});
        } else {
          const std::int64_t epoch_s = (now_ / 1'000'000) + static_cast<std::int64_t>(rng_() % 2) + 1;
          headers.push_back({"X-RateLimit-Reset", std::to_string(epoch_s)});
        }
        if (rng_() % 3 == 0) headers.push_back({"RateLimit-Policy", "10;w=2"});
        break;
      }
    }
    const PaceHint hint = read_rate_headers(headers, status, now);
    plain_->observe(hint, now, from_micros(a.at_us), a.units);
    packed_->observe(hint, now, from_micros(b.at_us), b.units);
  }

  void compare() {
    EXPECT_EQ(plain_->interval(), packed_->interval());
    EXPECT_EQ(plain_->resume_at(), packed_->resume_at());
    EXPECT_EQ(plain_->recovering(), packed_->recovering());
    EXPECT_EQ(plain_->describe(), packed_->describe());
    EXPECT_EQ(plain_->forgettable(now_), packed_->forgettable(now_));
    auto a = plain_->earliest(now_, now_);
    auto b = packed_->earliest(now_, now_);
    ASSERT_EQ(a.has_value(), b.has_value());
    if (a) {
      EXPECT_EQ(*a, *b);
    }
  }

  void pack_packed() {
    PackedLimiter p = packed_->pack("k");
    PackedLimiter q = plain_->pack("k");
    ASSERT_EQ(p.empty(), q.empty());
    if (p.empty()) return;
    EXPECT_EQ(p.forget_at_us(), q.forget_at_us());
    packed_ = AdaptivePacer::unpack(options_, p);
    ++packs_;
  }

  bool refusals_;
  std::shared_ptr<const PacerOptions> options_;
  std::shared_ptr<AdaptivePacer> plain_;
  std::shared_ptr<AdaptivePacer> packed_;
  std::mt19937_64 rng_;
  std::int64_t now_ = 1'700'000'000'000'000;
  int packs_ = 0;
  std::vector<std::pair<Slot, Slot>> held_;
  std::vector<std::pair<Slot, Slot>> flying_;
};

TEST(PackedPacer, UnpackedDecidesAsThePacerNeverPackedThroughAnyReplies) {
  const PacerOptions kinds[] = {PacerOptions{}, plugin_pacing(Duration::zero()), plugin_pacing(200ms)};
  int packs = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    PackedPacerRun run(kinds[seed % 4 % 3], seed);
    for (int i = 0; i < 400 && !::testing::Test::HasFatalFailure(); ++i) run.step();
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed;
    packs += run.packs();
  }
  // The pacers were packed often enough to mean something.
  EXPECT_GT(packs, 2'000);
}

}  // namespace
}  // namespace ratchet::limit
