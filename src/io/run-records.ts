// What a local node's processes record in `<dir>/run`, and how to stop what a record names: the
// agent's procs file (its task processes with their start times, PROTOCOL §8.6), the keeper's
// records of its two children (`<id>.agent-pid`, the active agent; `<id>.standby-pid`, the warm
// standby), the watchdog supervisor's record of its child (`<id>.supervised-pid`), start-time
// checks, and signalling a process group. Shared by the agent, its keeper, the watchdog's
// supervisor, `trine down`, `trine inject` and the watchdog's local reset driver
// (src/io/reset-driver.ts), which must all agree on what a record means.
//
// The procs file holds every process the agent believes alive with its start time
// (/proc/<pid>/stat field 22, clock ticks since boot): a pid alone could name an unrelated
// process after the pid was reused, a (pid, start time) pair cannot. It is rewritten atomically
// (temporary file + rename) every time the set changes, so a crash at any point leaves either
// the old or the new set, never a torn file. No fsync: the file must survive the agent, not the
// node — a node power reset ends its processes too.
//
// Every record is private, 0600 in the 0700 run dir (src/io/private-files.ts): task journals hold
// task keys, and the rest is nobody else's business.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ProcRecord } from '../core/agent-procs-state.ts';
import { excerpt } from '../core/quoted.ts';
import type { ProcessId } from '../core/ports.ts';
import { processId, taskId } from '../core/wire/messages.ts';
import { isAlive, paths, TASK_JOURNAL_SUFFIX } from './cluster-dir.ts';
import { errorCode } from './log.ts';
import { mkdirPrivate, writeFileAtomic } from './private-files.ts';

// ---- start times --------------------------------------------------------------------------------

const hasProc = existsSync('/proc/self/stat');

/** Field 22 of /proc/<pid>/stat (the start time), or null if the process is gone or a zombie.
 *  Without /proc (not Linux) the start time is unknown: '' and liveness falls back to kill 0. */
export function procStartTime(pid: number): string | null {
  if (!hasProc) {
    try {
      process.kill(pid, 0);
      return '';
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM' ? '' : null;
    }
  }
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields from 3 on follow the parenthesised command name, which may hold spaces or ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  if (state === 'Z' || state === 'X') return null;
  return fields[22 - 3] ?? null;
}

/** Whether `pid` is still the process that had `startTime` (null: unknown, so not provably). */
export function isSameProcess(pid: number, startTime: string | null): boolean {
  if (startTime === null) return false;
  return procStartTime(pid) === startTime;
}

// ---- signals ------------------------------------------------------------------------------------

/** Signal a process's group (every daemon and task process leads one: spawned detached), so
 *  anything it started goes too; fall back to the pid alone if it leads none. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  // 0 and 1 would name our own group and init: never a recorded process.
  if (!Number.isSafeInteger(pid) || pid <= 1) return;
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, sig);
      return;
    } catch {
      // not a group leader, or already gone
    }
  }
}

/** How often waitGone looks again. */
const GONE_POLL_MS = 25;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until none of `pids` is `alive` or `ms` passed; returns those still alive. */
export async function waitGone(pids: readonly number[], ms: number, alive: (pid: number) => boolean = isAlive): Promise<number[]> {
  const deadline = Date.now() + ms;
  let left = pids.filter(alive);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(GONE_POLL_MS);
    left = left.filter(alive);
  }
  return left;
}

// ---- the procs file -----------------------------------------------------------------------------

/** The `format` of a procs file: one from another Trine version is not trusted. */
export const PROCS_FILE_FORMAT = 'trine-procs/1';
/** A procs file lists a node's live processes: a few slots' worth. Far larger is not ours. */
const MAX_PROCS_FILE_BYTES = 4 * 1024 * 1024;

export type ProcsFileEntry = ProcRecord & { startTime: string | null };

/** Reads a procs file. Total: a missing file is empty, a bad one is empty with a `problem`. */
export function readProcsFile(path: string): { procs: ProcsFileEntry[]; problem: string | null } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { procs: [], problem: null };
    return { procs: [], problem: `cannot read ${path}: ${(e as Error).message}` };
  }
  if (text.length > MAX_PROCS_FILE_BYTES) return { procs: [], problem: `${path} is ${text.length} bytes, not a procs file` };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { procs: [], problem: `${path} is not JSON: ${(e as Error).message}` };
  }
  if (typeof json !== 'object' || json === null || (json as { format?: unknown }).format !== PROCS_FILE_FORMAT) {
    return { procs: [], problem: `${path} is not a ${PROCS_FILE_FORMAT} file` };
  }
  const list = (json as { procs?: unknown }).procs;
  if (!Array.isArray(list)) return { procs: [], problem: `${path}: "procs" must be a list` };
  const procs: ProcsFileEntry[] = [];
  for (const p of list as unknown[]) {
    if (typeof p !== 'object' || p === null) return { procs: [], problem: `${path}: an entry is not an object` };
    const { task, vpid, pid, startTime } = p as Record<string, unknown>;
    const good = taskId.dec(task, 'task').ok && Number.isSafeInteger(vpid) && (vpid as number) >= 0 &&
      Number.isSafeInteger(pid) && (pid as number) > 1 && (startTime === null || typeof startTime === 'string');
    if (!good) return { procs: [], problem: `${path}: bad entry ${excerpt(JSON.stringify(p))}` };
    procs.push({ task: task as string, vpid: vpid as number, pid: pid as number, startTime: startTime as string | null });
  }
  return { procs, problem: null };
}

export function writeProcsFile(path: string, agent: ProcessId, procs: readonly ProcsFileEntry[]): void {
  writeFileAtomic(path, `${JSON.stringify({ format: PROCS_FILE_FORMAT, agent, procs }, null, 1)}\n`);
}

/** The procs files in a cluster's run dir, with the agent each belongs to (for `trine down`). */
export function listProcsFiles(dir: string): { id: ProcessId; path: string }[] {
  const run = paths.run(dir);
  if (!existsSync(run)) return [];
  const suffix = '.procs.json';
  return readdirSync(run)
    .filter((name) => name.endsWith(suffix) && processId.dec(name.slice(0, -suffix.length), 'id').ok)
    .sort()
    .map((name) => ({ id: name.slice(0, -suffix.length), path: paths.procsFile(dir, name.slice(0, -suffix.length)) }));
}

export function removeProcsFile(dir: string, id: ProcessId): void {
  rmSync(paths.procsFile(dir, id), { force: true });
}

/** The recorded task processes of agent `id` that are still the processes recorded. */
export function liveRecordedProcs(dir: string, id: ProcessId): ProcsFileEntry[] {
  return readProcsFile(paths.procsFile(dir, id)).procs.filter((p) => isSameProcess(p.pid, p.startTime));
}

// ---- the keeper's children ----------------------------------------------------------------------

/** The keeper's two children: the active agent, and the warm standby it promotes when the
 *  active one dies (src/daemon/keeper.ts). */
export type KeeperChildRole = 'agent' | 'standby';

/** Where the keeper records a child's pid (not `.pid`: pid files name what `trine up` started). */
export const keeperChildPidFile = (dir: string, id: ProcessId, role: KeeperChildRole): string =>
  join(paths.run(dir), `${id}.${role}-pid`);

/** The recorded pid of the keeper's `role` child, or null. */
export function readKeeperChildPid(dir: string, id: ProcessId, role: KeeperChildRole): number | null {
  try {
    const text = readFileSync(keeperChildPidFile(dir, id, role), 'utf8').trim();
    return /^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : null;
  } catch {
    return null;
  }
}

export function writeKeeperChildPid(dir: string, id: ProcessId, role: KeeperChildRole, pid: number): void {
  mkdirPrivate(paths.run(dir));
  writeFileAtomic(keeperChildPidFile(dir, id, role), `${pid}\n`);
}

export function removeKeeperChildPid(dir: string, id: ProcessId, role: KeeperChildRole): void {
  rmSync(keeperChildPidFile(dir, id, role), { force: true });
}

/** Every keeper child record in a cluster's run dir (for `trine down`). */
export function listKeeperChildPids(dir: string): { id: ProcessId; role: KeeperChildRole; pid: number | null }[] {
  let names: string[];
  try {
    names = readdirSync(paths.run(dir));
  } catch {
    return [];
  }
  const out: { id: ProcessId; role: KeeperChildRole; pid: number | null }[] = [];
  for (const name of names.sort()) {
    for (const role of ['agent', 'standby'] as const) {
      const suffix = `.${role}-pid`;
      if (!name.endsWith(suffix)) continue;
      const id = name.slice(0, -suffix.length);
      if (processId.dec(id, 'id').ok) out.push({ id, role, pid: readKeeperChildPid(dir, id, role) });
    }
  }
  return out;
}

// ---- where an agent of a one-host cluster takes injections (docs/OPERATIONS.md §7) -----------

/** An agent of a one-host cluster listens nowhere (cluster.json has no address for it); with
 *  injection allowed it listens on a free loopback port so that `trine inject slow` reaches it,
 *  and records the port here (src/daemon/run-core.ts). Each incarnation writes its own. */
export const injectPortFile = (dir: string, id: ProcessId): string => join(paths.run(dir), `${id}.inject-port`);

export function writeInjectPort(dir: string, id: ProcessId, port: number): void {
  writePortRecord(dir, injectPortFile(dir, id), port);
}

/** The port `id` recorded, or null (none, or not a port). */
export function readInjectPort(dir: string, id: ProcessId): number | null {
  return readPortRecord(injectPortFile(dir, id));
}

/** A port a daemon records under run/ (`file`, in the cluster dir `dir`) for others to find. */
export function writePortRecord(dir: string, file: string, port: number): void {
  mkdirPrivate(paths.run(dir));
  writeFileAtomic(file, `${port}\n`);
}

/** The port recorded in `file`, or null (none, or not a port). */
export function readPortRecord(file: string): number | null {
  try {
    const text = readFileSync(file, 'utf8').trim();
    const n = /^[1-9][0-9]{0,4}$/.test(text) ? Number(text) : NaN;
    return n <= 65535 ? n : null;
  } catch {
    return null;
  }
}

// ---- a supervised child's record (src/daemon/supervisor.ts) ----------------------------------

const SUPERVISED_PID_SUFFIX = '.supervised-pid';

/** Where a supervisor records its child's pid (not `.pid`: pid files name what `trine up`
 *  started, the supervisor). */
export const supervisedPidFile = (dir: string, id: ProcessId): string => join(paths.run(dir), `${id}${SUPERVISED_PID_SUFFIX}`);

export function readSupervisedPid(dir: string, id: ProcessId): number | null {
  try {
    const text = readFileSync(supervisedPidFile(dir, id), 'utf8').trim();
    return /^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : null;
  } catch {
    return null;
  }
}

/** Runs a write of a record (a pid record) that must not stop a supervisor: a full disk or a
 *  failing one is reported, not thrown. Returns the error code, or null. */
export function tryRecord(write: () => void): string | null {
  try {
    write();
    return null;
  } catch (e) {
    return errorCode(e);
  }
}

/** Records the child's pid, or removes the record (null). Returns the error code of a record it
 *  could not write (the caller logs it: a child whose supervisor is then killed too is missed by
 *  `trine down`), or null. */
export function recordSupervisedPid(dir: string, id: ProcessId, pid: number | null): string | null {
  return tryRecord(() => {
    if (pid === null) return rmSync(supervisedPidFile(dir, id), { force: true });
    mkdirPrivate(paths.run(dir));
    writeFileAtomic(supervisedPidFile(dir, id), `${pid}\n`);
  });
}

/** Every supervised child recorded in a cluster's run dir, with the id it runs as (for `trine
 *  down`: a child whose supervisor was killed still runs). */
export function listSupervisedPids(dir: string): { id: ProcessId; pid: number | null }[] {
  let names: string[];
  try {
    names = readdirSync(paths.run(dir));
  } catch {
    return [];
  }
  return names.filter((n) => n.endsWith(SUPERVISED_PID_SUFFIX)).sort().map((n) => n.slice(0, -SUPERVISED_PID_SUFFIX.length))
    .filter((id) => processId.dec(id, 'id').ok).map((id) => ({ id, pid: readSupervisedPid(dir, id) }));
}

// ---- task journals (PROTOCOL §10.9) --------------------------------------------------------------

/** Replaces replica `id`'s task journal, durably: written to a temporary file, flushed to disk,
 *  then renamed over the old one, so a power reset leaves the old journal or the new, whole. */
export function writeTaskJournal(dir: string, id: ProcessId, journal: Uint8Array): void {
  writeFileAtomic(paths.taskJournal(dir, id), journal, { durable: true });
}

/** Every replica's task journal in the run dir, raw (the watchdog decodes and checks them). */
export function readTaskJournals(dir: string): { source: string; data: Uint8Array }[] {
  let names: string[];
  try {
    names = readdirSync(paths.run(dir)).filter((n) => n.endsWith(TASK_JOURNAL_SUFFIX)).sort();
  } catch {
    return [];
  }
  const out: { source: string; data: Uint8Array }[] = [];
  for (const name of names) {
    const path = join(paths.run(dir), name);
    try {
      out.push({ source: path, data: new Uint8Array(readFileSync(path)) });
    } catch {
      // Removed meanwhile: nothing to restore from it.
    }
  }
  return out;
}

/** Removes every task journal, and any temporary file a writer killed mid-write left behind. */
export function removeTaskJournals(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(paths.run(dir));
  } catch {
    return;
  }
  const tmp = new RegExp(`\\${TASK_JOURNAL_SUFFIX}\\.\\d+\\.tmp$`);
  for (const name of names) {
    if (name.endsWith(TASK_JOURNAL_SUFFIX) || tmp.test(name)) rmSync(join(paths.run(dir), name), { force: true });
  }
}
