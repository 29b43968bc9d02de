// The WebSocket transport on loopback with real node:crypto signatures (issue 2 item 7): frames
// flow both ways over one dialed connection, a dialer reconnects after its server restarts,
// and hostile input — an oversized message, garbage bytes, text, a frame signed by an unknown
// key or by the wrong key — is dropped and counted without crashing or binding the socket.
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { MAX_FRAME_BYTES } from '../../src/core/constants.ts';
import type { Core, CoreEffect, CoreInput } from '../../src/core/node.ts';
import type { ProcessId } from '../../src/core/ports.ts';
import { Shell } from '../../src/core/shell.ts';
import { encodeFrame } from '../../src/core/wire/frame.ts';
import { generateKeyPair } from '../../src/io/keys.ts';
import { createNodeSigner, createNodeVerifier } from '../../src/io/signer-node.ts';
import { DIAL_DEMAND_MS, RECONNECT_MAX_MS, WsTransport, type Endpoint } from '../../src/io/ws-transport.ts';

const CLUSTER = 'test-cluster';
const ids = ['r1', 'a1', 'a2'] as const;
const pairs = new Map(ids.map((id) => [id as ProcessId, generateKeyPair()]));
const publicKeys = new Map([...pairs].map(([id, p]) => [id, p.publicKey]));
const verifier = createNodeVerifier(publicKeys);
const signerOf = (id: ProcessId) => createNodeSigner(id, (pairs.get(id) ?? generateKeyPair()).seed);

/** A test-only core: answers every `probe` with a `probe.reply`, records every input. */
function probeCore(id: ProcessId): Core & { inputs: CoreInput[] } {
  const inputs: CoreInput[] = [];
  return {
    id,
    inputs,
    nextWakeMs: () => null,
    step(input) {
      inputs.push(input);
      const out: CoreEffect[] = [];
      if (input.type === 'frame') {
        for (const item of input.frame.items) {
          if (item.type === 'probe') out.push({ type: 'send', to: input.frame.from, item: { type: 'probe.reply', nonce: item.nonce } });
        }
      }
      return out;
    },
  };
}

type TestNode = { id: ProcessId; core: ReturnType<typeof probeCore>; shell: Shell; transport: WsTransport };

const open: WsTransport[] = [];
const sockets: WebSocket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.terminate();
  await Promise.all(open.splice(0).map((t) => t.close()));
});

async function startNode(
  id: ProcessId, opts: { listen?: Endpoint; dial?: Record<ProcessId, Endpoint>; dialOnDemand?: Record<ProcessId, Endpoint>; cluster?: string },
): Promise<TestNode> {
  const core = probeCore(id);
  let transport: WsTransport | null = null;
  const shell = new Shell({
    core, cluster: CLUSTER, signer: signerOf(id), verifier,
    transport: { send: (to, frame) => transport?.send(to, frame) },
  });
  const drops = () => Object.values(shell.counters.drops).reduce((a, b) => a + (b ?? 0), 0);
  transport = await WsTransport.start({
    self: id,
    cluster: opts.cluster,
    listen: opts.listen,
    dial: opts.dial,
    dialOnDemand: opts.dialOnDemand,
    receive: (data, claimed) => {
      const before = drops();
      shell.receive(data, Date.now(), claimed);
      return drops() === before;
    },
    onLink: (peer, up) => shell.input({ type: up ? 'transport.up' : 'transport.down', nowMs: Date.now(), peer }),
  });
  open.push(transport);
  return { id, core, shell, transport };
}

async function until(what: string, cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const replies = (n: TestNode, from: ProcessId) =>
  n.core.inputs.filter((i) => i.type === 'frame' && i.frame.from === from && i.frame.items.some((x) => x.type === 'probe.reply')).length;
const links = (n: TestNode, peer: ProcessId) =>
  n.core.inputs.filter((i) => (i.type === 'transport.up' || i.type === 'transport.down') && i.peer === peer).map((i) => i.type);

function sendProbe(n: TestNode, to: ProcessId, nonce: number): void {
  n.transport.send(to, encodeFrame({ from: n.id, to, items: [{ type: 'probe', nonce }] }, { cluster: CLUSTER, signer: signerOf(n.id) }));
}

async function rawSocket(port: number): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
  sockets.push(ws);
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return ws;
}

const LOOPBACK = { host: '127.0.0.1', port: 0 };

/** A port nobody listens on yet: take one, then free it. */
async function freePort(): Promise<number> {
  const probe = await startNode('r1', { listen: LOOPBACK });
  const port = probe.transport.port ?? 0;
  await probe.transport.close();
  open.splice(open.indexOf(probe.transport), 1);
  return port;
}

describe('ws transport', () => {
  it('carries signed frames both ways and binds the inbound connection only after a verified frame', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;
    const client = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('a1 link to r1', () => client.transport.isConnected('r1'));
    expect(links(client, 'r1')).toEqual(['transport.up']);

    sendProbe(client, 'r1', 7);
    await until('reply at a1', () => replies(client, 'r1') === 1);
    // The reply travelled back on the connection a1 opened, now bound to a1 at r1.
    expect(server.transport.boundPeers()).toEqual(['a1']);
    expect(links(server, 'a1')).toEqual(['transport.up']);
    expect(server.shell.counters.drops).toEqual({});

    for (let i = 0; i < 200; i++) sendProbe(client, 'r1', 100 + i);
    await until('200 more replies', () => replies(client, 'r1') === 201);
    expect(server.transport.counters.droppedNoRoute).toBe(0);
  });

  it('a peer dialed on demand (a spare replica) is dialed only once a frame is addressed to it, and left alone once frames stop', async () => {
    const port = await freePort();

    const client = await startNode('a1', { dialOnDemand: { r1: { host: '127.0.0.1', port } } });
    await new Promise((r) => setTimeout(r, 300));
    expect(client.transport.counters.dials).toBe(0); // not wanted: never dialed

    // Wanted while the peer is down: dialed at once, then redialed with backoff.
    sendProbe(client, 'r1', 1);
    expect(client.transport.counters.dials).toBe(1);
    await until('a redial while wanted', () => client.transport.counters.dials >= 3);
    // No frame for it since: after DIAL_DEMAND_MS the dialer goes idle.
    await new Promise((r) => setTimeout(r, DIAL_DEMAND_MS + 1_500));
    const idle = client.transport.counters.dials;
    await new Promise((r) => setTimeout(r, 1_200));
    expect(client.transport.counters.dials).toBe(idle);

    // The peer starts; the next frame for it dials, connects and is answered.
    const server = await startNode('r1', { listen: { host: '127.0.0.1', port } });
    sendProbe(client, 'r1', 2);
    await until('a1 link to r1', () => client.transport.isConnected('r1'));
    sendProbe(client, 'r1', 3);
    await until('reply at a1', () => replies(client, 'r1') >= 1);
    expect(server.transport.boundPeers()).toEqual(['a1']);
  });

  it('setOnDemand: a peer dialed eagerly and made on-demand (a retired replica) stops being redialed; made eager again, it is dialed at once', async () => {
    const port = await freePort();

    const client = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('redials of a dead eager peer', () => client.transport.counters.dials >= 3);
    client.transport.setOnDemand('r1', true);
    // No frame for it: the next failure schedules nothing (a pending retry may still fire once).
    await new Promise((r) => setTimeout(r, RECONNECT_MAX_MS + 300));
    const settled = client.transport.counters.dials;
    await new Promise((r) => setTimeout(r, RECONNECT_MAX_MS + 300));
    expect(client.transport.counters.dials).toBe(settled);

    await startNode('r1', { listen: { host: '127.0.0.1', port } });
    client.transport.setOnDemand('r1', false);
    expect(client.transport.counters.dials).toBe(settled + 1);
    await until('a1 link to r1', () => client.transport.isConnected('r1'));
    client.transport.setOnDemand('x9', false); // a peer it does not dial: nothing happens
    expect(client.transport.counters.dials).toBe(settled + 1);
  });

  it('counts a send to a peer with no socket as dropped', async () => {
    const lonely = await startNode('a2', {});
    sendProbe(lonely, 'r1', 1);
    expect(lonely.transport.counters.droppedNoRoute).toBe(1);
  });

  it('reconnects after the server restarts and reports the link going down and up', async () => {
    const first = await startNode('r1', { listen: LOOPBACK });
    const port = first.transport.port ?? 0;
    const client = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('first link', () => client.transport.isConnected('r1'));

    await first.transport.close();
    await until('link down', () => !client.transport.isConnected('r1'));
    sendProbe(client, 'r1', 1);
    expect(client.transport.counters.droppedNoRoute).toBeGreaterThanOrEqual(1);

    const second = await startNode('r1', { listen: { host: '127.0.0.1', port } });
    await until('link up again', () => client.transport.isConnected('r1'));
    expect(links(client, 'r1')).toEqual(['transport.up', 'transport.down', 'transport.up']);
    sendProbe(client, 'r1', 2);
    await until('reply from the restarted server', () => replies(client, 'r1') === 1);
    expect(second.transport.boundPeers()).toEqual(['a1']);
  });

  it('refuses an oversized message without crashing and keeps serving others', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;
    const bad = await rawSocket(port);
    const closed = new Promise<number>((resolve) => bad.once('close', (code) => resolve(code)));
    bad.send(new Uint8Array(MAX_FRAME_BYTES + 1));
    expect(await closed).toBe(1009); // "message too big"
    await until('oversized counted', () => server.transport.counters.oversized === 1);
    expect(server.shell.counters.framesIn).toBe(0);

    const client = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('link', () => client.transport.isConnected('r1'));
    sendProbe(client, 'r1', 3);
    await until('reply', () => replies(client, 'r1') === 1);
  });

  it('drops garbage and text with a counted reason and closes a connection that never verifies', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const ws = await rawSocket(server.transport.port ?? 0);
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    let seed = 12345;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
    ws.send(Uint8Array.from({ length: 10 }, rand)); // too short
    // A valid header (version 1, sender "a1") over random bytes: the CRC catches it.
    for (let i = 0; i < 5; i++) ws.send(Uint8Array.from([1, 2, 0x61, 0x31, ...Array.from({ length: 200 + i }, rand)])); // bad checksum
    ws.send('hello'); // text
    await until('drops counted', () => server.shell.counters.framesIn === 6 && server.transport.counters.droppedText === 1);
    expect(server.shell.counters.drops).toEqual({ WIRE_TOO_SHORT: 1, WIRE_CHECKSUM: 5 });
    // The core saw each drop as evidence, with no sender it could blame.
    expect(server.core.inputs.filter((i) => i.type === 'dropped' && i.from === null)).toHaveLength(6);
    ws.send(Uint8Array.from({ length: 100 }, rand)); // eighth failure: the connection is closed
    await closed;
  });

  it('does not bind a socket whose frame is signed by an unknown key or by the wrong key', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;

    // A process the cluster has no key for.
    const stranger = await rawSocket(port);
    const strangerSigner = createNodeSigner('x9', generateKeyPair().seed);
    stranger.send(encodeFrame({ from: 'x9', to: 'r1', items: [{ type: 'probe', nonce: 1 }] }, { cluster: CLUSTER, signer: strangerSigner }));

    // An impostor claiming to be a1, with its own key: its frame fails verification.
    const impostor = await rawSocket(port);
    let impostorGot = 0;
    impostor.on('message', () => impostorGot++);
    const forged = createNodeSigner('a1', generateKeyPair().seed);
    impostor.send(encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'probe', nonce: 2 }] }, { cluster: CLUSTER, signer: forged }));

    await until('both dropped', () => (server.shell.counters.drops.SIG_UNKNOWN_KEY ?? 0) === 1 && (server.shell.counters.drops.SIG_INVALID ?? 0) === 1);
    expect(server.transport.isConnected('a1')).toBe(false);
    // Frames for a1 do not go to the impostor's socket.
    sendProbe(server, 'a1', 3);
    await new Promise((r) => setTimeout(r, 50));
    expect(impostorGot).toBe(0);
    expect(server.transport.counters.droppedNoRoute).toBe(1);
    expect(server.core.inputs.filter((i) => i.type === 'frame')).toHaveLength(0);

    // The real a1 then binds normally.
    const client = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('link', () => client.transport.isConnected('r1'));
    sendProbe(client, 'r1', 4);
    await until('reply', () => replies(client, 'r1') === 1);
    expect(server.transport.boundPeers()).toEqual(['a1']);
    expect(impostorGot).toBe(0);
  });

  it('drops a frame that claims another sender on a bound connection', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const ws = await rawSocket(server.transport.port ?? 0);
    ws.send(encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'probe', nonce: 1 }] }, { cluster: CLUSTER, signer: signerOf('a1') }));
    await until('bound', () => server.transport.boundPeers().includes('a1'));
    // a2's genuine frame relayed over a1's connection: the transport refuses to mix senders.
    ws.send(encodeFrame({ from: 'a2', to: 'r1', items: [{ type: 'probe', nonce: 2 }] }, { cluster: CLUSTER, signer: signerOf('a2') }));
    await until('mismatch counted', () => server.transport.counters.droppedSenderMismatch === 1);
    expect(server.core.inputs.filter((i) => i.type === 'frame' && i.frame.from === 'a2')).toHaveLength(0);
  });
  it('answers each connection of one peer on that connection (an operator running two commands)', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;
    const first = await rawSocket(port);
    const second = await rawSocket(port);
    const got = { first: 0, second: 0 };
    first.on('message', () => got.first++);
    second.on('message', () => got.second++);
    const query = (nonce: number) => encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'probe', nonce }] }, { cluster: CLUSTER, signer: signerOf('a1') });
    first.send(query(1));
    await until('first answered', () => got.first === 1);
    second.send(query(2));
    await until('second answered', () => got.second === 1);
    first.send(query(3)); // the older connection still gets its own answer
    await until('first answered again', () => got.first === 2);
    expect(got.second).toBe(1);
  });

  it('refuses the dial of a peer that names another cluster (HTTP 409, before any frame) and tells the dialer which cluster it reached', async () => {
    const port = await freePort();
    await startNode('r1', { listen: { host: '127.0.0.1', port }, cluster: 'cluster-a' });
    const stranger = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } }, cluster: 'cluster-b' });
    await until('the refusal', () => stranger.transport.foreignCluster('r1') !== null);
    expect(stranger.transport.foreignCluster('r1')).toBe('cluster-a');
    expect(stranger.transport.isConnected('r1')).toBe(false);
    // A member of the cluster, and a dialer that names none (an older peer), are let in.
    const member = await startNode('a2', { dial: { r1: { host: '127.0.0.1', port } }, cluster: 'cluster-a' });
    await until('the member connected', () => member.transport.isConnected('r1'));
    expect(member.transport.foreignCluster('r1')).toBeNull();
    const unnamed = await startNode('a2', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('the unnamed dialer connected', () => unnamed.transport.isConnected('r1'));
  });
});
