// What a keyed limit costs against an unkeyed one, side by side in one run:
//   - time: one decision through a call gate (the keys named, the slot
//     reserved and started, the outcome recorded), unkeyed vs keyed with the
//     calls spread over 100,000 accounts (target: keyed within 2x);
//   - memory: resident set growth with 100,000 keys in one window against one
//     key (target: within 32 MiB), printed before the timings;
//   - memory with learned paces: 100,000 keys whose replies each state the
//     key's quota, so each key learns a pace of its own, against one key;
//   - memory in turns: 100,000 steps waiting for their turns on a budget
//     their keys share (retry/turn_queue.hpp), over 100,000 keys against
//     over one key (the same target), each measured in a process of its own.
//
//   build/default/bench/limiter/keyed_bench
#include <benchmark/benchmark.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "limit/adaptive_pacer.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"
#include "retry/call_gate.hpp"

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;
constexpr int kKeys = 100'000;
constexpr std::int64_t kT0 = 1'700'000'000'000'000;

config::LimitSpec spec(std::int64_t rate, std::optional<std::string> key) {
  config::LimitSpec l;
  l.rate = rate;
  l.per = 1s;
  l.key = std::move(key);
  return l;
}

// A gate with one sliding window: over the whole plugin, or per account.
std::shared_ptr<CallGate> gate(bool keyed) {
  CallGateParts parts;
  parts.retry.attempts = 1;
  if (keyed) {
    auto k = make_keyed_limit(spec(5, "{{args.account}}"), "bench/keyed", {});
    parts.keyed.push_back(std::move(*k));
    parts.key_salt = "salt";
  } else {
    auto l = limit::make_limiter(spec(1'000'000'000, std::nullopt), "bench/unkeyed");
    parts.limiters.push_back(std::move(*l));
  }
  return std::make_shared<CallGate>(std::move(parts));
}

std::vector<nlohmann::json> accounts(int n) {
  std::vector<nlohmann::json> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back({{"account", "account-" + std::to_string(i)}, {"title", "Heat"}});
  return out;
}

// One call's decision: keys, admit, record.
bool decide(CallGate& g, const nlohmann::json& args, std::int64_t now_us) {
  const TimePoint now = limit::from_micros(now_us);
  CallState step(now);
  if (!g.bind_keys(step, args, nlohmann::json::object())) return false;
  auto a = g.admit(step, now);
  auto* go = std::get_if<CallGate::Go>(&a);
  if (go == nullptr) return false;
  auto v = g.record(step, std::move(go->ticket), Outcome::ok(), {}, now);
  return std::holds_alternative<CallGate::Done>(v);
}

// Calls 10 us apart, accounts in turn: each account calls once a second,
// within its limit, and all 100,000 are live in the window.
void run(benchmark::State& state, bool keyed) {
  auto g = gate(keyed);
  const auto args = accounts(kKeys);
  std::int64_t now = kT0;
  std::size_t i = 0;
  std::int64_t refused = 0;
  for (auto _ : state) {
    now += 10;
    if (!decide(*g, args[i], now)) ++refused;
    if (++i == args.size()) i = 0;
  }
  state.counters["refused"] = static_cast<double>(refused);
}

void BM_Decision_Unkeyed(benchmark::State& state) { run(state, false); }
void BM_Decision_Keyed100kAccounts(benchmark::State& state) { run(state, true); }
BENCHMARK(BM_Decision_Unkeyed)->MinTime(1.0);
BENCHMARK(BM_Decision_Keyed100kAccounts)->MinTime(1.0);

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Resident memory of a keyed gate holding `keys` live keys.
long grown_kib(int keys) {
  const auto args = accounts(keys);
  const long before = resident_kib();
  auto g = gate(true);
  std::int64_t now = kT0;
  for (const auto& a : args) {
    now += 1;  // all inside one window: none can be dropped
    (void)decide(*g, a, now);
  }
  const long after = resident_kib();
  benchmark::DoNotOptimize(g);
  return after - before;
}

// Resident memory of a keyed gate whose `keys` keys each learned a pace of
// their own: every reply states the key's quota (X-RateLimit-*), as a
// server that limits per account or per API key says it.
long paced_kib(int keys) {
  const auto args = accounts(keys);
  const long before = resident_kib();
  CallGateParts parts;
  parts.retry.attempts = 1;
  parts.keyed.push_back(std::move(*make_keyed_limit(spec(5, "{{args.account}}"), "bench/paced", {})));
  parts.key_salt = "salt";
  // The plugin's own pace as with a limit declared (one a microsecond): the
  // keys' first calls go at once, not in an opening's slow start.
  parts.pacer = std::make_shared<limit::AdaptivePacer>(limit::plugin_pacing(1us));
  parts.key_pacers = make_key_pacers(200ms);
  CallGate g(std::move(parts));
  const std::vector<limit::HttpHeader> headers{
      {"X-RateLimit-Limit", "5"}, {"X-RateLimit-Remaining", "4"}, {"X-RateLimit-Reset", "1"}};
  std::int64_t now = kT0;
  std::int64_t paced = 0;
  for (const auto& a : args) {
    now += 10;
    const TimePoint t = limit::from_micros(now);
    CallState step(t);
    if (!g.bind_keys(step, a, nlohmann::json::object())) continue;
    auto admitted = g.admit(step, t);
    auto* go = std::get_if<CallGate::Go>(&admitted);
    if (go == nullptr) continue;
    (void)g.record(step, std::move(go->ticket), Outcome::ok(), headers, t);
    ++paced;
  }
  const long after = resident_kib();
  if (paced < keys) std::fprintf(stderr, "only %lld of the keys called\n", static_cast<long long>(paced));
  return after - before;
}

// Resident memory of kKeys steps waiting for their turns on a budget their
// keys share (100 a second), spread over `keys` keys of 5 a second each:
// the steps' own state is the same either way, the keys' is the difference.
long waiting_kib(int keys) {
  const auto args = accounts(keys);
  const long before = resident_kib();
  CallGateParts parts;
  parts.retry.attempts = 1;
  parts.limiters.push_back(std::move(*limit::make_limiter(spec(100, std::nullopt), "bench/shared")));
  parts.keyed.push_back(std::move(*make_keyed_limit(spec(5, "{{args.account}}"), "bench/turns", {})));
  parts.key_salt = "salt";
  parts.turns = std::make_shared<TurnQueue>(500ms);
  CallGate g(std::move(parts));
  std::vector<std::unique_ptr<CallState>> steps;
  steps.reserve(kKeys);
  const TimePoint now = limit::from_micros(kT0);
  std::int64_t waiting = 0;
  for (int i = 0; i < kKeys; ++i) {
    auto step = std::make_unique<CallState>(now);
    step->on_turn([](TimePoint) {});
    (void)g.bind_keys(*step, args[static_cast<std::size_t>(i % keys)], nlohmann::json::object());
    auto a = g.admit(*step, now);
    if (auto* w = std::get_if<CallGate::Wait>(&a); w != nullptr && w->turn) ++waiting;
    steps.push_back(std::move(step));
  }
  const long after = resident_kib();
  benchmark::DoNotOptimize(steps);
  if (waiting < kKeys / 2)
    std::fprintf(stderr, "only %lld of the steps wait in turn\n", static_cast<long long>(waiting));
  return after - before;
}

// `measure` run in a child process: memory freed by one run and reused by
// the next would hide what the second needs.
long in_own_process(long (*measure)(int), int keys) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    const long kib = measure(keys);
    (void)!::write(fds[1], &kib, sizeof kib);
    ::_exit(0);
  }
  ::close(fds[1]);
  long kib = -1;
  if (child < 0 || ::read(fds[0], &kib, sizeof kib) != static_cast<ssize_t>(sizeof kib)) kib = -1;
  ::close(fds[0]);
  if (child > 0) ::waitpid(child, nullptr, 0);
  return kib;
}

}  // namespace
}  // namespace ratchet::retry

int main(int argc, char** argv) {
  {
    using ratchet::retry::in_own_process;
    using ratchet::retry::waiting_kib;
    const long one = in_own_process(&waiting_kib, 1);
    const long many = in_own_process(&waiting_kib, ratchet::retry::kKeys);
    std::printf(
        "keyed memory in turns: %d steps waiting over %d keys +%.1f MiB, over 1 key +%.1f MiB: %.1f MiB "
        "apart "
        "(target <= 32 MiB)\n",
        ratchet::retry::kKeys, ratchet::retry::kKeys, static_cast<double>(many) / 1024,
        static_cast<double>(one) / 1024, static_cast<double>(many - one) / 1024);
  }
  {
    using ratchet::retry::in_own_process;
    using ratchet::retry::paced_kib;
    const long one = in_own_process(&paced_kib, 1);
    const long many = in_own_process(&paced_kib, ratchet::retry::kKeys);
    std::printf(
        "keyed memory with learned paces: %d keys each told its quota +%.1f MiB (%.0f bytes a key), 1 key "
        "+%.1f MiB: %.1f MiB apart (target <= 32 MiB)\n",
        ratchet::retry::kKeys, static_cast<double>(many) / 1024,
        static_cast<double>(many - one) * 1024 / ratchet::retry::kKeys, static_cast<double>(one) / 1024,
        static_cast<double>(many - one) / 1024);
  }
  const long one = ratchet::retry::grown_kib(1);
  const long many = ratchet::retry::grown_kib(ratchet::retry::kKeys);
  std::printf("keyed memory: %d keys +%.1f MiB, 1 key +%.1f MiB: %.1f MiB apart (target <= 32 MiB)\n",
              ratchet::retry::kKeys, static_cast<double>(many) / 1024, static_cast<double>(one) / 1024,
              static_cast<double>(many - one) / 1024);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
