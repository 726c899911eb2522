// How one engine's scheduler runs: its worker count, its heartbeat and poll
// periods, the queues it works and when an expired lease makes a job dead.
//
// Thread-safety: a plain value, read-only once the scheduler has it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ratchet/clock.hpp"

namespace ratchet::runtime {

struct SchedulerOptions {
  int workers = 8;
  Duration heartbeat = std::chrono::seconds(10);
  Duration poll_interval = std::chrono::milliseconds(200);
  std::vector<std::string> queues;
  int max_lease_expiries = 3;
};

}  // namespace ratchet::runtime
