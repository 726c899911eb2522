// The ordered schema migrations. Migration N brings user_version from N-1 to
// N; a released migration is never edited, only followed by a new one.
#include "store/sqlite/schema.hpp"

namespace ratchet::store {

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> kMigrations{
      {1, R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  type TEXT NOT NULL,
  queue TEXT NOT NULL,
  args TEXT NOT NULL,
  state TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0,
  run_at_us INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  resume INTEGER NOT NULL DEFAULT 0,
  unique_key TEXT,
  lease_owner TEXT,
  lease_expires_us INTEGER,
  lease_expiries INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  last_error TEXT,
  created_us INTEGER NOT NULL,
  updated_us INTEGER NOT NULL,
  finished_us INTEGER
);
CREATE INDEX jobs_ready ON jobs(priority, run_at_us, id) WHERE state IN ('scheduled', 'available', 'retryable');
CREATE INDEX jobs_leases ON jobs(lease_expires_us) WHERE state = 'running';
CREATE UNIQUE INDEX jobs_unique_live ON jobs(unique_key)
  WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', 'running', 'retryable');
CREATE INDEX jobs_finished ON jobs(finished_us) WHERE finished_us IS NOT NULL;
CREATE INDEX jobs_state ON jobs(state, id);

CREATE TABLE steps (
  job_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  output TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  started_us INTEGER,
  finished_us INTEGER,
  last_error TEXT,
  PRIMARY KEY (job_id, name)
) WITHOUT ROWID;

CREATE TABLE job_errors (
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  step TEXT,
  error TEXT NOT NULL,
  at_us INTEGER NOT NULL
);
CREATE INDEX job_errors_job ON job_errors(job_id);

CREATE TABLE job_timeline (
  job_id INTEGER NOT NULL,
  at_us INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT
);
CREATE INDEX job_timeline_job ON job_timeline(job_id, at_us);

CREATE TABLE limiter_state (key TEXT PRIMARY KEY, tat_us INTEGER, window_start_us INTEGER, window_count INTEGER, updated_us INTEGER NOT NULL);
CREATE TABLE limiter_calls (key TEXT NOT NULL, at_us INTEGER NOT NULL);
CREATE INDEX limiter_calls_key_at ON limiter_calls(key, at_us);
)sql"},
      // Claims read the due jobs of one priority at a time, resumed jobs
      // (parked or released mid-run, often holding a reserved limiter slot)
      // before fresh ones; each read is a range seek, so jobs scheduled far
      // ahead are never scanned.
      {2, R"sql(
DROP INDEX jobs_ready;
CREATE INDEX jobs_due ON jobs(priority, resume, run_at_us, id) WHERE state IN ('scheduled', 'available', 'retryable');
)sql"},
      // Every claim of a job takes the next token; each write of the run
      // that holds the claim names its token, so a run whose lease expired
      // cannot write once the job was claimed again, even by the same owner.
      {3, R"sql(
ALTER TABLE jobs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
)sql"},
      // Crash quarantine (store/quarantine.hpp): a job whose lease expired
      // beside other jobs is a suspect, claimed one at a time; crashes_alone
      // counts the expiries counted against it. lease_crashes keeps each
      // lease owner's expired jobs, so one dead process's jobs are judged
      // together.
      {4, R"sql(
ALTER TABLE jobs ADD COLUMN suspect INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN crashes_alone INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_suspects ON jobs(crashes_alone, run_at_us, id) WHERE suspect = 1 AND state IN ('scheduled', 'available', 'retryable');
CREATE TABLE lease_crashes (owner TEXT NOT NULL, job_id INTEGER NOT NULL, suspect INTEGER NOT NULL, at_us INTEGER NOT NULL);
CREATE INDEX lease_crashes_owner ON lease_crashes(owner);
CREATE INDEX lease_crashes_at ON lease_crashes(at_us);
)sql"},
      // Database-scope limits count a call when it really started
      // (limiter_starts, started_tat_us), apart from the slots granted. The
      // recent starts of process-scope limits are kept so that a restarted
      // process resumes their windows (limiter_journal), with the starts a
      // process may make before it next saves them (limiter_leases).
      {5, R"sql(
ALTER TABLE limiter_state ADD COLUMN started_tat_us INTEGER;
CREATE TABLE limiter_starts (key TEXT NOT NULL, at_us INTEGER NOT NULL);
CREATE INDEX limiter_starts_key_at ON limiter_starts(key, at_us);
-- What an older version logged counts as started: a little slower once, never faster.
INSERT INTO limiter_starts(key, at_us) SELECT key, at_us FROM limiter_calls;
CREATE TABLE limiter_journal (owner TEXT NOT NULL, at_us INTEGER NOT NULL);
CREATE INDEX limiter_journal_owner_at ON limiter_journal(owner, at_us);
CREATE TABLE limiter_leases (owner TEXT NOT NULL, instance TEXT NOT NULL, until_us INTEGER NOT NULL,
  calls INTEGER NOT NULL, PRIMARY KEY (owner, instance)) WITHOUT ROWID;
)sql"},
      // The base of the running boot's timeline (ratchet/clock.hpp): every
      // process on the machine reads its time as CLOCK_BOOTTIME plus this,
      // so they agree, and a wall-clock step moves none of them.
      {6, R"sql(
CREATE TABLE machine_clock (boot_id TEXT PRIMARY KEY, base_ns INTEGER NOT NULL) WITHOUT ROWID;
)sql"},
      // Values kept once per database, such as the random salt of the keyed
      // hash that names a limit's key when the key is a secret.
      {7, R"sql(
CREATE TABLE database_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
)sql"},
      // Attempt errors by time, for the failures per minute the dashboard
      // charts (Engine::activity); and what each running engine last
      // reported of what only it knows (Engine::reports).
      {8, R"sql(
CREATE INDEX job_errors_at ON job_errors(at_us);
CREATE TABLE engine_reports (worker TEXT PRIMARY KEY, updated_us INTEGER NOT NULL, report TEXT NOT NULL)
  WITHOUT ROWID;
)sql"},
      // The turns that processes sharing a database-scope limit take
      // between their keys (limit/turn_shares.hpp).
      {9, R"sql(
CREATE TABLE limiter_turns (name TEXT NOT NULL, owner TEXT NOT NULL, pass REAL NOT NULL, weight REAL NOT NULL,
  until_us INTEGER NOT NULL, PRIMARY KEY (name, owner)) WITHOUT ROWID;
)sql"},
      // Which process parked a job (ClaimRequest::others_parked_after).
      {10, R"sql(
ALTER TABLE jobs ADD COLUMN parked_by TEXT;
CREATE INDEX jobs_parked_by ON jobs(parked_by) WHERE parked_by IS NOT NULL;
)sql"},
      // A journaled call is one row with the units it cost: saved as one
      // row per unit, a call of 10,000 units took longer to save than a
      // count may age before its request leaves. A row written before
      // counted one unit.
      {11, R"sql(
ALTER TABLE limiter_journal ADD COLUMN units INTEGER NOT NULL DEFAULT 1;
)sql"},
  };
  return kMigrations;
}

}  // namespace ratchet::store
