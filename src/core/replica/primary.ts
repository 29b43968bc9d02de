// The primary's order (spec §3.6 G7; docs/PROTOCOL.md §5, §8.1, §8.3): every agent request, operator
// request and input of the group's own gets the next RSN, goes to the backups in a signed
// WRAPPER-MSG and is executed here at once. Agents' requests are taken in CSN order (later ones
// are held back until the missing one comes); operators' are taken once per nonce. The primary
// also runs the task clock, and judges a backup's confirmation another backup shows it.
import { accuse } from '../diagnosis.ts';
import { MAX_HOLDBACK_PER_AGENT, MAX_ORDER_AHEAD } from '../constants.ts';
import { bytesEqual } from '../../base/bytes.ts';
import { countDrop } from '../../base/result.ts';
import { linkSend } from '../link.ts';
import type { CoreEffect } from '../node.ts';
import type { Ordered } from '../order-confirm.ts';
import type { ProcessId } from '../ports.ts';
import { expectedCsn, isOperatorRequest } from '../replicated-state.ts';
import { pack } from '../wire/frame.ts';
import { orderClaim, type GroupInput, type PtpPayload, type SignedCG } from '../wire/messages.ts';
import { backups, clockNeeded, groupAck, isPrimary, orderDigest, type Replica } from './record.ts';
import { checkpoint, deliver, execute, reply } from './execution.ts';
import { actOnCondemnation } from './group-change.ts';

export type PrimaryOrder = {
  /** Agent requests that arrived ahead of a missing CSN, by agent and CSN. */
  readonly holdback: Map<ProcessId, Map<number, SignedCG>>;
  /** A condemnation of a backup already ordered in this view. */
  condemnOrdered: boolean;
  /** Replacements whose `replica.add` is ordered, as `id@view`: a spare id may start again in a
   *  later view, as a new incarnation (PROTOCOL §10.6). */
  readonly addOrdered: Set<string>;
  /** When the next task-clock tick is due (PROTOCOL §8.3), and whether the clock runs. */
  tickAtMs: number;
  ticking: boolean;
};

export const createPrimaryOrder = (): PrimaryOrder => ({ holdback: new Map(), condemnOrdered: false, addOrdered: new Set(), tickAtMs: 0, ticking: false });

/** Remember the digest of what was ordered at `rsn`, to judge a backup's confirmation another
 *  backup shows us (PROTOCOL §10.2 `order.lie`). */
function recordOrder(r: Replica, rsn: number, o: Ordered): void {
  r.executedDigests.set(rsn, orderDigest(r, o));
  r.executedDigests.delete(rsn - MAX_ORDER_AHEAD);
}

/** Order an input of the group's own (PROTOCOL §8.3, §8.4). */
export function orderInput(r: Replica, input: GroupInput, nowMs: number, out: CoreEffect[]): void {
  r.state.rsn++;
  recordOrder(r, r.state.rsn, { type: 'input', input });
  for (const b of backups(r)) linkSend(r.links, b, 0, { type: 'wrapper.input', rsn: r.state.rsn, input }, nowMs, out);
  execute(r, { type: 'input', input }, nowMs, out);
}

/** Order an operator request once (PROTOCOL §8.1); a retry from the operator itself is answered
 *  again (a backup's forward of it is not: the operator has its own copy). */
export function orderOperator(r: Replica, signed: SignedCG, direct: boolean, nowMs: number, out: CoreEffect[]): void {
  const payload = signed.cg.payload;
  if (!isOperatorRequest(payload)) return;
  const seen = r.state.outcomes.get(payload.nonce);
  if (seen !== undefined) {
    if (direct) reply(signed.cg.client, seen, out);
    return;
  }
  orderCG(r, signed, nowMs, out);
}

/** Give a request the next RSN, send it to the backups and execute it. */
function orderCG(r: Replica, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  r.state.rsn++;
  recordOrder(r, r.state.rsn, { type: 'cg', signed });
  for (const b of backups(r)) linkSend(r.links, b, 0, { type: 'wrapper', rsn: r.state.rsn, signed }, nowMs, out);
  deliver(r, signed, nowMs, out);
  checkpoint(r, nowMs, out);
}

/** Order the next request of `client` (spec §3.6 G7, with CSN hold-back), and the ones held
 *  back behind it. */
export function order(r: Replica, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  if (r.nonceClients.has(signed.cg.client)) return orderOperator(r, signed, false, nowMs, out);
  if (isOperatorRequest(signed.cg.payload)) {
    countDrop(r.drops, 'NOT_A_MEMBER'); // an agent may not submit or kill tasks (PROTOCOL §8.1)
    return;
  }
  const { client, inc, csn } = signed.cg;
  const expected = expectedCsn(state, client, inc);
  if (expected === null) return; // a dead incarnation's request, replayed or relayed late
  if (csn < expected) {
    groupAck(r, client, nowMs); // a retransmission: the agent missed our ack
    return;
  }
  const holdback = r.primary.holdback;
  if (csn > expected) {
    let held = holdback.get(client);
    if (held === undefined) holdback.set(client, (held = new Map()));
    for (const [k, h] of held) if (h.cg.inc < inc) held.delete(k);
    if (held.size < MAX_HOLDBACK_PER_AGENT && (held.get(csn)?.cg.inc ?? 0) <= inc) held.set(csn, signed);
    return;
  }
  let next: SignedCG | undefined = signed;
  while (next !== undefined) {
    orderCG(r, next, nowMs, out);
    const held = holdback.get(client);
    const following = (state.csnReceived.get(client) ?? 0) + 1;
    next = held?.get(following);
    held?.delete(following);
    if (next !== undefined && next.cg.inc !== state.clientInc.get(client)) next = undefined;
  }
}

/** PROTOCOL §10.2 `order.lie`, the primary's side: a backup in a dispute shows us the other
 *  backup's signed confirmation of `rsn`. If its digest is not of what we ordered there in this
 *  view, the other backup confirmed an order nobody gave it. */
export function onOrderClaim(r: Replica, from: ProcessId, c: Extract<PtpPayload, { type: 'order.claim' }>, nowMs: number, out: CoreEffect[]): void {
  const mine = r.executedDigests.get(c.rsn);
  if (mine === undefined || c.view !== r.state.group.view || c.claimant === from || !backups(r).includes(c.claimant)) return;
  if (!r.opts.verifier.verify(c.claimant, pack(orderClaim(c.claimant, c.view, c.rsn, c.digest)), c.sig)) {
    countDrop(r.drops, 'SIG_INVALID');
    return;
  }
  if (bytesEqual(c.digest, mine)) return;
  accuse(r.diagnosis, c.claimant, 'order.lie', `${c.claimant} confirmed rsn ${c.rsn} with a digest of no order of ours (${from} showed its signed claim)`, nowMs, out);
  actOnCondemnation(r, nowMs, out);
}

/** PROTOCOL §8.3: the task clock advances only while a task timer runs, or while the group
 *  waits for a replacement replica (its start timeout counts ticks, PROTOCOL §10.6; A24). */
export function tickClock(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const p = r.primary;
  if (!isPrimary(r) || !clockNeeded(r)) {
    p.ticking = false;
  } else if (!p.ticking) {
    // A timer just started: its first tick is one period away, not now.
    p.ticking = true;
    p.tickAtMs = nowMs + r.t.taskTickMs;
  } else if (p.tickAtMs <= nowMs) {
    orderInput(r, { type: 'tick' }, nowMs, out);
    p.tickAtMs = nowMs + r.t.taskTickMs;
  }
}

/** The clock's next deadline, if it runs here (0: it starts at the next step). */
export function tickNextWakeMs(r: Replica): number | null {
  if (!isPrimary(r) || !clockNeeded(r)) return null;
  return r.primary.ticking ? r.primary.tickAtMs : 0;
}
