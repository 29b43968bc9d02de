// The backups' side of the order (spec §3.6 G7–G8; docs/PROTOCOL.md §5.6, §5.8, §10.2): a backup
// checks the primary's RSN sequence, confirms each order with the other backup before executing
// it, keeps the primary's signed frames as evidence, settles a disagreement (the primary signed
// two orders, or the other backup lied about one), relays an order the primary withheld from the
// other backup, and watches the primary's progress on the requests it forwarded
// (PrimaryProgressTimeout).
import { accuse, condemned } from '../diagnosis.ts';
import { MAX_EVIDENCE_FRAME_BYTES, MAX_HOLDBACK_PER_AGENT, MAX_ORDER_AHEAD } from '../constants.ts';
import { bytesEqual } from '../../base/bytes.ts';
import { assert, countDrop } from '../../base/result.ts';
import { linkSend } from '../link.ts';
import { peerJudged } from '../link-views.ts';
import type { CoreEffect } from '../node.ts';
import { createOrderConfirm, executed, nextStep, type OrderConfirm, type Ordered } from '../order-confirm.ts';
import type { ProcessId } from '../ports.ts';
import { decodeFrame, pack } from '../wire/frame.ts';
import { orderClaim, type GroupInput, type Item, type PtpPayload, type SignedCG } from '../wire/messages.ts';
import {
  deliveredCG, isPrimary, orderDigest, otherBackups, portSigned, progressKey, sendPtp, suspect, type Replica,
} from './record.ts';
import { checkTickRate, health } from './failure-detector.ts';
import { execute } from './execution.ts';
import { actOnCondemnation } from './group-change.ts';

/** Executed RSNs whose primary frame a backup keeps (see executeInOrder). */
const EXECUTED_FRAMES_KEPT = 64;

export type BackupConfirm = {
  /** The primary's order, confirmed between backups before execution (PROTOCOL §5.8).
   *  Replaced when the primary changes: the old primary's order beyond what ran is void. */
  confirm: OrderConfirm;
  /** The primary's signed frame that carried each proposed RSN, evidence if the other backup
   *  was given another order (PROTOCOL §10.2); and the other backup's evidence that arrived
   *  before our own proposal. */
  readonly orderFrames: Map<number, Uint8Array>;
  readonly evidenceWaiting: Map<number, Uint8Array>;
  /** The other backup's signed claim (view, signature) with its `order` digest for each RSN we
   *  have not executed, to show the primary if that digest is not of the primary's order. */
  readonly confirmClaims: Map<number, { view: number; sig: Uint8Array }>;
  /** RSNs whose primary frame we already showed the other backup. */
  readonly evidenceSent: Set<number>;
  /** The disputes we hold, with the deadline for the other backup's evidence of an
   *  equivocation (PROTOCOL §5.8, §10.2 `order.lie`). */
  readonly disputes: Map<number, { other: ProcessId; deadlineMs: number }>;
  /** PrimaryProgressTimeout(c, csn) deadlines (spec §3.6 G8), keyed by progressKey. */
  readonly progressTimers: Map<string, { signed: SignedCG; atMs: number }>;
};

export const createBackupConfirm = (): BackupConfirm => ({
  confirm: createOrderConfirm(), orderFrames: new Map(), evidenceWaiting: new Map(), confirmClaims: new Map(), evidenceSent: new Set(),
  disputes: new Map(), progressTimers: new Map(),
});

/** A request the primary should order (an agent's fallback, or an operator's request sent to
 *  every replica) goes to the primary; PrimaryProgressTimeout watches it (G8). Not one the
 *  primary already ordered, which waits here for the other backup's confirmation (PROTOCOL
 *  §5.8): its order is not in question, and a backup that withholds its confirmations must not
 *  make a correct primary look as if it never ordered. */
export function forwardToPrimary(r: Replica, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  const b = r.backup;
  const key = progressKey(signed.cg);
  for (const p of b.confirm.proposals.values()) if (p.ordered.type === 'cg' && progressKey(p.ordered.signed.cg) === key) return;
  linkSend(r.links, r.state.primary, 0, { type: 'wrapper', rsn: 0, signed }, nowMs, out);
  if (!b.progressTimers.has(key) && b.progressTimers.size < MAX_HOLDBACK_PER_AGENT * r.agentIds.size) {
    b.progressTimers.set(key, { signed, atMs: nowMs + r.t.primaryProgressMs });
  }
}

/** Keep the primary's signed frame that carries an order ahead of ours, as evidence
 *  (PROTOCOL §10.2), bounded in size and number. */
export function keepOrderFrame(r: Replica, from: ProcessId, item: Item, raw: Uint8Array | undefined): void {
  const b = r.backup;
  if (raw !== undefined && from === r.state.primary && item.type === 'ptp' && item.body !== null &&
    (item.body.type === 'wrapper' || item.body.type === 'wrapper.input') && item.body.rsn > r.state.rsn &&
    raw.length <= MAX_EVIDENCE_FRAME_BYTES && b.orderFrames.size < MAX_ORDER_AHEAD) {
    b.orderFrames.set(item.body.rsn, raw);
  }
}

/** The primary ordered this request: PrimaryProgressTimeout (G8) is about ordering, not about
 *  how long the backups take to confirm and execute. */
export function onOrderedRequest(r: Replica, rsn: number, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  if (rsn !== 0) r.backup.progressTimers.delete(progressKey(signed.cg));
  propose(r, rsn, { type: 'cg', signed }, r.hash(signed.bytes), nowMs, out);
}

/** The primary ordered an input of the group's own. */
export function onOrderedInput(r: Replica, from: ProcessId, rsn: number, input: GroupInput, nowMs: number, out: CoreEffect[]): void {
  if (isPrimary(r) || from !== r.state.primary) {
    countDrop(r.drops, 'NOT_A_MEMBER');
    return;
  }
  if (input.type === 'tick') checkTickRate(r, nowMs, out);
  // Where the replacement listens is its own word, signed, not the primary's (PROTOCOL
  // §10.6): a primary that changes it gets no confirmation, and its order stalls until
  // the progress rule exposes it.
  if (!portSigned(r, input)) {
    countDrop(r.drops, 'SIG_INVALID');
    return;
  }
  // Distinct from any CG's bytes: a one-byte tag before the input's canonical encoding.
  propose(r, rsn, { type: 'input', input }, orderDigest(r, { type: 'input', input }), nowMs, out);
}

/** The other backup's view of the primary's order (PROTOCOL §5.8). */
export function onConfirmation(r: Replica, from: ProcessId, p: Extract<PtpPayload, { type: 'order' }>, nowMs: number, out: CoreEffect[]): void {
  if (isPrimary(r) || !otherBackups(r).includes(from)) return;
  const { state } = r;
  if (p.rsn > state.rsn) {
    if (p.rsn > state.rsn + MAX_ORDER_AHEAD) return; // bounded: a lying backup cannot fill us
    r.backup.confirm.confirmations.set(p.rsn, p.digest);
    r.backup.confirmClaims.set(p.rsn, { view: p.view, sig: p.sig });
    executeInOrder(r, nowMs, out);
  } else {
    // We executed this RSN without its confirmation: a different one still exposes the lie,
    // and the other backup, which disputes it, needs our frame as evidence.
    const mine = r.executedDigests.get(p.rsn);
    if (mine !== undefined && !bytesEqual(mine, p.digest)) {
      suspect(r, out, state.primary, 'digest.mismatch', `${from} was given another request at executed rsn ${p.rsn}`);
      sendEvidence(r, from, p.rsn, nowMs, out);
    }
  }
}

/** The primary's wrapper for `rsn` inside a frame the other backup shows, if the frame is the
 *  primary's, signed. */
function primaryOrderIn(r: Replica, from: ProcessId, rsn: number, frame: Uint8Array): Ordered | null {
  const decoded = decodeFrame(frame, { cluster: r.m.cluster, self: from, verifier: r.opts.verifier });
  if (!decoded.ok || decoded.value.from !== r.state.primary) return null;
  for (const item of decoded.value.items) {
    const b = item.type === 'ptp' ? item.body : null;
    if (b === null || (b.type !== 'wrapper' && b.type !== 'wrapper.input') || b.rsn !== rsn) continue;
    return b.type === 'wrapper' ? { type: 'cg', signed: b.signed } : { type: 'input', input: b.input };
  }
  return null;
}

/** PROTOCOL §10.2: the other backup shows the frame the primary signed for `rsn`. If it holds
 *  a different order than the primary gave us, the primary signed two orders for one RSN:
 *  proof, and we accuse it. A frame that proves nothing proves nothing (it is dropped). */
export function onEvidence(r: Replica, from: ProcessId, rsn: number, frame: Uint8Array, nowMs: number, out: CoreEffect[]): void {
  const b = r.backup;
  const mine = b.confirm.proposals.get(rsn)?.digest ?? r.executedDigests.get(rsn);
  if (mine === undefined) {
    if (rsn === b.confirm.proposedRsn + 1 && r.phase === 'serving' && r.change.sync === null) return relayedOrder(r, from, rsn, frame, nowMs, out);
    if (rsn > r.state.rsn && b.evidenceWaiting.size < MAX_ORDER_AHEAD) b.evidenceWaiting.set(rsn, frame);
    return;
  }
  const theirs = primaryOrderIn(r, from, rsn, frame);
  if (theirs === null || bytesEqual(orderDigest(r, theirs), mine)) return;
  b.disputes.delete(rsn);
  // The other backup holds proof only if it has our frame too (we may have executed this
  // RSN without disputing it); the accusation is once per view, the frame is cheap.
  sendEvidence(r, from, rsn, nowMs, out);
  accuse(r.diagnosis, r.state.primary, 'equivocation', `the primary signed two orders for rsn ${rsn} (${from} holds the other)`, nowMs, out);
  actOnCondemnation(r, nowMs, out);
}

/** PROTOCOL §5.8: the other backup executed `rsn` without our confirmation and shows us the
 *  primary's signed frame for it, the next RSN we lack. A primary that withholds an order from
 *  one backup cannot stall it: the order is the primary's own, signed, whoever relays it. */
function relayedOrder(r: Replica, from: ProcessId, rsn: number, frame: Uint8Array, nowMs: number, out: CoreEffect[]): void {
  const ordered = primaryOrderIn(r, from, rsn, frame);
  if (ordered === null) return;
  if (ordered.type === 'cg') {
    if (!(r.agentIds.has(ordered.signed.cg.client) || r.nonceClients.has(ordered.signed.cg.client))) return;
    r.backup.progressTimers.delete(progressKey(ordered.signed.cg));
  } else if (!portSigned(r, ordered.input)) return;
  out.push({ type: 'log', level: 'warn', event: 'order.relayed', fields: { rsn, from } });
  propose(r, rsn, ordered, orderDigest(r, ordered), nowMs, out);
}

/** Show the other backup, once per RSN, the primary's signed frame that gave us `rsn`. */
function sendEvidence(r: Replica, to: ProcessId, rsn: number, nowMs: number, out: CoreEffect[]): void {
  const b = r.backup;
  const frame = b.orderFrames.get(rsn);
  if (frame === undefined || b.evidenceSent.has(rsn)) return;
  b.evidenceSent.add(rsn);
  if (b.evidenceSent.size > EXECUTED_FRAMES_KEPT) {
    const oldest = b.evidenceSent.values().next().value;
    assert(oldest !== undefined, 'evidenceSent is over its bound, so not empty');
    b.evidenceSent.delete(oldest);
  }
  sendPtp(r, to, { type: 'order.evidence', rsn, frame }, nowMs, out);
}

/** PROTOCOL §10.2 `order.lie`, the disputing backup's side: no evidence of an equivocation
 *  came within the bound, so the other backup confirmed an order the primary never gave. */
export function disputeTimers(r: Replica, nowMs: number, out: CoreEffect[]): void {
  for (const [rsn, d] of r.backup.disputes) {
    if (d.deadlineMs > nowMs) continue;
    r.backup.disputes.delete(rsn);
    if (!otherBackups(r).includes(d.other)) continue;
    accuse(r.diagnosis, d.other, 'order.lie', `${d.other} confirmed rsn ${rsn} with another digest than the primary's order and showed no frame of the primary's for it within ${r.t.orderConfirmMs} ms`, nowMs, out);
    actOnCondemnation(r, nowMs, out);
  }
}

/** The primary's order for `rsn` (spec §3.6 G7), confirmed with the other backup before
 *  execution (PROTOCOL §5.8). */
function propose(r: Replica, rsn: number, ordered: Ordered, digest: Uint8Array, nowMs: number, out: CoreEffect[]): void {
  const { confirm } = r.backup;
  // A replacement's held wrappers from before the RSN its state came at (PROTOCOL §10.6).
  if (r.change.replaying && rsn <= r.state.rsn) return;
  // spec §3.6 G7: a gap in the primary's RSN sequence initiates self-diagnosis.
  if (rsn !== confirm.proposedRsn + 1) {
    suspect(r, out, r.state.primary, 'rsn.gap', `wrapper rsn ${rsn}, expected ${confirm.proposedRsn + 1}`);
    return;
  }
  if (confirm.proposals.size >= MAX_ORDER_AHEAD) {
    // Only a stalled dispute gets here; self-diagnosis (issue 5) resolves it.
    out.push({ type: 'log', level: 'error', event: 'order.backlog-full', fields: { rsn } });
    return;
  }
  confirm.proposedRsn = rsn;
  confirm.proposals.set(rsn, { ordered, digest, atMs: nowMs });
  const waiting = r.backup.evidenceWaiting.get(rsn);
  if (waiting !== undefined) {
    r.backup.evidenceWaiting.delete(rsn);
    const other = otherBackups(r)[0];
    if (other !== undefined) onEvidence(r, other, rsn, waiting, nowMs, out);
  }
  // Signed on its own, inside a MAC'd frame: evidence only if it lies (PROTOCOL §10.2 order.lie).
  const view = r.state.group.view;
  const sig = r.opts.signer.sign(pack(orderClaim(r.id, view, rsn, digest)));
  for (const b of otherBackups(r)) linkSend(r.links, b, 0, { type: 'order', rsn, digest, view, sig }, nowMs, out);
  executeInOrder(r, nowMs, out);
}

/** Whether the other backups answer: a backup silent for two heartbeat checks has crashed or
 *  is cut off, so we do not wait for it. One never heard at all, two checks after we started,
 *  is just as silent; so is one we condemned (PROTOCOL §10.5). */
function othersAnswer(r: Replica, others: readonly ProcessId[], condemned: ProcessId | undefined, nowMs: number): boolean {
  return others.length > 0 && others.every((b) => {
    if (b === condemned) return false;
    const seen = r.detector.heard.get(b);
    if (seen === undefined || seen.atMs === null) return nowMs - r.startedAtMs < 2 * r.t.replicaCheckMs;
    return health(seen) !== 'silent';
  });
}

/** The other backup confirmed `rsn` with another digest than ours. Its claim, if signed, goes
 *  to the primary, and the RSN waits; false: the claim was unsigned and is forgotten. */
function dispute(r: Replica, rsn: number, others: readonly ProcessId[], nowMs: number, out: CoreEffect[]): boolean {
  const b = r.backup;
  const other = others[0];
  const theirs = b.confirm.confirmations.get(rsn);
  // nextStep disputes only an RSN the other backup confirmed with another digest.
  assert(other !== undefined && theirs !== undefined, `a dispute at rsn ${rsn} without the other backup's confirmation`);
  const claim = b.confirmClaims.get(rsn);
  if (claim === undefined || claim.view !== r.state.group.view || !r.opts.verifier.verify(other, pack(orderClaim(other, claim.view, rsn, theirs)), claim.sig)) {
    // A confirmation its sender did not sign proves nothing and confirms nothing: as if it
    // never came (a backup that withholds confirmations only delays us, §5.8).
    countDrop(r.drops, 'SIG_INVALID');
    b.confirm.disputed.delete(rsn);
    b.confirm.confirmations.delete(rsn);
    b.confirmClaims.delete(rsn);
    return false;
  }
  suspect(r, out, r.state.primary, 'digest.mismatch', `${others.join(',')} was given another request at rsn ${rsn}`);
  for (const x of others) sendEvidence(r, x, rsn, nowMs, out);
  // Either the primary signed two orders, and the other backup shows us its frame within
  // the bound, or the other backup lied: the primary sees that from its signed claim.
  sendPtp(r, r.state.primary, { type: 'order.claim', claimant: other, view: claim.view, rsn, digest: theirs, sig: claim.sig }, nowMs, out);
  b.disputes.set(rsn, { other, deadlineMs: nowMs + r.t.orderConfirmMs });
  return true;
}

/** Execute the primary's order as far as it is confirmed (PROTOCOL §5.8). With no other
 *  backup there is nobody to wait for. */
export function executeInOrder(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  const b = r.backup;
  const others = otherBackups(r);
  const condemnedBackup = condemned(r.diagnosis)?.target;
  const answers = othersAnswer(r, others, condemnedBackup, nowMs);
  for (;;) {
    const next = nextStep(b.confirm, state.rsn + 1, nowMs, answers, others.length === 0 || others.every((x) => x === condemnedBackup), r.t.orderConfirmMs);
    if (next.type === 'wait') return;
    if (next.type === 'dispute') {
      if (dispute(r, next.rsn, others, nowMs, out)) return;
      continue;
    }
    if (!next.confirmed) {
      out.push({ type: 'log', level: 'info', event: 'order.unconfirmed', fields: { rsn: state.rsn + 1, others } });
      // The other backup heartbeats but did not confirm: the primary may have withheld this
      // order from it. Show it the primary's frame, so it can go on (relayedOrder).
      if (answers) for (const x of others) sendEvidence(r, x, state.rsn + 1, nowMs, out);
    }
    state.rsn++;
    const proposal = b.confirm.proposals.get(state.rsn);
    if (proposal !== undefined) {
      r.executedDigests.set(state.rsn, proposal.digest);
      r.executedDigests.delete(state.rsn - MAX_ORDER_AHEAD);
    }
    executed(b.confirm, state.rsn);
    // The primary's frame stays a while after execution: the other backup may dispute an RSN
    // we executed unconfirmed and need it as evidence (PROTOCOL §5.8).
    b.orderFrames.delete(state.rsn - EXECUTED_FRAMES_KEPT);
    b.confirmClaims.delete(state.rsn);
    b.disputes.delete(state.rsn);
    execute(r, next.ordered, nowMs, out);
  }
}

/** spec §3.6 G8: a request this backup forwarded that the primary never ordered. */
export function progressTimeouts(r: Replica, nowMs: number, out: CoreEffect[]): void {
  for (const timer of r.backup.progressTimers.values()) {
    if (timer.atMs > nowMs) continue;
    // A primary we have no session with has not received the forward, so its progress cannot
    // be judged (PROTOCOL §5.6): daemons start one by one, and a backup up first must not
    // accuse a primary still booting. Past the start grace, one never met is judged all the same.
    if (!peerJudged(r.links, r.state.primary, nowMs, r.startedAtMs, r.t.startGraceMs)) {
      timer.atMs = nowMs + r.t.primaryProgressMs;
      continue;
    }
    // Kept (without a deadline) until delivered: forwarded again if the primary changes.
    timer.atMs = Infinity;
    const cg = timer.signed.cg;
    if (!deliveredCG(r, cg)) {
      suspect(r, out, r.state.primary, 'primary.progress', `${cg.payload.type} csn ${cg.csn} of ${cg.client} not ordered by ${r.state.primary}`);
    }
  }
}

/** The backup's next deadline: G8 timers, the next RSN's confirmation, and the disputes. */
export function backupNextWakeMs(r: Replica): number {
  const b = r.backup;
  let next = Infinity;
  for (const timer of b.progressTimers.values()) next = Math.min(next, timer.atMs);
  const waiting = r.phase === 'serving' && r.change.sync === null ? b.confirm.proposals.get(r.state.rsn + 1) : undefined;
  // A disputed RSN waits for self-diagnosis (PROTOCOL §10.2), whose evidence has a deadline.
  if (waiting !== undefined && !b.confirm.disputed.has(r.state.rsn + 1)) next = Math.min(next, waiting.atMs + r.t.orderConfirmMs);
  for (const d of b.disputes.values()) next = Math.min(next, d.deadlineMs);
  return next;
}
