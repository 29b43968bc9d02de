// What the owner of the links reads of its sessions (docs/PROTOCOL.md §3–§5), without changing
// them: whether a session is up, whether a send would be taken, a lane's marks, the facts a
// status shows, when it next needs a step, whether a peer's silence may be judged yet, and the
// session events it logs.
// Pure: the state is src/core/link.ts's `Links`.
import { MAX_QUEUED_WHILE_DISCONNECTED } from './constants.ts';
import type { Delivery, LaneId, Links } from './link.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';

export function isEstablished(links: Links, peer: ProcessId): boolean {
  return links.peers.get(peer)?.established === true;
}

/** Would `linkSend` accept a body for `to` on `lane` now (not 'full' or 'unknown-peer')? A
 *  caller that numbers what it sends (CSN) asks first, so a refusal spends no number. */
export function linkCanSend(links: Links, to: ProcessId, lane: LaneId): boolean {
  const l = links.peers.get(to)?.lanes[lane];
  return l !== undefined && l.queued.length < MAX_QUEUED_WHILE_DISCONNECTED;
}

/** The last sequence number sent on a lane, and the highest the peer acknowledged. */
export function laneMarks(links: Links, peer: ProcessId, lane: LaneId): { sent: number; acked: number } {
  const l = links.peers.get(peer)?.lanes[lane];
  return { sent: l?.seqSent ?? 0, acked: l?.seqAcked ?? 0 };
}

/** Log a session event; true if `d` was one (the same for every core that owns links). */
export function logSessionEvent(d: Delivery, out: CoreEffect[]): boolean {
  if (d.type === 'established') out.push({ type: 'log', level: 'info', event: 'link.established', fields: { peer: d.peer } });
  else if (d.type === 'reset') out.push({ type: 'log', level: 'warn', event: 'link.peer-restarted', fields: { peer: d.peer } });
  else return false;
  return true;
}

/** Whether a peer's silence counts against it yet: once there is a session with it, or once the
 *  start grace of the process asking is over (`nowMs - startedAtMs >= graceMs`). Daemons start
 *  one by one, and a peer never met within the grace may still be booting: an agent does not
 *  report its missing copies (PROTOCOL §5.3), a backup does not accuse it of progress (§5.6). */
export function peerJudged(links: Links, peer: ProcessId, nowMs: number, startedAtMs: number, graceMs: number): boolean {
  return (links.peers.get(peer)?.established ?? false) || nowMs - startedAtMs >= graceMs;
}

/** Per-peer link facts for status output. */
export function linkView(links: Links, peer: ProcessId): { established: boolean; unacked: number; queued: number } | null {
  const p = links.peers.get(peer);
  if (p === undefined) return null;
  return {
    established: p.established,
    unacked: p.lanes[0].unacked.length + p.lanes[1].unacked.length,
    queued: p.lanes[0].queued.length + p.lanes[1].queued.length,
  };
}

/** The earliest time the links need a step: an owed ack, a retransmission, a hello. */
export function linkNextWakeMs(links: Links): number | null {
  let next: number | null = null;
  for (const id of links.owing) {
    const due = links.peers.get(id)?.ackDueAtMs;
    if (due !== undefined && due !== null && (next === null || due < next)) next = due;
  }
  for (const peer of links.peers.values()) {
    const candidates = peer.established
      ? [peer.lanes[0].retransmitAtMs, peer.lanes[1].retransmitAtMs]
      : [peer.helloAtMs];
    for (const c of candidates) if (c !== null && (next === null || c < next)) next = c;
  }
  return next;
}
