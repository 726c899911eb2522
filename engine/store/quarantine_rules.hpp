// Finding the job that crashes its process, so that only it ends dead.
//
// A lease expires when the process holding the job died (a crash, an OOM
// kill, a forced redeploy) or stalled. Every job it held then expires, but at
// most one of them caused it, so an expiry is counted against a job only when
// the job ran alone:
//
//  - alone in its process: the process held no other job when it died; or
//  - as the one suspect running on the database (in quarantine).
//
// When the process recorded which job's thread it crashed on (a crash
// signal: store/crash_record.hpp), that job is counted, wherever it ran, and
// the jobs beside it are cleared. Otherwise (SIGKILL, OOM kill, power loss,
// a stall) the rules below apply.
//
// A job whose lease expired while it ran beside other jobs becomes a
// *suspect*, without using up its attempt. Suspects are claimed one at a time
// across every process sharing the database (the others wait, normal jobs
// keep running beside it). A crash while a suspect runs is counted against
// that suspect; the jobs beside it stay clean. A counted expiry uses up the
// attempt, and a job whose lease expired while it ran alone `max_lease_expiries`
// times (default 3) ends dead. A suspect stays one until it ends (completed,
// dead or cancelled) or is retried by hand, since the crash may lie in a step
// after a park.
//
// A lease can also run out while its process lives on: the database could
// not be reached to renew it (a server restarting or failing over, a lock
// held past the lease, a full disk). Such an expiry is no crash, and is not
// judged one when the process that finds it could not reach the database
// either when the lease ran out (ClaimRequest::outages): the job keeps its
// attempt and its standing, and nothing is recorded against its owner. A
// stalled process (SIGSTOP, a machine suspended) made no attempt that
// failed, so its expiries are judged by the rules above: a job that stalls
// its process cannot pass for an outage, and one that cuts its own process
// off from the database is forgiven only kForgivenExpiries times. What it
// costs: a crash that comes
// while the database is out of reach, or within a heartbeat of its return,
// is not counted against anyone. A host cut off alone from a database that
// others still reach looks, to them, like a process that stalled.
//
// The crashes of each lease owner are kept (table lease_crashes) for a day,
// so that the jobs of one dead process, whose leases run out at different
// moments, are judged together.
//
// Every backend applies these rules in its claims (SQLite:
// store/sqlite/quarantine.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/crash_record.hpp"

namespace ratchet::store {

using Micros = std::int64_t;  // as job_store.hpp

// What an expired lease means for the job that held it.
struct ExpiryVerdict {
  bool counted = false;  // it ran alone: the crash is counted against it
  bool suspect = false;  // from now on it runs only in quarantine
  bool dead = false;     // counted max_lease_expiries times, or out of attempts
  int crashes_alone = 0;
  std::string why;      // for the error and timeline
  bool outage = false;  // the lease ran out while the database was out of reach
};

// What a backend knows of an expired lease, read inside its claim.
struct ExpiryFacts {
  bool was_suspect = false;     // the job ran as the one suspect
  int crashes_alone = 0;        // expiries counted against it so far
  std::int64_t beside = 0;      // the owner's other jobs, held or already judged
  bool suspect_beside = false;  // one of them was a suspect
  int attempt = 0;
  int max_attempts = 0;
  int max_alone = 3;  // ClaimRequest::max_lease_expiries
};

// The rules above for a process that left no crash record naming a job.
ExpiryVerdict judge_expiry(const ExpiryFacts& facts);

// Whether a lease that ran out at `expired_at` fell in one of `outages`,
// for a job whose leases expired `expiries` times before: at most
// kForgivenExpiries of them pass for outages, so that a job that itself
// cuts its process off from the database (its descriptors used up, say)
// cannot run, expire and be forgiven for ever.
inline constexpr int kForgivenExpiries = 10;
bool expired_in_outage(const std::vector<std::pair<Micros, Micros>>& outages, Micros expired_at,
                       int expiries);

// The verdict on a lease that ran out while the database was out of reach:
// nothing counted, the job's standing as it was.
ExpiryVerdict judge_unrenewable(const ExpiryFacts& facts);

// The error and timeline text of an expired lease of `owner`.
std::string expiry_error(const std::string& owner, const ExpiryVerdict& verdict);

// The verdict on job `id` when its owner's process recorded the jobs whose
// threads crashed it (non-empty crash.jobs): those are counted, and every
// other job of that process is cleared.
ExpiryVerdict judge_recorded_crash(const CrashEvidence& crash, std::int64_t id, const ExpiryFacts& facts);

}  // namespace ratchet::store
