// The WebSocket transport on loopback with real node:crypto signatures (issue 2 item 7): frames
// flow both ways over one dialed connection, a dialer reconnects after its server restarts,
// and hostile input — an oversized message, garbage bytes, text, a proof signed by an unknown
// key or by the wrong key, a member's proof or frame replayed (PROTOCOL §2.5) — is dropped and
// counted without crashing or binding the socket.
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { MAX_FRAME_BYTES } from '../../src/core/constants.ts';
import type { Core, CoreEffect, CoreInput } from '../../src/core/node.ts';
import type { ProcessId } from '../../src/core/ports.ts';
import { Shell } from '../../src/core/shell.ts';
import { bindProof, openBindProof } from '../../src/core/wire/bind-proof.ts';
import { encodeFrame } from '../../src/core/wire/frame.ts';
import { generateKeyPair } from '../../src/io/keys.ts';
import { createNodeSigner, createNodeVerifier } from '../../src/io/signer-node.ts';
import { connect, type Socket } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  DIAL_DEMAND_MS, HANDSHAKE_DEADLINE_MS, MAX_CONNECTIONS_PER_PEER, MAX_PENDING_SOCKETS, MAX_UNBOUND_CONNECTIONS, RECONNECT_MAX_MS, WsTransport,
  type Endpoint,
} from '../../src/io/ws-transport.ts';

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
    auth: { encode: { cluster: CLUSTER, signer: signerOf(id) }, decode: { cluster: CLUSTER, self: id, verifier } },
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

/** A hand-made dialer's socket to `port`, with the nonce the listener sent on it. */
async function rawSocket(port: number): Promise<WebSocket & { nonce: Promise<Uint8Array> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
  sockets.push(ws);
  ws.on('error', () => {});
  const nonce = new Promise<Uint8Array>((resolve) =>
    ws.once('message', (data, isBinary) => resolve(isBinary ? new Uint8Array() : Buffer.from(String(data).replace(/^trine-bind /, ''), 'hex'))));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return Object.assign(ws, { nonce });
}

/** A dialer's challenge to its listener (PROTOCOL §2.5). */
const CHALLENGE = new Uint8Array(16).fill(7);

/** rawSocket(), proved as `id` to r1, and r1's proof back checked: bound, nothing else received. */
async function provenSocket(port: number, id: ProcessId): Promise<WebSocket> {
  const ws = await rawSocket(port);
  const nonce = await ws.nonce;
  const answer = new Promise<Uint8Array>((resolve) => ws.once('message', (data: Buffer) => resolve(new Uint8Array(data))));
  ws.send(bindProof({ cluster: CLUSTER, signer: signerOf(id) }, 'r1', nonce, CHALLENGE));
  expect(openBindProof(await answer, CHALLENGE, { cluster: CLUSTER, self: id, verifier })).toEqual({ ok: true, value: { from: 'r1', challenge: new Uint8Array() } });
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
  it('carries signed frames both ways and binds the inbound connection only by the dialer\'s proof', async () => {
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

  it('drops garbage and text before a proof with a counted reason, reads none of it into the core, and closes a connection that never proves itself', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const ws = await rawSocket(server.transport.port ?? 0);
    expect(await ws.nonce).toHaveLength(16);
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    let seed = 12345;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
    ws.send(Uint8Array.from({ length: 10 }, rand)); // too short
    // A valid header (version 1, sender "a1") over random bytes: the CRC catches it.
    for (let i = 0; i < 5; i++) ws.send(Uint8Array.from([1, 2, 0x61, 0x31, ...Array.from({ length: 200 + i }, rand)])); // bad checksum
    ws.send('hello'); // text
    await until('failures counted', () => server.transport.counters.unboundFailures === 7 && server.transport.counters.droppedText === 1);
    expect(server.shell.counters.framesIn).toBe(0);
    expect(server.core.inputs.filter((i) => i.type === 'frame' || i.type === 'dropped')).toHaveLength(0);
    ws.send(Uint8Array.from({ length: 100 }, rand)); // eighth failure: the connection is closed
    await closed;
  });

  it('does not bind a socket whose frame is signed by an unknown key or by the wrong key', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;

    // A process the cluster has no key for.
    const stranger = await rawSocket(port);
    const strangerSigner = createNodeSigner('x9', generateKeyPair().seed);
    stranger.send(bindProof({ cluster: CLUSTER, signer: strangerSigner }, 'r1', await stranger.nonce, CHALLENGE));

    // An impostor claiming to be a1, with its own key: its proof fails verification.
    const impostor = await rawSocket(port);
    const impostorNonce = await impostor.nonce;
    let impostorGot = 0;
    impostor.on('message', () => impostorGot++);
    const forged = createNodeSigner('a1', generateKeyPair().seed);
    impostor.send(bindProof({ cluster: CLUSTER, signer: forged }, 'r1', impostorNonce, CHALLENGE));

    await until('both refused', () => server.transport.counters.unboundFailures === 2);
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

  it('a member\'s proof or first frame replayed on a stranger\'s connection binds nothing and gets no answer', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;
    // What an eavesdropper captured from a1's connection: its proof, then a query.
    const a1 = await rawSocket(port);
    const proof = bindProof({ cluster: CLUSTER, signer: signerOf('a1') }, 'r1', await a1.nonce, CHALLENGE);
    const query = encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'probe', nonce: 9 }] }, { cluster: CLUSTER, signer: signerOf('a1') });
    a1.close();
    const replay = await rawSocket(port);
    await replay.nonce;
    let got = 0;
    replay.on('message', () => got++);
    replay.send(proof); // another connection's nonce
    replay.send(query); // a genuine frame, but no proof came first
    await until('both refused', () => server.transport.counters.unboundFailures === 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(got).toBe(0);
    expect(server.transport.boundPeers()).toEqual([]);
    expect(server.core.inputs.filter((i) => i.type === 'frame')).toHaveLength(0);
    // The same query after a proof of this connection's nonce is answered.
    const ws = await provenSocket(port, 'a1');
    ws.on('message', () => got++);
    ws.send(query);
    await until('answered', () => got === 1);
  });

  it('a stranger listening on a peer\'s port gets nothing from a dialer but its proof: a replayed frame of the peer ends the connection, silence leaves it unusable', async () => {
    const port = await freePort();
    const squatter = new WebSocketServer({ host: '127.0.0.1', port });
    const got: { conn: number; bytes: number }[] = [];
    let conns = 0;
    // The first connection gets a genuine frame of r1 captured elsewhere; later ones, silence.
    const captured = encodeFrame({ from: 'r1', to: 'a1', items: [{ type: 'probe', nonce: 1 }] }, { cluster: CLUSTER, signer: signerOf('r1') });
    squatter.on('connection', (ws) => {
      const n = ++conns;
      ws.on('message', (data: Buffer) => {
        got.push({ conn: n, bytes: data.length });
        if (n === 1) ws.send(captured);
      });
      ws.send(`trine-bind ${'ab'.repeat(16)}`);
    });
    try {
      const client = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
      await until('the first connection ended', () => client.transport.counters.droppedBeforeProof === 1 && conns >= 2);
      await new Promise((r) => setTimeout(r, 200));
      sendProbe(client, 'r1', 5);
      expect(client.transport.isConnected('r1')).toBe(false);
      expect(client.transport.counters.droppedNoRoute).toBeGreaterThanOrEqual(1);
      // Each connection carried our proof and nothing else.
      expect(got.every((g) => g.conn <= conns)).toBe(true);
      expect(new Set(got.map((g) => g.conn)).size).toBe(got.length);
    } finally {
      for (const c of squatter.clients) c.terminate();
      await new Promise((r) => squatter.close(r));
    }
  });

  it('drops a frame that claims another sender on a bound connection', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const ws = await provenSocket(server.transport.port ?? 0, 'a1');
    await until('bound', () => server.transport.boundPeers().includes('a1'));
    // a2's genuine frame relayed over a1's connection: the transport refuses to mix senders.
    ws.send(encodeFrame({ from: 'a2', to: 'r1', items: [{ type: 'probe', nonce: 2 }] }, { cluster: CLUSTER, signer: signerOf('a2') }));
    await until('mismatch counted', () => server.transport.counters.droppedSenderMismatch === 1);
    expect(server.core.inputs.filter((i) => i.type === 'frame' && i.frame.from === 'a2')).toHaveLength(0);
  });
  it('answers each connection of one peer on that connection (an operator running two commands)', async () => {
    const server = await startNode('r1', { listen: LOOPBACK });
    const port = server.transport.port ?? 0;
    const first = await provenSocket(port, 'a1');
    const second = await provenSocket(port, 'a1');
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

// ---- bounds before authentication (issue 14 items 1 and 2) ---------------------------------------

describe('ws transport under a stranger\'s connection flood (issue 14 items 1, 2)', () => {
  const tcp: Socket[] = [];
  afterEach(() => {
    for (const s of tcp.splice(0)) s.destroy();
  });

  /** `waves` × `perWave` TCP connections to `port` that never send a byte, a wave every
   *  `everyMs`; counts the ones the listener closed. */
  function idleFlood(port: number, waves: number, perWave: number, everyMs: number): { closed: () => number; done: Promise<void> } {
    let closed = 0;
    const done = (async () => {
      for (let w = 0; w < waves; w++) {
        for (let i = 0; i < perWave; i++) {
          const s = connect(port, '127.0.0.1');
          tcp.push(s);
          s.on('error', () => {});
          s.once('close', () => closed++);
        }
        await new Promise((r) => setTimeout(r, everyMs));
      }
    })();
    return { closed: () => closed, done };
  }

  it('3,000 idle TCP connections are closed as they come or at the handshake deadline; a member dialing meanwhile is served, and the listener\'s event loop stays within a heartbeat period', async () => {
    const port = await freePort();
    const server = await startNode('r1', { listen: { host: '127.0.0.1', port } });
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const flood = idleFlood(port, 10, 300, 100);
    await new Promise((r) => setTimeout(r, 300));
    const member = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('the member connected', () => member.transport.isConnected('r1'), 10_000);
    sendProbe(member, 'r1', 1);
    await until('the member answered', () => replies(member, 'r1') === 1, 10_000);
    await flood.done;
    // Every stranger's socket is closed by the listener by the deadline after the last one came.
    await until('every idle socket closed by the listener', () => flood.closed() === 3_000, HANDSHAKE_DEADLINE_MS + 5_000);
    lag.disable();
    expect(server.transport.counters.handshakeClosed).toBe(3_000);
    // The member is still served after the flood.
    sendProbe(member, 'r1', 2);
    await until('the member answered again', () => replies(member, 'r1') === 2);
    // The test process is the flooder too, so this is an upper bound of the listener's own lag;
    // printed, not asserted (no wall-clock thresholds in npm test: bench/ measures it).
    const maxMs = lag.max / 1e6;
    console.log(`idle flood: 3000 connections in 1 s, event-loop delay max ${maxMs.toFixed(1)} ms, p99 ${(lag.percentile(99) / 1e6).toFixed(1)} ms; ${server.transport.counters.handshakeClosed - MAX_PENDING_SOCKETS} or more closed before the deadline`);
  }, 30_000);

  it('strangers holding upgraded connections that never verify cannot crowd out a member: the oldest unbound connection makes room', async () => {
    const port = await freePort();
    const server = await startNode('r1', { listen: { host: '127.0.0.1', port } });
    const strangers = 3 * MAX_UNBOUND_CONNECTIONS;
    let open = 0;
    for (let i = 0; i < strangers; i++) {
      const ws = await rawSocket(port);
      open++;
      ws.once('close', () => open--);
    }
    await until('the oldest strangers evicted', () => open <= MAX_UNBOUND_CONNECTIONS);
    expect(server.transport.counters.unboundEvicted).toBeGreaterThanOrEqual(strangers - MAX_UNBOUND_CONNECTIONS);
    // A member dials while every unbound slot is taken: it gets in and is served.
    const member = await startNode('a1', { dial: { r1: { host: '127.0.0.1', port } } });
    await until('the member connected', () => member.transport.isConnected('r1'));
    sendProbe(member, 'r1', 1);
    await until('the member answered', () => replies(member, 'r1') === 1);
    expect(server.transport.boundPeers()).toEqual(['a1']);
  });

  it(`one peer holds at most MAX_CONNECTIONS_PER_PEER (${MAX_CONNECTIONS_PER_PEER}) bound connections: a new one closes its oldest`, async () => {
    const port = await freePort();
    await startNode('r1', { listen: { host: '127.0.0.1', port } });
    const conns: { ws: WebSocket; closed: boolean; answered: number }[] = [];
    for (let i = 0; i <= MAX_CONNECTIONS_PER_PEER; i++) {
      const c = { ws: await provenSocket(port, 'a1'), closed: false, answered: 0 };
      c.ws.once('close', () => (c.closed = true));
      c.ws.on('message', () => c.answered++);
      conns.push(c);
      c.ws.send(encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'probe', nonce: i }] }, { cluster: CLUSTER, signer: signerOf('a1') }));
      await until(`connection ${i} answered`, () => c.answered === 1);
    }
    await until('the oldest closed', () => conns[0]?.closed === true);
    expect(conns.slice(1).every((c) => !c.closed)).toBe(true);
  });
});
