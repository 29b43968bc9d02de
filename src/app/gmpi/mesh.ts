// The state of G-MPI's TCP mesh for one task process (p2p.ts's P2P is its public face): the
// record every part shares (Mesh, made by createMesh: peers, held connections, strangers, the
// matching queue, the alert flag, the closed state), and the connection layer over it: sockets
// adopted and dialled, frames pumped with receive-side backpressure, the handshake applied, a
// connection attributed to its peer, lost, finished or closed. The handshake's decisions are
// handshake.ts's, a connection's record p2p-conn.ts's, message matching matching.ts's.
//
// Connections: one per pair; the higher VPID dials the lower, so a spawned replacement dials
// every survivor named in its mapping message and survivors only accept. The handshake is
// authenticated under the task key (docs/PROTOCOL.md §9.5, hello-auth.ts): the acceptor sends
// a challenge (a fresh nonce) as it accepts; the dialler answers with its hello, whose MAC
// covers both nonces; the acceptor checks it, then answers with its own hello only once it
// expects that VPID (it learns of a new member from the manager's broadcast, possibly after the
// hello arrived: such a hello is held, authenticated, its socket paused, until expect()); the
// dialler checks that one in turn. Both sides count the pair as connected when they have the
// other's verified hello, so no message can arrive on an unattributed connection, and a hello
// that fails its MAC closes the connection (BAD_MAC) before anything it says is acted on. After
// the hello, the frames of that TCP connection are trusted as the peer's (no per-frame MAC).
// The handshake's decisions (frames, checks, who may dial us) and the count of strangers are
// handshake.ts's; this file applies them to sockets and peers.
//
// Strangers: an accepted connection that has not authenticated within UNAUTHENTICATED_TIMEOUT_MS
// is closed, and at most MAX_UNAUTHENTICATED_PER_ADDRESS of them per remote address and
// MAX_UNAUTHENTICATED_CONNECTIONS in all are kept; beyond, a new one is closed at once, before
// its challenge. A dialler whose connection closes before the challenge retries (DIAL_RETRY_*),
// so a burst of genuine peers from one address is delayed by the cap, never refused.
import { connect as dial, type Socket } from 'node:net';
import { assert } from '../../base/result.ts';
import { arrive, cancelRecvs, createMatching, type Matching, type Message, queuedFrom } from './matching.ts';
import { DIAL_RETRY_LIMIT, type LostReason, P2PError, type P2PLogEvent, type P2POptions, UNAUTHENTICATED_TIMEOUT_MS } from './p2p-types.ts';
import {
  acceptorHello, admitHello, admitStranger, challenge, checkHello, createStrangers, diallerStep, type HandshakeSelf, leaveStrangers, type Strangers,
} from './handshake.ts';
import { finishedError } from './p2p-checks.ts';
import {
  type Conn, createConn, createConnectWaits, type ConnectWaits, type PendingRecv, type Peer, receiveFrame, redialDelayMs, rejectWaitsNaming, settleConnected,
} from './p2p-conn.ts';
import { encodeFrame, type GmpiFrame, type HelloFrame } from './wire.ts';

export type Mesh = {
  readonly taskId: string;
  readonly self: number;
  readonly maxMessageBytes: number;
  readonly maxUnexpectedBytes: number;
  readonly onLost: ((id: number, reason: LostReason) => void) | undefined;
  readonly log: ((event: P2PLogEvent) => void) | undefined;
  readonly authTimeoutMs: number;
  readonly peers: Map<number, Peer>;
  /** VPIDs taken out by removePeer: never reused (spec §7 item 2), so a later hello is stale. */
  readonly removed: Set<number>;
  /** Accepted connections whose hello is not verified yet (handshake.ts). */
  readonly strangers: Strangers<Conn>;
  /** Dial retries waiting for their backoff (cleared by close()). */
  readonly retryTimers: Set<NodeJS.Timeout>;
  readonly held: Map<number, Conn>;
  taskKey: Uint8Array | null;
  /** Posted receives, unexpected messages, discarded communicators (matching.ts). */
  readonly matching: Matching<PendingRecv>;
  readonly connectWaits: ConnectWaits;
  alert: { reason: unknown } | null;
  closed: boolean;
};

export function createMesh(opts: P2POptions, maxMessageBytes: number, maxUnexpectedBytes: number): Mesh {
  return {
    taskId: opts.taskId, self: opts.self, maxMessageBytes, maxUnexpectedBytes, onLost: opts.onConnectionLost, log: opts.log,
    authTimeoutMs: opts.authTimeoutMs ?? UNAUTHENTICATED_TIMEOUT_MS,
    peers: new Map(), removed: new Set(), strangers: createStrangers(), retryTimers: new Set(), held: new Map(), taskKey: null,
    matching: createMatching(), connectWaits: createConnectWaits(), alert: null, closed: false,
  };
}

/** Every open connection: strangers, held hellos, peers'. */
export function conns(m: Mesh): Conn[] {
  const out = [...m.strangers.conns, ...m.held.values()];
  for (const p of m.peers.values()) if (p.conn !== null) out.push(p.conn);
  return out;
}

export function abortError(m: Mesh): P2PError {
  return new P2PError('ABORTED', `aborted: ${String(m.alert?.reason)}`, m.alert?.reason);
}

/** Why a call fails now (closed, or the alert flag raised), else null. */
export function gate(m: Mesh): P2PError | null {
  if (m.closed) return new P2PError('CLOSED', 'P2P closed');
  if (m.alert !== null) return abortError(m);
  return null;
}

/** The error for a VPID that is not a peer: removed, or never known. */
export function unknown(m: Mesh, id: number): P2PError {
  if (m.removed.has(id)) return new P2PError('PEER_REMOVED', `peer ${id} was removed`);
  return new P2PError('UNKNOWN_PEER', `${id} is not a known peer`);
}

export function addExpected(m: Mesh, id: number): void {
  m.peers.set(id, { id, state: 'expected', conn: null });
  const heldConn = m.held.get(id);
  if (heldConn === undefined) return;
  m.held.delete(id);
  attribute(m, heldConn, id);
  pump(m, heldConn);
}

/** Dial peer `id` (attempt n: DIAL_RETRY_LIMIT). */
export function dialPeer(m: Mesh, id: number, host: string, port: number, attempt: number): void {
  const socket = dial({ host, port });
  adopt(m, socket, id, { host, port, attempt, connected: false });
}

export function adopt(m: Mesh, socket: Socket, dialledId: number | null, dialInfo: Conn['dial'] = null): void {
  const conn = createConn(socket, m.maxMessageBytes, dialledId, dialInfo);
  if (m.closed) {
    socket.destroy();
    return;
  }
  if (dialledId === null) {
    // A stranger until its hello verifies: bounded in number, per address and in time, and
    // refused before we spend a challenge on it (see the header).
    const refused = admitStranger(m.strangers, conn, conn.address);
    if (refused !== null) return fail(m, conn, refused);
    conn.authTimer = setTimeout(() => fail(m, conn, { code: 'AUTH_TIMEOUT', detail: `no authenticated hello within ${m.authTimeoutMs} ms` }), m.authTimeoutMs);
    conn.authTimer.unref();
    socket.write(encodeFrame(challenge(m.self, conn)));
  } else {
    const peer = m.peers.get(dialledId);
    assert(peer !== undefined && peer.conn === null, `dialling ${dialledId} twice`);
    peer.conn = conn;
    socket.once('connect', () => {
      if (conn.dial !== null) conn.dial.connected = true;
    });
  }
  socket.setNoDelay(true);
  // The acceptor speaks first (its challenge); the dialler answers it (onDiallerHandshake).
  socket.on('data', (chunk: Buffer) => {
    conn.decoder.feed(chunk);
    pump(m, conn);
  });
  socket.on('drain', () => {
    for (const w of conn.drainWaiters.splice(0)) w.resolve();
  });
  socket.on('error', (e) => lostSocket(m, conn, { code: 'SOCKET_ERROR', detail: e.message }));
  socket.on('close', () => lostSocket(m, conn, { code: 'SOCKET_CLOSED', detail: 'peer closed the connection' }));
}

/** The socket closed or failed. A dialled connection that TCP connected but that closed
 *  before its challenge was refused by a full acceptor (MAX_UNAUTHENTICATED_*): dial again
 *  after a backoff. Anything else is a failure (fail). */
function lostSocket(m: Mesh, conn: Conn, reason: LostReason): void {
  const d = conn.dial;
  const id = conn.dialledId;
  const peer = id === null ? undefined : m.peers.get(id);
  const delayMs = m.closed || peer?.conn !== conn ? null : redialDelayMs(conn);
  if (delayMs === null || d === null || id === null || peer === undefined) return fail(m, conn, reason);
  conn.dead = true;
  conn.socket.destroy();
  peer.conn = null;
  m.log?.({ type: 'connection.closed', id, reason: { code: reason.code, detail: `${reason.detail} before the challenge: dial again in ${delayMs} ms (attempt ${d.attempt + 1} of ${DIAL_RETRY_LIMIT})` } });
  const timer = setTimeout(() => {
    m.retryTimers.delete(timer);
    const now = m.peers.get(id);
    if (m.closed || now === undefined || now.state !== 'expected' || now.conn !== null) return;
    dialPeer(m, id, d.host, d.port, d.attempt + 1);
  }, delayMs);
  m.retryTimers.add(timer);
}

/** An accepted connection is no longer a stranger (authenticated or closed). */
function leaveUnauthenticated(m: Mesh, conn: Conn): void {
  if (conn.authTimer !== null) clearTimeout(conn.authTimer);
  conn.authTimer = null;
  leaveStrangers(m.strangers, conn, conn.address);
}

/** Pull decoded frames while the peer's share of the unexpected queue has room; pause the
 *  socket when it has not (receive-side backpressure: TCP flow control then stalls that
 *  peer's writes, and only that peer's), or while its hello is held. The queue holds at most
 *  maxUnexpectedBytes plus one message per peer. As with any bounded MPI buffering, a
 *  program whose next receive needs a message stuck behind a full queue of others from the
 *  same peer that it never receives deadlocks ("unsafe" in MPI terms); abort() still
 *  unblocks it. */
export function pump(m: Mesh, conn: Conn): void {
  while (!conn.dead) {
    if (conn.heldId !== null || conn.awaitingKey !== null || queuedFrom(m.matching, conn.id) >= m.maxUnexpectedBytes) {
      if (!conn.paused) {
        conn.paused = true;
        conn.socket.pause();
      }
      return;
    }
    const r = conn.decoder.next();
    if (!r.ok) {
      fail(m, conn, { code: r.code, detail: r.detail });
      return;
    }
    if (r.value === null) break;
    onFrame(m, conn, r.value);
  }
  if (conn.paused && !conn.dead) {
    conn.paused = false;
    conn.socket.resume();
  }
}

export function resumeReading(m: Mesh): void {
  for (const c of conns(m)) if (c.paused && c.heldId === null && c.awaitingKey === null && queuedFrom(m.matching, c.id) < m.maxUnexpectedBytes) pump(m, c);
}

function onFrame(m: Mesh, conn: Conn, frame: GmpiFrame): void {
  if (conn.id === null) {
    if (conn.dialledId !== null) return onDiallerHandshake(m, conn, conn.dialledId, frame);
    if (frame.type === 'challenge') return fail(m, conn, { code: 'UNEXPECTED_CHALLENGE', detail: 'a challenge to the acceptor' });
    if (frame.type !== 'hello') return fail(m, conn, { code: 'HELLO_EXPECTED', detail: 'message before hello' });
    return onHello(m, conn, frame);
  }
  const step = receiveFrame(conn, conn.id, frame);
  if (step.kind === 'fail') return fail(m, conn, step.reason);
  if (step.kind === 'bye') return finished(m, conn, conn.id);
  deliver(m, step.message);
}

/** The dialler's side of the handshake (PROTOCOL §9.5, handshake.ts). */
function onDiallerHandshake(m: Mesh, conn: Conn, dialled: number, frame: GmpiFrame): void {
  const step = diallerStep(handshakeSelf(m), conn, dialled, frame);
  if (step.kind === 'fail') return fail(m, conn, step.reason);
  if (step.kind === 'send') conn.socket.write(encodeFrame(step.frame));
  else attribute(m, conn, dialled);
}

function handshakeSelf(m: Mesh): HandshakeSelf {
  const key = m.taskKey;
  assert(key !== null, 'a handshake without a task key'); // connect() refuses without one; hellos wait for it
  return { taskId: m.taskId, self: m.self, key };
}

/** The acceptor's side: the dialler's hello. Its MAC is checked first (handshake.ts), so
*  nothing a stranger says is acted on; then the rules of who may dial us. Without our task
*  key yet (the agent has not handed it over), the hello waits for it, its socket paused and
*  its AUTH_TIMEOUT running. */
export function onHello(m: Mesh, conn: Conn, hello: HelloFrame): void {
  const { id, taskId } = hello;
  if (taskId !== m.taskId) return fail(m, conn, { code: 'WRONG_TASK', detail: `hello from task ${taskId}` });
  if (m.taskKey === null) {
    conn.awaitingKey = hello;
    return;
  }
  const check = checkHello(handshakeSelf(m), conn, hello);
  if (check.kind === 'fail') return fail(m, conn, check.reason);
  leaveUnauthenticated(m, conn);
  const peer = m.peers.get(id);
  const admission = admitHello({
    id, self: m.self, removed: m.removed.has(id), peer: peer === undefined ? undefined : { state: peer.state, hasConn: peer.conn !== null },
    alreadyHeld: m.held.has(id), heldCount: m.held.size,
  });
  if (admission.kind === 'fail') return fail(m, conn, admission.reason);
  if (admission.kind === 'attribute') return attribute(m, conn, id);
  conn.heldId = id; // pump() pauses the socket until expect(id) attributes it
  m.held.set(id, conn);
}

function attribute(m: Mesh, conn: Conn, id: number): void {
  const peer = m.peers.get(id);
  assert(peer !== undefined && peer.state === 'expected', `attributing ${id}, which is not expected`);
  conn.id = id;
  conn.heldId = null;
  peer.conn = conn;
  peer.state = 'connected';
  // Our reply: proves to the dialler that it reached a process of the task.
  if (conn.dialledId === null) conn.socket.write(encodeFrame(acceptorHello(handshakeSelf(m), conn, id)));
  settleConnected(m.connectWaits, (id) => m.peers.get(id)?.state === 'connected');
}

export function deliver(m: Mesh, message: Message): void {
  const a = arrive(m.matching, message);
  if (a.kind === 'delivered') a.recv.resolve(message);
}

/** The peer said bye (it finalized): keep what it sent, which receives may still take; end
 *  our side; settle the sends, receives and connection waits that need it with PEER_FINISHED.
 *  An ending, so no connectionLost. */
function finished(m: Mesh, conn: Conn, id: number): void {
  conn.dead = true;
  conn.socket.end();
  m.log?.({ type: 'connection.closed', id, reason: { code: 'FINISHED', detail: `peer ${id} finalized` } });
  for (const w of conn.drainWaiters.splice(0)) w.reject(finishedError(id));
  const peer = m.peers.get(id);
  if (peer === undefined || peer.conn !== conn) return;
  peer.state = 'finished';
  peer.conn = null;
  for (const r of cancelRecvs(m.matching, (r) => r.source === id)) r.reject(finishedError(id));
  rejectWaitsNaming(m.connectWaits, id, () => finishedError(id));
}

/** Close one connection deliberately (removePeer), rejecting its waiting sends. */
export function close1(m: Mesh, conn: Conn, reason: LostReason, error: () => P2PError): void {
  if (conn.dead) return;
  conn.dead = true;
  conn.socket.destroy();
  leaveUnauthenticated(m, conn);
  if (conn.heldId !== null && m.held.get(conn.heldId) === conn) m.held.delete(conn.heldId);
  for (const w of conn.drainWaiters.splice(0)) w.reject(error());
  m.log?.({ type: 'connection.closed', id: conn.id ?? conn.dialledId ?? conn.heldId, reason });
}

/** Close a connection for `reason`; if it belongs to a peer, that peer is lost for good
 *  (until removePeer, spec §5.5, or revive): raise connectionLost once, reject its sends, the receives
 *  and connection waits that name it. */
function fail(m: Mesh, conn: Conn, reason: LostReason): void {
  if (conn.dead) return;
  conn.dead = true;
  conn.socket.destroy();
  leaveUnauthenticated(m, conn);
  if (conn.heldId !== null && m.held.get(conn.heldId) === conn) m.held.delete(conn.heldId);
  const id = conn.id ?? conn.dialledId;
  if (m.closed) return;
  m.log?.({ type: 'connection.closed', id, reason });
  for (const w of conn.drainWaiters.splice(0)) w.reject(gate(m) ?? new P2PError('PEER_LOST', `${id}: ${reason.code}`));
  if (id === null) return;
  const peer = m.peers.get(id);
  if (peer === undefined || peer.conn !== conn) return; // a stray or superseded connection
  peer.state = 'lost';
  peer.conn = null;
  const lost = () => new P2PError('PEER_LOST', `connection to ${id} lost: ${reason.code} ${reason.detail}`);
  for (const r of cancelRecvs(m.matching, (r) => r.source === id)) r.reject(lost());
  rejectWaitsNaming(m.connectWaits, id, lost);
  m.onLost?.(id, reason);
}
