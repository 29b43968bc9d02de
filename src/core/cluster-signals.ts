// Ghidrah signals in the manager (spec §4; docs/PROTOCOL.md §9): the live members, the mapping
// message, broadcasts with their epochs, and the group requests that reached (or can no longer
// reach) their quorum. The signal requests themselves enter through cluster-inputs.ts.
import type { FsmTaskEvent } from '../../fsm/fsm-task-types.ts';
import { note, perAgent, type Run } from './cluster-run.ts';
import { MAX_TASK_PROCS } from './constants.ts';
import { assert } from '../base/result.ts';
import { rankHeld, rollbackTableOf } from './cluster-rollback.ts';
import { isFinal, plural, procNode, procState, taskCtx, type TaskRecord } from './cluster-state.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from './signals.ts';
import { accept, judgeGroupRequest, nextBroadcastEpoch, quorumInForce, type GroupVerdict } from './task-signals.ts';
import type { Member } from './wire/messages.ts';

/** The largest --max-spawns. Every process a task spawned stays in the replicated state until
 *  its next start (~150 B each): 8 × MAX_TASK_PROCS keeps one task's share to about a megabyte,
 *  well inside a state transfer (MAX_STATE_BYTES). */
export const MAX_SPAWNS = 8 * MAX_TASK_PROCS;
/** `trine submit` without --max-spawns: this many SPAWNs per process of the task. */
export const DEFAULT_SPAWNS_PER_PROCESS = 8;
/** The --max-spawns of a task of `size` processes submitted without one. */
export const defaultMaxSpawns = (size: number): number => Math.min(MAX_SPAWNS, DEFAULT_SPAWNS_PER_PROCESS * size);

/** Members that can send and receive signals: connected (FsmProc Running), in VPID order. */
export function liveMembers(rec: TaskRecord): number[] {
  return taskCtx(rec).vpids.filter((v) => {
    const d = rec.procs.get(v);
    return d !== undefined && procState(d) === 'running';
  });
}

/** The size and rank a process is told at its spawn (TRINE_SIZE, TRINE_RANK; issue 19). A
 *  rollback task: its ranks, and the rank it holds or takes over (PROTOCOL §11.2). Other tasks:
 *  the processes that have not ended, itself included, and its place among them in VPID order —
 *  the task's size and its VPID for the first processes; for a replacement of a dead one the size
 *  again (not the VPIDs used so far) and the rank G-MPI's world gives it once recovered (G-MPI
 *  orders the live members by VPID); an extra process (SPAWN with none dead) makes one more. */
export function spawnPlace(rec: TaskRecord, vpid: number): { size: number; rank: number } {
  const held = rankHeld(rec, vpid);
  if (rec.rollback !== null && held !== null) return { size: rec.rollback.ranks.length, rank: held };
  const alive = taskCtx(rec).vpids.filter((v) => {
    const d = rec.procs.get(v);
    return v === vpid || (d !== undefined && !isFinal(d));
  });
  const rank = alive.indexOf(vpid);
  assert(rank >= 0, `spawnPlace: VPID ${vpid} is not a member of ${rec.id}`);
  return { size: alive.length, rank };
}

/** The mapping message (spec §7 item 2) to `vpids`, listing every live member. */
export function sendMappings(run: Run, rec: TaskRecord, vpids: readonly number[], recovered: boolean): void {
  if (rec.mode !== 'linked' || vpids.length === 0) return;
  const members: Member[] = liveMembers(rec).map((v) => ({ vpid: v, node: procNode(rec, v) ?? '', endpoint: rec.endpoints.get(v) ?? '' }));
  const c = taskCtx(rec);
  perAgent(run, rec, vpids, (list) => ({
    type: 'proc.mapping', task: rec.id, vpids: list, restarted: c.restarted, recovered, epoch: rec.signals.epoch,
    quorum: rec.signals.quorum, members, rollback: rollbackTableOf(rec, run.nodes), dgrp: rec.dgrp,
    straggler: rec.straggler,
  }));
}

/** A broadcast to every live member (spec §4.6): the epoch is incremented first and carried,
 *  and the group requests collected in the old epoch are dropped. Plain tasks have no one to
 *  deliver to; their epoch still counts. */
export function broadcastSignal(run: Run, rec: TaskRecord, signum: number, src: number, arg: number, node = '', data = ''): void {
  const epoch = nextBroadcastEpoch(rec.signals);
  rec.sigStats.broadcasts++;
  if (rec.mode !== 'linked') return;
  perAgent(run, rec, liveMembers(rec), (vpids) => ({
    type: 'proc.signal', task: rec.id, vpids, signum, src, dest: GSIG_BROADCAST, arg, epoch, node, data,
  }));
}

/** Task states in which every member has its mapping (T4 onwards, until it terminates). */
export const SIGNALLING = ['running', 'killing', 'spawning'];

const SIGNAL_NAMES = new Map<number, string>(Object.entries(GSIG).map(([k, v]) => [v, `GSIG_${k}`]));
export const signalName = (signum: number): string => SIGNAL_NAMES.get(signum) ?? `signal ${signum}`;

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
    case GSIG.REQ_SPAWN: {
      // A rollback task's members are its ranks; the group alone replaces them (PROTOCOL §11.2).
      if (rec.rollback !== null) return disagree('a rollback task\'s ranks are replaced by the group, not spawned by the application');
      // A process that crashes at once and is spawned again by the others would loop for ever.
      const spawned = taskCtx(rec).nextVpid - rec.size;
      if (spawned >= rec.maxSpawns) {
        return push({ type: 'task.kill', reason: `${plural(spawned, 'process', 'processes')} spawned since the start, the task's bound (--max-spawns ${rec.maxSpawns}): its replacements keep dying?` });
      }
      return push({ type: 'app.spawn' });
    }
    case GSIG.REQ_RESTART:
      return push({ type: 'app.restart' });
    case GSIG.REQ_TERMINATE:
      return push({ type: 'app.terminate' });
    default:
      return disagree('not a group request');
  }
}

export function applyVerdict(run: Run, rec: TaskRecord, verdict: GroupVerdict, members: number): void {
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
export function rejudgeGroupRequest(run: Run, rec: TaskRecord): void {
  const members = liveMembers(rec);
  applyVerdict(run, rec, judgeGroupRequest(rec.signals, members), members.length);
}
