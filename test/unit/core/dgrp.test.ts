// The dynamic group of recommended processes in the manager's replicated state (src/core/dgrp.ts,
// src/core/cluster-dgrp.ts; docs/PROTOCOL.md §12; spec mpichv-dgrp 2.2.3–2.2.6, 2.6). The pure
// rules first, then driven through the group's entry points with a fake node table
// (cluster-driver.ts): every assertion is what a process (its views), an operator (the events,
// `trine ps`) or a replica comparing digests could observe.
import { describe, expect, it } from 'vitest';
import { dgrpRequest } from '../../../src/core/cluster-inputs.ts';
import { encodeCluster } from '../../../src/core/cluster-view.ts';
import { DGRP_DEFAULT_FACTOR_PERCENT, DGRP_MAX_INTERVAL_MS } from '../../../src/core/constants.ts';
import { applyReport, arrive, counterOf, createDgrpState, dgrpState, membersOf, tryRelease, type DgrpState } from '../../../src/core/dgrp.ts';
import { recommendedOf, type DgrpOptions, type DgrpVerdict, type ProcDgrp } from '../../../src/core/wire/messages.ts';
import { Cluster } from './cluster-driver.ts';
import { seededRandom } from '../../../examples/common/seeded-random.ts';

const OPTIONS: DgrpOptions = { intervalMs: 1000, zeta: 5, factorPercent: DGRP_DEFAULT_FACTOR_PERCENT, marginMs: 5, initialThresholdMs: 8000 };
const fail = (vpid: number): DgrpVerdict => ({ vpid, pass: false, passes: 0 });
const pass = (vpid: number, passes: number): DgrpVerdict => ({ vpid, pass: true, passes });

describe('PROTOCOL §12.3: the membership rule (spec 2.2.3, 2.2.4), Byzantine-safe', () => {
  const LIVE = [0, 1, 2, 3];
  it('spec 2.6 "slow-process removal": two members that fail a process remove it; its counter becomes odd', () => {
    const d = createDgrpState(OPTIONS);
    expect(applyReport(d, LIVE, 0, [fail(3)]).changes).toEqual([]);
    expect(membersOf(d, LIVE)).toEqual([0, 1, 2, 3]);
    expect(applyReport(d, LIVE, 1, [fail(3)]).changes).toEqual([{ kind: 'removed', vpid: 3, by: [0, 1] }]);
    expect(counterOf(d, 3)).toBe(1);
    expect(membersOf(d, LIVE)).toEqual([0, 1, 2]);
  });

  it('a single lying tester cannot remove a correct process while the group has three members or more', () => {
    const d = createDgrpState(OPTIONS);
    applyReport(d, LIVE, 0, [fail(1), fail(2), fail(3)]);
    expect(membersOf(d, LIVE)).toEqual([0, 1, 2, 3]);
    // Its accusations are its latest report's: a second member must agree at the same time.
    applyReport(d, LIVE, 0, []);
    applyReport(d, LIVE, 1, [fail(2)]);
    expect(membersOf(d, LIVE)).toEqual([0, 1, 2, 3]);
  });

  it('spec 2.6 "disagreeing testers": a process one member fails and another passes stays while the third has not spoken; with two of three failing it, it leaves', () => {
    const d = createDgrpState(OPTIONS);
    const live = [0, 1, 2];
    applyReport(d, live, 0, [fail(2)]);
    applyReport(d, live, 1, []);
    expect(membersOf(d, live)).toEqual([0, 1, 2]);
    // Two members: one accuser suffices (min(2, members − 1)); the paper's one-verdict rule.
    const two = createDgrpState(OPTIONS);
    expect(applyReport(two, [0, 1], 0, [fail(1)]).changes).toEqual([{ kind: 'removed', vpid: 1, by: [0] }]);
    // The last member is never removed: no one is left to test it.
    expect(applyReport(two, [0, 1], 0, [fail(1)]).changes).toEqual([]);
    expect(membersOf(two, [0, 1])).toEqual([0]);
  });

  it('spec 2.6 "counter semantics": counters only grow, even means recommended, a report from a non-member changes nothing', () => {
    const d = createDgrpState(OPTIONS);
    applyReport(d, LIVE, 0, [fail(3)]);
    applyReport(d, LIVE, 1, [fail(3)]);
    const before = JSON.stringify(dgrpState.enc(d));
    expect(applyReport(d, LIVE, 3, [fail(0), fail(1), fail(2)]).ignored).toMatch(/not in the group/);
    expect(applyReport(d, LIVE, 9, [fail(0)]).ignored).toMatch(/not a live process/);
    expect(JSON.stringify(dgrpState.enc(d))).toBe(before);
    expect([0, 1, 2, 3].map((v) => counterOf(d, v))).toEqual([0, 0, 0, 1]);
  });

  it('spec 2.6 "rejoin requires ζ consecutive passes": fewer never rejoin; at ζ, a majority with more than ζ/2 decides once', () => {
    const d = createDgrpState(OPTIONS);
    applyReport(d, LIVE, 0, [fail(3)]);
    applyReport(d, LIVE, 1, [fail(3)]);
    expect(membersOf(d, LIVE)).toEqual([0, 1, 2]);
    // ζ − 1 from everyone: no candidate yet.
    for (const t of [0, 1, 2]) expect(applyReport(d, LIVE, t, [pass(3, 4)]).changes).toEqual([]);
    // One member reaches ζ but the other two voted 2 (not > ζ/2): no majority.
    applyReport(d, LIVE, 1, [pass(3, 2)]);
    applyReport(d, LIVE, 2, [pass(3, 2)]);
    expect(applyReport(d, LIVE, 0, [pass(3, 5)]).changes).toEqual([]);
    // A second vote above ζ/2 makes two of three: it rejoins, counter even again.
    expect(applyReport(d, LIVE, 1, [pass(3, 3)]).changes).toEqual([{ kind: 'rejoined', vpid: 3, by: [0, 1] }]);
    expect(counterOf(d, 3)).toBe(2);
    // The verdicts that made the decision are spent: the same reports again change nothing.
    expect(applyReport(d, LIVE, 0, [pass(3, 6)]).changes).toEqual([]);
    expect(d.rejoins).toBe(1);
  });

  it('spec 2.6 "leader": a lying member alone cannot bring back a slow process (votes are per member, no leader to fool)', () => {
    const d = createDgrpState(OPTIONS);
    applyReport(d, LIVE, 0, [fail(3)]);
    applyReport(d, LIVE, 1, [fail(3)]);
    expect(applyReport(d, LIVE, 2, [pass(3, 99)]).changes).toEqual([]);
    expect(membersOf(d, LIVE)).toEqual([0, 1, 2]);
  });

  it('spec 2.2.6 barrier: a round is released once every member arrived, whoever is outside', () => {
    const d = createDgrpState(OPTIONS);
    applyReport(d, LIVE, 0, [fail(3)]);
    applyReport(d, LIVE, 1, [fail(3)]);
    for (const v of [0, 1]) arrive(d, LIVE, v, 1);
    expect(tryRelease(d, LIVE)).toBe(false);
    arrive(d, LIVE, 2, 1);
    expect(tryRelease(d, LIVE)).toBe(true);
    expect(d.released).toBe(1);
    expect(tryRelease(d, LIVE)).toBe(false);
  });

  it('the canonical tree decodes to the same state (state transfer); a malformed one is refused', () => {
    const d: DgrpState = createDgrpState(OPTIONS);
    applyReport(d, LIVE, 0, [fail(3), pass(2, 1)]);
    applyReport(d, LIVE, 1, [fail(3)]);
    arrive(d, LIVE, 1, 4);
    const tree = dgrpState.enc(d);
    const back = dgrpState.dec(tree, 'd');
    expect(back.ok && dgrpState.enc(back.value)).toEqual(tree);
    expect(dgrpState.dec([1, 2], 'd').ok).toBe(false);
  });
});

/** DGRP task t1 of `size`, one process per node, connected and Running. */
function dgrpRunning(size: number): Cluster {
  const c = new Cluster(size);
  expect(c.submit(size, { mode: 'linked', dgrp: OPTIONS })).toEqual({ ok: true, text: 't1' });
  c.startLinked('t1');
  expect(c.task('t1').state).toBe('running');
  return c;
}
const views = (c: Cluster) => c.commands().flatMap((x) => (x.command.type === 'proc.dgrp' ? [{ agent: x.agent, ...(x.command as ProcDgrp) }] : []));
const send = (c: Cluster, vpid: number, r: { round: number; verdicts: DgrpVerdict[] } | { arrive: number }) => {
  const agent = c.agentOf(c.proc('t1', vpid).node ?? '');
  c.effects = dgrpRequest(c.cs, c.nodes, agent, 'arrive' in r
    ? { type: 'dgrp.arrive', task: 't1', vpid, round: r.arrive }
    : { type: 'dgrp.report', task: 't1', vpid, ...r });
  return c.effects;
};

describe('PROTOCOL §12.1, §12.4: a DGRP task in the group', () => {
  it('refuses a DGRP for a task that is not linked, and options out of range, with a reason', () => {
    const c = new Cluster(2);
    expect(c.submit(2, { dgrp: OPTIONS })).toEqual({ ok: false, text: expect.stringMatching(/needs a linked task/) });
    expect(c.submit(2, { mode: 'linked', dgrp: { ...OPTIONS, intervalMs: DGRP_MAX_INTERVAL_MS + 1 } }).text).toMatch(/DGRP interval must be/);
    expect(c.submit(2, { mode: 'linked', dgrp: { ...OPTIONS, zeta: 0 } }).text).toMatch(/zeta must be 1 to/);
    expect(c.submit(2, { mode: 'linked', dgrp: { ...OPTIONS, factorPercent: 99 } }).text).toMatch(/factor/);
  });

  it('the mapping carries the options, then every process gets view 1 listing every process as recommended, with its endpoint', () => {
    const c = new Cluster(3);
    c.submit(3, { mode: 'linked', dgrp: OPTIONS });
    c.startLinked('t1');
    const types = c.commands().map((x) => x.command.type).filter((t) => t === 'proc.mapping' || t === 'proc.dgrp');
    expect(types).toEqual(['proc.mapping', 'proc.mapping', 'proc.mapping', 'proc.dgrp', 'proc.dgrp', 'proc.dgrp']);
    expect(c.mappings().every((m) => m.dgrp !== null && m.dgrp.zeta === 5)).toBe(true);
    const v = views(c);
    expect(v.map((x) => [x.agent, x.vpids, x.view, x.released])).toEqual([['a1', [0], 1, 0], ['a2', [1], 1, 0], ['a3', [2], 1, 0]]);
    expect(v[0]?.entries.map((e) => [e.vpid, e.counter])).toEqual([[0, 0], [1, 0], [2, 0]]);
    expect(v[0]?.entries.every((e) => e.endpoint.length > 0)).toBe(true);
  });

  it('spec 2.6: a removed process is absent from the next view, which every process (itself included) gets; the journal names its testers', () => {
    const c = dgrpRunning(4);
    send(c, 0, { round: 1, verdicts: [fail(3)] });
    expect(views(c)).toEqual([]);
    send(c, 1, { round: 1, verdicts: [fail(3)] });
    expect(c.events()).toContain('t1/3 left the DGRP: tested not recommended by 0,1');
    const v = views(c);
    expect(v.map((x) => x.vpids).flat()).toEqual([0, 1, 2, 3]);
    expect(recommendedOf(v[0]?.entries ?? [])).toEqual([0, 1, 2]);
    expect(v[0]?.view).toBe(2);
  });

  it('spec 2.6 "crash removal": a member that dies leaves the view, and a barrier that waited for it is released', () => {
    const c = dgrpRunning(3);
    for (const v of [0, 1]) send(c, v, { arrive: 1 });
    expect(views(c)).toEqual([]);
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL' });
    const v = views(c);
    expect(v.map((x) => [x.vpids, x.released, recommendedOf(x.entries)])).toEqual([[[0], 1, [0, 1]], [[1], 1, [0, 1]]]);
  });

  it('§12.4: the barrier is released for every process by one view; a slow non-member is not waited for', () => {
    const c = dgrpRunning(3);
    send(c, 0, { round: 1, verdicts: [fail(2)] });
    send(c, 1, { round: 1, verdicts: [fail(2)] });
    send(c, 0, { arrive: 1 });
    expect(views(c)).toEqual([]);
    send(c, 1, { arrive: 1 });
    expect(views(c).map((x) => [x.vpids, x.released])).toEqual([[[0], 1], [[1], 1], [[2], 1]]);
  });

  it('drops what a process could get wrong, counted: another node\'s agent speaking for it, a process that is not connected', () => {
    const c = dgrpRunning(3);
    const before = c.task('t1').signals.dropped;
    c.effects = dgrpRequest(c.cs, c.nodes, 'a2', { type: 'dgrp.report', task: 't1', vpid: 0, round: 1, verdicts: [fail(1)] });
    expect(c.events()[0]).toMatch(/dropped dgrp.report from t1\/0: the sender is on n1, not n2/);
    c.effects = dgrpRequest(c.cs, c.nodes, 'a1', { type: 'dgrp.arrive', task: 't1', vpid: 7, round: 1 });
    expect(c.events()[0]).toMatch(/not a connected process/);
    expect(c.task('t1').signals.dropped).toBe(before + 2);
  });

  it('replicas that apply the same reports agree on the digest (the state is canonical)', () => {
    const a = dgrpRunning(4);
    const b = dgrpRunning(4);
    for (const c of [a, b]) {
      send(c, 0, { round: 1, verdicts: [fail(3), pass(2, 1)] });
      send(c, 2, { arrive: 1 });
    }
    expect(JSON.stringify(encodeCluster(a.cs))).toBe(JSON.stringify(encodeCluster(b.cs)));
  });
});

describe('PROTOCOL §12.3: a group whose members all left', () => {
  it('takes back the processes still live, so its barrier is released again', () => {
    const c = dgrpRunning(3);
    send(c, 0, { round: 1, verdicts: [fail(2)] });
    send(c, 1, { round: 1, verdicts: [fail(2)] });
    for (const v of [0, 1]) c.report('t1', v, 'terminatedNormally', { exitCode: 0 });
    expect(c.events()).toContain('t1/2 rejoined the DGRP: no member was left');
    send(c, 2, { arrive: 1 });
    expect(views(c).map((x) => [x.vpids, x.released, recommendedOf(x.entries)])).toEqual([[[2], 1, [2]]]);
  });
});

describe('PROTOCOL §12.3 under random reports (a fixed slice of seeds; the rules alone, no timing)', () => {
  /** Random testers report random verdicts: honest ones fail a correct process rarely (noise)
   *  and the slow one often; one liar fails a correct process in every report. */
  function run(seed: number, n: number, steps: number) {
    const random = seededRandom(seed);
    const live = Array.from({ length: n }, (_, v) => v);
    const slow = 1;
    const liar = 0;
    const d = createDgrpState(OPTIONS);
    const passes = new Map<string, number>();
    const problems: string[] = [];
    let before = live.map((v) => counterOf(d, v));
    for (let step = 0; step < steps; step++) {
      const tester = live[Math.floor(random() * n)] as number;
      const verdicts: DgrpVerdict[] = [];
      for (const q of live) {
        if (q === tester) continue;
        const member = counterOf(d, q) % 2 === 0;
        const lie = tester === liar && q !== slow && q !== liar;
        const ok = lie ? false : q === slow ? random() < 0.2 : random() > 0.03;
        const key = `${tester}:${q}`;
        passes.set(key, ok ? (passes.get(key) ?? 0) + 1 : 0);
        if (member ? !ok : true) verdicts.push({ vpid: q, pass: ok, passes: passes.get(key) ?? 0 });
      }
      const members = membersOf(d, live);
      const out = applyReport(d, live, tester, verdicts);
      for (const c of out.changes) {
        // A correct process removed: an honest member's latest verdict must have failed it too.
        if (c.kind === 'removed' && c.vpid !== slow && members.length >= 3 && c.by.every((t) => t === liar)) problems.push(`step ${step}: ${c.vpid} removed by the liar alone`);
      }
      const after = live.map((v) => counterOf(d, v));
      if (after.some((x, i) => x < (before[i] ?? 0))) problems.push(`step ${step}: a counter went down`);
      if (membersOf(d, live).length === 0) problems.push(`step ${step}: no member left`);
      before = after;
    }
    return { problems, removals: d.removals, rejoins: d.rejoins, slowOut: counterOf(d, slow) % 2 === 1 };
  }

  it('a liar never removes a correct process alone, counters never go down, the group is never empty', () => {
    for (let seed = 1; seed <= Number(process.env.DGRP_SEEDS ?? 20); seed++) {
      const r = run(seed, 5, 400);
      expect(r.problems, `seed ${seed}`).toEqual([]);
      expect(r.removals, `seed ${seed}: the slow process must have been removed`).toBeGreaterThan(0);
    }
  });
});
