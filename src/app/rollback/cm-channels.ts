// The rank channels of a rollback task under channel memories (`--logging cm`, docs/PROTOCOL.md
// §11.6; mpichv-dgrp 1.1, 1.2.1–1.2.4, 1.5): the message layer G-MPI's communicators use, where
// every message goes through its receiver's home channel memory (CM, the receiver's protector)
// and none over the P2P mesh.
//
// - Send (1.2.1): number the message (ssn per destination, checkpointed), deposit its log entry
//   at the destination's home CM, and complete when the CM holds it (pessimistic, remote: the
//   message is logged before its receiver can get it). A re-executed send (a replacement going
//   over its past again) is deposited again and the CM answers it as a duplicate by its ssn, at
//   once (silent re-execution, 1.2.4): it never blocks and is never delivered twice.
// - Receive (1.2.1, 1.5 item 3): this rank's connection to its home CM is subscribed to its log;
//   the entries arrive in log order and join the queue in that order; a receive takes the
//   earliest-arrived matching message. Arrival order IS the CM's log order, so a wildcard
//   receive is decided by the CM's total order per receiver, and on replay the same log gives
//   the same choice: no determinant is logged. (G-MPI has no probe or test whose outcome depends
//   on timing.) A message to oneself goes through the CM too, so its place in that order is
//   fixed as well.
// - Checkpoint (1.2.2): the log position consumed (entries in the queue or taken) is the
//   checkpoint's position; the queue is in the checkpoint.
// - Restart (1.2.4): the replacement fetches its checkpoint and log from its home CM, replays
//   the log after the checkpoint in order, then subscribes from there.
//
// A failed CM connection (its node died, a refusal) ends the process visibly (onFatal): the CM
// is assumed stable (FAULT-MODEL "Rollback recovery").
import { assert } from '../../base/result.ts';
import { CM_MAX_FRAGMENTS } from '../../core/channel-memory.ts';
import { ANY_SOURCE, type Message } from '../gmpi/matching.ts';
import { P2PError } from '../gmpi/p2p-types.ts';
import type { RollbackChannels } from './channels-api.ts';
import { concatBytes } from '../../base/bytes.ts';
import { createChannelState, LOG_FRAGMENT_BYTES, MAX_QUEUED_MESSAGES, replayMessage, take, type ChannelState, type Envelope, type Pattern } from './channels.ts';
import type { CmClient } from './cm-client.ts';
import { decodeLogEntry, encodeMessageEntries, type ChannelSnapshot, type LogEntry } from './codec.ts';
import { RankLayer } from './rank-layer.ts';

/** The largest payload one send may carry under channel memories: CM_MAX_FRAGMENTS log entries
 *  of LOG_FRAGMENT_BYTES (64 MiB), which the CM appends together (PROTOCOL §11.6). */
export const CM_MAX_MESSAGE_BYTES = CM_MAX_FRAGMENTS * LOG_FRAGMENT_BYTES;

export type CmChannelsOptions = {
  readonly rank: number;
  /** VPID per rank at start (for logs; the CM addresses ranks). */
  readonly vpids: readonly number[];
  /** The home CM of each rank (its endpoint); homes[rank] is this rank's own. */
  readonly homes: readonly string[];
  /** This rank's connection to its home CM (its store, its subscription, its deposits there). */
  readonly home: CmClient;
  /** A connection to another CM, as this rank (authenticated, fenced by incarnation). */
  readonly connect: (endpoint: string) => Promise<CmClient>;
  /** A CM failed or broke the protocol: the process must fail visibly. */
  readonly onFatal: (e: Error) => void;
  /** Each entry the CM pushes, in log order: the rank chains its log (log-chain.ts). */
  readonly observe?: (pos: number, blob: Uint8Array) => void;
};

type RecvWaiter = { pattern: Pattern; index: number; resolve: (m: Message) => void; reject: (e: Error) => void };

export class CmChannels extends RankLayer implements RollbackChannels {
  readonly self: number;
  readonly st: ChannelState;
  private readonly clients = new Map<string, Promise<CmClient>>();
  private recvWaiters: RecvWaiter[] = [];
  private replayedTo: number | null = null;
  /** The fragments of a message read so far (its entries are contiguous in the log). */
  private partial: { source: number; env: Envelope; parts: Uint8Array[]; total: number } | null = null;
  private onCaughtUp: (() => void) | null = null;
  readonly counters = { deposits: 0, pushed: 0, replayed: 0 };

  constructor(private readonly o: CmChannelsOptions) {
    super();
    assert(o.homes.length === o.vpids.length && o.home.endpoint === o.homes[o.rank], 'one home per rank, ours the store');
    this.self = o.rank;
    this.st = createChannelState(o.rank, o.vpids.length);
    for (let r = 0; r < this.st.size; r++) this.st.peerHave[r] = Number.MAX_SAFE_INTEGER; // sends never wait for a peer
    this.clients.set(o.home.endpoint, Promise.resolve(o.home));
    this.watch(o.home);
  }


  /** Subscribe to this rank's log after what it holds (restored and replayed). */
  start(): void {
    this.o.home.subscribe(this.st.logPos, (first, blobs) => this.onPushed(first, blobs));
  }

  // ---- the message layer CommLayer uses (ranks for VPIDs) --------------------------------------


  // ---- membership: the CM holds every message, so a death pauses nothing ------------------------

  onDeath(): void {}
  /** A finished rank's CM keeps what was deposited for it: nothing here waits for the rank. */
  onFinished(): void {}
  vpidOf(rank: number): number {
    return this.o.vpids[rank]!;
  }
  rankOfVpid(vpid: number): number {
    return this.o.vpids.indexOf(vpid);
  }

  // ---- checkpoints and replay ------------------------------------------------------------------

  capture(): ChannelSnapshot {
    assert(this.recvWaiters.length === 0, 'checkpoint with a receive pending');
    return {
      nextSsn: [...this.st.nextSsn], lastIn: [...this.st.lastIn], loggedIn: [...this.st.loggedIn],
      recvIndex: this.st.recvIndex, queue: this.st.queue.map((m) => ({ ...m })),
    };
  }

  restore(c: ChannelSnapshot, logPos: number): void {
    c.nextSsn.forEach((v, r) => (this.st.nextSsn[r] = v));
    c.lastIn.forEach((v, r) => (this.st.lastIn[r] = v));
    c.loggedIn.forEach((v, r) => (this.st.loggedIn[r] = v));
    this.st.recvIndex = c.recvIndex;
    this.st.queue = c.queue.map((m) => ({ ...m, logged: true }));
    this.st.logPos = logPos;
    this.st.loggedUpTo = logPos;
  }

  /** A log entry after the checkpoint, in log order: a message re-enters the queue. A CM's log
   *  holds messages and fragments only (no determinant is ever needed). */
  replay(pos: number, e: LogEntry): void {
    this.onEntry(pos, e);
    this.counters.replayed++;
  }

  skipLogTo(pos: number): void {
    this.st.logPos = pos;
    this.st.loggedUpTo = pos;
  }

  whenCaughtUp(f: () => void): void {
    this.replayedTo = this.st.logPos;
    this.onCaughtUp = f;
    this.checkCaughtUp();
  }

  drained(): Promise<void> {
    return Promise.resolve(); // a send completes once its CM holds it: nothing waits unlogged
  }
  logged(): Promise<void> {
    return Promise.resolve(); // the rank's log is written by its senders, at the CM
  }
  retainedCount(): number {
    return 0;
  }

  close(reason: Error): void {
    if (this.closed !== null) return;
    this.closed = reason;
    for (const w of this.recvWaiters.splice(0)) w.reject(reason);
    // The home connection is the store's: its owner closes it (closeRollback).
    for (const [endpoint, c] of this.clients) if (endpoint !== this.o.home.endpoint) void c.then((x) => x.close(), () => undefined);
  }

  // ---- internals -------------------------------------------------------------------------------

  protected async post(dest: number, m: Omit<Envelope, 'ssn' | 'epoch'>): Promise<void> {
    if (this.closed !== null) throw new P2PError('CLOSED', this.closed.message);
    if (!Number.isInteger(dest) || dest < 0 || dest >= this.st.size) throw new P2PError('BAD_RANK', `rank ${dest} not in 0..${this.st.size - 1}`);
    if (m.data.length > CM_MAX_MESSAGE_BYTES) throw new P2PError('TOO_LARGE', `a message of ${m.data.length} bytes > ${CM_MAX_MESSAGE_BYTES} under channel memories`);
    const ssn = this.st.nextSsn[dest]!;
    this.st.nextSsn[dest] = ssn + 1;
    const blob = encodeMessageEntries(this.self, { ...m, ssn, epoch: 0 }); // no checkpoint groups under cm
    try {
      const cm = await this.clientFor(this.o.homes[dest]!);
      await cm.deposit(dest, ssn, blob);
      this.counters.deposits++;
    } catch (e) {
      throw this.fatal(e);
    }
  }

  private clientFor(endpoint: string): Promise<CmClient> {
    let c = this.clients.get(endpoint);
    if (c === undefined) {
      c = this.o.connect(endpoint).then((x) => (this.watch(x), x));
      this.clients.set(endpoint, c);
    }
    return c;
  }

  private watch(c: CmClient): void {
    c.onLost((e) => this.fatal(new Error(`the channel memory at ${c.endpoint} failed: ${e.message}`)));
  }

  /** A CM failed: this rank cannot go on protected (PROTOCOL §11.6). Returns the error. */
  private fatal(e: unknown): Error {
    const err = e instanceof Error ? e : new Error(String(e));
    if (this.closed !== null) return err; // finalized: a closing connection is no failure
    this.close(err);
    this.o.onFatal(err);
    return err;
  }

  private onPushed(first: number, blobs: readonly Uint8Array[]): void {
    for (let i = 0; i < blobs.length && this.closed === null; i++) {
      const pos = first + i;
      const d = decodeLogEntry(blobs[i]!, this.st.size);
      if (!d.ok) return void this.fatal(new Error(`the channel memory pushed a bad entry at ${pos}: ${d.detail}`));
      this.o.observe?.(pos, blobs[i]!);
      // As RBML's receiver (PROTOCOL §11.3): a queue past its bound is a program that does not
      // receive what it is sent; it fails visibly rather than buffer without bound.
      if (this.st.queue.length >= MAX_QUEUED_MESSAGES) return void this.fatal(new Error(`receive queue full (${MAX_QUEUED_MESSAGES} messages arrived, not received)`));
      this.onEntry(pos, d.value);
      this.counters.pushed++;
    }
    this.settleReceives();
  }

  /** Entry `pos` of this rank's log. A message's fragments are contiguous (the CM appends them
   *  together) and join the queue as one message at the last one's position; until then the
   *  consumed position stays before the first, so a checkpoint never holds part of a message. */
  private onEntry(pos: number, e: LogEntry): void {
    const p = this.partial;
    if (e.kind === 'determinant' || (e.kind === 'message' && p !== null)) {
      throw this.fatal(new Error(`the channel memory gave a ${e.kind} at ${pos}${p === null ? '' : ' inside a message\'s fragments'}`));
    }
    if (e.kind === 'message') return this.accept(pos, e.source, e.env, 1);
    const next = e.index === 0 ? p === null : p !== null && p.source === e.source && p.env.ssn === e.env.ssn && p.parts.length === e.index && p.total === e.total;
    if (!next) throw this.fatal(new Error(`the channel memory gave fragment ${e.index} of ${e.total} of rank ${e.source}'s ssn ${e.env.ssn} out of order at ${pos}`));
    const cur = p ?? { source: e.source, env: e.env, parts: [], total: e.total };
    cur.parts.push(e.env.data);
    this.partial = cur.parts.length < cur.total ? cur : null;
    if (this.partial === null) this.accept(pos, e.source, { ...cur.env, data: concatBytes(cur.parts) }, cur.total);
  }

  /** Message `env` from `source`, its last entry at log position `pos`, joins the queue (arrival
   *  = log order). */
  private accept(pos: number, source: number, env: Envelope, entries: number): void {
    // The CM stores each (source, ssn) once, in ssn order per source: anything else is a CM
    // that broke the protocol (it is another node's agent).
    if (pos !== this.st.logPos + entries || env.ssn !== this.st.lastIn[source]! + 1) {
      throw this.fatal(new Error(`the channel memory gave rank ${source}'s ssn ${env.ssn} at ${pos}; expected ssn ${this.st.lastIn[source]! + 1} at ${this.st.logPos + entries}`));
    }
    replayMessage(this.st, source, pos, env);
  }

  protected async receive(pattern: Pattern): Promise<Message> {
    if (this.closed !== null) throw new P2PError('CLOSED', this.closed.message);
    if (pattern.source !== ANY_SOURCE && (!Number.isInteger(pattern.source) || pattern.source < 0 || pattern.source >= this.st.size)) {
      throw new P2PError('BAD_RANK', `rank ${pattern.source} not in 0..${this.st.size - 1}`);
    }
    const index = this.st.recvIndex++;
    return new Promise<Message>((resolve, reject) => {
      this.recvWaiters.push({ pattern, index, resolve, reject });
      this.settleReceives();
    });
  }

  private settleReceives(): void {
    const still: RecvWaiter[] = [];
    for (const w of this.recvWaiters) {
      const m = take(this.st, w.pattern, w.index, false);
      if (m === null) still.push(w);
      else w.resolve({ source: m.source, tag: m.tag, comm: m.comm, structured: m.structured, data: m.data });
    }
    this.recvWaiters = still;
    this.checkCaughtUp();
  }

  private checkCaughtUp(): void {
    if (this.onCaughtUp === null || this.replayedTo === null) return;
    const to = this.replayedTo;
    if (this.st.queue.some((m) => m.pos <= to)) return;
    const f = this.onCaughtUp;
    this.onCaughtUp = null;
    f();
  }
}
