#include "store/sqlite/sqlite_job_store.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <string_view>
#include <utility>

#include "common/duration.hpp"
#include "store/sqlite/quarantine.hpp"
#include "store/sqlite/statement_use.hpp"
#include "store/stored_json.hpp"

namespace ratchet::store {
namespace {

constexpr const char* kJobColumns =
    "id, type, queue, args, state, priority, run_at_us, attempt, max_attempts, unique_key, lease_owner, "
    "lease_expires_us, lease_expiries, cancel_requested, result, last_error, created_us, updated_us, "
    "finished_us";

std::string text_or_empty(const SQLite::Column& c) { return c.isNull() ? std::string() : c.getString(); }

nlohmann::json json_or_null(const SQLite::Column& c, std::string* problem = nullptr) {
  if (c.isNull()) return nullptr;
  const std::string text = c.getString();
  if (std::string why = stored_json_problem(text); !why.empty()) {
    if (problem != nullptr) *problem = why;
    // Shown as what it is, not as its contents.
    return "(not loaded: " + why + ")";
  }
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::optional<TimePoint> time_or_none(const SQLite::Column& c) {
  if (c.isNull()) return std::nullopt;
  return from_micros(c.getInt64());
}

JobRecord read_job(SQLite::Statement& s) {
  JobRecord r;
  r.id = s.getColumn(0).getInt64();
  r.type = s.getColumn(1).getString();
  r.queue = s.getColumn(2).getString();
  r.args = json_or_null(s.getColumn(3));
  r.state = parse_job_state(s.getColumn(4).getString()).value_or(JobState::kDead);
  r.priority = s.getColumn(5).getInt();
  r.run_at = from_micros(s.getColumn(6).getInt64());
  r.attempt = s.getColumn(7).getInt();
  r.max_attempts = s.getColumn(8).getInt();
  r.unique_key = text_or_empty(s.getColumn(9));
  r.lease_owner = text_or_empty(s.getColumn(10));
  r.lease_expires_at = time_or_none(s.getColumn(11));
  r.lease_expiries = s.getColumn(12).getInt();
  r.cancel_requested = s.getColumn(13).getInt() != 0;
  r.result = json_or_null(s.getColumn(14));
  r.last_error = text_or_empty(s.getColumn(15));
  r.created_at = from_micros(s.getColumn(16).getInt64());
  r.updated_at = from_micros(s.getColumn(17).getInt64());
  r.finished_at = time_or_none(s.getColumn(18));
  return r;
}

nlohmann::json string_array(const std::vector<std::string>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

}  // namespace

SqliteJobStore::SqliteJobStore(SQLite::Database& db)
    : db_(db), quarantine_(std::make_unique<Quarantine>(db)) {}
SqliteJobStore::~SqliteJobStore() = default;

SQLite::Statement& SqliteJobStore::stmt(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.emplace(sql, std::make_unique<SQLite::Statement>(db_, sql)).first;
  return *it->second;
}

Inserted SqliteJobStore::insert(const NewJob& job, Micros now) {
  if (!job.unique_key.empty()) {
    Use q(
        stmt("SELECT id FROM jobs WHERE unique_key = ? AND state IN "
             "('scheduled', 'available', 'running', 'retryable')"));
    q->bind(1, job.unique_key);
    if (q->executeStep()) return {q->getColumn(0).getInt64(), true};
  }
  // Past every id a purge removed (database_meta 'last_purged_job_id'): a
  // rowid alone would hand out the ids of purged jobs again.
  Use s(
      stmt("INSERT INTO jobs (id, type, queue, args, state, priority, run_at_us, max_attempts, unique_key, "
           "created_us, updated_us) VALUES ((SELECT MAX(COALESCE(MAX(id), 0), COALESCE((SELECT CAST(value AS "
           "INTEGER) FROM database_meta WHERE name = 'last_purged_job_id'), 0)) + 1 FROM jobs), "
           "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  s->bind(1, job.type);
  s->bind(2, job.queue);
  s->bind(3, job.args_json);
  s->bind(4, job.run_at > now ? "scheduled" : "available");
  s->bind(5, job.priority);
  s->bind(6, job.run_at);
  s->bind(7, job.max_attempts);
  if (job.unique_key.empty()) {
    s->bind(8);
  } else {
    s->bind(8, job.unique_key);
  }
  s->bind(9, now);
  s->bind(10, now);
  s->exec();
  return {db_.getLastInsertRowid(), false};
}

std::map<std::string, nlohmann::json> SqliteJobStore::load_checkpoints(JobId id) {
  std::map<std::string, nlohmann::json> out;
  Use q(stmt("SELECT name, output FROM steps WHERE job_id = ? AND state = 'completed'"));
  q->bind(1, id);
  while (q->executeStep()) out.emplace(q->getColumn(0).getString(), json_or_null(q->getColumn(1)));
  return out;
}

// INDEXED BY on every query below: without statistics the planner may pick
// jobs_state and sort every pending job, which takes seconds with a million
// queued. Each query is a range seek in jobs_due.
#define RATCHET_PENDING \
  "FROM jobs INDEXED BY jobs_due WHERE state IN ('scheduled', 'available', 'retryable') "

std::vector<std::int64_t> SqliteJobStore::pending_priorities() {
  std::vector<std::int64_t> out;
  Use first(stmt("SELECT min(priority) " RATCHET_PENDING));
  if (!first->executeStep() || first->getColumn(0).isNull()) return out;
  out.push_back(first->getColumn(0).getInt64());
  // A skip scan: one seek per distinct priority.
  Use next(stmt("SELECT min(priority) " RATCHET_PENDING "AND priority > ?"));
  for (;;) {
    next->bind(1, out.back());
    const bool found = next->executeStep() && !next->getColumn(0).isNull();
    if (found) out.push_back(next->getColumn(0).getInt64());
    next->reset();
    if (!found) return out;
  }
}

std::vector<std::pair<JobId, bool>> SqliteJobStore::due_ids(const ClaimRequest& req,
                                                            const std::vector<std::int64_t>& priorities) {
  std::vector<std::pair<JobId, bool>> ids;
  Use q(stmt("SELECT id " RATCHET_PENDING
             "AND priority = ?1 AND resume = ?2 AND run_at_us <= ?3 AND suspect = 0 "
             "AND type IN (SELECT value FROM json_each(?4)) "
             "AND (?5 IS NULL OR queue IN (SELECT value FROM json_each(?5))) "
             "AND (parked_by IS NULL OR parked_by = ?7 OR run_at_us <= ?8) "
             "ORDER BY run_at_us, id LIMIT ?6"));
  const std::string types = string_array(req.types).dump();
  const std::string queues = string_array(req.queues).dump();
  for (std::int64_t priority : priorities) {
    for (int resume : {1, 0}) {
      const auto room = static_cast<int>(req.limit) - static_cast<int>(ids.size());
      if (room <= 0) return ids;
      q->bind(1, priority);
      q->bind(2, resume);
      q->bind(3, req.now);
      q->bind(4, types);
      if (req.queues.empty()) {
        q->bind(5);
      } else {
        q->bind(5, queues);
      }
      q->bind(6, room);
      q->bind(7, req.owner);
      q->bind(8, req.now - req.others_parked_after);
      while (q->executeStep()) ids.emplace_back(q->getColumn(0).getInt64(), resume == 1);
      q->reset();
    }
  }
  return ids;
}

std::optional<Micros> SqliteJobStore::next_run_at(const ClaimRequest& req,
                                                  const std::vector<std::int64_t>& priorities) {
  std::optional<Micros> next;
  const auto sooner = [&](Micros at) {
    if (!next || at < *next) next = at;
  };
  // Due for this process at its time, or, parked by another, that much later.
  Use q(stmt("SELECT run_at_us " RATCHET_PENDING
             "AND priority = ?1 AND resume = ?2 AND run_at_us > ?3 AND (parked_by IS NULL OR parked_by = ?4) "
             "ORDER BY run_at_us LIMIT 1"));
  Use o(stmt("SELECT run_at_us " RATCHET_PENDING
             "AND priority = ?1 AND resume = 1 AND run_at_us > ?2 AND parked_by <> ?3 "
             "ORDER BY run_at_us LIMIT 1"));
  for (std::int64_t priority : priorities) {
    for (int resume : {1, 0}) {
      q->bind(1, priority);
      q->bind(2, resume);
      q->bind(3, req.now);
      q->bind(4, req.owner);
      if (q->executeStep()) sooner(q->getColumn(0).getInt64());
      q->reset();
    }
    o->bind(1, priority);
    o->bind(2, req.now - req.others_parked_after);
    o->bind(3, req.owner);
    if (o->executeStep()) sooner(o->getColumn(0).getInt64() + req.others_parked_after);
    o->reset();
  }
  return next;
}

#undef RATCHET_PENDING

ClaimResult SqliteJobStore::claim(const ClaimRequest& req) {
  ClaimResult result;
  expire_leases(req, result);

  const std::vector<std::int64_t> priorities = pending_priorities();
  // At most one suspect, and only while no other runs on the database.
  std::vector<std::pair<JobId, bool>> due;
  ClaimRequest rest = req;
  if (auto suspect = quarantine_->next_suspect(req)) {
    due.push_back(*suspect);
    --rest.limit;
  }
  for (const auto& d : due_ids(rest, priorities)) due.push_back(d);
  result.next_run_at = next_run_at(req, priorities);
  for (const auto& [id, resumed] : due) {
    Use u(stmt(
        "UPDATE jobs SET state = 'running', attempt = attempt + 1 - resume, resume = 0, parked_by = NULL, "
        "lease_owner = ?, "
        "lease_token = lease_token + 1, lease_expires_us = ?, updated_us = ? WHERE id = ? "
        "RETURNING type, queue, args, attempt, max_attempts, cancel_requested, lease_token"));
    u->bind(1, req.owner);
    u->bind(2, req.lease_until);
    u->bind(3, req.now);
    u->bind(4, id);
    if (!u->executeStep()) continue;
    ClaimedJob j;
    j.id = id;
    j.resumed = resumed;
    j.type = u->getColumn(0).getString();
    j.queue = u->getColumn(1).getString();
    j.args = json_or_null(u->getColumn(2), &j.args_problem);
    j.attempt = u->getColumn(3).getInt();
    j.max_attempts = u->getColumn(4).getInt();
    j.cancel_requested = u->getColumn(5).getInt() != 0;
    j.token = u->getColumn(6).getInt64();
    j.lease_until = req.lease_until;
    while (u->executeStep()) {
    }
    result.jobs.push_back(std::move(j));
  }
  for (auto& j : result.jobs) j.checkpoints = load_checkpoints(j.id);
  if (req.limit > 0 && std::cmp_greater_equal(result.jobs.size(), req.limit)) {
    // The jobs taken are running now: another still due is one more.
    ClaimRequest more = req;
    more.limit = 1;
    result.more_due = !due_ids(more, priorities).empty();
  }
  return result;
}

// The fence of every write a run makes (see job_store.hpp): the job is
// running under exactly this claim, and its lease has not expired. Binds
// ?1 id, ?2 owner, ?3 token, ?4 now.
#define RATCHET_FENCED \
  " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3 AND state = 'running' AND lease_expires_us > ?4"

namespace {

void bind_fence(SQLite::Statement& s, JobId id, const Fence& fence, Micros now) {
  s.bind(1, id);
  s.bind(2, fence.owner);
  s.bind(3, fence.token);
  s.bind(4, now);
}

}  // namespace

std::vector<Renewed> SqliteJobStore::renew(const std::string& owner,
                                           const std::vector<std::pair<JobId, std::int64_t>>& claims,
                                           Micros lease_until, Micros now) {
  std::vector<Renewed> held;
  for (const auto& [id, token] : claims) {
    Use u(stmt("UPDATE jobs SET lease_expires_us = ?5, updated_us = ?4" RATCHET_FENCED
               " RETURNING cancel_requested"));
    bind_fence(*u, id, Fence{owner, token}, now);
    u->bind(5, lease_until);
    if (u->executeStep()) {
      held.push_back({id, token, u->getColumn(0).getInt() != 0});
      while (u->executeStep()) {
      }
    }
  }
  return held;
}

LeaseWrite SqliteJobStore::checkpoint(const StepDone& step, Micros lease_until, Micros now) {
  auto held = renew(step.fence.owner, {{step.id, step.fence.token}}, lease_until, now);
  if (held.empty()) return {};
  // A completed step is never overwritten: its first committed output stands.
  Use s(
      stmt("INSERT INTO steps (job_id, name, state, output, attempts, started_us, finished_us, last_error) "
           "VALUES (?, ?, 'completed', ?, 1, ?, ?, NULL) ON CONFLICT (job_id, name) DO UPDATE SET "
           "state = 'completed', output = excluded.output, attempts = steps.attempts + 1, "
           "started_us = excluded.started_us, finished_us = excluded.finished_us "
           "WHERE steps.state <> 'completed'"));
  s->bind(1, step.id);
  s->bind(2, step.step);
  s->bind(3, step.output_json);
  s->bind(4, step.started);
  s->bind(5, step.finished);
  s->exec();
  return {true, held.front().cancel_requested};
}

LeaseWrite SqliteJobStore::complete(JobId id, const Fence& fence, const std::string& result_json,
                                    Micros now) {
  Use u(
      stmt("UPDATE jobs SET state = 'completed', result = ?5, lease_owner = NULL, lease_expires_us = NULL, "
           "updated_us = ?4, finished_us = ?4" RATCHET_FENCED));
  bind_fence(*u, id, fence, now);
  u->bind(5, result_json);
  return {u->exec() == 1, false};
}

LeaseWrite SqliteJobStore::fail_attempt(const AttemptFailure& f) {
  Use u(
      stmt("UPDATE jobs SET state = ?5, run_at_us = COALESCE(?6, run_at_us), lease_owner = NULL, "
           "lease_expires_us = NULL, last_error = ?7, updated_us = ?4, finished_us = ?8" RATCHET_FENCED
           " RETURNING attempt"));
  bind_fence(*u, f.id, f.fence, f.now);
  u->bind(5, f.retry_at ? "retryable" : "dead");
  if (f.retry_at) {
    u->bind(6, *f.retry_at);
  } else {
    u->bind(6);
  }
  u->bind(7, f.error);
  if (f.retry_at) {
    u->bind(8);
  } else {
    u->bind(8, f.now);
  }
  if (!u->executeStep()) return {};
  int attempt = u->getColumn(0).getInt();
  while (u->executeStep()) {
  }
  Use e(stmt("INSERT INTO job_errors (job_id, attempt, step, error, at_us) VALUES (?, ?, ?, ?, ?)"));
  e->bind(1, f.id);
  e->bind(2, attempt);
  if (f.step.empty()) {
    e->bind(3);
  } else {
    e->bind(3, f.step);
  }
  e->bind(4, f.error);
  e->bind(5, f.now);
  e->exec();
  if (!f.step.empty()) {
    Use s(stmt(
        "INSERT INTO steps (job_id, name, state, attempts, last_error, finished_us) "
        "VALUES (?, ?, 'failed', 1, ?, ?) ON CONFLICT (job_id, name) DO UPDATE SET state = 'failed', "
        "attempts = steps.attempts + 1, last_error = excluded.last_error, finished_us = excluded.finished_us "
        "WHERE steps.state <> 'completed'"));
    s->bind(1, f.id);
    s->bind(2, f.step);
    s->bind(3, f.error);
    s->bind(4, f.now);
    s->exec();
  }
  if (f.retry_at) {
    add_timeline(
        f.id, f.now, "retry_scheduled",
        "attempt " + std::to_string(attempt) + " failed; next attempt in " +
            common::format_duration(std::chrono::microseconds(std::max<Micros>(0, *f.retry_at - f.now))));
  }
  return {true, false};
}

LeaseWrite SqliteJobStore::park(JobId id, const Fence& fence, Micros until, const std::string& reason,
                                Micros now) {
  Use u(stmt(
      "UPDATE jobs SET state = 'scheduled', run_at_us = ?5, resume = 1, lease_owner = NULL, parked_by = ?2, "
      "lease_expires_us = NULL, updated_us = ?4" RATCHET_FENCED));
  bind_fence(*u, id, fence, now);
  u->bind(5, until);
  if (u->exec() != 1) return {};
  add_timeline(id, now, "parked", reason);
  return {true, false};
}

bool SqliteJobStore::resume_parked(JobId id, int attempt, Micros now) {
  Use u(stmt(
      "UPDATE jobs SET run_at_us = ?, updated_us = ? WHERE id = ? AND attempt = ? AND state = 'scheduled' "
      "AND resume = 1 AND run_at_us > ?"));
  u->bind(1, now);
  u->bind(2, now);
  u->bind(3, id);
  u->bind(4, attempt);
  u->bind(5, now);
  return u->exec() == 1;
}

std::int64_t SqliteJobStore::disown_parked(const std::string& owner) {
  Use u(stmt("UPDATE jobs SET parked_by = NULL WHERE parked_by = ?"));
  u->bind(1, owner);
  return u->exec();
}

std::int64_t SqliteJobStore::extend_parked(const std::vector<std::pair<JobId, int>>& jobs, Micros until,
                                           Micros now) {
  std::int64_t moved = 0;
  for (const auto& [id, attempt] : jobs) {
    Use u(stmt(
        "UPDATE jobs SET run_at_us = ?, updated_us = ? WHERE id = ? AND attempt = ? AND state = 'scheduled' "
        "AND resume = 1 AND run_at_us < ?"));
    u->bind(1, until);
    u->bind(2, now);
    u->bind(3, id);
    u->bind(4, attempt);
    u->bind(5, until);
    moved += u->exec();
  }
  return moved;
}

LeaseWrite SqliteJobStore::release(JobId id, const Fence& fence, const std::string& reason, Micros now) {
  Use u(
      stmt("UPDATE jobs SET state = 'available', run_at_us = ?4, resume = 1, lease_owner = NULL, "
           "lease_expires_us = NULL, updated_us = ?4" RATCHET_FENCED));
  bind_fence(*u, id, fence, now);
  if (u->exec() != 1) return {};
  add_timeline(id, now, "released", reason);
  return {true, false};
}

LeaseWrite SqliteJobStore::finish_cancelled(JobId id, const Fence& fence, Micros now) {
  Use u(
      stmt("UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_us = NULL, "
           "updated_us = ?4, finished_us = ?4" RATCHET_FENCED));
  bind_fence(*u, id, fence, now);
  return {u->exec() == 1, true};
}

#undef RATCHET_FENCED

std::optional<JobState> SqliteJobStore::cancel(JobId id, Micros now) {
  std::optional<JobState> state;
  {
    Use q(stmt("SELECT state FROM jobs WHERE id = ?"));
    q->bind(1, id);
    if (!q->executeStep()) return std::nullopt;
    state = parse_job_state(q->getColumn(0).getString());
  }
  if (!state || is_terminal(*state)) return state;
  if (*state == JobState::kRunning) {
    Use u(stmt("UPDATE jobs SET cancel_requested = 1, updated_us = ? WHERE id = ?"));
    u->bind(1, now);
    u->bind(2, id);
    u->exec();
    add_timeline(id, now, "cancel_requested", "the job stops at its next step boundary");
    return JobState::kRunning;
  }
  Use u(
      stmt("UPDATE jobs SET state = 'cancelled', cancel_requested = 1, updated_us = ?, finished_us = ? "
           "WHERE id = ?"));
  u->bind(1, now);
  u->bind(2, now);
  u->bind(3, id);
  u->exec();
  add_timeline(id, now, "cancelled", "cancelled before it ran to the end");
  return JobState::kCancelled;
}

std::optional<JobState> SqliteJobStore::retry(JobId id, Micros now, int max_attempts_floor) {
  std::optional<JobState> state;
  {
    Use q(stmt("SELECT state FROM jobs WHERE id = ?"));
    q->bind(1, id);
    if (!q->executeStep()) return std::nullopt;
    state = parse_job_state(q->getColumn(0).getString());
  }
  if (state != JobState::kDead && state != JobState::kCancelled) return state;
  Use u(
      stmt("UPDATE jobs SET state = 'available', attempt = 0, resume = 0, lease_expiries = 0, "
           "cancel_requested = 0, max_attempts = MAX(max_attempts, ?), run_at_us = ?, updated_us = ?, "
           "finished_us = NULL WHERE id = ?"));
  u->bind(1, max_attempts_floor);
  u->bind(2, now);
  u->bind(3, now);
  u->bind(4, id);
  u->exec();
  quarantine_->forgive(id);
  add_timeline(id, now, "retried", "put back to available by hand");
  return state;  // what it was: dead or cancelled, and available now
}

std::int64_t SqliteJobStore::purge(Micros finished_before, int limit) {
  // The chunk's ids first, as one JSON array: each delete below is then a
  // seek per id, and all four agree on the same jobs.
  nlohmann::json ids = nlohmann::json::array();
  {
    Use q(
        stmt("SELECT id FROM jobs INDEXED BY jobs_finished WHERE finished_us < ? AND finished_us IS NOT NULL "
             "AND state IN ('completed', 'dead', 'cancelled') ORDER BY finished_us LIMIT ?"));
    q->bind(1, finished_before);
    q->bind(2, limit);
    while (q->executeStep()) ids.push_back(q->getColumn(0).getInt64());
  }
  if (ids.empty()) return 0;
  const std::string list = ids.dump();
  {
    // The largest id ever handed out stays known once its job is gone.
    Use m(
        stmt("INSERT INTO database_meta (name, value) SELECT 'last_purged_job_id', CAST(MAX(id) AS TEXT) "
             "FROM jobs "
             "WHERE true ON CONFLICT (name) DO UPDATE SET value = excluded.value "
             "WHERE CAST(excluded.value AS INTEGER) > CAST(database_meta.value AS INTEGER)"));
    m->exec();
  }
  for (const char* sql : {"DELETE FROM steps WHERE job_id IN (SELECT value FROM json_each(?))",
                          "DELETE FROM job_errors WHERE job_id IN (SELECT value FROM json_each(?))",
                          "DELETE FROM job_timeline WHERE job_id IN (SELECT value FROM json_each(?))",
                          "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))"}) {
    Use d(stmt(sql));
    d->bind(1, list);
    d->exec();
  }
  return static_cast<std::int64_t>(ids.size());
}

std::optional<JobRecord> SqliteJobStore::get(JobId id) {
  static const std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?";
  JobRecord r;
  {
    Use q(stmt(sql.c_str()));
    q->bind(1, id);
    if (!q->executeStep()) return std::nullopt;
    r = read_job(*q);
  }
  {
    Use q(
        stmt("SELECT name, state, output, attempts, started_us, finished_us, last_error FROM steps "
             "WHERE job_id = ? ORDER BY COALESCE(finished_us, started_us), name"));
    q->bind(1, id);
    while (q->executeStep()) {
      StepRecord s;
      s.name = q->getColumn(0).getString();
      s.state = q->getColumn(1).getString();
      s.output = json_or_null(q->getColumn(2));
      s.attempts = q->getColumn(3).getInt();
      s.started_at = time_or_none(q->getColumn(4));
      s.finished_at = time_or_none(q->getColumn(5));
      s.last_error = text_or_empty(q->getColumn(6));
      r.steps.push_back(std::move(s));
    }
  }
  {
    Use q(stmt("SELECT attempt, step, error, at_us FROM job_errors WHERE job_id = ? ORDER BY rowid"));
    q->bind(1, id);
    while (q->executeStep()) {
      r.errors.push_back({q->getColumn(0).getInt(), text_or_empty(q->getColumn(1)),
                          q->getColumn(2).getString(), from_micros(q->getColumn(3).getInt64())});
    }
  }
  {
    Use q(stmt("SELECT at_us, kind, detail FROM job_timeline WHERE job_id = ? ORDER BY at_us, rowid"));
    q->bind(1, id);
    while (q->executeStep()) {
      r.timeline.push_back({from_micros(q->getColumn(0).getInt64()), q->getColumn(1).getString(),
                            text_or_empty(q->getColumn(2))});
    }
  }
  return r;
}

std::vector<JobRecord> SqliteJobStore::list(const JobFilter& filter) {
  // Two statements, one per order, each cached: the bounds that are not set
  // are NULL and drop out.
  static const std::string where =
      std::string("SELECT ") + kJobColumns +
      " FROM jobs WHERE id > ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR type = ?3) AND "
      "(?4 IS NULL OR queue = ?4) AND (?6 IS NULL OR id = ?6) AND (?7 IS NULL OR id < ?7) AND "
      "(?8 IS NULL OR instr(lower(args), lower(?8)) > 0 OR instr(lower(COALESCE(last_error, '')), lower(?8)) "
      "> 0)";
  static const std::string oldest = where + " ORDER BY id LIMIT ?5";
  static const std::string newest = where + " ORDER BY id DESC LIMIT ?5";
  Use q(stmt(filter.newest_first ? newest.c_str() : oldest.c_str()));
  q->bind(1, filter.after_id);
  if (filter.state) {
    q->bind(2, std::string(to_string(*filter.state)));
  } else {
    q->bind(2);
  }
  if (filter.type.empty()) {
    q->bind(3);
  } else {
    q->bind(3, filter.type);
  }
  if (filter.queue.empty()) {
    q->bind(4);
  } else {
    q->bind(4, filter.queue);
  }
  q->bind(5, filter.limit);
  if (filter.id == 0) {
    q->bind(6);
  } else {
    q->bind(6, filter.id);
  }
  if (filter.before_id == 0) {
    q->bind(7);
  } else {
    q->bind(7, filter.before_id);
  }
  if (filter.text.empty()) {
    q->bind(8);
  } else {
    q->bind(8, filter.text);
  }
  std::vector<JobRecord> out;
  while (q->executeStep()) out.push_back(read_job(*q));
  return out;
}

std::vector<MinuteActivity> SqliteJobStore::activity(Micros since) {
  std::map<Micros, MinuteActivity> minutes;
  auto at = [&](Micros minute) -> MinuteActivity& {
    auto& m = minutes[minute];
    m.minute = from_micros(minute * kMicrosPerMinute);
    return m;
  };
  {
    Use q(
        stmt("SELECT finished_us / 60000000, state, COUNT(*) FROM jobs WHERE finished_us >= ?1 AND "
             "finished_us IS NOT NULL AND state IN ('completed', 'dead') GROUP BY 1, 2"));
    q->bind(1, since);
    while (q->executeStep()) {
      auto& m = at(q->getColumn(0).getInt64());
      (q->getColumn(1).getString() == "completed" ? m.completed : m.dead) = q->getColumn(2).getInt64();
    }
  }
  {
    Use q(stmt("SELECT at_us / 60000000, COUNT(*) FROM job_errors WHERE at_us >= ?1 GROUP BY 1"));
    q->bind(1, since);
    while (q->executeStep()) at(q->getColumn(0).getInt64()).failed = q->getColumn(1).getInt64();
  }
  std::vector<MinuteActivity> out;
  out.reserve(minutes.size());
  for (auto& [minute, m] : minutes) out.push_back(m);
  return out;
}

void SqliteJobStore::put_report(const std::string& worker, Micros now, const std::string& report,
                                Micros forget_before) {
  {
    Use q(stmt(
        "INSERT INTO engine_reports(worker, updated_us, report) VALUES (?1, ?2, ?3) ON CONFLICT(worker) DO "
        "UPDATE SET updated_us = excluded.updated_us, report = excluded.report"));
    q->bind(1, worker);
    q->bind(2, now);
    q->bind(3, report);
    q->exec();
  }
  Use q(stmt("DELETE FROM engine_reports WHERE updated_us < ?1"));
  q->bind(1, forget_before);
  q->exec();
}

std::vector<JobStore::StoredReport> SqliteJobStore::reports(Micros since) {
  Use q(stmt("SELECT worker, updated_us, report FROM engine_reports WHERE updated_us >= ?1 ORDER BY worker"));
  q->bind(1, since);
  std::vector<StoredReport> out;
  while (q->executeStep()) {
    out.push_back({q->getColumn(0).getString(), q->getColumn(1).getInt64(), q->getColumn(2).getString()});
  }
  return out;
}

std::vector<std::pair<JobState, std::int64_t>> SqliteJobStore::counts() {
  std::vector<std::pair<JobState, std::int64_t>> out;
  Use q(stmt("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
  while (q->executeStep()) {
    if (auto s = parse_job_state(q->getColumn(0).getString()))
      out.emplace_back(*s, q->getColumn(1).getInt64());
  }
  return out;
}

std::int64_t SqliteJobStore::pending(const std::vector<std::string>& types,
                                     const std::vector<std::string>& queues) {
  Use q(
      stmt("SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE state IN ('scheduled', 'available', 'running', "
           "'retryable') AND type IN (SELECT value FROM json_each(?1)) "
           "AND (?2 IS NULL OR queue IN (SELECT value FROM json_each(?2))) LIMIT 1)"));
  q->bind(1, string_array(types).dump());
  if (queues.empty()) {
    q->bind(2);
  } else {
    q->bind(2, string_array(queues).dump());
  }
  q->executeStep();
  return q->getColumn(0).getInt64();
}

void SqliteJobStore::add_timeline(JobId id, Micros at, const std::string& kind, const std::string& detail) {
  Use t(stmt("INSERT INTO job_timeline (job_id, at_us, kind, detail) VALUES (?, ?, ?, ?)"));
  t->bind(1, id);
  t->bind(2, at);
  t->bind(3, kind);
  t->bind(4, detail);
  t->exec();
}

}  // namespace ratchet::store
