// A replacement replica joining the group (docs/PROTOCOL.md §10.6), stepped on the replica and
// agent cores with the in-memory harness: the group commands an agent to start a spare, the test
// starts that core as the agent's driver would, and the members transfer it the state. The case
// here is the one test/e2e/hosts-added-spares.test.ts met on a loaded machine: a spare id that
// starts again as a new incarnation while a backup still holds a session of the dead one.
import { describe, expect, it } from 'vitest';
import type { GroupCommand } from '../../../src/core/wire/messages.ts';
import { makeCluster } from './harness.ts';

type Spawn = Extract<GroupCommand, { type: 'replica.spawn' }>;
type Cluster = ReturnType<typeof makeCluster>;

/** The `replica.spawn` commands for `id` agents delivered so far (one per agent that got it). */
const spawnsOf = (c: Cluster, id: string): { agent: string; command: Spawn }[] =>
  c.effects('deliver.command').flatMap((o) => (o.effect.command.type === 'replica.spawn' && o.effect.command.id === id ? [{ agent: o.proc, command: o.effect.command }] : []));

/** Run until the `n`-th `replica.spawn` of `id` is delivered, then start that core. */
function startOnCommand(c: Cluster, id: string, n: number, inc: number, withinMs: number) {
  const end = c.now() + withinMs;
  while (spawnsOf(c, id).length < n && c.now() < end) c.run(10);
  const spawn = spawnsOf(c, id)[n - 1];
  expect(spawn, `replica.spawn #${n} of ${id} within ${withinMs} ms`).toBeDefined();
  const { view, primary, replicas } = (spawn as { command: Spawn }).command;
  return { core: c.startReplica(id, inc, { view, primary, replicas }), view };
}

const joinedAt = (c: Cluster, proc: string, id: string) =>
  c.effects('deliver.input', proc).filter((o) => o.effect.input.type === 'replica.add' && o.effect.input.id === id).map((o) => o.at);

describe('a replacement replica (PROTOCOL §10.6)', () => {
  it('§10.6: a spare id started again gets the state from two members, though a backup executed its `replica.add` while it still held a session of the dead incarnation', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    // r2 dies: the group condemns it and starts r4, the one spare, which joins.
    c.down.add('r2');
    const first = startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    expect(first.core.phase()).toBe('serving');
    // r4 dies in turn: no fresh spare is left, so r4 starts again, a new incarnation. Its
    // handshake with r3 is held back until r3 has executed the `replica.add`: r3 sends the state
    // while its only session with r4 is the dead incarnation's.
    c.down.add('r4');
    let held = true;
    c.filters.push((from, to, item) => (held && item.type === 'hello' && [from, to].sort().join() === 'r3,r4' ? null : item));
    const second = startOnCommand(c, 'r4', 2, 2, 5_000);
    const addsBefore = joinedAt(c, 'r3', 'r4').length;
    const end = c.now() + 2_000;
    while (joinedAt(c, 'r3', 'r4').length === addsBefore && c.now() < end) c.run(1);
    expect(joinedAt(c, 'r3', 'r4'), 'r3 executed the second replica.add').toHaveLength(addsBefore + 1);
    held = false;
    c.run(2_000);
    // The new incarnation installed a state two members vouched for, and serves.
    expect(second.core.phase()).toBe('serving');
    const serving = c.replicas.filter((r) => r.id !== 'r2');
    expect(serving.map((r) => r.id).sort()).toEqual(['r1', 'r3', 'r4']);
    expect(new Set(serving.map((r) => r.digestHex())).size).toBe(1);
    expect(new Set(serving.map((r) => r.rsn())).size).toBe(1);
  });

  it('§10.6: a second replacement takes the state from the members the group has when it starts, one of them the first replacement: a replica cluster.json never named as a member', () => {
    const c = makeCluster(5, { spares: ['r4', 'r5'] });
    c.run(300);
    c.down.add('r2');
    const first = startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    expect(first.core.phase()).toBe('serving');
    // r3 dies: r5 starts with the group r1, r4, which only the command names.
    c.down.add('r3');
    const second = startOnCommand(c, 'r5', 1, 1, 5_000);
    expect(spawnsOf(c, 'r5')[0]?.command).toMatchObject({ primary: 'r1', replicas: ['r1', 'r4'] });
    c.run(2_000);
    expect(second.core.phase()).toBe('serving');
    const serving = c.replicas.filter((r) => ['r1', 'r4', 'r5'].includes(r.id));
    expect(serving.map((r) => r.state().replicas)).toEqual([['r1', 'r4', 'r5'], ['r1', 'r4', 'r5'], ['r1', 'r4', 'r5']]);
    expect(new Set(serving.map((r) => r.digestHex())).size).toBe(1);
  });

  it('§10.6, §10.2: a member does not hold the dead incarnation\'s silence against the new one: no diagnosis of r4 at the first check after it joined, though its predecessor was silent for long', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.down.add('r2');
    startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    c.down.add('r4');
    // As on a loaded host, where the new r4's connection to r3 is slow to come up: r3 hears
    // nothing from it until one check period after r3 executed its replica.add.
    let held = true;
    c.filters.push((from, to, item) => (held && from === 'r4' && to === 'r3' ? null : item));
    startOnCommand(c, 'r4', 2, 2, 5_000);
    const addsBefore = joinedAt(c, 'r3', 'r4').length;
    const end = c.now() + 2_000;
    while (joinedAt(c, 'r3', 'r4').length === addsBefore && c.now() < end) c.run(1);
    const addedAt = joinedAt(c, 'r3', 'r4')[addsBefore] as number;
    c.runUntil(addedAt + c.membership.timing.replicaCheckMs);
    held = false;
    const silentAfter = c.effects('log', 'r3').filter((o) => o.at >= addedAt && o.effect.event === 'diagnosis.initiated' && o.effect.fields?.['target'] === 'r4');
    expect(silentAfter.map((o) => o.effect.fields), 'r3 diagnosing the new r4 within one check of its replica.add').toEqual([]);
    c.run(2_000);
    expect(c.replicas.find((r) => r.id === 'r4')?.phase()).toBe('serving');
  });
});
