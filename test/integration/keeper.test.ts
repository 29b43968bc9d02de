// The keeper's warm standby and the local node reset driver with real processes (issue 3
// item 4; spec §1.4 Agent-Keeper, §1.6 rule 1; PROTOCOL §8.4, §8.6):
//   - a standby `trine agent` has no identity before `go` (no log line, incarnation or TCP
//     socket of its own) and becomes the agent the moment the active one dies; with metrics on,
//     the agent's endpoint counts its keeper's restarts (trine_keeper_restarts_total, which
//     `go` carries, docs/OPERATIONS.md §9) and shows its protector's series;
//   - a standby whose keeper is SIGKILLed exits by itself; a new keeper kills the agent left
//     behind; SIGTERM to a keeper leaves neither agent nor standby;
//   - LocalResetDriver kills a node's replica, keeper, agent, standby and recorded task processes
//     (a recorded pid whose start time differs is someone else's: spared) and starts a keeper
//     again; the `log` and `command` drivers and cluster.json's `resetDriver`.
// No cluster runs (the agent dials replicas that are not there, which a keeper test does not
// need). Every process started is killed in afterEach, by process group. No wall-clock
// threshold: tests wait for events, with generous timeouts.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killAll, NODE, standIn, TRINE, WAIT } from './helpers.ts';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  allocatePorts, clusterIds, generateClusterKeys, isAlive, loadCluster, paths, planCluster, writeClusterConfig, writePidFile,
} from '../../src/io/cluster-dir.ts';
import { logPath } from '../../src/io/log.ts';
import { readMetricsPort, writeMetricsPorts } from '../../src/io/metrics-ports.ts';
import { CommandResetDriver, LocalResetDriver, LogResetDriver, readResetDriverKind, ResetError, type ResetLog } from '../../src/io/reset-driver.ts';
import {
  keeperChildPidFile, procStartTime, readKeeperChildPid, writeKeeperChildPid, writeProcsFile,
} from '../../src/io/run-records.ts';
import { parseExposition, samples, type Exposition } from './prom-text.ts';

/** Loading a TypeScript process through tsx on a busy host. */
const LOAD_WAIT = { timeout: 60_000, interval: 50 };

let dir: string;
/** Every pid we learn of: its group is killed afterwards. */
const pids = new Set<number>();

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'trine-keeper-'));
  const ids = clusterIds(3);
  const keys = generateClusterKeys(dir, ids.all);
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: await allocatePorts(ids.listeners.length) }, keys));
});

afterEach(() => {
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

function startKeeper(id = 'a1'): { pid: number; exited: Promise<number | null> } {
  const child = spawn(NODE, [TRINE, 'keeper', '--dir', dir, '--id', id], { detached: true, stdio: 'ignore' });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  if (child.pid === undefined) throw new Error('keeper did not start');
  pids.add(child.pid);
  return { pid: child.pid, exited };
}

/** A process that sleeps, with `args` on its command line (so it passes for a cluster process
 *  of `dir`), leading its own process group like every daemon and task process. */
const fake = (...args: string[]): number => standIn(pids, ...args);

const lines = (id: string): Record<string, unknown>[] =>
  existsSync(logPath(dir, id)) ? readFileSync(logPath(dir, id), 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>) : [];

/** The loaded standby's pid once its keeper logged it ready. */
async function readyStandby(id = 'a1'): Promise<number> {
  return vi.waitFor(() => {
    const pid = readKeeperChildPid(dir, id, 'standby');
    if (pid === null || !lines(`${id}-keeper`).some((e) => e['event'] === 'standby.ready' && e['standbyPid'] === pid)) throw new Error('no standby ready yet');
    pids.add(pid);
    return pid;
  }, LOAD_WAIT);
}

/** The active agent once it differs from `not` and logged that it runs. */
async function runningAgent(not: number | null, id = 'a1'): Promise<number> {
  return vi.waitFor(() => {
    const pid = readKeeperChildPid(dir, id, 'agent');
    if (pid === null || pid === not || !lines(id).some((e) => e['pid'] === pid && e['event'] === 'listening')) throw new Error('no new agent yet');
    pids.add(pid);
    return pid;
  }, LOAD_WAIT);
}

/** GET /metrics of agent `id` at the port it recorded, parsed; throws until it answers. */
async function scrapeAgent(id = 'a1'): Promise<Exposition> {
  const port = readMetricsPort(dir, id);
  if (port === null) throw new Error(`${id} recorded no metrics port yet`);
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  const parsed = parseExposition(await res.text());
  if (!parsed.ok) throw new Error(`exposition does not parse: ${parsed.code} line ${parsed.line}: ${parsed.detail}`);
  return parsed.value;
}

/** The agent's trine_keeper_restarts_total by reason, once it serves them. */
async function keeperRestarts(): Promise<Record<string, number>> {
  const e = await scrapeAgent();
  // Its protector listens (asynchronously): its labelled series are there once it does.
  expect(samples(e, 'trine_protector_stored_bytes').map((x) => x.labels['kind']).sort()).toEqual(['checkpoint', 'log']);
  return Object.fromEntries(samples(e, 'trine_keeper_restarts_total').map((x) => [x.labels['reason'], x.value]));
}

/** Inodes of the TCP sockets `pid` holds (from its fds and the kernel's socket tables). */
function tcpSocketsOf(pid: number): string[] {
  const tcp = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(table)) continue;
    for (const row of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const inode = row.trim().split(/\s+/)[9];
      if (inode !== undefined) tcp.add(inode);
    }
  }
  return readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
    try {
      const m = /^socket:\[([0-9]+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      return m?.[1] !== undefined && tcp.has(m[1]) ? [m[1]] : [];
    } catch {
      return [];
    }
  });
}

describe('keeper warm standby (spec §1.4)', () => {
  it('a standby has no identity before go, and becomes the agent the moment the active one dies; the agent\'s metrics count the restarts, by reason', { timeout: 120_000 }, async () => {
    // Metrics on for a1 (a kernel-picked port; if it is taken by then, the agent serves on
    // another and records it in run/a1.metrics-port, which the scrape reads).
    const [metricsPort] = await allocatePorts(1);
    writeMetricsPorts(dir, new Map([['a1', metricsPort as number]]));
    startKeeper();
    const first = await runningAgent(null);
    expect(await vi.waitFor(keeperRestarts, LOAD_WAIT)).toEqual({ exit: 0, hang: 0 });
    const standby = await readyStandby();
    expect(standby).not.toBe(first);
    const inc = readFileSync(paths.incFile(dir, 'a1'), 'utf8');
    // Loaded and waiting: no line in the agent's log, no incarnation taken, no connection.
    expect(lines('a1').some((e) => e['pid'] === standby)).toBe(false);
    expect(lines('a1').filter((e) => e['event'] === 'start').map((e) => `${String(e['inc'])}\n`)).toEqual([inc]);
    expect(tcpSocketsOf(standby)).toEqual([]);

    process.kill(first, 'SIGKILL');
    const second = await runningAgent(first);
    expect(second).toBe(standby);
    expect(Number(readFileSync(paths.incFile(dir, 'a1'), 'utf8'))).toBeGreaterThan(Number(inc));
    const started = lines('a1-keeper').find((e) => e['event'] === 'agent.start' && e['agentPid'] === standby);
    expect(started?.['replaceMs']).toEqual(expect.any(Number));
    expect(lines('a1-keeper').filter((e) => e['event'] === 'agent.restart').map((e) => e['reason'])).toEqual(['exited']);
    // The promoted agent serves its keeper's count, its own promotion included.
    await vi.waitFor(async () => expect(await keeperRestarts()).toEqual({ exit: 1, hang: 0 }), LOAD_WAIT);
    // And a new standby is loaded behind it.
    const third = await readyStandby();
    expect(third).not.toBe(standby);

    // A hung agent (stopped: no heartbeats) is killed and replaced: counted as a hang.
    process.kill(second, 'SIGSTOP');
    expect(await runningAgent(second)).toBe(third);
    await vi.waitFor(async () => expect(await keeperRestarts()).toEqual({ exit: 1, hang: 1 }), LOAD_WAIT);
    expect(lines('a1-keeper').filter((e) => e['event'] === 'agent.restart').map((e) => e['reason'])).toEqual(['exited', 'heartbeats stopped']);
  });

  it('a standby whose keeper is SIGKILLed exits by itself; the next keeper kills the agent left behind; SIGTERM leaves nothing', { timeout: 180_000 }, async () => {
    const keeper = startKeeper();
    const orphan = await runningAgent(null);
    const standby = await readyStandby();
    process.kill(keeper.pid, 'SIGKILL');
    await vi.waitFor(() => expect(isAlive(standby)).toBe(false), WAIT);
    expect(isAlive(orphan)).toBe(true);

    const next = startKeeper();
    const agent = await runningAgent(orphan);
    expect(isAlive(orphan)).toBe(false);
    expect(lines('a1-keeper').some((e) => e['event'] === 'agent.stale' && e['pid'] === orphan)).toBe(true);
    const nextStandby = await readyStandby();

    process.kill(next.pid, 'SIGTERM');
    expect(await next.exited).toBe(0);
    expect(isAlive(agent)).toBe(false);
    expect(isAlive(nextStandby)).toBe(false);
    expect(existsSync(keeperChildPidFile(dir, 'a1', 'agent'))).toBe(false);
    expect(existsSync(keeperChildPidFile(dir, 'a1', 'standby'))).toBe(false);
  });
});

describe('node reset drivers (PROTOCOL §8.4 step 5)', () => {
  const collect = (): { log: ResetLog; events: { event: string; fields: Record<string, unknown> }[] } => {
    const events: { event: string; fields: Record<string, unknown> }[] = [];
    return { events, log: (_level, event, fields) => events.push({ event, fields }) };
  };

  it('local: kills the replica, keeper, agent, standby and recorded task processes of the node (a power cycle takes the whole node), starts a keeper only', async () => {
    const keeper = fake('keeper', '--dir', dir, '--id', 'a1');
    const agent = fake('agent', '--dir', dir, '--id', 'a1');
    const standby = fake('agent', '--dir', dir, '--id', 'a1');
    const replica = fake('manager', '--dir', dir, '--id', 'r1');
    const task = fake('task');
    const stranger = fake('stranger');
    await vi.waitFor(() => expect([task, stranger].map(procStartTime)).not.toContain(null), WAIT);
    writePidFile(dir, 'a1', keeper);
    writePidFile(dir, 'r1', replica);
    writeKeeperChildPid(dir, 'a1', 'agent', agent);
    writeKeeperChildPid(dir, 'a1', 'standby', standby);
    // The stranger's pid recorded with another start time: a reused pid, not a task process.
    writeProcsFile(paths.procsFile(dir, 'a1'), 'a1', [
      { task: 't1', vpid: 0, pid: task, startTime: procStartTime(task) },
      { task: 't1', vpid: 1, pid: stranger, startTime: `${procStartTime(stranger) ?? ''}0` },
    ]);
    const started: string[] = [];
    const { log, events } = collect();
    const driver = new LocalResetDriver(dir, {
      config: loadCluster(dir).config, log, startKeeper: (id) => {
        started.push(id);
        return 4242;
      },
    });

    await driver.reset('n1');
    for (const pid of [keeper, agent, standby, task, replica]) expect(isAlive(pid)).toBe(false);
    expect(isAlive(stranger)).toBe(true);
    expect(started).toEqual(['a1']);
    for (const path of [paths.pidFile(dir, 'a1'), keeperChildPidFile(dir, 'a1', 'agent'), keeperChildPidFile(dir, 'a1', 'standby'), paths.procsFile(dir, 'a1')]) {
      expect(existsSync(path)).toBe(false);
    }
    const off = events.find((e) => e.event === 'reset.powered-off');
    expect(off?.fields['kept']).toEqual([]);
    expect(off?.fields['killed']).toHaveLength(5);
    expect(events.map((e) => e.event)).toEqual(['reset.powered-off', 'reset.keeper-started']);
  });

  it('local: a node with nothing running gets its keeper started; a stopping watchdog starts none; an unknown node is refused', async () => {
    const started: string[] = [];
    const stopping = new AbortController();
    const { log, events } = collect();
    const driver = new LocalResetDriver(dir, {
      config: loadCluster(dir).config, log, stopping: stopping.signal, startKeeper: (id) => {
        started.push(id);
        return 4242;
      },
    });
    await driver.reset('n2');
    expect(started).toEqual(['a2']);
    stopping.abort();
    await driver.reset('n3');
    expect(started).toEqual(['a2']);
    expect(events.map((e) => e.event)).toEqual(['reset.powered-off', 'reset.keeper-started', 'reset.powered-off', 'reset.not-restarted']);
    await expect(driver.reset('n9')).rejects.toSatisfy((e: unknown) => e instanceof ResetError && e.code === 'RESET_UNKNOWN_NODE');
  });

  it('log: only logs; cluster.json chooses the driver, local by default', async () => {
    const { log, events } = collect();
    await new LogResetDriver(log).reset('n2');
    expect(events).toEqual([{ event: 'reset.logged', fields: { node: 'n2', driver: 'log' } }]);

    const config = paths.config(dir);
    expect(readResetDriverKind(config)).toEqual({ ok: true, value: 'local' });
    const json = JSON.parse(readFileSync(config, 'utf8')) as Record<string, unknown>;
    writeFileSync(config, JSON.stringify({ ...json, resetDriver: 'log' }));
    expect(readResetDriverKind(config)).toEqual({ ok: true, value: 'log' });
    writeFileSync(config, JSON.stringify({ ...json, resetDriver: 'reboot' }));
    const bad = readResetDriverKind(config);
    expect(bad.ok).toBe(false);
    expect(bad.ok ? '' : bad.detail).toMatch(/"resetDriver" must be one of "local", "log", "command", got "reboot"/);
    // Every daemon refuses it too: the cluster document is checked whole.
    expect(() => loadCluster(dir)).toThrow(/"resetDriver" must be "local", "log" or "command"/);
    writeFileSync(config, JSON.stringify({ ...json, resetDriver: 'command' }));
    expect(() => loadCluster(dir)).toThrow(/"resetDriver": "command" needs a "resetCommand"/);
  });

  it('command: runs the configured command without a shell, {node} and {address} replaced and in the environment; a failure is RESET_COMMAND_FAILED with its stderr', async () => {
    const { log, events } = collect();
    const out = join(dir, 'reset-command.out');
    const script = 'require("fs").writeFileSync(process.argv[1], JSON.stringify([process.argv.slice(2), process.env.TRINE_RESET_NODE, process.env.TRINE_RESET_ADDRESS]))';
    const driver = new CommandResetDriver({ command: [process.execPath, '-e', script, out, '{node}', 'at={address}', '$(id)'], addresses: { n2: '10.0.0.12' }, log });
    await driver.reset('n2');
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual([['n2', 'at=10.0.0.12', '$(id)'], 'n2', '10.0.0.12']);
    expect(events.map((e) => e.event)).toEqual(['reset.command']);
    await expect(driver.reset('n9')).rejects.toSatisfy((e: unknown) => e instanceof ResetError && e.code === 'RESET_UNKNOWN_NODE');
    const failing = new CommandResetDriver({ command: [process.execPath, '-e', 'console.error("ipmi: no route"); process.exit(3)'], addresses: { n2: '10.0.0.12' }, log });
    await expect(failing.reset('n2')).rejects.toSatisfy((e: unknown) =>
      e instanceof ResetError && e.code === 'RESET_COMMAND_FAILED' && /exited with code 3: ipmi: no route/.test(e.message));
    const hanging = new CommandResetDriver({ command: [process.execPath, '-e', 'setTimeout(() => {}, 60000)'], addresses: { n2: '10.0.0.12' }, log, timeoutMs: 300 });
    await expect(hanging.reset('n2')).rejects.toSatisfy((e: unknown) => e instanceof ResetError && /was killed after 300 ms/.test(e.message));
  });
});
