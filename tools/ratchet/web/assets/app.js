// The ratchet dashboard: one page, hash routes, no framework.
//
//   #/                       overview: counts per state, the last hour, throttled limits
//   #/jobs?state=&type=&queue=&id=&q=&before=&limit=   the jobs list
//   #/jobs/ID                one job
//   #/plugins                loaded plugins and refused files
//   #/limits                 every limit
//
// Every value from the server reaches the DOM through textContent or an
// attribute (never innerHTML). The current page re-fetches its data every
// 2 s and redraws only what changed, so form input, focus and scrolling
// survive.
'use strict';

(() => {
  const STATES = ['scheduled', 'available', 'running', 'retryable', 'completed', 'dead', 'cancelled'];
  const CANCELLABLE = new Set(['scheduled', 'available', 'running', 'retryable']);
  const RETRIABLE = new Set(['dead', 'cancelled']);
  const REFRESH_MS = 2000;
  const NOT_LOGGED_IN = 'Not logged in: open the login link ratchet web printed';

  const app = {
    session: null,     // GET /api/v1/session
    view: null,        // the mounted view
    route: null,
    generation: 0,     // bumped on every mount: late answers for an old view are dropped
    timer: null,
    refreshing: false,
    skewMs: 0,         // server clock minus this clock, from the overview's `now`
    newer: [],         // the jobs list's `before` values of the pages left by "Older"
  };

  // ---------------------------------------------------------------- DOM

  // h('a', {href: '#/', class: 'x', dataset: {testid: 'y'}, onclick: f}, 'text', node, ...)
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    setProps(el, props);
    append(el, children);
    return el;
  }

  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) el.setAttribute(k, String(v));
    }
    append(el, children);
    return el;
  }

  function setProps(el, props) {
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'testid') el.dataset.testid = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') el[k] = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  const $ = (id) => document.getElementById(id);

  function badge(state) {
    return h('span', { class: `badge state-${STATES.includes(state) ? state : 'unknown'}`, testid: 'state' }, state);
  }

  function table(testid, headers, rows, empty) {
    const body = h('tbody');
    if (rows.length === 0) {
      body.append(h('tr', { class: 'empty' }, h('td', { colspan: headers.length }, empty)));
    } else {
      body.append(...rows);
    }
    return h('div', { class: 'table-wrap' },
      h('table', { testid },
        h('thead', null, h('tr', null, headers.map((t) =>
          typeof t === 'string' ? h('th', { scope: 'col' }, t) : h('th', { scope: 'col', class: t.class }, t.text)))),
        body));
  }

  // Replaces the children of `el` only when `key` differs from the last
  // drawing: an unchanged answer leaves the DOM (and any text selection) alone.
  function redraw(el, key, build) {
    if (el.dataset.drawn === key) return;
    el.dataset.drawn = key;
    el.replaceChildren(...[build()].flat(Infinity).filter(Boolean));
  }

  // ---------------------------------------------------------------- text

  function shorten(s, n) {
    s = String(s ?? '');
    return s.length <= n ? s : s.slice(0, n - 1) + '\u2026';
  }

  function json(v) {
    try { return JSON.stringify(v); } catch { return String(v); }
  }

  function prettyJson(v) {
    try { return JSON.stringify(v, null, 2); } catch { return String(v); }
  }

  const serverNow = () => Date.now() + app.skewMs;

  // "2026-12-04 14:03:05" (UTC) from the API's ISO time.
  function formatTime(iso) {
    if (!iso) return '';
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return String(iso);
    return new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, '');
  }

  function formatDuration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '';
    ms = Math.abs(ms);
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
    const hrs = Math.floor(m / 60);
    if (hrs < 48) return `${hrs}h ${String(m % 60).padStart(2, '0')}m`;
    return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
  }

  // "in 4m 05s", "12 s ago", "now".
  function relative(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return '';
    const d = t - serverNow();
    if (Math.abs(d) < 1000) return 'now';
    return d > 0 ? `in ${formatDuration(d)}` : `${formatDuration(d)} ago`;
  }

  // A time cell: relative text ("in 4 s", kept current by tickTimes), the
  // exact time in the tooltip.
  function when(iso) {
    if (!iso) return h('span', { class: 'muted' }, '\u2014');
    return h('time', { datetime: iso, 'data-rel': '', title: `${formatTime(iso)} UTC` }, relative(iso));
  }

  // A time in full with its relative form.
  function whenFull(iso) {
    if (!iso) return h('span', { class: 'muted' }, '\u2014');
    return h('span', null, formatTime(iso), ' ',
      h('span', { class: 'muted' }, '(', h('time', { datetime: iso, 'data-rel': '' }, relative(iso)), ')'));
  }

  // Relative times move on without a redraw.
  function tickTimes() {
    for (const t of document.querySelectorAll('time[data-rel]')) {
      const text = relative(t.getAttribute('datetime'));
      if (t.textContent !== text) t.textContent = text;
    }
  }

  // ---------------------------------------------------------------- requests

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      init.headers['X-Ratchet-CSRF'] = app.session ? app.session.csrf : '';
      init.body = JSON.stringify(body ?? {});
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      setConn(false, 'server unreachable: retrying');
      throw new ApiError(0, `Cannot reach the ratchet web server (${e.message}); retrying every 2 s`);
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (res.status === 401) {
      setLoggedIn(false);
      throw new ApiError(401, NOT_LOGGED_IN);
    }
    setLoggedIn(true);
    setConn(true);
    if (!res.ok) {
      const msg = data && typeof data.error === 'string' ? data.error : `${res.status} ${res.statusText || 'error'}`;
      throw new ApiError(res.status, msg);
    }
    return data;
  }

  async function loadSession() {
    const s = await api('GET', '/api/v1/session');
    app.session = s;
    $('read-only').hidden = !s.read_only;
    document.body.classList.toggle('can-write', !s.read_only);
    $('database').textContent = [s.database, s.version ? `ratchet ${s.version}` : ''].filter(Boolean).join(' \u00b7 ');
    $('database').title = s.database || '';
    return s;
  }

  const canAct = () => !!app.session && !app.session.read_only;

  function setLoggedIn(ok) {
    $('login').hidden = ok;
    if (!ok) {
      app.session = null;
      document.body.classList.remove('can-write');
      setConn(false, 'not logged in');
    }
  }

  function setConn(ok, text) {
    const c = $('conn');
    c.classList.toggle('conn-bad', !ok);
    c.textContent = ok ? `updated ${formatTime(new Date().toISOString()).slice(11)}` : text;
  }

  function setStatus(text, kind) {
    $('status').hidden = false;
    $('status').className = `status status-${kind}`;
    $('status').dataset.kind = kind;
    $('status-text').textContent = text;
  }

  // Asks, then POSTs, then shows what the server answered.
  async function act(question, path, body) {
    if (!window.confirm(question)) return null;
    setStatus('Working\u2026', 'busy');
    try {
      const r = await api('POST', path, body);
      setStatus(r && r.changed ? r.changed : 'Done.', 'ok');
      refreshSoon();
      return r;
    } catch (e) {
      setStatus(e.message, 'error');
      refreshSoon();
      return null;
    }
  }

  // ---------------------------------------------------------------- routes

  function parseRoute() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const q = raw.indexOf('?');
    const path = (q < 0 ? raw : raw.slice(0, q)).replace(/\/+$/, '') || '/';
    const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    if (path === '/') return { page: 'overview', params };
    if (path === '/jobs') return { page: 'jobs', params };
    const m = /^\/jobs\/(\d+)$/.exec(path);
    if (m) return { page: 'job', id: m[1], params };
    if (path === '/plugins') return { page: 'plugins', params };
    if (path === '/limits') return { page: 'limits', params };
    return { page: 'missing', path, params };
  }

  function jobsHash(params) {
    const p = new URLSearchParams();
    for (const k of ['state', 'type', 'queue', 'id', 'q', 'before', 'limit']) {
      const v = params[k];
      if (v !== undefined && v !== null && String(v).trim() !== '') p.set(k, String(v).trim());
    }
    const s = p.toString();
    return s ? `#/jobs?${s}` : '#/jobs';
  }

  function onRoute() {
    const route = parseRoute();
    const same = app.view && app.route && app.route.page === route.page &&
      (route.page !== 'job' || app.route.id === route.id);
    app.route = route;
    for (const a of document.querySelectorAll('#nav a')) {
      const active = a.dataset.page === route.page || (route.page === 'job' && a.dataset.page === 'jobs');
      a.classList.toggle('active', active);
      if (active) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    if (same && app.view.update) {
      app.view.update(route);
    } else {
      if (app.view) {  // a message belongs to the page it was about
        $('status').hidden = true;
        $('status').dataset.kind = '';
      }
      app.generation++;
      const make = VIEWS[route.page] || VIEWS.missing;
      app.view = make(route);
      const main = $('main');
      main.dataset.page = route.page;
      main.replaceChildren(app.view.el);
      window.scrollTo(0, 0);
    }
    document.title = `${app.view.title ? app.view.title() + ' \u00b7 ' : ''}ratchet`;
    refreshSoon();
  }

  // ---------------------------------------------------------------- refresh loop

  function refreshSoon() {
    clearTimeout(app.timer);
    app.timer = setTimeout(tick, 0);
  }

  async function tick() {
    clearTimeout(app.timer);
    if (app.refreshing) { app.timer = setTimeout(tick, 100); return; }
    app.refreshing = true;
    const view = app.view;
    const generation = app.generation;
    try {
      if (!app.session) await loadSession();
      if (view && view.refresh && !document.hidden) await view.refresh(() => generation === app.generation && view === app.view);
      tickTimes();
    } catch (e) {
      if (view && view.fail && generation === app.generation) view.fail(e);
    } finally {
      app.refreshing = false;
      app.timer = setTimeout(tick, REFRESH_MS);
    }
  }

  // Shows a GET error inside the page (the last good data stays on screen).
  function errorBox() {
    const el = h('div', { class: 'banner banner-error', role: 'alert', testid: 'page-error', hidden: true });
    return {
      el,
      show(e) {
        if (e.status === 401) { el.hidden = true; return; }  // the login banner says it
        el.hidden = false;
        el.textContent = e.message;
      },
      clear() { el.hidden = true; el.textContent = ''; },
    };
  }

  // ---------------------------------------------------------------- overview

  function overviewView() {
    const counts = h('div', { class: 'counts', testid: 'counts' });
    const chart = h('div', { class: 'chart', testid: 'chart' });
    const throttled = h('div', { testid: 'throttled-section' });
    const engines = h('div', { testid: 'engines-section' });
    const calls = h('div', { testid: 'calls-section' });
    const err = errorBox();
    const el = h('section', { class: 'page', testid: 'page-overview' },
      h('h1', null, 'Overview'),
      err.el,
      h('h2', null, 'Jobs by state'),
      counts,
      h('h2', null, 'The last hour'),
      chart,
      h('h2', null, 'Throttled limits'),
      throttled,
      calls,
      engines);

    // Placeholders so the layout does not jump on first load.
    counts.append(...STATES.map((s) => countCard(s, null)));

    return {
      el,
      title: () => 'Overview',
      async refresh(current) {
        const o = await api('GET', '/api/v1/overview');
        if (!current()) return;
        err.clear();
        const now = Date.parse(o.now);
        if (!Number.isNaN(now)) app.skewMs = now - Date.now();
        const c = o.counts || {};
        redraw(counts, json(c), () => STATES.map((s) => countCard(s, c[s] ?? 0)));
        redraw(chart, json(o.minutes) + String(o.now || '').slice(0, 16), () => minutesChart(o.minutes || [], o.now));
        redraw(throttled, json(o.throttled) + json((o.throttled || []).map(isThrottled)), () =>
          limitsTable('throttled', o.throttled || [], 'No limit is holding calls back right now.'));
        // Newer servers also tell what the running engines report.
        redraw(calls, json(o.plugins), () => Array.isArray(o.plugins) ? callsTable(o.plugins) : null);
        redraw(engines, json(o.engines), () => Array.isArray(o.engines) ? enginesTable(o.engines) : null);
      },
      fail: (e) => err.show(e),
    };
  }

  function callsTable(plugins, testid = 'calls') {
    const n = (v) => h('td', { class: 'num' }, String(v ?? 0));
    return [
      h('h2', null, 'Plugin calls ', h('span', { class: 'muted small' }, 'by the running engines, since each started')),
      table(testid, ['Plugin', { text: 'Calls', class: 'num' }, { text: 'Throttled', class: 'num' },
        { text: 'Retries', class: 'num' }, { text: 'Parks', class: 'num' }, { text: 'Parked now', class: 'num' }],
      plugins.map((p) => h('tr', { testid: `${testid}-row`, dataset: { plugin: p.plugin } },
        h('td', null, p.plugin), n(p.calls), n(p.throttled), n(p.retries), n(p.parks), n(p.parked_now))),
      'No running engine reports calls.'),
    ];
  }

  function enginesTable(engines) {
    const running = engines.filter((e) => e.running).length;
    return [
      h('h2', null, 'Engines ', h('span', { class: 'muted small', testid: 'engines-summary' },
        `${running} running${engines.length > running ? `, ${engines.length - running} stopped` : ''}`)),
      table('engines', ['Worker', 'State', 'Last report'],
        engines.map((e) => h('tr', { testid: 'engine-row', dataset: { running: String(!!e.running) } },
          h('td', null, h('code', null, e.worker)),
          h('td', null, e.running
            ? h('span', { class: 'badge state-running' }, 'running')
            : h('span', { class: 'badge state-cancelled' }, 'stopped')),
          h('td', null, when(e.updated_at)))),
        'No engine has reported in the last hour: is `ratchet run` running?'),
    ];
  }

  function countCard(state, n) {
    return h('a', {
      class: `count state-${state}`, href: jobsHash({ state }), testid: `count-${state}`,
      dataset: { count: n === null ? '' : String(n) }, title: `List the ${state} jobs`,
    },
    h('span', { class: 'count-num', testid: `count-${state}-value` }, n === null ? '\u2013' : String(n)),
    h('span', { class: 'count-label' }, state));
  }

  const BASE_SERIES = [
    { key: 'completed', label: 'completed' },
    { key: 'failed', label: 'attempts failed' },
    { key: 'dead', label: 'dead' },
  ];
  // Calls answered 429 or throttled, when the server counts them.
  const THROTTLED_SERIES = { key: 'throttled', label: 'calls throttled' };

  // Grouped bars, one group per minute, drawn as inline SVG.
  function minutesChart(minutes, nowIso) {
    const SERIES = minutes.some((m) => m && 'throttled' in m) ? [...BASE_SERIES, THROTTLED_SERIES] : BASE_SERIES;
    const W = 960, H = 220, left = 40, right = 10, top = 10, bottom = 28;
    const plotW = W - left - right, plotH = H - top - bottom;
    const nowMs = Date.parse(nowIso);
    const endMinute = Math.floor((Number.isNaN(nowMs) ? Date.now() : nowMs) / 60000) * 60000;
    const start = endMinute - 60 * 60000;  // 60 whole minutes and the current one: 61 slots
    const slots = 61, slotW = plotW / slots, barW = Math.max(1, (slotW - 2) / SERIES.length);

    const byMinute = new Map();
    for (const m of minutes) {
      const t = Date.parse(m.at);
      if (!Number.isNaN(t)) byMinute.set(Math.floor(t / 60000) * 60000, m);
    }
    let max = 0;
    const totals = Object.fromEntries(SERIES.map((s) => [s.key, 0]));
    for (const m of minutes) {
      for (const s of SERIES) {
        const v = Number(m[s.key]) || 0;
        totals[s.key] += v;
        max = Math.max(max, v);
      }
    }
    const niceMax = niceCeil(max);
    const y = (v) => top + plotH - (v / niceMax) * plotH;

    const root = svg('svg', {
      viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'data-testid': 'minutes-chart',
      'data-minutes': minutes.length, 'aria-label': 'Jobs completed, attempts failed and jobs dead per minute over the last hour',
    });
    // Grid and y labels.
    for (const frac of [0, 0.5, 1]) {
      const v = niceMax * frac;
      const yy = y(v);
      root.append(svg('line', { x1: left, x2: W - right, y1: yy, y2: yy, class: frac === 0 ? 'axis' : 'grid' }));
      if (frac === 0 || Number.isInteger(v)) {
        root.append(svg('text', { x: left - 6, y: yy + 4, class: 'tick', 'text-anchor': 'end' }, String(v)));
      }
    }
    // x labels every 10 minutes.
    for (let i = 0; i < slots; i += 10) {
      const t = new Date(start + i * 60000).toISOString().slice(11, 16);
      root.append(svg('text', { x: left + i * slotW + slotW / 2, y: H - 8, class: 'tick', 'text-anchor': 'middle' }, t));
    }
    for (let i = 0; i < slots; i++) {
      const t = start + i * 60000;
      const m = byMinute.get(t);
      const x0 = left + i * slotW + 1;
      const g = svg('g', { class: 'slot' });
      const label = `${new Date(t).toISOString().slice(11, 16)} UTC: ` +
        SERIES.map((s) => `${Number(m?.[s.key]) || 0} ${s.label}`).join(', ');
      g.append(svg('title', null, label));
      g.append(svg('rect', { x: left + i * slotW, y: top, width: slotW, height: plotH, class: 'hover' }));
      SERIES.forEach((s, k) => {
        const v = Number(m?.[s.key]) || 0;
        if (v > 0) {
          g.append(svg('rect', { x: x0 + k * barW, y: y(v), width: barW, height: top + plotH - y(v), class: `bar bar-${s.key}` }));
        }
      });
      root.append(g);
    }
    const legend = h('div', { class: 'legend' },
      SERIES.map((s) => h('span', { class: 'legend-item' },
        h('span', { class: `swatch bar-${s.key}` }),
        `${s.label}: `,
        h('strong', { testid: `total-${s.key}` }, String(totals[s.key])))),
      h('span', { class: 'muted' }, 'in the last hour, per minute'));
    return [root, legend];
  }

  function niceCeil(v) {
    if (v <= 4) return 4;
    const p = 10 ** Math.floor(Math.log10(v));
    for (const f of [1, 2, 2.5, 5, 10]) if (v <= f * p) return f * p;
    return 10 * p;
  }

  // ---------------------------------------------------------------- limits (overview and #/limits)

  function isThrottled(l) {
    // The server says, by its own clock and rule, when it can.
    if (typeof l.throttled === 'boolean') return l.throttled;
    const t = Date.parse(l.next_free);
    return !Number.isNaN(t) && t > serverNow();
  }

  function limitsTable(testid, limits, empty, withState) {
    const rows = limits.map((l) => {
      const throttled = isThrottled(l);
      return h('tr', { class: throttled && withState ? 'throttled' : '', testid: `${testid}-row`, dataset: { throttled: String(throttled), plugin: l.plugin } },
        h('td', null, l.plugin),
        h('td', null, l.operation ? l.operation : h('span', { class: 'muted' }, '(all)')),
        h('td', null, l.key ? h('code', null, l.key) : h('span', { class: 'muted' }, '\u2014')),
        h('td', null, l.declared),
        h('td', null, throttled ? when(l.next_free) : h('span', { title: `${formatTime(l.next_free)} UTC` }, 'now')),
        withState ? h('td', null, throttled
          ? h('span', { class: 'badge badge-throttled', testid: 'throttled' }, 'throttled')
          : h('span', { class: 'badge badge-free', testid: 'free' }, 'free')) : null);
    });
    const headers = ['Plugin', 'Operation', 'Key', 'Limit', 'Next free slot'];
    if (withState) headers.push('');
    return table(testid, headers, rows, empty);
  }

  function limitsView() {
    const body = h('div', { testid: 'limits-section' });
    const calls = h('div', { testid: 'limit-calls-section' });
    const err = errorBox();
    const summary = h('p', { class: 'muted', testid: 'limits-summary' });
    return {
      el: h('section', { class: 'page', testid: 'page-limits' }, h('h1', null, 'Limits'), err.el, summary, body, calls),
      title: () => 'Limits',
      async refresh(current) {
        const [limits, o] = await Promise.all([api('GET', '/api/v1/limits'), api('GET', '/api/v1/overview')]);
        if (!current()) return;
        // What the limits did: 429s and steps parked now, per plugin.
        redraw(calls, json(o.plugins), () => Array.isArray(o.plugins) ? callsTable(o.plugins, 'limit-calls') : null);
        err.clear();
        const list = Array.isArray(limits) ? limits : [];
        const n = list.filter(isThrottled).length;
        summary.textContent = `${list.length} limit${list.length === 1 ? '' : 's'}, ${n} throttled now.`;
        redraw(body, json(list) + json(list.map(isThrottled)), () =>
          limitsTable('limits', list, 'No limiter is declared or learned.', true));
      },
      fail: (e) => err.show(e),
    };
  }

  // ---------------------------------------------------------------- plugins

  function pluginsView() {
    const body = h('div', { testid: 'plugins-section' });
    const err = errorBox();
    return {
      el: h('section', { class: 'page', testid: 'page-plugins' }, h('h1', null, 'Plugins'), err.el, body),
      title: () => 'Plugins',
      async refresh(current) {
        const r = await api('GET', '/api/v1/plugins');
        if (!current()) return;
        err.clear();
        redraw(body, json(r), () => {
          const loaded = Array.isArray(r?.loaded) ? r.loaded : [];
          const failed = Array.isArray(r?.failed) ? r.failed : [];
          let source = null;
          if (r && 'reported_by' in r) {
            source = r.reported_by
              ? h('p', { class: 'muted', testid: 'plugins-source' }, 'As reported by the running engine ',
                h('code', null, r.reported_by.worker), ', ', when(r.reported_by.updated_at), '.')
              : h('p', { class: 'banner banner-note', testid: 'plugins-source' },
                'No running engine has reported its plugins: this server loads no plugin code, so the list ' +
                'fills in while `ratchet run` works on this database.');
          }
          return [
            source,
            h('p', null, 'Plugin folder ', h('code', { testid: 'plugin-folder' }, r?.folder ?? '')),
            h('h2', null, `Loaded (${loaded.length})`),
            table('plugins-loaded', ['Name', 'Version', 'Operations', 'Configured', 'File'],
              loaded.map((p) => h('tr', { testid: `plugin-row-${p.name}`, dataset: { name: p.name } },
                h('td', null, h('strong', null, p.name)),
                h('td', null, p.version),
                h('td', null, (p.operations || []).map((o) => h('code', { class: 'op' }, o))),
                h('td', null, p.configured ? 'yes' : h('span', { class: 'muted' }, 'no')),
                h('td', { class: 'path' }, p.file))),
              'No plugin loaded.'),
            h('h2', null, `Refused (${failed.length})`),
            table('plugins-failed', ['File', 'Reason'],
              failed.map((f) => h('tr', { testid: 'failed-row', dataset: { file: f.file } },
                h('td', { class: 'path' }, f.file),
                h('td', { class: 'error-text' }, f.reason))),
              'Every file in the folder loaded.'),
          ];
        });
      },
      fail: (e) => err.show(e),
    };
  }

  // ---------------------------------------------------------------- jobs list

  function jobsView(route) {
    app.newer = [];  // "Newer" goes back only through pages this visit left by "Older"
    const field = (label, input) => h('label', { class: 'field' }, h('span', null, label), input);
    const state = h('select', { name: 'state', id: 'filter-state', testid: 'filter-state' },
      h('option', { value: '' }, 'any'), STATES.map((s) => h('option', { value: s }, s)));
    const type = h('input', { name: 'type', id: 'filter-type', testid: 'filter-type', type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const queue = h('input', { name: 'queue', id: 'filter-queue', testid: 'filter-queue', type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const id = h('input', { name: 'id', id: 'filter-id', testid: 'filter-id', type: 'text', inputmode: 'numeric', autocomplete: 'off', size: 8 });
    const q = h('input', { name: 'q', id: 'filter-q', testid: 'filter-q', type: 'search', autocomplete: 'off', placeholder: 'in arguments or last error' });
    const form = h('form', { class: 'filters', testid: 'filters', onsubmit: (e) => {
      e.preventDefault();
      app.newer = [];
      const limit = app.route.params.get('limit');
      location.hash = jobsHash({ state: state.value, type: type.value, queue: queue.value, id: id.value, q: q.value, limit });
      refreshSoon();
    } },
    field('State', state), field('Type', type), field('Queue', queue), field('ID', id), field('Text', q),
    h('div', { class: 'field-buttons' },
      h('button', { type: 'submit', class: 'primary', testid: 'filter-apply' }, 'Filter'),
      h('button', { type: 'button', testid: 'filter-clear', onclick: () => {
        app.newer = [];
        location.hash = jobsHash({ limit: app.route.params.get('limit') });
      } }, 'Clear')));

    const retryAll = h('button', { type: 'button', class: 'action', testid: 'retry-all', onclick: () => {
      const f = filterOf(app.route);
      const body = { state: f.state || 'dead' };
      for (const k of ['type', 'queue', 'q']) if (f[k]) body[k] = f[k];
      const what = Object.entries(body).map(([k, v]) => `${k} = ${v}`).join(', ');
      act(`Retry every ${body.state} job matching this filter (${what})?`, '/api/v1/jobs/retry', body);
    } }, 'Retry all dead matching this filter');
    const olderThan = h('input', { type: 'text', value: '7d', size: 5, testid: 'purge-older-than', id: 'purge-older-than', 'aria-label': 'older than', autocomplete: 'off' });
    const purge = h('button', { type: 'button', class: 'action danger', testid: 'purge', onclick: () => {
      const v = olderThan.value.trim();
      if (!v) { setStatus('Say how old, e.g. 7d, 12h, 15m or 90s.', 'error'); return; }
      act(`Delete every finished job (completed, dead, cancelled) that ended more than ${v} ago? This cannot be undone.`,
        '/api/v1/jobs/purge', { older_than: v });
    } }, 'Purge');
    const actions = h('div', { class: 'actions-bar needs-write', testid: 'bulk-actions' },
      retryAll,
      h('span', { class: 'purge' }, h('label', { for: 'purge-older-than' }, 'Purge finished jobs older than'), ' ', olderThan, ' ', purge));

    const err = errorBox();
    const list = h('div', { testid: 'jobs-section' });
    const info = h('span', { class: 'muted', testid: 'jobs-info' });
    const newer = h('button', { type: 'button', testid: 'newer', onclick: () => {
      const before = app.newer.pop();
      location.hash = jobsHash({ ...filterOf(app.route), before: before || '' });
    } }, '\u2190 Newer');
    const older = h('button', { type: 'button', testid: 'older', onclick: () => {
      const next = older.dataset.next;
      if (!next) return;
      app.newer.push(app.route.params.get('before') || '');
      location.hash = jobsHash({ ...filterOf(app.route), before: next });
    } }, 'Older \u2192');
    const pager = h('div', { class: 'pager', testid: 'pager' }, newer, info, older);

    const el = h('section', { class: 'page', testid: 'page-jobs' }, h('h1', null, 'Jobs'), form, actions, err.el, list, pager);

    function update(r) {
      const f = filterOf(r);
      // Back/forward onto a page "Older" left: forget it.
      while (app.newer.length && app.newer[app.newer.length - 1] === (f.before || '')) app.newer.pop();
      state.value = STATES.includes(f.state) ? f.state : '';
      type.value = f.type || '';
      queue.value = f.queue || '';
      id.value = f.id || '';
      q.value = f.q || '';
      const bulkState = f.state || 'dead';
      retryAll.hidden = !RETRIABLE.has(bulkState) || !!f.id;
      retryAll.textContent = `Retry all ${bulkState} matching this filter`;
      newer.disabled = !f.before;
      older.disabled = true;
    }
    update(route);

    return {
      el,
      update,
      title: () => 'Jobs',
      async refresh(current) {
        const f = filterOf(app.route);
        const p = new URLSearchParams();
        for (const [k, v] of Object.entries(f)) if (v) p.set(k, v);
        const r = await api('GET', `/api/v1/jobs${p.toString() ? '?' + p : ''}`);
        if (!current() || json(filterOf(app.route)) !== json(f)) return;
        err.clear();
        const jobs = Array.isArray(r?.jobs) ? r.jobs : [];
        older.dataset.next = r?.next_before ?? '';
        older.disabled = r?.next_before === null || r?.next_before === undefined;
        newer.disabled = !f.before;
        info.textContent = jobs.length === 0 ? ''
          : `${jobs.length} job${jobs.length === 1 ? '' : 's'}, ids ${jobs[0].id}\u2013${jobs[jobs.length - 1].id}`;
        const describe = Object.entries(f).filter(([k, v]) => v && k !== 'limit' && k !== 'before').map(([k, v]) => `${k} = ${v}`).join(', ');
        redraw(list, json(jobs), () => table('jobs', [
          { text: 'ID', class: 'num' }, 'Type', 'Queue', 'State', { text: 'Attempt', class: 'num' }, 'Run at / finished', 'Arguments', 'Last error',
        ], jobs.map(jobRow), describe ? `No job matches ${describe}.` : 'No jobs yet.'));
      },
      fail: (e) => { err.show(e); older.disabled = true; },
    };
  }

  function filterOf(route) {
    const p = route.params;
    const f = {};
    for (const k of ['state', 'type', 'queue', 'id', 'q', 'before', 'limit']) {
      const v = (p.get(k) || '').trim();
      if (v) f[k] = v;
    }
    return f;
  }

  function jobRow(j) {
    const terminal = j.state === 'completed' || j.state === 'dead' || j.state === 'cancelled';
    const args = json(j.args);
    const err = j.state === 'completed' ? '' : (j.last_error || '');
    return h('tr', { testid: `job-row-${j.id}`, class: 'job-row', dataset: { id: String(j.id), state: j.state } },
      h('td', { class: 'num' }, h('a', { href: `#/jobs/${j.id}`, testid: 'job-link' }, String(j.id))),
      h('td', null, j.type),
      h('td', null, j.queue),
      h('td', null, badge(j.state), j.cancel_requested && !terminal ? h('span', { class: 'muted small' }, ' cancel requested') : null),
      h('td', { class: 'num' }, `${j.attempt}/${j.max_attempts}`),
      h('td', null, terminal ? when(j.finished_at) : when(j.run_at)),
      h('td', { class: 'mono', title: shorten(args, 2000) }, shorten(args, 60)),
      h('td', { class: 'error-text', title: shorten(err, 2000) }, shorten(err, 80)));
  }

  // ---------------------------------------------------------------- one job

  function jobView(route) {
    const jobId = route.id;
    const stateEl = h('span', { testid: 'job-state', class: 'badge state-unknown' }, '\u2026');
    const typeEl = h('span', { class: 'muted', testid: 'job-type' });
    // The answer to an action holds the job as it left it: shown at once,
    // before the refresh that follows.
    const after = (r) => { if (r && r.job && r.job.state) showState(r.job.state); };
    const cancel = h('button', { type: 'button', class: 'action danger', testid: 'cancel', hidden: true, onclick: async () =>
      after(await act(`Cancel job ${jobId}? A running job stops at its next step boundary.`, `/api/v1/jobs/${jobId}/cancel`, {})) }, 'Cancel');
    const retry = h('button', { type: 'button', class: 'action primary', testid: 'retry', hidden: true, onclick: async () =>
      after(await act(`Retry job ${jobId}? Its committed steps are kept.`, `/api/v1/jobs/${jobId}/retry`, {})) }, 'Retry');
    function showState(state) {
      stateEl.textContent = state;
      stateEl.className = `badge badge-large state-${STATES.includes(state) ? state : 'unknown'}`;
      stateEl.dataset.state = state;
      retry.hidden = !(canAct() && RETRIABLE.has(state));
      cancel.hidden = !(canAct() && CANCELLABLE.has(state));
    }
    const err = errorBox();
    const body = h('div', { testid: 'job-body' });
    const el = h('section', { class: 'page', testid: 'page-job' },
      h('p', { class: 'crumbs' }, h('a', { href: '#/jobs', testid: 'back-to-jobs' }, '\u2190 Jobs')),
      h('div', { class: 'job-head' },
        h('h1', null, `Job ${jobId} `, typeEl),
        stateEl,
        h('span', { class: 'spacer' }),
        h('span', { class: 'needs-write' }, retry, cancel)),
      err.el,
      body);

    return {
      el,
      title: () => `Job ${jobId}`,
      async refresh(current) {
        let j;
        try {
          j = await api('GET', `/api/v1/jobs/${jobId}`);
        } catch (e) {
          if (e.status === 404 && current()) {
            showState('not found');
            redraw(body, '404', () => h('p', { class: 'muted' }, `There is no job ${jobId} (it may have been purged).`));
          }
          throw e;
        }
        if (!current()) return;
        err.clear();
        showState(j.state);
        typeEl.textContent = j.type;
        redraw(body, json(j), () => jobDetails(j));
      },
      fail: (e) => err.show(e),
    };
  }

  function jobDetails(j) {
    const terminal = j.state === 'completed' || j.state === 'dead' || j.state === 'cancelled';
    const rows = [
      ['Type', j.type],
      ['Queue', j.queue],
      ['State', [badge(j.state), j.cancel_requested && !terminal ? h('span', { class: 'muted' }, ' cancel requested') : null]],
      ['Attempt', h('span', { testid: 'job-attempts' }, `${j.attempt} of ${j.max_attempts}`)],
      ['Priority', String(j.priority)],
      j.unique_key ? ['Unique key', h('code', null, j.unique_key)] : null,
      ['Created', whenFull(j.created_at)],
      terminal ? ['Finished', whenFull(j.finished_at)] : ['Run at', whenFull(j.run_at)],
      j.finished_at ? ['Took', formatDuration(Date.parse(j.finished_at) - Date.parse(j.created_at))] : null,
      j.lease_owner ? ['Held by', [h('code', null, j.lease_owner), j.lease_expires_at ? h('span', { class: 'muted' }, ` lease ends ${relative(j.lease_expires_at)}`) : null]] : null,
      j.lease_expiries ? ['Lease expiries', String(j.lease_expiries)] : null,
      ['Updated', whenFull(j.updated_at)],
    ].filter(Boolean);
    const steps = Array.isArray(j.steps) ? j.steps : [];
    const errors = Array.isArray(j.errors) ? j.errors : [];
    const timeline = Array.isArray(j.timeline) ? j.timeline : [];
    return [
      h('div', { class: 'grid2' },
        h('div', null,
          h('dl', { class: 'details', testid: 'job-details' }, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]))),
        h('div', null,
          h('h3', null, 'Arguments'),
          h('pre', { class: 'json', testid: 'job-args' }, prettyJson(j.args)),
          j.result !== null && j.result !== undefined
            ? [h('h3', null, 'Result'), h('pre', { class: 'json', testid: 'job-result' }, prettyJson(j.result))] : null,
          j.last_error
            ? [h('h3', null, 'Last error'), h('pre', { class: 'error-text wrap', testid: 'job-last-error' }, j.last_error)] : null)),
      h('h2', null, 'Steps'),
      table('steps', ['Step', 'Calls', 'State', { text: 'Attempts', class: 'num' }, { text: 'Duration', class: 'num' }, 'Output', 'Last error'],
        steps.map((s) => h('tr', { testid: 'step-row', dataset: { name: s.name } },
          h('td', null, h('strong', null, s.name)),
          h('td', null, s.call
            ? h('a', { href: `#/plugins`, testid: 'step-plugin', dataset: { plugin: s.call.split('.')[0] } }, s.call)
            : h('span', { class: 'muted' }, '\u2014')),
          h('td', null, h('span', { class: `badge step-${s.state === 'completed' ? 'ok' : 'bad'}` }, s.state)),
          h('td', { class: 'num' }, String(s.attempts)),
          h('td', { class: 'num' }, s.duration_ms !== undefined && s.duration_ms !== null ? formatDuration(s.duration_ms) : '\u2014'),
          h('td', { class: 'mono', title: shorten(json(s.output), 2000) }, s.output === null || s.output === undefined ? '' : shorten(json(s.output), 80)),
          h('td', { class: 'error-text' }, s.last_error || ''))),
        'No step committed yet.'),
      h('h2', null, 'Attempt errors'),
      table('errors', ['At', { text: 'Attempt', class: 'num' }, 'Step', 'Error'],
        errors.map((e) => h('tr', { testid: 'error-row' },
          h('td', { class: 'nowrap' }, formatTime(e.at)),
          h('td', { class: 'num' }, String(e.attempt)),
          h('td', null, e.step || h('span', { class: 'muted' }, '\u2014')),
          h('td', { class: 'error-text' }, e.error))),
        'No attempt failed.'),
      h('h2', null, 'Timeline'),
      table('timeline', ['At', 'Kind', 'Detail'],
        timeline.map((t) => h('tr', { testid: 'timeline-row' },
          h('td', { class: 'nowrap' }, formatTime(t.at)),
          h('td', null, h('code', null, t.kind)),
          h('td', null, t.detail))),
        'No waits, parks or interruptions.'),
    ];
  }

  // ---------------------------------------------------------------- unknown route

  function missingView(route) {
    return {
      el: h('section', { class: 'page', testid: 'page-missing' },
        h('h1', null, 'Not found'),
        h('p', null, `There is no page ${route.path}. `, h('a', { href: '#/' }, 'Go to the overview'), '.')),
      title: () => 'Not found',
    };
  }

  const VIEWS = {
    overview: overviewView,
    jobs: jobsView,
    job: jobView,
    plugins: pluginsView,
    limits: limitsView,
    missing: missingView,
  };

  // ---------------------------------------------------------------- start

  function start() {
    $('status-close').addEventListener('click', () => { $('status').hidden = true; });
    window.addEventListener('hashchange', onRoute);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshSoon(); });
    onRoute();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
