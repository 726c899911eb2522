// What CallServices checks right before a plugin's request leaves: that the
// limiter start it was admitted with is recent (a request leaving late is
// counted anew, or waits unsent), and that the run's lease still holds. A
// fake clock stands for the time a descheduled or stopped worker loses; a
// cpp-httplib server on a loopback port counts what really arrives.
#include "pipeline/call_services.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "config/bounds.hpp"
#include "forwarding_limiter.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"
#include "retry/call_gate.hpp"

namespace ratchet::pipeline {
namespace {

using namespace std::chrono_literals;
using Gate = retry::CallGate;

class CountingServer {
 public:
  CountingServer() {
    server_.Get(".*", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      if (const Clock* c = stamps_.load()) {
        std::lock_guard lock(mu_);
        arrivals_.push_back(c->now());
      }
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  }
  ~CountingServer() {
    server_.stop();
    thread_.join();
  }
  CountingServer(const CountingServer&) = delete;
  CountingServer& operator=(const CountingServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/movies/Up"; }
  int requests() const { return requests_.load(); }
  // Arrivals from now on are stamped on `clock` (the test's fake one).
  void stamp_with(const Clock& clock) { stamps_ = &clock; }
  std::vector<TimePoint> arrivals() const {
    std::lock_guard lock(mu_);
    return arrivals_;
  }

 private:
  httplib::Server server_;
  std::atomic<const Clock*> stamps_{nullptr};
  mutable std::mutex mu_;
  std::vector<TimePoint> arrivals_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> requests_{0};
};

class CallServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = http::Client::create({});
    ASSERT_TRUE(c) << c.error().to_string();
    client_ = std::move(*c);
  }

  std::unique_ptr<Gate> gate_with(std::int64_t rate, Duration per) {
    return gate_of(std::make_shared<limit::SlidingWindowLimiter>(rate, limit::to_micros(per)));
  }
  std::unique_ptr<Gate> gate_of(std::shared_ptr<limit::Limiter> limiter) {
    retry::CallGateParts parts;
    parts.retry.attempts = 1;
    parts.limiters.push_back(std::move(limiter));
    return std::make_unique<Gate>(std::move(parts));
  }

  // Admits one call now; the test fails if it would have to wait.
  Gate::Go admit(Gate& gate) {
    retry::CallState step(clock_.now());
    auto a = gate.admit(step, clock_.now());
    EXPECT_TRUE(std::holds_alternative<Gate::Go>(a)) << "the call was not admitted at once";
    return std::move(std::get<Gate::Go>(a));
  }

  // When the gate would let one more call start.
  TimePoint next_admission(Gate& gate) {
    retry::CallState step(clock_.now());
    auto a = gate.admit(step, clock_.now());
    if (std::holds_alternative<Gate::Go>(a)) return clock_.now();
    auto* w = std::get_if<Gate::Wait>(&a);
    if (w == nullptr || !w->until) {
      ADD_FAILURE() << "expected a wait for a rate-limit slot";
      return {};
    }
    return *w->until;
  }

  plugin_host::HttpRequest get() const {
    plugin_host::HttpRequest r;
    r.url = server_.url();
    return r;
  }

  FakeClock clock_;
  CountingServer server_;
  std::unique_ptr<http::Client> client_;
  common::SecretMask secrets_;
};

// Admitted at t0, the request only leaves at t0 + 300 ms (the worker lost
// the CPU, or connecting took that long). Counted at t0, the next call could
// leave at t0 + 1 s: 700 ms after this one at the server, under 1/1s.
TEST_F(CallServicesTest, RequestLeavingLate_IsCountedWhenItLeaves) {
  auto gate = gate_with(1, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  clock_.advance(300ms);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto r = services.http("p", get());
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(go.counted.counted_at(), t0 + 300ms);
  EXPECT_EQ(next_admission(*gate), t0 + 1300ms);
}

TEST_F(CallServicesTest, RequestLeavingOnTime_KeepsItsCount) {
  auto gate = gate_with(1, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  clock_.advance(2ms);  // within the slack
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto r = services.http("p", get());
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  EXPECT_EQ(go.counted.counted_at(), t0);
  EXPECT_EQ(next_admission(*gate), t0 + 1s);
}

// A sliding window whose recounts return late, as a database-scope
// limiter's do when its commit waits on a busy disk: the count is taken,
// then the commit takes `commit` of the (fake) clock, `slow` times.
class SlowRecounts final : public ratchet::testing::ForwardingLimiter {
 public:
  SlowRecounts(std::int64_t rate, Duration per, FakeClock& clock, int slow, Duration commit)
      : ForwardingLimiter(std::make_shared<limit::SlidingWindowLimiter>(rate, limit::to_micros(per))),
        clock_(clock),
        slow_(slow),
        commit_(commit) {}
  Result<limit::UseResult> restart(limit::Slot& slot, std::int64_t now_us) override {
    auto used = ForwardingLimiter::restart(slot, now_us);
    ++recounts_;
    if (slow_ > 0) {
      --slow_;
      clock_.advance(commit_);
    }
    return used;
  }

  int recounts() const { return recounts_.load(); }

 private:
  FakeClock& clock_;
  int slow_;
  Duration commit_;
  std::atomic<int> recounts_{0};
};

// Admitted at t0, the request was to leave at t0 + 300 ms and was counted
// anew then; that count's commit returned 200 ms later, twice. Sent then, it
// would reach the server 200 ms after its count, and a call counted a second
// after it 800 ms after it. It is counted until a count is fresh as it leaves.
TEST_F(CallServicesTest, RecountThatReturnsLate_IsCountedAgainUntilFreshWhenItLeaves) {
  server_.stamp_with(clock_);
  auto gate = gate_of(std::make_shared<SlowRecounts>(1, 1s, clock_, 2, 200ms));
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  clock_.advance(300ms);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto r = services.http("p", get());
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  const std::vector<TimePoint> arrived = server_.arrivals();
  ASSERT_EQ(arrived.size(), 1u);
  EXPECT_EQ(arrived[0], t0 + 700ms);
  EXPECT_EQ(go.counted.counted_at(), arrived[0]);
  EXPECT_EQ(next_admission(*gate), arrived[0] + 1s);
}

// A fake clock whose waits move it to their deadline at once: every wait
// is as long as it asks, and nothing else moves the time.
class JumpingClock final : public Clock {
 public:
  explicit JumpingClock(FakeClock& fake) : fake_(&fake) {}
  TimePoint now() const override { return fake_->now(); }
  bool wait_until(TimePoint deadline, std::stop_token stop) const override {
    if (deadline > fake_->now()) fake_->set(deadline);
    return !stop.stop_requested();
  }

 private:
  FakeClock* fake_;
};

// The limits' database commits slowly for good (a disk busy with other
// writes): no count is ever fresh when the request is to leave. Counted
// again and again at once, the worker spun a core for ever; the attempt now
// pauses between rounds and fails at its timeout, with a message that names
// why, and nothing is sent.
TEST_F(CallServicesTest, RecountsThatAreAlwaysLate_FailTheAttemptAtItsTimeoutUnsent) {
  auto slow = std::make_shared<SlowRecounts>(1, 1s, clock_, std::numeric_limits<int>::max(), 6ms);
  auto gate = gate_of(slow);
  auto go = admit(*gate);
  clock_.advance(300ms);
  JumpingClock clock(clock_);
  CallServices services(*client_, *gate, clock, 2s, secrets_, {}, &go.counted);
  auto r = services.http("p", get());
  EXPECT_EQ(r.error, plugin_host::HttpFailure::kTimeout) << r.message;
  EXPECT_NE(r.message.find("could not count the request in time"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("nothing sent"), std::string::npos) << r.message;
  EXPECT_EQ(server_.requests(), 0);
  // Counted again at once, 2 s of 6 ms counts would be over 300 of them.
  EXPECT_LT(slow->recounts(), 100) << "each round of counts waits longer before the next";
}

// Late for more than one round of counts, then fresh again: the request
// leaves once a count is fresh, counted when it leaves.
TEST_F(CallServicesTest, RecountsLateForSeveralRounds_LeaveOnceACountIsFresh) {
  server_.stamp_with(clock_);
  auto gate = gate_of(std::make_shared<SlowRecounts>(1, 1s, clock_, 20, 20ms));
  auto go = admit(*gate);
  clock_.advance(300ms);
  JumpingClock clock(clock_);
  CallServices services(*client_, *gate, clock, 10s, secrets_, {}, &go.counted);
  auto r = services.http("p", get());
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  const std::vector<TimePoint> arrived = server_.arrivals();
  ASSERT_EQ(arrived.size(), 1u);
  EXPECT_EQ(arrived[0], go.counted.counted_at()) << "sent on a count that was fresh";
}

// Stands for a log file on a busy disk: each "request leaves" line takes
// 200 ms of the fake clock to write.
class SlowLogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit SlowLogSink(FakeClock& clock) : clock_(clock) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (std::string_view(msg.payload.data(), msg.payload.size()).find("request leaves") !=
        std::string_view::npos)
      clock_.advance(200ms);
  }
  void flush_() override {}

 private:
  FakeClock& clock_;
};

// Debug logging names when each request leaves. Written between the count
// and the request, a write that blocks would send it late on its count.
TEST_F(CallServicesTest, LogWriteThatBlocks_DoesNotComeBetweenTheCountAndTheRequest) {
  server_.stamp_with(clock_);
  const auto before = spdlog::default_logger();
  auto slow = std::make_shared<spdlog::logger>("slow", std::make_shared<SlowLogSink>(clock_));
  slow->set_level(spdlog::level::debug);
  spdlog::set_default_logger(slow);
  struct Restore {
    std::shared_ptr<spdlog::logger> logger;
    ~Restore() { spdlog::set_default_logger(logger); }
  } restore{before};
  auto gate = gate_with(1, 1s);
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto r = services.http("p", get());
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  const std::vector<TimePoint> arrived = server_.arrivals();
  ASSERT_EQ(arrived.size(), 1u);
  EXPECT_LE(arrived[0] - go.counted.counted_at(), 5ms) << "the request left after its count";
}

// A was admitted at t0 and still had not left at t0 + 1050 ms, while B
// (t0 + 100 ms) and C (t0 + 1 s, once A's count left the window) went. Sent
// then, A would be the third request within a second at the server.
TEST_F(CallServicesTest, NoRoomWhenItLeavesLate_WaitsUnsentUntilThereIs) {
  auto gate = gate_with(2, 1s);
  const TimePoint t0 = clock_.now();
  auto a = admit(*gate);
  clock_.advance(100ms);
  auto b = admit(*gate);
  EXPECT_EQ(next_admission(*gate), t0 + 1s);
  clock_.set(t0 + 1s);
  auto c = admit(*gate);
  clock_.set(t0 + 1050ms);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &a.counted);
  auto sent = std::async(std::launch::async, [&] { return services.http("p", get()); });
  // Nothing leaves while the fake time stands before B's count leaves the window.
  EXPECT_EQ(sent.wait_for(200ms), std::future_status::timeout);
  EXPECT_EQ(server_.requests(), 0);
  clock_.set(t0 + 1100ms);
  auto r = sent.get();
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  EXPECT_EQ(server_.requests(), 1);
  EXPECT_EQ(a.counted.counted_at(), t0 + 1100ms);
}

// The room comes after the attempt's timeout: the request is refused unsent,
// with the time the room comes, which the plugin reports as throttling.
TEST_F(CallServicesTest, NoRoomWithinTheAttemptsTimeout_RefusedUnsentWithWhenThereIsRoom) {
  auto gate = gate_with(1, 1s);
  const TimePoint t0 = clock_.now();
  auto a = admit(*gate);
  clock_.set(t0 + 1s);
  auto b = admit(*gate);  // A's count has left the window
  clock_.set(t0 + 1050ms);
  // Recounted now, A would wait for B's count to leave: 950 ms, past 200 ms.
  CallServices services(*client_, *gate, clock_, 200ms, secrets_, {}, &a.counted);
  auto r = services.http("p", get());
  EXPECT_EQ(r.error, plugin_host::HttpFailure::kRefused) << r.message;
  EXPECT_EQ(r.retry_after, 950ms);
  EXPECT_EQ(server_.requests(), 0);
}

// The run was stopped (SIGSTOP) past its lease between admission and send:
// another process may own the job now and have run this step. The request
// waits unsent until the heartbeat renews the lease...
TEST_F(CallServicesTest, LeaseRanOutBeforeSending_WaitsUnsentUntilRenewed) {
  auto gate = gate_with(100, 1s);
  const TimePoint t0 = clock_.now();
  std::atomic<std::int64_t> lease_until_us{limit::to_micros(t0 + 1s)};
  auto go = admit(*gate);
  clock_.set(t0 + 2s);
  CallServices services(*client_, *gate, clock_, 30s, secrets_, {}, &go.counted,
                        [&] { return limit::from_micros(lease_until_us.load()); });
  auto sent = std::async(std::launch::async, [&] { return services.http("p", get()); });
  EXPECT_EQ(sent.wait_for(200ms), std::future_status::timeout);
  EXPECT_EQ(server_.requests(), 0);
  lease_until_us = limit::to_micros(t0 + 40s);
  // The held request looks again on its next poll of the (fake) clock.
  for (int i = 0; i < 100 && sent.wait_for(10ms) == std::future_status::timeout; ++i) clock_.advance(10ms);
  auto r = sent.get();
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  EXPECT_EQ(server_.requests(), 1);
}

// ...or the run is stopped as lost: then it is never sent.
TEST_F(CallServicesTest, LeaseRanOutAndTheRunIsLost_NeverSent) {
  auto gate = gate_with(100, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  clock_.set(t0 + 2s);
  std::stop_source lost;
  CallServices services(*client_, *gate, clock_, 30s, secrets_, lost.get_token(), &go.counted,
                        [&] { return t0 + 1s; });
  auto sent = std::async(std::launch::async, [&] { return services.http("p", get()); });
  EXPECT_EQ(sent.wait_for(200ms), std::future_status::timeout);
  lost.request_stop();
  auto r = sent.get();
  EXPECT_EQ(r.error, plugin_host::HttpFailure::kCancelled) << r.message;
  EXPECT_EQ(server_.requests(), 0);
}

// A server with a day's quota asks for two hours: the plugin is told two
// hours, not the hour a header's wait was once capped at, when the
// plugin's max_wait allows it (docs/semantics.md rule 9).
TEST_F(CallServicesTest, RetryAfterLongerThanAnHour_ReachesThePluginWhenMaxWaitAllowsIt) {
  httplib::Server refusing;
  refusing.Get(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 429;
    res.set_header("Retry-After", "7200");
    res.set_header("Connection", "close");  // so that stop() need not wait out a keep-alive
  });
  const int port = refusing.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { refusing.listen_after_bind(); });
  for (int i = 0; i < 5000 && !refusing.is_running(); ++i) std::this_thread::sleep_for(1ms);
  retry::CallGateParts parts;
  parts.retry.attempts = 1;
  parts.max_wait = 48h;
  parts.headers.max_wait = 48h;
  Gate gate(std::move(parts));
  CallServices services(*client_, gate, clock_, 10s, secrets_, {}, nullptr);
  plugin_host::HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(port) + "/movies/Up";
  auto r = services.http("p", req);
  refusing.stop();
  serving.join();
  EXPECT_EQ(r.status, 429) << r.message;
  EXPECT_EQ(r.retry_after, std::chrono::milliseconds(2h));
}

// Weighted calls. A limit of 10 units per second.

TEST_F(CallServicesTest, DeclaredCost_EachCallTakesThatManyUnits) {
  retry::CallGateParts parts;
  parts.retry.attempts = 1;
  parts.cost = 5;
  parts.limiters.push_back(std::make_shared<limit::SlidingWindowLimiter>(10, 1'000'000));
  Gate gate(std::move(parts));
  const TimePoint t0 = clock_.now();
  auto a = admit(gate);
  auto b = admit(gate);
  EXPECT_EQ(a.counted.units(), 5);
  EXPECT_EQ(b.counted.units(), 5);
  EXPECT_EQ(next_admission(gate), t0 + 1s);
}

TEST_F(CallServicesTest, PluginsEstimate_CorrectsTheAdmittedSlotBeforeTheRequestLeaves) {
  auto gate = gate_with(10, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto req = get();
  req.cost = 10;
  auto r = services.http("p", req);
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  EXPECT_EQ(server_.requests(), 1);
  EXPECT_EQ(next_admission(*gate), t0 + 1s);
}

// Admitted at one unit while another call holds 5 of the 10, a request the
// plugin expects to cost 8 is not sent (it would put 13 units in the
// window): it is refused, unsent, with the time there is room for all 8, and
// the step learns to ask for 8.
TEST_F(CallServicesTest, PluginsEstimateAboveTheRoomLeft_RefusedUnsentWithWhenThereIsRoomForAllItsUnits) {
  auto gate = gate_with(10, 1s);
  const TimePoint t0 = clock_.now();
  retry::CallState other(clock_.now());
  other.set_units(5);
  auto taken = gate->admit(other, clock_.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Go>(taken));
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto req = get();
  req.cost = 8;
  auto r = services.http("p", req);
  EXPECT_EQ(r.error, plugin_host::HttpFailure::kRefused);
  ASSERT_TRUE(r.retry_after.has_value());
  EXPECT_EQ(*r.retry_after, 1000ms);
  EXPECT_EQ(server_.requests(), 0);
  EXPECT_EQ(services.wanted_units(), 8);
  EXPECT_EQ(services.last_transport_error(), http::TransportError::Kind::kHeldBack);
  (void)t0;
}

TEST_F(CallServicesTest, ReportedCost_OverdraftMakesTheNextCallWaitAndARefundFreesRoom) {
  auto gate = gate_with(10, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  ASSERT_EQ(services.http("p", get()).error, plugin_host::HttpFailure::kNone);
  services.report_cost("p", 14);  // more than the whole limit
  EXPECT_EQ(next_admission(*gate), t0 + 1s);
  services.report_cost("p", 0);
  EXPECT_EQ(next_admission(*gate), t0);
}

TEST_F(CallServicesTest, SecondRequestOfACall_TakesItsEstimatedUnitsAndItsReportedCost) {
  auto gate = gate_with(10, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  ASSERT_EQ(services.http("p", get()).error, plugin_host::HttpFailure::kNone);
  auto second = get();
  second.cost = 4;
  ASSERT_EQ(services.http("p", second).error, plugin_host::HttpFailure::kNone);
  EXPECT_EQ(server_.requests(), 2);
  // 1 + 4 of 10 spent; the second request really cost 9: 10 spent.
  services.report_cost("p", 9);
  EXPECT_EQ(go.counted.units(), 1);  // the first request's count is untouched
  EXPECT_EQ(next_admission(*gate), t0 + 1s);
}

// A call with no cost of its own is admitted at the least that the
// operation's last 32 calls cost, as their replies reported: sized so, it
// is mostly corrected upwards.
TEST_F(CallServicesTest, ReportedCosts_LaterCallsAreAdmittedAtTheLeastOfTheRecentOnes) {
  auto gate = gate_with(100'000, 1s);
  auto call_costing = [&](std::int64_t cost) {
    auto go = admit(*gate);
    CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
    EXPECT_EQ(services.http("p", get()).error, plugin_host::HttpFailure::kNone);
    services.report_cost("p", cost);
    return go.counted.units();  // corrected to `cost`
  };
  EXPECT_EQ(admit(*gate).counted.units(), 1);  // nothing learned yet: the declared cost
  call_costing(4);
  EXPECT_EQ(admit(*gate).counted.units(), 4);
  call_costing(6);
  EXPECT_EQ(admit(*gate).counted.units(), 4);
  call_costing(3);
  EXPECT_EQ(gate->learned_cost(), 3);
  for (int i = 0; i < 32; ++i) call_costing(5);  // the older ones are forgotten
  EXPECT_EQ(admit(*gate).counted.units(), 5);
}

// A request's estimate is learned as well: the next calls are admitted at
// it, and do not wait once for one unit and again for the rest.
TEST_F(CallServicesTest, PluginsEstimate_IsWhatTheNextCallsAreAdmittedAt) {
  auto gate = gate_with(100, 1s);
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto req = get();
  req.cost = 6;
  ASSERT_EQ(services.http("p", req).error, plugin_host::HttpFailure::kNone);
  EXPECT_EQ(admit(*gate).counted.units(), 6);
}

TEST_F(CallServicesTest, ReportedCostBeforeAnyRequest_ChangesNothing) {
  auto gate = gate_with(1, 1s);
  const TimePoint t0 = clock_.now();
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  services.report_cost("p", 0);
  EXPECT_EQ(next_admission(*gate), t0 + 1s);
}

// A cost comes from outside: a plugin's estimate in its request, or what it
// reads from a server's reply. Past the most a call may cost (kMaxCost) it
// is a plugin's bug or a hostile reply: ignored, the call counts at what it
// was admitted with. INT64_MAX units overflowed a token bucket's arithmetic.
TEST_F(CallServicesTest, ReportedCostBeyondTheMostACallMayCost_IsIgnored) {
  auto bucket = [] {
    retry::CallGateParts parts;
    parts.retry.attempts = 1;
    parts.limiters.push_back(std::make_shared<limit::TokenBucketLimiter>(10, limit::to_micros(1s), 2));
    return std::make_unique<Gate>(std::move(parts));
  };
  auto reported = [&](std::int64_t units) {
    auto gate = bucket();
    auto go = admit(*gate);
    CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
    EXPECT_EQ(services.http("p", get()).error, plugin_host::HttpFailure::kNone);
    services.report_cost("p", units);
    return next_admission(*gate) - clock_.now();
  };
  const Duration after_one = reported(1);
  EXPECT_EQ(reported(std::numeric_limits<std::int64_t>::max()), after_one);
  EXPECT_EQ(reported(config::kMaxCost + 1), after_one);
}

TEST_F(CallServicesTest, RequestsEstimateBeyondTheMostACallMayCost_IsIgnored) {
  auto gate = gate_with(10, 1s);
  auto go = admit(*gate);
  CallServices services(*client_, *gate, clock_, 10s, secrets_, {}, &go.counted);
  auto req = get();
  req.cost = std::numeric_limits<std::int64_t>::max();
  const auto r = services.http("p", req);
  ASSERT_EQ(r.error, plugin_host::HttpFailure::kNone) << r.message;
  EXPECT_EQ(go.counted.units(), 1);
  EXPECT_EQ(gate->learned_cost(), 0);  // nor is it what later calls are admitted at
}

// A call's further requests were admitted with it: they take rate-limit
// slots, but not another concurrency permit or breaker probe, and what only
// the call's reply can tell (its outcome) is not recorded before they leave.
class CallServicesFurtherRequestTest : public CallServicesTest {
 protected:
  // A call admitted through a gate of `parts` whose first request was
  // answered.
  struct Call {
    explicit Call(retry::CallGateParts parts) : gate(std::move(parts)) {}
    Gate gate;
    std::optional<Gate::Go> go;
    std::stop_source stop;
    std::optional<CallServices> services;
  };
  std::unique_ptr<Call> first_request_answered(retry::CallGateParts parts, Duration reply_after = {}) {
    parts.retry.attempts = 1;
    auto call = std::make_unique<Call>(std::move(parts));
    call->go.emplace(admit(call->gate));
    call->services.emplace(*client_, call->gate, clock_, 10s, secrets_, call->stop.get_token(),
                           &call->go->counted);
    EXPECT_EQ(call->services->http("p", get()).error, plugin_host::HttpFailure::kNone);
    clock_.advance(reply_after);
    return call;
  }

  // Sends the call's second request on another thread: true if it was
  // answered within 2 s of real time without the fake clock moving. A
  // request that waits would wait for ever on that clock: it is then
  // cancelled.
  bool second_request_goes(Call& call) {
    auto second = std::async(std::launch::async, [&] { return call.services->http("p", get()); });
    const bool answered = second.wait_for(2s) == std::future_status::ready;
    if (!answered) {
      call.stop.request_stop();
      clock_.advance(10ms);
    }
    const auto r = second.get();
    return answered && r.error == plugin_host::HttpFailure::kNone;
  }
};

// With `concurrency = 1` the call holds the only permit: a second request
// that asked for one of its own waited for the call to end, i.e. for ever.
TEST_F(CallServicesFurtherRequestTest, UnderAConcurrencyCapOfOne_TheSecondRequestLeaves) {
  retry::CallGateParts parts;
  parts.concurrency = limit::ConcurrencyLimiter::make(1);
  auto call = first_request_answered(std::move(parts));
  EXPECT_TRUE(second_request_goes(*call));
  EXPECT_EQ(server_.requests(), 2);
}

// A half-open breaker lets one probe call through and closes on the
// outcome of that call. Its second request neither waits for the probe to
// end (it is the probe) nor closes the breaker before the call's reply.
TEST_F(CallServicesFurtherRequestTest, OfAHalfOpenProbe_TheSecondRequestLeavesAndTheBreakerWaitsForTheCall) {
  config::BreakerSpec spec;
  spec.consecutive_failures = 1;
  spec.open_for = 1s;
  auto breaker = std::make_shared<retry::CircuitBreaker>(spec);
  breaker->record(true, false, clock_.now());  // open
  clock_.advance(1s);                          // half-open
  retry::CallGateParts parts;
  parts.breaker = breaker;
  auto call = first_request_answered(std::move(parts));
  EXPECT_TRUE(second_request_goes(*call));
  EXPECT_FALSE(breaker->admit(clock_.now()).allowed) << "closed before the probe call's outcome was known";
}

// Until a plugin's server has said anything the first call goes alone and
// the next wait for its reply (the opening). The first call's own second
// request comes after that reply: it waited the whole hold (a second).
TEST_F(CallServicesFurtherRequestTest, OfTheOpeningCall_TheSecondRequestLeavesOnceTheFirstReplied) {
  const auto opening = limit::plugin_pacing(Duration::zero());
  // The reply comes past the opening's spacing, well within its hold.
  const Duration reply_after = opening.opening_interval + 2ms;
  ASSERT_LT(reply_after, opening.opening_hold);
  retry::CallGateParts parts;
  parts.pacer = std::make_shared<limit::AdaptivePacer>(opening);
  auto call = first_request_answered(std::move(parts), reply_after);
  EXPECT_TRUE(second_request_goes(*call));
}

// A keyed limit (one budget per account) counts every request of a call in
// its key's budget. The second request had no keys: its admission failed
// ("admitted without its keys"), and every such call failed with it.
TEST_F(CallServicesFurtherRequestTest, UnderAKeyedLimit_TheSecondRequestIsCountedInTheCallsKey) {
  config::CallPolicy policy;
  config::LimitSpec per_account;
  per_account.rate = 2;
  per_account.per = 1s;
  per_account.key = "{{args.account}}";
  policy.limits = {per_account};
  policy.retry.attempts = 1;
  auto made = retry::make_call_gate(policy, "portal/op");
  ASSERT_TRUE(made) << made.error().to_string();
  Gate& gate = **made;
  const nlohmann::json alice{{"account", "alice"}}, bob{{"account", "bob"}};
  retry::CallState call(clock_.now());
  ASSERT_TRUE(gate.bind_keys(call, alice, {}));
  auto a = gate.admit(call, clock_.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Go>(a));
  auto& go = std::get<Gate::Go>(a);
  CallServices services(*client_, gate, clock_, 10s, secrets_, {}, &go.counted, {}, &call);
  ASSERT_EQ(services.http("p", get()).error, plugin_host::HttpFailure::kNone);
  // The reply's time: past the opening pace of the plugin's learned limit.
  clock_.advance(limit::plugin_pacing(Duration::zero()).opening_interval + 2ms);
  const auto second = services.http("p", get());
  ASSERT_EQ(second.error, plugin_host::HttpFailure::kNone) << second.message;
  EXPECT_EQ(server_.requests(), 2);
  // Alice's two units of this second are spent; bob's are not.
  auto next_of = [&](const nlohmann::json& who) {
    retry::CallState next(clock_.now());
    EXPECT_TRUE(gate.bind_keys(next, who, {}));
    auto n = gate.admit(next, clock_.now());
    auto* w = std::get_if<Gate::Wait>(&n);
    return w && w->until ? *w->until - clock_.now() : Duration::zero();
  };
  EXPECT_GE(next_of(alice), 900ms);
  EXPECT_LT(next_of(bob), 100ms);
}

}  // namespace
}  // namespace ratchet::pipeline
