// The daemons' entry point: `trine manager`, `trine agent`, `trine scc`, `trine keeper` in the
// foreground, each with its composition root. `trine up` starts them detached (agents under a
// keeper each, cli/daemons.ts spawnDaemon); running one by hand is for debugging and for hosts
// outside a local cluster. Also the composition root of what a daemon starts as processes: an
// agent's replicas (its ReplicaControl) and the watchdog's reset drivers. cli/main.ts and
// cli/node-run.ts load this module only when they run a daemon (a dynamic import), so the CLI
// itself takes nothing from src/daemon.
import { closeSync, rmSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { runAgent, type ReplicaControl } from './agent.ts';
import { runKeeper } from './keeper.ts';
import { runManager, runManagerStandby } from './manager.ts';
import { ReplicaStandby } from './replica-standby.ts';
import { runSupervisedWatchdog, type ClusterResetContext } from './scc.ts';
import type { ProcessId } from '../core/ports.ts';
import { quoted } from '../core/quoted.ts';
import {
  isClusterProcess, loadCluster, paths, processEntry, readPidFiles, resolveClusterDir, writePidFile, type Cluster,
} from '../io/cluster-dir.ts';
import { openPrivate } from '../io/private-files.ts';
import {
  CommandResetDriver, LocalResetDriver, LogResetDriver, ResetError, resetLocalCluster, type NodeResetDriver, type ResetDriverKind, type ResetLog,
} from '../io/reset-driver.ts';
import { spawnDaemon, trineCommand } from '../../cli/daemons.ts';
import { CliError, EXIT_USAGE } from '../../cli/errors.ts';

/** The reset driver cluster.json chose (src/io/reset-driver.ts), with its dependencies. */
function makeResetDriver(kind: ResetDriverKind, cluster: Cluster, log: ResetLog, stopping: AbortSignal): NodeResetDriver {
  switch (kind) {
    case 'log':
      return new LogResetDriver(log);
    case 'command':
      return new CommandResetDriver({ command: cluster.config.resetCommand ?? [], addresses: cluster.config.nodeAddresses ?? {}, log });
    case 'local':
      return new LocalResetDriver(cluster.dir, {
        config: cluster.config, log, stopping, startKeeper: (id) => spawnDaemon(cluster.dir, processEntry(cluster, id)),
      });
  }
}

/** The watchdog's cluster reset on a local cluster (src/io/reset-driver.ts resetLocalCluster):
 *  replicas and keepers start as `trine up` starts them. */
async function resetCluster(_reason: string, { cluster, log, stopping, restore, kept, membership }: ClusterResetContext): Promise<unknown> {
  if (cluster.config.resetDriver === 'command') {
    // Several hosts: power-cycle every node with the operator's command; each boots its
    // `trine node run` again, which starts the node's initial replica (PROTOCOL §10.10) and
    // agent. The replicas' journals are on their hosts' disks, so the tasks are restored from
    // the copies the watchdog kept (PROTOCOL §10.9). The nodes are cluster.json's less those an
    // operator removed, plus those added at run time (§10.12): a removed machine is no longer
    // the cluster's to power-cycle.
    const driver = new CommandResetDriver({ command: cluster.config.resetCommand ?? [], addresses: cluster.config.nodeAddresses ?? {}, log });
    const removed = new Set(membership.removed);
    const nodes = [
      ...[...new Set(cluster.config.membership.agents.map((a) => a.node))].filter((n) => !removed.has(n)).map((node) => ({ node, address: '' })),
      ...membership.added,
    ];
    log('warn', 'reset.cluster.nodes', { nodes: nodes.map((n) => n.node), added: membership.added.map((n) => n.node), removed: membership.removed });
    const results = await Promise.allSettled(nodes.map((n) => driver.reset(n.node, n.address)));
    if (stopping.aborted) return results;
    log('warn', 'reset.cluster.journals-kept', { journals: kept.map((j) => j.source) });
    restore(kept);
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
    if (failed.length > 0) throw new ResetError('RESET_COMMAND_FAILED', failed.join('; '));
    return results;
  }
  const start = (id: string) => spawnDaemon(cluster.dir, processEntry(cluster, id));
  return resetLocalCluster(cluster.dir, { config: cluster.config, log, stopping, restore, startKeeper: start, startReplica: start });
}

export const startManager = (opts: { dir?: string | undefined; id: string; join?: string | undefined }) => {
  const joining = opts.join === undefined ? undefined : parseJoin(opts.join);
  return runManager(opts.dir, opts.id, {}, joining);
};

/** `trine manager --standby <spares…>`: an agent's warm standby replica (src/daemon/replica-standby.ts). */
export const startStandby = (opts: { dir?: string | undefined; standby: readonly string[] }) => runManagerStandby(opts.dir, opts.standby);

/** `--join view:primary:m1,m2`: the group a replacement joins, as the agent was commanded. */
export function parseJoin(text: string): { view: number; primary: string; replicas: string[] } {
  const m = /^(\d+):([a-z][a-z0-9-]*):([a-z][a-z0-9-]*(?:,[a-z][a-z0-9-]*)*)$/.exec(text);
  if (m === null) throw new CliError(`--join must be view:primary:member,member (e.g. 1:r2:r2,r3), got ${quoted(text)}`, EXIT_USAGE);
  const replicas = (m[3] as string).split(',');
  if (!replicas.includes(m[2] as string)) throw new CliError(`--join: the primary ${m[2]} is not among the members ${m[3]}`, EXIT_USAGE);
  return { view: Number(m[1]), primary: m[2] as string, replicas };
}

/** `trine manager --standby <spares…>` for agent `agentId`, detached, with the IPC channel the
 *  standby waits on (src/daemon/replica-standby.ts); output to `logs/<agent>-replica-standby.out`. */
function spawnReplicaStandby(dir: string, agentId: ProcessId, spares: readonly ProcessId[]): ChildProcess {
  const out = openPrivate(paths.output(dir, `${agentId}-replica-standby`), 'a');
  try {
    const command = trineCommand(['manager', '--dir', dir, '--standby', ...spares]);
    return spawn(command.file, command.args, { detached: true, stdio: ['ignore', out, out, 'ipc'] });
  } finally {
    closeSync(out);
  }
}

/** What an agent does with the group's `replica.spawn` and `replica.kill` (PROTOCOL §10.6) on a
 *  local cluster: promote its warm standby replica (or, if none is ready, start the replica
 *  daemon detached, like `trine up` does), or SIGKILL it. A killed replica is retired: its task
 *  journal is stale from then on and is removed, so a later cluster reset does not restore tasks
 *  that finished after it (PROTOCOL §10.9). */
function replicaControl(dir: string, agentId: ProcessId): ReplicaControl {
  let standby: ReplicaStandby | null = null;
  /** Replicas this node runs: its initial one (cluster.json) and the spares this agent started. */
  const hosted = new Set<ProcessId>();
  const runsReplica = (clusterDir: string): boolean => {
    const pids = readPidFiles(clusterDir);
    return [...hosted].some((id) => {
      const pid = pids.find((p) => p.id === id)?.pid ?? null;
      return pid !== null && isClusterProcess(pid, clusterDir, id);
    });
  };
  return {
    attach: (log) => {
      const cluster = loadCluster(dir);
      const m = cluster.config.membership;
      const node = m.agents.find((a) => a.id === agentId)?.node;
      m.replicas.forEach((r, i) => {
        if (m.replicaNodes[i] === node) hosted.add(r);
      });
      if (m.spareReplicas.length === 0) return;
      standby = new ReplicaStandby({
        spawn: () => spawnReplicaStandby(cluster.dir, agentId, m.spareReplicas),
        writePid: (id, pid) => writePidFile(cluster.dir, id, pid),
        // A replacement goes to a node without a replica (PROTOCOL §10.6): on a 4-node cluster
        // one standby, not four, until a node loses its replica.
        needed: () => !runsReplica(cluster.dir),
        log,
      });
      standby.start();
    },
    start: (id, join) => {
      hosted.add(id);
      const warm = standby?.promote(id, join) ?? null;
      if (warm !== null) return warm;
      const cluster = loadCluster(dir);
      const entry = processEntry(cluster, id);
      return spawnDaemon(cluster.dir, entry, ['--join', `${join.view}:${join.primary}:${join.replicas.join(',')}`]);
    },
    stop: (id) => {
      const cluster = loadCluster(dir);
      const pid = readPidFiles(cluster.dir).find((p) => p.id === id)?.pid ?? null;
      rmSync(paths.taskJournal(cluster.dir, id), { force: true });
      if (pid === null || !isClusterProcess(pid, cluster.dir, id)) return null;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return null;
      }
      return pid;
    },
  };
}

export const startAgent = (opts: { dir?: string | undefined; id: string }) => {
  const dir = resolveClusterDir(opts.dir);
  return runAgent(opts.dir, opts.id, {}, replicaControl(dir, opts.id));
};
/** `trine scc`: the watchdog under its supervisor, which restarts it (src/daemon/supervisor.ts). */
export const startWatchdog = (opts: { dir?: string | undefined }) =>
  runSupervisedWatchdog(opts.dir, { makeResetDriver, resetCluster }, (dir) => trineCommand(['scc', '--dir', dir]));
export const startKeeper = (opts: { dir?: string | undefined; id: string }) =>
  runKeeper({ dir: opts.dir, id: opts.id, agentCommand: (dir, id) => trineCommand(['agent', '--dir', dir, '--id', id]) });
