// The watchdog's cluster reset on a local cluster (spec §1.6 rules 2 and 3; PROTOCOL §10.9), its
// steps with stand-in processes (src/io/reset-driver.ts resetLocalCluster):
//   - every process of the cluster but the watchdog is SIGKILLed — keepers, agents, standbys,
//     recorded task processes, the initial replicas and a running spare — and a stranger (a
//     recorded pid with another start time) is spared;
//   - only then are the task journals read, handed to the core, and removed; then the initial
//     replicas and every keeper start; the pid files of the spares are gone;
//   - with `stopping` aborted nothing starts and the journals stay; a start that fails is tried
//     for every process, then reported with a typed code;
// and how the watchdog daemon orders resets (src/daemon/scc.ts serializeResets): one cluster
// reset at a time, a second order coalesced, node resets skipped while it runs, a failure logged
// with its code. The stand-ins are sleeping processes whose command lines name the cluster dir
// and their id, as the daemons' do; every one is killed in afterEach, by process group.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { serializeResets } from '../../src/daemon/scc.ts';
import {
  allocatePorts, clusterIds, generateClusterKeys, isAlive, loadCluster, paths, planCluster, writeClusterConfig, writePidFile,
} from '../../src/io/cluster-dir.ts';
import { ResetError, resetLocalCluster, type ClusterResetOptions, type ResetLog, type TaskJournalFiles } from '../../src/io/reset-driver.ts';
import { procStartTime, writeKeeperChildPid, writeProcsFile, writeTaskJournal } from '../../src/io/run-records.ts';
import { killAll, standIn as standInProcess, WAIT } from './helpers.ts';

let dir: string;
/** Every pid we learn of: its group is killed afterwards. */
const pids = new Set<number>();

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'trine-cluster-reset-'));
  const ids = clusterIds(3);
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: await allocatePorts(ids.listeners.length) }, generateClusterKeys(dir, ids.all)));
});

afterEach(() => {
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

const standIn = (...args: string[]): number => standInProcess(pids, ...args);

/** A running local cluster's processes as stand-ins, with their records: the watchdog, r1–r3, a
 *  spare r4 an agent started, keepers, agents and standbys of a1–a3, a task process of a1 and a
 *  stranger a procs file names with another start time; r5 has a stale pid file. */
async function runningCluster(): Promise<{ victims: number[]; watchdog: number; stranger: number }> {
  const daemon = (id: string, ...cmd: string[]): number => {
    const pid = standIn(...cmd, '--dir', dir, '--id', id);
    writePidFile(dir, id, pid);
    return pid;
  };
  const watchdog = standIn('scc', '--dir', dir);
  writePidFile(dir, 'scc', watchdog);
  const victims = [...['r1', 'r2', 'r3'].map((id) => daemon(id, 'manager')), daemon('r4', 'manager', '--join', '1:r1:r1,r2,r4')];
  for (const a of ['a1', 'a2', 'a3']) {
    victims.push(daemon(a, 'keeper'));
    for (const role of ['agent', 'standby'] as const) {
      const pid = standIn('agent', '--dir', dir, '--id', a);
      writeKeeperChildPid(dir, a, role, pid);
      victims.push(pid);
    }
  }
  const task = standIn('task');
  const stranger = standIn('stranger');
  victims.push(task);
  writePidFile(dir, 'r5', 999_999);
  await vi.waitFor(() => expect([task, stranger].map(procStartTime)).not.toContain(null), WAIT);
  writeProcsFile(paths.procsFile(dir, 'a1'), 'a1', [
    { task: 't1', vpid: 0, pid: task, startTime: procStartTime(task) },
    { task: 't1', vpid: 1, pid: stranger, startTime: `${procStartTime(stranger) ?? ''}0` },
  ]);
  return { victims, watchdog, stranger };
}

function options(over: Partial<ClusterResetOptions> = {}): ClusterResetOptions & { events: string[]; started: string[]; restored: TaskJournalFiles[] } {
  const events: string[] = [];
  const started: string[] = [];
  const restored: TaskJournalFiles[] = [];
  const log: ResetLog = (_level, event) => events.push(event);
  let next = 5_000;
  return {
    config: loadCluster(dir).config, log, events, started, restored,
    startKeeper: (id) => {
      started.push(`${id} keeper`);
      return next++;
    },
    startReplica: (id) => {
      started.push(id);
      return next++;
    },
    restore: (journals) => restored.push(journals),
    ...over,
  };
}

const journalFiles = () => readdirSync(paths.run(dir)).filter((f) => f.endsWith('.tasks')).sort();

describe('resetLocalCluster (spec §1.6 rules 2 and 3, PROTOCOL §10.9)', () => {
  it('kills everything but the watchdog, then reads, hands over and removes the journals, then starts the initial replicas and every keeper', async () => {
    const { victims, watchdog, stranger } = await runningCluster();
    for (const [id, bytes] of [['r1', [1, 2]], ['r2', [3]], ['r4', [4, 5, 6]]] as const) writeTaskJournal(dir, id, new Uint8Array(bytes));
    const opts = options();
    let aliveAtRestore: number[] = [];
    let startedAtRestore: string[] = [];
    const report = await resetLocalCluster(dir, {
      ...opts,
      restore: (journals) => {
        aliveAtRestore = victims.filter(isAlive);
        startedAtRestore = [...opts.started];
        opts.restored.push(journals);
      },
    });

    expect(victims.filter(isAlive)).toEqual([]);
    expect(isAlive(watchdog)).toBe(true);
    expect(isAlive(stranger)).toBe(true);
    expect(report.killed).toHaveLength(victims.length);
    expect(report.killed).toContain(`r4 (pid ${victims[3] ?? 0})`);
    // The journals were read once every process was gone and before anything started.
    expect(aliveAtRestore).toEqual([]);
    expect(startedAtRestore).toEqual([]);
    expect(opts.restored).toHaveLength(1);
    expect(opts.restored[0]?.map((j) => [j.source, [...j.data]])).toEqual([
      [paths.taskJournal(dir, 'r1'), [1, 2]], [paths.taskJournal(dir, 'r2'), [3]], [paths.taskJournal(dir, 'r4'), [4, 5, 6]],
    ]);
    expect(journalFiles()).toEqual([]);
    expect(report.journals).toBe(3);
    // Power on: the initial group (fresh, no spare) and a keeper per agent.
    expect(opts.started).toEqual(['r1', 'r2', 'r3', 'a1 keeper', 'a2 keeper', 'a3 keeper']);
    expect(Object.keys(report.replicas)).toEqual(['r1', 'r2', 'r3']);
    // Records of what is dead are gone: the spares' pid files (running or stale), the agents'.
    for (const id of ['r4', 'r5', 'a1', 'a2', 'a3']) expect(existsSync(paths.pidFile(dir, id))).toBe(false);
    expect(existsSync(paths.procsFile(dir, 'a1'))).toBe(false);
    expect(existsSync(paths.pidFile(dir, 'scc'))).toBe(true);
    expect(opts.events).toEqual([
      'reset.cluster.powered-off', 'reset.cluster.journals', 'reset.keeper-started', 'reset.keeper-started', 'reset.keeper-started', 'reset.cluster.started',
    ]);
  });

  it('a stopping watchdog kills but starts nothing and leaves the journals', async () => {
    const { victims } = await runningCluster();
    writeTaskJournal(dir, 'r1', new Uint8Array([1]));
    const stopping = new AbortController();
    stopping.abort();
    const opts = options({ stopping: stopping.signal });
    const report = await resetLocalCluster(dir, opts);
    expect(victims.filter(isAlive)).toEqual([]);
    expect(opts.started).toEqual([]);
    expect(opts.restored).toEqual([]);
    expect(report.journals).toBeNull();
    expect(journalFiles()).toEqual(['r1.tasks']);
    expect(opts.events).toEqual(['reset.cluster.powered-off', 'reset.cluster.not-restarted']);
  });

  it('a process that cannot be started: every other one is started, then RESET_START_FAILED names it', async () => {
    const opts = options();
    const failing = options({
      startReplica: (id) => {
        if (id === 'r2') throw new Error('EAGAIN');
        return opts.startReplica(id);
      },
      startKeeper: opts.startKeeper,
    });
    const run = resetLocalCluster(dir, failing);
    await expect(run).rejects.toSatisfy((e: unknown) => e instanceof ResetError && e.code === 'RESET_START_FAILED' && e.message === 'could not start replica r2: EAGAIN');
    expect(opts.started).toEqual(['r1', 'r3', 'a1 keeper', 'a2 keeper', 'a3 keeper']);
    expect(failing.events).not.toContain('reset.cluster.started');
  });
});

describe('the watchdog daemon orders resets (src/daemon/scc.ts)', () => {
  type Logged = { level: string; event: string; fields: Record<string, unknown> };
  const collect = (): { log: ResetLog; logged: Logged[] } => {
    const logged: Logged[] = [];
    return { logged, log: (level, event, fields) => logged.push({ level, event, fields }) };
  };
  /** A promise and the function that settles it. */
  const gate = (): { wait: Promise<void>; open: () => void } => {
    let open = (): void => {};
    const wait = new Promise<void>((r) => {
      open = r;
    });
    return { wait, open };
  };

  it('one cluster reset at a time: a second order is coalesced, node resets are skipped meanwhile and wait for none', async () => {
    const { log, logged } = collect();
    const nodeResets: string[] = [];
    const clusterResets: string[] = [];
    const g = gate();
    const resets = serializeResets({ reset: (node) => Promise.resolve(void nodeResets.push(node)) }, {
      runs: true, reset: async (reason) => {
        clusterResets.push(reason);
        await g.wait;
      },
    }, log, new AbortController().signal);
    resets.cluster('silence');
    resets.cluster('diagnosis');
    resets.node('n2', 7);
    await vi.waitFor(() => expect(clusterResets).toEqual(['silence']));
    g.open();
    await vi.waitFor(() => expect(logged.map((l) => l.event)).toContain('reset.cluster.done'));
    expect(nodeResets).toEqual([]);
    expect(logged.filter((l) => l.event === 'reset.cluster').map((l) => [l.level, l.fields['action']])).toEqual([
      ['error', 'resetting every node'], ['error', 'coalesced (a cluster reset is under way and covers it)'],
    ]);
    expect(logged.find((l) => l.event === 'reset.skipped')?.fields).toEqual({ node: 'n2', rsn: 7, why: 'a cluster reset is under way' });
    // Once it is done, the next order runs.
    resets.cluster('again');
    await vi.waitFor(() => expect(clusterResets).toEqual(['silence', 'again']));
  });

  it('a cluster reset waits for the node reset under way; a failure is logged with its code; a stopping watchdog or the log driver runs none', async () => {
    const { log, logged } = collect();
    const g = gate();
    const order: string[] = [];
    const stopping = new AbortController();
    const resets = serializeResets({
      reset: async (node) => {
        order.push(`node ${node} start`);
        await g.wait;
        order.push(`node ${node} end`);
      },
    }, {
      runs: true, reset: (reason) => {
        order.push(`cluster ${reason}`);
        return Promise.reject(new ResetError('RESET_KILL_FAILED', 'r1 (pid 9) still running'));
      },
    }, log, stopping.signal);
    resets.node('n1', 3);
    await vi.waitFor(() => expect(order).toEqual(['node n1 start']));
    resets.cluster('silence');
    await new Promise((r) => setTimeout(r, 50));
    expect(order).toEqual(['node n1 start']);
    g.open();
    await vi.waitFor(() => expect(logged.map((l) => l.event)).toContain('reset.cluster.failed'));
    expect(order).toEqual(['node n1 start', 'node n1 end', 'cluster silence']);
    expect(logged.find((l) => l.event === 'reset.cluster.failed')).toMatchObject({ level: 'error', fields: { code: 'RESET_KILL_FAILED', error: 'r1 (pid 9) still running' } });

    stopping.abort();
    resets.cluster('late');
    expect(logged.at(-1)?.fields['action']).toBe('skipped (the watchdog is stopping)');

    const other = collect();
    serializeResets({ reset: () => Promise.resolve() }, { runs: false, why: 'cluster.json resetDriver is "log"' }, other.log, new AbortController().signal).cluster('silence');
    expect(other.logged).toEqual([{ level: 'error', event: 'reset.cluster', fields: { reason: 'silence', action: 'logged only (cluster.json resetDriver is "log")' } }]);
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual(['node n1 start', 'node n1 end', 'cluster silence']);
  });
});
