#include <chrono>

#include "store/job_store.hpp"

namespace ratchet::store {

Micros to_micros(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

TimePoint from_micros(Micros us) {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::microseconds(us)));
}

}  // namespace ratchet::store
