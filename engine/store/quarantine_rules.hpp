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
// The crashes of each lease owner are kept (table lease_crashes) for a day,
// so that the jobs of one dead process, whose leases run out at different
// moments, are judged together.
//
// Every backend applies these rules in its claims (SQLite:
// store/sqlite/quarantine.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "store/crash_record.hpp"

namespace ratchet::store {

// What an expired lease means for the job that held it.
struct ExpiryVerdict {
  bool counted = false;  // it ran alone: the crash is counted against it
  bool suspect = false;  // from now on it runs only in quarantine
  bool dead = false;     // counted max_lease_expiries times, or out of attempts
  int crashes_alone = 0;
  std::string why;  // for the error and timeline
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

// The verdict on job `id` when its owner's process recorded the jobs whose
// threads crashed it (non-empty crash.jobs): those are counted, and every
// other job of that process is cleared.
ExpiryVerdict judge_recorded_crash(const CrashEvidence& crash, std::int64_t id, const ExpiryFacts& facts);

}  // namespace ratchet::store
