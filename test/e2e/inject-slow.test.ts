// `trine inject slow` and `heal T` on a live local cluster (issue 18 item 5; docs/OPERATIONS.md
// §7), as an operator runs them: the agent of the process's node duty-cycles it with
// SIGSTOP/SIGCONT. A CPU-bound task process counts loop iterations and prints, about every
// 100 ms, the time, the window's length and the window's count; its rate (iterations per ms) is
// compared against its own rate before, never against a wall-clock figure:
//   - slow t/0 --share 25: its rate drops well under half; heal: it is running (not state T) and
//     its rate recovers;
//   - --for: the slowness ends by itself, leaving the process running;
//   - a node, with --period 250: its task processes are slowed, its agent is not, and the answer
//     gives the period;
//   - `trine down` with a slowness on: the agent ends it as it stops (SIGCONT), and every process
//     the test started is gone.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, logEvents, processesMentioning, trine, waitFor } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';
import type { ClusterView } from '../../src/core/status.ts';

/** Liveness deadlines: generous, for a loaded 2-core host running two e2e files at once. */
const SOON_MS = 15_000;
/** How long a rate is measured: ten or more of the task's windows. */
const MEASURE_MS = 1_500;

/** Counts loop iterations; about every 100 ms prints `<now> <window ms> <iterations>`. The count
 *  restarts each window, so it stays a small integer (a count past 2^30 would slow V8 itself). */
const COUNTER = 'let n=0,t=Date.now();for(;;){n++;if((n&0xfff)===0){const now=Date.now();if(now-t>=100){console.log(now+" "+(now-t)+" "+n);n=0;t=now}}}';

let root = '';
let dir = '';
/** Task process pids seen: killed in afterAll whatever happens (their command lines do not
 *  mention the test dir). */
const taskPids = new Set<number>();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Field 3 of /proc/<pid>/stat: R, S, T (stopped), Z, … */
function procState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** The states `pid` shows when sampled every 10 ms for `ms`. */
async function statesOver(pid: number, ms: number): Promise<Set<string>> {
  const seen = new Set<string>();
  const until = Date.now() + ms;
  while (Date.now() < until) {
    seen.add(procState(pid));
    await sleep(10);
  }
  return seen;
}

async function view(): Promise<ClusterView> {
  const r = await trine(['ps', '--json', '--dir', dir]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ClusterView;
}

/** Submits a counter; its task id, pid and node once it runs. */
async function startCounter(): Promise<{ task: string; pid: number; node: string }> {
  const s = await trine(['submit', '--dir', dir, '--', process.execPath, '-e', COUNTER]);
  expect(s.code).toBe(0);
  const task = s.stdout.trim();
  const p = await waitFor(`${task} running`, SOON_MS, async () => {
    const proc = (await view()).tasks.find((t) => t.id === task)?.procs[0];
    return proc?.state === 'running' && proc.pid !== null && proc.node !== null ? { pid: proc.pid, node: proc.node } : undefined;
  });
  taskPids.add(p.pid);
  // Until it prints, it is still loading.
  await waitFor(`${task} counting`, SOON_MS, () => (windows(task).length >= 3 ? true : undefined));
  return { task, ...p };
}

type Window = { atMs: number; ms: number; count: number };

function windows(task: string): Window[] {
  const file = join(dir, 'logs', 'tasks', task, '0.out');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').flatMap((line) => {
    const m = /^([0-9]+) ([0-9]+) ([0-9]+)$/.exec(line);
    return m === null ? [] : [{ atMs: Number(m[1]), ms: Number(m[2]), count: Number(m[3]) }];
  });
}

/** Iterations per ms over the windows that ended within the last `ms`, measured from now on. */
async function rate(task: string, ms = MEASURE_MS): Promise<number> {
  const from = Date.now();
  await sleep(ms);
  const w = windows(task).filter((x) => x.atMs - x.ms >= from);
  expect(w.length).toBeGreaterThanOrEqual(3);
  return w.reduce((a, x) => a + x.count, 0) / w.reduce((a, x) => a + x.ms, 0);
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-slow-'));
  dir = join(root, 'c');
  const up = await trine(['up', '--nodes', '3', '--allow-inject', '--dir', dir], 90_000);
  if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
}, 120_000);

afterAll(async () => {
  if (existsSync(join(dir, 'run'))) await trine(['down', '--dir', dir]);
  killAll([...processesMentioning(root), ...[...taskPids].filter(alive)]);
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('trine inject slow', () => {
  it('slow t/0 --share 25: its own rate drops under half; heal: it runs again (never left in state T) and recovers', async () => {
    const { task, pid, node } = await startCounter();
    const before = await rate(task);
    const slow = await trine(['inject', 'slow', `${task}/0`, '--share', '25', '--dir', dir]);
    expect(slow.stderr).toBe('');
    expect(slow.code).toBe(0);
    expect(slow.stdout).toBe(`${task}/0 (pid ${pid} on ${node}) runs at 25 % CPU (stopped 75 ms of every 100) until \`trine inject heal ${task}/0\`\n`);
    expect(await statesOver(pid, 300)).toContain('T');
    const slowed = await rate(task);
    expect(slowed).toBeLessThan(before / 2);

    const heal = await trine(['inject', 'heal', `${task}/0`, '--dir', dir]);
    expect(heal.code).toBe(0);
    expect(heal.stdout).toBe(`${task}/0 healed on ${node}: runs at full speed again (was: 25 % CPU)\n`);
    expect(await statesOver(pid, 300)).not.toContain('T');
    const after = await rate(task);
    expect(after).toBeGreaterThan(slowed * 2);
    // Healed twice: nothing to undo, said so.
    const again = await trine(['inject', 'heal', `${task}/0`, '--dir', dir]);
    expect(again.stdout).toBe(`${task}/0 healed on ${node} (was: not slowed)\n`);
  }, 60_000);

  it('--for: the slowness ends by itself and leaves the process running', async () => {
    const task = (await view()).tasks.at(-1)?.id as string;
    const { pid, node } = (await view()).tasks.find((t) => t.id === task)?.procs[0] as { pid: number; node: string };
    const agent = `a${node.slice(1)}`;
    const before = await rate(task, 1_000);
    const slow = await trine(['inject', 'slow', `${task}/0`, '--share', '20', '--for', '1500', '--dir', dir]);
    expect(slow.code).toBe(0);
    expect(slow.stdout).toBe(`${task}/0 (pid ${pid} on ${node}) runs at 20 % CPU (stopped 80 ms of every 100) for 1500 ms, or until \`trine inject heal ${task}/0\`\n`);
    const slowed = await rate(task, 1_000);
    expect(slowed).toBeLessThan(before / 2);
    await waitFor(`${agent} ending the slowness of ${task}/0`, SOON_MS, () =>
      (logEvents(dir, agent).some((e) => e['event'] === 'inject.slow.end' && e['target'] === `${task}/0` && e['why'] === 'expired') ? true : undefined));
    expect(await statesOver(pid, 300)).not.toContain('T');
    expect(await rate(task, 1_000)).toBeGreaterThan(slowed * 2);
  }, 60_000);

  it("a node, --period 250: its task processes are slowed, its agent is not; trine down ends the slowness as the agent stops", async () => {
    const task = (await view()).tasks.at(-1)?.id as string;
    const { pid, node } = (await view()).tasks.find((t) => t.id === task)?.procs[0] as { pid: number; node: string };
    const agent = `a${node.slice(1)}`;
    const agentPid = Number(readFileSync(join(dir, 'run', `${agent}.agent-pid`), 'utf8').trim());
    const slow = await trine(['inject', 'slow', node, '--share', '10', '--period', '250', '--dir', dir]);
    expect(slow.code).toBe(0);
    expect(slow.stdout).toBe(`every task process of ${node} (1 now, and any it starts) runs at 10 % CPU (stopped 225 ms of every 250) until \`trine inject heal ${node}\`\n`);
    expect(await statesOver(pid, 300)).toContain('T');
    expect(await statesOver(agentPid, 300)).not.toContain('T');

    const down = await trine(['down', '--dir', dir]);
    expect(down.code).toBe(0);
    expect(logEvents(dir, agent).some((e) => e['event'] === 'inject.slow.end' && e['target'] === node && e['why'] === 'agent stopping')).toBe(true);
    expect(alive(pid)).toBe(false);
    expect(processesMentioning(root)).toEqual([]);
  }, 60_000);
});
