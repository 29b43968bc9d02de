// Supervising a daemon from a small parent process (issue 14 item 4): the rules the agents'
// keeper (src/daemon/keeper.ts) and the watchdog's supervisor share, and the watchdog's
// supervisor itself.
//
// The rules (spec §1.7 leaves them open, [NOT IN TEXT]; docs/OPERATIONS.md §6):
//   - a child that exits or is killed is replaced; the first replacement is immediate, further
//     ones within a crash loop back off from 100 ms, doubling to 2 s, so a crash loop does not
//     burn the host; the back-off resets once a child has been up and heartbeating for 10 s;
//   - exit EXIT_CONFIG (2): it cannot start as configured, and replacing it cannot help: the
//     supervisor gives up with the same code;
//   - exit EXIT_SHUTDOWN (4): it stopped on purpose (`trine shutdown`, PROTOCOL §10.11; a node
//     removed, §10.12): the supervisor exits with the same code and starts nothing again;
//   - the child heartbeats over the IPC channel from a timer, so a wedged event loop stops them;
//     silence past a timeout means hung: SIGKILL, then replaced;
//   - SIGTERM or SIGINT stops the child (SIGTERM, SIGKILL after a grace) and the supervisor
//     exits 0 once it is gone; a second signal SIGKILLs it at once.
//
// The watchdog's supervisor is `trine scc` (what `trine up` and `trine scc run` start). It runs
// the watchdog — `trine scc` again, with SUPERVISED_ENV set — as its one child, cold: a warm
// standby would save a second in which nothing waits on the watchdog (replicas resend their
// reset requests with every heartbeat and their task journals every 2 s, PROTOCOL §10.8–§10.9).
// Its heartbeat timeout is long (WATCHDOG_HEARTBEAT_TIMEOUT_MS): a watchdog stalls for seconds
// on an overloaded host, and killing it then would cost what it remembers (FAULT-MODEL). The
// child leads its own process group, so the supervisor alone decides how it is stopped, and it
// is recorded in `run/<id>.supervised-pid`: `trine down` finds it if the supervisor was killed,
// and a new supervisor stops it before starting its own. A child whose supervisor dies runs on.
import { spawn, type ChildProcess } from 'node:child_process';
import type { ProcessId } from '../core/ports.ts';
import type { DaemonReport } from '../core/status.ts';
import { isClusterProcess, loadCluster, type Cluster } from '../io/cluster-dir.ts';
import { createProcessLog, type Logger } from '../io/log.ts';
import { readSupervisedPid, recordSupervisedPid, signalGroup, supervisedPidFile, waitGone } from '../io/run-records.ts';
import { EXIT_CONFIG, EXIT_CRASH, EXIT_SHUTDOWN } from './run-core.ts';

/** A supervised child's heartbeat period. */
export const SUPERVISED_HEARTBEAT_MS = 100;
/** How often a supervisor looks at the heartbeats. */
export const SUPERVISOR_CHECK_MS = 100;
/** Replacement back-off within a crash loop: first delay, and the cap it doubles up to. */
export const RESTART_BACKOFF_MIN_MS = 100;
export const RESTART_BACKOFF_MAX_MS = 2_000;
/** A child up and heartbeating this long is healthy: the next replacement is immediate again. */
export const HEALTHY_RESET_MS = 10_000;
/** Time a child gets to load and send its first heartbeat: starting a TypeScript process under
 *  load (see cli/up.ts UP_TIMEOUT_MS). */
export const CHILD_LOAD_TIMEOUT_MS = 30_000;
/** Heartbeat silence after which the watchdog is taken as hung. Long: its own stalls on a loaded
 *  host (seconds, PROTOCOL §10.8) are survivable, a restart loses what it remembers. */
export const WATCHDOG_HEARTBEAT_TIMEOUT_MS = 10_000;
/** Time the watchdog gets after SIGTERM before SIGKILL: it closes its sockets within
 *  run-core's SHUTDOWN_GRACE_MS (1 s); `trine down` gives its supervisor DOWN_GRACE_MS (5 s). */
export const WATCHDOG_STOP_GRACE_MS = 2_000;
/** Time a stale child (left by a supervisor that died) gets to disappear after SIGKILL. */
export const STALE_CHILD_WAIT_MS = 2_000;

/** Set in a supervised child's environment: JSON SupervisedInfo. */
export const SUPERVISED_ENV = 'TRINE_SUPERVISED';

/** What a supervised daemon reports of its supervisor (`trine status`): `restarts`, the children
 *  the supervisor started before this one; `lastExit`, how the previous one ended ("killed by
 *  SIGKILL", "exited with code 70", "heartbeats stopped"), or null. */
export type SupervisedInfo = NonNullable<DaemonReport['supervisor']>;

/** A supervised child's message to its supervisor (an agent's to its keeper too). */
export type ChildHeartbeat = { type: 'heartbeat' };

export const messageType = (m: unknown): unknown => (typeof m === 'object' && m !== null ? (m as { type?: unknown }).type : undefined);

// ---- the shared rules ---------------------------------------------------------------------------

/** Replacement back-off within a crash loop: the delay to wait now, doubling from `minMs` to
 *  `maxMs`; 0 (immediate) until the first use and again after resetBackoff. */
export type Backoff = { delayMs: number; readonly minMs: number; readonly maxMs: number };

export function createBackoff(minMs: number, maxMs: number): Backoff {
  if (!(minMs > 0 && maxMs >= minMs)) throw new RangeError(`back-off ${minMs}..${maxMs} ms`);
  return { delayMs: 0, minMs, maxMs };
}

/** The delay to wait before this replacement; the next one waits longer. */
export function nextDelay(b: Backoff): number {
  const now = b.delayMs;
  b.delayMs = Math.min(Math.max(b.minMs, b.delayMs * 2), b.maxMs);
  return now;
}

export function resetBackoff(b: Backoff): void {
  b.delayMs = 0;
}

/** What a child's exit means to its supervisor. */
export type ExitVerdict = { kind: 'replace' } | { kind: 'give-up'; code: number; why: string };

export function exitVerdict(what: string, code: number | null): ExitVerdict {
  if (code === EXIT_CONFIG) return { kind: 'give-up', code, why: `${what} exited with a configuration error` };
  if (code === EXIT_SHUTDOWN) return { kind: 'give-up', code, why: `${what} stopped for good (cluster shutdown or node removed)` };
  return { kind: 'replace' };
}

/** "killed by SIGKILL", "exited with code 70", "could not start: …" */
export function describeExit(code: number | null, signal: NodeJS.Signals | null, error: string | null): string {
  if (error !== null) return `could not start: ${error}`;
  return signal !== null ? `killed by ${signal}` : `exited with code ${code ?? '?'}`;
}

/** SIGTERM to `pid`'s group; SIGKILL after `graceMs` if `running()` still says so. */
export function stopGracefully(pid: number, graceMs: number, running: () => boolean, onKill: () => void): void {
  signalGroup(pid, 'SIGTERM');
  setTimeout(() => {
    if (!running()) return;
    onKill();
    signalGroup(pid, 'SIGKILL');
  }, graceMs);
}

/** SIGKILLs the children a supervisor that died left behind (`pids`, already checked to be the
 *  cluster's) and waits until they are gone. */
export async function killStale(pids: readonly { role: string; pid: number }[], logger: Logger): Promise<void> {
  for (const { role, pid } of pids) {
    logger.warn({ event: `${role}.stale`, pid }, `killing the ${role} a dead supervisor left running`);
    signalGroup(pid, 'SIGKILL');
  }
  await waitGone(pids.map((p) => p.pid), STALE_CHILD_WAIT_MS);
}

// ---- the child's side ---------------------------------------------------------------------------

/** In a supervised child: what its supervisor said (and not inherited by anything the child
 *  starts), or null when not supervised. Total: a value it cannot read still means supervised. */
export function takeSupervisedEnv(): SupervisedInfo | null {
  const text = process.env[SUPERVISED_ENV];
  if (text === undefined) return null;
  delete process.env[SUPERVISED_ENV];
  try {
    const v = JSON.parse(text) as Partial<SupervisedInfo>;
    const restarts = Number.isSafeInteger(v.restarts) && (v.restarts as number) >= 0 ? (v.restarts as number) : 0;
    return { restarts, lastExit: typeof v.lastExit === 'string' ? v.lastExit.slice(0, 200) : null };
  } catch {
    return { restarts: 0, lastExit: null };
  }
}

/** Under a supervisor (an IPC channel exists), say every SUPERVISED_HEARTBEAT_MS that this event
 *  loop still turns: from a timer, so a wedged loop stops them. Losing the supervisor is no
 *  reason to stop: a send on a closed channel is reported to its callback, not thrown. */
export function heartbeatSupervisor(): void {
  if (typeof process.send !== 'function') return;
  const beat = (): void => {
    if (process.connected) process.send?.({ type: 'heartbeat' } satisfies ChildHeartbeat, undefined, {}, () => {});
  };
  beat();
  const timer = setInterval(beat, SUPERVISED_HEARTBEAT_MS);
  timer.unref();
  process.once('disconnect', () => clearInterval(timer));
  // The channel alone must not keep the child alive.
  process.channel?.unref();
}

// ---- the supervisor -----------------------------------------------------------------------------

export type SupervisorOptions = {
  dir: string | undefined;
  /** The supervised daemon's id in the cluster (its records and log are named by it). */
  id: (cluster: Cluster) => ProcessId;
  /** What it is, for the log: "watchdog". */
  what: string;
  /** How to start it (cli/daemons.ts: `trine scc --dir D`). */
  command: (dir: string) => { file: string; args: string[] };
  heartbeatTimeoutMs: number;
  stopGraceMs: number;
};

type Child = { proc: ChildProcess; pid: number; startedAtMs: number; lastBeatMs: number | null; killedHung: boolean };

/** Runs `opts.command` as a supervised child until a signal, exit 2 or exit 4 (see the header).
 *  Logs to `logs/<id>-supervisor.log`. */
export async function runSupervisor(opts: SupervisorOptions): Promise<void> {
  let dir: string;
  let id: ProcessId;
  try {
    const cluster = loadCluster(opts.dir);
    dir = cluster.dir;
    id = opts.id(cluster);
  } catch (e) {
    process.stderr.write(`trine: ${(e as Error).message}\n`);
    process.exit(EXIT_CONFIG);
  }
  const log = createProcessLog(dir, `${id}-supervisor`);
  const logger = log.logger;
  const now = (): number => performance.now();
  const record = (pid: number | null): void => {
    const code = recordSupervisedPid(dir, id, pid);
    if (code !== null) logger.error({ event: 'record.write-failed', path: supervisedPidFile(dir, id), code });
  };

  const stale = readSupervisedPid(dir, id);
  if (stale !== null && isClusterProcess(stale, dir, id)) await killStale([{ role: opts.what, pid: stale }], logger);

  const backoff = createBackoff(RESTART_BACKOFF_MIN_MS, RESTART_BACKOFF_MAX_MS);
  let child: Child | null = null;
  let restarts = 0;
  let lastExit: string | null = null;
  let restartTimer: NodeJS.Timeout | null = null;
  let stopping = false;

  const finish = (code: number, why: string): void => {
    clearInterval(checkTimer);
    if (restartTimer !== null) clearTimeout(restartTimer);
    // A child still running (the supervisor itself failed) keeps its record, for `trine down`.
    if (child === null) record(null);
    (code === 0 ? logger.info.bind(logger) : logger.error.bind(logger))({ event: 'exit', code, why, restarts }, why);
    log.flush();
    process.exit(code);
  };

  const onExit = (c: Child, code: number | null, signal: NodeJS.Signals | null, error: string | null): void => {
    child = null;
    record(null);
    if (stopping) return finish(0, 'stopped');
    const verdict = exitVerdict(`the ${opts.what}`, code);
    if (verdict.kind === 'give-up') return finish(verdict.code, verdict.why);
    restarts += 1;
    lastExit = c.killedHung ? 'heartbeats stopped' : describeExit(code, signal, error);
    const delayMs = nextDelay(backoff);
    logger.warn({ event: 'child.restart', what: opts.what, reason: lastExit, code, signal, delayMs, restarts }, `restarting the ${opts.what} (${lastExit})`);
    restartTimer = setTimeout(start, delayMs);
  };

  function start(): void {
    restartTimer = null;
    if (stopping) return;
    const { file, args } = opts.command(dir);
    const info: SupervisedInfo = { restarts, lastExit };
    const proc = spawn(file, args, { detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, [SUPERVISED_ENV]: JSON.stringify(info) } });
    const c: Child = { proc, pid: proc.pid ?? 0, startedAtMs: now(), lastBeatMs: null, killedHung: false };
    child = c;
    let ended = false;
    const onEnd = (code: number | null, signal: NodeJS.Signals | null, error: string | null): void => {
      if (ended) return;
      ended = true;
      onExit(c, code, signal, error);
    };
    proc.on('message', (m: unknown) => {
      if (messageType(m) === 'heartbeat') c.lastBeatMs = now();
    });
    // 'error' without 'exit' is a spawn that never ran; 'exit' may follow an 'error' too.
    proc.on('error', (e) => {
      if (proc.pid === undefined) onEnd(null, null, e.message);
    });
    proc.once('exit', (code, signal) => onEnd(code, signal, null));
    if (proc.pid === undefined) return;
    record(proc.pid);
    logger.info({ event: 'child.start', what: opts.what, childPid: proc.pid, restarts }, `${opts.what} started`);
  }

  const check = (): void => {
    const c = child;
    if (stopping || c === null || c.killedHung) return;
    const t = now();
    const silentMs = c.lastBeatMs === null ? t - c.startedAtMs : t - c.lastBeatMs;
    if (silentMs > (c.lastBeatMs === null ? CHILD_LOAD_TIMEOUT_MS : opts.heartbeatTimeoutMs)) {
      c.killedHung = true;
      logger.warn({ event: 'child.unresponsive', what: opts.what, childPid: c.pid, silentMs: Math.round(silentMs) }, `${opts.what} heartbeats stopped: SIGKILL`);
      signalGroup(c.pid, 'SIGKILL');
    } else if (backoff.delayMs !== 0 && c.lastBeatMs !== null && t - c.startedAtMs >= HEALTHY_RESET_MS) {
      resetBackoff(backoff);
      logger.info({ event: 'child.healthy', what: opts.what, childPid: c.pid }, `${opts.what} healthy: restart back-off reset`);
    }
  };
  const checkTimer = setInterval(check, SUPERVISOR_CHECK_MS);

  const stop = (signal: NodeJS.Signals): void => {
    const c = child;
    if (stopping) {
      if (c !== null) signalGroup(c.pid, 'SIGKILL');
      return finish(0, `received ${signal} twice`);
    }
    stopping = true;
    logger.info({ event: 'stop', signal }, `received ${signal}: stopping the ${opts.what}`);
    if (c === null) return finish(0, 'stopped');
    stopGracefully(c.pid, opts.stopGraceMs, () => child === c, () => logger.warn({ event: 'child.kill', childPid: c.pid }, `${opts.what} did not stop in time: SIGKILL`));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('uncaughtException', (e) => finish(EXIT_CRASH, `uncaught exception: ${e.message}`));

  logger.info({ event: 'start', what: opts.what, id }, `supervisor of the ${opts.what} starting`);
  start();
}
