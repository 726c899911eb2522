#include <array>

#include "ratchet/job.hpp"

namespace ratchet {
namespace {

constexpr std::array<std::pair<JobState, std::string_view>, 7> kNames{{
    {JobState::kScheduled, "scheduled"},
    {JobState::kAvailable, "available"},
    {JobState::kRunning, "running"},
    {JobState::kRetryable, "retryable"},
    {JobState::kCompleted, "completed"},
    {JobState::kDead, "dead"},
    {JobState::kCancelled, "cancelled"},
}};

}  // namespace

std::string_view to_string(JobState state) noexcept {
  for (const auto& [s, name] : kNames) {
    if (s == state) return name;
  }
  return "unknown";
}

std::optional<JobState> parse_job_state(std::string_view name) noexcept {
  for (const auto& [s, n] : kNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool is_terminal(JobState state) noexcept {
  return state == JobState::kCompleted || state == JobState::kDead || state == JobState::kCancelled;
}

}  // namespace ratchet
