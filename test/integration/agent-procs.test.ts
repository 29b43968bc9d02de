// The agent's process driver with real processes (issue 3 item 2; spec §1.4, §6.3, §7): the
// real Spawner under the pure process table (src/daemon/proc-driver.ts ProcDriver), the procs file
// with start times, adoption by a second driver after a simulated agent restart (survivors
// adopted and monitored, the dead reported, orphans killed), `trine down`'s task sweep, and the
// keeper (src/daemon/keeper.ts) restarting a real `trine agent` that was killed or stopped
// heartbeating. Every process started is killed in afterEach, by process group. No wall-clock
// threshold: tests wait for events, with generous timeouts.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killAll, NODE, TRINE, WAIT } from './helpers.ts';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { stopTasks } from '../../cli/down.ts';
import {
  ADOPTED_EXIT, ADOPTED_EXIT_TERMINATED, EXITED_WHILE_DOWN, RESTARTED_WHILE_SPAWNING,
} from '../../src/core/agent-procs-adopt.ts';
import { recoveredProcs } from '../../src/core/agent-procs.ts';
import { procRecords } from '../../src/core/agent-procs-state.ts';
import type { AgentRequest, ProcReport, ProcSpawn } from '../../src/core/wire/messages.ts';
import { isSameProcess, procStartTime, readProcsFile } from '../../src/daemon/agent.ts';
import { ProcDriver } from '../../src/daemon/proc-driver.ts';
import { agentPidFile, readAgentPid } from '../../src/daemon/keeper.ts';
import {
  allocatePorts, clusterIds, generateClusterKeys, isClusterProcess, paths, planCluster, writeClusterConfig,
} from '../../src/io/cluster-dir.ts';
import { logPath } from '../../src/io/log.ts';

const TIMING = { taskTickMs: 50, connectTimeoutMs: 4000 };

let dir: string;
/** Every pid we learn of (task processes, agents, keepers): its group is killed afterwards. */
const pids = new Set<number>();
const drivers: ProcDriver[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'trine-agent-procs-'));
});

afterEach(() => {
  for (const d of drivers.splice(0)) d.stop();
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

function gone(pid: number): boolean {
  return procStartTime(pid) === null;
}

/** A driver on `dir` whose reports are collected. */
function driver(): { d: ProcDriver; reports: ProcReport[] } {
  const reports: ProcReport[] = [];
  const d = new ProcDriver({
    dir,
    id: 'a1',
    timing: TIMING,
    send: (request: AgentRequest) => {
      if (request.type !== 'proc.report') throw new Error(`unexpected request ${request.type}`);
      for (const report of request.reports) {
        reports.push(report);
        if (report.pid > 1) pids.add(report.pid);
      }
    },
    log: () => {},
  });
  drivers.push(d);
  return { d, reports };
}

function spawnCmd(task: string, vpid: number, script: string, over: Partial<ProcSpawn> = {}): ProcSpawn {
  return {
    type: 'proc.spawn', task, vpid, mode: 'plain', file: NODE, args: ['-e', script], cwd: dir, env: [['GREETING', 'hello']],
    size: 2, rank: vpid, restarted: false, endpoints: [{ vpid: 0, node: 'n1' }, { vpid: 1, node: 'n2' }], taskKey: new Uint8Array(32).fill(7), ...over,
  };
}

/** A process that runs until killed, and says so once its SIGTERM handler is in place. */
const SLEEPER = "process.on('SIGTERM', () => process.exit(0)); console.log('ready'); setInterval(() => {}, 1000);";
/** One that ignores SIGTERM (and says when it got one). */
const STUBBORN = "process.on('SIGTERM', () => console.log('got SIGTERM')); console.log('ready'); setInterval(() => {}, 1000);";

const output = (task: string, vpid: number): string => {
  try {
    return readFileSync(join(paths.taskLogs(dir), task, `${vpid}.out`), 'utf8');
  } catch {
    return '';
  }
};

const report = (reports: ProcReport[], task: string, vpid: number, kind: ProcReport['kind']) =>
  reports.find((r) => r.task === task && r.vpid === vpid && r.kind === kind);

async function waitReport(reports: ProcReport[], task: string, vpid: number, kind: ProcReport['kind']): Promise<ProcReport> {
  return vi.waitFor(() => {
    const r = report(reports, task, vpid, kind);
    if (r === undefined) throw new Error(`no ${kind} for ${task}/${vpid} yet: ${JSON.stringify(reports)}`);
    return r;
  }, WAIT);
}

const recorded = () => readProcsFile(paths.procsFile(dir, 'a1')).procs;

describe('ProcDriver with the real spawner', () => {
  it('a plain process gets the mapping in its environment; exit 0 → spawnSucceeded then terminatedNormally', async () => {
    const { d, reports } = driver();
    const script = "const e = process.env; console.log(JSON.stringify([e.GREETING, e.TRINE_TASK, e.TRINE_VPID, e.TRINE_SIZE, e.TRINE_RESTARTED, JSON.parse(e.TRINE_ENDPOINTS)]));";
    d.onCommand(spawnCmd('t1', 1, script));
    const ok = await waitReport(reports, 't1', 1, 'spawnSucceeded');
    const end = await waitReport(reports, 't1', 1, 'terminatedNormally');
    expect(end).toEqual({ task: 't1', vpid: 1, kind: 'terminatedNormally', pid: ok.pid, exitCode: 0, signal: null, reason: 'exited with code 0', endpoint: '' });
    expect(JSON.parse(output('t1', 1))).toEqual(['hello', 't1', '1', '2', '0', [{ vpid: 0, node: 'n1' }, { vpid: 1, node: 'n2' }]]);
    expect(recorded()).toEqual([]);
  });

  it('exit code 1 is terminatedAbnormally; a missing executable is spawnFailed with the spawner text', async () => {
    const { d, reports } = driver();
    d.onCommand(spawnCmd('t1', 0, 'process.exit(1)'));
    expect(await waitReport(reports, 't1', 0, 'terminatedAbnormally')).toMatchObject({ exitCode: 1, signal: null, reason: 'exited with code 1' });
    d.onCommand(spawnCmd('t2', 0, '', { file: join(dir, 'no-such-program') }));
    const failed = await waitReport(reports, 't2', 0, 'spawnFailed');
    expect(failed.reason).toBe(`spawn failed: ENOENT ${join(dir, 'no-such-program')} (executable or its interpreter not found)`);
    expect(failed.pid).toBe(0);
  });

  it('records each live process with its start time; terminate sends SIGTERM, then SIGKILL', async () => {
    const { d, reports } = driver();
    d.onCommand(spawnCmd('t1', 0, STUBBORN));
    const ok = await waitReport(reports, 't1', 0, 'spawnSucceeded');
    await vi.waitFor(() => expect(output('t1', 0)).toContain('ready'), WAIT);
    expect(recorded()).toEqual([{ task: 't1', vpid: 0, pid: ok.pid, startTime: procStartTime(ok.pid) }]);

    d.onCommand({ type: 'proc.terminate', task: 't1', vpid: 0 });
    await vi.waitFor(() => expect(output('t1', 0)).toContain('got SIGTERM'), WAIT);
    expect(report(reports, 't1', 0, 'terminatedAbnormally')).toBeUndefined();
    expect(gone(ok.pid)).toBe(false);

    d.onCommand({ type: 'proc.terminate', task: 't1', vpid: 0 });
    expect(await waitReport(reports, 't1', 0, 'terminatedAbnormally')).toMatchObject({ pid: ok.pid, signal: 'SIGKILL', reason: 'killed by SIGKILL' });
    expect(recorded()).toEqual([]);
  });

  it('the same proc.spawn twice starts one process', async () => {
    const { d, reports } = driver();
    d.onCommand(spawnCmd('t1', 0, SLEEPER));
    d.onCommand(spawnCmd('t1', 0, SLEEPER));
    await waitReport(reports, 't1', 0, 'spawnSucceeded');
    await vi.waitFor(() => expect(output('t1', 0)).toContain('ready'), WAIT);
    expect(output('t1', 0).match(/ready/g)).toHaveLength(1);
    expect(reports.filter((r) => r.kind === 'spawnSucceeded')).toHaveLength(1);
    expect(d.procs.entries.size).toBe(1);
  });

  it('a start time tells a live process from a reused pid', async () => {
    const { d, reports } = driver();
    d.onCommand(spawnCmd('t1', 0, SLEEPER));
    const { pid } = await waitReport(reports, 't1', 0, 'spawnSucceeded');
    const start = procStartTime(pid);
    expect(start).toMatch(/^[0-9]+$/);
    expect(isSameProcess(pid, start)).toBe(true);
    expect(isSameProcess(pid, `${start}0`)).toBe(false);
    expect(isSameProcess(pid, null)).toBe(false);
  });
});

describe('adoption after a simulated agent restart', () => {
  it('adopts survivors, reports the dead, kills orphans, then monitors the adopted', { timeout: 60_000 }, async () => {
    // The first incarnation starts four processes and "dies" (stops acting; its processes run on).
    const first = driver();
    for (const [task, vpid] of [['t1', 0], ['t1', 1], ['t2', 0], ['t9', 0]] as const) first.d.onCommand(spawnCmd(task, vpid, SLEEPER));
    const pidOf: Record<string, number> = {};
    for (const [task, vpid] of [['t1', 0], ['t1', 1], ['t2', 0], ['t9', 0]] as const) {
      pidOf[`${task}/${vpid}`] = (await waitReport(first.reports, task, vpid, 'spawnSucceeded')).pid;
    }
    await vi.waitFor(() => expect(recorded()).toHaveLength(4), WAIT);
    first.d.stop();
    const p = (k: string): number => pidOf[k] as number;

    // While the agent is down, t2/0 dies.
    process.kill(-p('t2/0'), 'SIGKILL');
    await vi.waitFor(() => expect(gone(p('t2/0'))).toBe(true), WAIT);

    // The next incarnation reads the procs file; the group lists what it believes runs here:
    // t1/1 never confirmed (pid 0), t3/0 was being spawned, t9/0 is not listed (an orphan).
    const second = driver();
    expect(recoveredProcs(second.d.procs)).toHaveLength(4);
    second.d.start();
    second.d.onCommand({
      type: 'procs.adopt',
      procs: [
        { task: 't1', vpid: 0, pid: p('t1/0'), linked: false },
        { task: 't1', vpid: 1, pid: 0, linked: false },
        { task: 't2', vpid: 0, pid: p('t2/0'), linked: false },
        { task: 't3', vpid: 0, pid: 0, linked: false },
      ],
    });
    expect(await waitReport(second.reports, 't1', 1, 'spawnSucceeded')).toMatchObject({ pid: p('t1/1') });
    expect(await waitReport(second.reports, 't2', 0, 'terminatedAbnormally')).toMatchObject({ pid: p('t2/0'), exitCode: null, reason: EXITED_WHILE_DOWN });
    expect(await waitReport(second.reports, 't3', 0, 'spawnFailed')).toMatchObject({ pid: 0, reason: RESTARTED_WHILE_SPAWNING });
    await vi.waitFor(() => expect(gone(p('t9/0'))).toBe(true), WAIT); // the orphan
    expect(gone(p('t1/0'))).toBe(false);
    expect(gone(p('t1/1'))).toBe(false);
    expect(recorded().map((r) => [r.task, r.vpid, r.pid])).toEqual([['t1', 0, p('t1/0')], ['t1', 1, p('t1/1')]]);

    // An adopted process is not our child: its end is found by polling, exit status unknown.
    process.kill(-p('t1/0'), 'SIGKILL');
    expect(await waitReport(second.reports, 't1', 0, 'terminatedAbnormally')).toMatchObject({ exitCode: null, signal: null, reason: ADOPTED_EXIT });

    // Terminating an adopted process on command: SIGTERM reaches it, its end is still abnormal.
    second.d.onCommand({ type: 'proc.terminate', task: 't1', vpid: 1 });
    expect(await waitReport(second.reports, 't1', 1, 'terminatedAbnormally')).toMatchObject({ exitCode: null, reason: ADOPTED_EXIT_TERMINATED });
    expect(gone(p('t1/1'))).toBe(true);
    await vi.waitFor(() => expect(recorded()).toEqual([]), WAIT);
    // Each process's end was reported exactly once across both incarnations.
    const ends = [...first.reports, ...second.reports].filter((r) => r.kind !== 'spawnSucceeded').map((r) => `${r.task}/${r.vpid}`);
    expect(ends.sort()).toEqual(['t1/0', 't1/1', 't2/0', 't3/0']);
  });

  it('a process forked in the same moment its agent dies is on record, so the next incarnation adopts it', { timeout: 60_000 }, async () => {
    const first = driver();
    first.d.onCommand(spawnCmd('t5', 0, SLEEPER));
    // Same event-loop turn: the spawned event has not come yet, yet the fork is on record.
    const onRecord = recorded();
    expect(onRecord.map((r) => [r.task, r.vpid])).toEqual([['t5', 0]]);
    const pid = (onRecord[0] as { pid: number }).pid;
    pids.add(pid);
    first.d.stop(); // the agent dies before it could tell the group
    const second = driver();
    second.d.start();
    second.d.onCommand({ type: 'procs.adopt', procs: [{ task: 't5', vpid: 0, pid: 0, linked: false }] });
    expect(await waitReport(second.reports, 't5', 0, 'spawnSucceeded')).toMatchObject({ pid });
    expect(gone(pid)).toBe(false);
    second.d.onCommand({ type: 'proc.terminate', task: 't5', vpid: 0 });
    await waitReport(second.reports, 't5', 0, 'terminatedAbnormally');
    expect(first.reports).toEqual([]);
  });

  it('`trine down` stops every recorded task process, by process group, and removes the procs file', async () => {
    const { d, reports } = driver();
    // A task process with a child of its own: the whole group must go.
    const parent = `${SLEEPER} require('node:child_process').spawn(process.execPath, ['-e', 'console.log(process.pid); setInterval(() => {}, 1000)'], { stdio: ['ignore', 'inherit', 'inherit'] });`;
    d.onCommand(spawnCmd('t1', 0, parent));
    d.onCommand(spawnCmd('t1', 1, STUBBORN));
    const a = (await waitReport(reports, 't1', 0, 'spawnSucceeded')).pid;
    const b = (await waitReport(reports, 't1', 1, 'spawnSucceeded')).pid;
    const grandchild = await vi.waitFor(() => {
      const m = output('t1', 0).match(/^([0-9]+)$/m);
      if (m === null) throw new Error('no grandchild yet');
      return Number(m[1]);
    }, WAIT);
    pids.add(grandchild);
    await vi.waitFor(() => expect(output('t1', 1)).toContain('ready'), WAIT);
    d.stop(); // the agent is gone; the processes are not

    const r = await stopTasks(dir);
    expect(r).toEqual({ stopped: 2, remaining: [] });
    expect([a, b, grandchild].filter((pid) => !gone(pid))).toEqual([]);
    expect(existsSync(paths.procsFile(dir, 'a1'))).toBe(false);
  });
});

// ---- the keeper with a real `trine agent` ----------------------------------------------------------

/** A cluster dir with config and keys; nothing runs (the agent dials replicas that never answer,
 *  which is all a keeper test needs). */
async function makeCluster(): Promise<void> {
  const ids = clusterIds(3);
  const keys = generateClusterKeys(dir, ids.all);
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: await allocatePorts(ids.listeners.length) }, keys));
}

function startKeeper(id = 'a1'): { pid: number; exited: Promise<{ code: number | null; stderr: string }> } {
  let stderr = '';
  const child = spawn(NODE, [TRINE, 'keeper', '--dir', dir, '--id', id], { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((r) => child.on('exit', (code) => r({ code, stderr })));
  if (child.pid === undefined) throw new Error('keeper did not start');
  pids.add(child.pid);
  return { pid: child.pid, exited };
}

/** The running agent's pid once it differs from `not` and the process is this cluster's agent. */
async function nextAgent(not: number | null): Promise<number> {
  return vi.waitFor(() => {
    const pid = readAgentPid(dir, 'a1');
    if (pid === null || pid === not || !isClusterProcess(pid, dir, 'a1')) throw new Error(`no new agent yet (${String(pid)})`);
    pids.add(pid);
    return pid;
  }, { timeout: 60_000, interval: 50 });
}

/** Keeper log events. */
const keeperEvents = (): { event: string; reason?: string }[] => {
  try {
    return readFileSync(logPath(dir, 'a1-keeper'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string });
  } catch {
    return [];
  }
};

/** The agent `pid` is up: its runtime logged that it listens (its heartbeats began before). */
async function agentRunning(pid: number): Promise<void> {
  await vi.waitFor(() => {
    const lines = existsSync(logPath(dir, 'a1')) ? readFileSync(logPath(dir, 'a1'), 'utf8').split('\n') : [];
    expect(lines.some((l) => l.includes(`"pid":${pid},`) && l.includes('"event":"listening"'))).toBe(true);
  }, { timeout: 60_000, interval: 50 });
}

describe('keeper (spec §1.4 Agent-Keeper)', () => {
  it('restarts a killed agent and a hung one, and stops its agent on SIGTERM', { timeout: 180_000 }, async () => {
    await makeCluster();
    const keeper = startKeeper();
    const first = await nextAgent(null);

    process.kill(first, 'SIGKILL');
    const second = await nextAgent(first);
    expect(keeperEvents().filter((e) => e.event === 'agent.restart').map((e) => e.reason)).toEqual(['exited']);

    // Hung: its event loop stops (SIGSTOP), so its heartbeats stop; the keeper SIGKILLs it.
    await agentRunning(second);
    process.kill(second, 'SIGSTOP');
    const third = await nextAgent(second);
    expect(gone(second)).toBe(true);
    expect(keeperEvents().some((e) => e.event === 'agent.unresponsive')).toBe(true);
    expect(keeperEvents().filter((e) => e.event === 'agent.restart').map((e) => e.reason)).toEqual(['exited', 'heartbeats stopped']);

    process.kill(keeper.pid, 'SIGTERM');
    expect((await keeper.exited).code).toBe(0);
    await vi.waitFor(() => expect(gone(third)).toBe(true), WAIT);
    expect(existsSync(agentPidFile(dir, 'a1'))).toBe(false);
  });

  it('refuses to keep something that is not an agent: one line, exit 2', async () => {
    await makeCluster();
    const r = await startKeeper('r1').exited;
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/r1 is a replica, not an agent/);
  });
});
