#include "store/postgres/pg_job_store.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "common/duration.hpp"
#include "store/postgres/arrays.hpp"
#include "store/stored_json.hpp"

namespace ratchet::store::pg {
namespace {

#define RATCHET_JOB_COLUMNS                                                                             \
  "id, type, queue, args, state, priority, run_at_us, attempt, max_attempts, unique_key, lease_owner, " \
  "lease_expires_us, lease_expiries, cancel_requested, result, last_error, created_us, updated_us, "    \
  "finished_us"

nlohmann::json json_or_null(const Rows& r, int row, int col, std::string* problem = nullptr) {
  if (r.is_null(row, col)) return nullptr;
  const std::string_view t = r.get_text(row, col);
  if (std::string why = stored_json_problem(t); !why.empty()) {
    if (problem != nullptr) *problem = why;
    return "(not loaded: " + why + ")";
  }
  return nlohmann::json::parse(t, nullptr, /*allow_exceptions=*/false);
}

std::optional<TimePoint> time_or_none(const Rows& r, int row, int col) {
  auto v = opt_i64(r, row, col);
  if (!v) return std::nullopt;
  return from_micros(*v);
}

JobRecord read_job(const Rows& r, int i) {
  JobRecord j;
  j.id = i64(r, i, 0);
  j.type = text(r, i, 1);
  j.queue = text(r, i, 2);
  j.args = json_or_null(r, i, 3);
  j.state = parse_job_state(r.get_text(i, 4)).value_or(JobState::kDead);
  j.priority = static_cast<int>(i64(r, i, 5));
  j.run_at = from_micros(i64(r, i, 6));
  j.attempt = static_cast<int>(i64(r, i, 7));
  j.max_attempts = static_cast<int>(i64(r, i, 8));
  j.unique_key = text(r, i, 9);
  j.lease_owner = text(r, i, 10);
  j.lease_expires_at = time_or_none(r, i, 11);
  j.lease_expiries = static_cast<int>(i64(r, i, 12));
  j.cancel_requested = i64(r, i, 13) != 0;
  j.result = json_or_null(r, i, 14);
  j.last_error = text(r, i, 15);
  j.created_at = from_micros(i64(r, i, 16));
  j.updated_at = from_micros(i64(r, i, 17));
  j.finished_at = time_or_none(r, i, 18);
  return j;
}

std::string json_array(const std::vector<std::string>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : v) a.push_back(s);
  return a.dump();
}

Param queues_param(const std::vector<std::string>& queues) {
  return queues.empty() ? null() : p(json_array(queues));
}

// The fence of every write a run makes (store/job_store.hpp): the job is
// running under exactly this claim, and its lease has not expired. Binds
// $1 id, $2 owner, $3 token, $4 now.
#define RATCHET_FENCED \
  " WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND state = 'running' AND lease_expires_us > $4"

Params fence_params(JobId id, const Fence& fence, Micros now) {
  return {p(id), p(fence.owner), p(fence.token), p(now)};
}

}  // namespace

Inserted PgJobStore::insert(const NewJob& job, Micros now) {
  const Param key = job.unique_key.empty() ? null() : p(job.unique_key);
  Rows r = s_.run(
      "INSERT INTO ratchet_jobs (type, queue, args, state, priority, run_at_us, max_attempts, unique_key, "
      "created_us, updated_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) "
      "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', "
      "'running', 'retryable') DO NOTHING RETURNING id",
      {p(job.type), p(job.queue), p(job.args_json), p(job.run_at > now ? "scheduled" : "available"),
       p(std::int64_t{job.priority}), p(job.run_at), p(std::int64_t{job.max_attempts}), key, p(now)});
  if (r.size() == 1) {
    new_work_ = true;
    return {i64(r, 0, 0), false};
  }
  Rows held = s_.run(
      "SELECT id FROM ratchet_jobs WHERE unique_key = $1 AND state IN ('scheduled', 'available', 'running', "
      "'retryable')",
      {key});
  return {i64(held, 0, 0), true};
}

std::map<JobId, std::map<std::string, nlohmann::json>> PgJobStore::load_checkpoints(
    const std::vector<JobId>& ids) {
  std::map<JobId, std::map<std::string, nlohmann::json>> out;
  if (ids.empty()) return out;
  // One round trip for every job of a claim, not one per job.
  Rows r = s_.run(
      "SELECT job_id, name, output FROM ratchet_steps WHERE job_id = ANY($1::bigint[]) AND state = "
      "'completed'",
      {p(bigint_array(ids))});
  for (int i = 0; i < r.size(); ++i) out[i64(r, i, 0)].emplace(text(r, i, 1), json_or_null(r, i, 2));
  return out;
}

std::optional<JobId> PgJobStore::next_suspect(const ClaimRequest& req) {
  if (req.limit <= 0) return std::nullopt;
  // One suspect at a time: none while another runs (one round trip for both).
  Rows q = s_.run(
      "SELECT id FROM ratchet_jobs WHERE suspect = 1 AND state IN ('scheduled', 'available', 'retryable') "
      "AND run_at_us <= $1 AND type IN (SELECT jsonb_array_elements_text($2::jsonb)) "
      "AND ($3::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text($3::jsonb))) "
      "AND NOT EXISTS (SELECT 1 FROM ratchet_jobs r WHERE r.state = 'running' AND r.suspect = 1) "
      "ORDER BY crashes_alone, run_at_us, id LIMIT 1 FOR UPDATE SKIP LOCKED",
      {p(req.now), p(json_array(req.types)), queues_param(req.queues)});
  if (q.size() == 0) return std::nullopt;
  return i64(q, 0, 0);
}

ClaimResult PgJobStore::claim(const ClaimRequest& req) {
  ClaimResult result;
  expire_leases(req, result);
  std::vector<JobId> suspect;
  if (auto id = next_suspect(req)) suspect.push_back(*id);
  const int room = req.limit - static_cast<int>(suspect.size());
  // One statement: pick in claim order and take. The picked rows carry what
  // the result is sorted by, since UPDATE ... RETURNING keeps no order.
  Rows r = s_.run(
      "WITH due AS MATERIALIZED ("
      "  SELECT id, priority, resume, run_at_us FROM ratchet_jobs"
      "  WHERE state IN ('scheduled', 'available', 'retryable') AND suspect = 0 AND run_at_us <= $3"
      "  AND type IN (SELECT jsonb_array_elements_text($4::jsonb))"
      "  AND ($5::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text($5::jsonb)))"
      "  AND (parked_by IS NULL OR parked_by = $1 OR run_at_us <= $8)"
      "  ORDER BY priority, resume DESC, run_at_us, id LIMIT $6 FOR UPDATE SKIP LOCKED), "
      // The suspect is locked already (next_suspect).
      "picked AS (SELECT id, priority, resume, run_at_us FROM ratchet_jobs WHERE id = ANY($7::bigint[]) "
      "  UNION ALL SELECT id, priority, resume, run_at_us FROM due) "
      "UPDATE ratchet_jobs j SET state = 'running', attempt = j.attempt + 1 - j.resume, resume = 0, "
      "parked_by = NULL, lease_owner = $1, lease_token = j.lease_token + 1, lease_expires_us = $2, "
      "updated_us = $3 "
      "FROM picked WHERE j.id = picked.id "
      "RETURNING j.id, j.type, j.queue, j.args, j.attempt, j.max_attempts, j.cancel_requested, "
      "j.lease_token, picked.resume, picked.priority, picked.run_at_us, "
      // Whether it has checkpoints to load: a fresh job has none, so a
      // claim of fresh jobs loads nothing (one round trip fewer).
      "EXISTS (SELECT 1 FROM ratchet_steps s WHERE s.job_id = j.id AND s.state = 'completed')",
      {p(req.owner), p(req.lease_until), p(req.now), p(json_array(req.types)), queues_param(req.queues),
       p(std::int64_t{std::max(room, 0)}),
       p(suspect.empty() ? std::string("{}") : "{" + std::to_string(suspect.front()) + "}"),
       p(req.now - req.others_parked_after)});
  struct Row {
    bool suspect;
    std::int64_t priority;
    bool resumed;
    Micros run_at;
    bool has_steps;
    ClaimedJob job;
  };
  std::vector<Row> rows;
  for (int i = 0; i < r.size(); ++i) {
    ClaimedJob j;
    j.id = i64(r, i, 0);
    j.type = text(r, i, 1);
    j.queue = text(r, i, 2);
    j.args = json_or_null(r, i, 3, &j.args_problem);
    j.attempt = static_cast<int>(i64(r, i, 4));
    j.max_attempts = static_cast<int>(i64(r, i, 5));
    j.cancel_requested = i64(r, i, 6) != 0;
    j.token = i64(r, i, 7);
    j.resumed = i64(r, i, 8) != 0;
    j.lease_until = req.lease_until;
    const bool is_suspect = !suspect.empty() && j.id == suspect.front();
    rows.push_back(
        {is_suspect, i64(r, i, 9), j.resumed, i64(r, i, 10), r.get_text(i, 11) == "t", std::move(j)});
  }
  std::ranges::sort(rows, [](const Row& a, const Row& b) {
    return std::tuple(!a.suspect, a.priority, !a.resumed, a.run_at, a.job.id) <
           std::tuple(!b.suspect, b.priority, !b.resumed, b.run_at, b.job.id);
  });
  std::vector<JobId> ids;
  for (const auto& row : rows) {
    if (row.has_steps) ids.push_back(row.job.id);
  }
  auto checkpoints = load_checkpoints(ids);
  for (auto& row : rows) {
    if (auto found = checkpoints.find(row.job.id); found != checkpoints.end()) {
      row.job.checkpoints = std::move(found->second);
    }
    result.jobs.push_back(std::move(row.job));
  }
  if (req.limit > 0 && std::cmp_greater_equal(result.jobs.size(), req.limit)) {
    // The jobs taken are running now: another still due is one more.
    Rows more = s_.run(
        "SELECT EXISTS (SELECT 1 FROM ratchet_jobs"
        "  WHERE state IN ('scheduled', 'available', 'retryable') AND suspect = 0 AND run_at_us <= $2"
        "  AND type IN (SELECT jsonb_array_elements_text($3::jsonb))"
        "  AND ($4::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text($4::jsonb)))"
        "  AND (parked_by IS NULL OR parked_by = $1 OR run_at_us <= $5))",
        {p(req.owner), p(req.now), p(json_array(req.types)), queues_param(req.queues),
         p(req.now - req.others_parked_after)});
    result.more_due = more.size() > 0 && more.get_text(0, 0) == "t";
  }
  // Due for this process at its time, or, parked by another, that much later.
  Rows next = s_.run(
      "SELECT LEAST((SELECT min(run_at_us) FROM ratchet_jobs WHERE state IN ('scheduled', 'available', "
      "'retryable') AND run_at_us > $1 AND (parked_by IS NULL OR parked_by = $2)), "
      "(SELECT min(run_at_us) + $3 FROM ratchet_jobs WHERE state IN ('scheduled', 'available', 'retryable') "
      "AND run_at_us > $1::bigint - $3::bigint AND parked_by <> $2))",
      {p(req.now), p(req.owner), p(req.others_parked_after)});
  result.next_run_at = opt_i64(next, 0, 0);
  return result;
}

std::vector<Renewed> PgJobStore::renew(const std::string& owner,
                                       const std::vector<std::pair<JobId, std::int64_t>>& claims,
                                       Micros lease_until, Micros now) {
  std::vector<Renewed> held;
  for (const auto& [id, token] : claims) {
    Params params = fence_params(id, Fence{owner, token}, now);
    params.push_back(p(lease_until));
    Rows r = s_.run("UPDATE ratchet_jobs SET lease_expires_us = $5, updated_us = $4" RATCHET_FENCED
                    " RETURNING cancel_requested",
                    params);
    if (r.size() > 0) held.push_back({id, token, i64(r, 0, 0) != 0});
  }
  return held;
}

LeaseWrite PgJobStore::checkpoint(const StepDone& step, Micros lease_until, Micros now) {
  // One round trip: the fenced lease renewal and the step's row in one
  // statement, the row written only when the renewal found the job still
  // ours. A completed step is never overwritten: its first committed output
  // stands. (The writer is one connection, so statements per step bound a
  // process's throughput on a server.)
  Params params = fence_params(step.id, step.fence, now);
  params.push_back(p(lease_until));
  params.push_back(p(step.step));
  params.push_back(p(step.output_json));
  params.push_back(p(step.started));
  params.push_back(p(step.finished));
  Rows r = s_.run(
      "WITH held AS (UPDATE ratchet_jobs SET lease_expires_us = $5, updated_us = $4" RATCHET_FENCED
      " RETURNING cancel_requested), "
      "step AS (INSERT INTO ratchet_steps (job_id, name, state, output, attempts, started_us, finished_us, "
      "last_error) SELECT $1::bigint, $6::text, 'completed', $7::text, 1, $8::bigint, $9::bigint, NULL FROM "
      "held "
      "ON CONFLICT (job_id, name) DO UPDATE SET state = 'completed', output = excluded.output, "
      "attempts = ratchet_steps.attempts + 1, started_us = excluded.started_us, "
      "finished_us = excluded.finished_us WHERE ratchet_steps.state <> 'completed') "
      "SELECT cancel_requested FROM held",
      params);
  if (r.size() == 0) return {};
  return {true, i64(r, 0, 0) != 0};
}

LeaseWrite PgJobStore::complete(JobId id, const Fence& fence, const std::string& result_json, Micros now) {
  Params params = fence_params(id, fence, now);
  params.push_back(p(result_json));
  Rows r = s_.run(
      "UPDATE ratchet_jobs SET state = 'completed', result = $5, lease_owner = NULL, lease_expires_us = "
      "NULL, "
      "updated_us = $4, finished_us = $4" RATCHET_FENCED,
      params);
  return {r.affected() == 1, false};
}

LeaseWrite PgJobStore::fail_attempt(const AttemptFailure& f) {
  Params params = fence_params(f.id, f.fence, f.now);
  params.push_back(p(f.retry_at ? "retryable" : "dead"));
  params.push_back(p(f.retry_at));
  params.push_back(p(f.error));
  params.push_back(f.retry_at ? null() : p(f.now));
  Rows r = s_.run(
      "UPDATE ratchet_jobs SET state = $5, run_at_us = COALESCE($6::bigint, run_at_us), lease_owner = NULL, "
      "lease_expires_us = NULL, last_error = $7, updated_us = $4, finished_us = $8::bigint" RATCHET_FENCED
      " RETURNING attempt",
      params);
  if (r.size() == 0) return {};
  const std::int64_t attempt = i64(r, 0, 0);
  s_.run("INSERT INTO ratchet_job_errors (job_id, attempt, step, error, at_us) VALUES ($1, $2, $3, $4, $5)",
         {p(f.id), p(attempt), f.step.empty() ? null() : p(f.step), p(f.error), p(f.now)});
  if (!f.step.empty()) {
    s_.run(
        "INSERT INTO ratchet_steps (job_id, name, state, attempts, last_error, finished_us) "
        "VALUES ($1, $2, 'failed', 1, $3, $4) ON CONFLICT (job_id, name) DO UPDATE SET state = 'failed', "
        "attempts = ratchet_steps.attempts + 1, last_error = excluded.last_error, "
        "finished_us = excluded.finished_us WHERE ratchet_steps.state <> 'completed'",
        {p(f.id), p(f.step), p(f.error), p(f.now)});
  }
  if (f.retry_at) {
    add_timeline(
        f.id, f.now, "retry_scheduled",
        "attempt " + std::to_string(attempt) + " failed; next attempt in " +
            common::format_duration(std::chrono::microseconds(std::max<Micros>(0, *f.retry_at - f.now))));
  }
  return {true, false};
}

LeaseWrite PgJobStore::park(JobId id, const Fence& fence, Micros until, const std::string& reason,
                            Micros now) {
  Params params = fence_params(id, fence, now);
  params.push_back(p(until));
  Rows r = s_.run(
      "UPDATE ratchet_jobs SET state = 'scheduled', run_at_us = $5, resume = 1, lease_owner = NULL, "
      "parked_by = $2, lease_expires_us = NULL, updated_us = $4" RATCHET_FENCED,
      params);
  if (r.affected() != 1) return {};
  add_timeline(id, now, "parked", reason);
  return {true, false};
}

bool PgJobStore::resume_parked(JobId id, int attempt, Micros now) {
  Rows r = s_.run(
      "UPDATE ratchet_jobs SET run_at_us = $1, updated_us = $1 WHERE id = $2 AND attempt = $3 AND "
      "state = 'scheduled' AND resume = 1 AND run_at_us > $1",
      {p(now), p(id), p(std::int64_t{attempt})});
  return r.affected() == 1;
}

std::int64_t PgJobStore::disown_parked(const std::string& owner) {
  return s_.run("UPDATE ratchet_jobs SET parked_by = NULL WHERE parked_by = $1", {p(owner)}).affected();
}

std::int64_t PgJobStore::extend_parked(const std::vector<std::pair<JobId, int>>& jobs, Micros until,
                                       Micros now) {
  if (jobs.empty()) return 0;
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> attempts;
  for (const auto& [id, attempt] : jobs) {
    ids.push_back(id);
    attempts.push_back(attempt);
  }
  // One round trip for them all.
  Rows r = s_.run(
      "UPDATE ratchet_jobs j SET run_at_us = $1, updated_us = $2 FROM unnest($3::bigint[], $4::bigint[]) AS "
      "t(id, attempt) WHERE j.id = t.id AND j.attempt = t.attempt AND j.state = 'scheduled' AND j.resume = 1 "
      "AND j.run_at_us < $1",
      {p(until), p(now), p(bigint_array(ids)), p(bigint_array(attempts))});
  return r.affected();
}

LeaseWrite PgJobStore::release(JobId id, const Fence& fence, const std::string& reason, Micros now) {
  Rows r = s_.run(
      "UPDATE ratchet_jobs SET state = 'available', run_at_us = $4, resume = 1, lease_owner = NULL, "
      "lease_expires_us = NULL, updated_us = $4" RATCHET_FENCED,
      fence_params(id, fence, now));
  if (r.affected() != 1) return {};
  new_work_ = true;
  add_timeline(id, now, "released", reason);
  return {true, false};
}

LeaseWrite PgJobStore::finish_cancelled(JobId id, const Fence& fence, Micros now) {
  Rows r = s_.run(
      "UPDATE ratchet_jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_us = NULL, "
      "updated_us = $4, finished_us = $4" RATCHET_FENCED,
      fence_params(id, fence, now));
  return {r.affected() == 1, true};
}

#undef RATCHET_FENCED

std::optional<JobState> PgJobStore::cancel(JobId id, Micros now) {
  Rows q = s_.run("SELECT state FROM ratchet_jobs WHERE id = $1 FOR UPDATE", {p(id)});
  if (q.size() == 0) return std::nullopt;
  const std::optional<JobState> state = parse_job_state(q.get_text(0, 0));
  if (!state || is_terminal(*state)) return state;
  if (*state == JobState::kRunning) {
    s_.run("UPDATE ratchet_jobs SET cancel_requested = 1, updated_us = $1 WHERE id = $2", {p(now), p(id)});
    add_timeline(id, now, "cancel_requested", "the job stops at its next step boundary");
    return JobState::kRunning;
  }
  s_.run(
      "UPDATE ratchet_jobs SET state = 'cancelled', cancel_requested = 1, updated_us = $1, finished_us = $1 "
      "WHERE id = $2",
      {p(now), p(id)});
  add_timeline(id, now, "cancelled", "cancelled before it ran to the end");
  return JobState::kCancelled;
}

std::optional<JobState> PgJobStore::retry(JobId id, Micros now, int max_attempts_floor) {
  Rows q = s_.run("SELECT state FROM ratchet_jobs WHERE id = $1 FOR UPDATE", {p(id)});
  if (q.size() == 0) return std::nullopt;
  const std::optional<JobState> state = parse_job_state(q.get_text(0, 0));
  if (state != JobState::kDead && state != JobState::kCancelled) return state;
  s_.run(
      "UPDATE ratchet_jobs SET state = 'available', attempt = 0, resume = 0, lease_expiries = 0, "
      "cancel_requested = 0, max_attempts = GREATEST(max_attempts, $1), run_at_us = $2, updated_us = $2, "
      "finished_us = NULL, suspect = 0, crashes_alone = 0 WHERE id = $3",
      {p(std::int64_t{max_attempts_floor}), p(now), p(id)});
  new_work_ = true;
  add_timeline(id, now, "retried", "put back to available by hand");
  return state;  // what it was: dead or cancelled, and available now
}

std::int64_t PgJobStore::purge(Micros finished_before, int limit) {
  Rows r = s_.run(
      "WITH gone AS (DELETE FROM ratchet_jobs WHERE id IN (SELECT id FROM ratchet_jobs WHERE finished_us < "
      "$1 "
      "AND state IN ('completed', 'dead', 'cancelled') ORDER BY finished_us LIMIT $2 FOR UPDATE SKIP LOCKED) "
      "RETURNING id), "
      "s AS (DELETE FROM ratchet_steps WHERE job_id IN (SELECT id FROM gone)), "
      "e AS (DELETE FROM ratchet_job_errors WHERE job_id IN (SELECT id FROM gone)), "
      "t AS (DELETE FROM ratchet_job_timeline WHERE job_id IN (SELECT id FROM gone)) "
      "SELECT COUNT(*) FROM gone",
      {p(finished_before), p(std::int64_t{limit})});
  return i64(r, 0, 0);
}

std::optional<JobRecord> PgJobStore::get(JobId id) {
  Rows q = s_.run("SELECT " RATCHET_JOB_COLUMNS " FROM ratchet_jobs WHERE id = $1", {p(id)});
  if (q.size() == 0) return std::nullopt;
  JobRecord r = read_job(q, 0);
  Rows steps = s_.run(
      "SELECT name, state, output, attempts, started_us, finished_us, last_error FROM ratchet_steps "
      "WHERE job_id = $1 ORDER BY COALESCE(finished_us, started_us), name",
      {p(id)});
  for (int i = 0; i < steps.size(); ++i) {
    StepRecord s;
    s.name = text(steps, i, 0);
    s.state = text(steps, i, 1);
    s.output = json_or_null(steps, i, 2);
    s.attempts = static_cast<int>(i64(steps, i, 3));
    s.started_at = time_or_none(steps, i, 4);
    s.finished_at = time_or_none(steps, i, 5);
    s.last_error = text(steps, i, 6);
    r.steps.push_back(std::move(s));
  }
  Rows errors = s_.run(
      "SELECT attempt, step, error, at_us FROM ratchet_job_errors WHERE job_id = $1 ORDER BY seq", {p(id)});
  for (int i = 0; i < errors.size(); ++i) {
    r.errors.push_back({static_cast<int>(i64(errors, i, 0)), text(errors, i, 1), text(errors, i, 2),
                        from_micros(i64(errors, i, 3))});
  }
  Rows timeline = s_.run(
      "SELECT at_us, kind, detail FROM ratchet_job_timeline WHERE job_id = $1 ORDER BY at_us, seq", {p(id)});
  for (int i = 0; i < timeline.size(); ++i) {
    r.timeline.push_back({from_micros(i64(timeline, i, 0)), text(timeline, i, 1), text(timeline, i, 2)});
  }
  return r;
}

std::vector<JobRecord> PgJobStore::list(const JobFilter& filter) {
  // strpos over lower(): a plain substring, where LIKE would read % and _ in
  // the text as patterns.
  static constexpr const char* kWhere =
      "SELECT " RATCHET_JOB_COLUMNS
      " FROM ratchet_jobs WHERE id > $1 AND ($2::text IS NULL OR state = $2) AND "
      "($3::text IS NULL OR type = $3) AND ($4::text IS NULL OR queue = $4) AND "
      "($6::bigint IS NULL OR id = $6) AND ($7::bigint IS NULL OR id < $7) AND "
      "($8::text IS NULL OR strpos(lower(args), lower($8)) > 0 OR "
      "strpos(lower(COALESCE(last_error, '')), lower($8)) > 0)";
  static const std::string oldest = std::string(kWhere) + " ORDER BY id LIMIT $5";
  static const std::string newest = std::string(kWhere) + " ORDER BY id DESC LIMIT $5";
  Rows q = s_.run(
      filter.newest_first ? newest.c_str() : oldest.c_str(),
      {p(filter.after_id), filter.state ? p(std::string(to_string(*filter.state))) : null(),
       filter.type.empty() ? null() : p(filter.type), filter.queue.empty() ? null() : p(filter.queue),
       p(std::int64_t{filter.limit}), filter.id == 0 ? null() : p(filter.id),
       filter.before_id == 0 ? null() : p(filter.before_id), filter.text.empty() ? null() : p(filter.text)});
  std::vector<JobRecord> out;
  for (int i = 0; i < q.size(); ++i) out.push_back(read_job(q, i));
  return out;
}

std::vector<MinuteActivity> PgJobStore::activity(Micros since) {
  std::map<Micros, MinuteActivity> minutes;
  auto at = [&](Micros minute) -> MinuteActivity& {
    auto& m = minutes[minute];
    m.minute = from_micros(minute * kMicrosPerMinute);
    return m;
  };
  // Integer division floors only for times after 1970, which every
  // finished job's is.
  Rows ended = s_.run(
      "SELECT finished_us / 60000000, state, COUNT(*) FROM ratchet_jobs WHERE finished_us >= $1 AND "
      "state IN ('completed', 'dead') GROUP BY 1, 2",
      {p(since)});
  for (int i = 0; i < ended.size(); ++i) {
    auto& m = at(i64(ended, i, 0));
    (text(ended, i, 1) == "completed" ? m.completed : m.dead) = i64(ended, i, 2);
  }
  Rows failed = s_.run(
      "SELECT at_us / 60000000, COUNT(*) FROM ratchet_job_errors WHERE at_us >= $1 GROUP BY 1", {p(since)});
  for (int i = 0; i < failed.size(); ++i) at(i64(failed, i, 0)).failed = i64(failed, i, 1);
  std::vector<MinuteActivity> out;
  out.reserve(minutes.size());
  for (auto& [minute, m] : minutes) out.push_back(m);
  return out;
}

void PgJobStore::put_report(const std::string& worker, Micros now, const std::string& report,
                            Micros forget_before) {
  s_.run(
      "INSERT INTO ratchet_engine_reports(worker, updated_us, report) VALUES ($1, $2, $3) ON CONFLICT "
      "(worker) "
      "DO UPDATE SET updated_us = excluded.updated_us, report = excluded.report",
      {p(worker), p(now), p(report)});
  s_.run("DELETE FROM ratchet_engine_reports WHERE updated_us < $1", {p(forget_before)});
}

std::vector<JobStore::StoredReport> PgJobStore::reports(Micros since) {
  Rows q = s_.run(
      "SELECT worker, updated_us, report FROM ratchet_engine_reports WHERE updated_us >= $1 ORDER BY worker",
      {p(since)});
  std::vector<StoredReport> out;
  for (int i = 0; i < q.size(); ++i) out.push_back({text(q, i, 0), i64(q, i, 1), text(q, i, 2)});
  return out;
}

std::vector<std::pair<JobState, std::int64_t>> PgJobStore::counts() {
  Rows q = s_.run("SELECT state, COUNT(*) FROM ratchet_jobs GROUP BY state ORDER BY state");
  std::vector<std::pair<JobState, std::int64_t>> out;
  for (int i = 0; i < q.size(); ++i) {
    if (auto s = parse_job_state(q.get_text(i, 0))) out.emplace_back(*s, i64(q, i, 1));
  }
  return out;
}

std::int64_t PgJobStore::pending(const std::vector<std::string>& types,
                                 const std::vector<std::string>& queues) {
  Rows q = s_.run(
      "SELECT COUNT(*) FROM (SELECT 1 FROM ratchet_jobs WHERE state IN ('scheduled', 'available', 'running', "
      "'retryable') AND type IN (SELECT jsonb_array_elements_text($1::jsonb)) "
      "AND ($2::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text($2::jsonb))) LIMIT 1) AS any_job",
      {p(json_array(types)), queues_param(queues)});
  return i64(q, 0, 0);
}

void PgJobStore::add_timeline(JobId id, Micros at, const std::string& kind, const std::string& detail) {
  s_.run("INSERT INTO ratchet_job_timeline (job_id, at_us, kind, detail) VALUES ($1, $2, $3, $4)",
         {p(id), p(at), p(kind), p(detail)});
}

std::optional<std::int64_t> PgJobStore::stored_clock_base(const std::string& boot_id) {
  Rows q = s_.run("SELECT base_ns FROM ratchet_machine_clock WHERE boot_id = $1", {p(boot_id)});
  if (q.size() == 0) return std::nullopt;
  return i64(q, 0, 0);
}

std::int64_t PgJobStore::machine_clock_base(const std::string& boot_id, std::int64_t wall_base_ns) {
  // Hosts sharing the database each keep their own boot's row; the first
  // process of a boot writes it, the others read it.
  Rows q = s_.run(
      "INSERT INTO ratchet_machine_clock (boot_id, base_ns) VALUES ($1, $2) ON CONFLICT (boot_id) DO UPDATE "
      "SET base_ns = ratchet_machine_clock.base_ns RETURNING base_ns",
      {p(boot_id), p(wall_base_ns)});
  return i64(q, 0, 0);
}

}  // namespace ratchet::store::pg
