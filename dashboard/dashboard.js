// trine dashboard page: draws every snapshot `trine dashboard` pushes over Server-Sent Events
// (cli/dashboard-snapshot.ts DashboardSnapshot): the group, nodes, tasks and processes, the
// timeline of faults with their latencies and a plot of detection and recovery times (inline
// SVG). Plain browser JavaScript, served as it is. Text goes in through textContent only: a
// task's name or a reason is data, never markup. Elements carry data-* attributes (replica,
// role, node, proc, episode, state) that tests and scripts can select by.
'use strict';

const token = new URLSearchParams(location.search).get('token');
const withToken = (path) => (token === null ? path : `${path}?token=${encodeURIComponent(token)}`);

/** An element with a class, text and data-* attributes. */
function el(tag, opts = {}, ...children) {
  const e = document.createElement(tag);
  if (opts.cls) e.className = opts.cls;
  if (opts.text !== undefined) e.textContent = String(opts.text);
  if (opts.title) e.title = opts.title;
  for (const [k, v] of Object.entries(opts.data ?? {})) if (v !== null && v !== undefined) e.dataset[k] = String(v);
  for (const c of children) if (c) e.append(c);
  return e;
}
const td = (text, cls) => el('td', { text: text ?? '-', cls });
const ms = (v) => (v === null || v === undefined ? '-' : v < 10_000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);
const clock = (atMs) => new Date(atMs).toISOString().slice(11, 23);

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function drawGroup(snap) {
  const st = snap.status;
  const g = st.group;
  document.getElementById('group-summary').textContent =
    `view ${g.view ?? '?'} · primary ${g.primary ?? '?'} · ${g.basis}${g.confirmedBy.length > 0 ? ` by ${g.confirmedBy.join(', ')}` : ''}`;
  const section = document.getElementById('group-section');
  section.dataset.view = String(g.view ?? '');
  section.dataset.members = g.members.join(',');
  const rows = st.replicas.map((r) => {
    const sees = (r.replicas ?? []).map((p) => `${p.id} ${p.health}`).join(', ');
    const tr = el('tr', { data: { replica: r.id, role: r.role ?? 'none', phase: r.phase ?? 'unknown', health: r.health } },
      td(r.id, r.id === st.primary ? 'primary' : ''), td(r.role), td(r.node), td(r.phase, `s-${r.phase}`), td(r.view), td(r.rsn),
      el('td', { cls: 'mono', text: r.digest === null ? '-' : r.digest.slice(0, 12), title: r.digest ?? '' }),
      td(r.answered ? r.health : `${r.health}: ${r.error ?? ''}`, `h-${r.health}`), td(sees, 'info'));
    return tr;
  });
  fill(document.querySelector('#replicas tbody'), rows);
  const parts = [];
  if (st.replacement) parts.push(`replacement ${st.replacement.id} ${st.replacement.phase}${st.replacement.node ? ` on ${st.replacement.node}` : ''}`);
  if (st.retired.length > 0) parts.push(`retired: ${st.retired.map((r) => `${r.id} (${r.how}${r.reason ? `, ${r.reason}` : ''})`).join(', ')}`);
  const history = document.getElementById('group-history');
  history.textContent = parts.join(' · ');
  history.dataset.retired = st.retired.map((r) => r.id).join(',');
  fill(document.getElementById('problems'), st.problems.map((p) => el('li', { text: p })));
}

function drawNodes(snap) {
  const health = new Map(snap.status.nodes.map((n) => [n.id, n]));
  const nodes = snap.view?.nodes ?? [];
  const section = document.getElementById('nodes-section');
  section.dataset.count = String(nodes.length);
  fill(document.querySelector('#nodes tbody'), nodes.map((n) => {
    const h = health.get(n.node);
    const hb = h ? `${h.health}${h.lastHeartbeatAgeMs === null ? '' : ` (${ms(h.lastHeartbeatAgeMs)} ago)`}` : '-';
    return el('tr', { data: { node: n.node, state: n.state } },
      td(n.node), td(n.agent), td(n.state, `s-${n.state}`), td(`${n.used}/${n.slots}`), td(n.inc), td(h?.replica ?? ''), td(hb, h ? `h-${h.health}` : ''));
  }));
}

function drawTasks(snap) {
  const tasks = snap.view?.tasks ?? [];
  const rows = [];
  for (const t of tasks) {
    const info = t.outcome !== null ? `${t.outcome}: ${t.reason ?? '-'}` : [t.waitReason, t.failure].filter(Boolean).join('; ');
    rows.push(el('tr', { cls: 'task', data: { task: t.id, state: t.state } },
      td(t.id), td(t.name), td(t.state, `s-${t.state}`), td(`${t.size} × ${t.mode}`), td(''), td(info, 'info')));
    for (const p of t.procs) {
      const exit = p.exitCode !== null ? `code ${p.exitCode}` : p.signal ?? '';
      rows.push(el('tr', { cls: 'proc', data: { proc: `${t.id}/${p.vpid}`, state: p.state, pid: p.pid } },
        td(`${t.id}/${p.vpid}`), td(p.rank === null ? '' : `rank ${p.rank}`), td(p.state, `s-${p.state}`), td(p.node), td(p.pid),
        td([exit, p.reason].filter(Boolean).join(' '), 'info')));
    }
  }
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { text: 'no tasks: submit one with `trine submit -- CMD ARGS…`', cls: 'info' })));
  fill(document.querySelector('#tasks tbody'), rows);
}

function drawTimeline(snap) {
  const list = document.getElementById('timeline');
  const items = [...snap.episodes].reverse().map((ep) => {
    const first = ep.steps[0]?.atMs ?? 0;
    const head = `${clock(first)} ${ep.what} ${ep.subject} (${ep.cause}) — ${ep.state}` +
      (ep.detectionMs !== null ? ` · detected in ${ms(ep.detectionMs)}` : '') +
      (ep.recoveryMs !== null ? ` · recovered in ${ms(ep.recoveryMs)}` : '');
    const steps = ep.steps.map((s, i) => (i === 0 ? s.label : `+${ms(s.atMs - first)} ${s.label}`)).join(' → ');
    return el('li', {
      cls: `s-${ep.state}`,
      data: { episode: ep.id, what: ep.what, subject: ep.subject, state: ep.state, detectionMs: ep.detectionMs, recoveryMs: ep.recoveryMs },
    }, el('div', { text: head }), el('div', { cls: 'steps', text: steps }));
  });
  if (items.length === 0) items.push(el('li', { cls: 'muted', text: 'no faults in the journals' }));
  fill(list, items);
  fill(document.getElementById('events'), [...snap.events].reverse().map((e) =>
    el('li', { data: { rsn: e.rsn, kind: e.kind } }, el('span', { cls: 'rsn', text: clock(e.atMs) }), document.createTextNode(` ${e.rsn}  ${e.text}`))));
}

/** Horizontal bars per episode: detection (fault → condemned) then recovery (→ replacement). */
function drawPlot(snap) {
  const svg = document.getElementById('plot');
  const NS = 'http://www.w3.org/2000/svg';
  const eps = snap.episodes.filter((e) => e.detectionMs !== null || e.recoveryMs !== null).slice(-12);
  const rowH = 20;
  const left = 120;
  const width = 640;
  const height = 30 + Math.max(1, eps.length) * rowH;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.dataset.points = String(eps.length);
  const max = Math.max(1, ...eps.map((e) => (e.detectionMs ?? 0) + (e.recoveryMs ?? 0)));
  // Room on the right for the figures' label.
  const scale = (width - left - 150) / max;
  const node = (tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    return n;
  };
  const parts = [node('line', { x1: left, y1: 4, x2: left, y2: height - 18, class: 'axis' })];
  eps.forEach((e, i) => {
    const y = 6 + i * rowH;
    const det = e.detectionMs ?? 0;
    const rec = e.recoveryMs ?? 0;
    parts.push(node('text', { x: 4, y: y + 12 }, `${e.what} ${e.subject}`));
    if (det > 0) parts.push(node('rect', { x: left, y, width: Math.max(1, det * scale), height: rowH - 6, class: 'det' }, undefined));
    if (rec > 0) parts.push(node('rect', { x: left + det * scale, y, width: Math.max(1, rec * scale), height: rowH - 6, class: 'rec' }, undefined));
    parts.push(node('text', { x: left + (det + rec) * scale + 4, y: y + 12 }, `${det > 0 ? `${ms(det)} + ` : ''}${ms(rec)}`));
  });
  if (eps.length === 0) parts.push(node('text', { x: left + 8, y: 18 }, 'no detection or recovery measured yet'));
  const ly = height - 6;
  parts.push(node('rect', { x: left, y: ly - 9, width: 10, height: 10, class: 'det' }), node('text', { x: left + 14, y: ly }, 'detection'));
  parts.push(node('rect', { x: left + 90, y: ly - 9, width: 10, height: 10, class: 'rec' }), node('text', { x: left + 104, y: ly }, 'recovery'));
  svg.replaceChildren(...parts);
}

let snapshots = 0;
function draw(snap) {
  document.getElementById('cluster').textContent = snap.cluster;
  const health = document.getElementById('health');
  health.textContent = snap.status.healthy ? 'healthy' : 'not healthy';
  health.className = `badge ${snap.status.healthy ? 'ok' : 'bad'}`;
  document.getElementById('updated').textContent = `as of ${clock(snap.atMs)} UTC${snap.view ? ` · RSN ${snap.view.rsn} from ${snap.view.from}` : ''}`;
  drawGroup(snap);
  drawNodes(snap);
  drawTasks(snap);
  drawTimeline(snap);
  drawPlot(snap);
  snapshots += 1;
  document.body.dataset.snapshots = String(snapshots);
  document.body.dataset.at = String(snap.atMs);
}

function connect() {
  const source = new EventSource(withToken('api/stream'));
  source.addEventListener('snapshot', (m) => {
    try {
      draw(JSON.parse(m.data));
    } catch (e) {
      document.getElementById('health').textContent = `cannot draw: ${e}`;
    }
  });
  source.onerror = () => {
    const h = document.getElementById('health');
    h.textContent = 'disconnected: retrying';
    h.className = 'badge bad';
  };
}
connect();
