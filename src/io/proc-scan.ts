// Finding a node's task processes from the OS (issue 14 item 6): the agent's procs file
// (src/io/run-records.ts) is the record of what it started, and a record can be lost — one
// corrupted byte, a disk error — while the processes it named run on. So every task process also
// carries a mark in its environment, TRINE_OWNER=<cluster>/<agent>, beside the mapping message's
// TRINE_TASK and TRINE_VPID (src/core/agent-procs.ts mappingEnv), which it inherits to anything
// it starts. An agent that starts scans /proc for its mark and takes every marked process it has
// no record of as recovered, so the group's resync (PROTOCOL §8.6) adopts it or has it killed;
// `trine down` and a node's power-off kill every process with the cluster's mark. No process may
// outlive the cluster's knowledge of it.
//
// Limits: reading another user's /proc/<pid>/environ needs root or the same user (the agent runs
// as root when tasks run as another user, and as the tasks' user otherwise); a process that
// replaces its own environment before it is scanned (an exec with a clean env) loses the mark.
// Linux only: without /proc the scan finds nothing.
import { readdirSync, readFileSync } from 'node:fs';
import type { ProcessId } from '../core/ports.ts';
import { procStartTime } from './run-records.ts';

/** The environment variable that marks a task process as the cluster's. */
export const OWNER_ENV = 'TRINE_OWNER';
/** Environments longer than this are not read further: the mark is set by the agent, and a
 *  process with megabytes of environment does not make the scan slow. */
const MAX_ENVIRON_BYTES = 1024 * 1024;

/** The mark of agent `agent`'s task processes in cluster `cluster`. */
export const ownerMark = (cluster: string, agent: ProcessId): string => `${cluster}/${agent}`;

/** A marked process: its pid and start time (/proc/<pid>/stat field 22), and the task and VPID
 *  its mapping message names (null if its environment does not say). */
export type MarkedProcess = { pid: number; pgid: number; startTime: string; owner: string; task: string | null; vpid: number | null };

/** Every live process whose environment holds `TRINE_OWNER` with a value `accept` takes. */
export function scanMarked(accept: (owner: string) => boolean): MarkedProcess[] {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((n) => /^[0-9]+$/.test(n));
  } catch {
    return [];
  }
  const out: MarkedProcess[] = [];
  for (const name of pids) {
    const pid = Number(name);
    if (pid === process.pid) continue;
    const env = environOf(pid);
    const owner = env?.get(OWNER_ENV);
    if (env === null || owner === undefined || !accept(owner)) continue;
    const startTime = procStartTime(pid);
    const pgid = processGroup(pid);
    if (startTime === null || pgid === null) continue; // gone, or a zombie: nothing left to kill
    const vpid = Number(env.get('TRINE_VPID') ?? 'x');
    out.push({ pid, pgid, startTime, owner, task: env.get('TRINE_TASK') ?? null, vpid: Number.isSafeInteger(vpid) && vpid >= 0 ? vpid : null });
  }
  return out.sort((a, b) => a.pid - b.pid);
}

/** The processes agent `agent` of cluster `cluster` started. */
export const scanOwned = (cluster: string, agent: ProcessId): MarkedProcess[] => scanMarked((o) => o === ownerMark(cluster, agent));

/** Field 5 of /proc/<pid>/stat, the process group; null if gone. A task process leads its own
 *  (the agent spawns it detached); what it starts is in that group unless it made its own. */
function processGroup(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[5 - 3]);
    return Number.isSafeInteger(pgid) ? pgid : null;
  } catch {
    return null;
  }
}

/** /proc/<pid>/environ as a map; null if it cannot be read (gone, or another user's). */
function environOf(pid: number): Map<string, string> | null {
  let raw: Buffer;
  try {
    raw = readFileSync(`/proc/${pid}/environ`);
  } catch {
    return null;
  }
  const env = new Map<string, string>();
  for (const entry of raw.subarray(0, MAX_ENVIRON_BYTES).toString('utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return env;
}
