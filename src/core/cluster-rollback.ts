// A rollback task's ranks in the manager's replicated state (docs/PROTOCOL.md §11.1, §11.2):
// which VPID holds each rank now, the ranks waiting for a replacement, how often each rank was
// replaced, and the replacement being spawned. The group replaces a dead rank exactly as it
// serves an application's SPAWN (FsmTask T13–T15, fed `app.spawn`), so a replacement gets a
// fresh VPID, placement, Start-TO and REP_SPAWNED like any spawned member; what this module adds
// is the bookkeeping around those steps, each a pure verb over the task's record that
// cluster-machines.ts calls at the step it belongs to:
//
// - rankDied: a GSIG_NTF_DIED went out for a VPID (a crash, a lost node, an application's kill,
//   or a replacement that failed to start): its rank joins `vacant`, at the end.
// - nextReplacement: after every FsmTask step, while the task is Running, no replacement is
//   being spawned and a rank is vacant, the event to feed it: `app.spawn` for the first vacant
//   rank, or, past ROLLBACK_MAX_REPLACEMENTS, the kill that ends the task naming the rank.
// - rankFilled: REP_SPAWNED for the replacement: it holds the rank from then on, before its
//   mapping goes out, so the mapping carries its rank.
// - ranksEndedNormally: the task's outcome counts only the current holder of each rank.
//
// Deterministic like the rest of the state (cluster-state.ts header), and encoded in the
// canonical state (cluster-view.ts, state-codec.ts) so the replicas' digests cover it.
import type { FsmTaskEvent } from '../../fsm/fsm-task-types.ts';
import { note, type Run } from './cluster-run.ts';
import { isFinal, procNode, procState, taskCtx, taskState, type ClusterState, type NodeRecord, type RankTable, type TaskRecord } from './cluster-state.ts';
import {
  MAX_TASK_PROCS, ROLLBACK_MAX_INTERVAL_MS, ROLLBACK_MAX_REPLACEMENTS, ROLLBACK_MAX_STATE_BYTES, ROLLBACK_MIN_INTERVAL_MS,
} from './constants.ts';
import { bytesEqual } from '../base/bytes.ts';
import { assert } from '../base/result.ts';
import type { ProcessId } from './ports.ts';
import { ROLLBACK_MARKS_KEPT, rollbackMark } from './wire/recovery.ts';
import type { GroupCommand, RollbackMark, RollbackTable, TaskSubmit } from './wire/messages.ts';
import { list, nullable, struct, uint, type Schema } from './wire/schema.ts';

/** Rank r is VPID r at start (VPIDs 0 … size − 1). */
export function createRankTable(size: number): RankTable {
  assert(Number.isInteger(size) && size >= 1, `rank table of ${size}`);
  return {
    ranks: Array.from({ length: size }, (_, r) => r), vacant: [], replacements: Array.from({ length: size }, () => 0), spawning: null,
    marks: Array.from({ length: size }, () => []), groups: Array.from({ length: size }, (_, r) => r),
  };
}

/** Why the group refuses this submit's recovery option (§11.1), or null. The wire decoder
 *  checked only the shape: a request that bypassed the CLI gets its answer here. */
export function rollbackRefusal(req: TaskSubmit): string | null {
  const r = req.recovery;
  if (r.kind === 'app') return null;
  if (req.mode !== 'linked') {
    return 'rollback recovery needs a linked task: its processes must use the application library (submit it with --linked, mode linked)';
  }
  if (!Number.isSafeInteger(r.intervalMs) || r.intervalMs < ROLLBACK_MIN_INTERVAL_MS || r.intervalMs > ROLLBACK_MAX_INTERVAL_MS) {
    return `checkpoint interval must be ${ROLLBACK_MIN_INTERVAL_MS} to ${ROLLBACK_MAX_INTERVAL_MS} ms, got ${r.intervalMs}`;
  }
  if (!Number.isSafeInteger(r.maxStateBytes) || r.maxStateBytes < 1 || r.maxStateBytes > ROLLBACK_MAX_STATE_BYTES) {
    return `the largest state of a rank must be 1 to ${ROLLBACK_MAX_STATE_BYTES} bytes, got ${r.maxStateBytes}`;
  }
  if (r.logging === 'cm' && r.checkpoint !== 'nco') {
    return `channel memories log every message at its receiver's CM, so ${r.checkpoint} checkpoints have nothing to save: use --checkpoint nco with --logging cm, or ${r.checkpoint} with --logging rbml or hmpl`;
  }
  return null;
}

/** A fresh start (T1, a T5 retry, a T9 restart): the members are VPIDs 0 … size − 1 again and
 *  hold their ranks; nothing is vacant. Replacement counts run on for the task's life. */
export function resetRanks(rec: TaskRecord): void {
  const t = rec.rollback;
  if (t === null) return;
  const vpids = taskCtx(rec).vpids;
  assert(vpids.length === t.ranks.length, `${rec.id}: a fresh start of ${vpids.length} members for ${t.ranks.length} ranks`);
  t.ranks = [...vpids];
  t.vacant = [];
  t.spawning = null;
  t.marks = t.ranks.map(() => []); // a fresh start: no checkpoint of the old run applies
  t.groups = t.ranks.map((_, r) => r); // until the new start's placement is known (assignGroups)
}

/** `vpid` of `rec`, on `node`, stored a checkpoint, or its log grew (§11.4, `rollback.mark`).
 *  Kept when `vpid` holds a rank there now and the mark is newer than the rank's last (a later
 *  checkpoint, the same one at another protector, or the same one with the log reaching
 *  further); the last ROLLBACK_MARKS_KEPT are kept. Returns why it was not kept, or null. */
export function markRank(rec: TaskRecord, node: string, vpid: number, mark: RollbackMark): string | null {
  const t = rec.rollback;
  if (t === null || rec.outcome !== null) return 'not a live rollback task';
  const rank = t.ranks.indexOf(vpid);
  if (rank < 0 || procNode(rec, vpid) !== node) return `VPID ${vpid} holds no rank on ${node}`;
  if (mark.extent < mark.logPos) return `the log's extent ${mark.extent} is before the checkpoint's position ${mark.logPos}`;
  const kept = t.marks[rank]!;
  const last = kept[kept.length - 1];
  const copy = { ...mark, digest: new Uint8Array(mark.digest), base: new Uint8Array(mark.base), chain: new Uint8Array(mark.chain) };
  if (last !== undefined && mark.id === last.id && mark.logPos === last.logPos && bytesEqual(mark.digest, last.digest) && bytesEqual(mark.base, last.base)) {
    // The rank's data moved to another protector (its own failed, RADIC A.2.7): the same
    // checkpoint, now held there, and the log as far as it reached there.
    if (mark.protector !== last.protector) {
      t.marks[rank] = [copy];
      return null;
    }
    // The log grew: its new extent (src/app/rollback/log-chain.ts).
    if (mark.extent <= last.extent) return `the log's extent ${mark.extent} is not beyond ${last.extent}`;
    t.marks[rank] = [...kept.slice(0, -1), copy];
    return null;
  }
  if (last !== undefined && (mark.id <= last.id || mark.logPos < last.logPos)) return `mark ${mark.id} is not newer than ${last.id}`;
  t.marks[rank] = [...kept, copy].slice(-ROLLBACK_MARKS_KEPT);
  return null;
}

/** GSIG_NTF_DIED(vpid) went out: the rank it held, or was being spawned for, is vacant. */
export function rankDied(run: Run, rec: TaskRecord, vpid: number): void {
  const t = rec.rollback;
  if (t === null) return;
  let rank: number;
  if (t.spawning !== null && t.spawning.vpid === vpid) {
    rank = t.spawning.rank;
    t.spawning = null;
    note(run, rec.id, vpid, `${rec.id} replacement VPID ${vpid} for rank ${rank} did not start`);
  } else {
    rank = t.ranks.indexOf(vpid);
    if (rank < 0) return; // not a rank holder: a replacement that already failed, say
  }
  if (!t.vacant.includes(rank)) t.vacant.push(rank);
  killGroup(run, rec, rank);
}

/** The task started running (its first mapping goes out): a `bsco`/`sco` task's checkpoint
 *  groups are the ranks placed on one node (PROTOCOL §11.7, radic-hmpl A.2.8 "all processes on
 *  one node form a group"), each named by its lowest rank; fixed from now on, wherever a
 *  replacement runs. Under `nco` every rank stays its own group. */
export function assignGroups(rec: TaskRecord): void {
  const t = rec.rollback;
  if (t === null || rec.recovery.kind !== 'rollback' || rec.recovery.checkpoint === 'nco') return;
  const lowest = new Map<string, number>();
  t.groups = t.ranks.map((v, rank) => {
    const node = procNode(rec, v);
    if (node === null) return rank;
    if (!lowest.has(node)) lowest.set(node, rank);
    return lowest.get(node)!;
  });
}

/** The ranks of `rank`'s checkpoint group, itself included, ascending. */
export const groupOf = (t: RankTable, rank: number): number[] => t.ranks.flatMap((_, r) => (t.groups[r] === t.groups[rank] ? [r] : []));

/** Rank `rank` died: in a `bsco`/`sco` task its whole checkpoint group rolls back together
 *  (§11.7, radic-hmpl A.2.8 "the protector restarts the failed group ... rolls forward
 *  together"), so the group terminates its other live holders, as a node failure would; their
 *  ranks are vacant at once, and replaced once every holder of the group has ended. A member
 *  that already finished runs again too: the messages it sent inside the group were never
 *  logged, and the restarted members need them again (§11.3). */
function killGroup(run: Run, rec: TaskRecord, rank: number): void {
  const t = rec.rollback;
  if (t === null || rec.outcome !== null || rec.recovery.kind !== 'rollback' || rec.recovery.checkpoint === 'nco') return;
  for (const r of groupOf(t, rank)) {
    const vpid = t.ranks[r]!;
    const d = rec.procs.get(vpid);
    if (r === rank || t.vacant.includes(r) || d === undefined) continue;
    if (isFinal(d)) {
      if (procState(d) !== 'terminatedNormally') continue; // dead: its own NTF_DIED made it vacant
      t.vacant.push(r);
      note(run, rec.id, vpid, `${rec.id} rank ${r} (VPID ${vpid}) had finished, and runs again: rank ${rank} of its checkpoint group died, the group rolls back together`);
      continue;
    }
    t.vacant.push(r);
    note(run, rec.id, vpid, `${rec.id} killing VPID ${vpid} (rank ${r}): rank ${rank} of its checkpoint group died, the group rolls back together`);
    run.queue.push({ kind: 'proc', task: rec.id, vpid, event: { type: 'task.terminate' } });
  }
}

/** A holder of `rank`'s checkpoint group still runs (it is being killed): the group's
 *  replacements wait, so none restarts while an old member could still talk to it. */
function groupStillAlive(rec: TaskRecord, rank: number): boolean {
  const t = rec.rollback;
  if (t === null) return false;
  return groupOf(t, rank).some((r) => {
    if (!t.vacant.includes(r)) return false;
    const d = rec.procs.get(t.ranks[r]!);
    return d !== undefined && !isFinal(d);
  });
}

/** The event that serves the first vacant rank, or null (§11.2): only while FsmTask is Running
 *  (not killing, spawning or terminating) and no replacement is being spawned. */
export function nextReplacement(run: Run, rec: TaskRecord): FsmTaskEvent | null {
  const t = rec.rollback;
  if (t === null || t.spawning !== null || taskState(rec) !== 'running') return null;
  const rank = t.vacant[0];
  if (rank === undefined || groupStillAlive(rec, rank)) return null;
  const done = t.replacements[rank] ?? 0;
  if (done >= ROLLBACK_MAX_REPLACEMENTS) {
    const reason = `rank ${rank} died again after ${done} replacements, the limit (ROLLBACK_MAX_REPLACEMENTS)`;
    return { type: 'task.kill', reason };
  }
  const vpid = taskCtx(rec).nextVpid;
  t.vacant.shift();
  t.replacements[rank] = done + 1;
  t.spawning = { rank, vpid };
  note(run, rec.id, vpid, `${rec.id} replacing rank ${rank} (VPID ${t.ranks[rank] ?? '?'}) with VPID ${vpid}: replacement ${done + 1} of ${ROLLBACK_MAX_REPLACEMENTS}`);
  return { type: 'app.spawn' };
}

/** After FsmTask took nextReplacement's `app.spawn`: its App-spawn is the replacement's. */
export function checkReplacementStarted(rec: TaskRecord): void {
  const s = rec.rollback?.spawning ?? null;
  if (s === null) return;
  assert(taskState(rec) === 'spawning' && taskCtx(rec).spawnVpid === s.vpid, `${rec.id}: replacement VPID ${s.vpid} is not FsmTask's App-spawn`);
}

/** REP_SPAWNED(vpid): the replacement runs and holds its rank from now on. */
export function rankFilled(run: Run, rec: TaskRecord, vpid: number): void {
  const t = rec.rollback;
  if (t === null || t.spawning === null || t.spawning.vpid !== vpid) return;
  const { rank } = t.spawning;
  t.ranks[rank] = vpid;
  t.spawning = null;
  note(run, rec.id, vpid, `${rec.id} rank ${rank} held by VPID ${vpid}`);
}

/** Every member has ended: did the task end normally? For a rollback task, when every rank's
 *  current holder ended normally (earlier holders' crashes are in the events), with no rank
 *  waiting; null for other tasks (the caller's rule applies). */
export function ranksEndedNormally(rec: TaskRecord): boolean | null {
  const t = rec.rollback;
  if (t === null) return null;
  if (t.vacant.length > 0 || t.spawning !== null) return false;
  return t.ranks.every((v) => {
    const d = rec.procs.get(v);
    return d !== undefined && procState(d) === 'terminatedNormally';
  });
}

/** What a rollback task's `proc.mapping` carries (§11.2); null for other tasks. */
export function rollbackTableOf(rec: TaskRecord, nodes: ReadonlyMap<ProcessId, NodeRecord>): RollbackTable | null {
  const r = rec.recovery;
  if (r.kind !== 'rollback' || rec.rollback === null) return null;
  const ring = protectorRing(nodes);
  const protectors = rec.rollback.ranks.map((v) => protectorAfter(ring, procNode(rec, v)));
  const marks = rec.rollback.marks.map((m) => m.map((x) => ({ ...x, digest: new Uint8Array(x.digest) })));
  const { vacant, spawning } = rec.rollback;
  // A rank that runs again with its checkpoint group (killGroup) is no longer finished.
  const finished = rec.rollback.ranks.map((v, r) => {
    const d = rec.procs.get(v);
    return d !== undefined && procState(d) === 'terminatedNormally' && !vacant.includes(r) && spawning?.rank !== r;
  });
  return { ranks: [...rec.rollback.ranks], protectors, marks, groups: [...rec.rollback.groups], finished, logging: r.logging, checkpoint: r.checkpoint, intervalMs: r.intervalMs, maxStateBytes: r.maxStateBytes };
}

/** The ring of protectors (PROTOCOL §11.4; radic-hmpl A.1): the live nodes whose agent runs
 *  one, in node order. */
export function protectorRing(nodes: ReadonlyMap<ProcessId, NodeRecord>): { node: string; endpoint: string }[] {
  return [...nodes.values()]
    .filter((n) => n.joined && !n.failed && n.protector !== '')
    .map((n) => ({ node: n.node, endpoint: n.protector }))
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

/** The protector of the ranks on `node`: the next node of the ring after it (a failed node is
 *  skipped, radic-hmpl A.1), never the node itself; '' with no other node. */
export function protectorAfter(ring: readonly { node: string; endpoint: string }[], node: string | null): string {
  const others = ring.filter((p) => p.node !== node);
  if (others.length === 0) return '';
  return (others.find((p) => node !== null && p.node > node) ?? others[0]!).endpoint;
}

/** What every agent whose node runs a protector is told of a rollback task (§11.4). */
export function guardCommand(rec: TaskRecord): GroupCommand | null {
  return rec.recovery.kind === 'rollback' ? { type: 'rollback.guard', task: rec.id, taskKey: new Uint8Array(rec.taskKey), maxStateBytes: rec.recovery.maxStateBytes } : null;
}

/** The guards of every live rollback task, for an agent whose protector just started. */
export function guardCommands(cs: ClusterState): GroupCommand[] {
  return [...cs.tasks.values()].flatMap((rec) => {
    const c = rec.outcome === null ? guardCommand(rec) : null;
    return c === null ? [] : [c];
  });
}

/** Send `command` to every live node's agent that runs a protector. */
export function toProtectors(run: Run, command: GroupCommand): void {
  for (const [agent, n] of run.nodes) if (n.joined && !n.failed && n.protector !== '') run.effects.push({ type: 'command', agent, command });
}

/** The members a rollback task's spawn command lists, one per rank: its holder, or for the rank
 *  being replaced the replacement (dead holders stay FsmTask members, and would crowd the list
 *  past MAX_TASK_PROCS). Null for other tasks. */
export function rankMembers(rec: TaskRecord): number[] | null {
  const t = rec.rollback;
  if (t === null) return null;
  const s = t.spawning;
  return t.ranks.map((v, rank) => (s !== null && s.rank === rank ? s.vpid : v));
}

/** The rank `vpid` holds, or is being spawned to take over; null if none (status view). */
export function rankHeld(rec: TaskRecord, vpid: number): number | null {
  const t = rec.rollback;
  if (t === null) return null;
  if (t.spawning !== null && t.spawning.vpid === vpid) return t.spawning.rank;
  const rank = t.ranks.indexOf(vpid);
  return rank < 0 ? null : rank;
}

/** The canonical encoding of a task's rank table (the state digest and state transfer). */
const ranksList = list(uint, MAX_TASK_PROCS);
export const rankTable: Schema<RankTable | null> = nullable(struct<RankTable>(['ranks', 'vacant', 'replacements', 'spawning', 'marks', 'groups'], {
  ranks: ranksList, groups: ranksList, vacant: ranksList, replacements: ranksList, marks: list(list(rollbackMark, ROLLBACK_MARKS_KEPT), MAX_TASK_PROCS),
  spawning: nullable(struct<{ rank: number; vpid: number }>(['rank', 'vpid'], { rank: uint, vpid: uint })),
}));
