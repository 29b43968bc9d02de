// The rank channels of rollback recovery (docs/PROTOCOL.md §11.3), as a pure state record and
// verbs over it; rank-channels.ts does the sockets, the protector and the promises. This file
// owns: the send sequence numbers (ssn) per destination rank, the messages retained until their
// receiver has them logged, what each peer incarnation says it holds (`have`), duplicate and gap
// detection per source, the receive-side log positions, the arrived-not-received queue with its
// logged marks, the receive index and replay determinants, and the matching of a receive
// (MPI's rule: the earliest-arrived matching message; a logged determinant forces its message).
//
// Sources: radic-hmpl A.2.5 (pessimistic receiver-based logging: the sender's send completes
// when the receiver has logged), A.2.7 (roll-forward: receives come from the log, re-executed
// sends are skipped, duplicates are discarded by sequence number), B.2/B.6 (SSN, RSN, the table
// of the highest SSN per sender), mpichv-dgrp 1.2.4 (a restarted process learns from each
// receiver how many of its messages to skip: silent re-execution).
import { assert } from '../../base/result.ts';
import { ANY_SOURCE, ANY_TAG, recvMatches } from '../gmpi/matching.ts';
import type { ChannelSnapshot } from './codec.ts';

/** Messages retained per destination before a send waits for acknowledgements (named bound,
 *  STYLE.md 9): RBML holds at most one per outstanding send, so this caps concurrent isends. */
export const MAX_RETAINED_PER_PEER = 1024;
/** Arrived, not yet received messages held (a checkpoint carries them). */
export const MAX_QUEUED_MESSAGES = 65_536;
/** The payload bytes one log entry carries: a larger message is logged as consecutive fragments
 *  (a protector's entry is at most PROTECTOR_MAX_ENTRY_BYTES, its frame's room for fields aside). */
export const LOG_FRAGMENT_BYTES = 512 * 1024;

/** The log entries a message of `bytes` takes. */
export const fragmentsOf = (bytes: number): number => Math.max(1, Math.ceil(bytes / LOG_FRAGMENT_BYTES));

/** HMPL's temporary buffers (radic-hmpl B.3, B.6): the bytes a process may hold sent and not
 *  yet logged at their receivers (the sender TB), and received and not yet logged at its own
 *  protector (the receiver TB). Past either, HMPL behaves as RBML until the buffer drains. */
export const HMPL_TB_BYTES = 64 * 1024 * 1024;

/** Where a rank's log and checkpoints go: its protector (src/app/rollback/protector-client.ts),
 *  or an in-memory store in unit tests. Every call resolves once the store holds the data. */
export type RankStore = {
  append(pos: number, blob: Uint8Array): Promise<void>;
  putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void>;
};

/** One application or library message as a channel carries it. `epoch`: its sender's epoch when
 *  it was first sent (its last checkpoint id; PROTOCOL §11.7), which decides whether a message
 *  between two ranks of one checkpoint group is logged. */
export type Envelope = {
  readonly ssn: number;
  readonly epoch: number;
  readonly comm: number;
  readonly tag: number;
  readonly structured: boolean;
  readonly data: Uint8Array;
};
/** An arrived message: `source` is a rank; `pos` its log position (0 for a self-send, which
 *  re-execution regenerates and so is never logged). */
export type Arrived = Envelope & { readonly source: number; readonly pos: number; logged: boolean };
export type Determinant = { readonly source: number; readonly ssn: number };

export type ChannelState = {
  readonly self: number;
  readonly size: number;
  /** Per destination rank: the ssn the next send gets (from 1). */
  readonly nextSsn: number[];
  /** Per source rank: the highest ssn arrived (0: none). */
  readonly lastIn: number[];
  /** Per source rank: the highest ssn whose log entry the protector holds. */
  readonly loggedIn: number[];
  /** Per destination rank: what its current incarnation holds from us; null until its `have`
   *  arrives (sends to it wait). */
  readonly peerHave: (number | null)[];
  /** Per destination rank: sent messages not yet acknowledged logged, by ssn. */
  readonly retained: Map<number, Envelope>[];
  /** Arrived, not yet received, in arrival order. */
  queue: Arrived[];
  /** Log entries assigned (the next one gets logPos + 1). */
  logPos: number;
  /** The protector holds every entry up to here. */
  loggedUpTo: number;
  /** Log position → the source whose message it is, for entries not yet logged (acks). */
  readonly unloggedSources: Map<number, { source: number; ssn: number }>;
  /** Receives posted so far: a wildcard receive's index keys its determinant. */
  recvIndex: number;
  /** Replay: determinants read from the log, by receive index. */
  readonly replayDets: Map<number, Determinant>;
  /** This rank's epoch: the id of the checkpoint it last took or restored (0: none). */
  epoch: number;
  /** Per rank: whether it is another rank of this one's checkpoint group (PROTOCOL §11.7);
   *  all false under `nco`. */
  readonly sameGroup: readonly boolean[];
  /** Per source rank: internal messages held (not logged, §11.7) above `loggedIn`, waiting for
   *  an earlier message of the same source to be logged before they count. */
  readonly heldAhead: Set<number>[];
};

export function createChannelState(self: number, size: number, groups?: readonly number[]): ChannelState {
  assert(Number.isInteger(size) && size >= 1 && self >= 0 && self < size, 'rank within size');
  assert(groups === undefined || groups.length === size, 'one group per rank');
  return {
    self, size,
    nextSsn: new Array<number>(size).fill(1),
    lastIn: new Array<number>(size).fill(0),
    loggedIn: new Array<number>(size).fill(0),
    peerHave: Array.from({ length: size }, (_, r) => (r === self ? Number.MAX_SAFE_INTEGER : null)),
    retained: Array.from({ length: size }, () => new Map<number, Envelope>()),
    queue: [], logPos: 0, loggedUpTo: 0, unloggedSources: new Map(), recvIndex: 0, replayDets: new Map(),
    epoch: 0, sameGroup: Array.from({ length: size }, (_, r) => r !== self && groups !== undefined && groups[r] === groups[self]),
    heldAhead: Array.from({ length: size }, () => new Set<number>()),
  };
}

/** Whether a message arriving from `source` must be logged (PROTOCOL §11.7; radic-hmpl A.2.8):
 *  a message between two ranks of one checkpoint group is *internal* and not logged when its
 *  sender's epoch is at least the receiver's (a group rollback to any checkpoint either makes
 *  its sender send it again or finds it in the receiver's checkpoint); one whose sender's epoch
 *  is lower crossed the receiver's checkpoint line, and is logged (SCO's rule, A.2.8: a
 *  checkpointed process logs what it receives until its group is done; we log exactly the
 *  crossing messages). A message from another group is always logged, as under NCO. */
export function mustLog(senderEpoch: number, receiverEpoch: number, sameGroup: boolean): boolean {
  return !sameGroup || senderEpoch < receiverEpoch;
}

// ---- sending ---------------------------------------------------------------------------------

/** What a send must do: `skip` a re-executed send its receiver already holds (silent
 *  re-execution), `local` a send to ourselves, `transmit` (retained until acknowledged). */
export type SendPlan = { readonly kind: 'skip' | 'local' | 'transmit'; readonly env: Envelope };

/** Number the next message to `dest`. The caller has waited for `peerHave[dest]`. */
export function planSend(st: ChannelState, dest: number, m: Omit<Envelope, 'ssn' | 'epoch'>): SendPlan {
  const have = st.peerHave[dest];
  assert(have !== undefined && have !== null, 'send waits for the peer incarnation');
  const ssn = st.nextSsn[dest]!;
  st.nextSsn[dest] = ssn + 1;
  const env: Envelope = { ...m, ssn, epoch: st.epoch };
  if (dest === st.self) {
    st.lastIn[dest] = ssn;
    st.loggedIn[dest] = ssn;
    st.queue.push({ ...env, source: dest, pos: 0, logged: true });
    return { kind: 'local', env };
  }
  if (ssn <= have) return { kind: 'skip', env };
  st.retained[dest]!.set(ssn, env);
  return { kind: 'transmit', env };
}

/** `dest` acknowledges every ssn up to `upTo` logged: those are released. Returns how many. */
export function onAck(st: ChannelState, dest: number, upTo: number): number {
  const kept = st.retained[dest];
  if (kept === undefined) return 0;
  let n = 0;
  for (const ssn of [...kept.keys()]) {
    if (ssn <= upTo) {
      kept.delete(ssn);
      n++;
    }
  }
  const have = st.peerHave[dest];
  if (have !== null && have !== undefined && upTo > have) st.peerHave[dest] = upTo;
  return n;
}

/** A new incarnation of `peer` (or a reconnection) says it holds every ssn up to `have` from
 *  us: release those, and return the retained rest to send again, in order. */
export function onHave(st: ChannelState, peer: number, have: number): Envelope[] {
  st.peerHave[peer] = have;
  const kept = st.retained[peer]!;
  const again: Envelope[] = [];
  for (const [ssn, env] of [...kept.entries()].sort((a, b) => a[0] - b[0])) {
    if (ssn <= have) kept.delete(ssn);
    else again.push(env);
  }
  return again;
}

/** `peer` is gone (its connection broke, or the group announced its death): sends to it wait
 *  for the next incarnation's `have`. */
export function onPeerLost(st: ChannelState, peer: number): void {
  if (peer !== st.self) st.peerHave[peer] = null;
}

// ---- receiving -------------------------------------------------------------------------------

export type ArrivalVerdict =
  /** Logged at positions pos − parts + 1 … pos (one per fragment). */
  | { readonly kind: 'new'; readonly pos: number; readonly parts: number }
  /** Internal to the checkpoint group (§11.7): held without a log entry; acknowledge up to
   *  `loggedIn` now. */
  | { readonly kind: 'internal'; readonly loggedIn: number }
  /** Already arrived: acknowledge again up to `loggedIn` (the sender may have missed it). */
  | { readonly kind: 'duplicate'; readonly loggedIn: number }
  | { readonly kind: 'gap'; readonly expected: number }
  | { readonly kind: 'full' };

/** A message from `source` arrived: a new one is queued, not yet logged, at the next log
 *  position (the caller appends its entry to the protector). */
export function onArrive(st: ChannelState, source: number, env: Envelope): ArrivalVerdict {
  const last = st.lastIn[source]!;
  if (env.ssn <= last) return { kind: 'duplicate', loggedIn: st.loggedIn[source]! };
  if (env.ssn !== last + 1) return { kind: 'gap', expected: last + 1 };
  if (st.queue.length >= MAX_QUEUED_MESSAGES) return { kind: 'full' };
  st.lastIn[source] = env.ssn;
  if (!mustLog(env.epoch, st.epoch, st.sameGroup[source] === true)) {
    st.queue.push({ ...env, source, pos: 0, logged: true });
    st.heldAhead[source]!.add(env.ssn);
    advanceHeld(st, source);
    return { kind: 'internal', loggedIn: st.loggedIn[source]! };
  }
  const parts = fragmentsOf(env.data.length);
  st.logPos += parts;
  const pos = st.logPos;
  st.queue.push({ ...env, source, pos, logged: false });
  st.unloggedSources.set(pos, { source, ssn: env.ssn });
  return { kind: 'new', pos, parts };
}

/** The protector holds every entry up to `upTo`. Returns the acknowledgements now owed:
 *  source rank → highest ssn logged. */
export function onLogged(st: ChannelState, upTo: number): Map<number, number> {
  const acks = new Map<number, number>();
  if (upTo <= st.loggedUpTo) return acks;
  st.loggedUpTo = upTo;
  for (const [pos, { source, ssn }] of st.unloggedSources) {
    if (pos > upTo) continue;
    st.unloggedSources.delete(pos);
    if (ssn > st.loggedIn[source]!) st.loggedIn[source] = ssn;
    advanceHeld(st, source);
    acks.set(source, st.loggedIn[source]!);
  }
  for (const m of st.queue) if (m.pos <= upTo) m.logged = true;
  return acks;
}

/** Internal messages count as held once every earlier message of their source is logged or
 *  held: `loggedIn` (what a `have` and an ack say) never covers a message not yet logged. */
function advanceHeld(st: ChannelState, source: number): void {
  const held = st.heldAhead[source]!;
  for (const ssn of held) if (ssn <= st.loggedIn[source]!) held.delete(ssn);
  while (held.delete(st.loggedIn[source]! + 1)) st.loggedIn[source] = st.loggedIn[source]! + 1;
}

/** Bytes sent and not yet acknowledged: HMPL's sender TB. */
export function retainedBytes(st: ChannelState): number {
  let n = 0;
  for (const kept of st.retained) for (const env of kept.values()) n += env.data.length;
  return n;
}

/** Bytes arrived and not yet logged: HMPL's receiver TB. */
export function unloggedBytes(st: ChannelState): number {
  let n = 0;
  for (const m of st.queue) if (!m.logged) n += m.data.length;
  return n;
}

/** Assign the next log position to a determinant entry. */
export function nextLogPos(st: ChannelState): number {
  return ++st.logPos;
}

export type Pattern = { readonly source: number; readonly tag: number; readonly comm: number };
export const isWildcard = (p: Pattern): boolean => p.source === ANY_SOURCE || p.tag === ANY_TAG;

/** MPI's matching rule, as P2P's (matching.ts): ANY_TAG never takes library traffic. */
const matches = (p: Pattern, m: Arrived): boolean => recvMatches(p, m);

/** Take the message receive `index` gets, if it has arrived (and, when `needLogged`, is
 *  logged): the one its replay determinant names, else the earliest-arrived matching one. */
export function take(st: ChannelState, p: Pattern, index: number, needLogged: boolean): Arrived | null {
  const det = st.replayDets.get(index);
  const i = det === undefined
    ? st.queue.findIndex((m) => matches(p, m))
    : st.queue.findIndex((m) => m.source === det.source && m.ssn === det.ssn);
  if (i < 0) return null;
  const m = st.queue[i]!;
  if (needLogged && !m.logged) return null;
  st.queue.splice(i, 1);
  if (det !== undefined) st.replayDets.delete(index);
  return m;
}

// ---- replay ------------------------------------------------------------------------------------

/** A replacement starts from a checkpoint's channels `c`, taken at log position `logPos`. */
export function restoreChannels(st: ChannelState, c: ChannelSnapshot, logPos: number): void {
  c.nextSsn.forEach((v, r) => (st.nextSsn[r] = v));
  c.lastIn.forEach((v, r) => (st.lastIn[r] = v));
  c.loggedIn.forEach((v, r) => (st.loggedIn[r] = v));
  st.recvIndex = c.recvIndex;
  st.queue = c.queue.map((m) => ({ ...m, logged: true }));
  st.logPos = logPos;
  st.loggedUpTo = logPos;
}

/** A logged message re-enters the queue on replay, logged, at its (last fragment's) position. */
export function replayMessage(st: ChannelState, source: number, pos: number, env: Envelope): void {
  assert(pos > st.logPos, 'log entries replay in order');
  st.logPos = pos;
  st.loggedUpTo = pos;
  if (env.ssn > st.lastIn[source]!) st.lastIn[source] = env.ssn;
  if (env.ssn > st.loggedIn[source]!) st.loggedIn[source] = env.ssn;
  st.queue.push({ ...env, source, pos, logged: true });
}

export function replayDeterminant(st: ChannelState, pos: number, index: number, det: Determinant): void {
  assert(pos > st.logPos, 'log entries replay in order');
  st.logPos = pos;
  st.loggedUpTo = pos;
  st.replayDets.set(index, det);
}
