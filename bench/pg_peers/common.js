// What both peer benchmarks share: options, the worker processes (forked
// with an IPC channel: "ready", then "go", then "stop", then the figures
// back) and the RESULT line that tools/bench_pg.sh gathers into its table.
'use strict'

const { fork } = require('node:child_process')
const fs = require('node:fs')
const pg = require('pg')

function options (argv) {
  const o = { url: process.env.DATABASE_URL, jobs: 10000, processes: 1, concurrency: 32, child: false, mode: undefined }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => argv[++i]
    if (a === '--url') o.url = next()
    else if (a === '--jobs') o.jobs = Number(next())
    else if (a === '--processes') o.processes = Number(next())
    else if (a === '--concurrency') o.concurrency = Number(next())
    else if (a === '--schema') o.schema = next()
    else if (a === '--child') o.child = true
    else if (a === '--mode') o.mode = next()
    else throw new Error(`unknown argument ${a}`)
  }
  if (!o.url) throw new Error('--url postgresql://... (or DATABASE_URL) is required')
  if (o.concurrency % o.processes !== 0) throw new Error('the concurrency must divide by the process count')
  return o
}

function vmhwmKib () {
  const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
  return m ? Number(m[1]) : 0
}

// A monotonic clock shared by every process of the machine (CLOCK_MONOTONIC).
function nowNs () {
  return process.hrtime.bigint()
}

async function withClient (url, fn) {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await fn(c)
  } finally {
    await c.end()
  }
}

// The parent: forks `processes` children running this same script with
// --child, lets them go at once, asks `remaining()` every 50 ms until no job
// is left, stops them and returns their figures.
async function runChildren (script, o, remaining) {
  const children = []
  for (let i = 0; i < o.processes; i++) {
    const args = ['--child', '--url', o.url, '--schema', o.schema, '--processes', String(o.processes),
      '--concurrency', String(o.concurrency), '--jobs', String(o.jobs)]
    if (o.mode) args.push('--mode', o.mode)
    const child = fork(script, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const messages = []
    const waiters = []
    child.on('message', (m) => (waiters.length ? waiters.shift()(m) : messages.push(m)))
    child.on('exit', (code) => {
      if (code !== 0) {
        console.error(`bench: a worker process exited with ${code}`)
        process.exit(1)
      }
    })
    const next = () => (messages.length ? Promise.resolve(messages.shift()) : new Promise((resolve) => waiters.push(resolve)))
    children.push({ child, next })
  }
  for (const c of children) {
    const m = await c.next()
    if (m.type !== 'ready') throw new Error('a worker process did not get ready')
  }
  const go = nowNs()
  for (const c of children) c.child.send({ type: 'go' })
  let left
  do {
    await new Promise((resolve) => setTimeout(resolve, 50))
    left = await remaining()
  } while (left > 0)
  for (const c of children) c.child.send({ type: 'stop' })
  const done = []
  for (const c of children) done.push(await c.next())
  await Promise.all(children.map((c) => new Promise((resolve) => c.child.exitCode !== null ? resolve() : c.child.on('exit', resolve))))
  return { go, done }
}

// The child side: says ready, waits for go, runs `start()`, waits for stop,
// runs `stop()`, sends its figures.
function childProtocol (start, stop) {
  process.on('message', async (m) => {
    try {
      if (m.type === 'go') {
        await start()
      } else if (m.type === 'stop') {
        const figures = await stop()
        process.send({ type: 'done', vmhwmKib: vmhwmKib(), ...figures }, () => process.exit(0))
      }
    } catch (err) {
      console.error(err)
      process.exit(1)
    }
  })
  process.send({ type: 'ready' })
}

function resultLine (fields) {
  return 'RESULT ' + Object.entries(fields).map(([k, v]) => `${k}=${String(v).replace(/\s+/g, '_')}`).join(' ')
}

// The RESULT line of a peer's run: `done` holds each worker process's report,
// `settings` the peer's own settings, to which pg, node and durability are added.
function peerResult (system, o, done, secs, version, settings, pgVersion, sync) {
  return resultLine({
    system,
    processes: o.processes,
    concurrency: o.concurrency,
    steps: 1,
    jobs: o.jobs,
    rate: (o.jobs / secs).toFixed(1),
    vmhwm_kib: Math.max(...done.map((d) => d.vmhwmKib)),
    vmhwm_mib_each: done.map((d) => Math.round(d.vmhwmKib / 1024)).join(','),
    version,
    settings: `${settings},pg=${pgVersion},node=${process.versions.node},synchronous_commit=${sync}`
  })
}

function schemaName (prefix) {
  return `${prefix}_${process.pid}_${Date.now() % 100000}`
}

module.exports = { options, vmhwmKib, nowNs, withClient, runChildren, childProtocol, resultLine, peerResult, schemaName }
