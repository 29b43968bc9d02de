// The manager's machines at work (spec §6, §6.1, §6.2; docs/PROTOCOL.md §8): the work queue of
// one run (cluster-run.ts) drained item by item into FsmTask and FsmProc, their actions turned
// into commands, journal events and further items; then placement of processes on node slots
// and the gang-scheduling service turn (spec §6: one task started or terminated at a time),
// until the run is quiet.
import { fsmProc, type FsmProcEvent, type FsmProcState } from '../../fsm/fsm-proc.ts';
import { fsmTask } from '../../fsm/fsm-task.ts';
import type { FsmTaskEvent, Service } from '../../fsm/fsm-task-types.ts';
import { initialStep, step, type MachineAction, type MachineData } from '../../fsm/plain-data.ts';
import { MAX_FINISHED_TASKS } from './constants.ts';
import { agentOf, note, type Run, type WorkItem } from './cluster-run.ts';
import {
  assignGroups, checkReplacementStarted, nextReplacement, rankDied, rankFilled, rankMembers, ranksEndedNormally, resetRanks, toProtectors,
} from './cluster-rollback.ts';
import { broadcastSignal, liveMembers, rejudgeGroupRequest, sendMappings, spawnPlace } from './cluster-signals.ts';
import {
  isFinal, isLive, NO_REASON, plural, procCtx, procNode, procState, taskCtx, taskState, usedSlots, waitReason, type ClusterState, type TaskEffect, type TaskRecord,
} from './cluster-state.ts';
import { assert } from '../base/result.ts';
import { refreshDgrps } from './cluster-dgrp.ts';
import { resetDgrp } from './dgrp.ts';
import { judgeStragglers } from './cluster-straggler.ts';
import { resetStragglers } from './straggler.ts';
import { GSIG, GSIG_CM } from './signals.ts';
import type { EnvEntry, GroupCommand } from './wire/messages.ts';

/** Work through the queue. It ends: each item is one step of a finite machine, and a machine
 *  only produces items for events the manager itself defines (no agent input enters here). */
export function drain(run: Run): void {
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
export function settle(run: Run): TaskEffect[] {
  for (;;) {
    drain(run);
    if (place(run)) continue;
    if (grantService(run)) continue;
    // A DGRP task's view follows every change of its processes (PROTOCOL §12.4).
    refreshDgrps(run);
    judgeStragglers(run);
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
  // A rollback task's vacant rank is served once the task is back in Running (PROTOCOL §11.2).
  const replace = nextReplacement(run, rec);
  if (replace !== null) {
    stepTask(run, rec, replace);
    checkReplacementStarted(rec);
  }
}

function noteTaskState(run: Run, rec: TaskRecord, before: string): void {
  const c = taskCtx(rec);
  switch (taskState(rec)) {
    case 'starting':
      return note(run, rec.id, null, `${rec.id} starting (attempt ${c.startCount} of ${c.maxStartAttempts})`);
    case 'running':
      if (before === 'starting') {
        note(run, rec.id, null, `${rec.id} running: ${plural(c.vpids.length, 'process', 'processes')}`);
        // Every member has connected and told its endpoint: the mapping goes out (spec §7 item 2),
        // with a semi-coordinated task's checkpoint groups, from this placement (§11.7).
        assignGroups(rec);
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

export function taskAction(run: Run, rec: TaskRecord, action: MachineAction): void {
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
        resetRanks(rec);
        if (rec.dgrpState !== null) resetDgrp(rec.dgrpState);
        if (rec.stragglerState !== null) resetStragglers(rec.stragglerState);
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
      if (signum === GSIG.NTF_DIED) rankDied(run, rec, arg);
      if (signum === GSIG.REP_SPAWNED) {
        // A rollback task's replacement holds its rank before its mapping says so (§11.2).
        rankFilled(run, rec, arg);
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
  note(run, rec.id, null, `${rec.id} finished ${outcome === 'normal' ? 'normally' : 'abnormally'}: ${reason}`, { kind: 'task.finished' });
  if (rec.recovery.kind === 'rollback') toProtectors(run, { type: 'rollback.release', task: rec.id });
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
      if (p.command === 'spawn') rec.spawnTicks.set(vpid, run.cs.tick);
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
  // A rollback task lists its rank holders, and its size is its ranks (PROTOCOL §11.2).
  const members = rankMembers(rec) ?? c.vpids;
  const endpoints = members.flatMap((v) => {
    const node = procNode(rec, v);
    return node === null ? [] : [{ vpid: v, node }];
  });
  return {
    type: 'proc.spawn', task: rec.id, vpid, mode: rec.mode, file: rec.file, args: [...rec.args], cwd: rec.cwd,
    env: rec.env.map(([k, v]): EnvEntry => [k, v]), ...spawnPlace(rec, vpid), restarted: c.restarted, endpoints,
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
      note(run, rec.id, vpid, `${at} running pid ${p.pid ?? 0} on ${p.node ?? '?'}`, { kind: 'proc.running', ...(p.node === null ? {} : { subject: p.node }) });
      push({ type: 'proc.running', vpid });
      break;
    case 'spawnFailed':
      note(run, rec.id, vpid, `${at} spawn failed on ${p.node ?? '?'}: ${p.reason ?? NO_REASON}`);
      push(p.reason === null ? { type: 'proc.spawnFailed', vpid } : { type: 'proc.spawnFailed', vpid, detail: p.reason });
      break;
    case 'terminatedNormally':
      // P15 (terminated before spawn) is routine when a waiting task ends: not journalled.
      if (p.exitCode !== null) note(run, rec.id, vpid, p.signal === null ? `${at} exited ${p.exitCode}` : `${at} ${p.reason ?? 'ended'}`, { kind: 'proc.exited' });
      // A crash is broadcast (NTF_DIED), which ends the collection; a normal exit is not, but
      // for a rollback rank's holder: the others stop waiting for it (PROTOCOL §11.3).
      if (rec.rollback?.ranks.includes(vpid) === true) {
        note(run, rec.id, vpid, `${rec.id} GSIG_NTF_FINISHED(${vpid})`);
        broadcastSignal(run, rec, GSIG.NTF_FINISHED, GSIG_CM, vpid);
      }
      rejudgeGroupRequest(run, rec);
      push({ type: 'proc.terminated', vpid, normally: true });
      break;
    case 'terminatedAbnormally':
      // A lost node is journalled once for all its processes (nodeFailed).
      if (p.reason !== 'node lost') {
        const how = p.signal ?? (p.exitCode !== null ? `exit ${p.exitCode}` : (p.reason ?? NO_REASON));
        note(run, rec.id, vpid, `${at} terminated abnormally: ${how}`, { kind: 'proc.died', ...(p.node === null ? {} : { subject: p.node }) });
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
    // A rollback task counts only each rank's current holder (PROTOCOL §11.2).
    const normally = ranksEndedNormally(rec) ?? members.every((m) => procState(m.d) === 'terminatedNormally');
    events.push({ type: normally ? 'procs.allTerminatedNormally' : 'procs.allTerminated' });
  }
  for (const event of events) stepTask(run, rec, event);
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
      const why = waitReason(run.nodes, req.vpids.length, total, free.size);
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
