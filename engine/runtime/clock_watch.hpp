// Notices when the wall clock has stepped away from the engine's clock
// (a SystemClock keeps its own timeline; ratchet/clock.hpp) and says so in
// the log once per step, since times shown and requested are then on a
// clock that differs from the machine's.
#pragma once

#include <chrono>

#include "ratchet/clock.hpp"

namespace ratchet::runtime {

class ClockWatch {
 public:
  // Differences up to this are noise of reading two clocks, not a step.
  static constexpr auto kTolerance = std::chrono::seconds(1);

  // Compares `clock` (when it is a SystemClock) with the wall clock; logs a
  // step not logged before. Returns the wall clock's lead over `clock`.
  Duration check(const Clock& clock);

 private:
  Duration logged_{};
};

}  // namespace ratchet::runtime
