#include "progress.hpp"

#include <fmt/format.h>

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
  std::uint64_t throttled = 0;
  std::string parks;
  for (const auto& p : engine_.call_stats()) {
    throttled += p.throttled;
    if (p.parks > 0) parks += fmt::format("{}{} {}", parks.empty() ? "" : ", ", p.plugin, p.parks);
  }
  s.line = fmt::format("{}/{} done  {:.1f} jobs/s  ETA {}  running {}  parks: {}  429s: {}", s.done,
                       s.done + s.pending, s.jobs_per_second, eta(), s.running,
                       parks.empty() ? "none" : parks, throttled);
  if (s.dead > 0) s.line += fmt::format("  dead: {}", s.dead);
  return s;
}

}  // namespace ratchet::cli
