// Migration N brings ratchet_schema.version from N-1 to N; a released
// migration is never edited, only followed by a new one.
#include "store/postgres/pg_schema.hpp"

#include <vector>

namespace ratchet::store::pg {
namespace {

struct Migration {
  int version;
  const char* sql;
};

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> kMigrations{
      {1, R"sql(
CREATE TABLE ratchet_jobs (
  id BIGSERIAL PRIMARY KEY,
  type TEXT NOT NULL,
  queue TEXT NOT NULL,
  args TEXT NOT NULL,
  state TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0,
  run_at_us BIGINT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  resume SMALLINT NOT NULL DEFAULT 0,
  unique_key TEXT,
  lease_owner TEXT,
  lease_token BIGINT NOT NULL DEFAULT 0,
  lease_expires_us BIGINT,
  lease_expiries INTEGER NOT NULL DEFAULT 0,
  cancel_requested SMALLINT NOT NULL DEFAULT 0,
  suspect SMALLINT NOT NULL DEFAULT 0,
  crashes_alone INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  last_error TEXT,
  created_us BIGINT NOT NULL,
  updated_us BIGINT NOT NULL,
  finished_us BIGINT
);
-- Claims walk this index in claim order (priority, resumed first, run-at, id).
CREATE INDEX ratchet_jobs_due ON ratchet_jobs (priority, resume DESC, run_at_us, id)
  WHERE state IN ('scheduled', 'available', 'retryable') AND suspect = 0;
-- When the next job falls due: the first entry past now.
CREATE INDEX ratchet_jobs_run_at ON ratchet_jobs (run_at_us) WHERE state IN ('scheduled', 'available', 'retryable');
CREATE INDEX ratchet_jobs_suspects ON ratchet_jobs (crashes_alone, run_at_us, id)
  WHERE suspect = 1 AND state IN ('scheduled', 'available', 'retryable');
CREATE INDEX ratchet_jobs_leases ON ratchet_jobs (lease_expires_us) WHERE state = 'running';
CREATE INDEX ratchet_jobs_owners ON ratchet_jobs (lease_owner) WHERE state = 'running';
CREATE UNIQUE INDEX ratchet_jobs_unique_live ON ratchet_jobs (unique_key)
  WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', 'running', 'retryable');
CREATE INDEX ratchet_jobs_finished ON ratchet_jobs (finished_us) WHERE finished_us IS NOT NULL;
CREATE INDEX ratchet_jobs_state ON ratchet_jobs (state, id);

CREATE TABLE ratchet_steps (
  job_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  output TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  started_us BIGINT,
  finished_us BIGINT,
  last_error TEXT,
  PRIMARY KEY (job_id, name)
);
CREATE TABLE ratchet_job_errors (
  seq BIGSERIAL PRIMARY KEY,
  job_id BIGINT NOT NULL,
  attempt INTEGER NOT NULL,
  step TEXT,
  error TEXT NOT NULL,
  at_us BIGINT NOT NULL
);
CREATE INDEX ratchet_job_errors_job ON ratchet_job_errors (job_id);
CREATE TABLE ratchet_job_timeline (
  seq BIGSERIAL PRIMARY KEY,
  job_id BIGINT NOT NULL,
  at_us BIGINT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT
);
CREATE INDEX ratchet_job_timeline_job ON ratchet_job_timeline (job_id, at_us);
CREATE TABLE ratchet_lease_crashes (
  owner TEXT NOT NULL,
  job_id BIGINT NOT NULL,
  suspect SMALLINT NOT NULL,
  at_us BIGINT NOT NULL
);
CREATE INDEX ratchet_lease_crashes_owner ON ratchet_lease_crashes (owner);
CREATE INDEX ratchet_lease_crashes_at ON ratchet_lease_crashes (at_us);

CREATE TABLE ratchet_limiter_state (
  key TEXT PRIMARY KEY,
  tat_us BIGINT,
  updated_us BIGINT NOT NULL,
  started_tat_us BIGINT
);
CREATE TABLE ratchet_limiter_calls (seq BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, at_us BIGINT NOT NULL);
CREATE INDEX ratchet_limiter_calls_key_at ON ratchet_limiter_calls (key, at_us);
CREATE TABLE ratchet_limiter_starts (seq BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, at_us BIGINT NOT NULL);
CREATE INDEX ratchet_limiter_starts_key_at ON ratchet_limiter_starts (key, at_us);
CREATE TABLE ratchet_limiter_journal (owner TEXT NOT NULL, at_us BIGINT NOT NULL);
CREATE INDEX ratchet_limiter_journal_owner_at ON ratchet_limiter_journal (owner, at_us);
CREATE TABLE ratchet_limiter_leases (
  owner TEXT NOT NULL,
  instance TEXT NOT NULL,
  until_us BIGINT NOT NULL,
  calls BIGINT NOT NULL,
  PRIMARY KEY (owner, instance)
);
CREATE TABLE ratchet_machine_clock (boot_id TEXT PRIMARY KEY, base_ns BIGINT NOT NULL);
)sql"},
      // Values kept once per database, such as the random salt of the keyed
      // hash that names a limit's key when the key is a secret.
      {2, R"sql(
CREATE TABLE ratchet_database_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql"},
      // Attempt errors by time, for the failures per minute the dashboard
      // charts (Engine::activity); and what each running engine last
      // reported of what only it knows (Engine::reports).
      {3, R"sql(
CREATE INDEX ratchet_job_errors_at ON ratchet_job_errors (at_us);
CREATE TABLE ratchet_engine_reports (worker TEXT PRIMARY KEY, updated_us BIGINT NOT NULL, report TEXT NOT NULL);
)sql"},
      // The turns that processes sharing a database-scope limit take
      // between their keys (limit/turn_shares.hpp).
      {4, R"sql(
CREATE TABLE ratchet_limiter_turns (
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  pass DOUBLE PRECISION NOT NULL,
  weight DOUBLE PRECISION NOT NULL,
  until_us BIGINT NOT NULL,
  PRIMARY KEY (name, owner)
);
)sql"},
      // Which process parked a job (ClaimRequest::others_parked_after).
      {5, R"sql(
ALTER TABLE ratchet_jobs ADD COLUMN parked_by TEXT;
CREATE INDEX ratchet_jobs_parked_by ON ratchet_jobs (parked_by) WHERE parked_by IS NOT NULL;
)sql"},
      // A journaled call is one row with the units it cost (see the SQLite
      // schema's migration 11).
      {6, R"sql(
ALTER TABLE ratchet_limiter_journal ADD COLUMN units BIGINT NOT NULL DEFAULT 1;
)sql"},
  };
  return kMigrations;
}

// Every table the migrations make, as a PostgreSQL array literal.
constexpr const char* kTables =
    "{ratchet_jobs,ratchet_steps,ratchet_job_errors,ratchet_job_timeline,ratchet_lease_crashes,"
    "ratchet_limiter_state,ratchet_limiter_calls,ratchet_limiter_starts,ratchet_limiter_journal,"
    "ratchet_limiter_leases,ratchet_machine_clock,ratchet_database_meta,ratchet_engine_reports,"
    "ratchet_limiter_turns}";

// Any constant: processes that migrate at once queue on it.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(7261636865740001)";

}  // namespace

int pg_schema_version() noexcept { return migrations().back().version; }

Status migrate_schema(Session& s, bool migrate) {
  const std::string where = s.connection().target();
  if (migrate) s.run(kMigrationLock);
  // Tables under ratchet's names (ratchet_*) in the schema its tables would
  // go to, beside an application's own (which ratchet leaves alone).
  Rows tables = s.run(
      "SELECT to_regclass('ratchet_schema') IS NOT NULL, COALESCE((SELECT string_agg(relname, ', ' ORDER BY "
      "relname) FROM pg_class WHERE relnamespace = to_regnamespace(current_schema()) AND relkind IN ('r', "
      "'p', 'v', 'm', 'f') AND relname LIKE 'ratchet\\_%' AND relname <> 'ratchet_schema'), '')");
  const bool has_version = text(tables, 0, 0) == "t";
  const std::string ours = text(tables, 0, 1);
  if (!has_version && !ours.empty()) {
    return fail(Error::database("PostgreSQL " + where +
                                ": the schema has tables that ratchet did not create (" + ours +
                                "; no ratchet_schema table); point ratchet at another database or schema, "
                                "or move those tables away"));
  }
  int version = 0;
  if (has_version) {
    Rows v = s.run("SELECT max(version) FROM ratchet_schema");
    version = static_cast<int>(opt_i64(v, 0, 0).value_or(0));
  }
  if (version > pg_schema_version()) {
    return fail(Error::database("PostgreSQL " + where +
                                ": the database was written by a newer ratchet (schema " +
                                std::to_string(version) + ", this build knows up to " +
                                std::to_string(pg_schema_version()) + "); upgrade ratchet"));
  }
  if (version == pg_schema_version()) {
    // A table dropped or renamed by hand: refused here, naming it, rather
    // than by the first write that needs it, seconds into a run.
    Rows missing = s.run(
        "SELECT string_agg(t, ', ' ORDER BY t) FROM unnest($1::text[]) AS t "
        "WHERE to_regclass(quote_ident(current_schema()) || '.' || t) IS NULL",
        {p(std::string(kTables))});
    if (const std::string gone = text(missing, 0, 0); !gone.empty()) {
      return fail(Error::database("PostgreSQL " + where + ": ratchet's tables " + gone +
                                  " are missing from a schema at version " + std::to_string(version) +
                                  " (dropped or renamed by hand?); restore them, or point ratchet at a "
                                  "fresh schema"));
    }
    return {};
  }
  if (!migrate) {
    return fail(Error::database("PostgreSQL " + where + ": the schema is at version " +
                                std::to_string(version) + ", not " + std::to_string(pg_schema_version()) +
                                "; open it once with a ratchet that migrates it"));
  }
  if (!has_version) s.simple("CREATE TABLE ratchet_schema (version INTEGER NOT NULL)");
  for (const Migration& m : migrations()) {
    if (m.version <= version) continue;
    s.simple(m.sql);
    s.run("INSERT INTO ratchet_schema (version) VALUES ($1)", {p(std::int64_t{m.version})});
  }
  return {};
}

}  // namespace ratchet::store::pg
