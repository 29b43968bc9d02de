// G-MPI collectives (src/app/gmpi/collectives.ts) over real TCP on 127.0.0.1: barrier, bcast,
// reduce, allreduce, gather, scatter and allgather give MPI's results on communicators of 1, 2,
// 3, 4, 7 and 16 ranks (in-process P2P endpoints whose VPIDs are neither 0..n-1 nor in rank
// order), and on four real child processes. Consecutive and concurrent collectives on one
// communicator, and collectives on two communicators, never mix; abort (spec §5.2's alert flag)
// settles each collective blocked in it with ABORTED at once, and after resume() a new
// communicator (as recovery makes one, spec §5.5) works; refused calls have no effect.
// No wall-clock thresholds: waits are event-driven.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  allgather, allreduce, barrier, bcast, gather, reduce, scatter, type ReduceOp,
} from '../../src/app/gmpi/collectives.ts';
import { CommLayer, type Comm } from '../../src/app/gmpi/comm.ts';
import { P2P } from '../../src/app/gmpi/p2p.ts';
import { P2PError, type P2POptions } from '../../src/app/gmpi/p2p-types.ts';
import { expectCode, TEST_TASK_KEY, track, turns, until } from './gmpi-test-tools.ts';

const TASK = 't9';
const opened: P2P[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(opened.splice(0).map((p) => p.close()));
});

type Rank = { p2p: P2P; layer: CommLayer; comm: Comm };

/** `size` processes, fully meshed, with one communicator (id 0) over all of them. VPIDs are
 *  100 + 7·i, and ranks run in reverse VPID order, so no code can confuse the two. */
async function world(size: number, extra: Partial<P2POptions> = {}): Promise<Rank[]> {
  const vpids = Array.from({ length: size }, (_, i) => 100 + 7 * i);
  const p2ps = await Promise.all(vpids.map((self) => P2P.open({ taskId: TASK, self, taskKey: TEST_TASK_KEY, ...extra })));
  opened.push(...p2ps);
  const peers = p2ps.map((p) => ({ id: p.self, host: '127.0.0.1', port: p.port }));
  await Promise.all(p2ps.map((p) => p.connect(peers)));
  const members = [...vpids].reverse();
  return members.map((vpid) => {
    const p2p = p2ps.find((p) => p.self === vpid);
    if (p2p === undefined) throw new Error('no endpoint');
    const layer = new CommLayer(p2p);
    return { p2p, layer, comm: layer.create(0, members) };
  });
}

const at = (ranks: Rank[], r: number): Rank => {
  const x = ranks[r];
  if (x === undefined) throw new Error(`no rank ${r}`);
  return x;
};

/** Run `f` on every rank concurrently; results in rank order. */
const onAll = <T>(ranks: Rank[], f: (x: Rank, rank: number) => Promise<T>): Promise<T[]> => Promise.all(ranks.map((x, r) => f(x, r)));





const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('G-MPI collectives give MPI results', () => {
  for (const size of [1, 2, 3, 4, 7, 16]) {
    it(`all seven collectives on ${size} rank${size === 1 ? '' : 's'}`, async () => {
      const ranks = await world(size);
      const last = size - 1;
      const mid = Math.floor(size / 2);
      const results = await onAll(ranks, async ({ layer, comm }, r) => {
        await barrier(layer, comm);
        const fromLast = await bcast(layer, comm, last, r === last ? { from: 'last', list: [1, 2, 3] } : undefined);
        const bytes = await bcast(layer, comm, 0, r === 0 ? Buffer.from('raw bytes') : undefined);
        const sum = await reduce(layer, comm, mid, r + 1, 'sum');
        const vector = await reduce(layer, comm, 0, [r, 2 * r, 1], 'sum');
        const max = await allreduce(layer, comm, (r * 37) % size, 'max');
        const min = await allreduce(layer, comm, new Float64Array([r, -r]), 'min');
        // A non-commutative (but associative) op: the result shows MPI's rank order.
        const order = await allreduce(layer, comm, String(r), (a: string, b: string) => `${a},${b}`);
        const gathered = await gather(layer, comm, last, { rank: r });
        const scattered = await scatter(layer, comm, mid, r === mid ? range(size).map((i) => `for ${i}`) : undefined);
        const all = await allgather(layer, comm, r * r);
        await barrier(layer, comm);
        return { fromLast, bytes, sum, vector, max, min, order, gathered, scattered, all };
      });
      const total = (size * (size + 1)) / 2;
      results.forEach((x, r) => {
        expect(x.fromLast).toEqual({ from: 'last', list: [1, 2, 3] });
        expect(Buffer.from(x.bytes as Uint8Array).toString()).toBe('raw bytes');
        expect(x.sum).toBe(r === mid ? total : undefined);
        expect(x.vector).toEqual(r === 0 ? [(size * (size - 1)) / 2, size * (size - 1), size] : undefined);
        expect(x.max).toBe(Math.max(...range(size).map((i) => (i * 37) % size)));
        expect(x.min).toEqual(new Float64Array([0, -(size - 1)]));
        expect(x.order).toBe(range(size).join(','));
        expect(x.gathered).toEqual(r === last ? range(size).map((i) => ({ rank: i })) : undefined);
        expect(x.scattered).toBe(`for ${r}`);
        expect(x.all).toEqual(range(size).map((i) => i * i));
      });
      for (const { p2p } of ranks) expect(p2p.stats()).toMatchObject({ unexpectedMessages: 0, pendingRecvs: 0 });
    });
  }

  it('barrier returns on no rank before the last rank enters it', async () => {
    const ranks = await world(4);
    const early = ranks.slice(0, 3).map(({ layer, comm }) => track(barrier(layer, comm)));
    await turns(50);
    expect(early.map((e) => e.settled())).toEqual([false, false, false]);
    const lastRank = at(ranks, 3);
    await Promise.all([barrier(lastRank.layer, lastRank.comm), ...early.map((e) => e.promise)]);
  });

  it('collectives posted back to back without waiting never mix (one tag per collective)', async () => {
    const ranks = await world(5);
    const results = await onAll(ranks, ({ layer, comm }, r) => {
      // All issued before any completes; each rank issues them in the same order.
      const calls = [
        bcast(layer, comm, 0, r === 0 ? 'zero' : undefined),
        bcast(layer, comm, 4, r === 4 ? 'four' : undefined),
        allgather(layer, comm, `g${r}`),
        allreduce(layer, comm, r, 'sum'),
        reduce(layer, comm, 2, [r], 'max'),
        bcast(layer, comm, 2, r === 2 ? 'two' : undefined),
      ];
      return Promise.all(calls);
    });
    results.forEach((x, r) => {
      expect(x).toEqual(['zero', 'four', range(5).map((i) => `g${i}`), 10, r === 2 ? [4] : undefined, 'two']);
    });
  });

  it('collectives on two communicators over the same processes stay separate', async () => {
    const ranks = await world(3);
    const second = ranks.map(({ layer }) => layer.create(7, [100, 107, 114]));
    const results = await onAll(ranks, ({ layer, comm, p2p }, r) => {
      const other = second[r] as Comm;
      return Promise.all([
        allgather(layer, comm, `world:${p2p.self}`),
        allgather(layer, other, `seven:${p2p.self}`),
        bcast(layer, other, 0, layer.rank(other) === 0 ? 'root of seven' : undefined),
      ]);
    });
    for (const [w, s, b] of results) {
      expect(w).toEqual(['world:114', 'world:107', 'world:100']);
      expect(s).toEqual(['seven:100', 'seven:107', 'seven:114']);
      expect(b).toBe('root of seven');
    }
  });

  it('reduce operators: numbers, bigints, arrays, typed arrays, functions; mismatches are OP_FAILED', async () => {
    const ranks = await world(3);
    const run = <T>(values: T[], op: ReduceOp<T>) => onAll(ranks, ({ layer, comm }, r) => allreduce(layer, comm, values[r] as T, op));
    expect(await run([2, 3, 4], 'prod')).toEqual([24, 24, 24]);
    expect(await run([5n, 7n, 11n], 'sum')).toEqual([23n, 23n, 23n]);
    expect(await run([[1, 9], [4, 2], [3, 3]], 'min')).toEqual(Array(3).fill([1, 2]));
    expect(await run([new Int32Array([1, 9]), new Int32Array([4, 2]), new Int32Array([3, 30])], 'max')).toEqual(Array(3).fill(new Int32Array([4, 30])));
    expect(await run([{ n: 1 }, { n: 2 }, { n: 3 }], (a, b) => ({ n: a.n + b.n }))).toEqual(Array(3).fill({ n: 6 }));
    // Length mismatch: detected where the values meet (rank 0, the root of the tree).
    const layerOf = (r: number) => at(ranks, r);
    const mismatch = onAll(ranks, ({ layer, comm }, r) => reduce(layer, comm, 0, r === 2 ? [1, 2, 3] : [1, 2], 'sum'));
    await expectCode(mismatch, 'OP_FAILED');
    // A throwing user op, on a fresh communicator (the failed reduce left comm 0 behind).
    const fresh = ranks.map((x) => x.layer.create(1, x.comm.members));
    const threw = onAll(ranks, ({ layer }, r) => reduce(layer, fresh[r] as Comm, 0, r, () => { throw new Error('nope'); }));
    const e = await expectCode(threw, 'OP_FAILED');
    expect(e.message).toContain('nope');
    expect(layerOf(0).p2p.isAborted()).toBe(false);
  });
});

describe('G-MPI collectives refuse bad calls without effect', () => {
  it('bad root, bad op, wrong scatter count, unknown communicator: typed errors; the next collective still matches', async () => {
    const ranks = await world(3);
    const r0 = at(ranks, 0);
    await expectCode(bcast(r0.layer, r0.comm, 3, 'x'), 'BAD_RANK');
    await expectCode(bcast(r0.layer, r0.comm, -1, 'x'), 'BAD_RANK');
    await expectCode(reduce(r0.layer, r0.comm, 0.5, 1, 'sum'), 'BAD_RANK');
    await expectCode(reduce(r0.layer, r0.comm, 0, 1, 'avg' as ReduceOp<number>), 'BAD_ARGUMENT');
    await expectCode(allreduce(r0.layer, r0.comm, 1, 'avg' as ReduceOp<number>), 'BAD_ARGUMENT');
    await expectCode(scatter(r0.layer, r0.comm, 0, [1, 2]), 'BAD_ARGUMENT');
    await expectCode(gather(r0.layer, { id: 99, members: r0.comm.members }, 0, 1), 'BAD_COMM');
    await expectCode(bcast(r0.layer, r0.comm, 0, Symbol('no') as unknown), 'BAD_ARGUMENT');
    // Had any of those consumed a sequence number on rank 0 only, this would not match up.
    const sums = await onAll(ranks, ({ layer, comm }, r) => allreduce(layer, comm, r, 'sum'));
    expect(sums).toEqual([3, 3, 3]);
  });
});

describe('G-MPI collectives and the alert flag (spec §5.2)', () => {
  type Case = { name: string; blocked: number; call: (x: Rank, rank: number) => Promise<unknown> };
  const cases: Case[] = [
    { name: 'barrier', blocked: 0, call: ({ layer, comm }) => barrier(layer, comm) },
    { name: 'bcast (non-root waits for the root)', blocked: 1, call: ({ layer, comm }) => bcast(layer, comm, 0) },
    { name: 'reduce (root waits for the others)', blocked: 0, call: ({ layer, comm }) => reduce(layer, comm, 0, 1, 'sum') },
    { name: 'allreduce', blocked: 2, call: ({ layer, comm }) => allreduce(layer, comm, 1, 'sum') },
    { name: 'gather (root waits for the others)', blocked: 1, call: ({ layer, comm }) => gather(layer, comm, 1, 'v') },
    { name: 'scatter (non-root waits for the root)', blocked: 2, call: ({ layer, comm }) => scatter(layer, comm, 0) },
    { name: 'allgather', blocked: 1, call: ({ layer, comm }) => allgather(layer, comm, 'v') },
  ];
  for (const c of cases) {
    it(`abort settles a blocked ${c.name} at once with ABORTED; after resume a new communicator works`, async () => {
      const ranks = await world(3);
      const me = at(ranks, c.blocked);
      const blocked = track(c.call(me, c.blocked));
      await turns(20);
      expect(blocked.settled()).toBe(false);
      const reason = { cause: c.name };
      me.p2p.abort(reason);
      await turns(1);
      expect(blocked.settled()).toBe(true);
      expect((await expectCode(blocked.promise, 'ABORTED')).reason).toBe(reason);
      // While raised, every new collective fails at once, even on one rank's own communicator.
      const alone = me.layer.create(50, [me.p2p.self]);
      await expectCode(barrier(me.layer, alone), 'ABORTED');
      await expectCode(c.call(me, c.blocked), 'ABORTED');
      // Recovery's pattern: clear the flag, replace the communicator, discard the old one.
      me.p2p.resume();
      const results = await onAll(ranks, async ({ layer, comm }) => {
        layer.discardComm(comm.id);
        const next = layer.create(1, comm.members);
        const sum = await allreduce(layer, next, layer.rank(next) + 1, 'sum');
        await barrier(layer, next);
        return sum;
      });
      expect(results).toEqual([6, 6, 6]);
      await barrier(me.layer, alone);
    });
  }

  it('abort settles a collective blocked behind send backpressure', async () => {
    const MIB = 1024 * 1024;
    const ranks = await world(2, { maxMessageBytes: 4 * MIB, maxUnexpectedBytes: MIB });
    const [root, other] = [at(ranks, 0), at(ranks, 1)];
    // The other rank never receives: its queue fills, its socket pauses, and more than both
    // kernels can buffer is queued ahead of the scatter, which therefore cannot finish sending.
    const kernelMax = (file: string) => Number(readFileSync(file, 'utf8').trim().split(/\s+/)[2] ?? 0) || 32 * MIB;
    const count = Math.ceil((kernelMax('/proc/sys/net/ipv4/tcp_rmem') + kernelMax('/proc/sys/net/ipv4/tcp_wmem')) / (4 * MIB)) + 2;
    const fills = Array.from({ length: count }, () => track(root.p2p.send(other.p2p.self, 1, new Uint8Array(4 * MIB))));
    const blocked = track(scatter(root.layer, root.comm, 0, [new Uint8Array(0), new Uint8Array(4 * MIB)]));
    await until(() => other.p2p.stats().pausedConnections === 1, 'receiver paused');
    await turns(20);
    expect(blocked.settled()).toBe(false);
    root.p2p.abort('HANG');
    await turns(1);
    expect(blocked.settled()).toBe(true);
    await expectCode(blocked.promise, 'ABORTED');
    await Promise.all(fills.map((f) => f.promise.catch(() => undefined)));
  });
});

// ---- real processes ----------------------------------------------------------------------------

const here = fileURLToPath(new URL('.', import.meta.url));
const SRC = new URL('../../src/app/gmpi/', import.meta.url).href;

/** The child: one task process. Opens P2P as VPID argv[1], tells the parent its port, gets the
 *  peer list, connects, runs collectives on a communicator of everyone, reports, closes. */
const CHILD = `
import { P2P } from '${SRC}p2p.ts';
import { CommLayer } from '${SRC}comm.ts';
import { allgather, allreduce, barrier, bcast, gather, reduce, scatter } from '${SRC}collectives.ts';
const self = Number(process.argv[1]);
const p2p = await P2P.open({ taskId: '${TASK}', self, taskKey: new Uint8Array(32).fill(0x5a) });
process.send({ port: p2p.port });
const peers = await new Promise((resolve) => process.once('message', resolve));
await p2p.connect(peers);
const layer = new CommLayer(p2p);
const comm = layer.create(0, peers.map((p) => p.id));
const r = layer.rank(comm);
const n = comm.members.length;
await barrier(layer, comm);
const out = {
  rank: r,
  bcast: await bcast(layer, comm, n - 1, r === n - 1 ? { hello: 'from the last rank' } : undefined),
  reduce: await reduce(layer, comm, 1, [r, 1], 'sum'),
  allreduce: await allreduce(layer, comm, r * 10, 'max'),
  gather: await gather(layer, comm, 0, 'p' + self),
  scatter: await scatter(layer, comm, 2, r === 2 ? Array.from({ length: n }, (_, i) => i * 100) : undefined),
  allgather: await allgather(layer, comm, self),
};
await barrier(layer, comm);
process.send(out);
await p2p.close();
process.disconnect();
`;

describe('G-MPI collectives across real processes', () => {
  it('four child processes agree on every collective', async () => {
    const vpids = [4, 11, 12, 30];
    const ports = new Map<number, number>();
    const outs = new Map<number, Record<string, unknown>>();
    const exits: Promise<number | null>[] = [];
    await Promise.all(vpids.map((vpid) => new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD, String(vpid)], {
        cwd: here, stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      exits.push(new Promise((done) => child.once('exit', (code) => done(code))));
      child.once('error', reject);
      child.on('message', (m: Record<string, unknown>) => {
        if ('port' in m) {
          ports.set(vpid, m['port'] as number);
          resolve();
        } else outs.set(vpid, m);
      });
    })));
    const peers = vpids.map((id) => ({ id, host: '127.0.0.1', port: ports.get(id) ?? 0 }));
    for (const c of children) c.send(peers);
    expect(await Promise.all(exits)).toEqual([0, 0, 0, 0]);
    for (const [i, vpid] of vpids.entries()) {
      expect(outs.get(vpid)).toEqual({
        rank: i,
        bcast: { hello: 'from the last rank' },
        reduce: i === 1 ? [6, 4] : undefined,
        allreduce: 30,
        gather: i === 0 ? ['p4', 'p11', 'p12', 'p30'] : undefined,
        scatter: i * 100,
        allgather: vpids,
      });
    }
  });
});
