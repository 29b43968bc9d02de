// `trine keeper`: the Agent-Keeper (spec §1.4): a very small process that runs its node's agent
// as a child, watches its heartbeats over the IPC channel, and replaces it when it exits or when
// the heartbeats stop. The replacement is a new incarnation; it adopts the task processes that
// survived (src/daemon/proc-driver.ts, PROTOCOL §8.6).
//
// Warm standby. Starting a TypeScript process through tsx costs about a second, more than the
// group takes to declare a silent node failed (≈ 400 ms, PROTOCOL §8.4): a cold restart would
// always lose the node to a reset. So the keeper keeps a second `trine agent` loaded and waiting
// (standby mode, AGENT_STANDBY_ENV; it has no identity in the cluster until told `go`). When the
// active agent dies, the keeper sends the standby `go` at once: it takes its incarnation, reads
// the procs file and joins within tens of milliseconds. Then a new standby is loaded. Every
// agent, the first one too, starts this way: one path. `go` carries how many agents this keeper
// replaced (exit or hang): the keeper serves no metrics of its own, its agent shows them as
// `trine_keeper_restarts_total` (docs/OPERATIONS.md §9).
//
// Timing (spec §1.7 leaves the keeper's period and timeout open, [NOT IN TEXT]):
//   - the agent heartbeats every KEEPER_HEARTBEAT_MS (100 ms) from a timer, so a wedged event
//     loop stops them; it sends the first one at `go`;
//   - silence for KEEPER_HEARTBEAT_TIMEOUT_MS (1 s, ten heartbeats) means hung: SIGKILL (a hung
//     process may ignore SIGTERM); the standby is promoted once the hung one is gone, so two
//     incarnations never share the node's procs file;
//   - a standby has KEEPER_STANDBY_READY_MS to load (tsx on a busy host can take seconds);
//   - the first replacement is immediate; further ones within a crash loop back off from 100 ms,
//     doubling to 2 s, so a crash loop does not burn the node; the backoff resets once an agent
//     has been up and heartbeating for 10 s;
//   - an agent that exits with EXIT_CONFIG (2) cannot start as configured (bad cluster dir, key,
//     id): replacing it cannot help, so the keeper gives up with the same code and `trine up`
//     reports it;
//   - an agent that exits with EXIT_SHUTDOWN (4) stopped its node for `trine shutdown` or
//     `trine node remove` (PROTOCOL §10.11, §10.12): the keeper kills the standby and exits with
//     the same code.
// These rules are the watchdog's supervisor's too: both take them from src/daemon/supervisor.ts.
// On SIGTERM/SIGINT it kills the standby, stops the agent (SIGTERM, SIGKILL after 1 s) and exits
// once both are gone; task processes are not the keeper's business (`trine down` stops them from
// the procs files). A standby outlives a keeper killed with SIGKILL only until it notices its
// channel closed (src/daemon/agent.ts).
//
// Both children run in their own process groups (detached), so a signal to the keeper's group
// does not reach them twice, and the keeper alone decides how they are stopped. Their pids are
// recorded in `run/<id>.agent-pid` and `run/<id>.standby-pid` (src/io/run-records.ts; not
// `.pid`: pid files name what `trine up` started, the keeper), so `trine down` and the reset
// driver find children whose keeper died.
import { spawn, type ChildProcess } from 'node:child_process';
import type { ProcessId } from '../core/ports.ts';
import { isClusterProcess, loadCluster, processEntry } from '../io/cluster-dir.ts';
import { createProcessLog } from '../io/log.ts';
import {
  keeperChildPidFile, listKeeperChildPids, readKeeperChildPid, removeKeeperChildPid, signalGroup, tryRecord, writeKeeperChildPid,
  type KeeperChildRole,
} from '../io/run-records.ts';
import { EXIT_CONFIG, EXIT_CRASH, EXIT_SHUTDOWN } from './run-core.ts';
import {
  CHILD_LOAD_TIMEOUT_MS, createBackoff, exitVerdict, HEALTHY_RESET_MS, killStale, messageType, nextDelay, resetBackoff,
  RESTART_BACKOFF_MAX_MS, RESTART_BACKOFF_MIN_MS, stopGracefully, SUPERVISED_HEARTBEAT_MS, SUPERVISOR_CHECK_MS, type ChildHeartbeat,
} from './supervisor.ts';

/** The agent's heartbeat period to its keeper. */
export const KEEPER_HEARTBEAT_MS = SUPERVISED_HEARTBEAT_MS;
/** Heartbeat silence after which the agent is taken as hung (ten periods: a GC pause or a busy
 *  moment on a loaded host costs one or two). */
export const KEEPER_HEARTBEAT_TIMEOUT_MS = 1_000;
/** How often the keeper looks at the heartbeats. */
export const KEEPER_CHECK_MS = SUPERVISOR_CHECK_MS;
/** Time a standby gets to load and say it is ready. */
export const KEEPER_STANDBY_READY_MS = CHILD_LOAD_TIMEOUT_MS;
/** Pause between promoting a standby and loading the next one: loading costs a CPU-second,
 *  which the promoted agent should not compete with while it joins (tens of ms). */
export const KEEPER_STANDBY_DELAY_MS = 250;
/** Replacement backoff within a crash loop (src/daemon/supervisor.ts). */
export const KEEPER_BACKOFF_MIN_MS = RESTART_BACKOFF_MIN_MS;
export const KEEPER_BACKOFF_MAX_MS = RESTART_BACKOFF_MAX_MS;
/** An agent up and heartbeating this long is healthy: the next replacement is immediate again. */
export const KEEPER_HEALTHY_RESET_MS = HEALTHY_RESET_MS;
/** Time the agent gets after SIGTERM before SIGKILL when the keeper stops. */
export const KEEPER_STOP_GRACE_MS = 1_000;

/** The environment flag that starts `trine agent` as a standby (src/daemon/agent.ts). */
export const AGENT_STANDBY_ENV = 'TRINE_AGENT_STANDBY';

/** What an agent sends its keeper over the IPC channel. */
export type AgentToKeeper = ChildHeartbeat | { type: 'standby.ready' };
/** The agents this keeper replaced since it started, by why: the agent exited (or was killed by
 *  someone else), or its heartbeats stopped and the keeper killed it. */
export type KeeperRestarts = { exit: number; hang: number };
/** What the keeper sends a standby: become the agent now. `restarts` counts this promotion when
 *  it replaces an agent, so the agent's metrics show its keeper's restarts as the watchdog's
 *  show its supervisor's (docs/OPERATIONS.md §9, `trine_keeper_restarts_total`). */
export type KeeperToAgent = { type: 'go'; restarts: KeeperRestarts };

/** Bound on a restart count read from `go`: far more than a keeper's backoff (2 s at most
 *  between replacements) allows in years; a larger value is not a count. */
const MAX_KEEPER_RESTARTS = 2 ** 40;

const restartCount = (v: unknown): number => (Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= MAX_KEEPER_RESTARTS ? (v as number) : 0);

/** The keeper's `go` as its standby reads it: null for any other message. Total: a count it
 *  cannot read (a keeper of another release) reads as 0, never stops the promotion. */
export function readGo(m: unknown): KeeperToAgent | null {
  if (typeof m !== 'object' || m === null || (m as { type?: unknown }).type !== 'go') return null;
  const r: unknown = (m as { restarts?: unknown }).restarts;
  const o = typeof r === 'object' && r !== null ? r as Partial<Record<keyof KeeperRestarts, unknown>> : {};
  return { type: 'go', restarts: { exit: restartCount(o.exit), hang: restartCount(o.hang) } };
}

// The child pid records moved to src/io/run-records.ts; these names stay for existing importers.
export const agentPidFile = (dir: string, id: ProcessId): string => keeperChildPidFile(dir, id, 'agent');
export const readAgentPid = (dir: string, id: ProcessId): number | null => readKeeperChildPid(dir, id, 'agent');
export const removeAgentPid = (dir: string, id: ProcessId): void => removeKeeperChildPid(dir, id, 'agent');

export type KeeperOptions = {
  dir: string | undefined;
  id: ProcessId;
  /** How to start the agent (cli/daemons.ts: `trine agent --dir D --id aN`). */
  agentCommand: (dir: string, id: ProcessId) => { file: string; args: string[] };
};

/** One child process: a standby until promoted, then the agent. */
type Child = {
  proc: ChildProcess;
  pid: number;
  role: KeeperChildRole;
  spawnedAtMs: number;
  readyAtMs: number | null;
  promotedAtMs: number | null;
  lastBeatMs: number | null;
  killedHung: boolean;
};

export async function runKeeper(opts: KeeperOptions): Promise<void> {
  let dir: string;
  try {
    const cluster = loadCluster(opts.dir);
    const entry = processEntry(cluster, opts.id);
    if (entry.kind !== 'agent') throw new Error(`${opts.id} is a ${entry.kind}, not an agent: a keeper keeps an agent`);
    dir = cluster.dir;
  } catch (e) {
    process.stderr.write(`trine: ${(e as Error).message}\n`);
    process.exit(EXIT_CONFIG);
  }
  const id = opts.id;
  const log = createProcessLog(dir, `${id}-keeper`);
  const logger = log.logger;
  const now = (): number => performance.now();
  const ms = (x: number): number => Math.round(x);
  /** A record the keeper cannot write (a full disk) is logged; it never stops the keeper. */
  const record = (role: KeeperChildRole, pid: number | null): void => {
    const code = tryRecord(() => (pid === null ? removeKeeperChildPid(dir, id, role) : writeKeeperChildPid(dir, id, role, pid)));
    if (code !== null) logger.error({ event: 'record.write-failed', path: keeperChildPidFile(dir, id, role), code });
  };

  // Children left behind by a keeper that died would run alongside the new ones: stop them first.
  await killStale((['agent', 'standby'] as const).flatMap((role) => {
    const pid = readKeeperChildPid(dir, id, role);
    return pid === null || !isClusterProcess(pid, dir, id) ? [] : [{ role, pid }];
  }), logger);

  let active: Child | null = null;
  let standby: Child | null = null;
  /** An agent should run and none does: promote the standby as soon as it is ready. */
  let wantAgent = true;
  /** When the last active agent died (to log how long the replacement took). */
  let diedAtMs: number | null = null;
  const restartBackoff = createBackoff(KEEPER_BACKOFF_MIN_MS, KEEPER_BACKOFF_MAX_MS);
  const standbyBackoff = createBackoff(KEEPER_BACKOFF_MIN_MS, KEEPER_BACKOFF_MAX_MS);
  /** Agents replaced, by why: logged, and carried on `go` for the agent's metrics. */
  const restartsBy: KeeperRestarts = { exit: 0, hang: 0 };
  const restartsTotal = (): number => restartsBy.exit + restartsBy.hang;
  let restartTimer: NodeJS.Timeout | null = null;
  let standbyTimer: NodeJS.Timeout | null = null;
  let stopping = false;

  const clearTimers = (): void => {
    if (restartTimer !== null) clearTimeout(restartTimer);
    if (standbyTimer !== null) clearTimeout(standbyTimer);
    restartTimer = null;
    standbyTimer = null;
  };

  const finish = (code: number, why: string): void => {
    clearInterval(checkTimer);
    clearTimers();
    record('agent', null);
    record('standby', null);
    (code === 0 ? logger.info.bind(logger) : logger.error.bind(logger))({ event: 'exit', code, why, restarts: restartsTotal() }, why);
    log.flush();
    process.exit(code);
  };
  const finishIfStopped = (): void => {
    if (stopping && active === null && standby === null) finish(0, 'stopped');
  };

  const promote = (): void => {
    const c = standby;
    if (stopping || !wantAgent || active !== null || restartTimer !== null || c === null || c.readyAtMs === null) return;
    standby = null;
    active = c;
    wantAgent = false;
    c.role = 'agent';
    c.promotedAtMs = now();
    const go: KeeperToAgent = { type: 'go', restarts: { ...restartsBy } };
    // A standby that died meanwhile fails the send; its exit event then replaces it.
    c.proc.send(go, undefined, {}, () => {});
    record('agent', c.pid);
    record('standby', null);
    logger.info({
      event: 'agent.start', agentPid: c.pid, restarts: restartsTotal(), replaceMs: diedAtMs === null ? null : ms(c.promotedAtMs - diedAtMs),
    }, 'agent started (standby promoted)');
    standbyTimer = setTimeout(() => {
      standbyTimer = null;
      spawnStandby();
    }, KEEPER_STANDBY_DELAY_MS);
  };

  const onActiveExit = (c: Child, code: number | null, sig: NodeJS.Signals | null, error: string | null): void => {
    active = null;
    record('agent', null);
    if (stopping) return finishIfStopped();
    const verdict = exitVerdict('the agent', code);
    if (verdict.kind === 'give-up') {
      // Configuration: it cannot start as configured. Shutdown (PROTOCOL §10.11): the operator
      // stopped the cluster. Either way the standby goes with this keeper.
      if (verdict.code === EXIT_CONFIG) logger.error({ event: 'agent.config', code }, `${verdict.why}; not restarting`);
      if (standby !== null) standby.proc.kill('SIGKILL');
      return finish(verdict.code, verdict.why);
    }
    diedAtMs = now();
    wantAgent = true;
    restartsBy[c.killedHung ? 'hang' : 'exit'] += 1;
    const delayMs = nextDelay(restartBackoff);
    const reason = c.killedHung ? 'heartbeats stopped' : error !== null ? `could not start: ${error}` : 'exited';
    logger.warn({
      event: 'agent.restart', reason, code, signal: sig, delayMs, restarts: restartsTotal(), standbyReady: standby !== null && standby.readyAtMs !== null,
    }, `replacing the agent (${reason})`);
    // The replacement needs a standby now, not after the post-promotion pause.
    if (standby === null) {
      if (standbyTimer !== null) clearTimeout(standbyTimer);
      standbyTimer = null;
      spawnStandby();
    }
    if (delayMs === 0) return promote();
    restartTimer = setTimeout(() => {
      restartTimer = null;
      promote();
    }, delayMs);
  };

  const onStandbyExit = (c: Child, code: number | null, sig: NodeJS.Signals | null, error: string | null): void => {
    standby = null;
    record('standby', null);
    if (stopping) return finishIfStopped();
    // A standby has not started anything that could stop for good: only a configuration error
    // ends the keeper here.
    const verdict = exitVerdict('the standby agent', code);
    if (verdict.kind === 'give-up' && verdict.code !== EXIT_SHUTDOWN) {
      logger.error({ event: 'standby.config', code }, `${verdict.why}; giving up`);
      return finish(verdict.code, verdict.why);
    }
    const delayMs = nextDelay(standbyBackoff);
    logger.warn({
      event: 'standby.exit', standbyPid: c.pid, code, signal: sig, error, delayMs,
    }, `the standby agent ${error === null ? 'exited' : `could not start: ${error}`}; loading another`);
    if (standbyTimer !== null) clearTimeout(standbyTimer);
    standbyTimer = setTimeout(() => {
      standbyTimer = null;
      spawnStandby();
    }, delayMs);
  };

  const spawnStandby = (): void => {
    if (stopping || standby !== null) return;
    const { file, args } = opts.agentCommand(dir, id);
    const proc = spawn(file, args, {
      detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, [AGENT_STANDBY_ENV]: '1' },
    });
    const c: Child = {
      proc, pid: proc.pid ?? 0, role: 'standby', spawnedAtMs: now(), readyAtMs: null, promotedAtMs: null, lastBeatMs: null, killedHung: false,
    };
    let ended = false;
    const onEnd = (code: number | null, sig: NodeJS.Signals | null, error: string | null): void => {
      if (ended) return;
      ended = true;
      if (c === active) onActiveExit(c, code, sig, error);
      else if (c === standby) onStandbyExit(c, code, sig, error);
    };
    proc.on('message', (m: unknown) => {
      const type = messageType(m);
      if (type === 'heartbeat' && c === active) {
        c.lastBeatMs = now();
      } else if (type === 'standby.ready' && c === standby && c.readyAtMs === null) {
        c.readyAtMs = now();
        resetBackoff(standbyBackoff);
        logger.info({ event: 'standby.ready', standbyPid: c.pid, loadMs: ms(c.readyAtMs - c.spawnedAtMs) }, 'standby agent loaded');
        promote();
      }
    });
    // 'error' without 'exit' is a spawn that never ran; 'exit' may follow an 'error' too.
    proc.on('error', (e) => {
      if (proc.pid === undefined) onEnd(null, null, e.message);
    });
    proc.once('exit', (code, sig) => onEnd(code, sig, null));
    standby = c;
    if (proc.pid !== undefined) {
      record('standby', proc.pid);
      logger.info({ event: 'standby.start', standbyPid: proc.pid }, 'loading a standby agent');
    }
  };

  const check = (): void => {
    if (stopping) return;
    const t = now();
    const a = active;
    if (a !== null && !a.killedHung) {
      const silentMs = t - (a.lastBeatMs ?? a.promotedAtMs ?? t);
      if (silentMs > KEEPER_HEARTBEAT_TIMEOUT_MS) {
        a.killedHung = true;
        logger.warn({ event: 'agent.unresponsive', agentPid: a.pid, silentMs: ms(silentMs) }, 'agent heartbeats stopped: SIGKILL');
        signalGroup(a.pid, 'SIGKILL');
      } else if (restartBackoff.delayMs !== 0 && a.lastBeatMs !== null && t - (a.promotedAtMs ?? t) >= KEEPER_HEALTHY_RESET_MS) {
        resetBackoff(restartBackoff);
        logger.info({ event: 'agent.healthy', agentPid: a.pid }, 'agent healthy: restart backoff reset');
      }
    }
    const s = standby;
    if (s !== null && s.readyAtMs === null && !s.killedHung && t - s.spawnedAtMs > KEEPER_STANDBY_READY_MS) {
      s.killedHung = true;
      logger.warn({ event: 'standby.unresponsive', standbyPid: s.pid, loadingMs: ms(t - s.spawnedAtMs) }, 'standby agent did not load in time: SIGKILL');
      signalGroup(s.pid, 'SIGKILL');
    }
  };
  const checkTimer = setInterval(check, KEEPER_CHECK_MS);

  const stop = (sig: NodeJS.Signals): void => {
    if (stopping) {
      // A second signal: no more grace.
      for (const c of [active, standby]) if (c !== null) signalGroup(c.pid, 'SIGKILL');
      return finish(0, `received ${sig} twice`);
    }
    stopping = true;
    clearTimers();
    logger.info({ event: 'stop', signal: sig }, `received ${sig}: stopping the agent and its standby`);
    // The standby holds nothing yet: no grace needed.
    if (standby !== null) signalGroup(standby.pid, 'SIGKILL');
    const a = active;
    if (a !== null) {
      stopGracefully(a.pid, KEEPER_STOP_GRACE_MS, () => active === a, () => logger.warn({ event: 'agent.kill', agentPid: a.pid }, 'agent did not stop in time: SIGKILL'));
    }
    finishIfStopped();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('uncaughtException', (e) => finish(EXIT_CRASH, `uncaught exception: ${e.message}`));

  logger.info({ event: 'start', agent: id }, 'keeper starting');
  spawnStandby();
}

/** Every agent pid record in a cluster's run dir (for `trine down`). */
export function listAgentPids(dir: string): { id: ProcessId; pid: number | null }[] {
  return listKeeperChildPids(dir).filter((r) => r.role === 'agent').map(({ id, pid }) => ({ id, pid }));
}
