// `trine keeper`: the Agent-Keeper (spec §1.4): a very small process that starts its node's
// agent as a child, watches its heartbeats over the IPC channel, and restarts it when it exits
// or when the heartbeats stop. The restarted agent is a new incarnation; it adopts the task
// processes that survived (src/daemon/agent.ts, PROTOCOL §8.6).
//
// Timing (spec §1.7 leaves the keeper's period and timeout open, [NOT IN TEXT]):
//   - the agent heartbeats every KEEPER_HEARTBEAT_MS (100 ms) from a timer, so a wedged event
//     loop stops them;
//   - silence for KEEPER_HEARTBEAT_TIMEOUT_MS (1 s, ten heartbeats) after the first heartbeat
//     means hung: SIGKILL (a hung process may ignore SIGTERM), then restart once it is gone;
//   - before the first heartbeat the agent is still loading (TypeScript through tsx costs
//     seconds on a busy host), so the first one may take KEEPER_FIRST_HEARTBEAT_MS;
//   - restarts back off from 100 ms, doubling to 2 s, so a crash loop does not burn the node;
//     the backoff resets once an agent has been up and heartbeating for 10 s;
//   - an agent that exits with EXIT_CONFIG (2) cannot start as configured (bad cluster dir,
//     key, id): restarting cannot help, so the keeper gives up with the same code and `trine up`
//     reports it.
// On SIGTERM/SIGINT it stops the agent (SIGTERM, SIGKILL after 1 s) and exits; task processes
// are not the keeper's business (`trine down` stops them from the procs files).
//
// The agent runs in its own process group (detached), so a signal to the keeper's group does
// not reach it twice, and the keeper alone decides how it is stopped. Its pid is recorded in
// `run/<id>.agent-pid` (not `.pid`: pid files name what `trine up` started, the keeper), so
// `trine down` finds an agent whose keeper died.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProcessId } from '../core/ports.ts';
import { isAlive, isClusterProcess, loadCluster, paths, processEntry } from '../io/cluster-dir.ts';
import { createProcessLog } from '../io/log.ts';
import { EXIT_CONFIG, EXIT_CRASH } from './run-core.ts';

/** The agent's heartbeat period to its keeper. */
export const KEEPER_HEARTBEAT_MS = 100;
/** Heartbeat silence after which the agent is taken as hung (ten periods: a GC pause or a busy
 *  moment on a loaded host costs one or two). */
export const KEEPER_HEARTBEAT_TIMEOUT_MS = 1_000;
/** How often the keeper looks at the heartbeats. */
export const KEEPER_CHECK_MS = 100;
/** Time allowed for the first heartbeat: starting a TypeScript process under load (see
 *  cli/up.ts UP_TIMEOUT_MS). */
export const KEEPER_FIRST_HEARTBEAT_MS = 30_000;
/** Restart backoff: first delay, and the cap it doubles up to. */
export const KEEPER_BACKOFF_MIN_MS = 100;
export const KEEPER_BACKOFF_MAX_MS = 2_000;
/** An agent up and heartbeating this long is healthy: the next restart starts from the minimum. */
export const KEEPER_HEALTHY_RESET_MS = 10_000;
/** Time the agent gets after SIGTERM before SIGKILL when the keeper stops. */
export const KEEPER_STOP_GRACE_MS = 1_000;
/** Time a stale agent (left by a keeper that died) gets to disappear after SIGKILL. */
const STALE_AGENT_WAIT_MS = 2_000;
const POLL_MS = 25;

/** What the agent sends its keeper over the IPC channel. */
export type KeeperMessage = { type: 'heartbeat' };

/** Where the keeper records its agent's pid (see the header). */
export const agentPidFile = (dir: string, id: ProcessId): string => join(paths.run(dir), `${id}.agent-pid`);

/** The recorded agent pid, or null. */
export function readAgentPid(dir: string, id: ProcessId): number | null {
  try {
    const text = readFileSync(agentPidFile(dir, id), 'utf8').trim();
    return /^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : null;
  } catch {
    return null;
  }
}

function writeAgentPid(dir: string, id: ProcessId, pid: number): void {
  const path = agentPidFile(dir, id);
  mkdirSync(paths.run(dir), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${pid}\n`);
  renameSync(tmp, path);
}

export const removeAgentPid = (dir: string, id: ProcessId): void => rmSync(agentPidFile(dir, id), { force: true });

export type KeeperOptions = {
  dir: string | undefined;
  id: ProcessId;
  /** How to start the agent (cli/daemons.ts: `trine agent --dir D --id aN`). */
  agentCommand: (dir: string, id: ProcessId) => { file: string; args: string[] };
};

const isHeartbeat = (m: unknown): boolean => typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'heartbeat';

/** Signal a process's group (it leads one: spawned detached), falling back to the pid. */
function signal(pid: number, sig: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, sig);
      return;
    } catch {
      // not a group leader, or already gone
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

  // An agent left behind by a keeper that died would run alongside the new one: stop it first.
  const stale = readAgentPid(dir, id);
  if (stale !== null && isClusterProcess(stale, dir, id)) {
    logger.warn({ event: 'agent.stale', agentPid: stale }, 'killing an agent left by an earlier keeper');
    signal(stale, 'SIGKILL');
    const deadline = now() + STALE_AGENT_WAIT_MS;
    while (isAlive(stale) && now() < deadline) await sleep(POLL_MS);
  }

  let child: ChildProcess | null = null;
  let childPid: number | null = null;
  let startedAtMs = 0;
  let lastBeatMs: number | null = null;
  let killedHung = false;
  let backoffMs = KEEPER_BACKOFF_MIN_MS;
  let restarts = 0;
  let restartTimer: NodeJS.Timeout | null = null;
  let stopping = false;

  const finish = (code: number, why: string): void => {
    clearInterval(checkTimer);
    if (restartTimer !== null) clearTimeout(restartTimer);
    removeAgentPid(dir, id);
    (code === 0 ? logger.info.bind(logger) : logger.error.bind(logger))({ event: 'exit', code, why, restarts }, why);
    log.flush();
    process.exit(code);
  };

  const onExit = (code: number | null, sig: NodeJS.Signals | null, error: string | null): void => {
    child = null;
    childPid = null;
    removeAgentPid(dir, id);
    if (stopping) return finish(0, 'stopped');
    if (code === EXIT_CONFIG) {
      logger.error({ event: 'agent.config', code }, 'the agent cannot start as configured; not restarting');
      return finish(EXIT_CONFIG, 'agent exited with a configuration error');
    }
    const delayMs = backoffMs;
    backoffMs = Math.min(backoffMs * 2, KEEPER_BACKOFF_MAX_MS);
    restarts += 1;
    const reason = killedHung ? 'heartbeats stopped' : error !== null ? `could not start: ${error}` : 'exited';
    logger.warn({ event: 'agent.restart', reason, code, signal: sig, delayMs, restarts }, `restarting the agent (${reason})`);
    restartTimer = setTimeout(() => {
      restartTimer = null;
      startAgent();
    }, delayMs);
  };

  const startAgent = (): void => {
    if (stopping) return;
    const { file, args } = opts.agentCommand(dir, id);
    const c = spawn(file, args, { detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child = c;
    startedAtMs = now();
    lastBeatMs = null;
    killedHung = false;
    let ended = false;
    c.on('message', (m: unknown) => {
      if (c !== child || !isHeartbeat(m)) return;
      lastBeatMs = now();
      if (backoffMs !== KEEPER_BACKOFF_MIN_MS && lastBeatMs - startedAtMs >= KEEPER_HEALTHY_RESET_MS) {
        backoffMs = KEEPER_BACKOFF_MIN_MS;
        logger.info({ event: 'agent.healthy', agentPid: childPid }, 'agent healthy: restart backoff reset');
      }
    });
    // 'error' without 'exit' is a spawn that never ran; 'exit' may follow an 'error' too.
    c.on('error', (e) => {
      if (ended || c.pid !== undefined) return;
      ended = true;
      onExit(null, null, e.message);
    });
    c.once('exit', (code, sig) => {
      if (ended) return;
      ended = true;
      onExit(code, sig, null);
    });
    if (c.pid !== undefined) {
      childPid = c.pid;
      writeAgentPid(dir, id, c.pid);
      logger.info({ event: 'agent.start', agentPid: c.pid, restarts }, 'agent started');
    }
  };

  const check = (): void => {
    if (child === null || childPid === null || killedHung || stopping) return;
    const silentMs = now() - (lastBeatMs ?? startedAtMs);
    const limitMs = lastBeatMs === null ? KEEPER_FIRST_HEARTBEAT_MS : KEEPER_HEARTBEAT_TIMEOUT_MS;
    if (silentMs <= limitMs) return;
    killedHung = true;
    logger.warn({ event: 'agent.unresponsive', agentPid: childPid, silentMs: Math.round(silentMs), firstHeartbeat: lastBeatMs === null }, 'agent heartbeats stopped: SIGKILL');
    signal(childPid, 'SIGKILL');
  };
  const checkTimer = setInterval(check, KEEPER_CHECK_MS);

  const stop = (sig: NodeJS.Signals): void => {
    if (stopping) {
      // A second signal: no more grace.
      if (childPid !== null) signal(childPid, 'SIGKILL');
      return finish(0, `received ${sig} twice`);
    }
    stopping = true;
    logger.info({ event: 'stop', signal: sig }, `received ${sig}: stopping the agent`);
    if (restartTimer !== null) clearTimeout(restartTimer);
    restartTimer = null;
    if (childPid === null) return finish(0, 'stopped');
    const pid = childPid;
    signal(pid, 'SIGTERM');
    setTimeout(() => {
      if (childPid === pid) {
        logger.warn({ event: 'agent.kill', agentPid: pid }, 'agent did not stop in time: SIGKILL');
        signal(pid, 'SIGKILL');
      }
    }, KEEPER_STOP_GRACE_MS);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('uncaughtException', (e) => finish(EXIT_CRASH, `uncaught exception: ${e.message}`));

  logger.info({ event: 'start', agent: id }, 'keeper starting');
  startAgent();
}

/** Every agent pid record in a cluster's run dir (for `trine down`). */
export function listAgentPids(dir: string): { id: ProcessId; pid: number | null }[] {
  const suffix = '.agent-pid';
  let names: string[];
  try {
    names = readdirSync(paths.run(dir));
  } catch {
    return [];
  }
  return names.filter((n) => n.endsWith(suffix)).sort().map((n) => {
    const id = n.slice(0, -suffix.length);
    return { id, pid: readAgentPid(dir, id) };
  });
}
