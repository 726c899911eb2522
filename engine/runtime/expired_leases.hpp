// Tells subscribers about the jobs whose leases a claim reaped: the store
// judges each expired lease inside the claim's transaction (the job is
// retryable or dead), and the dispatcher reports them once that committed.
//
// Thread-safety: as EventBus::publish.
#pragma once

#include <vector>

#include "runtime/event_bus.hpp"
#include "store/job_store.hpp"

namespace ratchet::runtime {

void publish_expired_leases(const EventBus& events, const std::vector<store::Expired>& expired);

}  // namespace ratchet::runtime
