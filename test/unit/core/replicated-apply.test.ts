// The replicated state's transitions on an agent's request (src/core/replicated-apply.ts;
// docs/PROTOCOL.md §5.4, §5.7, §10.2): echo bursts and their GSSN chains, error reports.
import { describe, expect, it } from 'vitest';
import { applyRequest } from '../../../src/core/replicated-apply.ts';
import { initialState } from '../../../src/core/replicated-state.ts';

const agents = [{ id: 'a1', node: 'n1' }, { id: 'a2', node: 'n2' }];
const echo = (count: number, fanout: 'self' | 'all') => ({ type: 'echo' as const, tag: 't', fanout, count, data: new Uint8Array() });

describe('replicated state transitions', () => {
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
