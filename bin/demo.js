#!/usr/bin/env node
// `npm run demo`: the main job end to end on a local 4-node cluster in a temporary dir (issue 4).
// It starts the cluster and submits the fault-tolerant N-Queens example (examples/nqueens, n = 12)
// as a linked task of 4 processes: a manager and 3 workers. Mid-run it crashes one worker with
// `kill -9` and hangs another with SIGSTOP. It then prints the timeline of detection and recovery
// that the processes and the manager logged, ends with the count (14,200), and stops everything.
// The timeline names each process by its VPID, which never changes, with the rank it held then
// beside it: N-Queens renumbers its ranks after each recovery, so a rank alone would name two
// processes. The summary lists every process that failed — VPID, its rank then, how it failed,
// which VPID replaced it — from the group's own view (`trine ps --json`). It exits non-zero if
// any step fails or the count is wrong, and always stops what it started: on Ctrl-C (SIGINT) or
// SIGTERM, in every mode, it stops the cluster, says so in one line and exits 130 (143).
//
// `npm run demo -- --slow [--count N]`: HyperQuickSort on the DGRP (issue 18) of N numbers (16
// million by default): one process slowed, the group removes it, the others absorb its share;
// then the same sort waiting for it, and both times.
//
// `npm run demo -- --rollback`: rollback recovery (issue 17, PROTOCOL §11) instead. The heat
// stencil (examples/heat, no recovery code at all) runs as a rollback task of 3 ranks; mid-run
// one rank is crashed with `kill -9`, then, once the group has replaced it, a node fails (`trine
// inject kill-node`). It prints the timeline, which VPID holds which rank, and the final answer
// beside the sequential reference's: they must be equal bit for bit.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const trine = fileURLToPath(new URL('./trine.js', import.meta.url));
const repo = fileURLToPath(new URL('..', import.meta.url));
// `--help`: the comment above (plain JavaScript: examples/common/help.ts does this for the
// TypeScript scripts).
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  const head = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1); // past the #! line
  const end = head.findIndex((l) => !l.startsWith('//'));
  process.stdout.write(`${head.slice(0, end).map((l) => l.replace(/^\/\/ ?/, '')).join('\n')}\n`);
  process.exit(0);
}
/** The exit code of a run stopped by a signal (the shell's 128 + its number). */
const EXIT_ON = { SIGINT: 130, SIGTERM: 143 };
/** `--slow`: examples/hqsort/demo-slow.ts runs it, with its own cluster (see the end). */
const SLOW = process.argv.includes('--slow');
const root = SLOW ? null : mkdtempSync(join(tmpdir(), 'trine-demo-'));
const dir = SLOW ? null : join(root, 'cluster');
const N = 12;
const EXPECTED = 14200;
/** Per work unit, so the run lasts long enough for faults to land mid-computation. */
const PACE_MS = 300;
/** `--rollback`: the rollback demo (issue 17) instead of the app-specific one. */
const ROLLBACK = process.argv.includes('--rollback');
/** The rollback demo's heat stencil: 64 KiB halo rows, paced so the faults land mid-run. */
const HEAT = { rows: 24, cols: 8192, steps: 100, paceMs: 100, ranks: 3, intervalMs: 500 };
/** How far into the run the rank is crashed, and how long after its replacement runs the node fails. */
const CRASH_AFTER_MS = 2500;
const NODE_AFTER_MS = 1000;

/** The signal that interrupted the demo, once one did: every wait then ends (Interrupted), the
 *  `finally` below stops the cluster, and the demo exits EXIT_ON[signal]. */
let interrupted = null;
class Interrupted extends Error {}
function onInterrupt(sig) {
  if (interrupted !== null) return; // a second Ctrl-C while the cluster stops: it is stopping
  interrupted = sig;
  process.stderr.write(`\ndemo interrupted (${sig}): stopping the cluster\n`);
}
const checkInterrupt = () => {
  if (interrupted !== null) throw new Interrupted(interrupted);
};

/** Runs trine; `show`: its output goes to the terminal, else it is returned. Asynchronous, so a
 *  signal is handled while it runs (a synchronous spawn would hold the handler until its end). */
function trineRun(args, show) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [trine, ...args], { stdio: show ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d) => { stdout += d; });
    child.stderr?.setEncoding('utf8').on('data', (d) => { stderr += d; });
    child.on('error', (e) => { stderr += e.message; });
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

async function step(title, args) {
  process.stdout.write(`\n$ trine ${args.join(' ')}    # ${title}\n`);
  const started = Date.now();
  const { code } = await trineRun(args, true);
  process.stdout.write(`(exit ${code}, ${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  return code;
}

/** A `trine` run that failed: a wait (waitFor) looks again, as a replica may be slow to answer
 *  on a loaded machine; any other step fails the demo. */
class TrineError extends Error {}
/** Runs trine quietly and returns its stdout, or throws with its stderr. */
async function capture(args) {
  const r = await trineRun(args, false);
  if (r.code !== 0) throw new TrineError(`trine ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

async function sleep(ms) {
  await new Promise((r) => setTimeout(r, ms));
  checkInterrupt();
}
const view = async () => JSON.parse(await capture(['ps', '--json', '--dir', dir]));

/** Every line the task's processes printed, as {at, vpid, rank, who, text}. */
function appLines(id) {
  const out = [];
  const logs = join(dir, 'logs', 'tasks', id);
  for (let vpid = 0; vpid < 16; vpid++) {
    const f = join(logs, `${vpid}.out`);
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      const m = /^(\d+) vpid=(\d+) rank=(-?\d+) (.*)$/.exec(line);
      if (m !== null) out.push({ at: Number(m[1]), vpid: Number(m[2]), rank: Number(m[3]), who: `VPID ${m[2]} (rank ${m[3]})`, text: m[4] });
    }
  }
  return out;
}

async function waitFor(what, test, timeoutMs) {
  const until = Date.now() + timeoutMs;
  let failure = null;
  for (;;) {
    checkInterrupt();
    let r = null;
    try {
      r = await test();
    } catch (e) {
      if (!(e instanceof TrineError)) throw e;
      failure = e; // a `trine ps` that got no answer in time: look again
    }
    if (r) return r;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}${failure === null ? '' : ` (last: ${failure.message})`}`);
    await sleep(100);
  }
}
/** Where a failed run stood: the task's processes as the group sees them, its journal and the
 *  last lines its processes printed (their full output is gone with the cluster dir). */
async function explain(id) {
  try {
    const v = await view();
    const t = v.tasks.find((x) => x.id === id);
    process.stderr.write(`\n${id} as the group sees it: ${JSON.stringify({ state: t?.state, outcome: t?.outcome, epoch: t?.epoch, quorum: t?.quorum, signals: t?.signals, waitReason: t?.waitReason })}\n`);
    for (const p of t?.procs ?? []) process.stderr.write(`  vpid ${p.vpid} on ${p.node}: ${p.state}, pid ${p.pid}${p.reason === null ? '' : `, ${p.reason}`}\n`);
    for (const e of v.events.filter((x) => x.task === id).slice(-25)) process.stderr.write(`  [group] ${e.text}\n`);
  } catch (e) {
    process.stderr.write(`(no view of the task: ${e.message})\n`);
  }
  process.stderr.write(`last lines of ${id}'s processes:\n`);
  for (const l of appLines(id).sort((a, b) => a.at - b.at).slice(-40)) process.stderr.write(`  ${l.at} ${l.who} ${l.text}\n`);
}
const proc = async (id, vpid) => (await view()).tasks.find((t) => t.id === id)?.procs.find((p) => p.vpid === vpid);

/** The rank `vpid` held at `at`: the one on its last line up to then (its first, before any). */
function rankOf(lines, vpid, at) {
  const own = lines.filter((l) => l.vpid === vpid);
  return (own.filter((l) => l.at <= at).pop() ?? own[0])?.rank ?? null;
}
/** The VPID that held `rank` at `at`: of the processes' last lines up to then, the latest with
 *  that rank (a dead holder's last line is older than its successor's). */
function holderAt(lines, rank, at) {
  const last = new Map();
  for (const l of lines) if (l.at <= at) last.set(l.vpid, l);
  return [...last.values()].filter((l) => l.rank === rank).sort((a, b) => b.at - a.at)[0]?.vpid ?? null;
}
/** A process's line with every rank it names given its VPID: N-Queens renumbers ranks after a
 *  recovery, so "rank 2" named VPID 2 before the crash and VPID 3 after it. */
function withVpids(lines, l) {
  const text = l.text
    .replace(/rank (\d+) \(vpid (\d+)\)/g, 'VPID $2 (rank $1)')
    .replace(/(waiting for|suspect) rank (\d+)/g, (m, what, rank) => {
      const v = holderAt(lines, Number(rank), l.at);
      return v === null ? m : what === 'suspect' ? `suspect rank ${rank}, VPID ${v}` : `${what} rank ${rank} (VPID ${v})`;
    });
  return { ...l, text };
}
/** Rows saying when a process's rank changed: the renumbering after a recovery. */
function renumberings(lines) {
  const rows = [];
  const current = new Map();
  for (const l of [...lines].sort((a, b) => a.at - b.at)) {
    const was = current.get(l.vpid);
    if (was !== undefined && was !== l.rank) rows.push({ at: l.at, who: '[ranks]', text: `VPID ${l.vpid} is rank ${l.rank} now (was rank ${was}): the rebuilt communicator numbers the live processes in VPID order` });
    current.set(l.vpid, l.rank);
  }
  return rows;
}
/** How a process ended, in the group's words (ProcView), for the summary. */
const howEnded = (p) => p.reason ?? (p.signal !== null ? `killed by ${p.signal}` : p.exitCode !== null ? `exit code ${p.exitCode}` : p.state);

/** Every process of the task that did not end normally, from the group's view at the end: VPID,
 *  the rank it held then, how it failed (the group's record, and what the demo did to it), and
 *  the VPID that replaced it. `rankThen(vpid)`, `replacedBy(vpid)`: the mode's own knowledge. */
function failureSummary(t, injected, rankThen, replacedBy) {
  const failed = t.procs.filter((p) => p.state !== 'terminatedNormally').sort((a, b) => a.vpid - b.vpid);
  const rows = failed.map((p) => {
    const rank = rankThen(p.vpid);
    const by = replacedBy(p.vpid);
    const what = injected.get(p.vpid);
    return `  VPID ${p.vpid} (rank ${rank ?? '?'} then) on ${p.node ?? '?'}: ${what === undefined ? '' : `${what}; `}${howEnded(p)}; ${by === null ? 'not replaced' : `replaced by VPID ${by}`}\n`;
  });
  const head = failed.length === 0 ? 'no process failed' : `${failed.length} process${failed.length === 1 ? '' : 'es'} failed (VPIDs ${failed.map((p) => p.vpid).join(', ')})`;
  return { failed, text: `\n# ${head}, as the group saw it (trine ps --json), and what replaced ${failed.length === 1 ? 'it' : 'them'}:\n${rows.join('')}` };
}

let failed = false;
/** The task, once submitted: a failure then shows what it and its processes last said. */
let task = null;

/** The process the demo stopped with SIGSTOP: continued before the cluster stops, so that it can
 *  take `trine down`'s SIGTERM at once instead of sitting stopped through its grace period. */
let stoppedPid = null;

/** The default demo: app-specific recovery (N-Queens' own code) through a crash and a hang. */
async function appDemo() {
  if (await step('start a local cluster: 3 replicas, an agent (and its keeper) per node, the watchdog', ['up', '--nodes', '4', '--dir', dir]) !== 0) throw new Error('up failed');

  const app = ['node', '--import', 'tsx', 'examples/nqueens/nqueens.ts', '--n', String(N), '--pace-ms', String(PACE_MS)];
  process.stdout.write(`\n$ trine submit --linked -n 4 --name nqueens -- ${app.join(' ')}    # N-Queens: a manager and 3 workers, linked to trine/app\n`);
  const submittedAt = Date.now();
  const id = (await capture(['submit', '--linked', '-n', '4', '--name', 'nqueens', '--cwd', repo, '--dir', dir, '--', process.execPath, ...app.slice(1)])).trim();
  process.stdout.write(`${id}\n`);
  task = id;
  await waitFor('every process started and agreed on the quorum', () => appLines(id).filter((l) => /quorum/.test(l.text)).length >= 4, 90_000);
  await sleep(1500);

  /** What the demo did to a process, by VPID: the summary says it beside the group's record. */
  const injected = new Map();
  const actions = [];
  const crash = await proc(id, 2);
  const crashRank = rankOf(appLines(id), 2, Date.now());
  process.stdout.write(`\n$ kill -9 ${crash.pid}    # crash worker ${id}/2 (rank ${crashRank}) on ${crash.node} mid-computation\n`);
  const crashedAt = Date.now();
  process.kill(crash.pid, 'SIGKILL');
  injected.set(2, 'crashed (the demo\'s kill -9)');
  actions.push({ at: crashedAt, who: '[demo]', text: `kill -9 VPID 2 (rank ${crashRank}, pid ${crash.pid} on ${crash.node})` });
  await waitFor('recovery from the crash', () => appLines(id).filter((l) => l.at > crashedAt && /recoverComm: SUCCESS/.test(l.text)).length >= 3, 60_000);
  await sleep(700);

  const hang = await proc(id, 3);
  const hangRank = rankOf(appLines(id), 3, Date.now());
  process.stdout.write(`\n$ kill -STOP ${hang.pid}    # hang worker ${id}/3 (rank ${hangRank} now) on ${hang.node}: it stops answering, without dying\n`);
  process.kill(hang.pid, 'SIGSTOP');
  stoppedPid = hang.pid;
  injected.set(3, 'hung (the demo\'s SIGSTOP), found out by its peers');
  actions.push({ at: Date.now(), who: '[demo]', text: `kill -STOP VPID 3 (rank ${hangRank}, pid ${hang.pid} on ${hang.node})` });

  const done = await waitFor('the task to finish', async () => {
    const v = await view();
    const t = v.tasks.find((x) => x.id === id);
    return t?.outcome !== null && t !== undefined ? v : null;
  }, 120_000);

  process.stdout.write(`\n# timeline (ms after \`trine submit\`): what the demo did [demo], the manager group's journal [group],\n# and the processes' own logs, each named by its VPID (fixed) with the rank it held then\n`);
  const KEEP = /started: RECOVERED|NTF_DIED|APP_SIG_HANG from rank 0|timeout waiting|diagnosis: kill|killed vpid|spawned a replacement|recoverComm: SUCCESS|RESULT/;
  const lines = appLines(id);
  const rows = [
    ...done.events.filter((e) => e.task === id && !/placed|starting|submitted/.test(e.text)).map((e) => ({ at: e.atMs, who: '[group]', text: e.text })),
    ...lines.filter((l) => KEEP.test(l.text)).map((l) => withVpids(lines, l)),
    ...renumberings(lines),
    ...actions,
  ].sort((a, b) => a.at - b.at);
  for (const r of rows) process.stdout.write(`  +${String(Math.round(r.at - submittedAt)).padStart(6)} ms  ${r.who.padEnd(16)} ${r.text}\n`);

  if (await step('the task: the crashed and the hung worker were replaced by VPIDs 4 and 5', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');
  // Each death (GSIG_NTF_DIED(v)) is answered by the next replacement the group spawns
  // (GSIG_REP_SPAWNED(w)), in the journal's order.
  const journal = done.events.filter((e) => e.task === id);
  const replacement = new Map();
  const pending = [];
  for (const e of journal) {
    const died = /GSIG_NTF_DIED\((\d+)\)/.exec(e.text);
    if (died !== null) pending.push(Number(died[1]));
    const spawned = /GSIG_REP_SPAWNED\((\d+)\)/.exec(e.text);
    if (spawned !== null && pending.length > 0) replacement.set(pending.shift(), Number(spawned[1]));
  }
  const killRequested = new Set(journal.flatMap((e) => { const m = /group request GSIG_REQ_KILL\((\d+)\) accepted/.exec(e.text); return m === null ? [] : [Number(m[1])]; }));
  const t = done.tasks.find((x) => x.id === id);
  const summary = failureSummary(
    { ...t, procs: t.procs.map((p) => (killRequested.has(p.vpid) ? { ...p, reason: `its peers asked the group to kill it (GSIG_REQ_KILL), ${howEnded(p)}` } : p)) },
    injected,
    (vpid) => rankOf(lines, vpid, Infinity),
    (vpid) => replacement.get(vpid) ?? null,
  );
  process.stdout.write(summary.text);
  const result = lines.find((l) => /^RESULT /.test(l.text));
  if (result === undefined) throw new Error('the manager printed no RESULT line: see `trine logs`');
  const count = Number(/solutions=(\d+)/.exec(result.text)?.[1]);
  const failures = summary.failed.length === 0 ? 'no process failed' : `${summary.failed.length} failed process${summary.failed.length === 1 ? '' : 'es'} (VPIDs ${summary.failed.map((p) => p.vpid).join(', ')}), each replaced`;
  process.stdout.write(`\nN-Queens n=${N}: ${count} solutions (expected ${EXPECTED}) after ${failures}: ${count === EXPECTED ? 'correct' : 'WRONG'}\n`);
  if (count !== EXPECTED) throw new Error(`wrong count ${count}`);
}

/** A task's raw stdout lines (the heat stencil prints no prefix), over every VPID it had. */
function outLines(id) {
  const logs = join(dir, 'logs', 'tasks', id);
  const out = [];
  for (let vpid = 0; vpid < 64; vpid++) {
    const f = join(logs, `${vpid}.out`);
    if (existsSync(f)) out.push(...readFileSync(f, 'utf8').split('\n').filter((l) => l !== ''));
  }
  return out;
}
const taskOf = (v, id) => v.tasks.find((t) => t.id === id);
/** The running process holding `rank`, from `trine ps --json` (ProcView.rank, PROTOCOL §11.2). */
const holderOf = (t, rank) => t.procs.find((p) => p.rank === rank && p.state === 'running' && p.pid !== null);
const rankTable = (t) => t.procs.filter((p) => p.rank !== null).sort((a, b) => a.rank - b.rank)
  .map((p) => `rank ${p.rank}: VPID ${p.vpid} on ${p.node} (${p.state}${p.pid === null ? '' : `, pid ${p.pid}`})`);

/** `--rollback`: the heat stencil, with no recovery code, survives a crash and a node failure. */
async function rollbackDemo() {
  if (await step('start a local cluster (fault injection allowed, for kill-node)', ['up', '--nodes', '4', '--allow-inject', '--dir', dir]) !== 0) throw new Error('up failed');

  const { rows, cols, steps, paceMs, ranks, intervalMs } = HEAT;
  const heatArgs = ['--rows', String(rows), '--cols', String(cols), '--steps', String(steps)];
  const app = ['node', '--import', 'tsx', 'examples/heat/heat.ts', ...heatArgs, '--pace-ms', String(paceMs), '--verify'];
  const opts = ['--linked', '--recovery', 'rollback', '--checkpoint-interval', String(intervalMs), '-n', String(ranks), '--name', 'heat'];
  process.stdout.write(`\n$ trine submit ${opts.join(' ')} -- ${app.join(' ')}    # the heat stencil, no recovery code: the group and the library recover it\n`);
  const submittedAt = Date.now();
  const id = (await capture(['submit', ...opts, '--cwd', repo, '--dir', dir, '--', process.execPath, ...app.slice(1)])).trim();
  process.stdout.write(`${id}\n`);
  task = id;
  const actions = [];
  /** What the demo did to a process, by VPID: the summary says it beside the group's record. */
  const injected = new Map();
  const act = (text) => {
    actions.push({ at: Date.now(), who: '[demo]', text });
  };
  const running = await waitFor('every rank to run', async () => {
    const t = taskOf(await view(), id);
    if (t?.outcome != null) throw new Error(`the task ended before it ran: ${t.reason}`);
    return t?.state === 'running' ? t : null;
  }, 90_000);
  const runningAt = Date.now();
  process.stdout.write(`\n# ${id} runs; each rank checkpoints to its protector, the agent of the next node:\n${rankTable(running).map((l) => `  ${l}\n`).join('')}`);

  await sleep(Math.max(0, runningAt + CRASH_AFTER_MS - Date.now()));
  const victim = holderOf(taskOf(await view(), id), 1);
  if (victim === undefined) throw new Error('rank 1 is not running');
  process.stdout.write(`\n$ kill -9 ${victim.pid}    # crash rank 1 (${id}/${victim.vpid} on ${victim.node}) mid-run\n`);
  process.kill(victim.pid, 'SIGKILL');
  act(`kill -9 rank 1 (VPID ${victim.vpid} on ${victim.node})`);
  injected.set(victim.vpid, 'crashed (the demo\'s kill -9)');
  const replaced = await waitFor('rank 1\'s replacement to run', async () => {
    const t = taskOf(await view(), id);
    if (t?.outcome != null) throw new Error(`the task ended: ${t.reason}`);
    const h = holderOf(t, 1);
    return h !== undefined && h.vpid !== victim.vpid ? h : null;
  }, 60_000);
  process.stdout.write(`# rank 1 is now held by VPID ${replaced.vpid} on ${replaced.node}: it restored its checkpoint and replays its log\n`);

  await sleep(NODE_AFTER_MS);
  const v = await view();
  const lost = holderOf(taskOf(v, id), 0);
  if (lost === undefined) throw new Error('rank 0 is not running');
  const pick = { node: lost.node };
  process.stdout.write(`\n$ trine inject kill-node ${pick.node}    # fail node ${pick.node}, holding rank 0: rank 0 is replaced, and the ranks ${pick.node}'s agent protected move their logs to the next protector\n`);
  process.stdout.write(await capture(['inject', 'kill-node', pick.node, '--dir', dir]));
  act(`kill-node ${pick.node} (rank ${lost.rank}, VPID ${lost.vpid})`);
  injected.set(lost.vpid, `its node ${pick.node} failed (the demo's trine inject kill-node)`);

  const done = await waitFor('the task to finish', async () => {
    const w = await view();
    const t = taskOf(w, id);
    return t !== undefined && t.outcome !== null ? w : null;
  }, 120_000);
  const t = taskOf(done, id);

  process.stdout.write(`\n# timeline (ms after \`trine submit\`): what the demo did [demo] and the manager group's journal [group]\n`);
  const KEEP = /running: |terminated abnormally|node lost|NTF_DIED|replacing rank|held by|REP_SPAWNED|finished/;
  const rowsOut = [
    ...done.events.filter((e) => e.atMs >= submittedAt && (e.task === id ? KEEP.test(e.text) : /node/.test(e.text))).map((e) => ({ at: e.atMs, who: '[group]', text: e.text })),
    ...actions,
  ].sort((a, b) => a.at - b.at);
  for (const r of rowsOut) process.stdout.write(`  +${String(Math.round(r.at - submittedAt)).padStart(6)} ms  ${r.who.padEnd(8)} ${r.text}\n`);

  // Who held which rank and who took it over: the group's "replacing rank R (VPID v) with VPID w".
  const took = new Map();
  for (const e of done.events.filter((x) => x.task === id)) {
    const m = /replacing rank (\d+) \(VPID (\d+)\) with VPID (\d+)/.exec(e.text);
    if (m !== null) took.set(Number(m[2]), { rank: Number(m[1]), by: Number(m[3]) });
  }
  process.stdout.write(failureSummary(t, injected, (vpid) => took.get(vpid)?.rank ?? null, (vpid) => took.get(vpid)?.by ?? null).text);
  process.stdout.write(`\n# which VPID holds which rank now (trine ps --json, ProcView.rank):\n${rankTable(t).map((l) => `  ${l}\n`).join('')}`);
  if (await step('the task: the dead holders have no rank any more; their replacements hold them', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');

  const ref = await new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/heat/heat-reference.ts', ...heatArgs], { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
  if (ref.status !== 0) throw new Error(`the reference failed: ${ref.stderr.trim()}`);
  const expected = JSON.parse(ref.stdout.trim());
  const line = outLines(id).find((l) => l.startsWith('{"app":"heat"'));
  if (t.outcome !== 'normal') throw new Error(`the task ended ${t.outcome}: ${t.reason}`);
  if (line === undefined) throw new Error('rank 0 printed no answer: see `trine logs`');
  const got = JSON.parse(line);
  const same = got.checksum === expected.checksum && got.residualDigest === expected.residualDigest;
  process.stdout.write(`\nheat ${rows}×${cols}, ${steps} steps on ${ranks} ranks, after a crash and a node failure, no recovery code:\n`);
  process.stdout.write(`  grid checksum      ${got.checksum}\n  reference          ${expected.checksum}\n`);
  process.stdout.write(`  residuals' digest  ${got.residualDigest}\n  reference          ${expected.residualDigest}\n`);
  process.stdout.write(`  ${same ? 'identical, bit for bit' : 'DIFFERENT'}; the task ended normally\n`);
  const verified = outLines(id).includes('heat: verify OK');
  process.stdout.write(`  rank 0's own check against the reference (--verify): ${verified ? 'heat: verify OK' : 'MISSING'}\n`);
  if (!verified) throw new Error('rank 0 did not print "heat: verify OK"');
  if (!same) throw new Error('the answer differs from the reference');
}

/** The default and the rollback demo: run, explain a failure, always stop the cluster. */
async function main() {
  for (const sig of Object.keys(EXIT_ON)) process.on(sig, onInterrupt);
  try {
    if (ROLLBACK) await rollbackDemo();
    else await appDemo();
  } catch (e) {
    // Once interrupted, whatever failed (a `trine` the terminal's Ctrl-C reached too) is the
    // interruption, not a failure of the demo.
    if (interrupted === null) {
      failed = true;
      process.stderr.write(`\ndemo failed: ${e.message}\n`);
      if (task !== null) await explain(task);
    }
  } finally {
    if (stoppedPid !== null) {
      try {
        process.kill(stoppedPid, 'SIGCONT');
      } catch {
        // gone already: the group killed it
      }
    }
    if (existsSync(dir) && await step('stop every process the cluster started', ['down', '--dir', dir]) !== 0) failed = true;
    rmSync(root, { recursive: true, force: true });
  }
  if (interrupted !== null) {
    process.stdout.write(`demo interrupted${failed ? ', and the cluster did not stop cleanly' : ''}\n`);
    process.exit(EXIT_ON[interrupted]);
  }
  process.stdout.write(failed ? 'demo FAILED\n' : 'demo OK\n');
  process.exit(failed ? 1 : 0);
}

// `--slow`: HyperQuickSort on the DGRP with a slow process, against the same sort waiting for it
// (issue 18; examples/hqsort/demo-slow.ts starts, times and stops its own cluster, SIGINT and
// SIGTERM included). This process hands each signal on to it and exits with its code once it
// has stopped that cluster: neither may end first (a SIGTERM to this pid alone left the child and
// its cluster running).
if (SLOW) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repo, 'examples', 'hqsort', 'demo-slow.ts'), ...process.argv.slice(2).filter((a) => a !== '--slow')], { cwd: repo, stdio: 'inherit' });
  for (const sig of Object.keys(EXIT_ON)) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? EXIT_ON[signal] ?? 1));
} else {
  await main();
}
