// Backups confirm the primary's order to each other (PROTOCOL §5.8, §10.2 order.lie): what
// src/core/order-confirm.ts decides for the next RSN, row by row.
import { describe, expect, it } from 'vitest';
import { createOrderConfirm, executed, nextStep, type Ordered, type OrderConfirm } from '../../../src/core/order-confirm.ts';

const CONFIRM_MS = 1000;
const tick: Ordered = { type: 'input', input: { type: 'tick' } };
const digest = (b: number, length = 32): Uint8Array => new Uint8Array(length).fill(b);

function proposed(rsn: number, atMs: number, d = digest(1)): OrderConfirm {
  const oc = createOrderConfirm();
  oc.proposedRsn = rsn;
  oc.proposals.set(rsn, { ordered: tick, digest: d, atMs });
  return oc;
}

describe('order confirmation between the backups (PROTOCOL §5.8)', () => {
  it('nothing proposed at the RSN: wait, with no deadline', () => {
    expect(nextStep(createOrderConfirm(), 1, 0, true, false, CONFIRM_MS)).toEqual({ type: 'wait', untilMs: null });
    expect(nextStep(createOrderConfirm(), 1, 0, false, true, CONFIRM_MS)).toEqual({ type: 'wait', untilMs: null });
  });

  it('the other backup\'s matching digest: execute, confirmed', () => {
    const oc = proposed(5, 100);
    oc.confirmations.set(5, digest(1));
    expect(nextStep(oc, 5, 101, true, false, CONFIRM_MS)).toEqual({ type: 'execute', ordered: tick, confirmed: true });
  });

  it('a different digest, or one of another length: a dispute, once; then the RSN waits with no deadline while the other backup answers', () => {
    for (const theirs of [digest(2), digest(1, 31)]) {
      const oc = proposed(5, 100);
      oc.confirmations.set(5, theirs);
      expect(nextStep(oc, 5, 101, true, false, CONFIRM_MS)).toEqual({ type: 'dispute', rsn: 5 });
      expect([...oc.disputed]).toEqual([5]);
      expect(nextStep(oc, 5, 100 + 10 * CONFIRM_MS, true, false, CONFIRM_MS)).toEqual({ type: 'wait', untilMs: null });
    }
  });

  it('no answer yet from a backup that heartbeats: wait until orderConfirmMs after the proposal, then execute unconfirmed', () => {
    const oc = proposed(5, 100);
    expect(nextStep(oc, 5, 100, true, false, CONFIRM_MS)).toEqual({ type: 'wait', untilMs: 100 + CONFIRM_MS });
    expect(nextStep(oc, 5, 100 + CONFIRM_MS - 1, true, false, CONFIRM_MS)).toEqual({ type: 'wait', untilMs: 100 + CONFIRM_MS });
    expect(nextStep(oc, 5, 100 + CONFIRM_MS, true, false, CONFIRM_MS)).toEqual({ type: 'execute', ordered: tick, confirmed: false });
  });

  it('a silent backup (two heartbeat checks unheard) is not waited for, but its disputing digest still holds the RSN: a dispute is settled by evidence', () => {
    const silent = proposed(5, 100);
    expect(nextStep(silent, 5, 100, false, false, CONFIRM_MS)).toEqual({ type: 'execute', ordered: tick, confirmed: false });
    const disputing = proposed(5, 100);
    disputing.confirmations.set(5, digest(2));
    expect(nextStep(disputing, 5, 101, false, false, CONFIRM_MS)).toEqual({ type: 'dispute', rsn: 5 });
    expect(nextStep(disputing, 5, 100 + 10 * CONFIRM_MS, false, false, CONFIRM_MS)).toEqual({ type: 'wait', untilMs: null });
  });

  it('a backup we condemned holds nothing back: execute at once, unconfirmed, even a disputed RSN and against its digest (§10.2 order.lie)', () => {
    const liar = proposed(5, 100);
    liar.confirmations.set(5, digest(2));
    expect(nextStep(liar, 5, 101, true, false, CONFIRM_MS)).toEqual({ type: 'dispute', rsn: 5 });
    expect(nextStep(liar, 5, 102, false, true, CONFIRM_MS)).toEqual({ type: 'execute', ordered: tick, confirmed: false });
    const next = proposed(6, 100);
    next.confirmations.set(6, digest(3));
    expect(nextStep(next, 6, 101, false, true, CONFIRM_MS)).toEqual({ type: 'execute', ordered: tick, confirmed: false });
    expect(next.disputed.size).toBe(0);
  });

  it('executed forgets the RSN\'s proposal and confirmation, and nothing else', () => {
    const oc = proposed(5, 100);
    oc.proposals.set(6, { ordered: tick, digest: digest(4), atMs: 101 });
    oc.confirmations.set(5, digest(1));
    oc.confirmations.set(6, digest(4));
    executed(oc, 5);
    expect([...oc.proposals.keys()]).toEqual([6]);
    expect([...oc.confirmations.keys()]).toEqual([6]);
  });
});
