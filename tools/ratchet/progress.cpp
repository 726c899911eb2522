#include "progress.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "text.hpp"

namespace ratchet::cli {

namespace {

struct Tally {
  std::int64_t terminal = 0, pending = 0, running = 0, dead = 0;
};

std::optional<Tally> tally(Engine& engine) {
  auto counts = engine.counts();
  if (!counts) return std::nullopt;
  Tally t;
  for (auto [state, n] : *counts) {
    if (is_terminal(state)) {
      t.terminal += n;
    } else {
      t.pending += n;
    }
    if (state == JobState::kRunning) t.running += n;
    if (state == JobState::kDead) t.dead += n;
  }
  return t;
}

}  // namespace

std::string parked_summary(const std::vector<PluginCallStats>& stats) {
  std::vector<const PluginCallStats*> parked;
  for (const auto& p : stats) {
    if (p.parked_now > 0) parked.push_back(&p);
  }
  if (parked.empty()) return "none";
  std::ranges::sort(parked, {}, [](const PluginCallStats* p) { return p->plugin; });
  std::string out;
  for (const auto* p : parked)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", p->plugin, p->parked_now);
  return out;
}

Progress::Progress(Engine& engine) : engine_(engine), start_(std::chrono::steady_clock::now()) {
  if (auto t = tally(engine_)) {
    terminal_at_start_ = t->terminal;
    dead_at_start_ = t->dead;
  }
}

std::optional<ProgressSample> Progress::sample() {
  auto t = tally(engine_);
  if (!t) return std::nullopt;
  ProgressSample s;
  // Purges by other processes can shrink the terminal count.
  s.done = std::max<std::int64_t>(0, t->terminal - terminal_at_start_);
  s.pending = t->pending;
  s.running = t->running;
  s.dead = std::max<std::int64_t>(0, t->dead - dead_at_start_);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  s.jobs_per_second = elapsed > 0 ? static_cast<double>(s.done) / elapsed : 0;

  auto eta = [&]() -> std::string {
    if (s.pending == 0) return std::string("0s");
    if (s.jobs_per_second <= 0) return std::string("-");
    return format_duration(std::chrono::duration_cast<Duration>(
        std::chrono::duration<double>(static_cast<double>(s.pending) / s.jobs_per_second)));
  };
  const auto stats = engine_.call_stats();
  std::uint64_t throttled = 0;
  for (const auto& p : stats) throttled += p.throttled;
  s.line =
      fmt::format("{}/{} done  {:.1f} jobs/s  ETA {}  running {}  parked: {}  429s: {}", s.done,
                  s.done + s.pending, s.jobs_per_second, eta(), s.running, parked_summary(stats), throttled);
  if (s.dead > 0) s.line += fmt::format("  dead: {}", s.dead);
  return s;
}

}  // namespace ratchet::cli
