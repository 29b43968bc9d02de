#!/usr/bin/env node
// `npm run demo`: the main job end to end on a local 4-node cluster in a temporary dir (issue 4).
// It starts the cluster and submits the fault-tolerant N-Queens example (examples/nqueens, n = 12)
// as a linked task of 4 processes: a manager and 3 workers. Mid-run it crashes one worker with
// `kill -9` and hangs another with SIGSTOP. It then prints the timeline of detection and recovery
// that the processes and the manager logged, ends with the count (14,200), and stops everything.
// It exits non-zero if any step fails or the count is wrong, and always stops what it started.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const trine = fileURLToPath(new URL('./trine.js', import.meta.url));
const repo = fileURLToPath(new URL('..', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'trine-demo-'));
const dir = join(root, 'cluster');
const N = 12;
const EXPECTED = 14200;
/** Per work unit, so the run lasts long enough for faults to land mid-computation. */
const PACE_MS = 300;

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
try {
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
