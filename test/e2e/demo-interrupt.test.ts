// Ctrl-C on the demo or a campaign stops the cluster it started (issue 19 item 5: it once left a
// whole cluster running, with a SIGSTOPped process in it). Each test starts the script as a real
// process with its own TMPDIR (where the script makes its cluster dir), waits until a task of
// that cluster runs, stops one of the task's processes with SIGSTOP as the demo's hang does, and
// signals the script. The script must say it was interrupted, exit 130 (SIGINT) or 143
// (SIGTERM), and leave nothing of the cluster: every daemon, every daemon's child (agents,
// standbys) and every task process seen while it ran is dead, no process names its dir, and the
// dir is gone.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import type { ClusterView } from '../../src/core/status.ts';
import { alive, downCluster, pidsIn, processesMentioning, trine, waitFor } from './helpers.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** Until the script's cluster runs a task: `trine up` and a spawn on this loaded 2-core machine. */
const RUNNING_MS = 120_000;
/** Until the script has stopped its cluster and exited, after the signal (`trine down` takes up
 *  to its grace periods, DOWN_GRACE_MS + DOWN_TASK_GRACE_MS and their SIGKILL waits). */
const STOPPED_MS = 60_000;
const POLL_MS = 250;

type Script = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };

/** Each test's TMPDIR: removed afterwards, with anything still running from it (a failed test). */
let tmp = '';
afterEach(async () => {
  if (tmp === '') return;
  for (const root of readdirSync(tmp)) {
    const dir = join(tmp, root, 'cluster');
    if (existsSync(dir)) await downCluster(join(tmp, root), dir);
  }
  await downCluster(tmp, '');
  tmp = '';
});

/** Starts `node args…` in the repo with TMPDIR set to a fresh dir; `done` settles at its exit. */
function start(args: string[]): { pid: number; done: Promise<Script>; output: () => string } {
  tmp = mkdtempSync(join(tmpdir(), 'trine-interrupt-'));
  const child = spawn(process.execPath, args, { cwd: REPO, env: { ...process.env, TMPDIR: tmp }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const done = new Promise<Script>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { pid: child.pid!, done, output: () => `${stdout}\n${stderr}` };
}

/** The cluster dir the script made under TMPDIR (`<prefix>XXXXXX/cluster`), once `trine up` wrote
 *  its pid files. */
function clusterDir(): string | undefined {
  for (const root of existsSync(tmp) ? readdirSync(tmp) : []) {
    const dir = join(tmp, root, 'cluster');
    if (pidsIn(dir).length > 0) return dir;
  }
  return undefined;
}

/** Waits until the script's cluster runs a task with `size` live processes; returns the dir and
 *  every pid of the cluster then: daemons (pid files), their children (agents, standbys: found by
 *  their command line naming the dir) and the task's processes (`trine ps --json`). */
async function whenRunning(script: { output: () => string }, size: number): Promise<{ dir: string; daemons: number[]; tasks: number[] }> {
  return waitFor(`a running task of ${size} processes (output so far:\n${script.output()})`, RUNNING_MS, async () => {
    const dir = clusterDir();
    if (dir === undefined) return undefined;
    const r = await trine(['ps', '--json', '--dir', dir]);
    if (r.code !== 0) return undefined;
    const v = JSON.parse(r.stdout) as ClusterView;
    const running = v.tasks.flatMap((t) => t.procs).filter((p) => p.state === 'running' && p.pid !== null);
    if (running.length < size) return undefined;
    return { dir, daemons: [...new Set([...pidsIn(dir), ...processesMentioning(dir)])], tasks: running.map((p) => p.pid!) };
  }, POLL_MS);
}

/** What must hold once the script exited: nothing of its cluster left. */
function expectNothingLeft(cluster: { dir: string; daemons: number[]; tasks: number[] }, out: string): void {
  expect(cluster.daemons.length, 'daemons seen').toBeGreaterThanOrEqual(8); // 3 replicas, 4 keepers, the watchdog at least
  expect(cluster.daemons.filter(alive), `daemons left running\n${out}`).toEqual([]);
  expect(cluster.tasks.filter(alive), `task processes left running\n${out}`).toEqual([]);
  expect(processesMentioning(tmp), `processes naming the script's dir\n${out}`).toEqual([]);
  expect(existsSync(cluster.dir), 'the cluster dir').toBe(false);
}

/** A task process stopped, as the demo's hang and the campaign's do: it must not survive either. */
function stopOne(pids: number[]): number {
  const pid = pids[pids.length - 1]!;
  process.kill(pid, 'SIGSTOP');
  return pid;
}

it('npm run demo, Ctrl-C (SIGINT) mid-run with a task process stopped: the cluster stops, "demo interrupted", exit 130', async () => {
  const demo = start(['bin/demo.js']);
  const cluster = await whenRunning(demo, 4);
  stopOne(cluster.tasks);
  process.kill(demo.pid, 'SIGINT');
  const r = await Promise.race([demo.done, new Promise<never>((_, no) => setTimeout(() => no(new Error(`the demo did not exit within ${STOPPED_MS} ms after SIGINT:\n${demo.output()}`)), STOPPED_MS))]);
  const out = `${r.stdout}\n${r.stderr}`;
  expect(r.code, out).toBe(130);
  expect(r.stderr.match(/demo interrupted \(SIGINT\): stopping the cluster\n/g), out).toHaveLength(1);
  expect(r.stdout).toMatch(/\$ trine down --dir .*# stop every process the cluster started\n(.*\n)*stopped \d+ processes/);
  expect(r.stdout).toMatch(/demo interrupted\n$/);
  expect(r.stderr).not.toMatch(/demo failed/);
  expectNothingLeft(cluster, out);
}, RUNNING_MS + STOPPED_MS + 30_000);

it('npm run demo -- --slow, SIGTERM to the demo alone (not its process group): it hands the signal to demo-slow, which stops its cluster; exit 143', async () => {
  const demo = start(['bin/demo.js', '--slow', '--count', '4000000']);
  const cluster = await whenRunning(demo, 4);
  process.kill(demo.pid, 'SIGTERM');
  const r = await Promise.race([demo.done, new Promise<never>((_, no) => setTimeout(() => no(new Error(`the demo did not exit within ${STOPPED_MS} ms after SIGTERM:\n${demo.output()}`)), STOPPED_MS))]);
  const out = `${r.stdout}\n${r.stderr}`;
  expect(r.code, out).toBe(143);
  expect(r.stderr.match(/demo interrupted \(SIGTERM\): stopping the cluster\n/g), out).toHaveLength(1);
  expect(r.stdout).toMatch(/demo interrupted\n$/);
  expectNothingLeft(cluster, out);
}, RUNNING_MS + STOPPED_MS + 30_000);

it('npm run campaign:nqueens -- --runs 2, SIGTERM mid-run with a task process stopped (a hang): the cluster stops, one line says so, exit 143', async () => {
  const out = join(tmpdir(), `trine-interrupt-campaign-${process.pid}.json`);
  try {
    const campaign = start(['--import', 'tsx', 'examples/nqueens/campaign.ts', '--runs', '2', '--per-run', '1', '--out', out]);
    const cluster = await whenRunning(campaign, 4);
    stopOne(cluster.tasks);
    process.kill(campaign.pid, 'SIGTERM');
    const r = await Promise.race([campaign.done, new Promise<never>((_, no) => setTimeout(() => no(new Error(`the campaign did not exit within ${STOPPED_MS} ms after SIGTERM:\n${campaign.output()}`)), STOPPED_MS))]);
    const text = `${r.stdout}\n${r.stderr}`;
    expect(r.code, text).toBe(143);
    expect(r.stderr.match(/campaign interrupted \(SIGTERM\) after 0 of 2 runs: stopping the cluster\n/g), text).toHaveLength(1);
    expect(r.stdout).toMatch(/stopped \d+ processes/);
    expectNothingLeft(cluster, text);
  } finally {
    rmSync(out, { force: true });
  }
}, RUNNING_MS + STOPPED_MS + 30_000);
