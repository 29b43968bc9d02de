// Unit tests of the reliable link layer (docs/PROTOCOL.md §3–§4, spec §3.4 P1–P7).
// Two Links objects exchange items by hand, so every step is visible.
import { describe, expect, it } from 'vitest';
import {
  ACK_DELAY_MS, DEFAULT_TIMING, MAX_QUEUED_WHILE_DISCONNECTED, MAX_RETRANSMIT_BACKOFF, MAX_RETRANSMIT_BATCH, MAX_UNACKED_PER_LANE,
  PRIMARY_RETRIES_BEFORE_FALLBACK, RECEIVE_WINDOW,
} from '../../../src/core/constants.ts';
import { createLinks, flushAcks, linkAddPeer, linkOweGroupAck, linkReceive, linkRemovePeer, linkSend, linkTimers, startLinks, type Delivery, type Links } from '../../../src/core/link.ts';
import { isEstablished, laneMarks, linkCanSend, linkNextWakeMs, linkView, logSessionEvent, peerJudged } from '../../../src/core/link-views.ts';
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
/** b's pure lane-0 ack through `ackSeq`, on the session of `connected()`. */
const ackFromB = (ackSeq: number): Item => ({ type: 'ptp', srcInc: 200, destInc: 100, seq: 0, ackSeq, body: null });
/** A group-lane body: a copy of group message `gssn`. */
const gc = (gssn: number) => ({
  type: 'gc' as const,
  gc: { gssn, prevGssn: gssn - 1, csnAck: 0, destInc: 0, payload: { type: 'echo.reply' as const, origin: 'a', tag: '', rsn: 1, index: 0, data: new Uint8Array() }, dest: 'b' },
});
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
    linkReceive(a, 'b', ackFromB(9), 0, []);
    expect(a.peers.get('b')?.lanes[0].unacked).toHaveLength(1);
  });
});

/** Let `n` retransmission timeouts of `links` expire, each when it falls due: the gaps between them,
 *  and when the last one fired. */
function expiries(links: Links, n: number, steady: string | null = null): { gaps: number[]; last: number } {
  const gaps: number[] = [];
  let last = 0;
  for (let i = 0; i < n; i++) {
    const at = linkNextWakeMs(links) as number;
    gaps.push(at - last);
    last = at;
    linkTimers(links, at, [], steady);
  }
  return { gaps, last };
}

describe('retransmission backoff', () => {
  it('doubles the timeout per fruitless expiry up to 8x, and resets once an ack makes progress', () => {
    const { a, b } = connected();
    linkSend(a, 'b', 0, notice('x'), 0, []);
    const { gaps, last } = expiries(a, 6);
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

  it('a copy the group layer has no room for is not received at all: no delivery, no ack, no drop; its retransmission is taken once there is room', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 1, gc(1), 0, o);
    linkSend(a, 'b', 1, gc(2), 0, o);
    const out: CoreEffect[] = [];
    const r = linkReceive(b, 'a', sends(o)[0]?.item as Item, 0, out, () => false); // seq 1; seq 2 is lost
    expect([r.deliveries, r.drop]).toEqual([[], null]);
    flushAcks(b, out, () => 0, 100);
    expect(out).toEqual([]);
    expect(laneMarks(b, 'a', 1)).toEqual({ sent: 0, acked: 0 });
    // Room for one body only: the run stops where the room does, even over a buffered copy (the
    // retransmissions arrive in reverse, so seq 2 waits in the out-of-order buffer).
    const again: CoreEffect[] = [];
    linkTimers(a, DEFAULT_TIMING.retransmitMs, again);
    let room = 1;
    const got: Delivery[] = [];
    for (const x of sends(again).reverse()) got.push(...linkReceive(b, 'a', x.item, 50, [], () => room-- > 0).deliveries);
    expect(got.map((d) => (d.type === 'grp' && d.body.type === 'gc' ? d.body.gc.gssn : -1))).toEqual([1]);
    expect(b.peers.get('a')?.lanes[1].seqRcvd).toBe(1);
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

describe('handshake answers and retries (PROTOCOL §3.2, §10.6)', () => {
  const hellosTo = (out: CoreEffect[], to: string) => sends(out).filter((x) => x.to === to && x.item.type === 'hello').map((x) => x.item);

  it('a hello is answered with ours (our incarnation, theirs echoed) unless the peer is established and knows this incarnation of us', () => {
    const { a } = connected();
    const out: CoreEffect[] = [];
    linkReceive(a, 'b', { type: 'hello', inc: 200, echo: 100, established: true }, 0, out);
    expect(hellosTo(out, 'b')).toEqual([]); // it knows us: an answer would only echo forever
    linkReceive(a, 'b', { type: 'hello', inc: 200, echo: 100, established: false }, 0, out);
    expect(hellosTo(out, 'b')).toEqual([{ type: 'hello', inc: 100, echo: 200, established: true }]);
    const older: CoreEffect[] = [];
    linkReceive(a, 'b', { type: 'hello', inc: 200, echo: 99, established: true }, 0, older); // it knows an older us
    expect(hellosTo(older, 'b')).toEqual([{ type: 'hello', inc: 100, echo: 200, established: true }]);
    expect(isEstablished(a, 'b')).toBe(true);
  });

  it('a first hello from a peer whose incarnation we did not know is no restart: nothing is reset', () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    const queued: CoreEffect[] = [];
    expect(linkSend(a, 'b', 0, notice('kept'), 0, queued)).toBe('queued');
    const r = linkReceive(a, 'b', { type: 'hello', inc: 200, echo: 0, established: false }, 0, []);
    expect(r.deliveries).toEqual([]);
    expect(linkView(a, 'b')).toEqual({ established: false, unacked: 0, queued: 1 });
    linkSend(a, 'b', 1, gc(1), 0, []);
    linkSend(a, 'b', 1, gc(2), 0, []);
    expect(linkView(a, 'b')).toEqual({ established: false, unacked: 0, queued: 3 });
  });

  it('unanswered hellos back off, doubling up to MAX_RETRANSMIT_BACKOFF; an eager peer (a replacement starting) keeps the plain period', () => {
    const hs = DEFAULT_TIMING.handshakeRetryMs;
    const gapsOf = (eager: boolean): number[] => {
      const a = createLinks('a', 100, DEFAULT_TIMING, []);
      linkAddPeer(a, 'r4', 0, [], eager);
      const gaps: number[] = [];
      let last = 0;
      for (let i = 0; i < 6; i++) {
        const at = linkNextWakeMs(a) as number;
        const out: CoreEffect[] = [];
        linkTimers(a, at - 1, out);
        expect(hellosTo(out, 'r4'), 'not before it is due').toEqual([]);
        linkTimers(a, at, out);
        expect(hellosTo(out, 'r4')).toHaveLength(1);
        gaps.push(at - last);
        last = at;
      }
      return gaps;
    };
    expect(gapsOf(false)).toEqual([hs, 2 * hs, 4 * hs, 8 * hs, 8 * hs, 8 * hs]);
    expect(MAX_RETRANSMIT_BACKOFF).toBe(8);
    expect(gapsOf(true)).toEqual([hs, hs, hs, hs, hs, hs]);
  });

  it('a peer whose hello comes first (we never said hello) is retried from then if our answer is lost', () => {
    const b = createLinks('b', 200, DEFAULT_TIMING, ['a']);
    expect(linkNextWakeMs(b)).toBeNull();
    const out: CoreEffect[] = [];
    linkReceive(b, 'a', { type: 'hello', inc: 100, echo: 0, established: false }, 30, out);
    expect(hellosTo(out, 'a')).toEqual([{ type: 'hello', inc: 200, echo: 100, established: false }]);
    expect(linkNextWakeMs(b)).toBe(30 + DEFAULT_TIMING.handshakeRetryMs);
  });

  it('after a restart, the first retry of our hello is one period after the restart, whatever hellos came during the session', () => {
    const { a } = connected();
    linkReceive(a, 'b', { type: 'hello', inc: 200, echo: 100, established: true }, 5, []); // during the session
    linkReceive(a, 'b', { type: 'hello', inc: 300, echo: 0, established: false }, 1000, []); // b restarted
    expect(linkNextWakeMs(a)).toBe(1000 + DEFAULT_TIMING.handshakeRetryMs);
  });

  it('adding a known peer sends nothing and only updates eagerness; adding ourselves does nothing', () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    const out: CoreEffect[] = [];
    linkAddPeer(a, 'b', 0, out, true);
    linkAddPeer(a, 'a', 0, out);
    expect(out).toEqual([]);
    expect(a.peers.get('b')?.eager).toBe(true);
    expect([...a.peers.keys()]).toEqual(['b']);
    linkAddPeer(a, 'c', 7, out);
    expect(sends(out)).toEqual([{ to: 'c', item: { type: 'hello', inc: 100, echo: 0, established: false } }]);
    expect(a.peers.get('c')?.eager).toBe(false); // not eager unless asked
    expect(linkNextWakeMs(a)).toBe(7 + DEFAULT_TIMING.handshakeRetryMs);
    // Links over a member list that names ourselves: no session with ourselves; hellos to the rest.
    const d = createLinks('d', 1, DEFAULT_TIMING, ['b', 'd', 'e']);
    expect([...d.peers.keys()]).toEqual(['b', 'e']);
    const started: CoreEffect[] = [];
    startLinks(d, 9, started);
    expect(sends(started).map((x) => x.to)).toEqual(['b', 'e']);
    expect(linkNextWakeMs(d)).toBe(9 + DEFAULT_TIMING.handshakeRetryMs);
  });

  it('a removed peer is NOT_A_MEMBER, owes and is owed nothing, and has no view', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('x'), 0, o);
    pass(b, 'a', o);
    linkSend(b, 'a', 0, notice('y'), 0, []);
    linkRemovePeer(b, 'a');
    expect(linkView(b, 'a')).toBeNull();
    expect(linkNextWakeMs(b)).toBeNull();
    const out: CoreEffect[] = [];
    flushAcks(b, out, () => 0, 1000);
    linkTimers(b, 1000, out);
    expect(out).toEqual([]);
    expect(linkReceive(b, 'a', { type: 'hello', inc: 100, echo: 200, established: true }, 0, []).drop).toBe('NOT_A_MEMBER');
    expect(linkSend(b, 'a', 0, notice('z'), 0, [])).toBe('unknown-peer');
  });
});

describe('items that are not the link\'s', () => {
  it('a heartbeat or any other non-link item handed to the link is dropped as UNEXPECTED and changes nothing', () => {
    const { a } = connected();
    const out: CoreEffect[] = [];
    const r = linkReceive(a, 'b', { type: 'status.query', counter: 1, inc: 1 } as unknown as Item, 0, out);
    expect(r).toEqual({ deliveries: [], drop: 'UNEXPECTED' });
    expect(out).toEqual([]);
  });

  for (const lane of [0, 1] as const) {
    it(`lane ${lane}: in-order data is acknowledged after ACK_DELAY_MS, a duplicate at once`, () => {
      const { a, b } = connected();
      const o: CoreEffect[] = [];
      if (lane === 0) linkSend(a, 'b', 0, notice('x'), 0, o);
      else linkSend(a, 'b', 1, gc(1), 0, o);
      const item = sends(o)[0]?.item as Item;
      linkReceive(b, 'a', item, 10, []);
      expect(linkNextWakeMs(b)).toBe(10 + ACK_DELAY_MS);
      flushAcks(b, [], () => 0, 10 + ACK_DELAY_MS);
      expect(linkReceive(b, 'a', item, 20, []).drop).toBe('DUPLICATE');
      expect(linkNextWakeMs(b)).toBe(20);
    });
  }

  it('a pure ack that repeats the last one resends the first unacknowledged body once (fast retransmit, P3.4); one for everything sent resends nothing', () => {
    const { a } = connected();
    const o: CoreEffect[] = [];
    for (const t of ['1', '2', '3']) linkSend(a, 'b', 0, notice(t), 0, o);
    linkReceive(a, 'b', ackFromB(1), 1, []);
    const dup: CoreEffect[] = [];
    linkReceive(a, 'b', ackFromB(1), 2, dup);
    expect(sends(dup).map((x) => (x.item.type === 'ptp' ? x.item.seq : -1))).toEqual([2]);
    linkReceive(a, 'b', ackFromB(3), 3, []);
    const last: CoreEffect[] = [];
    linkReceive(a, 'b', ackFromB(3), 4, last);
    expect(last).toEqual([]);
  });
});

describe('timers, marks and views', () => {
  it('retransmits at most MAX_RETRANSMIT_BATCH bodies per expiry, oldest first', () => {
    const { a } = connected();
    for (let i = 0; i < MAX_RETRANSMIT_BATCH + 3; i++) linkSend(a, 'b', 0, notice(String(i)), 0, []);
    const out: CoreEffect[] = [];
    linkTimers(a, DEFAULT_TIMING.retransmitMs, out);
    const seqs = sends(out).map((x) => (x.item.type === 'ptp' ? x.item.seq : -1));
    expect(seqs).toEqual(Array.from({ length: MAX_RETRANSMIT_BATCH }, (_, i) => i + 1));
  });

  it('lane 1 to the steady peer (an agent\'s primary) keeps the plain period for PRIMARY_RETRIES_BEFORE_FALLBACK retransmissions, then backs off; lane 0 and other peers back off at once', () => {
    const rto = DEFAULT_TIMING.retransmitMs;
    const gapsOf = (lane: 0 | 1, steady: string | null): number[] => {
      const { a } = connected();
      if (lane === 0) linkSend(a, 'b', 0, notice('x'), 0, []);
      else linkSend(a, 'b', 1, gc(1), 0, []);
      return expiries(a, 6, steady).gaps;
    };
    expect(PRIMARY_RETRIES_BEFORE_FALLBACK).toBe(3);
    expect(gapsOf(1, 'b')).toEqual([rto, rto, rto, rto, 2 * rto, 4 * rto]);
    expect(gapsOf(1, 'c')).toEqual([rto, 2 * rto, 4 * rto, 8 * rto, 8 * rto, 8 * rto]);
    expect(gapsOf(0, 'b')).toEqual([rto, 2 * rto, 4 * rto, 8 * rto, 8 * rto, 8 * rto]);
  });

  it('the next wake-up is the earliest of owed acks, retransmissions and hellos, and none when nothing is pending', () => {
    const { a, b } = connected();
    expect(linkNextWakeMs(a)).toBeNull();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('x'), 100, o);
    expect(linkNextWakeMs(a)).toBe(100 + DEFAULT_TIMING.retransmitMs);
    for (const x of sends(o)) linkReceive(b, 'a', x.item, 100, []);
    expect(linkNextWakeMs(b)).toBe(100 + ACK_DELAY_MS); // owed ack
    linkAddPeer(a, 'c', 110, []);
    expect(linkNextWakeMs(a)).toBe(100 + DEFAULT_TIMING.retransmitMs); // 140 < 160
    linkAddPeer(a, 'd', 60, []);
    expect(linkNextWakeMs(a)).toBe(60 + DEFAULT_TIMING.handshakeRetryMs); // 110 < 140
  });

  it('the owed-ack wake-up is the earliest owed ack, whatever order the peers came to be owed in', () => {
    // a, established with b, c and d, owes each a gack; Set order b, c, d, due times 20, 10, 30.
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b', 'c', 'd']);
    const hellos: CoreEffect[] = [];
    startLinks(a, 0, hellos);
    for (const [id, inc] of [['b', 200], ['c', 300], ['d', 400]] as const) {
      const peer = createLinks(id, inc, DEFAULT_TIMING, ['a']);
      pass(peer, 'a', pass(a, id, pass(peer, 'a', hellos).out).out);
      expect(isEstablished(a, id)).toBe(true);
    }
    expect(linkNextWakeMs(a)).toBeNull();
    linkOweGroupAck(a, 'b', 20);
    linkOweGroupAck(a, 'c', 10);
    linkOweGroupAck(a, 'd', 30);
    expect(linkNextWakeMs(a)).toBe(10 + ACK_DELAY_MS);
  });

  it('a group mark that moved is owed to an established peer only, as one gack after ACK_DELAY_MS carrying the mark and the lane receipt', () => {
    const { a, b } = connected();
    linkAddPeer(a, 'c', 0, []);
    linkOweGroupAck(a, 'c', 0); // not established: owes nothing, so no wake-up at ACK_DELAY_MS
    linkOweGroupAck(a, 'zz', 0); // unknown
    linkOweGroupAck(a, 'b', 10);
    expect(linkNextWakeMs(a)).toBe(10 + ACK_DELAY_MS);
    const early: CoreEffect[] = [];
    flushAcks(a, early, () => 42, 10 + ACK_DELAY_MS - 1);
    expect(early).toEqual([]);
    const out: CoreEffect[] = [];
    flushAcks(a, out, (p) => (p === 'b' ? 42 : -1), 10 + ACK_DELAY_MS);
    expect(sends(out)).toEqual([{ to: 'b', item: { type: 'gack', srcInc: 100, destInc: 200, ack: 42, seq: 0 } }]);
    const again: CoreEffect[] = [];
    flushAcks(a, again, () => 42, 100);
    expect(again).toEqual([]); // paid
    expect(b.peers.get('a')?.established).toBe(true);
  });

  it('lane marks: the last seq sent and the highest acknowledged, per lane; 0 for an unknown peer', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('1'), 0, o);
    linkSend(a, 'b', 0, notice('2'), 0, o);
    expect(laneMarks(a, 'b', 0)).toEqual({ sent: 2, acked: 0 });
    expect(laneMarks(a, 'b', 1)).toEqual({ sent: 0, acked: 0 });
    pass(a, 'b', pass(b, 'a', o).out);
    expect(laneMarks(a, 'b', 0)).toEqual({ sent: 2, acked: 2 });
    expect(laneMarks(a, 'zz', 0)).toEqual({ sent: 0, acked: 0 });
  });

  it('the view counts both lanes\' unacknowledged and queued bodies', () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    linkSend(a, 'b', 0, notice('q'), 0, []);
    expect(linkView(a, 'b')).toEqual({ established: false, unacked: 0, queued: 1 });
    const { a: c } = connected();
    linkSend(c, 'b', 0, notice('u'), 0, []);
    linkSend(c, 'b', 1, gc(1), 0, []);
    expect(linkView(c, 'b')).toEqual({ established: true, unacked: 2, queued: 0 });
    expect(linkView(c, 'zz')).toBeNull();
  });

  it('a peer is judged once a session with it is up, or once the start grace is over; never met, not before (PROTOCOL §5.3, §5.6)', () => {
    const grace = DEFAULT_TIMING.startGraceMs;
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    expect(peerJudged(a, 'b', 1000 + grace - 1, 1000, grace)).toBe(false); // known, no session, within the grace
    expect(peerJudged(a, 'zz', 1000 + grace - 1, 1000, grace)).toBe(false); // unknown: no session either
    expect(peerJudged(a, 'b', 1000 + grace, 1000, grace)).toBe(true); // the grace runs from the asker's start
    expect(peerJudged(a, 'zz', 1000 + grace, 1000, grace)).toBe(true);
    const { a: c } = connected();
    expect(peerJudged(c, 'b', 0, 0, grace)).toBe(true); // a session: judged from the start
  });

  it('session events are logged (established as info, a restarted peer as a warning); other deliveries are not session events', () => {
    const out: CoreEffect[] = [];
    expect(logSessionEvent({ type: 'established', peer: 'b' }, out)).toBe(true);
    expect(logSessionEvent({ type: 'reset', peer: 'b' }, out)).toBe(true);
    expect(logSessionEvent({ type: 'gack', from: 'b', ack: 1 }, out)).toBe(false);
    expect(out).toEqual([
      { type: 'log', level: 'info', event: 'link.established', fields: { peer: 'b' } },
      { type: 'log', level: 'warn', event: 'link.peer-restarted', fields: { peer: 'b' } },
    ]);
  });
});

describe('link bounds and queue order (constants.ts)', () => {
  const ptpSeqs = (out: CoreEffect[]) => sends(out).flatMap((x) => (x.item.type === 'ptp' && x.item.body !== null ? [x.item.seq] : []));

  it(`queues at most MAX_QUEUED_WHILE_DISCONNECTED bodies per lane for a peer not yet connected, then refuses ('full')`, () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    for (let i = 0; i < MAX_QUEUED_WHILE_DISCONNECTED - 1; i++) linkSend(a, 'b', 0, notice('q'), 0, []);
    expect(linkCanSend(a, 'b', 0)).toBe(true);
    expect(linkSend(a, 'b', 0, notice('last'), 0, [])).toBe('queued');
    expect(linkCanSend(a, 'b', 0)).toBe(false);
    expect(linkSend(a, 'b', 0, notice('over'), 0, [])).toBe('full');
    expect(linkCanSend(a, 'b', 1)).toBe(true); // the other lane has its own bound
    expect(linkCanSend(a, 'zz', 0)).toBe(false);
  });

  it('keeps at most MAX_UNACKED_PER_LANE bodies in flight; the next waits, in order, until an ack frees room', () => {
    const { a, b } = connected();
    const out: CoreEffect[] = [];
    for (let i = 0; i < MAX_UNACKED_PER_LANE; i++) expect(linkSend(a, 'b', 0, notice(String(i)), 0, out)).toBe('sent');
    expect(linkSend(a, 'b', 0, notice('waits'), 0, [])).toBe('queued');
    expect(linkSend(a, 'b', 0, notice('waits too'), 0, [])).toBe('queued');
    const freed: CoreEffect[] = [];
    linkReceive(a, 'b', ackFromB(1), 1, freed);
    expect(ptpSeqs(freed)).toEqual([MAX_UNACKED_PER_LANE + 1]); // room for one
    expect(linkView(a, 'b')).toEqual({ established: true, unacked: MAX_UNACKED_PER_LANE, queued: 1 });
    expect(b.peers.get('a')?.established).toBe(true);
  });

  it('a body sent while an earlier one is held (for a newer incarnation) queues behind it, never overtaking', () => {
    const { a } = connected();
    expect(linkSend(a, 'b', 0, notice('in flight'), 0, [])).toBe('sent');
    expect(linkSend(a, 'b', 0, notice('for 300'), 0, [], 300)).toBe('queued');
    const out: CoreEffect[] = [];
    expect(linkSend(a, 'b', 0, notice('after'), 0, out)).toBe('queued');
    expect(out).toEqual([]);
    // An ack on the session with 200 frees room, and releases nothing held for 300.
    const acked: CoreEffect[] = [];
    linkReceive(a, 'b', ackFromB(1), 1, acked);
    expect(ptpSeqs(acked)).toEqual([]);
    expect(linkView(a, 'b')).toEqual({ established: true, unacked: 0, queued: 2 });
  });

  it('a restart carries into the new session only what was meant for the new incarnation, in order', () => {
    const { a } = connected();
    linkSend(a, 'b', 0, notice('old'), 0, []); // in flight to 200
    linkSend(a, 'b', 0, notice('for 300'), 0, [], 300);
    linkSend(a, 'b', 0, notice('for 400'), 0, [], 400);
    linkReceive(a, 'b', { type: 'hello', inc: 300, echo: 0, established: false }, 5, []);
    const lane = a.peers.get('b')?.lanes[0];
    expect(lane?.queued.map((q) => (q.body as { text: string }).text)).toEqual(['for 300']);
    expect(lane?.unacked).toEqual([]);
  });

  it('a body held for an incarnation older than the first one we hear from is dropped, not sent to the newer one', () => {
    const a = createLinks('a', 100, DEFAULT_TIMING, ['b']);
    expect(linkSend(a, 'b', 0, notice('for 150'), 0, [], 150)).toBe('queued');
    expect(linkSend(a, 'b', 0, notice('any'), 0, [])).toBe('queued');
    const out: CoreEffect[] = [];
    linkReceive(a, 'b', { type: 'hello', inc: 200, echo: 100, established: false }, 0, out);
    expect(isEstablished(a, 'b')).toBe(true);
    expect(sends(out).flatMap((x) => (x.item.type === 'ptp' && x.item.body?.type === 'notice' ? [x.item.body.text] : []))).toEqual(['any']);
  });

  it('an ack that repeats the last one changes no timer; the last ack of all stops retransmission; a partial one restarts the timeout from now', () => {
    const { a } = connected();
    const rto = DEFAULT_TIMING.retransmitMs;
    linkSend(a, 'b', 0, notice('1'), 0, []);
    linkSend(a, 'b', 0, notice('2'), 0, []);
    linkTimers(a, rto, []); // backoff 2: next at 3 rto
    expect(linkNextWakeMs(a)).toBe(3 * rto);
    linkReceive(a, 'b', ackFromB(0), 2 * rto, []);
    expect(linkNextWakeMs(a)).toBe(3 * rto); // a repeated ack is no progress
    linkReceive(a, 'b', ackFromB(1), 2 * rto, []);
    expect(linkNextWakeMs(a)).toBe(3 * rto); // progress: backoff 1, from now
    linkReceive(a, 'b', ackFromB(2), 2 * rto + 1, []);
    expect(linkNextWakeMs(a)).toBeNull();
  });

  it('data carrying our lane-0 ack leaves an owed group ack due when it was due, and owes nothing more once both are paid', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('x'), 0, o);
    linkSend(a, 'b', 1, gc(1), 0, o);
    for (const x of sends(o)) linkReceive(b, 'a', x.item, 0, []);
    linkSend(b, 'a', 0, notice('reply'), 1, []); // carries the lane-0 ack
    const early: CoreEffect[] = [];
    flushAcks(b, early, () => 9, 1);
    expect(early).toEqual([]); // the gack is still due at ACK_DELAY_MS
    expect(linkNextWakeMs(b)).toBe(ACK_DELAY_MS);
    const due: CoreEffect[] = [];
    flushAcks(b, due, () => 9, ACK_DELAY_MS);
    expect(sends(due).map((x) => x.item.type)).toEqual(['gack']);
    // Only the lane-0 ack owed, and paid by data: no wake-up for it.
    const o2: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('y'), 10, o2);
    for (const x of sends(o2)) linkReceive(b, 'a', x.item, 10, []);
    linkSend(b, 'a', 0, notice('reply 2'), 11, []);
    expect(linkNextWakeMs(b)).toBe(1 + DEFAULT_TIMING.retransmitMs);
  });

  it('a paid lane-0 ack is not paid again when only a group ack is owed next', () => {
    const { a, b } = connected();
    const o: CoreEffect[] = [];
    linkSend(a, 'b', 0, notice('x'), 0, o);
    for (const x of sends(o)) linkReceive(b, 'a', x.item, 0, []);
    const first: CoreEffect[] = [];
    flushAcks(b, first, () => 0, ACK_DELAY_MS);
    expect(sends(first).map((x) => x.item.type)).toEqual(['ptp']);
    const g: CoreEffect[] = [];
    linkSend(a, 'b', 1, gc(1), 10, g);
    for (const x of sends(g)) linkReceive(b, 'a', x.item, 10, []);
    const second: CoreEffect[] = [];
    flushAcks(b, second, () => 0, 10 + ACK_DELAY_MS);
    expect(sends(second).map((x) => x.item.type)).toEqual(['gack']);
  });

  it('acks owed to a peer that restarts are not paid to its new incarnation: after the new handshake, each lane\'s body is answered by its own ack alone', () => {
    for (const lane of [0, 1] as const) {
      const { a, b } = connected();
      const o: CoreEffect[] = [];
      linkSend(a, 'b', 0, notice('x'), 0, o);
      linkSend(a, 'b', 1, gc(1), 0, o);
      for (const x of sends(o)) linkReceive(b, 'a', x.item, 0, []); // b owes both acks
      // a restarts as incarnation 101 before b pays them.
      const a2 = createLinks('a', 101, DEFAULT_TIMING, ['b']);
      const h: CoreEffect[] = [];
      startLinks(a2, 1, h);
      const r1 = pass(b, 'a', h, 1);
      expect(r1.deliveries.map((d) => d.type)).toEqual(['reset']);
      pass(b, 'a', pass(a2, 'b', r1.out, 1).out, 1);
      expect(isEstablished(b, 'a')).toBe(true);
      const g: CoreEffect[] = [];
      if (lane === 0) linkSend(a2, 'b', 0, notice('new'), 2, g);
      else linkSend(a2, 'b', 1, gc(1), 2, g);
      for (const x of sends(g)) linkReceive(b, 'a', x.item, 2, []);
      const acks: CoreEffect[] = [];
      flushAcks(b, acks, () => 0, 2 + ACK_DELAY_MS);
      expect(sends(acks).map((x) => x.item.type), `lane ${lane}`).toEqual([lane === 0 ? 'ptp' : 'gack']);
    }
  });

  it('the receive window spans RECEIVE_WINDOW seqs past the last delivered one, and the out-of-order buffer empties as the gap fills', () => {
    const { b } = connected();
    const at = (seq: number) => linkReceive(b, 'a', { type: 'ptp', srcInc: 100, destInc: 200, seq, ackSeq: 0, body: notice(String(seq)) }, 0, []);
    expect(at(RECEIVE_WINDOW).drop).toBeNull(); // buffered: the last seq inside the window
    expect(at(RECEIVE_WINDOW + 1).drop).toBe('OUT_OF_WINDOW');
    expect(at(2).drop).toBeNull();
    expect(ptpTexts(at(1).deliveries)).toEqual(['1', '2']);
    expect(b.peers.get('a')?.lanes[0].outOfOrder.size).toBe(1); // only RECEIVE_WINDOW still waits
  });
});
