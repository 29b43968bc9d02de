// G-MPI communicators and dynamic membership over real TCP on 127.0.0.1 (src/app/gmpi/comm.ts,
// payload.ts, p2p.ts): rank-addressed send/recv with rank ↔ VPID translation, raw and
// structured payloads, typed errors for bad ranks, tags, communicators, oversized and malformed
// payloads; then spec §5.5's membership changes: a spawned process with a higher VPID joins an
// existing mesh (its hello before or after the survivors expect it), removePeer, discardComm
// dropping the old communicator's messages, and a whole crash → replace → new communicator
// cycle. No wall-clock thresholds: waits are event-driven.
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { allreduce, barrier } from '../../src/app/gmpi/collectives.ts';
import { CommLayer, type Comm } from '../../src/app/gmpi/comm.ts';
import { ANY_SOURCE, ANY_TAG } from '../../src/app/gmpi/matching.ts';
import { P2P } from '../../src/app/gmpi/p2p.ts';
import { P2PError, type LostReason, type P2POptions, type PeerAddress } from '../../src/app/gmpi/p2p-types.ts';
import { encodeFrame, FLAG_STRUCTURED } from '../../src/app/gmpi/wire.ts';
import { expectCode, RawPeer, TEST_TASK_KEY, track, turns, until } from './gmpi-test-tools.ts';

const TASK = 't12';
const opened: P2P[] = [];
const rawSockets: Socket[] = [];

afterEach(async () => {
  for (const s of rawSockets.splice(0)) s.destroy();
  await Promise.all(opened.splice(0).map((p) => p.close()));
});

type Proc = { p2p: P2P; layer: CommLayer; lost: { id: number; reason: LostReason }[]; address: PeerAddress };

async function open(self: number, extra: Partial<P2POptions> = {}): Promise<Proc> {
  const lost: Proc['lost'] = [];
  const p2p = await P2P.open({ taskId: TASK, self, taskKey: TEST_TASK_KEY, onConnectionLost: (id, reason) => lost.push({ id, reason }), ...extra });
  opened.push(p2p);
  return { p2p, layer: new CommLayer(p2p), lost, address: { id: self, host: '127.0.0.1', port: p2p.port } };
}

/** Processes with these VPIDs, fully meshed (init from the mapping message, spec §7 item 2). */
async function mesh(vpids: number[], extra: Partial<P2POptions> = {}): Promise<Map<number, Proc>> {
  const procs = await Promise.all(vpids.map((v) => open(v, extra)));
  await Promise.all(procs.map((p) => p.p2p.connect(procs.map((q) => q.address))));
  return new Map(procs.map((p) => [p.p2p.self, p]));
}

const get = (procs: Map<number, Proc>, vpid: number): Proc => {
  const p = procs.get(vpid);
  if (p === undefined) throw new Error(`no process ${vpid}`);
  return p;
};



function expectThrows(f: () => unknown, code: string): void {
  let thrown: unknown = null;
  try {
    f();
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(P2PError);
  expect((thrown as P2PError).code).toBe(code);
}

/** The same communicator on every listed process. */
const commOn = (procs: Map<number, Proc>, id: number, members: number[]): Map<number, Comm> =>
  new Map(members.map((v) => [v, get(procs, v).layer.create(id, members)]));
const commOf = (comms: Map<number, Comm>, vpid: number): Comm => {
  const c = comms.get(vpid);
  if (c === undefined) throw new Error(`no comm on ${vpid}`);
  return c;
};

describe('G-MPI communicators: ranks and VPIDs', () => {
  it('send and recv address ranks; a message names its sender by rank; ranks follow the member list', async () => {
    const procs = await mesh([3, 8, 21]);
    const comms = commOn(procs, 4, [21, 3, 8]); // rank 0 = VPID 21, rank 1 = 3, rank 2 = 8
    const [a, b] = [get(procs, 8), get(procs, 21)];
    expect([b.layer.rank(commOf(comms, 21)), a.layer.rank(commOf(comms, 8)), a.layer.size(commOf(comms, 8))]).toEqual([0, 2, 3]);
    expect([a.layer.vpidOf(commOf(comms, 8), 1), a.layer.rankOf(commOf(comms, 8), 21), a.layer.rankOf(commOf(comms, 8), 99)]).toEqual([3, 0, -1]);
    await a.layer.send(commOf(comms, 8), 0, 5, 'from rank 2');
    const m = await b.layer.recv(commOf(comms, 21), 2, 5);
    expect(m).toEqual({ source: 2, tag: 5, data: 'from rank 2' });
    await b.layer.send(commOf(comms, 21), 0, 6, 'to myself');
    expect(await b.layer.recv(commOf(comms, 21), 0, 6)).toEqual({ source: 0, tag: 6, data: 'to myself' });
  });

  it('non-overtaking per sender; any-source and any-tag receive in arrival order', async () => {
    const procs = await mesh([1, 2, 3]);
    const comms = commOn(procs, 0, [1, 2, 3]);
    const sends: Promise<void>[] = [];
    for (let i = 0; i < 40; i++) for (const v of [2, 3]) sends.push(get(procs, v).layer.send(commOf(comms, v), 0, i % 3, { i }));
    await Promise.all(sends);
    const me = get(procs, 1).layer;
    const next: Record<number, number> = { 1: 0, 2: 0 };
    for (let k = 0; k < 80; k++) {
      const m = await me.recv<{ i: number }>(commOf(comms, 1), ANY_SOURCE, ANY_TAG);
      expect(m.data.i).toBe(next[m.source]);
      expect(m.tag).toBe(m.data.i % 3);
      next[m.source] = (next[m.source] ?? 0) + 1;
    }
    expect(next).toEqual({ 1: 40, 2: 40 });
  });

  it('raw bytes arrive as bytes; structured values (objects, typed arrays, nested bytes, bigints) arrive decoded', async () => {
    const procs = await mesh([5, 6]);
    const comms = commOn(procs, 1, [5, 6]);
    const [s, r] = [get(procs, 5).layer, get(procs, 6).layer];
    const raw = Buffer.from([0x93, 1, 2, 3]); // msgpack for [1,2,3], but sent as raw bytes
    const values: unknown[] = [
      raw, { a: 1, b: [true, null, 'x'] }, new Float64Array([1.5, -2]), { bin: new Uint8Array([9, 8]) }, 2n ** 64n, 'text', 42, [],
    ];
    for (const v of values) await s.send(commOf(comms, 5), 1, 1, v);
    const got = [];
    for (const _ of values) got.push((await r.recv(commOf(comms, 6), 0, 1)).data);
    expect(got[0]).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(got[0] as Uint8Array)).toEqual(raw);
    expect(got.slice(1)).toEqual(values.slice(1));
    expect(got[2]).toBeInstanceOf(Float64Array);
  });

  it('bad ranks, tags, communicators and values are typed errors with no effect', async () => {
    const procs = await mesh([1, 2, 3]);
    const comms = commOn(procs, 0, [1, 2, 3]);
    const { layer } = get(procs, 1);
    const c = commOf(comms, 1);
    for (const dest of [-1, 3, 1.5, Number.NaN]) await expectCode(layer.send(c, dest, 0, 'x'), 'BAD_RANK');
    for (const source of [-2, 3, 0.5]) await expectCode(layer.recv(c, source, 0), 'BAD_RANK');
    for (const tag of [-1, -2, 2 ** 31]) await expectCode(layer.send(c, 1, tag, 'x'), 'BAD_TAG');
    await expectCode(layer.recv(c, 1, -3), 'BAD_TAG');
    await expectCode(layer.send({ id: 77, members: [1, 2, 3] }, 1, 0, 'x'), 'BAD_COMM');
    await expectCode(layer.recv({ id: 77, members: [1, 2, 3] }, 1, 0), 'BAD_COMM');
    await expectCode(layer.send(c, 1, 0, Symbol('not encodable')), 'BAD_ARGUMENT');
    expectThrows(() => layer.vpidOf(c, 3), 'BAD_RANK');
    expectThrows(() => layer.create(0, [1, 2, 3]), 'BAD_COMM');
    expectThrows(() => layer.create(-1, [1]), 'BAD_COMM');
    expectThrows(() => layer.create(9, [2, 3]), 'BAD_ARGUMENT'); // without this process
    expectThrows(() => layer.create(9, [1, 2, 2]), 'BAD_ARGUMENT');
    expectThrows(() => layer.create(9, []), 'BAD_ARGUMENT');
    await turns(20);
    for (const v of [2, 3]) expect(get(procs, v).p2p.stats().unexpectedMessages).toBe(0);
    await layer.send(c, 2, 0, 'still fine');
    expect((await get(procs, 3).layer.recv(commOf(comms, 3), 0, 0)).data).toBe('still fine');
  });

  it('a message above the limit is refused whole at the sender with TOO_LARGE, raw or structured', async () => {
    const procs = await mesh([1, 2], { maxMessageBytes: 1000 });
    const comms = commOn(procs, 0, [1, 2]);
    const [s, r] = [get(procs, 1), get(procs, 2)];
    await expectCode(s.layer.send(commOf(comms, 1), 1, 0, new Uint8Array(1001)), 'TOO_LARGE');
    await expectCode(s.layer.send(commOf(comms, 1), 1, 0, Array.from({ length: 600 }, (_, i) => i)), 'TOO_LARGE');
    await expectCode(s.layer.send(commOf(comms, 1), 0, 0, 'y'.repeat(2000)), 'TOO_LARGE');
    await s.layer.send(commOf(comms, 1), 1, 0, 'fits');
    expect(await r.layer.recv(commOf(comms, 2), 0, ANY_TAG)).toEqual({ source: 0, tag: 0, data: 'fits' });
    expect(r.p2p.stats().unexpectedMessages).toBe(0);
  });

  it('a malformed structured payload from a peer is BAD_PAYLOAD for the receiving call only', async () => {
    const me = await open(1);
    const connected = me.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]);
    const raw = RawPeer.dial(me.p2p.port);
    rawSockets.push(raw.socket);
    await raw.hello(6, { taskId: TASK });
    await connected;
    const comm = me.layer.create(3, [1, 6]);
    let seq = 0;
    const sendRaw = (payload: number[], structured = true) =>
      raw.write(encodeFrame({ type: 'data', id: 6, comm: 3, tag: 2, seq: seq++, structured, payload: Uint8Array.from(payload) }));
    const bad = [[0x92, 0x01], [0xc1], [0x01, 0x02], [], [0xdd, 0xff, 0xff, 0xff, 0xff]];
    for (const b of bad) sendRaw(b);
    sendRaw([0x92, 0x01, 0x02]);
    sendRaw([0x92, 0x01, 0x02], false);
    for (const _ of bad) await expectCode(me.layer.recv(comm, 1, 2), 'BAD_PAYLOAD');
    expect((await me.layer.recv(comm, 1, 2)).data).toEqual([1, 2]);
    expect((await me.layer.recv(comm, 1, 2)).data).toEqual(new Uint8Array([0x92, 0x01, 0x02]));
    expect(me.lost).toEqual([]);
    expect(FLAG_STRUCTURED).toBe(1);
  });

  it('a message on a communicator id from a process that is not a member is not delivered', async () => {
    const procs = await mesh([3, 8, 20]);
    const comms = commOn(procs, 5, [3, 8]);
    await get(procs, 20).p2p.send(3, 1, Buffer.from('intruder'), 5);
    await until(() => get(procs, 3).p2p.stats().unexpectedMessages === 1, 'intruder queued');
    const wanted = get(procs, 3).layer.recv(commOf(comms, 3), ANY_SOURCE, ANY_TAG);
    await get(procs, 8).layer.send(commOf(comms, 8), 0, 1, 'member');
    expect(await wanted).toEqual({ source: 1, tag: 1, data: 'member' });
    expect(get(procs, 3).layer.stats().foreignMessages).toBe(1);
  });
});

describe('G-MPI dynamic membership (spec §5.5)', () => {
  it('a spawned process with a higher VPID joins: one survivor expected it first, two are told after its hello', async () => {
    const procs = await mesh([1, 2, 3]);
    get(procs, 1).p2p.expect([9]);
    const newcomer = await open(9);
    const joined = track(newcomer.p2p.connect([1, 2, 3].map((v) => get(procs, v).address)));
    // Survivors 2 and 3 hold its hello, unanswered, until the manager's broadcast reaches them.
    await until(() => [2, 3].every((v) => get(procs, v).p2p.stats().heldConnections === 1), 'hellos held');
    await get(procs, 1).p2p.whenConnected([9]);
    await turns(20);
    expect(joined.settled()).toBe(false);
    await expectCode(newcomer.p2p.send(2, 0, Buffer.from('too early')), 'NOT_CONNECTED');
    await newcomer.p2p.send(1, 0, Buffer.from('hello 1'));
    expect(Buffer.from((await get(procs, 1).p2p.recv(9, 0)).data).toString()).toBe('hello 1');
    for (const v of [2, 3]) get(procs, v).p2p.expect([9]);
    await Promise.all([joined.promise, ...[2, 3].map((v) => get(procs, v).p2p.whenConnected([9]))]);
    expect([2, 3].map((v) => get(procs, v).p2p.stats().heldConnections)).toEqual([0, 0]);
    // Both directions work with every survivor.
    for (const v of [1, 2, 3]) {
      await get(procs, v).p2p.send(9, 1, Buffer.from(`to 9 from ${v}`));
      await newcomer.p2p.send(v, 1, Buffer.from(`to ${v} from 9`));
    }
    for (const v of [1, 2, 3]) {
      expect(Buffer.from((await newcomer.p2p.recv(v, 1)).data).toString()).toBe(`to 9 from ${v}`);
      expect(Buffer.from((await get(procs, v).p2p.recv(9, 1)).data).toString()).toBe(`to ${v} from 9`);
    }
    expect(get(procs, 2).p2p.members()).toEqual([{ id: 1, state: 'connected' }, { id: 3, state: 'connected' }, { id: 9, state: 'connected' }]);
  });

  it('expect() refuses lower ids, itself and removed ids; whenConnected refuses unknown ids and is unblocked by abort', async () => {
    const procs = await mesh([4, 5]);
    const p = get(procs, 5).p2p;
    expectThrows(() => p.expect([4]), 'BAD_ARGUMENT');
    expectThrows(() => p.expect([5]), 'BAD_ARGUMENT');
    expectThrows(() => p.expect([-1]), 'UNKNOWN_PEER');
    await expectCode(p.whenConnected([77]), 'UNKNOWN_PEER');
    p.expect([10]);
    const waiting = track(p.whenConnected([4, 10]));
    await turns(10);
    expect(waiting.settled()).toBe(false);
    p.abort('ALERT');
    await expectCode(waiting.promise, 'ABORTED');
    p.resume();
    p.removePeer(10);
    expectThrows(() => p.expect([10]), 'PEER_REMOVED');
    await expectCode(p.whenConnected([10]), 'PEER_REMOVED');
    await expectCode(p.connect([{ id: 10, host: '127.0.0.1', port: 1 }]), 'PEER_REMOVED');
  });

  it('removePeer closes the connection, rejects what names the peer, drops its queued messages and refuses it later', async () => {
    const procs = await mesh([1, 2, 3]);
    const [one, three] = [get(procs, 1), get(procs, 3)];
    await three.p2p.send(1, 1, Buffer.from('a'));
    await three.p2p.send(1, 2, Buffer.from('b'));
    await get(procs, 2).p2p.send(1, 1, Buffer.from('from 2'));
    await until(() => one.p2p.stats().unexpectedMessages === 3, 'three messages queued');
    const fromThree = track(one.p2p.recv(3, 9));
    const fromAnyone = track(one.p2p.recv(ANY_SOURCE, 9));
    one.p2p.removePeer(3);
    await expectCode(fromThree.promise, 'PEER_REMOVED');
    expect(one.p2p.stats()).toMatchObject({ unexpectedMessages: 1, discardedMessages: 2 });
    await expectCode(one.p2p.send(3, 0, Buffer.from('x')), 'PEER_REMOVED');
    await expectCode(one.p2p.recv(3, ANY_TAG), 'PEER_REMOVED');
    // A deliberate removal is not a connection loss here; the removed side sees its link lost.
    await until(() => three.lost.length === 1, 'removed process notices');
    expect(three.lost[0]?.id).toBe(1);
    expect(one.lost).toEqual([]);
    expect(one.p2p.members().map((m) => m.id)).toEqual([2]);
    // Its old id can never say hello again.
    const ghost = RawPeer.dial(get(procs, 2).p2p.port);
    rawSockets.push(ghost.socket);
    get(procs, 2).p2p.removePeer(3);
    await ghost.hello(3, { taskId: TASK });
    await until(() => ghost.closed, 'stale hello refused');
    expect(get(procs, 2).p2p.members().map((m) => m.id)).toEqual([1]);
    // Any-source receives go on with the remaining peers.
    expect(fromAnyone.settled()).toBe(false);
    await get(procs, 2).p2p.send(1, 9, Buffer.from('still here'));
    expect(Buffer.from((await fromAnyone.promise).data).toString()).toBe('still here');
    expect(Buffer.from((await one.p2p.recv(2, 1)).data).toString()).toBe('from 2');
  });

  it('discardComm drops the old communicator\'s queued messages and later arrivals; a new one works', async () => {
    const procs = await mesh([1, 2, 3]);
    const old = commOn(procs, 0, [1, 2, 3]);
    const [one, two] = [get(procs, 1), get(procs, 2)];
    await two.layer.send(commOf(old, 2), 0, 1, 'old 1');
    await two.layer.send(commOf(old, 2), 0, 2, 'old 2');
    await until(() => one.p2p.stats().unexpectedMessages === 2, 'old messages queued');
    const pending = track(one.layer.recv(commOf(old, 1), 2, 7));
    one.layer.discardComm(0);
    await expectCode(pending.promise, 'BAD_COMM');
    expect(one.p2p.stats()).toMatchObject({ unexpectedMessages: 0, discardedMessages: 2 });
    await expectCode(one.layer.recv(commOf(old, 1), ANY_SOURCE, ANY_TAG), 'BAD_COMM');
    await expectCode(one.layer.send(commOf(old, 1), 1, 0, 'x'), 'BAD_COMM');
    // Process 2 has not discarded yet: what it still sends on the old communicator vanishes.
    await two.layer.send(commOf(old, 2), 0, 1, 'late');
    await until(() => one.p2p.stats().discardedMessages === 3, 'late message discarded');
    expect(one.p2p.stats().unexpectedMessages).toBe(0);
    expectThrows(() => one.layer.create(0, [1, 2, 3]), 'BAD_COMM'); // ids are never reused
    const next = commOn(procs, 1, [1, 2, 3]);
    await two.layer.send(commOf(next, 2), 0, 1, 'new');
    expect(await one.layer.recv(commOf(next, 1), 1, 1)).toEqual({ source: 1, tag: 1, data: 'new' });
  });

  it('crash, replace, new communicator: survivors remove the dead, a higher VPID joins, old traffic is discarded', async () => {
    const procs = await mesh([1, 2, 3, 4]);
    const world = commOn(procs, 0, [1, 2, 3, 4]);
    // Traffic of the old world that nobody will receive.
    await get(procs, 3).layer.send(commOf(world, 3), 0, 5, 'stale');
    await until(() => get(procs, 1).p2p.stats().unexpectedMessages === 1, 'stale queued');
    // Process 2 crashes: survivors see G_MPI_SIG_LOCAL_CONNECTION, then the manager's
    // NTF_DIED (removePeer) and REP_SPAWNED (expect) for the replacement, VPID 5.
    await get(procs, 2).p2p.close({ bye: false });
    const survivors = [1, 3, 4];
    await until(() => survivors.every((v) => get(procs, v).lost.some((l) => l.id === 2)), 'loss seen');
    const replacement = await open(5);
    // Its mapping names the survivors; it dials them (its hello may beat the broadcast).
    const joined = replacement.p2p.connect(survivors.map((v) => get(procs, v).address));
    for (const v of survivors) {
      const p = get(procs, v);
      p.p2p.abort('CRASH');
      p.p2p.removePeer(2);
      p.p2p.expect([5]);
    }
    await joined;
    // G_MPI_Recover_comm: clear the flag, wait for the new member, replace the communicator.
    procs.set(5, replacement);
    const members = [1, 3, 4, 5];
    const sums = await Promise.all(members.map(async (v) => {
      const p = get(procs, v);
      p.p2p.resume();
      await p.p2p.whenConnected(members);
      if (v !== 5) p.layer.discardComm(0);
      const next = p.layer.create(1, members);
      await barrier(p.layer, next);
      return allreduce(p.layer, next, p.p2p.self, 'sum');
    }));
    expect(sums).toEqual([13, 13, 13, 13]);
    expect(get(procs, 1).p2p.stats()).toMatchObject({ unexpectedMessages: 0, discardedMessages: 1 });
  });
});
