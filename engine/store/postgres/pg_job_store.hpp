// JobStore on a PostgreSQL session (tables in store/postgres/pg_schema.cpp).
//
// Claims are one statement: the due jobs in claim order, locked with
// FOR UPDATE SKIP LOCKED in a materialised CTE (so the planner cannot run
// the limit per row of the update), updated to running and returned. Two
// hosts claiming at once skip each other's rows, and a row another claim
// committed meanwhile is re-checked against the WHERE (READ COMMITTED), so
// a job is never claimed twice. Expired leases are taken over the same way.
// The quarantine rules (store/quarantine_rules.hpp) apply as on SQLite. The
// crash record is this host's file (PgStore::crash_record): a crash is
// pinned on its job when the claim that judges the expired lease runs on
// the crashed process's host; on another host it is judged as an outside
// kill.
//
// Failures throw PgFailure (store/postgres/session.hpp).
// Thread-safety: one thread at a time, as its Session.
#pragma once

#include <filesystem>
#include <utility>

#include "store/job_store.hpp"
#include "store/postgres/session.hpp"
#include "store/quarantine_rules.hpp"

namespace ratchet::store::pg {

class PgJobStore final : public JobStore {
 public:
  explicit PgJobStore(Session& session) : s_(session) {}

  Inserted insert(const NewJob& job, Micros now) override;
  ClaimResult claim(const ClaimRequest& req) override;
  std::vector<Renewed> renew(const std::string& owner,
                             const std::vector<std::pair<JobId, std::int64_t>>& claims, Micros lease_until,
                             Micros now) override;
  LeaseWrite checkpoint(const StepDone& step, Micros lease_until, Micros now) override;
  LeaseWrite complete(JobId id, const Fence& fence, const std::string& result_json, Micros now) override;
  // Every run in one statement (pg_run_writes.cpp).
  std::vector<LeaseWrite> write_runs(const std::vector<const RunWrite*>& runs, Micros now) override;
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

  // The crash record lease judgements read (store/crash_record.hpp); empty: none.
  void set_crash_record(std::filesystem::path record) { crash_record_ = std::move(record); }

  // Whether the statements since the last call made jobs claimable (new,
  // retried or released ones), which the store announces at commit; resets.
  bool take_new_work() { return std::exchange(new_work_, false); }

 private:
  // Reaps expired leases into `result` (pg_lease_reaping.cpp).
  void expire_leases(const ClaimRequest& req, ClaimResult& result);
  // As Quarantine::judge on SQLite (store/sqlite/quarantine.hpp).
  ExpiryVerdict judge(JobId id, const std::string& owner, int attempt, int max_attempts, int max_alone,
                      bool outage, Micros now);
  // The suspect `req` may claim now: none while another suspect runs.
  std::optional<JobId> next_suspect(const ClaimRequest& req);
  // The committed step outputs of each of `ids` (absent: none).
  std::map<JobId, std::map<std::string, nlohmann::json>> load_checkpoints(const std::vector<JobId>& ids);

  Session& s_;
  bool new_work_ = false;
  std::filesystem::path crash_record_;
};

}  // namespace ratchet::store::pg
