// A node agent's own requests to the group (spec §3.6 G6, PROTOCOL §5.6): each goes with the
// next CSN to the primary and is kept until f+1 replicas acknowledge it; one the primary does not
// get acknowledged in time falls back to both backups, and one still unacknowledged long after
// that goes to every member again, less and less often. Verbs over the agent's state
// (src/core/agent-state.ts). Pure: no clock, no I/O.
import { MAX_FALLBACK_MS, QUORUM } from './constants.ts';
import { linkSend } from './link.ts';
import { laneMarks, linkCanSend } from './link-views.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import { signCG } from './wire/frame.ts';
import type { AgentRequest } from './wire/messages.ts';
import { backups, unreceivedFallbackMs, type AgentState, type Pending } from './agent-state.ts';

/** spec §3.4 P6: a request the primary has not even received goes to the backups after three
 *  retransmissions. One it did receive but f+1 replicas have not acknowledged waits longer under
 *  load, since falling back only doubles the load: like TCP's RTO, four times the smoothed
 *  acknowledgement time, within [4 x retransmitMs, 2 s] (PROTOCOL §5.6). */
function fallbackAfterMs(s: AgentState, p: Pending): number {
  const received = p.primarySeq !== null && p.primarySeq <= laneMarks(s.links, s.primary, 1).acked;
  if (!received || s.ackTimeMs === null) return unreceivedFallbackMs(s);
  return Math.min(MAX_FALLBACK_MS, Math.max(unreceivedFallbackMs(s), 4 * s.ackTimeMs));
}

const dueOf = (s: AgentState, p: Pending): number => (p.fellBack ? p.retryAtMs : p.sentAtMs + fallbackAfterMs(s, p));

/** The earliest deadline of the pending requests, kept so that a step (one per frame) does not
 *  walk every pending request: with the primary unreachable, up to MAX_QUEUED_WHILE_DISCONNECTED
 *  requests wait, and walking them all at every step made a backlog quadratic (65,536 requests:
 *  75 s of stepping). It is exact after a walk, lowered by a new deadline, and may be early
 *  after a removal (the next walk corrects it). A request's deadline also reads what
 *  fallbackAfterMs reads: a change of the primary, of its lane's ack mark or of the smoothed ack
 *  time recomputes it. */
export function requestsDue(s: AgentState): number {
  const key = `${s.primary} ${laneMarks(s.links, s.primary, 1).acked} ${s.ackTimeMs}`;
  if (key !== s.requestsDueKey) {
    s.requestsDueKey = key;
    s.requestsDueAtMs = Infinity;
    for (const p of s.pending.values()) s.requestsDueAtMs = Math.min(s.requestsDueAtMs, dueOf(s, p));
  }
  return s.requestsDueAtMs;
}

/** Sends `request` to the primary with the next CSN and keeps it until f+1 acknowledge it. */
export function sendRequest(s: AgentState, request: AgentRequest, nowMs: number, out: CoreEffect[]): void {
  if (!linkCanSend(s.links, s.primary, 1)) {
    // Refused, not accepted: no CSN is spent, so the requests after it are not held back.
    out.push({ type: 'log', level: 'error', event: 'request.refused', fields: { request: request.type, why: 'backlog to the primary is full' } });
    return;
  }
  s.csnSent++;
  const signed = signCG({ csn: s.csnSent, gssnAck: s.gssnAcked, payload: request, client: s.id, inc: s.inc }, s.signer);
  const r = linkSend(s.links, s.primary, 1, { type: 'cg', signed }, nowMs, out);
  const p: Pending = { signed, sentAtMs: nowMs, fellBack: false, primarySeq: r === 'sent' ? laneMarks(s.links, s.primary, 1).sent : null, retryAtMs: Infinity };
  s.pending.set(s.csnSent, p);
  s.requestsDueAtMs = Math.min(s.requestsDueAtMs, dueOf(s, p));
}

/** Replica `from` has delivered our requests through CSN `ack`. */
export function onCsnAck(s: AgentState, from: ProcessId, ack: number, nowMs: number): void {
  if (ack > s.csnSent) return; // acknowledges what we never sent: a faulty replica
  if (ack <= (s.csnAckBy.get(from) ?? 0)) return;
  s.csnAckBy.set(from, ack);
  // A request is safe once f+1 replicas have delivered it (spec §3.5 G4, by quorum).
  const acks = s.replicas.map((r) => s.csnAckBy.get(r) ?? 0).sort((a, b) => b - a);
  const mark = acks[QUORUM - 1] ?? 0;
  if (mark <= s.csnAcked) return;
  s.csnAcked = mark;
  for (const [csn, p] of s.pending) {
    if (csn > s.csnAcked) continue;
    // Karn's rule: a request sent twice gives an ambiguous sample.
    if (!p.fellBack) {
      const sample = nowMs - p.sentAtMs;
      s.ackTimeMs = s.ackTimeMs === null ? sample : s.ackTimeMs + (sample - s.ackTimeMs) / 8;
    }
    s.pending.delete(csn);
  }
}

/** The pending requests' fallbacks and resends that are due (spec §3.6 G6, PROTOCOL §5.6). */
export function requestTimers(s: AgentState, nowMs: number, out: CoreEffect[]): void {
  let next = Infinity;
  for (const [csn, p] of s.pending) {
    if (p.fellBack && p.retryAtMs <= nowMs) {
      // Still not acknowledged by f+1 long after the fallback: the replicas that received it
      // may have lost it in a change of the group (PROTOCOL §10.5). Send it to every member
      // again, less and less often.
      p.retryAtMs = nowMs + Math.min(MAX_FALLBACK_MS, 2 * (p.retryAtMs - p.sentAtMs));
      out.push({ type: 'log', level: 'warn', event: 'agent.resend', fields: { csn, primary: s.primary } });
      for (const r of s.replicas) linkSend(s.links, r, 1, { type: 'cg', signed: p.signed }, nowMs, out);
    } else if (!p.fellBack && p.sentAtMs + fallbackAfterMs(s, p) <= nowMs) {
      // spec §3.4 P6 / §3.6 G6: the primary has had the time of three retransmissions and f+1
      // replicas still have not acknowledged: send the request to both backups as well.
      p.fellBack = true;
      p.retryAtMs = nowMs + MAX_FALLBACK_MS / 4;
      out.push({ type: 'log', level: 'warn', event: 'agent.fallback', fields: { csn, primary: s.primary } });
      for (const b of backups(s)) linkSend(s.links, b, 1, { type: 'cg', signed: p.signed }, nowMs, out);
    }
    next = Math.min(next, dueOf(s, p));
  }
  s.requestsDueAtMs = next;
}

/** PROTOCOL §10.7: the primary changed. Requests not yet acknowledged by f+1 members go to the
 *  new primary at once (the old one may be the faulty one). */
export function resendToPrimary(s: AgentState, nowMs: number, out: CoreEffect[]): void {
  for (const p of s.pending.values()) {
    const r = linkSend(s.links, s.primary, 1, { type: 'cg', signed: p.signed }, nowMs, out);
    p.sentAtMs = nowMs;
    p.fellBack = false;
    p.retryAtMs = Infinity;
    p.primarySeq = r === 'sent' ? laneMarks(s.links, s.primary, 1).sent : null;
  }
}
