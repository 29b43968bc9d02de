// Rollback recovery under channel memories over real protector services on loopback
// (docs/PROTOCOL.md §11.6; mpichv-dgrp 1.1, 1.2.1–1.2.4, 1.6): two protectors (the agents'
// TCP service, src/daemon/protector.ts) are the ranks' home CMs; each rank of one task runs in
// this process with its own CM connections (authenticated, fenced by incarnation), channels and
// checkpoint runtime. A crash abandons a rank's program and drops its connections; its
// replacement, with a higher incarnation, fetches its checkpoint and log from its home CM,
// replays them, subscribes and goes on. The survivors' programs are never told.
import { afterEach, describe, expect, it } from 'vitest';
import { CommLayer } from '../../src/app/gmpi/comm.ts';
import { ChainedStore } from '../../src/app/rollback/log-chain.ts';
import { CmChannels } from '../../src/app/rollback/cm-channels.ts';
import { CmClient } from '../../src/app/rollback/cm-client.ts';
import { ProtectorError } from '../../src/app/rollback/protector-client.ts';
import { RollbackRuntime } from '../../src/app/rollback/runtime.ts';
import { encodeLogEntry } from '../../src/app/rollback/codec.ts';
import { createProtector, type Protector } from '../../src/daemon/protector.ts';
import { TEST_TASK_KEY } from './gmpi-test-tools.ts';
import { Crash, hashOf, initialState, program, STEPS, type Marks, type ProgramRank, type State } from './rollback-harness.ts';

const T = 't1';

type Rank = ProgramRank & { vpid: number; home: CmClient; ch: CmChannels; crashed: boolean; caughtUp: boolean; fatal: Error[] };

const LEN = 64;
let protectors: Protector[] = [];
let clients: CmClient[] = [];

afterEach(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  clients = [];
  for (const p of protectors) await p.close();
  protectors = [];
});

async function startCms(n: number): Promise<string[]> {
  for (let i = 0; i < n; i++) {
    const p = await createProtector({ host: '127.0.0.1', port: 0, log: () => undefined });
    expect(p.guard(T, TEST_TASK_KEY, 1 << 20)).toEqual({ ok: true });
    protectors.push(p);
  }
  return protectors.map((p) => p.endpoint);
}

function connectCm(endpoint: string, rank: number, vpid: number): Promise<CmClient> {
  const i = endpoint.lastIndexOf(':');
  return CmClient.connect(endpoint, { host: endpoint.slice(0, i), port: Number(endpoint.slice(i + 1)), task: T, rank, incarnation: vpid, taskKey: TEST_TASK_KEY })
    .then((c) => (clients.push(c), c));
}

async function makeRank(rank: number, vpid: number, vpids: number[], homes: string[], marks: Marks): Promise<Rank> {
  const state = initialState(rank, LEN);
  const home = await connectCm(homes[rank]!, rank, vpid);
  const fatal: Error[] = [];
  const store = new ChainedStore(home);
  const ch = new CmChannels({ rank, vpids, homes, home, connect: (e) => connectCm(e, rank, vpid), onFatal: (e) => fatal.push(e), observe: (pos, blob) => store.observe(pos, blob) });
  const layer = new CommLayer(ch);
  const world = layer.create(0, vpids.map((_, r) => r));
  const rt = new RollbackRuntime({
    channels: ch, layer, world, store, state, intervalMs: 5, maxStateBytes: 1 << 20, now: () => state.step, marks: [...(marks.get(rank) ?? [])],
    onCheckpoint: (m) => marks.set(rank, [...(marks.get(rank) ?? []), { ...m, protector: homes[rank]! }].slice(-2)),
  });
  return { rank, vpid, home, ch, rt, state, layer, crashed: false, caughtUp: false, fatal, seen: [] };
}

/** `replacement`: only a replacement (not the first incarnation) crashes there. */
type Crashes = { rank: number; step: number; phase: string; replacement?: boolean };

/** Run `size` ranks homed on two CMs (rank r at CM r mod 2); each crash in `crashAt` fires once,
 *  and its rank is replaced at once with a higher incarnation, as the group would (PROTOCOL
 *  §11.2). Several may be under way together. */
async function runMany(size: number, crashAt: Crashes[]): Promise<{ results: State[]; ranks: Rank[]; replacements: Rank[]; olds: Rank[] }> {
  const cms = await startCms(2);
  const homes = Array.from({ length: size }, (_, r) => cms[r % 2]!);
  const marks: Marks = new Map();
  const vpids = Array.from({ length: size }, (_, i) => i);
  const ranks = await Promise.all(vpids.map((v) => makeRank(v, v, vpids, homes, marks)));
  for (const r of ranks) r.ch.start();
  const fired = new Set<Crashes>();
  const replacements: Rank[] = [];
  const olds: Rank[] = [];
  const finals = new Map<number, Promise<State | null>>();
  let nextVpid = size + 10;
  const hook = (r: Rank, phase: string) => {
    const c = crashAt.find((x) => !fired.has(x) && r.rank === x.rank && r.state.step === x.step && phase === x.phase && (x.replacement !== true || r.vpid >= size));
    if (c === undefined) return;
    fired.add(c);
    r.crashed = true;
    olds.push(r);
    r.ch.close(new Crash('crashed'));
    const vpid = nextVpid++;
    finals.set(r.rank, (async () => {
      const n = await makeRank(r.rank, vpid, vpids.map((v) => (v === r.rank ? vpid : v)), homes, marks);
      n.seen = r.seen;
      replacements.push(n);
      await n.rt.recover();
      n.ch.whenCaughtUp(() => (n.caughtUp = true));
      n.ch.start();
      return program(n, size, hook).catch((e: unknown) => {
        if (e instanceof Crash || n.crashed) return null; // crashed in its turn: its replacement finishes
        throw e;
      });
    })());
    throw new Crash('crashed');
  };
  const runs = ranks.map((r) => program(r, size, hook).catch((e: unknown) => {
    if (e instanceof Crash || r.crashed) return null;
    throw e;
  }));
  const results = await Promise.all(runs);
  // A replacement may crash in its turn (null): its own replacement, set before it threw, ends.
  for (const rank of [...finals.keys()]) {
    let v = await finals.get(rank)!;
    while (v === null) v = await finals.get(rank)!;
    results[rank] = v;
  }
  return { results: results as State[], ranks, replacements, olds };
}

async function run(size: number, crashAt: Crashes | null): Promise<{ results: State[]; ranks: Rank[]; replaced: Rank | null; old: Rank | null }> {
  const r = await runMany(size, crashAt === null ? [] : [crashAt]);
  return { results: r.results, ranks: r.ranks, replaced: r.replacements[0] ?? null, old: r.olds[0] ?? null };
}

async function reference(): Promise<State[]> {
  const { results } = await run(3, null);
  for (const c of clients) await c.close();
  clients = [];
  for (const p of protectors) await p.close();
  protectors = [];
  return results;
}

/** Every message delivered exactly once: each receiver's count from each source is the sender's. */
function deliveredOnce(ranks: Rank[]): void {
  for (const d of ranks) for (const s of ranks) expect(d.ch.st.lastIn[s.rank], `${s.rank}→${d.rank}`).toBe(s.ch.st.nextSsn[d.rank]! - 1);
}

describe('channel memories over real protectors (PROTOCOL §11.6, mpichv-dgrp 1.2.1)', () => {
  it('failure-free: every rank computes the same sums, every message goes through its receiver\'s CM once', async () => {
    const { results, ranks } = await run(3, null);
    expect(results.map((s) => s.step)).toEqual([STEPS, STEPS, STEPS]);
    expect(new Set(results.map((s) => JSON.stringify(s.hist))).size).toBe(1);
    deliveredOnce(ranks);
    for (const r of ranks) {
      expect(r.fatal).toEqual([]);
      expect(r.ch.counters.pushed).toBe(r.ch.st.logPos);
    }
    // Every send was deposited once, none answered as a duplicate.
    const deposits = protectors.map((p) => p.stats().store.deposits);
    expect(deposits.reduce((n, d) => n + d.duplicates, 0)).toBe(0);
    expect(deposits.reduce((n, d) => n + d.stored, 0)).toBe(ranks.reduce((n, r) => n + r.ch.counters.deposits, 0));
  });

  it('1.6 deterministic replay: rank 0 crashes after its any-source receives; they are replayed in the CM\'s order, with no determinant', async () => {
    const ref = await reference();
    const { results, ranks, replaced } = await run(3, { rank: 0, step: 9, phase: 'after-wildcard' });
    for (let r = 0; r < 3; r++) expect(results[r]!.hist).toEqual(ref[r]!.hist);
    const order = results[0]!.order;
    for (const o of ranks.filter((x) => x.rank !== 0)) {
      for (let step = 0; step < STEPS; step++) expect(o.seen[step]).toBe(hashOf(order.slice(0, 2 * (step + 1))));
    }
    expect(replaced!.rt.stats.restoredFrom).toBe(1);
    expect(replaced!.ch.counters.replayed).toBeGreaterThan(0);
    expect(replaced!.caughtUp).toBe(true);
  });

  for (const phase of ['before-send', 'after-send', 'before-allreduce', 'before-snapshot']) {
    it(`1.6 no duplicate delivery after restart: a rank that crashes ${phase} re-executes its sends silently, the answer bit for bit the failure-free one`, async () => {
      const ref = await reference();
      const { results, ranks, replaced } = await run(3, { rank: 1, step: 9, phase });
      for (let r = 0; r < 3; r++) {
        expect(results[r]!.hist).toEqual(ref[r]!.hist);
        expect(results[r]!.x).toEqual(ref[r]!.x);
      }
      const now = ranks.map((r) => (r.rank === 1 ? replaced! : r));
      deliveredOnce(now);
      for (const r of now) expect(r.fatal).toEqual([]);
      // The replacement went over its past from checkpoint 1: its re-executed sends reached the
      // CMs again and were answered as duplicates (1.2.4 silent re-execution), stored never.
      expect(protectors.reduce((n, p) => n + p.stats().store.deposits.duplicates, 0)).toBeGreaterThan(0);
    });
  }

  it('1.6 crash before any checkpoint: the replacement starts as the first incarnation did and replays the whole log', async () => {
    const ref = await reference();
    const { results, replaced } = await run(3, { rank: 2, step: 2, phase: 'before-allreduce' });
    for (let r = 0; r < 3; r++) expect(results[r]!.hist).toEqual(ref[r]!.hist);
    expect(replaced!.rt.stats.restoredFrom).toBe(0);
    expect(replaced!.ch.counters.replayed).toBeGreaterThan(0);
  });

  it('1.6 crash after checkpoint k: the replacement restores checkpoint 2 and replays only what came after it', async () => {
    const ref = await reference();
    const { results, replaced } = await run(3, { rank: 1, step: 11, phase: 'after-send' });
    for (let r = 0; r < 3; r++) expect(results[r]!.hist).toEqual(ref[r]!.hist);
    expect(replaced!.rt.stats.restoredFrom).toBe(2);
    expect(replaced!.caughtUp).toBe(true);
  });

  it('1.5 item 12: two ranks, a sender and its receiver, crash in the same step; both replacements replay and the answer is unchanged', async () => {
    const ref = await reference();
    const { results, replacements } = await runMany(3, [{ rank: 1, step: 7, phase: 'after-send' }, { rank: 2, step: 7, phase: 'before-send' }]);
    expect(replacements.map((r) => r.rank).sort()).toEqual([1, 2]);
    for (let r = 0; r < 3; r++) expect(results[r]!.hist).toEqual(ref[r]!.hist);
    for (const n of replacements) expect(n.fatal).toEqual([]);
  });

  it('1.6: a replacement that crashes in its turn, mid-replay, is replaced again from the same checkpoint', async () => {
    const ref = await reference();
    const { results, replacements } = await runMany(3, [{ rank: 1, step: 9, phase: 'after-send' }, { rank: 1, step: 7, phase: 'before-allreduce', replacement: true }]);
    expect(replacements).toHaveLength(2);
    // The first replacement restored checkpoint 1 (step 5) and was replaying steps 5 to 9 when
    // it crashed at step 7; the second restored the same checkpoint.
    expect(replacements.map((n) => n.rt.stats.restoredFrom)).toEqual([1, 1]);
    expect(replacements[0]!.caughtUp).toBe(false);
    expect(replacements[1]!.caughtUp).toBe(true);
    for (let r = 0; r < 3; r++) expect(results[r]!.hist).toEqual(ref[r]!.hist);
  });

  it('1.2.4 clone exclusion: once the replacement has spoken, the old incarnation\'s deposits are refused FENCED', async () => {
    const { old, replaced } = await run(3, { rank: 1, step: 4, phase: 'before-send' });
    expect(replaced).not.toBeNull();
    // The old incarnation (VPID 1) dials the CM of rank 0 again and tries to deposit.
    const stale = await connectCm(protectors[0]!.endpoint, 1, old!.vpid).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ProtectorError);
    expect((stale as ProtectorError).code).toBe('FENCED');
  });
});

/** Ranks 0 and 1 of a task of two, each homed on a CM of its own (rank r on CM r), their
 *  channels started. */
async function twoRanks(): Promise<{ a: Rank; b: Rank; homes: string[]; marks: Marks }> {
  const cms = await startCms(2);
  const homes = [cms[0]!, cms[1]!];
  const marks: Marks = new Map();
  const a = await makeRank(0, 0, [0, 1], homes, marks);
  const b = await makeRank(1, 1, [0, 1], homes, marks);
  a.ch.start();
  b.ch.start();
  return { a, b, homes, marks };
}

describe('when a CM fails (PROTOCOL §11.6: CMs are assumed stable)', () => {
  it('the ranks whose home CM stops fail visibly, and a sender to them too; none runs on unprotected', async () => {
    const { a, b } = await twoRanks();
    await a.ch.send(1, 5, Uint8Array.of(1));
    expect((await b.ch.recv(0, 5)).data).toEqual(Uint8Array.of(1));
    await protectors[1]!.close();
    for (let i = 0; i < 100 && b.fatal.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(b.fatal[0]?.message).toMatch(/channel memory .* failed/);
    await expect(a.ch.send(1, 5, Uint8Array.of(2))).rejects.toThrow();
    expect(a.fatal.length).toBe(1);
  });

  it('a message of several MiB goes through the CM in fragments, appended together; a replacement replays it whole', async () => {
    const { a, b, homes, marks } = await twoRanks();
    const big = Uint8Array.from({ length: 3 * 1024 * 1024 + 5 }, (_, i) => i % 251);
    await Promise.all([a.ch.send(1, 9, big), a.ch.send(1, 8, Uint8Array.of(7))]);
    expect((await b.ch.recv(0, 9)).data).toEqual(big);
    expect(b.ch.st.logPos).toBe(8); // 7 fragments, then the small message
    // Rank 1's replacement fetches its log and replays the message whole, before the small one.
    const n = await makeRank(1, 9, [0, 9], homes, marks);
    await n.rt.recover();
    expect(n.ch.st.queue.map((m) => [m.source, m.ssn, m.pos, m.data.length])).toEqual([[0, 1, 7, big.length], [0, 2, 8, 1]]);
    await expect(a.ch.send(1, 9, new Uint8Array(65 * 1024 * 1024))).rejects.toMatchObject({ code: 'TOO_LARGE' });
  });

  it('a deposit whose entry names another rank is refused by the CM, and the sender fails visibly', async () => {
    const cms = await startCms(1);
    const c = await connectCm(cms[0]!, 0, 0);
    const forged = encodeLogEntry({ kind: 'message', source: 1, env: { ssn: 1, epoch: 0, comm: 0, tag: 1, structured: false, data: Uint8Array.of(1) } });
    await expect(c.deposit(1, 1, forged)).rejects.toMatchObject({ code: 'BAD_DEPOSIT' });
  });
});
