// The replicated state's transition and canonical digest (docs/PROTOCOL.md §5.4, §5.7).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  adoptIncarnation, applyRequest, digestState, encodeState, expectedCsn, initialState,
} from '../../../src/core/replicated-state.ts';

const agents = [{ id: 'a1', node: 'n1' }, { id: 'a2', node: 'n2' }];
const hash = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());
const echo = (count: number, fanout: 'self' | 'all') => ({ type: 'echo' as const, tag: 't', fanout, count, data: new Uint8Array() });

describe('replicated state', () => {
  it('is canonical: the same history gives the same bytes whatever order maps were filled in', () => {
    const a = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: agents });
    const b = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [...agents].reverse() });
    for (const s of [a, b]) {
      adoptIncarnation(s, 'a1', 5);
      adoptIncarnation(s, 'a2', 6);
    }
    b.csnReceived = new Map([...b.csnReceived].reverse());
    expect(Buffer.from(encodeState(a))).toEqual(Buffer.from(encodeState(b)));
    expect(digestState(a, hash)).toEqual(digestState(b, hash));
  });

  it('echo emits one GSSN per copy and joined destination, chained per agent through prevGssn', () => {
    const s = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: agents });
    for (const a of ['a1', 'a2']) applyRequest(s, a, { type: 'node.join', slots: 4, resync: false });
    const r = applyRequest(s, 'a1', echo(2, 'all'));
    expect(r.messages.map((m) => [m.gssn, m.dest, m.prevGssn])).toEqual([[1, 'a1', 0], [2, 'a2', 0], [3, 'a1', 1], [4, 'a2', 2]]);
    expect(s.gssn).toBe(4);
  });

  it('an agent that has not joined receives no group message: its chain is not defined yet (PROTOCOL §5.7)', () => {
    const s = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: agents });
    applyRequest(s, 'a1', { type: 'node.join', slots: 4, resync: false });
    expect(applyRequest(s, 'a1', echo(1, 'all')).messages.map((m) => m.dest)).toEqual(['a1']);
  });

  it('a faulty agent cannot ask for more than the burst limit', () => {
    const s = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: agents });
    expect(applyRequest(s, 'a1', echo(1_000_000, 'self')).messages).toHaveLength(1000);
  });

  it('incarnations: the next CSN of a newer incarnation is 1; an older incarnation is refused', () => {
    const s = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: agents });
    expect(expectedCsn(s, 'a1', 7)).toBe(1);
    adoptIncarnation(s, 'a1', 7);
    s.csnReceived.set('a1', 4);
    s.lastGssnTo.set('a1', 30);
    expect(expectedCsn(s, 'a1', 7)).toBe(5);
    expect(expectedCsn(s, 'a1', 6)).toBeNull();
    expect(expectedCsn(s, 'a1', 8)).toBe(1);
    adoptIncarnation(s, 'a1', 8);
    expect(s.csnReceived.get('a1')).toBe(0);
    expect(applyRequest(s, 'a1', echo(1, 'self')).messages[0]?.prevGssn).toBe(0); // the chain restarts
    adoptIncarnation(s, 'a1', 7); // never goes back
    expect(s.clientInc.get('a1')).toBe(8);
  });

  it('an error report raises a suspicion; two agents\' reports against one replica make every replica accuse it (PROTOCOL §10.2)', () => {
    const s = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: agents });
    const r = applyRequest(s, 'a1', { type: 'error.report', gssn: 3, count: 2, kind: 'mismatch', suspects: ['r2'] });
    expect(r.report).toEqual({ gssn: 3, count: 2, kind: 'mismatch', suspects: ['r2'] });
    expect(r.accuse).toEqual([]);
    // The same agent again does not count twice; a second agent does.
    expect(applyRequest(s, 'a1', { type: 'error.report', gssn: 4, count: 1, kind: 'mismatch', suspects: ['r2'] }).accuse).toEqual([]);
    expect(applyRequest(s, 'a2', { type: 'error.report', gssn: 4, count: 1, kind: 'mismatch', suspects: ['r2', 'r9'] }).accuse).toEqual(['r2']);
    // Timeouts count only once an agent has reported them three times.
    for (const n of [1, 2]) expect(applyRequest(s, 'a1', { type: 'error.report', gssn: n, count: 1, kind: 'replica-timeout', suspects: ['r3'] }).accuse).toEqual([]);
    for (const n of [1, 2]) expect(applyRequest(s, 'a2', { type: 'error.report', gssn: n, count: 1, kind: 'replica-timeout', suspects: ['r3'] }).accuse).toEqual([]);
    expect(applyRequest(s, 'a1', { type: 'error.report', gssn: 3, count: 1, kind: 'replica-timeout', suspects: ['r3'] }).accuse).toEqual([]);
    expect(applyRequest(s, 'a2', { type: 'error.report', gssn: 3, count: 1, kind: 'replica-timeout', suspects: ['r3'] }).accuse).toEqual(['r3']);
  });
});
