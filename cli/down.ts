// `trine down`: stops every process `trine up` started in a cluster dir — the watchdog's
// supervisor (which stops the watchdog), the replicas and the agents' keepers (each stops its
// agent and its standby) — with SIGTERM, a grace period and SIGKILL for stragglers; then any
// agent, standby or watchdog whose keeper or supervisor had died (their `.agent-pid`,
// `.standby-pid` and `.supervised-pid` records), then every task process the agents recorded in
// their procs files (each leads its own process group, which is signalled whole). Verifies none
// is left and removes the pid, agent-pid, standby-pid, supervised-pid and procs files. Idempotent.
// Says what it stopped in one line, or with --json in a `trine.down/1` object (cli/json-out.ts).
//
// Task processes go last: while an agent runs it may still start one (a spawn it was ordered
// before it stopped), and it records each in its procs file; once every agent is gone the files
// are final. A keeper the watchdog's reset driver started just after the pid files were read
// is found by looking again (DOWN_ROUNDS).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProcessId } from '../src/core/ports.ts';
import {
  ClusterDirError, isClusterProcess, paths, readPidFiles, removePidFile, resolveClusterDir, runningProcesses,
} from '../src/io/cluster-dir.ts';
import {
  isSameProcess, listKeeperChildPids, listProcsFiles, listSupervisedPids, liveRecordedProcs, recordSupervisedPid, removeKeeperChildPid,
  removeProcsFile, signalGroup, waitGone,
} from '../src/io/run-records.ts';
import { ownerMark, scanMarked } from '../src/io/proc-scan.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';

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

/** Agents, standbys and the watchdog still running from their keepers' and supervisor's records
 *  (`<id>.agent-pid`, `<id>.standby-pid`, `<id>.supervised-pid`), labelled `<id> agent`, `<id>
 *  standby`, `<id> supervised`; `agent` is the id of the keeper or supervisor that stops it. */
function runningKeeperChildren(dir: string): { id: string; agent: ProcessId; pid: number }[] {
  const out: { id: string; agent: ProcessId; pid: number }[] = [];
  const records = [...listKeeperChildPids(dir), ...listSupervisedPids(dir).map((r) => ({ ...r, role: 'supervised' }))];
  for (const { id, role, pid } of records) {
    if (pid !== null && isClusterProcess(pid, dir, id)) out.push({ id: `${id} ${role}`, agent: id, pid });
  }
  return out;
}

/** Removes the keepers' and supervisors' records, but those of the processes in `stuck`. */
function removeChildRecords(dir: string, stuck: ReadonlySet<number>): void {
  for (const { id, role, pid } of listKeeperChildPids(dir)) if (pid === null || !stuck.has(pid)) removeKeeperChildPid(dir, id, role);
  for (const { id, pid } of listSupervisedPids(dir)) if (pid === null || !stuck.has(pid)) recordSupervisedPid(dir, id, null);
}

/** Task processes recorded in the procs files that are still the processes recorded (same pid
 *  and start time). */
function runningTasks(dir: string): { id: string; pid: number; startTime: string | null }[] {
  const recorded = listProcsFiles(dir).flatMap((f) => liveRecordedProcs(dir, f.id).map((p) => ({ id: `${p.task}/${p.vpid}`, pid: p.pid, startTime: p.startTime })));
  // And every process carrying the cluster's mark that no record names (a record lost or
  // corrupted, issue 14 item 6; src/io/proc-scan.ts): nothing of the cluster outlives `down`.
  // Only the marks of the agents this dir runs (those whose private key it holds: every agent
  // of a `trine up` dir, a host bundle's own): another host's processes are not this host's to
  // kill, and hosts that share a kernel (network namespaces) see each other's in /proc.
  const local = localAgents(dir);
  const known = new Set(recorded.map((t) => t.pid));
  const unrecorded = local === null ? [] : scanMarked((owner) => local.marks.has(owner)).filter((p) => !known.has(p.pid))
    .map((p) => ({ id: `unrecorded ${p.task ?? '?'}/${p.vpid ?? '?'}`, pid: p.pid, startTime: p.startTime }));
  return [...recorded, ...unrecorded];
}

/** The marks (src/io/proc-scan.ts) of the agents whose key `dir` holds, or null if its
 *  cluster.json cannot be read (nothing is scanned). */
function localAgents(dir: string): { marks: Set<string> } | null {
  try {
    const config = JSON.parse(readFileSync(paths.config(dir), 'utf8')) as { cluster?: unknown; membership?: { agents?: { id?: unknown }[] } };
    const cluster = config.cluster;
    if (typeof cluster !== 'string' || cluster.length === 0) return null;
    const agents = (config.membership?.agents ?? []).map((a) => a.id).filter((id): id is string => typeof id === 'string');
    return { marks: new Set(agents.filter((id) => existsSync(join(dir, 'keys', `${id}.json`))).map((id) => ownerMark(cluster, id))) };
  } catch {
    return null;
  }
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
  removeChildRecords(dir, new Set(remaining.map((t) => t.pid)));
  const tasks = await stopTasks(dir);
  return {
    stopped,
    killed,
    remaining: [...remaining, ...tasks.remaining.map((t) => ({ id: `task ${t.id}`, pid: t.pid }))],
    tasks: tasks.stopped,
  };
}

export async function down(opts: { dir?: string | undefined; json?: boolean | undefined }): Promise<number> {
  const dir = resolveClusterDir(opts.dir);
  if (!existsSync(dir)) throw new ClusterDirError('NO_CLUSTER', `no cluster at ${dir}: nothing to stop (pass the cluster's --dir)`);
  if (!existsSync(paths.config(dir)) && !existsSync(paths.run(dir))) {
    throw new ClusterDirError('FOREIGN_DIR', `${dir} is not a trine cluster dir (no cluster.json): pass the cluster's --dir`);
  }
  const targets = runningProcesses(dir);
  if (targets.length === 0 && runningKeeperChildren(dir).length === 0 && runningTasks(dir).length === 0) {
    for (const { id } of readPidFiles(dir)) removePidFile(dir, id);
    removeChildRecords(dir, new Set());
    for (const f of listProcsFiles(dir)) removeProcsFile(dir, f.id);
    if (opts.json === true) emitJson(SCHEMAS.down, { dir, nothingRunning: true, stopped: [], killed: [], tasks: 0 });
    else process.stdout.write(`nothing running in ${dir}\n`);
    return EXIT_OK;
  }
  const r = await stopCluster(dir, targets);
  if (r.remaining.length > 0) {
    throw new CliError(
      `could not stop ${r.remaining.map((t) => `${t.id} (pid ${t.pid})`).join(', ')} in ${dir}: check them with ps and kill them by hand`,
      EXIT_FAILED,
      'STILL_RUNNING',
    );
  }
  if (opts.json === true) {
    emitJson(SCHEMAS.down, { dir, nothingRunning: false, stopped: r.stopped, killed: r.killed, tasks: r.tasks });
    return EXIT_OK;
  }
  const killed = r.killed.length > 0 ? ` (${r.killed.join(', ')} needed SIGKILL)` : '';
  const tasks = r.tasks > 0 ? `; and ${r.tasks} task process${r.tasks === 1 ? '' : 'es'}` : '';
  process.stdout.write(`stopped ${r.stopped.length} processes in ${dir}: ${r.stopped.join(', ')}${killed}${tasks}\n`);
  return EXIT_OK;
}
