// Unit tests of the reliable link layer (docs/PROTOCOL.md §3–§4, spec §3.4 P1–P7).
// Two Links objects exchange items by hand, so every step is visible.
import { describe, expect, it } from 'vitest';
import { ACK_DELAY_MS, DEFAULT_TIMING, RECEIVE_WINDOW } from '../../../src/core/constants.ts';
import {
  createLinks, flushAcks, isEstablished, linkNextWakeMs, linkReceive, linkSend, linkTimers, startLinks,
  type Delivery, type Links,
} from '../../../src/core/link.ts';
import type { CoreEffect } from '../../../src/core/node.ts';
import type { Item } from '../../../src/core/wire/messages.ts';

type Sent = { to: string; item: Item };
const sends = (out: CoreEffect[]): Sent[] => out.flatMap((e) => (e.type === 'send' ? [{ to: e.to, item: e.item }] : []));

/** Deliver every item in `out` addressed to `to`, returning deliveries and new output. */
function pass(to: Links, from: string, out: CoreEffect[], nowMs = 0, keep: (i: Item) => boolean = () => true) {
  const next: CoreEffect[] = [];
  const deliveries: Delivery[] = [];
  for (const s of sends(out)) {
    if (s.to !== to.self || !keep(s.item)) continue;
    const r = linkReceive(to, from, s.item, nowMs, next);
    deliveries.push(...r.deliveries);
  }
  flushAcks(to, next, () => 77, nowMs + ACK_DELAY_MS); // let delayed acks fall due
  return { deliveries, out: next };
}

function connected(): { a: Links; b: Links } {
  const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
  const b = createLinks('b', 200, DEFAULT_TIMING, ['a']);
  const o1: CoreEffect[] = [];
  startLinks(a, 0, o1);
  const r1 = pass(b, 'a', o1); // SYN → b answers
  const r2 = pass(a, 'b', r1.out); // a establishes, answers
  pass(b, 'a', r2.out); // b establishes
  return { a, b };
}

const notice = (text: string) => ({ type: 'notice' as const, text });
const ptpTexts = (ds: Delivery[]) => ds.flatMap((d) => (d.type === 'ptp' && d.payload.type === 'notice' ? [d.payload.text] : []));

describe('link handshake (PROTOCOL §3.2, spec §3.4 P5)', () => {
  it('three hellos establish both sides, binding both incarnations', () => {
    const { a, b } = connected();
    expect(isEstablished(a, 'b')).toBe(true);
    expect(isEstablished(b, 'a')).toBe(true);
    expect(a.peers.get('b')?.peerInc).toBe(200);
    expect(b.peers.get('a')?.peerInc).toBe(100);
  });

  it('a lost final hello is recovered by the retry timer', () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    const b = createLinks('b', 200, DEFAULT_TIMING, ['a']);
    const o: CoreEffect[] = [];
    startLinks(a, 0, o);
    startLinks(b, 0, []);
    const r1 = pass(b, 'a', o);
    pass(a, 'b', r1.out); // a established; its final hello is lost
    expect(isEstablished(a, 'b')).toBe(true);
    expect(isEstablished(b, 'a')).toBe(false);
    const retry: CoreEffect[] = [];
    linkTimers(b, DEFAULT_TIMING.handshakeRetryMs, retry);
    const r3 = pass(a, 'b', retry);
    pass(b, 'a', r3.out);
    expect(isEstablished(b, 'a')).toBe(true);
  });

  it('messages sent before the session exists are queued, then sent with real seqs (P1.1)', () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    const b = createLinks('b', 200, DEFAULT_TIMING, ['a']);
    const early: CoreEffect[] = [];
    expect(linkSend(a, 'b', 0, notice('early'), 0, early)).toBe('queued');
    expect(sends(early)).toHaveLength(0);
    const o: CoreEffect[] = [];
    startLinks(a, 0, o);
    const r1 = pass(b, 'a', o);
    const r2 = pass(a, 'b', r1.out);
    const r3 = pass(b, 'a', r2.out);
    expect(ptpTexts(r3.deliveries)).toEqual(['early']);
  });

  it('a restarted peer (higher incarnation) resets the session; an older hello is a replay', () => {
    const { a } = connected();
    const out: CoreEffect[] = [];
    const replay = linkReceive(a, 'b', { type: 'hello', inc: 150, echo: 0, established: false }, 5, out);
    expect(replay.drop).toBe('REPLAYED');
    const restart = linkReceive(a, 'b', { type: 'hello', inc: 300, echo: 0, established: false }, 5, out);
    expect(restart.deliveries.map((d) => d.type)).toContain('reset');
    expect(isEstablished(a, 'b')).toBe(false);
  });

  it('items of another session are dropped as STALE_SESSION', () => {
    const { a } = connected();
    const r = linkReceive(a, 'b', { type: 'ptp', srcInc: 199, destInc: 100, seq: 1, ackSeq: 0, body: notice('x') }, 0, []);
    expect(r.drop).toBe('STALE_SESSION');
    const r2 = linkReceive(a, 'b', { type: 'ptp', srcInc: 200, destInc: 99, seq: 1, ackSeq: 0, body: notice('x') }, 0, []);
    expect(r2.drop).toBe('STALE_SESSION');
  });

  it('an unknown peer is NOT_A_MEMBER', () => {
    const { a } = connected();
    expect(linkReceive(a, 'zz', { type: 'hello', inc: 1, echo: 0, established: false }, 0, []).drop).toBe('NOT_A_MEMBER');
  });
});

describe('lane 0 reliability (spec §3.4 P1–P7)', () => {
  it('delivers in order, acks cumulatively, and a pure ack consumes no seq', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    for (const t of ['1', '2', '3']) linkSend(a, 'b', 0, notice(t), 0, o);
    const seqs = sends(o).map((s) => (s.item.type === 'ptp' ? s.item.seq : -1));
    expect(seqs).toEqual([1, 2, 3]);
    const r = pass(b, 'a', o);
    expect(ptpTexts(r.deliveries)).toEqual(['1', '2', '3']);
    const acks = sends(r.out).filter((s) => s.item.type === 'ptp');
    expect(acks).toHaveLength(1); // coalesced: one pure ack per step
    const ack = acks[0]?.item;
    expect(ack?.type === 'ptp' && ack.body === null && ack.ackSeq === 3 && ack.seq === 0).toBe(true);
    pass(a, 'b', r.out);
    expect(a.peers.get('b')?.lanes[0].unacked).toHaveLength(0);
    expect(a.peers.get('b')?.lanes[0].seqAcked).toBe(3);
  });

  it('buffers out-of-order messages within the window and delivers the run once the gap fills (P3, P4)', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    for (const t of ['1', '2', '3', '4']) linkSend(a, 'b', 0, notice(t), 0, o);
    const r1 = pass(b, 'a', o, 0, (i) => !(i.type === 'ptp' && i.seq === 1));
    expect(ptpTexts(r1.deliveries)).toEqual([]);
    // Each out-of-order arrival produced the duplicate ack (ackSeq 0) that prompts a resend.
    const dupAck = sends(r1.out).find((s) => s.item.type === 'ptp');
    expect(dupAck?.item.type === 'ptp' && dupAck.item.ackSeq).toBe(0);
    // Fast retransmit (P3.4): the duplicate ack makes `a` resend seq 1 at once.
    const r2 = pass(a, 'b', r1.out);
    const resent = sends(r2.out).filter((s) => s.item.type === 'ptp' && s.item.body !== null);
    expect(resent.map((s) => (s.item.type === 'ptp' ? s.item.seq : 0))).toEqual([1]);
    const r3 = pass(b, 'a', r2.out);
    expect(ptpTexts(r3.deliveries)).toEqual(['1', '2', '3', '4']);
  });

  it('drops a seq beyond the receive window and a duplicate below it', () => {
    const { b } = connected();
    const far = linkReceive(b, 'a', { type: 'ptp', srcInc: 100, destInc: 200, seq: 1 + RECEIVE_WINDOW, ackSeq: 0, body: notice('far') }, 0, []);
    expect(far.drop).toBe('OUT_OF_WINDOW');
    linkReceive(b, 'a', { type: 'ptp', srcInc: 100, destInc: 200, seq: 1, ackSeq: 0, body: notice('one') }, 0, []);
    const dup = linkReceive(b, 'a', { type: 'ptp', srcInc: 100, destInc: 200, seq: 1, ackSeq: 0, body: notice('one') }, 0, []);
    expect(dup.deliveries).toHaveLength(0);
  });

  it('retransmits unacknowledged messages on RetransmitTimeout with their original seq (P6)', () => {
    const { a, b } = connected();
    const lost: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('lost'), 0, lost);
    expect(linkNextWakeMs(a)).toBe(DEFAULT_TIMING.retransmitMs);
    const again: CoreEffect[] = [];
    linkTimers(a, DEFAULT_TIMING.retransmitMs, again);
    const item = sends(again)[0]?.item;
    expect(item?.type === 'ptp' && item.seq).toBe(1);
    expect(ptpTexts(pass(b, 'a', again).deliveries)).toEqual(['lost']);
  });

  it('an ack for a seq never sent is ignored (a faulty peer cannot release our buffer)', () => {
    const { a } = connected();
    linkSend(a, 'b', 0, notice('x'), 0, []);
    linkReceive(a, 'b', { type: 'ptp', srcInc: 200, destInc: 100, seq: 0, ackSeq: 9, body: null }, 0, []);
    expect(a.peers.get('b')?.lanes[0].unacked).toHaveLength(1);
  });
});

describe('retransmission backoff', () => {
  it('doubles the timeout per fruitless expiry up to 8x, and resets once an ack makes progress', () => {
    const { a, b } = connected();
    linkSend(a, 'b', 0, notice('x'), 0, []);
    const gaps: number[] = [];
    let last = 0;
    for (let i = 0; i < 6; i++) {
      const at = linkNextWakeMs(a) as number;
      gaps.push(at - last);
      last = at;
      linkTimers(a, at, []);
    }
    const rto = DEFAULT_TIMING.retransmitMs;
    expect(gaps).toEqual([rto, 2 * rto, 4 * rto, 8 * rto, 8 * rto, 8 * rto]);
    const again: CoreEffect[] = [];
    linkTimers(a, last + 8 * rto, again);
    pass(a, 'b', pass(b, 'a', again, last).out, last);
    linkSend(a, 'b', 0, notice('y'), last, []);
    expect((linkNextWakeMs(a) as number) - last).toBe(rto);
  });
});

describe('lane 1 (group lane, spec §3.3, flaw 1 and flaw 2 fixes)', () => {
  const gc = (gssn: number) => ({
    type: 'gc' as const,
    gc: { gssn, prevGssn: gssn - 1, csnAck: 0, destInc: 0, payload: { type: 'echo.reply' as const, origin: 'a', tag: '', rsn: 1, index: 0, data: new Uint8Array() }, dest: 'b' },
  });

  it('is never PTP-acked: one gack per step carries the group mark and the lane receipt', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 1, gc(1), 0, o);
    linkSend(a, 'b', 1, gc(2), 0, o);
    const r = pass(b, 'a', o);
    expect(r.deliveries.filter((d) => d.type === 'grp')).toHaveLength(2);
    const acks = sends(r.out);
    expect(acks.map((s) => s.item.type)).toEqual(['gack']);
    const gack = acks[0]?.item;
    expect(gack?.type === 'gack' && [gack.ack, gack.seq]).toEqual([77, 2]);
    pass(a, 'b', r.out);
    expect(a.peers.get('b')?.lanes[1].unacked).toHaveLength(0);
  });

  it("releases only the copies the receiver got from this sender, so a lost copy is resent (flaw 1, A14 at link level)", () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 1, gc(10), 0, o);
    linkSend(a, 'b', 1, gc(11), 0, o);
    const r = pass(b, 'a', o, 0, (i) => !(i.type === 'grp' && i.seq === 1)); // copy 10 lost
    pass(a, 'b', r.out); // the gack says seq 0: nothing released
    expect(a.peers.get('b')?.lanes[1].unacked.map((e) => e.seq)).toEqual([1, 2]);
    const again: CoreEffect[] = [];
    linkTimers(a, DEFAULT_TIMING.retransmitMs, again);
    const r2 = pass(b, 'a', again);
    expect(r2.deliveries.filter((d) => d.type === 'grp')).toHaveLength(2); // 10, then the buffered 11
    pass(a, 'b', r2.out);
    expect(a.peers.get('b')?.lanes[1].unacked).toHaveLength(0);
  });

  it('has its own sequence space: acknowledging lane 1 never covers a lane-0 message (flaw 2, A15 at link level)', () => {
    const { a, b } = connected();
    const lost: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('plain'), 0, lost); // lost
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 1, gc(10), 0, o);
    pass(a, 'b', pass(b, 'a', o).out);
    expect(a.peers.get('b')?.lanes[0].unacked).toHaveLength(1);
    const again: CoreEffect[] = [];
    linkTimers(a, DEFAULT_TIMING.retransmitMs, again);
    expect(ptpTexts(pass(b, 'a', again).deliveries)).toEqual(['plain']);
  });

  it('answers a retransmitted copy it already has with its receipt mark, so the sender stops', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 1, gc(1), 0, o);
    pass(b, 'a', o); // b's gack is lost
    const again: CoreEffect[] = [];
    linkTimers(a, DEFAULT_TIMING.retransmitMs, again);
    const r = pass(b, 'a', again);
    expect(r.deliveries.filter((d) => d.type === 'grp')).toHaveLength(0);
    pass(a, 'b', r.out);
    expect(a.peers.get('b')?.lanes[1].unacked).toHaveLength(0);
  });
});

describe('bodies meant for a peer incarnation (PROTOCOL §5.7)', () => {
  it('are held while the session is with an older incarnation and carried into the new session', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    // The group adopted b's next incarnation (300) before b's new hello reached a.
    expect(linkSend(a, 'b', 1, { type: 'gc', gc: { gssn: 5, prevGssn: 0, csnAck: 1, destInc: 300, payload: { type: 'echo.reply', origin: 'b', tag: 't', rsn: 1, index: 0, data: new Uint8Array() }, dest: 'b' } }, 0, o, 300)).toBe('queued');
    expect(sends(o)).toHaveLength(0); // not sent on the old session, where b would drop it
    const b2 = createLinks('b', 300, DEFAULT_TIMING, ['a']);
    const h: CoreEffect[] = [];
    startLinks(b2, 10, h);
    const r1 = pass(a, 'b', h, 10); // a resets to incarnation 300, keeps the body
    const r2 = pass(b2, 'a', r1.out, 10);
    const r3 = pass(a, 'b', r2.out, 10); // a established: the body goes out
    const got = pass(b2, 'a', r3.out, 10).deliveries.filter((d) => d.type === 'grp');
    expect(got).toHaveLength(1);
    void b;
  });

  it('for a dead incarnation are dropped, never sent to its successor', () => {
    const { a } = connected();
    const body = { type: 'gc' as const, gc: { gssn: 5, prevGssn: 0, csnAck: 1, destInc: 150, payload: { type: 'echo.reply' as const, origin: 'b', tag: 't', rsn: 1, index: 0, data: new Uint8Array() }, dest: 'b' } };
    expect(linkSend(a, 'b', 1, body, 0, [], 150)).toBe('stale');
  });
});

describe('delayed acks (PROTOCOL §4)', () => {
  it('acknowledge in-order arrivals of several steps with one ack after ACK_DELAY_MS; a gap is answered at once', () => {
    const { a, b } = connected();
    const acksAt = (nowMs: number): Item[] => {
      const out: CoreEffect[] = [];
      flushAcks(b, out, () => 0, nowMs);
      return sends(out).map((s) => s.item);
    };
    for (const [i, t] of [[0, 'one'], [1, 'two']] as const) {
      const o: CoreEffect[] = [];
      linkSend(a, 'b', 0, notice(t), i, o);
      for (const s of sends(o)) linkReceive(b, 'a', s.item, i, []);
      expect(acksAt(i)).toEqual([]); // not yet
    }
    expect(linkNextWakeMs(b)).toBe(ACK_DELAY_MS);
    const acks = acksAt(ACK_DELAY_MS);
    expect(acks).toHaveLength(1);
    expect(acks[0]?.type === 'ptp' && acks[0].ackSeq).toBe(2);
    // A gap: the duplicate ack goes out in the same step, to prompt the resend.
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('three'), 10, []);
    linkSend(a, 'b', 0, notice('four'), 10, o);
    for (const s of sends(o)) linkReceive(b, 'a', s.item, 10, []);
    expect(acksAt(10).map((i) => (i.type === 'ptp' ? i.ackSeq : -1))).toEqual([2]);
  });
});

describe('replays inside a session', () => {
  it('a frame replayed on the same session is dropped as DUPLICATE, counted, and never delivered twice', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('once'), 0, o);
    const item = sends(o)[0]?.item as Item;
    expect(ptpTexts(linkReceive(b, 'a', item, 0, []).deliveries)).toEqual(['once']);
    const again = linkReceive(b, 'a', item, 1, []);
    expect(again.drop).toBe('DUPLICATE');
    expect(again.deliveries).toEqual([]);
  });
});
