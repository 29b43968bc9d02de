// G-MPI's matching engine (src/app/gmpi/matching.ts) stepped by hand: arrivals and posted
// receives in both orders, wildcards, order per sender, cancellation and discarded
// communicators. Each step asserts what p2p.ts (the caller) would observe: which receive an
// arrival is delivered to, which message a receive takes, what is left queued.
import { describe, expect, it } from 'vitest';
import {
  ANY_SOURCE, ANY_TAG, arrive, cancelRecvs, createMatching, discardComm, dropQueued, type Message, postRecv, queuedFrom, takeQueued,
  UNEXPECTED_ENTRY_OVERHEAD_BYTES,
} from '../../../src/app/gmpi/matching.ts';

type Recv = { source: number; tag: number; comm: number; name: string };
const msg = (source: number, tag: number, text: string, comm = 0): Message => ({ source, tag, comm, structured: false, data: new TextEncoder().encode(text) });
const text = (m: Message | null): string | null => (m === null ? null : new TextDecoder().decode(m.data));
const recv = (name: string, source: number, tag: number, comm = 0): Recv => ({ source, tag, comm, name });

describe('gmpi matching', () => {
  it('a message that arrives first is queued, then taken by the receive', () => {
    const s = createMatching<Recv>();
    expect(arrive(s, msg(1, 5, 'hi'))).toEqual({ kind: 'queued' });
    expect(s.unexpected).toHaveLength(1);
    expect(queuedFrom(s, 1)).toBe(2 + UNEXPECTED_ENTRY_OVERHEAD_BYTES);
    expect(text(takeQueued(s, { source: 1, tag: 5, comm: 0 }))).toBe('hi');
    expect(s.unexpected).toHaveLength(0);
    expect(s.unexpectedBytes).toBe(0);
    expect(queuedFrom(s, 1)).toBe(0);
    expect(s.queuedBytesFrom.size).toBe(0);
  });

  it('a receive posted first is delivered the arriving message, which is never queued', () => {
    const s = createMatching<Recv>();
    expect(takeQueued(s, { source: 1, tag: 5, comm: 0 })).toBeNull();
    postRecv(s, recv('r', 1, 5));
    const a = arrive(s, msg(1, 5, 'hi'));
    expect(a).toEqual({ kind: 'delivered', recv: recv('r', 1, 5) });
    expect(s.pendingRecvs).toHaveLength(0);
    expect(s.unexpected).toHaveLength(0);
  });

  it('a message that matches no posted receive (other tag, source or communicator) is queued', () => {
    const s = createMatching<Recv>();
    postRecv(s, recv('r', 1, 5));
    expect(arrive(s, msg(1, 6, 'other tag')).kind).toBe('queued');
    expect(arrive(s, msg(2, 5, 'other source')).kind).toBe('queued');
    expect(arrive(s, msg(1, 5, 'other comm', 3)).kind).toBe('queued');
    expect(s.pendingRecvs).toHaveLength(1);
    expect(s.unexpected.map(text)).toEqual(['other tag', 'other source', 'other comm']);
  });

  it('ANY_SOURCE takes the earliest arrival from any sender', () => {
    const s = createMatching<Recv>();
    arrive(s, msg(2, 5, 'from 2'));
    arrive(s, msg(1, 5, 'from 1'));
    expect(text(takeQueued(s, { source: ANY_SOURCE, tag: 5, comm: 0 }))).toBe('from 2');
    expect(text(takeQueued(s, { source: ANY_SOURCE, tag: 5, comm: 0 }))).toBe('from 1');
  });

  it('ANY_TAG takes application tags only: library traffic (negative tags) is never stolen', () => {
    const s = createMatching<Recv>();
    arrive(s, msg(1, -7, 'library'));
    arrive(s, msg(1, 0, 'app'));
    expect(text(takeQueued(s, { source: 1, tag: ANY_TAG, comm: 0 }))).toBe('app');
    expect(takeQueued(s, { source: ANY_SOURCE, tag: ANY_TAG, comm: 0 })).toBeNull();
    postRecv(s, recv('wild', ANY_SOURCE, ANY_TAG));
    expect(arrive(s, msg(2, -7, 'library too')).kind).toBe('queued');
    expect(text(takeQueued(s, { source: 1, tag: -7, comm: 0 }))).toBe('library');
  });

  it('messages from one sender are taken in arrival order (non-overtaking)', () => {
    const s = createMatching<Recv>();
    for (const t of ['a', 'b', 'c']) arrive(s, msg(1, 5, t));
    expect([1, 2, 3].map(() => text(takeQueued(s, { source: 1, tag: ANY_TAG, comm: 0 })))).toEqual(['a', 'b', 'c']);
  });

  it('an arrival goes to the earliest-posted matching receive', () => {
    const s = createMatching<Recv>();
    postRecv(s, recv('specific-later-tag', 1, 9));
    postRecv(s, recv('first', ANY_SOURCE, 5));
    postRecv(s, recv('second', 1, 5));
    const a = arrive(s, msg(1, 5, 'x'));
    expect(a.kind === 'delivered' && a.recv.name).toBe('first');
    const b = arrive(s, msg(1, 5, 'y'));
    expect(b.kind === 'delivered' && b.recv.name).toBe('second');
    expect(s.pendingRecvs.map((r) => r.name)).toEqual(['specific-later-tag']);
  });

  it('cancelling receives by sender returns them in posting order and leaves the rest', () => {
    const s = createMatching<Recv>();
    postRecv(s, recv('a', 1, 5));
    postRecv(s, recv('b', 2, 5));
    postRecv(s, recv('c', 1, 6));
    expect(cancelRecvs(s, (r) => r.source === 1).map((r) => r.name)).toEqual(['a', 'c']);
    expect(s.pendingRecvs.map((r) => r.name)).toEqual(['b']);
    expect(cancelRecvs(s).map((r) => r.name)).toEqual(['b']);
    expect(arrive(s, msg(2, 5, 'late')).kind).toBe('queued');
  });

  it('dropping a sender\'s queued messages counts them discarded and frees its bytes', () => {
    const s = createMatching<Recv>();
    arrive(s, msg(1, 5, 'one'));
    arrive(s, msg(2, 5, 'two'));
    dropQueued(s, (m) => m.source === 1);
    expect(s.discardedMessages).toBe(1);
    expect(queuedFrom(s, 1)).toBe(0);
    expect(s.unexpectedBytes).toBe(3 + UNEXPECTED_ENTRY_OVERHEAD_BYTES);
    expect(s.unexpected.map(text)).toEqual(['two']);
  });

  it('a discarded communicator returns its receives, drops its queue and discards later arrivals', () => {
    const s = createMatching<Recv>();
    arrive(s, msg(1, 5, 'old', 1));
    arrive(s, msg(1, 5, 'kept', 2));
    postRecv(s, recv('on 1', 2, 5, 1));
    postRecv(s, recv('on 2', 2, 5, 2));
    expect(discardComm(s, 1).map((r) => r.name)).toEqual(['on 1']);
    expect(s.unexpected.map(text)).toEqual(['kept']);
    expect(s.discardedMessages).toBe(1);
    expect(arrive(s, msg(2, 5, 'too late', 1))).toEqual({ kind: 'discarded' });
    expect(s.discardedMessages).toBe(2);
    const a = arrive(s, msg(2, 5, 'fine', 2));
    expect(a.kind === 'delivered' && a.recv.name).toBe('on 2');
  });
});
