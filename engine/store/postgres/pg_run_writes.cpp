// Run writes on PostgreSQL: the steps and completions of every run in a
// group-commit batch in one statement, not two or three round trips per job.
// Each run's fence is checked row by row, exactly as checkpoint() and
// complete() check it one at a time.
#include <unordered_map>

#include "store/postgres/arrays.hpp"
#include "store/postgres/pg_job_store.hpp"

namespace ratchet::store::pg {

std::vector<LeaseWrite> PgJobStore::write_runs(const std::vector<const RunWrite*>& runs, Micros now) {
  if (runs.empty()) return {};
  std::vector<std::int64_t> ids, tokens, done, lease_until, step_jobs, started, finished;
  std::vector<std::string> owners, results, step_names, outputs;
  for (const RunWrite* run : runs) {
    ids.push_back(run->id);
    owners.push_back(run->fence.owner);
    tokens.push_back(run->fence.token);
    done.push_back(run->result_json ? 1 : 0);
    results.push_back(run->result_json.value_or(""));
    lease_until.push_back(now + run->lease);
    for (const StepDone& step : run->steps) {
      step_jobs.push_back(run->id);
      step_names.push_back(step.step);
      outputs.push_back(step.output_json);
      started.push_back(step.started);
      finished.push_back(step.finished);
    }
  }
  // `held` renews or completes each run still under its claim; only its
  // runs' steps are written, and a completed step keeps its first output.
  // The runs are of distinct jobs, so each job's row is updated once.
  Rows r = s_.run(
      "WITH run AS (SELECT * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], "
      "  $7::bigint[]) AS r(id, owner, token, done, result, lease_until)), "
      "held AS (UPDATE ratchet_jobs j SET "
      "  state = CASE WHEN r.done = 1 THEN 'completed' ELSE j.state END, "
      "  result = CASE WHEN r.done = 1 THEN r.result ELSE j.result END, "
      "  lease_owner = CASE WHEN r.done = 1 THEN NULL ELSE j.lease_owner END, "
      "  lease_expires_us = CASE WHEN r.done = 1 THEN NULL ELSE r.lease_until END, "
      "  finished_us = CASE WHEN r.done = 1 THEN $1 ELSE j.finished_us END, "
      "  updated_us = $1 "
      "  FROM run r WHERE j.id = r.id AND j.lease_owner = r.owner AND j.lease_token = r.token "
      "  AND j.state = 'running' AND j.lease_expires_us > $1 "
      "  RETURNING j.id, j.cancel_requested, r.done), "
      "step AS (INSERT INTO ratchet_steps (job_id, name, state, output, attempts, started_us, finished_us, "
      "  last_error) SELECT s.job_id, s.name, 'completed', s.output, 1, s.started, s.finished, NULL "
      "  FROM unnest($8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::bigint[]) "
      "  AS s(job_id, name, output, started, finished) JOIN held ON held.id = s.job_id "
      "  ON CONFLICT (job_id, name) DO UPDATE SET state = 'completed', output = excluded.output, "
      "  attempts = ratchet_steps.attempts + 1, started_us = excluded.started_us, "
      "  finished_us = excluded.finished_us WHERE ratchet_steps.state <> 'completed') "
      "SELECT id, cancel_requested, done FROM held",
      {p(now), p(bigint_array(ids)), p(text_array(owners)), p(bigint_array(tokens)), p(bigint_array(done)),
       p(text_array(results)), p(bigint_array(lease_until)), p(bigint_array(step_jobs)),
       p(text_array(step_names)), p(text_array(outputs)), p(bigint_array(started)),
       p(bigint_array(finished))});
  std::unordered_map<JobId, LeaseWrite> held;
  for (int i = 0; i < r.size(); ++i) {
    // A completed run reports no cancel request, as complete() does.
    held[i64(r, i, 0)] = LeaseWrite{true, i64(r, i, 2) == 0 && i64(r, i, 1) != 0};
  }
  std::vector<LeaseWrite> out;
  out.reserve(runs.size());
  for (const RunWrite* run : runs) {
    auto it = held.find(run->id);
    out.push_back(it == held.end() ? LeaseWrite{} : it->second);
  }
  return out;
}

}  // namespace ratchet::store::pg
