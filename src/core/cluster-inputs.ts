// The entry points of the manager's task and process state (spec §4, §6; docs/PROTOCOL.md §8,
// §9): a submit or restore, the operator's kill and restart, an agent's reports, a node joining
// or lost, an ordered tick, a process's signal. Each checks its input, queues it on a new run
// (cluster-run.ts) and settles it (cluster-machines.ts), returning the effects.
import { fsmTask } from '../../fsm/fsm-task.ts';
import type { FsmProcEvent, FsmProcState } from '../../fsm/fsm-proc.ts';
import { initialStep, type MachineData } from '../../fsm/plain-data.ts';
import { MAX_ARGS, MAX_LIVE_TASKS, MAX_TASK_PROCS } from './constants.ts';
import { drain, settle, taskAction } from './cluster-machines.ts';
import { dgrpInput, dgrpRefusal, type DgrpInput } from './cluster-dgrp.ts';
import { createRankTable, guardCommand, rollbackRefusal, toProtectors } from './cluster-rollback.ts';
import { createDgrpState } from './dgrp.ts';
import { createStragglerState, stragglerRefusal } from './straggler.ts';
import { progressInput, type ProgressInput } from './cluster-straggler.ts';
import { newRun, note, perAgent, type Run } from './cluster-run.ts';
import { applyVerdict, broadcastSignal, liveMembers, MAX_SPAWNS, SIGNALLING, signalName } from './cluster-signals.ts';
import {
  HOLDING, isLive, NO_REASON, notOnNode, plural, procCtx, procState, taskState,
  type ClusterState, type NodeRecord, type Outcome, type SignedSubmit, type TaskEffect, type TaskRecord, type TaskTimers,
} from './cluster-state.ts';
import type { ProcessId } from './ports.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM, isAppSignal, isGroupRequest } from './signals.ts';
import { addGroupRequest, createTaskSignals, groupTimedOut, NON_MATCHING } from './task-signals.ts';
import type { AdoptEntry, EnvEntry, ProcReport, TaskSubmit } from './wire/messages.ts';

function validate(req: TaskSubmit, live: number): string | null {
  if (!Number.isInteger(req.size) || req.size < 1 || req.size > MAX_TASK_PROCS) {
    return `size must be 1 to ${MAX_TASK_PROCS} processes, got ${req.size}`;
  }
  if (req.file.length === 0) return 'no executable given: pass the path of the file to run';
  if (!req.cwd.startsWith('/')) return `cwd must be an absolute path, got '${req.cwd}'`;
  if (req.args.length > MAX_ARGS) return `at most ${MAX_ARGS} arguments, got ${req.args.length}`;
  for (let i = 1; i < req.env.length; i++) {
    const prev = (req.env[i - 1] as EnvEntry)[0];
    const name = (req.env[i] as EnvEntry)[0];
    if (!(prev < name)) return `env must be sorted by name without repeats: '${name}' follows '${prev}'`;
  }
  if (req.maxSpawns > MAX_SPAWNS) return `--max-spawns must be 0 to ${MAX_SPAWNS}, got ${req.maxSpawns}`;
  const recovery = rollbackRefusal(req) ?? dgrpRefusal(req) ?? stragglerRefusal(req);
  if (recovery !== null) return recovery;
  if (live >= MAX_LIVE_TASKS) return `${MAX_LIVE_TASKS} tasks are live, the limit: wait for some to finish or kill some`;
  return null;
}

/** A submit (`restoreOf` null) or, after a cluster reset, the watchdog's restore of the task
 *  that had id `restoreOf` (PROTOCOL §10.9): it keeps that id if it is free, and starts with the
 *  restarted flag set. */
export function submitTask(
  cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, timers: TaskTimers, req: TaskSubmit, rsn: number,
  submit: SignedSubmit | null = null, restoreOf: string | null = null,
): { outcome: Outcome; effects: TaskEffect[] } {
  const refusal = validate(req, cs.tasks.size - cs.finished.length);
  if (refusal !== null) return { outcome: { ok: false, text: refusal }, effects: [] };
  const run = newRun(cs, nodes);
  const number = restoreOf !== null && !cs.tasks.has(restoreOf) ? Number(restoreOf.slice(1)) : cs.nextTask;
  const id = `t${number}`;
  // T1: the task starts in Wait-for-resource, asking for nodes for VPIDs 0 … size-1.
  const init = initialStep(fsmTask, { taskId: id, size: req.size, ...timers, ...(restoreOf === null ? {} : { restarted: true }) });
  const rec: TaskRecord = {
    id, submit, number, name: req.name, size: req.size, file: req.file, args: [...req.args], cwd: req.cwd,
    env: req.env.map(([k, v]): EnvEntry => [k, v]), submittedRsn: rsn, fsm: init.data, procs: new Map(),
    reserved: new Map(), waitReason: null, outcome: null, reason: null, mode: req.mode,
    signals: createTaskSignals(req.size), endpoints: new Map(), spawnTicks: new Map(), sigStats: { broadcasts: 0, pointToPoint: 0, groupRequests: 0, dropped: 0 },
    taskKey: new Uint8Array(req.taskKey), recovery: { ...req.recovery },
    rollback: req.recovery.kind === 'rollback' ? createRankTable(req.size) : null,
    dgrp: req.dgrp === null ? null : { ...req.dgrp }, dgrpState: req.dgrp === null ? null : createDgrpState(req.dgrp),
    straggler: req.straggler === null ? null : { ...req.straggler }, stragglerState: req.straggler === null ? null : createStragglerState(),
    maxSpawns: req.maxSpawns,
  };
  cs.nextTask = Math.max(cs.nextTask, number + 1);
  cs.tasks.set(id, rec);
  note(run, id, null, restoreOf === null
    ? `${id} submitted: ${req.size} × ${req.file}`
    : `${id} restored after a cluster reset (it was ${restoreOf}), restarted flag set: ${req.size} × ${req.file}`);
  // Every protector learns the task's key before any of its processes can dial one (§11.4).
  const guard = guardCommand(rec);
  if (guard !== null) toProtectors(run, guard);
  for (const action of init.actions) taskAction(run, rec, action);
  return { outcome: { ok: true, text: id }, effects: settle(run) };
}

/** FsmTask states that take a restart (T9; Killing and Spawning let it supersede them). */
const RESTARTABLE = ['running', 'killing', 'spawning'];

/** The operator's kill (any live task) or restart (a running one) of `taskId`. */
export function operateTask(
  cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, _timers: TaskTimers, taskId: string, what: 'kill' | 'restart',
): { outcome: Outcome; effects: TaskEffect[] } {
  const rec = cs.tasks.get(taskId);
  if (rec === undefined) return { outcome: { ok: false, text: `no task ${taskId}` }, effects: [] };
  if (!isLive(rec)) {
    return { outcome: { ok: false, text: `${taskId} already finished (${rec.outcome === 'normal' ? 'normally' : 'abnormally'}: ${rec.reason ?? ''})` }, effects: [] };
  }
  if (what === 'restart' && !RESTARTABLE.includes(taskState(rec))) {
    return { outcome: { ok: false, text: `${taskId} is ${taskState(rec)}: only a running task can be restarted` }, effects: [] };
  }
  const run = newRun(cs, nodes);
  note(run, taskId, null, `${taskId} ${what} requested by the operator`);
  run.queue.push({ kind: 'task', task: taskId, event: { type: what === 'kill' ? 'task.kill' : 'app.restart' } });
  const effects = settle(run);
  const text = what === 'restart' ? `${taskId} restarting` : isLive(rec) ? `${taskId} terminating` : `${taskId} killed`;
  return { outcome: { ok: true, text }, effects };
}

/** An agent's reports, in order: each is checked and applied to its FsmProc before the next is
 *  looked at; placement and the service turn run once, after the last. */
export function procReports(
  cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, _timers: TaskTimers, agent: ProcessId, reports: readonly ProcReport[],
): TaskEffect[] {
  const run = newRun(cs, nodes);
  for (const r of reports) {
    applyReport(run, agent, r);
    drain(run);
  }
  return settle(run);
}

function applyReport(run: Run, agent: ProcessId, r: ProcReport): void {
  const { cs, nodes } = run;
  const at = `${r.task}/${r.vpid}`;
  const rec = cs.tasks.get(r.task);
  const data = rec?.procs.get(r.vpid);
  const node = nodes.get(agent)?.node ?? null;
  const placedOn = data === undefined ? null : procCtx(data).node;
  // Only the agent of the process's node speaks for it (spec §6.2: FsmProc's Agent). No such
  // process has no node (placedOn null), so it is refused here too.
  if (rec === undefined || node === null || placedOn !== node) {
    const why = data === undefined ? 'no such process' : `the process is on ${placedOn ?? 'no node'}, not ${node ?? 'an unknown node'}`;
    note(run, rec === undefined ? null : r.task, data === undefined ? null : r.vpid, `dropped ${r.kind} from ${agent} for ${at}: ${why}`);
    return;
  }
  const reason = r.reason === '' ? NO_REASON : r.reason;
  const event: FsmProcEvent = (() => {
    switch (r.kind) {
      case 'spawnSucceeded':
        if (rec.mode === 'linked' && r.endpoint !== '') rec.endpoints.set(r.vpid, r.endpoint);
        return { type: 'agent.spawnSucceeded', pid: r.pid };
      case 'spawnFailed': return { type: 'agent.spawnFailed', reason };
      case 'terminatedNormally':
        return r.signal === null ? { type: 'agent.terminatedNormally', exitCode: r.exitCode ?? 0 } : { type: 'agent.terminatedNormally', exitCode: 0, signal: r.signal, reason };
      case 'terminatedAbnormally': return { type: 'agent.terminatedAbnormally', exitCode: r.exitCode, signal: r.signal, reason };
      default: {
        const never: never = r.kind;
        return never;
      }
    }
  })();
  run.queue.push({ kind: 'proc', task: r.task, vpid: r.vpid, event });
}

/** Processes of live tasks that hold a slot on `node`, in task then VPID order. */
function procsOn(cs: ClusterState, node: string, states: readonly FsmProcState[]): { rec: TaskRecord; vpid: number; d: MachineData }[] {
  const out: { rec: TaskRecord; vpid: number; d: MachineData }[] = [];
  for (const rec of cs.tasks.values()) {
    if (!isLive(rec)) continue;
    for (const [vpid, d] of [...rec.procs].sort((a, b) => a[0] - b[0])) {
      if (procCtx(d).node === node && states.includes(procState(d))) out.push({ rec, vpid, d });
    }
  }
  return out;
}

export function nodeJoined(
  cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, _timers: TaskTimers, agent: ProcessId,
): { adopt: AdoptEntry[]; effects: TaskEffect[] } {
  const run = newRun(cs, nodes);
  const rec = nodes.get(agent);
  if (rec === undefined) return { adopt: [], effects: [] };
  // PROTOCOL §8.6: the new incarnation adopts what the group believes runs on its node.
  const adopt = procsOn(cs, rec.node, ['spawning', 'running', 'terminating'])
    .map((p) => ({ task: p.rec.id, vpid: p.vpid, pid: procCtx(p.d).pid ?? 0, linked: p.rec.mode === 'linked' }));
  note(run, null, null, `node ${rec.node} joined: ${plural(rec.slots, 'slot')}, adopting ${plural(adopt.length, 'process', 'processes')}`, { kind: 'node.joined', subject: rec.node });
  return { adopt, effects: settle(run) };
}

export function nodeFailed(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, _timers: TaskTimers, agent: ProcessId): TaskEffect[] {
  const run = newRun(cs, nodes);
  const rec = nodes.get(agent);
  if (rec === undefined) return [];
  const lost = procsOn(cs, rec.node, HOLDING);
  note(run, null, null, `node ${rec.node} lost: ${lost.length === 0 ? 'no processes' : `${lost.map((p) => `${p.rec.id}/${p.vpid}`).join(' ')} dead`}`, { kind: 'node.lost', subject: rec.node });
  // P10 for each process, then the task's Res-removed (spec §6.1) naming its lost VPIDs.
  for (const p of lost) run.queue.push({ kind: 'proc', task: p.rec.id, vpid: p.vpid, event: { type: 'res.removed' } });
  const byTask = new Map<string, number[]>();
  for (const p of lost) byTask.set(p.rec.id, [...(byTask.get(p.rec.id) ?? []), p.vpid]);
  for (const [task, vpids] of byTask) run.queue.push({ kind: 'task', task, event: { type: 'res.removed', vpids } });
  return settle(run);
}

export function tick(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, timers: TaskTimers): TaskEffect[] {
  const run = newRun(cs, nodes);
  cs.tick++;
  for (const rec of cs.tasks.values()) if (isLive(rec)) run.queue.push({ kind: 'task', task: rec.id, event: { type: 'clock.tick' } });
  drain(run);
  // Spec §4.5 (b): no quorum within the timeout from the epoch's first group request.
  for (const rec of cs.tasks.values()) {
    if (isLive(rec) && groupTimedOut(rec.signals, cs.tick, timers.groupRequestTimeoutTicks)) {
      note(run, rec.id, null, `${rec.id} group request timed out without a quorum: GSIG_ERR_DISAGREE`);
      broadcastSignal(run, rec, GSIG.ERR_DISAGREE, GSIG_CM, 0);
    }
  }
  return settle(run);
}

export type SignalRequestInput = { task: string; vpid: number; signum: number; dest: number; arg: number; epoch: number };

/** A signal from linked process `vpid` of `task`, sent by `agent` (spec §4.1–4.6). Everything a
 *  process could get wrong is dropped here with a counted, journalled reason and no effect;
 *  stale epochs are routine (spec §4.6) and only counted. */
export function signalRequest(
  cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, _timers: TaskTimers, agent: ProcessId, r: SignalRequestInput,
): TaskEffect[] {
  const run = newRun(cs, nodes);
  const rec = cs.tasks.get(r.task);
  const at = `${r.task}/${r.vpid}`;
  const drop = (why: string): TaskEffect[] => {
    if (rec !== undefined) rec.sigStats.dropped++;
    note(run, rec === undefined ? null : r.task, rec === undefined ? null : r.vpid, `dropped ${signalName(r.signum)} from ${at}: ${why}`);
    return settle(run);
  };
  /** A routine drop (a race with the task's own progress, spec §4.6): counted, not journalled. */
  const ignore = (task: TaskRecord): TaskEffect[] => {
    task.sigStats.dropped++;
    return settle(run);
  };
  if (rec === undefined || !isLive(rec)) return drop('no such live task');
  if (rec.mode !== 'linked') return drop('the task is not linked');
  const node = nodes.get(agent)?.node ?? null;
  const members = liveMembers(rec);
  if (!members.includes(r.vpid)) return drop('the sender is not a connected member of the task');
  const elsewhere = notOnNode(rec, r.vpid, node);
  if (elsewhere !== null) return drop(elsewhere);
  const sig = rec.signals;

  if (r.dest !== GSIG_CM && r.dest !== GSIG_BROADCAST) {
    // Point-to-point: routed through the manager for per-source FIFO (spec §4.1 (a)); no epoch.
    if (!isAppSignal(r.signum)) return drop(`signal number ${r.signum} is not an application signal`);
    if (!members.includes(r.dest)) return drop(`destination VPID ${r.dest} is not a connected member`);
    // Only once the mappings went out (T4): a process must not hear from a peer before it knows
    // its task (its library refuses a signal before the mapping).
    if (!SIGNALLING.includes(taskState(rec))) return ignore(rec);
    rec.sigStats.pointToPoint++;
    perAgent(run, rec, [r.dest], (vpids) => ({
      type: 'proc.signal', task: rec.id, vpids, signum: r.signum, src: r.vpid, dest: r.dest, arg: r.arg, epoch: sig.epoch, node: '', data: '',
    }));
    return settle(run);
  }
  const isBroadcast = r.dest === GSIG_BROADCAST;
  if (isBroadcast ? !isAppSignal(r.signum) : !isGroupRequest(r.signum)) {
    return drop(`signal number ${r.signum} is not ${isBroadcast ? 'an application signal' : 'a group request'}`);
  }
  // A stale epoch (the request crossed a broadcast), or a task no longer running.
  if (r.epoch !== sig.epoch || taskState(rec) !== 'running') return ignore(rec);

  let verdict;
  if (isBroadcast) {
    if (sig.pending === null) {
      // The first request of the epoch: performed (spec §4.6 rule 2).
      broadcastSignal(run, rec, r.signum, r.vpid, r.arg);
      return settle(run);
    }
    // Spec §4.6 / §9.1 item 71: a broadcast request in an epoch that already has group requests
    // is dropped and counted as a group request of its sender that matches no other.
    verdict = addGroupRequest(sig, { vpid: r.vpid, signum: NON_MATCHING, arg: 0 }, members, cs.tick);
    if (verdict.kind !== 'duplicate') rec.sigStats.dropped++;
  } else {
    rec.sigStats.groupRequests++;
    verdict = addGroupRequest(sig, { vpid: r.vpid, signum: r.signum, arg: r.arg }, members, cs.tick);
  }
  // A second request from the same process in one epoch.
  if (verdict.kind === 'duplicate') return ignore(rec);
  applyVerdict(run, rec, verdict, members.length);
  return settle(run);
}

/** A DGRP tester's report or a barrier arrival (PROTOCOL §12.2, §12.4) from `agent`. */
export function dgrpRequest(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, agent: ProcessId, r: DgrpInput): TaskEffect[] {
  const run = newRun(cs, nodes);
  dgrpInput(run, nodes.get(agent)?.node ?? null, r);
  return settle(run);
}

/** A process's progress report (PROTOCOL §13.2) from `agent`. */
export function progressRequest(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, agent: ProcessId, r: ProgressInput): TaskEffect[] {
  const run = newRun(cs, nodes);
  progressInput(run, nodes.get(agent)?.node ?? null, r);
  return settle(run);
}
