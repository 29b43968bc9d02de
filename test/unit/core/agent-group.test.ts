// A new agent incarnation begins from the group as two replicas reported it when it started
// (PROTOCOL §10.7: AgentOptions.group, or the `group` input while it runs), not from cluster.json's initial three: after two
// replacements (r1 and r2 condemned, r7 and r4 in their place) only r3 of the initial three is
// a member, so an agent starting from them could never see two matching copies again. Found by
// bench/tasks.ts on namespace hosts: a node reset after the second replacement never ran a task.
import { describe, expect, it } from 'vitest';
import { createAgent } from '../../../src/core/agent.ts';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, Membership } from '../../../src/core/node.ts';
import { hmacSigner } from './harness.ts';

const membership: Membership = {
  cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: ['r4', 'r5', 'r6', 'r7'],
  agents: [{ id: 'a1', node: 'n1' }], scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
};
const sentTo = (effects: CoreEffect[]) => [...new Set(effects.flatMap((e) => (e.type === 'send' ? [e.to] : [])))].sort();

describe('an agent incarnation and the group (PROTOCOL §10.7)', () => {
  it('without a reported group it starts from cluster.json\'s initial three, view 0', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1') });
    expect(a.status(0).view).toBe(0);
    expect(sentTo(a.step({ type: 'tick', nowMs: 0 }))).toEqual(['r1', 'r2', 'r3']);
  });

  it('with the group two replicas reported it starts there: its view, its members, its primary', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1'), group: { view: 4, primary: 'r3', replicas: ['r3', 'r7', 'r4'] } });
    expect(a.status(0).view).toBe(4);
    expect(a.status(0).replicas.map((r) => r.id).sort()).toEqual(['r3', 'r4', 'r7']);
    expect(sentTo(a.step({ type: 'tick', nowMs: 0 }))).toEqual(['r3', 'r4', 'r7']);
  });

  it('a reported group whose primary is not a member is ignored', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1'), group: { view: 4, primary: 'r1', replicas: ['r3', 'r7', 'r4'] } });
    expect(a.status(0).view).toBe(0);
  });

  it('a running incarnation takes the group two replicas reported (the `group` input) like a delivered `replicas` command: a higher view only', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1') });
    a.step({ type: 'tick', nowMs: 0 });
    a.step({ type: 'group', nowMs: 10, view: 4, primary: 'r3', replicas: ['r3', 'r7', 'r4'], ports: [], added: [] });
    expect(a.status(10).view).toBe(4);
    expect(a.status(10).replicas.map((r) => r.id).sort()).toEqual(['r3', 'r4', 'r7']);
    a.step({ type: 'group', nowMs: 20, view: 2, primary: 'r2', replicas: ['r2', 'r3', 'r7'], ports: [], added: [] }); // older: ignored
    expect(a.status(20).view).toBe(4);
  });
});

