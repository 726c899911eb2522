#include "runtime/clock_watch.hpp"

#include <spdlog/spdlog.h>

#include "common/duration.hpp"

namespace ratchet::runtime {
namespace {

Duration magnitude(Duration d) { return d < Duration::zero() ? -d : d; }

}  // namespace

Duration ClockWatch::check(const Clock& clock) {
  const auto* system = dynamic_cast<const SystemClock*>(&clock);
  if (system == nullptr) return {};
  const Duration lead = SystemClock::wall_base() - system->base();
  if (magnitude(lead - logged_) <= kTolerance) return lead;
  logged_ = lead;
  if (magnitude(lead) <= kTolerance) {
    spdlog::info("the wall clock agrees with ratchet's clock again");
    return lead;
  }
  spdlog::warn(
      "the wall clock is {} {} ratchet's clock: it stepped since the first ratchet process of this boot "
      "opened the database. Waits, leases and limits keep their length; times shown and requested "
      "(run_at) are on ratchet's clock until the machine restarts",
      common::format_duration(std::chrono::round<std::chrono::seconds>(magnitude(lead))),
      lead > Duration::zero() ? "ahead of" : "behind");
  return lead;
}

}  // namespace ratchet::runtime
