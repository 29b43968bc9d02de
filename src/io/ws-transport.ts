// The WebSocket transport (DESIGN.md §3, issue 2 item 7): carries signed frames between real
// processes over `ws`. It owns the sockets, the listening server, the dial-and-reconnect loop
// and the binding of connections to peer ids (PROTOCOL §2.5): a listener sends every new
// connection a fresh nonce, the dialer answers with a `bind.proof` of it under its own key
// (src/core/wire/bind-proof.ts), and only that binds the connection to the dialer. Nothing else
// is read from, or sent on, a connection before; after, the Shell verifies every frame.
//
// Sending is best effort, as the Transport port says: no socket, or a socket whose buffer is
// over its limit, drops the frame and counts it; the reliable lanes retransmit.
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { BIND_NONCE_BYTES, MAX_FRAME_BYTES } from '../core/constants.ts';
import type { ProcessId } from '../core/ports.ts';
import type { Transport } from '../core/ports.ts';
import { randomBytes } from 'node:crypto';
import { bindProof, openBindProof } from '../core/wire/bind-proof.ts';
import { peekSender, type DecodeContext, type EncodeContext } from '../core/wire/frame.ts';

/** First reconnect delay after a dial fails or a link drops. Loopback refusals are instant,
 *  so a short first retry lets a restarted peer rejoin within one heartbeat period. */
export const RECONNECT_INITIAL_MS = 10;
/** Reconnect delays double up to this cap: 500 ms stays well under the 1 s a replica
 *  replacement may take, yet keeps a dead peer from costing more than 2 dials a second. */
export const RECONNECT_MAX_MS = 500;
/** A frame for a peer this process dials but is not connected to cuts the reconnect backoff
 *  short: the core sends only to peers it believes are up (a replica the group just added, say;
 *  PROTOCOL §10.6), so the peer is dialed at once, not up to RECONNECT_MAX_MS later. At most
 *  one such dial per peer this often, so a dead peer the core still addresses costs little. */
export const SEND_REDIAL_MIN_MS = 50;
/** A peer dialed on demand (dialOnDemand: a spare replica, which mostly is not running) is
 *  dialed, and redialed with backoff, only while the core has addressed a frame to it this
 *  recently. The core retries an unanswered hello at least every 400 ms (PROTOCOL §3.2), so a
 *  peer it still wants stays wanted; one it stopped addressing costs nothing once this passes. */
export const DIAL_DEMAND_MS = 2_000;
/** Random spread of ±20% on every delay so peers that lost a common server do not redial in
 *  lockstep. */
export const RECONNECT_JITTER = 0.2;
/** A dial whose WebSocket handshake has not completed by then is abandoned and retried:
 *  a hung peer must not hold a dial slot forever. */
export const CONNECT_TIMEOUT_MS = 2_000;
/** Bytes a socket may hold unsent before we drop frames to it: 8 maximum-size frames. Above
 *  that the peer (or the link) is not keeping up, and queueing more only delays the
 *  retransmissions the protocol will make anyway. */
export const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
/** An inbound connection that has not proved its dialer by then is closed (it costs a socket
 *  and buffers, and every legitimate peer answers the nonce at once), and so is a dialed one
 *  whose listener sent no nonce. */
export const UNBOUND_TIMEOUT_MS = 5_000;
/** Messages that are not a valid proof on a not-yet-bound connection before we close it. A
 *  correct peer's first message is its proof; a few are allowed for bytes corrupted in flight. */
export const MAX_UNBOUND_FAILURES = 8;
/** The text message that carries a listener's nonce: this prefix, then the nonce in hex. */
const NONCE_PREFIX = 'trine-bind ';
// ---- bounds before authentication (PROTOCOL §2.5; issue 14 items 1 and 2) -----------------
// A stranger can open TCP connections and WebSocket upgrades without any key. What it costs a
// listener is bounded at each stage, and the members' capacity is separate from the strangers':
//   1. a TCP connection must complete its WebSocket upgrade within HANDSHAKE_DEADLINE_MS, and at
//      most MAX_PENDING_SOCKETS (MAX_PENDING_PER_SOURCE per remote address) wait to: beyond, the
//      oldest waiting one (of that address, or of the busiest one) is closed. An idle flood is
//      closed as it comes, never piled up until descriptors run out, and a member, which sends
//      its upgrade request the moment it connects, is never the oldest;
//   2. an upgraded connection that has not yet proved its dialer holds one of
//      MAX_UNBOUND_CONNECTIONS slots; a newcomer when all are taken evicts the oldest, so no
//      one can hold them, and a member (whose first frame follows its upgrade at once) always
//      gets in;
//   3. only a connection bound by a proof counts against MAX_INBOUND_CONNECTIONS,
//      which strangers therefore never reach, and one peer holds at most MAX_CONNECTIONS_PER_PEER
//      of them (a new one closes that peer's oldest).

/** A member's upgrade takes one round trip; a dialer gives up after CONNECT_TIMEOUT_MS. */
export const HANDSHAKE_DEADLINE_MS = CONNECT_TIMEOUT_MS;
/** TCP connections waiting to upgrade, at once and from one remote address. Members dial a
 *  listener once each (plus a reconnect), far below either. */
export const MAX_PENDING_SOCKETS = 256;
export const MAX_PENDING_PER_SOURCE = 64;
/** The kernel's queue of connections not yet accepted (capped by net.core.somaxconn): a burst
 *  of strangers waits there instead of being refused before a member's connection is seen. */
export const LISTEN_BACKLOG = 4096;
/** Upgraded connections not yet bound to a peer by a proof. */
export const MAX_UNBOUND_CONNECTIONS = 64;
/** Bound inbound connections held at once: a cluster has a few dozen processes, each with a
 *  connection or two, plus the operator's commands. */
export const MAX_INBOUND_CONNECTIONS = 256;
/** Bound connections of one peer: an operator running several commands at once. */
export const MAX_CONNECTIONS_PER_PEER = 16;

export type Endpoint = { host: string; port: number };

/** A dial's URL path when it names its cluster (WsTransportOptions.cluster). */
const CLUSTER_PATH = /^\/trine\/([a-z0-9-]{1,64})$/;
const CLUSTER_ID = /^[a-z0-9-]{1,64}$/;
/** The header of a refused dial's 409 that names the server's cluster. */
const CLUSTER_HEADER = 'x-trine-cluster';

export type TransportCounters = {
  framesSent: number;
  framesReceived: number;
  /** Sends dropped because no open socket led to the peer. */
  droppedNoRoute: number;
  /** Sends dropped because the socket's buffer exceeded MAX_BUFFERED_BYTES. */
  droppedBackpressure: number;
  /** Inbound text (non-binary) messages: never a frame. */
  droppedText: number;
  /** Frames on a bound connection that claim another sender. */
  droppedSenderMismatch: number;
  /** Messages larger than MAX_FRAME_BYTES: `ws` refuses them and closes the connection. */
  oversized: number;
  /** Messages on an unbound connection that were not a valid proof of its nonce. */
  unboundFailures: number;
  /** Frames on a dialed connection that were not its listener's proof, each ending it: a
   *  stranger on the peer's port (PROTOCOL §10.6), never sent anything but our proof. */
  droppedBeforeProof: number;
  socketErrors: number;
  receiveErrors: number;
  connectionsIn: number;
  connectionsRefused: number;
  /** TCP connections closed before their upgrade: past HANDSHAKE_DEADLINE_MS, or beyond the
   *  pending caps. */
  handshakeClosed: number;
  /** Unbound connections closed to make room for a newer one (MAX_UNBOUND_CONNECTIONS). */
  unboundEvicted: number;
  dials: number;
  bindings: number;
};

export type TransportEventLevel = 'debug' | 'info' | 'warn' | 'error';

export type WsTransportOptions = {
  self: ProcessId;
  /** The cluster id: dials name it in the URL path (`/trine/<cluster>`) and the server refuses
   *  the upgrade of a dial that names another (HTTP 409), before any frame. A peer with the
   *  bundle of another cluster learns why it gets nothing (foreignCluster). Frames are still
   *  checked for the cluster id after authentication (PROTOCOL §2.2); this only explains. */
  cluster?: string | undefined;
  /** Run a server here (replicas, watchdog). */
  listen?: Endpoint | undefined;
  /** Peers this process dials and keeps dialing. */
  dial?: Readonly<Record<ProcessId, Endpoint>> | undefined;
  /** Peers this process dials only while it sends them frames (DIAL_DEMAND_MS). */
  dialOnDemand?: Readonly<Record<ProcessId, Endpoint>> | undefined;
  /** Hand a frame of the bound peer `from` to the Shell, which verifies it. */
  receive: (data: Uint8Array, from: ProcessId) => void;
  /** This process's keys, to prove itself on the connections it dials (`encode`) and to check
   *  the proofs of those it accepts (`decode`): PROTOCOL §2.5. */
  auth: { encode: EncodeContext; decode: DecodeContext };
  /** A peer became reachable (first usable socket) or unreachable (last one closed). */
  onLink?: ((peer: ProcessId, up: boolean) => void) | undefined;
  onEvent?: ((level: TransportEventLevel, event: string, fields: Record<string, unknown>) => void) | undefined;
};

export class TransportError extends Error {
  constructor(readonly code: 'ADDR_IN_USE' | 'LISTEN_FAILED', message: string, readonly endpoint: Endpoint) {
    super(message);
  }
}

type Conn = {
  ws: WebSocket;
  direction: 'in' | 'out';
  /** The dialed peer (out), or the peer this connection proved to be (in, once bound). */
  peer: ProcessId | null;
  /** Proved: the dialer's proof verified (in), or the listener's (out). Nothing but proofs is
   *  sent or read before. */
  bound: boolean;
  /** The nonce this listener sent on it (in), or the challenge we sent its listener (out). */
  nonce: Uint8Array | null;
  failures: number;
  unboundTimer: NodeJS.Timeout | null;
  /** When it was accepted (inbound) or dialed, for eviction order. */
  sinceMs: number;
};

type Dialer = {
  peer: ProcessId;
  url: string;
  conn: Conn | null;
  delayMs: number;
  timer: NodeJS.Timeout | null;
  lastDialMs: number;
  /** Dialed on demand only, and when the core last addressed it. */
  lazy: boolean;
  lastDemandMs: number;
};

function toBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

export class WsTransport implements Transport {
  readonly counters: TransportCounters = {
    framesSent: 0, framesReceived: 0, droppedNoRoute: 0, droppedBackpressure: 0, droppedText: 0,
    droppedSenderMismatch: 0, oversized: 0, unboundFailures: 0, droppedBeforeProof: 0, socketErrors: 0, receiveErrors: 0,
    connectionsIn: 0, connectionsRefused: 0, handshakeClosed: 0, unboundEvicted: 0, dials: 0, bindings: 0,
  };
  private readonly conns = new Set<Conn>();
  private readonly routes = new Map<ProcessId, Conn>();
  private readonly linked = new Set<ProcessId>();
  private readonly dialers = new Map<ProcessId, Dialer>();
  /** Peers whose server refused our dial as another cluster's, with what it said it is. */
  private readonly foreign = new Map<ProcessId, string>();
  private server: WebSocketServer | null = null;
  private http: Server | null = null;
  private closed = false;
  /** Bound inbound connections. */
  private inbound = 0;
  /** Inbound connections upgraded and not yet bound, oldest first. */
  private readonly unbound = new Set<Conn>();
  /** TCP connections not yet upgraded, oldest first, and the same by remote address. */
  private readonly pending = new Set<Socket>();
  private readonly pendingBySource = new Map<string, Set<Socket>>();
  /** The bound connection whose frame the Shell is handling right now. */
  private current: Conn | null = null;

  private constructor(private readonly opts: WsTransportOptions) {}

  /** The cluster id `peer`'s server said it belongs to when it refused our dial as another
   *  cluster's; null if it did not. */
  foreignCluster(peer: ProcessId): string | null {
    return this.foreign.get(peer) ?? null;
  }

  /** Listen (if asked) and start dialing. Rejects with TransportError if the port is taken. */
  static async start(opts: WsTransportOptions): Promise<WsTransport> {
    const t = new WsTransport(opts);
    if (opts.listen !== undefined) await t.listen(opts.listen);
    for (const [peer, ep] of Object.entries(opts.dialOnDemand ?? {})) t.dialers.set(peer, t.dialer(peer, ep, true));
    for (const [peer, ep] of Object.entries(opts.dial ?? {})) {
      const d = t.dialer(peer, ep, false);
      t.dialers.set(peer, d);
      t.dialNow(d);
    }
    return t;
  }

  private dialer(peer: ProcessId, ep: Endpoint, lazy: boolean): Dialer {
    return { peer, url: this.urlOf(ep), conn: null, delayMs: RECONNECT_INITIAL_MS, timer: null, lastDialMs: -Infinity, lazy, lastDemandMs: -Infinity };
  }

  /** Dial `peer` at `ep` on demand from now on, as the spares given at start: a replica learnt at
   *  run time (PROTOCOL §10.12). A peer already dialed keeps its dialer (setEndpoint moves it). */
  dialOnDemand(peer: ProcessId, ep: Endpoint): void {
    if (this.closed || this.dialers.has(peer)) return;
    this.dialers.set(peer, this.dialer(peer, ep, true));
    this.event('info', 'transport.endpoint', { peer, host: ep.host, port: ep.port });
  }

  /** The port actually bound (useful with port 0). */
  get port(): number | null {
    const a = this.server?.address();
    return a !== null && typeof a === 'object' ? a.port : null;
  }

  /** Peers with a usable socket right now. */
  connectedPeers(): ProcessId[] {
    return [...this.linked].sort();
  }

  /** Peers proven by a proof on some open connection they dialed. */
  boundPeers(): ProcessId[] {
    const out = new Set<ProcessId>();
    for (const c of this.conns) if (c.direction === 'in' && c.bound && c.peer !== null && c.ws.readyState === WebSocket.OPEN) out.add(c.peer);
    return [...out].sort();
  }

  isConnected(peer: ProcessId): boolean {
    return this.linked.has(peer);
  }

  send(to: ProcessId, frame: Uint8Array): void {
    // A reply goes back on the connection its request came in on: two connections of one
    // peer (an operator running two commands at once) each get their own answers.
    const current = this.current;
    if (current !== null && current.peer === to && current.ws.readyState === WebSocket.OPEN) {
      this.sendOn(current, frame);
      return;
    }
    const route = this.routeTo(to);
    if (route === null || route.ws.readyState !== WebSocket.OPEN) this.redialOnDemand(to);
    this.sendOn(route, frame);
  }

  private urlOf(ep: Endpoint): string {
    return `ws://${ep.host}:${ep.port}/${this.opts.cluster === undefined ? '' : `trine/${this.opts.cluster}`}`;
  }

  /** Dial `peer` at `ep` from now on (a replica that listens on another port than cluster.json
   *  gives, its own being taken: PROTOCOL §10.6). A connection to the old address is closed and
   *  the peer dialed again. No effect on a peer we do not dial, or at the same address. */
  setEndpoint(peer: ProcessId, ep: Endpoint): void {
    const d = this.dialers.get(peer);
    const url = this.urlOf(ep);
    if (d === undefined || d.url === url || this.closed) return;
    d.url = url;
    this.event('info', 'transport.endpoint', { peer, host: ep.host, port: ep.port });
    d.delayMs = RECONNECT_INITIAL_MS;
    if (d.conn !== null) {
      d.conn.ws.terminate(); // its close dials again, at the new address
      return;
    }
    if (d.timer !== null) clearTimeout(d.timer);
    d.timer = null;
    if (!d.lazy || performance.now() - d.lastDemandMs <= DIAL_DEMAND_MS) this.dialNow(d);
  }

  /** Dial `peer` only while frames for it come (DIAL_DEMAND_MS), or keep a connection to it up.
   *  Made eager with no connection, it is dialed now. No effect on a peer we do not dial. */
  setOnDemand(peer: ProcessId, onDemand: boolean): void {
    const d = this.dialers.get(peer);
    if (d === undefined || d.lazy === onDemand) return;
    d.lazy = onDemand;
    if (!onDemand && !this.closed && d.conn === null && d.timer === null) this.dialNow(d);
  }

  /** See SEND_REDIAL_MIN_MS and DIAL_DEMAND_MS. */
  private redialOnDemand(to: ProcessId): void {
    const d = this.dialers.get(to);
    if (d === undefined || this.closed || d.conn !== null) return;
    const now = performance.now();
    d.lastDemandMs = now;
    if (now - d.lastDialMs < SEND_REDIAL_MIN_MS) {
      this.scheduleDial(d); // an idle on-demand dialer wanted again just after a failed dial
      return;
    }
    if (d.timer !== null) clearTimeout(d.timer);
    d.timer = null;
    d.delayMs = RECONNECT_INITIAL_MS;
    this.dialNow(d);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const d of this.dialers.values()) if (d.timer !== null) clearTimeout(d.timer);
    for (const c of this.conns) {
      if (c.unboundTimer !== null) clearTimeout(c.unboundTimer);
      c.ws.terminate();
    }
    for (const socket of this.pending) socket.destroy();
    this.conns.clear();
    this.unbound.clear();
    this.routes.clear();
    this.linked.clear();
    const server = this.server;
    const http = this.http;
    this.server = null;
    this.http = null;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
    if (http !== null) await new Promise<void>((resolve) => http.close(() => resolve()));
  }

  // ---- internals -------------------------------------------------------------------------

  private event(level: TransportEventLevel, event: string, fields: Record<string, unknown>): void {
    try {
      this.opts.onEvent?.(level, event, fields);
    } catch {
      // A logging failure must not take the transport down.
    }
  }

  /** Run an event handler's body; nothing may escape a socket event (issue 2 item 7). */
  private safely(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.counters.receiveErrors++;
      this.event('error', 'transport.handler-failed', { handler: what, error: String(e) });
    }
  }

  private sendOn(conn: Conn | null, frame: Uint8Array): void {
    if (conn === null || conn.ws.readyState !== WebSocket.OPEN) {
      this.counters.droppedNoRoute++;
      return;
    }
    if (conn.ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.counters.droppedBackpressure++;
      return;
    }
    try {
      conn.ws.send(frame, { binary: true }, (e) => {
        if (e !== undefined && e !== null) this.counters.socketErrors++;
      });
      this.counters.framesSent++;
    } catch {
      this.counters.socketErrors++;
    }
  }

  private usable(c: Conn, peer: ProcessId): boolean {
    return c.peer === peer && c.ws.readyState === WebSocket.OPEN && c.bound;
  }

  private routeTo(peer: ProcessId): Conn | null {
    const r = this.routes.get(peer);
    if (r !== undefined && this.usable(r, peer)) return r;
    for (const c of this.conns) {
      if (this.usable(c, peer)) {
        this.routes.set(peer, c);
        return c;
      }
    }
    this.routes.delete(peer);
    return null;
  }

  /** Report a link change to the shell when a peer gains its first or loses its last socket. */
  private refreshLink(peer: ProcessId): void {
    if (this.closed) return;
    const up = this.routeTo(peer) !== null;
    if (up === this.linked.has(peer)) return;
    if (up) this.linked.add(peer);
    else this.linked.delete(peer);
    try {
      this.opts.onLink?.(peer, up);
    } catch (e) {
      this.counters.receiveErrors++;
      this.event('error', 'transport.link-handler-failed', { peer, error: String(e) });
    }
  }

  private listen(ep: Endpoint): Promise<void> {
    return new Promise((resolve, reject) => {
      // Plain HTTP gets 426; every socket is watched from accept to upgrade (see the header).
      const http = createServer((_req, res) => {
        res.writeHead(426, { connection: 'close' }).end();
      });
      http.on('connection', (socket: Socket) => this.safely('accept', () => this.onSocket(socket)));
      http.on('upgrade', (_req: IncomingMessage, socket: Socket) => this.safely('upgrade', () => this.upgraded(socket)));
      http.on('clientError', (_e, socket: Socket) => socket.destroy());
      const server = new WebSocketServer({
        server: http, perMessageDeflate: false, maxPayload: MAX_FRAME_BYTES, clientTracking: false,
        verifyClient: (info, done) => {
          const named = CLUSTER_PATH.exec(info.req.url ?? '/')?.[1];
          if (this.opts.cluster === undefined || named === undefined || named === this.opts.cluster) return done(true);
          this.counters.connectionsRefused++;
          this.event('warn', 'transport.foreign-cluster', { named, remote: info.req.socket.remoteAddress ?? null });
          done(false, 409, 'another Trine cluster', { [CLUSTER_HEADER]: this.opts.cluster });
        },
      });
      const onError = (e: NodeJS.ErrnoException) => {
        server.close();
        http.close();
        if (e.code === 'EADDRINUSE') reject(new TransportError('ADDR_IN_USE', `port ${ep.port} on ${ep.host} is in use`, ep));
        else reject(new TransportError('LISTEN_FAILED', `cannot listen on ${ep.host}:${ep.port}: ${e.message}`, ep));
      };
      http.once('error', onError);
      http.once('listening', () => {
        http.off('error', onError);
        const serverError = (e: Error) => {
          this.counters.socketErrors++;
          this.event('error', 'transport.server-error', { error: e.message });
        };
        http.on('error', serverError);
        server.on('error', serverError);
        server.on('connection', (ws, req) => this.safely('connection', () => this.onInbound(ws, req)));
        this.server = server;
        this.http = http;
        resolve();
      });
      http.listen({ port: ep.port, host: ep.host, backlog: LISTEN_BACKLOG });
    });
  }

  /** A TCP connection accepted: it has HANDSHAKE_DEADLINE_MS to upgrade, within the caps. */
  private onSocket(socket: Socket): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    const source = socket.remoteAddress ?? '?';
    let fromSource = this.pendingBySource.get(source);
    if (fromSource === undefined) this.pendingBySource.set(source, (fromSource = new Set()));
    if (fromSource.size >= MAX_PENDING_PER_SOURCE) this.dropPending(fromSource);
    else if (this.pending.size >= MAX_PENDING_SOCKETS) {
      const busiest = [...this.pendingBySource.values()].reduce((a, b) => (b.size > a.size ? b : a));
      this.dropPending(busiest);
    }
    this.pending.add(socket);
    fromSource.add(socket);
    const timer = setTimeout(() => {
      if (!this.pending.has(socket)) return;
      this.counters.handshakeClosed++;
      socket.destroy();
    }, HANDSHAKE_DEADLINE_MS);
    timer.unref();
    socket.once('close', () => {
      clearTimeout(timer);
      this.settle(socket);
    });
  }

  /** `socket` upgraded (or closed): it no longer waits. */
  private upgraded(socket: Socket): void {
    this.settle(socket);
  }

  private settle(socket: Socket): void {
    if (!this.pending.delete(socket)) return;
    const source = socket.remoteAddress ?? '?';
    const fromSource = this.pendingBySource.get(source);
    fromSource?.delete(socket);
    if (fromSource?.size === 0) this.pendingBySource.delete(source);
  }

  /** Closes the oldest socket of `sockets` still waiting to upgrade. */
  private dropPending(sockets: Set<Socket>): void {
    const oldest = sockets.values().next().value;
    if (oldest === undefined) return;
    this.counters.handshakeClosed++;
    this.settle(oldest);
    oldest.destroy();
  }

  private onInbound(ws: WebSocket, req: IncomingMessage): void {
    if (this.closed) {
      ws.terminate();
      return;
    }
    // The oldest unbound connection makes room: nobody can hold these slots (see the header).
    if (this.unbound.size >= MAX_UNBOUND_CONNECTIONS) {
      const oldest = this.unbound.values().next().value as Conn;
      this.unbound.delete(oldest);
      this.counters.unboundEvicted++;
      oldest.ws.terminate();
    }
    req.socket.setNoDelay(true);
    this.counters.connectionsIn++;
    const conn: Conn = { ws, direction: 'in', peer: null, bound: false, nonce: randomBytes(BIND_NONCE_BYTES), failures: 0, unboundTimer: null, sinceMs: performance.now() };
    this.unbound.add(conn);
    conn.unboundTimer = setTimeout(() => {
      conn.unboundTimer = null;
      if (!conn.bound) {
        this.event('debug', 'transport.unbound-timeout', { remote: req.socket.remoteAddress ?? null });
        ws.terminate();
      }
    }, UNBOUND_TIMEOUT_MS);
    this.attach(conn, () => {
      if (!this.unbound.delete(conn) && conn.bound) this.inbound--;
    });
    ws.send(`${NONCE_PREFIX}${Buffer.from(conn.nonce as Uint8Array).toString('hex')}`, (e) => {
      if (e !== undefined && e !== null) this.counters.socketErrors++;
    });
  }

  private dialNow(d: Dialer): void {
    d.timer = null;
    if (this.closed) return;
    this.counters.dials++;
    d.lastDialMs = performance.now();
    let ws: WebSocket;
    try {
      ws = new WebSocket(d.url, { perMessageDeflate: false, maxPayload: MAX_FRAME_BYTES, handshakeTimeout: CONNECT_TIMEOUT_MS });
    } catch (e) {
      this.counters.socketErrors++;
      this.event('error', 'transport.dial-failed', { peer: d.peer, error: String(e) });
      this.scheduleDial(d);
      return;
    }
    ws.on('upgrade', (res) => this.safely('upgrade', () => res.socket.setNoDelay(true)));
    ws.on('unexpected-response', (_req, res) => this.safely('unexpected-response', () => {
      const said = res.headers[CLUSTER_HEADER];
      if (res.statusCode === 409 && typeof said === 'string' && CLUSTER_ID.test(said)) this.foreign.set(d.peer, said);
      ws.terminate();
    }));
    ws.on('open', () => this.safely('open-foreign', () => this.foreign.delete(d.peer)));
    const conn: Conn = { ws, direction: 'out', peer: d.peer, bound: false, nonce: null, failures: 0, unboundTimer: null, sinceMs: performance.now() };
    d.conn = conn;
    ws.on('open', () =>
      this.safely('open', () => {
        d.delayMs = RECONNECT_INITIAL_MS;
        // Usable once we answered the listener's nonce (onMessage); a listener that sends none
        // is not one of ours.
        conn.unboundTimer = setTimeout(() => {
          conn.unboundTimer = null;
          if (conn.bound) return;
          this.event('warn', 'transport.no-nonce', { peer: d.peer });
          ws.terminate();
        }, UNBOUND_TIMEOUT_MS);
      }));
    this.attach(conn, () => {
      if (d.conn === conn) d.conn = null;
      this.scheduleDial(d);
    });
  }

  private scheduleDial(d: Dialer): void {
    if (this.closed || d.timer !== null || d.conn !== null) return;
    // Not wanted lately: stays idle until the next frame for it (DIAL_DEMAND_MS).
    if (d.lazy && performance.now() - d.lastDemandMs > DIAL_DEMAND_MS) return;
    const spread = 1 + (Math.random() * 2 - 1) * RECONNECT_JITTER;
    const delay = Math.round(d.delayMs * spread);
    d.delayMs = Math.min(d.delayMs * 2, RECONNECT_MAX_MS);
    d.timer = setTimeout(() => this.dialNow(d), delay);
  }

  /** Event handlers shared by both directions. None of them may throw. */
  private attach(conn: Conn, onGone: () => void): void {
    this.conns.add(conn);
    const { ws } = conn;
    ws.on('message', (data, isBinary) => this.safely('message', () => this.onMessage(conn, data, isBinary)));
    ws.on('error', (e: Error & { code?: string }) => {
      if (e.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
        this.counters.oversized++;
        this.event('warn', 'transport.oversized', { peer: conn.peer, bound: conn.bound });
      } else {
        this.counters.socketErrors++;
        this.event('debug', 'transport.socket-error', { peer: conn.peer, code: e.code ?? null, error: e.message });
      }
    });
    ws.on('close', () =>
      this.safely('close', () => {
        if (conn.unboundTimer !== null) clearTimeout(conn.unboundTimer);
        if (!this.conns.delete(conn)) return;
        onGone();
        if (conn.peer !== null) {
          if (this.routes.get(conn.peer) === conn) this.routes.delete(conn.peer);
          if (conn.bound || conn.direction === 'out') this.event('debug', 'transport.closed', { peer: conn.peer, direction: conn.direction });
          this.refreshLink(conn.peer);
        }
      }));
  }

  private onMessage(conn: Conn, data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    if (!isBinary) {
      if (conn.direction === 'out' && !conn.bound && conn.nonce === null) this.prove(conn, Buffer.from(toBytes(data)).toString('latin1'));
      else {
        this.counters.droppedText++;
        this.failUnbound(conn);
      }
      return;
    }
    const bytes = toBytes(data);
    this.counters.framesReceived++;
    if (!conn.bound) {
      if (conn.direction === 'in') this.checkProof(conn, bytes);
      else this.checkListener(conn, bytes);
      return;
    }
    // A bound connection carries only its peer's frames.
    const peer = conn.peer as ProcessId;
    const claimed = peekSender(bytes);
    if (claimed !== null && claimed !== peer) {
      this.counters.droppedSenderMismatch++;
      this.event('warn', 'transport.sender-mismatch', { peer, claimed });
      return;
    }
    this.current = conn;
    try {
      this.opts.receive(bytes, peer);
    } finally {
      this.current = null;
    }
  }

  /** Dialer: answer the listener's nonce with our proof and a challenge of ours. */
  private prove(conn: Conn, text: string): void {
    const hex = text.startsWith(NONCE_PREFIX) ? text.slice(NONCE_PREFIX.length) : '';
    const peer = conn.peer as ProcessId;
    if (!/^[0-9a-f]+$/.test(hex) || hex.length !== 2 * BIND_NONCE_BYTES) {
      this.counters.droppedText++;
      this.event('warn', 'transport.bad-nonce', { peer });
      conn.ws.terminate();
      return;
    }
    conn.nonce = randomBytes(BIND_NONCE_BYTES);
    this.sendOn(conn, bindProof(this.opts.auth.encode, peer, Buffer.from(hex, 'hex'), conn.nonce));
  }

  /** Dialer: the listener's answer to our challenge makes the connection usable. Anything else
   *  means the listener is not the peer we dialed (a stranger on its port, PROTOCOL §10.6):
   *  hang up, having sent it nothing but our proof, which binds only at the real peer. */
  private checkListener(conn: Conn, bytes: Uint8Array): void {
    const peer = conn.peer as ProcessId;
    const r = conn.nonce === null ? null : openBindProof(bytes, conn.nonce, this.opts.auth.decode);
    if (r === null || !r.ok || r.value.from !== peer) {
      this.counters.droppedBeforeProof++;
      const why = r === null ? 'a frame before its nonce' : r.ok ? `a proof from ${r.value.from}` : `${r.code}: ${r.detail}`;
      this.event('warn', 'transport.listener-unproven', { peer, why });
      conn.ws.terminate();
      return;
    }
    this.markBound(conn, peer, 'transport.dialed');
  }

  /** Listener: bind an unbound connection to the dialer its first frame proves for its nonce,
   *  and answer the dialer's challenge. */
  private checkProof(conn: Conn, bytes: Uint8Array): void {
    const r = openBindProof(bytes, conn.nonce as Uint8Array, this.opts.auth.decode);
    if (r.ok && r.value.challenge.length === BIND_NONCE_BYTES) {
      this.bind(conn, r.value.from, bindProof(this.opts.auth.encode, r.value.from, r.value.challenge, new Uint8Array()));
      return;
    }
    this.event('debug', 'transport.proof-refused', r.ok ? { code: 'UNEXPECTED', detail: `${r.value.from}: no challenge` } : { code: r.code, detail: r.detail });
    this.failUnbound(conn);
  }

  /** Bind `conn` to `peer` and send it `answer` (our proof), before anything else can go on it;
   *  or refuse and close it. */
  private bind(conn: Conn, peer: ProcessId, answer: Uint8Array): void {
    this.unbound.delete(conn);
    // Members' capacity: a peer's oldest connection makes room for its newest; past the total
    // (a few dozen processes never reach it) the newcomer is refused.
    const mine = [...this.conns].filter((c) => c.direction === 'in' && c.bound && c.peer === peer);
    if (mine.length >= MAX_CONNECTIONS_PER_PEER) {
      (mine.sort((a, b) => a.sinceMs - b.sinceMs)[0] as Conn).ws.close(1008, 'a newer connection of the same peer');
    } else if (this.inbound >= MAX_INBOUND_CONNECTIONS) {
      this.counters.connectionsRefused++;
      conn.ws.close(1013, 'too many connections');
      return;
    }
    this.inbound++;
    conn.peer = peer;
    this.sendOn(conn, answer);
    this.markBound(conn, peer, 'transport.bound');
  }

  /** `conn` is proved, either way: from now on it carries `peer`'s frames and routes to it. */
  private markBound(conn: Conn, peer: ProcessId, event: string): void {
    conn.bound = true;
    this.counters.bindings++;
    if (conn.unboundTimer !== null) clearTimeout(conn.unboundTimer);
    conn.unboundTimer = null;
    this.event('debug', event, { peer });
    this.routes.set(peer, conn);
    this.refreshLink(peer);
  }

  private failUnbound(conn: Conn): void {
    if (conn.bound || conn.direction === 'out') return;
    this.counters.unboundFailures++;
    if (++conn.failures >= MAX_UNBOUND_FAILURES) {
      this.event('warn', 'transport.unbound-closed', { failures: conn.failures });
      conn.ws.terminate();
    }
  }
}
