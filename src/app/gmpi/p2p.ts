// G-MPI point-to-point messaging for one task process (spec §5; the PTP channels of spec §7
// item 3). This file owns the TCP mesh between the task's processes (one connection per pair,
// the lower rank accepts, the higher rank is dialled), MPI message matching on (source, tag,
// communicator), the bounded unexpected-message queue with receive-side backpressure, the
// abort path the alert flag will use (spec §5.2) and connection-loss reporting, which the
// library turns into G_MPI_SIG_LOCAL_CONNECTION (spec §5.4 Table 4.3).
import { createServer, connect as dial, type Server, type Socket } from 'node:net';
import { assert } from '../../core/result.ts';
import {
  DEFAULT_MAX_MESSAGE_BYTES, encodeFrame, FrameDecoder, MAX_CONFIGURABLE_MESSAGE_BYTES, MAX_TAG, MAX_U32, MAX_RANKS,
  type GmpiFrame, type WireCode,
} from './wire.ts';

// ---- Named limits (STYLE.md 9) -----------------------------------------------------------------

/** Default bound on unexpected (arrived, not yet received) message bytes. Two default-size
 *  messages: one large message can always be queued while another is being received. */
export const DEFAULT_MAX_UNEXPECTED_BYTES = 2 * DEFAULT_MAX_MESSAGE_BYTES;
/** Bytes each queued message is charged beyond its payload, so a flood of empty messages also
 *  fills the queue (an entry's object, header fields and array slot cost about this much). */
export const UNEXPECTED_ENTRY_OVERHEAD_BYTES = 64;
/** Receives one process may have posted and unmatched at once. The application controls this,
 *  but each is a closure held until a message or an abort: beyond this it is a bug (a loop
 *  posting receives), refused with LIMIT rather than growing without bound. */
export const MAX_PENDING_RECVS = 4096;
/** Accepted sockets that have not yet said hello. Only task peers (at most MAX_RANKS) dial us;
 *  more unattributed connections than that are strays and are refused. */
export const MAX_UNATTRIBUTED_CONNECTIONS = MAX_RANKS;

/** MPI_ANY_SOURCE / MPI_ANY_TAG. Negative, so they never collide with a rank or a sendable tag. */
export const ANY_SOURCE = -1;
export const ANY_TAG = -1;
/** MPI_COMM_WORLD's id until communicators are created by G_MPI_Recover_comm (spec §5.5). */
export const COMM_WORLD = 0;

// ---- Errors ------------------------------------------------------------------------------------

export type P2PErrorCode =
  /** abort(reason) was called: the alert flag / MPI_ERR_ALERT path (spec §5.2). */
  | 'ABORTED'
  /** The connection to that peer is broken (spec §5.4 G_MPI_SIG_LOCAL_CONNECTION). */
  | 'PEER_LOST'
  | 'CLOSED'
  /** send before connect() resolved for that peer. */
  | 'NOT_CONNECTED'
  | 'TOO_LARGE'
  | 'BAD_RANK'
  | 'BAD_TAG'
  | 'BAD_COMM'
  | 'BAD_ARGUMENT'
  | 'LIMIT';

export class P2PError extends Error {
  constructor(readonly code: P2PErrorCode, message: string, readonly reason?: unknown) {
    super(message);
    this.name = 'P2PError';
  }
}

/** Why a connection was closed: a wire decode error or a protocol rule above the framing. */
export type LostCode =
  | WireCode
  | 'HELLO_EXPECTED'
  | 'UNEXPECTED_HELLO'
  | 'WRONG_TASK'
  | 'WRONG_RANK'
  | 'DUPLICATE_PEER'
  | 'BAD_SENDER'
  | 'BAD_SEQUENCE'
  | 'TOO_MANY_CONNECTIONS'
  | 'SOCKET_CLOSED'
  | 'SOCKET_ERROR';
export type LostReason = { readonly code: LostCode; readonly detail: string };
export type P2PLogEvent = { readonly type: 'connection.closed'; readonly rank: number | null; readonly reason: LostReason };

export type Message = { readonly source: number; readonly tag: number; readonly comm: number; readonly data: Uint8Array };
export type PeerAddress = { readonly rank: number; readonly host: string; readonly port: number };

export type P2POptions = {
  readonly taskId: string;
  readonly rank: number;
  readonly size: number;
  readonly listenHost?: string;
  readonly maxMessageBytes?: number;
  readonly maxUnexpectedBytes?: number;
  /** Raised once per peer rank when its connection breaks (spec §5.4 LOCAL_CONNECTION). */
  readonly onConnectionLost?: (rank: number, reason: LostReason) => void;
  readonly log?: (event: P2PLogEvent) => void;
};

export type P2PStats = {
  readonly unexpectedMessages: number;
  readonly unexpectedBytes: number;
  readonly pendingRecvs: number;
  readonly pausedConnections: number;
};

type Waiter = { resolve: () => void; reject: (e: P2PError) => void };
type PendingRecv = { source: number; tag: number; comm: number; resolve: (m: Message) => void; reject: (e: P2PError) => void };
type Conn = {
  socket: Socket;
  decoder: FrameDecoder;
  /** Set by the peer's hello; a dialled connection knows whom it expects from the start. */
  rank: number | null;
  dialledRank: number | null;
  nextSendSeq: number;
  expectedSeq: number;
  paused: boolean;
  dead: boolean;
  /** Sends whose bytes are queued in the socket beyond its high-water mark, awaiting 'drain'. */
  drainWaiters: Waiter[];
};

const isU32 = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_U32;
const matches = (r: PendingRecv, m: Message): boolean =>
  r.comm === m.comm && (r.source === ANY_SOURCE || r.source === m.source) && (r.tag === ANY_TAG || r.tag === m.tag);

export class P2P {
  readonly taskId: string;
  readonly rank: number;
  readonly size: number;
  readonly maxMessageBytes: number;
  readonly maxUnexpectedBytes: number;
  private readonly server: Server;
  private readonly onLost: ((rank: number, reason: LostReason) => void) | undefined;
  private readonly log: ((event: P2PLogEvent) => void) | undefined;
  /** The attributed connection per rank (null: not yet, or self). */
  private readonly peers: (Conn | null)[];
  private readonly lostRanks = new Set<number>();
  private readonly unattributed = new Set<Conn>();
  /** Arrived, unmatched messages in arrival order: scanning from the front gives MPI's
   *  "earliest matching" rule, and non-overtaking per sender follows from TCP order. */
  private unexpected: Message[] = [];
  private unexpectedBytes = 0;
  private pendingRecvs: PendingRecv[] = [];
  private connectWaiter: Waiter | null = null;
  private connectCalled = false;
  private aborted: { reason: unknown } | null = null;
  private closed = false;

  private constructor(opts: P2POptions, server: Server, maxMessageBytes: number, maxUnexpectedBytes: number) {
    this.taskId = opts.taskId;
    this.rank = opts.rank;
    this.size = opts.size;
    this.maxMessageBytes = maxMessageBytes;
    this.maxUnexpectedBytes = maxUnexpectedBytes;
    this.server = server;
    this.onLost = opts.onConnectionLost;
    this.log = opts.log;
    this.peers = Array.from({ length: opts.size }, () => null);
    server.on('connection', (socket) => this.adopt(socket, null));
  }

  /** Listen on an ephemeral port of listenHost; `port` is what the mapping message advertises. */
  static async open(opts: P2POptions): Promise<P2P> {
    const { size, rank } = opts;
    if (!Number.isInteger(size) || size < 1 || size > MAX_RANKS) throw new P2PError('BAD_ARGUMENT', `size ${size} not in 1..${MAX_RANKS}`);
    if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new P2PError('BAD_RANK', `rank ${rank} not in 0..${size - 1}`);
    const maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    if (!Number.isInteger(maxMessageBytes) || maxMessageBytes < 0 || maxMessageBytes > MAX_CONFIGURABLE_MESSAGE_BYTES) {
      throw new P2PError('BAD_ARGUMENT', `maxMessageBytes ${maxMessageBytes} not in 0..${MAX_CONFIGURABLE_MESSAGE_BYTES}`);
    }
    const maxUnexpectedBytes = opts.maxUnexpectedBytes ?? DEFAULT_MAX_UNEXPECTED_BYTES;
    if (!Number.isInteger(maxUnexpectedBytes) || maxUnexpectedBytes < 1) throw new P2PError('BAD_ARGUMENT', `maxUnexpectedBytes ${maxUnexpectedBytes}`);
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, opts.listenHost ?? '127.0.0.1', () => {
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

  /** Dial every higher rank, accept the lower ones; resolves when every peer has said hello.
   *  `peers` lists every rank of the task (its own entry, if present, is ignored). */
  connect(peers: readonly PeerAddress[]): Promise<void> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    if (this.connectCalled) return Promise.reject(new P2PError('BAD_ARGUMENT', 'connect called twice'));
    const byRank = new Map<number, PeerAddress>();
    for (const p of peers) {
      if (!Number.isInteger(p.rank) || p.rank < 0 || p.rank >= this.size || byRank.has(p.rank)) {
        return Promise.reject(new P2PError('BAD_RANK', `peer list: rank ${p.rank} out of range or repeated`));
      }
      byRank.set(p.rank, p);
    }
    for (let r = 0; r < this.size; r++) {
      if (r !== this.rank && !byRank.has(r)) return Promise.reject(new P2PError('BAD_ARGUMENT', `peer list lacks rank ${r}`));
    }
    this.connectCalled = true;
    const done = new Promise<void>((resolve, reject) => {
      this.connectWaiter = { resolve, reject };
    });
    for (const p of byRank.values()) {
      if (p.rank <= this.rank) continue;
      this.adopt(dial({ host: p.host, port: p.port }), p.rank);
    }
    this.checkConnected();
    return done;
  }

  /** Send `data` to rank `dest`. Resolves once the bytes are in the socket within its
   *  high-water mark (after 'drain' otherwise), so awaiting sends is flow control. The payload
   *  is copied at once: the caller may reuse `data` immediately. */
  send(dest: number, tag: number, data: Uint8Array, comm: number = COMM_WORLD): Promise<void> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    if (!Number.isInteger(dest) || dest < 0 || dest >= this.size) return Promise.reject(new P2PError('BAD_RANK', `dest ${dest} not in 0..${this.size - 1}`));
    if (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG) return Promise.reject(new P2PError('BAD_TAG', `tag ${tag} not in 0..${MAX_TAG}`));
    if (!isU32(comm)) return Promise.reject(new P2PError('BAD_COMM', `comm ${comm}`));
    if (!(data instanceof Uint8Array)) return Promise.reject(new P2PError('BAD_ARGUMENT', 'data is not a Uint8Array'));
    if (data.length > this.maxMessageBytes) {
      return Promise.reject(new P2PError('TOO_LARGE', `${data.length} bytes > maxMessageBytes ${this.maxMessageBytes}`));
    }
    // Self-send is queued at once, whatever the queue holds: the limit exists to stop reading
    // sockets, and blocking here would deadlock the common send-then-recv-to-self pattern.
    if (dest === this.rank) {
      this.arrive({ source: this.rank, tag, comm, data: data.slice() });
      return Promise.resolve();
    }
    if (this.lostRanks.has(dest)) return Promise.reject(new P2PError('PEER_LOST', `connection to rank ${dest} is lost`));
    const conn = this.peers[dest];
    if (conn === null || conn === undefined) return Promise.reject(new P2PError('NOT_CONNECTED', `rank ${dest} not connected yet`));
    const seq = conn.nextSendSeq;
    conn.nextSendSeq = seq === MAX_U32 ? 0 : seq + 1;
    const below = conn.socket.write(encodeFrame({ type: 'data', rank: this.rank, comm, tag, seq, payload: data }));
    if (below) return Promise.resolve();
    return new Promise<void>((resolve, reject) => conn.drainWaiters.push({ resolve, reject }));
  }

  /** MPI receive: the earliest-arrived matching message, else wait for one. */
  recv(source: number, tag: number, comm: number = COMM_WORLD): Promise<Message> {
    const gate = this.gate();
    if (gate !== null) return Promise.reject(gate);
    if (source !== ANY_SOURCE && (!Number.isInteger(source) || source < 0 || source >= this.size)) {
      return Promise.reject(new P2PError('BAD_RANK', `source ${source} not in 0..${this.size - 1} nor ANY_SOURCE`));
    }
    if (tag !== ANY_TAG && (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG)) {
      return Promise.reject(new P2PError('BAD_TAG', `tag ${tag} not in 0..${MAX_TAG} nor ANY_TAG`));
    }
    if (!isU32(comm)) return Promise.reject(new P2PError('BAD_COMM', `comm ${comm}`));
    return new Promise<Message>((resolve, reject) => {
      const r: PendingRecv = { source, tag, comm, resolve, reject };
      const i = this.unexpected.findIndex((m) => matches(r, m));
      if (i >= 0) {
        const [m] = this.unexpected.splice(i, 1);
        assert(m !== undefined, 'matched index out of range');
        this.unexpectedBytes -= m.data.length + UNEXPECTED_ENTRY_OVERHEAD_BYTES;
        resolve(m);
        this.resumeReading();
        return;
      }
      // Messages that already arrived were delivered above; a lost source sends no more.
      if (source !== ANY_SOURCE && this.lostRanks.has(source)) {
        reject(new P2PError('PEER_LOST', `connection to rank ${source} is lost`));
        return;
      }
      if (this.pendingRecvs.length >= MAX_PENDING_RECVS) {
        reject(new P2PError('LIMIT', `${MAX_PENDING_RECVS} receives already pending`));
        return;
      }
      this.pendingRecvs.push(r);
    });
  }

  /** Settle every pending and future send/recv with ABORTED carrying `reason`: how the alert
   *  flag and context invalidation unblock MPI calls with MPI_ERR_ALERT (spec §5.2). Sockets
   *  stay open and messages keep arriving into the unexpected queue. */
  abort(reason: unknown): void {
    if (this.aborted !== null || this.closed) return;
    this.aborted = { reason };
    this.rejectEverything(() => this.abortError());
  }

  /** End every socket and the server. Unsent bytes are discarded: like MPI_Finalize, callers
   *  complete their communication first; a paused or hung peer must not hold finalisation. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.rejectEverything(() => new P2PError('CLOSED', 'P2P closed'));
    const conns = [...this.unattributed, ...this.peers.filter((c): c is Conn => c !== null)];
    for (const c of conns) {
      c.dead = true;
      c.socket.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  stats(): P2PStats {
    const conns = [...this.unattributed, ...this.peers.filter((c): c is Conn => c !== null)];
    return {
      unexpectedMessages: this.unexpected.length,
      unexpectedBytes: this.unexpectedBytes,
      pendingRecvs: this.pendingRecvs.length,
      pausedConnections: conns.filter((c) => c.paused && !c.dead).length,
    };
  }

  // ---- internals -------------------------------------------------------------------------------

  private abortError(): P2PError {
    return new P2PError('ABORTED', `aborted: ${String(this.aborted?.reason)}`, this.aborted?.reason);
  }

  private gate(): P2PError | null {
    if (this.closed) return new P2PError('CLOSED', 'P2P closed');
    if (this.aborted !== null) return this.abortError();
    return null;
  }

  private rejectEverything(error: () => P2PError): void {
    for (const r of this.pendingRecvs.splice(0)) r.reject(error());
    for (const c of this.peers) for (const w of c?.drainWaiters.splice(0) ?? []) w.reject(error());
    const cw = this.connectWaiter;
    this.connectWaiter = null;
    cw?.reject(error());
  }

  private adopt(socket: Socket, dialledRank: number | null): void {
    const conn: Conn = {
      socket, decoder: new FrameDecoder({ maxMessageBytes: this.maxMessageBytes }), rank: null, dialledRank,
      nextSendSeq: 0, expectedSeq: 0, paused: false, dead: false, drainWaiters: [],
    };
    if (this.closed) {
      socket.destroy();
      return;
    }
    if (dialledRank === null && this.unattributed.size >= MAX_UNATTRIBUTED_CONNECTIONS) {
      this.fail(conn, { code: 'TOO_MANY_CONNECTIONS', detail: `${this.unattributed.size} connections without hello` });
      return;
    }
    this.unattributed.add(conn);
    socket.setNoDelay(true);
    const hello = () => socket.write(encodeFrame({ type: 'hello', rank: this.rank, taskId: this.taskId }));
    if (dialledRank === null) hello();
    else socket.once('connect', hello);
    socket.on('data', (chunk: Buffer) => {
      conn.decoder.feed(chunk);
      this.pump(conn);
    });
    socket.on('drain', () => {
      for (const w of conn.drainWaiters.splice(0)) w.resolve();
    });
    socket.on('error', (e) => this.fail(conn, { code: 'SOCKET_ERROR', detail: e.message }));
    socket.on('close', () => this.fail(conn, { code: 'SOCKET_CLOSED', detail: 'peer closed the connection' }));
  }

  /** Pull decoded frames while the unexpected queue has room; pause the socket when it has not
   *  (receive-side backpressure: TCP flow control then stalls the sender's writes). The queue
   *  holds at most maxUnexpectedBytes plus one message. As with any bounded MPI buffering, a
   *  program whose next receive needs a message stuck behind a full queue of others it never
   *  receives deadlocks ("unsafe" in MPI terms); abort() still unblocks it. */
  private pump(conn: Conn): void {
    while (!conn.dead) {
      if (this.unexpectedBytes >= this.maxUnexpectedBytes) {
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
    if (this.unexpectedBytes >= this.maxUnexpectedBytes) return;
    for (const c of [...this.unattributed, ...this.peers]) if (c !== null && c.paused) this.pump(c);
  }

  private onFrame(conn: Conn, frame: GmpiFrame): void {
    if (conn.rank === null) {
      if (frame.type !== 'hello') return this.fail(conn, { code: 'HELLO_EXPECTED', detail: 'data before hello' });
      return this.onHello(conn, frame.rank, frame.taskId);
    }
    if (frame.type === 'hello') return this.fail(conn, { code: 'UNEXPECTED_HELLO', detail: 'second hello' });
    if (frame.rank !== conn.rank) return this.fail(conn, { code: 'BAD_SENDER', detail: `rank ${frame.rank} on rank ${conn.rank}'s connection` });
    // TCP delivers in order, so a gap or repeat means a broken or hostile sender: stop trusting
    // the stream rather than deliver out of MPI order.
    if (frame.seq !== conn.expectedSeq) return this.fail(conn, { code: 'BAD_SEQUENCE', detail: `seq ${frame.seq}, expected ${conn.expectedSeq}` });
    conn.expectedSeq = frame.seq === MAX_U32 ? 0 : frame.seq + 1;
    this.arrive({ source: conn.rank, tag: frame.tag, comm: frame.comm, data: frame.payload });
  }

  private onHello(conn: Conn, rank: number, taskId: string): void {
    if (taskId !== this.taskId) return this.fail(conn, { code: 'WRONG_TASK', detail: `hello from task ${taskId}` });
    // The lower rank accepts and the higher dials: one connection per pair, no tie to break.
    const expected = conn.dialledRank === null ? rank < this.rank : rank === conn.dialledRank;
    if (!expected || rank >= this.size) return this.fail(conn, { code: 'WRONG_RANK', detail: `hello from rank ${rank}` });
    if (this.peers[rank] !== null || this.lostRanks.has(rank)) return this.fail(conn, { code: 'DUPLICATE_PEER', detail: `rank ${rank} already seen` });
    conn.rank = rank;
    this.unattributed.delete(conn);
    this.peers[rank] = conn;
    this.checkConnected();
  }

  private arrive(m: Message): void {
    const i = this.pendingRecvs.findIndex((r) => matches(r, m));
    if (i >= 0) {
      const [r] = this.pendingRecvs.splice(i, 1);
      assert(r !== undefined, 'matched index out of range');
      r.resolve(m);
      return;
    }
    this.unexpected.push(m);
    this.unexpectedBytes += m.data.length + UNEXPECTED_ENTRY_OVERHEAD_BYTES;
  }

  private checkConnected(): void {
    if (!this.connectCalled || this.connectWaiter === null) return;
    for (let r = 0; r < this.size; r++) if (r !== this.rank && this.peers[r] === null) return;
    const w = this.connectWaiter;
    this.connectWaiter = null;
    w.resolve();
  }

  /** Close a connection for `reason`; if it belongs to a rank, that rank is lost for good
   *  (until recovery builds a new context, spec §5.5): raise connectionLost once, reject its
   *  sends and the receives that name it, and fail a pending connect. */
  private fail(conn: Conn, reason: LostReason): void {
    if (conn.dead) return;
    conn.dead = true;
    conn.socket.destroy();
    this.unattributed.delete(conn);
    const rank = conn.rank ?? conn.dialledRank;
    if (this.closed) return;
    this.log?.({ type: 'connection.closed', rank, reason });
    for (const w of conn.drainWaiters.splice(0)) w.reject(this.gate() ?? new P2PError('PEER_LOST', `rank ${rank}: ${reason.code}`));
    if (rank === null || this.lostRanks.has(rank)) return;
    if (conn.rank === null && this.peers[rank] !== null) return; // a stray, not the peer's connection
    this.lostRanks.add(rank);
    const lost = () => new P2PError('PEER_LOST', `connection to rank ${rank} lost: ${reason.code} ${reason.detail}`);
    const keep: PendingRecv[] = [];
    for (const r of this.pendingRecvs) {
      if (r.source === rank) r.reject(lost());
      else keep.push(r);
    }
    this.pendingRecvs = keep;
    const cw = this.connectWaiter;
    this.connectWaiter = null;
    cw?.reject(lost());
    this.onLost?.(rank, reason);
  }
}
