// The agent's warm standby replica (PROTOCOL §10.6; src/daemon/replica-standby.ts) with real
// processes: `trine manager --standby r4 r5` loads, says it is ready and has no identity until
// `go`; promoted, it becomes the named spare at once (its pid file, its log, a command line the
// pid-file checks recognise as that replica's) and the next standby is loaded; a standby that
// dies is replaced; stop() leaves none. No cluster runs: the promoted replica joins a group that
// is not there, which is enough to see it start. Every process is killed in afterEach.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  allocatePorts, clusterIds, generateClusterKeys, isAlive, isClusterProcess, paths, planCluster, readPidFiles, writeClusterConfig, writePidFile,
} from '../../src/io/cluster-dir.ts';
import { logPath } from '../../src/io/log.ts';
import { ReplicaStandby } from '../../src/daemon/replica-standby.ts';
import { killAll, NODE, TRINE } from './helpers.ts';

const LOAD_WAIT = { timeout: 60_000, interval: 50 };
let dir: string;
const pids = new Set<number>();
let standby: ReplicaStandby | null = null;
const events: { event: string; fields: Record<string, unknown> }[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'trine-replica-standby-'));
  const ids = clusterIds(3);
  const keys = generateClusterKeys(dir, ids.all);
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: await allocatePorts(ids.listeners.length) }, keys));
  events.length = 0;
});

afterEach(() => {
  standby?.stop();
  standby = null;
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

function make(delayMs = 0): ReplicaStandby {
  standby = new ReplicaStandby({
    delayMs,
    spawn: () => {
      const child = spawn(NODE, [TRINE, 'manager', '--dir', dir, '--standby', 'r4', 'r5'], { detached: true, stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
      if (child.pid !== undefined) pids.add(child.pid);
      return child;
    },
    writePid: (id, pid) => writePidFile(dir, id, pid),
    log: (_level, event, fields) => events.push({ event, fields }),
  });
  return standby;
}

const readyPid = (): Promise<number> => vi.waitFor(() => {
  const ready = events.filter((e) => e.event === 'replica.standby.ready').at(-1);
  if (ready === undefined) throw new Error('no standby ready yet');
  return ready.fields['standbyPid'] as number;
}, LOAD_WAIT);

const logLines = (id: string): Record<string, unknown>[] =>
  existsSync(logPath(dir, id)) ? readFileSync(logPath(dir, id), 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>) : [];

describe('warm standby replica (PROTOCOL §10.6)', () => {
  it('is nobody until promoted, then becomes the named spare at once; the next standby follows', async () => {
    const s = make();
    expect(s.promote('r4', { view: 1, primary: 'r1', replicas: ['r1', 'r2'] })).toBeNull(); // nothing loaded yet: the caller starts cold
    s.start();
    const pid = await readyPid();
    // Loaded, with no identity: no log of its own, no pid file.
    expect(existsSync(logPath(dir, 'r4'))).toBe(false);
    expect(readPidFiles(dir).some((p) => p.id === 'r4')).toBe(false);

    expect(s.promote('r4', { view: 1, primary: 'r1', replicas: ['r1', 'r2'] })).toBe(pid);
    expect(readPidFiles(dir).find((p) => p.id === 'r4')?.pid).toBe(pid);
    // `trine down`, kill-replica and the reset driver find it as r4's process.
    expect(isClusterProcess(pid, dir, 'r4')).toBe(true);
    const start = await vi.waitFor(() => {
      const line = logLines('r4').find((l) => l['event'] === 'start');
      if (line === undefined) throw new Error('r4 has not started');
      return line;
    }, LOAD_WAIT);
    expect(start).toMatchObject({ kind: 'replica', pid });
    // And the next standby loads.
    await vi.waitFor(() => {
      if (events.filter((e) => e.event === 'replica.standby.ready').length < 2) throw new Error('no second standby');
    }, LOAD_WAIT);
    expect(isAlive(pid)).toBe(true);
  });

  it('a standby that dies is loaded again; stop() leaves none behind', async () => {
    const s = make();
    s.start();
    const first = await readyPid();
    process.kill(first, 'SIGKILL');
    await vi.waitFor(() => {
      if (!events.some((e) => e.event === 'replica.standby.exited')) throw new Error('exit not seen');
    }, LOAD_WAIT);
    // It reloads after ten delays (0 here).
    const second = await vi.waitFor(() => {
      const p = events.filter((e) => e.event === 'replica.standby.ready').map((e) => e.fields['standbyPid'] as number).find((x) => x !== first);
      if (p === undefined) throw new Error('no new standby yet');
      return p;
    }, LOAD_WAIT);
    s.stop();
    await vi.waitFor(() => {
      if (isAlive(second)) throw new Error('standby still alive');
    }, LOAD_WAIT);
    expect(existsSync(paths.pidFile(dir, 'r4'))).toBe(false);
  });

  it('`trine manager --standby` without an agent\'s channel refuses with a clear error', async () => {
    const child = spawn(NODE, [TRINE, 'manager', '--dir', dir, '--standby', 'r4'], { stdio: ['ignore', 'ignore', 'pipe'] });
    if (child.pid !== undefined) pids.add(child.pid);
    let err = '';
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    expect(code).not.toBe(0);
    expect(err).toMatch(/--standby needs the IPC channel/);
  });
});
