// `trine down`: stops every process `trine up` started in a cluster dir — the watchdog, the
// replicas and the agents' keepers (each stops its agent and its standby) — with SIGTERM, a grace
// period and SIGKILL for stragglers; then any agent or standby whose keeper had died (their
// `.agent-pid` / `.standby-pid` records), then every task process the agents recorded in their
// procs files (each leads its own process group, which is signalled whole). Verifies none is
// left and removes the pid, agent-pid, standby-pid and procs files. Idempotent.
//
// Task processes go last: while an agent runs it may still start one (a spawn it was ordered
// before it stopped), and it records each in its procs file; once every agent is gone the files
// are final. A keeper the watchdog's reset driver started just after the pid files were read
// is found by looking again (DOWN_ROUNDS).
import { existsSync } from 'node:fs';
import type { ProcessId } from '../src/core/ports.ts';
import {
  ClusterDirError, isClusterProcess, paths, readPidFiles, removePidFile, resolveClusterDir, runningProcesses,
} from '../src/io/cluster-dir.ts';
import {
  isSameProcess, listKeeperChildPids, listProcsFiles, liveRecordedProcs, removeKeeperChildPid, removeProcsFile, signalGroup, waitGone,
} from '../src/io/run-records.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';

/** Time a daemon gets to close its sockets and flush its log after SIGTERM (it needs ~1 s; a
 *  keeper needs its agent's second plus its own exit). */
export const DOWN_GRACE_MS = 5_000;
/** Time the kernel gets to remove a process after SIGKILL. */
export const DOWN_KILL_WAIT_MS = 2_000;
/** Time task processes get after SIGTERM: they are the operator's programs, and may clean up. */
export const DOWN_TASK_GRACE_MS = 2_000;
/** Times `trine down` looks for cluster processes again after stopping those it found: the
 *  watchdog may have started a keeper (a node reset) just before it stopped. */
export const DOWN_ROUNDS = 3;

export type StopResult = { stopped: ProcessId[]; killed: ProcessId[]; remaining: { id: ProcessId; pid: number }[] };

/** Stop the given cluster processes and remove pid files of those gone. */
export async function stopProcesses(dir: string, targets: { id: ProcessId; pid: number }[]): Promise<StopResult> {
  for (const t of targets) signalGroup(t.pid, 'SIGTERM');
  const stubborn = new Set(await waitGone(targets.map((t) => t.pid), DOWN_GRACE_MS));
  for (const t of targets) if (stubborn.has(t.pid)) signalGroup(t.pid, 'SIGKILL');
  const left = new Set(await waitGone([...stubborn], DOWN_KILL_WAIT_MS));
  const remaining = targets.filter((t) => left.has(t.pid));
  // Pid files of processes that are gone (including stale ones from an earlier run) go too; one
  // of a process started meanwhile (a keeper a node reset started) stays for the next round.
  for (const { id, pid } of readPidFiles(dir)) if (pid === null || !isClusterProcess(pid, dir, id)) removePidFile(dir, id);
  return {
    stopped: targets.filter((t) => !left.has(t.pid)).map((t) => t.id),
    killed: targets.filter((t) => stubborn.has(t.pid) && !left.has(t.pid)).map((t) => t.id),
    remaining,
  };
}

/** Agents and standbys still running from their keepers' records (`<id>.agent-pid`,
 *  `<id>.standby-pid`), labelled `<id> agent` / `<id> standby`. */
function runningKeeperChildren(dir: string): { id: string; agent: ProcessId; pid: number }[] {
  const out: { id: string; agent: ProcessId; pid: number }[] = [];
  for (const { id, role, pid } of listKeeperChildPids(dir)) {
    if (pid !== null && isClusterProcess(pid, dir, id)) out.push({ id: `${id} ${role}`, agent: id, pid });
  }
  return out;
}

/** Task processes recorded in the procs files that are still the processes recorded (same pid
 *  and start time). */
function runningTasks(dir: string): { id: string; pid: number; startTime: string | null }[] {
  return listProcsFiles(dir).flatMap((f) => liveRecordedProcs(dir, f.id).map((p) => ({ id: `${p.task}/${p.vpid}`, pid: p.pid, startTime: p.startTime })));
}

/** Stop the task processes recorded in the cluster's procs files: SIGTERM to each process group,
 *  a grace period, SIGKILL. Removes the procs files once their processes are gone. */
export async function stopTasks(dir: string): Promise<{ stopped: number; remaining: { id: string; pid: number }[] }> {
  const tasks = runningTasks(dir);
  const same = new Map(tasks.map((t) => [t.pid, t.startTime]));
  // A task pid is checked with its start time: once gone, the pid may name someone else.
  const alive = (pid: number) => isSameProcess(pid, same.get(pid) ?? null);
  for (const t of tasks) signalGroup(t.pid, 'SIGTERM');
  const stubborn = await waitGone(tasks.map((t) => t.pid), DOWN_TASK_GRACE_MS, alive);
  for (const pid of stubborn) signalGroup(pid, 'SIGKILL');
  const left = new Set(await waitGone(stubborn, DOWN_KILL_WAIT_MS, alive));
  const remaining = tasks.filter((t) => left.has(t.pid)).map(({ id, pid }) => ({ id, pid }));
  if (remaining.length === 0) for (const f of listProcsFiles(dir)) removeProcsFile(dir, f.id);
  return { stopped: tasks.length - remaining.length, remaining };
}

export type ClusterStopResult = StopResult & { tasks: number };

/** Everything of a cluster: `targets` (what up started: watchdog, replicas, keepers), agents
 *  and standbys whose keeper is not among them, then task processes (see the header). */
export async function stopCluster(dir: string, targets: { id: ProcessId; pid: number }[]): Promise<ClusterStopResult> {
  const stopped: string[] = [];
  const killed: string[] = [];
  const remaining: { id: string; pid: number }[] = [];
  let round = targets;
  for (let i = 0; i < DOWN_ROUNDS; i++) {
    const keeping = new Set(round.map((t) => t.id));
    // An agent whose keeper runs is stopped by its keeper (one SIGTERM, from one place).
    const orphans = runningKeeperChildren(dir).filter((a) => !keeping.has(a.agent)).map(({ id, pid }) => ({ id, pid }));
    if (i > 0 && round.length === 0 && orphans.length === 0) break;
    const r = await stopProcesses(dir, [...round, ...orphans]);
    // A keeper that needed SIGKILL may have left its agent or standby running.
    const late = runningKeeperChildren(dir).map(({ id, pid }) => ({ id, pid }));
    for (const a of late) signalGroup(a.pid, 'SIGKILL');
    const lateLeft = new Set(await waitGone(late.map((a) => a.pid), DOWN_KILL_WAIT_MS));
    stopped.push(...r.stopped);
    killed.push(...r.killed, ...late.filter((a) => !lateLeft.has(a.pid)).map((a) => a.id));
    remaining.push(...r.remaining, ...late.filter((a) => lateLeft.has(a.pid)));
    const stuck = new Set(remaining.map((t) => t.pid));
    round = runningProcesses(dir).filter((t) => !stuck.has(t.pid));
  }
  const stuck = new Set(remaining.map((t) => t.pid));
  for (const { id, role, pid } of listKeeperChildPids(dir)) if (pid === null || !stuck.has(pid)) removeKeeperChildPid(dir, id, role);
  const tasks = await stopTasks(dir);
  return {
    stopped,
    killed,
    remaining: [...remaining, ...tasks.remaining.map((t) => ({ id: `task ${t.id}`, pid: t.pid }))],
    tasks: tasks.stopped,
  };
}

export async function down(opts: { dir?: string | undefined }): Promise<number> {
  const dir = resolveClusterDir(opts.dir);
  if (!existsSync(dir)) throw new ClusterDirError('NO_CLUSTER', `no cluster at ${dir}: nothing to stop (pass the cluster's --dir)`);
  if (!existsSync(paths.config(dir)) && !existsSync(paths.run(dir))) {
    throw new ClusterDirError('FOREIGN_DIR', `${dir} is not a trine cluster dir (no cluster.json): pass the cluster's --dir`);
  }
  const targets = runningProcesses(dir);
  if (targets.length === 0 && runningKeeperChildren(dir).length === 0 && runningTasks(dir).length === 0) {
    for (const { id } of readPidFiles(dir)) removePidFile(dir, id);
    for (const { id, role } of listKeeperChildPids(dir)) removeKeeperChildPid(dir, id, role);
    for (const f of listProcsFiles(dir)) removeProcsFile(dir, f.id);
    process.stdout.write(`nothing running in ${dir}\n`);
    return EXIT_OK;
  }
  const r = await stopCluster(dir, targets);
  if (r.remaining.length > 0) {
    throw new CliError(
      `could not stop ${r.remaining.map((t) => `${t.id} (pid ${t.pid})`).join(', ')} in ${dir}: check them with ps and kill them by hand`,
      EXIT_FAILED,
    );
  }
  const killed = r.killed.length > 0 ? ` (${r.killed.join(', ')} needed SIGKILL)` : '';
  const tasks = r.tasks > 0 ? `; and ${r.tasks} task process${r.tasks === 1 ? '' : 'es'}` : '';
  process.stdout.write(`stopped ${r.stopped.length} processes in ${dir}: ${r.stopped.join(', ')}${killed}${tasks}\n`);
  return EXIT_OK;
}
