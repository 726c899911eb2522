// pg-boss draining N pre-enqueued no-op jobs with P worker processes of C/P
// jobs in flight each, at its fastest polling setting.
//
//   node pg_boss.js --url URL --jobs N --processes P --concurrency C [--mode batch|workers|batch-notify]
//
// pg-boss 10 has no teamSize: a worker (one work() call) fetches up to
// batchSize jobs, runs the handler on them and waits out the rest of its
// polling interval (0.5 s at the least) before fetching again. --mode batch
// (the default): one worker per process fetching C/P jobs at a time;
// --mode workers: C/P workers per process fetching one job at a time;
// --mode batch-notify: as batch, and the handler calls notifyWorker(id)
// after each batch so the worker fetches again at once (an API call, not a
// setting: shown for reference).
// pg-boss completes a batch without waiting for it, so jobs/s is counted
// from the go to the latest completed_on the database holds.
//
// Prints one line: RESULT system=pg-boss version=... rate=... vmhwm_kib=... settings=...
'use strict'

const PgBoss = require('pg-boss')
const version = require('pg-boss/package.json').version
const pgVersion = require('pg/package.json').version
const common = require('./common')

const POLLING_INTERVAL_SECONDS = 0.5 // the least pg-boss 10 accepts

function settings (o) {
  const w = o.concurrency / o.processes
  const oneEach = o.mode === 'workers'
  return {
    notify: o.mode === 'batch-notify',
    workers: oneEach ? w : 1,
    batchSize: oneEach ? 1 : w,
    pollingIntervalSeconds: POLLING_INTERVAL_SECONDS,
    max: w + 2,
    supervise: false,
    schedule: false
  }
}

function boss (o, extra) {
  const s = settings(o)
  const b = new PgBoss({
    connectionString: o.url,
    schema: o.schema,
    max: s.max,
    supervise: s.supervise,
    schedule: s.schedule,
    ...extra
  })
  b.on('error', (err) => console.error(`pg-boss: ${err.message}`))
  return b
}

async function child (o) {
  const s = settings(o)
  const b = boss(o, { migrate: false })
  await b.start()
  let handled = 0
  common.childProtocol(
    async () => {
      for (let i = 0; i < s.workers; i++) {
        let id
        id = await b.work('noop', { batchSize: s.batchSize, pollingIntervalSeconds: s.pollingIntervalSeconds },
          async (jobs) => {
            handled += jobs.length
            // notify: fetch again at once after a batch instead of waiting out the interval.
            if (s.notify && id !== undefined) b.notifyWorker(id)
          })
      }
    },
    async () => {
      await b.stop({ graceful: true, wait: true, timeout: 5000 })
      return { completed: handled, lastNs: '0' }
    }
  )
}

async function parent (o) {
  if (o.mode === undefined) o.mode = 'batch'
  o.schema = common.schemaName('pgboss_bench')
  const b = boss(o, {})
  await b.start()
  await b.createQueue('noop')
  for (let i = 0; i < o.jobs; i += 10000) {
    const n = Math.min(10000, o.jobs - i)
    await b.insert(Array.from({ length: n }, () => ({ name: 'noop', data: {} })))
  }
  await b.stop({ graceful: false, wait: true })
  const counter = new (require('pg').Client)({ connectionString: o.url })
  await counter.connect()
  const sync = (await counter.query('SHOW synchronous_commit')).rows[0].synchronous_commit
  const q = `"${o.schema}"`
  const goWallMs = Date.now()
  const { done } = await common.runChildren(__filename, o,
    async () => Number((await counter.query(`SELECT count(*) AS n FROM ${q}.job WHERE name = 'noop' AND state <> 'completed'`)).rows[0].n))
  const end = (await counter.query(
    `SELECT count(*) AS n, extract(epoch FROM max(completed_on)) * 1000 AS last_ms FROM ${q}.job WHERE name = 'noop' AND state = 'completed'`)).rows[0]
  await counter.query('SET client_min_messages = warning')
  await counter.query(`DROP SCHEMA ${q} CASCADE`)
  await counter.end()
  if (Number(end.n) !== o.jobs) throw new Error(`expected ${o.jobs} completed jobs, the database has ${end.n}`)
  const secs = (Number(end.last_ms) - goWallMs) / 1000
  const s = settings(o)
  console.log(common.peerResult('pg-boss', o, done, secs, version,
    `mode=${o.mode},notifyWorker=${s.notify},workers=${s.workers}/process,batchSize=${s.batchSize},` +
      `pollingIntervalSeconds=${s.pollingIntervalSeconds},max=${s.max},supervise=false,schedule=false`, pgVersion, sync))
}

const o = common.options(process.argv.slice(2))
;(o.child ? child(o) : parent(o)).catch((err) => {
  console.error(err)
  process.exit(1)
})
