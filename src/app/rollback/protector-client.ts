// The library's connection to its rank's protector (docs/PROTOCOL.md §11.4; radic-hmpl A.2.5,
// A.2.7): one TCP connection per process, authenticated with the task key (protector-auth.ts),
// over which the rank appends its receive-side log, puts its checkpoints and, as a replacement,
// fetches what the protector keeps. The protector's welcome is checked too (BAD_MAC): a process
// never logs to something that does not hold its task's key.
//
// Appends are pipelined: each returns a promise that resolves once the protector holds the entry
// (the acknowledgement RBML waits for before acknowledging the sender, PROTOCOL §11.3), and none
// waits for another; the protector's `appended {upTo}` settles every append up to it. A refused
// append rejects with the protector's code (LOG_FULL: checkpoint first). Checkpoints travel in
// chunks, one checkpoint at a time, waiting for the socket to drain between chunks so a 64 MiB
// state is never buffered twice. Every error is a ProtectorError with a stable code.
import { connect as netConnect, type Socket } from 'node:net';
import { MAX_TASK_PROCS, PROTECTOR_MAX_CHECKPOINT_BYTES, PROTECTOR_MAX_ENTRY_BYTES, PROTECTOR_MAX_LOG_BYTES } from '../../core/constants.ts';
import type { ProtectorCheckpoint } from '../../core/protector-store.ts';
import type { AppFrameDecoder } from '../../core/wire/app-wire.ts';
import { taskId } from '../../core/wire/basics.ts';
import {
  batchAppends, checkpointChunks, clientDecoder, encodeToProtector, wireFailure, type ProtectorCode, type ToClient, type ToProtector,
} from '../../core/wire/protector-wire.ts';
import { DIAL_RETRY_FIRST_MS, DIAL_RETRY_LIMIT, DIAL_RETRY_MAX_MS, UNAUTHENTICATED_TIMEOUT_MS } from '../gmpi/p2p-types.ts';
import { isTaskKey } from '../gmpi/hello-auth.ts';
import { protectorMac, protectorMacValid, protectorNonce } from './protector-auth.ts';

/** Appends (single or batches) awaiting the protector's acknowledgement at once. The library
 *  waits for them (RBML) so it never has more than its unacknowledged receives; beyond this it
 *  is a loop bug, refused with LIMIT rather than buffered without bound. */
export const PROTECTOR_MAX_PENDING_APPENDS = 65_536;

export type ProtectorErrorCode =
  | ProtectorCode
  /** No protector listens there, or it refused the connection before its challenge every time. */
  | 'CONNECT_FAILED'
  /** No welcome within the timeout. */
  | 'TIMEOUT'
  /** The connection closed, or the protector said something out of place. */
  | 'CONNECTION_LOST'
  | 'PROTOCOL'
  /** close() was called. */
  | 'CLOSED'
  | 'BAD_ARGUMENT'
  | 'LIMIT';

export class ProtectorError extends Error {
  constructor(readonly code: ProtectorErrorCode, message: string) {
    super(message);
    this.name = 'ProtectorError';
  }
}

export type ProtectorConnectOptions = {
  readonly host: string;
  readonly port: number;
  readonly task: string;
  readonly rank: number;
  /** The VPID holding the rank (PROTOCOL §11.2): a higher one fences the lower. */
  readonly incarnation: number;
  readonly taskKey: Uint8Array;
  /** UNAUTHENTICATED_TIMEOUT_MS unless given: the whole connect, retries included. */
  readonly timeoutMs?: number;
};

export type FetchedStore = {
  /** Oldest first (at most two). */
  checkpoints: ProtectorCheckpoint[];
  log: { pos: number; blob: Uint8Array }[];
  last: number;
};

type Waiter = { resolve: () => void; reject: (e: ProtectorError) => void };
/** The channel-memory messages (PROTOCOL §11.6), for cm-client.ts. */
export type CmAnswer = Extract<ToClient, { type: 'deposited' | 'pushed' }> | (Extract<ToClient, { type: 'error' }> & { op: 'deposit' | 'subscribe' });
export type CmHandler = { onAnswer(m: CmAnswer): void; onFail(e: ProtectorError): void };
type PendingAppend = Waiter & { first: number; last: number };
type FetchState = {
  resolve: (f: FetchedStore) => void;
  reject: (e: ProtectorError) => void;
  checkpoints: ProtectorCheckpoint[];
  partial: { id: number; logPos: number; buf: Uint8Array; received: number } | null;
  log: { pos: number; blob: Uint8Array }[];
  logBytes: number;
};

export class ProtectorClient {
  private readonly appends: PendingAppend[] = [];
  private readonly puts = new Map<number, Waiter>();
  private putChain: Promise<unknown> = Promise.resolve();
  private fetching: FetchState | null = null;
  private failure: ProtectorError | null = null;
  private cm: CmHandler | null = null;

  /** `last`: the rank's last log position the protector held at the welcome. */
  private constructor(private readonly socket: Socket, readonly last: number, private readonly decoder: AppFrameDecoder<ToClient>) {
    socket.on('data', (c: Buffer) => this.onData(c));
    socket.on('close', () => this.fail(new ProtectorError('CONNECTION_LOST', 'the connection to the protector closed')));
    // Frames that came with the welcome, then the rest (the handshake paused the socket).
    this.onData(new Uint8Array(0));
    socket.resume();
  }

  /** Connect and authenticate. Retries a connection closed before its challenge (the protector
   *  is full of strangers, PROTOCOL §9.5) with the G-MPI dialler's backoff. */
  static async connect(opts: ProtectorConnectOptions): Promise<ProtectorClient> {
    if (!isTaskKey(opts.taskKey)) throw new ProtectorError('BAD_ARGUMENT', 'taskKey must be TASK_KEY_BYTES bytes');
    if (!taskId.dec(opts.task, 'task').ok) throw new ProtectorError('BAD_ARGUMENT', `task ${JSON.stringify(opts.task)} is not a task id`);
    if (!Number.isInteger(opts.rank) || opts.rank < 0 || opts.rank >= MAX_TASK_PROCS) throw new ProtectorError('BAD_ARGUMENT', `rank ${opts.rank}: 0 to ${MAX_TASK_PROCS - 1}`);
    if (!Number.isInteger(opts.incarnation) || opts.incarnation < 0 || opts.incarnation > 0xffffffff) {
      throw new ProtectorError('BAD_ARGUMENT', `incarnation ${opts.incarnation} must be a u32`);
    }
    const deadline = Date.now() + (opts.timeoutMs ?? UNAUTHENTICATED_TIMEOUT_MS);
    for (let attempt = 1; ; attempt++) {
      const r = await handshake(opts, deadline);
      if (r.kind === 'ok') return new ProtectorClient(r.socket, r.last, r.decoder);
      if (r.kind === 'failed' || attempt >= DIAL_RETRY_LIMIT || Date.now() >= deadline) throw r.error;
      await new Promise((res) => setTimeout(res, Math.min(DIAL_RETRY_MAX_MS, DIAL_RETRY_FIRST_MS * 2 ** (attempt - 1))));
    }
  }

  /** Resolves once the protector holds entry `pos`. */
  append(pos: number, blob: Uint8Array): Promise<void> {
    if (blob.length > PROTECTOR_MAX_ENTRY_BYTES) return Promise.reject(new ProtectorError('BAD_ARGUMENT', `an entry of ${blob.length} bytes > ${PROTECTOR_MAX_ENTRY_BYTES}`));
    return this.sendAppend(pos, pos, [{ type: 'append', pos, blob }]);
  }

  /** Entries at positions first, first + 1, …: resolves once the protector holds them all. */
  appendBatch(first: number, blobs: readonly Uint8Array[]): Promise<void> {
    if (blobs.length === 0) return Promise.resolve();
    const big = blobs.find((b) => b.length > PROTECTOR_MAX_ENTRY_BYTES);
    if (big !== undefined) return Promise.reject(new ProtectorError('BAD_ARGUMENT', `an entry of ${big.length} bytes > ${PROTECTOR_MAX_ENTRY_BYTES}`));
    return this.sendAppend(first, first + blobs.length - 1, batchAppends(first, blobs));
  }

  private sendAppend(first: number, last: number, frames: ToProtector[]): Promise<void> {
    if (this.failure !== null) return Promise.reject(this.failure);
    if (!Number.isSafeInteger(first) || first < 1) return Promise.reject(new ProtectorError('BAD_ARGUMENT', `position ${first}`));
    if (this.appends.length >= PROTECTOR_MAX_PENDING_APPENDS) {
      return Promise.reject(new ProtectorError('LIMIT', `${this.appends.length} appends await their acknowledgement`));
    }
    return new Promise<void>((resolve, reject) => {
      this.appends.push({ first, last, resolve, reject });
      for (const f of frames) this.socket.write(encodeToProtector(f));
    });
  }

  /** Store checkpoint `id` taken at log position `logPos`: resolves once the protector holds it.
   *  Checkpoints go one at a time, in the order asked. */
  putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    if (bytes.length > PROTECTOR_MAX_CHECKPOINT_BYTES) {
      return Promise.reject(new ProtectorError('STATE_TOO_LARGE', `a checkpoint of ${bytes.length} bytes > ${PROTECTOR_MAX_CHECKPOINT_BYTES}`));
    }
    if (!Number.isSafeInteger(id) || !Number.isSafeInteger(logPos) || logPos < 0) return Promise.reject(new ProtectorError('BAD_ARGUMENT', `checkpoint ${id} at ${logPos}`));
    const run = this.putChain.then(() => this.sendPut(id, logPos, bytes));
    this.putChain = run.catch(() => {});
    return run;
  }

  private async sendPut(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    if (this.failure !== null) throw this.failure;
    if (this.puts.has(id)) throw new ProtectorError('BAD_ARGUMENT', `checkpoint ${id} is being stored already`);
    const stored = new Promise<void>((resolve, reject) => this.puts.set(id, { resolve, reject }));
    for (const { offset, chunk } of checkpointChunks(bytes)) {
      // Refused already (its first chunk was): the protector drops the rest anyway.
      if (this.failure !== null || !this.puts.has(id)) break;
      const more = this.socket.write(encodeToProtector({ type: 'put', id, logPos, size: bytes.length, offset, chunk }));
      if (!more) await drained(this.socket);
    }
    return stored;
  }

  /** Everything the protector keeps for this rank (a replacement's restore, RADIC A.2.7). */
  fetch(): Promise<FetchedStore> {
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.fetching !== null) return Promise.reject(new ProtectorError('BAD_ARGUMENT', 'a fetch is under way'));
    return new Promise((resolve, reject) => {
      this.fetching = { resolve, reject, checkpoints: [], partial: null, log: [], logBytes: 0 };
      this.socket.write(encodeToProtector({ type: 'fetch' }));
    });
  }

  /** The channel-memory role over this connection (cm-client.ts): `h` gets its answers and the
   *  connection's failure. */
  attachCm(h: CmHandler): void {
    this.cm = h;
    if (this.failure !== null) h.onFail(this.failure);
  }

  /** Send a channel-memory request; the failure if the connection has failed. */
  sendCm(m: Extract<ToProtector, { type: 'deposit' | 'subscribe' }>): ProtectorError | null {
    if (this.failure !== null) return this.failure;
    this.socket.write(encodeToProtector(m));
    return null;
  }

  /** Close the connection; whatever is pending rejects with CLOSED. */
  async close(): Promise<void> {
    this.fail(new ProtectorError('CLOSED', 'the client was closed'));
    if (this.socket.destroyed) return;
    await new Promise<void>((resolve) => {
      this.socket.once('close', () => resolve());
      this.socket.end();
      setTimeout(() => this.socket.destroy(), 200).unref();
    });
  }

  private onData(chunk: Uint8Array): void {
    this.decoder.feed(chunk);
    while (this.failure === null) {
      const r = this.decoder.next();
      if (!r.ok) return this.broken(`${wireFailure(r.code)} frame from the protector: ${r.detail}`);
      if (r.value === null) return;
      this.onMessage(r.value);
    }
  }

  private onMessage(m: ToClient): void {
    switch (m.type) {
      case 'appended': return this.settleAppends(m.upTo);
      case 'stored': {
        const w = this.puts.get(m.id);
        if (w === undefined) return this.broken(`stored ${m.id}: no such checkpoint was sent`);
        this.puts.delete(m.id);
        return w.resolve();
      }
      case 'error': return this.onError(m);
      case 'refused': return this.fail(new ProtectorError(m.code, `the protector closed the connection: ${m.reason}`));
      case 'checkpoint': case 'entries': case 'fetched': return this.onFetched(m);
      case 'challenge': case 'welcome': return this.broken(`${m.type} after the handshake`);
      case 'deposited': case 'pushed':
        if (this.cm === null) return this.broken(`${m.type} without a deposit or subscription`);
        return this.cm.onAnswer(m);
      default: {
        const never: never = m;
        return void never;
      }
    }
  }

  private settleAppends(upTo: number): void {
    let kept = 0;
    for (const a of this.appends) {
      if (a.last <= upTo) a.resolve();
      else this.appends[kept++] = a;
    }
    this.appends.length = kept;
  }

  private onError(m: Extract<ToClient, { type: 'error' }>): void {
    const e = new ProtectorError(m.code, `${m.op} ${m.ref} refused: ${m.reason}`);
    if (m.op === 'append') {
      const i = this.appends.findIndex((a) => a.first <= m.ref && m.ref <= a.last);
      if (i < 0) return;
      this.appends.splice(i, 1)[0]!.reject(e);
    } else if (m.op === 'deposit' || m.op === 'subscribe') {
      this.cm?.onAnswer({ ...m, op: m.op });
    } else if (m.op === 'put') {
      const w = this.puts.get(m.ref);
      this.puts.delete(m.ref);
      w?.reject(e);
    } else {
      const f = this.fetching;
      this.fetching = null;
      f?.reject(e);
    }
  }

  private onFetched(m: Extract<ToClient, { type: 'checkpoint' | 'entries' | 'fetched' }>): void {
    const f = this.fetching;
    if (f === null) return this.broken(`${m.type} without a fetch`);
    if (m.type === 'checkpoint') {
      if (m.offset === 0 && f.partial === null && f.checkpoints.length < 2) f.partial = { id: m.id, logPos: m.logPos, buf: new Uint8Array(m.size), received: 0 };
      const p = f.partial;
      if (p === null || p.id !== m.id || p.buf.length !== m.size || m.offset !== p.received || p.received + m.chunk.length > m.size) {
        return this.broken(`checkpoint chunk ${m.id}@${m.offset} out of place`);
      }
      p.buf.set(m.chunk, p.received);
      p.received += m.chunk.length;
      if (p.received === p.buf.length) {
        f.checkpoints.push({ id: p.id, logPos: p.logPos, bytes: p.buf });
        f.partial = null;
      }
    } else if (m.type === 'entries') {
      const next = f.log.length === 0 ? m.first : f.log[f.log.length - 1]!.pos + 1;
      f.logBytes += m.blobs.reduce((n, b) => n + b.length, 0);
      if (m.first !== next || f.logBytes > PROTECTOR_MAX_LOG_BYTES) return this.broken(`log entries from ${m.first} (expected ${next}, ${f.logBytes} bytes)`);
      m.blobs.forEach((blob, i) => f.log.push({ pos: m.first + i, blob }));
    } else {
      if (f.partial !== null) return this.broken('fetch ended inside a checkpoint');
      this.fetching = null;
      f.resolve({ checkpoints: f.checkpoints, log: f.log, last: m.last });
    }
  }

  private broken(detail: string): void {
    this.fail(new ProtectorError('PROTOCOL', detail));
    this.socket.destroy();
  }

  /** Reject everything pending with `e`; the client is unusable from now on. */
  private fail(e: ProtectorError): void {
    if (this.failure !== null) return;
    this.failure = e;
    for (const a of this.appends.splice(0)) a.reject(e);
    for (const w of this.puts.values()) w.reject(e);
    this.puts.clear();
    const f = this.fetching;
    this.fetching = null;
    f?.reject(e);
    this.cm?.onFail(e);
    if (e.code !== 'CLOSED') this.socket.destroy();
  }
}

type Handshake =
  | { kind: 'ok'; socket: Socket; last: number; decoder: AppFrameDecoder<ToClient> }
  /** Closed before the challenge: the protector was full of strangers; try again. */
  | { kind: 'retry'; error: ProtectorError }
  | { kind: 'failed'; error: ProtectorError };

/** One attempt: dial, answer the challenge, check the welcome. The decoder goes on with the
 *  client (it may hold frames that came right after the welcome). */
function handshake(opts: ProtectorConnectOptions, deadline: number): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = netConnect({ host: opts.host, port: opts.port, noDelay: true });
    const decoder = clientDecoder();
    const nonce = protectorNonce();
    let challenged: Uint8Array | null = null;
    let connected = false;
    let done = false;
    const finish = (r: Handshake): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      if (r.kind === 'ok') socket.pause();
      else socket.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish({ kind: 'failed', error: new ProtectorError('TIMEOUT', 'no welcome from the protector in time') }), Math.max(0, deadline - Date.now()));
    const transcript = (role: 'process' | 'protector', protectorNonceBytes: Uint8Array) => ({
      role, task: opts.task, rank: opts.rank, incarnation: opts.incarnation, processNonce: nonce, protectorNonce: protectorNonceBytes,
    });
    const onMessage = (m: ToClient): void => {
      if (challenged === null && m.type === 'challenge') {
        challenged = m.nonce;
        const mac = protectorMac(opts.taskKey, transcript('process', m.nonce));
        socket.write(encodeToProtector({ type: 'hello', task: opts.task, rank: opts.rank, incarnation: opts.incarnation, nonce, mac }));
      } else if (challenged !== null && m.type === 'welcome') {
        if (!protectorMacValid(opts.taskKey, transcript('protector', challenged), m.mac)) {
          finish({ kind: 'failed', error: new ProtectorError('BAD_MAC', 'the welcome does not verify under the task key: not our protector') });
        } else {
          finish({ kind: 'ok', socket, last: m.last, decoder });
        }
      } else if (m.type === 'refused') {
        finish({ kind: 'failed', error: new ProtectorError(m.code, `the protector refused: ${m.reason}`) });
      } else {
        finish({ kind: 'failed', error: new ProtectorError('PROTOCOL', `${m.type} during the handshake`) });
      }
    };
    const onData = (c: Buffer): void => {
      decoder.feed(c);
      while (!done) {
        const r = decoder.next();
        if (!r.ok) return finish({ kind: 'failed', error: new ProtectorError('PROTOCOL', r.detail) });
        if (r.value === null) return;
        onMessage(r.value);
      }
    };
    const onClose = (): void => {
      const error = new ProtectorError('CONNECT_FAILED', `no connection to the protector at ${opts.host}:${opts.port}`);
      finish(challenged === null && connected ? { kind: 'retry', error } : { kind: 'failed', error });
    };
    socket.once('connect', () => { connected = true; });
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.on('error', () => {});
  });
}

/** Resolves when `socket` can take more, or has closed. */
export function drained(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.destroyed) return resolve();
    const done = (): void => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.once('drain', done);
    socket.once('close', done);
  });
}
