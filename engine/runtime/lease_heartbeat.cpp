#include "runtime/lease_heartbeat.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <vector>

namespace ratchet::runtime {

LeaseHeartbeat::LeaseHeartbeat(const SchedulerOptions& options, const ExecutorEnv& env, HeldJobs& held)
    : options_(options), env_(env), held_(held) {}

void LeaseHeartbeat::start() {
  thread_ = std::jthread([this](std::stop_token st) { heartbeat_loop(st); });
}

void LeaseHeartbeat::stop() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void LeaseHeartbeat::heartbeat_loop(std::stop_token stop) {
  const Clock& clock = *env_.run.clock;
  while (clock.wait_until(clock.now() + options_.heartbeat, stop)) {
    clock_watch_.check(clock);
    std::vector<ClaimKey> claims;
    std::uint64_t asked_through = 0;
    // The renewal protects every lease it renews: it may wait for a locked
    // database as long as the longest of them lasts.
    TimePoint longest{};
    {
      std::lock_guard lock(held_.mu);
      asked_through = held_.claim_seq;
      for (const auto& [key, run] : held_.active) {
        claims.push_back(key);
        longest = std::max(longest, run->lease_until());
      }
      for (const auto& [key, until] : held_.finishing) {
        claims.push_back(key);
        longest = std::max(longest, until);
      }
      for (const auto& j : held_.ready) {
        claims.emplace_back(j.id, j.token);
        longest = std::max(longest, store::from_micros(j.lease_until));
      }
    }
    if (claims.empty()) continue;
    store::Micros renewed_to = 0;
    auto held = env_.run.store->write_under_lease(longest, [&](store::JobStore& s) {
      // Read when the write runs: a renewal that waited for a lock does not
      // revive a lease that expired meanwhile.
      const TimePoint now = clock.now();
      renewed_to = store::to_micros(now + env_.run.lease);
      return s.renew(env_.run.owner, claims, renewed_to, store::to_micros(now));
    });
    if (!held) {
      spdlog::error("renewing leases failed: {}", held.error().to_string());
      continue;
    }
    // Claims the fence refused (lost, or older than another claim of the
    // same job) are absent.
    std::map<ClaimKey, bool> still;
    for (const auto& r : *held) still[{r.id, r.token}] = r.cancel_requested;
    std::lock_guard lock(held_.mu);
    // A job claimed while the renewal ran (perhaps one whose earlier run was
    // ending then) was not asked about: its absence says nothing.
    for (const auto& [key, run] : held_.active) {
      if (run->job().claim_seq > asked_through) continue;
      auto it = still.find(key);
      if (it == still.end()) {
        run->mark_lost();
        continue;
      }
      run->lease_renewed(renewed_to);
      if (it->second) run->request_cancel();
    }
    for (auto& j : held_.ready) {
      if (j.claim_seq <= asked_through && still.contains({j.id, j.token})) j.lease_until = renewed_to;
    }
    std::erase_if(held_.ready, [&](const store::ClaimedJob& j) {
      return j.claim_seq <= asked_through && !still.contains({j.id, j.token});
    });
  }
}

}  // namespace ratchet::runtime
