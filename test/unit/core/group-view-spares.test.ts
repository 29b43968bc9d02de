// Replica recovery with spares bound to nodes (docs/PROTOCOL.md §10.6, src/core/group-view.ts).
// `trine init` binds each spare id to the agent host that holds its key (membership.spareNodes),
// so a replacement can start only where its key is: the group chooses a node that has a free
// spare bound to it (or an unbound one) and gives the replacement that node's first free spare.
// With no bindings (`trine up`) the choice is exactly §10.6's: the first free pool id, on the
// first live node by agent id that hosts no member and was not tried. The group view is stepped
// by hand, as the replicated state steps it, so every choice is visible.
import { describe, expect, it } from 'vitest';
import {
  applyAdd, applyCondemn, initialGroupView, recoveryStep, type GroupContext, type GroupView, type ViewChange,
} from '../../../src/core/group-view.ts';
import type { ProcessId } from '../../../src/core/ports.ts';

const TIMEOUT_TICKS = 10;
const agents = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `a${i + 1}`, node: `n${i + 1}` }));

/** Spares laid out as `trine init` lays them out (src/io/deploy.ts): `perHost` rounds over the
 *  agent nodes n1..nN, r4 on n1, r5 on n2, … */
function boundSpares(nodes: number, perHost: number): { pool: ProcessId[]; spareNodes: Map<ProcessId, string> } {
  const spareNodes = new Map<ProcessId, string>();
  for (let k = 0; k < perHost * nodes; k++) spareNodes.set(`r${4 + k}`, `n${(k % nodes) + 1}`);
  return { pool: ['r1', 'r2', 'r3', ...spareNodes.keys()], spareNodes };
}

/** A group of r1..r3 on n1..n3 (primary r1) and the context the replicated state would pass. */
function world(opts: { nodes: number; pool: ProcessId[]; spareNodes?: Map<ProcessId, string> }): { g: GroupView; ctx: GroupContext } {
  const g = initialGroupView(['r1', 'r2', 'r3'], ['n1', 'n2', 'n3']);
  const ctx: GroupContext = {
    replicas: ['r1', 'r2', 'r3'], primary: 'r1', liveAgents: agents(opts.nodes), pool: opts.pool,
    spareNodes: opts.spareNodes ?? new Map(), added: [], tick: 0, replicaStartTimeoutTicks: TIMEOUT_TICKS,
  };
  return { g, ctx };
}

/** Adopt a view change into the context, as replicated-state.ts absorbView does. */
function adopt(ctx: GroupContext, change: ViewChange | null): ViewChange | null {
  if (change !== null) {
    ctx.replicas = change.replicas;
    ctx.primary = change.primary;
  }
  return change;
}

const spawns = (change: ViewChange | null) =>
  (change?.commands ?? []).flatMap((c) => (c.command.type === 'replica.spawn' ? [{ agent: c.agent, id: c.command.id }] : []));
const kills = (change: ViewChange | null) =>
  (change?.commands ?? []).flatMap((c) => (c.command.type === 'replica.kill' ? [{ agent: c.agent, id: c.command.id }] : []));

const condemn = (ctx: GroupContext, g: GroupView, target: ProcessId) => adopt(ctx, applyCondemn(ctx, g, target, 'silent'));
const join = (ctx: GroupContext, g: GroupView, id: ProcessId) => adopt(ctx, applyAdd(ctx, g, id, 0));
const step = (ctx: GroupContext, g: GroupView) => adopt(ctx, recoveryStep(ctx, g));
const fail = (ctx: GroupContext, node: string) => {
  ctx.liveAgents = ctx.liveAgents.filter((a) => a.node !== node);
};

describe('spares bound to nodes (PROTOCOL §10.6)', () => {
  it("§10.6: a condemned replica's replacement starts on a node with a bound spare, with that node's spare id, not the first pool id", () => {
    // n1..n4, two spares each: r4..r7 then r8..r11 on n1..n4.
    const { g, ctx } = world({ nodes: 4, ...boundSpares(4, 2) });
    const change = condemn(ctx, g, 'r1');
    expect(ctx.replicas).toEqual(['r2', 'r3']);
    // n1 (the condemned replica's node) counts as tried, n2 and n3 host members: n4, whose
    // first spare is r7. The first free pool id, r4, is n1's: n4's agent holds no key for it.
    expect(spawns(change)).toEqual([{ agent: 'a4', id: 'r7' }]);
    expect(g.recovery).toMatchObject({ id: 'r7', node: 'n4', tried: ['n1', 'n4'] });
    expect(g.replicaNodes.get('r7')).toBe('n4');
    expect(change?.events.map((e) => e.text)).toContain('replica r7 to start on n4');
    // It joins under that id.
    expect(join(ctx, g, 'r4')).toBeNull();
    expect(join(ctx, g, 'r7')?.replicas).toEqual(['r2', 'r3', 'r7']);
  });

  it('§10.6: a node with no spare bound to it is skipped, though it is first by agent id', () => {
    // Spares only on n1 and n5: n4 (live, hosting nothing, untried) cannot start any of them.
    const spareNodes = new Map([['r4', 'n1'], ['r5', 'n5']]);
    const { g, ctx } = world({ nodes: 5, pool: ['r1', 'r2', 'r3', 'r4', 'r5'], spareNodes });
    expect(spawns(condemn(ctx, g, 'r1'))).toEqual([{ agent: 'a5', id: 'r5' }]);
  });

  it('§10.6: a node whose bound spares are all used is skipped', () => {
    // One spare per node: r4 n1, r5 n2, r6 n3, r7 n4, r8 n5.
    const { g, ctx } = world({ nodes: 5, ...boundSpares(5, 1) });
    expect(spawns(condemn(ctx, g, 'r1'))).toEqual([{ agent: 'a4', id: 'r7' }]);
    join(ctx, g, 'r7');
    // r7 (n4's only spare) is condemned: n4 is tried; n1 is first, with r4.
    expect(spawns(condemn(ctx, g, 'r7'))).toEqual([{ agent: 'a1', id: 'r4' }]);
    join(ctx, g, 'r4');
    // r4 is condemned: n1 is tried; n4 is live, hosts no member and was not tried in this
    // replacement, but its only spare r7 is retired. So n5, with its own r8.
    const change = condemn(ctx, g, 'r4');
    expect(ctx.replicas).toEqual(['r2', 'r3']);
    expect(g.retired).toEqual(['r1', 'r7', 'r4']);
    expect(spawns(change)).toEqual([{ agent: 'a5', id: 'r8' }]);
    expect(g.recovery).toMatchObject({ id: 'r8', node: 'n5', tried: ['n1', 'n5'] });
  });

  it('§10.6: with every spare used, a retired spare id starts again (a new incarnation) on a live node that holds its key; the initial ids never do', () => {
    // One spare per node: r4 n1, r5 n2, r6 n3, r7 n4.
    const { g, ctx } = world({ nodes: 4, ...boundSpares(4, 1) });
    const replaced: ProcessId[] = [];
    // Condemn a member, let its replacement join, again and again: far more than the 4 spares.
    for (let round = 0; round < 10; round++) {
      const target = ctx.replicas.find((r) => !['r2', 'r3'].includes(r)) ?? 'r1';
      const change = condemn(ctx, g, target);
      const [spawn] = spawns(change);
      expect(spawn, `round ${round}: a replacement for ${target}`).toBeDefined();
      if (spawn === undefined) break;
      replaced.push(spawn.id);
      expect(ctx.replicas).not.toContain(spawn.id);
      // Its key is on the node it starts on; it never shares a node with a member.
      expect(`n${spawn.agent.slice(1)}`).toBe(ctx.spareNodes.get(spawn.id));
      expect(['n2', 'n3']).not.toContain(ctx.spareNodes.get(spawn.id));
      expect(g.retired).not.toContain(spawn.id);
      if (round >= 2) expect(change?.events.some((e) => e.text.endsWith('(a new incarnation of a retired spare id)'))).toBe(true);
      join(ctx, g, spawn.id);
    }
    // r5 and r6 are bound to n2 and n3, which host members: only n1's r4 and n4's r7 take turns.
    expect(replaced).toEqual(['r7', 'r4', 'r7', 'r4', 'r7', 'r4', 'r7', 'r4', 'r7', 'r4']);
    expect(g.retired).toContain('r1');
    expect(replaced).not.toContain('r1');
  });

  it('§10.6: an unbound spare may start on any node', () => {
    const spareNodes = new Map([['r4', 'n1']]); // r5 is bound to no node
    const { g, ctx } = world({ nodes: 4, pool: ['r1', 'r2', 'r3', 'r4', 'r5'], spareNodes });
    expect(spawns(condemn(ctx, g, 'r1'))).toEqual([{ agent: 'a4', id: 'r5' }]);
  });

  it('§10.6: when the chosen node fails before the replacement joins, the next attempt goes to another node with its own spare id', () => {
    // n1..n5, two spares each: r4..r8 then r9..r13.
    const { g, ctx } = world({ nodes: 5, ...boundSpares(5, 2) });
    expect(spawns(condemn(ctx, g, 'r1'))).toEqual([{ agent: 'a4', id: 'r7' }]);
    ctx.tick = 1;
    fail(ctx, 'n4');
    const change = step(ctx, g);
    expect(change?.events.map((e) => e.text)).toContain('replica r7: n4 failed before it joined: abandoned');
    expect(g.retired).toContain('r7');
    expect(kills(change)).toEqual([]); // no agent left on n4 to tell
    expect(spawns(change)).toEqual([{ agent: 'a5', id: 'r8' }]);
    expect(g.recovery).toMatchObject({ id: 'r8', node: 'n5', tried: ['n1', 'n4', 'n5'] });
    expect(g.replicaNodes.has('r7')).toBe(false);
    // n5 fails too: only the condemned replica's node is left; it is taken last, with its own r4.
    fail(ctx, 'n5');
    const last = step(ctx, g);
    expect(spawns(last)).toEqual([{ agent: 'a1', id: 'r4' }]);
    expect(g.recovery).toMatchObject({ id: 'r4', node: 'n1', tried: ['n1'] });
    expect(g.retired).toEqual(['r1', 'r7', 'r8']);
  });

  it('§10.6 (A24): a replacement that does not start in time is killed and the next goes to another node with its own spare id', () => {
    const { g, ctx } = world({ nodes: 5, ...boundSpares(5, 2) });
    condemn(ctx, g, 'r1');
    ctx.tick = TIMEOUT_TICKS - 1;
    expect(spawns(step(ctx, g))).toEqual([]); // not yet
    ctx.tick = TIMEOUT_TICKS;
    const change = step(ctx, g);
    expect(change?.events.map((e) => e.text)).toContain('replica r7 did not start on n4: abandoned');
    expect(kills(change)).toEqual([{ agent: 'a4', id: 'r7' }]);
    expect(spawns(change)).toEqual([{ agent: 'a5', id: 'r8' }]);
  });

  it('§10.6: with no free spare on any eligible node the replacement waits, and starts when such a node joins', () => {
    // Spares only on n2 and n3, which host members; n4 has none; n5 (not yet joined) has r6.
    const spareNodes = new Map([['r4', 'n2'], ['r5', 'n3'], ['r6', 'n5']]);
    const { g, ctx } = world({ nodes: 4, pool: ['r1', 'r2', 'r3', 'r4', 'r5', 'r6'], spareNodes });
    const change = condemn(ctx, g, 'r1');
    expect(spawns(change)).toEqual([]);
    expect(g.recovery?.node).toBeNull();
    expect(step(ctx, g)?.commands).toEqual([]);
    ctx.liveAgents = agents(5);
    expect(spawns(step(ctx, g))).toEqual([{ agent: 'a5', id: 'r6' }]);
  });
});

describe('no bindings: the choice of PROTOCOL §10.6 as before', () => {
  /** `trine up`'s pool: r1..r3 and six unbound spares. */
  const localPool = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9'];

  it('§10.6: the first free pool id on the first eligible node; after a timeout the next id, back on the condemned node', () => {
    const { g, ctx } = world({ nodes: 4, pool: localPool });
    expect(spawns(condemn(ctx, g, 'r1'))).toEqual([{ agent: 'a4', id: 'r4' }]);
    ctx.tick = TIMEOUT_TICKS;
    const change = step(ctx, g);
    expect(kills(change)).toEqual([{ agent: 'a4', id: 'r4' }]);
    // Every eligible node (n1, n4) was tried: start over from the first by agent id.
    expect(spawns(change)).toEqual([{ agent: 'a1', id: 'r5' }]);
    expect(g.recovery).toMatchObject({ id: 'r5', node: 'n1', tried: ['n1'] });
  });

  it('§10.6: with no spare id left the group runs with two replicas and says so', () => {
    const { g, ctx } = world({ nodes: 4, pool: ['r1', 'r2', 'r3'] });
    const change = condemn(ctx, g, 'r2');
    expect(spawns(change)).toEqual([]);
    expect(g.recovery).toBeNull();
    expect(change?.events.map((e) => e.text)).toContain('no spare replica id is left: the group runs with two replicas');
  });

  /** §10.6 as written, and as group-view.ts chose before spares could be bound: the id is the
   *  first free pool id (with none left, the spare id retired longest ago, again); the node the
   *  first live agent's that hosts no member and was not tried, or, all tried, the first that
   *  hosts no member. */
  function oldChoice(ctx: GroupContext, g: GroupView, replicas: readonly ProcessId[], retired: readonly ProcessId[], tried: readonly string[]) {
    const id = ctx.pool.find((p) => !replicas.includes(p) && !retired.includes(p))
      ?? retired.find((p) => ctx.pool.indexOf(p) >= 3 && !replicas.includes(p));
    if (id === undefined) return [];
    const hosting = new Set(replicas.map((r) => g.replicaNodes.get(r)));
    const pick = ctx.liveAgents.find((a) => !hosting.has(a.node) && !tried.includes(a.node))
      ?? (tried.length > 0 ? ctx.liveAgents.find((a) => !hosting.has(a.node)) : undefined);
    return pick === undefined ? [] : [{ agent: pick.id, id }];
  }

  /** A small seeded generator (mulberry32): the same seed replays the same run. */
  function rng(seed: number): (n: number) => number {
    let a = seed >>> 0;
    return (n) => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
    };
  }

  it('§10.6: over seeded runs of condemnations, joins, node failures, rejoins and timeouts, every spawn is the old choice', () => {
    let spawned = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const rand = rng(seed);
      const nodes = 3 + rand(5);
      const { g, ctx } = world({ nodes, pool: localPool.slice(0, 3 + rand(7)) });
      const all = agents(nodes);
      for (let i = 0; i < 80; i++) {
        const where = `seed ${seed} step ${i}`;
        const action = rand(5);
        const r = g.recovery;
        if (action === 0 && r === null && ctx.replicas.length === 3) {
          const target = ctx.replicas[rand(3)] as ProcessId;
          const node = g.replicaNodes.get(target);
          const replicas = ctx.replicas.filter((x) => x !== target);
          const expected = oldChoice(ctx, g, replicas, [...g.retired, target], node === undefined ? [] : [node]);
          const got = spawns(condemn(ctx, g, target));
          expect(got, where).toEqual(expected);
          spawned += got.length;
          continue;
        }
        if (action === 1 && r !== null && r.node !== null) {
          expect(join(ctx, g, r.id), where).not.toBeNull();
          continue;
        }
        // A node fails or (re)joins, or time passes; then the tick's recovery step.
        if (action === 2) fail(ctx, (all[rand(nodes)] as { node: string }).node);
        if (action === 3) ctx.liveAgents = all.filter((a) => ctx.liveAgents.includes(a) || rand(2) === 0);
        if (action === 4) ctx.tick += rand(2) === 0 ? TIMEOUT_TICKS : 1;
        let expected: { agent: ProcessId; id: ProcessId }[] = [];
        if (r !== null) {
          const lost = r.node !== null && !ctx.liveAgents.some((a) => a.node === r.node);
          if (r.node !== null && (lost || ctx.tick - r.sinceTick >= TIMEOUT_TICKS)) {
            expected = oldChoice(ctx, g, ctx.replicas, [...g.retired, r.id], r.tried);
          } else if (r.node === null) {
            const placed = oldChoice(ctx, g, ctx.replicas, g.retired, r.tried);
            // The old code fixed the id when the replacement was started; it must be the same.
            expected = placed.map((p) => ({ agent: p.agent, id: r.id }));
            if (placed[0] !== undefined) expect(placed[0].id, where).toBe(r.id);
          }
        }
        const got = spawns(step(ctx, g));
        expect(got, where).toEqual(expected);
        spawned += got.length;
      }
    }
    expect(spawned).toBeGreaterThan(100); // the runs did exercise the choice
  });
});

describe('a replacement whose port was taken (PROTOCOL §10.6, issue 14 item 3)', () => {
  const announced = (change: ViewChange | null) =>
    (change?.commands ?? []).flatMap((c) => (c.command.type === 'replicas' ? [{ agent: c.agent, ports: c.command.ports }] : []));

  it('§10.6: joins on the port it names; every agent is told where to dial it; the port goes when the id is retired, and a new incarnation names its own', () => {
    const { g, ctx } = world({ nodes: 4, pool: ['r1', 'r2', 'r3', 'r4', 'r5'] });
    condemn(ctx, g, 'r1');
    expect(g.recovery?.id).toBe('r4');
    const joined = adopt(ctx, applyAdd(ctx, g, 'r4', 41_234));
    expect(joined?.replicas).toEqual(['r2', 'r3', 'r4']);
    expect(joined?.events.map((e) => e.text)).toContain('replica r4 joined on port 41234, its own being taken; group r2,r3,r4, view 2');
    expect(announced(joined)).toEqual(agents(4).map((a) => ({ agent: a.id, ports: [{ id: 'r4', port: 41_234 }] })));
    expect([...g.ports]).toEqual([['r4', 41_234]]);
    // Condemned: retired, its port forgotten; the next view's announcement names none.
    const next = condemn(ctx, g, 'r4');
    expect(g.ports.size).toBe(0);
    expect(g.recovery?.id).toBe('r5');
    const r5 = adopt(ctx, applyAdd(ctx, g, 'r5', 0));
    expect(announced(next).every((a) => a.ports.length === 0)).toBe(true);
    expect(announced(r5).every((a) => a.ports.length === 0)).toBe(true);
    expect(r5?.events.map((e) => e.text)).toContain('replica r5 joined; group r2,r3,r5, view 4');
  });
});
