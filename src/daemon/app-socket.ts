// The agent's end of the process↔agent channel (spec §7 items 1–7; src/core/wire/app-wire.ts):
// a Unix stream socket server at the path the agent gives its processes as TRINE_AGENT_SOCKET.
// This file owns the socket file, the hello handshake (the agent's authenticate callback checks
// the token), one connection per (task, VPID), bounded outgoing queues, and telling the agent
// how each process went away: a finalize before the close is a clean Process-disconnect, a
// close without one is a crash (spec §6.3, §7 item 7). It forwards signals and keeps no signal
// state of its own: the library enforces one outstanding request per process (spec §4.4).
// A bad frame from a process closes that connection with a typed reason; it never throws.
//
// Where the socket lives (issue 13 item 6). Task processes run as an unprivileged task user
// (cluster.json `taskUser`, src/io/spawner.ts) that must reach this socket and nothing else of
// the agent's. The agent listens on a Linux abstract socket, `@trine/<cluster>/<agent>`
// (agentSocketName; `@` stands for the leading NUL byte, which an environment variable cannot
// hold): it has no file, so it needs no directory the task user could list or traverse, and
// the cluster directory with its keys, records and logs stays 0700, unreachable to tasks. A
// file under the cluster dir (run/app/ 0711 with the socket 0666) was the alternative: it
// makes every ancestor of the cluster dir searchable by the task user — a bundle dir is 0700,
// a `trine up` dir may sit under a 0700 home or mkdtemp dir — and a file socket 0666 admits
// every local user anyway. Abstract sockets belong to the network namespace, as the task
// processes do (they share their agent's). Access control is the per-process token: every
// connection must show, within HELLO_TIMEOUT_MS, the 128-bit token the agent put in that
// process's environment, readable only by its own uid and root; strangers are bounded by
// MAX_UNIDENTIFIED_CONNECTIONS. The welcome then hands the process its task key (PROTOCOL
// §9.5), on this socket only. A path without `@` is an ordinary socket file (tests, one user):
// stale files are replaced, and the file is 0600.
//
// Strangers guessing tokens (issue 14 item 8): every hello is checked, and what follows a
// refusal is bounded (src/daemon/app-refusals.ts): an answer with the reason only within a
// token bucket, and one log line per interval for all connections that end unidentified.
// Unidentified connections are bounded; when full the oldest is dropped, not the newcomer, so
// connections that never say hello cannot keep a starting process out. A process whose
// connection ends before the agent said anything dials again (src/app/link/worker.cjs,
// APP_CONNECT_ATTEMPTS), which covers being dropped as the oldest during a flood.
//
// The handover (PROTOCOL §9.4.1, app-wire.ts): a process's library says hello from its main
// thread, then its worker thread dials again and sends `attach` with the same token. The agent
// stops writing to the first connection and answers on the second with `attached {replayed}`
// and the frames it had sent on the first since the welcome (kept for this, at most
// MAX_REPLAY_BYTES), so the worker sees every one, whatever the main thread had read; from then
// on send() writes to the second. The library's main thread writes every request on the first
// connection for the process's life, so one connection carries them all, in order: both are
// read alike (the second carries a DGRP tester's reports). The process's connection,
// for onClosed and its crash semantics, is the second one from the attach on: a finalize that
// came on the first counts, the first one's end is only logged (an end this agent forced on it,
// a malformed frame say, ends the second too: not an OS error, which the process's exit may
// cause on a connection it never read to the end), and the second one's end closes the first.
import { lstat, unlink, chmod } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { unreachable, type DropCode } from '../base/result.ts';
import type { SignalRequest } from '../core/signals.ts';
import {
  agentToProc, AppFrameDecoder, encodeAppFrame, MAX_APP_FRAME_BYTES, procToAgent, type AgentToProc, type ProcToAgent,
} from '../core/wire/app-wire.ts';
import type { RollbackMark } from '../core/wire/recovery.ts';
import type { AppDgrp } from '../core/agent-procs-app.ts';
import { trace, tracing } from '../io/trace.ts';
import { Refusals, type RefusalsLine, type RefusalSample } from './app-refusals.ts';

// ---- Named limits (STYLE.md 9) -----------------------------------------------------------------

/** A linked process sends hello as soon as its socket connects (the library does it first
 *  thing); 2 s covers a loaded host, and a silent connection holds a slot no longer. */
export const HELLO_TIMEOUT_MS = 2000;
/** Connections that have not yet said hello. A task start connects every local process within
 *  milliseconds; 64 covers such a burst, and more unidentified sockets than that are strays. */
export const MAX_UNIDENTIFIED_CONNECTIONS = 64;
/** Bytes queued for one process that it has not read. Four of the largest frame (a full
 *  mapping): a process that stops reading is disconnected rather than growing agent memory. */
export const MAX_OUTGOING_QUEUE_BYTES = 4 * MAX_APP_FRAME_BYTES;
/** Frames sent on a process's first connection since its welcome, kept for the handover's
 *  replay (PROTOCOL §9.4.1). The worker attaches tens of milliseconds after the hello, before
 *  more than the mapping and a few signals were sent; past this an attach is refused (the
 *  process then loses its link: a crash, not a silent gap). Two of the largest frames, half the
 *  outgoing queue: the replay and what follows it fit in the queue. */
export const MAX_REPLAY_BYTES = 2 * MAX_APP_FRAME_BYTES;
/** A refusal is written, then the socket ends; a peer that does not read it is cut off after. */
export const REFUSAL_LINGER_MS = 500;
/** Probing an existing socket file on listen: a live server answers on loopback at once. */
export const STALE_PROBE_TIMEOUT_MS = 1000;

// ---- Types -------------------------------------------------------------------------------------

/** Why a connection was closed. */
export type AppCloseCode =
  | DropCode
  | 'HELLO_TIMEOUT'
  | 'HELLO_EXPECTED'
  | 'UNEXPECTED_HELLO'
  | 'ATTACH_REFUSED'
  | 'AUTH_REFUSED'
  | 'DUPLICATE'
  | 'TOO_MANY_UNIDENTIFIED'
  | 'SLOW_READER'
  | 'AFTER_FINALIZE'
  | 'PEER_CLOSED'
  | 'SOCKET_ERROR'
  | 'DISCONNECTED'
  | 'SERVER_CLOSED';

export type AppSocketLogEvent =
  | { readonly type: 'app.connected'; readonly task: string; readonly vpid: number }
  /** Connections that ended before a hello was accepted, at most one line per interval
   *  (src/daemon/app-refusals.ts). */
  | ({ readonly type: 'app.refusals' } & RefusalsLine<AppCloseCode>)
  | { readonly type: 'app.finalized'; readonly task: string; readonly vpid: number }
  /** The handover: the process's worker thread took over its connection. */
  | { readonly type: 'app.attached'; readonly task: string; readonly vpid: number }
  | {
      readonly type: 'app.closed';
      readonly task: string | null;
      readonly vpid: number | null;
      readonly code: AppCloseCode;
      readonly detail: string;
      /** finalize was received before the close. */
      readonly clean: boolean;
    };

/** The agent's socket: abstract (see the header). `cluster` is cluster.json's id, so two
 *  clusters on one host (or one network namespace) never share a name. */
export function agentSocketName(cluster: string, agent: string): string {
  return `@trine/${cluster}/${agent}`;
}

/** The address node:net takes for a socket name: `@…` is the abstract namespace. */
export function socketAddress(path: string): string {
  return path.startsWith('@') ? `\0${path.slice(1)}` : path;
}

export type AppSocketServerOptions = {
  /** null accepts the hello; a string refuses it with that reason. */
  readonly authenticate: (task: string, vpid: number, token: string) => string | null;
  /** The task key the welcome hands an accepted process (PROTOCOL §9.5; 32 bytes); null
   *  refuses the process (no key known for it). */
  readonly taskKey: (task: string, vpid: number) => Uint8Array | null;
  readonly onConnected?: (task: string, vpid: number, endpoint: string) => void;
  readonly onSignal?: (task: string, vpid: number, req: SignalRequest) => void;
  readonly onFinalized?: (task: string, vpid: number) => void;
  /** A rollback task's process stored a checkpoint (PROTOCOL §11.4). */
  readonly onMark?: (task: string, vpid: number, mark: RollbackMark) => void;
  /** A DGRP task's process reported a testing interval or reached a barrier (PROTOCOL §12). */
  readonly onDgrp?: (task: string, vpid: number, message: AppDgrp) => void;
  /** A process reported its progress (PROTOCOL §13.2). */
  readonly onProgress?: (task: string, vpid: number, permille: number) => void;
  /** Once per accepted connection, when it is gone; clean = finalize came first. Not called for
   *  the connections close() ends. */
  readonly onClosed?: (task: string, vpid: number, clean: boolean) => void;
  readonly log?: (event: AppSocketLogEvent) => void;
  readonly helloTimeoutMs?: number;
  readonly maxUnidentified?: number;
  readonly maxOutgoingQueueBytes?: number;
  readonly maxFrameBytes?: number;
  readonly refusalBurst?: number;
  readonly refusalsPerSecond?: number;
  readonly refusalLogIntervalMs?: number;
};

export type AppSocketErrorCode = 'PATH_IN_USE' | 'ALREADY_LISTENING' | 'BAD_OPTION';

export class AppSocketError extends Error {
  constructor(readonly code: AppSocketErrorCode, message: string) {
    super(message);
    this.name = 'AppSocketError';
  }
}

type Conn = {
  readonly socket: Socket;
  readonly decoder: AppFrameDecoder<ProcToAgent>;
  id: { task: string; vpid: number } | null;
  helloTimer: NodeJS.Timeout | null;
  finalized: boolean;
  /** The first reason we closed it for; null: the peer closed it. */
  closeReason: { code: AppCloseCode; detail: string } | null;
  /** Ended by close(): no callbacks. */
  silent: boolean;
  /** The hello it was refused for, for the log. */
  hello: { task: string; vpid: number } | null;
  /** Refused past the refusal bucket: closed without an answer. */
  unanswered: boolean;
  /** The handover, on the first connection: the second, which took over. */
  movedTo: Conn | null;
  /** …and until then, the frames sent on it since the welcome, to replay; null: not keeping
   *  (before the welcome, after the attach, or past MAX_REPLAY_BYTES: 'overflow'). */
  sent: { frames: Uint8Array[]; bytes: number } | 'overflow' | null;
  /** The handover, on the second connection while the first is open. */
  predecessor: Conn | null;
};



const keyOf = (task: string, vpid: number): string => `${task}/${vpid}`;

// ---- Server ------------------------------------------------------------------------------------

export class AppSocketServer {
  private readonly unidentified = new Set<Conn>();
  private readonly byKey = new Map<string, Conn>();
  private closed = false;
  private readonly helloTimeoutMs: number;
  private readonly maxUnidentified: number;
  private readonly maxOutgoingQueueBytes: number;
  private readonly maxFrameBytes: number;
  private readonly refusals: Refusals<AppCloseCode>;

  private constructor(readonly path: string, private readonly server: Server, private readonly opts: AppSocketServerOptions) {
    this.helloTimeoutMs = opts.helloTimeoutMs ?? HELLO_TIMEOUT_MS;
    this.maxUnidentified = opts.maxUnidentified ?? MAX_UNIDENTIFIED_CONNECTIONS;
    this.maxOutgoingQueueBytes = opts.maxOutgoingQueueBytes ?? MAX_OUTGOING_QUEUE_BYTES;
    this.maxFrameBytes = opts.maxFrameBytes ?? MAX_APP_FRAME_BYTES;
    this.refusals = new Refusals<AppCloseCode>({
      ...(opts.refusalBurst === undefined ? {} : { burst: opts.refusalBurst }),
      ...(opts.refusalsPerSecond === undefined ? {} : { perSecond: opts.refusalsPerSecond }),
      ...(opts.refusalLogIntervalMs === undefined ? {} : { logIntervalMs: opts.refusalLogIntervalMs }),
      log: (line) => opts.log?.({ type: 'app.refusals', ...line }),
    });
    server.on('connection', (socket) => this.adopt(socket));
  }

  /** Listen at `path`, replacing a stale socket file (one no server answers on). A live server
   *  at the path, or a file that is not a socket, is an error: neither is ours to remove. */
  static async listen(path: string, opts: AppSocketServerOptions): Promise<AppSocketServer> {
    for (const [name, v] of [['helloTimeoutMs', opts.helloTimeoutMs], ['maxUnidentified', opts.maxUnidentified],
      ['maxOutgoingQueueBytes', opts.maxOutgoingQueueBytes], ['maxFrameBytes', opts.maxFrameBytes], ['refusalBurst', opts.refusalBurst],
      ['refusalsPerSecond', opts.refusalsPerSecond], ['refusalLogIntervalMs', opts.refusalLogIntervalMs]] as const) {
      if (v !== undefined && (!Number.isSafeInteger(v) || v < 1)) throw new AppSocketError('BAD_OPTION', `${name} must be a positive integer, got ${v}`);
    }
    const abstract = path.startsWith('@');
    if (!abstract) await removeStaleSocket(path);
    const server = createServer({ allowHalfOpen: false });
    await new Promise<void>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException): void => {
        reject(abstract && e.code === 'EADDRINUSE' ? new AppSocketError('ALREADY_LISTENING', `a server is already listening at ${path}: is another agent running?`) : e);
      };
      server.once('error', onError);
      server.listen(socketAddress(path), () => {
        server.off('error', onError);
        resolve();
      });
    });
    // A socket file: only the agent's user may connect; the token is the second line of defence.
    if (!abstract) await chmod(path, 0o600);
    return new AppSocketServer(path, server, opts);
  }

  /** Processes connected and identified now. */
  get connections(): number {
    return this.byKey.size;
  }

  isConnected(task: string, vpid: number): boolean {
    return this.byKey.has(keyOf(task, vpid));
  }

  /** Queue `msg` to the process; false if it is not connected. A process that lets its queue
   *  grow beyond the bound is disconnected (SLOW_READER) and false is returned. */
  send(task: string, vpid: number, msg: AgentToProc): boolean {
    const conn = this.byKey.get(keyOf(task, vpid));
    if (conn === undefined || conn.closeReason !== null) return false;
    return this.write(conn, msg);
  }

  /** Tell the process why (a `refused` frame) and close its connection. */
  disconnect(task: string, vpid: number, reason: string): void {
    const conn = this.byKey.get(keyOf(task, vpid));
    if (conn === undefined || conn.closeReason !== null) return;
    this.refuseAndEnd(conn, 'DISCONNECTED', reason);
  }

  /** Stop listening, end every connection without callbacks, and remove the socket file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const all = [...this.unidentified, ...[...this.byKey.values()].flatMap((c) => (c.predecessor === null ? [c] : [c, c.predecessor]))];
    for (const conn of all) {
      conn.silent = true;
      this.destroy(conn, 'SERVER_CLOSED', 'server closed');
    }
    this.refusals.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (!this.path.startsWith('@')) await unlink(this.path).catch(() => undefined);
  }

  // ---- Connections -----------------------------------------------------------------------------

  private adopt(socket: Socket): void {
    const conn: Conn = {
      socket, decoder: new AppFrameDecoder(procToAgent, this.maxFrameBytes), id: null, helloTimer: null,
      finalized: false, closeReason: null, silent: false, hello: null, unanswered: false, movedTo: null, predecessor: null, sent: null,
    };
    socket.on('error', (e: NodeJS.ErrnoException) => {
      if (conn.closeReason === null) conn.closeReason = { code: 'SOCKET_ERROR', detail: e.code ?? e.message };
    });
    socket.on('close', () => this.onClose(conn));
    if (this.closed) {
      this.unidentified.add(conn);
      this.destroy(conn, 'SERVER_CLOSED', 'server closed');
      return;
    }
    // Full: the oldest goes, not the newcomer. A starting process says hello at once, so
    // connections that never do cannot keep it out (a dropped one reconnects: worker.cjs).
    if (this.unidentified.size >= this.maxUnidentified) {
      const oldest = this.unidentified.values().next().value as Conn | undefined;
      if (oldest !== undefined) this.destroy(oldest, 'TOO_MANY_UNIDENTIFIED', `more than ${this.maxUnidentified} connections have not said hello: the oldest goes`);
    }
    this.unidentified.add(conn);
    conn.helloTimer = setTimeout(() => this.destroy(conn, 'HELLO_TIMEOUT', `no hello within ${this.helloTimeoutMs} ms`), this.helloTimeoutMs);
    socket.on('data', (chunk: Buffer) => {
      if (tracing()) trace(`app.rx ${chunk.length}`);
      this.onData(conn, chunk);
    });
  }

  private onData(conn: Conn, chunk: Buffer): void {
    if (conn.closeReason !== null) return;
    conn.decoder.feed(chunk);
    for (;;) {
      const r = conn.decoder.next();
      if (!r.ok) {
        this.destroy(conn, r.code, r.detail);
        return;
      }
      if (r.value === null) return;
      this.onMessage(conn, r.value);
      if (conn.closeReason !== null) return;
    }
  }

  private onMessage(conn: Conn, msg: ProcToAgent): void {
    if (conn.id === null) {
      if (msg.type === 'hello') return this.onHello(conn, msg);
      if (msg.type === 'attach') return this.onAttach(conn, msg);
      this.destroy(conn, 'HELLO_EXPECTED', `first frame was ${msg.type}`);
      return;
    }
    const { task, vpid } = conn.id;
    // Finalized on the other connection of the handover: what still comes on this one is late,
    // not wrong (a DGRP tester's report from its own thread), and is dropped without a word.
    const finalizedThere = !conn.finalized && (conn.predecessor?.finalized === true || conn.movedTo?.finalized === true);
    switch (msg.type) {
      case 'hello':
      case 'attach':
        this.destroy(conn, 'UNEXPECTED_HELLO', `${msg.type} on a connection that said hello`);
        return;
      case 'signal':
        if (conn.finalized) {
          this.destroy(conn, 'AFTER_FINALIZE', 'signal after finalize');
          return;
        }
        if (finalizedThere) return;
        this.opts.onSignal?.(task, vpid, { signum: msg.signum, dest: msg.dest, arg: msg.arg, epoch: msg.epoch });
        return;
      case 'mark': {
        const { type: _t, ...mark } = msg;
        this.opts.onMark?.(task, vpid, mark);
        return;
      }
      case 'dgrp.report':
      case 'dgrp.arrive':
        if (conn.finalized) {
          this.destroy(conn, 'AFTER_FINALIZE', `${msg.type} after finalize`);
          return;
        }
        if (finalizedThere) return;
        this.opts.onDgrp?.(task, vpid, msg);
        return;
      case 'progress':
        // One sent as the process finalizes is late, not wrong: nothing is left to judge.
        if (!conn.finalized && !finalizedThere) this.opts.onProgress?.(task, vpid, msg.permille);
        return;
      case 'finalize':
        // Once per process: the handover's two connections may both say it (PROTOCOL §9.4.1).
        if (conn.finalized || conn.movedTo?.finalized === true || conn.predecessor?.finalized === true) {
          conn.finalized = true;
          return;
        }
        conn.finalized = true;
        this.opts.log?.({ type: 'app.finalized', task, vpid });
        this.opts.onFinalized?.(task, vpid);
        return;
      default:
        unreachable(msg);
    }
  }

  private onHello(conn: Conn, hello: Extract<ProcToAgent, { type: 'hello' }>): void {
    const { task, vpid, token, endpoint } = hello;
    if (conn.helloTimer !== null) clearTimeout(conn.helloTimer);
    conn.helloTimer = null;
    conn.hello = { task, vpid };
    const refusal = this.opts.authenticate(task, vpid, token);
    if (refusal !== null) return this.refuse(conn, 'AUTH_REFUSED', refusal);
    const taskKey = this.opts.taskKey(task, vpid);
    if (taskKey === null) return this.refuse(conn, 'AUTH_REFUSED', `no task key for ${task}/${vpid} on this node`);
    const key = keyOf(task, vpid);
    if (this.byKey.has(key)) return this.refuse(conn, 'DUPLICATE', `process ${key} is already connected`);
    this.unidentified.delete(conn);
    conn.id = { task, vpid };
    this.byKey.set(key, conn);
    this.opts.log?.({ type: 'app.connected', task, vpid });
    if (!this.write(conn, { type: 'welcome', taskKey })) return;
    conn.sent = { frames: [], bytes: 0 };
    this.opts.onConnected?.(task, vpid, endpoint);
  }

  /** The handover's second connection (see the header): the same token as the hello, for a
   *  process connected on one connection that has neither finalized nor moved yet. */
  private onAttach(conn: Conn, attach: Extract<ProcToAgent, { type: 'attach' }>): void {
    const { task, vpid, token } = attach;
    if (conn.helloTimer !== null) clearTimeout(conn.helloTimer);
    conn.helloTimer = null;
    conn.hello = { task, vpid };
    const refusal = this.opts.authenticate(task, vpid, token);
    if (refusal !== null) return this.refuse(conn, 'AUTH_REFUSED', refusal);
    const key = keyOf(task, vpid);
    const first = this.byKey.get(key);
    if (first === undefined || first.closeReason !== null) return this.refuse(conn, 'ATTACH_REFUSED', `process ${key} is not connected`);
    if (first.predecessor !== null || first.movedTo !== null) return this.refuse(conn, 'ATTACH_REFUSED', `process ${key} has already attached`);
    if (first.finalized) return this.refuse(conn, 'ATTACH_REFUSED', `process ${key} has finalized`);
    const sent = first.sent;
    if (sent === 'overflow') return this.refuse(conn, 'ATTACH_REFUSED', `more than ${MAX_REPLAY_BYTES} bytes were sent to process ${key} before its attach`);
    if (sent === null) return this.refuse(conn, 'ATTACH_REFUSED', `process ${key} was not welcomed`);
    this.unidentified.delete(conn);
    conn.id = { task, vpid };
    conn.predecessor = first;
    first.movedTo = conn;
    first.sent = null;
    this.byKey.set(key, conn);
    this.opts.log?.({ type: 'app.attached', task, vpid });
    if (!this.write(conn, { type: 'attached', replayed: sent.frames.length })) return;
    for (const frame of sent.frames) conn.socket.write(frame);
    this.checkQueue(conn);
  }

  private write(conn: Conn, msg: AgentToProc): boolean {
    if (tracing()) trace(`app.tx ${msg.type}${conn.id === null ? '' : ` ${conn.id.task}/${conn.id.vpid}`}`);
    const frame = encodeAppFrame(agentToProc, msg);
    conn.socket.write(frame);
    const sent = conn.sent;
    if (sent !== null && sent !== 'overflow') {
      sent.frames.push(frame);
      sent.bytes += frame.length;
      if (sent.bytes > MAX_REPLAY_BYTES) conn.sent = 'overflow';
    }
    return this.checkQueue(conn);
  }

  /** A process that does not read is cut off past the bound on its queue. */
  private checkQueue(conn: Conn): boolean {
    if (conn.socket.writableLength > this.maxOutgoingQueueBytes) {
      this.destroy(conn, 'SLOW_READER', `${conn.socket.writableLength} bytes unread > ${this.maxOutgoingQueueBytes}`);
      return false;
    }
    return true;
  }

  /** A refused hello: answered with its reason while the refusal bucket lasts, else the
   *  connection is destroyed at once. Either way it is counted when it closes, never logged on
   *  its own. */
  private refuse(conn: Conn, code: AppCloseCode, reason: string): void {
    if (this.refusals.mayAnswer()) return this.refuseAndEnd(conn, code, reason);
    conn.unanswered = true;
    this.destroy(conn, code, reason);
  }

  /** Write a refusal and end; a peer that does not read it is cut off after REFUSAL_LINGER_MS. */
  private refuseAndEnd(conn: Conn, code: AppCloseCode, reason: string): void {
    conn.closeReason = { code, detail: reason };
    if (conn.helloTimer !== null) clearTimeout(conn.helloTimer);
    conn.helloTimer = null;
    conn.socket.end(encodeAppFrame(agentToProc, { type: 'refused', reason }));
    setTimeout(() => conn.socket.destroy(), REFUSAL_LINGER_MS).unref();
  }

  private destroy(conn: Conn, code: AppCloseCode, detail: string): void {
    if (conn.closeReason === null) conn.closeReason = { code, detail };
    if (conn.helloTimer !== null) clearTimeout(conn.helloTimer);
    conn.helloTimer = null;
    conn.socket.destroy();
  }

  private onClose(conn: Conn): void {
    if (conn.helloTimer !== null) clearTimeout(conn.helloTimer);
    conn.helloTimer = null;
    this.unidentified.delete(conn);
    const reason = conn.closeReason ?? { code: 'PEER_CLOSED' as const, detail: conn.finalized ? 'after finalize' : 'closed without finalize' };
    const id = conn.id;
    if (id === null) {
      // A stranger's or a refused connection: counted, not logged one by one.
      const sample: RefusalSample<AppCloseCode> = { code: reason.code, task: conn.hello?.task ?? null, vpid: conn.hello?.vpid ?? null, reason: reason.detail };
      if (!conn.silent) this.refusals.count(sample, conn.unanswered);
      return;
    }
    const next = conn.movedTo;
    if (next !== null && next.predecessor === conn) {
      // The handover's first connection ended: a finalize it carried still counts; an end this
      // agent forced on it (not an OS error) ends the second too (see the header).
      next.predecessor = null;
      next.finalized ||= conn.finalized;
      const forced = conn.closeReason !== null && conn.closeReason.code !== 'SOCKET_ERROR' && !conn.silent;
      this.opts.log?.({ type: 'app.closed', task: id.task, vpid: id.vpid, code: reason.code, detail: `${reason.detail} (the first connection, moved)`, clean: !forced });
      if (forced && conn.closeReason !== null) this.destroy(next, conn.closeReason.code, `the first connection: ${conn.closeReason.detail}`);
      return;
    }
    if (next !== null) return; // moved, and the second one already ended: it was reported then
    if (this.byKey.get(keyOf(id.task, id.vpid)) === conn) this.byKey.delete(keyOf(id.task, id.vpid));
    const prev = conn.predecessor;
    conn.predecessor = null;
    if (prev !== null && prev.closeReason === null) this.destroy(prev, 'DISCONNECTED', 'its second connection ended');
    const clean = conn.finalized || (prev?.finalized ?? false);
    this.opts.log?.({ type: 'app.closed', task: id.task, vpid: id.vpid, code: reason.code, detail: reason.detail, clean });
    if (!conn.silent) this.opts.onClosed?.(id.task, id.vpid, clean);
  }
}

/** Remove `path` if it is a socket file nobody listens on (left by a crashed agent). */
async function removeStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!isSocket) throw new AppSocketError('PATH_IN_USE', `${path} exists and is not a socket: move it away or choose another path`);
  const live = await new Promise<boolean>((resolve) => {
    const probe = connect(path);
    const timer = setTimeout(() => {
      probe.destroy();
      resolve(true);
    }, STALE_PROBE_TIMEOUT_MS);
    probe.once('connect', () => {
      clearTimeout(timer);
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
  if (live) throw new AppSocketError('ALREADY_LISTENING', `a server is already listening at ${path}: is another agent running?`);
  await unlink(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOENT') throw e;
  });
}
