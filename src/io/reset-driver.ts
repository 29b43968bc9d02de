// The watchdog's node reset drivers (PROTOCOL §8.4 step 5; spec §1.6 rule 1): what "power-reset
// node nK" means on a given cluster. The watchdog core decides *that* a node is reset (two
// replicas asked for the same (node, RSN)); src/daemon/scc.ts runs the chosen driver, one reset
// at a time per node. Drivers:
//   - `local` (default; a cluster started by `trine up`, every node a process set on this host):
//     SIGKILL the node's initial replica, its keeper, its agent and standby, and every task
//     process its agent recorded, then start a fresh keeper the way `trine up` does. That is what a power cycle
//     does to a node's Trine processes: they all end at once, without a chance to clean up, and
//     the node boots its keeper again.
//   - `log`: only logs the request (the paper's test rig logged resets). For a cluster whose
//     nodes this host cannot reset (not started by `trine up`): an operator or an outside
//     power controller acts on the log line.
//   - `command` (a cluster of several hosts, `trine init`): runs the operator's command from
//     cluster.json `resetCommand` — an IPMI or hypervisor call on a real cluster, a namespace
//     power-cycle in the test bed — with `{node}` and `{address}` replaced, and the same two in
//     TRINE_RESET_NODE and TRINE_RESET_ADDRESS. The reset succeeded when the command exits 0.
// `cluster.json` may choose one with a top-level `"resetDriver": "local" | "log" | "command"`.
//
// Limits of `local`: it finds task processes through the procs file, which the agent writes in
// the same event-loop turn as its forks (src/daemon/proc-driver.ts), so only a process whose fork and
// record were cut apart by the agent's death inside that turn would be missed. Nothing else on
// the node is touched: see LocalResetDriver on replicas.
//
// A *cluster* reset (spec §1.6 rules 2 and 3; resetLocalCluster) is the same power cycle of
// every node at once, replicas included, spares too: everything of the cluster but the watchdog
// ends, the replicas' task journals (PROTOCOL §10.9) are handed to the watchdog core and removed,
// and the initial group and every node's keeper start again as `trine up` started them. It finds
// a spare replica through its pid file, which the agent writes right after the fork (cli/daemons.ts
// spawnDaemon): a spare whose agent died between the two would be missed, like a task above.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { ProcessId } from '../core/ports.ts';
import { scanOwned } from './proc-scan.ts';
import { isAlive, isClusterProcess, paths, readPidFiles, removePidFile, replicaPool, type ClusterConfig } from './cluster-dir.ts';
import {
  isSameProcess, liveRecordedProcs, readKeeperChildPid, readTaskJournals, removeKeeperChildPid, removeProcsFile, removeTaskJournals,
  signalGroup, waitGone,
} from './run-records.ts';

/** Resets one node. Resolves once the node has been reset (its processes are started again,
 *  not necessarily joined); rejects with a ResetError if it could not be. */
export interface NodeResetDriver {
  /** `address`: where a node added at run time is (PROTOCOL §10.12), when cluster.json does not
   *  list it; empty otherwise. */
  reset(node: string, address?: string): Promise<void>;
}

export const RESET_DRIVER_KINDS = ['local', 'log', 'command'] as const;
export type ResetDriverKind = (typeof RESET_DRIVER_KINDS)[number];
/** `trine up` clusters run on this host, so the local driver can reset their nodes. */
export const DEFAULT_RESET_DRIVER: ResetDriverKind = 'local';

/** Time SIGKILLed processes get to disappear: the kernel needs milliseconds; a process in
 *  uninterruptible sleep (a hung disk) may need longer, and then the reset fails visibly. */
export const RESET_KILL_WAIT_MS = 2_000;

export type ResetLog = (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void;

export type ResetErrorCode = 'RESET_UNKNOWN_NODE' | 'RESET_KILL_FAILED' | 'RESET_START_FAILED' | 'RESET_COMMAND_FAILED' | 'RESET_INTERNAL';

export class ResetError extends Error {
  override readonly name = 'ResetError';
  constructor(readonly code: ResetErrorCode, message: string) {
    super(message);
  }
}

/** The `resetDriver` field of a cluster.json: the default when absent, a problem when it names
 *  no driver. Total: a missing or unreadable file is the default (loading it fails elsewhere,
 *  with a better message). */
export function readResetDriverKind(configPath: string): { ok: true; value: ResetDriverKind } | { ok: false; detail: string } {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(configPath, 'utf8'));
  } catch {
    return { ok: true, value: DEFAULT_RESET_DRIVER };
  }
  const v = typeof json === 'object' && json !== null ? (json as { resetDriver?: unknown }).resetDriver : undefined;
  if (v === undefined) return { ok: true, value: DEFAULT_RESET_DRIVER };
  if ((RESET_DRIVER_KINDS as readonly unknown[]).includes(v)) return { ok: true, value: v as ResetDriverKind };
  return { ok: false, detail: `${configPath}: "resetDriver" must be one of ${RESET_DRIVER_KINDS.map((k) => `"${k}"`).join(', ')}, got ${JSON.stringify(v)}` };
}

/** How long a reset command may run: a power controller answers in seconds; one that hangs
 *  must not hold the node's reset chain for ever (the next reset of the node waits behind it). */
export const RESET_COMMAND_TIMEOUT_MS = 60_000;
/** Characters of a failed command's stderr kept in the log line. */
const RESET_COMMAND_OUTPUT_CHARS = 500;

export type CommandResetOptions = {
  /** The program and its arguments; `{node}` and `{address}` are replaced in each. */
  command: readonly string[];
  /** Node name → address (cluster.json `nodeAddresses`). */
  addresses: Readonly<Record<string, string>>;
  log: ResetLog;
  timeoutMs?: number;
};

/** Runs the configured command for each reset (see the header). No shell: the arguments are
 *  passed as they are, so a node name cannot inject anything. */
export class CommandResetDriver implements NodeResetDriver {
  constructor(private readonly opts: CommandResetOptions) {}

  reset(node: string, added = ''): Promise<void> {
    // cluster.json's address wins: the group cannot send a known node's reset elsewhere.
    const address = this.opts.addresses[node] ?? (added === '' ? undefined : added);
    if (address === undefined) return Promise.reject(new ResetError('RESET_UNKNOWN_NODE', `no address for node ${node} in cluster.json nodeAddresses`));
    const argv = this.opts.command.map((a) => a.replaceAll('{node}', node).replaceAll('{address}', address));
    const [file, ...args] = argv as [string, ...string[]];
    this.opts.log('warn', 'reset.command', { node, address, command: argv });
    return new Promise((resolvePromise, reject) => {
      execFile(file, args, {
        timeout: this.opts.timeoutMs ?? RESET_COMMAND_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024,
        env: { ...process.env, TRINE_RESET_NODE: node, TRINE_RESET_ADDRESS: address },
      }, (error, _stdout, stderr) => {
        if (error === null) return resolvePromise();
        const how = error.killed ? `was killed after ${this.opts.timeoutMs ?? RESET_COMMAND_TIMEOUT_MS} ms` : typeof error.code === 'number' ? `exited with code ${error.code}` : `could not run (${error.message})`;
        const tail = String(stderr).trim().slice(-RESET_COMMAND_OUTPUT_CHARS);
        reject(new ResetError('RESET_COMMAND_FAILED', `reset command for ${node} ${how}${tail.length > 0 ? `: ${tail}` : ''}`));
      });
    });
  }
}

/** Logs the reset and does nothing else. */
export class LogResetDriver implements NodeResetDriver {
  constructor(private readonly log: ResetLog) {}

  reset(node: string): Promise<void> {
    this.log('warn', 'reset.logged', { node, driver: 'log' });
    return Promise.resolve();
  }
}

export type LocalResetOptions = {
  config: ClusterConfig;
  log: ResetLog;
  /** Starts agent `id`'s keeper exactly as `trine up` does (detached, output to `logs/<id>.out`)
   *  and records `run/<id>.pid`; returns its pid (cli/daemons.ts spawnDaemon). */
  startKeeper: (id: ProcessId) => number;
  /** Aborted when the watchdog stops: a reset then starts nothing, since `trine down` is under
   *  way and would miss a keeper started after it looked. */
  stopping?: AbortSignal;
};

type Victim = { what: string; pid: number; alive: () => boolean };

/** SIGKILLs every victim's process group and waits until all are gone; adds them to `killed`. */
async function killAll(victims: Victim[], killed: string[]): Promise<void> {
  for (const v of victims) signalGroup(v.pid, 'SIGKILL');
  const left = new Set(await waitGone(victims.map((v) => v.pid), RESET_KILL_WAIT_MS, (pid) => victims.some((v) => v.pid === pid && v.alive())));
  if (left.size > 0) {
    const names = victims.filter((v) => left.has(v.pid)).map((v) => `${v.what} (pid ${v.pid})`);
    throw new ResetError('RESET_KILL_FAILED', `${names.join(', ')} still running ${RESET_KILL_WAIT_MS} ms after SIGKILL`);
  }
  killed.push(...victims.map((v) => `${v.what} (pid ${v.pid})`));
}

/** The power-off half of a local node reset, also what `trine inject kill-node` does: SIGKILL
 *  the node's keepers and agents' children and task processes (see powerOff), with `replicas`
 *  the replica it hosts too. Returns what was killed (`r1 (pid 12)`, `a1 keeper (pid 13)`, …)
 *  and the replicas kept. (A killed replica's pid file stays: whoever restarts it writes a new
 *  one; `trine down` drops stale ones.) */
export async function powerOffNode(
  dir: string, config: ClusterConfig, node: string, opts: { replicas: boolean },
): Promise<{ killed: string[]; kept: ProcessId[] }> {
  const agents = config.membership.agents.filter((a) => a.node === node).map((a) => a.id);
  if (agents.length === 0) throw new ResetError('RESET_UNKNOWN_NODE', `no agent runs on node ${node} in ${paths.config(dir)}`);
  const replicas = config.processes.filter((p) => p.kind === 'replica' && p.node === node).map((p) => p.id);
  const killed = await powerOff(dir, config.cluster, agents, opts.replicas ? replicas : []);
  return { killed, kept: opts.replicas ? [] : replicas };
}

/** SIGKILLs, in waves, the keepers of `agents` and the `replicas` that run (pid file and
 *  command line: an unrelated process that reused a pid is spared), then those agents' agents
 *  and standbys (and a replica one of them started meanwhile), then every task process they
 *  recorded; each record is read only once its writer is dead, so it is final. The records of the killed agent-side processes are removed. Returns
 *  what was killed. Rejects with RESET_KILL_FAILED if a process outlives its SIGKILL. */
async function powerOff(dir: string, cluster: string, agents: readonly ProcessId[], replicas: readonly ProcessId[]): Promise<string[]> {
  const killed: string[] = [];
  const daemons = (ids: readonly ProcessId[], what: (id: ProcessId) => string): Victim[] => {
    const pidFiles = readPidFiles(dir);
    return ids.flatMap((id): Victim[] => {
      const pid = pidFiles.find((r) => r.id === id)?.pid ?? null;
      return pid !== null && isClusterProcess(pid, dir, id) ? [{ what: what(id), pid, alive: () => isAlive(pid) }] : [];
    });
  };
  await killAll([...daemons(agents, (id) => `${id} keeper`), ...daemons(replicas, (id) => id)], killed);
  const children = agents.flatMap((id) => (['agent', 'standby'] as const).flatMap((role): Victim[] => {
    const pid = readKeeperChildPid(dir, id, role);
    return pid !== null && isClusterProcess(pid, dir, id) ? [{ what: `${id} ${role}`, pid, alive: () => isAlive(pid) }] : [];
  }));
  await killAll(children, killed);
  // A dying agent may have started a spare replica (PROTOCOL §10.6) after the first wave looked;
  // with every agent gone, no other can start.
  if (replicas.length > 0) await killAll(daemons(replicas, (id) => id), killed);
  const tasks = agents.flatMap((id) => liveRecordedProcs(dir, id).map((p): Victim => ({
    what: `task ${p.task}/${p.vpid}`, pid: p.pid, alive: () => isSameProcess(p.pid, p.startTime),
  })));
  // And every process with those agents' mark that no record names (a record lost or corrupted:
  // src/io/proc-scan.ts): the power goes off for them too.
  const recorded = new Set(tasks.map((t) => t.pid));
  for (const id of agents) {
    for (const p of scanOwned(cluster, id)) {
      if (!recorded.has(p.pid)) tasks.push({ what: `unrecorded task process ${p.task ?? '?'}/${p.vpid ?? '?'}`, pid: p.pid, alive: () => isSameProcess(p.pid, p.startTime) });
    }
  }
  await killAll(tasks, killed);
  // Every process these records name is dead: they describe nothing any more.
  for (const id of agents) {
    removePidFile(dir, id);
    removeKeeperChildPid(dir, id, 'agent');
    removeKeeperChildPid(dir, id, 'standby');
    removeProcsFile(dir, id);
  }
  return killed;
}

/** Starts each agent's keeper with `startKeeper`, logging `reset.keeper-started` for each (with
 *  `fields`). Tries them all; returns the keepers' pids and what could not be started. */
function startKeepers(
  agents: readonly ProcessId[], opts: Pick<LocalResetOptions, 'startKeeper' | 'log'>, fields: Record<string, unknown>,
): Started {
  return startEach(agents, (id) => {
    const pid = opts.startKeeper(id);
    opts.log('info', 'reset.keeper-started', { ...fields, agent: id, keeperPid: pid });
    return pid;
  }, (id) => `${id}'s keeper`);
}

type Started = { pids: Record<ProcessId, number>; failed: string[] };

/** Runs `start` for every id, even after one failed (a power-on starts every node). */
function startEach(ids: readonly ProcessId[], start: (id: ProcessId) => number, what: (id: ProcessId) => string): Started {
  const out: Started = { pids: {}, failed: [] };
  for (const id of ids) {
    try {
      out.pids[id] = start(id);
    } catch (e) {
      out.failed.push(`${what(id)}: ${(e as Error).message}`);
    }
  }
  return out;
}

const startFailed = (failed: readonly string[]): ResetError => new ResetError('RESET_START_FAILED', `could not start ${failed.join('; ')}`);

/** Power-resets a node of a local cluster (see the header). */
export class LocalResetDriver implements NodeResetDriver {
  constructor(private readonly dir: string, private readonly opts: LocalResetOptions) {}

  async reset(node: string): Promise<void> {
    const { config, log } = this.opts;
    // The whole node goes down, its replica included, as a power reset takes it: the group
    // condemns the silent replica and replaces it with a spare on another node (PROTOCOL §10.6);
    // the node boots its keeper only, never its old replica, which the group has gone on
    // without (§10.10).
    const { killed, kept } = await powerOffNode(this.dir, config, node, { replicas: true });
    const agents = config.membership.agents.filter((a) => a.node === node).map((a) => a.id);
    log('info', 'reset.powered-off', { node, killed, kept });

    // Power on.
    if (this.opts.stopping?.aborted === true) {
      log('warn', 'reset.not-restarted', { node, why: 'the watchdog is stopping' });
      return;
    }
    const { failed } = startKeepers(agents, this.opts, { node });
    if (failed.length > 0) throw startFailed(failed);
  }
}

/** Task journals as read from the nodes' disks, raw, each with its path (PROTOCOL §10.9). */
export type TaskJournalFiles = { source: string; data: Uint8Array }[];

export type ClusterResetOptions = LocalResetOptions & {
  /** Starts replica `id` fresh, as `trine up` does (no `--join`: one of the initial group of
   *  cluster.json, with a new incarnation), and records `run/<id>.pid`; returns its pid. */
  startReplica: (id: ProcessId) => number;
  /** Hands the journals to the watchdog core (`restore.load`), which restores their tasks once
   *  the restarted group serves. Called once, after every process is gone, before any starts. */
  restore: (journals: TaskJournalFiles) => void;
};

export type ClusterResetReport = {
  killed: string[];
  /** Journals handed to the core; null when none were (stopped before, or `restore` threw). */
  journals: number | null;
  /** Pids of what was started, by id (replicas) and agent id (keepers); empty if none. */
  replicas: Record<ProcessId, number>;
  keepers: Record<ProcessId, number>;
};

/** Power-resets every node of a local cluster (spec §1.6 rules 2 and 3; see the header):
 *    1. SIGKILL every Trine process of the cluster but the watchdog — every node's keeper, agent,
 *       standby and recorded task processes, and every replica of the pool that runs, spares
 *       included — and wait until all are gone;
 *    2. only then read every task journal (no replica is left to rewrite one), hand them to the
 *       core with `restore`, and remove them: the fresh replicas write their own;
 *    3. start the initial replicas and every agent's keeper, as `trine up` does.
 *  Each step is logged with its duration. With `stopping` aborted (a `trine down` under way) it
 *  stops after step 1, journals left on disk. Rejects with a ResetError. */
export async function resetLocalCluster(dir: string, opts: ClusterResetOptions): Promise<ClusterResetReport> {
  const { config, log } = opts;
  const m = config.membership;
  const agents = m.agents.map((a) => a.id);
  const pool = replicaPool(m);
  const startMs = performance.now();
  const sinceMs = (t: number) => Math.round(performance.now() - t);
  const report: ClusterResetReport = { killed: [], journals: null, replicas: {}, keepers: {} };

  report.killed = await powerOff(dir, opts.config.cluster, agents, pool);
  // No replica of the pool runs now: the pid files of those killed (and of spares that died
  // earlier) name nothing. The initial replicas get new ones when they start.
  for (const id of pool) removePidFile(dir, id);
  log('warn', 'reset.cluster.powered-off', { killed: report.killed, durationMs: sinceMs(startMs) });
  if (opts.stopping?.aborted === true) {
    log('warn', 'reset.cluster.not-restarted', { why: 'the watchdog is stopping', journalsKept: true });
    return report;
  }

  const journalsAtMs = performance.now();
  const journals = readTaskJournals(dir);
  try {
    opts.restore(journals);
    report.journals = journals.length;
  } catch (e) {
    // Not expected (the core takes any bytes); the cluster is started all the same, and the
    // journals stay for an operator, or the next reset.
    log('error', 'reset.cluster.restore-failed', { journals: journals.length, error: (e as Error).message });
  }
  try {
    if (report.journals !== null) removeTaskJournals(dir);
  } catch (e) {
    // Harmless now (the fresh replicas overwrite theirs), but a later reset would restore them
    // again: say so.
    log('error', 'reset.cluster.journals-not-removed', { error: (e as Error).message });
  }
  log('warn', 'reset.cluster.journals', {
    count: journals.length, sources: journals.map((j) => j.source), durationMs: sinceMs(journalsAtMs),
  });

  // Power on. Listeners first (replicas), as `trine up` does: dialers find them sooner.
  const startAtMs = performance.now();
  const replicas = startEach(m.replicas, opts.startReplica, (id) => `replica ${id}`);
  const keepers = startKeepers(agents, opts, { cluster: true });
  report.replicas = replicas.pids;
  report.keepers = keepers.pids;
  if (replicas.failed.length + keepers.failed.length > 0) throw startFailed([...replicas.failed, ...keepers.failed]);
  log('warn', 'reset.cluster.started', {
    replicas: report.replicas, keepers: report.keepers, durationMs: sinceMs(startAtMs), totalMs: sinceMs(startMs),
  });
  return report;
}
