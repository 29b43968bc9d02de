// The manager's replicated task and process state (spec §6, §6.1, §6.2; docs/PROTOCOL.md §8):
// the records (ClusterState, TaskRecord, NodeRecord), one function that creates them, and the
// reads every other cluster-* module shares: one FsmTask per task and one FsmProc per process,
// stored as plain data (fsm/plain-data.ts), and the slots live tasks hold. Pure and
// deterministic (STYLE.md 1): every replica applies the same inputs in the same RSN order and
// reaches the same state, so nothing here reads a clock or a random source, and every Map is
// iterated in insertion order, which is the same everywhere because every insert happens at the
// same RSN on every replica.
//
// The rest, by responsibility: cluster-inputs.ts (the entry points: submit, kill, reports, node
// changes, ticks, signals), cluster-machines.ts (the work queue stepping the machines, placement
// and the service turn), cluster-signals.ts (Ghidrah signals), cluster-run.ts (one input's
// run), cluster-rollback.ts (a rollback task's ranks and replacements), cluster-view.ts (the
// canonical encoding and the status view).
import { FSM_PROC_FINAL_STATES, type FsmProcContext, type FsmProcState } from '../../fsm/fsm-proc.ts';
import type { FsmTaskContext, Service } from '../../fsm/fsm-task-types.ts';
import type { MachineData } from '../../fsm/plain-data.ts';
import type { Timing } from './constants.ts';
import type { ProcessId } from './ports.ts';
import type { EventKind, EventTag } from './status.ts';
import type { DgrpState } from './dgrp.ts';
import type { StragglerState } from './straggler.ts';
import type { TaskSignals } from './task-signals.ts';
import type { GroupCommand, RollbackMark, TaskSubmit } from './wire/messages.ts';

/** `draining`: an operator removes the node (PROTOCOL §10.12): nothing new is placed on it, and
 *  it leaves once no live task holds a slot there. */
/** `protector`: where the node's agent keeps rollback tasks' logs and checkpoints (PROTOCOL
 *  §11.4), `host:port`; '' until its agent says. */
export type NodeRecord = { node: string; joined: boolean; slots: number; failed: boolean; inc: number; draining: boolean; protector: string };
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

/** A rollback task's ranks (PROTOCOL §11.2; the verbs over it are in cluster-rollback.ts). */
export type RankTable = {
  /** Rank → the VPID that holds it now (a dead one until its replacement runs). */
  ranks: number[];
  /** Ranks waiting for a replacement, in the order they died. */
  vacant: number[];
  /** Per rank: replacements spawned in the task's life, failed ones included. */
  replacements: number[];
  /** The replacement being spawned: FsmTask's App-spawn is this one. */
  spawning: { rank: number; vpid: number } | null;
  /** Per rank: its recorded checkpoints (PROTOCOL §11.4), oldest first, at most
   *  ROLLBACK_MARKS_KEPT. */
  marks: RollbackMark[][];
  /** Per rank: its checkpoint group (PROTOCOL §11.7), the lowest rank placed on its node when
   *  the task started running; each rank its own until then, and always under `nco`. */
  groups: number[];
};

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
  /** The task tick at which each VPID's spawn was last commanded: the not-linked hint
   *  (cluster-view.ts) counts from it, not from the Start-TO, which an application SPAWN's wait
   *  for a slot runs too. */
  spawnTicks: Map<number, number>;
  sigStats: { broadcasts: number; pointToPoint: number; groupRequests: number; dropped: number };
  /** A rollback task's ranks and replacements (PROTOCOL §11.2, cluster-rollback.ts); null for
   *  an app task. */
  rollback: RankTable | null;
  /** A DGRP task's group (PROTOCOL §12, dgrp.ts); null for other tasks. */
  dgrpState: DgrpState | null;
  /** A task with a straggler policy: its processes' progress and flags (PROTOCOL §13,
   *  straggler.ts); null for other tasks. */
  stragglerState: StragglerState | null;
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
  | EventEffect;

/** A journal line about `task`/`vpid`; `kind` and `subject` when a timeline pairs it (status.ts). */
export type EventEffect = { type: 'event'; task: string | null; vpid: number | null; text: string; kind?: EventKind; subject?: string };

/** The one way to make an EventEffect: tagged only when `tag` says what kind of fact it is. */
export const eventEffect = (task: string | null, vpid: number | null, text: string, tag?: EventTag): EventEffect =>
  (tag === undefined ? { type: 'event', task, vpid, text } : { type: 'event', task, vpid, text, ...tag });
export type Outcome = { ok: boolean; text: string };

// ---- reading the stored machines -------------------------------------------------------------

export const taskCtx = (r: TaskRecord) => r.fsm.context as FsmTaskContext;
export const taskState = (r: TaskRecord) => r.fsm.value as string;
export const procCtx = (d: MachineData) => d.context as FsmProcContext;
export const procState = (d: MachineData) => d.value as FsmProcState;
export const isFinal = (d: MachineData) => FSM_PROC_FINAL_STATES.includes(procState(d));
/** States in which a process holds a slot on its node (status.ts NodeView.used). */
export const HOLDING: readonly FsmProcState[] = ['allocated', 'spawning', 'running', 'terminating'];
export const holds = (d: MachineData) => HOLDING.includes(procState(d));
export const isLive = (r: TaskRecord) => r.outcome === null;
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
export const NO_REASON = 'no reason given';

export const plural = (n: number, word: string, many = `${word}s`) => `${n} ${n === 1 ? word : many}`;

/** Why a request for `n` slots waits, `free` being free on `healthy` nodes (spec §6). One larger
 *  than every slot of every node the cluster counts on (failed ones too: a new agent incarnation
 *  brings its node back; draining ones excepted) can never run: it says so at once, with the
 *  cluster's capacity and what to do (issue 19). Not while a node has never joined: its slots
 *  are not known until its agent says (PROTOCOL §8.2). */
export function waitReason(nodes: Map<ProcessId, NodeRecord>, n: number, free: number, healthy: number): string {
  const kept = [...nodes.values()].filter((r) => !r.draining);
  const capacity = kept.reduce((a, r) => a + r.slots, 0);
  if (n > capacity && kept.length > 0 && kept.every((r) => r.joined || r.slots > 0)) {
    return `can never fit: needs ${plural(n, 'slot')} at once, the cluster has ${capacity} on ${plural(kept.length, 'node')}; `
      + `kill it and submit it with -n ${capacity} or fewer, or add nodes (\`trine node add\`)`;
  }
  return `needs ${plural(n, 'slot')}, ${free} free on ${plural(healthy, 'healthy node')}`;
}

export const procNode = (rec: TaskRecord, vpid: number): string | null => {
  const d = rec.procs.get(vpid);
  return d === undefined ? null : procCtx(d).node;
};

/** Why the agent of `node` may not speak for process `vpid` of `rec` (it runs elsewhere), or null:
 *  an agent relays only its own node's processes' signals and reports (PROTOCOL §9.1). */
export function notOnNode(rec: TaskRecord, vpid: number, node: string | null): string | null {
  const at = procNode(rec, vpid);
  return at === node ? null : `the sender is on ${at ?? 'no node'}, not ${node ?? 'an unknown node'}`;
}

/** Slots held per node by live tasks: their processes that hold one, and their reservations.
 *  A finished task holds none, even if an agent never confirmed a terminate (T17 gave up). */
export function usedSlots(cs: ClusterState): Map<string, number> {
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

/** Tasks in submission order; a process's VPIDs ascending. */
export const byNumber = (a: TaskRecord, b: TaskRecord) => a.number - b.number;
export const sortedProcs = (rec: TaskRecord) => [...rec.procs].sort((a, b) => a[0] - b[0]);
