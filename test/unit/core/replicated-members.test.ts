// Membership changes and the shutdown in the replicated state (src/core/replicated-members.ts;
// PROTOCOL §10.11, §10.12) called by hand on one ReplicatedState: a node added, refused when a
// name, id or port clashes, drained and gone once empty, and a shutdown that happens once.
import { describe, expect, it } from 'vitest';
import { addNode, finishDrains, removeNode, shutdown, wasRemoved } from '../../../src/core/replicated-members.ts';
import { initialState, noResult } from '../../../src/core/replicated-state.ts';
import type { NodeAdd } from '../../../src/core/wire/messages.ts';

const fresh = () => initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [{ id: 'a1', node: 'n1' }, { id: 'a4', node: 'n4' }] });
const add = (agent: string, node: string, over: Partial<NodeAdd> = {}): NodeAdd => ({
  type: 'node.add', nonce: `add-${agent}`, agent, node, address: `${node}.host`, port: 7000, publicKey: new Uint8Array(32), spares: [], ...over,
});
const op = { bytes: new Uint8Array([1]), sig: new Uint8Array([2]) };

describe('replicated-members by hand', () => {
  it('adds a node with a new name and agent id, recording the signed change; refuses a clash of either', () => {
    const s = fresh();
    expect(addNode(s, add('a5', 'n5'), op).outcome.ok).toBe(true);
    expect(s.nodes.get('a5')).toEqual({ node: 'n5', joined: false, slots: 0, failed: false, inc: 0, draining: false, protector: '' });
    expect(s.members.map((c) => [c.kind, c.agent, c.node])).toEqual([['add', 'a5', 'n5']]);
    expect(addNode(s, add('a6', 'n5'), op).outcome.text).toBe('cannot add n5: a node n5 is already in this cluster');
    expect(addNode(s, add('r1', 'n6'), op).outcome.text).toBe('cannot add n6: r1 is already a process of this cluster');
    expect(addNode(s, add('a7', 'n7', { spares: [{ id: 's7', port: 7000, publicKey: new Uint8Array(32) }] }), op).outcome.ok).toBe(false);
    expect(s.members).toHaveLength(1);
  });

  it('a removed node drains, then leaves once no task holds a slot on it; its name is never used again', () => {
    const s = fresh();
    const r = noResult();
    expect(removeNode(s, { type: 'node.remove', nonce: 'rm', node: 'n4', kill: false }, op, r).outcome).toEqual({ ok: true, text: 'n4 removed' });
    expect(s.nodes.get('a4')?.draining).toBe(true);
    expect(wasRemoved(s, 'a4')).toBe(true);
    finishDrains(s, r);
    expect(s.nodes.has('a4')).toBe(false);
    expect(r.events.map((e) => e.text)).toContain('node n4 removed (agent a4)');
    expect(addNode(s, add('a8', 'n4'), op).outcome.text).toBe('cannot add n4: a node n4 was removed from this cluster: a name is never used again');
  });

  it('a node hosting a replica is not removed', () => {
    const s = fresh();
    const r = noResult();
    expect(removeNode(s, { type: 'node.remove', nonce: 'rm', node: 'n1', kill: false }, op, r).outcome)
      .toEqual({ ok: false, text: 'cannot remove n1: it hosts replica r1 of the manager group' });
  });

  it('the shutdown is taken once, at its RSN, and then nothing new is added', () => {
    const s = fresh();
    s.rsn = 9;
    const r = noResult();
    expect(shutdown(s, r).outcome.ok).toBe(true);
    expect(s.shutdownAt).toBe(9);
    expect(r.shutdown).toEqual({ rsn: 9 });
    s.rsn = 10;
    expect(shutdown(s, noResult()).outcome.text).toBe('the cluster is already shutting down (ordered at RSN 9)');
    expect(addNode(s, add('a5', 'n5'), op).outcome.text).toBe('cannot add n5: the cluster is shutting down');
  });
});
