#include "limit/window_phase.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "limit/adaptive_pacer.hpp"
#include "limit/micros.hpp"
#include "paced_run.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kSecond = 1'000'000;

TEST(WindowPhase, AWindowsFirstCallAndTheCallsAfterItBoundTheNextBoundary) {
  WindowPhase phase;
  phase.set_window(kSecond);
  phase.replied(100'000, 120'000);
  phase.opened(100'000, 120'000);  // first of its window: a boundary at or before it
  ASSERT_TRUE(phase.known());
  EXPECT_EQ(phase.end_after(100'000), 100'000 + kSecond);
  phase.started(130'000);
  phase.counted(130'000);  // counted in the same window: the next boundary is after it
  EXPECT_EQ(phase.width(), kSecond - 30'000);
  // The probe goes halfway into what is still open.
  EXPECT_EQ(phase.probe_before(100'000 + kSecond), 130'000 + (kSecond - 30'000) / 2);
}

TEST(WindowPhase, BeforeThePhaseIsKnownProbesScanTheWindowsEndFromTheEarlySide) {
  // No window length yet: the end of the current window lies after the
  // latest call counted in it and by the end its reset states.
  WindowPhase phase;
  phase.replied(100'000, 120'000);
  phase.opened(100'000, 120'000);
  phase.counted(160'000);
  ASSERT_FALSE(phase.known());
  const std::int64_t end = 2'160'000;  // a reset two seconds on, read against a Date
  EXPECT_EQ(phase.probe_before(end, 3), 160'000 + 500'000) << "three probes: the first a quarter in";
  EXPECT_EQ(phase.probe_before(end), 160'000 + 1'000'000) << "one probe: halfway";
  phase.started(660'000);
  phase.counted(660'000);  // the first probe was counted in the old window: the scan moves on
  EXPECT_EQ(phase.probe_before(end, 2), 660'000 + 500'000);
}

TEST(WindowPhase, AProbeOnEitherSideHalvesTheInterval) {
  WindowPhase phase;
  phase.set_window(kSecond);
  phase.opened(0, 0);
  phase.started(10'000);
  phase.counted(10'000);  // boundary in (10 ms, 1 s] + k s
  const std::int64_t probe = phase.probe_before(kSecond);
  EXPECT_EQ(probe, 505'000);
  phase.started(probe);
  phase.counted(probe);  // still the old window: the boundary is later
  EXPECT_EQ(phase.width(), kSecond - probe);
  EXPECT_EQ(phase.end_after(probe), kSecond) << "the probe's own window ends at the known bound";
  // The next window's first call, at that bound, says nothing new.
  phase.started(kSecond);
  phase.opened(kSecond, kSecond);
  const std::int64_t second = phase.probe_before(2 * kSecond);
  EXPECT_EQ(second, probe + kSecond + (kSecond - probe) / 2);
  phase.started(second);
  phase.opened(second, second);  // the first of the window after: the boundary was before it
  EXPECT_EQ(phase.width(), second - kSecond - probe);
  EXPECT_EQ(phase.end_after(second), second + kSecond);
}

TEST(WindowPhase, AStatedResetNarrowsWhereTheWindowEnds) {
  // A two-second window's first call says only that a boundary came at or
  // before it; its reply's reset (whole seconds, rounded up: never early)
  // says the window ends within 1.2 s, so the boundary is known to 1.2 s,
  // and the probe goes into that span, not into the whole window.
  WindowPhase phase;
  phase.set_window(2 * kSecond);
  phase.replied(100'000, 130'000);
  phase.opened(100'000, 130'000);
  EXPECT_EQ(phase.width(), 2 * kSecond);
  phase.ends_by(100'000, 1'300'000);
  EXPECT_EQ(phase.width(), 1'200'000);
  EXPECT_EQ(phase.end_after(100'000), 1'300'000);
  EXPECT_EQ(phase.probe_before(1'300'000), 100'000 + 600'000);
  // A later reset that says no more, or a call inside the span (which
  // boundary ends its window is not known), changes nothing.
  phase.ends_by(100'000, 2'100'000);
  phase.started(900'000);
  phase.ends_by(900'000, 1'000'000);
  EXPECT_EQ(phase.width(), 1'200'000);
  // Nor does a reset before what the calls showed (a server that moved
  // its windows): the phase is relearned from refusals, not from it.
  phase.counted(900'000);
  phase.ends_by(100'000, 800'000);
  EXPECT_EQ(phase.width(), 400'000);
  EXPECT_EQ(phase.end_after(100'000), 1'300'000);
}

TEST(WindowPhase, BeforeTheWindowsLengthIsKnown_TheCurrentWindowsEndIsProbed) {
  WindowPhase phase;
  phase.opened(0, 0);  // the length unknown (one reset seen): nothing learned yet
  EXPECT_FALSE(phase.known());
  phase.counted(10'000);
  EXPECT_EQ(phase.doubt(kSecond), kSecond - 10'000)
      << "from the latest call counted to the end its reset states";
  EXPECT_EQ(phase.probe_before(kSecond), 505'000);
  phase.counted(505'000);  // the probe landed in the same window
  // The next window's first call, with its length now known, starts the
  // phase from what the window before showed.
  phase.set_window(kSecond);
  phase.opened(kSecond, kSecond);
  ASSERT_TRUE(phase.known());
  EXPECT_EQ(phase.width(), kSecond - 505'000);
  EXPECT_EQ(phase.end_after(kSecond), 2 * kSecond);
}

TEST(WindowPhase, AnOpenerAfterAnIdleWindowSaysNothingOfTheBoundary) {
  WindowPhase phase;
  phase.set_window(kSecond);
  phase.opened(0, 0);
  phase.started(10'000);
  phase.counted(10'000);
  const std::int64_t width = phase.width();
  // Nothing started in the window before this one: it may have opened it
  // long after its boundary.
  phase.opened(3 * kSecond + 400'000, 3 * kSecond + 400'000);
  EXPECT_EQ(phase.width(), width);
}

TEST(WindowPhase, ASlowReplyMovesItsCallsStartOnBeforeItBoundsTheBoundary) {
  WindowPhase phase;
  phase.set_window(kSecond);
  phase.replied(0, 20'000);  // the quickest reply: 20 ms
  phase.opened(0, 20'000);
  phase.started(10'000);
  phase.counted(10'000);
  phase.started(kSecond + 200'000);  // calls of the window before
  phase.started(kSecond + 400'000);
  // The next window's first call took 80 ms: it may have reached the server
  // 60 ms after it started.
  phase.opened(kSecond + 600'000, kSecond + 680'000);
  EXPECT_EQ(phase.end_after(kSecond + 600'000), 2 * kSecond + 660'000);
}

TEST(WindowPhase, ARefusalJustPastTheLearnedBoundaryForgetsThePhase) {
  WindowPhase phase;
  phase.set_window(kSecond);
  phase.opened(0, 0);
  phase.started(10'000);
  phase.counted(10'000);
  phase.started(900'000);
  phase.counted(900'000);           // the boundary in (900 ms, 1 s]
  phase.refused(kSecond + 50'000);  // and the window after it spent
  EXPECT_FALSE(phase.known());
}

TEST(WindowPhase, AnotherWindowLengthStartsOver) {
  WindowPhase phase;
  phase.set_window(kSecond);
  phase.opened(0, 0);
  phase.set_window(2 * kSecond);
  EXPECT_FALSE(phase.known());
}

// From the first arrival, the least time the server lets `jobs` calls in.
double bound_s(const FixedWindowServer& s, std::int64_t first_arrival, int jobs) {
  const std::int64_t windows = (jobs + s.limit - 1) / s.limit;
  const std::int64_t into = (first_arrival - s.offset_us) % s.window_us;
  return static_cast<double>(s.window_us - into + (windows - 2) * s.window_us) / 1e6;
}

TEST(AdaptivePacer_Phase, FixedWindowsOfTwoSecondsAreUsedFromTheirStartOnceTheirPhaseIsLearned) {
  // Resets in whole seconds, read against a Date in whole seconds, leave a
  // boundary unknown by up to two seconds. Learned, each window's quota
  // goes at its start, and nothing is refused: within 0.3 % of the bound,
  // where waiting for each window's stated reset takes 4 to 8 % longer.
  for (const std::int64_t offset : {0, 348'000, 1'348'000, 1'900'000}) {
    FixedWindowServer server{2 * kSecond, offset, 20, 13'000};
    const std::int64_t t0 = 1'700'000'000 * kSecond + 600'000;
    const PacedRun run = run_against(server, 190, t0);
    const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
    const double bound = bound_s(server, run.first_arrival, 190);
    EXPECT_EQ(run.refused, 0) << "offset " << offset;
    EXPECT_LE(makespan, 1.03 * bound) << "offset " << offset << ": " << makespan << " s against " << bound;
  }
}

TEST(AdaptivePacer_Phase, AFirstWindowThatEndsWithinASecondIsUsedWhole) {
  // The first reply of a two-second window 0.1 s from its end says it
  // resets in a second: no more is known of the window's length, and what
  // remains of it goes at once, as in any window. Kept by an even pace, as
  // a window of a second is, 52 calls took 1.97 times the bound.
  FixedWindowServer server{2 * kSecond, 700'000, 20, 9'000};
  const std::int64_t t0 = 1'700'000'000 * kSecond + 600'000;
  const PacedRun run = run_against(server, 52, t0, 8);
  const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
  const double bound = bound_s(server, run.first_arrival, 52);
  EXPECT_EQ(run.refused, 0);
  EXPECT_LE(makespan, 1.15 * bound) << makespan << " s against " << bound;
}

TEST(AdaptivePacer_Phase, AWindowsStatedResetAndTheCallsWaitingPlaceItsProbes) {
  // RateLimit-Policy gives the window (2 s); the first reply says the
  // window resets in one or two seconds. Two things keep 56 calls within
  // 1.1 times the bound, at every alignment:
  //   - the stated reset narrows where the window ends (without it, 1.14
  //     times the bound at offset 0);
  //   - a window's last units go as probes of its end only while more calls
  //     wait than it holds: the last window, holding every call left, sends
  //     them at once (without it, 1.60 times at offset 250 ms, its last
  //     call held for a probe at the window's end).
  for (const std::int64_t offset : {0, 250'000, 530'000, 900'000}) {
    FixedWindowServer server{2 * kSecond, offset, 20, 31'000};
    server.ietf = true;
    const std::int64_t t0 = 1'700'000'000 * kSecond + 1'000'000;
    const PacedRun run = run_against(server, 56, t0, 8);
    const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
    const double bound = bound_s(server, run.first_arrival, 56);
    EXPECT_EQ(run.refused, 0) << "offset " << offset;
    EXPECT_LE(makespan, 1.1 * bound) << "offset " << offset << ": " << makespan << " s against " << bound;
  }
}

TEST(AdaptivePacer_Phase, TheCallsOfARunsLastSecondWindowGoAtOnce) {
  // A window of a second is kept by an even pace, its quota spread over
  // it; the calls left at a run's end that all fit in what remains of the
  // window go at once instead, a pace apart they would take most of it.
  for (const std::int64_t offset : {0, 215'000, 689'000}) {
    for (const bool ietf : {true, false}) {
      FixedWindowServer server{kSecond, offset, 13, 39'000};
      server.ietf = ietf;
      const std::int64_t t0 = 1'700'000'000 * kSecond + 400'000;
      const PacedRun run = run_against(server, 58, t0, 8);
      const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
      const double bound = bound_s(server, run.first_arrival, 58);
      EXPECT_EQ(run.refused, 0) << "offset " << offset << (ietf ? " ietf" : " x-ratelimit");
      EXPECT_LE(makespan, 1.1 * bound) << "offset " << offset << (ietf ? " ietf" : " x-ratelimit") << ": "
                                       << makespan << " s against " << bound;
    }
  }
}

TEST(AdaptivePacer_Phase, TheFirstWindowsEndIsFoundByProbesFromTheEarlySide) {
  // X-RateLimit-Reset in whole seconds read against a Date in whole
  // seconds: the first window's end is known to within two seconds. Its
  // last units scan that span from its start, so the next window is found
  // soon after it opens: 1.03 to 1.07 times the bound here, where one
  // probe at the span's middle, landing up to a second into the next
  // window however early it opened, took 1.05 to 1.13.
  for (const std::int64_t offset : {215'000, 500'000, 900'000}) {
    FixedWindowServer server{kSecond, offset, 14, 39'000};
    const std::int64_t t0 = 1'700'000'000 * kSecond + 820'000;
    const PacedRun run = run_against(server, 50, t0, 8);
    const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
    const double bound = bound_s(server, run.first_arrival, 50);
    EXPECT_EQ(run.refused, 0) << "offset " << offset;
    EXPECT_LE(makespan, 1.1 * bound) << "offset " << offset << ": " << makespan << " s against " << bound;
  }
}

TEST(AdaptivePacer_Phase, ARunsLastTwoWindowsScanTheFirstEndWithEveryUnitTheNextCanSpare) {
  // 50 calls against 30 every two seconds, X-RateLimit-Reset in whole
  // seconds: the first window's end is known to within two seconds, and
  // the calls left after it all fit in the next window. Four units held
  // to scan that span found the next window up to half a second after it
  // opened: 1.21 to 1.28 times the bound here. Units the next window would
  // not need even were they all lost cost nothing held: ten held, 1.059 to
  // 1.096.
  struct Case {
    std::int64_t offset, start, latency;
  };
  for (const Case c : {Case{492'000, 650'000, 17'000}, Case{844'000, 0, 17'000},
                       Case{215'000, 300'000, 41'000}, Case{1'492'000, 650'000, 17'000}}) {
    FixedWindowServer server{2 * kSecond, c.offset, 30, c.latency};
    const PacedRun run = run_against(server, 50, 1'700'000'000 * kSecond + c.start, 8);
    const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
    const double bound = bound_s(server, run.first_arrival, 50);
    const std::string at = "offset " + std::to_string(c.offset) + ", start " + std::to_string(c.start);
    EXPECT_EQ(run.refused, 0) << at;
    EXPECT_LE(makespan, 1.15 * bound) << at << ": " << makespan << " s against " << bound;
  }
}

TEST(AdaptivePacer_Phase, AWindowThatBeganWithItsQuotaAtOnceGoesOnSoToItsEnd) {
  // 98 a second, 45 ms to the server, eight calls in flight, 1000 calls.
  // The first window's quota goes at once, and a window of a second is
  // then kept by an even pace, from the first window's stated reset on.
  // Rounded up to a whole second, that reset can fall inside the second
  // window, whose start had gone at once too: paced from there on, it
  // drew 3 or 4 refusals at its end in 5 of these 32 runs (1.12 to 1.23
  // times the bound). Counted to its end, none is refused, and the runs
  // take 1.03 to 1.13 times the bound.
  for (const std::int64_t offset : {135'000, 400'000, 700'000, 900'000}) {
    for (const std::int64_t start : {0, 250'000, 500'000, 750'000}) {
      for (const bool ietf : {true, false}) {
        FixedWindowServer server{kSecond, offset, 98, 45'000};
        server.ietf = ietf;
        const PacedRun run = run_against(server, 1000, 1'700'000'000 * kSecond + start, 8);
        const double makespan = static_cast<double>(run.last_arrival - run.first_arrival) / 1e6;
        const double bound = bound_s(server, run.first_arrival, 1000);
        const std::string at = "offset " + std::to_string(offset) + ", start " + std::to_string(start) +
                               (ietf ? ", ietf" : ", x-ratelimit");
        EXPECT_EQ(run.refused, 0) << at;
        EXPECT_LE(makespan, 1.15 * bound) << at << ": " << makespan << " s against " << bound;
      }
    }
  }
}

TEST(AdaptivePacer_Quota, CallsSentAtOnceAtAWindowsEndAndCountedInTheNextAreNotCountedAsIfNoneWere) {
  // 27 calls, 12 per 2 s (X-RateLimit-Reset in seconds from now), 20 ms to
  // the server and up to 10, 30 or 60 ms more, the first call at 200
  // places across 2 s. When it was counted just before its window's end,
  // what remained went at once and was counted in the next window; the
  // replies of that one, with 2 s to its reset, were taken for the first
  // call's window, ending a window after the first call started; and the
  // next window's first call, answered after some of them, for a window
  // newer still, with eleven left: 23 of 2,400 runs were refused a call
  // (the assembled engine's learned-quota test, 1 run in 20 on a loaded
  // machine). A reply is of the window its reset says, and a window's
  // first call answered late opens none.
  int refused_runs = 0;
  std::string which;
  for (const int workers : {4, 8, 16}) {
    for (const std::int64_t jitter_us : {0, 10'000, 30'000, 60'000}) {
      for (int i = 0; i < 200; ++i) {
        // Each call slowed on its way is answered that much later.
        Jittery<FixedWindowServer> server{FixedWindowServer{.window_us = 2 * kSecond,
                                                            .offset_us = 300'000,
                                                            .limit = 12,
                                                            .latency_us = 20'000,
                                                            .delta = true},
                                          20'000, jitter_us, true,
                                          88172645463325252ULL + static_cast<std::uint64_t>(i)};
        const std::int64_t t0 = 1'700'000'000 * kSecond + i * 10'007;
        const PacedRun run = run_against(server, 27, t0, workers);
        if (run.refused > 0) {
          ++refused_runs;
          which += " " + std::to_string(workers) + "/" + std::to_string(jitter_us / 1000) + "ms/+" +
                   std::to_string(i * 10'007 / 1000) + "ms";
        }
      }
    }
  }
  EXPECT_EQ(refused_runs, 0) << "calls in flight/jitter/first start:" << which;
}

}  // namespace
}  // namespace ratchet::limit
