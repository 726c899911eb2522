// The quarantine rules (store/quarantine_rules.hpp) on SQLite: the crashes
// of each lease owner in table lease_crashes, suspicion in the jobs table.
//
// Ownership: borrows the connection, which must outlive it. Thread-safety:
// one thread at a time, inside the caller's transaction (as JobStore).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/job_store.hpp"
#include "store/quarantine_rules.hpp"

namespace ratchet::store {

class Quarantine {
 public:
  explicit Quarantine(SQLite::Database& db);
  ~Quarantine();
  Quarantine(const Quarantine&) = delete;
  Quarantine& operator=(const Quarantine&) = delete;

  // Judges the expired lease of job `id` held by `owner` and records the
  // crash. `outage`: the lease ran out while the database was out of reach
  // (ClaimRequest::outages), so unless the owner recorded a crash signal it
  // is no crash and nothing is recorded. Call before the job's row is changed.
  ExpiryVerdict judge(JobId id, const std::string& owner, int attempt, int max_attempts, int max_alone,
                      bool outage, Micros now);
  // Writes the verdict's suspicion to the job (after the expiry update).
  void apply(JobId id, const ExpiryVerdict& verdict);
  // The suspect `req` may claim now, with its resume flag: none while another
  // suspect runs anywhere on the database. Least often counted first, so
  // outside kills that happen to land while suspects run are spread over
  // them rather than charged to one again and again; a job that crashes its
  // process with a signal is named by the crash record anyway.
  std::optional<std::pair<JobId, bool>> next_suspect(const ClaimRequest& req);
  // The job was retried by hand: it starts clean.
  void forgive(JobId id);

 private:
  SQLite::Statement& stmt(const char* sql);

  SQLite::Database& db_;
  std::filesystem::path crash_record_;  // empty: in memory, no record
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache_;
};

}  // namespace ratchet::store
