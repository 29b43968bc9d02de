// `trine down`: stops every process `trine up` started in a cluster dir — the watchdog, the
// replicas and the agents' keepers (each stops its agent) — with SIGTERM, a grace period and
// SIGKILL for stragglers; then any agent whose keeper had died (its `.agent-pid` record), then
// every task process the agents recorded in their procs files (each leads its own process group,
// which is signalled whole). Verifies none is left and removes the pid, agent-pid and procs
// files. Idempotent.
//
// Task processes go last: while an agent runs it may still start one (a spawn it was ordered
// before it stopped), and it records each in its procs file; once every agent is gone the files
// are final.
import { existsSync } from 'node:fs';
import type { ProcessId } from '../src/core/ports.ts';
import {
  ClusterDirError, isAlive, isClusterProcess, paths, readPidFiles, removePidFile, resolveClusterDir, runningProcesses,
} from '../src/io/cluster-dir.ts';
import { isSameProcess, listProcsFiles, readProcsFile, removeProcsFile } from '../src/daemon/agent.ts';
import { listAgentPids, removeAgentPid } from '../src/daemon/keeper.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';

/** Time a daemon gets to close its sockets and flush its log after SIGTERM (it needs ~1 s; a
 *  keeper needs its agent's second plus its own exit). */
export const DOWN_GRACE_MS = 5_000;
/** Time the kernel gets to remove a process after SIGKILL. */
export const DOWN_KILL_WAIT_MS = 2_000;
/** Time task processes get after SIGTERM: they are the operator's programs, and may clean up. */
export const DOWN_TASK_GRACE_MS = 2_000;
const POLL_MS = 25;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Signal a process group (every daemon and task process leads one: spawned detached), so
 *  anything it started goes too; fall back to the pid alone. */
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

async function waitGone(pids: number[], ms: number, alive: (pid: number) => boolean = isAlive): Promise<number[]> {
  const deadline = Date.now() + ms;
  let left = pids.filter(alive);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    left = left.filter(alive);
  }
  return left;
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

/** Agents still running from their keepers' records (`<id>.agent-pid`), labelled `<id> agent`. */
function runningAgents(dir: string): { id: ProcessId; agent: ProcessId; pid: number }[] {
  const out: { id: ProcessId; agent: ProcessId; pid: number }[] = [];
  for (const { id, pid } of listAgentPids(dir)) if (pid !== null && isClusterProcess(pid, dir, id)) out.push({ id: `${id} agent`, agent: id, pid });
  return out;
}

/** Task processes recorded in the procs files that are still the processes recorded (same pid
 *  and start time). */
function runningTasks(dir: string): { id: string; pid: number; startTime: string | null }[] {
  const out: { id: string; pid: number; startTime: string | null }[] = [];
  for (const f of listProcsFiles(dir)) {
    for (const p of readProcsFile(f.path).procs) {
      if (isSameProcess(p.pid, p.startTime)) out.push({ id: `${p.task}/${p.vpid}`, pid: p.pid, startTime: p.startTime });
    }
  }
  return out;
}

/** Stop the task processes recorded in the cluster's procs files: SIGTERM to each process group,
 *  a grace period, SIGKILL. Removes the procs files once their processes are gone. */
export async function stopTasks(dir: string): Promise<{ stopped: number; remaining: { id: string; pid: number }[] }> {
  const tasks = runningTasks(dir);
  const same = new Map(tasks.map((t) => [t.pid, t.startTime]));
  // A task pid is checked with its start time: once gone, the pid may name someone else.
  const alive = (pid: number) => isSameProcess(pid, same.get(pid) ?? null);
  for (const t of tasks) signal(t.pid, 'SIGTERM');
  const stubborn = await waitGone(tasks.map((t) => t.pid), DOWN_TASK_GRACE_MS, alive);
  for (const pid of stubborn) signal(pid, 'SIGKILL');
  const left = new Set(await waitGone(stubborn, DOWN_KILL_WAIT_MS, alive));
  const remaining = tasks.filter((t) => left.has(t.pid)).map(({ id, pid }) => ({ id, pid }));
  if (remaining.length === 0) for (const f of listProcsFiles(dir)) removeProcsFile(dir, f.id);
  return { stopped: tasks.length - remaining.length, remaining };
}

export type ClusterStopResult = StopResult & { tasks: number };

/** Everything of a cluster: `targets` (what up started: watchdog, replicas, keepers), agents
 *  whose keeper is not among them, then task processes (see the header). */
export async function stopCluster(dir: string, targets: { id: ProcessId; pid: number }[]): Promise<ClusterStopResult> {
  const keeping = new Set(targets.map((t) => t.id));
  // An agent whose keeper runs is stopped by its keeper (one SIGTERM, from one place).
  const orphans = runningAgents(dir).filter((a) => !keeping.has(a.agent)).map(({ id, pid }) => ({ id, pid }));
  const r = await stopProcesses(dir, [...targets, ...orphans]);
  // A keeper that needed SIGKILL may have left its agent running.
  const late = runningAgents(dir).map(({ id, pid }) => ({ id, pid }));
  for (const a of late) signal(a.pid, 'SIGKILL');
  const lateLeft = new Set(await waitGone(late.map((a) => a.pid), DOWN_KILL_WAIT_MS));
  for (const { id, pid } of listAgentPids(dir)) if (pid === null || !lateLeft.has(pid)) removeAgentPid(dir, id);
  const tasks = await stopTasks(dir);
  return {
    stopped: r.stopped,
    killed: [...r.killed, ...late.filter((a) => !lateLeft.has(a.pid)).map((a) => a.id)],
    remaining: [...r.remaining, ...late.filter((a) => lateLeft.has(a.pid)), ...tasks.remaining.map((t) => ({ id: `task ${t.id}`, pid: t.pid }))],
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
  if (targets.length === 0 && runningAgents(dir).length === 0 && runningTasks(dir).length === 0) {
    for (const { id } of readPidFiles(dir)) removePidFile(dir, id);
    for (const { id } of listAgentPids(dir)) removeAgentPid(dir, id);
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
