// G-MPI message matching for one task process (spec §5): which arrived message a receive gets,
// and which posted receive an arriving message goes to. No sockets and no timers: the state is
// a typed record (createMatching) and the verbs below take it and say what happened; p2p.ts and
// mesh.ts settle the promises and read the sockets. Owns the posted receives, the unexpected
// (arrived, unmatched) queue with its byte accounting per sender (receive-side backpressure is
// decided on it), and the communicators discarded by recovery (spec §5.5).
//
// Rules: a receive matches on (communicator, source or ANY_SOURCE, tag or ANY_TAG); ANY_TAG
// matches application tags only (tag ≥ 0), so library traffic is never stolen by a wildcard.
// An arrival goes to the earliest-posted matching receive; a receive takes the earliest-arrived
// matching message (MPI's non-overtaking rule per sender follows from arrival order, which TCP
// keeps per connection).
import { assert } from '../../base/result.ts';

/** MPI_ANY_SOURCE / MPI_ANY_TAG. Negative, so they never collide with a VPID or a sendable tag. */
export const ANY_SOURCE = -1;
export const ANY_TAG = -1;
/** Bytes each queued message is charged beyond its payload, so a flood of empty messages also
 *  fills the queue (an entry's object, header fields and array slot cost about this much). */
export const UNEXPECTED_ENTRY_OVERHEAD_BYTES = 64;

/** One arrived message. `source` is the sender's VPID; `structured` says `data` is a msgpack
 *  value (payload.ts) rather than raw bytes. */
export type Message = {
  readonly source: number;
  readonly tag: number;
  readonly comm: number;
  readonly structured: boolean;
  readonly data: Uint8Array;
};

/** What a posted receive asks for; the caller's record may carry more (how to settle it). */
export type RecvPattern = { readonly source: number; readonly tag: number; readonly comm: number };

export type Matching<R extends RecvPattern> = {
  /** Posted, unmatched receives in posting order. */
  pendingRecvs: R[];
  /** Arrived, unmatched messages in arrival order: scanning from the front gives MPI's
   *  "earliest matching" rule. */
  unexpected: Message[];
  unexpectedBytes: number;
  /** unexpectedBytes by source VPID: backpressure is per peer. */
  readonly queuedBytesFrom: Map<number, number>;
  /** Communicators forgotten by recovery: their arrivals are dropped. */
  readonly discarded: Set<number>;
  /** Messages dropped because their communicator was discarded or their sender removed. */
  discardedMessages: number;
};

export function createMatching<R extends RecvPattern>(): Matching<R> {
  return { pendingRecvs: [], unexpected: [], unexpectedBytes: 0, queuedBytesFrom: new Map(), discarded: new Set(), discardedMessages: 0 };
}

export const recvMatches = (r: RecvPattern, m: Message): boolean =>
  r.comm === m.comm && (r.source === ANY_SOURCE || r.source === m.source) && (r.tag === ANY_TAG ? m.tag >= 0 : r.tag === m.tag);

const entryBytes = (m: Message): number => m.data.length + UNEXPECTED_ENTRY_OVERHEAD_BYTES;

/** Unexpected bytes queued from one sender (0 for an unattributed connection). */
export function queuedFrom<R extends RecvPattern>(s: Matching<R>, id: number | null): number {
  return id === null ? 0 : (s.queuedBytesFrom.get(id) ?? 0);
}

export type Arrival<R> =
  | { readonly kind: 'delivered'; readonly recv: R }
  | { readonly kind: 'queued' }
  | { readonly kind: 'discarded' };

/** A message arrived: to the earliest matching receive, else to the unexpected queue; dropped
 *  if its communicator was discarded. */
export function arrive<R extends RecvPattern>(s: Matching<R>, m: Message): Arrival<R> {
  if (s.discarded.has(m.comm)) {
    s.discardedMessages++;
    return { kind: 'discarded' };
  }
  const i = s.pendingRecvs.findIndex((r) => recvMatches(r, m));
  if (i >= 0) {
    const [recv] = s.pendingRecvs.splice(i, 1);
    assert(recv !== undefined, 'matched index out of range');
    return { kind: 'delivered', recv };
  }
  s.unexpected.push(m);
  const size = entryBytes(m);
  s.unexpectedBytes += size;
  s.queuedBytesFrom.set(m.source, queuedFrom(s, m.source) + size);
  return { kind: 'queued' };
}

/** The earliest-arrived queued message matching `pattern`, taken out of the queue; else null
 *  (the caller then posts the receive, or refuses it). */
export function takeQueued<R extends RecvPattern>(s: Matching<R>, pattern: RecvPattern): Message | null {
  const i = s.unexpected.findIndex((m) => recvMatches(pattern, m));
  if (i < 0) return null;
  const [m] = s.unexpected.splice(i, 1);
  assert(m !== undefined, 'matched index out of range');
  unqueued(s, m);
  return m;
}

/** Wait for a matching arrival (after takeQueued found none). */
export function postRecv<R extends RecvPattern>(s: Matching<R>, recv: R): void {
  s.pendingRecvs.push(recv);
}

/** Take out the posted receives `cancel` selects (all when omitted), in posting order, for the
 *  caller to reject. */
export function cancelRecvs<R extends RecvPattern>(s: Matching<R>, cancel: (r: R) => boolean = () => true): R[] {
  const out: R[] = [];
  s.pendingRecvs = s.pendingRecvs.filter((r) => {
    if (!cancel(r)) return true;
    out.push(r);
    return false;
  });
  return out;
}

/** Drop the queued messages `drop` selects, counting them as discarded. */
export function dropQueued<R extends RecvPattern>(s: Matching<R>, drop: (m: Message) => boolean): void {
  const keep: Message[] = [];
  for (const m of s.unexpected) {
    if (!drop(m)) {
      keep.push(m);
      continue;
    }
    unqueued(s, m);
    s.discardedMessages++;
  }
  s.unexpected = keep;
}

/** Forget communicator `comm` (spec §5.5): its posted receives come back for the caller to
 *  reject with BAD_COMM, its queued messages are dropped, its later arrivals discarded. */
export function discardComm<R extends RecvPattern>(s: Matching<R>, comm: number): R[] {
  s.discarded.add(comm);
  const cancelled = cancelRecvs(s, (r) => r.comm === comm);
  dropQueued(s, (m) => m.comm === comm);
  return cancelled;
}

/** Account for a message leaving the unexpected queue (received or dropped). */
function unqueued<R extends RecvPattern>(s: Matching<R>, m: Message): void {
  const size = entryBytes(m);
  s.unexpectedBytes -= size;
  const left = queuedFrom(s, m.source) - size;
  if (left > 0) s.queuedBytesFrom.set(m.source, left);
  else s.queuedBytesFrom.delete(m.source);
}
