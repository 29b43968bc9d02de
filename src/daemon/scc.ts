// `trine scc`: runs the watchdog (the paper's spacecraft control computer, spec §1.6) — the
// watchdog core on the shared daemon runtime, listening for replica heartbeats — and executes
// the core's `reset.node` effects with a node reset driver (src/io/reset-driver.ts; PROTOCOL
// §8.4 step 5). Resets of one node run one at a time, in order; resets of different nodes run
// side by side. Each is logged when it starts, ends or fails, with its duration. A cluster
// reset (spec §1.6 rules 2 and 3) is logged at error level and handed to `hooks.resetCluster`.
import { createWatchdog } from '../core/watchdog.ts';
import { paths, resolveClusterDir, type Cluster } from '../io/cluster-dir.ts';
import { createProcessLog } from '../io/log.ts';
import {
  LogResetDriver, readResetDriverKind, ResetError, type NodeResetDriver, type ResetDriverKind, type ResetLog,
} from '../io/reset-driver.ts';
import { EXIT_CONFIG, runCore, type RunHooks } from './run-core.ts';

/** Resets per node that may be pending at once: the one running and one behind it. A request
 *  arriving while one already waits is covered by it (the waiting reset leaves the node just as
 *  fresh), so it is only logged; a faulty pair of replicas cannot pile up work this way. */
export const MAX_PENDING_RESETS_PER_NODE = 2;

export type WatchdogHooks = RunHooks & {
  /** Builds the reset driver cluster.json chose (cli/daemons.ts). `stopping` is aborted when the
   *  watchdog stops. Without it, resets are only logged. */
  makeResetDriver?: (kind: ResetDriverKind, cluster: Cluster, log: ResetLog, stopping: AbortSignal) => NodeResetDriver;
  /** Power-resets every node of the cluster, as the watchdog core ordered (`reset.cluster`).
   *  Called once per order; the core does not order another until the restarted group's
   *  heartbeats re-arm it. Without it, cluster resets are only logged. */
  resetCluster?: (reason: string) => void | Promise<void>;
};

export function runWatchdog(dir: string | undefined, hooks: WatchdogHooks = {}): Promise<void> {
  const kind = readResetDriverKind(paths.config(resolveClusterDir(dir)));
  if (!kind.ok) {
    process.stderr.write(`trine: ${kind.detail}; fix it or remove the field (default "local")\n`);
    process.exit(EXIT_CONFIG);
  }
  const stopping = new AbortController();
  let requestReset: ((node: string, rsn: number) => void) | null = null;
  let log: ResetLog | null = null;
  return runCore({
    dir,
    id: (cluster) => cluster.config.membership.scc,
    kind: 'watchdog',
    makeCore: ({ cluster, entry, inc, signer, verifier }) => {
      const logger = createProcessLog(cluster.dir, entry.id).logger;
      const resetLog: ResetLog = (level, event, fields) => logger[level]({ event, ...fields });
      log = resetLog;
      const driver = hooks.makeResetDriver?.(kind.value, cluster, resetLog, stopping.signal) ?? new LogResetDriver(resetLog);
      logger.info({ event: 'reset.driver', driver: hooks.makeResetDriver === undefined ? 'log' : kind.value });
      requestReset = serializeResets(driver, resetLog, stopping.signal);
      return createWatchdog({ id: entry.id, membership: cluster.config.membership, inc, signer, verifier });
    },
    onEffect: (effect, nowMs) => {
      if (effect.type === 'reset.node') requestReset?.(effect.node, effect.rsn);
      if (effect.type === 'reset.cluster' && log !== null) resetCluster(hooks.resetCluster, effect.reason, log, stopping.signal);
      hooks.onEffect?.(effect, nowMs);
    },
    onReady: (feed) => {
      // Installed beside the runtime's own handlers (which stop the process): a reset under way
      // starts nothing new once `trine down` has begun.
      for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stopping.abort());
      hooks.onReady?.(feed);
    },
  });
}

/** Logs the core's cluster reset order at error level and runs the hook, if any. Never throws:
 *  a failed hook is logged (an operator must restart the cluster), and the core goes on. */
function resetCluster(hook: WatchdogHooks['resetCluster'], reason: string, log: ResetLog, stopping: AbortSignal): void {
  const action = hook === undefined ? 'logged only (no cluster reset hook)' : stopping.aborted ? 'skipped (the watchdog is stopping)' : 'resetting every node';
  log('error', 'reset.cluster', { reason, action });
  if (hook === undefined || stopping.aborted) return;
  const failed = (e: unknown): void => log('error', 'reset.cluster.failed', { reason, error: e instanceof Error ? e.message : String(e) });
  try {
    Promise.resolve(hook(reason)).catch(failed);
  } catch (e) {
    failed(e);
  }
}

/** Runs `driver` for each request, one at a time per node, at most MAX_PENDING_RESETS_PER_NODE
 *  pending per node. Never throws. A failed reset is logged and not retried: the core orders a
 *  given (node, RSN) once (replicas re-sending it change nothing), and what failed — a process
 *  SIGKILL could not end, a keeper that could not be started — needs an operator. */
function serializeResets(driver: NodeResetDriver, log: ResetLog, stopping: AbortSignal): (node: string, rsn: number) => void {
  const chains = new Map<string, { tail: Promise<void>; pending: number }>();
  const run = async (node: string, rsn: number, requestedAtMs: number): Promise<void> => {
    const startMs = performance.now();
    const waitedMs = Math.round(startMs - requestedAtMs);
    if (stopping.aborted) {
      log('warn', 'reset.skipped', { node, rsn, why: 'the watchdog is stopping' });
      return;
    }
    log('warn', 'reset.start', { node, rsn, waitedMs });
    try {
      await driver.reset(node);
      log('warn', 'reset.done', { node, rsn, durationMs: Math.round(performance.now() - startMs) });
    } catch (e) {
      log('error', 'reset.failed', {
        node, rsn, durationMs: Math.round(performance.now() - startMs), code: e instanceof ResetError ? e.code : 'RESET_INTERNAL', error: (e as Error).message,
      });
    }
  };
  return (node, rsn) => {
    const chain = chains.get(node) ?? { tail: Promise.resolve(), pending: 0 };
    if (chain.pending >= MAX_PENDING_RESETS_PER_NODE) {
      log('info', 'reset.coalesced', { node, rsn, pending: chain.pending });
      return;
    }
    chain.pending++;
    chains.set(node, chain);
    const requestedAtMs = performance.now();
    chain.tail = chain.tail.then(() => run(node, rsn, requestedAtMs)).finally(() => {
      chain.pending--;
      if (chain.pending === 0) chains.delete(node);
    });
  };
}
