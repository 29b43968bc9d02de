// Where each message a replica receives goes (docs/PROTOCOL.md §5, §8.1, §10): the link's
// deliveries (an agent's request on the group lane, a replica's lane-0 message, session events)
// and an operator's request. Every lane-0 payload type has exactly one case in `onPtp`; the
// parts it hands them to are the primary, the backup, the failure detector and group change.
import { onAccuse } from '../diagnosis.ts';
import { MAX_DELIVERED_LOG } from '../constants.ts';
import { countDrop } from '../../base/result.ts';
import { type Delivery } from '../link.ts';
import { logSessionEvent } from '../link-views.ts';
import type { CoreEffect } from '../node.ts';
import type { ProcessId } from '../ports.ts';
import { isOperatorRequest, mayRequest } from '../replicated-state.ts';
import { openRestoredOp, openRestoredSubmit } from '../task-journal.ts';
import type { PtpPayload, SignedCG } from '../wire/messages.ts';
import { backups, deliveredCG, groupAck, isMember, isPrimary, otherBackups, type Replica } from './record.ts';
import { onNodeSuspect } from './failure-detector.ts';
import { onOrderClaim, order, orderOperator } from './primary.ts';
import { forwardToPrimary, onConfirmation, onEvidence, onOrderedInput, onOrderedRequest } from './backup.ts';
import { reply } from './execution.ts';
import { actOnCondemnation, holdWhileInstalling, onStatePart, onStateRequest, onSyncOrdered, onViewSync } from './group-change.ts';

export function onDelivery(r: Replica, d: Delivery, nowMs: number, out: CoreEffect[]): void {
  if (r.phase === 'installing' && d.type === 'ptp') {
    const p = d.payload;
    if (p.type === 'state.digest' || p.type === 'state.chunk') onStatePart(r, d.from, p, nowMs, out);
    else holdWhileInstalling(r, d);
    return;
  }
  // Agents' requests received meanwhile wait until the state is in and the primary known: the
  // link has acknowledged them, so the agent will not send them again (PROTOCOL §10.5).
  if ((r.phase !== 'serving' || r.change.sync !== null) && d.type === 'grp') {
    if (r.phase !== 'retired' && r.change.heldRequests.length < MAX_DELIVERED_LOG) r.change.heldRequests.push(d);
    return;
  }
  switch (d.type) {
    case 'grp':
      if (!r.agentIds.has(d.from) || d.body.type !== 'cg') {
        countDrop(r.drops, 'UNEXPECTED');
        return;
      }
      onAgentRequest(r, d.from, d.body.signed, nowMs, out);
      return;
    case 'ptp':
      onPtp(r, d.from, d.payload, nowMs, out);
      return;
    case 'gack':
      // An agent's group ack: the link has already released the copies it received from us
      // (spec §3.6 G10); its complete mark needs nothing more from a replica.
      return;
    case 'established':
    case 'reset':
      logSessionEvent(d, out);
      // The primary can only now receive what we forwarded it: its progress is timed from here.
      if (d.type === 'established' && d.peer === r.state.primary) {
        for (const timer of r.backup.progressTimers.values()) if (timer.atMs !== Infinity) timer.atMs = Math.max(timer.atMs, nowMs + r.t.primaryProgressMs);
      }
      return;
    default: {
      const never: never = d;
      return never;
    }
  }
}

/** An agent's request on the group lane (spec §3.6 G7): the primary orders it; a backup hears
 *  from an agent only when the agent gave up on the primary, and forwards it. */
function onAgentRequest(r: Replica, from: ProcessId, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  if (isPrimary(r)) {
    order(r, signed, nowMs, out);
    return;
  }
  if (deliveredCG(r, signed.cg)) {
    groupAck(r, from, nowMs);
    return;
  }
  if (isOperatorRequest(signed.cg.payload)) {
    countDrop(r.drops, 'NOT_A_MEMBER');
    return;
  }
  forwardToPrimary(r, signed, nowMs, out);
  out.push({ type: 'log', level: 'warn', event: 'agent.fallback', fields: { client: from, csn: signed.cg.csn } });
}

/** A replica's lane-0 message (PROTOCOL §5, §8.4, §10): one case per payload type. */
function onPtp(r: Replica, from: ProcessId, p: PtpPayload, nowMs: number, out: CoreEffect[]): void {
  const sync = r.change.sync;
  switch (p.type) {
    case 'wrapper':
    case 'wrapper.input':
      // The condemned primary's order is void; the other survivor's entries are executed.
      if (sync !== null) {
        if (from === sync.peer) onSyncOrdered(r, p.rsn, p.type === 'wrapper' ? { type: 'cg', signed: p.signed } : { type: 'input', input: p.input }, nowMs, out);
        return;
      }
      if (p.type === 'wrapper') onWrapper(r, from, p, nowMs, out);
      else onOrderedInput(r, from, p.rsn, p.input, nowMs, out);
      return;
    case 'order':
      if (sync === null) onConfirmation(r, from, p, nowMs, out);
      return;
    case 'order.evidence':
      if (!isPrimary(r) && otherBackups(r).includes(from)) onEvidence(r, from, p.rsn, p.frame, nowMs, out);
      return;
    case 'order.claim':
      if (isPrimary(r) && backups(r).includes(from)) onOrderClaim(r, from, p, nowMs, out);
      return;
    case 'accuse':
      onAccuse(r.diagnosis, from, p.signed, nowMs, out);
      actOnCondemnation(r, nowMs, out);
      return;
    case 'view.sync':
      onViewSync(r, from, p.view, p.rsn, nowMs, out);
      return;
    case 'state.request':
      onStateRequest(r, from, p, nowMs, out);
      return;
    case 'state.digest':
    case 'state.chunk':
      return; // only a replacement takes the state
    case 'node.suspect':
      onNodeSuspect(r, from, p.agent, p.inc, p.unreachable, nowMs, out);
      return;
    case 'notice':
      out.push({ type: 'deliver.notice', from, text: p.text });
      return;
    case 'error.report':
      out.push({ type: 'log', level: 'warn', event: 'error.report.ptp', fields: { from, gssn: p.gssn, kind: p.kind } });
      return;
    default: {
      const never: never = p;
      return never;
    }
  }
}

/** A request relayed on lane 0: the primary's order (to a backup), or a backup's forward (to
 *  the primary). Only agents and the nonce clients make requests: a replica relaying a request
 *  signed by anyone else (itself included) is faulty (PROTOCOL §2.3). */
function onWrapper(r: Replica, from: ProcessId, p: Extract<PtpPayload, { type: 'wrapper' }>, nowMs: number, out: CoreEffect[]): void {
  if (!isMember(r, from) || !(r.agentIds.has(p.signed.cg.client) || r.nonceClients.has(p.signed.cg.client))) {
    countDrop(r.drops, 'NOT_A_MEMBER');
    return;
  }
  if (isPrimary(r)) order(r, p.signed, nowMs, out); // forwarded by a backup: order it as if direct
  else if (from === r.state.primary) onOrderedRequest(r, p.rsn, p.signed, nowMs, out);
}

/** An operator's request, sent to every replica (PROTOCOL §8.1), or the watchdog's restore
 *  (§10.9), whose operator-signed submit is checked here before it is ordered or forwarded. */
export function onOperatorRequest(r: Replica, from: ProcessId, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  const payload = signed.cg.payload;
  if (!r.nonceClients.has(from) || !mayRequest(signed.cg.client, payload, r.operators, r.m.scc) || signed.cg.csn !== 0 || signed.cg.inc !== 0 ||
    !isOperatorRequest(payload)) {
    countDrop(r.drops, 'NOT_A_MEMBER');
    return;
  }
  // A restore orders only what an operator signed (PROTOCOL §10.9).
  const opened = payload.type === 'task.restore' ? openRestoredSubmit(payload, r.opts.verifier, r.operators)
    : payload.type === 'node.restore' ? openRestoredOp(payload, r.opts.verifier, r.operators) : null;
  if (opened !== null && !opened.ok) {
    countDrop(r.drops, opened.code);
    const what = payload.type === 'task.restore' ? { task: payload.task } : { nonce: payload.nonce };
    out.push({ type: 'log', level: 'warn', event: 'restore.refused', fields: { ...what, code: opened.code, detail: opened.detail } });
    return;
  }
  if (isPrimary(r)) return orderOperator(r, signed, true, nowMs, out);
  const seen = r.state.outcomes.get(payload.nonce);
  if (seen !== undefined) return reply(from, seen, out);
  forwardToPrimary(r, signed, nowMs, out);
}
