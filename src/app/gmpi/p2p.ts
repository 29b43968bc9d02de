// G-MPI point-to-point messaging for one task process (spec §5; the PTP channels of spec §7
// item 3). This file owns the TCP mesh between the task's processes, keyed by VPID (the
// task-wide process id the manager assigns; a new process always gets a higher VPID than every
// existing one), its dynamic membership (spec §5.5: dead processes leave, spawned replacements
// join), receive-side backpressure per connection (pausing a peer whose share of the
// unexpected queue is full), the resumable abort the alert flag uses (spec §5.2) and
// connection-loss reporting, which the library turns into G_MPI_SIG_LOCAL_CONNECTION (spec
// §5.4 Table 4.3). MPI message matching on (source VPID, tag, communicator id) and the
// unexpected-message queue are matching.ts's (no sockets); limits, errors and public types are
// p2p-types.ts's. Ranks and communicators are comm.ts's; payload encoding is payload.ts's.
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
import { createServer, connect as dial, type Server, type Socket } from 'node:net';
import { bytesEqual } from '../../base/bytes.ts';
import { LOOPBACK_HOST } from '../../core/constants.ts';
import { assert } from '../../base/result.ts';
import {
  ANY_SOURCE, ANY_TAG, arrive, cancelRecvs, createMatching, discardComm, dropQueued, type Matching, type Message, postRecv, queuedFrom, takeQueued,
} from './matching.ts';
import {
  BYE_LINGER_MS, COMM_WORLD, DIAL_RETRY_LIMIT, type LostReason, MAX_LIB_TAG, MAX_PENDING_RECVS, P2PError, type P2PLogEvent, type P2POptions, type P2PStats, type PeerAddress, UNAUTHENTICATED_TIMEOUT_MS,
} from './p2p-types.ts';
import {
  acceptorHello, admitHello, admitStranger, challenge, checkHello, createStrangers, diallerStep, type HandshakeSelf, leaveStrangers, type Strangers,
} from './handshake.ts';
import { isTaskKey, TASK_KEY_BYTES } from './hello-auth.ts';
import { checkP2POptions, checkPeerList, commError, endedPeerError, finishedError, isU32 } from './p2p-checks.ts';
import {
  type Conn, createConn, createConnectWaits, type PendingRecv, type Peer, receiveFrame, redialDelayMs, rejectAllWaits, rejectWaitsNaming, settleConnected, waitForConnected,
} from './p2p-conn.ts';
import { encodeFrame, MAX_TAG, MAX_U32, MIN_LIB_TAG, type GmpiFrame, type HelloFrame } from './wire.ts';

export class P2P {
  readonly taskId: string;
  readonly self: number;
  readonly maxMessageBytes: number;
  readonly maxUnexpectedBytes: number;
  private readonly server: Server;
  private readonly onLost: ((id: number, reason: LostReason) => void) | undefined;
  private readonly log: ((event: P2PLogEvent) => void) | undefined;
  private readonly peers = new Map<number, Peer>();
  /** VPIDs taken out by removePeer: never reused (spec §7 item 2), so a later hello is stale. */
  private readonly removed = new Set<number>();
  /** Accepted connections whose hello is not verified yet (handshake.ts). */
  private readonly strangers: Strangers<Conn> = createStrangers();
  /** Dial retries waiting for their backoff (cleared by close()). */
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private readonly held = new Map<number, Conn>();
  private taskKey: Uint8Array | null = null;
  private readonly authTimeoutMs: number;
  /** Posted receives, unexpected messages, discarded communicators (matching.ts). */
  private readonly matching: Matching<PendingRecv> = createMatching();
  private readonly connectWaits = createConnectWaits();
  private alert: { reason: unknown } | null = null;
  private closed = false;

  private constructor(opts: P2POptions, server: Server, maxMessageBytes: number, maxUnexpectedBytes: number) {
    this.taskId = opts.taskId;
    this.self = opts.self;
    this.maxMessageBytes = maxMessageBytes;
    this.maxUnexpectedBytes = maxUnexpectedBytes;
    this.server = server;
    this.onLost = opts.onConnectionLost;
    this.log = opts.log;
    this.authTimeoutMs = opts.authTimeoutMs ?? UNAUTHENTICATED_TIMEOUT_MS;
    if (opts.taskKey !== undefined) this.setTaskKey(opts.taskKey);
    server.on('connection', (socket) => this.adopt(socket, null));
  }

  /** Listen on an ephemeral port of listenHost; `port` is what the mapping message advertises. */
  static async open(opts: P2POptions): Promise<P2P> {
    const { maxMessageBytes, maxUnexpectedBytes } = checkP2POptions(opts);
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, opts.listenHost ?? LOOPBACK_HOST, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new P2P(opts, server, maxMessageBytes, maxUnexpectedBytes);
  }

  get port(): number {
    const a = this.server.address();
    assert(a !== null && typeof a === 'object', 'server not listening');
    return a.port;
  }

  /** The task key (PROTOCOL §9.5), once the agent has handed it over: hellos that arrived
   *  before it are checked now. Set once; the same key again is a no-op. */
  setTaskKey(key: Uint8Array): void {
    if (!isTaskKey(key)) throw new P2PError('BAD_ARGUMENT', `a task key is ${TASK_KEY_BYTES} bytes`);
    if (this.taskKey !== null) {
      if (!bytesEqual(this.taskKey, key)) throw new P2PError('BAD_ARGUMENT', 'the task key is already set to another key');
      return;
    }
    this.taskKey = new Uint8Array(key);
    for (const conn of [...this.strangers.conns]) {
      const hello = conn.awaitingKey;
      if (hello === null || conn.dead) continue;
      conn.awaitingKey = null;
      this.onHello(conn, hello);
      this.pump(conn);
    }
  }

  // ---- membership ------------------------------------------------------------------------------

  /** Add the listed peers (this process's own entry is ignored): dial each lower VPID, expect
   *  each higher one. Resolves when every listed peer is connected. Peers already known are
   *  not dialled again, so init and later calls may overlap. */
  connect(peers: readonly PeerAddress[]): Promise<void> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    if (this.taskKey === null) return Promise.reject(new P2PError('BAD_ARGUMENT', 'no task key yet: setTaskKey() before connect() (PROTOCOL §9.5)'));
    const bad = checkPeerList(peers, this.removed);
    if (bad !== null) return Promise.reject(bad);
    const ids: number[] = [];
    for (const p of peers) {
      if (p.id === this.self) continue;
      ids.push(p.id);
      if (this.peers.has(p.id)) continue;
      if (p.id > this.self) {
        this.addExpected(p.id);
        continue;
      }
      this.peers.set(p.id, { id: p.id, state: 'expected', conn: null });
      this.dialPeer(p.id, p.host, p.port, 1);
    }
    return this.whenConnected(ids);
  }

  /** Expect hellos from these higher VPIDs (a survivor told of spawned members by the
   *  manager's broadcast, spec §5.5). A hello that already arrived is attributed now. Local
   *  state only, so it works while aborted. */
  expect(ids: readonly number[]): void {
    if (this.closed) throw new P2PError('CLOSED', 'P2P closed');
    for (const id of ids) {
      if (!isU32(id)) throw new P2PError('UNKNOWN_PEER', `id ${id} is not a u32 VPID`);
      if (id <= this.self) throw new P2PError('BAD_ARGUMENT', `id ${id} is not above ours (${this.self}): lower ids are dialled with connect()`);
      if (this.removed.has(id)) throw new P2PError('PEER_REMOVED', `peer ${id} was removed`);
    }
    for (const id of ids) if (!this.peers.has(id)) this.addExpected(id);
  }

  /** Connect again to these peers whose connection was lost though they live on (recovery keeps
   *  every member the manager did not announce dead, spec §5.5): each is expected anew; we dial
   *  the lower VPIDs again, the higher ones dial us, and a hello of theirs that came first (held
   *  meanwhile) is attributed now. The new connection's sequences start from 0; whatever was in
   *  flight on the broken one is gone, as the old communicator's messages are. Peers not lost
   *  are left alone. */
  revive(peers: readonly PeerAddress[]): void {
    if (this.closed) throw new P2PError('CLOSED', 'P2P closed');
    for (const p of peers) {
      const peer = this.peers.get(p.id);
      if (peer === undefined || peer.state !== 'lost') continue;
      if (p.id < this.self) {
        peer.state = 'expected';
        this.dialPeer(p.id, p.host, p.port, 1);
      } else {
        this.peers.delete(p.id);
        this.addExpected(p.id);
      }
    }
  }

  /** Resolves when every listed peer is connected; rejects if one is lost or removed, or on
   *  abort/close (connection set-up blocks like any MPI call, so the alert flag unblocks it). */
  whenConnected(ids: readonly number[]): Promise<void> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    const wanted: number[] = [];
    for (const id of ids) {
      if (id === this.self) continue;
      const peer = this.peers.get(id);
      if (peer === undefined) return Promise.reject(this.unknown(id));
      const ended = endedPeerError(peer.state, id);
      if (ended !== null) return Promise.reject(ended);
      if (peer.state === 'expected') wanted.push(id);
    }
    if (wanted.length === 0) return Promise.resolve();
    return waitForConnected(this.connectWaits, wanted);
  }

  /** Take `id` out of the task (spec §5.5 GSIG_NTF_DIED): close its connection, reject the
   *  receives and sends that name it, drop its queued messages and refuse its hello for good. */
  removePeer(id: number): void {
    if (this.closed) throw new P2PError('CLOSED', 'P2P closed');
    if (!isU32(id)) throw new P2PError('UNKNOWN_PEER', `id ${id} is not a u32 VPID`);
    if (id === this.self) throw new P2PError('BAD_ARGUMENT', 'cannot remove this process');
    this.removed.add(id);
    const removedError = () => new P2PError('PEER_REMOVED', `peer ${id} was removed`);
    const heldConn = this.held.get(id);
    if (heldConn !== undefined) this.close1(heldConn, { code: 'REMOVED', detail: `peer ${id} removed` }, removedError);
    const peer = this.peers.get(id);
    this.peers.delete(id);
    if (peer?.conn) this.close1(peer.conn, { code: 'REMOVED', detail: `peer ${id} removed` }, removedError);
    for (const r of cancelRecvs(this.matching, (r) => r.source === id)) r.reject(removedError());
    rejectWaitsNaming(this.connectWaits, id, removedError);
    dropQueued(this.matching, (m) => m.source === id);
    this.resumeReading();
  }

  /** Forget communicator `comm` (replaced by recovery, spec §5.5): drop its queued messages,
   *  reject receives posted on it with BAD_COMM, and silently discard later arrivals for it. */
  discardComm(comm: number): void {
    if (!isU32(comm)) throw new P2PError('BAD_COMM', `comm ${comm}`);
    for (const r of discardComm(this.matching, comm)) r.reject(new P2PError('BAD_COMM', `communicator ${comm} was discarded`));
    this.resumeReading();
  }

  isDiscarded(comm: number): boolean {
    return this.matching.discarded.has(comm);
  }

  /** Known peer VPIDs and their state (self excluded). */
  members(): { id: number; state: Peer['state'] }[] {
    return [...this.peers.values()].map((p) => ({ id: p.id, state: p.state })).sort((a, b) => a.id - b.id);
  }

  // ---- messages --------------------------------------------------------------------------------

  /** Send `data` to VPID `dest`. Resolves once the bytes are in the socket within its
   *  high-water mark (after 'drain' otherwise), so awaiting sends is flow control. The payload
   *  is copied at once: the caller may reuse `data` immediately. */
  send(dest: number, tag: number, data: Uint8Array, comm: number = COMM_WORLD, structured = false): Promise<void> {
    if (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG) return Promise.reject(new P2PError('BAD_TAG', `tag ${tag} not in 0..${MAX_TAG}`));
    return this.post(dest, tag, data, comm, structured);
  }

  /** MPI receive: the earliest-arrived matching message, else wait for one. */
  recv(source: number, tag: number, comm: number = COMM_WORLD): Promise<Message> {
    if (tag !== ANY_TAG && (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG)) {
      return Promise.reject(new P2PError('BAD_TAG', `tag ${tag} not in 0..${MAX_TAG} nor ANY_TAG`));
    }
    return this.take(source, tag, comm);
  }

  /** send() for the library's own traffic (collectives): tags in [MIN_LIB_TAG, MAX_LIB_TAG],
   *  which no application send can use and no application receive can match. */
  sendLib(dest: number, tag: number, data: Uint8Array, comm: number, structured = false): Promise<void> {
    if (!isLibTag(tag)) return Promise.reject(new P2PError('BAD_TAG', `library tag ${tag} not in ${MIN_LIB_TAG}..${MAX_LIB_TAG}`));
    return this.post(dest, tag, data, comm, structured);
  }

  /** recv() for the library's own traffic; the tag is exact (no wildcard). */
  recvLib(source: number, tag: number, comm: number): Promise<Message> {
    if (!isLibTag(tag)) return Promise.reject(new P2PError('BAD_TAG', `library tag ${tag} not in ${MIN_LIB_TAG}..${MAX_LIB_TAG}`));
    return this.take(source, tag, comm);
  }

  // ---- alert flag and lifetime -----------------------------------------------------------------

  /** Raise the alert flag (spec §5.2): settle every pending send, recv, connection wait (and so
   *  every collective built on them) with ABORTED carrying `reason`, and fail new calls at once
   *  until resume(). Sockets stay open and messages keep arriving into the unexpected queue.
   *  While raised, a second abort keeps the first reason. */
  abort(reason: unknown): void {
    if (this.alert !== null || this.closed) return;
    this.alert = { reason };
    this.rejectEverything(() => this.abortError());
  }

  /** Clear the alert flag: calls work again (G_MPI_Alert_clear, spec §5.2). */
  resume(): void {
    this.alert = null;
  }

  isAborted(): boolean {
    return this.alert !== null;
  }

  /** The error a communication call would fail with now (closed, or the alert flag raised),
   *  else null: how layers above refuse a call before doing anything. */
  callError(): P2PError | null {
    return this.gate();
  }

  /** End every socket and the server, telling each connected peer with a bye frame that this
   *  is an ending, not a lost connection (no LOCAL_CONNECTION there). Like MPI_Finalize, callers
   *  complete their communication first: a connection still open BYE_LINGER_MS after its bye
   *  (a paused or hung peer) is destroyed, and bytes not yet sent are discarded. With
   *  `bye: false` the connections just close, as a crashed process's do: peers see them lost. */
  async close(options: { readonly bye?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.rejectEverything(() => new P2PError('CLOSED', 'P2P closed'));
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    for (const c of this.conns()) {
      c.dead = true;
      if (c.authTimer !== null) clearTimeout(c.authTimer);
      if (c.id === null || c.socket.destroyed || options.bye === false) {
        c.socket.destroy();
        continue;
      }
      c.socket.end(encodeFrame({ type: 'bye', id: this.self, seq: c.nextSendSeq }));
      setTimeout(() => c.socket.destroy(), BYE_LINGER_MS).unref();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  stats(): P2PStats {
    const conns = this.conns();
    return {
      unexpectedMessages: this.matching.unexpected.length,
      unexpectedBytes: this.matching.unexpectedBytes,
      pendingRecvs: this.matching.pendingRecvs.length,
      pausedConnections: conns.filter((c) => c.paused && c.heldId === null && c.awaitingKey === null && !c.dead).length,
      heldConnections: this.held.size,
      unauthenticatedConnections: this.strangers.conns.size,
      discardedMessages: this.matching.discardedMessages,
    };
  }

  // ---- internals -------------------------------------------------------------------------------

  private conns(): Conn[] {
    const out = [...this.strangers.conns, ...this.held.values()];
    for (const p of this.peers.values()) if (p.conn !== null) out.push(p.conn);
    return out;
  }

  private abortError(): P2PError {
    return new P2PError('ABORTED', `aborted: ${String(this.alert?.reason)}`, this.alert?.reason);
  }

  private gate(): P2PError | null {
    if (this.closed) return new P2PError('CLOSED', 'P2P closed');
    if (this.alert !== null) return this.abortError();
    return null;
  }

  private unknown(id: number): P2PError {
    if (this.removed.has(id)) return new P2PError('PEER_REMOVED', `peer ${id} was removed`);
    return new P2PError('UNKNOWN_PEER', `${id} is not a known peer`);
  }

  private rejectEverything(error: () => P2PError): void {
    for (const r of cancelRecvs(this.matching)) r.reject(error());
    for (const p of this.peers.values()) for (const w of p.conn?.drainWaiters.splice(0) ?? []) w.reject(error());
    rejectAllWaits(this.connectWaits, error);
  }

  private post(dest: number, tag: number, data: Uint8Array, comm: number, structured: boolean): Promise<void> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    const badComm = commError(comm, this.matching.discarded);
    if (badComm !== null) return Promise.reject(badComm);
    if (!(data instanceof Uint8Array)) return Promise.reject(new P2PError('BAD_ARGUMENT', 'data is not a Uint8Array'));
    if (data.length > this.maxMessageBytes) {
      return Promise.reject(new P2PError('TOO_LARGE', `${data.length} bytes > maxMessageBytes ${this.maxMessageBytes}`));
    }
    // Self-send is queued at once, whatever the queue holds: the limit exists to stop reading
    // sockets, and blocking here would deadlock the common send-then-recv-to-self pattern.
    if (dest === this.self) {
      this.arrive({ source: this.self, tag, comm, structured, data: data.slice() });
      return Promise.resolve();
    }
    const peer = this.peers.get(dest);
    if (peer === undefined) return Promise.reject(this.unknown(dest));
    const ended = endedPeerError(peer.state, dest);
    if (ended !== null) return Promise.reject(ended);
    const conn = peer.conn;
    if (peer.state !== 'connected' || conn === null) return Promise.reject(new P2PError('NOT_CONNECTED', `${dest} not connected yet`));
    const seq = conn.nextSendSeq;
    conn.nextSendSeq = seq === MAX_U32 ? 0 : seq + 1;
    const below = conn.socket.write(encodeFrame({ type: tag < 0 ? 'lib' : 'data', id: this.self, comm, tag, seq, structured, payload: data }));
    if (below) return Promise.resolve();
    return new Promise<void>((resolve, reject) => conn.drainWaiters.push({ resolve, reject }));
  }

  private take(source: number, tag: number, comm: number): Promise<Message> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    if (source !== ANY_SOURCE && source !== this.self && !this.peers.has(source)) return Promise.reject(this.unknown(source));
    const badComm = commError(comm, this.matching.discarded);
    if (badComm !== null) return Promise.reject(badComm);
    const m = takeQueued(this.matching, { source, tag, comm });
    if (m !== null) {
      this.resumeReading();
      return Promise.resolve(m);
    }
    // Messages that already arrived were delivered above; a lost source sends no more.
    const ended = source === ANY_SOURCE ? null : endedPeerError(this.peers.get(source)?.state, source);
    if (ended !== null) return Promise.reject(ended);
    if (this.matching.pendingRecvs.length >= MAX_PENDING_RECVS) return Promise.reject(new P2PError('LIMIT', `${MAX_PENDING_RECVS} receives already pending`));
    return new Promise<Message>((resolve, reject) => postRecv(this.matching, { source, tag, comm, resolve, reject }));
  }

  private addExpected(id: number): void {
    this.peers.set(id, { id, state: 'expected', conn: null });
    const heldConn = this.held.get(id);
    if (heldConn === undefined) return;
    this.held.delete(id);
    this.attribute(heldConn, id);
    this.pump(heldConn);
  }

  /** Dial peer `id` (attempt n: DIAL_RETRY_LIMIT). */
  private dialPeer(id: number, host: string, port: number, attempt: number): void {
    const socket = dial({ host, port });
    this.adopt(socket, id, { host, port, attempt, connected: false });
  }

  private adopt(socket: Socket, dialledId: number | null, dialInfo: Conn['dial'] = null): void {
    const conn = createConn(socket, this.maxMessageBytes, dialledId, dialInfo);
    if (this.closed) {
      socket.destroy();
      return;
    }
    if (dialledId === null) {
      // A stranger until its hello verifies: bounded in number, per address and in time, and
      // refused before we spend a challenge on it (see the header).
      const refused = admitStranger(this.strangers, conn, conn.address);
      if (refused !== null) return this.fail(conn, refused);
      conn.authTimer = setTimeout(() => this.fail(conn, { code: 'AUTH_TIMEOUT', detail: `no authenticated hello within ${this.authTimeoutMs} ms` }), this.authTimeoutMs);
      conn.authTimer.unref();
      socket.write(encodeFrame(challenge(this.self, conn)));
    } else {
      const peer = this.peers.get(dialledId);
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
      this.pump(conn);
    });
    socket.on('drain', () => {
      for (const w of conn.drainWaiters.splice(0)) w.resolve();
    });
    socket.on('error', (e) => this.lostSocket(conn, { code: 'SOCKET_ERROR', detail: e.message }));
    socket.on('close', () => this.lostSocket(conn, { code: 'SOCKET_CLOSED', detail: 'peer closed the connection' }));
  }

  /** The socket closed or failed. A dialled connection that TCP connected but that closed
   *  before its challenge was refused by a full acceptor (MAX_UNAUTHENTICATED_*): dial again
   *  after a backoff. Anything else is a failure (fail). */
  private lostSocket(conn: Conn, reason: LostReason): void {
    const d = conn.dial;
    const id = conn.dialledId;
    const peer = id === null ? undefined : this.peers.get(id);
    const delayMs = this.closed || peer?.conn !== conn ? null : redialDelayMs(conn);
    if (delayMs === null || d === null || id === null || peer === undefined) return this.fail(conn, reason);
    conn.dead = true;
    conn.socket.destroy();
    peer.conn = null;
    this.log?.({ type: 'connection.closed', id, reason: { code: reason.code, detail: `${reason.detail} before the challenge: dial again in ${delayMs} ms (attempt ${d.attempt + 1} of ${DIAL_RETRY_LIMIT})` } });
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      const now = this.peers.get(id);
      if (this.closed || now === undefined || now.state !== 'expected' || now.conn !== null) return;
      this.dialPeer(id, d.host, d.port, d.attempt + 1);
    }, delayMs);
    this.retryTimers.add(timer);
  }

  /** An accepted connection is no longer a stranger (authenticated or closed). */
  private leaveUnauthenticated(conn: Conn): void {
    if (conn.authTimer !== null) clearTimeout(conn.authTimer);
    conn.authTimer = null;
    leaveStrangers(this.strangers, conn, conn.address);
  }

  /** Pull decoded frames while the peer's share of the unexpected queue has room; pause the
   *  socket when it has not (receive-side backpressure: TCP flow control then stalls that
   *  peer's writes, and only that peer's), or while its hello is held. The queue holds at most
   *  maxUnexpectedBytes plus one message per peer. As with any bounded MPI buffering, a
   *  program whose next receive needs a message stuck behind a full queue of others from the
   *  same peer that it never receives deadlocks ("unsafe" in MPI terms); abort() still
   *  unblocks it. */
  private pump(conn: Conn): void {
    while (!conn.dead) {
      if (conn.heldId !== null || conn.awaitingKey !== null || queuedFrom(this.matching, conn.id) >= this.maxUnexpectedBytes) {
        if (!conn.paused) {
          conn.paused = true;
          conn.socket.pause();
        }
        return;
      }
      const r = conn.decoder.next();
      if (!r.ok) {
        this.fail(conn, { code: r.code, detail: r.detail });
        return;
      }
      if (r.value === null) break;
      this.onFrame(conn, r.value);
    }
    if (conn.paused && !conn.dead) {
      conn.paused = false;
      conn.socket.resume();
    }
  }

  private resumeReading(): void {
    for (const c of this.conns()) if (c.paused && c.heldId === null && c.awaitingKey === null && queuedFrom(this.matching, c.id) < this.maxUnexpectedBytes) this.pump(c);
  }

  private onFrame(conn: Conn, frame: GmpiFrame): void {
    if (conn.id === null) {
      if (conn.dialledId !== null) return this.onDiallerHandshake(conn, conn.dialledId, frame);
      if (frame.type === 'challenge') return this.fail(conn, { code: 'UNEXPECTED_CHALLENGE', detail: 'a challenge to the acceptor' });
      if (frame.type !== 'hello') return this.fail(conn, { code: 'HELLO_EXPECTED', detail: 'message before hello' });
      return this.onHello(conn, frame);
    }
    const step = receiveFrame(conn, conn.id, frame);
    if (step.kind === 'fail') return this.fail(conn, step.reason);
    if (step.kind === 'bye') return this.finished(conn, conn.id);
    this.arrive(step.message);
  }

  /** The dialler's side of the handshake (PROTOCOL §9.5, handshake.ts). */
  private onDiallerHandshake(conn: Conn, dialled: number, frame: GmpiFrame): void {
    const step = diallerStep(this.handshakeSelf(), conn, dialled, frame);
    if (step.kind === 'fail') return this.fail(conn, step.reason);
    if (step.kind === 'send') conn.socket.write(encodeFrame(step.frame));
    else this.attribute(conn, dialled);
  }

  private handshakeSelf(): HandshakeSelf {
    const key = this.taskKey;
    assert(key !== null, 'a handshake without a task key'); // connect() refuses without one; hellos wait for it
    return { taskId: this.taskId, self: this.self, key };
  }

  /** The acceptor's side: the dialler's hello. Its MAC is checked first (handshake.ts), so
  *  nothing a stranger says is acted on; then the rules of who may dial us. Without our task
  *  key yet (the agent has not handed it over), the hello waits for it, its socket paused and
  *  its AUTH_TIMEOUT running. */
  private onHello(conn: Conn, hello: HelloFrame): void {
    const { id, taskId } = hello;
    if (taskId !== this.taskId) return this.fail(conn, { code: 'WRONG_TASK', detail: `hello from task ${taskId}` });
    if (this.taskKey === null) {
      conn.awaitingKey = hello;
      return;
    }
    const check = checkHello(this.handshakeSelf(), conn, hello);
    if (check.kind === 'fail') return this.fail(conn, check.reason);
    this.leaveUnauthenticated(conn);
    const peer = this.peers.get(id);
    const admission = admitHello({
      id, self: this.self, removed: this.removed.has(id), peer: peer === undefined ? undefined : { state: peer.state, hasConn: peer.conn !== null },
      alreadyHeld: this.held.has(id), heldCount: this.held.size,
    });
    if (admission.kind === 'fail') return this.fail(conn, admission.reason);
    if (admission.kind === 'attribute') return this.attribute(conn, id);
    conn.heldId = id; // pump() pauses the socket until expect(id) attributes it
    this.held.set(id, conn);
  }

  private attribute(conn: Conn, id: number): void {
    const peer = this.peers.get(id);
    assert(peer !== undefined && peer.state === 'expected', `attributing ${id}, which is not expected`);
    conn.id = id;
    conn.heldId = null;
    peer.conn = conn;
    peer.state = 'connected';
    // Our reply: proves to the dialler that it reached a process of the task.
    if (conn.dialledId === null) conn.socket.write(encodeFrame(acceptorHello(this.handshakeSelf(), conn, id)));
    settleConnected(this.connectWaits, (id) => this.peers.get(id)?.state === 'connected');
  }

  private arrive(m: Message): void {
    const a = arrive(this.matching, m);
    if (a.kind === 'delivered') a.recv.resolve(m);
  }

  /** The peer said bye (it finalized): keep what it sent, which receives may still take; end
   *  our side; settle the sends, receives and connection waits that need it with PEER_FINISHED.
   *  An ending, so no connectionLost. */
  private finished(conn: Conn, id: number): void {
    conn.dead = true;
    conn.socket.end();
    this.log?.({ type: 'connection.closed', id, reason: { code: 'FINISHED', detail: `peer ${id} finalized` } });
    for (const w of conn.drainWaiters.splice(0)) w.reject(finishedError(id));
    const peer = this.peers.get(id);
    if (peer === undefined || peer.conn !== conn) return;
    peer.state = 'finished';
    peer.conn = null;
    for (const r of cancelRecvs(this.matching, (r) => r.source === id)) r.reject(finishedError(id));
    rejectWaitsNaming(this.connectWaits, id, () => finishedError(id));
  }

  /** Close one connection deliberately (removePeer), rejecting its waiting sends. */
  private close1(conn: Conn, reason: LostReason, error: () => P2PError): void {
    if (conn.dead) return;
    conn.dead = true;
    conn.socket.destroy();
    this.leaveUnauthenticated(conn);
    if (conn.heldId !== null && this.held.get(conn.heldId) === conn) this.held.delete(conn.heldId);
    for (const w of conn.drainWaiters.splice(0)) w.reject(error());
    this.log?.({ type: 'connection.closed', id: conn.id ?? conn.dialledId ?? conn.heldId, reason });
  }

  /** Close a connection for `reason`; if it belongs to a peer, that peer is lost for good
   *  (until removePeer, spec §5.5, or revive): raise connectionLost once, reject its sends, the receives
   *  and connection waits that name it. */
  private fail(conn: Conn, reason: LostReason): void {
    if (conn.dead) return;
    conn.dead = true;
    conn.socket.destroy();
    this.leaveUnauthenticated(conn);
    if (conn.heldId !== null && this.held.get(conn.heldId) === conn) this.held.delete(conn.heldId);
    const id = conn.id ?? conn.dialledId;
    if (this.closed) return;
    this.log?.({ type: 'connection.closed', id, reason });
    for (const w of conn.drainWaiters.splice(0)) w.reject(this.gate() ?? new P2PError('PEER_LOST', `${id}: ${reason.code}`));
    if (id === null) return;
    const peer = this.peers.get(id);
    if (peer === undefined || peer.conn !== conn) return; // a stray or superseded connection
    peer.state = 'lost';
    peer.conn = null;
    const lost = () => new P2PError('PEER_LOST', `connection to ${id} lost: ${reason.code} ${reason.detail}`);
    for (const r of cancelRecvs(this.matching, (r) => r.source === id)) r.reject(lost());
    rejectWaitsNaming(this.connectWaits, id, lost);
    this.onLost?.(id, reason);
  }
}

const isLibTag = (tag: number): boolean => Number.isInteger(tag) && tag >= MIN_LIB_TAG && tag <= MAX_LIB_TAG;
