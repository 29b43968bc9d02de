// The Agent's real Spawner: starts and kills task processes over node:child_process (issue 3
// item 2) and turns what the OS says into the `os.*` events FsmAgentProc consumes
// (fsm/fsm-agent-proc.ts: os.spawned, os.forkFailed, os.exited). It executes the machine's
// `spawnProcess` / `killProcess` actions; it owns no protocol rule.
//
// What it does NOT decide: whether an exit was normal or a crash. It reports the raw
// `{ code, signal }` once; FsmAgentProc applies `classifyExit` (together with whether the
// process disconnected cleanly, which the Agent's pipe layer reports, not this file).
//
// Guarantees, per spawnProcess call:
//   - exactly one terminal event: `os.forkFailed` (the process never ran) or `os.exited`
//     (it ran and is gone); `os.spawned` precedes `os.exited` and never accompanies forkFailed.
//     Node may fire 'error' then 'close' for a failed exec (ENOENT, EACCES); only the first
//     terminal outcome is reported, and a failed exec never produces os.exited.
//   - `on` is never called synchronously from spawnProcess (the FSM driver is mid-step when it
//     calls us), and spawnProcess never throws for a bad spec: every problem — missing
//     executable, EACCES, missing or relative cwd, unsafe taskId, bad env key, unwritable log
//     dir — is an `os.forkFailed` whose text starts "spawn failed: <CODE> …".
//   - every listener and the ChildProcess are released when the terminal event is reported
//     (`trackedCount` returns to 0).
//
// Process group: `detached: true` makes the child call setsid() before exec, so it leads a new
// session and process group whose id is its pid; killProcess signals `-pid`, reaching every
// descendant that did not leave the group. Processes are not killed when the Agent exits: a
// keeper restarts the Agent, which re-synchronizes with the processes still running.
//
// Environment — the choice: the child gets a minimal, explicit environment, NOT the Agent's.
// It is exactly `spec.env` plus PATH copied from the Agent (so a bare command name resolves as
// it would for the operator, and child scripts can find their tools); a PATH in `spec.env`
// wins. Nothing else leaks from the Agent (its keys, TRINE_* settings, HOME, proxies…), so a
// task runs the same on every node whatever the Agent was started with.
//
// Output: stdin is /dev/null; stdout and stderr are appended to `<logDir>/<taskId>/<vpid>.out`
// and `.err`. The files are opened synchronously before spawn and handed to the child as its
// fds 1 and 2, so nothing passes through the Agent and nothing is lost if the Agent dies; a
// restarted VPID appends to the same files. The Agent opens them, so a task user needs no
// access to the log directory: the directories are 0700 and the files 0600, the daemons' own.
//
// The task user (issue 13 item 6; cluster.json `taskUser`): tasks must not touch Trine's
// secrets, so they run as an unprivileged user, not as the daemons' (root on a real node). The
// name is resolved once to a uid and gid with `id` (so NSS users work, not only /etc/passwd);
// an Agent running as root passes them to spawn(), which drops every supplementary group,
// then sets the gid and the uid before exec, so the child holds no capability and no group of
// ours: it cannot read the 0700/0600 keys and records, nor signal the daemons (EPERM). An Agent
// that is not root cannot switch users; a taskUser other than its own fails every spawn with
// TASK_USER_DENIED rather than running tasks with the daemons' rights. A name with no such user
// is TASK_USER_UNKNOWN. The working directory: Node changes into it before it drops privileges,
// so a directory the task user may not enter would be entered all the same and then be
// unreadable; the search (x) permission of the task user on `cwd` is checked first instead
// (EACCES), from the mode bits (ACLs are not consulted). The executable must be executable by
// the task user (else EACCES at exec).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { assert } from '../base/result.ts';
import type { KillSignal, SpawnSpec, Spawner, SpawnerEvent } from '../core/ports.ts';
import { isUserName } from './cluster-dir.ts';
import { mkdirPrivate, openPrivate } from './private-files.ts';
import { trace, tracing } from './trace.ts';

/** Where a process's stdout and stderr go. */
export function processLogPaths(logDir: string, taskId: string, vpid: number): { out: string; err: string } {
  const dir = join(logDir, taskId);
  return { out: join(dir, `${vpid}.out`), err: join(dir, `${vpid}.err`) };
}

/** Stable codes of the spawn failures this file finds itself (besides errno codes). */
export type SpawnErrorCode = 'EINVAL' | 'ENOTDIR' | 'EACCES' | 'TASK_USER_UNKNOWN' | 'TASK_USER_DENIED' | (string & {});

/** A spec problem found before spawning: a stable code and the operator-facing text, reported
 *  as the `os.forkFailed` "spawn failed: <CODE> …". */
export class SpawnError extends Error {
  override readonly name = 'SpawnError';
  constructor(
    readonly code: SpawnErrorCode,
    detail: string,
  ) {
    super(`spawn failed: ${code} ${detail}`);
  }
}

export type UserIds = { uid: number; gid: number };

/** The uid and primary gid of user `name`, or null when there is no such user. Runs `id`, so
 *  users from any NSS source resolve. Throws only when `id` itself cannot run. */
export function lookupUser(name: string): UserIds | null {
  if (!isUserName(name)) return null;
  const ask = (flag: '-u' | '-g'): number | null => {
    try {
      const out = execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      return /^[0-9]+$/.test(out) ? Number(out) : null;
    } catch (error) {
      if (typeof (error as { status?: unknown }).status === 'number') return null; // id ran: no such user
      throw error;
    }
  };
  const uid = ask('-u');
  const gid = uid === null ? null : ask('-g');
  return uid === null || gid === null ? null : { uid, gid };
}

export type SpawnerOptions = {
  /** Run every task as this user (cluster.json `taskUser`); absent: as the Agent's own user. */
  readonly taskUser?: string;
  /** How a user name resolves (tests); lookupUser by default. */
  readonly lookup?: (name: string) => UserIds | null;
};

const errnoCode = (error: unknown): string =>
  typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string'
    ? (error as { code: string }).code
    : 'EUNKNOWN';

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The task id names a log directory, so it must be one plain path segment. */
function checkSpec(spec: SpawnSpec): void {
  const { taskId, vpid, file, cwd, env, args } = spec;
  if (!Number.isSafeInteger(vpid) || vpid < 0) throw new SpawnError('EINVAL', `vpid ${String(vpid)} is not a non-negative integer`);
  if (taskId === '' || taskId === '.' || taskId === '..' || /[/\\\0]/.test(taskId)) {
    throw new SpawnError('EINVAL', `task id ${JSON.stringify(taskId)} cannot name a log directory`);
  }
  if (file === '' || file.includes('\0')) throw new SpawnError('EINVAL', `executable ${JSON.stringify(file)} is not a file name`);
  if (args.some((a) => a.includes('\0'))) throw new SpawnError('EINVAL', `an argument of ${file} contains a NUL byte`);
  for (const [key, value] of Object.entries(env)) {
    if (key === '' || key.includes('=') || key.includes('\0') || value.includes('\0')) {
      throw new SpawnError('EINVAL', `environment variable ${JSON.stringify(key)} is not valid`);
    }
  }
  // A relative cwd would depend on where the Agent happened to start; a missing one would make
  // Node report ENOENT against the executable, which misleads the operator. Checked here.
  if (!isAbsolute(cwd)) throw new SpawnError('EINVAL', `cwd ${JSON.stringify(cwd)} is not an absolute path`);
  let isDirectory: boolean;
  try {
    isDirectory = statSync(cwd).isDirectory();
  } catch (error) {
    throw new SpawnError(errnoCode(error), `cwd ${cwd} (working directory not accessible)`);
  }
  if (!isDirectory) throw new SpawnError('ENOTDIR', `cwd ${cwd} (not a directory)`);
}

/** The child's environment: `spec.env` plus the Agent's PATH (see the header). */
function childEnv(env: Record<string, string>): Record<string, string> {
  const path = process.env['PATH'];
  return path === undefined ? { ...env } : { PATH: path, ...env };
}

/** Opens (creating dirs) the two log files for appending; closes what it opened on failure. */
function openLogs(spec: SpawnSpec): { outFd: number; errFd: number } {
  const paths = processLogPaths(spec.logDir, spec.taskId, spec.vpid);
  let outFd: number | null = null;
  try {
    // Private, whatever the umask: the output may hold the task's secrets (issue 14 item 5).
    mkdirPrivate(join(spec.logDir, spec.taskId));
    mkdirPrivate(spec.logDir); // made above if missing; closed here if an older release left it open
    outFd = openPrivate(paths.out, 'a');
    const errFd = openPrivate(paths.err, 'a');
    return { outFd, errFd };
  } catch (error) {
    if (outFd !== null) closeSync(outFd);
    throw new SpawnError(errnoCode(error), `cannot open log files under ${join(spec.logDir, spec.taskId)}: ${errorText(error)}`);
  }
}

/** The task user's search permission on `cwd` (see the header), from the mode bits alone: the
 *  child has no supplementary group (spawn drops them), so owner, then group, then other. */
function checkCwdFor(user: UserIds & { name: string }, cwd: string): void {
  const st = statSync(cwd);
  const bits = st.uid === user.uid ? (st.mode >> 6) & 7 : st.gid === user.gid ? (st.mode >> 3) & 7 : st.mode & 7;
  if ((bits & 1) === 0) {
    throw new SpawnError('EACCES', `cwd ${cwd} (the task user ${user.name} may not enter it: choose a --cwd it can read, or chmod o+x it)`);
  }
}

/** Spawner over node:child_process. One instance per Agent. */
export class ChildProcessSpawner implements Spawner {
  /** Children whose terminal event has not been reported yet. */
  private readonly live = new Set<ChildProcess>();
  private readonly taskUser: string | null;
  private readonly lookup: (name: string) => UserIds | null;
  /** The task user's ids, once resolved (a failed lookup is tried again at the next spawn). */
  private resolved: UserIds | null = null;

  constructor(opts: SpawnerOptions = {}) {
    this.taskUser = opts.taskUser ?? null;
    this.lookup = opts.lookup ?? lookupUser;
  }

  /** The uid and gid to start tasks with, or null to start them as the Agent's own user. */
  private identity(): (UserIds & { name: string }) | null {
    const name = this.taskUser;
    if (name === null) return null;
    if (this.resolved === null) {
      let ids: UserIds | null;
      try {
        ids = this.lookup(name);
      } catch (error) {
        throw new SpawnError('TASK_USER_UNKNOWN', `cannot look up the task user ${name}: ${errorText(error)}`);
      }
      if (ids === null) {
        throw new SpawnError('TASK_USER_UNKNOWN', `the task user ${name} does not exist on this node: create it (e.g. useradd --system ${name}) or change taskUser in cluster.json`);
      }
      this.resolved = ids;
    }
    const me = typeof process.getuid === 'function' ? process.getuid() : null;
    if (me === this.resolved.uid) return null; // already that user: nothing to switch
    if (me !== 0) {
      throw new SpawnError('TASK_USER_DENIED', `the agent runs as uid ${String(me)}, not root, so it cannot start tasks as ${name} (uid ${this.resolved.uid}): run the node daemons as root, or make taskUser the agent's own user`);
    }
    return { name, ...this.resolved };
  }

  /** Processes started and not yet reported terminal (0 once all have ended: no leaks). */
  get trackedCount(): number {
    return this.live.size;
  }

  spawnProcess(spec: SpawnSpec, on: (event: SpawnerEvent) => void): number | null {
    let fds: { outFd: number; errFd: number } | null = null;
    let child: ChildProcess;
    try {
      checkSpec(spec);
      const user = this.identity();
      if (user !== null) checkCwdFor(user, spec.cwd);
      fds = openLogs(spec);
      if (tracing()) trace(`spawn.call ${spec.taskId}/${spec.vpid}`);
      child = spawn(spec.file, spec.args, {
        cwd: spec.cwd,
        env: childEnv(spec.env),
        detached: true,
        stdio: ['ignore', fds.outFd, fds.errFd],
        ...(user === null ? {} : { uid: user.uid, gid: user.gid }),
      });
    } catch (error) {
      // Sync failures: our spec checks, log files, or what Node throws instead of emitting.
      const text = error instanceof SpawnError ? error.message : `spawn failed: ${errnoCode(error)} ${spec.file}: ${errorText(error)}`;
      process.nextTick(() => on({ type: 'os.forkFailed', error: text }));
      return null;
    } finally {
      // The child holds its own copies of the fds once spawn() has returned (fork/exec is
      // synchronous in libuv); the Agent keeps none.
      if (fds !== null) {
        closeSync(fds.outFd);
        closeSync(fds.errFd);
      }
    }
    if (tracing()) trace(`spawn.done ${String(child.pid)}`);
    this.track(spec, child, on);
    return child.pid ?? null;
  }

  killProcess(pid: number, signal: KillSignal): void {
    // pid ≤ 1 would make -pid signal every process we may signal (kill(-1)) or our own group.
    assert(Number.isSafeInteger(pid) && pid > 1, `killProcess: invalid pid ${String(pid)}`);
    try {
      process.kill(-pid, signal);
    } catch (error) {
      if (errnoCode(error) !== 'ESRCH') throw error; // already gone: nothing to kill
    }
  }

  /** Turns the child's 'spawn' / 'error' / 'exit' into the os.* events, terminal exactly once. */
  private track(spec: SpawnSpec, child: ChildProcess, on: (event: SpawnerEvent) => void): void {
    let spawned = false;
    let done = false;
    this.live.add(child);

    const release = (): void => {
      done = true;
      child.off('spawn', onSpawn);
      child.off('exit', onExit);
      // Node emits 'close' after a failed exec or an exit (we never listen to it) but no
      // further 'error': we never send to, disconnect or kill through the handle.
      child.off('error', onError);
      this.live.delete(child);
    };
    const reportSpawned = (): void => {
      if (spawned || child.pid === undefined) return;
      spawned = true;
      on({ type: 'os.spawned', pid: child.pid });
    };
    const onSpawn = (): void => {
      if (!done) reportSpawned();
    };
    const onError = (error: unknown): void => {
      if (done) return;
      if (spawned) return; // not a spawn failure (we never send or kill through the handle)
      release();
      on({ type: 'os.forkFailed', error: describeExecError(spec, error) });
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      if (done) return;
      // 'spawn' is emitted before 'exit' by Node; this keeps os.spawned first regardless.
      reportSpawned();
      release();
      on({ type: 'os.exited', code, signal });
    };

    child.on('spawn', onSpawn);
    child.on('error', onError);
    child.on('exit', onExit);
  }
}

/** An exec failure Node emitted asynchronously (ENOENT, EACCES, EAGAIN, EMFILE, ENFILE). */
function describeExecError(spec: SpawnSpec, error: unknown): string {
  const code = errnoCode(error);
  if (code === 'ENOENT') {
    // libuv reports a failed chdir as ENOENT too: say which one is missing.
    let cwdExists = true;
    try {
      statSync(spec.cwd);
    } catch {
      cwdExists = false;
    }
    if (!cwdExists) return `spawn failed: ENOENT cwd ${spec.cwd} (working directory not accessible)`;
    return `spawn failed: ENOENT ${spec.file} (executable or its interpreter not found)`;
  }
  if (code === 'EACCES') return `spawn failed: EACCES ${spec.file} (not executable or permission denied)`;
  return `spawn failed: ${code} ${spec.file}: ${errorText(error)}`;
}
