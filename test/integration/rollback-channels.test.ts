// Rollback recovery's rank channels over real P2P sockets on loopback (docs/PROTOCOL.md §11.3):
// ranks of one task in this process, each with its own P2P mesh, channels and checkpoint
// runtime, a rank's store in memory (the protector's service has tests of its own). A crash
// closes a rank's sockets without a bye and abandons its program; its replacement, with a new
// VPID, restores the store's checkpoint, replays the log and goes on. The survivors' programs
// are never told: they see a pause.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CommLayer } from '../../src/app/gmpi/comm.ts';
import { ANY_SOURCE } from '../../src/app/gmpi/matching.ts';
import type { P2P } from '../../src/app/gmpi/p2p.ts';
import { decodeLogEntry } from '../../src/app/rollback/codec.ts';
import { ChainedStore } from '../../src/app/rollback/log-chain.ts';
import { RankChannels } from '../../src/app/rollback/rank-channels.ts';
import { RollbackError, RollbackRuntime, type MarkBody } from '../../src/app/rollback/runtime.ts';
import { closeMeshes, Crash, hashOf, initialState, MemStore, openMesh, peersOf, program, STEPS, type Marks, type ProgramRank, type State } from './rollback-harness.ts';

type Rank = ProgramRank & {
  vpid: number;
  p2p: P2P;
  ch: RankChannels;
  crashed: boolean;
  /** A replacement's program has taken every replayed message. */
  caughtUp: boolean;
  report: () => void;
};

const LEN = 64;
/** The logging mode the runs below use (each describe sets it). */
let logging: 'rbml' | 'hmpl' = 'rbml';

afterEach(closeMeshes);

async function makeRank(rank: number, vpid: number, vpids: number[], store: MemStore, marks: Marks = new Map()): Promise<Rank> {
  const p2p = await openMesh(vpid);
  const state = initialState(rank, LEN);
  const chained = new ChainedStore(store);
  const ch = new RankChannels({ p2p, rank, vpids, store: chained, onFatal: () => undefined, logging });
  const layer = new CommLayer(ch);
  const world = layer.create(0, vpids.map((_, r) => r));
  // The group's rule (cluster-rollback.ts markRank): a mark of the newest checkpoint again
  // carries the log's new extent; another checkpoint's is added, the last two kept.
  const record = (m: MarkBody) => {
    const kept = marks.get(rank) ?? [];
    const mark = { ...m, protector: 'mem' };
    marks.set(rank, kept.length > 0 && kept[kept.length - 1]!.id === m.id ? [...kept.slice(0, -1), mark] : [...kept, mark].slice(-2));
  };
  const rt = new RollbackRuntime({
    channels: ch, layer, world, store: chained, state, intervalMs: 5, maxStateBytes: 1 << 20, now: () => state.step, marks: [...(marks.get(rank) ?? [])],
    onCheckpoint: record,
  });
  const report = () => {
    const m = rt.extentReport();
    if (m !== null) record(m);
  };
  return { rank, vpid, p2p, ch, rt, state, layer, crashed: false, caughtUp: false, seen: [], report };
}

/** Run `size` ranks; the hook may crash one; a crashed rank is replaced at once, as the group
 *  would (PROTOCOL §11.2), and the replacement runs the same program from its checkpoint. */
async function run(
  size: number, crashAt: { rank: number; step: number; phase: string } | null, beforeRecovery: (store: MemStore) => void = () => undefined,
): Promise<{ results: State[]; ranks: Rank[]; replaced: Rank | null; stores: MemStore[]; marks: Marks }> {
  const stores = Array.from({ length: size }, () => new MemStore());
  const marks: Marks = new Map();
  const vpids = Array.from({ length: size }, (_, i) => i);
  const ranks = await Promise.all(vpids.map((v) => makeRank(v, v, vpids, stores[v]!, marks)));
  await Promise.all(ranks.map((r) => r.p2p.connect(peersOf(r, ranks))));
  for (const r of ranks) r.ch.start();
  let replaced: Rank | null = null;
  let replacement: Promise<State> | null = null;
  const hook = (r: Rank, phase: string) => {
    if (crashAt === null || replaced !== null || r.rank !== crashAt.rank || r.state.step !== crashAt.step || phase !== crashAt.phase) return;
    r.crashed = true;
    r.ch.close(new Crash('crashed'));
    void r.p2p.close({ bye: false });
    replacement = (async () => {
      const vpid = size + 10;
      const table = ranks.map((o) => (o === r ? vpid : o.vpid));
      for (const o of ranks) if (o !== r) {
        o.ch.onDeath(r.vpid);
        o.p2p.removePeer(r.vpid);
        o.p2p.expect([vpid]);
      }
      beforeRecovery(stores[r.rank]!);
      const n = await makeRank(r.rank, vpid, table, stores[r.rank]!, marks);
      n.seen = r.seen;
      replaced = n;
      await n.rt.recover();
      n.ch.whenCaughtUp(() => (n.caughtUp = true));
      await n.p2p.connect(peersOf(n, ranks));
      n.ch.start();
      return program(n, size, hook);
    })();
    throw new Crash('crashed');
  };
  const runs = ranks.map((r) => program(r, size, hook).catch((e: unknown) => {
    if (e instanceof Crash || r.crashed) return null;
    throw e;
  }));
  const first = await Promise.all(runs);
  const results = first.map((s, i) => s ?? null);
  if (replacement !== null) results[crashAt!.rank] = await replacement;
  return { results: results as State[], ranks, replaced, stores, marks };
}

for (const mode of ['rbml', 'hmpl'] as const) describe(`rollback rank channels over real sockets, ${mode} (PROTOCOL §11.3, radic-hmpl A.2.5, A.2.7, B.3)`, () => {
  beforeEach(() => {
    logging = mode;
  });

  it('failure-free: every rank computes the same sums, and every message is logged once', async () => {
    const { results } = await run(3, null);
    expect(results.map((s) => s.step)).toEqual([3, 3, 3].map(() => STEPS));
    expect(new Set(results.map((s) => JSON.stringify(s.hist))).size).toBe(1);
  });

  for (const phase of ['before-send', 'after-send', 'before-allreduce', 'after-wildcard', 'before-snapshot']) {
    it(`a rank that crashes ${phase} is replaced and the answer is the failure-free one bit for bit (radic-hmpl A.6)`, async () => {
      const reference = await run(3, null);
      await closeMeshes();
      const victim = phase === 'after-wildcard' ? 0 : 1;
      const { results, replaced, ranks } = await run(3, { rank: victim, step: 9, phase });
      expect(replaced).not.toBeNull();
      for (let r = 0; r < 3; r++) {
        expect(results[r]!.hist).toEqual(reference.results[r]!.hist);
        expect(results[r]!.x).toEqual(reference.results[r]!.x);
      }
      // Any-source receives replayed in the logged order: rank 0's order hashes, as each other
      // rank received them along the way (some from the crashed incarnation), all agree with
      // the order the final rank 0 holds.
      const order = results[0]!.order;
      for (const o of ranks.filter((x) => x.rank !== 0)) {
        const seen = (replaced!.rank === o.rank ? replaced!.seen : o.seen);
        for (let step = 0; step < STEPS; step++) expect(seen[step]).toBe(hashOf(order.slice(0, 2 * (step + 1))));
      }
      // Re-executed sends the receivers already held were skipped, never delivered twice.
      // It restored the checkpoint of step 5 (the interval is 5 ticks: checkpoint 1), replayed
      // what it had received since from the log, and skipped the re-executed sends its
      // receivers held.
      expect(replaced!.rt.stats.restoredFrom).toBe(1);
      expect(replaced!.rt.stats.replayed).toBeGreaterThan(0);
      expect(replaced!.caughtUp).toBe(true);
      expect(replaced!.ch.counters.skipped).toBeGreaterThan(0);
      expect(replaced!.ch.counters.gaps + ranks.reduce((n, o) => n + o.ch.counters.gaps, 0)).toBe(0);
    });
  }

  it('crashes at seeded random points (rank, step, phase) all end with the failure-free answer', async () => {
    const reference = await run(3, null);
    const phases = ['before-send', 'after-send', 'before-allreduce', 'after-wildcard', 'before-snapshot'];
    let seed = 17;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let k = 0; k < 8; k++) {
      await closeMeshes();
      const phase = phases[next(phases.length)]!;
      const crashAt = { rank: phase === 'after-wildcard' ? 0 : next(3), step: 1 + next(STEPS - 1), phase };
      const { results } = await run(3, crashAt);
      for (let r = 0; r < 3; r++) expect(results[r]!.hist, JSON.stringify(crashAt)).toEqual(reference.results[r]!.hist);
    }
  });

  it('a checkpoint the protector corrupted is refused by its digest, and the replacement falls back to the one before (PROTOCOL §11.4)', async () => {
    const reference = await run(3, null);
    await closeMeshes();
    let corrupted = 0;
    const { results, replaced } = await run(3, { rank: 1, step: 11, phase: 'before-send' }, (store) => {
      const newest = store.checkpoints[store.checkpoints.length - 1]!;
      const bytes = newest.bytes.slice();
      bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0x01; // one flipped bit: it still decodes
      store.checkpoints = [...store.checkpoints.slice(0, -1), { ...newest, bytes }];
      corrupted = newest.id;
    });
    expect(corrupted).toBe(2);
    expect(replaced!.rt.stats.refused).toBe(1);
    expect(replaced!.rt.stats.restoredFrom).toBe(1);
    for (let r = 0; r < 3; r++) expect(results[r]!.hist).toEqual(reference.results[r]!.hist);
  });

});

describe('the group\'s record of checkpoints (PROTOCOL §11.4)', () => {
  it('a log entry the protector rewrote, or entries it dropped, are refused by the chain digest the group recorded', async () => {
    logging = 'rbml';
    const { stores, marks } = await run(3, null);
    const store = stores[1]!;
    const newest = marks.get(1)!.at(-1)!;
    // The marks reach past the newest checkpoint: the log's extent was reported as it grew.
    expect(newest.extent).toBeGreaterThan(newest.logPos);
    const replacement = async () => {
      const r = await makeRank(1, 20, [0, 20, 2], store, marks);
      return r.rt.recover().then(() => r, (e: unknown) => e as RollbackError);
    };
    // Untouched, a replacement takes it.
    expect(await replacement()).not.toBeInstanceOf(Error);
    // One payload bit flipped in an entry after the checkpoint: it still decodes, its chain
    // does not meet the record; the older checkpoint's replay crosses it too.
    const pos = newest.logPos + 1;
    const honest = store.log.get(pos)!;
    const forged = honest.slice();
    forged[forged.length - 1] = forged[forged.length - 1]! ^ 0x01;
    store.log.set(pos, forged);
    const rewritten = await replacement();
    expect(rewritten).toBeInstanceOf(RollbackError);
    expect((rewritten as RollbackError).code).toBe('LOG_CORRUPT');
    expect((rewritten as RollbackError).message).toMatch(/does not match the group's record/);
    // The log cut short of the recorded extent.
    store.log.set(pos, honest);
    for (const p of [...store.log.keys()]) if (p >= newest.extent) store.log.delete(p);
    const dropped = await replacement();
    expect((dropped as RollbackError).code).toBe('LOG_CORRUPT');
    expect((dropped as RollbackError).message).toMatch(/recorded the log up to position \d+, and the protector holds it only up to/);
  });

  it('a protector that lost or withholds every recorded checkpoint is refused: the replacement fails visibly', async () => {
    const store = new ChainedStore(new MemStore());
    const p2p = await openMesh(9);
    const ch = new RankChannels({ p2p, rank: 0, vpids: [9, 1], store, onFatal: () => undefined });
    const layer = new CommLayer(ch);
    const world = layer.create(0, [0, 1]);
    const mark = { id: 3, logPos: 10, digest: new Uint8Array(32), protector: 'mem', base: new Uint8Array(32), extent: 10, chain: new Uint8Array(32) };
    const rt = new RollbackRuntime({ channels: ch, layer, world, store, state: { x: 1 }, intervalMs: 5, maxStateBytes: 1 << 20, now: () => 0, marks: [mark] });
    const e = await rt.recover().then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(RollbackError);
    expect((e as RollbackError).code).toBe('NO_CHECKPOINT');
    expect((e as RollbackError).message).toMatch(/recorded checkpoint 3/);
  });

});

/** A store that holds every append until `open()` (its protector is slow). */
class GatedStore extends MemStore {
  private gate: (() => void)[] = [];
  opened = false;
  override async append(pos: number, blob: Uint8Array): Promise<void> {
    if (!this.opened) await new Promise<void>((r) => this.gate.push(r));
    return super.append(pos, blob);
  }
  open(): void {
    this.opened = true;
    for (const r of this.gate.splice(0)) r();
  }
}

describe('when a send and a receive complete (radic-hmpl A.2.5 vs B.3, B.7)', () => {
  async function pair(mode: 'rbml' | 'hmpl', receiverStore: MemStore) {
    const a = await openMesh(0);
    const b = await openMesh(1);
    await Promise.all([a.connect([{ id: 1, host: '127.0.0.1', port: b.port }]), b.connect([{ id: 0, host: '127.0.0.1', port: a.port }])]);
    const ca = new RankChannels({ p2p: a, rank: 0, vpids: [0, 1], store: new MemStore(), onFatal: () => undefined, logging: mode });
    const cb = new RankChannels({ p2p: b, rank: 1, vpids: [0, 1], store: receiverStore, onFatal: () => undefined, logging: mode });
    ca.start();
    cb.start();
    return { ca, cb };
  }
  const settle = async () => {
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  };

  it('RBML: the send and the receive complete only once the receiver\'s protector holds the message', async () => {
    const store = new GatedStore();
    const { ca, cb } = await pair('rbml', store);
    let sent = false;
    let got = false;
    void ca.send(1, 5, Uint8Array.of(1)).then(() => (sent = true));
    void cb.recv(0, 5).then(() => (got = true));
    await settle();
    expect([sent, got]).toEqual([false, false]);
    store.open();
    await settle();
    expect([sent, got]).toEqual([true, true]);
  });

  it('HMPL: the send completes at once and a named receive before the log; a wildcard receive waits for it', async () => {
    const store = new GatedStore();
    const { ca, cb } = await pair('hmpl', store);
    let sent = false;
    let got = false;
    let wild = false;
    void ca.send(1, 5, Uint8Array.of(1)).then(() => (sent = true));
    void ca.send(1, 6, Uint8Array.of(2));
    void cb.recv(0, 5).then(() => (got = true));
    await settle();
    expect([sent, got]).toEqual([true, true]);
    void cb.recv(ANY_SOURCE, 6).then(() => (wild = true));
    await settle();
    expect(wild).toBe(false);
    // The sender's TB holds both until the receiver has logged them.
    expect(ca.retainedCount()).toBe(2);
    store.open();
    await settle();
    expect(wild).toBe(true);
    expect(ca.retainedCount()).toBe(0);
  });

  it('a message larger than one log entry is logged as fragments, and a replay joins them (PROTOCOL §11.3)', async () => {
    const store = new MemStore();
    const { ca, cb } = await pair('rbml', store);
    const big = Buffer.from(Uint8Array.from({ length: 3 * 1024 * 1024 + 5 }, (_, i) => i % 251));
    const sent = ca.send(1, 9, big);
    const got = await cb.recv(0, 9);
    await sent;
    // Buffer.equals, not toEqual: a deep comparison of 3 MiB takes vitest tens of seconds.
    const same = (x: Uint8Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(big);
    expect(same(got.data)).toBe(true);
    expect([...store.log.keys()]).toEqual([1, 2, 3, 4, 5, 6, 7]); // 7 fragments of 512 KiB
    // A replacement replays them as one message.
    const p2p = await openMesh(7);
    const again = new RankChannels({ p2p, rank: 1, vpids: [0, 7], store: new MemStore(), onFatal: () => undefined });
    for (const [pos, blob] of store.log) {
      const e = decodeLogEntry(blob, 2);
      expect(e.ok).toBe(true);
      if (e.ok) again.replay(pos, e.value);
    }
    expect(again.st.queue.map((m) => [m.source, m.ssn, m.pos, m.data.length])).toEqual([[0, 1, 7, big.length]]);
    expect(same(again.st.queue[0]!.data)).toBe(true);
  });
});

describe('two overlapping recoveries (PROTOCOL §11.3 `have`; radic-hmpl B.3 window t2–t4; campaign seed 2 run 67)', () => {
  // HMPL lets a named receive take a message before the receiver has logged it. If the sender
  // then dies and its replacement re-executes, the receiver's `have` must not count that
  // message: the replacement would skip it and keep no copy, and when the receiver died in turn
  // before logging it, its own replacement would wait for it forever.
  it('a receiver that dies with an arrived, unlogged message gets it from the re-executing sender\'s replacement', async () => {
    const link = async (x: P2P, y: P2P, xId: number, yId: number) => {
      await Promise.all([x.connect([{ id: yId, host: '127.0.0.1', port: y.port }]), y.connect([{ id: xId, host: '127.0.0.1', port: x.port }])]);
    };
    const settle = async () => {
      for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    };
    const payload = Uint8Array.of(4, 2);
    // Rank 0 (VPID 0) sends to rank 1 (VPID 1), whose protector is slow: the message arrives and
    // is received, and never logged.
    const [a, b] = [await openMesh(0), await openMesh(1)];
    await link(a, b, 0, 1);
    const slow = new GatedStore();
    const ca = new RankChannels({ p2p: a, rank: 0, vpids: [0, 1], store: new MemStore(), onFatal: () => undefined, logging: 'hmpl' });
    const cb = new RankChannels({ p2p: b, rank: 1, vpids: [0, 1], store: slow, onFatal: () => undefined, logging: 'hmpl' });
    ca.start();
    cb.start();
    await ca.send(1, 5, payload);
    expect((await cb.recv(0, 5)).data).toEqual(payload);
    expect(cb.st.lastIn[0]).toBe(1);
    expect(cb.st.loggedIn[0]).toBe(0);

    // Rank 0 dies before any checkpoint; its replacement (VPID 2) re-executes the send.
    ca.close(new Crash('crashed'));
    await a.close({ bye: false });
    cb.onDeath(0);
    b.removePeer(0);
    const a2 = await openMesh(2);
    await link(a2, b, 2, 1);
    const ca2 = new RankChannels({ p2p: a2, rank: 0, vpids: [2, 1], store: new MemStore(), onFatal: () => undefined, logging: 'hmpl' });
    ca2.start();
    await ca2.send(1, 5, payload);
    await settle();
    // What rank 1 holds logged is nothing: the replacement keeps its copy.
    expect(ca2.counters.skipped).toBe(0);
    expect(ca2.retainedCount()).toBe(1);

    // Rank 1 dies before its protector logged the message; its replacement (VPID 3) starts from
    // an empty store, and must still receive it.
    cb.close(new Crash('crashed'));
    await b.close({ bye: false });
    ca2.onDeath(1);
    a2.removePeer(1);
    const b2 = await openMesh(3);
    await link(a2, b2, 2, 3);
    const store = new MemStore();
    const cb2 = new RankChannels({ p2p: b2, rank: 1, vpids: [2, 3], store, onFatal: () => undefined, logging: 'hmpl' });
    cb2.start();
    const got = await Promise.race([cb2.recv(0, 5), new Promise<null>((r) => setTimeout(() => r(null), 5000))]);
    expect(got?.data).toEqual(payload);
    await settle();
    expect(store.appends).toBe(1);
    expect(ca2.retainedCount()).toBe(0);
  });
});
