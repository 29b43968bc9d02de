// G-MPI point-to-point messaging over real TCP on 127.0.0.1 (src/app/gmpi/p2p.ts): four task
// processes' P2P endpoints in one test process, keyed by VPIDs that are not 0..n-1, fully meshed
// as spec §7 item 3's PTP channels (the higher VPID dials the lower). Covers MPI matching
// (per-sender order, any-source in arrival order, tags out of order, library tags invisible to
// wildcards), self-send, a 4 MiB message and a burst of 1,000, receive-side backpressure
// observed as sender promises that stay pending until the receiver drains, oversized and
// invalid sends, abort and resume (spec §5.2's alert flag) and connection loss (spec §5.4's
// G_MPI_SIG_LOCAL_CONNECTION), including a malformed stream from a peer. Membership changes
// and communicators are in gmpi-comm.test.ts. No wall-clock thresholds: waits are event-driven.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Server, Socket } from 'node:net';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ANY_SOURCE, ANY_TAG } from '../../src/app/gmpi/matching.ts';
import { P2P } from '../../src/app/gmpi/p2p.ts';
import { P2PError, type LostReason, type P2PLogEvent, type P2POptions } from '../../src/app/gmpi/p2p-types.ts';
import { encodeFrame } from '../../src/app/gmpi/wire.ts';
import { expectCode, RawPeer, rawAcceptor, TEST_TASK_KEY, track, turns, until } from './gmpi-test-tools.ts';

const TASK = 't7';
/** The mesh's VPIDs: node index i has VPID IDS[i]. */
const IDS = [3, 8, 20, 21] as const;
const SIZE = IDS.length;
const id = (i: number): number => IDS[i] ?? -1;
const opened: P2P[] = [];
const rawSockets: Socket[] = [];
const servers: Server[] = [];

const children: ChildProcess[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const s of rawSockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
  await Promise.all(opened.splice(0).map((p) => p.close()));
});

type Node = { p2p: P2P; lost: { id: number; reason: LostReason }[]; logs: P2PLogEvent[] };

/** A P2P endpoint holding the tests' task key (none with `keyless`: the agent has not handed
 *  it over yet). */
async function openNode(self: number, extra: Partial<P2POptions> = {}, keyless = false): Promise<Node> {
  const lost: Node['lost'] = [];
  const logs: P2PLogEvent[] = [];
  const p2p = await P2P.open({
    taskId: TASK, self, ...(keyless ? {} : { taskKey: TEST_TASK_KEY }), onConnectionLost: (r, reason) => lost.push({ id: r, reason }),
    log: (e) => logs.push(e), ...extra,
  });
  opened.push(p2p);
  return { p2p, lost, logs };
}

/** Four processes, connected pairwise (as init does from the mapping message, spec §7 item 2). */
async function mesh(extra: Partial<P2POptions> = {}): Promise<Node[]> {
  const nodes = await Promise.all(IDS.map((self) => openNode(self, extra)));
  const peers = nodes.map((n) => ({ id: n.p2p.self, host: '127.0.0.1', port: n.p2p.port }));
  await Promise.all(nodes.map((n) => n.p2p.connect(peers)));
  return nodes;
}

const node = (nodes: Node[], r: number): P2P => {
  const n = nodes[r];
  if (n === undefined) throw new Error(`no node ${r}`);
  return n.p2p;
};



const bytes = (...xs: number[]) => new Uint8Array(xs);

/** A raw peer dialling `port`, cleaned up after the test. */
function rawDial(port: number, localAddress?: string): RawPeer {
  const raw = RawPeer.dial(port, localAddress);
  rawSockets.push(raw.socket);
  return raw;
}

/** Process 1 expecting VPID 6, and a raw socket that dials it as 6 and says an authenticated
 *  hello (PROTOCOL §9.5). */
async function rawPeerSix(opts: Partial<P2POptions> = {}): Promise<{ n1: Node; raw: RawPeer; connected: ReturnType<typeof track<void>> }> {
  const n1 = await openNode(1, opts);
  const connected = track(n1.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]));
  const raw = rawDial(n1.p2p.port);
  await raw.hello(6, { taskId: TASK });
  return { n1, raw, connected };
}

/** A VPID above every in-process one: the child dials them all. */
const DYING = 40;
const PEER_APP = fileURLToPath(new URL('../fixtures/gmpi/p2p-peer.ts', import.meta.url));
type ChildPeer = { proc: ChildProcess; port: number; ask: (cmd: unknown, answer: string) => Promise<void> };

/** A P2P endpoint in its own process (test/fixtures/gmpi/p2p-peer.ts), so it can die as a
 *  crashed process does: killed, its sockets closed by the kernel without a bye. */
async function startPeer(self: number): Promise<ChildPeer> {
  const proc = spawn(process.execPath, ['--import', 'tsx', PEER_APP, TASK, String(self), Buffer.from(TEST_TASK_KEY).toString('hex')], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(proc);
  const lines = createInterface({ input: proc.stdout as Readable });
  const waiting: ((line: Record<string, unknown>) => void)[] = [];
  lines.on('line', (l) => waiting.shift()?.(JSON.parse(l) as Record<string, unknown>));
  const next = (): Promise<Record<string, unknown>> => new Promise((resolve) => waiting.push(resolve));
  const first = await next();
  const ask = async (cmd: unknown, answer: string): Promise<void> => {
    const reply = next();
    proc.stdin?.write(`${JSON.stringify(cmd)}\n`);
    expect(await reply).toHaveProperty(answer, true);
  };
  return { proc, port: Number(first['port']), ask };
}
const text = (s: string) => new TextEncoder().encode(s);
const str = (b: Uint8Array) => new TextDecoder().decode(b);


describe('G-MPI P2P matching (MPI semantics over the PTP channels, spec §7 item 3)', () => {
  it('messages from each sender are received in send order (non-overtaking)', async () => {
    const nodes = await mesh();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) for (const s of [1, 2, 3]) sends.push(node(nodes, s).send(id(0), 9, bytes(id(s), i)));
    await Promise.all(sends);
    const seen = new Map<number, number[]>([[id(1), []], [id(2), []], [id(3), []]]);
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
    await node(nodes, 2).send(id(0), 5, text('first'));
    await until(() => p0.stats().unexpectedMessages === 1, 'first arrival');
    await node(nodes, 1).send(id(0), 6, text('second'));
    await until(() => p0.stats().unexpectedMessages === 2, 'second arrival');
    await node(nodes, 3).send(id(0), 7, text('third'));
    await until(() => p0.stats().unexpectedMessages === 3, 'third arrival');
    const got = [await p0.recv(ANY_SOURCE, ANY_TAG), await p0.recv(ANY_SOURCE, ANY_TAG), await p0.recv(ANY_SOURCE, ANY_TAG)];
    expect(got.map((m) => [m.source, m.tag, str(m.data)])).toEqual([[id(2), 5, 'first'], [id(1), 6, 'second'], [id(3), 7, 'third']]);
  });

  it('a receive for a later tag skips earlier messages, which stay for later receives in order', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    for (const [tag, body] of [[1, 'a'], [2, 'b'], [1, 'c'], [3, 'd']] as const) await node(nodes, 1).send(id(0), tag, text(body));
    expect(str((await p0.recv(id(1), 3)).data)).toBe('d');
    expect(str((await p0.recv(id(1), 2)).data)).toBe('b');
    expect(str((await p0.recv(id(1), 1)).data)).toBe('a');
    expect(str((await p0.recv(ANY_SOURCE, ANY_TAG)).data)).toBe('c');
  });

  it('a posted receive waits, is matched by source and tag, and ignores other messages', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    const wanted = track(p0.recv(id(3), 11));
    await node(nodes, 3).send(id(0), 12, text('other tag'));
    await node(nodes, 2).send(id(0), 11, text('other source'));
    await until(() => p0.stats().unexpectedMessages === 2, 'both others queued');
    expect(wanted.settled()).toBe(false);
    await node(nodes, 3).send(id(0), 11, text('this one'));
    const m = await wanted.promise;
    expect([m.source, m.tag, str(m.data)]).toEqual([id(3), 11, 'this one']);
    expect(p0.stats()).toMatchObject({ unexpectedMessages: 2, pendingRecvs: 0 });
  });

  it('communicators separate matching: a message on comm 5 does not match a receive on comm 0', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    await node(nodes, 1).send(id(0), 1, text('on five'), 5);
    await node(nodes, 1).send(id(0), 1, text('on world'));
    expect(str((await p0.recv(id(1), 1)).data)).toBe('on world');
    expect(str((await p0.recv(id(1), 1, 5)).data)).toBe('on five');
  });

  it('self-send is received like any other message, and owns a copy of the data', async () => {
    const nodes = await mesh();
    const p2 = node(nodes, 2);
    const data = text('to myself');
    await p2.send(id(2), 4, data);
    data.fill(0);
    const m = await p2.recv(id(2), 4);
    expect([m.source, m.tag, str(m.data)]).toEqual([id(2), 4, 'to myself']);
  });
});

describe('G-MPI P2P volume and backpressure', () => {
  it('carries a 4 MiB message intact', async () => {
    const nodes = await mesh();
    const big = new Uint8Array(4 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >>> 12)) & 0xff;
    const recv = node(nodes, 3).recv(id(0), 1);
    await node(nodes, 0).send(id(3), 1, big);
    const m = await recv;
    expect(m.data.length).toBe(big.length);
    expect(Buffer.compare(Buffer.from(m.data), Buffer.from(big))).toBe(0);
  });

  it('carries a burst of 1,000 small messages in order', async () => {
    const nodes = await mesh();
    const sends = Array.from({ length: 1000 }, (_, i) => node(nodes, 2).send(id(1), 8, text(`m${i}`)));
    for (let i = 0; i < 1000; i++) expect(str((await node(nodes, 1).recv(id(2), 8)).data)).toBe(`m${i}`);
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
    const sends = Array.from({ length: count }, (_, i) => track(sender.send(id(0), 3, new Uint8Array(MIB).fill(i & 0xff))));
    await until(() => receiver.stats().pausedConnections === 1, 'receiver pauses its socket');
    await turns(200);
    expect(sends.at(-1)?.settled()).toBe(false);
    // The queue stops growing once at its limit: at most one message past it (spec: bounded).
    const bound = LIMIT_BYTES + MIB + 64;
    expect(receiver.stats().unexpectedBytes).toBeLessThanOrEqual(bound);
    let maxQueued = 0;
    for (let i = 0; i < count; i++) {
      const m = await receiver.recv(id(1), 3);
      expect([m.data.length, m.data[0], m.data[MIB - 1]]).toEqual([MIB, i & 0xff, i & 0xff]);
      maxQueued = Math.max(maxQueued, receiver.stats().unexpectedBytes);
    }
    expect(maxQueued).toBeLessThanOrEqual(bound);
    await Promise.all(sends.map((s) => s.promise));
    expect(receiver.stats()).toMatchObject({ unexpectedMessages: 0, pausedConnections: 0 });
  });

  it('backpressure is per peer: one peer filling the queue does not stall a receive from another', async () => {
    const MIB = 1024 * 1024;
    const nodes = await mesh({ maxMessageBytes: MIB, maxUnexpectedBytes: 64 * 1024 });
    const [flooder, other, receiver] = [node(nodes, 1), node(nodes, 2), node(nodes, 0)];
    const flood = Array.from({ length: 80 }, () => track(flooder.send(id(0), 1, new Uint8Array(MIB))));
    await until(() => receiver.stats().pausedConnections === 1, 'the flooder paused');
    expect(flood.at(-1)?.settled()).toBe(false);
    // A receive posted now (as a barrier's) is matched by the other peer's later message.
    const recv = receiver.recv(id(2), 2);
    await other.send(id(0), 2, text('through'));
    expect(str((await recv).data)).toBe('through');
    expect(receiver.stats().pausedConnections).toBe(1);
    for (let i = 0; i < flood.length; i++) expect((await receiver.recv(id(1), 1)).data.length).toBe(MIB);
    await Promise.all(flood.map((s) => s.promise));
  });
});

describe('G-MPI P2P invalid sends', () => {
  it('an oversized message is rejected whole, never truncated, and the channel stays usable', async () => {
    const nodes = await mesh({ maxMessageBytes: 1000 });
    await expectCode(node(nodes, 0).send(id(1), 1, new Uint8Array(1001)), 'TOO_LARGE');
    await expectCode(node(nodes, 0).send(id(0), 1, new Uint8Array(1001)), 'TOO_LARGE');
    await node(nodes, 0).send(id(1), 1, new Uint8Array(1000).fill(7));
    const m = await node(nodes, 1).recv(id(0), ANY_TAG);
    expect([m.data.length, m.data[999]]).toEqual([1000, 7]);
    expect(node(nodes, 1).stats().unexpectedMessages).toBe(0);
  });

  it('unknown peers, bad tags and communicators are rejected, and nothing is sent', async () => {
    const nodes = await mesh();
    const p = node(nodes, 0);
    for (const dest of [-1, 4, 99, 1.5, Number.NaN, 2 ** 32]) await expectCode(p.send(dest, 0, bytes()), 'UNKNOWN_PEER');
    for (const tag of [-1, -5, 2 ** 31, 0.5]) await expectCode(p.send(id(1), tag, bytes()), 'BAD_TAG');
    await expectCode(p.send(id(1), 0, bytes(), -1), 'BAD_COMM');
    await expectCode(p.send(id(1), 0, 'not bytes' as unknown as Uint8Array), 'BAD_ARGUMENT');
    await expectCode(p.recv(99, 0), 'UNKNOWN_PEER');
    await expectCode(p.recv(id(1), -2), 'BAD_TAG');
    // Library tags are refused by the application API and vice versa.
    await expectCode(p.sendLib(id(1), 0, bytes(), 0), 'BAD_TAG');
    await expectCode(p.sendLib(id(1), -1, bytes(), 0), 'BAD_TAG');
    await expectCode(p.recvLib(id(1), 7, 0), 'BAD_TAG');
    await turns(20);
    expect(node(nodes, 1).stats().unexpectedMessages).toBe(0);
  });

  it('library messages (negative tags) are matched only by library receives, never by ANY_TAG', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    const wildcard = track(p0.recv(ANY_SOURCE, ANY_TAG));
    await node(nodes, 1).sendLib(id(0), -7, text('library'), 0);
    await until(() => p0.stats().unexpectedMessages === 1, 'library message queued');
    expect(wildcard.settled()).toBe(false);
    await node(nodes, 1).send(id(0), 3, text('application'));
    expect(str((await wildcard.promise).data)).toBe('application');
    const lib = await p0.recvLib(id(1), -7, 0);
    expect([lib.source, lib.tag, str(lib.data)]).toEqual([id(1), -7, 'library']);
  });
});

describe('G-MPI P2P abort and resume (the alert flag, spec §5.2)', () => {
  it('settles every pending send and recv at once with the reason, and every later call', async () => {
    const MIB = 1024 * 1024;
    const nodes = await mesh({ maxMessageBytes: MIB, maxUnexpectedBytes: 64 * 1024 });
    const [p0, p1] = [node(nodes, 0), node(nodes, 1)];
    const recvs = [track(p0.recv(id(2), 1)), track(p0.recv(ANY_SOURCE, ANY_TAG, 9))];
    // Fill the path 1 → 0 so that p1's sends wait for 'drain'.
    const sends = Array.from({ length: 80 }, () => track(p1.send(id(0), 1, new Uint8Array(MIB))));
    await until(() => p0.stats().pausedConnections === 1, 'receiver paused');
    expect(sends.at(-1)?.settled()).toBe(false);
    const reason = { cause: 'HANG' };
    p0.abort(reason);
    p1.abort(reason);
    for (const r of recvs) expect((await expectCode(r.promise, 'ABORTED')).reason).toBe(reason);
    expect((await expectCode(sends.at(-1)?.promise ?? Promise.resolve(), 'ABORTED')).reason).toBe(reason);
    await expectCode(p0.recv(ANY_SOURCE, ANY_TAG), 'ABORTED');
    await expectCode(p1.send(id(2), 0, bytes(1)), 'ABORTED');
    await expectCode(p0.send(id(0), 0, bytes(1)), 'ABORTED');
    // Processes that did not abort are unaffected.
    await node(nodes, 2).send(id(3), 0, bytes(1));
    expect((await node(nodes, 3).recv(id(2), 0)).data).toEqual(bytes(1));
  });

  it('abort settles a blocked recv within one event-loop turn; messages keep arriving; resume() restores calls', async () => {
    const nodes = await mesh();
    const [p0, p1] = [node(nodes, 0), node(nodes, 1)];
    const blocked = track(p0.recv(id(1), 5));
    await turns(5);
    expect(blocked.settled()).toBe(false);
    p0.abort('HANG');
    expect(p0.isAborted()).toBe(true);
    await turns(1);
    expect(blocked.settled()).toBe(true);
    await expectCode(blocked.promise, 'ABORTED');
    // While the flag is raised, peers' messages are queued, not lost.
    await p1.send(id(0), 5, text('while aborted'));
    await until(() => p0.stats().unexpectedMessages === 1, 'queued while aborted');
    await expectCode(p0.recv(id(1), 5), 'ABORTED');
    p0.resume();
    expect(p0.isAborted()).toBe(false);
    expect(str((await p0.recv(id(1), 5)).data)).toBe('while aborted');
    await p0.send(id(1), 6, text('after resume'));
    expect(str((await p1.recv(id(0), 6)).data)).toBe('after resume');
    // Raised again: the new reason is carried.
    p0.abort('CRASH');
    expect((await expectCode(p0.recv(ANY_SOURCE, ANY_TAG), 'ABORTED')).reason).toBe('CRASH');
  });
});

describe('G-MPI P2P connection loss (G_MPI_SIG_LOCAL_CONNECTION, spec §5.4)', () => {
  it('a peer that dies without a bye (SIGKILL) raises connectionLost once on each survivor and rejects what names it', async () => {
    const nodes = await Promise.all(IDS.slice(0, 3).map((self) => openNode(self)));
    const child = await startPeer(DYING);
    const peers = [...nodes.map((n) => ({ id: n.p2p.self, host: '127.0.0.1', port: n.p2p.port })), { id: DYING, host: '127.0.0.1', port: child.port }];
    await Promise.all([...nodes.map((n) => n.p2p.connect(peers)), child.ask({ connect: peers }, 'connected')]);
    const p0 = node(nodes, 0);
    await child.ask({ send: { dest: id(0), tag: 1, text: 'before' } }, 'sent');
    await until(() => p0.stats().unexpectedMessages === 1, 'message from the child arrived');
    const fromChild = track(p0.recv(DYING, 2));
    const fromAnyone = track(p0.recv(ANY_SOURCE, 2));
    child.proc.kill('SIGKILL');
    await until(() => nodes.every((n) => n.lost.length > 0), 'all survivors notified');
    await expectCode(fromChild.promise, 'PEER_LOST');
    // A message that arrived before the loss is still delivered; then its source is gone.
    expect(str((await p0.recv(DYING, 1)).data)).toBe('before');
    await expectCode(p0.recv(DYING, ANY_TAG), 'PEER_LOST');
    await expectCode(p0.send(DYING, 1, bytes()), 'PEER_LOST');
    await turns(100);
    for (const n of nodes) {
      expect(n.lost.map((l) => l.id)).toEqual([DYING]);
      expect(['SOCKET_CLOSED', 'SOCKET_ERROR']).toContain(n.lost[0]?.reason.code);
    }
    // Any-source receives wait on: other peers still work.
    expect(fromAnyone.settled()).toBe(false);
    await node(nodes, 1).send(id(0), 2, text('still here'));
    expect(str((await fromAnyone.promise).data)).toBe('still here');
  });

  it('a peer that finalizes (close) says bye: no connectionLost anywhere; what it sent is still received; then it is PEER_FINISHED', async () => {
    const nodes = await mesh();
    const p0 = node(nodes, 0);
    await node(nodes, 3).send(id(0), 1, text('before'));
    await until(() => p0.stats().unexpectedMessages === 1, 'message from 3 arrived');
    const fromThree = track(p0.recv(id(3), 2));
    const fromAnyone = track(p0.recv(ANY_SOURCE, 2));
    await node(nodes, 3).close();
    await expectCode(fromThree.promise, 'PEER_FINISHED');
    await until(() => [0, 1, 2].every((r) => nodes[r]?.logs.some((e) => e.id === id(3) && e.reason.code === 'FINISHED')), 'every survivor saw the bye');
    expect(str((await p0.recv(id(3), 1)).data)).toBe('before');
    await expectCode(p0.recv(id(3), ANY_TAG), 'PEER_FINISHED');
    await expectCode(p0.send(id(3), 1, bytes()), 'PEER_FINISHED');
    await expectCode(p0.whenConnected([id(3)]), 'PEER_FINISHED');
    await turns(100);
    for (const r of [0, 1, 2]) {
      expect(nodes[r]?.lost).toEqual([]);
      expect(nodes[r]?.p2p.members().find((m) => m.id === id(3))?.state).toBe('finished');
    }
    expect(fromAnyone.settled()).toBe(false);
    await node(nodes, 2).send(id(0), 2, text('still here'));
    expect(str((await fromAnyone.promise).data)).toBe('still here');
  });

  it('a bye that does not count every message sent before it is a protocol error (a loss), never an ending', async () => {
    const { n1, raw, connected } = await rawPeerSix();
    raw.write(encodeFrame({ type: 'data', id: 6, comm: 0, tag: 1, seq: 0, structured: false, payload: bytes(7) }));
    raw.write(encodeFrame({ type: 'bye', id: 6, seq: 0 }));
    await connected.promise;
    await until(() => n1.lost.length === 1, 'loss raised');
    expect(n1.lost[0]).toMatchObject({ id: 6, reason: { code: 'BAD_SEQUENCE' } });
  });

  it('a malformed frame from a connected peer closes that connection with a typed reason', async () => {
    // VPID 1 accepts from the higher VPID 6, which a raw socket plays.
    const { n1, raw, connected } = await rawPeerSix();
    await connected.promise;
    const pending = track(n1.p2p.recv(6, ANY_TAG));
    raw.write(encodeFrame({ type: 'data', id: 6, comm: 0, tag: 1, seq: 0, structured: false, payload: bytes(1) }));
    expect((await pending.promise).data).toEqual(bytes(1));
    // The acceptor challenged, then answered the hello with its own, over the same nonce.
    await until(() => raw.frames.length >= 2, 'hello answered');
    const [challenge, helloBack] = raw.frames;
    expect(challenge).toMatchObject({ type: 'challenge', id: 1 });
    expect(helloBack).toMatchObject({ type: 'hello', id: 1, taskId: TASK, nonce: challenge?.type === 'challenge' ? challenge.nonce : null });
    const next = track(n1.p2p.recv(6, ANY_TAG));
    raw.write(bytes(0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));
    await expectCode(next.promise, 'PEER_LOST');
    expect(n1.lost.map((l) => [l.id, l.reason.code])).toEqual([[6, 'BAD_MAGIC']]);
    expect(n1.logs.map((e) => [e.id, e.reason.code])).toEqual([[6, 'BAD_MAGIC']]);
    await until(() => raw.closed, 'raw socket closed by the receiver');
  });

  it('a frame header announcing more than maxMessageBytes closes the connection with TOO_LARGE', async () => {
    const { n1, raw, connected } = await rawPeerSix({ maxMessageBytes: 1000 });
    await connected.promise;
    const pending = track(n1.p2p.recv(6, ANY_TAG));
    // Only the header of a 1001-byte message: refused before any payload is buffered.
    raw.write(encodeFrame({ type: 'data', id: 6, comm: 0, tag: 1, seq: 0, structured: false, payload: new Uint8Array(1001) }).subarray(0, 24));
    await expectCode(pending.promise, 'PEER_LOST');
    expect(n1.lost.map((l) => [l.id, l.reason.code])).toEqual([[6, 'TOO_LARGE']]);
  });

  it('a sequence gap is a protocol error, and a stray connection is dropped without an id', async () => {
    const n1 = await openNode(1);
    const connected = track(n1.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]));
    const stray = rawDial(n1.p2p.port);
    stray.write(text('GET / HTTP/1.1\r\n\r\n          '));
    await until(() => n1.logs.length === 1, 'stray logged');
    expect(n1.logs[0]).toMatchObject({ id: null, reason: { code: 'BAD_VERSION' } });
    expect(n1.lost).toEqual([]);
    expect(connected.settled()).toBe(false);
    const raw = rawDial(n1.p2p.port);
    await raw.hello(6, { taskId: TASK });
    raw.write(encodeFrame({ type: 'data', id: 6, comm: 0, tag: 1, seq: 1, structured: false, payload: bytes() }));
    await connected.promise;
    await until(() => n1.lost.length === 1, 'loss raised');
    expect(n1.lost[0]).toMatchObject({ id: 6, reason: { code: 'BAD_SEQUENCE' } });
    expect(n1.p2p.stats().unexpectedMessages).toBe(0);
  });

  it('revive: a member whose connection broke is connected again, whichever side dials, even when its hello comes first', async () => {
    // We accept (the peer, VPID 6, is higher): a raw peer breaks the stream, then dials again.
    const { n1, raw, connected: first } = await rawPeerSix();
    await first.promise;
    raw.write(text('not a frame at all, 24+ bytes'));
    await until(() => n1.lost.length === 1, 'loss raised');
    await expectCode(n1.p2p.whenConnected([6]), 'PEER_LOST');
    // The peer dials again before we revive it: its hello is held, not refused.
    const again = rawDial(n1.p2p.port);
    await again.hello(6, { taskId: TASK });
    await until(() => n1.p2p.stats().heldConnections === 1, 'hello held');
    expect(again.frames.map((f) => f.type)).toEqual(['challenge']);
    n1.p2p.revive([{ id: 6, host: '127.0.0.1', port: 1 }]);
    await n1.p2p.whenConnected([6]);
    await until(() => again.frames.length === 2, 'hello answered');
    again.write(encodeFrame({ type: 'data', id: 6, comm: 0, tag: 4, seq: 0, structured: false, payload: text('anew') }));
    expect(str((await n1.p2p.recv(6, 4)).data)).toBe('anew');
    expect(n1.lost.map((l) => l.id)).toEqual([6]);

    // We dial (the peer, VPID 2, is lower): it drops the connection, we revive, and dial again.
    const n8 = await openNode(8);
    const { server, port, sockets: hellos } = await rawAcceptor(2, TASK);
    servers.push(server);
    await n8.p2p.connect([{ id: 2, host: '127.0.0.1', port }]);
    hellos[0]?.destroy();
    await until(() => n8.lost.length === 1, 'loss raised at the dialler');
    n8.p2p.revive([{ id: 2, host: '127.0.0.1', port }]);
    await n8.p2p.whenConnected([2]);
    expect(hellos.length).toBe(2);
    await n8.p2p.send(2, 1, text('x'));
    // A peer that is not lost is left alone; a removed one stays removed.
    n8.p2p.revive([{ id: 2, host: '127.0.0.1', port }]);
    expect(hellos.length).toBe(2);
    for (const h of hellos) rawSockets.push(h);
  });

  it('a hello from another task, from our own id or from a lower id (which we must dial) is refused', async () => {
    const n2 = await openNode(2);
    void n2.p2p.connect([{ id: 5, host: '127.0.0.1', port: 1 }, { id: 6, host: '127.0.0.1', port: 1 }]).catch(() => {});
    for (const [id, taskId, code] of [[5, 't8', 'WRONG_TASK'], [2, TASK, 'WRONG_ID'], [1, TASK, 'WRONG_ID']] as const) {
      const raw = rawDial(n2.p2p.port);
      await raw.hello(id, { taskId });
      await until(() => n2.logs.some((e) => e.reason.code === code), code);
    }
    expect(n2.lost).toEqual([]);
  });
});

describe('G-MPI hello authentication (PROTOCOL §9.5: a MAC under the task key over both sides\' nonces)', () => {
  /** A key the task's processes do not hold: what a stranger, or another task's process, has. */
  const OTHER_KEY = new Uint8Array(32).fill(0x99);
  const dataFrame = (id: number, seq: number, s: string) => encodeFrame({ type: 'data', id, comm: 0, tag: 1, seq, structured: false, payload: text(s) });

  it('a forged hello (right task and VPID, wrong or missing MAC) is refused with BAD_MAC and none of its messages reach the process', async () => {
    const n0 = await openNode(0);
    const connected = track(n0.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]));
    const waiting = track(n0.p2p.recv(ANY_SOURCE, ANY_TAG));
    for (const forge of [{ key: OTHER_KEY }, { mac: new Uint8Array(32) }]) {
      const raw = rawDial(n0.p2p.port);
      await raw.hello(6, { taskId: TASK, ...forge });
      // Pipelined behind the hello, as a forger would: never delivered.
      raw.write(dataFrame(6, 0, 'forged'));
      await until(() => raw.closed, 'forger cut off');
      expect(raw.frames.map((f) => f.type)).toEqual(['challenge']); // no hello back
    }
    expect(n0.logs.map((e) => [e.id, e.reason.code])).toEqual([[null, 'BAD_MAC'], [null, 'BAD_MAC']]);
    await turns(50);
    expect(waiting.settled()).toBe(false);
    expect(connected.settled()).toBe(false);
    expect(n0.p2p.stats()).toMatchObject({ unexpectedMessages: 0, heldConnections: 0, unauthenticatedConnections: 0 });
    expect(n0.lost).toEqual([]);
    // The genuine VPID 6 still gets in afterwards.
    const genuine = rawDial(n0.p2p.port);
    await genuine.hello(6, { taskId: TASK });
    genuine.write(dataFrame(6, 0, 'genuine'));
    await connected.promise;
    expect(str((await waiting.promise).data)).toBe('genuine');
  });

  it('a hello recorded on a real connection and replayed on a new one is refused: the acceptor\'s nonce is fresh', async () => {
    const [n0, n1] = [await openNode(0), await openNode(1)];
    // A recording relay between them: what an eavesdropper on the network captures.
    const captured: Buffer[] = [];
    const { createServer: listen, connect } = await import('node:net');
    const relay = listen((client) => {
      const upstream = connect({ host: '127.0.0.1', port: n0.p2p.port });
      rawSockets.push(client, upstream);
      client.on('data', (b: Buffer) => {
        captured.push(b);
        upstream.write(b);
      });
      upstream.on('data', (b: Buffer) => client.write(b));
      client.on('error', () => {}).on('close', () => upstream.destroy());
      upstream.on('error', () => {}).on('close', () => client.destroy());
    });
    servers.push(relay);
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const relayPort = (relay.address() as { port: number }).port;
    await Promise.all([
      n0.p2p.connect([{ id: 0, host: '127.0.0.1', port: n0.p2p.port }, { id: 1, host: '127.0.0.1', port: 1 }]),
      n1.p2p.connect([{ id: 0, host: '127.0.0.1', port: relayPort }, { id: 1, host: '127.0.0.1', port: n1.p2p.port }]),
    ]);
    await n1.p2p.send(0, 1, text('real'));
    expect(str((await n0.p2p.recv(1, 1)).data)).toBe('real');
    const recorded = Buffer.concat(captured); // VPID 1's hello, then its data frame
    expect(recorded[2]).toBe(1); // kind: hello
    // The eavesdropper replays it all on a connection of its own, as VPID 1 whose link broke.
    await n1.p2p.close({ bye: false });
    await until(() => n0.lost.length === 1, 'link to 1 lost');
    const replay = rawDial(n0.p2p.port);
    await replay.challenge();
    replay.write(recorded);
    await until(() => replay.closed, 'replay cut off');
    expect(n0.logs.at(-1)?.reason.code).toBe('BAD_MAC');
    expect(n0.p2p.stats()).toMatchObject({ unexpectedMessages: 0, heldConnections: 0 });
  });

  it('a dialler refuses an impostor at its peer\'s address that cannot prove the key (BAD_MAC): the peer is lost, nothing is sent to it', async () => {
    const n8 = await openNode(8);
    const sockets: Socket[] = [];
    const { createServer: listen } = await import('node:net');
    const impostor = listen((s) => {
      sockets.push(s);
      rawSockets.push(s);
      const peer = new RawPeer(s);
      s.write(encodeFrame({ type: 'challenge', id: 2, nonce: new Uint8Array(32).fill(1) }));
      void until(() => peer.frames.length > 0, 'dialler hello').then(() =>
        s.write(encodeFrame({ type: 'hello', id: 2, taskId: TASK, nonce: new Uint8Array(32).fill(1), mac: new Uint8Array(32).fill(7) })));
    });
    servers.push(impostor);
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    const port = (impostor.address() as { port: number }).port;
    await expectCode(n8.p2p.connect([{ id: 2, host: '127.0.0.1', port }]), 'PEER_LOST');
    expect(n8.lost.map((l) => [l.id, l.reason.code])).toEqual([[2, 'BAD_MAC']]);
    expect(sockets.length).toBe(1);
  });

  it('200 idle sockets from one address: 16 are kept (the rest closed before any challenge), all time out, then a peer connects', async () => {
    // Long enough that none of the 16 times out while the 200 dials land on a loaded host (a
    // timed-out socket would free a slot for one that should have been refused).
    const authTimeoutMs = 2_000;
    const n0 = await openNode(0, { authTimeoutMs });
    const connected = track(n0.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]));
    const idle = Array.from({ length: 200 }, () => rawDial(n0.p2p.port));
    await until(() => idle.filter((r) => r.closed).length >= 200 - 16, 'over-cap sockets closed');
    await turns(50);
    expect(n0.p2p.stats().unauthenticatedConnections).toBe(16);
    const refused = idle.filter((r) => r.closed);
    expect(refused.every((r) => r.frames.length === 0)).toBe(true);
    expect(n0.logs.filter((e) => e.reason.code === 'TOO_MANY_CONNECTIONS').length).toBe(200 - 16);
    // The 16 kept were challenged, said nothing, and are closed when their time is up.
    await new Promise((r) => setTimeout(r, authTimeoutMs));
    await until(() => idle.every((r) => r.closed), 'idle sockets timed out');
    expect(n0.logs.filter((e) => e.reason.code === 'AUTH_TIMEOUT').length).toBe(16);
    expect(idle.filter((r) => r.frames.length === 1).length).toBe(16);
    expect(n0.p2p.stats().unauthenticatedConnections).toBe(0);
    const genuine = rawDial(n0.p2p.port);
    await genuine.hello(6, { taskId: TASK });
    await connected.promise;
  });

  it('the cap over all addresses is 128: sockets from ten loopback addresses, 16 kept from each until 128', async () => {
    const n0 = await openNode(0, { listenHost: '0.0.0.0' });
    const idle: RawPeer[] = [];
    for (let a = 2; a < 12; a++) for (let i = 0; i < 16; i++) idle.push(rawDial(n0.p2p.port, `127.0.0.${a}`));
    await until(() => idle.filter((r) => r.closed).length >= 160 - 128, 'over-cap sockets closed');
    await turns(50);
    expect(n0.p2p.stats().unauthenticatedConnections).toBe(128);
    expect(idle.filter((r) => r.closed).length).toBe(160 - 128);
  });

  it('a genuine peer refused by a full acceptor retries: it connects once the strangers\' slots free up', async () => {
    const n0 = await openNode(0, { authTimeoutMs: 300 });
    const idle = Array.from({ length: 16 }, () => rawDial(n0.p2p.port));
    await until(() => n0.p2p.stats().unauthenticatedConnections === 16, 'slots of 127.0.0.1 full');
    const n5 = await openNode(5);
    const peers = [{ id: 0, host: '127.0.0.1', port: n0.p2p.port }, { id: 5, host: '127.0.0.1', port: n5.p2p.port }];
    await Promise.all([n0.p2p.connect(peers), n5.p2p.connect(peers)]);
    expect(idle.every((r) => r.closed)).toBe(true);
    expect(n5.logs.some((e) => e.id === 0 && e.reason.detail.includes('dial again'))).toBe(true);
    expect(n5.lost).toEqual([]);
    await n5.p2p.send(0, 1, text('through'));
    expect(str((await n0.p2p.recv(5, 1)).data)).toBe('through');
  });

  it('a hello that arrives before this process has its task key waits for it; connect() needs the key', async () => {
    const n0 = await openNode(0, {}, true);
    await expectCode(n0.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]), 'BAD_ARGUMENT');
    const raw = rawDial(n0.p2p.port);
    await raw.hello(6, { taskId: TASK });
    raw.write(dataFrame(6, 0, 'early'));
    await turns(50);
    expect(n0.p2p.stats()).toMatchObject({ unauthenticatedConnections: 1, unexpectedMessages: 0 });
    n0.p2p.setTaskKey(TEST_TASK_KEY);
    expect(() => n0.p2p.setTaskKey(OTHER_KEY)).toThrow(P2PError);
    await n0.p2p.connect([{ id: 6, host: '127.0.0.1', port: 1 }]);
    expect(str((await n0.p2p.recv(6, 1)).data)).toBe('early');
  });
});
