// Semi-coordinated checkpoints over real P2P sockets on loopback (docs/PROTOCOL.md §11.7;
// radic-hmpl A.2.8 BSCO, SCO, A.6 "BSCO/SCO"): four ranks of one task in this process, in two
// checkpoint groups of two ({0, 1} and {2, 3}), each rank with its own P2P mesh, channels, group
// coordination and checkpoint runtime, its store in memory (counting appends). A crash of one
// member takes its group down (as the group's kill does, cluster-rollback.ts); both members are
// replaced, restore the same complete checkpoint, and the answer is the failure-free one.
import { afterEach, describe, expect, it } from 'vitest';
import { CommLayer } from '../../src/app/gmpi/comm.ts';
import * as coll from '../../src/app/gmpi/collectives.ts';
import { ANY_SOURCE } from '../../src/app/gmpi/matching.ts';
import type { P2P } from '../../src/app/gmpi/p2p.ts';
import { decodeLogEntry } from '../../src/app/rollback/codec.ts';
import { GroupCheckpoint } from '../../src/app/rollback/group-checkpoint.ts';
import { ChainedStore } from '../../src/app/rollback/log-chain.ts';
import { RankChannels } from '../../src/app/rollback/rank-channels.ts';
import { RollbackError, RollbackRuntime, type Mark } from '../../src/app/rollback/runtime.ts';
import { closeMeshes, Crash, initialState, MemStore, openMesh, peersOf, STEPS, type State } from './rollback-harness.ts';

/** A rank's store as the protector keeps it (rollback-harness.ts MemStore) that counts the
 *  message entries appended by source, and refuses a checkpoint id that does not grow. */
class CountingStore extends MemStore {
  /** Message entries appended, per source rank. */
  appendedFrom = [0, 0, 0, 0];
  override async append(pos: number, blob: Uint8Array): Promise<void> {
    await super.append(pos, blob);
    const e = decodeLogEntry(blob, 4);
    if (e.ok && e.value.kind === 'message') this.appendedFrom[e.value.source]!++;
  }
  override async putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    if (id <= (this.checkpoints.at(-1)?.id ?? 0)) throw new Error(`checkpoint id ${id} again`);
    await super.putCheckpoint(id, logPos, bytes);
  }
  /** Message entries appended whose source is one of `ranks`. */
  messagesFrom(ranks: number[]): number {
    return ranks.reduce((n, r) => n + this.appendedFrom[r]!, 0);
  }
}

type Rank = { rank: number; vpid: number; p2p: P2P; ch: RankChannels; rt: RollbackRuntime; state: State; layer: CommLayer; crashed: boolean; killed: () => void };
type Mode = 'nco' | 'bsco' | 'sco';

const SIZE = 4;
const GROUPS = [0, 0, 2, 2];
const LEN = 32;
/** The logging mode the runs below use (each test sets it). */
let logging: 'rbml' | 'hmpl' = 'rbml';

afterEach(closeMeshes);

/** One rank as rollback-init.ts assembles it; `lag` lengthens its checkpoint interval (SCO:
 *  members reach their interval at different snapshots). */
async function makeRank(mode: Mode, rank: number, vpid: number, vpids: number[], store: CountingStore, marks: Mark[][], recovered: boolean, lag = 0): Promise<Rank> {
  const p2p = await openMesh(vpid);
  const state = initialState(rank, LEN);
  const semi = mode === 'nco' ? null : mode;
  const chained = new ChainedStore(store);
  const ch = new RankChannels({ p2p, rank, vpids, store: chained, onFatal: () => undefined, logging, ...(semi === null ? {} : { groups: GROUPS }) });
  const coordination = semi === null ? null : new GroupCheckpoint({ self: rank, groups: GROUPS, mode: semi, send: (r, f) => ch.sendGroupFrame(r, f) });
  if (coordination !== null) {
    ch.group = { onFrame: (r, f) => coordination.onFrame(r, f), onHaveSent: (r, fresh) => (fresh && coordination.forget(r), coordination.announce(r)) };
  }
  const layer = new CommLayer(ch);
  const world = layer.create(0, vpids.map((_, r) => r));
  const rt = new RollbackRuntime({
    channels: ch, layer, world, store: chained, state, intervalMs: 5 + lag, maxStateBytes: 1 << 20, now: () => state.step, marks: [...marks[rank]!],
    onCheckpoint: (m) => (marks[rank] = [...marks[rank]!, { ...m, protector: 'mem' }].slice(-2)),
    ...(coordination === null ? {} : { group: { coordination, groups: GROUPS, marks: marks.map((m) => [...m]) } }),
  });
  if (coordination !== null && !recovered) await rt.origin();
  return { rank, vpid, p2p, ch, rt, state, layer, crashed: false, killed: () => undefined };
}

/** The program, with no recovery code: a ring exchange (0→1 and 2→3 inside a group, 1→2 and 3→0
 *  across), an allreduce, and at rank 0 a wildcard gather whose order it sends on. */
async function program(r: Rank, hook: (r: Rank, phase: string) => void): Promise<State> {
  const s = r.state;
  const world = { id: 0, members: [0, 1, 2, 3] };
  while (s.step < STEPS) {
    hook(r, 'before-send');
    await r.layer.send(world, (r.rank + 1) % SIZE, 1, s.x);
    hook(r, 'after-send');
    const m = await r.layer.recv<number[]>(world, (r.rank + SIZE - 1) % SIZE, 1);
    s.x = s.x.map((v, i) => v * 0.5 + m.data[i]! * 0.25 + 0.125);
    const sum = await coll.allreduce(r.layer, world, s.x.reduce((a, b) => a + b, 0), (a: number, b: number) => a + b);
    s.hist.push(sum);
    if (r.rank === 0) {
      for (let k = 1; k < SIZE; k++) s.order.push((await r.layer.recv(world, ANY_SOURCE, 2)).source);
      for (let k = 1; k < SIZE; k++) await r.layer.send(world, k, 3, s.order.length);
    } else {
      await r.layer.send(world, 0, 2, s.step);
      await r.layer.recv(world, 0, 3);
    }
    s.step++;
    hook(r, 'before-snapshot');
    await r.rt.snapshot();
  }
  return s;
}

/** Run the four ranks; at `crashAt` the rank crashes and its group goes down with it (the
 *  group's kill, §11.7); both members are replaced at once, as the group would. */
async function run(mode: Mode, crashAt: { rank: number; step: number; phase: string } | null, lags: number[] = [0, 0, 0, 0]) {
  const stores = Array.from({ length: SIZE }, () => new CountingStore());
  const marks: Mark[][] = Array.from({ length: SIZE }, () => []);
  const vpids = [0, 1, 2, 3];
  const ranks = await Promise.all(vpids.map((v) => makeRank(mode, v, v, vpids, stores[v]!, marks, false, lags[v])));
  await Promise.all(ranks.map((r) => r.p2p.connect(peersOf(r, ranks))));
  for (const r of ranks) r.ch.start();
  let replaced: Rank[] = [];
  let replacement: Promise<State[]> | null = null;
  const hook = (r: Rank, phase: string) => {
    if (crashAt === null || replacement !== null || r.rank !== crashAt.rank || r.state.step !== crashAt.step || phase !== crashAt.phase) return;
    const group = mode === 'nco' ? [r.rank] : vpids.filter((x) => GROUPS[x] === GROUPS[r.rank]);
    const down = ranks.filter((o) => group.includes(o.rank));
    for (const o of down) {
      o.crashed = true;
      o.ch.close(new Crash('crashed'));
      o.killed();
      void o.p2p.close({ bye: false });
    }
    replacement = (async () => {
      const table = ranks.map((o) => (group.includes(o.rank) ? o.vpid + 10 : o.vpid));
      for (const o of ranks) if (!group.includes(o.rank)) {
        for (const d of down) {
          o.ch.onDeath(d.vpid);
          o.p2p.removePeer(d.vpid);
        }
        o.p2p.expect(down.map((d) => d.vpid + 10));
      }
      const fresh = await Promise.all(down.map((d) => makeRank(mode, d.rank, d.vpid + 10, table, stores[d.rank]!, marks, true, lags[d.rank])));
      for (const n of fresh) await n.rt.recover();
      replaced = fresh;
      const now = ranks.map((o) => fresh.find((n) => n.rank === o.rank) ?? o);
      await Promise.all(fresh.map((n) => n.p2p.connect(peersOf(n, now))));
      for (const n of fresh) n.ch.start();
      return Promise.all(fresh.map((n) => program(n, hook)));
    })();
    throw new Crash('crashed');
  };
  const runs = ranks.map((r) => Promise.race([
    program(r, hook),
    new Promise<null>((resolve) => (r.killed = () => resolve(null))),
  ]).catch((e: unknown) => {
    if (e instanceof Crash || r.crashed) return null;
    throw e;
  }));
  const results: (State | null)[] = await Promise.all(runs);
  if (replacement !== null) await replacement;
  for (const n of replaced) results[n.rank] = n.state;
  return { results: results as State[], stores, ranks, replaced, marks };
}

describe('PROTOCOL §11.7 semi-coordinated checkpoints over real sockets (radic-hmpl A.2.8, A.6)', () => {
  it('A.6 "the intra-node message log volume is ~0": BSCO and SCO append no internal message; NCO appends them all; the answers agree', async () => {
    logging = 'rbml';
    const counts: Record<string, number> = {};
    const hists: string[] = [];
    for (const mode of ['nco', 'bsco', 'sco'] as const) {
      await closeMeshes();
      const { results, stores, ranks } = await run(mode, null);
      counts[mode] = stores.reduce((n, s) => n + s.appends, 0);
      hists.push(JSON.stringify(results.map((s) => s.hist)));
      const internalLogged = stores[1]!.messagesFrom([0]) + stores[0]!.messagesFrom([1]) + stores[3]!.messagesFrom([2]) + stores[2]!.messagesFrom([3]);
      if (mode === 'nco') expect(internalLogged).toBeGreaterThan(0);
      if (mode === 'bsco') expect(internalLogged).toBe(0); // the barrier: no message crosses the line
      if (mode !== 'nco') expect(ranks.reduce((n, r) => n + r.ch.counters.internal, 0)).toBeGreaterThan(0);
      // Every member took the same checkpoints: the origin, then group epochs.
      if (mode !== 'nco') for (const g of [[0, 1], [2, 3]]) expect(stores[g[0]!]!.checkpoints.map((c) => c.id)).toEqual(stores[g[1]!]!.checkpoints.map((c) => c.id));
    }
    expect(new Set(hists).size).toBe(1);
    expect(counts.bsco).toBeLessThan(counts.nco!);
    expect(counts.sco).toBeLessThan(counts.nco!);
  });

  for (const [mode, log] of [['bsco', 'rbml'], ['sco', 'rbml'], ['bsco', 'hmpl'], ['sco', 'hmpl']] as const) {
    for (const phase of ['after-send', 'before-snapshot']) {
      it(`${mode} with ${log}: a member that crashes ${phase} takes its group down; both are restored from the same complete checkpoint and the answer is bit-identical (A.2.8 "rolls forward together")`, async () => {
        logging = log;
        const reference = await run(mode, null);
        await closeMeshes();
        const { results, replaced } = await run(mode, { rank: 1, step: 9, phase });
        expect(replaced.map((n) => n.rank)).toEqual([0, 1]);
        expect(new Set(replaced.map((n) => n.rt.stats.restoredFrom)).size).toBe(1);
        expect(replaced[0]!.rt.stats.restoredFrom).toBeGreaterThan(1); // a checkpoint after the origin
        for (let r = 0; r < SIZE; r++) {
          expect(results[r]!.hist).toEqual(reference.results[r]!.hist);
          expect(results[r]!.x).toEqual(reference.results[r]!.x);
        }
      });
    }
  }

  it('sco: members reach their interval at different snapshots; a message crossing the checkpoint line is logged, and a crash after it restores bit-identically', async () => {
    logging = 'rbml';
    const lags = [0, 3, 0, 0]; // rank 1's interval is longer: rank 0 checkpoints first and rank 1 follows
    const reference = await run('sco', null, lags);
    await closeMeshes();
    const fine = await run('sco', null, lags);
    expect(fine.stores[0]!.messagesFrom([1]) + fine.stores[1]!.messagesFrom([0])).toBeGreaterThan(0);
    await closeMeshes();
    const { results, replaced } = await run('sco', { rank: 0, step: 11, phase: 'after-send' }, lags);
    expect(replaced.map((n) => n.rank)).toEqual([0, 1]);
    expect(replaced[0]!.rt.stats.restoredFrom).toBe(replaced[1]!.rt.stats.restoredFrom);
    for (let r = 0; r < SIZE; r++) expect(results[r]!.hist).toEqual(reference.results[r]!.hist);
  });

  it('A.2.8 commit rule: the replacement restores the newest checkpoint every member recorded; one its protector corrupted is refused and not replaced by an older one (no member rolls back alone)', async () => {
    logging = 'rbml';
    const { stores, marks } = await run('bsco', null);
    const newest = Math.min(...[0, 1].map((r) => Math.max(...marks[r]!.map((m) => m.id))));
    expect(newest).toBeGreaterThan(1);
    const fresh = await makeRank('bsco', 1, 21, [20, 21, 2, 3], stores[1]!, marks, true);
    await fresh.rt.recover();
    expect(fresh.rt.stats.restoredFrom).toBe(newest);
    // The protector flips one bit of that checkpoint: refused, and the older one is not taken.
    const c = stores[1]!.checkpoints.find((x) => x.id === newest)!;
    const bytes = c.bytes.slice();
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1;
    stores[1]!.checkpoints = stores[1]!.checkpoints.map((x) => (x.id === newest ? { ...x, bytes } : x));
    const again = await makeRank('bsco', 1, 22, [20, 22, 2, 3], stores[1]!, marks, true);
    const e = await again.rt.recover().then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(RollbackError);
    expect((e as RollbackError).code).toBe('NO_CHECKPOINT');
  });
});
