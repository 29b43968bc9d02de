// Unit tests of the primary's order (src/core/replica/primary.ts; spec §3.6 G7, docs/PROTOCOL.md
// §5.5, §8.1, §8.3, §10.2). Primary r1's record with sessions open to both backups and the agent
// a1; its verbs called by hand, each row asserting what the backups, the agent or the operator
// receive.
import { describe, expect, it } from 'vitest';
import { ACK_DELAY_MS, MAX_HOLDBACK_PER_AGENT } from '../../../../src/core/constants.ts';
import { flushAcks } from '../../../../src/core/link.ts';
import type { CoreEffect } from '../../../../src/core/node.ts';
import { onOrderClaim, order, orderOperator, tickClock, tickNextWakeMs } from '../../../../src/core/replica/primary.ts';
import { csnMark, type Replica } from '../../../../src/core/replica/record.ts';
import { status } from '../../../../src/core/replica/report.ts';
import { pack } from '../../../../src/core/wire/frame.ts';
import { orderClaim, type OperatorRequest, type PtpPayload, type SignedCG } from '../../../../src/core/wire/messages.ts';
import { hmacSigner } from '../harness.ts';
import { cg, delivered, echo, hash, items, join, kill, logs, opRequest, ptps, started, T } from './fixtures.ts';

const primary = (): Replica => started('r1', ['r2', 'r3', 'a1']);
function ordered(r: Replica, signed: SignedCG, nowMs = 0): CoreEffect[] {
  const out: CoreEffect[] = [];
  order(r, signed, nowMs, out);
  return out;
}
/** The WRAPPER-MSG each backup receives for `signed` at `rsn` (spec §3.6 G7). */
const wrappers = (rsn: number, signed: SignedCG) => ['r2', 'r3'].map((to) => ({ to, body: { type: 'wrapper', rsn, signed } }));
/** The agent's group ack, as the link sends it ACK_DELAY_MS after the step (PROTOCOL §5.5). */
function gacks(r: Replica, nowMs: number): [string, number][] {
  const out: CoreEffect[] = [];
  flushAcks(r.links, out, (peer) => csnMark(r, peer), nowMs + ACK_DELAY_MS);
  return items(out, 'gack').map((g) => [g.to, g.item.ack]);
}

describe('the primary orders agents\' requests (spec §3.6 G7, PROTOCOL §5.5)', () => {
  it('G7: each request gets the next RSN, goes to each backup in a WRAPPER-MSG and is delivered here at once', () => {
    const r = primary();
    const first = cg('a1', 1, join);
    const second = cg('a1', 2);
    const out1 = ordered(r, first);
    expect(ptps(out1)).toEqual(wrappers(1, first));
    expect(delivered(out1)).toEqual([[1, 'a1', 1]]);
    const out2 = ordered(r, second);
    expect(ptps(out2)).toEqual(wrappers(2, second));
    expect(delivered(out2)).toEqual([[2, 'a1', 2]]);
    expect(r.state.rsn).toBe(2);
    expect(gacks(r, 0)).toEqual([['a1', 2]]);
  });

  it('§5.5: a later CSN is held back and ordered, in CSN order, when the missing one comes', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join));
    const third = cg('a1', 3);
    const fourth = cg('a1', 4);
    expect(ordered(r, fourth)).toEqual([]);
    expect(ordered(r, third)).toEqual([]);
    expect(r.state.rsn).toBe(1);
    const second = cg('a1', 2);
    const out = ordered(r, second);
    expect(delivered(out)).toEqual([[2, 'a1', 2], [3, 'a1', 3], [4, 'a1', 4]]);
    expect(ptps(out).filter((p) => p.to === 'r2')).toEqual([wrappers(2, second)[0], wrappers(3, third)[0], wrappers(4, fourth)[0]]);
  });

  it('§5.5: at most MAX_HOLDBACK_PER_AGENT (512) requests are held per agent; the one beyond is never ordered', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join));
    for (let csn = 3; csn <= 3 + MAX_HOLDBACK_PER_AGENT; csn++) ordered(r, cg('a1', csn));
    const out = ordered(r, cg('a1', 2));
    const csns = delivered(out).map(([, , csn]) => csn);
    expect(csns.length).toBe(1 + MAX_HOLDBACK_PER_AGENT);
    expect(csns.at(-1)).toBe(2 + MAX_HOLDBACK_PER_AGENT);
    expect(r.state.csnReceived.get('a1')).toBe(2 + MAX_HOLDBACK_PER_AGENT);
  });

  it('§5.5: a retransmission (csn ≤ csn_received) is acknowledged again, not ordered', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join));
    ordered(r, cg('a1', 2));
    gacks(r, 0);
    expect(ordered(r, cg('a1', 1, join), 100)).toEqual([]);
    expect(r.state.rsn).toBe(2);
    expect(gacks(r, 100)).toEqual([['a1', 2]]);
  });

  it('§5.7: a request of an older incarnation is dropped without an ack; a newer incarnation starts again at CSN 1', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join, 2));
    gacks(r, 0);
    expect(ordered(r, cg('a1', 2, echo('old'), 1), 10)).toEqual([]);
    expect(gacks(r, 10)).toEqual([]);
    expect(delivered(ordered(r, cg('a1', 1, join, 3), 20))).toEqual([[2, 'a1', 1]]);
  });

  it('§8.1: an agent\'s operator-type request is dropped NOT_A_MEMBER before ordering', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join));
    expect(ordered(r, cg('a1', 2, kill('n1')))).toEqual([]);
    expect(r.state.rsn).toBe(1);
    expect(status(r, 0).drops).toEqual({ NOT_A_MEMBER: 1 });
  });
});

describe('the primary orders operators\' requests once per nonce (PROTOCOL §8.1)', () => {
  it('§8.1: ordered once; the operator\'s own retry is answered with the same outcome; a backup\'s forward of it changes nothing', () => {
    const r = primary();
    const signed = opRequest(kill('k1'));
    const out: CoreEffect[] = [];
    orderOperator(r, signed, true, 0, out);
    expect(ptps(out)).toEqual(wrappers(1, signed));
    const answer = items(out, 'op.reply').map((x) => [x.to, x.item]);
    expect(answer).toEqual([['op', { type: 'op.reply', nonce: 'k1', rsn: 1, ok: false, text: 'no task t9' }]]);
    const retry: CoreEffect[] = [];
    orderOperator(r, signed, true, 200, retry);
    expect(retry).toEqual([{ type: 'send', to: 'op', item: answer[0]?.[1] }]);
    const forward = ordered(r, signed, 300); // a backup's wrapper {rsn: 0}
    expect(forward).toEqual([]);
    expect(r.state.rsn).toBe(1);
  });

  it('§8.1: requests with different nonces are ordered one after the other', () => {
    const r = primary();
    const out: CoreEffect[] = [];
    orderOperator(r, opRequest(kill('k1')), true, 0, out);
    orderOperator(r, opRequest(kill('k2')), false, 0, out);
    expect(items(out, 'op.reply').map((x) => [x.item.nonce, x.item.rsn])).toEqual([['k1', 1], ['k2', 2]]);
  });
});

describe('a backup\'s claim in a dispute (PROTOCOL §5.8, §10.2 order.lie)', () => {
  /** r2 shows the primary r3's signed `order` confirmation of `digest` at RSN 1. */
  function claim(r: Replica, digest: Uint8Array, sig?: Uint8Array, claimant = 'r3', from = 'r2'): CoreEffect[] {
    const view = r.state.group.view;
    const c: Extract<PtpPayload, { type: 'order.claim' }> = {
      type: 'order.claim', claimant, view, rsn: 1, digest, sig: sig ?? hmacSigner(claimant).sign(pack(orderClaim(claimant, view, 1, digest))),
    };
    const out: CoreEffect[] = [];
    onOrderClaim(r, from, c, 100, out);
    return out;
  }
  function orderedOne(): { r: Replica; digest: Uint8Array } {
    const r = primary();
    const signed = cg('a1', 1, join);
    ordered(r, signed);
    return { r, digest: hash(signed.bytes) };
  }

  it('§10.2: a claim whose digest is of what the primary ordered at that RSN accuses nobody', () => {
    const { r, digest } = orderedOne();
    expect(claim(r, digest)).toEqual([]);
  });

  it('§10.2 order.lie: a signed claim with another digest accuses the claimant, signed, to every other member', () => {
    const { r } = orderedOne();
    const out = claim(r, new Uint8Array(32).fill(7));
    const detail = 'r3 confirmed rsn 1 with a digest of no order of ours (r2 showed its signed claim)';
    expect(logs(out, 'replica.accuse')).toEqual([{ target: 'r3', reason: 'order.lie', detail, view: r.state.group.view }]);
    expect(ptps(out).map((p) => [p.to, p.body.type === 'accuse' && p.body.signed.accusation])).toEqual([
      ['r2', { from: 'r1', view: r.state.group.view, target: 'r3', reason: 'order.lie' }],
      ['r3', { from: 'r1', view: r.state.group.view, target: 'r3', reason: 'order.lie' }],
    ]);
    expect(items(out, 'diag.report').map((d) => [d.item.reason, d.item.target])).toEqual([['order.lie', 'r3']]);
  });

  it('§5.8: a claim its claimant did not sign is dropped SIG_INVALID and accuses nobody', () => {
    const { r } = orderedOne();
    expect(claim(r, new Uint8Array(32).fill(7), new Uint8Array(64))).toEqual([]);
    expect(status(r, 100).drops).toEqual({ SIG_INVALID: 1 });
  });

  it('§10.2: a claim about the sender itself, about a non-backup, or about an RSN not ordered is not judged', () => {
    const { r } = orderedOne();
    const other = new Uint8Array(32).fill(7);
    expect(claim(r, other, undefined, 'r2', 'r2')).toEqual([]);
    expect(claim(r, other, undefined, 'r1', 'r2')).toEqual([]);
    const fresh = primary();
    expect(claim(fresh, other)).toEqual([]);
    expect(status(r, 100).drops).toEqual({});
  });
});

describe('the task clock (PROTOCOL §8.3)', () => {
  const submit: OperatorRequest = {
    type: 'task.submit', nonce: 's1', name: 'job', size: 1, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(1),
  };
  const tick = { type: 'wrapper.input', input: { type: 'tick' } };
  function clockAt(r: Replica, nowMs: number): CoreEffect[] {
    const out: CoreEffect[] = [];
    tickClock(r, nowMs, out);
    return out;
  }

  it('§8.3: no tick while no timer runs; the first one period after a timer starts, then every taskTickMs', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join));
    expect(clockAt(r, 0)).toEqual([]);
    expect(tickNextWakeMs(r)).toBe(null);
    orderOperator(r, opRequest(submit), true, 10, []); // its start timer runs (Start-TO)
    expect(r.state.rsn).toBe(2);
    expect(tickNextWakeMs(r)).toBe(0); // the clock starts at the next step
    expect(clockAt(r, 20)).toEqual([]);
    expect(tickNextWakeMs(r)).toBe(20 + T.taskTickMs);
    expect(clockAt(r, 20 + T.taskTickMs - 1)).toEqual([]);
    const first = clockAt(r, 20 + T.taskTickMs);
    expect(ptps(first)).toEqual(['r2', 'r3'].map((to) => ({ to, body: { ...tick, rsn: 3 } })));
    expect(first.filter((e) => e.type === 'deliver.input')).toEqual([{ type: 'deliver.input', rsn: 3, input: { type: 'tick' } }]);
    expect(tickNextWakeMs(r)).toBe(20 + 2 * T.taskTickMs);
    expect(ptps(clockAt(r, 20 + 2 * T.taskTickMs + 5))).toEqual(['r2', 'r3'].map((to) => ({ to, body: { ...tick, rsn: 4 } })));
    expect(tickNextWakeMs(r)).toBe(25 + 3 * T.taskTickMs);
  });

  it('§8.3: the clock stops when no timer runs any more, and a timer that starts later gets its first tick one period on', () => {
    const r = primary();
    ordered(r, cg('a1', 1, join));
    orderOperator(r, opRequest(submit), true, 0, []);
    clockAt(r, 0);
    expect(ptps(clockAt(r, T.taskTickMs)).map((p) => p.body)).toEqual([{ ...tick, rsn: 3 }, { ...tick, rsn: 3 }]);
    // The agent reports the process running: Start-TO ends, and with it the clock.
    ordered(r, cg('a1', 2, { type: 'proc.report', reports: [{ task: 't1', vpid: 0, kind: 'spawnSucceeded', pid: 1000, exitCode: null, signal: null, reason: 'running', endpoint: '' }] }), 60);
    expect(r.state.rsn).toBe(4);
    expect(tickNextWakeMs(r)).toBe(null);
    expect(clockAt(r, 2 * T.taskTickMs)).toEqual([]);
    expect(clockAt(r, 10 * T.taskTickMs)).toEqual([]);
    orderOperator(r, opRequest(kill('k1', 't1')), true, 1000, []); // Terminate-TO runs
    expect(clockAt(r, 1010)).toEqual([]);
    expect(clockAt(r, 1010 + T.taskTickMs - 1)).toEqual([]);
    expect(ptps(clockAt(r, 1010 + T.taskTickMs)).map((p) => p.body)).toEqual([{ ...tick, rsn: 6 }, { ...tick, rsn: 6 }]);
  });

  it('§8.3: a backup runs no clock', () => {
    const b = started('r2');
    expect(clockAt(b, 0)).toEqual([]);
    expect(tickNextWakeMs(b)).toBe(null);
  });
});
