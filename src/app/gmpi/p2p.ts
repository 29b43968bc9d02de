// G-MPI point-to-point messaging for one task process (spec §5; the PTP channels of spec §7
// item 3). Its class P2P is the TCP mesh between the task's processes, keyed by VPID (the
// task-wide process id the manager assigns; a new process always gets a higher VPID than every
// existing one), its dynamic membership (spec §5.5: dead processes leave, spawned replacements
// join), receive-side backpressure per connection (pausing a peer whose share of the
// unexpected queue is full), the resumable abort the alert flag uses (spec §5.2) and
// connection-loss reporting, which the library turns into G_MPI_SIG_LOCAL_CONNECTION (spec
// §5.4 Table 4.3). MPI message matching on (source VPID, tag, communicator id) and the
// unexpected-message queue are matching.ts's (no sockets); limits, errors and public types are
// p2p-types.ts's. Ranks and communicators are comm.ts's; payload encoding is payload.ts's.
//
// The mesh's state and its connection layer (sockets, handshake, frames, backpressure, loss)
// are mesh.ts's; this file holds the calls a process makes on it, each delegating there.
import { createServer, type Server } from 'node:net';
import { bytesEqual } from '../../base/bytes.ts';
import { LOOPBACK_HOST } from '../../core/constants.ts';
import { assert } from '../../base/result.ts';
import { ANY_SOURCE, ANY_TAG, cancelRecvs, discardComm, dropQueued, type Message, postRecv, takeQueued } from './matching.ts';
import {
  BYE_LINGER_MS, COMM_WORLD, MAX_LIB_TAG, MAX_PENDING_RECVS, P2PError, type P2POptions, type P2PStats, type PeerAddress,
} from './p2p-types.ts';
import { isTaskKey, TASK_KEY_BYTES } from './hello-auth.ts';
import { checkP2POptions, checkPeerList, commError, endedPeerError, isU32 } from './p2p-checks.ts';
import { type Peer, rejectAllWaits, rejectWaitsNaming, waitForConnected } from './p2p-conn.ts';
import {
  abortError, addExpected, adopt, close1, conns, createMesh, deliver, dialPeer, gate, type Mesh, onHello, pump, resumeReading, unknown,
} from './mesh.ts';
import { encodeFrame, MAX_TAG, MAX_U32, MIN_LIB_TAG } from './wire.ts';

export class P2P {
  readonly taskId: string;
  readonly self: number;
  readonly maxMessageBytes: number;
  readonly maxUnexpectedBytes: number;
  private readonly server: Server;
  /** Everything the mesh's parts share (mesh.ts). */
  private readonly m: Mesh;

  private constructor(opts: P2POptions, server: Server, maxMessageBytes: number, maxUnexpectedBytes: number) {
    this.taskId = opts.taskId;
    this.self = opts.self;
    this.maxMessageBytes = maxMessageBytes;
    this.maxUnexpectedBytes = maxUnexpectedBytes;
    this.server = server;
    this.m = createMesh(opts, maxMessageBytes, maxUnexpectedBytes);
    if (opts.taskKey !== undefined) this.setTaskKey(opts.taskKey);
    server.on('connection', (socket) => adopt(this.m, socket, null));
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
    if (this.m.taskKey !== null) {
      if (!bytesEqual(this.m.taskKey, key)) throw new P2PError('BAD_ARGUMENT', 'the task key is already set to another key');
      return;
    }
    this.m.taskKey = new Uint8Array(key);
    for (const conn of [...this.m.strangers.conns]) {
      const hello = conn.awaitingKey;
      if (hello === null || conn.dead) continue;
      conn.awaitingKey = null;
      onHello(this.m, conn, hello);
      pump(this.m, conn);
    }
  }

  // ---- membership ------------------------------------------------------------------------------

  /** Add the listed peers (this process's own entry is ignored): dial each lower VPID, expect
   *  each higher one. Resolves when every listed peer is connected. Peers already known are
   *  not dialled again, so init and later calls may overlap. */
  connect(peers: readonly PeerAddress[]): Promise<void> {
    const shut = gate(this.m);
    if (shut !== null) return Promise.reject(shut);
    if (this.m.taskKey === null) return Promise.reject(new P2PError('BAD_ARGUMENT', 'no task key yet: setTaskKey() before connect() (PROTOCOL §9.5)'));
    const bad = checkPeerList(peers, this.m.removed);
    if (bad !== null) return Promise.reject(bad);
    const ids: number[] = [];
    for (const p of peers) {
      if (p.id === this.self) continue;
      ids.push(p.id);
      if (this.m.peers.has(p.id)) continue;
      if (p.id > this.self) {
        addExpected(this.m, p.id);
        continue;
      }
      this.m.peers.set(p.id, { id: p.id, state: 'expected', conn: null });
      dialPeer(this.m, p.id, p.host, p.port, 1);
    }
    return this.whenConnected(ids);
  }

  /** Expect hellos from these higher VPIDs (a survivor told of spawned members by the
   *  manager's broadcast, spec §5.5). A hello that already arrived is attributed now. Local
   *  state only, so it works while aborted. */
  expect(ids: readonly number[]): void {
    if (this.m.closed) throw new P2PError('CLOSED', 'P2P closed');
    for (const id of ids) {
      if (!isU32(id)) throw new P2PError('UNKNOWN_PEER', `id ${id} is not a u32 VPID`);
      if (id <= this.self) throw new P2PError('BAD_ARGUMENT', `id ${id} is not above ours (${this.self}): lower ids are dialled with connect()`);
      if (this.m.removed.has(id)) throw new P2PError('PEER_REMOVED', `peer ${id} was removed`);
    }
    for (const id of ids) if (!this.m.peers.has(id)) addExpected(this.m, id);
  }

  /** Connect again to these peers whose connection was lost though they live on (recovery keeps
   *  every member the manager did not announce dead, spec §5.5): each is expected anew; we dial
   *  the lower VPIDs again, the higher ones dial us, and a hello of theirs that came first (held
   *  meanwhile) is attributed now. The new connection's sequences start from 0; whatever was in
   *  flight on the broken one is gone, as the old communicator's messages are. Peers not lost
   *  are left alone. */
  revive(peers: readonly PeerAddress[]): void {
    if (this.m.closed) throw new P2PError('CLOSED', 'P2P closed');
    for (const p of peers) {
      const peer = this.m.peers.get(p.id);
      if (peer === undefined || peer.state !== 'lost') continue;
      if (p.id < this.self) {
        peer.state = 'expected';
        dialPeer(this.m, p.id, p.host, p.port, 1);
      } else {
        this.m.peers.delete(p.id);
        addExpected(this.m, p.id);
      }
    }
  }

  /** Resolves when every listed peer is connected; rejects if one is lost or removed, or on
   *  abort/close (connection set-up blocks like any MPI call, so the alert flag unblocks it). */
  whenConnected(ids: readonly number[]): Promise<void> {
    const shut = gate(this.m);
    if (shut !== null) return Promise.reject(shut);
    const wanted: number[] = [];
    for (const id of ids) {
      if (id === this.self) continue;
      const peer = this.m.peers.get(id);
      if (peer === undefined) return Promise.reject(unknown(this.m, id));
      const ended = endedPeerError(peer.state, id);
      if (ended !== null) return Promise.reject(ended);
      if (peer.state === 'expected') wanted.push(id);
    }
    if (wanted.length === 0) return Promise.resolve();
    return waitForConnected(this.m.connectWaits, wanted);
  }

  /** Take `id` out of the task (spec §5.5 GSIG_NTF_DIED): close its connection, reject the
   *  receives and sends that name it, drop its queued messages and refuse its hello for good. */
  removePeer(id: number): void {
    if (this.m.closed) throw new P2PError('CLOSED', 'P2P closed');
    if (!isU32(id)) throw new P2PError('UNKNOWN_PEER', `id ${id} is not a u32 VPID`);
    if (id === this.self) throw new P2PError('BAD_ARGUMENT', 'cannot remove this process');
    this.m.removed.add(id);
    const removedError = () => new P2PError('PEER_REMOVED', `peer ${id} was removed`);
    const heldConn = this.m.held.get(id);
    if (heldConn !== undefined) close1(this.m, heldConn, { code: 'REMOVED', detail: `peer ${id} removed` }, removedError);
    const peer = this.m.peers.get(id);
    this.m.peers.delete(id);
    if (peer?.conn) close1(this.m, peer.conn, { code: 'REMOVED', detail: `peer ${id} removed` }, removedError);
    for (const r of cancelRecvs(this.m.matching, (r) => r.source === id)) r.reject(removedError());
    rejectWaitsNaming(this.m.connectWaits, id, removedError);
    dropQueued(this.m.matching, (m) => m.source === id);
    resumeReading(this.m);
  }

  /** Forget communicator `comm` (replaced by recovery, spec §5.5): drop its queued messages,
   *  reject receives posted on it with BAD_COMM, and silently discard later arrivals for it. */
  discardComm(comm: number): void {
    if (!isU32(comm)) throw new P2PError('BAD_COMM', `comm ${comm}`);
    for (const r of discardComm(this.m.matching, comm)) r.reject(new P2PError('BAD_COMM', `communicator ${comm} was discarded`));
    resumeReading(this.m);
  }

  isDiscarded(comm: number): boolean {
    return this.m.matching.discarded.has(comm);
  }

  /** Known peer VPIDs and their state (self excluded). */
  members(): { id: number; state: Peer['state'] }[] {
    return [...this.m.peers.values()].map((p) => ({ id: p.id, state: p.state })).sort((a, b) => a.id - b.id);
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
    if (this.m.alert !== null || this.m.closed) return;
    this.m.alert = { reason };
    this.rejectEverything(() => abortError(this.m));
  }

  /** Clear the alert flag: calls work again (G_MPI_Alert_clear, spec §5.2). */
  resume(): void {
    this.m.alert = null;
  }

  isAborted(): boolean {
    return this.m.alert !== null;
  }

  /** The error a communication call would fail with now (closed, or the alert flag raised),
   *  else null: how layers above refuse a call before doing anything. */
  callError(): P2PError | null {
    return gate(this.m);
  }

  /** End every socket and the server, telling each connected peer with a bye frame that this
   *  is an ending, not a lost connection (no LOCAL_CONNECTION there). Like MPI_Finalize, callers
   *  complete their communication first: a connection still open BYE_LINGER_MS after its bye
   *  (a paused or hung peer) is destroyed, and bytes not yet sent are discarded. With
   *  `bye: false` the connections just close, as a crashed process's do: peers see them lost. */
  async close(options: { readonly bye?: boolean } = {}): Promise<void> {
    if (this.m.closed) return;
    this.m.closed = true;
    this.rejectEverything(() => new P2PError('CLOSED', 'P2P closed'));
    for (const t of this.m.retryTimers) clearTimeout(t);
    this.m.retryTimers.clear();
    for (const c of conns(this.m)) {
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
    const all = conns(this.m);
    return {
      unexpectedMessages: this.m.matching.unexpected.length,
      unexpectedBytes: this.m.matching.unexpectedBytes,
      pendingRecvs: this.m.matching.pendingRecvs.length,
      pausedConnections: all.filter((c) => c.paused && c.heldId === null && c.awaitingKey === null && !c.dead).length,
      heldConnections: this.m.held.size,
      unauthenticatedConnections: this.m.strangers.conns.size,
      discardedMessages: this.m.matching.discardedMessages,
    };
  }

  // ---- internals -------------------------------------------------------------------------------

  private rejectEverything(error: () => P2PError): void {
    for (const r of cancelRecvs(this.m.matching)) r.reject(error());
    for (const p of this.m.peers.values()) for (const w of p.conn?.drainWaiters.splice(0) ?? []) w.reject(error());
    rejectAllWaits(this.m.connectWaits, error);
  }

  private post(dest: number, tag: number, data: Uint8Array, comm: number, structured: boolean): Promise<void> {
    const shut = gate(this.m);
    if (shut !== null) return Promise.reject(shut);
    const badComm = commError(comm, this.m.matching.discarded);
    if (badComm !== null) return Promise.reject(badComm);
    if (!(data instanceof Uint8Array)) return Promise.reject(new P2PError('BAD_ARGUMENT', 'data is not a Uint8Array'));
    if (data.length > this.maxMessageBytes) {
      return Promise.reject(new P2PError('TOO_LARGE', `${data.length} bytes > maxMessageBytes ${this.maxMessageBytes}`));
    }
    // Self-send is queued at once, whatever the queue holds: the limit exists to stop reading
    // sockets, and blocking here would deadlock the common send-then-recv-to-self pattern.
    if (dest === this.self) {
      deliver(this.m, { source: this.self, tag, comm, structured, data: data.slice() });
      return Promise.resolve();
    }
    const peer = this.m.peers.get(dest);
    if (peer === undefined) return Promise.reject(unknown(this.m, dest));
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
    const shut = gate(this.m);
    if (shut !== null) return Promise.reject(shut);
    if (source !== ANY_SOURCE && source !== this.self && !this.m.peers.has(source)) return Promise.reject(unknown(this.m, source));
    const badComm = commError(comm, this.m.matching.discarded);
    if (badComm !== null) return Promise.reject(badComm);
    const m = takeQueued(this.m.matching, { source, tag, comm });
    if (m !== null) {
      resumeReading(this.m);
      return Promise.resolve(m);
    }
    // Messages that already arrived were delivered above; a lost source sends no more.
    const ended = source === ANY_SOURCE ? null : endedPeerError(this.m.peers.get(source)?.state, source);
    if (ended !== null) return Promise.reject(ended);
    if (this.m.matching.pendingRecvs.length >= MAX_PENDING_RECVS) return Promise.reject(new P2PError('LIMIT', `${MAX_PENDING_RECVS} receives already pending`));
    return new Promise<Message>((resolve, reject) => postRecv(this.m.matching, { source, tag, comm, resolve, reject }));
  }
}

const isLibTag = (tag: number): boolean => Number.isInteger(tag) && tag >= MIN_LIB_TAG && tag <= MAX_LIB_TAG;
