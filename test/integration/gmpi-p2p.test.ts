// G-MPI point-to-point messaging over real TCP on 127.0.0.1 (src/app/gmpi/p2p.ts): four task
// processes' P2P endpoints in one test process, fully meshed as spec §7 item 3's PTP channels.
// Covers MPI matching (per-sender order, any-source in arrival order, tags out of order),
// self-send, a 4 MiB message and a burst of 1,000, receive-side backpressure observed as sender
// promises that stay pending until the receiver drains, oversized and invalid sends, abort
// (spec §5.2's alert path) and connection loss (spec §5.4's G_MPI_SIG_LOCAL_CONNECTION),
// including a malformed stream from a peer. No wall-clock thresholds: waits are event-driven.
import { readFileSync } from 'node:fs';
import { connect as dial, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ANY_SOURCE, ANY_TAG, P2P, P2PError, type LostReason, type P2PLogEvent, type P2POptions,
} from '../../src/app/gmpi/p2p.ts';
import { encodeFrame } from '../../src/app/gmpi/wire.ts';

const TASK = 't7';
const SIZE = 4;
const opened: P2P[] = [];
const rawSockets: Socket[] = [];

afterEach(async () => {
  for (const s of rawSockets.splice(0)) s.destroy();
  await Promise.all(opened.splice(0).map((p) => p.close()));
});

type Node = { p2p: P2P; lost: { rank: number; reason: LostReason }[]; logs: P2PLogEvent[] };

async function openNode(rank: number, size: number, extra: Partial<P2POptions> = {}): Promise<Node> {
  const lost: Node['lost'] = [];
  const logs: P2PLogEvent[] = [];
  const p2p = await P2P.open({
    taskId: TASK, rank, size, onConnectionLost: (r, reason) => lost.push({ rank: r, reason }), log: (e) => logs.push(e), ...extra,
  });
  opened.push(p2p);
  return { p2p, lost, logs };
}

/** Four processes, connected pairwise (as init does from the mapping message, spec §7 item 2). */
async function mesh(extra: Partial<P2POptions> = {}): Promise<Node[]> {
  const nodes = await Promise.all(Array.from({ length: SIZE }, (_, r) => openNode(r, SIZE, extra)));
  const peers = nodes.map((n) => ({ rank: n.p2p.rank, host: '127.0.0.1', port: n.p2p.port }));
  await Promise.all(nodes.map((n) => n.p2p.connect(peers)));
  return nodes;
}

const node = (nodes: Node[], r: number): P2P => {
  const n = nodes[r];
  if (n === undefined) throw new Error(`no node ${r}`);
  return n.p2p;
};

/** Let I/O run until `cond` holds: a bounded count of event-loop turns, not a time limit. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let turn = 0; turn < 200_000; turn++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`never happened: ${what}`);
}
const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

/** Track a promise's settlement without awaiting it. */
function track<T>(p: Promise<T>): { settled: () => boolean; promise: Promise<T> } {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  return { settled: () => done, promise: p };
}

const bytes = (...xs: number[]) => new Uint8Array(xs);
const text = (s: string) => new TextEncoder().encode(s);
const str = (b: Uint8Array) => new TextDecoder().decode(b);

async function expectCode(p: Promise<unknown>, code: string): Promise<P2PError> {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(P2PError);
  expect((e as P2PError).code).toBe(code);
  return e as P2PError;
}

describe('G-MPI P2P matching (MPI semantics over the PTP channels, spec §7 item 3)', () => {
  it('messages from each sender are received in send order (non-overtaking)', async () => {
    const nodes = await mesh();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) for (const s of [1, 2, 3]) sends.push(node(nodes, s).send(0, 9, bytes(s, i)));
    await Promise.all(sends);
    const seen = new Map<number, number[]>([[1, []], [2, []], [3, []]]);
    for (let i = 0; i < 150; i++) {
      const m = await node(nodes, 0).recv(ANY_SOURCE, 9);
      expect(m.data[0]).toBe(m.source);
      seen.get(m.source)?.push(m.data[1] ?? -1);
    }
    for (const list of seen.values()) expect(list).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('any-source/any-tag picks in arrival order', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    await node(nodes, 2).send(0, 5, text('first'));
    await until(() => p0.stats().unexpectedMessages === 1, 'first arrival');
    await node(nodes, 1).send(0, 6, text('second'));
    await until(() => p0.stats().unexpectedMessages === 2, 'second arrival');
    await node(nodes, 3).send(0, 7, text('third'));
    await until(() => p0.stats().unexpectedMessages === 3, 'third arrival');
    const got = [await p0.recv(ANY_SOURCE, ANY_TAG), await p0.recv(ANY_SOURCE, ANY_TAG), await p0.recv(ANY_SOURCE, ANY_TAG)];
    expect(got.map((m) => [m.source, m.tag, str(m.data)])).toEqual([[2, 5, 'first'], [1, 6, 'second'], [3, 7, 'third']]);
  });

  it('a receive for a later tag skips earlier messages, which stay for later receives in order', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    for (const [tag, body] of [[1, 'a'], [2, 'b'], [1, 'c'], [3, 'd']] as const) await node(nodes, 1).send(0, tag, text(body));
    expect(str((await p0.recv(1, 3)).data)).toBe('d');
    expect(str((await p0.recv(1, 2)).data)).toBe('b');
    expect(str((await p0.recv(1, 1)).data)).toBe('a');
    expect(str((await p0.recv(ANY_SOURCE, ANY_TAG)).data)).toBe('c');
  });

  it('a posted receive waits, is matched by source and tag, and ignores other messages', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    const wanted = track(p0.recv(3, 11));
    await node(nodes, 3).send(0, 12, text('other tag'));
    await node(nodes, 2).send(0, 11, text('other source'));
    await until(() => p0.stats().unexpectedMessages === 2, 'both others queued');
    expect(wanted.settled()).toBe(false);
    await node(nodes, 3).send(0, 11, text('this one'));
    const m = await wanted.promise;
    expect([m.source, m.tag, str(m.data)]).toEqual([3, 11, 'this one']);
    expect(p0.stats()).toMatchObject({ unexpectedMessages: 2, pendingRecvs: 0 });
  });

  it('communicators separate matching: a message on comm 5 does not match a receive on comm 0', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    await node(nodes, 1).send(0, 1, text('on five'), 5);
    await node(nodes, 1).send(0, 1, text('on world'));
    expect(str((await p0.recv(1, 1)).data)).toBe('on world');
    expect(str((await p0.recv(1, 1, 5)).data)).toBe('on five');
  });

  it('self-send is received like any other message, and owns a copy of the data', async () => {
    const nodes = await mesh();
    const p2 = node(nodes, 2);
    const data = text('to myself');
    await p2.send(2, 4, data);
    data.fill(0);
    const m = await p2.recv(2, 4);
    expect([m.source, m.tag, str(m.data)]).toEqual([2, 4, 'to myself']);
  });
});

describe('G-MPI P2P volume and backpressure', () => {
  it('carries a 4 MiB message intact', async () => {
    const nodes = await mesh();
    const big = new Uint8Array(4 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >>> 12)) & 0xff;
    const recv = node(nodes, 3).recv(0, 1);
    await node(nodes, 0).send(3, 1, big);
    const m = await recv;
    expect(m.data.length).toBe(big.length);
    expect(Buffer.compare(Buffer.from(m.data), Buffer.from(big))).toBe(0);
  });

  it('carries a burst of 1,000 small messages in order', async () => {
    const nodes = await mesh();
    const sends = Array.from({ length: 1000 }, (_, i) => node(nodes, 2).send(1, 8, text(`m${i}`)));
    for (let i = 0; i < 1000; i++) expect(str((await node(nodes, 1).recv(2, 8)).data)).toBe(`m${i}`);
    await Promise.all(sends);
  });

  it('a slow receiver stalls the sender: sends stay pending until recv drains the bounded queue', async () => {
    const MIB = 1024 * 1024;
    const LIMIT_BYTES = 256 * 1024;
    const nodes = await mesh({ maxMessageBytes: MIB, maxUnexpectedBytes: LIMIT_BYTES });
    const [sender, receiver] = [node(nodes, 1), node(nodes, 0)];
    // More than the kernel can buffer on both ends of a loopback connection, so the last send
    // cannot complete unless the receiver reads: the assertion does not depend on timing.
    const kernelMax = (file: string) => Number(readFileSync(file, 'utf8').trim().split(/\s+/)[2] ?? 0) || 32 * MIB;
    const count = Math.ceil((kernelMax('/proc/sys/net/ipv4/tcp_rmem') + kernelMax('/proc/sys/net/ipv4/tcp_wmem')) / MIB) + 16;
    const sends = Array.from({ length: count }, (_, i) => track(sender.send(0, 3, new Uint8Array(MIB).fill(i & 0xff))));
    await until(() => receiver.stats().pausedConnections === 1, 'receiver pauses its socket');
    await turns(200);
    expect(sends.at(-1)?.settled()).toBe(false);
    // The queue stops growing once at its limit: at most one message past it (spec: bounded).
    const bound = LIMIT_BYTES + MIB + 64;
    expect(receiver.stats().unexpectedBytes).toBeLessThanOrEqual(bound);
    let maxQueued = 0;
    for (let i = 0; i < count; i++) {
      const m = await receiver.recv(1, 3);
      expect([m.data.length, m.data[0], m.data[MIB - 1]]).toEqual([MIB, i & 0xff, i & 0xff]);
      maxQueued = Math.max(maxQueued, receiver.stats().unexpectedBytes);
    }
    expect(maxQueued).toBeLessThanOrEqual(bound);
    await Promise.all(sends.map((s) => s.promise));
    expect(receiver.stats()).toMatchObject({ unexpectedMessages: 0, pausedConnections: 0 });
  });
});

describe('G-MPI P2P invalid sends', () => {
  it('an oversized message is rejected whole, never truncated, and the channel stays usable', async () => {
    const nodes = await mesh({ maxMessageBytes: 1000 });
    await expectCode(node(nodes, 0).send(1, 1, new Uint8Array(1001)), 'TOO_LARGE');
    await expectCode(node(nodes, 0).send(0, 1, new Uint8Array(1001)), 'TOO_LARGE');
    await node(nodes, 0).send(1, 1, new Uint8Array(1000).fill(7));
    const m = await node(nodes, 1).recv(0, ANY_TAG);
    expect([m.data.length, m.data[999]]).toEqual([1000, 7]);
    expect(node(nodes, 1).stats().unexpectedMessages).toBe(0);
  });

  it('ranks, tags and communicators out of range are rejected', async () => {
    const nodes = await mesh();
    const p = node(nodes, 0);
    for (const dest of [-1, SIZE, 1.5, Number.NaN]) await expectCode(p.send(dest, 0, bytes()), 'BAD_RANK');
    for (const tag of [-1, -5, 2 ** 31, 0.5]) await expectCode(p.send(1, tag, bytes()), 'BAD_TAG');
    await expectCode(p.send(1, 0, bytes(), -1), 'BAD_COMM');
    await expectCode(p.recv(SIZE, 0), 'BAD_RANK');
    await expectCode(p.recv(1, -2), 'BAD_TAG');
  });
});

describe('G-MPI P2P abort (the alert flag path, spec §5.2)', () => {
  it('settles every pending send and recv at once with the reason, and every later call', async () => {
    const MIB = 1024 * 1024;
    const nodes = await mesh({ maxMessageBytes: MIB, maxUnexpectedBytes: 64 * 1024 });
    const [p0, p1] = [node(nodes, 0), node(nodes, 1)];
    const recvs = [track(p0.recv(2, 1)), track(p0.recv(ANY_SOURCE, ANY_TAG, 9))];
    // Fill the path 1 → 0 so that p1's sends wait for 'drain'.
    const sends = Array.from({ length: 80 }, () => track(p1.send(0, 1, new Uint8Array(MIB))));
    await until(() => p0.stats().pausedConnections === 1, 'receiver paused');
    expect(sends.at(-1)?.settled()).toBe(false);
    const reason = { cause: 'HANG' };
    p0.abort(reason);
    p1.abort(reason);
    for (const r of recvs) expect((await expectCode(r.promise, 'ABORTED')).reason).toBe(reason);
    expect((await expectCode(sends.at(-1)?.promise ?? Promise.resolve(), 'ABORTED')).reason).toBe(reason);
    await expectCode(p0.recv(ANY_SOURCE, ANY_TAG), 'ABORTED');
    await expectCode(p1.send(2, 0, bytes(1)), 'ABORTED');
    await expectCode(p0.send(0, 0, bytes(1)), 'ABORTED');
    // Ranks that did not abort are unaffected.
    await node(nodes, 2).send(3, 0, bytes(1));
    expect((await node(nodes, 3).recv(2, 0)).data).toEqual(bytes(1));
  });
});

describe('G-MPI P2P connection loss (G_MPI_SIG_LOCAL_CONNECTION, spec §5.4)', () => {
  it('a peer closing raises connectionLost once on each survivor and rejects what names it', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    await node(nodes, 3).send(0, 1, text('before'));
    await until(() => p0.stats().unexpectedMessages === 1, 'message from 3 arrived');
    const fromThree = track(p0.recv(3, 2));
    const fromAnyone = track(p0.recv(ANY_SOURCE, 2));
    await node(nodes, 3).close();
    await until(() => [0, 1, 2].every((r) => (nodes[r]?.lost.length ?? 0) > 0), 'all survivors notified');
    await expectCode(fromThree.promise, 'PEER_LOST');
    // A message that arrived before the loss is still delivered; then its source is gone.
    expect(str((await p0.recv(3, 1)).data)).toBe('before');
    await expectCode(p0.recv(3, ANY_TAG), 'PEER_LOST');
    await expectCode(p0.send(3, 1, bytes()), 'PEER_LOST');
    await turns(100);
    for (const r of [0, 1, 2]) expect(nodes[r]?.lost.map((l) => l.rank)).toEqual([3]);
    // Any-source receives wait on: other peers still work.
    expect(fromAnyone.settled()).toBe(false);
    await node(nodes, 1).send(0, 2, text('still here'));
    expect(str((await fromAnyone.promise).data)).toBe('still here');
  });

  it('a malformed frame from a connected peer closes that connection with a typed reason', async () => {
    // Rank 1 of 2 accepts from rank 0; a raw socket plays rank 0.
    const n1 = await openNode(1, 2);
    const connected = n1.p2p.connect([{ rank: 0, host: '127.0.0.1', port: 1 }]);
    const raw = dial({ host: '127.0.0.1', port: n1.p2p.port });
    rawSockets.push(raw);
    let rawClosed = false;
    raw.on('close', () => (rawClosed = true)).resume();
    raw.write(encodeFrame({ type: 'hello', rank: 0, taskId: TASK }));
    await connected;
    const pending = track(n1.p2p.recv(0, ANY_TAG));
    raw.write(encodeFrame({ type: 'data', rank: 0, comm: 0, tag: 1, seq: 0, payload: bytes(1) }));
    expect((await pending.promise).data).toEqual(bytes(1));
    const next = track(n1.p2p.recv(0, ANY_TAG));
    raw.write(bytes(0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));
    await expectCode(next.promise, 'PEER_LOST');
    expect(n1.lost.map((l) => [l.rank, l.reason.code])).toEqual([[0, 'BAD_MAGIC']]);
    expect(n1.logs.map((e) => [e.rank, e.reason.code])).toEqual([[0, 'BAD_MAGIC']]);
    await until(() => rawClosed, 'raw socket closed by the receiver');
  });

  it('a sequence gap is a protocol error, and a stray connection is dropped without a rank', async () => {
    const n1 = await openNode(1, 2);
    const connected = track(n1.p2p.connect([{ rank: 0, host: '127.0.0.1', port: 1 }]));
    const stray = dial({ host: '127.0.0.1', port: n1.p2p.port });
    rawSockets.push(stray);
    stray.write(text('GET / HTTP/1.1\r\n\r\n          '));
    await until(() => n1.logs.length === 1, 'stray logged');
    expect(n1.logs[0]).toMatchObject({ rank: null, reason: { code: 'BAD_VERSION' } });
    expect(n1.lost).toEqual([]);
    expect(connected.settled()).toBe(false);
    const raw = dial({ host: '127.0.0.1', port: n1.p2p.port });
    rawSockets.push(raw);
    raw.write(encodeFrame({ type: 'hello', rank: 0, taskId: TASK }));
    raw.write(encodeFrame({ type: 'data', rank: 0, comm: 0, tag: 1, seq: 1, payload: bytes() }));
    await connected.promise;
    await until(() => n1.lost.length === 1, 'loss raised');
    expect(n1.lost[0]).toMatchObject({ rank: 0, reason: { code: 'BAD_SEQUENCE' } });
    expect(n1.p2p.stats().unexpectedMessages).toBe(0);
  });

  it('a hello from another task or an unexpected rank is refused', async () => {
    const n2 = await openNode(2, 3);
    void n2.p2p.connect([{ rank: 0, host: '127.0.0.1', port: 1 }, { rank: 1, host: '127.0.0.1', port: 1 }]).catch(() => {});
    for (const [hello, code] of [
      [{ type: 'hello', rank: 0, taskId: 't8' }, 'WRONG_TASK'],
      [{ type: 'hello', rank: 2, taskId: TASK }, 'WRONG_RANK'],
    ] as const) {
      const raw = dial({ host: '127.0.0.1', port: n2.p2p.port });
      rawSockets.push(raw);
      raw.write(encodeFrame(hello));
      await until(() => n2.logs.some((e) => e.reason.code === code), code);
    }
    expect(n2.lost).toEqual([]);
  });
});
