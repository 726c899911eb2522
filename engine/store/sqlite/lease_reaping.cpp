// Lease reaping on SQLite: jobs whose lease ran out unrenewed are made
// retryable or dead, inside the claim's transaction and before any job is
// taken.
#include <string>
#include <vector>

#include "store/sqlite/quarantine.hpp"
#include "store/sqlite/sqlite_job_store.hpp"
#include "store/sqlite/statement_use.hpp"

namespace ratchet::store {

void SqliteJobStore::expire_leases(const ClaimRequest& req, ClaimResult& result) {
  // Jobs whose worker vanished: the quarantine judges whom the crash is
  // counted against (a job that keeps crashing its process ends dead instead
  // of taking every worker down; the jobs beside it do not).
  struct Reaped {
    JobId id;
    std::string type;
    int attempt;
    int max_attempts;
    Micros expired_at;
    int expiries;
    std::string owner;
  };
  std::vector<Reaped> expired;
  {
    Use q(stmt(
        "SELECT id, type, attempt, max_attempts, lease_expires_us, lease_expiries, lease_owner FROM jobs "
        "INDEXED BY jobs_leases WHERE state = 'running' AND lease_expires_us <= ? ORDER BY "
        "lease_expires_us LIMIT 64"));
    q->bind(1, req.now);
    while (q->executeStep()) {
      expired.push_back({q->getColumn(0).getInt64(), q->getColumn(1).getString(), q->getColumn(2).getInt(),
                         q->getColumn(3).getInt(), q->getColumn(4).getInt64(), q->getColumn(5).getInt(),
                         q->getColumn(6).isNull() ? std::string() : q->getColumn(6).getString()});
    }
  }
  for (const auto& [id, type, attempt, max_attempts, expired_at, expiries, owner] : expired) {
    const ExpiryVerdict verdict =
        quarantine_->judge(id, owner, attempt, max_attempts, req.max_lease_expiries,
                           expired_in_outage(req.outages, expired_at, expiries), req.now);
    const bool dead = verdict.dead;
    const std::string error = expiry_error(owner, verdict);
    Use u(stmt(
        "UPDATE jobs SET state = ?, lease_owner = NULL, lease_expires_us = NULL, "
        "lease_expiries = lease_expiries + 1, resume = 0, run_at_us = ?, last_error = ?, updated_us = ?, "
        "finished_us = ? WHERE id = ?"));
    u->bind(1, dead ? "dead" : "retryable");
    u->bind(2, req.now);
    u->bind(3, error);
    u->bind(4, req.now);
    if (dead) {
      u->bind(5, req.now);
    } else {
      u->bind(5);
    }
    u->bind(6, id);
    u->exec();
    quarantine_->apply(id, verdict);
    Use e(stmt("INSERT INTO job_errors (job_id, attempt, step, error, at_us) VALUES (?, ?, NULL, ?, ?)"));
    e->bind(1, id);
    e->bind(2, attempt);
    e->bind(3, error);
    e->bind(4, req.now);
    e->exec();
    add_timeline(id, req.now, "lease_expired", error);
    result.expired.push_back({id, type, attempt, dead, error});
  }
}

}  // namespace ratchet::store
