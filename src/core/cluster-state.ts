// The manager's replicated task and process state (spec §6, §6.1, §6.2; docs/PROTOCOL.md §8):
// one FsmTask per task and one FsmProc per process, stored as plain data (fsm/plain-data.ts) and
// advanced with xstate's pure transition(); placement of processes on node slots; the
// gang-scheduling service queue (spec §6: one task started or terminated at a time); and the
// journal events `trine ps` shows. Pure and deterministic (STYLE.md 1): every replica applies the
// same inputs in the same RSN order and reaches the same state, so nothing here reads a clock or a
// random source, and every Map is iterated in insertion order, which is the same everywhere
// because every insert happens at the same RSN on every replica.
//
// Each entry point runs a FIFO work queue of (machine, event): a machine's actions only append
// to it, so an action that feeds an event to another machine (or the same one) never recurses,
// and every action of every step is executed in the order the machine returned it.
import { FSM_PROC_FINAL_STATES, fsmProc, type FsmProcContext, type FsmProcEvent, type FsmProcState } from '../../fsm/fsm-proc.ts';
import { fsmTask, type FsmTaskContext, type FsmTaskEvent, type Service } from '../../fsm/fsm-task.ts';
import { encodeData, initialStep, step, type MachineAction, type MachineData } from '../../fsm/plain-data.ts';
import { MAX_ARGS, MAX_FINISHED_TASKS, MAX_LIVE_TASKS, MAX_TASK_PROCS, MAX_VIEW_TASK_CHARS, type Timing } from './constants.ts';
import type { ProcessId } from './ports.ts';
import { toHex } from '../base/hex.ts';
import { assert } from '../base/result.ts';
import type { ClusterView, NodeView, ProcView, TaskView } from './status.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM, isAppSignal, isGroupRequest } from './signals.ts';
import {
  accept, addGroupRequest, createTaskSignals, encodeTaskSignals, groupTimedOut, judgeGroupRequest, nextBroadcastEpoch,
  NON_MATCHING, quorumInForce, type GroupVerdict, type TaskSignals,
} from './task-signals.ts';
import type { AdoptEntry, EnvEntry, GroupCommand, Member, ProcReport, TaskSubmit } from './wire/messages.ts';

/** `draining`: an operator removes the node (PROTOCOL §10.12): nothing new is placed on it, and
 *  it leaves once no live task holds a slot there. */
export type NodeRecord = { node: string; joined: boolean; slots: number; failed: boolean; inc: number; draining: boolean };
export type TaskTimers = {
  startTimeoutTicks: number; terminateTimeoutTicks: number; maxStartAttempts: number; maxTerminateAttempts: number;
  /** Spec §4.5 (b), in ticks (not part of FsmTask's input). */
  groupRequestTimeoutTicks: number;
  /** PROTOCOL §10.6: a replacement replica must ask for the state within this. */
  replicaStartTimeoutTicks: number;
};

/** Start-TO and Terminate-TO count ordered task-clock ticks (PROTOCOL §8.3), never wall time. */
export function taskTimers(t: Timing): TaskTimers {
  const ticks = (ms: number) => Math.max(1, Math.ceil(ms / Math.max(1, t.taskTickMs)));
  return {
    startTimeoutTicks: ticks(t.startTimeoutMs),
    terminateTimeoutTicks: ticks(t.terminateTimeoutMs),
    maxStartAttempts: Math.max(1, t.maxStartAttempts),
    maxTerminateAttempts: Math.max(1, t.maxTerminateAttempts),
    groupRequestTimeoutTicks: ticks(t.groupRequestTimeoutMs),
    replicaStartTimeoutTicks: ticks(t.replicaStartTimeoutMs),
  };
}

/** The operator's signed submit a task came from: its nonce, and the CG's canonical bytes and
 *  the operator's signature over them. Kept while the task lives, for the task journal
 *  (src/core/task-journal.ts, PROTOCOL §10.9). */
export type SignedSubmit = { nonce: string; bytes: Uint8Array; sig: Uint8Array };

/** What was submitted (the request without its type and nonce). */
export type TaskRecord = Omit<TaskSubmit, 'type' | 'nonce'> & {
  id: string;
  /** Null only for tasks created without one (unit tests). */
  submit: SignedSubmit | null;
  /** n of `tn`: submission order. */
  number: number;
  submittedRsn: number;
  fsm: MachineData;
  /** FsmProc per VPID. */
  procs: Map<number, MachineData>;
  /** Nodes placement chose for VPIDs whose FsmProc has not taken them yet (consumed within the
   *  same input: FsmTask answers res.allocated at once). Counted as used slots meanwhile. */
  reserved: Map<number, string>;
  /** Why the task's allocation request cannot be placed; null once placed. */
  waitReason: string | null;
  outcome: 'normal' | 'abnormal' | null;
  reason: string | null;
  /** Epoch, quorum and the group requests of the current epoch (PROTOCOL §9.2). */
  signals: TaskSignals;
  /** G-MPI endpoints of linked members, from their spawnSucceeded reports. */
  endpoints: Map<number, string>;
  sigStats: { broadcasts: number; pointToPoint: number; groupRequests: number; dropped: number };
};

/** A pending `requestResources`: all-or-nothing (spec §6.1 Res-allocated: nodes for all). */
export type AllocationRequest = { task: string; vpids: number[] };
export type ServiceTurn = { task: string; service: Service };

export type ClusterState = {
  /** Ordered task-clock ticks applied. */
  tick: number;
  /** n of the next task id `tn`. */
  nextTask: number;
  /** Live and remembered finished tasks, in submission order. */
  tasks: Map<string, TaskRecord>;
  /** Finished task ids, oldest finish first (at most MAX_FINISHED_TASKS). */
  finished: string[];
  /** FIFO; at most one per live task (FsmTask asks for nodes in Wait-for-resource or for one
   *  App-spawn, never both), so bounded by MAX_LIVE_TASKS. */
  allocations: AllocationRequest[];
  /** Gang scheduling (spec §6): tasks waiting for their start/terminate turn, FIFO; a task
   *  is in it at most once per service, so it is bounded by twice MAX_LIVE_TASKS. */
  serviceQueue: ServiceTurn[];
  /** The task whose start or terminate is in progress, if any. */
  serviceActive: ServiceTurn | null;
};

export function createClusterState(): ClusterState {
  return { tick: 0, nextTask: 1, tasks: new Map(), finished: [], allocations: [], serviceQueue: [], serviceActive: null };
}

export type TaskEffect =
  | { type: 'command'; agent: ProcessId; command: GroupCommand }
  | { type: 'event'; task: string | null; vpid: number | null; text: string };
export type Outcome = { ok: boolean; text: string };

// ---- reading the stored machines -------------------------------------------------------------

const taskCtx = (r: TaskRecord) => r.fsm.context as FsmTaskContext;
const taskState = (r: TaskRecord) => r.fsm.value as string;
const procCtx = (d: MachineData) => d.context as FsmProcContext;
const procState = (d: MachineData) => d.value as FsmProcState;
const isFinal = (d: MachineData) => FSM_PROC_FINAL_STATES.includes(procState(d));
/** States in which a process holds a slot on its node (status.ts NodeView.used). */
const HOLDING: readonly FsmProcState[] = ['allocated', 'spawning', 'running', 'terminating'];
const holds = (d: MachineData) => HOLDING.includes(procState(d));
const isLive = (r: TaskRecord) => r.outcome === null;
/** Slots live tasks hold on `node` (a draining node leaves at 0, PROTOCOL §10.12). */
export const slotsHeldOn = (cs: ClusterState, node: string): number => usedSlots(cs).get(node) ?? 0;

/** The live tasks holding a slot on `node`, in id order. */
export function tasksOn(cs: ClusterState, node: string): string[] {
  const out: string[] = [];
  for (const [id, rec] of cs.tasks) {
    if (!isLive(rec)) continue;
    const there = [...rec.procs.values()].some((d) => holds(d) && procCtx(d).node === node) || [...rec.reserved.values()].includes(node);
    if (there) out.push(id);
  }
  return out;
}

/** The tasks not yet finished, in id order (a cluster shutdown kills them, PROTOCOL §10.11). */
export const liveTasks = (cs: ClusterState): string[] =>
  [...cs.tasks.entries()].filter(([, r]) => isLive(r)).map(([id]) => id).sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
/** A failure an agent reported without saying why (an empty reason: a terse or faulty agent). */
const NO_REASON = 'no reason given';

const plural = (n: number, word: string, many = `${word}s`) => `${n} ${n === 1 ? word : many}`;

// ---- the work queue --------------------------------------------------------------------------

type WorkItem =
  | { kind: 'task'; task: string; event: FsmTaskEvent }
  | { kind: 'proc'; task: string; vpid: number; event: FsmProcEvent }
  /** Feed the procs.* aggregates of a task (FsmTask header contract), computed when reached. */
  | { kind: 'aggregate'; task: string };

type Run = {
  cs: ClusterState;
  nodes: Map<ProcessId, NodeRecord>;
  queue: WorkItem[];
  effects: TaskEffect[];
  /** Tasks with an aggregate item still queued: one pending evaluation covers every change. */
  aggregatePending: Set<string>;
};

const newRun = (cs: ClusterState, nodes: Map<ProcessId, NodeRecord>): Run =>
  ({ cs, nodes, queue: [], effects: [], aggregatePending: new Set() });

function note(run: Run, task: string | null, vpid: number | null, text: string): void {
  run.effects.push({ type: 'event', task, vpid, text });
}

function agentOf(run: Run, node: string): ProcessId | null {
  for (const [agent, rec] of run.nodes) if (rec.node === node) return agent;
  return null;
}

/** Work through the queue. It ends: each item is one step of a finite machine, and a machine
 *  only produces items for events the manager itself defines (no agent input enters here). */
function drain(run: Run): void {
  for (let i = 0; i < run.queue.length; i++) {
    const item = run.queue[i] as WorkItem;
    const rec = run.cs.tasks.get(item.task);
    if (rec === undefined) continue; // forgotten (MAX_FINISHED_TASKS) while its item waited
    if (item.kind === 'task') stepTask(run, rec, item.event);
    else if (item.kind === 'proc') stepProc(run, rec, item.vpid, item.event);
    else {
      run.aggregatePending.delete(rec.id);
      feedAggregates(run, rec);
    }
  }
  run.queue = [];
}

/** After every input: drain, place what can be placed, give the service turn, until quiet. */
function settle(run: Run): TaskEffect[] {
  for (;;) {
    drain(run);
    if (place(run)) continue;
    if (grantService(run)) continue;
    return run.effects;
  }
}

// ---- FsmTask ---------------------------------------------------------------------------------

function stepTask(run: Run, rec: TaskRecord, event: FsmTaskEvent): void {
  const before = taskState(rec);
  const r = step(fsmTask, rec.fsm, event);
  rec.fsm = r.data;
  if (taskState(rec) !== before) noteTaskState(run, rec, before);
  for (const action of r.actions) taskAction(run, rec, action);
}

function noteTaskState(run: Run, rec: TaskRecord, before: string): void {
  const c = taskCtx(rec);
  switch (taskState(rec)) {
    case 'starting':
      return note(run, rec.id, null, `${rec.id} starting (attempt ${c.startCount} of ${c.maxStartAttempts})`);
    case 'running':
      if (before === 'starting') {
        note(run, rec.id, null, `${rec.id} running: ${plural(c.vpids.length, 'process', 'processes')}`);
        // Every member has connected and told its endpoint: the mapping goes out (spec §7 item 2).
        sendMappings(run, rec, liveMembers(rec), false);
      }
      return;
    case 'waitForTerminate':
      return note(run, rec.id, null, `${rec.id} terminating: ${c.reason ?? c.failure ?? c.afterTerminate ?? 'requested'}`);
    case 'waitForResource':
      // Back to allocation: a node lost before the spawn (T2 choice), a retry (T5), a restart (T9).
      if (before === 'waitForStart') return note(run, rec.id, null, `${rec.id} placing again: a node was lost before the spawn`);
      if (c.restarted && c.startCount === 0) return note(run, rec.id, null, `${rec.id} restarting`);
      return note(run, rec.id, null, `${rec.id} retrying after: ${c.failure ?? 'a failed start'}`);
    default:
      return;
  }
}

function taskAction(run: Run, rec: TaskRecord, action: MachineAction): void {
  const cs = run.cs;
  switch (action.type) {
    case 'requestResources': {
      const { vpids } = action.params as { vpids: number[] };
      // Entering Wait-for-resource (T1, T5 retry, T9 restart): the task is exactly its
      // members, each with a fresh FsmProc; earlier processes are history.
      if (taskState(rec) === 'waitForResource') {
        rec.procs = new Map();
        rec.endpoints = new Map();
        // A new start: the quorum is the task's size again; the epoch runs on (PROTOCOL §9.2).
        rec.signals.quorum = taskCtx(rec).vpids.length;
        rec.signals.pending = null;
      }
      for (const v of vpids) {
        rec.procs.set(v, initialStep(fsmProc, { taskId: rec.id, vpid: v }).data);
        rec.reserved.delete(v);
      }
      dropRequested(cs, rec.id, vpids);
      cs.allocations.push({ task: rec.id, vpids: [...vpids] });
      return;
    }
    case 'cancelResources': {
      const { vpids } = action.params as { vpids: number[] };
      dropRequested(cs, rec.id, vpids);
      for (const v of vpids) rec.reserved.delete(v);
      return;
    }
    case 'enqueueService': {
      const { service } = action.params as { service: Service };
      if (!cs.serviceQueue.some((s) => s.task === rec.id && s.service === service)) cs.serviceQueue.push({ task: rec.id, service });
      return;
    }
    case 'cancelService': {
      const { service } = action.params as { service: Service };
      cs.serviceQueue = cs.serviceQueue.filter((s) => !(s.task === rec.id && s.service === service));
      return;
    }
    case 'serviceDone':
      if (cs.serviceActive?.task === rec.id) cs.serviceActive = null;
      return;
    case 'sendToProcs': {
      const { command, vpids } = action.params as { command: 'spawn' | 'terminate' | 'res-allocated'; vpids: number[] };
      for (const vpid of vpids) {
        if (command === 'res-allocated') {
          const node = rec.reserved.get(vpid);
          assert(node !== undefined, `${rec.id}/${vpid}: res-allocated without a placement`);
          rec.reserved.delete(vpid);
          run.queue.push({ kind: 'proc', task: rec.id, vpid, event: { type: 'res.allocated', node } });
        } else {
          run.queue.push({ kind: 'proc', task: rec.id, vpid, event: { type: command === 'spawn' ? 'task.spawn' : 'task.terminate' } });
        }
      }
      return;
    }
    case 'broadcast': {
      const { signal, arg } = action.params as { signal: 'GSIG_NTF_DIED' | 'GSIG_REP_ACK_KILL' | 'GSIG_REP_ACK_SPAWN' | 'GSIG_REP_SPAWNED'; arg: number };
      const signum = GSIG[signal.slice('GSIG_'.length) as keyof typeof GSIG];
      if (signum === GSIG.REP_SPAWNED) {
        // The new member gets its mapping first (recovered: spawned into a running task), then
        // the reply reaches every member, the new one included (PROTOCOL §9.3).
        sendMappings(run, rec, [arg], true);
        const endpoint = rec.endpoints.get(arg) ?? '';
        note(run, rec.id, arg, `${rec.id} ${signal}(${arg}) on ${procNode(rec, arg) ?? '?'}${endpoint === '' ? '' : ` at ${endpoint}`}`);
        return broadcastSignal(run, rec, signum, GSIG_CM, arg, procNode(rec, arg) ?? '', endpoint);
      }
      note(run, rec.id, arg, `${rec.id} ${signal}(${arg})`);
      return broadcastSignal(run, rec, signum, GSIG_CM, arg);
    }
    case 'taskFinished': {
      const { outcome, reason } = action.params as { outcome: 'normal' | 'abnormal'; reason: string };
      return finishTask(run, rec, outcome, reason);
    }
    default:
      return assert(false, `FsmTask action ${action.type} unknown to the manager`);
  }
}

function dropRequested(cs: ClusterState, task: string, vpids: number[]): void {
  cs.allocations = cs.allocations
    .map((a) => (a.task === task ? { task, vpids: a.vpids.filter((v) => !vpids.includes(v)) } : a))
    .filter((a) => a.vpids.length > 0);
}

const procNode = (rec: TaskRecord, vpid: number): string | null => {
  const d = rec.procs.get(vpid);
  return d === undefined ? null : procCtx(d).node;
};

/** The task reached a final state: release its requests, queue places and slots (slots are
 *  counted over live tasks only), and keep it for `trine ps` among the recent finished ones. */
function finishTask(run: Run, rec: TaskRecord, outcome: 'normal' | 'abnormal', reason: string): void {
  const cs = run.cs;
  rec.outcome = outcome;
  rec.reason = reason;
  rec.waitReason = null;
  rec.reserved.clear();
  cs.allocations = cs.allocations.filter((a) => a.task !== rec.id);
  cs.serviceQueue = cs.serviceQueue.filter((s) => s.task !== rec.id);
  if (cs.serviceActive?.task === rec.id) cs.serviceActive = null;
  note(run, rec.id, null, `${rec.id} finished ${outcome === 'normal' ? 'normally' : 'abnormally'}: ${reason}`);
  cs.finished.push(rec.id);
  while (cs.finished.length > MAX_FINISHED_TASKS) cs.tasks.delete(cs.finished.shift() as string);
}

// ---- FsmProc ---------------------------------------------------------------------------------

function stepProc(run: Run, rec: TaskRecord, vpid: number, event: FsmProcEvent): void {
  const data = rec.procs.get(vpid);
  if (data === undefined) return; // replaced by a retry or restart while the event waited
  const r = step(fsmProc, data, event);
  rec.procs.set(vpid, r.data);
  for (const action of r.actions) procAction(run, rec, vpid, action);
}

function procAction(run: Run, rec: TaskRecord, vpid: number, action: MachineAction): void {
  switch (action.type) {
    case 'commandAgent': {
      const p = action.params as { command: 'spawn' | 'terminate'; node: string };
      const agent = agentOf(run, p.node);
      if (agent === null) return note(run, rec.id, vpid, `${rec.id}/${vpid}: no agent on ${p.node} for ${p.command}`);
      const command: GroupCommand = p.command === 'spawn'
        ? spawnCommand(rec, vpid)
        : { type: 'proc.terminate', task: rec.id, vpid };
      run.effects.push({ type: 'command', agent, command });
      return;
    }
    case 'reportToTask': {
      const { state } = action.params as { state: FsmProcState };
      reportToTask(run, rec, vpid, state);
      return;
    }
    default:
      return assert(false, `FsmProc action ${action.type} unknown to the manager`);
  }
}

/** FsmProc's Spawn with the mapping message's contents (spec §7 item 2): the task's current
 *  members, the restarted flag, and every member's node that has one. */
function spawnCommand(rec: TaskRecord, vpid: number): GroupCommand {
  const c = taskCtx(rec);
  const endpoints = c.vpids.flatMap((v) => {
    const node = procNode(rec, v);
    return node === null ? [] : [{ vpid: v, node }];
  });
  return {
    type: 'proc.spawn', task: rec.id, vpid, mode: rec.mode, file: rec.file, args: [...rec.args], cwd: rec.cwd,
    env: rec.env.map(([k, v]): EnvEntry => [k, v]), size: c.vpids.length, restarted: c.restarted, endpoints,
    taskKey: rec.taskKey,
  };
}

function reportToTask(run: Run, rec: TaskRecord, vpid: number, state: FsmProcState): void {
  const d = rec.procs.get(vpid) as MachineData;
  const p = procCtx(d);
  const at = `${rec.id}/${vpid}`;
  const push = (event: FsmTaskEvent) => run.queue.push({ kind: 'task', task: rec.id, event });
  switch (state) {
    case 'running':
      note(run, rec.id, vpid, `${at} running pid ${p.pid ?? 0} on ${p.node ?? '?'}`);
      push({ type: 'proc.running', vpid });
      break;
    case 'spawnFailed':
      note(run, rec.id, vpid, `${at} spawn failed on ${p.node ?? '?'}: ${p.reason ?? NO_REASON}`);
      push(p.reason === null ? { type: 'proc.spawnFailed', vpid } : { type: 'proc.spawnFailed', vpid, detail: p.reason });
      break;
    case 'terminatedNormally':
      // P15 (terminated before spawn) is routine when a waiting task ends: not journalled.
      if (p.exitCode !== null) note(run, rec.id, vpid, `${at} exited ${p.exitCode}`);
      // A crash is broadcast (NTF_DIED), which ends the collection; a normal exit is not.
      rejudgeGroupRequest(run, rec);
      push({ type: 'proc.terminated', vpid, normally: true });
      break;
    case 'terminatedAbnormally':
      // A lost node is journalled once for all its processes (nodeFailed).
      if (p.reason !== 'node lost') {
        const how = p.signal ?? (p.exitCode !== null ? `exit ${p.exitCode}` : (p.reason ?? NO_REASON));
        note(run, rec.id, vpid, `${at} terminated abnormally: ${how}`);
      }
      push({ type: 'proc.terminated', vpid, normally: false });
      break;
    case 'waitForResource':
    case 'allocated':
    case 'spawning':
    case 'terminating':
      break;
    default: {
      const never: never = state;
      return never;
    }
  }
  if (!run.aggregatePending.has(rec.id)) {
    run.aggregatePending.add(rec.id);
    run.queue.push({ kind: 'aggregate', task: rec.id });
  }
}

/** The "Any/All FsmProc in st" inputs of spec §6.1 over the task's members, per the FsmTask
 *  header contract. FsmTask tolerates repeats; deaths it already recorded are left out. */
function feedAggregates(run: Run, rec: TaskRecord): void {
  const c = taskCtx(rec);
  const members = c.vpids.flatMap((v) => {
    const d = rec.procs.get(v);
    return d === undefined ? [] : [{ vpid: v, d }];
  });
  const events: FsmTaskEvent[] = [];
  const failed = members.find((m) => procState(m.d) === 'spawnFailed');
  if (failed !== undefined) {
    const detail = procCtx(failed.d).reason;
    events.push(detail === null ? { type: 'procs.anySpawnFailed' } : { type: 'procs.anySpawnFailed', detail });
  }
  const crashed = members.filter((m) => procState(m.d) === 'terminatedAbnormally' && !c.deadVpids.includes(m.vpid));
  if (crashed.length > 0) events.push({ type: 'procs.anyTerminatedAbnormally', vpids: crashed.map((m) => m.vpid) });
  // A member that terminated normally after its pid was reported did run (FsmTask contract).
  const ran = (m: { d: MachineData }) =>
    procState(m.d) === 'running' || (procState(m.d) === 'terminatedNormally' && procCtx(m.d).pid !== null);
  if (members.every(ran)) events.push({ type: 'procs.allRunning' });
  if (members.every((m) => isFinal(m.d))) {
    const normally = members.every((m) => procState(m.d) === 'terminatedNormally');
    events.push({ type: normally ? 'procs.allTerminatedNormally' : 'procs.allTerminated' });
  }
  for (const event of events) stepTask(run, rec, event);
}

// ---- placement and the service queue ---------------------------------------------------------

/** Slots held per node by live tasks: their processes that hold one, and their reservations.
 *  A finished task holds none, even if an agent never confirmed a terminate (T17 gave up). */
function usedSlots(cs: ClusterState): Map<string, number> {
  const used = new Map<string, number>();
  const add = (node: string) => used.set(node, (used.get(node) ?? 0) + 1);
  for (const rec of cs.tasks.values()) {
    if (!isLive(rec)) continue;
    for (const d of rec.procs.values()) {
      const node = procCtx(d).node;
      if (holds(d) && node !== null) add(node);
    }
    for (const node of rec.reserved.values()) add(node);
  }
  return used;
}

/** Free slots on every healthy node (joined, not failed), ascending by node name. */
function freeSlots(run: Run): Map<string, number> {
  const used = usedSlots(run.cs);
  const healthy = [...run.nodes.values()].filter((n) => n.joined && !n.failed && !n.draining).sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  return new Map(healthy.map((n) => [n.node, Math.max(0, n.slots - (used.get(n.node) ?? 0))]));
}

/** Places pending requests in FIFO order, each all-or-nothing. First-fit: a request that does
 *  not fit does not block smaller ones behind it (a large task may wait while small ones run;
 *  its waitReason says why). Returns whether anything was placed. */
function place(run: Run): boolean {
  const cs = run.cs;
  if (cs.allocations.length === 0) return false;
  const free = freeSlots(run);
  let placed = false;
  for (const req of [...cs.allocations]) {
    const rec = cs.tasks.get(req.task);
    if (rec === undefined || !isLive(rec)) continue;
    const total = [...free.values()].reduce((a, b) => a + b, 0);
    if (req.vpids.length > total) {
      const why = `needs ${plural(req.vpids.length, 'slot')}, ${total} free on ${plural(free.size, 'healthy node')}`;
      if (rec.waitReason !== why) note(run, rec.id, null, `${rec.id} waiting: ${why}`);
      rec.waitReason = why;
      continue;
    }
    // Spread: each process to the node with the most free slots, ties by node name.
    const counts = new Map<string, number>();
    for (const vpid of req.vpids) {
      let best: string | null = null;
      for (const [node, n] of free) if (best === null || n > (free.get(best) as number)) best = node;
      assert(best !== null && (free.get(best) as number) > 0, 'placement: counted slots vanished');
      free.set(best, (free.get(best) as number) - 1);
      rec.reserved.set(vpid, best);
      counts.set(best, (counts.get(best) ?? 0) + 1);
    }
    cs.allocations = cs.allocations.filter((a) => a !== req);
    rec.waitReason = null;
    const where = [...counts].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([node, n]) => `${node}×${n}`).join(' ');
    note(run, rec.id, null, `${rec.id} placed: ${where}`);
    run.queue.push({ kind: 'task', task: rec.id, event: { type: 'res.allocated' } });
    placed = true;
  }
  return placed;
}

/** Gang scheduling (spec §6): when no task is starting or terminating, the queue's first
 *  terminate turn, else its head, gets its turn. Terminating first (a choice; the spec only
 *  says one at a time) frees slots and stops the survivors of a failed start without waiting up
 *  to Start-TO behind every task queued to start. Returns whether a turn was given. */
function grantService(run: Run): boolean {
  const cs = run.cs;
  if (cs.serviceActive !== null) return false;
  const terminate = cs.serviceQueue.findIndex((s) => s.service === 'terminate');
  const [turn] = cs.serviceQueue.splice(terminate >= 0 ? terminate : 0, 1);
  if (turn === undefined) return false;
  const rec = cs.tasks.get(turn.task);
  if (rec === undefined || !isLive(rec)) return true;
  cs.serviceActive = turn;
  stepTask(run, rec, { type: turn.service === 'start' ? 'cm.spawn' : 'cm.terminate' });
  // The turn ends with serviceDone on leaving Starting/Terminating. A task that did not take it
  // (it cancels its place when it stops waiting, so this is defensive) must not hold it forever.
  const serving = turn.service === 'start' ? 'starting' : 'terminating';
  if (cs.serviceActive === turn && taskState(rec) !== serving) cs.serviceActive = null;
  return true;
}

// ---- Ghidrah signals (spec §4; PROTOCOL §9) -----------------------------------------------

/** Members that can send and receive signals: connected (FsmProc Running), in VPID order. */
function liveMembers(rec: TaskRecord): number[] {
  return taskCtx(rec).vpids.filter((v) => {
    const d = rec.procs.get(v);
    return d !== undefined && procState(d) === 'running';
  });
}

/** Commands for the processes `vpids` of `rec`, one per agent (in node order, VPIDs ascending). */
function perAgent(run: Run, rec: TaskRecord, vpids: readonly number[], make: (vpids: number[]) => GroupCommand): void {
  const byNode = new Map<string, number[]>();
  for (const v of [...vpids].sort((a, b) => a - b)) {
    const node = procNode(rec, v);
    if (node !== null) byNode.set(node, [...(byNode.get(node) ?? []), v]);
  }
  for (const [node, list] of [...byNode].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    const agent = agentOf(run, node);
    if (agent !== null) run.effects.push({ type: 'command', agent, command: make(list) });
  }
}

/** The mapping message (spec §7 item 2) to `vpids`, listing every live member. */
function sendMappings(run: Run, rec: TaskRecord, vpids: readonly number[], recovered: boolean): void {
  if (rec.mode !== 'linked' || vpids.length === 0) return;
  const members: Member[] = liveMembers(rec).map((v) => ({ vpid: v, node: procNode(rec, v) ?? '', endpoint: rec.endpoints.get(v) ?? '' }));
  const c = taskCtx(rec);
  perAgent(run, rec, vpids, (list) => ({
    type: 'proc.mapping', task: rec.id, vpids: list, restarted: c.restarted, recovered, epoch: rec.signals.epoch,
    quorum: rec.signals.quorum, members,
  }));
}

/** A broadcast to every live member (spec §4.6): the epoch is incremented first and carried,
 *  and the group requests collected in the old epoch are dropped. Plain tasks have no one to
 *  deliver to; their epoch still counts. */
function broadcastSignal(run: Run, rec: TaskRecord, signum: number, src: number, arg: number, node = '', data = ''): void {
  const epoch = nextBroadcastEpoch(rec.signals);
  rec.sigStats.broadcasts++;
  if (rec.mode !== 'linked') return;
  perAgent(run, rec, liveMembers(rec), (vpids) => ({
    type: 'proc.signal', task: rec.id, vpids, signum, src, dest: GSIG_BROADCAST, arg, epoch, node, data,
  }));
}

/** Task states in which every member has its mapping (T4 onwards, until it terminates). */
const SIGNALLING = ['running', 'killing', 'spawning'];

const SIGNAL_NAMES = new Map<number, string>(Object.entries(GSIG).map(([k, v]) => [v, `GSIG_${k}`]));
const signalName = (signum: number): string => SIGNAL_NAMES.get(signum) ?? `signal ${signum}`;

/** A group request reached its quorum (spec §4.5): run the service. SETQUORUM and SYNC reply at
 *  once (atomic); KILL, SPAWN, RESTART and TERMINATE go to FsmTask (T8–T15), which replies. */
function performGroupRequest(run: Run, rec: TaskRecord, signum: number, arg: number): void {
  const members = liveMembers(rec);
  const disagree = (why: string) => {
    note(run, rec.id, null, `${rec.id} ${signalName(signum)}(${arg}) accepted but refused: ${why}: GSIG_ERR_DISAGREE`);
    broadcastSignal(run, rec, GSIG.ERR_DISAGREE, GSIG_CM, 0);
  };
  note(run, rec.id, null, `${rec.id} group request ${signalName(signum)}(${arg}) accepted`);
  const push = (event: FsmTaskEvent): void => {
    run.queue.push({ kind: 'task', task: rec.id, event });
  };
  switch (signum) {
    case GSIG.REQ_SETQUORUM:
      if (arg < 1 || arg > members.length) return disagree(`quorum must be 1 to ${members.length}`);
      rec.signals.quorum = arg;
      return broadcastSignal(run, rec, GSIG.REP_QUORUMSET, GSIG_CM, arg);
    case GSIG.REQ_SYNC:
      return broadcastSignal(run, rec, GSIG.REP_SYNC, GSIG_CM, arg);
    case GSIG.REQ_KILL:
      if (!members.includes(arg)) return disagree(`VPID ${arg} is not a live member`);
      return push({ type: 'app.kill', vpid: arg });
    case GSIG.REQ_SPAWN:
      return push({ type: 'app.spawn' });
    case GSIG.REQ_RESTART:
      return push({ type: 'app.restart' });
    case GSIG.REQ_TERMINATE:
      return push({ type: 'app.terminate' });
    default:
      return disagree('not a group request');
  }
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
  if (procNode(rec, r.vpid) !== node) return drop(`the sender is on ${procNode(rec, r.vpid) ?? 'no node'}, not ${node ?? 'an unknown node'}`);
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

function applyVerdict(run: Run, rec: TaskRecord, verdict: GroupVerdict, members: number): void {
  switch (verdict.kind) {
    case 'accept':
      accept(rec.signals);
      return performGroupRequest(run, rec, verdict.signum, verdict.arg);
    case 'disagree':
      note(run, rec.id, null, `${rec.id} group request cannot reach quorum ${quorumInForce(rec.signals, members)} of ${members}: GSIG_ERR_DISAGREE`);
      return broadcastSignal(run, rec, GSIG.ERR_DISAGREE, GSIG_CM, 0);
    case 'duplicate':
    case 'wait':
      return;
    default: {
      const never: never = verdict;
      return never;
    }
  }
}

/** A member left Running (it ended, normally or not): the requests it sent no longer count, and
 *  the collection is judged again with one member fewer (a quorum may now be met, or lost). */
function rejudgeGroupRequest(run: Run, rec: TaskRecord): void {
  const members = liveMembers(rec);
  applyVerdict(run, rec, judgeGroupRequest(rec.signals, members), members.length);
}

// ---- entry points ----------------------------------------------------------------------------

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
    signals: createTaskSignals(req.size), endpoints: new Map(), sigStats: { broadcasts: 0, pointToPoint: 0, groupRequests: 0, dropped: 0 },
    taskKey: new Uint8Array(req.taskKey),
  };
  cs.nextTask = Math.max(cs.nextTask, number + 1);
  cs.tasks.set(id, rec);
  note(run, id, null, restoreOf === null
    ? `${id} submitted: ${req.size} × ${req.file}`
    : `${id} restored after a cluster reset (it was ${restoreOf}), restarted flag set: ${req.size} × ${req.file}`);
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
      case 'terminatedNormally': return { type: 'agent.terminatedNormally', exitCode: r.exitCode ?? 0 };
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
  note(run, null, null, `node ${rec.node} joined: ${plural(rec.slots, 'slot')}, adopting ${plural(adopt.length, 'process', 'processes')}`);
  return { adopt, effects: settle(run) };
}

export function nodeFailed(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, _timers: TaskTimers, agent: ProcessId): TaskEffect[] {
  const run = newRun(cs, nodes);
  const rec = nodes.get(agent);
  if (rec === undefined) return [];
  const lost = procsOn(cs, rec.node, HOLDING);
  note(run, null, null, `node ${rec.node} lost: ${lost.length === 0 ? 'no processes' : `${lost.map((p) => `${p.rec.id}/${p.vpid}`).join(' ')} dead`}`);
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

/** The tasks a cluster reset must restore (PROTOCOL §10.9): the live ones, by number. */
export function liveSubmits(cs: ClusterState): { task: string; submit: SignedSubmit }[] {
  const live: TaskRecord[] = [];
  for (const rec of cs.tasks.values()) if (isLive(rec) && rec.submit !== null) live.push(rec);
  return live.sort(byNumber).map((rec) => ({ task: rec.id, submit: rec.submit as SignedSubmit }));
}

/** The primary orders ticks only while some timer runs (PROTOCOL §8.3). */
export function needsTicks(cs: ClusterState): boolean {
  for (const rec of cs.tasks.values()) {
    const c = taskCtx(rec);
    if (isLive(rec) && (c.startTimerTicks !== null || c.terminateTimerTicks !== null || rec.signals.pending !== null)) return true;
  }
  return false;
}

// ---- digest and view -------------------------------------------------------------------------

const byNumber = (a: TaskRecord, b: TaskRecord) => a.number - b.number;
const sortedProcs = (rec: TaskRecord) => [...rec.procs].sort((a, b) => a[0] - b[0]);

/** Canonical plain tree (DESIGN.md §3): fixed field order, Maps sorted by key; the machines'
 *  data in its array form (fsm/plain-data.ts encodeData: a plain object would be a msgpack
 *  map, which the strict decoder refuses, so state transfer could not read it back). The task's
 *  `number` is not encoded: it is the digits of its id. */
export function encodeCluster(cs: ClusterState): unknown {
  return [
    cs.tick, cs.nextTask,
    [...cs.tasks.values()].sort(byNumber).map((r) => [
      r.id, r.name, r.size, r.file, r.args, r.cwd, r.env, r.submittedRsn, encodeData(r.fsm),
      sortedProcs(r).map(([vpid, d]) => [vpid, encodeData(d)]), [...r.reserved].sort((a, b) => a[0] - b[0]), r.waitReason, r.outcome, r.reason,
      r.mode, encodeTaskSignals(r.signals), [...r.endpoints].sort((a, b) => a[0] - b[0]),
      [r.sigStats.broadcasts, r.sigStats.pointToPoint, r.sigStats.groupRequests, r.sigStats.dropped],
      r.submit === null ? null : [r.submit.nonce, r.submit.bytes, r.submit.sig],
      // Part of the digest like the rest of the request (hex: the tree stays plain data); never
      // in clusterView (PROTOCOL §9.5).
      toHex(r.taskKey),
    ]),
    cs.finished,
    cs.allocations.map((a) => [a.task, a.vpids]),
    cs.serviceQueue.map((s) => [s.task, s.service]),
    cs.serviceActive === null ? null : [cs.serviceActive.task, cs.serviceActive.service],
  ];
}

export function clusterView(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>): Omit<ClusterView, 'events'> {
  const used = usedSlots(cs);
  const nodeViews: NodeView[] = [...nodes].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([agent, n]) => ({
    agent, node: n.node, slots: n.slots, used: used.get(n.node) ?? 0,
    state: n.failed ? 'failed' : n.draining ? 'draining' : n.joined ? 'up' : 'joining', inc: n.inc,
  }));
  const all = [...cs.tasks.values()].sort(byNumber);
  const toView = (r: TaskRecord): TaskView => {
    const c = taskCtx(r);
    const procs: ProcView[] = sortedProcs(r).map(([vpid, d]) => {
      const p = procCtx(d);
      return {
        vpid, node: p.node, pid: p.pid, state: procState(d), exitCode: p.exitCode, signal: p.signal, reason: p.reason,
        endpoint: r.endpoints.get(vpid) ?? null,
      };
    });
    return {
      id: r.id, name: r.name, size: r.size, state: taskState(r), command: [r.file, ...r.args], cwd: r.cwd,
      submittedRsn: r.submittedRsn, startAttempts: c.startCount, restarted: c.restarted, waitReason: r.waitReason,
      outcome: r.outcome, reason: r.reason, failure: c.failure, mode: r.mode, epoch: r.signals.epoch,
      quorum: r.signals.quorum, signals: { ...r.sigStats }, procs,
    };
  };
  const tasks = all.filter(isLive).map(toView);
  // Finished tasks, newest first, while the view fits the status reply (MAX_VIEW_TASK_CHARS):
  // a status reply over the wire limit would reach no operator at all. The size counts only
  // replicated data, so every replica trims the same tasks.
  let chars = JSON.stringify(tasks).length;
  const finished: TaskView[] = [];
  let omittedTasks = 0;
  for (const r of all.filter((x) => !isLive(x)).reverse()) {
    const v = toView(r);
    const size = JSON.stringify(v).length + 1;
    if (omittedTasks > 0 || chars + size > MAX_VIEW_TASK_CHARS) {
      omittedTasks++;
      continue;
    }
    chars += size;
    finished.push(v);
  }
  return { tick: cs.tick, nodes: nodeViews, tasks: [...tasks, ...finished.reverse()], omittedTasks };
}
