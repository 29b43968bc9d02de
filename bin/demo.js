#!/usr/bin/env node
// `npm run demo`: the main job end to end on a local 4-node cluster in a temporary dir — start
// it, submit a 4-process task, crash one of its processes with `kill -9`, show what the manager
// saw and when, read the task's output, stop everything. Prints each step; exits non-zero if any
// step fails, and always stops what it started.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const trine = fileURLToPath(new URL('./trine.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'trine-demo-'));
const dir = join(root, 'cluster');
/** The task: each process says who it is (its mapping, spec §7, in TRINE_* variables), then works. */
const TASK_SECONDS = 4;
const SCRIPT = `echo "vpid $TRINE_VPID of $TRINE_SIZE, restarted=$TRINE_RESTARTED, peers $TRINE_ENDPOINTS"; sleep ${TASK_SECONDS}; echo "vpid $TRINE_VPID done"`;

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

function view() {
  return JSON.parse(capture(['ps', '--json', '--dir', dir]));
}

function waitFor(what, test, timeoutMs) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = view();
    if (test(v)) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    sleep(100);
  }
}

let failed = false;
try {
  if (step('start a local cluster: 3 replicas, an agent (and its keeper) per node, the watchdog', ['up', '--nodes', '4', '--dir', dir]) !== 0) throw new Error('up failed');
  if (step('ask every replica and the watchdog for their status', ['status', '--dir', dir]) !== 0) throw new Error('status failed');

  process.stdout.write(`\n$ trine submit -n 4 --name demo -- sh -c '…'    # a task of 4 processes, placed one per node\n`);
  const submittedAt = Date.now();
  const id = capture(['submit', '-n', '4', '--name', 'demo', '--dir', dir, '--', 'sh', '-c', SCRIPT]).trim();
  process.stdout.write(`${id}\n`);
  const running = waitFor('every process running', (v) => v.tasks.find((t) => t.id === id)?.state === 'running', 10_000);
  if (step('every process runs; the manager knows each pid and node', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');

  const victim = running.tasks.find((t) => t.id === id).procs[2];
  process.stdout.write(`\n$ kill -9 ${victim.pid}    # crash ${id}/${victim.vpid} on ${victim.node}\n`);
  const killedAt = Date.now();
  process.kill(victim.pid, 'SIGKILL');
  waitFor('the crash to be recorded', (v) => v.tasks.find((t) => t.id === id)?.procs.find((p) => p.vpid === victim.vpid)?.state === 'terminatedAbnormally', 5_000);
  if (step('the manager recorded the crash; the task keeps running (the application may recover)', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');

  const done = waitFor('the task to finish', (v) => v.tasks.find((t) => t.id === id)?.outcome !== null, (TASK_SECONDS + 10) * 1000);
  process.stdout.write(`\n# what the primary applied, and when (ms after \`trine submit\` started; the primary's wall clock):\n`);
  for (const e of done.events.filter((x) => x.task === id)) {
    process.stdout.write(`  +${String(Math.round(e.atMs - submittedAt)).padStart(5)} ms  rsn ${String(e.rsn).padStart(4)}  ${e.text}\n`);
  }
  const death = done.events.find((e) => e.task === id && e.vpid === victim.vpid && /terminated abnormally/.test(e.text));
  if (death !== undefined) {
    process.stdout.write(`  kill -9 sent at +${killedAt - submittedAt} ms; recorded ${Math.max(0, Math.round(death.atMs - killedAt))} ms later\n`);
  }
  if (step('the task ended abnormally: one of its processes crashed', ['ps', id, '--dir', dir]) !== 0) throw new Error('ps failed');
  if (step("the processes' output, from their log files", ['logs', id, '--dir', dir]) !== 0) throw new Error('logs failed');
} catch (e) {
  process.stdout.write(`\n${e.message}\n`);
  failed = true;
}
if (step('stop everything that was started', ['down', '--dir', dir]) !== 0) failed = true;
if (failed) {
  process.stdout.write(`\ndemo FAILED: logs kept in ${join(dir, 'logs')}\n`);
  process.exit(1);
}
rmSync(root, { recursive: true, force: true });
process.stdout.write('\ndemo OK\n');
