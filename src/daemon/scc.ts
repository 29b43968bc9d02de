// `trine scc`: runs the watchdog (the paper's spacecraft control computer, spec §1.6) — the
// watchdog core on the shared daemon runtime, listening for replica heartbeats — and executes
// the core's `reset.node` effects with a node reset driver (src/io/reset-driver.ts; PROTOCOL
// §8.4 step 5) and its `reset.cluster` effects (spec §1.6 rules 2 and 3) with `hooks.resetCluster`
// (on a local cluster, resetLocalCluster), which hands the task journals it finds back to the
// core as `restore.load` (PROTOCOL §10.9). Resets of one node run one at a time, in order;
// resets of different nodes run side by side; a cluster reset runs alone: it waits for the node
// reset under way, node resets ordered meanwhile are skipped (it resets every node), and a
// second cluster reset ordered meanwhile is coalesced into it. Each reset is logged when it
// starts, ends or fails, with its duration.
//
// `trine scc` runs the watchdog under its supervisor (issue 14 item 4, src/daemon/supervisor.ts):
// the process `trine up` or `trine scc run` starts is the supervisor, and the watchdog is its
// child, `trine scc` again with SUPERVISED_ENV set, which heartbeats it and reports its restarts
// in status. A restarted watchdog starts from nothing (docs/FAULT-MODEL.md).
import type { CoreInput } from '../core/node.ts';
import type { MembershipChanges } from '../core/task-journal.ts';
import { createWatchdog } from '../core/watchdog.ts';
import { paths, resolveClusterDir, type Cluster } from '../io/cluster-dir.ts';
import {
  LogResetDriver, readResetDriverKind, ResetError, type NodeResetDriver, type ResetDriverKind, type ResetLog, type TaskJournalFiles,
} from '../io/reset-driver.ts';
import { watchdogSample } from './metrics-sample.ts';
import { EXIT_CONFIG, runCore, type RunHooks } from './run-core.ts';
import {
  heartbeatSupervisor, runSupervisor, takeSupervisedEnv, WATCHDOG_HEARTBEAT_TIMEOUT_MS, WATCHDOG_STOP_GRACE_MS, type SupervisedInfo,
} from './supervisor.ts';

/** Resets per node that may be pending at once: the one running and one behind it. A request
 *  arriving while one already waits is covered by it (the waiting reset leaves the node just as
 *  fresh), so it is only logged; a faulty pair of replicas cannot pile up work this way. */
export const MAX_PENDING_RESETS_PER_NODE = 2;

/** What a cluster reset needs from the watchdog daemon. */
export type ClusterResetContext = {
  cluster: Cluster;
  log: ResetLog;
  /** Aborted when the watchdog stops (`trine down` under way): start nothing. */
  stopping: AbortSignal;
  /** Feeds the task journals read from the nodes to the watchdog core (`restore.load`). */
  restore: (journals: TaskJournalFiles) => void;
  /** The replicas' journals the watchdog core kept (PROTOCOL §10.9), as of the reset's order:
   *  what a cluster of several hosts restores from, since it shares no disk. */
  kept: TaskJournalFiles;
  /** What those journals say an operator changed (PROTOCOL §10.12): the nodes added at run time,
   *  which a cluster of several hosts power-cycles too, and the removed ones it leaves off. */
  membership: MembershipChanges;
};

export type WatchdogHooks = RunHooks & {
  /** Builds the reset driver cluster.json chose (src/daemon/main.ts). `stopping` is aborted when the
   *  watchdog stops. Without it, resets are only logged. */
  makeResetDriver?: (kind: ResetDriverKind, cluster: Cluster, log: ResetLog, stopping: AbortSignal) => NodeResetDriver;
  /** Power-resets every node of a local cluster, as the watchdog core ordered (`reset.cluster`),
   *  when cluster.json's reset driver is `local` (with `log`, cluster resets are only logged).
   *  Called for one order at a time; rejects (with a ResetError, for its code) if it failed.
   *  Without it, cluster resets are only logged. */
  resetCluster?: (reason: string, ctx: ClusterResetContext) => Promise<unknown>;
};

type Feed = (make: (nowMs: number) => CoreInput) => void;

/** `trine scc`: in the process an operator (or `trine up`, or `trine scc run`) started, the
 *  watchdog's supervisor, which runs `command` — `trine scc` again — as its child; in that child,
 *  the watchdog. */
export function runSupervisedWatchdog(
  dir: string | undefined, hooks: WatchdogHooks, command: (dir: string) => { file: string; args: string[] },
): Promise<void> {
  const supervisor = takeSupervisedEnv();
  if (supervisor !== null) {
    heartbeatSupervisor();
    return runWatchdog(dir, hooks, supervisor);
  }
  return runSupervisor({
    dir, id: (cluster) => cluster.config.membership.scc, what: 'watchdog', command,
    heartbeatTimeoutMs: WATCHDOG_HEARTBEAT_TIMEOUT_MS, stopGraceMs: WATCHDOG_STOP_GRACE_MS,
  });
}

/** The watchdog itself; `supervisor`: what its supervisor told it, for status. */
export function runWatchdog(dir: string | undefined, hooks: WatchdogHooks = {}, supervisor: SupervisedInfo | null = null): Promise<void> {
  const kind = readResetDriverKind(paths.config(resolveClusterDir(dir)));
  if (!kind.ok) {
    process.stderr.write(`trine: ${kind.detail}; fix it or remove the field (default "local")\n`);
    process.exit(EXIT_CONFIG);
  }
  const stopping = new AbortController();
  let resets: Resets | null = null;
  let watchdog: ReturnType<typeof createWatchdog> | null = null;
  // The core's input feed, once the runtime is ready; journals found before that wait for it.
  let feed: Feed | null = null;
  const early: TaskJournalFiles[] = [];
  /** The journals the core handed over with its latest cluster reset order. */
  let kept: TaskJournalFiles = [];
  let membership: MembershipChanges = { added: [], removed: [] };
  const restore = (journals: TaskJournalFiles): void => {
    if (feed === null) early.push(journals);
    else feed((nowMs) => ({ type: 'restore.load', nowMs, journals }));
  };
  return runCore({
    dir,
    id: (cluster) => cluster.config.membership.scc,
    kind: 'watchdog',
    supervisor,
    makeCore: ({ cluster, entry, inc, signer, verifier, log: processLog, daemon }) => {
      const logger = processLog.logger;
      const log: ResetLog = (level, event, fields) => logger[level]({ event, ...fields });
      const driver = hooks.makeResetDriver?.(kind.value, cluster, log, stopping.signal) ?? new LogResetDriver(log);
      const hook = hooks.resetCluster;
      const clusterReset: ClusterReset = hook === undefined || kind.value === 'log'
        ? { runs: false, why: hook === undefined ? 'no cluster reset hook' : 'cluster.json resetDriver is "log"' }
        : { runs: true, reset: (reason) => hook(reason, { cluster, log, stopping: stopping.signal, restore, kept, membership }) };
      logger.info({
        event: 'reset.driver', driver: hooks.makeResetDriver === undefined ? 'log' : kind.value, clusterReset: clusterReset.runs ? kind.value : 'log',
      });
      resets = serializeResets(driver, clusterReset, log, stopping.signal);
      watchdog = createWatchdog({ id: entry.id, membership: cluster.config.membership, inc, signer, verifier, daemon });
      return watchdog;
    },
    sample: (nowMs) => (watchdog === null ? {} : watchdogSample(watchdog.status(nowMs), supervisor?.restarts ?? null)),
    onEffect: (effect, nowMs) => {
      if (effect.type === 'reset.node') resets?.node(effect.node, effect.rsn, effect.address);
      if (effect.type === 'reset.cluster') {
        kept = effect.journals;
        membership = effect.membership;
        resets?.cluster(effect.reason);
      }
      hooks.onEffect?.(effect, nowMs);
    },
    onReady: (ready) => {
      // Installed beside the runtime's own handlers (which stop the process): a reset under way
      // starts nothing new once `trine down` has begun.
      for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stopping.abort());
      feed = ready;
      for (const journals of early.splice(0)) restore(journals);
      hooks.onReady?.(ready);
    },
  });
}

export type ClusterReset = { runs: false; why: string } | { runs: true; reset: (reason: string) => Promise<unknown> };
/** `address`: a node added at run time's, as two replicas gave it (PROTOCOL §10.12); empty for
 *  the nodes of cluster.json. */
export type Resets = { node: (node: string, rsn: number, address?: string) => void; cluster: (reason: string) => void };

const errorFields = (e: unknown): { code: string; error: string } =>
  ({ code: e instanceof ResetError ? e.code : 'RESET_INTERNAL', error: e instanceof Error ? e.message : String(e) });

/** Runs `driver` for each node reset request, one at a time per node, at most
 *  MAX_PENDING_RESETS_PER_NODE pending per node; and cluster resets, one at a time, alone (see
 *  the header). Never throws. A failed reset is logged and not retried: the core orders a given
 *  (node, RSN) once (replicas re-sending it change nothing) and a cluster reset once until the
 *  restarted group re-arms it, and what failed — a process SIGKILL could not end, a process that
 *  could not be started — needs an operator. */
export function serializeResets(driver: NodeResetDriver, clusterReset: ClusterReset, log: ResetLog, stopping: AbortSignal): Resets {
  const chains = new Map<string, { tail: Promise<void>; pending: number }>();
  let clusterRunning: Promise<void> | null = null;

  const runNode = async (node: string, rsn: number, address: string, requestedAtMs: number): Promise<void> => {
    const startMs = performance.now();
    const waitedMs = Math.round(startMs - requestedAtMs);
    if (stopping.aborted || clusterRunning !== null) {
      log('warn', 'reset.skipped', { node, rsn, why: stopping.aborted ? 'the watchdog is stopping' : 'a cluster reset is under way' });
      return;
    }
    log('warn', 'reset.start', { node, rsn, waitedMs });
    try {
      await driver.reset(node, address);
      log('warn', 'reset.done', { node, rsn, durationMs: Math.round(performance.now() - startMs) });
    } catch (e) {
      log('error', 'reset.failed', { node, rsn, durationMs: Math.round(performance.now() - startMs), ...errorFields(e) });
    }
  };

  const runCluster = async (reset: (reason: string) => Promise<unknown>, reason: string): Promise<void> => {
    const requestedAtMs = performance.now();
    // A node reset under way would start its keeper after the cluster reset looked: let it end.
    await Promise.all([...chains.values()].map((c) => c.tail));
    if (stopping.aborted) {
      log('warn', 'reset.cluster.skipped', { reason, why: 'the watchdog is stopping' });
      return;
    }
    const startMs = performance.now();
    log('warn', 'reset.cluster.start', { reason, waitedMs: Math.round(startMs - requestedAtMs) });
    try {
      await reset(reason);
      log('warn', 'reset.cluster.done', { reason, durationMs: Math.round(performance.now() - startMs) });
    } catch (e) {
      log('error', 'reset.cluster.failed', { reason, durationMs: Math.round(performance.now() - startMs), ...errorFields(e) });
    }
  };

  return {
    node: (node, rsn, address = '') => {
      if (clusterRunning !== null) {
        log('info', 'reset.skipped', { node, rsn, why: 'a cluster reset is under way' });
        return;
      }
      const chain = chains.get(node) ?? { tail: Promise.resolve(), pending: 0 };
      if (chain.pending >= MAX_PENDING_RESETS_PER_NODE) {
        log('info', 'reset.coalesced', { node, rsn, pending: chain.pending });
        return;
      }
      chain.pending++;
      chains.set(node, chain);
      const requestedAtMs = performance.now();
      chain.tail = chain.tail.then(() => runNode(node, rsn, address, requestedAtMs)).finally(() => {
        chain.pending--;
        if (chain.pending === 0) chains.delete(node);
      });
    },
    // Logged at error level: the whole cluster restarts (spec §1.6 rules 2 and 3).
    cluster: (reason) => {
      const action = !clusterReset.runs ? `logged only (${clusterReset.why})`
        : stopping.aborted ? 'skipped (the watchdog is stopping)'
        : clusterRunning !== null ? 'coalesced (a cluster reset is under way and covers it)'
        : 'resetting every node';
      log('error', 'reset.cluster', { reason, action });
      if (!clusterReset.runs || stopping.aborted || clusterRunning !== null) return;
      clusterRunning = runCluster(clusterReset.reset, reason).finally(() => {
        clusterRunning = null;
      });
    },
  };
}
