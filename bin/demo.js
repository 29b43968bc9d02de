#!/usr/bin/env node
// `npm run demo`: the main job end to end on a local 4-node cluster in a temporary dir (issue 4).
// It starts the cluster and submits the fault-tolerant N-Queens example (examples/nqueens, n = 12)
// as a linked task of 4 processes: a manager and 3 workers. Mid-run it crashes one worker with
// `kill -9` and hangs another with SIGSTOP. It then prints the timeline of detection and recovery
// that the processes and the manager logged, ends with the count (14,200), and stops everything.
// It exits non-zero if any step fails or the count is wrong, and always stops what it started.
//
// `npm run demo -- --slow`: HyperQuickSort on the DGRP (issue 18): one process slowed, the
// group removes it, the others absorb its share; then the same sort waiting for it, and both times.
//
// `npm run demo -- --rollback`: rollback recovery (issue 17, PROTOCOL §11) instead. The heat
// stencil (examples/heat, no recovery code at all) runs as a rollback task of 3 ranks; mid-run
// one rank is crashed with `kill -9`, then, once the group has replaced it, a node fails (`trine
// inject kill-node`). It prints the timeline, which VPID holds which rank, and the final answer
// beside the sequential reference's: they must be equal bit for bit.
import { spawnSync } from 'node:child_process';
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
// `--slow`: HyperQuickSort on the DGRP with a slow process, against the same sort waiting for it
// (issue 18; examples/hqsort/demo-slow.ts, which starts, times and stops its own cluster; on
// Ctrl-C it stops the cluster itself, so this process only waits for it).
if (process.argv.includes('--slow')) {
  process.on('SIGINT', () => {});
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(repo, 'examples', 'hqsort', 'demo-slow.ts')], { cwd: repo, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const root = mkdtempSync(join(tmpdir(), 'trine-demo-'));
const dir = join(root, 'cluster');
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

function step(title, args) {
  process.stdout.write(`\n$ trine ${args.join(' ')}    # ${title}\n`);
  const started = Date.now();
  const r = spawnSync(process.execPath, [trine, ...args], { stdio: 'inherit' });
  const code = r.status ?? 1;
  process.stdout.write(`(exit ${code}, ${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  return code;
}

/** Runs trine quietly and returns its stdout, or throws with its stderr. */
function capture(args) {
  const r = spawnSync(process.execPath, [trine, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`trine ${args.join(' ')} failed (exit ${r.status}): ${r.stderr.trim()}`);
  return r.stdout;
}

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const view = () => JSON.parse(capture(['ps', '--json', '--dir', dir]));

/** Every line the task's processes printed, as {at, vpid, text}. */
function appLines(id) {
  const out = [];
  const logs = join(dir, 'logs', 'tasks', id);
  for (let vpid = 0; vpid < 16; vpid++) {
    const f = join(logs, `${vpid}.out`);
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      const m = /^(\d+) (vpid=\d+ rank=-?\d+) (.*)$/.exec(line);
      if (m !== null) out.push({ at: Number(m[1]), who: m[2], text: m[3] });
    }
  }
  return out;
}

function waitFor(what, test, timeoutMs) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = test();
    if (r) return r;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    sleep(100);
  }
}
/** Where a failed run stood: the task's processes as the group sees them, its journal and the
 *  last lines its processes printed (their full output is gone with the cluster dir). */
function explain(id) {
  try {
    const v = view();
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
const proc = (id, vpid) => view().tasks.find((t) => t.id === id)?.procs.find((p) => p.vpid === vpid);

let failed = false;
/** The task, once submitted: a failure then shows what it and its processes last said. */
let task = null;

/** The default demo: app-specific recovery (N-Queens' own code) through a crash and a hang. */
function appDemo() {
  if (step('start a local cluster: 3 replicas, an agent (and its keeper) per node, the watchdog', ['up', '--nodes', '4', '--dir', dir]) !== 0) throw new Error('up failed');

  const app = ['node', '--import', 'tsx', 'examples/nqueens/nqueens.ts', '--n', String(N), '--pace-ms', String(PACE_MS)];
  process.stdout.write(`\n$ trine submit --linked -n 4 --name nqueens -- ${app.join(' ')}    # N-Queens: a manager and 3 workers, linked to trine/app\n`);
  const submittedAt = Date.now();
  const id = capture(['submit', '--linked', '-n', '4', '--name', 'nqueens', '--cwd', repo, '--dir', dir, '--', process.execPath, ...app.slice(1)]).trim();
  process.stdout.write(`${id}\n`);
  task = id;
  waitFor('every process started and agreed on the quorum', () => appLines(id).filter((l) => /quorum/.test(l.text)).length >= 4, 90_000);
  sleep(1500);

  const crash = proc(id, 2);
  process.stdout.write(`\n$ kill -9 ${crash.pid}    # crash worker ${id}/2 on ${crash.node} mid-computation\n`);
  const crashedAt = Date.now();
  process.kill(crash.pid, 'SIGKILL');
  waitFor('recovery from the crash', () => appLines(id).filter((l) => l.at > crashedAt && /recoverComm: SUCCESS/.test(l.text)).length >= 3, 60_000);
  sleep(700);

  const hang = proc(id, 3);
  process.stdout.write(`\n$ kill -STOP ${hang.pid}    # hang worker ${id}/3 on ${hang.node}: it stops answering, without dying\n`);
  process.kill(hang.pid, 'SIGSTOP');

  const done = waitFor('the task to finish', () => {
    const v = view();
    const t = v.tasks.find((x) => x.id === id);
    return t?.outcome !== null && t !== undefined ? v : null;
  }, 120_000);

  process.stdout.write(`\n# timeline (ms after \`trine submit\`): the manager group's journal [group] and the processes' own logs\n`);
  const KEEP = /started: RECOVERED|NTF_DIED|APP_SIG_HANG from rank 0|timeout waiting|diagnosis: kill|killed vpid|spawned a replacement|recoverComm: SUCCESS|RESULT/;
  const rows = [
    ...done.events.filter((e) => e.task === id && !/placed|starting|submitted/.test(e.text)).map((e) => ({ at: e.atMs, who: '[group]', text: e.text })),
    ...appLines(id).filter((l) => KEEP.test(l.text)),
  ].sort((a, b) => a.at - b.at);
  for (const r of rows) process.stdout.write(`  +${String(Math.round(r.at - submittedAt)).padStart(6)} ms  ${r.who.padEnd(16)} ${r.text}\n`);

  if (step('the task: the crashed and the hung worker were replaced by VPIDs 4 and 5', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');
  const result = appLines(id).find((l) => /^RESULT /.test(l.text));
  if (result === undefined) throw new Error('the manager printed no RESULT line: see `trine logs`');
  const count = Number(/solutions=(\d+)/.exec(result.text)?.[1]);
  process.stdout.write(`\nN-Queens n=${N}: ${count} solutions (expected ${EXPECTED}) after a crash and a hang: ${count === EXPECTED ? 'correct' : 'WRONG'}\n`);
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
function rollbackDemo() {
  if (step('start a local cluster (fault injection allowed, for kill-node)', ['up', '--nodes', '4', '--allow-inject', '--dir', dir]) !== 0) throw new Error('up failed');

  const { rows, cols, steps, paceMs, ranks, intervalMs } = HEAT;
  const heatArgs = ['--rows', String(rows), '--cols', String(cols), '--steps', String(steps)];
  const app = ['node', '--import', 'tsx', 'examples/heat/heat.ts', ...heatArgs, '--pace-ms', String(paceMs), '--verify'];
  const opts = ['--linked', '--recovery', 'rollback', '--checkpoint-interval', String(intervalMs), '-n', String(ranks), '--name', 'heat'];
  process.stdout.write(`\n$ trine submit ${opts.join(' ')} -- ${app.join(' ')}    # the heat stencil, no recovery code: the group and the library recover it\n`);
  const submittedAt = Date.now();
  const id = capture(['submit', ...opts, '--cwd', repo, '--dir', dir, '--', process.execPath, ...app.slice(1)]).trim();
  process.stdout.write(`${id}\n`);
  task = id;
  const actions = [];
  const act = (text) => {
    actions.push({ at: Date.now(), who: '[demo]', text });
  };
  const running = waitFor('every rank to run', () => {
    const t = taskOf(view(), id);
    if (t?.outcome != null) throw new Error(`the task ended before it ran: ${t.reason}`);
    return t?.state === 'running' ? t : null;
  }, 90_000);
  const runningAt = Date.now();
  process.stdout.write(`\n# ${id} runs; each rank checkpoints to its protector, the agent of the next node:\n${rankTable(running).map((l) => `  ${l}\n`).join('')}`);

  sleep(Math.max(0, runningAt + CRASH_AFTER_MS - Date.now()));
  const victim = holderOf(taskOf(view(), id), 1);
  if (victim === undefined) throw new Error('rank 1 is not running');
  process.stdout.write(`\n$ kill -9 ${victim.pid}    # crash rank 1 (${id}/${victim.vpid} on ${victim.node}) mid-run\n`);
  process.kill(victim.pid, 'SIGKILL');
  act(`kill -9 rank 1 (VPID ${victim.vpid} on ${victim.node})`);
  const replaced = waitFor('rank 1\'s replacement to run', () => {
    const t = taskOf(view(), id);
    if (t?.outcome != null) throw new Error(`the task ended: ${t.reason}`);
    const h = holderOf(t, 1);
    return h !== undefined && h.vpid !== victim.vpid ? h : null;
  }, 60_000);
  process.stdout.write(`# rank 1 is now held by VPID ${replaced.vpid} on ${replaced.node}: it restored its checkpoint and replays its log\n`);

  sleep(NODE_AFTER_MS);
  const v = view();
  const lost = holderOf(taskOf(v, id), 0);
  if (lost === undefined) throw new Error('rank 0 is not running');
  const pick = { node: lost.node };
  process.stdout.write(`\n$ trine inject kill-node ${pick.node}    # fail node ${pick.node}, holding rank 0: rank 0 is replaced, and the ranks ${pick.node}'s agent protected move their logs to the next protector\n`);
  process.stdout.write(capture(['inject', 'kill-node', pick.node, '--dir', dir]));
  act(`kill-node ${pick.node} (rank ${lost.rank}, VPID ${lost.vpid})`);

  const done = waitFor('the task to finish', () => {
    const w = view();
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

  process.stdout.write(`\n# which VPID holds which rank now (trine ps --json, ProcView.rank):\n${rankTable(t).map((l) => `  ${l}\n`).join('')}`);
  if (step('the task: the dead holders have no rank any more; their replacements hold them', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');

  const ref = spawnSync(process.execPath, ['--import', 'tsx', 'examples/heat/heat-reference.ts', ...heatArgs], { cwd: repo, encoding: 'utf8' });
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

try {
  if (ROLLBACK) rollbackDemo();
  else appDemo();
} catch (e) {
  failed = true;
  process.stderr.write(`\ndemo failed: ${e.message}\n`);
  if (task !== null) explain(task);
} finally {
  if (step('stop every process the cluster started', ['down', '--dir', dir]) !== 0) failed = true;
  rmSync(root, { recursive: true, force: true });
}
process.stdout.write(failed ? 'demo FAILED\n' : 'demo OK\n');
process.exit(failed ? 1 : 0);
