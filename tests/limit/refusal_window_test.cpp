#include "limit/refusal_window.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "limit/micros.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kMs = 1000;
constexpr std::int64_t kSecond = 1'000'000;

// A server that only refuses, met by stretches of calls: each stretch sends
// along `spacing` (the gap after a call, by how far into the stretch it
// is) from its start until a call is refused; the calls already on their
// way are answered too, and the next stretch begins when the refusal's
// Retry-After (whole seconds) has passed. `answer` gives whether the server
// admits a call arriving then.
struct Stretches {
  std::int64_t latency_us;
  std::function<bool(std::int64_t arrival_us)> admits;
  std::function<std::int64_t(std::int64_t arrival_us)> retry_after_us;

  void run(RefusalWindow& w, std::int64_t from_us, int stretches,
           const std::function<std::int64_t(int stretch, std::int64_t into_us)>& spacing) {
    std::int64_t t = from_us;
    for (int s = 0; s < stretches; ++s) {
      const std::int64_t start = t;
      std::optional<std::int64_t> refused_at;
      // Calls go until the refusal's reply comes back.
      while (!refused_at || t < *refused_at + latency_us) {
        const std::int64_t arrival = t + latency_us;
        if (admits(arrival)) {
          w.admitted(t);
        } else if (!refused_at) {
          w.refused(t);
          refused_at = t;
        }
        t += spacing(s, t - start);
      }
      t = *refused_at + latency_us + retry_after_us(*refused_at + latency_us);
    }
  }
};

struct FixedWindow {
  std::int64_t quota;
  std::int64_t window_us;
  std::int64_t offset_us;
  std::int64_t index = INT64_MIN;
  std::int64_t count = 0;

  bool admits(std::int64_t arrival_us) {
    const std::int64_t k = floor_div(arrival_us - offset_us, window_us);
    if (k != index) {
      index = k;
      count = 0;
    }
    return ++count <= quota;
  }
  std::int64_t retry_after_us(std::int64_t arrival_us) const {
    const std::int64_t end = (floor_div(arrival_us - offset_us, window_us) + 1) * window_us + offset_us;
    return std::max<std::int64_t>(1, (end - arrival_us + kSecond - 1) / kSecond) * kSecond;
  }
};

// A token bucket (GCRA) of `rate` a second that holds `burst`.
struct Bucket {
  double rate;
  double burst;
  double tat = 0;

  bool admits(std::int64_t arrival_us) {
    const double interval = 1e6 / rate;
    const double now = static_cast<double>(arrival_us);
    const double t = std::max(tat, now);
    if (t - now > (burst - 1) * interval) return false;
    tat = t + interval;
    return true;
  }
};

// A slow start: the first gap `first`, the rate doubling every 250 ms.
std::int64_t ramp(std::int64_t first, std::int64_t into_us) {
  return std::max<std::int64_t>(1 * kMs, first >> std::min<std::int64_t>(10, into_us / (250 * kMs)));
}

bool boundary_in(const WindowReading& r, std::int64_t boundary, std::int64_t window) {
  // The reading's arc, modulo the window.
  for (std::int64_t b = boundary - window; b <= boundary + window; b += window) {
    if (b >= r.earliest_us - kMs && b <= r.latest_us + kMs) return true;
  }
  return false;
}

TEST(RefusalWindow, ThreeRefusalsOfAOneSecondWindow_ReadItsQuotaAndWhereItsBoundaryFallsAmongTheStarts) {
  // The shapes the test bed draws: 50 to 100 a second, 0 to 50 ms away,
  // any phase. The first stretch is the opening's slow start, the next
  // the slower restarts after each pause, each faster than the last.
  const std::int64_t t0 = 1'700'000'000 * kSecond + 300 * kMs;
  for (const std::int64_t quota : {50, 57, 74, 96}) {
    for (const std::int64_t offset : {0 * kMs, 136 * kMs, 419 * kMs, 616 * kMs, 958 * kMs}) {
      for (const std::int64_t latency : {3 * kMs, 32 * kMs}) {
        FixedWindow server{quota, kSecond, offset};
        Stretches run{latency, [&](std::int64_t a) { return server.admits(a); },
                      [&](std::int64_t a) { return server.retry_after_us(a); }};
        RefusalWindow w;
        run.run(w, t0, 3, [&](int s, std::int64_t into) {
          return s == 0 ? ramp(40 * kMs, into) : ramp(12 * kMs, into + 125 * kMs * s);
        });
        const std::string what = std::to_string(quota) + "/1s at +" + std::to_string(offset / kMs) + " ms, " +
                                 std::to_string(latency / kMs) + " ms away";
        const std::optional<WindowReading> r = w.read(kSecond);
        if (!r) {
          ADD_FAILURE() << what << ": nothing read";
          continue;
        }
        // Never more than the quota (a refusal a window); at most a few
        // calls under it, counted from the boundary's latest phase.
        EXPECT_LE(r->quota, quota) << what;
        EXPECT_GE(r->quota, quota - 3) << what;
        EXPECT_TRUE(boundary_in(*r, offset - latency, kSecond))
            << what << ": boundary read in [" << r->earliest_us << ", " << r->latest_us << "]";
        EXPECT_LE(r->latest_us - r->earliest_us, kSecond / RefusalWindow::kMaxArcShare) << what;
      }
    }
  }
}

TEST(RefusalWindow, OneRefusal_ReadsNothing) {
  FixedWindow server{74, kSecond, 616 * kMs};
  Stretches run{32 * kMs, [&](std::int64_t a) { return server.admits(a); },
                [&](std::int64_t a) { return server.retry_after_us(a); }};
  RefusalWindow w;
  run.run(w, 1'700'000'000 * kSecond, 1, [](int, std::int64_t into) { return ramp(40 * kMs, into); });
  EXPECT_FALSE(w.read(kSecond).has_value());
}

TEST(RefusalWindow, ATokenBucketThatOnlyRefuses_IsNotReadAsAWindow) {
  // GCRA buckets of the test bed's shapes, answering 429 with Retry-After: 1.
  for (const double rate : {68.0, 94.0}) {
    for (const double burst : {1.0, 23.0, 54.0}) {
      Bucket server{rate, burst};
      Stretches run{31 * kMs, [&](std::int64_t a) { return server.admits(a); },
                    [](std::int64_t) { return kSecond; }};
      // Each restart after a pause the same, or each faster than the last.
      for (const std::int64_t faster : {0 * kMs, 125 * kMs}) {
        server.tat = 0;
        RefusalWindow w;
        run.run(w, 1'700'000'000 * kSecond, 6, [&](int s, std::int64_t into) {
          return s == 0 ? ramp(40 * kMs, into) : ramp(12 * kMs, into + faster * s);
        });
        EXPECT_FALSE(w.read(kSecond).has_value()) << rate << "/s, burst " << burst << ", faster " << faster;
      }
    }
  }
}

TEST(RefusalWindow, ABucketFitsAWindowAtTwoRefusals_NotAtThree) {
  // The engine's first two stretches against a bucket of 68/s with a
  // burst of 40, 15 ms away (the test bed's seed 719414): the opening's
  // slow start, refused at 310 ms, and the slower restart after the pause,
  // refused at 2036 ms. 60 calls in a second-long window from 600 ms fit
  // both; a window of 60 sent at once then drew refusals all run long.
  const std::int64_t t0 = 1'700'000'000 * kSecond;
  const std::vector<std::int64_t> admitted_ms = {
      0,    18,   24,   32,   39,   46,   53,   60,   66,   73,   80,   86,   92,   98,   105,  111,  116,
      122,  128,  134,  139,  144,  150,  155,  160,  165,  171,  175,  180,  185,  190,  195,  199,  204,
      208,  213,  217,  222,  226,  230,  235,  239,  243,  247,  251,  255,  259,  263,  267,  271,  274,
      278,  282,  285,  289,  293,  296,  300,  303,  307,  313,  1339, 1352, 1365, 1378, 1391, 1403, 1415,
      1427, 1439, 1450, 1462, 1473, 1484, 1495, 1506, 1516, 1527, 1537, 1547, 1557, 1567, 1577, 1586, 1596,
      1605, 1614, 1624, 1633, 1641, 1650, 1659, 1668, 1676, 1684, 1693, 1701, 1709, 1717, 1725, 1733, 1741,
      1748, 1756, 1763, 1771, 1778, 1786, 1793, 1800, 1807, 1814, 1821, 1828, 1835, 1842, 1848, 1855, 1861,
      1868, 1874, 1881, 1887, 1894, 1900, 1906, 1912, 1918, 1924, 1930, 1936, 1942, 1948, 1954, 1959, 1965,
      1971, 1977, 1982, 1988, 1993, 1999, 2004, 2009, 2015, 2020, 2025, 2030};
  RefusalWindow w;
  for (const std::int64_t ms : admitted_ms) {
    if (ms == 1339) w.refused(t0 + 310 * kMs);
    w.admitted(t0 + ms * kMs);
  }
  w.refused(t0 + 2036 * kMs);
  EXPECT_TRUE(w.read(kSecond, 2).has_value()) << "two refusals of this bucket fit some window";
  EXPECT_FALSE(w.read(kSecond, 3).has_value());
  // The third stretch, after the second pause, from a full bucket: the
  // restart's doubling from 9 ms.
  Bucket server{68, 40};
  Stretches run{15 * kMs, [&](std::int64_t a) { return server.admits(a); },
                [](std::int64_t) { return kSecond; }};
  run.run(w, t0 + 3051 * kMs, 1, [&](int, std::int64_t into) {
    return std::max<std::int64_t>(kMs, (9 * kMs) >> (into / (250 * kMs)));
  });
  EXPECT_FALSE(w.read(kSecond, 3).has_value()) << "three do not";
}

TEST(RefusalWindow, ATwoSecondWindowReadAsOneSecond_IsNotReadThenIsAtItsLength) {
  FixedWindow server{132, 2 * kSecond, 575 * kMs};
  Stretches run{14 * kMs, [&](std::int64_t a) { return server.admits(a); },
                [&](std::int64_t a) { return server.retry_after_us(a); }};
  RefusalWindow w;
  run.run(w, 1'700'000'000 * kSecond + 100 * kMs, 4, [](int s, std::int64_t into) {
    return s == 0 ? ramp(40 * kMs, into) : ramp(16 * kMs, into + 125 * kMs * s);
  });
  EXPECT_FALSE(w.read(kSecond).has_value());
  const std::optional<WindowReading> r = w.read(2 * kSecond);
  ASSERT_TRUE(r.has_value());
  EXPECT_LE(r->quota, 132);
  EXPECT_GE(r->quota, 129);
  EXPECT_TRUE(boundary_in(*r, 575 * kMs - 14 * kMs, 2 * kSecond));
}

// A call admitted long after it started (a slow reply), when a refusal of
// a later call has moved the latest start on by more than the span kept:
// every start kept is out of the span, and none is left to say from when
// windows are known whole.
TEST(RefusalWindow, AnAdmissionOlderThanTheSpanBehindTheLatestRefusal_KeepsNothingOlder) {
  RefusalWindow w;
  const std::int64_t t0 = 1'700'000'000 * kSecond;
  w.admitted(t0);
  w.admitted(t0 + kSecond);
  w.admitted(t0 + kSecond + 500 * kMs);
  w.refused(t0 + 30 * kSecond);
  w.admitted(t0 + 2 * kSecond);  // started before the refusal by more than the span
  EXPECT_TRUE(w.starts_from(0).empty());
  // Windows are known from the span's start on: an admission before it counts nowhere.
  w.admitted(t0 + 5 * kSecond);
  EXPECT_TRUE(w.starts_from(0).empty());
  w.admitted(t0 + 29 * kSecond);
  EXPECT_EQ(w.starts_from(0), std::vector<std::int64_t>{t0 + 29 * kSecond});
}

}  // namespace
}  // namespace ratchet::limit
