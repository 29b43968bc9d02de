// A node agent's group message buffer (spec §3.5 GMB; PROTOCOL §5.2–§5.3): the entries it has
// admitted, the flow control that bounds how many each replica may open, how an entry is
// finished and the group-ack mark moves over it (flaw 1 fix), the ReplicaTimeouts of entries
// whose copies are late (G5), and the error reports they give rise to, sent aggregated. Verbs
// over the agent's state (src/core/agent-state.ts). Pure: no clock, no I/O.
import { MAX_GMB_ENTRIES, QUORUM, REPLICA_TIMEOUT_FIRINGS } from './constants.ts';
import { linkOweGroupAck } from './link.ts';
import { peerJudged } from './link-views.ts';
import type { CoreEffect } from './node.ts';
import { assert } from '../base/result.ts';
import type { ProcessId } from './ports.ts';
import type { ErrorReportKind, GroupBody } from './wire/messages.ts';
import { sendRequest } from './agent-requests.ts';
import { bestContent, expectedFor, type AgentState, type Entry } from './agent-state.ts';

/** An entry `opener` opened was delivered or forgotten undelivered: its place is free again. */
export function release(s: AgentState, opener: ProcessId): void {
  const n = (s.opened.get(opener) ?? 0) - 1;
  if (n > 0) s.opened.set(opener, n);
  else s.opened.delete(opener);
}

export function forget(s: AgentState, e: Entry): void {
  s.gmb.delete(e.gssn);
  if (!e.delivered) release(s, e.opener);
}

/** Lane-1 flow control (PROTOCOL §5.2): may `from` open another undelivered entry? */
export function groupRoom(s: AgentState, from: ProcessId, body: GroupBody): boolean {
  if (body.type !== 'gc') return true;
  const gc = body.gc;
  if (gc.dest !== s.id || gc.destInc !== s.inc || gc.gssn <= s.gssnDelivered || s.gmb.has(gc.gssn)) return true;
  return (s.opened.get(from) ?? 0) < MAX_GMB_ENTRIES;
}

/** A delivered entry has every copy it is owed, or has stopped waiting for them (the callers
 *  finish delivered entries only): the group-ack mark moves over it once every GSSN before it
 *  is finished too. */
export function finish(s: AgentState, e: Entry, nowMs: number): void {
  assert(e.delivered, 'only a delivered entry is finished');
  forget(s, e);
  s.finished.add(e.gssn);
  let advanced = false;
  for (let g = s.awaitingCompletion[0]; g !== undefined && s.finished.has(g); g = s.awaitingCompletion[0]) {
    s.awaitingCompletion.shift();
    s.finished.delete(g);
    s.gssnAcked = g;
    advanced = true;
  }
  if (advanced) for (const r of s.replicas) linkOweGroupAck(s.links, r, nowMs);
}

/** Note an error report; reports go out aggregated, at most one per kind per ReplicaTimeout,
 *  so a slow replica under load cannot turn every GSSN into another request. */
export function noteReport(s: AgentState, kind: ErrorReportKind, e: Entry): void {
  const best = bestContent(e);
  const acc = s.reports.get(kind) ?? { gssn: e.gssn, count: 0, suspects: new Set<ProcessId>() };
  acc.gssn = Math.min(acc.gssn, e.gssn);
  acc.count++;
  // Only a copy that differs from (or is missing next to) a content two members agree on
  // names its sender; without such a content nobody is named (PROTOCOL §10.2).
  if (best !== null && best.count >= QUORUM) {
    for (const x of expectedFor(s, e.gssn)) if (e.copies.get(x) !== best.key) acc.suspects.add(x);
  }
  s.reports.set(kind, acc);
}

/** An entry now has a copy from every member that owes one: complete, its timer stopped, and a
 *  mismatch among the copies reported. */
export function completeEntry(s: AgentState, e: Entry): void {
  e.complete = true;
  e.timerAtMs = null;
  const best = bestContent(e);
  if (best !== null && expectedFor(s, e.gssn).some((x) => e.copies.get(x) !== best.key)) noteReport(s, 'mismatch', e);
}

/** The gathered error reports, once per ReplicaTimeout (see noteReport). */
export function sendReports(s: AgentState, nowMs: number, out: CoreEffect[]): void {
  if (s.reports.size === 0 || s.reportAtMs > nowMs) return;
  for (const [kind, acc] of s.reports) {
    s.errorReports++;
    const suspects = s.replicas.filter((x) => acc.suspects.has(x));
    out.push({ type: 'log', level: 'warn', event: 'agent.error-report', fields: { gssn: acc.gssn, count: acc.count, kind, suspects } });
    // spec §3.5 G2 4c / G5: the report goes to the group like any request, so every replica
    // sees it in the same order.
    sendRequest(s, { type: 'error.report', gssn: acc.gssn, count: acc.count, kind, suspects }, nowMs, out);
  }
  s.reports.clear();
  s.reportAtMs = nowMs + s.timing.replicaTimeoutMs;
}

/** An entry whose missing copies are all owed by replicas not judged yet (peerJudged: no
 *  session, start grace not over) waits for the end of the grace instead of timing out: a
 *  backup up a second and a half after the others was condemned on the agents' reports of
 *  copies it could not send. One booting late sends them then; one that never comes is named
 *  after the grace. */
function waitsOnlyForUnmet(s: AgentState, e: Entry, nowMs: number): boolean {
  const missing = expectedFor(s, e.gssn).filter((x) => !e.copies.has(x));
  return missing.length > 0 && missing.every((x) => !peerJudged(s.links, x, nowMs, s.startedAtMs, s.timing.startGraceMs));
}

/** spec §3.5 G5 ReplicaTimeout(gssn), for the GMB entries whose timer is due. */
export function replicaTimeouts(s: AgentState, nowMs: number): void {
  let next = Infinity;
  for (const e of [...s.gmb.values()]) {
    const due = e.timerAtMs !== null && e.timerAtMs <= nowMs;
    if (due && waitsOnlyForUnmet(s, e, nowMs)) {
      e.timerAtMs = s.startedAtMs + s.timing.startGraceMs; // the copies may come once they are up
    } else if (due) {
      e.firings++;
      noteReport(s, 'replica-timeout', e);
      if (e.firings >= REPLICA_TIMEOUT_FIRINGS) {
        e.timerAtMs = null;
        // A delivered GSSN is settled without the missing copy; an undelivered one stays
        // admitted (its copies may yet be matched) until the chain passes it.
        if (e.delivered) finish(s, e, nowMs);
      } else {
        e.timerAtMs = nowMs + s.timing.replicaTimeoutMs;
      }
    }
    if (e.timerAtMs !== null) next = Math.min(next, e.timerAtMs);
  }
  s.replicaTimeoutsDueAtMs = next;
}
