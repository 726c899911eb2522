// graphile-worker draining N pre-enqueued no-op jobs with P worker
// processes of C/P concurrent jobs each, at its fastest polling setting.
//
//   node graphile_worker.js --url URL --jobs N --processes P --concurrency C
//
// Prints one line: RESULT system=graphile-worker version=... rate=... (jobs/s
// from the go to the last job:complete, which graphile-worker emits once the
// job's completion has committed) vmhwm_kib=... settings=...
'use strict'

const { EventEmitter } = require('node:events')
const { run, runMigrations, Logger } = require('graphile-worker')
const version = require('graphile-worker/package.json').version
const pgVersion = require('pg/package.json').version
const common = require('./common')

const POLL_INTERVAL_MS = 10 // only used when a worker finds no job; new jobs also arrive by LISTEN/NOTIFY

const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`graphile-worker: ${message}`)
})

function settings (o) {
  const w = o.concurrency / o.processes
  return { concurrency: w, pollInterval: POLL_INTERVAL_MS, maxPoolSize: w + 1 }
}

async function child (o) {
  const events = new EventEmitter()
  let completed = 0
  let lastNs = 0n
  events.on('job:complete', ({ error }) => {
    if (!error) {
      completed++
      lastNs = common.nowNs()
    }
  })
  let runner
  common.childProtocol(
    async () => {
      runner = await run({
        connectionString: o.url,
        schema: o.schema,
        ...settings(o),
        noHandleSignals: true,
        logger: quiet,
        events,
        taskList: { noop: async () => {} }
      })
    },
    async () => {
      await runner.stop()
      return { completed, lastNs: lastNs.toString() }
    }
  )
}

async function parent (o) {
  o.schema = common.schemaName('gw_bench')
  await runMigrations({ connectionString: o.url, schema: o.schema, logger: quiet })
  const q = `"${o.schema}"`
  let sync
  await common.withClient(o.url, async (c) => {
    sync = (await c.query('SHOW synchronous_commit')).rows[0].synchronous_commit
    for (let i = 0; i < o.jobs; i += 10000) {
      const n = Math.min(10000, o.jobs - i)
      await c.query(
        `SELECT count(*) FROM ${q}.add_jobs((SELECT array_agg(ROW('noop', '{}'::json, NULL, NULL, NULL, NULL, ` +
        `NULL, NULL)::${q}.job_spec) FROM generate_series(1, $1)))`, [n])
    }
  })
  const counter = new (require('pg').Client)({ connectionString: o.url })
  await counter.connect()
  const { go, done } = await common.runChildren(__filename, o,
    async () => Number((await counter.query(`SELECT count(*) AS n FROM ${q}._private_jobs`)).rows[0].n))
  await counter.query('SET client_min_messages = warning')
  await counter.query(`DROP SCHEMA ${q} CASCADE`)
  await counter.end()
  const completed = done.reduce((a, d) => a + d.completed, 0)
  if (completed !== o.jobs) throw new Error(`expected ${o.jobs} completions, the workers report ${completed}`)
  const last = done.reduce((a, d) => (BigInt(d.lastNs) > a ? BigInt(d.lastNs) : a), 0n)
  const secs = Number(last - go) / 1e9
  const s = settings(o)
  console.log(common.peerResult('graphile-worker', o, done, secs, version,
    `concurrency=${s.concurrency}/process,pollInterval=${s.pollInterval}ms,maxPoolSize=${s.maxPoolSize}`, pgVersion, sync))
}

const o = common.options(process.argv.slice(2))
;(o.child ? child(o) : parent(o)).catch((err) => {
  console.error(err)
  process.exit(1)
})
