// The replicated state's transition and canonical digest (docs/PROTOCOL.md §5.4, §5.7).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { applyRequest } from '../../../src/core/replicated-apply.ts';
import { adoptIncarnation, digestState, encodeState, expectedCsn, initialState } from '../../../src/core/replicated-state.ts';

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
});
