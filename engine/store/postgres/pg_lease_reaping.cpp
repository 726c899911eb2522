// Lease reaping on PostgreSQL: jobs whose worker vanished (their lease ran
// out unrenewed) are judged by the quarantine rules and made retryable or
// dead. It runs inside the claim's transaction, before any job is taken.
#include <string>

#include "store/postgres/pg_job_store.hpp"

namespace ratchet::store::pg {
namespace {

constexpr Micros kCrashMemory = 24LL * 3600 * 1'000'000;  // how long a lease owner's crashes are kept

}  // namespace

ExpiryVerdict PgJobStore::judge(JobId id, const std::string& owner, int attempt, int max_attempts,
                                int max_alone, bool outage, Micros now) {
  Rows self = s_.run("SELECT suspect, crashes_alone FROM ratchet_jobs WHERE id = $1", {p(id)});
  const bool was_suspect = self.size() == 1 && i64(self, 0, 0) != 0;
  const int crashes_alone = self.size() == 1 ? static_cast<int>(i64(self, 0, 1)) : 0;
  // The owner's other jobs: those still held (their leases run out later)
  // and those already judged.
  Rows held = s_.run(
      "SELECT COUNT(*), COALESCE(MAX(suspect), 0) FROM ratchet_jobs WHERE state = 'running' AND "
      "lease_owner = $1 AND id <> $2",
      {p(owner), p(id)});
  Rows judged = s_.run(
      "SELECT COUNT(*), COALESCE(MAX(suspect), 0) FROM ratchet_lease_crashes WHERE owner = $1 AND job_id <> "
      "$2",
      {p(owner), p(id)});
  const std::int64_t beside = i64(held, 0, 0) + i64(judged, 0, 0);
  const bool suspect_beside = i64(held, 0, 1) != 0 || i64(judged, 0, 1) != 0;
  // The process named the job whose thread crashed it: that job alone is
  // counted, whatever ran beside it.
  auto crash = find_crash(crash_record_, owner);
  const bool recorded = crash && !crash->jobs.empty();
  const ExpiryFacts facts{was_suspect, crashes_alone, beside,   suspect_beside,
                          attempt,     max_attempts,  max_alone};
  if (outage && !recorded) return judge_unrenewable(facts);
  s_.run("DELETE FROM ratchet_lease_crashes WHERE at_us < $1", {p(now - kCrashMemory)});
  s_.run("INSERT INTO ratchet_lease_crashes (owner, job_id, suspect, at_us) VALUES ($1, $2, $3, $4)",
         {p(owner), p(id), p(std::int64_t{was_suspect ? 1 : 0}), p(now)});
  if (recorded) return judge_recorded_crash(*crash, id, facts);
  return judge_expiry(facts);
}

void PgJobStore::expire_leases(const ClaimRequest& req, ClaimResult& result) {
  // Jobs whose worker vanished, locked so that two hosts do not judge one twice.
  Rows q = s_.run(
      "SELECT id, type, attempt, max_attempts, lease_owner, lease_expires_us, lease_expiries FROM "
      "ratchet_jobs "
      "WHERE state = 'running' AND lease_expires_us <= $1 ORDER BY lease_expires_us LIMIT 64 FOR UPDATE SKIP "
      "LOCKED",
      {p(req.now)});
  for (int i = 0; i < q.size(); ++i) {
    const JobId id = i64(q, i, 0);
    const std::string type = text(q, i, 1);
    const int attempt = static_cast<int>(i64(q, i, 2));
    const int max_attempts = static_cast<int>(i64(q, i, 3));
    const std::string owner = text(q, i, 4);
    const ExpiryVerdict verdict =
        judge(id, owner, attempt, max_attempts, req.max_lease_expiries,
              expired_in_outage(req.outages, i64(q, i, 5), static_cast<int>(i64(q, i, 6))), req.now);
    const std::string error = expiry_error(owner, verdict);
    // resume = 1 keeps the attempt: an expiry not counted against the job did not use it up.
    s_.run(
        "UPDATE ratchet_jobs SET state = $2, lease_owner = NULL, lease_expires_us = NULL, "
        "lease_expiries = lease_expiries + 1, run_at_us = $3, last_error = $4, updated_us = $3, "
        "finished_us = $5, suspect = $6, crashes_alone = $7, resume = $8 WHERE id = $1",
        {p(id), p(verdict.dead ? "dead" : "retryable"), p(req.now), p(error),
         verdict.dead ? p(req.now) : null(), p(std::int64_t{verdict.suspect ? 1 : 0}),
         p(std::int64_t{verdict.crashes_alone}), p(std::int64_t{verdict.counted ? 0 : 1})});
    s_.run(
        "INSERT INTO ratchet_job_errors (job_id, attempt, step, error, at_us) VALUES ($1, $2, NULL, $3, $4)",
        {p(id), p(std::int64_t{attempt}), p(error), p(req.now)});
    add_timeline(id, req.now, "lease_expired", error);
    result.expired.push_back({id, type, attempt, verdict.dead, error});
    // Claimable again, perhaps only by engines working its queue elsewhere:
    // they hear of it now, not at their next poll.
    if (!verdict.dead) new_work_ = true;
  }
}

}  // namespace ratchet::store::pg
