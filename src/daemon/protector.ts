// The protector service an agent runs (docs/PROTOCOL.md §11.4; radic-hmpl A.1 "protector",
// B.1 "logger"; mpichv-dgrp 1.2.2–1.2.4 "checkpoint server"): a TCP listener on the node's host
// where the task processes of the previous node of the ring store their ranks' message logs and
// checkpoints, and where a replacement fetches them. The store itself is the pure core
// src/core/protector-store.ts; this file owns the sockets, the hello's authentication and the
// assembly of chunked checkpoints.
//
// A connection: the protector sends `challenge {nonce}` at accept; the process answers `hello`
// with the MAC under its task key (src/app/rollback/protector-auth.ts), which is checked FIRST,
// constant-time: nothing a connection says is acted on before it verifies. Then the store's rules
// (guarded task, fencing by incarnation) and a `welcome` carrying the protector's own MAC. A task
// is known only once the group guarded it (`guard(task, key, maxStateBytes)`); its key never
// leaves this process.
//
// Strangers (PROTOCOL §9.5, the same caps and timeout as G-MPI's acceptor, through the same
// helpers, src/app/gmpi/handshake.ts): at most MAX_UNAUTHENTICATED_PER_ADDRESS unauthenticated
// connections per remote address and MAX_UNAUTHENTICATED_CONNECTIONS in all, beyond which a new
// one is closed before its challenge (TOO_MANY_CONNECTIONS); one that has not authenticated
// within UNAUTHENTICATED_TIMEOUT_MS is closed (AUTH_TIMEOUT). Authenticated connections are one
// per (task, rank): a newer one (a reconnect, or a replacement, which also fences the older
// incarnation) takes the older's place. A malformed or oversized frame, or a message out of
// place, closes the connection with a typed reason, counted; nothing a peer sends throws.
//
// Metrics: the protector serves none of its own. Its counts (ProtectorCounts, the closes by
// reason, the store's refusals and bytes) are plain integers, one increment per event, that the
// agent's metrics read through `stats()` at scrape time (docs/OPERATIONS.md §9).
import { createServer, type Server, type Socket } from 'node:net';
import { admitStranger, createStrangers, leaveStrangers, type Strangers } from '../app/gmpi/handshake.ts';
import { UNAUTHENTICATED_TIMEOUT_MS } from '../app/gmpi/p2p-types.ts';
import { isTaskKey } from '../app/gmpi/hello-auth.ts';
import { protectorMac, protectorMacValid, protectorNonce } from '../app/rollback/protector-auth.ts';
import { drained } from '../app/rollback/protector-client.ts';
import { PROTECTOR_MAX_BATCH_ENTRIES, PROTECTOR_MAX_CHECKPOINT_BYTES } from '../core/constants.ts';
import { deposit, entriesAfter } from '../core/channel-memory.ts';
import type { LogLevel } from '../core/node.ts';
import {
  append, checkPut, count, createProtectorStore, fence, fetch, guard as guardTask, putCheckpoint, refuse, release as releaseTask, storeStats,
  type ProtectorStore, type Refused, type StoreStats,
} from '../core/protector-store.ts';
import type { AppFrameDecoder } from '../core/wire/app-wire.ts';
import {
  batchAppends, checkpointChunks, encodeToClient, protectorDecoder, wireFailure, type ProtectorCode, type ProtectorOp, type ToClient,
  type ToProtector,
} from '../core/wire/protector-wire.ts';

/** How long a closed connection's last frame (its `refused` reason) may take to leave before the
 *  socket is destroyed: a peer that does not read must not hold it. */
export const PROTECTOR_CLOSE_LINGER_MS = 1_000;
/** A connection's closing reason is logged at most once this often per reason (with the count
 *  since): a flood of garbage connections must not flood the agent's log too. */
export const PROTECTOR_LOG_EVERY_MS = 1_000;
/** Sockets the listener keeps at once (the kernel's accept is refused beyond): strangers are
 *  capped at MAX_UNAUTHENTICATED_CONNECTIONS and authenticated ones at one per guarded rank; this
 *  bounds the sum with room for connections lingering after their close. */
export const PROTECTOR_MAX_SOCKETS = 4096;
/** Answers a connection may leave unread before it is closed SLOW_CLIENT: a fetch waits for the
 *  socket to drain between frames, so a reading client never has more than a frame or two
 *  queued; one that keeps sending (refused appends, each answered) without reading must not
 *  make the protector buffer without bound. */
export const PROTECTOR_MAX_UNREAD_BYTES = 4 * 1024 * 1024;
/** Pushed log entries (a subscription, PROTOCOL §11.6) the protector lets wait in a socket's
 *  buffer before it waits for a drain: the rest stays in the store, whose bounds hold it. Below
 *  PROTECTOR_MAX_UNREAD_BYTES less a frame, so a subscriber that reads slowly is paced, never
 *  closed SLOW_CLIENT. */
export const PROTECTOR_PUSH_BUFFER_BYTES = 1024 * 1024;
/** Bytes a connection may send before it authenticates: its hello is about a hundred, and a
 *  client sends nothing else before the welcome. Without this a stranger could make the
 *  protector buffer a frame of PROTECTOR_MAX_FRAME_BYTES on each of its
 *  MAX_UNAUTHENTICATED_CONNECTIONS sockets. */
export const PROTECTOR_MAX_STRANGER_BYTES = 1024;

export type ProtectorOptions = {
  /** The node's address (its task processes' host); the listener binds it. */
  host: string;
  /** 0: any free port. */
  port: number;
  log: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  /** Bound on every byte stored; PROTECTOR_MAX_TOTAL_BYTES unless lower. */
  maxTotalBytes?: number;
  /** UNAUTHENTICATED_TIMEOUT_MS unless given (tests). */
  authTimeoutMs?: number;
};

/** What the protector did since it started: plain integers, one increment per event (the
 *  agent's metrics read them at scrape time, docs/OPERATIONS.md §9). */
export type ProtectorCounts = {
  /** Connections admitted (sent a challenge); those refused at accept are closed
   *  TOO_MANY_CONNECTIONS instead. */
  accepted: number;
  /** New checkpoints stored (a repeat of the newest, acknowledged again, is not one). */
  checkpointsStored: number;
  /** New log entries appended by their rank (repeats are not). */
  entriesAppended: number;
  /** Fetches answered whole (their `fetched` sent). */
  fetchesServed: number;
};

export type ProtectorStats = {
  endpoint: string;
  strangers: number;
  authenticated: number;
  /** Connections closed by the protector, by reason (a client's own close is not counted). */
  closed: Partial<Record<ProtectorCode, number>>;
  counts: ProtectorCounts;
  /** Checkpoint bytes being assembled from chunks now (bounded by the store's total bound). */
  assemblingBytes: number;
  store: StoreStats;
};

export type GuardRefusal = { ok: false; code: 'BAD_ARGUMENT' | 'TOO_MANY_TASKS'; detail: string };

export type Protector = {
  /** "host:port" it listens on. */
  readonly endpoint: string;
  readonly port: number;
  /** The group's `rollback.guard`: store `task`'s ranks, authenticated by `taskKey`, checkpoints
   *  up to `maxStateBytes`. Guarding again keeps the store. */
  guard(task: string, taskKey: Uint8Array, maxStateBytes: number): { ok: true } | GuardRefusal;
  /** The group's `rollback.release`: forget the task, close its connections. */
  release(task: string): boolean;
  close(): Promise<void>;
  stats(): ProtectorStats;
};

type Authed = { task: string; rank: number; incarnation: number; key: Uint8Array };
type Assembly = { id: number; logPos: number; size: number; buf: Uint8Array; received: number };

type Conn = {
  socket: Socket;
  address: string;
  decoder: AppFrameDecoder<ToProtector>;
  nonce: Uint8Array;
  authed: Authed | null;
  timer: NodeJS.Timeout | null;
  put: Assembly | null;
  /** A put refused at its first chunk: its other chunks are dropped as they come. */
  discardPut: number | null;
  /** The highest `appended` owed, sent before the next frame or at the end of the chunk. */
  ackUpTo: number | null;
  fetching: boolean;
  /** The rank's subscription to its log (channel memory, PROTOCOL §11.6): the last position
   *  pushed; null when it has not subscribed. */
  sub: { sent: number } | null;
  closed: boolean;
  /** Bytes received before authentication (PROTECTOR_MAX_STRANGER_BYTES). */
  strangerBytes: number;
};

const holderKey = (task: string, rank: number): string => `${task}/${rank}`;

/** One protector's state: its store, the keys of the tasks it guards, its connections. */
type Service = {
  readonly opts: ProtectorOptions;
  readonly authTimeoutMs: number;
  readonly store: ProtectorStore;
  readonly keys: Map<string, Uint8Array>;
  readonly strangers: Strangers<Conn>;
  /** The authenticated connection of each (task, rank). */
  readonly holders: Map<string, Conn>;
  readonly conns: Set<Conn>;
  readonly closed: Partial<Record<ProtectorCode, number>>;
  readonly counts: ProtectorCounts;
  readonly lastLogged: Map<ProtectorCode, { atMs: number; suppressed: number }>;
  /** Checkpoint bytes being assembled on all connections (bounded by the store's total). */
  assemblingBytes: number;
};

function logClose(s: Service, code: ProtectorCode, fields: Record<string, unknown>): void {
  const now = Date.now();
  const last = s.lastLogged.get(code);
  if (last !== undefined && now - last.atMs < PROTECTOR_LOG_EVERY_MS) {
    last.suppressed++;
    return;
  }
  s.lastLogged.set(code, { atMs: now, suppressed: 0 });
  const level = code === 'SHUTDOWN' || code === 'REPLACED' || code === 'RELEASED' ? 'info' : 'warn';
  s.opts.log(level, 'protector.connection.closed', { code, ...fields, suppressedSince: last?.suppressed ?? 0 });
}

/** Send `msg` (after the acknowledgement owed); false when the socket wants a drain or `conn`
 *  is closed. A client that leaves too much unread is closed SLOW_CLIENT. */
function write(s: Service, conn: Conn, msg: ToClient): boolean {
  if (conn.closed) return false;
  flushAck(conn);
  const more = conn.socket.write(encodeToClient(msg));
  if (conn.socket.writableLength > PROTECTOR_MAX_UNREAD_BYTES && msg.type !== 'refused') {
    shut(s, conn, 'SLOW_CLIENT', `${conn.socket.writableLength} bytes of answers unread`);
    return false;
  }
  return more;
}

function flushAck(conn: Conn): void {
  if (conn.ackUpTo === null || conn.closed) return;
  const upTo = conn.ackUpTo;
  conn.ackUpTo = null;
  conn.socket.write(encodeToClient({ type: 'appended', upTo }));
}

/** Close `conn` for `code`, telling the peer why first. */
function shut(s: Service, conn: Conn, code: ProtectorCode, reason: string): void {
  if (conn.closed) return;
  write(s, conn, { type: 'refused', code, reason });
  conn.closed = true;
  s.closed[code] = (s.closed[code] ?? 0) + 1;
  const who = conn.authed === null ? {} : { task: conn.authed.task, rank: conn.authed.rank, incarnation: conn.authed.incarnation };
  logClose(s, code, { remote: conn.address, reason, ...who });
  forget(s, conn);
  conn.socket.end();
  setTimeout(() => conn.socket.destroy(), PROTECTOR_CLOSE_LINGER_MS).unref();
}

/** Drop every trace of `conn` (on shut, and when its socket closes). */
function forget(s: Service, conn: Conn): void {
  s.conns.delete(conn);
  leaveStrangers(s.strangers, conn, conn.address);
  if (conn.timer !== null) clearTimeout(conn.timer);
  conn.timer = null;
  if (conn.put !== null) s.assemblingBytes -= conn.put.size;
  conn.put = null;
  if (conn.authed !== null && s.holders.get(holderKey(conn.authed.task, conn.authed.rank)) === conn) {
    s.holders.delete(holderKey(conn.authed.task, conn.authed.rank));
  }
}

function refuseOp(s: Service, conn: Conn, op: ProtectorOp, ref: number, r: Refused): void {
  write(s, conn, { type: 'error', op, ref, code: r.code, reason: r.detail });
  // A fenced incarnation has nothing more to say here (mpichv-dgrp 1.2.4).
  if (r.code === 'FENCED') shut(s, conn, 'FENCED', r.detail);
}

/** The MAC first (constant-time), then the store's rules; a newer holder of the rank takes the
 *  older connection's place (and fences it, if its incarnation is higher). */
function onHello(s: Service, conn: Conn, m: Extract<ToProtector, { type: 'hello' }>): void {
  const key = s.keys.get(m.task);
  if (key === undefined) return shut(s, conn, 'UNKNOWN_TASK', `task ${m.task} is not guarded here`);
  const transcript = { task: m.task, rank: m.rank, incarnation: m.incarnation, processNonce: m.nonce, protectorNonce: conn.nonce };
  if (!protectorMacValid(key, { role: 'process', ...transcript }, m.mac)) {
    return shut(s, conn, 'BAD_MAC', `hello for ${m.task} rank ${m.rank} does not verify under the task key`);
  }
  const f = fence(s.store, m.task, m.rank, m.incarnation);
  if (!f.ok) return shut(s, conn, f.code, f.detail);
  leaveStrangers(s.strangers, conn, conn.address);
  if (conn.timer !== null) clearTimeout(conn.timer);
  conn.timer = null;
  conn.authed = { task: m.task, rank: m.rank, incarnation: m.incarnation, key };
  const before = s.holders.get(holderKey(m.task, m.rank));
  if (before !== undefined && before.authed !== null) {
    const fenced = before.authed.incarnation < m.incarnation;
    shut(s, before, fenced ? 'FENCED' : 'REPLACED', fenced ? `incarnation ${m.incarnation} holds rank ${m.rank} now` : 'a newer connection of this rank took its place');
  }
  s.holders.set(holderKey(m.task, m.rank), conn);
  write(s, conn, { type: 'welcome', last: f.last, mac: protectorMac(key, { role: 'protector', ...transcript }) });
}

function onAppend(s: Service, conn: Conn, a: Authed, first: number, blobs: readonly Uint8Array[]): void {
  for (let i = 0; i < blobs.length; i++) {
    const r = append(s.store, a.task, a.rank, a.incarnation, first + i, blobs[i]!);
    if (!r.ok) return refuseOp(s, conn, 'append', first + i, r);
    conn.ackUpTo = Math.max(conn.ackUpTo ?? 0, r.upTo);
    if (!r.repeat) s.counts.entriesAppended++;
  }
}

/** A checkpoint's first chunk: whether the store would take it, and room to assemble it. */
function beginPut(s: Service, conn: Conn, a: Authed, m: Extract<ToProtector, { type: 'put' }>): boolean {
  conn.discardPut = null;
  if (conn.put !== null) {
    s.assemblingBytes -= conn.put.size;
    write(s, conn, { type: 'error', op: 'put', ref: conn.put.id, code: 'UNEXPECTED', reason: `checkpoint ${m.id} began before ${conn.put.id} ended` });
    conn.put = null;
  }
  const check = checkPut(s.store, a.task, a.rank, a.incarnation, m.id, m.logPos, m.size);
  const room = s.store.maxTotalBytes - s.assemblingBytes;
  const r: Refused | null = !check.ok ? check
    : m.size > room ? count(s.store, refuse('STORE_FULL', `${s.assemblingBytes} checkpoint bytes are being received already`)) : null;
  if (r !== null) {
    if (m.chunk.length < m.size) conn.discardPut = m.id;
    refuseOp(s, conn, 'put', m.id, r);
    return false;
  }
  conn.put = { id: m.id, logPos: m.logPos, size: m.size, buf: new Uint8Array(m.size), received: 0 };
  s.assemblingBytes += m.size;
  return true;
}

function onPut(s: Service, conn: Conn, a: Authed, m: Extract<ToProtector, { type: 'put' }>): void {
  if (m.offset === 0) {
    if (!beginPut(s, conn, a, m)) return;
  } else if (conn.discardPut === m.id && conn.put === null) {
    if (m.offset + m.chunk.length >= m.size) conn.discardPut = null;
    return;
  }
  const p = conn.put;
  if (p === null || p.id !== m.id || p.logPos !== m.logPos || p.size !== m.size || m.offset !== p.received || p.received + m.chunk.length > p.size
    || (m.chunk.length === 0 && p.size > 0)) {
    return shut(s, conn, 'UNEXPECTED', `checkpoint chunk ${m.id}@${m.offset} out of place`);
  }
  p.buf.set(m.chunk, p.received);
  p.received += m.chunk.length;
  if (p.received < p.size) return;
  conn.put = null;
  s.assemblingBytes -= p.size;
  const stored = putCheckpoint(s.store, a.task, a.rank, a.incarnation, p.id, p.logPos, p.buf);
  if (!stored.ok) return refuseOp(s, conn, 'put', p.id, stored);
  if (!stored.repeat) s.counts.checkpointsStored++;
  write(s, conn, { type: 'stored', id: p.id });
}

/** Everything kept for the rank, in frames, waiting for the socket to drain between them. */
async function onFetch(s: Service, conn: Conn, a: Authed): Promise<void> {
  const f = fetch(s.store, a.task, a.rank);
  if (!f.ok) return refuseOp(s, conn, 'fetch', 0, f);
  const frames: ToClient[] = [];
  for (const c of f.checkpoints) {
    for (const { offset, chunk } of checkpointChunks(c.bytes)) frames.push({ type: 'checkpoint', id: c.id, logPos: c.logPos, size: c.bytes.length, offset, chunk });
  }
  if (f.log.length > 0) {
    for (const b of batchAppends(f.log[0]!.pos, f.log.map((e) => e.blob))) frames.push({ type: 'entries', first: b.first, blobs: b.blobs });
  }
  frames.push({ type: 'fetched', last: f.last });
  conn.fetching = true;
  try {
    for (const frame of frames) {
      if (conn.closed) return;
      // Counted before its end is written: the client may read it before this resumes.
      if (frame.type === 'fetched') s.counts.fetchesServed++;
      if (!write(s, conn, frame)) await drained(conn.socket);
    }
  } finally {
    conn.fetching = false;
  }
}

/** A sender's deposit into `dest`'s log (mpichv-dgrp 1.2.1): acknowledged once stored (or held
 *  already); a new entry goes on to `dest`'s subscription, if it has one here. */
function onDeposit(s: Service, conn: Conn, a: Authed, m: Extract<ToProtector, { type: 'deposit' }>): void {
  const r = deposit(s.store, a.task, a.rank, a.incarnation, m.dest, m.ssn, m.blob);
  if (!r.ok) return refuseOp(s, conn, 'deposit', m.ssn, r);
  // A message in fragments is answered once, at its last (the sender waits for that one).
  if (r.last) write(s, conn, { type: 'deposited', dest: m.dest, ssn: m.ssn });
  const receiver = s.holders.get(holderKey(a.task, m.dest));
  if (r.pos > 0 && receiver !== undefined) pushEntries(s, receiver);
}

function onSubscribe(s: Service, conn: Conn, from: number): void {
  if (conn.sub !== null) return void write(s, conn, { type: 'error', op: 'subscribe', ref: from, code: 'UNEXPECTED', reason: 'subscribed already' });
  conn.sub = { sent: from };
  conn.socket.on('drain', () => pushEntries(s, conn));
  pushEntries(s, conn);
}

/** Push the subscribed log's entries not sent yet, in order, while the socket has room
 *  (PROTECTOR_PUSH_BUFFER_BYTES); the rest waits in the store (within its bounds) for a drain. */
function pushEntries(s: Service, conn: Conn): void {
  const a = conn.authed;
  const sub = conn.sub;
  if (a === null || sub === null) return;
  while (!conn.closed && conn.socket.writableLength < PROTECTOR_PUSH_BUFFER_BYTES) {
    const r = entriesAfter(s.store, a.task, a.rank, sub.sent, PROTECTOR_MAX_BATCH_ENTRIES);
    if (!r.ok) {
      conn.sub = null;
      return refuseOp(s, conn, 'subscribe', sub.sent, r);
    }
    if (r.blobs.length === 0) return;
    for (const b of batchAppends(r.first, r.blobs)) {
      if (conn.closed || conn.socket.writableLength >= PROTECTOR_PUSH_BUFFER_BYTES) return; // the rest at the drain
      write(s, conn, { type: 'pushed', first: b.first, blobs: b.blobs });
      sub.sent = b.first + b.blobs.length - 1;
    }
  }
}

function onMessage(s: Service, conn: Conn, m: ToProtector): void {
  const a = conn.authed;
  if (a === null) {
    if (m.type !== 'hello') return shut(s, conn, 'UNEXPECTED', `${m.type} before the hello`);
    return onHello(s, conn, m);
  }
  switch (m.type) {
    case 'hello': return shut(s, conn, 'UNEXPECTED', 'a second hello');
    case 'append': return onAppend(s, conn, a, m.pos, [m.blob]);
    case 'appendBatch': return onAppend(s, conn, a, m.first, m.blobs);
    case 'put': return onPut(s, conn, a, m);
    case 'deposit': return onDeposit(s, conn, a, m);
    case 'subscribe': return onSubscribe(s, conn, m.from);
    case 'fetch':
      if (conn.fetching) return void write(s, conn, { type: 'error', op: 'fetch', ref: 0, code: 'UNEXPECTED', reason: 'a fetch is under way' });
      void onFetch(s, conn, a);
      return;
    default: {
      const never: never = m;
      return void never;
    }
  }
}

function onData(s: Service, conn: Conn, chunk: Uint8Array): void {
  if (conn.closed) return;
  if (conn.authed === null) {
    conn.strangerBytes += chunk.length;
    if (conn.strangerBytes > PROTECTOR_MAX_STRANGER_BYTES) return shut(s, conn, 'TOO_LARGE', `${conn.strangerBytes} bytes before the hello verified`);
  }
  conn.decoder.feed(chunk);
  while (!conn.closed) {
    const r = conn.decoder.next();
    if (!r.ok) return shut(s, conn, wireFailure(r.code), r.detail);
    if (r.value === null) break;
    onMessage(s, conn, r.value);
  }
  flushAck(conn);
}

/** A new connection: over the strangers' caps it is closed before its challenge (PROTOCOL §9.5). */
function onConnection(s: Service, socket: Socket): void {
  const conn: Conn = {
    socket, address: socket.remoteAddress ?? 'unknown', decoder: protectorDecoder(), nonce: protectorNonce(), authed: null, timer: null,
    put: null, discardPut: null, ackUpTo: null, fetching: false, sub: null, closed: false, strangerBytes: 0,
  };
  socket.on('error', () => {});
  const refusal = admitStranger(s.strangers, conn, conn.address);
  if (refusal !== null) {
    s.closed.TOO_MANY_CONNECTIONS = (s.closed.TOO_MANY_CONNECTIONS ?? 0) + 1;
    logClose(s, 'TOO_MANY_CONNECTIONS', { remote: conn.address, reason: refusal.detail });
    socket.destroy();
    return;
  }
  s.conns.add(conn);
  s.counts.accepted++;
  socket.setNoDelay(true);
  conn.timer = setTimeout(() => shut(s, conn, 'AUTH_TIMEOUT', `no valid hello within ${s.authTimeoutMs} ms`), s.authTimeoutMs);
  conn.timer.unref();
  socket.on('data', (c: Buffer) => onData(s, conn, c));
  socket.on('close', () => {
    conn.closed = true;
    forget(s, conn);
  });
  write(s, conn, { type: 'challenge', nonce: conn.nonce });
}

export async function createProtector(opts: ProtectorOptions): Promise<Protector> {
  const s: Service = {
    opts, authTimeoutMs: opts.authTimeoutMs ?? UNAUTHENTICATED_TIMEOUT_MS, store: createProtectorStore(opts.maxTotalBytes), keys: new Map(),
    strangers: createStrangers<Conn>(), holders: new Map(), conns: new Set(), closed: {}, lastLogged: new Map(), assemblingBytes: 0,
    counts: { accepted: 0, checkpointsStored: 0, entriesAppended: 0, fetchesServed: 0 },
  };
  const server: Server = createServer({ noDelay: true }, (socket) => onConnection(s, socket));
  server.maxConnections = PROTECTOR_MAX_SOCKETS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (e) => opts.log('error', 'protector.server.error', { error: e.message }));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : opts.port;
  const endpoint = `${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  opts.log('info', 'protector.listening', { endpoint });

  return {
    endpoint,
    port,
    guard(task, taskKey, maxStateBytes) {
      if (!isTaskKey(taskKey)) return { ok: false, code: 'BAD_ARGUMENT', detail: 'the task key is not TASK_KEY_BYTES bytes' };
      if (!Number.isSafeInteger(maxStateBytes) || maxStateBytes < 1 || maxStateBytes > PROTECTOR_MAX_CHECKPOINT_BYTES) {
        return { ok: false, code: 'BAD_ARGUMENT', detail: `maxStateBytes ${maxStateBytes} out of 1…${PROTECTOR_MAX_CHECKPOINT_BYTES}` };
      }
      const r = guardTask(s.store, task, maxStateBytes);
      if (!r.ok) return { ok: false, code: 'TOO_MANY_TASKS', detail: r.detail };
      s.keys.set(task, new Uint8Array(taskKey));
      return { ok: true };
    },
    release(task) {
      s.keys.delete(task);
      for (const conn of [...s.conns]) if (conn.authed?.task === task) shut(s, conn, 'RELEASED', `task ${task} was released`);
      return releaseTask(s.store, task);
    },
    async close() {
      for (const conn of [...s.conns]) shut(s, conn, 'SHUTDOWN', 'the protector is stopping');
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    stats: () => ({
      endpoint, strangers: s.strangers.conns.size, authenticated: s.holders.size, closed: { ...s.closed }, counts: { ...s.counts },
      assemblingBytes: s.assemblingBytes, store: storeStats(s.store),
    }),
  };
}
