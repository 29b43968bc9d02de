// The rank channels of rollback recovery over the task's P2P mesh (docs/PROTOCOL.md §11.3): the
// message layer G-MPI's communicators use in a task with `recovery: rollback`. It addresses
// ranks, which outlive the processes (VPIDs) that hold them; the protocol's state and decisions
// are channels.ts's (pure), the bytes codec.ts's. This file owns the I/O around them: the pump
// that reads the channel frames P2P delivers, the appends to the rank's store (its protector),
// the promises of sends waiting for their receiver's acknowledgement (RBML) or its incarnation's
// `have`, and receives waiting for a (logged) message.
//
// Failure-free, a send completes when the receiver's protector holds the message (radic-hmpl
// A.2.5); a receive completes on a logged message, and a wildcard receive only once its
// determinant is logged too. When a rank's process dies, sends to it wait (the survivors' pause)
// until its replacement says what it holds (`have`); retained messages above that go again.
// Inside a checkpoint group (§11.7) an internal message is held unlogged and acknowledged at once.
import { assert } from '../../base/result.ts';
import { ANY_SOURCE, type Message } from '../gmpi/matching.ts';
import type { P2P } from '../gmpi/p2p.ts';
import { P2PError } from '../gmpi/p2p-types.ts';
import {
  createChannelState, isWildcard, nextLogPos, onAck, onArrive, onHave, onLogged, onPeerLost, planSend, restoreChannels, retainedBytes, take, unloggedBytes,
  HMPL_TB_BYTES, type ChannelState, type Envelope, type Pattern, type RankStore,
} from './channels.ts';
import { Replayer } from './replay.ts';
import { decodeChannelFrame, encodeChannelFrame, encodeLogEntry, encodeMessageEntries, type ChannelSnapshot, type GroupFrame, type LogEntry } from './codec.ts';
import { RankLayer } from './rank-layer.ts';

/** The communicator id the channel frames travel on: outside any id G-MPI hands out (world is 0,
 *  recovered ones are epochs), so no application receive ever sees them. */
export const ROLLBACK_COMM = 0xfffffff0;
/** The one library tag of the channel frames. */
export const ROLLBACK_TAG = -0x7ffffff0;

export type RankChannelsOptions = {
  readonly p2p: P2P;
  readonly rank: number;
  /** VPID per rank now. */
  readonly vpids: readonly number[];
  readonly store: RankStore;
  /** RADIC's receiver-based pessimistic logging (a send completes when its receiver has logged
   *  it, a receive returns a logged message), or HMPL's hybrid: a send completes at once while
   *  the sender TB has room, a receive returns an arrived message while the receiver TB has
   *  room, except a wildcard receive, which waits for its message and determinant to be logged
   *  (radic-hmpl B.3). */
  readonly logging?: 'rbml' | 'hmpl';
  /** Per rank, its checkpoint group (PROTOCOL §11.7); absent under `nco`. */
  readonly groups?: readonly number[];
  /** The store failed or a peer broke the protocol: the process must fail visibly (it never
   *  runs on unprotected). */
  readonly onFatal: (e: Error) => void;
};

type Waiter = { resolve: () => void; reject: (e: Error) => void };
/** The checkpoint group's coordination (group-checkpoint.ts): its frames, and each `have` we
 *  send (`fresh`: to a new holder of the rank), after which it tells the rank its epoch. */
export type GroupHooks = { onFrame(rank: number, f: GroupFrame): void; onHaveSent(rank: number, fresh: boolean): void };
type RecvWaiter = { pattern: Pattern; index: number; resolve: (m: Message) => void; reject: (e: Error) => void };

export class RankChannels extends RankLayer {
  readonly self: number;
  readonly st: ChannelState;
  private readonly replayer: Replayer;
  private readonly p2p: P2P;
  private readonly vpids: number[];
  private readonly store: RankStore;
  private readonly onFatal: (e: Error) => void;
  private readonly hybrid: boolean;
  private loggedWaiters: (() => void)[] = [];
  /** Checkpoints, waiting for the sender TB to drain. */
  private drainWaiters: (() => void)[] = [];
  /** Sends waiting for their destination's incarnation to say what it holds. */
  private readonly haveWaiters: Waiter[][];
  /** Sends waiting for their acknowledgement: per destination, ssn → waiter. */
  private readonly ackWaiters: Map<number, Waiter>[];
  private recvWaiters: RecvWaiter[] = [];
  /** Log positions the store acknowledged beyond the contiguous prefix. */
  private readonly storedAhead = new Set<number>();
  private readonly haveSentTo = new Set<number>();
  /** Ranks that ended normally (onFinished), until a new holder of theirs says `have`. */
  private readonly finished = new Set<number>();
  group: GroupHooks | null = null;
  readonly counters = { duplicates: 0, gaps: 0, malformed: 0, foreign: 0, resent: 0, skipped: 0, internal: 0 };

  constructor(o: RankChannelsOptions) {
    super();
    this.p2p = o.p2p;
    this.self = o.rank;
    this.vpids = [...o.vpids];
    this.store = o.store;
    this.onFatal = o.onFatal;
    this.hybrid = o.logging === 'hmpl';
    this.st = createChannelState(o.rank, o.vpids.length, o.groups);
    this.replayer = new Replayer(this.st);
    this.haveWaiters = o.vpids.map(() => []);
    this.ackWaiters = o.vpids.map(() => new Map());
  }


  /** Start reading channel frames, and tell every peer what we hold from it. */
  start(): void {
    void this.pump();
    for (let r = 0; r < this.st.size; r++) if (r !== this.self) this.sendHave(r);
  }

  // ---- the message layer CommLayer uses (ranks for VPIDs) --------------------------------------


  // ---- membership ----------------------------------------------------------------------------

  /** The group announced `vpid`'s death: sends to its rank wait for the replacement. */
  onDeath(vpid: number): void {
    const rank = this.vpids.indexOf(vpid);
    if (rank >= 0) onPeerLost(this.st, rank);
  }

  /** `vpid`'s rank ended normally (PROTOCOL §11.3): it finalized, so it had every message of ours
   *  it would ever take, logged, and acknowledged them. Sends to it are skipped from now on (a
   *  replacement re-executing towards it would otherwise wait for a `have` that never comes). */
  onFinished(vpid: number): void {
    const rank = this.vpids.indexOf(vpid);
    if (rank < 0 || rank === this.self) return;
    this.finished.add(rank);
    onHave(this.st, rank, Number.MAX_SAFE_INTEGER);
    this.released();
    for (const w of this.ackWaiters[rank]!.values()) w.resolve();
    this.ackWaiters[rank]!.clear();
    for (const w of this.haveWaiters[rank]!.splice(0)) w.resolve();
  }

  vpidOf(rank: number): number {
    return this.vpids[rank]!;
  }

  /** The rank `vpid` holds now, -1 for none. */
  rankOfVpid(vpid: number): number {
    return this.vpids.indexOf(vpid);
  }

  // ---- checkpoints and replay ------------------------------------------------------------------

  /** The channels' part of a checkpoint: taken between calls (no receive pending, nothing
   *  retained), so the queue and the counters describe everything. */
  capture(): ChannelSnapshot {
    assert(this.recvWaiters.length === 0, 'checkpoint with a receive pending');
    return {
      nextSsn: [...this.st.nextSsn], lastIn: [...this.st.lastIn], loggedIn: [...this.st.loggedIn],
      recvIndex: this.st.recvIndex, queue: this.st.queue.map((m) => ({ ...m })),
    };
  }

  /** Sends still waiting for an acknowledgement (a checkpoint waits for none). */
  retainedCount(): number {
    return this.st.retained.reduce((n, m) => n + m.size, 0);
  }

  /** A replacement starts from checkpoint `c` taken at log position `logPos`. */
  restore(c: ChannelSnapshot, logPos: number): void {
    restoreChannels(this.st, c, logPos);
  }

  /** Call `f` once the program has taken every replayed message and determinant. */
  whenCaughtUp(f: () => void): void {
    this.replayer.whenCaughtUp(f);
  }

  /** Then the log entries after it, in log order (replay.ts). */
  replay(pos: number, e: LogEntry): void {
    this.replayer.replay(pos, e);
  }

  /** Positions up to `pos` are taken in the store by entries a replacement could not use (a
   *  broken tail after a refused checkpoint): new entries go after them. */
  skipLogTo(pos: number): void {
    this.st.logPos = pos;
    this.st.loggedUpTo = pos;
  }

  close(reason: Error): void {
    if (this.closed !== null) return;
    this.closed = reason;
    for (const w of this.recvWaiters.splice(0)) w.reject(reason);
    for (const list of this.haveWaiters) for (const w of list.splice(0)) w.reject(reason);
    for (const m of this.ackWaiters) {
      for (const w of m.values()) w.reject(reason);
      m.clear();
    }
  }

  // ---- internals -------------------------------------------------------------------------------

  protected async post(dest: number, m: Omit<Envelope, 'ssn' | 'epoch'>): Promise<void> {
    if (this.closed !== null) throw new P2PError('CLOSED', this.closed.message);
    if (!Number.isInteger(dest) || dest < 0 || dest >= this.st.size) throw new P2PError('BAD_RANK', `rank ${dest} not in 0..${this.st.size - 1}`);
    while (this.st.peerHave[dest] === null) await new Promise<void>((resolve, reject) => this.haveWaiters[dest]!.push({ resolve, reject }));
    const plan = planSend(this.st, dest, m);
    if (plan.kind === 'local') {
      this.settleReceives();
      return;
    }
    if (plan.kind === 'skip') {
      this.counters.skipped++;
      return;
    }
    const acked = new Promise<void>((resolve, reject) => this.ackWaiters[dest]!.set(plan.env.ssn, { resolve, reject }));
    this.transmit(dest, plan.env);
    // HMPL: the payload waits in the sender TB and the send completes now, unless the TB is
    // full, when it waits for its acknowledgement as RBML does (radic-hmpl B.3).
    if (this.hybrid && retainedBytes(this.st) <= HMPL_TB_BYTES) {
      acked.catch(() => undefined);
      return;
    }
    return acked;
  }

  private transmit(dest: number, env: Envelope): void {
    this.frameTo(dest, encodeChannelFrame({ kind: 'data', env }));
  }

  private frameTo(dest: number, frame: Uint8Array): void {
    // A peer not connected (dead, or its replacement not here yet) loses nothing: what it has
    // not acknowledged stays retained and goes again after its replacement's `have`.
    this.p2p.sendLib(this.vpids[dest]!, ROLLBACK_TAG, frame, ROLLBACK_COMM).catch(() => undefined);
  }

  private sendHave(rank: number, fresh = false): void {
    this.haveSentTo.add(this.vpids[rank]!);
    // What we hold logged, not what arrived: a re-executing sender skips up to it (PROTOCOL §11.3).
    this.frameTo(rank, encodeChannelFrame({ kind: 'have', rank: this.self, have: this.st.loggedIn[rank]! }));
    this.group?.onHaveSent(rank, fresh);
  }

  /** A checkpoint group's coordination frame to `rank` (§11.7). */
  sendGroupFrame(rank: number, f: GroupFrame): void {
    this.frameTo(rank, encodeChannelFrame(f));
  }

  protected async receive(pattern: Pattern): Promise<Message> {
    if (this.closed !== null) throw new P2PError('CLOSED', this.closed.message);
    if (pattern.source !== ANY_SOURCE && (!Number.isInteger(pattern.source) || pattern.source < 0 || pattern.source >= this.st.size)) {
      throw new P2PError('BAD_RANK', `rank ${pattern.source} not in 0..${this.st.size - 1}`);
    }
    const index = this.st.recvIndex++;
    const replayed = this.st.replayDets.has(index);
    const m = await new Promise<Message>((resolve, reject) => {
      this.recvWaiters.push({ pattern, index, resolve, reject });
      this.settleReceives();
    });
    // A wildcard receive is a non-deterministic event: its outcome is logged before the
    // application may act on it (radic-hmpl B.3; mpichv-dgrp 1.2.1). On replay it is in the log.
    if (isWildcard(pattern) && !replayed) {
      const pos = nextLogPos(this.st);
      await this.append(pos, { kind: 'determinant', index, det: { source: m.source, ssn: (m as Message & { ssn: number }).ssn } });
    }
    return m;
  }

  private settleReceives(): void {
    const still: RecvWaiter[] = [];
    for (const w of this.recvWaiters) {
      const m = take(this.st, w.pattern, w.index, this.mustBeLogged(w.pattern));
      if (m === null) still.push(w);
      else w.resolve({ source: m.source, tag: m.tag, comm: m.comm, structured: m.structured, data: m.data, ssn: m.ssn } as Message);
    }
    this.recvWaiters = still;
    this.replayer.check();
  }

  /** RBML: every receive takes a logged message. HMPL: only a wildcard receive (it would leave
   *  an orphan otherwise, radic-hmpl B.3 Fig. 7), or any receive while the receiver TB is full. */
  private mustBeLogged(p: Pattern): boolean {
    if (!this.hybrid) return true;
    return isWildcard(p) || unloggedBytes(this.st) > HMPL_TB_BYTES;
  }

  /** Resolves once the store holds every entry appended so far (HMPL lets receives run ahead of
   *  their log; finalize waits for it before it closes the store). */
  logged(): Promise<void> {
    if (this.st.loggedUpTo >= this.st.logPos) return Promise.resolve();
    return new Promise((resolve) => this.loggedWaiters.push(resolve));
  }

  /** Resolves once every sent message is acknowledged: a checkpoint is taken with an empty
   *  sender TB, since the sends before it are never re-executed. */
  drained(): Promise<void> {
    if (this.retainedCount() === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private released(): void {
    if (this.retainedCount() === 0) for (const f of this.drainWaiters.splice(0)) f();
  }

  private append(pos: number, e: LogEntry): Promise<void> {
    return this.appendBlob(pos, encodeLogEntry(e));
  }

  private appendBlob(pos: number, blob: Uint8Array): Promise<void> {
    return this.store.append(pos, blob).then(
      () => this.stored(pos),
      (e: unknown) => {
        const err = e instanceof Error ? e : new Error(String(e));
        if (this.closed !== null) throw err; // finalized: the store's close is not a failure
        this.close(err);
        this.onFatal(err);
        throw err;
      },
    );
  }

  private stored(pos: number): void {
    this.storedAhead.add(pos);
    let upTo = this.st.loggedUpTo;
    while (this.storedAhead.delete(upTo + 1)) upTo++;
    if (upTo === this.st.loggedUpTo) return;
    if (upTo >= this.st.logPos) for (const f of this.loggedWaiters.splice(0)) f();
    for (const [source, ssn] of onLogged(this.st, upTo)) this.frameTo(source, encodeChannelFrame({ kind: 'ack', upTo: ssn }));
    this.settleReceives();
  }

  private async pump(): Promise<void> {
    for (;;) {
      let m: Message;
      try {
        m = await this.p2p.recvLib(ANY_SOURCE, ROLLBACK_TAG, ROLLBACK_COMM);
      } catch {
        return; // closed
      }
      this.onFrame(m.source, m.data);
    }
  }

  private onFrame(vpid: number, bytes: Uint8Array): void {
    const f = decodeChannelFrame(bytes);
    if (!f.ok) {
      this.counters.malformed++;
      return;
    }
    if (f.value.kind === 'have') return this.onHaveFrame(vpid, f.value.rank, f.value.have);
    const rank = this.vpids.indexOf(vpid);
    if (rank < 0 || rank === this.self) {
      this.counters.foreign++;
      return;
    }
    if (f.value.kind !== 'data' && f.value.kind !== 'ack') return this.group?.onFrame(rank, f.value);
    if (f.value.kind === 'ack') {
      onAck(this.st, rank, f.value.upTo);
      this.released();
      for (const [ssn, w] of this.ackWaiters[rank]!) {
        if (ssn > f.value.upTo) continue;
        this.ackWaiters[rank]!.delete(ssn);
        w.resolve();
      }
      return;
    }
    const v = onArrive(this.st, rank, f.value.env);
    if (v.kind === 'duplicate' || v.kind === 'internal') {
      // Internal to the group (§11.7): held without a log entry, acknowledged at once.
      if (v.kind === 'duplicate') this.counters.duplicates++;
      else this.counters.internal++;
      if (v.loggedIn > 0) this.frameTo(rank, encodeChannelFrame({ kind: 'ack', upTo: v.loggedIn }));
      if (v.kind === 'internal') this.settleReceives();
    } else if (v.kind === 'gap' || v.kind === 'full') {
      this.counters.gaps++;
      const e = new Error(v.kind === 'gap' ? `rank ${rank} skipped to ssn ${f.value.env.ssn} (expected ${v.expected})` : 'receive queue full');
      this.close(e);
      this.onFatal(e);
    } else {
      const blobs = encodeMessageEntries(rank, f.value.env);
      blobs.forEach((blob, i) => void this.appendBlob(v.pos - v.parts + 1 + i, blob).catch(() => undefined));
      if (this.hybrid) this.settleReceives(); // HMPL: a named receive need not wait for the log
    }
  }

  /** `vpid` holds `rank` now (a replacement announces itself so) and holds our ssn ≤ `have`. */
  private onHaveFrame(vpid: number, rank: number, have: number): void {
    if (rank >= this.st.size || rank === this.self) {
      this.counters.foreign++;
      return;
    }
    if (vpid < this.vpids[rank]!) return; // an older incarnation
    // A finished rank's late `have` changes nothing; a new holder means it runs again with its
    // checkpoint group (§11.7), and is a peer like any other.
    if (this.finished.has(rank) && vpid === this.vpids[rank]) return;
    this.finished.delete(rank);
    const fresh = vpid !== this.vpids[rank];
    if (fresh) this.haveSentTo.delete(this.vpids[rank]!);
    this.vpids[rank] = vpid;
    const again = onHave(this.st, rank, have);
    this.released();
    for (const [ssn, w] of this.ackWaiters[rank]!) {
      if (ssn > have) continue;
      this.ackWaiters[rank]!.delete(ssn);
      w.resolve();
    }
    this.counters.resent += again.length;
    for (const env of again) this.transmit(rank, env);
    if (!this.haveSentTo.has(vpid)) this.sendHave(rank, fresh);
    for (const w of this.haveWaiters[rank]!.splice(0)) w.resolve();
  }
}
