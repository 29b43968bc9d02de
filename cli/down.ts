// `trine down`: stops every process `trine up` started in a cluster dir — SIGTERM, a grace
// period, SIGKILL for stragglers — verifies none is left and removes the pid files. Idempotent.
import { existsSync } from 'node:fs';
import type { ProcessId } from '../src/core/ports.ts';
import {
  ClusterDirError, isAlive, paths, readPidFiles, removePidFile, resolveClusterDir, runningProcesses,
} from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';

/** Time a daemon gets to close its sockets and flush its log after SIGTERM (it needs ~1 s). */
export const DOWN_GRACE_MS = 5_000;
/** Time the kernel gets to remove a process after SIGKILL. */
export const DOWN_KILL_WAIT_MS = 2_000;
const POLL_MS = 25;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Signal a daemon's process group (it was spawned detached, as a group leader), so anything
 *  it started goes too; fall back to the pid alone. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
    return;
  } catch {
    // not a group leader, or already gone
  }
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

async function waitGone(pids: number[], ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  let alive = pids.filter(isAlive);
  while (alive.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    alive = alive.filter(isAlive);
  }
  return alive;
}

export type StopResult = { stopped: ProcessId[]; killed: ProcessId[]; remaining: { id: ProcessId; pid: number }[] };

/** Stop the given cluster processes and remove pid files of those gone. */
export async function stopProcesses(dir: string, targets: { id: ProcessId; pid: number }[]): Promise<StopResult> {
  for (const t of targets) signal(t.pid, 'SIGTERM');
  const stubborn = new Set(await waitGone(targets.map((t) => t.pid), DOWN_GRACE_MS));
  for (const t of targets) if (stubborn.has(t.pid)) signal(t.pid, 'SIGKILL');
  const left = new Set(await waitGone([...stubborn], DOWN_KILL_WAIT_MS));
  const remaining = targets.filter((t) => left.has(t.pid));
  // Pid files of processes that are gone (including stale ones from an earlier run) go too.
  for (const { id, pid } of readPidFiles(dir)) if (pid === null || !left.has(pid)) removePidFile(dir, id);
  return {
    stopped: targets.filter((t) => !left.has(t.pid)).map((t) => t.id),
    killed: targets.filter((t) => stubborn.has(t.pid) && !left.has(t.pid)).map((t) => t.id),
    remaining,
  };
}

export async function down(opts: { dir?: string | undefined }): Promise<number> {
  const dir = resolveClusterDir(opts.dir);
  if (!existsSync(dir)) throw new ClusterDirError('NO_CLUSTER', `no cluster at ${dir}: nothing to stop (pass the cluster's --dir)`);
  if (!existsSync(paths.config(dir)) && !existsSync(paths.run(dir))) {
    throw new ClusterDirError('FOREIGN_DIR', `${dir} is not a trine cluster dir (no cluster.json): pass the cluster's --dir`);
  }
  const targets = runningProcesses(dir);
  if (targets.length === 0) {
    for (const { id } of readPidFiles(dir)) removePidFile(dir, id);
    process.stdout.write(`nothing running in ${dir}\n`);
    return EXIT_OK;
  }
  const r = await stopProcesses(dir, targets);
  if (r.remaining.length > 0) {
    throw new CliError(
      `could not stop ${r.remaining.map((t) => `${t.id} (pid ${t.pid})`).join(', ')} in ${dir}: check them with ps and kill them by hand`,
      EXIT_FAILED,
    );
  }
  const killed = r.killed.length > 0 ? ` (${r.killed.join(', ')} needed SIGKILL)` : '';
  process.stdout.write(`stopped ${r.stopped.length} processes in ${dir}: ${r.stopped.join(', ')}${killed}\n`);
  return EXIT_OK;
}
