// Backups confirm the primary's order to each other before executing it (docs/PROTOCOL.md §5.8).
// A Byzantine primary could otherwise give each backup a different order that passes both of
// their own checks (RSNs in sequence, each agent's CSNs in order): the two correct backups would
// then reach different states and sign conflicting group messages for the same GSSN, which
// DESIGN.md §2 forbids. Each backup tells the other the digest of the request it was given at
// each RSN, and executes an RSN only when the other's digest matches, or when the other backup
// cannot answer (not heartbeat-healthy, or silent for `orderConfirmMs`): a lying primary together
// with a silent backup is two faults, outside the model. Pure: no clock, no I/O.
import { bytesEqual } from '../base/bytes.ts';
import type { GroupInput, SignedCG } from './wire/messages.ts';

/** What the primary orders at an RSN: a client's signed request, or an input of the group's own
 *  (a task-clock tick, a node declared failed; PROTOCOL §8.3, §8.4). */
export type Ordered = { type: 'cg'; signed: SignedCG } | { type: 'input'; input: GroupInput };

export type OrderConfirm = {
  /** Last RSN accepted from the primary (ahead of or equal to the executed RSN). */
  proposedRsn: number;
  proposals: Map<number, { ordered: Ordered; digest: Uint8Array; atMs: number }>;
  /** The other backup's digest per RSN, possibly ahead of our own proposals. */
  confirmations: Map<number, Uint8Array>;
  /** RSNs whose digests disagreed: never executed (self-diagnosis resolves them, issue 5). */
  disputed: Set<number>;
};

export const createOrderConfirm = (): OrderConfirm => ({ proposedRsn: 0, proposals: new Map(), confirmations: new Map(), disputed: new Set() });

export type NextStep =
  | { type: 'execute'; ordered: Ordered; confirmed: boolean }
  | { type: 'wait'; untilMs: number | null }
  | { type: 'dispute'; rsn: number };

/** What to do about RSN `rsn` (the next to execute). `otherAnswers`: the other backup is
 *  heartbeat-healthy, so its confirmation is worth waiting for; `otherCondemned`: we hold two
 *  accusations against it (or there is none), so its word counts for nothing. */
export function nextStep(oc: OrderConfirm, rsn: number, nowMs: number, otherAnswers: boolean, otherCondemned: boolean, confirmMs: number): NextStep {
  const p = oc.proposals.get(rsn);
  if (p === undefined) return { type: 'wait', untilMs: null };
  // A backup we have condemned confirms nothing, and its digest, even one that disputed this
  // RSN, no longer holds it back (PROTOCOL §5.8, §10.2 `order.lie`). One merely silent still
  // does: a dispute is settled by evidence, not by a heartbeat lost.
  if (otherCondemned) return { type: 'execute', ordered: p.ordered, confirmed: false };
  if (oc.disputed.has(rsn)) return { type: 'wait', untilMs: null };
  const c = oc.confirmations.get(rsn);
  if (c !== undefined) {
    if (!bytesEqual(c, p.digest)) {
      oc.disputed.add(rsn);
      return { type: 'dispute', rsn };
    }
    return { type: 'execute', ordered: p.ordered, confirmed: true };
  }
  if (!otherAnswers || nowMs >= p.atMs + confirmMs) return { type: 'execute', ordered: p.ordered, confirmed: false };
  return { type: 'wait', untilMs: p.atMs + confirmMs };
}

/** Forget what was executed (and confirmations that can no longer matter). */
export function executed(oc: OrderConfirm, rsn: number): void {
  oc.proposals.delete(rsn);
  oc.confirmations.delete(rsn);
}
