// The per-task signal rules (src/core/task-signals.ts; spec §4.5–4.6, PROTOCOL §9.2): epochs,
// matching, acceptance at quorum, early rejection and the timeout, and the quorum in force.
import { describe, expect, it } from 'vitest';
import {
  accept, addGroupRequest, createTaskSignals, groupTimedOut, judgeGroupRequest, nextBroadcastEpoch, NON_MATCHING, quorumInForce,
} from '../../../src/core/task-signals.ts';

const SYNC = 4;
const M3 = [0, 1, 2];
const M4 = [0, 1, 2, 3];

describe('task signal rules', () => {
  it('a broadcast increments the epoch first and drops the requests collected (spec §4.6 steps 3, 6)', () => {
    const s = createTaskSignals(4);
    expect(addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M4, 0).kind).toBe('wait');
    expect(nextBroadcastEpoch(s)).toBe(1);
    expect(s.pending).toBeNull();
    accept(s);
    expect(s.epoch).toBe(2);
  });

  it('requests match on signum and arg; the quorum accepts the matching value (spec §4.5)', () => {
    const s = createTaskSignals(3);
    expect(addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M4, 0).kind).toBe('wait');
    expect(addGroupRequest(s, { vpid: 1, signum: SYNC, arg: 2 }, M4, 0).kind).toBe('wait');
    expect(addGroupRequest(s, { vpid: 2, signum: SYNC, arg: 1 }, M4, 0).kind).toBe('wait');
    expect(addGroupRequest(s, { vpid: 3, signum: SYNC, arg: 1 }, M4, 0)).toEqual({ kind: 'accept', signum: SYNC, arg: 1 });
  });

  it('a process counts once per epoch', () => {
    const s = createTaskSignals(2);
    addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M3, 0);
    expect(addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M3, 0).kind).toBe('duplicate');
  });

  it('early rejection: as soon as no value can reach the quorum (A6)', () => {
    const s = createTaskSignals(3);
    expect(addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 0 }, M4, 0).kind).toBe('wait'); // 1 + 3 ≥ 3
    expect(addGroupRequest(s, { vpid: 1, signum: SYNC, arg: 1 }, M4, 0).kind).toBe('wait'); // 1 + 2 ≥ 3
    expect(addGroupRequest(s, { vpid: 2, signum: SYNC, arg: 2 }, M4, 0).kind).toBe('disagree'); // 1 + 1 < 3
  });

  it('rule 71: a broadcast request counted as a request that matches nothing', () => {
    const s = createTaskSignals(3);
    addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M4, 0);
    expect(addGroupRequest(s, { vpid: 3, signum: NON_MATCHING, arg: 0 }, M4, 0).kind).toBe('wait');
    addGroupRequest(s, { vpid: 1, signum: SYNC, arg: 1 }, M4, 0);
    expect(addGroupRequest(s, { vpid: 2, signum: SYNC, arg: 1 }, M4, 0).kind).toBe('accept');
  });

  it('rule 71: two broadcast requests do not match each other either', () => {
    const s = createTaskSignals(2);
    expect(addGroupRequest(s, { vpid: 0, signum: NON_MATCHING, arg: 0 }, M3, 0).kind).toBe('wait');
    // 0 + 1 unheard < 2: no value can reach the quorum.
    expect(addGroupRequest(s, { vpid: 1, signum: NON_MATCHING, arg: 0 }, M3, 0).kind).toBe('disagree');
  });

  it('a request matches only one with both the same signum and the same arg', () => {
    const s = createTaskSignals(2);
    expect(addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M4, 0).kind).toBe('wait');
    expect(addGroupRequest(s, { vpid: 1, signum: SYNC, arg: 2 }, M4, 0).kind).toBe('wait');
    expect(addGroupRequest(s, { vpid: 2, signum: SYNC + 1, arg: 1 }, M4, 0).kind).toBe('wait');
    expect(addGroupRequest(s, { vpid: 3, signum: SYNC + 1, arg: 2 }, M4, 0)).toEqual({ kind: 'disagree' });
  });

  it('the value most requested is judged, wherever it stands among the requests', () => {
    // Four requests collected while members were many; the last is the odd one out.
    const s = createTaskSignals(3);
    s.pending = { firstTick: 0, entries: [{ vpid: 0, signum: SYNC, arg: 1 }, { vpid: 1, signum: SYNC, arg: 1 }, { vpid: 2, signum: SYNC, arg: 1 }, { vpid: 3, signum: SYNC, arg: 2 }] };
    expect(judgeGroupRequest(s, M4)).toEqual({ kind: 'accept', signum: SYNC, arg: 1 });
  });

  it('when every member that asked has ended, nothing is pending: no timeout, no rejection, and the next request starts afresh', () => {
    const s = createTaskSignals(3);
    addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M4, 10);
    expect(judgeGroupRequest(s, [1, 2, 3])).toEqual({ kind: 'wait' });
    expect(s.pending).toBeNull();
    expect(groupTimedOut(s, 1_000, 20)).toBe(false);
    // With no member left at all: still nothing to reject.
    const t = createTaskSignals(3);
    addGroupRequest(t, { vpid: 1, signum: SYNC, arg: 1 }, [1, 2], 500);
    expect(judgeGroupRequest(t, [])).toEqual({ kind: 'wait' });
    expect(t.pending).toBeNull();
  });

  it('the timeout counts ordered ticks from the first request of the epoch (A7)', () => {
    const s = createTaskSignals(3);
    expect(groupTimedOut(s, 100, 20)).toBe(false);
    addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M4, 10);
    addGroupRequest(s, { vpid: 1, signum: SYNC, arg: 1 }, M4, 25);
    expect(groupTimedOut(s, 29, 20)).toBe(false);
    expect(groupTimedOut(s, 30, 20)).toBe(true);
  });

  it('a member that ended no longer counts: its request is dropped and the rest judged again', () => {
    const s = createTaskSignals(3);
    addGroupRequest(s, { vpid: 0, signum: SYNC, arg: 1 }, M3, 0);
    addGroupRequest(s, { vpid: 1, signum: SYNC, arg: 1 }, M3, 0);
    // Member 2 exits: the quorum in force drops to 2, which 0 and 1 already meet.
    expect(judgeGroupRequest(s, [0, 1])).toEqual({ kind: 'accept', signum: SYNC, arg: 1 });
    const t = createTaskSignals(3);
    addGroupRequest(t, { vpid: 0, signum: SYNC, arg: 1 }, [0, 1, 2, 3, 4], 0);
    addGroupRequest(t, { vpid: 1, signum: SYNC, arg: 9 }, [0, 1, 2, 3, 4], 0);
    // 0 and 1 exit: 2, 3 and 4 could still match, so 2's request does not end it.
    expect(addGroupRequest(t, { vpid: 2, signum: SYNC, arg: 1 }, [2, 3, 4], 0).kind).toBe('wait');
  });

  it('the quorum in force is capped by the live members, and at least 1 (PROTOCOL §9.2 rule 5)', () => {
    const s = createTaskSignals(4);
    expect(quorumInForce(s, 4)).toBe(4);
    expect(quorumInForce(s, 3)).toBe(3);
    s.quorum = 2;
    expect(quorumInForce(s, 3)).toBe(2);
    expect(quorumInForce(createTaskSignals(0), 0)).toBe(1);
  });
});
