#include "store/quarantine_rules.hpp"

#include <algorithm>

namespace ratchet::store {

ExpiryVerdict judge_expiry(const ExpiryFacts& f) {
  ExpiryVerdict v;
  v.crashes_alone = f.crashes_alone;
  if (f.was_suspect || f.beside == 0) {
    v.counted = true;
    v.suspect = true;
    v.crashes_alone = f.crashes_alone + 1;
    v.dead = v.crashes_alone >= f.max_alone || f.attempt >= f.max_attempts;
    v.why = std::string(f.was_suspect ? "it ran as the one suspect on the database"
                                      : "it ran alone in its process") +
            " (" + std::to_string(v.crashes_alone) + " of " + std::to_string(f.max_alone) + ")";
  } else if (f.suspect_beside) {
    v.suspect = f.was_suspect;
    v.why = "a suspect ran beside it, so the crash is counted against that one";
  } else {
    v.suspect = true;
    v.why = "it ran beside " + std::to_string(f.beside) + " other job" + (f.beside == 1 ? "" : "s") +
            ", so it is a suspect and runs alone next";
  }
  return v;
}

ExpiryVerdict judge_recorded_crash(const CrashEvidence& crash, std::int64_t id, const ExpiryFacts& f) {
  ExpiryVerdict v;
  v.crashes_alone = f.crashes_alone;
  const std::string how = "its process crashed (" + signal_name(crash.signal) + ")";
  if (std::ranges::find(crash.jobs, id) != crash.jobs.end()) {
    v.counted = true;
    v.suspect = true;
    v.crashes_alone = f.crashes_alone + 1;
    v.dead = v.crashes_alone >= f.max_alone || f.attempt >= f.max_attempts;
    v.why = how + " in this job's step (" + std::to_string(v.crashes_alone) + " of " +
            std::to_string(f.max_alone) + ")";
  } else {
    v.suspect = f.was_suspect;
    v.why = how + " in job " + std::to_string(crash.jobs.front()) + ", not in this one";
  }
  return v;
}

bool expired_in_outage(const std::vector<std::pair<Micros, Micros>>& outages, Micros expired_at,
                       int expiries) {
  if (expiries >= kForgivenExpiries) return false;
  return std::ranges::any_of(outages,
                             [&](const auto& o) { return o.first <= expired_at && expired_at <= o.second; });
}

ExpiryVerdict judge_unrenewable(const ExpiryFacts& f) {
  ExpiryVerdict v;
  v.crashes_alone = f.crashes_alone;
  v.suspect = f.was_suspect;
  v.outage = true;
  v.why = "not counted against the job";
  return v;
}

std::string expiry_error(const std::string& owner, const ExpiryVerdict& v) {
  if (v.outage) {
    return "lease expired: worker " + owner +
           " could not renew it while the database was out of reach (a server restarting, a lock held "
           "past the lease, a full disk); " +
           v.why;
  }
  return "lease expired: worker " + owner + " stopped renewing it (crashed or hung); " + v.why;
}

}  // namespace ratchet::store
