// Browser tests of the `ratchet web` dashboard: headless Chromium, driven by
// puppeteer-core, against a running server and whatever jobs its database
// holds. Each page is compared with the API's own JSON, fetched here with
// the bearer token.
//
//   RATCHET_WEB_URL      the server, e.g. http://127.0.0.1:8077 (required)
//   RATCHET_WEB_TOKEN    its access token (required)
//   RATCHET_SCREENSHOTS  a folder for overview.png, jobs.png, job.png,
//                        plugins.png, limits.png (optional)
//   CHROMIUM             the browser (default /usr/bin/chromium)
//   RATCHET_PARKED_PLUGIN a throttled plugin a running engine works, and
//   RATCHET_ENQUEUE_PARKED a command that enqueues one more job behind it:
//                        the overview's parked count must then rise
//                        (optional; the test is skipped without them)
//
// The database is expected to hold some completed jobs, some dead jobs of
// type rate_movie, a pending job that can be cancelled and jobs parked
// behind a throttled plugin. The Retry and Cancel tests change one job each.
//
// Run: node --test dashboard.test.mjs   (or ./run.sh)
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { execSync } from 'node:child_process';

const URL_ = (process.env.RATCHET_WEB_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.RATCHET_WEB_TOKEN || '';
const SHOTS = process.env.RATCHET_SCREENSHOTS || '';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const STATES = ['scheduled', 'available', 'running', 'retryable', 'completed', 'dead', 'cancelled'];
const NOT_LOGGED_IN = 'Not logged in: open the login link ratchet web printed';

if (!URL_ || !TOKEN) {
  throw new Error('Set RATCHET_WEB_URL (e.g. http://127.0.0.1:8077) and RATCHET_WEB_TOKEN to run the dashboard tests');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The API as a script sees it: bearer token, JSON.
async function api(pathname, init = {}) {
  const res = await fetch(URL_ + pathname, {
    ...init,
    headers: { Authorization: `Bearer ${TOKEN}`, Accept: 'application/json', ...(init.headers || {}) },
  });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = text; }
  if (!res.ok) {
    const e = new Error(`${init.method || 'GET'} ${pathname}: ${res.status} ${text}`);
    e.status = res.status;
    throw e;
  }
  return body;
}

// Runs `check` (which asserts) until it passes or `timeout` ms pass; the page
// and the database may move on between two reads, so equality is awaited.
async function eventually(check, { timeout = 8000, interval = 250 } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > end) throw e;
    }
    await sleep(interval);
  }
}

let browser;
let page;
let profile;
let session;
const pageErrors = [];

async function go(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction((h) => location.hash === h, {}, hash);
}

async function screenshot(name) {
  if (!SHOTS) return;
  await mkdir(SHOTS, { recursive: true });
  await sleep(150);  // let the last redraw paint
  await page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
}

const text = (selector) => page.$eval(selector, (e) => e.textContent.trim());
const rowsOf = (selector) => page.$$eval(selector, (rows) => rows.map((r) => ({ ...r.dataset })));
const jobRows = () => page.$$eval('[data-testid="jobs"] tbody tr[data-testid^="job-row-"]',
  (rows) => rows.map((r) => ({ id: Number(r.dataset.id), state: r.dataset.state, testid: r.dataset.testid })));

function visible(selector) {
  return page.$eval(selector, (e) => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)).catch(() => false);
}

// Clicks `selector`, answers the confirm dialog it opens, returns its text.
async function clickAndAnswer(selector, accept) {
  const dialog = new Promise((resolve) => {
    page.once('dialog', async (d) => {
      const message = d.message();
      const type = d.type();
      if (accept) await d.accept(); else await d.dismiss();
      resolve({ message, type });
    });
  });
  await page.click(selector);
  const d = await Promise.race([dialog, sleep(5000).then(() => null)]);
  assert.ok(d, `clicking ${selector} opened no confirmation dialog`);
  assert.equal(d.type, 'confirm');
  return d.message;
}

describe('ratchet web dashboard', { concurrency: false }, () => {
  before(async () => {
    profile = await mkdtemp(path.join(tmpdir(), 'ratchet-browser-'));
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', `--user-data-dir=${profile}`],
      defaultViewport: { width: 1280, height: 900 },
    });
    page = await browser.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    session = await api('/api/v1/session');
  });

  after(async () => {
    if (browser) await browser.close();
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  test('the login link sets the session and opens the dashboard', async () => {
    const res = await page.goto(`${URL_}/login?token=${encodeURIComponent(TOKEN)}`, { waitUntil: 'load' });
    assert.ok(res.ok(), `GET /login answered ${res.status()}`);
    assert.equal(new URL(page.url()).pathname, '/', 'the login link should end on the dashboard');
    await page.waitForSelector('[data-testid="page-overview"]');
    for (const p of ['overview', 'jobs', 'plugins', 'limits']) {
      assert.ok(await page.$(`[data-testid="nav-${p}"]`), `the nav bar has no link to ${p}`);
    }
    assert.equal(await visible('[data-testid="not-logged-in"]'), false);
    // The header names the database the session reports.
    await page.waitForFunction((db) => document.querySelector('[data-testid="database"]').textContent.includes(db), {}, session.database);
  });

  test('overview: the count of every state equals the API\'s', async () => {
    await go('#/');
    await page.waitForSelector('[data-testid="count-completed"][data-count]:not([data-count=""])');
    await eventually(async () => {
      const { counts } = await api('/api/v1/overview');
      const shown = {};
      for (const s of STATES) shown[s] = Number(await text(`[data-testid="count-${s}-value"]`));
      const want = {};
      for (const s of STATES) want[s] = counts[s] ?? 0;
      assert.deepEqual(shown, want);
    });
  });

  test('overview: the running and scheduled counts equal the API\'s', async () => {
    await eventually(async () => {
      const { counts } = await api('/api/v1/overview');
      const running = Number(await text('[data-testid="count-running-value"]'));
      const scheduled = Number(await text('[data-testid="count-scheduled-value"]'));
      assert.equal(running, counts.running ?? 0, 'running');
      assert.equal(scheduled, counts.scheduled ?? 0, 'scheduled');
    });
  });

  test('overview: the chart of the last hour and the throttled table follow the API', async () => {
    await page.waitForSelector('svg[data-testid="minutes-chart"]');
    await eventually(async () => {
      const o = await api('/api/v1/overview');
      assert.equal(Number(await page.$eval('svg[data-testid="minutes-chart"]', (e) => e.dataset.minutes)), o.minutes.length);
      // A server that counts 429s per minute gets a fourth series.
      const keys = ['completed', 'failed', 'dead', ...(o.minutes.some((m) => 'throttled' in m) ? ['throttled'] : [])];
      for (const k of keys) {
        const sum = o.minutes.reduce((a, m) => a + (Number(m[k]) || 0), 0);
        assert.equal(Number(await text(`[data-testid="total-${k}"]`)), sum, `total ${k} in the last hour`);
      }
      const bars = await page.$$eval('svg[data-testid="minutes-chart"] rect.bar', (r) => r.length);
      const nonZero = o.minutes.reduce((a, m) => a + keys.filter((k) => Number(m[k]) > 0).length, 0);
      assert.equal(bars, nonZero, 'one bar per non-zero value');
      const rows = await rowsOf('[data-testid="throttled"] tbody tr[data-testid="throttled-row"]');
      assert.deepEqual(rows.map((r) => r.plugin), o.throttled.map((l) => l.plugin));
      // What running engines report, when the server has it.
      if (Array.isArray(o.engines)) {
        const engines = await rowsOf('[data-testid="engines"] tbody tr[data-testid="engine-row"]');
        assert.deepEqual(engines.map((e) => e.running), o.engines.map((e) => String(!!e.running)));
      }
      if (Array.isArray(o.plugins)) {
        const calls = await rowsOf('[data-testid="calls"] tbody tr[data-testid="calls-row"]');
        assert.deepEqual(calls.map((c) => c.plugin), o.plugins.map((p) => p.plugin));
      }
    });
    await screenshot('overview.png');
  });

  test('overview: the parked count of a throttled plugin rises while its steps wait', async (t) => {
    const plugin = process.env.RATCHET_PARKED_PLUGIN;
    const enqueue = process.env.RATCHET_ENQUEUE_PARKED;
    if (!plugin || !enqueue) {
      t.skip('RATCHET_PARKED_PLUGIN and RATCHET_ENQUEUE_PARKED are not set');
      return;
    }
    await go('#/');
    const parkedOnPage = async () => {
      const cell = await page.$(`[data-testid="calls"] tr[data-testid="calls-row"][data-plugin="${plugin}"] td:last-child`);
      assert.ok(cell, `the overview lists no calls of ${plugin}`);
      return Number(await cell.evaluate((e) => e.textContent));
    };
    // The page shows what the API says before anything changes.
    const start = await eventually(async () => {
      const o = await api('/api/v1/overview');
      const p = (o.plugins || []).find((x) => x.plugin === plugin);
      assert.ok(p, `no running engine reports ${plugin}: ${JSON.stringify(o.plugins)}`);
      const shown = await parkedOnPage();
      assert.equal(shown, Number(p.parked_now));
      return shown;
    });
    execSync(enqueue, { stdio: 'ignore' });
    await eventually(async () => assert.ok(await parkedOnPage() > start, `parked count still ${start}`),
      { timeout: 15000 });
  });

  test('overview: a state\'s count links to the jobs list filtered by that state', async () => {
    await page.click('[data-testid="count-dead"]');
    await page.waitForFunction(() => location.hash === '#/jobs?state=dead');
    await page.waitForSelector('[data-testid="page-jobs"]');
    assert.equal(await page.$eval('[data-testid="filter-state"]', (e) => e.value), 'dead');
  });

  test('jobs list: the rows are the API\'s first page, newest first', async () => {
    await go('#/jobs');
    await page.waitForSelector('[data-testid="jobs"]');
    const { jobs } = await eventually(async () => {
      const r = await api('/api/v1/jobs');
      const rows = await jobRows();
      assert.deepEqual(rows.map((x) => x.id), r.jobs.map((j) => j.id));
      assert.deepEqual(rows.map((x) => x.state), r.jobs.map((j) => j.state));
      return r;
    });
    assert.ok(jobs.length > 0, 'the database holds no job: the harness should enqueue some');
    // The cells of the newest job: id link, type, queue, attempt/max.
    const j = jobs[0];
    const cells = await page.$$eval(`[data-testid="job-row-${j.id}"] td`, (tds) => tds.map((t) => t.textContent.trim()));
    assert.equal(cells[0], String(j.id));
    assert.equal(cells[1], j.type);
    assert.equal(cells[2], j.queue);
    assert.equal(cells[3].split(/\s/)[0], j.state);
    assert.equal(cells[4], `${j.attempt}/${j.max_attempts}`);
    assert.equal(await page.$eval(`[data-testid="job-row-${j.id}"] a`, (a) => a.getAttribute('href')), `#/jobs/${j.id}`);
    await screenshot('jobs.png');
  });

  test('jobs list: filtering by state=dead shows only dead rows', async () => {
    await go('#/jobs');
    await page.waitForSelector('[data-testid="filter-state"]');
    await page.select('[data-testid="filter-state"]', 'dead');
    await page.click('[data-testid="filter-apply"]');
    await page.waitForFunction(() => location.hash === '#/jobs?state=dead');
    const r = await eventually(async () => {
      const api_ = await api('/api/v1/jobs?state=dead');
      const rows = await jobRows();
      assert.deepEqual(rows.map((x) => x.id), api_.jobs.map((j) => j.id));
      return api_;
    });
    assert.ok(r.jobs.length > 0, 'the database holds no dead job: the harness should enqueue some');
    const rows = await jobRows();
    assert.ok(rows.every((x) => x.state === 'dead'), `rows not dead: ${JSON.stringify(rows.filter((x) => x.state !== 'dead'))}`);
    // The badges say so too.
    const badges = await page.$$eval('[data-testid="jobs"] tbody [data-testid="state"]', (b) => b.map((e) => e.textContent));
    assert.ok(badges.length > 0 && badges.every((b) => b === 'dead'));
    if (!session.read_only) {
      assert.ok(await visible('[data-testid="retry-all"]'), 'no "Retry all dead matching this filter" button');
      assert.match(await text('[data-testid="retry-all"]'), /Retry all dead/);
    }
  });

  test('jobs list: live updates keep the filter form\'s input, focus and scrolling', async () => {
    await go('#/jobs');
    await page.waitForSelector('[data-testid="jobs"] tbody tr');
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    const scrolled = await page.evaluate(() => window.scrollY);
    await page.focus('[data-testid="filter-q"]');
    await page.keyboard.type('half-typed');
    let fetched = 0;
    const count = (req) => { if (new URL(req.url()).pathname === '/api/v1/jobs') fetched++; };
    page.on('request', count);
    await sleep(4500);
    page.off('request', count);
    assert.ok(fetched >= 1, `the page did not re-fetch /api/v1/jobs within 4.5 s (${fetched} requests)`);
    assert.equal(await page.$eval('[data-testid="filter-q"]', (e) => e.value), 'half-typed');
    assert.equal(await page.evaluate(() => document.activeElement && document.activeElement.dataset.testid), 'filter-q');
    assert.equal(await page.evaluate(() => window.scrollY), scrolled, 'the page scrolled by itself');
  });

  test('jobs list: "Older" and "Newer" page through with before/next_before', async () => {
    await go('#/jobs?limit=2');
    await page.waitForSelector('[data-testid="jobs"]');
    const first = await api('/api/v1/jobs?limit=2');
    await eventually(async () => assert.deepEqual((await jobRows()).map((x) => x.id), first.jobs.map((j) => j.id)));
    if (first.next_before === null) {
      assert.ok(await page.$eval('[data-testid="older"]', (b) => b.disabled), '"Older" should be disabled on the last page');
      return;
    }
    assert.ok(await page.$eval('[data-testid="newer"]', (b) => b.disabled), '"Newer" should be disabled on the first page');
    await page.waitForFunction(() => !document.querySelector('[data-testid="older"]').disabled);
    await page.click('[data-testid="older"]');
    await page.waitForFunction((b) => location.hash.includes(`before=${b}`), {}, first.next_before);
    const second = await api(`/api/v1/jobs?limit=2&before=${first.next_before}`);
    await eventually(async () => assert.deepEqual((await jobRows()).map((x) => x.id), second.jobs.map((j) => j.id)));
    assert.ok(second.jobs.every((j) => j.id < first.next_before));
    await page.waitForFunction(() => !document.querySelector('[data-testid="newer"]').disabled);
    await page.click('[data-testid="newer"]');
    await page.waitForFunction(() => !location.hash.includes('before='));
    await eventually(async () => assert.deepEqual((await jobRows()).map((x) => x.id), first.jobs.map((j) => j.id)));
  });

  test('jobs list: markup in a filter value or in job data is shown as text', async () => {
    const evil = '<img id="injected" src="x" onerror="window.__injected=1">';
    await go(`#/jobs?q=${encodeURIComponent(evil)}`);
    await page.waitForSelector('[data-testid="jobs"]');
    assert.equal(await page.$eval('[data-testid="filter-q"]', (e) => e.value), evil);
    await sleep(300);
    assert.equal(await page.$('#injected'), null, 'a filter value became markup');
    await go('#/jobs');
    await page.waitForSelector('[data-testid="jobs"] tbody tr');
    assert.equal(await page.$('[onerror]'), null, 'job data became markup');
    assert.equal(await page.evaluate(() => window.__injected), undefined);
  });

  let deadJob;  // a dead job: shown, then retried

  test('job page: opening a job from the list shows it as the API has it', async () => {
    let r = await api('/api/v1/jobs?state=dead&type=rate_movie');
    if (r.jobs.length === 0) r = await api('/api/v1/jobs?state=dead');
    assert.ok(r.jobs.length > 0, 'the database holds no dead job: the harness should enqueue some of type rate_movie');
    deadJob = r.jobs[r.jobs.length - 1];
    await go(`#/jobs?id=${deadJob.id}`);
    // The list shown before (every job, this one among them) stays until
    // the filtered answer replaces it.
    await eventually(async () =>
      assert.deepEqual((await jobRows()).map((x) => x.id), [deadJob.id], 'the id filter shows that job only'));
    await page.waitForSelector(`[data-testid="job-row-${deadJob.id}"] a`);
    await page.click(`[data-testid="job-row-${deadJob.id}"] a`);
    await page.waitForFunction((id) => location.hash === `#/jobs/${id}`, {}, deadJob.id);
    await page.waitForSelector('[data-testid="job-state"][data-state]');
    await eventually(async () => {
      const j = await api(`/api/v1/jobs/${deadJob.id}`);
      assert.equal(await text('[data-testid="job-state"]'), j.state);
      assert.equal(await text('[data-testid="job-type"]'), j.type);
      assert.equal(await text('[data-testid="job-attempts"]'), `${j.attempt} of ${j.max_attempts}`);
      assert.deepEqual(JSON.parse(await text('[data-testid="job-args"]')), j.args);
      if (j.last_error) assert.equal(await text('[data-testid="job-last-error"]'), j.last_error);
      const steps = await rowsOf('[data-testid="steps"] tbody tr[data-testid="step-row"]');
      assert.deepEqual(steps.map((s) => s.name), (j.steps || []).map((s) => s.name));
      assert.equal((await page.$$('[data-testid="errors"] tbody tr[data-testid="error-row"]')).length, (j.errors || []).length);
      assert.equal((await page.$$('[data-testid="timeline"] tbody tr[data-testid="timeline-row"]')).length, (j.timeline || []).length);
      // Each step links to the plugin it calls.
      const links = await page.$$eval('[data-testid="steps"] a[data-testid="step-plugin"]', (a) => a.map((e) => e.textContent));
      assert.deepEqual(links, (j.steps || []).filter((s) => s.call).map((s) => s.call));
      assert.ok(links.length > 0, 'the job\'s steps name no plugin');
    });
    if (!session.read_only) {
      assert.ok(await visible('[data-testid="retry"]'), 'a dead job has no Retry button');
      assert.equal(await visible('[data-testid="cancel"]'), false, 'a dead job has a Cancel button');
    }
    await screenshot('job.png');
    await page.click('[data-testid="steps"] a[data-testid="step-plugin"]');
    await page.waitForFunction(() => location.hash === '#/plugins');
    await go(`#/jobs/${deadJob.id}`);
    await page.waitForSelector('[data-testid="job-state"][data-state]');
  });

  test('job page: Retry on a dead job asks first, then the job leaves dead', async (t) => {
    assert.ok(deadJob, 'no dead job was opened');
    if (session.read_only) {
      assert.equal(await visible('[data-testid="retry"]'), false, 'a read-only server shows Retry');
      t.skip('the server is read-only');
      return;
    }
    await go(`#/jobs/${deadJob.id}`);
    await page.waitForFunction(() => document.querySelector('[data-testid="job-state"]').dataset.state === 'dead');
    const before_ = await api(`/api/v1/jobs/${deadJob.id}`);
    // Dismissing the question changes nothing.
    const question = await clickAndAnswer('[data-testid="retry"]', false);
    assert.match(question, new RegExp(`\\b${deadJob.id}\\b`), 'the question names the job');
    await sleep(2500);
    assert.equal(await text('[data-testid="job-state"]'), 'dead');
    assert.equal((await api(`/api/v1/jobs/${deadJob.id}`)).state, 'dead');
    // Accepting retries it and shows what the server says it changed. The
    // state is watched on every change of the page: a running worker may
    // take the job and end it again within one refresh.
    const left = page.waitForFunction(() => document.querySelector('[data-testid="job-state"]').dataset.state !== 'dead',
      { timeout: 10000, polling: 'mutation' });
    await clickAndAnswer('[data-testid="retry"]', true);
    await left;
    await page.waitForFunction(() => document.getElementById('status').dataset.kind === 'ok' ||
      document.getElementById('status').dataset.kind === 'error');
    const status = await page.$eval('#status', (e) => ({ kind: e.dataset.kind, text: e.textContent.trim(), hidden: e.hidden }));
    assert.equal(status.kind, 'ok', `the status area shows an error: ${status.text}`);
    assert.equal(status.hidden, false);
    assert.ok(status.text.length > 0);
    const after_ = await api(`/api/v1/jobs/${deadJob.id}`);
    assert.ok(after_.state !== 'dead' || after_.updated_at !== before_.updated_at,
      `the API still has job ${deadJob.id} dead and unchanged`);
  });

  test('job page: Cancel on a pending job makes it cancelled', async (t) => {
    // The pending job least likely to start meanwhile: the latest scheduled one.
    let job;
    for (const state of ['scheduled', 'retryable', 'available']) {
      const r = await api(`/api/v1/jobs?state=${state}&limit=500`);
      if (r.jobs.length) {
        job = r.jobs.reduce((a, b) => (Date.parse(b.run_at) > Date.parse(a.run_at) ? b : a));
        break;
      }
    }
    assert.ok(job, 'the database holds no pending job: the harness should enqueue one to cancel');
    await go(`#/jobs/${job.id}`);
    await page.waitForFunction((s) => document.querySelector('[data-testid="job-state"]').dataset.state === s, {}, job.state);
    if (session.read_only) {
      assert.equal(await visible('[data-testid="cancel"]'), false, 'a read-only server shows Cancel');
      t.skip('the server is read-only');
      return;
    }
    assert.ok(await visible('[data-testid="cancel"]'), `a ${job.state} job has no Cancel button`);
    assert.equal(await visible('[data-testid="retry"]'), false, `a ${job.state} job has a Retry button`);
    await clickAndAnswer('[data-testid="cancel"]', true);
    await page.waitForFunction(() => document.querySelector('[data-testid="job-state"]').dataset.state === 'cancelled', { timeout: 10000 });
    assert.equal((await api(`/api/v1/jobs/${job.id}`)).state, 'cancelled');
    assert.equal(await page.$eval('#status', (e) => e.dataset.kind), 'ok');
    // A cancelled job can be retried, not cancelled again.
    await page.waitForFunction(() => !document.querySelector('[data-testid="retry"]').hidden);
    assert.equal(await visible('[data-testid="cancel"]'), false);
  });

  test('plugins: the loaded plugins and refused files are the API\'s', async () => {
    await go('#/plugins');
    await page.waitForSelector('[data-testid="plugins-loaded"]');
    await eventually(async () => {
      const r = await api('/api/v1/plugins');
      assert.equal(await text('[data-testid="plugin-folder"]'), r.folder ?? '');
      if ('reported_by' in r) {
        // Who reported the list, or that no running engine did.
        const source = await text('[data-testid="plugins-source"]');
        if (r.reported_by) assert.ok(source.includes(r.reported_by.worker), source);
        else assert.match(source, /No running engine/);
      }
      const loaded = await rowsOf('[data-testid="plugins-loaded"] tbody tr[data-name]');
      assert.deepEqual(loaded.map((p) => p.name), (r.loaded || []).map((p) => p.name));
      for (const p of r.loaded || []) {
        const cells = await page.$$eval(`[data-testid="plugin-row-${p.name}"] td`, (tds) => tds.map((t) => t.textContent));
        assert.equal(cells[1], p.version);
        for (const op of p.operations || []) assert.ok(cells[2].includes(op), `${p.name} lists no ${op}`);
        assert.equal(cells[4], p.file);
      }
      const failed = await rowsOf('[data-testid="plugins-failed"] tbody tr[data-testid="failed-row"]');
      assert.deepEqual(failed.map((f) => f.file), (r.failed || []).map((f) => f.file));
    });
    await screenshot('plugins.png');
  });

  test('limits: every limit is listed and those whose next free slot is ahead are marked throttled', async () => {
    await go('#/limits');
    await page.waitForSelector('[data-testid="limits"]');
    await eventually(async () => {
      const limits = await api('/api/v1/limits');
      const rows = await rowsOf('[data-testid="limits"] tbody tr[data-testid="limits-row"]');
      assert.deepEqual(rows.map((r) => r.plugin), limits.map((l) => l.plugin));
      const now = Date.now();
      limits.forEach((l, i) => {
        const t = Date.parse(l.next_free);
        if (t > now + 3000) assert.equal(rows[i].throttled, 'true', `${l.plugin} ${l.operation} is throttled until ${l.next_free}`);
        if (t < now - 1000) assert.equal(rows[i].throttled, 'false', `${l.plugin} ${l.operation} is free since ${l.next_free}`);
      });
      // Beside them, what the running engines' calls met: 429s and steps parked now.
      const o = await api('/api/v1/overview');
      if (Array.isArray(o.plugins)) {
        const calls = await rowsOf('[data-testid="limit-calls"] tbody tr[data-testid="limit-calls-row"]');
        assert.deepEqual(calls.map((c) => c.plugin), o.plugins.map((p) => p.plugin));
        const cells = await page.$$eval('[data-testid="limit-calls"] tbody tr[data-testid="limit-calls-row"]',
          (rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
        assert.deepEqual(cells.map((c) => [Number(c[2]), Number(c[5])]),
          o.plugins.map((p) => [Number(p.throttled), Number(p.parked_now)]), 'throttled and parked now per plugin');
      }
    });
    await screenshot('limits.png');
  });

  test('a lost session shows the not-logged-in message', async () => {
    await go('#/');
    await page.waitForSelector('[data-testid="count-completed"]');
    assert.equal(await visible('[data-testid="not-logged-in"]'), false);
    const cookies = await page.cookies(URL_);
    assert.ok(cookies.some((c) => c.name === 'ratchet_session'), 'no ratchet_session cookie after login');
    const c = cookies.find((x) => x.name === 'ratchet_session');
    assert.equal(c.httpOnly, true, 'the session cookie is not HttpOnly');
    await page.deleteCookie({ name: 'ratchet_session', url: URL_ });
    await page.waitForSelector('[data-testid="not-logged-in"]:not([hidden])', { timeout: 6000 });
    assert.equal(await text('[data-testid="not-logged-in"]'), NOT_LOGGED_IN);
  });

  test('no script error happened on any page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
