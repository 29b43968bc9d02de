// The manager's machines at work (src/core/cluster-machines.ts; spec §6, §6.1): one run settled
// by hand over a ClusterState, so each step is visible: a request waits while no node has room,
// is placed all-or-nothing once one does (spread to the node with the most free slots), and the
// gang-scheduling turn goes to one task at a time.
import { describe, expect, it } from 'vitest';
import { submitTask } from '../../../src/core/cluster-inputs.ts';
import { settle } from '../../../src/core/cluster-machines.ts';
import { newRun } from '../../../src/core/cluster-run.ts';
import { createClusterState, taskState, type NodeRecord } from '../../../src/core/cluster-state.ts';
import type { ProcessId } from '../../../src/core/ports.ts';
import type { TaskSubmit } from '../../../src/core/wire/messages.ts';
import { TIMERS } from './cluster-driver.ts';

const submit = (size: number): TaskSubmit => ({
  type: 'task.submit', nonce: '0'.repeat(32), name: 'job', size, file: '/bin/sleep', args: [], cwd: '/tmp', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
});
const node = (name: string, slots: number, joined = true): NodeRecord => ({ node: name, joined, slots, failed: false, inc: 1, draining: false, protector: '' });

describe('cluster-machines stepped by hand', () => {
  it('a request waits with its reason, is placed once room appears, and the start turn goes to one task at a time', () => {
    const cs = createClusterState();
    const nodes = new Map<ProcessId, NodeRecord>([['a1', node('n1', 1, false)], ['a2', node('n2', 2, false)]]);
    expect(submitTask(cs, nodes, TIMERS, submit(3), 1).outcome).toEqual({ ok: true, text: 't1' });
    expect(submitTask(cs, nodes, TIMERS, submit(1), 2).outcome).toEqual({ ok: true, text: 't2' });
    expect(cs.allocations).toEqual([{ task: 't1', vpids: [0, 1, 2] }, { task: 't2', vpids: [0] }]);
    expect(cs.tasks.get('t1')?.waitReason).toBe('needs 3 slots, 0 free on 0 healthy nodes');

    // The nodes join: one run places both, in FIFO order, spread by free slots then node name.
    nodes.set('a1', node('n1', 2));
    nodes.set('a2', node('n2', 2));
    const effects = settle(newRun(cs, nodes));
    expect(cs.allocations).toEqual([]);
    const placed = effects.flatMap((e) => (e.type === 'event' && e.text.includes('placed') ? [e.text] : []));
    expect(placed).toEqual(['t1 placed: n1×2 n2×1', 't2 placed: n2×1']);
    // One start at a time (spec §6): t1 has the turn and commands its spawns; t2 waits for it.
    expect(cs.serviceActive).toEqual({ task: 't1', service: 'start' });
    expect(cs.serviceQueue).toEqual([{ task: 't2', service: 'start' }]);
    const t1 = cs.tasks.get('t1');
    expect(t1 === undefined ? null : taskState(t1)).toBe('starting');
    // In VPID order: 0 to n1 (a tie, by name), 1 to n2 (more free), 2 to n1 (a tie again).
    expect(effects.filter((e) => e.type === 'command').map((e) => e.type === 'command' && `${e.agent}:${e.command.type}`))
      .toEqual(['a1:proc.spawn', 'a2:proc.spawn', 'a1:proc.spawn']);
    // Settling again with nothing new changes nothing.
    expect(settle(newRun(cs, nodes))).toEqual([]);
  });
});
