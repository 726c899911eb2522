#include "store/sqlite/quarantine.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "store/crash_record.hpp"
#include "store/sqlite/statement_use.hpp"

namespace ratchet::store {
namespace {

constexpr Micros kCrashMemory = 24LL * 3600 * 1'000'000;  // how long a lease owner's crashes are kept

std::string json_array(const std::vector<std::string>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : v) a.push_back(s);
  return a.dump();
}

}  // namespace

Quarantine::Quarantine(SQLite::Database& db) : db_(db), crash_record_(crash_record_path(db.getFilename())) {}
Quarantine::~Quarantine() = default;

SQLite::Statement& Quarantine::stmt(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.emplace(sql, std::make_unique<SQLite::Statement>(db_, sql)).first;
  return *it->second;
}

ExpiryVerdict Quarantine::judge(JobId id, const std::string& owner, int attempt, int max_attempts,
                                int max_alone, bool outage, Micros now) {
  bool was_suspect = false;
  int crashes_alone = 0;
  {
    Use q(stmt("SELECT suspect, crashes_alone FROM jobs WHERE id = ?"));
    q->bind(1, id);
    if (q->executeStep()) {
      was_suspect = q->getColumn(0).getInt() != 0;
      crashes_alone = q->getColumn(1).getInt();
    }
  }
  // The owner's other jobs: those still held (their leases run out later)
  // and those already judged.
  int beside = 0;
  bool suspect_beside = false;
  {
    Use q(
        stmt("SELECT COUNT(*), COALESCE(MAX(suspect), 0) FROM jobs INDEXED BY jobs_leases "
             "WHERE state = 'running' AND lease_owner = ? AND id <> ?"));
    q->bind(1, owner);
    q->bind(2, id);
    q->executeStep();
    beside += q->getColumn(0).getInt();
    suspect_beside = q->getColumn(1).getInt() != 0;
  }
  {
    Use q(stmt(
        "SELECT COUNT(*), COALESCE(MAX(suspect), 0) FROM lease_crashes WHERE owner = ? AND job_id <> ?"));
    q->bind(1, owner);
    q->bind(2, id);
    q->executeStep();
    beside += q->getColumn(0).getInt();
    suspect_beside = suspect_beside || q->getColumn(1).getInt() != 0;
  }
  // The process named the job whose thread crashed it: that job alone is
  // counted, whatever ran beside it.
  auto crash = find_crash(crash_record_, owner);
  const bool recorded = crash && !crash->jobs.empty();
  const ExpiryFacts facts{was_suspect, crashes_alone, beside,   suspect_beside,
                          attempt,     max_attempts,  max_alone};
  if (outage && !recorded) return judge_unrenewable(facts);
  {
    Use d(stmt("DELETE FROM lease_crashes WHERE at_us < ?"));
    d->bind(1, now - kCrashMemory);
    d->exec();
    Use i(stmt("INSERT INTO lease_crashes (owner, job_id, suspect, at_us) VALUES (?, ?, ?, ?)"));
    i->bind(1, owner);
    i->bind(2, id);
    i->bind(3, was_suspect ? 1 : 0);
    i->bind(4, now);
    i->exec();
  }
  if (recorded) return judge_recorded_crash(*crash, id, facts);
  return judge_expiry(facts);
}

void Quarantine::apply(JobId id, const ExpiryVerdict& v) {
  // resume = 1 keeps the attempt: an expiry not counted against the job did
  // not use it up.
  Use u(stmt("UPDATE jobs SET suspect = ?, crashes_alone = ?, resume = ? WHERE id = ?"));
  u->bind(1, v.suspect ? 1 : 0);
  u->bind(2, v.crashes_alone);
  u->bind(3, v.counted ? 0 : 1);
  u->bind(4, id);
  u->exec();
}

std::optional<std::pair<JobId, bool>> Quarantine::next_suspect(const ClaimRequest& req) {
  if (req.limit <= 0) return std::nullopt;
  {
    Use q(stmt("SELECT 1 FROM jobs INDEXED BY jobs_leases WHERE state = 'running' AND suspect = 1 LIMIT 1"));
    if (q->executeStep()) return std::nullopt;
  }
  Use q(
      stmt("SELECT id, resume FROM jobs INDEXED BY jobs_suspects WHERE suspect = 1 "
           "AND state IN ('scheduled', 'available', 'retryable') AND run_at_us <= ?1 "
           "AND type IN (SELECT value FROM json_each(?2)) "
           "AND (?3 IS NULL OR queue IN (SELECT value FROM json_each(?3))) "
           "ORDER BY crashes_alone, run_at_us, id LIMIT 1"));
  q->bind(1, req.now);
  q->bind(2, json_array(req.types));
  if (req.queues.empty()) {
    q->bind(3);
  } else {
    q->bind(3, json_array(req.queues));
  }
  if (!q->executeStep()) return std::nullopt;
  return std::make_pair(q->getColumn(0).getInt64(), q->getColumn(1).getInt() != 0);
}

void Quarantine::forgive(JobId id) {
  Use u(stmt("UPDATE jobs SET suspect = 0, crashes_alone = 0 WHERE id = ?"));
  u->bind(1, id);
  u->exec();
}

}  // namespace ratchet::store
