// Chime dashboard. Plain JavaScript, no dependencies, no build step.
//
// Data flow: the websocket /v1/ws pushes {type, seq, data} once a second,
// where data is the node's cluster snapshot; the cluster view is redrawn
// from each push and the charts keep their history client-side. The tasks
// view talks to the REST API (API.md) with fetch. When the node wants a
// token, the page asks once and keeps it in sessionStorage; it goes in the
// Authorization header of API calls and in the websocket subprotocol.
'use strict';

(() => {
  const SLOTS = 16384;
  const GRID = 128;
  const TOKEN_KEY = 'chime.token';
  // RFC 7230 token characters: what a Sec-WebSocket-Protocol value may hold.
  const TOKEN_CHARS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const HISTORY_MS = 16 * 60 * 1000;
  const GAP_MS = 5000; // a longer gap between two pushes breaks a chart line

  // Owner colours: distinct on a dark background, none of them amber or red,
  // which mark under-replicated and unavailable slots.
  const PALETTE = ['#5b9cf6', '#3ecf8e', '#b18cff', '#2fc6d6', '#f471b5',
    '#9bd04a', '#7c8cff', '#e0a3ff', '#4fd1c5', '#c3e88d'];
  const UNDER_RGB = [245, 184, 61];
  const UNAVAIL_RGB = [240, 84, 92];
  const STALLED_RGB = [150, 0, 40]; // stalled: its owner does not fire it (the safety net)
  const EMPTY_RGB = [16, 21, 28];
  const DOWN_HEX = '#4b5563'; // a dead or left member, in the table, legend and slot map
  const DOWN_RGB = hexRGB(DOWN_HEX);
  const NO_OWNER = 255; // a slot_owners byte: the slot has no owner

  const $ = (id) => document.getElementById(id);

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    snap: null,
    seq: 0,
    lastMsgAt: 0,
    history: [], // {t, nodes: Map(name -> {fires, p99})}
    colors: new Map(), // name -> {hex, rgb}
    rangeMin: 5,
    ws: null,
    retry: 0,
    reconnectTimer: 0,
    eventsKey: '',
    slotOwner: new Uint8Array(SLOTS).fill(NO_OWNER), // index into slotOwners
    slotState: new Uint8Array(SLOTS), // 0 ok, 1 under-replicated, 2 unavailable, 3 stalled
    slotOwners: [], // member names, in the snapshot's order
    list: { cursors: [''], page: 0, next: '', selected: '' },
    detail: { id: '', key: '', task: null },
    view: 'cluster',
    failNext: '',
    started: false,
  };

  // ---------- small helpers ----------

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v == null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k === 'dataset') Object.assign(e.dataset, v);
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const k of kids) {
      if (k == null || k === false) continue;
      e.append(k instanceof Node ? k : String(k));
    }
    return e;
  }

  function setText(id, text, cls) {
    const e = $(id);
    if (e.textContent !== text) e.textContent = text;
    if (cls !== undefined) e.className = 'value' + (cls ? ' ' + cls : '');
  }

  const nf = new Intl.NumberFormat('en-US');
  const fmtInt = (v) => (v == null || v < 0 || !isFinite(v) ? '–' : nf.format(Math.round(v)));

  function fmtRate(v) {
    if (!v || !isFinite(v)) return '0';
    if (v < 10) return v.toFixed(1);
    return nf.format(Math.round(v));
  }

  function fmtMs(ms) {
    if (!ms || !isFinite(ms)) return '0';
    if (ms < 1) return ms.toFixed(2) + ' ms';
    if (ms < 10) return ms.toFixed(1) + ' ms';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
    return fmtDur(ms / 1000);
  }

  function fmtBytes(b) {
    if (b == null || !isFinite(b) || b < 0) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i === 0 ? b.toFixed(0) : b.toFixed(b < 10 ? 1 : 0)) + ' ' + u[i];
  }

  function fmtDur(sec) {
    if (sec == null || !isFinite(sec)) return '–';
    sec = Math.max(0, Math.floor(sec));
    const d = Math.floor(sec / 86400), h = Math.floor(sec / 3600) % 24;
    const m = Math.floor(sec / 60) % 60, s = sec % 60;
    if (d) return d + 'd' + (h ? ' ' + h + 'h' : '');
    if (h) return h + 'h' + (m ? ' ' + m + 'm' : '');
    if (m) return m + 'm' + (s ? ' ' + s + 's' : '');
    return s + 's';
  }

  // fmtSpan renders a schedule's milliseconds: 200 ms, 1.5s, 40s, 4m 20s.
  function fmtSpan(ms) {
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000 && ms % 1000) return (ms / 1000).toFixed(ms % 100 ? 2 : 1) + 's';
    return fmtDur(ms / 1000);
  }

  const fmtPct = (v) => (v == null || !isFinite(v) ? '–' : v.toFixed(v < 10 ? 1 : 0) + '%');
  const pad2 = (n) => String(n).padStart(2, '0');
  const fmtClock = (d) => pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  const fmtHM = (d) => pad2(d.getHours()) + ':' + pad2(d.getMinutes());

  function fmtWhen(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    if (isNaN(d)) return iso;
    const today = new Date();
    const sameDay = d.toDateString() === today.toDateString();
    return (sameDay ? '' : d.toISOString().slice(0, 10) + ' ') + fmtClock(d);
  }

  function fmtRel(iso) {
    if (!iso) return '';
    const t = Date.parse(iso);
    if (isNaN(t)) return '';
    const dt = (t - Date.now()) / 1000;
    const a = Math.abs(dt);
    const s = a < 1 ? 'now' : fmtDur(a);
    if (s === 'now') return 'now';
    return dt > 0 ? 'in ' + s : s + ' ago';
  }

  function colorOf(name) {
    let c = state.colors.get(name);
    if (!c) {
      const i = state.colors.size;
      const hex = i < PALETTE.length ? PALETTE[i] : hslHex(60 + ((i * 137.508) % 270), 62, 64);
      c = { hex, rgb: hexRGB(hex) };
      state.colors.set(name, c);
    }
    return c;
  }

  function hexRGB(hex) {
    const n = parseInt(hex.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }

  function hslHex(h, s, l) {
    s /= 100; l /= 100;
    const k = (n) => (n + h / 30) % 12;
    const a = s * Math.min(l, 1 - l);
    const f = (n) => Math.round(255 * (l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)))));
    return '#' + [f(0), f(8), f(4)].map((v) => v.toString(16).padStart(2, '0')).join('');
  }

  function swatch(hex) {
    const s = el('span', { class: 'swatch', dataset: { color: hex } });
    s.style.background = hex;
    return s;
  }

  function badge(text, cls) {
    return el('span', { class: 'badge ' + (cls || text || ''), text: text || '–' });
  }

  // ---------- token and API ----------

  let tokenWaiters = null;

  function askToken(message) {
    const dlg = $('token-dialog');
    dlg.querySelector('p').textContent = message ||
      'This node requires a bearer token. It is kept in this tab\'s session storage only.';
    if (!tokenWaiters) {
      tokenWaiters = [];
      $('token-input').value = '';
      if (!dlg.open) dlg.showModal();
    }
    setConn('auth', 'token needed');
    return new Promise((resolve) => tokenWaiters.push(resolve));
  }

  function settleToken(token) {
    if (token !== undefined) {
      state.token = token;
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    }
    const dlg = $('token-dialog');
    if (dlg.open) dlg.close();
    const waiters = tokenWaiters || [];
    tokenWaiters = null;
    waiters.forEach((f) => f());
  }

  // api calls the REST API. On 401 it asks for the token and retries as
  // long as the user gives a new one. It resolves to {ok, status, data}.
  async function api(method, path, body) {
    for (;;) {
      const headers = {};
      if (state.token) headers.Authorization = 'Bearer ' + state.token;
      // The node wants it on every POST and PUT, even without a body.
      if (body !== undefined || method === 'POST' || method === 'PUT') headers['Content-Type'] = 'application/json';
      const res = await fetch(path, {
        method, headers, cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let data = null;
      if (text) {
        try { data = JSON.parse(text); } catch (e) { data = text; }
      }
      if (res.status !== 401) return { ok: res.ok, status: res.status, data };
      const before = state.token;
      await askToken(before ? 'The node refused that token. Enter the right one.' : undefined);
      if (state.token === before) return { ok: false, status: 401, data };
      if (state.started) reconnect();
    }
  }

  function apiError(r) {
    const e = r.data && r.data.error;
    if (e && e.message) return e.message + (e.field ? ' (' + e.field + ')' : '');
    return 'HTTP ' + r.status;
  }

  // ---------- websocket ----------

  function setConn(s, text) {
    const c = $('conn');
    c.dataset.state = s;
    $('conn-text').textContent = text;
  }

  // reconnect makes sure one websocket is open or opening with the current
  // token. It is idempotent: a socket already connecting with this token is
  // kept (closing a connecting socket only produces a console error).
  function reconnect() {
    clearTimeout(state.reconnectTimer);
    const cur = state.ws;
    if (cur && cur.chimeToken === state.token && cur.readyState <= WebSocket.OPEN) return;
    state.ws = null;
    if (cur) cur.close();
    openSocket();
  }

  function openSocket() {
    let url = (location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + '/v1/ws';
    const protocols = ['chime.v1'];
    if (state.token) {
      if (TOKEN_CHARS.test(state.token)) protocols.push('bearer.' + state.token);
      else url += '?access_token=' + encodeURIComponent(state.token);
    }
    const ws = new WebSocket(url, protocols);
    ws.chimeToken = state.token;
    let opened = false;
    state.ws = ws;
    ws.onopen = () => {
      opened = true;
      state.retry = 0;
      setConn('live', 'live');
    };
    ws.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      onMessage(m);
    };
    ws.onclose = (ev) => {
      if (state.ws !== ws) return; // replaced by a newer connection
      state.ws = null;
      if (!opened) {
        // The handshake failed: maybe the token is missing or wrong. The
        // probe asks for one on 401; then we try again.
        probe().then(() => scheduleReconnect('reconnecting'));
        return;
      }
      scheduleReconnect(ev.code === 1013 ? 'dropped as slow, reconnecting' : 'reconnecting');
    };
  }

  function scheduleReconnect(text) {
    if (state.ws) return; // a token change already reconnected
    clearTimeout(state.reconnectTimer);
    const delay = Math.min(5000, 400 * Math.pow(1.6, state.retry++));
    if (!tokenWaiters) setConn('connecting', text);
    state.reconnectTimer = setTimeout(reconnect, delay);
  }

  // probe checks the API once (and asks for a token on 401); it also
  // learns the serving node's name.
  async function probe() {
    try {
      const r = await api('GET', '/v1/cluster');
      if (r.ok && r.data && r.data.self) $('self-name').textContent = r.data.self;
    } catch (e) {
      // the node is unreachable; the websocket retry loop covers it
    }
  }

  function onMessage(m) {
    state.lastMsgAt = Date.now();
    state.seq = m.seq || 0;
    document.body.dataset.seq = String(state.seq);
    const c = $('conn');
    c.classList.add('beat');
    setTimeout(() => c.classList.remove('beat'), 250);
    if (c.dataset.state !== 'live') setConn('live', 'live');
    if (m.type === 'error') {
      showBanner('The node could not take a snapshot: ' + (m.error || 'unknown error') + '. Showing the last good one.');
      return;
    }
    if (m.type !== 'snapshot' || !m.data) return;
    const snap = m.data;
    showBanner(snap.insecure
      ? 'This cluster runs with --insecure-cluster: calls between its nodes are not authenticated, and anyone who reaches their ports can steer or crash them.'
      : '');
    state.snap = snap;
    record(snap);
    renderCluster();
  }

  function showBanner(text) {
    const b = $('banner');
    b.hidden = !text;
    b.textContent = text;
  }

  // ---------- cluster view ----------

  const members = (snap) => (snap && Array.isArray(snap.members) ? snap.members : []);

  // A member is live while gossip has it alive or suspect; a row without a
  // status (an older node) counts as live. Dead and left members stay in
  // the node table, greyed, and out of the totals. A live member whose row
  // is stale (it did not answer the serving node in time) keeps its last
  // stats in the totals and is flagged unreachable.
  const isLive = (m) => !m.status || m.status === 'alive' || m.status === 'suspect';
  const liveMembers = (snap) => members(snap).filter(isLive);

  function record(snap) {
    const t = Date.parse(snap.time) || Date.now();
    const nodes = new Map();
    // Only fresh rows of live members: a stale row would draw its last
    // rate as a flat line; a gap says more.
    for (const m of liveMembers(snap)) {
      if (!m.stale) nodes.set(m.name, { fires: m.fires_per_sec || 0, p99: m.lateness_p99_ms || 0 });
    }
    const h = state.history;
    if (h.length && t < h[h.length - 1].t) h.length = 0; // the clock went back: start over
    if (h.length && t === h[h.length - 1].t) h.pop();
    h.push({ t, nodes });
    while (h.length && h[0].t < t - HISTORY_MS) h.shift();
  }

  function assignColors(snap) {
    [...new Set(members(snap).map((m) => m.name))].sort().forEach(colorOf);
  }

  function renderCluster() {
    const snap = state.snap;
    if (!snap) return;
    assignColors(snap);
    if (snap.self) $('self-name').textContent = snap.self;
    $('updated').textContent = fmtClock(new Date(Date.parse(snap.time) || Date.now()));
    const slotStats = drawSlotMap(snap);
    renderKPIs(snap, slotStats);
    renderNodes(snap);
    renderLegend(slotStats);
    renderHeatmap(snap.wheel);
    renderHosts(snap.hosts || []);
    renderLatency('urls', null, snap.urls || []);
    renderEvents(snap.events || []);
    if (state.view === 'cluster') drawCharts();
  }

  function sum(list, f) { return list.reduce((a, m) => a + (Number(f(m)) || 0), 0); }

  function renderKPIs(snap, ss) {
    const all = members(snap);
    const ms = all.filter(isLive);
    const states = {};
    const count = (k) => { states[k] = (states[k] || 0) + 1; };
    for (const m of all) {
      if (!isLive(m)) count(m.status);
      else if (m.stale) count('unreachable');
      else count(m.state || 'unknown');
    }
    setText('k-members', fmtInt(ms.length), all.length > ms.length ? 'warn' : '');
    $('k-members-sub').textContent = Object.keys(states).sort().map((k) => states[k] + ' ' + k).join(' · ') || 'no members';

    const okPct = (100 * ss.ok) / SLOTS;
    setText('k-slots', okPct >= 99.95 ? '100%' : okPct.toFixed(1) + '%', ss.unavailable || ss.stalled ? 'bad' : ss.under ? 'warn' : 'good');
    $('k-slots-sub').textContent = ss.under || ss.unavailable || ss.stalled
      ? fmtInt(ss.under) + ' under-replicated · ' + fmtInt(ss.unavailable) + ' unavailable' + (ss.stalled ? ' · ' + fmtInt(ss.stalled) + ' stalled' : '')
      : 'all ' + fmtInt(SLOTS) + ' ok';

    // The safety net: overdue tasks and stalled slots, red when any.
    const overdue = sum(ms, (m) => (m.tasks_overdue > 0 ? m.tasks_overdue : 0));
    const stalled = sum(ms, (m) => m.slots_stalled);
    setText('k-overdue', fmtInt(overdue), overdue || stalled ? 'bad' : 'good');
    $('k-overdue-sub').textContent = stalled
      ? fmtInt(stalled) + ' slot(s) not firing'
      : overdue ? 'due and not fired' : 'none';

    const unknown = ms.filter((m) => m.tasks_stored == null || m.tasks_stored < 0).length;
    const stored = sum(ms, (m) => (m.tasks_stored > 0 ? m.tasks_stored : 0));
    setText('k-tasks', unknown === ms.length && ms.length ? 'counting…' : fmtInt(stored));
    $('k-tasks-sub').textContent = unknown ? unknown + ' node(s) still counting' : 'on ' + ms.length + ' node(s)';
    setText('k-wheel', fmtInt(sum(ms, (m) => m.wheel_tasks)));

    const fires = sum(ms, (m) => m.fires_per_sec);
    const fails = sum(ms, (m) => m.failures_per_sec);
    setText('k-fires', fmtRate(fires));
    const peak = Math.max(0, ...state.history.map((p) => { let s = 0; p.nodes.forEach((v) => { s += v.fires; }); return s; }));
    $('k-fires-sub').textContent = 'peak ' + fmtRate(peak) + ' in 15m';
    setText('k-fails', fmtRate(fails), fails > 0 ? 'bad' : '');
    $('k-fails-sub').textContent = fires > 0 ? ((100 * fails) / fires).toFixed(1) + '% of fires' : 'cluster';
    setText('k-creates', fmtRate(sum(ms, (m) => m.creates_per_sec)));

    let worst = null;
    for (const m of ms) if (!worst || (m.lateness_p99_ms || 0) > (worst.lateness_p99_ms || 0)) worst = m;
    const p99 = worst ? worst.lateness_p99_ms || 0 : 0;
    setText('k-p99', fmtMs(p99), p99 > 1000 ? 'bad' : p99 > 50 ? 'warn' : '');
    $('k-p99-sub').textContent = worst && ms.length > 1 ? 'worst: ' + worst.name : 'last interval';

    const cpu = sum(ms, (m) => m.cpu_percent);
    setText('k-cpu', fmtPct(cpu));
    $('k-cpu-sub').textContent = ms.length > 1 ? fmtPct(cpu / ms.length) + ' per node' : 'of one core';
    setText('k-rss', fmtBytes(sum(ms, (m) => m.rss_bytes)));
    $('k-rss-sub').textContent = 'disk ' + fmtBytes(sum(ms, (m) => m.disk_bytes));
  }

  function cell(text, cls, title) {
    return el('td', { class: cls || null, title: title || null, text });
  }

  function numCell(v, text) {
    return cell(text, 'num' + (!v ? ' zero' : ''));
  }

  // staleText says why a row's stats are not fresh, for its tooltip.
  function staleText(m) {
    if (!m.stale) return null;
    const age = m.stats_age_seconds > 0 ? 'stats from ' + fmtDur(m.stats_age_seconds) + ' ago' : 'no stats received';
    return age + (m.error ? ' · ' + m.error : '');
  }

  function memberBadges(m) {
    const out = [badge(m.state || 'unknown')];
    if (!isLive(m)) out.push(' ', badge(m.status));
    else if (m.status === 'suspect') out.push(' ', badge('suspect'));
    if (isLive(m) && m.stale) out.push(' ', badge('unreachable', 'warn'));
    return out;
  }

  function renderNodes(snap) {
    const all = [...members(snap)].sort((a, b) => String(a.name).localeCompare(String(b.name)));
    const ms = all.filter(isLive);
    const rows = all.map((m) => {
      const live = isLive(m);
      const nameCell = el('td', null, swatch(live ? colorOf(m.name).hex : DOWN_HEX), el('b', { text: m.name }),
        m.name === snap.self ? el('span', { class: 'self-tag', text: 'this node' }) : null);
      const tr = el('tr', {
        class: [live ? '' : 'down', m.stale ? 'stale' : ''].join(' ').trim() || null,
        title: staleText(m),
        dataset: { node: m.name, status: m.status || 'alive', stale: m.stale ? '1' : '0' },
      },
        nameCell,
        el('td', null, ...memberBadges(m)),
        cell(m.http_addr || '–', 'addr'),
        cell(m.gossip_addr || '–', 'addr'),
        numCell(m.slots_owned, fmtInt(m.slots_owned)),
        numCell(m.slots_following, fmtInt(m.slots_following)),
        cell(m.tasks_stored == null || m.tasks_stored < 0 ? 'counting…' : fmtInt(m.tasks_stored), 'num'),
        numCell(m.wheel_tasks, fmtInt(m.wheel_tasks)),
        numCell(m.fires_per_sec, fmtRate(m.fires_per_sec)),
        el('td', { class: 'num' + (m.failures_per_sec > 0 ? ' bad' : ' zero'), text: fmtRate(m.failures_per_sec) }),
        numCell(m.creates_per_sec, fmtRate(m.creates_per_sec)),
        numCell(m.lateness_p50_ms, fmtMs(m.lateness_p50_ms)),
        numCell(m.lateness_p99_ms, fmtMs(m.lateness_p99_ms)),
        numCell(m.cpu_percent, fmtPct(m.cpu_percent)),
        numCell(m.rss_bytes, fmtBytes(m.rss_bytes)),
        numCell(m.goroutines, fmtInt(m.goroutines)),
        numCell(m.disk_bytes, fmtBytes(m.disk_bytes)),
        numCell(m.uptime_seconds, fmtDur(m.uptime_seconds)));
      return tr;
    });
    $('nodes').tBodies[0].replaceChildren(...rows);
    const stored = ms.some((m) => m.tasks_stored >= 0) ? sum(ms, (m) => (m.tasks_stored > 0 ? m.tasks_stored : 0)) : -1;
    const p50 = Math.max(0, ...ms.map((m) => m.lateness_p50_ms || 0));
    const p99 = Math.max(0, ...ms.map((m) => m.lateness_p99_ms || 0));
    const down = all.length - ms.length;
    const foot = el('tr', null,
      el('td', { text: 'Cluster · ' + ms.length + (ms.length === 1 ? ' node' : ' nodes') + (down ? ' live of ' + all.length : ''), title: 'totals over live members' }),
      el('td'), el('td'), el('td'),
      cell(fmtInt(sum(ms, (m) => m.slots_owned)), 'num'),
      cell(fmtInt(sum(ms, (m) => m.slots_following)), 'num'),
      cell(fmtInt(stored), 'num'),
      cell(fmtInt(sum(ms, (m) => m.wheel_tasks)), 'num'),
      cell(fmtRate(sum(ms, (m) => m.fires_per_sec)), 'num'),
      cell(fmtRate(sum(ms, (m) => m.failures_per_sec)), 'num'),
      cell(fmtRate(sum(ms, (m) => m.creates_per_sec)), 'num'),
      cell(fmtMs(p50), 'num', 'worst node'),
      cell(fmtMs(p99), 'num', 'worst node'),
      cell(fmtPct(sum(ms, (m) => m.cpu_percent)), 'num'),
      cell(fmtBytes(sum(ms, (m) => m.rss_bytes)), 'num'),
      cell(fmtInt(sum(ms, (m) => m.goroutines)), 'num'),
      cell(fmtBytes(sum(ms, (m) => m.disk_bytes)), 'num'),
      el('td'));
    $('nodes').tFoot.replaceChildren(foot);
    $('nodes-hint').textContent = snap.self ? 'served by ' + snap.self : '';
  }

  // ---------- slot map ----------

  // slotBytes decodes one of the snapshot's slot tables (slot_owners,
  // slot_states): standard base64 of one byte per slot. It returns null
  // when the field is missing or not SLOTS bytes long.
  function slotBytes(b64) {
    if (typeof b64 !== 'string' || b64.length !== 4 * Math.ceil(SLOTS / 3)) return null;
    let bin;
    try { bin = atob(b64); } catch (e) { return null; }
    if (bin.length !== SLOTS) return null;
    const out = new Uint8Array(SLOTS);
    for (let i = 0; i < SLOTS; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // drawSlotMap paints the 128 × 128 grid from the snapshot's slot table:
  // slot_owners byte i is the index in members of slot i's owner (255: no
  // owner), slot_states byte i is 0 ok, 1 under-replicated, 2 unavailable,
  // 3 stalled (its owner has not fired it for --overdue-after).
  // It keeps both arrays for the hover readout and returns the counts for
  // the KPIs and the legend.
  function drawSlotMap(snap) {
    const canvas = $('slotmap');
    const ctx = canvas.getContext('2d');
    const img = ctx.createImageData(GRID, GRID);
    const d = img.data;
    const ms = members(snap);
    const names = ms.map((m) => m.name);
    const owners = slotBytes(snap.slot_owners) || new Uint8Array(SLOTS).fill(NO_OWNER);
    const states = slotBytes(snap.slot_states) || new Uint8Array(SLOTS);
    // Any number of members: colours come from colorOf (the palette, then
    // generated hues); a dead or left owner (a table older than its
    // death) is grey.
    const rgbs = ms.map((m) => (isLive(m) ? colorOf(m.name).rgb : DOWN_RGB));
    const down = new Set(ms.filter((m) => !isLive(m)).map((m) => m.name));
    const counts = new Map();
    const perOwner = new Array(names.length).fill(0);
    const stats = { ok: 0, under: 0, unavailable: 0, stalled: 0, counts, down };
    for (let s = 0; s < SLOTS; s++) {
      if (owners[s] >= names.length) owners[s] = NO_OWNER; // not a member's index
      if (states[s] > 3) states[s] = 0; // a state this page does not know
      const oi = owners[s], st = states[s];
      if (oi !== NO_OWNER) perOwner[oi]++;
      if (st === 0) stats.ok++; else if (st === 1) stats.under++; else if (st === 2) stats.unavailable++; else stats.stalled++;
      const x = s & (GRID - 1), y = s >> 7;
      let c = oi === NO_OWNER ? EMPTY_RGB : rgbs[oi];
      if (st === 3) c = STALLED_RGB;
      else if (st === 2) c = UNAVAIL_RGB;
      else if (st === 1 && ((x + y) & 1)) c = UNDER_RGB; // hatched: every other cell amber
      const p = s * 4;
      d[p] = c[0]; d[p + 1] = c[1]; d[p + 2] = c[2]; d[p + 3] = 255;
    }
    names.forEach((n, i) => { if (perOwner[i]) counts.set(n, (counts.get(n) || 0) + perOwner[i]); });
    state.slotOwner = owners;
    state.slotState = states;
    state.slotOwners = names;
    ctx.putImageData(img, 0, 0);
    return stats;
  }

  function renderLegend(ss) {
    const names = [...ss.counts.keys()].filter(Boolean).sort();
    const items = names.map((n) => el('li', { dataset: { owner: n } },
      swatch(ss.down.has(n) ? DOWN_HEX : colorOf(n).hex), n + (ss.down.has(n) ? ' (down)' : ''),
      el('span', { class: 'n', text: fmtInt(ss.counts.get(n)) })));
    items.push(el('li', { class: 'marker' }, el('span', { class: 'swatch under' }), 'under-replicated',
      el('span', { class: 'n', text: fmtInt(ss.under) })));
    items.push(el('li', { class: 'marker' }, el('span', { class: 'swatch unavail' }), 'unavailable',
      el('span', { class: 'n', text: fmtInt(ss.unavailable) })));
    items.push(el('li', { class: 'marker' }, el('span', { class: 'swatch stalled' }), 'stalled',
      el('span', { class: 'n', text: fmtInt(ss.stalled) })));
    $('slot-legend').replaceChildren(...items);
  }

  function slotAt(ev) {
    const c = $('slotmap');
    const r = c.getBoundingClientRect();
    const x = Math.floor(((ev.clientX - r.left) / r.width) * GRID);
    const y = Math.floor(((ev.clientY - r.top) / r.height) * GRID);
    if (x < 0 || y < 0 || x >= GRID || y >= GRID) return -1;
    return y * GRID + x;
  }

  function onSlotHover(ev) {
    const s = slotAt(ev);
    if (s < 0) return;
    const oi = state.slotOwner[s];
    const st = ['ok', 'under-replicated', 'unavailable', 'stalled (not firing)'][state.slotState[s]];
    $('slot-readout').textContent = oi === NO_OWNER
      ? 'slot ' + s + ' · no owner · ' + st
      : 'slot ' + s + ' · ' + state.slotOwners[oi] + ' · ' + st;
  }

  // ---------- charts ----------

  function sizeCanvas(c) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(c.clientWidth));
    const h = Math.max(1, Math.round(c.clientHeight));
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    return { ctx, w, h };
  }

  function niceStep(x) {
    if (!(x > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(x)));
    const f = x / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
  }

  // fmtAxis labels an axis value with as many decimals as the step needs.
  function fmtAxis(v, step) {
    let d = 0;
    while (d < 4 && Math.abs(Math.round(step * Math.pow(10, d)) - step * Math.pow(10, d)) > 1e-9) d++;
    const text = v.toFixed(d);
    return d ? text.replace(/\.?0+$/, '') : nf.format(Math.round(v));
  }

  // lineChart draws series [{color, points: [[t, v]], fill, width}] over the
  // last rangeMs ending at end.
  function lineChart(canvas, series, end, rangeMs, minTop, fmt) {
    if (!canvas.clientWidth) return;
    const { ctx, w, h } = sizeCanvas(canvas);
    const L = 52, R = 10, T = 8, B = 20;
    const pw = w - L - R, ph = h - T - B;
    const start = end - rangeMs;
    let max = 0;
    for (const s of series) for (const [t, v] of s.points) if (t >= start && v > max) max = v;
    const step = niceStep(Math.max(max, minTop) / 4);
    const top = Math.max(step, Math.ceil(Math.max(max, minTop) / step) * step);
    const X = (t) => L + ((t - start) / rangeMs) * pw;
    const Y = (v) => T + ph - (v / top) * ph;

    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.lineWidth = 1;
    for (let v = 0; v <= top + step / 2; v += step) {
      const y = Math.round(Y(v)) + 0.5;
      ctx.strokeStyle = v === 0 ? '#2e3b4d' : '#1d2633';
      ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(w - R, y); ctx.stroke();
      ctx.fillStyle = '#8593a6';
      ctx.textAlign = 'right';
      ctx.fillText(fmt(v, step), L - 8, y);
    }
    const tickMs = rangeMs <= 60000 ? 15000 : rangeMs <= 300000 ? 60000 : 180000;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'alphabetic';
    for (let k = 0; k * tickMs <= rangeMs; k++) {
      const t = end - k * tickMs;
      const x = Math.round(X(t)) + 0.5;
      ctx.strokeStyle = '#1a222d';
      if (k > 0) { ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, T + ph); ctx.stroke(); }
      const label = k === 0 ? 'now' : '−' + (tickMs >= 60000 ? (k * tickMs) / 60000 + 'm' : (k * tickMs) / 1000 + 's');
      ctx.fillStyle = '#5b687a';
      ctx.textAlign = k === 0 ? 'right' : 'center';
      ctx.fillText(label, k === 0 ? w - R : x, h - 5);
    }
    let any = false;
    ctx.save();
    ctx.beginPath(); ctx.rect(L, T - 2, pw + 1, ph + 4); ctx.clip();
    for (const s of series) {
      const pts = s.points.filter(([t]) => t >= start - GAP_MS);
      if (!pts.length) continue;
      any = true;
      if (s.fill) {
        const g = ctx.createLinearGradient(0, T, 0, T + ph);
        g.addColorStop(0, s.color + '40');
        g.addColorStop(1, s.color + '00');
        ctx.fillStyle = g;
        let segStart = 0;
        for (let i = 1; i <= pts.length; i++) {
          if (i === pts.length || pts[i][0] - pts[i - 1][0] > GAP_MS) {
            ctx.beginPath();
            ctx.moveTo(X(pts[segStart][0]), Y(0));
            for (let j = segStart; j < i; j++) ctx.lineTo(X(pts[j][0]), Y(pts[j][1]));
            ctx.lineTo(X(pts[i - 1][0]), Y(0));
            ctx.closePath(); ctx.fill();
            segStart = i;
          }
        }
      }
      ctx.strokeStyle = s.color;
      ctx.lineWidth = s.width || 1.6;
      ctx.lineJoin = 'round';
      ctx.setLineDash(s.dash || []);
      ctx.beginPath();
      for (let i = 0; i < pts.length; i++) {
        const [t, v] = pts[i];
        if (i === 0 || t - pts[i - 1][0] > GAP_MS) ctx.moveTo(X(t), Y(v));
        else ctx.lineTo(X(t), Y(v));
      }
      ctx.stroke();
      ctx.setLineDash([]);
      const [lt, lv] = pts[pts.length - 1];
      ctx.fillStyle = s.color;
      ctx.beginPath();
      ctx.arc(X(lt), Y(lv), 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
    ctx.restore();
    if (!any) {
      ctx.fillStyle = '#5b687a';
      ctx.textAlign = 'center';
      ctx.fillText('waiting for data…', L + pw / 2, T + ph / 2);
    }
  }

  function seriesOf(key) {
    const byNode = new Map();
    for (const p of state.history) {
      p.nodes.forEach((v, name) => {
        if (!byNode.has(name)) byNode.set(name, []);
        byNode.get(name).push([p.t, v[key]]);
      });
    }
    return [...byNode.keys()].sort().map((name) => ({ name, color: colorOf(name).hex, points: byNode.get(name) }));
  }

  function drawCharts() {
    const h = state.history;
    const end = h.length ? h[h.length - 1].t : Date.now();
    const range = state.rangeMin * 60000;
    const fires = seriesOf('fires');
    if (fires.length === 1) fires[0].fill = true;
    if (fires.length > 1) {
      const total = { name: 'total', color: '#d8dfe9', width: 1.4, dash: [4, 3], points: h.map((p) => { let s = 0; p.nodes.forEach((v) => { s += v.fires; }); return [p.t, s]; }) };
      fires.unshift(total);
    }
    lineChart($('chart-fires'), fires, end, range, 1, fmtAxis);
    const lat = seriesOf('p99');
    if (lat.length === 1) lat[0].fill = true;
    lineChart($('chart-lateness'), lat, end, range, 1, (v, step) => (v >= 1000 && step >= 1000 ? fmtAxis(v / 1000, step / 1000) + 's' : fmtAxis(v, step) + 'ms'));

    const inRange = h.filter((p) => p.t >= end - range);
    let nowF = 0, peakF = 0, nowL = 0, peakL = 0;
    inRange.forEach((p, i) => {
      let s = 0, l = 0;
      p.nodes.forEach((v) => { s += v.fires; l = Math.max(l, v.p99); });
      peakF = Math.max(peakF, s); peakL = Math.max(peakL, l);
      if (i === inRange.length - 1) { nowF = s; nowL = l; }
    });
    $('fires-now').textContent = 'now ' + fmtRate(nowF) + ' · peak ' + fmtRate(peakF);
    $('p99-now').textContent = 'now ' + fmtMs(nowL) + ' · worst ' + fmtMs(peakL);
  }

  function chartHover(ev, key, fmt) {
    const c = ev.currentTarget;
    const h = state.history;
    if (!h.length) return hideTip();
    const r = c.getBoundingClientRect();
    const L = 52, R = 10;
    const range = state.rangeMin * 60000;
    const end = h[h.length - 1].t;
    const t = end - range + ((ev.clientX - r.left - L) / (r.width - L - R)) * range;
    let best = null;
    for (const p of h) if (!best || Math.abs(p.t - t) < Math.abs(best.t - t)) best = p;
    if (!best || Math.abs(best.t - t) > GAP_MS) return hideTip();
    const lines = [fmtClock(new Date(best.t))];
    [...best.nodes.keys()].sort().forEach((n) => lines.push(n + ': ' + fmt(best.nodes.get(n)[key])));
    showTip(ev, lines.join('\n'));
  }

  function showTip(ev, text) {
    const tip = $('tooltip');
    tip.hidden = false;
    tip.replaceChildren(...text.split('\n').map((l, i) => el('div', { text: l, class: i === 0 ? 'hint' : null })));
    const x = Math.min(window.innerWidth - tip.offsetWidth - 8, ev.clientX + 14);
    tip.style.left = x + 'px';
    tip.style.top = ev.clientY + 14 + 'px';
  }

  function hideTip() { $('tooltip').hidden = true; }

  // ---------- wheel heatmap ----------

  // Bars go from dim to bright blue with their share of the busiest minute;
  // a minute well above the typical busy minute (a spike) is amber.
  const HEAT_LO = [38, 62, 99], HEAT_HI = [140, 190, 255], SPIKE = 'rgb(245,184,61)';

  function heatColor(f) {
    f = Math.max(0, Math.min(1, f));
    return 'rgb(' + HEAT_LO.map((v, k) => Math.round(v + (HEAT_HI[k] - v) * f)).join(',') + ')';
  }

  function spikeThreshold(counts) {
    const busy = counts.filter((v) => v > 0).sort((a, b) => a - b);
    if (busy.length < 3) return Infinity;
    const median = busy[Math.floor(busy.length / 2)];
    return Math.max(3 * median, median + 10);
  }

  function renderHeatmap(wheel) {
    const c = $('heatmap');
    if (!c.clientWidth) return;
    const counts = (wheel && wheel.counts) || [];
    const { ctx, w, h } = sizeCanvas(c);
    const n = counts.length || 60;
    const max = Math.max(0, ...counts);
    const spike = spikeThreshold(counts);
    const L = 2, R = 2, T = 4, B = 18;
    const cw = (w - L - R) / n;
    const ph = h - T - B;
    for (let i = 0; i < n; i++) {
      const v = counts[i] || 0;
      const x = L + i * cw;
      ctx.fillStyle = '#161e29';
      ctx.fillRect(x + 0.5, T, Math.max(1, cw - 1), ph);
      if (v > 0) {
        const bh = Math.max(3, (v / max) * ph);
        ctx.fillStyle = v >= spike ? SPIKE : heatColor(v / max);
        ctx.fillRect(x + 0.5, T + ph - bh, Math.max(1, cw - 1), bh);
      }
    }
    const start = wheel && wheel.start ? Date.parse(wheel.start) : NaN;
    const bucketMs = ((wheel && wheel.bucket_seconds) || 60) * 1000;
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#5b687a';
    ctx.textBaseline = 'alphabetic';
    for (let k = 0; k <= 4; k++) {
      const i = Math.round((k * n) / 4);
      ctx.textAlign = k === 0 ? 'left' : k === 4 ? 'right' : 'center';
      const label = isNaN(start) ? '+' + Math.round((i * bucketMs) / 60000) + 'm' : fmtHM(new Date(start + i * bucketMs));
      ctx.fillText(label, L + i * cw, h - 4);
    }
    const total = counts.reduce((a, b) => a + b, 0);
    const spikes = counts.filter((v) => v >= spike).length;
    $('wheel-hint').textContent = fmtInt(total) + ' pending in the next ' + Math.round((n * bucketMs) / 60000) +
      ' min · busiest minute ' + fmtInt(max) + (spikes ? ' · ' + spikes + ' spike(s)' : '') +
      (wheel && wheel.truncated ? ' · lower bound (scan cut short)' : '');
  }

  function onHeatHover(ev) {
    const snap = state.snap;
    const wheel = snap && snap.wheel;
    const counts = (wheel && wheel.counts) || [];
    if (!counts.length) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const i = Math.floor(((ev.clientX - r.left - 2) / (r.width - 4)) * counts.length);
    if (i < 0 || i >= counts.length) return;
    const bucketMs = (wheel.bucket_seconds || 60) * 1000;
    const start = Date.parse(wheel.start);
    const from = new Date(start + i * bucketMs), to = new Date(start + (i + 1) * bucketMs);
    $('heat-readout').textContent = fmtHM(from) + '–' + fmtHM(to) + ' · ' + fmtInt(counts[i]) + ' pending fires';
  }

  // ---------- due ahead: a 24-hour heatmap (GET /v1/stats/due) ----------

  // Rows are the members, columns the next 24 hours, each cell coloured by
  // its share of the busiest cell. A click asks for that member's busiest
  // slots in that hour. It refreshes every 30 s.
  const DUE_HOURS = 24, DUE_REFRESH_MS = 30000;
  let dueTimer = null;

  async function loadDue() {
    clearTimeout(dueTimer);
    dueTimer = setTimeout(loadDue, DUE_REFRESH_MS);
    const r = await api('GET', '/v1/stats/due?hours=' + DUE_HOURS);
    if (!r.ok || !r.data || !Array.isArray(r.data.nodes)) {
      $('due-hint').textContent = 'due load: ' + apiError(r);
      return;
    }
    renderDue(r.data);
  }

  function renderDue(d) {
    const from = Date.parse(d.from);
    const max = Math.max(1, ...d.nodes.flatMap((n) => n.hours || []));
    const head = [el('th', { text: 'Node' })];
    for (let i = 0; i < d.hours; i++) {
      head.push(el('th', { class: 'num', text: fmtHM(new Date(from + i * 3600000)), title: '+' + i + ' h' }));
    }
    $('due-heat').tHead.replaceChildren(el('tr', null, ...head));
    const rows = d.nodes.map((n) => {
      const cells = [el('th', { text: n.node })];
      if (!n.available) {
        cells.push(el('td', { class: 'due-unavailable', colSpan: d.hours, text: 'unavailable: ' + (n.error || 'no answer') }));
      } else {
        (n.hours || []).forEach((v, i) => {
          const td = el('td', {
            class: 'due-cell', text: v ? fmtInt(v) : '',
            dataset: { node: n.node, hour: String(i), count: String(v) },
            title: n.node + ' · ' + fmtHM(new Date(from + i * 3600000)) + ': ' + fmtInt(v) + ' due',
          });
          td.style.background = v > 0 ? heatColor(v / max) : '#161e29';
          cells.push(td);
        });
      }
      return el('tr', { dataset: { node: n.node } }, ...cells);
    });
    $('due-heat').tBodies[0].replaceChildren(...rows);
    $('due-hint').textContent = fmtInt(d.total) + ' due in the next ' + d.hours + ' h · ' + fmtInt(d.overdue) + ' overdue' +
      (d.truncated ? ' · lower bound (scan cut short)' : '') + (d.unavailable ? ' · some members unavailable' : '');
  }

  async function showDueSlots(node, hour) {
    const q = '/v1/stats/due?hours=' + DUE_HOURS + '&by=slot&hour=' + hour + '&node=' + encodeURIComponent(node);
    const r = await api('GET', q);
    const table = $('due-slots');
    if (!r.ok || !r.data) {
      $('due-readout').textContent = apiError(r);
      table.hidden = true;
      return;
    }
    const from = Date.parse(r.data.from);
    const slots = r.data.slots || [];
    $('due-readout').textContent = node + ' · ' + fmtHM(new Date(from)) + '–' + fmtHM(new Date(from + 3600000)) + ': ' +
      fmtInt(r.data.total) + ' due' + (slots.length ? ', busiest slots:' : '');
    table.dataset.node = node;
    table.dataset.hour = String(hour);
    table.tBodies[0].replaceChildren(...slots.map((s) => el('tr', { dataset: { slot: String(s.slot), count: String(s.count) } },
      el('td', { text: String(s.slot) }), el('td', { text: s.node }), el('td', { class: 'num', text: fmtInt(s.count) }))));
    table.hidden = slots.length === 0;
  }

  // ---------- hosts ----------

  function renderHosts(hosts) {
    renderLatency('hosts', 'hosts-empty', hosts, true);
  }

  // renderLatency fills the latency table id (hosts or URLs, each row's
  // host field naming it) and shows emptyId instead when there is none.
  // With circuits, each row also shows the host's circuit breaker state
  // and held fires (blank when closed).
  function renderLatency(id, emptyId, hosts, circuits) {
    const top = circuits ? hosts.filter((x, i) => i < 10 || x.circuit) : hosts.slice(0, 10);
    if (emptyId) $(emptyId).hidden = top.length > 0;
    $(id).hidden = top.length === 0;
    if (!top.length) return;
    const lo = Math.max(0.05, Math.min(...top.map((x) => x.p50_ms || 0.05)) / 1.5);
    const hi = Math.max(lo * 10, ...top.map((x) => (x.p99_ms || 0) * 1.15));
    const pos = (v) => (100 * Math.log(Math.max(v, lo) / lo)) / Math.log(hi / lo);
    const rows = top.map((x) => {
      const bar = el('div', { class: 'lat-bar', title: 'p50 ' + fmtMs(x.p50_ms) + ' · p90 ' + fmtMs(x.p90_ms) + ' · p99 ' + fmtMs(x.p99_ms) + ' (log scale)' });
      const range = el('div', { class: 'range' });
      range.style.left = pos(x.p50_ms) + '%';
      range.style.width = Math.max(1, pos(x.p99_ms) - pos(x.p50_ms)) + '%';
      const p90 = el('div', { class: 'p90' });
      p90.style.left = pos(x.p90_ms) + '%';
      bar.append(range, p90);
      const tds = [
        el('td', { class: 'mono', title: x.host, text: x.host.length > 42 ? x.host.slice(0, 41) + '…' : x.host }),
        cell(fmtInt(x.count), 'num'),
        cell(fmtMs(x.p50_ms), 'num'), cell(fmtMs(x.p90_ms), 'num'), cell(fmtMs(x.p99_ms), 'num'),
        el('td', null, bar)];
      if (circuits) {
        tds.push(el('td', { class: x.circuit ? 'circuit-' + x.circuit : null, text: x.circuit || '' }),
          cell(x.circuit ? fmtInt(x.held || 0) : '', 'num'));
      }
      return el('tr', null, ...tds);
    });
    $(id).tBodies[0].replaceChildren(...rows);
  }

  // ---------- events ----------

  function renderEvents(events) {
    const last = events[events.length - 1];
    const key = events.length + '|' + (last ? last.time + last.text : '');
    $('events-empty').hidden = events.length > 0;
    $('events-hint').textContent = events.length ? events.length + ' recent' : '';
    if (key === state.eventsKey) {
      refreshEventTimes();
      return;
    }
    state.eventsKey = key;
    const items = events.slice().reverse().map((e) => {
      const kind = String(e.kind || 'event');
      return el('li', { class: 'k-' + kind.replace(/[^a-z0-9_-]/gi, '') },
        el('span', { class: 'when', dataset: { time: e.time || '' }, title: e.time || '', text: fmtWhen(e.time) + ' · ' + fmtRel(e.time) }),
        el('span', { class: 'kind', text: kind }),
        el('span', { class: 'text', text: e.text || '' }));
    });
    $('events').replaceChildren(...items);
  }

  function refreshEventTimes() {
    for (const s of $('events').querySelectorAll('.when')) {
      const t = s.dataset.time;
      const text = fmtWhen(t) + ' · ' + fmtRel(t);
      if (s.textContent !== text) s.textContent = text;
    }
  }

  // ---------- tasks view ----------

  function scheduleText(t) {
    if (t.cron) return 'cron ' + t.cron + (t.timezone && t.timezone !== 'UTC' ? ' (' + t.timezone + ')' : '');
    if (t.every_ms) return 'every ' + fmtSpan(t.every_ms);
    if (t.delay_ms) return 'once, after ' + fmtSpan(t.delay_ms);
    if (t.due_at) return 'once at ' + fmtWhen(t.due_at);
    return '–';
  }

  function lastText(t) {
    const f = t.last_fire;
    if (!f) return el('span', { class: 'hint', text: '–' });
    if (f.status_code) return badge(String(f.status_code), f.status_code < 300 ? 'ok' : 'bad');
    return badge(f.error ? 'error' : '–', 'bad');
  }

  function labelsText(labels) {
    if (!labels) return '';
    return Object.keys(labels).sort().map((k) => k + '=' + labels[k]).join(' ');
  }

  const taskPath = (id, suffix) => '/v1/tasks/' + encodeURIComponent(id) + (suffix || '');

  // loadList shows the current page; quiet skips the "loading" hint, for
  // the periodic refresh.
  async function loadList(quiet) {
    const q = new URLSearchParams();
    const st = $('f-status').value, label = $('f-label').value.trim();
    if (st) q.set('status', st);
    if (label) q.set('label', label);
    q.set('limit', $('f-limit').value);
    const cursor = state.list.cursors[state.list.page];
    if (cursor) q.set('cursor', cursor);
    if (quiet !== true) $('list-hint').textContent = 'loading…';
    let r;
    try {
      r = await api('GET', '/v1/tasks?' + q.toString());
    } catch (e) {
      $('list-hint').textContent = 'node unreachable';
      return;
    }
    if (!r.ok) {
      $('list-hint').textContent = apiError(r);
      return;
    }
    const tasks = (r.data && r.data.tasks) || [];
    state.list.next = (r.data && r.data.next_cursor) || '';
    const rows = tasks.map((t) => el('tr', { dataset: { id: t.id }, class: t.id === state.detail.id ? 'sel' : null },
      el('td', { class: 'mono', title: t.id, text: t.id.length > 36 ? t.id.slice(0, 35) + '…' : t.id }),
      el('td', null, badge(t.status)),
      el('td', { text: scheduleText(t) }),
      el('td', { title: t.next_due_at || '', text: t.next_due_at ? fmtRel(t.next_due_at) : '–' }),
      cell(fmtInt(t.fire_count), 'num'),
      el('td', { class: 'num' + (t.fail_count ? ' bad' : ''), text: fmtInt(t.fail_count) }),
      el('td', null, lastText(t)),
      el('td', { class: 'hint', text: labelsText(t.labels) })));
    $('task-list').tBodies[0].replaceChildren(...rows);
    $('list-empty').hidden = tasks.length > 0;
    $('page-no').textContent = 'page ' + (state.list.page + 1);
    $('prev-page').disabled = state.list.page === 0;
    $('first-page').disabled = state.list.page === 0;
    $('next-page').disabled = !state.list.next;
    $('list-hint').textContent = tasks.length + ' shown' + (state.list.next ? ', more on the next page' : '');
  }

  function resetList() {
    state.list.cursors = [''];
    state.list.page = 0;
    return loadList();
  }

  function detailMsg(text, kind) {
    const m = $('d-msg');
    m.hidden = !text;
    m.textContent = text || '';
    m.className = 'msg' + (kind ? ' ' + kind : '');
  }

  async function openTask(id, quiet) {
    if (!id) return;
    if (!quiet) {
      state.detail.key = '';
      detailMsg('');
    }
    state.detail.id = id;
    $('d-id').textContent = id;
    $('d-empty').hidden = true;
    for (const tr of $('task-list').tBodies[0].rows) tr.classList.toggle('sel', tr.dataset.id === id);
    let t, ex;
    try {
      [t, ex] = await Promise.all([api('GET', taskPath(id)), api('GET', taskPath(id, '/executions?limit=20'))]);
    } catch (e) {
      if (!quiet) detailMsg('Node unreachable.', 'err');
      return;
    }
    if (state.detail.id !== id) return; // another task was opened meanwhile
    if (!t.ok) {
      renderDetail(null, null);
      detailMsg(t.status === 404 ? 'No task ' + id + '.' : apiError(t), 'err');
      return;
    }
    const key = JSON.stringify([t.data, ex.data]);
    if (key === state.detail.key) return;
    state.detail.key = key;
    renderDetail(t.data, ex.ok ? (ex.data && ex.data.executions) || [] : null);
  }

  function renderDetail(t, execs) {
    state.detail.task = t;
    $('d-fields').hidden = !t;
    $('d-status').hidden = !t;
    $('d-exec-title').hidden = !t;
    $('executions').hidden = !t;
    updateActions();
    if (!t) return;
    const s = $('d-status');
    s.textContent = t.status;
    s.className = 'badge ' + t.status;

    const kv = [];
    const add = (k, v) => { if (v !== undefined && v !== null && v !== '') kv.push(el('dt', { text: k }), el('dd', null, v)); };
    const when = (iso) => (iso ? el('span', null, fmtWhen(iso), el('span', { class: 'rel', text: fmtRel(iso) })) : null);
    add('Schedule', scheduleText(t));
    add('Next due', when(t.next_due_at));
    add('Callback', el('span', { class: 'mono', text: t.callback_url }));
    if (t.ack_url) add('ACK', el('span', null, el('span', { class: 'mono', text: t.ack_url }), ' · after ' + fmtSpan(t.ack_delay_ms) + ' · up to ' + t.ack_retries + ' retries'));
    if (t.next_ack_at) add('Next ACK', when(t.next_ack_at));
    if (t.fail_reason) add('Failed by', t.fail_reason);
    add('Fires', fmtInt(t.fire_count) + ' fired · ' + fmtInt(t.fail_count) + ' failed');
    add('Retries', 'up to ' + t.max_retries + ' · timeout ' + fmtSpan(t.timeout_ms));
    if (t.misfire) add('Misfire', t.misfire + (t.max_fails ? ' · inactive after ' + t.max_fails + ' failed fires' : ''));
    if (t.start_at) add('Starts', when(t.start_at));
    if (t.end_at) add('Ends', when(t.end_at));
    if (t.max_runs) add('Runs', fmtInt(t.runs || 0) + ' of ' + fmtInt(t.max_runs));
    add('Slot', t.slot + ' on ' + (t.owner || '?'));
    add('Labels', labelsText(t.labels));
    if (t.headers && Object.keys(t.headers).length) {
      add('Headers', el('pre', { text: Object.keys(t.headers).sort().map((k) => k + ': ' + t.headers[k]).join('\n') }));
    }
    if (t.payload !== undefined) add('Payload', el('pre', { text: JSON.stringify(t.payload, null, 2) }));
    add('Created', when(t.created_at));
    add('Updated', when(t.updated_at));
    if (t.last_fire) {
      const f = t.last_fire;
      add('Last fire', f.fire_id + ' · ' + f.attempts + ' attempt(s) · ' + (f.status_code ? 'HTTP ' + f.status_code : f.error || 'no answer'));
    }
    $('d-fields').replaceChildren(...kv);

    // Each attempt is a row of facts and, below it, the response body (or
    // the error) across the whole table width.
    const rows = [];
    for (const x of execs || []) {
      const took = x.started_at && x.finished_at ? Date.parse(x.finished_at) - Date.parse(x.started_at) : NaN;
      const body = x.error ? x.error + (x.result ? '\n' + x.result : '') : x.result || '';
      rows.push(el('tr', { class: 'exec' },
        el('td', { class: 'mono', text: x.fire_id }),
        cell(String(x.attempt), 'num'),
        el('td', { title: x.due_at || '', text: fmtWhen(x.due_at) }),
        el('td', { title: x.started_at || '', text: fmtWhen(x.started_at) }),
        cell(isNaN(took) ? '–' : took < 1 ? '<1 ms' : fmtMs(took), 'num'),
        el('td', { class: 'num' }, x.status_code ? badge(String(x.status_code), x.status_code < 300 ? 'ok' : 'bad') : badge('none', 'bad'))));
      rows.push(el('tr', { class: 'exec-body' + (x.error ? ' err' : '') },
        el('td', { colspan: 6 }, body ? el('pre', { text: body }) : el('span', { class: 'hint', text: 'empty response body' }))));
    }
    $('executions').tBodies[0].replaceChildren(...rows);
    const n = (execs || []).length;
    $('d-exec-hint').textContent = execs === null ? 'could not load' : n ? 'newest first, ' + n + ' shown' : 'none yet';
  }

  function updateActions() {
    const t = state.detail.task;
    const acts = $('d-actions');
    acts.hidden = !t;
    if (!t) return;
    for (const b of acts.querySelectorAll('button')) b.disabled = false;
    acts.querySelector('[data-act=pause]').disabled = t.status !== 'scheduled';
    acts.querySelector('[data-act=resume]').disabled = t.status !== 'paused' && t.status !== 'inactive';
  }

  async function act(kind, btn) {
    const id = state.detail.id;
    if (!id) return;
    if (kind === 'delete' && btn.dataset.armed !== '1') {
      btn.dataset.armed = '1';
      btn.textContent = 'Confirm delete';
      setTimeout(() => { btn.dataset.armed = ''; btn.textContent = 'Delete'; }, 3000);
      return;
    }
    btn.disabled = true;
    try {
      const r = kind === 'delete'
        ? await api('DELETE', taskPath(id))
        : await api('POST', taskPath(id, '/' + kind));
      if (!r.ok) {
        detailMsg(apiError(r), 'err');
      } else if (kind === 'delete') {
        btn.dataset.armed = '';
        btn.textContent = 'Delete';
        state.detail.id = '';
        state.detail.task = null;
        renderDetail(null, null);
        $('d-id').textContent = '–';
        $('d-empty').hidden = false;
        detailMsg('Deleted ' + id + '.', 'ok');
      } else {
        detailMsg({ pause: 'Paused.', resume: 'Resumed.', trigger: 'Triggered: one extra fire now.' }[kind], 'ok');
        state.detail.key = '';
        await openTask(id, true);
      }
      loadList();
    } catch (e) {
      detailMsg('Node unreachable.', 'err');
    } finally {
      updateActions();
    }
  }

  // ---------- create form ----------

  function kindOf(form) {
    return form.querySelector('input[name=kind]:checked').value;
  }

  function showKind(form) {
    const k = kindOf(form);
    for (const row of form.querySelectorAll('[data-kind]')) row.hidden = !row.dataset.kind.split(' ').includes(k);
  }

  function lines(text, sep) {
    const out = {};
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (!line) continue;
      const i = line.indexOf(sep);
      if (i <= 0) return null;
      out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    return out;
  }

  // buildTask turns the form into a request body, or returns {field, message}.
  function buildTask(form) {
    const v = (name) => form.elements[name].value.trim();
    const num = (name) => Number(v(name));
    const t = {};
    if (v('id')) t.id = v('id');
    t.callback_url = v('callback_url');
    if (!t.callback_url) return { error: { field: 'callback_url', message: 'a callback URL is required' } };
    const kind = kindOf(form);
    if (kind === 'delay') t.delay_ms = num('delay_ms');
    if (kind === 'at') {
      const d = new Date(v('due_at'));
      if (!v('due_at') || isNaN(d)) return { error: { field: 'due_at', message: 'pick the due time' } };
      t.due_at = d.toISOString();
    }
    if (kind === 'every') t.every_ms = num('every_ms');
    if (kind === 'cron') {
      t.cron = v('cron');
      if (v('timezone')) t.timezone = v('timezone');
    }
    if (kind === 'every' || kind === 'cron') {
      if (v('start_at')) {
        const d = new Date(v('start_at'));
        if (isNaN(d)) return { error: { field: 'start_at', message: 'not a valid time' } };
        t.start_at = d.toISOString();
      }
      if (v('misfire')) t.misfire = v('misfire');
      if (v('max_fails')) t.max_fails = num('max_fails');
    }
    if (v('timeout_ms')) t.timeout_ms = num('timeout_ms');
    if (v('max_retries')) t.max_retries = num('max_retries');
    if (v('payload')) {
      try { t.payload = JSON.parse(v('payload')); } catch (e) {
        return { error: { field: 'payload', message: 'payload is not valid JSON: ' + e.message } };
      }
    }
    if (v('headers')) {
      const h = lines(v('headers'), ':');
      if (!h) return { error: { field: 'headers', message: 'write headers as "Name: value", one per line' } };
      t.headers = h;
    }
    if (v('labels')) {
      const l = lines(v('labels'), '=');
      if (!l) return { error: { field: 'labels', message: 'write labels as key=value, one per line' } };
      t.labels = l;
    }
    return { task: t };
  }

  function formMsg(text, kind) {
    const m = $('c-msg');
    m.hidden = !text;
    m.textContent = text || '';
    m.className = 'msg' + (kind ? ' ' + kind : '');
  }

  function markField(form, field) {
    for (const e of form.querySelectorAll('.invalid')) e.classList.remove('invalid');
    if (!field) return;
    const name = String(field).split('.')[0];
    const input = form.elements[name];
    if (input && input.classList) {
      input.classList.add('invalid');
      input.focus();
    }
  }

  async function submitCreate(ev) {
    ev.preventDefault();
    const form = ev.currentTarget;
    const b = buildTask(form);
    if (b.error) {
      formMsg(b.error.message, 'err');
      markField(form, b.error.field);
      return;
    }
    markField(form, '');
    const btn = $('c-submit');
    btn.disabled = true;
    formMsg('creating…');
    try {
      const r = await api('POST', '/v1/tasks', b.task);
      if (!r.ok) {
        formMsg(apiError(r), 'err');
        markField(form, r.data && r.data.error && r.data.error.field);
        return;
      }
      formMsg('Created ' + r.data.id + ' (slot ' + r.data.slot + ').', 'ok');
      form.elements.id.value = '';
      await resetList();
      await openTask(r.data.id);
    } catch (e) {
      formMsg('Node unreachable.', 'err');
    } finally {
      btn.disabled = false;
    }
  }

  // ---------- failures ----------

  // loadFailures shows the latest failed executions of the cluster
  // (GET /v1/executions?status=failed), newest first; more appends the
  // next page.
  async function loadFailures(more) {
    const q = new URLSearchParams({ status: 'failed', limit: '50' });
    if (more === true && state.failNext) q.set('cursor', state.failNext);
    let r;
    try {
      r = await api('GET', '/v1/executions?' + q.toString());
    } catch (e) {
      $('fail-hint').textContent = 'node unreachable';
      return;
    }
    if (!r.ok) {
      $('fail-hint').textContent = apiError(r);
      return;
    }
    const exs = (r.data && r.data.executions) || [];
    state.failNext = (r.data && r.data.next_cursor) || '';
    const rows = exs.map((e) => {
      const answer = e.error || e.result || '';
      return el('tr', { dataset: { id: e.task_id, fire: e.fire_id } },
        el('td', { class: 'mono', title: e.task_id, text: e.task_id.length > 36 ? e.task_id.slice(0, 35) + '…' : e.task_id }),
        el('td', { class: 'mono', text: e.fire_id }),
        el('td', { class: 'num', text: String(e.attempt) }),
        el('td', { title: e.finished_at || '', text: e.finished_at ? fmtWhen(e.finished_at) : '–' }),
        el('td', { class: 'num bad', text: e.status_code ? String(e.status_code) : '–' }),
        el('td', { class: 'mono answer', title: answer, text: answer.length > 80 ? answer.slice(0, 79) + '…' : answer }),
        el('td', null, el('button', { type: 'button', class: 'btn small', dataset: { retry: e.task_id }, text: 'Retry' })));
    });
    const body = $('failures').tBodies[0];
    if (more === true) body.append(...rows);
    else body.replaceChildren(...rows);
    $('fail-empty').hidden = body.rows.length > 0;
    $('fail-more').disabled = !state.failNext;
    $('fail-hint').textContent = body.rows.length + ' failed execution' + (body.rows.length === 1 ? '' : 's') + ' shown, newest first';
  }

  function failMsg(text, kind) {
    const m = $('fail-msg');
    m.hidden = !text;
    m.textContent = text || '';
    m.className = 'msg' + (kind ? ' ' + kind : '');
  }

  // retryTask fires a failed task again (POST /v1/tasks/{id}/retry).
  async function retryTask(id, btn) {
    btn.disabled = true;
    try {
      const r = await api('POST', taskPath(id, '/retry'));
      if (r.ok) {
        failMsg('Retried ' + id + ': it fires again now.', 'ok');
        btn.textContent = 'Retried';
      } else {
        failMsg(id + ': ' + apiError(r), 'err');
        btn.disabled = false;
      }
    } catch (e) {
      failMsg('Node unreachable.', 'err');
      btn.disabled = false;
    }
  }

  // ---------- views and wiring ----------

  function showView() {
    const v = { '#tasks': 'tasks', '#failures': 'failures' }[location.hash] || 'cluster';
    const first = state.view !== v;
    state.view = v;
    $('view-cluster').hidden = v !== 'cluster';
    $('view-tasks').hidden = v !== 'tasks';
    $('view-failures').hidden = v !== 'failures';
    for (const a of document.querySelectorAll('.tab')) a.classList.toggle('on', a.dataset.view === v);
    if (v === 'cluster') {
      renderCluster();
    } else if (v === 'failures') {
      if (first) loadFailures();
    } else if (first || !$('task-list').tBodies[0].rows.length) {
      loadList();
    }
  }

  function tick() {
    if (state.lastMsgAt && state.ws && Date.now() - state.lastMsgAt > 3500) {
      setConn('stale', 'no data for ' + fmtDur((Date.now() - state.lastMsgAt) / 1000));
    }
    if (state.view === 'cluster') refreshEventTimes();
  }

  function wire() {
    window.addEventListener('hashchange', showView);
    window.addEventListener('resize', () => { if (state.view === 'cluster') renderCluster(); });

    for (const b of $('range').querySelectorAll('button')) {
      b.addEventListener('click', () => {
        state.rangeMin = Number(b.dataset.min);
        for (const o of $('range').querySelectorAll('button')) o.classList.toggle('on', o === b);
        drawCharts();
      });
    }
    $('chart-fires').addEventListener('mousemove', (ev) => chartHover(ev, 'fires', fmtRate));
    $('chart-lateness').addEventListener('mousemove', (ev) => chartHover(ev, 'p99', fmtMs));
    $('chart-fires').addEventListener('mouseleave', hideTip);
    $('chart-lateness').addEventListener('mouseleave', hideTip);
    $('slotmap').addEventListener('mousemove', onSlotHover);
    $('heatmap').addEventListener('mousemove', onHeatHover);
    $('due-heat').tBodies[0].addEventListener('click', (ev) => {
      const td = ev.target.closest('td[data-hour]');
      if (td) showDueSlots(td.dataset.node, Number(td.dataset.hour));
    });

    $('filter-form').addEventListener('submit', (ev) => { ev.preventDefault(); resetList(); });
    $('f-status').addEventListener('change', resetList);
    $('open-btn').addEventListener('click', () => openTask($('f-id').value.trim()));
    $('f-id').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') { ev.preventDefault(); openTask($('f-id').value.trim()); }
    });
    $('next-page').addEventListener('click', () => {
      if (!state.list.next) return;
      state.list.cursors[state.list.page + 1] = state.list.next;
      state.list.page++;
      loadList();
    });
    $('prev-page').addEventListener('click', () => {
      if (state.list.page > 0) { state.list.page--; loadList(); }
    });
    $('first-page').addEventListener('click', resetList);
    $('refresh-list').addEventListener('click', loadList);
    $('task-list').tBodies[0].addEventListener('click', (ev) => {
      const tr = ev.target.closest('tr');
      if (tr && tr.dataset.id) openTask(tr.dataset.id);
    });
    for (const b of $('d-actions').querySelectorAll('button')) b.addEventListener('click', () => act(b.dataset.act, b));
    $('fail-refresh').addEventListener('click', () => { failMsg(''); loadFailures(); });
    $('fail-more').addEventListener('click', () => loadFailures(true));
    $('failures').tBodies[0].addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-retry]');
      if (b) retryTask(b.dataset.retry, b);
    });

    const form = $('create-form');
    form.elements.callback_url.value = location.origin + '/v1/test/callback';
    for (const r of form.querySelectorAll('input[name=kind]')) r.addEventListener('change', () => showKind(form));
    showKind(form);
    form.addEventListener('submit', submitCreate);

    $('token-btn').addEventListener('click', () => {
      askToken('Set the bearer token for this node, or clear it.').then(() => {});
    });
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = $('token-input').value.trim();
      settleToken(v || state.token);
      if (state.started) reconnect();
    });
    $('token-clear').addEventListener('click', () => {
      settleToken('');
      if (state.started) reconnect();
    });
    $('token-dialog').addEventListener('cancel', () => settleToken());

    setInterval(tick, 1000);
    // While the tasks view is in front, the open task refreshes every 2 s
    // and the list every 6 s.
    let ticks = 0;
    setInterval(() => {
      if (state.view !== 'tasks' || document.visibilityState !== 'visible') return;
      if (state.detail.id) openTask(state.detail.id, true);
      if (++ticks % 3 === 0) loadList(true);
    }, 2000);
  }

  async function start() {
    wire();
    showView();
    await probe();
    state.started = true;
    reconnect();
    loadDue();
  }

  start();
})();
