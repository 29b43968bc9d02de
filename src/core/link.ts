// Reliable point-to-point links between CMM processes (docs/PROTOCOL.md §3–§4; spec §3.4).
// One session per peer, opened by a three-way `hello` handshake that binds both processes'
// incarnations; two independent reliable lanes per session (flaw 2 fix, spec §3.7):
//   lane 0 (`ptp` items): seq, cumulative ack piggybacked or pure (a pure ack takes no seq),
//          out-of-order buffer within a window, duplicate ack → fast resend (P1–P7);
//   lane 1 (`grp` items): group message replicas; the same seq/OMB machinery, acknowledged
//          by `gack` items that carry both the group layer's mark and the lane's cumulative
//          receipt, one per peer per step (spec §3.3, PROTOCOL §5.3).
// Pure: no clock, no I/O. Time arrives as `nowMs`; effects are appended to `out`.
import {
  ACK_DELAY_MS, MAX_QUEUED_WHILE_DISCONNECTED, MAX_RETRANSMIT_BACKOFF, MAX_RETRANSMIT_BATCH, MAX_UNACKED_PER_LANE,
  PRIMARY_RETRIES_BEFORE_FALLBACK, RECEIVE_WINDOW, type Timing,
} from './constants.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import type { DropCode } from '../base/result.ts';
import type { GroupBody, Item, PtpPayload } from './wire/messages.ts';

export type LaneId = 0 | 1;
type LaneBody<L extends LaneId> = L extends 0 ? PtpPayload : GroupBody;

/** `forInc`: the peer incarnation the body is meant for, if any (PROTOCOL §5.7). */
type Outgoing<B> = { seq: number; body: B; transmissions: number; forInc: number };

type Lane<B> = {
  seqSent: number;
  seqAcked: number;
  /** PMB: sent, not yet acknowledged, in seq order (head has seq = seqAcked + 1). */
  unacked: Outgoing<B>[];
  /** Bodies sent while the session is not established (spec P1.1), sent on establishment. */
  queued: { body: B; forInc: number }[];
  seqRcvd: number;
  /** OMB: admitted out of order, keyed by seq, all within the receive window. */
  outOfOrder: Map<number, B>;
  retransmitAtMs: number | null;
  /** Multiplier of the retransmission timeout: doubles per fruitless expiry, 1 after progress. */
  backoff: number;
};

export type Peer = {
  id: ProcessId;
  /** The peer's incarnation as last seen in a hello; 0 until known. */
  peerInc: number;
  established: boolean;
  helloAtMs: number | null;
  /** Handshake retry multiplier: doubles per unanswered hello, up to MAX_RETRANSMIT_BACKOFF. */
  helloBackoff: number;
  /** A peer expected up any moment (a replacement replica starting, PROTOCOL §10.6): its hellos
   *  keep the plain handshake period, no backoff, so the session opens within one period of
   *  its start (each hello also makes the transport dial it, src/io/ws-transport.ts). */
  eager?: boolean;
  lanes: [Lane<PtpPayload>, Lane<GroupBody>];
  /** Lane 0 received in order since our last outgoing lane-0 item: an ack is owed. */
  ackOwed: boolean;
  /** Lane 1 received something, or the group layer's mark moved: a `gack` is owed. */
  groupAckOwed: boolean;
  /** When the owed acks go out (delayed acks, ACK_DELAY_MS), or null if none is owed. */
  ackDueAtMs: number | null;
};

export type Links = {
  self: ProcessId;
  inc: number;
  timing: Timing;
  peers: Map<ProcessId, Peer>;
  /** Peers owed a lane-0 ack or a group ack at the end of the current step. */
  owing: Set<ProcessId>;
};

/** What the link layer hands up to the group layer. */
export type Delivery =
  | { type: 'ptp'; from: ProcessId; payload: PtpPayload }
  | { type: 'grp'; from: ProcessId; body: GroupBody }
  | { type: 'gack'; from: ProcessId; ack: number }
  | { type: 'established'; peer: ProcessId }
  /** The peer restarted (a higher incarnation): its session and both lanes were reset (P5). */
  | { type: 'reset'; peer: ProcessId };

function newLane<B>(): Lane<B> {
  return { seqSent: 0, seqAcked: 0, unacked: [], queued: [], seqRcvd: 0, outOfOrder: new Map(), retransmitAtMs: null, backoff: 1 };
}

function newPeer(id: ProcessId): Peer {
  return { id, peerInc: 0, established: false, helloAtMs: null, helloBackoff: 1, lanes: [newLane(), newLane()], ackOwed: false, groupAckOwed: false, ackDueAtMs: null };
}

export function createLinks(self: ProcessId, inc: number, timing: Timing, peers: readonly ProcessId[]): Links {
  const links: Links = { self, inc, timing, peers: new Map(), owing: new Set() };
  for (const p of peers) if (p !== self) links.peers.set(p, newPeer(p));
  return links;
}

const hello = (links: Links, peer: Peer): Item => ({ type: 'hello', inc: links.inc, echo: peer.peerInc, established: peer.established });

/** Open sessions to every known peer (docs/PROTOCOL.md §3.2). */
export function startLinks(links: Links, nowMs: number, out: CoreEffect[]): void {
  for (const peer of links.peers.values()) {
    out.push({ type: 'send', to: peer.id, item: hello(links, peer) });
    peer.helloAtMs = nowMs + links.timing.handshakeRetryMs;
  }
}

/** A peer that joined (a replica added to the group, PROTOCOL §10.6–10.7): open its session.
 *  Nothing happens for a peer already known. */
export function linkAddPeer(links: Links, id: ProcessId, nowMs: number, out: CoreEffect[], eager = false): void {
  const known = links.peers.get(id);
  if (known !== undefined) known.eager = eager;
  if (id === links.self || known !== undefined) return;
  const peer = newPeer(id);
  peer.eager = eager;
  links.peers.set(id, peer);
  out.push({ type: 'send', to: id, item: hello(links, peer) });
  peer.helloAtMs = nowMs + links.timing.handshakeRetryMs;
}

/** A peer that left for good (a condemned or abandoned replica): its buffers and timers go, and
 *  its items are dropped from now on as NOT_A_MEMBER. */
export function linkRemovePeer(links: Links, id: ProcessId): void {
  links.peers.delete(id);
  links.owing.delete(id);
}

function sendItem<L extends LaneId>(links: Links, peer: Peer, lane: L, entry: Outgoing<LaneBody<L>>, out: CoreEffect[]): void {
  entry.transmissions++;
  if (lane === 0) {
    peer.ackOwed = false; // this item carries the ack; a group ack may still be owed
    if (!peer.groupAckOwed) peer.ackDueAtMs = null;
    out.push({
      type: 'send', to: peer.id,
      item: { type: 'ptp', srcInc: links.inc, destInc: peer.peerInc, seq: entry.seq, ackSeq: peer.lanes[0].seqRcvd, body: entry.body as PtpPayload },
    });
  } else {
    out.push({
      type: 'send', to: peer.id,
      item: { type: 'grp', srcInc: links.inc, destInc: peer.peerInc, seq: entry.seq, body: entry.body as GroupBody },
    });
  }
}

function transmitNew<L extends LaneId>(
  links: Links, peer: Peer, lane: L, body: LaneBody<L>, forInc: number, nowMs: number, out: CoreEffect[],
): void {
  const l = peer.lanes[lane] as Lane<LaneBody<L>>;
  l.seqSent++;
  const entry: Outgoing<LaneBody<L>> = { seq: l.seqSent, body, transmissions: 0, forInc };
  l.unacked.push(entry);
  sendItem(links, peer, lane, entry, out);
  l.retransmitAtMs ??= nowMs + links.timing.retransmitMs;
}

export type SendResult = 'sent' | 'queued' | 'full' | 'unknown-peer' | 'stale';

/** Reliable send (spec §3.4 P2): kept until acknowledged, retransmitted on timeout.
 *  `forInc` (0 = any) names the peer incarnation the body is for: it is held back while the
 *  session is with an older incarnation, and survives the reset to that incarnation, which
 *  the group layer may learn about (by an ordered request) before this link does. */
export function linkSend<L extends LaneId>(
  links: Links, to: ProcessId, lane: L, body: LaneBody<L>, nowMs: number, out: CoreEffect[], forInc = 0,
): SendResult {
  const peer = links.peers.get(to);
  if (peer === undefined) return 'unknown-peer';
  const l = peer.lanes[lane] as Lane<LaneBody<L>>;
  if (forInc !== 0 && forInc < peer.peerInc) return 'stale'; // for a dead incarnation: nobody to tell
  const waiting = forInc !== 0 && forInc !== peer.peerInc;
  if (!peer.established || waiting || l.queued.length > 0 || l.unacked.length >= MAX_UNACKED_PER_LANE) {
    if (l.queued.length >= MAX_QUEUED_WHILE_DISCONNECTED) return 'full';
    l.queued.push({ body, forInc });
    return 'queued';
  }
  transmitNew(links, peer, lane, body, forInc, nowMs, out);
  return 'sent';
}

function resetSession(peer: Peer, newInc: number): void {
  // spec §3.4 P5 disconnect(x): the old session's buffers and timers go with it — except what
  // was meant for the new incarnation itself (see linkSend), which is queued again in order.
  const carried = (l: Lane<never>) => [...l.unacked, ...l.queued].filter((e) => e.forInc === newInc).map((e) => ({ body: e.body, forInc: e.forInc }));
  const keep: [ReturnType<typeof carried>, ReturnType<typeof carried>] = [carried(peer.lanes[0] as Lane<never>), carried(peer.lanes[1] as Lane<never>)];
  peer.established = false;
  peer.lanes = [newLane(), newLane()];
  peer.lanes[0].queued = keep[0];
  peer.lanes[1].queued = keep[1];
  peer.ackOwed = false;
  peer.groupAckOwed = false;
  peer.ackDueAtMs = null;
}

function establish(links: Links, peer: Peer, nowMs: number, out: CoreEffect[], deliveries: Delivery[]): void {
  peer.established = true;
  peer.helloAtMs = null;
  peer.helloBackoff = 1;
  deliveries.push({ type: 'established', peer: peer.id });
  // spec §3.4 P5: send what was queued while disconnected, now with real sequence numbers.
  refill(links, peer, 0, nowMs, out);
  refill(links, peer, 1, nowMs, out);
}

/** Cumulative acknowledgement of a lane through `ackSeq` (spec §3.4 P7; lane 1 through the
 *  `seq` of a gack). */
function processAck(links: Links, peer: Peer, lane: LaneId, ackSeq: number, nowMs: number, out: CoreEffect[]): void {
  const l = peer.lanes[lane];
  if (ackSeq > l.seqSent) return; // acks what we never sent: a faulty peer; ignore
  if (ackSeq > l.seqAcked) {
    while (l.unacked.length > 0 && (l.unacked[0] as Outgoing<unknown>).seq <= ackSeq) l.unacked.shift();
    l.seqAcked = ackSeq;
    l.backoff = 1;
    l.retransmitAtMs = l.unacked.length > 0 ? nowMs + links.timing.retransmitMs : null;
    refill(links, peer, lane, nowMs, out);
  }
}

/** Move queued bodies into the window once acks free space (in order: a body held for a
 *  newer incarnation holds back those behind it). */
function refill(links: Links, peer: Peer, lane: LaneId, nowMs: number, out: CoreEffect[]): void {
  const l = peer.lanes[lane];
  while (peer.established && l.queued.length > 0 && l.unacked.length < MAX_UNACKED_PER_LANE) {
    const q = l.queued[0] as { body: never; forInc: number };
    if (q.forInc !== 0 && q.forInc > peer.peerInc) break;
    l.queued.shift();
    if (q.forInc !== 0 && q.forInc < peer.peerInc) continue; // for a dead incarnation
    transmitNew(links, peer, lane, q.body, q.forInc, nowMs, out);
  }
}

/** Admit an in-window sequenced body; returns the bodies now deliverable in order (P3, P4).
 *  `room` lets the layer above refuse a body it cannot hold yet (flow control): a refused
 *  body is not received at all — the sequence does not advance, no ack covers it, and the
 *  sender retransmits it later. */
function admit<B>(l: Lane<B>, seq: number, body: B, room: (b: B) => boolean): B[] | 'duplicate' | 'out-of-window' | 'buffered' | 'refused' {
  if (seq <= l.seqRcvd) return 'duplicate';
  if (seq >= l.seqRcvd + 1 + RECEIVE_WINDOW) return 'out-of-window';
  if (seq > l.seqRcvd + 1) {
    l.outOfOrder.set(seq, body);
    return 'buffered';
  }
  if (!room(body)) return 'refused';
  const ready: B[] = [body];
  l.seqRcvd = seq;
  // spec §3.4 P4 with the fix it flags: seq_rcvd advances inside the loop.
  for (let next = l.outOfOrder.get(l.seqRcvd + 1); next !== undefined && room(next); next = l.outOfOrder.get(l.seqRcvd + 1)) {
    l.outOfOrder.delete(l.seqRcvd + 1);
    l.seqRcvd++;
    ready.push(next);
  }
  return ready;
}

const anyRoom = (): boolean => true;

export type ReceiveResult = { deliveries: Delivery[]; drop: DropCode | null };

/** One inbound link-level item from `from`. Heartbeats, probes and queries are not link items.
 *  `groupRoom` is the group layer's flow control for lane 1 (see `admit`). */
export function linkReceive(
  links: Links, from: ProcessId, item: Item, nowMs: number, out: CoreEffect[],
  groupRoom: (from: ProcessId, body: GroupBody) => boolean = anyRoom,
): ReceiveResult {
  const deliveries: Delivery[] = [];
  const peer = links.peers.get(from);
  if (peer === undefined) return { deliveries, drop: 'NOT_A_MEMBER' };
  switch (item.type) {
    case 'hello': {
      if (item.inc < peer.peerInc) return { deliveries, drop: 'REPLAYED' };
      if (item.inc > peer.peerInc && peer.peerInc !== 0) {
        resetSession(peer, item.inc);
        deliveries.push({ type: 'reset', peer: from });
      }
      peer.peerInc = item.inc;
      if (item.echo === links.inc && !peer.established) establish(links, peer, nowMs, out, deliveries);
      // Answer a peer that is not established yet, or that knows an older us; an answer to an
      // established peer that knows us would only echo forever.
      if (!item.established || item.echo !== links.inc) out.push({ type: 'send', to: from, item: hello(links, peer) });
      if (!peer.established) peer.helloAtMs ??= nowMs + links.timing.handshakeRetryMs;
      return { deliveries, drop: null };
    }
    case 'ptp':
    case 'grp':
    case 'gack': {
      if (item.srcInc !== peer.peerInc || item.destInc !== links.inc) return { deliveries, drop: 'STALE_SESSION' };
      // Traffic of the current session proves the peer completed the handshake.
      if (!peer.established) establish(links, peer, nowMs, out, deliveries);
      if (item.type === 'gack') {
        processAck(links, peer, 1, item.seq, nowMs, out);
        deliveries.push({ type: 'gack', from, ack: item.ack });
        return { deliveries, drop: null };
      }
      if (item.type === 'grp') {
        const r = admit(peer.lanes[1], item.seq, item.body, (b) => groupRoom(from, b));
        if (r === 'out-of-window') return { deliveries, drop: 'OUT_OF_WINDOW' };
        if (r === 'refused') return { deliveries, drop: null };
        // Whatever arrived, the sender learns our receipt mark: soon (delayed ack), or at once
        // for a duplicate, which means it missed the last one.
        oweAck(links, peer, 'group', r === 'duplicate' ? nowMs : nowMs + ACK_DELAY_MS);
        if (r === 'duplicate') return { deliveries, drop: 'DUPLICATE' };
        if (r !== 'buffered') for (const body of r) deliveries.push({ type: 'grp', from, body });
        return { deliveries, drop: null };
      }
      // Lane 0. A pure ack is tested first: spec §3.4 P3 as printed would drop it at step 1.
      const l = peer.lanes[0];
      if (item.body === null) {
        const before = l.seqAcked;
        processAck(links, peer, 0, item.ackSeq, nowMs, out);
        // P3.4 fast retransmit: a duplicate ack that advanced nothing names the first gap.
        if (item.ackSeq === before && item.ackSeq < l.seqSent) {
          const head = l.unacked[0];
          if (head !== undefined && head.seq === item.ackSeq + 1) sendItem(links, peer, 0, head, out);
        }
        return { deliveries, drop: null };
      }
      processAck(links, peer, 0, item.ackSeq, nowMs, out);
      const r = admit(l, item.seq, item.body, anyRoom);
      if (r === 'out-of-window') return { deliveries, drop: 'OUT_OF_WINDOW' };
      if (r === 'refused') return { deliveries, drop: null }; // lane 0 never refuses
      // Duplicates and gaps are answered at once with our current ack (P3.2: the duplicate ack
      // prompts a resend); in-order data is acknowledged soon (delayed ack).
      oweAck(links, peer, 'ptp', r === 'duplicate' || r === 'buffered' ? nowMs : nowMs + ACK_DELAY_MS);
      if (r === 'duplicate') return { deliveries, drop: 'DUPLICATE' };
      if (r !== 'buffered') for (const payload of r) deliveries.push({ type: 'ptp', from, payload });
      return { deliveries, drop: null };
    }
    default:
      return { deliveries, drop: 'UNEXPECTED' };
  }
}

function oweAck(links: Links, peer: Peer, kind: 'ptp' | 'group', dueAtMs: number): void {
  if (kind === 'ptp') peer.ackOwed = true;
  else peer.groupAckOwed = true;
  peer.ackDueAtMs = peer.ackDueAtMs === null ? dueAtMs : Math.min(peer.ackDueAtMs, dueAtMs);
  links.owing.add(peer.id);
}

/** The group layer's mark changed: tell `peer` soon (delayed ack). */
export function linkOweGroupAck(links: Links, peer: ProcessId, nowMs: number): void {
  const p = links.peers.get(peer);
  if (p === undefined || !p.established) return;
  oweAck(links, p, 'group', nowMs + ACK_DELAY_MS);
}

/** Acks due by `nowMs`, coalesced to one per peer and lane (spec §3.4 P3 "send a PTP ack";
 *  PROTOCOL §4, §5.3). A lane-0 ack is skipped if data already carried it. `groupMark` gives
 *  the group layer's mark for a peer (agent: complete GSSN; replica: CSN). */
export function flushAcks(links: Links, out: CoreEffect[], groupMark: (peer: ProcessId) => number, nowMs: number): void {
  for (const id of links.owing) {
    const peer = links.peers.get(id);
    if (peer === undefined || !peer.established) {
      links.owing.delete(id);
      continue;
    }
    if (peer.ackDueAtMs !== null && peer.ackDueAtMs > nowMs) continue;
    peer.ackDueAtMs = null;
    links.owing.delete(id);
    if (peer.ackOwed) {
      peer.ackOwed = false;
      const l = peer.lanes[0];
      out.push({
        type: 'send', to: id,
        item: { type: 'ptp', srcInc: links.inc, destInc: peer.peerInc, seq: l.seqSent, ackSeq: l.seqRcvd, body: null },
      });
    }
    if (peer.groupAckOwed) {
      peer.groupAckOwed = false;
      out.push({
        type: 'send', to: id,
        item: { type: 'gack', srcInc: links.inc, destInc: peer.peerInc, ack: groupMark(id), seq: peer.lanes[1].seqRcvd },
      });
    }
  }
}

/** Fire due handshake retries and retransmissions (spec §3.4 P6), with exponential backoff —
 *  except on lane 1 to `steady` (an agent's primary), whose first three retransmissions keep
 *  the plain period so that "three retransmissions, then the backups" (spec P6, G6) holds. */
export function linkTimers(links: Links, nowMs: number, out: CoreEffect[], steady: ProcessId | null = null): void {
  for (const peer of links.peers.values()) {
    if (!peer.established) {
      if (peer.helloAtMs !== null && peer.helloAtMs <= nowMs) {
        out.push({ type: 'send', to: peer.id, item: hello(links, peer) });
        peer.helloBackoff = peer.eager === true ? 1 : Math.min(peer.helloBackoff * 2, MAX_RETRANSMIT_BACKOFF);
        peer.helloAtMs = nowMs + links.timing.handshakeRetryMs * peer.helloBackoff;
      }
      continue;
    }
    for (const lane of [0, 1] as const) {
      const l = peer.lanes[lane];
      if (l.retransmitAtMs === null || l.retransmitAtMs > nowMs) continue;
      const n = Math.min(l.unacked.length, MAX_RETRANSMIT_BATCH);
      for (let i = 0; i < n; i++) sendItem(links, peer, lane, l.unacked[i] as Outgoing<never>, out);
      const early = lane === 1 && peer.id === steady && (l.unacked[0]?.transmissions ?? 0) <= 1 + PRIMARY_RETRIES_BEFORE_FALLBACK;
      if (!early) l.backoff = Math.min(l.backoff * 2, MAX_RETRANSMIT_BACKOFF);
      l.retransmitAtMs = l.unacked.length > 0 ? nowMs + links.timing.retransmitMs * l.backoff : null;
    }
  }
}
