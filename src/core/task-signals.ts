// The manager's per-task signal state (spec §4.5–4.6; docs/PROTOCOL.md §9.2): the epoch, the
// quorum, and the group requests collected in the current epoch. Pure data and pure rules; the
// cluster state (cluster-state.ts) decides what to do with a verdict.
//
// Epoch rules (spec §4.6, §9.1 items 56–60):
//   - a broadcast increments the epoch and carries the new value (`nextBroadcastEpoch`);
//   - accepting a process's request (a broadcast request, or a group request at quorum)
//     increments it too, so no other request of that epoch can be accepted (`accept`);
//   - a request whose epoch is not the current one is stale and dropped;
//   - every epoch change drops the group requests collected so far.
// Group requests (spec §4.5): requests match on (signum, arg) — the epoch is equal by the rule
// above, only the sender differs. A process counts once per epoch. The quorum in force is
// min(quorum, live members): a quorum larger than the task can ever gather would turn every
// crash into a permanent ERR_DISAGREE (PROTOCOL §9.2 explains this choice).

/** One process's request in the current epoch. signum 0 marks the broadcast request that rule
 *  71 counts as a group request matching no other (spec §4.6, §9.1 item 71). */
export type GroupEntry = { vpid: number; signum: number; arg: number };
export type PendingGroup = { firstTick: number; entries: GroupEntry[] };
export type TaskSignals = {
  epoch: number;
  quorum: number;
  pending: PendingGroup | null;
};

export const NON_MATCHING = 0;

export function createTaskSignals(size: number): TaskSignals {
  return { epoch: 0, quorum: size, pending: null };
}

/** The epoch a broadcast carries: incremented first (spec §4.6 implementation step 3). */
export function nextBroadcastEpoch(sig: TaskSignals): number {
  sig.epoch++;
  sig.pending = null;
  return sig.epoch;
}

/** A process's request was accepted: its epoch is over (spec §4.6 step 6). */
export function accept(sig: TaskSignals): void {
  sig.epoch++;
  sig.pending = null;
}

export const quorumInForce = (sig: TaskSignals, members: number): number => Math.max(1, Math.min(sig.quorum, members));

export type GroupVerdict =
  | { kind: 'accept'; signum: number; arg: number }
  | { kind: 'wait' }
  /** Early rejection: no value can reach the quorum any more (spec §4.5 (a)). */
  | { kind: 'disagree' }
  /** This process already has a request in this epoch. */
  | { kind: 'duplicate' };

/** Add `entry` (current epoch already checked) and judge; `members` are the live members'
 *  VPIDs (the sender among them). */
export function addGroupRequest(sig: TaskSignals, entry: GroupEntry, members: readonly number[], tick: number): GroupVerdict {
  const pending = sig.pending ?? { firstTick: tick, entries: [] };
  if (pending.entries.some((e) => e.vpid === entry.vpid)) return { kind: 'duplicate' };
  pending.entries.push({ ...entry });
  sig.pending = pending;
  return judgeGroupRequest(sig, members);
}

/** Judge the requests collected, counting only those of live `members` (a member that ended
 *  since it asked no longer counts, nor does it count as unheard). */
export function judgeGroupRequest(sig: TaskSignals, members: readonly number[]): GroupVerdict {
  const pending = sig.pending;
  if (pending === null) return { kind: 'wait' };
  pending.entries = pending.entries.filter((e) => members.includes(e.vpid));
  if (pending.entries.length === 0) {
    sig.pending = null;
    return { kind: 'wait' };
  }
  const q = quorumInForce(sig, members.length);
  let best: GroupEntry | null = null;
  let bestCount = 0;
  for (const e of pending.entries) {
    if (e.signum === NON_MATCHING) continue;
    const n = pending.entries.filter((x) => x.signum === e.signum && x.arg === e.arg).length;
    if (n > bestCount) {
      best = e;
      bestCount = n;
    }
  }
  if (best !== null && bestCount >= q) return { kind: 'accept', signum: best.signum, arg: best.arg };
  // [INTERP, spec §4.5 (a)] for every value v: count(v) + (n − received) < quorum.
  const unheard = Math.max(0, members.length - pending.entries.length);
  if (bestCount + unheard < q) return { kind: 'disagree' };
  return { kind: 'wait' };
}

/** Has the group-request timeout (counted in ordered ticks from the first request) expired? */
export const groupTimedOut = (sig: TaskSignals, tick: number, timeoutTicks: number): boolean =>
  sig.pending !== null && tick - sig.pending.firstTick >= timeoutTicks;

export function encodeTaskSignals(sig: TaskSignals): unknown {
  return [sig.epoch, sig.quorum, sig.pending === null ? null : [sig.pending.firstTick, sig.pending.entries.map((e) => [e.vpid, e.signum, e.arg])]];
}
