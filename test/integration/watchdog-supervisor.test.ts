// The watchdog's supervisor with real processes (issue 14 item 4; src/daemon/supervisor.ts):
// `trine scc` runs the watchdog as its child and
//   - replaces a killed watchdog at once, and tells the new one how the last ended (status);
//   - replaces a hung one (SIGSTOP: its heartbeats stop) after WATCHDOG_HEARTBEAT_TIMEOUT_MS;
//   - gives up with the same code when the watchdog cannot start as configured (exit 2);
//   - on SIGTERM stops the watchdog and exits 0, leaving no record;
//   - when SIGKILLed leaves its watchdog running (the trusted component outlives its
//     supervisor), which the next supervisor stops before starting its own.
// No cluster runs beside the watchdog (it listens for replicas that never come). Every process
// started is killed in afterEach, by process group. No wall-clock threshold: tests wait for
// events, with generous timeouts.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { allocatePorts, clusterIds, generateClusterKeys, isAlive, paths, planCluster, writeClusterConfig } from '../../src/io/cluster-dir.ts';
import { logPath } from '../../src/io/log.ts';
import { readSupervisedPid, supervisedPidFile } from '../../src/io/run-records.ts';
import { WATCHDOG_HEARTBEAT_TIMEOUT_MS } from '../../src/daemon/supervisor.ts';
import { EXIT_CONFIG } from '../../src/daemon/run-core.ts';
import { killAll, NODE, TRINE } from './helpers.ts';

/** Loading a TypeScript process through tsx on a busy host. */
const LOAD_WAIT = { timeout: 60_000, interval: 50 };

let dir: string;
const pids = new Set<number>();

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'trine-supervisor-'));
  const ids = clusterIds(3);
  const keys = generateClusterKeys(dir, ids.all);
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: await allocatePorts(ids.listeners.length) }, keys));
});

afterEach(() => {
  for (const id of ['scc']) {
    const pid = readSupervisedPid(dir, id);
    if (pid !== null) pids.add(pid);
  }
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

function startSupervisor(): { pid: number; exited: Promise<number | null> } {
  const child = spawn(NODE, [TRINE, 'scc', '--dir', dir], { detached: true, stdio: 'ignore' });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  if (child.pid === undefined) throw new Error('trine scc did not start');
  pids.add(child.pid);
  return { pid: child.pid, exited };
}

const lines = (id: string): Record<string, unknown>[] =>
  existsSync(logPath(dir, id)) ? readFileSync(logPath(dir, id), 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>) : [];

/** The running watchdog, once it differs from `not` and logged that it listens. */
async function runningWatchdog(not: number | null): Promise<number> {
  return vi.waitFor(() => {
    const pid = readSupervisedPid(dir, 'scc');
    if (pid === null || pid === not || !lines('scc').some((e) => e['pid'] === pid && e['event'] === 'listening')) throw new Error('no new watchdog yet');
    pids.add(pid);
    return pid;
  }, LOAD_WAIT);
}

const restarts = () => lines('scc-supervisor').filter((e) => e['event'] === 'child.restart');

describe('issue 14 item 4: the watchdog has a supervisor', () => {
  it('a killed watchdog is replaced at once; SIGTERM to the supervisor stops it and leaves no record', { timeout: 120_000 }, async () => {
    const supervisor = startSupervisor();
    const first = await runningWatchdog(null);
    process.kill(first, 'SIGKILL');
    const second = await runningWatchdog(first);
    expect(restarts().map((e) => [e['reason'], e['delayMs'], e['restarts']])).toEqual([['killed by SIGKILL', 0, 1]]);
    // The new watchdog is a new incarnation, and knows it was restarted (for `trine status`).
    const starts = lines('scc').filter((e) => e['event'] === 'start');
    expect(starts).toHaveLength(2);
    expect(Number(starts[1]?.['inc'])).toBeGreaterThan(Number(starts[0]?.['inc']));

    process.kill(supervisor.pid, 'SIGTERM');
    expect(await supervisor.exited).toBe(0);
    expect(isAlive(second)).toBe(false);
    expect(existsSync(supervisedPidFile(dir, 'scc'))).toBe(false);
    // The watchdog exits 0 on the SIGTERM; one that has not within WATCHDOG_STOP_GRACE_MS (a
    // loaded machine: CI runs this beside the simulator's slices) is SIGKILLed, which the
    // supervisor logs, and then it logs no exit of its own.
    const killed = lines('scc-supervisor').some((e) => e['event'] === 'child.kill' && e['childPid'] === second);
    expect(lines('scc').filter((e) => e['event'] === 'exit').map((e) => e['code'])).toEqual(killed ? [] : [0]);
  });

  it('a hung watchdog (SIGSTOP) is SIGKILLed once its heartbeats have stopped for WATCHDOG_HEARTBEAT_TIMEOUT_MS, and replaced', { timeout: 120_000 }, async () => {
    startSupervisor();
    const hung = await runningWatchdog(null);
    process.kill(hung, 'SIGSTOP');
    await runningWatchdog(hung);
    expect(isAlive(hung)).toBe(false);
    // Killed only after the long timeout: a watchdog stalled for a second or two is left alone.
    // The supervisor kills once the silence exceeds the timeout and logs it rounded to whole
    // milliseconds, so 10000.3 ms is logged as 10000.
    const unresponsive = lines('scc-supervisor').find((e) => e['event'] === 'child.unresponsive' && e['childPid'] === hung);
    expect(unresponsive?.['silentMs']).toBeGreaterThanOrEqual(WATCHDOG_HEARTBEAT_TIMEOUT_MS);
    expect(restarts().map((e) => e['reason'])).toEqual(['heartbeats stopped']);
  });

  it('a watchdog that cannot start as configured (exit 2: its key is missing) is not restarted: the supervisor exits 2', { timeout: 120_000 }, async () => {
    rmSync(paths.keyFile(dir, 'scc'));
    const supervisor = startSupervisor();
    expect(await supervisor.exited).toBe(EXIT_CONFIG);
    expect(restarts()).toEqual([]);
    expect(lines('scc-supervisor').find((e) => e['event'] === 'exit')?.['code']).toBe(EXIT_CONFIG);
  });

  it('a watchdog whose supervisor is SIGKILLed runs on; the next supervisor stops it before it starts its own', { timeout: 120_000 }, async () => {
    const supervisor = startSupervisor();
    const orphan = await runningWatchdog(null);
    process.kill(supervisor.pid, 'SIGKILL');
    await supervisor.exited;
    // The trusted component outlives its supervisor: losing the supervisor is no reason to stop.
    await new Promise((r) => setTimeout(r, 500));
    expect(isAlive(orphan)).toBe(true);

    startSupervisor();
    await runningWatchdog(orphan);
    expect(isAlive(orphan)).toBe(false);
    expect(lines('scc-supervisor').some((e) => e['event'] === 'watchdog.stale' && e['pid'] === orphan)).toBe(true);
  });
});
