// JobStore on one SQLite connection: every SQL statement on jobs, steps,
// attempt errors and the timeline (schema in store/sqlite/schema.cpp).
// SQLite exceptions propagate; the SqliteStore turns them into Error values.
//
// Ownership: borrows the connection, which must outlive it. Thread-safety:
// one thread at a time (it caches prepared statements).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/job_store.hpp"

namespace ratchet::store {

class Quarantine;

class SqliteJobStore final : public JobStore {
 public:
  explicit SqliteJobStore(SQLite::Database& db);
  ~SqliteJobStore() override;

  Inserted insert(const NewJob& job, Micros now) override;
  ClaimResult claim(const ClaimRequest& req) override;
  std::vector<Renewed> renew(const std::string& owner,
                             const std::vector<std::pair<JobId, std::int64_t>>& claims, Micros lease_until,
                             Micros now) override;
  LeaseWrite checkpoint(const StepDone& step, Micros lease_until, Micros now) override;
  LeaseWrite complete(JobId id, const Fence& fence, const std::string& result_json, Micros now) override;
  LeaseWrite fail_attempt(const AttemptFailure& failure) override;
  LeaseWrite park(JobId id, const Fence& fence, Micros until, const std::string& reason, Micros now) override;
  bool resume_parked(JobId id, int attempt, Micros now) override;
  std::int64_t disown_parked(const std::string& owner) override;
  std::int64_t extend_parked(const std::vector<std::pair<JobId, int>>& jobs, Micros until,
                             Micros now) override;
  LeaseWrite release(JobId id, const Fence& fence, const std::string& reason, Micros now) override;
  LeaseWrite finish_cancelled(JobId id, const Fence& fence, Micros now) override;
  std::optional<JobState> cancel(JobId id, Micros now) override;
  std::optional<JobState> retry(JobId id, Micros now, int max_attempts_floor) override;
  std::int64_t purge(Micros finished_before, int limit) override;
  std::optional<JobRecord> get(JobId id) override;
  std::vector<JobRecord> list(const JobFilter& filter) override;
  std::vector<std::pair<JobState, std::int64_t>> counts() override;
  std::vector<MinuteActivity> activity(Micros since) override;
  void put_report(const std::string& worker, Micros now, const std::string& report,
                  Micros forget_before) override;
  std::vector<StoredReport> reports(Micros since) override;
  std::int64_t pending(const std::vector<std::string>& types,
                       const std::vector<std::string>& queues) override;
  void add_timeline(JobId id, Micros at, const std::string& kind, const std::string& detail) override;
  std::int64_t machine_clock_base(const std::string& boot_id, std::int64_t wall_base_ns) override;
  std::optional<std::int64_t> stored_clock_base(const std::string& boot_id) override;

 private:
  SQLite::Statement& stmt(const char* sql);  // prepared once per connection
  // Reaps expired leases into `result` (lease_reaping.cpp).
  void expire_leases(const ClaimRequest& req, ClaimResult& result);
  std::vector<std::int64_t> pending_priorities();
  // Due jobs in claim order: by priority, resumed before fresh, then by time;
  // each with whether it is a resumed one.
  std::vector<std::pair<JobId, bool>> due_ids(const ClaimRequest& req,
                                              const std::vector<std::int64_t>& priorities);
  std::optional<Micros> next_run_at(const ClaimRequest& req, const std::vector<std::int64_t>& priorities);
  std::map<std::string, nlohmann::json> load_checkpoints(JobId id);

  SQLite::Database& db_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache_;
  std::unique_ptr<Quarantine> quarantine_;
};

}  // namespace ratchet::store
