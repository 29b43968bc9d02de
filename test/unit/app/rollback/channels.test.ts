// The rank channels' pure state (src/app/rollback/channels.ts, PROTOCOL §11.3), stepped by hand.
import { describe, expect, it } from 'vitest';
import { ANY_SOURCE, ANY_TAG } from '../../../../src/app/gmpi/matching.ts';
import {
  createChannelState, nextLogPos, onAck, onArrive, onHave, onLogged, onPeerLost, planSend, replayDeterminant, replayMessage, take,
} from '../../../../src/app/rollback/channels.ts';

const msg = (tag: number, byte = 0) => ({ comm: 0, tag, structured: false, data: Uint8Array.of(byte), epoch: 0 });

describe('sending (radic-hmpl A.2.5, mpichv-dgrp 1.2.4)', () => {
  it('numbers messages per destination from 1 and retains them until acknowledged logged', () => {
    const st = createChannelState(0, 3);
    onHave(st, 1, 0);
    expect(planSend(st, 1, msg(5)).env.ssn).toBe(1);
    expect(planSend(st, 1, msg(5)).env.ssn).toBe(2);
    expect(st.retained[1]!.size).toBe(2);
    expect(onAck(st, 1, 1)).toBe(1);
    expect([...st.retained[1]!.keys()]).toEqual([2]);
  });

  it('a re-executed send its receiver already holds is skipped (silent re-execution)', () => {
    const st = createChannelState(0, 2);
    onHave(st, 1, 2);
    expect(planSend(st, 1, msg(1)).kind).toBe('skip');
    expect(planSend(st, 1, msg(1)).kind).toBe('skip');
    expect(planSend(st, 1, msg(1)).kind).toBe('transmit');
  });

  it("a new incarnation's have releases what it holds and returns the rest to send again, in order", () => {
    const st = createChannelState(0, 2);
    onHave(st, 1, 0);
    for (let i = 0; i < 4; i++) planSend(st, 1, msg(1, i));
    onPeerLost(st, 1);
    expect(st.peerHave[1]).toBeNull();
    const again = onHave(st, 1, 2);
    expect(again.map((e) => e.ssn)).toEqual([3, 4]);
    expect([...st.retained[1]!.keys()]).toEqual([3, 4]);
  });

  it('a send to itself is queued at once, logged (re-execution regenerates it)', () => {
    const st = createChannelState(1, 2);
    expect(planSend(st, 1, msg(3)).kind).toBe('local');
    expect(take(st, { source: 1, tag: 3, comm: 0 }, 0, true)?.ssn).toBe(1);
  });
});

describe('receiving (radic-hmpl A.2.5, B.6)', () => {
  it('a new message gets the next log position; a repeat is a duplicate; a skip ahead is a gap', () => {
    const st = createChannelState(0, 3);
    expect(onArrive(st, 1, { ...msg(1), ssn: 1 })).toEqual({ kind: 'new', pos: 1, parts: 1 });
    expect(onArrive(st, 2, { ...msg(1), ssn: 1 })).toEqual({ kind: 'new', pos: 2, parts: 1 });
    expect(onArrive(st, 1, { ...msg(1), ssn: 1 })).toEqual({ kind: 'duplicate', loggedIn: 0 });
    expect(onArrive(st, 1, { ...msg(1), ssn: 3 })).toEqual({ kind: 'gap', expected: 2 });
  });

  it('a message is received only once logged (RBML), and logging owes the sender an acknowledgement', () => {
    const st = createChannelState(0, 3);
    onArrive(st, 1, { ...msg(4), ssn: 1 });
    onArrive(st, 2, { ...msg(4), ssn: 1 });
    expect(take(st, { source: 1, tag: 4, comm: 0 }, 0, true)).toBeNull();
    expect([...onLogged(st, 1)]).toEqual([[1, 1]]);
    expect(take(st, { source: 1, tag: 4, comm: 0 }, 0, true)?.source).toBe(1);
    expect([...onLogged(st, 2)]).toEqual([[2, 1]]);
    expect(onArrive(st, 2, { ...msg(4), ssn: 1 })).toEqual({ kind: 'duplicate', loggedIn: 1 });
  });

  it('a wildcard takes the earliest-arrived match; ANY_TAG never takes library traffic', () => {
    const st = createChannelState(0, 3);
    onArrive(st, 2, { ...msg(-5), ssn: 1 });
    onArrive(st, 2, { ...msg(7), ssn: 2 });
    onArrive(st, 1, { ...msg(7), ssn: 1 });
    onLogged(st, 3);
    expect(take(st, { source: ANY_SOURCE, tag: ANY_TAG, comm: 0 }, 0, true)?.source).toBe(2);
    expect(take(st, { source: ANY_SOURCE, tag: ANY_TAG, comm: 0 }, 1, true)?.source).toBe(1);
    expect(take(st, { source: ANY_SOURCE, tag: ANY_TAG, comm: 0 }, 2, true)).toBeNull();
  });
});

describe('replay (radic-hmpl A.2.7, PROTOCOL §11.3)', () => {
  it('a logged determinant forces the message a wildcard receive takes, whatever arrived first', () => {
    const st = createChannelState(0, 3);
    replayMessage(st, 2, 1, { ...msg(7), ssn: 1 });
    replayMessage(st, 1, 2, { ...msg(7), ssn: 1 });
    replayDeterminant(st, 3, 0, { source: 1, ssn: 1 });
    expect(take(st, { source: ANY_SOURCE, tag: 7, comm: 0 }, 0, true)?.source).toBe(1);
    expect(take(st, { source: ANY_SOURCE, tag: 7, comm: 0 }, 1, true)?.source).toBe(2);
    expect(st.lastIn).toEqual([0, 1, 1]);
    expect(nextLogPos(st)).toBe(4);
  });

  it('a determinant whose message has not arrived yet makes the receive wait for exactly it', () => {
    const st = createChannelState(0, 3);
    replayDeterminant(st, 1, 0, { source: 2, ssn: 1 });
    onArrive(st, 1, { ...msg(7), ssn: 1 });
    onLogged(st, 2);
    expect(take(st, { source: ANY_SOURCE, tag: 7, comm: 0 }, 0, true)).toBeNull();
    onArrive(st, 2, { ...msg(7), ssn: 1 });
    onLogged(st, 3);
    expect(take(st, { source: ANY_SOURCE, tag: 7, comm: 0 }, 0, true)?.source).toBe(2);
  });
});
