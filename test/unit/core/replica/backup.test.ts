// Unit tests of the backups' side of the order (src/core/replica/backup.ts; spec §3.6 G7–G8,
// docs/PROTOCOL.md §5.5, §5.6, §5.8, §10.2). Backup r2's record with sessions open to the primary
// r1 and the other backup r3; the primary's wrappers and r3's confirmations and evidence are
// handed to its verbs by hand at exact times, and each row asserts what r2 sends, suspects,
// logs and executes.
import { describe, expect, it } from 'vitest';
import type { CoreEffect } from '../../../../src/core/node.ts';
import {
  backupNextWakeMs, disputeTimers, executeInOrder, forwardToPrimary, keepOrderFrame, onConfirmation, onEvidence, onOrderedInput,
  onOrderedRequest, progressTimeouts,
} from '../../../../src/core/replica/backup.ts';
import { detectorTimers } from '../../../../src/core/replica/failure-detector.ts';
import type { Replica } from '../../../../src/core/replica/record.ts';
import { status } from '../../../../src/core/replica/report.ts';
import { encodeFrame } from '../../../../src/core/wire/frame.ts';
import type { SignedCG } from '../../../../src/core/wire/messages.ts';
import { hmacSigner } from '../harness.ts';
import { cg, confirmation, delivered, hash, heartbeat, items, logs, ptps, started, suspicions, T } from './fixtures.ts';

/** Backup r2 with sessions to r1 and r3; `heard`: r3's heartbeat came at 0, so r3 answers. */
function backup(heard = true, peers = ['r1', 'r3']): Replica {
  const r = started('r2', peers);
  if (heard) heartbeat(r, 'r3', 1, 0);
  return r;
}
/** Run one verb at `nowMs`, returning its effects. */
function at(nowMs: number, verb: (nowMs: number, out: CoreEffect[]) => void): CoreEffect[] {
  const out: CoreEffect[] = [];
  verb(nowMs, out);
  return out;
}
const propose = (r: Replica, rsn: number, signed: SignedCG, nowMs: number) => at(nowMs, (t, out) => onOrderedRequest(r, rsn, signed, t, out));
const confirm = (r: Replica, rsn: number, digest: Uint8Array, nowMs: number, sig?: Uint8Array) =>
  at(nowMs, (t, out) => onConfirmation(r, 'r3', confirmation(r, 'r3', rsn, digest, sig), t, out));
/** The frame the primary signed giving `to` the request `signed` at `rsn` (PROTOCOL §10.2). */
const primaryFrame = (to: string, rsn: number, signed: SignedCG) =>
  encodeFrame({ from: 'r1', to, items: [{ type: 'ptp', srcInc: 1, destInc: 1, seq: rsn, ackSeq: 0, body: { type: 'wrapper', rsn, signed } }] }, { cluster: 'c1', signer: hmacSigner('r1') });
/** r2 keeps the primary's frame that carried RSN `rsn`, as the replica does for every frame. */
function keepFrame(r: Replica, rsn: number, signed: SignedCG): Uint8Array {
  const raw = primaryFrame('r2', rsn, signed);
  keepOrderFrame(r, 'r1', { type: 'ptp', srcInc: 1, destInc: 1, seq: rsn, ackSeq: 0, body: { type: 'wrapper', rsn, signed } }, raw);
  return raw;
}
const first = cg('a1', 1);
const other = cg('a1', 1, { type: 'echo', tag: 'swapped', fanout: 'self', count: 1, data: new Uint8Array([2]) });

describe('the primary\'s RSN sequence (spec §3.6 G7, PROTOCOL §5.5)', () => {
  it('G7 (A19): a wrapper that skips an RSN is dropped and suspected as rsn.gap, accusing the primary; the next RSN is still taken', () => {
    const r = backup();
    const out = propose(r, 2, first, 10);
    expect(suspicions(out)).toEqual([['r1', 'rsn.gap', 'wrapper rsn 2, expected 1']]);
    expect(logs(out, 'replica.accuse').map((f) => [f.target, f.reason])).toEqual([['r1', 'rsn.gap']]);
    expect(ptps(out).map((p) => [p.to, p.body.type])).toEqual([['r1', 'accuse'], ['r3', 'accuse']]);
    expect(ptps(propose(r, 1, first, 20))).toEqual([{ to: 'r3', body: confirmation(r, 'r2', 1, hash(first.bytes)) }]);
  });

  it('§8.3, §8.4: an input of the group\'s own from anyone but the primary is dropped NOT_A_MEMBER', () => {
    const r = backup();
    expect(at(10, (t, out) => onOrderedInput(r, 'r3', 1, { type: 'tick' }, t, out))).toEqual([]);
    expect(status(r, 10).drops).toEqual({ NOT_A_MEMBER: 1 });
    expect(ptps(at(20, (t, out) => onOrderedInput(r, 'r1', 1, { type: 'tick' }, t, out))).map((p) => [p.to, p.body.type])).toEqual([['r3', 'order']]);
  });
});

describe('backups confirm the order before executing it (PROTOCOL §5.8)', () => {
  it('§5.8: the proposal\'s signed digest goes to the other backup; it executes when that backup\'s matching confirmation comes', () => {
    const r = backup();
    const proposed = propose(r, 1, first, 10);
    expect(ptps(proposed)).toEqual([{ to: 'r3', body: confirmation(r, 'r2', 1, hash(first.bytes)) }]);
    expect(delivered(proposed)).toEqual([]);
    expect(backupNextWakeMs(r)).toBe(10 + T.orderConfirmMs);
    expect(delivered(confirm(r, 1, hash(first.bytes), 20))).toEqual([[1, 'a1', 1]]);
    expect(r.state.rsn).toBe(1);
    expect(backupNextWakeMs(r)).toBe(Infinity);
  });

  it('§5.8: a confirmation that came before the proposal lets it execute at once', () => {
    const r = backup();
    expect(confirm(r, 1, hash(first.bytes), 5)).toEqual([]);
    expect(delivered(propose(r, 1, first, 10))).toEqual([[1, 'a1', 1]]);
  });

  it('§5.8: unconfirmed by a backup that still heartbeats, the order executes orderConfirmMs after the proposal (order.unconfirmed), and the other gets the primary\'s frame', () => {
    const r = backup();
    const raw = keepFrame(r, 1, first);
    propose(r, 1, first, 10);
    expect(at(10 + T.orderConfirmMs - 1, (t, out) => executeInOrder(r, t, out))).toEqual([]);
    const out = at(10 + T.orderConfirmMs, (t, o) => executeInOrder(r, t, o));
    expect(logs(out, 'order.unconfirmed')).toEqual([{ rsn: 1, others: ['r3'] }]);
    expect(ptps(out)).toEqual([{ to: 'r3', body: { type: 'order.evidence', rsn: 1, frame: raw } }]);
    expect(delivered(out)).toEqual([[1, 'a1', 1]]);
  });

  it('§5.8: a backup silent for two heartbeat checks is not waited for; one late by one check still is', () => {
    const r = backup();
    detectorTimers(r, T.replicaCheckMs, []);
    detectorTimers(r, 2 * T.replicaCheckMs, []); // r3 late
    expect(delivered(propose(r, 1, first, 310))).toEqual([]);
    detectorTimers(r, 3 * T.replicaCheckMs, []); // r3 silent
    const out = at(3 * T.replicaCheckMs, (t, o) => executeInOrder(r, t, o));
    expect(logs(out, 'order.unconfirmed')).toEqual([{ rsn: 1, others: ['r3'] }]);
    expect(delivered(out)).toEqual([[1, 'a1', 1]]);
  });

  it('§5.8: a backup never heard counts as answering for two checks after the start, then as silent', () => {
    expect(delivered(propose(backup(false), 1, first, 2 * T.replicaCheckMs - 1))).toEqual([]);
    expect(delivered(propose(backup(false), 1, first, 2 * T.replicaCheckMs))).toEqual([[1, 'a1', 1]]);
  });
});

describe('a dispute over the primary\'s order (PROTOCOL §5.8, §10.2)', () => {
  const theirs = hash(other.bytes);
  /** r2 proposed `first` at 10 (the primary's frame kept) and r3 confirmed `other` at 20. */
  function disputed(): { r: Replica; raw: Uint8Array; out: CoreEffect[] } {
    const r = backup();
    const raw = keepFrame(r, 1, first);
    propose(r, 1, first, 10);
    return { r, raw, out: confirm(r, 1, theirs, 20) };
  }

  it('§5.8: a differing signed confirmation: digest.mismatch against the primary, our frame to the other backup, its claim to the primary, and the RSN waits', () => {
    const { r, raw, out } = disputed();
    expect(suspicions(out)).toEqual([['r1', 'digest.mismatch', 'r3 was given another request at rsn 1']]);
    expect(items(out, 'diag.report').map((d) => [d.item.reason, d.item.target])).toEqual([['equivocation', 'r1']]);
    const { view, sig } = confirmation(r, 'r3', 1, theirs);
    expect(ptps(out)).toEqual([
      { to: 'r3', body: { type: 'order.evidence', rsn: 1, frame: raw } },
      { to: 'r1', body: { type: 'order.claim', claimant: 'r3', view, rsn: 1, digest: theirs, sig } },
    ]);
    expect(delivered(out)).toEqual([]);
    expect(backupNextWakeMs(r)).toBe(20 + T.orderConfirmMs); // the dispute's deadline
    expect(delivered(at(5000, (t, o) => executeInOrder(r, t, o)))).toEqual([]);
  });

  it('§5.8: a differing confirmation its sender did not sign is forgotten (SIG_INVALID); a signed matching one then executes', () => {
    const r = backup();
    propose(r, 1, first, 10);
    expect(confirm(r, 1, theirs, 20, new Uint8Array(64))).toEqual([]);
    expect(status(r, 20).drops).toEqual({ SIG_INVALID: 1 });
    expect(r.suspicions).toBe(0);
    expect(delivered(confirm(r, 1, hash(first.bytes), 30))).toEqual([[1, 'a1', 1]]);
  });

  it('§10.2 order.lie: no evidence of an equivocation within orderConfirmMs: the other backup is accused', () => {
    const { r } = disputed();
    expect(at(20 + T.orderConfirmMs - 1, (t, out) => disputeTimers(r, t, out))).toEqual([]);
    const out = at(20 + T.orderConfirmMs, (t, o) => disputeTimers(r, t, o));
    const detail = 'r3 confirmed rsn 1 with another digest than the primary\'s order and showed no frame of the primary\'s for it within 1000 ms';
    expect(logs(out, 'replica.accuse')).toEqual([{ target: 'r3', reason: 'order.lie', detail, view: r.state.group.view }]);
    expect(ptps(out).map((p) => [p.to, p.body.type === 'accuse' && p.body.signed.accusation])).toEqual([
      ['r1', { from: 'r2', view: r.state.group.view, target: 'r3', reason: 'order.lie' }],
      ['r3', { from: 'r2', view: r.state.group.view, target: 'r3', reason: 'order.lie' }],
    ]);
    expect(at(5000, (t, o) => disputeTimers(r, t, o))).toEqual([]);
  });

  it('§10.2 equivocation: the other backup shows the primary\'s signed frame with the other order: the primary is accused, and the dispute ends', () => {
    const { r } = disputed();
    const out = at(30, (t, o) => onEvidence(r, 'r3', 1, primaryFrame('r3', 1, other), t, o));
    expect(logs(out, 'replica.accuse').map((f) => [f.target, f.reason, f.detail])).toEqual([['r1', 'equivocation', 'the primary signed two orders for rsn 1 (r3 holds the other)']]);
    expect(at(5000, (t, o) => disputeTimers(r, t, o))).toEqual([]);
  });

  it('§10.2: a frame that proves nothing (the order we hold, or not the primary\'s) accuses nobody', () => {
    const { r } = disputed();
    expect(at(30, (t, o) => onEvidence(r, 'r3', 1, primaryFrame('r3', 1, first), t, o))).toEqual([]);
    const forged = encodeFrame({ from: 'r3', to: 'r3', items: [{ type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: 1, signed: other } }] }, { cluster: 'c1', signer: hmacSigner('r3') });
    expect(at(40, (t, o) => onEvidence(r, 'r3', 1, forged, t, o))).toEqual([]);
  });

  it('§5.8: a differing confirmation of an RSN already executed still exposes the primary: digest.mismatch, and our frame to the other backup', () => {
    const r = backup(false);
    const raw = keepFrame(r, 1, first);
    propose(r, 1, first, 2 * T.replicaCheckMs); // r3 never heard: executed unconfirmed
    const out = confirm(r, 1, theirs, 400);
    expect(suspicions(out)).toEqual([['r1', 'digest.mismatch', 'r3 was given another request at executed rsn 1']]);
    expect(ptps(out)).toEqual([{ to: 'r3', body: { type: 'order.evidence', rsn: 1, frame: raw } }]);
  });

  it('§5.8: the other backup\'s frame for the next RSN we lack is taken as the primary\'s order (order.relayed)', () => {
    const r = backup();
    const out = at(10, (t, o) => onEvidence(r, 'r3', 1, primaryFrame('r3', 1, first), t, o));
    expect(logs(out, 'order.relayed')).toEqual([{ rsn: 1, from: 'r3' }]);
    expect(ptps(out)).toEqual([{ to: 'r3', body: confirmation(r, 'r2', 1, hash(first.bytes)) }]);
  });
});

describe('PrimaryProgressTimeout (spec §3.6 G8, PROTOCOL §5.6)', () => {
  const progress = (r: Replica, nowMs: number) => at(nowMs, (t, o) => progressTimeouts(r, t, o));
  const forward = (r: Replica, signed: SignedCG, nowMs: number) => at(nowMs, (t, o) => forwardToPrimary(r, signed, t, o));

  it('§5.6 (A18): a forwarded request goes to the primary as wrapper rsn 0; not ordered within primaryProgressMs, the primary is suspected, once', () => {
    const r = backup();
    expect(ptps(forward(r, first, 100))).toEqual([{ to: 'r1', body: { type: 'wrapper', rsn: 0, signed: first } }]);
    expect(backupNextWakeMs(r)).toBe(100 + T.primaryProgressMs);
    expect(progress(r, 100 + T.primaryProgressMs - 1)).toEqual([]);
    const out = progress(r, 100 + T.primaryProgressMs);
    expect(suspicions(out)).toEqual([['r1', 'primary.progress', 'echo csn 1 of a1 not ordered by r1']]);
    expect(logs(out, 'replica.accuse').map((f) => [f.target, f.reason])).toEqual([['r1', 'primary.progress']]);
    expect(backupNextWakeMs(r)).toBe(Infinity);
    expect(progress(r, 5000)).toEqual([]);
  });

  it('§5.6: a primary never met is not judged before the start grace: the timeout starts again, and fires at the first expiry past startGraceMs', () => {
    const r = backup(true, ['r3']);
    expect(ptps(forward(r, first, 100))).toEqual([]); // queued until the session opens
    const fired: number[] = [];
    for (let w = backupNextWakeMs(r); w !== Infinity; w = backupNextWakeMs(r)) if (suspicions(progress(r, w)).length > 0) fired.push(w);
    expect(fired).toEqual([100 + Math.ceil((T.startGraceMs - 100) / T.primaryProgressMs) * T.primaryProgressMs]);
  });

  it('G8: the primary\'s order of the request ends its timeout, even before it is confirmed and executed', () => {
    const r = backup();
    forward(r, first, 0);
    propose(r, 1, first, 100);
    expect(progress(r, T.primaryProgressMs)).toEqual([]);
    expect(backupNextWakeMs(r)).toBe(100 + T.orderConfirmMs);
  });

  it('§5.6: a request the primary already proposed, awaiting confirmation, is neither forwarded again nor timed', () => {
    const r = backup();
    propose(r, 1, first, 10);
    expect(forward(r, first, 200)).toEqual([]);
    expect(backupNextWakeMs(r)).toBe(10 + T.orderConfirmMs);
    expect(progress(r, 200 + T.primaryProgressMs)).toEqual([]);
  });
});
