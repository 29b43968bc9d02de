// The watchdog's node reset drivers (PROTOCOL §8.4 step 5; spec §1.6 rule 1): what "power-reset
// node nK" means on a given cluster. The watchdog core decides *that* a node is reset (two
// replicas asked for the same (node, RSN)); src/daemon/scc.ts runs the chosen driver, one reset
// at a time per node. Drivers:
//   - `local` (default; a cluster started by `trine up`, every node a process set on this host):
//     SIGKILL the node's keeper, its agent and standby, and every task process its agent
//     recorded, then start a fresh keeper the way `trine up` does. That is what a power cycle
//     does to a node's Trine processes: they all end at once, without a chance to clean up, and
//     the node boots its keeper again.
//   - `log`: only logs the request (the paper's test rig logged resets). For a cluster whose
//     nodes this host cannot reset (not started by `trine up`): an operator or an outside
//     power controller acts on the log line.
// `cluster.json` may choose one with a top-level `"resetDriver": "local" | "log"`.
//
// Limits of `local`: it finds task processes through the procs file, which the agent writes in
// the same event-loop turn as its forks (src/daemon/agent.ts), so only a process whose fork and
// record were cut apart by the agent's death inside that turn would be missed. Nothing else on
// the node is touched: see LocalResetDriver on replicas.
import { readFileSync } from 'node:fs';
import type { ProcessId } from '../core/ports.ts';
import { isAlive, isClusterProcess, paths, readPidFiles, removePidFile, type ClusterConfig } from './cluster-dir.ts';
import {
  isSameProcess, liveRecordedProcs, readKeeperChildPid, removeKeeperChildPid, removeProcsFile, signalGroup, waitGone,
} from './run-records.ts';

/** Resets one node. Resolves once the node has been reset (its processes are started again,
 *  not necessarily joined); rejects with a ResetError if it could not be. */
export interface NodeResetDriver {
  reset(node: string): Promise<void>;
}

export const RESET_DRIVER_KINDS = ['local', 'log'] as const;
export type ResetDriverKind = (typeof RESET_DRIVER_KINDS)[number];
/** `trine up` clusters run on this host, so the local driver can reset their nodes. */
export const DEFAULT_RESET_DRIVER: ResetDriverKind = 'local';

/** Time SIGKILLed processes get to disappear: the kernel needs milliseconds; a process in
 *  uninterruptible sleep (a hung disk) may need longer, and then the reset fails visibly. */
export const RESET_KILL_WAIT_MS = 2_000;

export type ResetLog = (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void;

export type ResetErrorCode = 'RESET_UNKNOWN_NODE' | 'RESET_KILL_FAILED' | 'RESET_START_FAILED';

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

/** The power-off half of a local node reset, also what `trine inject kill-node` does: SIGKILL,
 *  in three waves, the node's keepers (and, with `replicas`, the replica it hosts), then its
 *  agents and standbys, then every task process they recorded; each record is read only once
 *  its writer is dead, so it is final. The records of the killed node processes are removed.
 *  Returns what was killed (`r1 (pid 12)`, `a1 keeper (pid 13)`, …) and the replicas kept. */
export async function powerOffNode(
  dir: string, config: ClusterConfig, node: string, opts: { replicas: boolean },
): Promise<{ killed: string[]; kept: ProcessId[] }> {
  const agents = config.membership.agents.filter((a) => a.node === node).map((a) => a.id);
  if (agents.length === 0) throw new ResetError('RESET_UNKNOWN_NODE', `no agent runs on node ${node} in ${paths.config(dir)}`);
  const replicas = config.processes.filter((p) => p.kind === 'replica' && p.node === node).map((p) => p.id);
  const killed: string[] = [];
  const pidOf = (id: ProcessId) => readPidFiles(dir).find((r) => r.id === id)?.pid ?? null;
  const daemon = (id: ProcessId, what: string): Victim[] => {
    const pid = pidOf(id);
    return pid !== null && isClusterProcess(pid, dir, id) ? [{ what, pid, alive: () => isAlive(pid) }] : [];
  };
  await killAll([
    ...agents.flatMap((id) => daemon(id, `${id} keeper`)),
    ...(opts.replicas ? replicas.flatMap((id) => daemon(id, id)) : []),
  ], killed);
  const children = agents.flatMap((id) => (['agent', 'standby'] as const).flatMap((role): Victim[] => {
    const pid = readKeeperChildPid(dir, id, role);
    return pid !== null && isClusterProcess(pid, dir, id) ? [{ what: `${id} ${role}`, pid, alive: () => isAlive(pid) }] : [];
  }));
  await killAll(children, killed);
  const tasks = agents.flatMap((id) => liveRecordedProcs(dir, id).map((p): Victim => ({
    what: `task ${p.task}/${p.vpid}`, pid: p.pid, alive: () => isSameProcess(p.pid, p.startTime),
  })));
  await killAll(tasks, killed);
  // Every process these records name is dead: they describe nothing any more. (A killed
  // replica's pid file stays: whoever restarts it writes a new one; `trine down` drops stale ones.)
  for (const id of agents) {
    removePidFile(dir, id);
    removeKeeperChildPid(dir, id, 'agent');
    removeKeeperChildPid(dir, id, 'standby');
    removeProcsFile(dir, id);
  }
  return { killed, kept: opts.replicas ? [] : replicas };
}

/** Power-resets a node of a local cluster (see the header). */
export class LocalResetDriver implements NodeResetDriver {
  constructor(private readonly dir: string, private readonly opts: LocalResetOptions) {}

  async reset(node: string): Promise<void> {
    const { config, log } = this.opts;
    // A node hosting a replica keeps it: a real power reset would take the replica down too, and
    // recovering a replica (rejoining the group, state transfer) is issue 5. Until then the
    // reset covers the node's agent side only.
    const { killed, kept } = await powerOffNode(this.dir, config, node, { replicas: false });
    const agents = config.membership.agents.filter((a) => a.node === node).map((a) => a.id);
    log('info', 'reset.powered-off', { node, killed, kept });

    // Power on.
    if (this.opts.stopping?.aborted === true) {
      log('warn', 'reset.not-restarted', { node, why: 'the watchdog is stopping' });
      return;
    }
    for (const id of agents) {
      let pid: number;
      try {
        pid = this.opts.startKeeper(id);
      } catch (e) {
        throw new ResetError('RESET_START_FAILED', `could not start ${id}'s keeper: ${(e as Error).message}`);
      }
      log('info', 'reset.keeper-started', { node, agent: id, keeperPid: pid });
    }
  }
}
