#include "runtime/expired_leases.hpp"

namespace ratchet::runtime {

void publish_expired_leases(const EventBus& events, const std::vector<store::Expired>& expired) {
  for (const auto& e : expired) {
    JobEvent ev;
    ev.kind = e.dead ? JobEvent::Kind::kDead : JobEvent::Kind::kFailed;
    ev.id = e.id;
    ev.type = e.type;
    ev.attempt = e.attempt;
    ev.error = e.error;
    events.publish(ev);
  }
}

}  // namespace ratchet::runtime
