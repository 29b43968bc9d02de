// G-MPI (spec §5): MPI-style message passing between the processes of a linked task, with the
// alert flag and communicator recovery that let an application detect and recover from crashes,
// hangs and wrong results in its own way. Built on the link (src/app/link: Ghidrah signals,
// shared flags) and the VPID-keyed P2P mesh (p2p.ts, comm.ts, collectives.ts).
//
// The rules this file implements (spec §5.2–§5.5, §9.1 items 81–92):
//   - ranks are indices in the current world communicator, whose members are VPIDs in
//     ascending order; recoverComm() builds a new one;
//   - while the alert flag (FLAG.ALERT) or the invalid flag (FLAG.INVALID, raised by the link's
//     worker the moment GSIG_NTF_DIED arrives) is raised, every communication call fails at
//     once with ERR_ALERT and every blocked one settles with it (P2P abort);
//   - G-MPI signals are Ghidrah signals translated VPID ↔ rank; a handler may interrupt but
//     never unblocks a call — only the flags do;
//   - recoverComm(): a SYNC barrier through the manager (GSIG_REQ_SYNC), then the membership as
//     the atomic broadcasts left it (NTF_DIED removes, REP_SPAWNED adds) becomes the new world
//     communicator; the old one's messages are discarded; the flags are cleared. Any other
//     broadcast before REP_SYNC (a new crash) makes it return ERR_ALERT;
//   - a process spawned into a running task initialises with RECOVERED, joining that barrier.
import { hrtime } from 'node:process';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../../core/signals.ts';
import type { Member } from '../../core/wire/app-wire.ts';
import { LinkError } from '../link/errors.ts';
import { readLinkEnv } from '../link/env.ts';
import { FLAG } from '../link/flags.ts';
import { Link, type DeliveredSignal, type LinkOptions } from '../link/link.ts';
import * as coll from './collectives.ts';
import { CommLayer, type Comm, type CommMessage } from './comm.ts';
import { ANY_SOURCE, ANY_TAG, P2P, P2PError, type P2POptions } from './p2p.ts';

// ---- constants ---------------------------------------------------------------------------------

/** Return codes (spec §5: MPI_SUCCESS, MPI_RECOVERED, MPI_ERR_ALERT). */
export type InitCode = 'SUCCESS' | 'RECOVERED' | 'ERR_ALERT';
export type RecoverCode = 'SUCCESS' | 'ERR_ALERT';

/** Table 4.2 (G_MPI_SIG_*) and Table 4.3 (local signals). The local signals' numbers are ours. */
export const G_MPI_SIG = {
  ...GSIG,
  /** A broken P2P connection with rank `arg` (spec §5.4). */
  LOCAL_CONNECTION: 30,
  /** A timer expired; `arg` is the timer's argument (spec §5.4). */
  LOCAL_ALARM: 31,
  /** Pseudo-ranks for G_MPI_Signal's destination and a handler's source. */
  CLUSTER_MANAGER: GSIG_CM,
  BROADCAST: GSIG_BROADCAST,
} as const;
export { ANY_SOURCE, ANY_TAG };

/** The SYNC value recoverComm agrees on: all callers must send the same arg (spec §4.5). */
export const RECOVER_SYNC_ARG = 0x474d5049; // 'GMPI'
/** The task clock advances in steps of this; a gap much longer means the process was stopped. */
export const TASK_CLOCK_STEP_MS = 5;
/** A step gap beyond this many steps is time the process did not run (SIGSTOP, descheduled). */
export const TASK_CLOCK_GAP_STEPS = 4;

export type GmpiErrorCode = 'ERR_ALERT' | 'BAD_RANK' | 'BAD_TAG' | 'BAD_ARGUMENT' | 'TOO_LARGE' | 'BAD_PAYLOAD' | 'CLOSED' | 'LIMIT' | 'NOT_CONNECTED';

export class GmpiError extends Error {
  constructor(readonly code: GmpiErrorCode, message: string, override readonly cause?: unknown) {
    super(message);
    this.name = 'GmpiError';
  }
}

/** handler(signum, srcRank, destRank, arg) of spec §5.3: ranks in the current world
 *  communicator; src = CLUSTER_MANAGER for the manager; dest = BROADCAST for a broadcast;
 *  src = dest = own rank for a local signal. A dead process's rank stays valid until
 *  recoverComm(); a rank not in the communicator (a spawned process) is -1. */
export type GmpiHandler = (signum: number, srcRank: number, destRank: number, arg: number) => void;

export type TimerHandle = { readonly id: number };

export type GmpiOptions = LinkOptions & {
  /** Address the P2P listener binds and advertises (default 127.0.0.1, or TRINE_NODE_HOST). */
  readonly host?: string;
  readonly maxMessageBytes?: number;
};

const ALERT_SIGNUMS_WITH_RANK_ARG: readonly number[] = [GSIG.NTF_DIED, GSIG.REP_ACK_KILL];

function mapError(e: unknown): GmpiError {
  if (e instanceof GmpiError) return e;
  if (e instanceof P2PError) {
    switch (e.code) {
      case 'ABORTED':
        return new GmpiError('ERR_ALERT', 'MPI_ERR_ALERT: the alert flag is raised or the communicator is invalid', e);
      case 'PEER_LOST':
      case 'PEER_REMOVED':
        return new GmpiError('ERR_ALERT', `MPI_ERR_ALERT: ${e.message}`, e);
      case 'BAD_RANK':
      case 'BAD_TAG':
      case 'TOO_LARGE':
      case 'BAD_PAYLOAD':
      case 'LIMIT':
      case 'CLOSED':
      case 'NOT_CONNECTED':
        return new GmpiError(e.code, e.message, e);
      default:
        return new GmpiError('BAD_ARGUMENT', e.message, e);
    }
  }
  if (e instanceof LinkError) return new GmpiError('BAD_ARGUMENT', e.message, e);
  return new GmpiError('BAD_ARGUMENT', String(e), e);
}

const parseEndpoint = (m: Member): { host: string; port: number } | null => {
  const i = m.endpoint.lastIndexOf(':');
  if (i <= 0) return null;
  const port = Number(m.endpoint.slice(i + 1));
  return Number.isInteger(port) && port > 0 && port <= 0xffff ? { host: m.endpoint.slice(0, i), port } : null;
};

// ---- the task clock (spec §5.4 task timers) ----------------------------------------------------

/** Time this process actually ran: wall time less the gaps in which it could not run (it was
 *  stopped, as gang scheduling stops a descheduled task). Measured by a ticker: a step that
 *  took far longer than its period counts as one period. */
class TaskClock {
  private ms = 0;
  private last = Number(hrtime.bigint() / 1_000_000n);
  private timer: NodeJS.Timeout | null = null;
  private readonly waiting = new Map<number, { at: number; fire: () => void }>();

  now(): number {
    this.step();
    return this.ms;
  }

  at(id: number, afterMs: number, fire: () => void): void {
    this.waiting.set(id, { at: this.now() + afterMs, fire });
    if (this.timer === null) {
      this.timer = setInterval(() => this.step(), TASK_CLOCK_STEP_MS);
      this.timer.unref();
    }
  }

  cancel(id: number): void {
    this.waiting.delete(id);
    if (this.waiting.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private step(): void {
    const t = Number(hrtime.bigint() / 1_000_000n);
    const d = t - this.last;
    this.last = t;
    this.ms += d > TASK_CLOCK_STEP_MS * TASK_CLOCK_GAP_STEPS && this.timer !== null ? TASK_CLOCK_STEP_MS : d;
    for (const [id, w] of [...this.waiting]) {
      if (this.ms >= w.at) {
        this.cancel(id);
        w.fire();
      }
    }
  }
}

// ---- G-MPI ---------------------------------------------------------------------------------------

export class Gmpi {
  /** The code init returned (MPI_Init's rc). */
  initCode: InitCode = 'SUCCESS';
  private worldNow: Comm;
  private readonly handlers = new Map<number, GmpiHandler>();
  private readonly hooked = new Set<number>();
  private readonly timers = new Map<number, NodeJS.Timeout | 'task'>();
  private nextTimer = 1;
  private readonly taskClock = new TaskClock();
  private finalized = false;

  private constructor(
    readonly link: Link,
    private readonly p2p: P2P,
    private readonly layer: CommLayer,
    world: Comm,
  ) {
    this.worldNow = world;
  }

  /** MPI_Init: open the P2P listener, link to the agent (its mapping lists every member's
   *  endpoint), connect the mesh and build the world communicator. A process spawned into a
   *  running task joins the recovery barrier and gets RECOVERED, or ERR_ALERT if that barrier
   *  fails (spec §5.5); the caller then recovers as the others do. */
  static async init(opts: GmpiOptions = {}): Promise<Gmpi> {
    const env = opts.env ?? process.env;
    const who = readLinkEnv(env); // NOT_IN_TRINE, naming what is missing, outside Trine
    const host = opts.host ?? env.TRINE_NODE_HOST ?? '127.0.0.1';
    let self: Gmpi | null = null;
    const p2p = await P2P.open({
      taskId: who.task, self: who.vpid, listenHost: host,
      ...(opts.maxMessageBytes === undefined ? {} : { maxMessageBytes: opts.maxMessageBytes }),
      onConnectionLost: (id) => self?.connectionLost(id),
    });
    const link = await Link.init({ ...opts, endpoint: `${host}:${p2p.port}` }).catch(async (e: unknown) => {
      await p2p.close();
      throw e;
    });
    const layer = new CommLayer(p2p);
    const members = link.mapping.members;
    const world = layer.create(0, members.map((m) => m.vpid));
    const g = new Gmpi(link, p2p, layer, world);
    self = g;
    g.installInternalHandlers();
    const peers = members.flatMap((m) => {
      const ep = parseEndpoint(m);
      return m.vpid === who.vpid || ep === null ? [] : [{ id: m.vpid, ...ep }];
    });
    try {
      await p2p.connect(peers);
    } catch (e) {
      if (!link.mapping.recovered) throw mapError(e);
      g.initCode = 'ERR_ALERT';
      return g;
    }
    if (link.mapping.recovered) g.initCode = (await g.recoverComm()) === 'SUCCESS' ? 'RECOVERED' : 'ERR_ALERT';
    return g;
  }

  // ---- the world ---------------------------------------------------------------------------------

  get world(): Comm {
    return this.worldNow;
  }

  rank(): number {
    return this.layer.rank(this.worldNow);
  }

  size(): number {
    return this.layer.size(this.worldNow);
  }

  /** The VPID of a rank of the world communicator (for logs). */
  vpidOf(rank: number): number {
    return this.layer.vpidOf(this.worldNow, rank);
  }

  // ---- point to point and collectives (each fails or settles with ERR_ALERT, spec §5.2) ----------

  private async call<T>(op: () => Promise<T>): Promise<T> {
    if (this.finalized) throw new GmpiError('CLOSED', 'G-MPI is finalized');
    this.syncFlags();
    try {
      return await op();
    } catch (e) {
      throw mapError(e);
    }
  }

  send(dest: number, tag: number, data: unknown): Promise<void> {
    return this.call(() => this.layer.send(this.worldNow, dest, tag, data));
  }

  recv<T = unknown>(source: number, tag: number): Promise<CommMessage<T>> {
    return this.call(() => this.layer.recv<T>(this.worldNow, source, tag));
  }

  barrier(): Promise<void> {
    return this.call(() => coll.barrier(this.layer, this.worldNow));
  }

  bcast<T>(root: number, value?: T): Promise<T> {
    return this.call(() => coll.bcast(this.layer, this.worldNow, root, value));
  }

  reduce<T>(root: number, value: T, op: coll.ReduceOp<T>): Promise<T | undefined> {
    return this.call(() => coll.reduce(this.layer, this.worldNow, root, value, op));
  }

  allreduce<T>(value: T, op: coll.ReduceOp<T>): Promise<T> {
    return this.call(() => coll.allreduce(this.layer, this.worldNow, value, op));
  }

  gather<T>(root: number, value: T): Promise<T[] | undefined> {
    return this.call(() => coll.gather(this.layer, this.worldNow, root, value));
  }

  scatter<T>(root: number, values?: readonly T[]): Promise<T> {
    return this.call(() => coll.scatter(this.layer, this.worldNow, root, values));
  }

  allgather<T>(value: T): Promise<T[]> {
    return this.call(() => coll.allgather(this.layer, this.worldNow, value));
  }

  // ---- the alert flag (spec §5.2) ----------------------------------------------------------------

  /** G_MPI_Alert_raise: every MPI call unblocks and fails with ERR_ALERT. */
  alertRaise(): void {
    this.link.alertRaise();
    this.p2p.abort('alert');
  }

  /** G_MPI_Alert_clear. Calls work again unless the communicator is invalid (a crash). */
  alertClear(): void {
    this.link.alertClear();
    this.syncFlags();
  }

  /** G_MPI_Alert_check: true (MPI_ERR_ALERT) if the flag is raised. Reads shared memory only: a
   *  synchronous loop sees a flag the link's worker raised, without yielding. */
  alertCheck(): boolean {
    return this.link.alertCheck();
  }

  /** Whether a crash notification invalidated the communicator (until recoverComm). */
  get invalid(): boolean {
    return this.link.flagCheck(FLAG.INVALID);
  }

  /** Raise the alert flag the moment any of these signals arrives, before any handler runs,
   *  so a compute loop polling alertCheck() sees it (the spec's handler calling
   *  G_MPI_Alert_raise, done by the link's worker). */
  alertOn(signums: readonly number[]): void {
    this.link.alertOn(signums);
    for (const s of signums) this.hook(s);
  }

  /** P2P follows the flags: aborted while either is raised, working when both are clear. */
  private syncFlags(): void {
    if (this.link.alertCheck() || this.link.flagCheck(FLAG.INVALID)) this.p2p.abort(this.link.flagCheck(FLAG.INVALID) ? 'invalid' : 'alert');
    else this.p2p.resume();
  }

  // ---- G-MPI signals (spec §5.3) -----------------------------------------------------------------

  /** G_MPI_Signal: dest = a rank, BROADCAST, or CLUSTER_MANAGER (a group request). KILL's
   *  argument is a rank. Misuse throws (a LinkError with its code), and nothing is sent. */
  signal(signum: number, destRank: number, arg: number): void {
    const dest = destRank === GSIG_CM || destRank === GSIG_BROADCAST ? destRank : this.layer.vpidOf(this.worldNow, destRank);
    const wireArg = signum === GSIG.REQ_KILL && destRank === GSIG_CM ? this.layer.vpidOf(this.worldNow, arg) : arg;
    this.link.signal(signum, dest, wireArg);
  }

  /** G_MPI_Signal_handler; null removes it. */
  onSignal(signum: number, handler: GmpiHandler | null): void {
    if (handler === null) this.handlers.delete(signum);
    else this.handlers.set(signum, handler);
    this.hook(signum);
  }

  /** G_MPI_Signal_wait: resolves after the next signal was delivered (its handler ran). */
  async signalWait(): Promise<void> {
    await this.link.waitSignal();
  }

  enterCs(): void {
    this.link.enterCs();
  }

  exitCs(): void {
    this.link.exitCs();
  }

  /** The next classified outcome of this process's broadcast or group request (spec §4.4). */
  requestOutcome(): ReturnType<Link['requestOutcome']> {
    return this.link.requestOutcome();
  }

  private rankOrMinus(vpid: number): number {
    return this.layer.rankOf(this.worldNow, vpid);
  }

  /** One link handler per signal number: it keeps P2P in step with the flags, then calls the
   *  application's handler with ranks. */
  private hook(signum: number): void {
    if (this.hooked.has(signum)) return;
    this.hooked.add(signum);
    this.link.on(signum, (_s, src, dest, arg, sig) => this.deliver(signum, src, dest, arg, sig));
  }

  private deliver(signum: number, src: number, dest: number, arg: number, sig: DeliveredSignal): void {
    if (signum === GSIG.NTF_DIED) this.p2p.abort('invalid');
    if (signum === GSIG.REP_SPAWNED && arg > this.p2p.self) this.p2p.expect([arg]);
    this.syncFlags();
    const h = this.handlers.get(signum);
    if (h === undefined) return;
    const isLocal = src === this.p2p.self && dest === this.p2p.self && sig.dest !== GSIG_BROADCAST;
    const srcRank = src === GSIG_CM ? GSIG_CM : this.rankOrMinus(src);
    const destRank = dest === GSIG_BROADCAST ? GSIG_BROADCAST : this.rankOrMinus(dest);
    // Manager notifications about a process carry its rank; REP_SPAWNED's is undefined until
    // recoverComm gives the new process one (spec §5.3): -1.
    const a = isLocal ? arg : ALERT_SIGNUMS_WITH_RANK_ARG.includes(signum) && src === GSIG_CM ? this.rankOrMinus(arg) : signum === GSIG.REP_SPAWNED ? -1 : arg;
    h(signum, srcRank, destRank, a);
  }

  private installInternalHandlers(): void {
    // The communicator is invalid from the moment a crash notification arrives (spec §5.2).
    this.link.flagOn(FLAG.INVALID, [GSIG.NTF_DIED]);
    for (const s of [GSIG.NTF_DIED, GSIG.REP_SPAWNED, G_MPI_SIG.LOCAL_CONNECTION, G_MPI_SIG.LOCAL_ALARM]) this.hook(s);
  }

  private connectionLost(vpid: number): void {
    const rank = this.rankOrMinus(vpid);
    if (rank < 0 || this.finalized || this.link.state !== 'ready') return;
    this.link.raiseLocal(G_MPI_SIG.LOCAL_CONNECTION, rank);
  }

  // ---- timers (spec §5.4) ------------------------------------------------------------------------

  /** G_MPI_set_wall_timer: LOCAL_ALARM(arg) after `us` microseconds of wall time. */
  setWallTimer(us: number, arg: number): TimerHandle {
    const id = this.nextTimer++;
    const t = setTimeout(() => {
      this.timers.delete(id);
      if (!this.finalized) this.link.raiseLocal(G_MPI_SIG.LOCAL_ALARM, arg);
    }, Math.max(0, us / 1000));
    this.timers.set(id, t);
    return { id };
  }

  /** G_MPI_set_task_timer: the same in task time, which stops while the process is stopped
   *  (TaskClock). */
  setTaskTimer(us: number, arg: number): TimerHandle {
    const id = this.nextTimer++;
    this.timers.set(id, 'task');
    this.taskClock.at(id, Math.max(0, us / 1000), () => {
      this.timers.delete(id);
      if (!this.finalized) this.link.raiseLocal(G_MPI_SIG.LOCAL_ALARM, arg);
    });
    return { id };
  }

  dismissTimer(h: TimerHandle): void {
    const t = this.timers.get(h.id);
    this.timers.delete(h.id);
    if (t === 'task') this.taskClock.cancel(h.id);
    else if (t !== undefined) clearTimeout(t);
  }

  // ---- recovery (spec §5.5) ----------------------------------------------------------------------

  /** G_MPI_Recover_comm: a barrier through the manager (GSIG_REQ_SYNC), then a new world
   *  communicator of the members the atomic broadcasts left: the dead removed, the spawned
   *  added, ranks in VPID order. The old communicator is destroyed and its messages discarded;
   *  the flags are cleared. ERR_ALERT if the barrier fails — another notification came first —
   *  or a flag is raised again before the new mesh is complete; call it again after handling. */
  async recoverComm(): Promise<RecoverCode> {
    if (this.finalized) throw new GmpiError('CLOSED', 'G-MPI is finalized');
    try {
      this.link.signal(GSIG.REQ_SYNC, GSIG_CM, RECOVER_SYNC_ARG);
    } catch {
      return 'ERR_ALERT'; // a request still outstanding, or the link lost
    }
    const outcome = await this.link.requestOutcome().catch(() => null);
    if (outcome === null || outcome.class !== 'own-reply') return 'ERR_ALERT';
    // REP_SYNC is ordered with every notification: the member list is the same at every
    // process now (spec §5.5).
    const members = this.link.memberList.map((m) => m.vpid).sort((a, b) => a - b);
    const old = this.worldNow;
    for (const v of old.members) {
      if (v !== this.p2p.self && !members.includes(v)) {
        try {
          this.p2p.removePeer(v);
        } catch {
          // already removed
        }
      }
    }
    const fresh = members.filter((v) => v > this.p2p.self && !old.members.includes(v));
    if (fresh.length > 0) this.p2p.expect(fresh);
    this.layer.discardComm(old.id);
    this.worldNow = this.layer.create(outcome.signal.epoch, members);
    this.link.flagClear(FLAG.INVALID);
    this.link.alertClear();
    this.p2p.resume();
    try {
      await this.p2p.whenConnected(members);
    } catch {
      return 'ERR_ALERT';
    }
    return 'SUCCESS';
  }

  // ---- the end -----------------------------------------------------------------------------------

  /** MPI_Finalize: timers stop, the mesh closes, the link says finalize (a normal end). */
  async finalize(): Promise<void> {
    if (this.finalized) return;
    this.finalized = true;
    for (const h of [...this.timers.keys()]) this.dismissTimer({ id: h });
    await this.p2p.close();
    await this.link.finalize();
  }
}
