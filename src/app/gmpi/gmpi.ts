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
//     once with ERR_ALERT and every blocked one settles with it (P2P abort). A signal that
//     raises a flag on arrival raises it again when delivered, since the application may have
//     cleared it in between;
//   - G-MPI signals are Ghidrah signals translated VPID ↔ rank; a handler may interrupt but
//     never unblocks a call — only the flags do;
//   - recoverComm(): a SYNC barrier through the manager (GSIG_REQ_SYNC), then the membership as
//     the atomic broadcasts left it at REP_SYNC (NTF_DIED removes, REP_SPAWNED adds) becomes
//     the new world communicator, its id REP_SYNC's epoch; the old one's messages are
//     discarded; the flags are cleared, unless a notification that raises one was delivered
//     after REP_SYNC. Any other broadcast before REP_SYNC (a new crash) makes it return
//     ERR_ALERT. With a quorum below the membership the barrier can complete without this
//     process: a REP_SYNC of the recovery barrier delivered after the current communicator was
//     built, and followed by no membership change, is then adopted without a new request, so
//     every process builds the same communicator;
//   - a process spawned into a running task waits for its own REP_SPAWNED (its mapping comes
//     one epoch before), then joins that barrier and initialises with RECOVERED; with ERR_ALERT
//     if a flag is raised by then or the barrier fails.
import { LOOPBACK_HOST } from '../../core/constants.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM, isSignalArg } from '../../core/signals.ts';
import { readLinkEnv } from '../link/env.ts';
import { FLAG } from '../link/flags.ts';
import { Link } from '../link/link.ts';
import * as coll from './collectives.ts';
import { CommLayer, type Comm, type CommMessage } from './comm.ts';
import { CommOps } from './comm-ops.ts';
import { DgrpGroup } from '../dgrp/group.ts';
import type { DgrpOptions } from '../../core/wire/dgrp.ts';
import {
  GmpiError, mapError, parseEndpoint, RECOVER_SYNC_ARG, type GmpiHandler, type GmpiOptions, type InitCode, type RecoverCode,
} from './gmpi-api.ts';
import {
  alertOnSignals, createGmpiSignals, installInternalHandlers, raiseAlarm, raiseConnectionLost, setSignalHandler, type GmpiSignals,
} from './gmpi-signals.ts';
import { adoptMembers, reviveLost } from './gmpi-recover.ts';
import { P2P } from './p2p.ts';
import { closeRollback, connectRanks, openRollback, rollbackArgs, rollbackMembership, type RollbackParts } from '../rollback/rollback-init.ts';
import { RollbackError } from '../rollback/runtime.ts';
import { adoptableSync, createRecoveryLedger, flagsClearedBy, noteAlertCall, syncPointAt } from './recovery-ledger.ts';
import { GmpiTimers, MAX_TIMER_US, type TimerHandle } from './timers.ts';
import { ProgressReporter } from '../link/progress.ts';

export class Gmpi {
  /** The code init returned (MPI_Init's rc). */
  initCode: InitCode = 'SUCCESS';
  private worldNow: Comm;
  /** Wall and task timers (timers.ts). */
  private readonly timers = new GmpiTimers();
  private finalized = false;
  private dgrpGroup: DgrpGroup<CommOps> | null = null;
  /** Deliveries numbered against the recovery barrier's REP_SYNCs (recovery-ledger.ts). */
  private readonly ledger = createRecoveryLedger();
  /** The application's handlers and what each delivery does first (gmpi-signals.ts). */
  private readonly signals: GmpiSignals;

  private constructor(
    readonly link: Link,
    private readonly p2p: P2P,
    private readonly layer: CommLayer,
    world: Comm,
    /** A task with rollback recovery (PROTOCOL §11): its rank channels, checkpoints, store. */
    private readonly rollback: RollbackParts | null,
  ) {
    this.worldNow = world;
    const rb = rollback;
    this.signals = createGmpiSignals({
      link, p2p, ledger: this.ledger, isFinalized: () => this.finalized, syncFlags: () => this.syncFlags(), acceptsPeers: () => !this.finalized || (rb !== null && !rb.closed),
      rankOf: (vpid) => (rb === null ? this.layer.rankOf(this.worldNow, vpid) : rb.channels.rankOfVpid(vpid)),
      ...(rb === null ? { onDeath: null, onFinished: null } : rollbackMembership(rb, p2p)),
    });
  }

  /** MPI_Init: open the P2P listener, link to the agent (its mapping lists every member's
   *  endpoint), connect the mesh and build the world communicator. A process spawned into a
   *  running task joins the recovery barrier and gets RECOVERED, or ERR_ALERT if that barrier
   *  fails (spec §5.5); the caller then recovers as the others do. Any process gets ERR_ALERT
   *  if a peer dies or a flag is raised while the mesh forms. */
  static async init(opts: GmpiOptions = {}): Promise<Gmpi> {
    const env = opts.env ?? process.env;
    const who = readLinkEnv(env); // NOT_IN_TRINE, naming what is missing, outside Trine
    const host = opts.host ?? env.TRINE_NODE_HOST ?? LOOPBACK_HOST;
    let self: Gmpi | null = null;
    const p2p = await P2P.open({
      taskId: who.task, self: who.vpid, listenHost: host,
      ...(opts.maxMessageBytes === undefined ? {} : { maxMessageBytes: opts.maxMessageBytes }),
      ...(opts.maxUnexpectedBytes === undefined ? {} : { maxUnexpectedBytes: opts.maxUnexpectedBytes }),
      onConnectionLost: (id) => self !== null && raiseConnectionLost(self.signals, id),
    }).catch((e: unknown) => {
      throw mapError(e);
    });
    const link = await Link.init({ ...opts, endpoint: `${host}:${p2p.port}` }).catch(async (e: unknown) => {
      await p2p.close();
      throw e;
    });
    // The agent handed the task key over the socket (its welcome): hellos are authenticated
    // under it from now on, including any that arrived meanwhile (PROTOCOL §9.5).
    p2p.setTaskKey(link.taskKey);
    const members = link.mapping.members;
    const rbm = link.mapping.rollback;
    const rb = rbm === null ? null : await openRollback(rollbackArgs(link, p2p, rbm, opts.state)).catch((e: unknown) => p2p.close({ bye: false }).then(() => Promise.reject(e)));
    const layer = rb?.layer ?? new CommLayer(p2p);
    const world = rb?.world ?? layer.create(0, members.map((m) => m.vpid));
    const g = new Gmpi(link, p2p, layer, world, rb);
    self = g;
    installInternalHandlers(g.signals);
    if (link.mapping.dgrp !== null) g.dgrpGroup = await g.openDgrp(link.mapping.dgrp, host, opts.dgrpTest ?? null).catch((e: unknown) => p2p.close({ bye: false }).then(() => Promise.reject(e)));
    const peers = members.flatMap((m) => {
      const ep = parseEndpoint(m);
      return m.vpid === who.vpid || ep === null ? [] : [{ id: m.vpid, ...ep }];
    });
    const recovered = link.mapping.recovered;
    // A spawned process's mapping carries the epoch before its REP_SPAWNED: a SYNC sent now
    // would be answered by that REP_SPAWNED and dropped. Its REP_SPAWNED is the next broadcast.
    if (recovered && rb === null) await g.untilSpawnedSelf();
    try {
      await (rb === null ? p2p.connect(peers) : connectRanks(p2p, peers));
    } catch (e) {
      // A peer died or a flag went up while the mesh formed: the application recovers.
      const err = mapError(e);
      if (err.code !== 'ERR_ALERT') throw err;
      g.initCode = 'ERR_ALERT';
      return g;
    }
    rb?.channels.start();
    if (!recovered || rb !== null) return g;
    // A crash or an alert came first: the others will not complete this barrier; the
    // application handles it and calls recoverComm (spec §5.5: MPI_Init returns ERR_ALERT).
    if (g.flagsRaised()) g.initCode = 'ERR_ALERT';
    else g.initCode = (await g.recoverComm()) === 'SUCCESS' ? 'RECOVERED' : 'ERR_ALERT';
    return g;
  }

  private async untilSpawnedSelf(): Promise<void> {
    while (!this.ledger.spawnedSelf) {
      try {
        await this.link.waitSignal();
      } catch (e) {
        throw mapError(e);
      }
    }
  }

  // ---- the world ---------------------------------------------------------------------------------

  get world(): Comm { return this.worldNow; }
  rank(): number { return this.layer.rank(this.worldNow); }
  size(): number { return this.layer.size(this.worldNow); }

  /** The VPID of a rank of the world communicator (for logs); BAD_RANK for no such rank. */
  vpidOf(rank: number): number {
    try {
      return this.rollback === null ? this.layer.vpidOf(this.worldNow, rank) : this.rollback.channels.vpidOf(this.layer.vpidOf(this.worldNow, rank));
    } catch (e) {
      throw mapError(e);
    }
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

  // The world communicator's operations (comm-ops.ts), through call()'s guard.
  private get ops(): CommOps {
    return new CommOps(this.layer, this.worldNow, (op) => this.call(op));
  }
  send(dest: number, tag: number, data: unknown): Promise<void> { return this.ops.send(dest, tag, data); }
  recv<T = unknown>(source: number, tag: number): Promise<CommMessage<T>> { return this.ops.recv<T>(source, tag); }
  barrier(): Promise<void> { return this.ops.barrier(); }
  bcast<T>(root: number, value?: T): Promise<T> { return this.ops.bcast(root, value); }
  reduce<T>(root: number, value: T, op: coll.ReduceOp<T>): Promise<T | undefined> { return this.ops.reduce(root, value, op); }
  allreduce<T>(value: T, op: coll.ReduceOp<T>): Promise<T> { return this.ops.allreduce(value, op); }
  gather<T>(root: number, value: T): Promise<T[] | undefined> { return this.ops.gather(root, value); }
  scatter<T>(root: number, values?: readonly T[]): Promise<T> { return this.ops.scatter(root, values); }
  allgather<T>(value: T): Promise<T[]> { return this.ops.allgather(value); }

  /** A DGRP task's group of recommended processes (PROTOCOL §12.5); null for other tasks. */
  get dgrp(): DgrpGroup<CommOps> | null {
    return this.dgrpGroup;
  }

  /** Its tester thread and views; a round's communicator is guarded as the world's. A tester
   *  that cannot start fails init: untested, this process could never be told slow, nor tell. */
  private openDgrp(options: DgrpOptions, host: string, testModule: string | null): Promise<DgrpGroup<CommOps>> {
    const layer = this.layer;
    return DgrpGroup.open<CommOps>({
      link: this.link, self: this.link.vpid, options, host, port: this.p2p.port, testModule,
      // A rollback task's ranks are its table's; its messages go through its rank channels only.
      rankOf: (vpid) => (this.rollback === null ? layer.rankOf(this.worldNow, vpid) : this.rollback.channels.rankOfVpid(vpid)),
      commOf: this.rollback === null ? (id, vpids) => new CommOps(layer, layer.create(id, vpids), (op) => this.call(op)) : null,
      discardComm: (id) => layer.discardComm(id),
    }).catch((e: unknown) => Promise.reject(new GmpiError('BAD_ARGUMENT', e instanceof Error ? e.message : String(e))));
  }

  /** FTI_Snapshot's model (PROTOCOL §11.3): in a rollback task, checkpoint the registered state
   *  here once the task's interval has passed; elsewhere it returns at once. */
  async snapshot(): Promise<void> {
    const rb = this.rollback;
    if (rb !== null) await rb.runtime.snapshot().catch((e: unknown) => (e instanceof RollbackError ? Promise.reject(e) : rb.fatal(e as Error)));
  }

  /** Whether this process is a rollback task's replacement, restored from its rank's checkpoint. */
  get restored(): boolean {
    return this.rollback !== null && this.link.mapping.recovered;
  }

  // ---- the alert flag (spec §5.2) ----------------------------------------------------------------

  /** G_MPI_Alert_raise: every MPI call unblocks and fails with ERR_ALERT. */
  alertRaise(): void {
    noteAlertCall(this.ledger);
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
    alertOnSignals(this.signals, signums);
  }

  private flagsRaised(): boolean {
    return this.link.alertCheck() || this.link.flagCheck(FLAG.INVALID);
  }

  /** P2P follows the flags: aborted while either is raised, working when both are clear. */
  private syncFlags(): void {
    if (this.rollback !== null) return; // ranks outlive processes: nothing to abort (§11)
    if (this.flagsRaised()) this.p2p.abort(this.link.flagCheck(FLAG.INVALID) ? 'invalid' : 'alert');
    else this.p2p.resume();
  }

  // ---- G-MPI signals (spec §5.3) -----------------------------------------------------------------

  /** G_MPI_Signal: dest = a rank, BROADCAST, or CLUSTER_MANAGER (a group request). KILL's
   *  argument is a rank. Misuse throws and nothing is sent: GmpiError BAD_RANK for a rank (or
   *  KILL argument) not in the world communicator; the link's LinkError with its code for the
   *  rest (BAD_SIGNAL, BAD_ARG, REQUEST_OUTSTANDING, ACK_PENDING, FINALIZED, LINK_LOST). */
  signal(signum: number, destRank: number, arg: number): void {
    const dest = destRank === GSIG_CM || destRank === GSIG_BROADCAST ? destRank : this.vpidOf(destRank);
    const wireArg = signum === GSIG.REQ_KILL && destRank === GSIG_CM ? this.vpidOf(arg) : arg;
    this.link.signal(signum, dest, wireArg);
  }

  /** G_MPI_Signal_handler; null removes it. */
  onSignal(signum: number, handler: GmpiHandler | null): void {
    setSignalHandler(this.signals, signum, handler);
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

  // ---- timers (spec §5.4) ------------------------------------------------------------------------

  /** G_MPI_set_wall_timer: LOCAL_ALARM(arg) after `us` microseconds of wall time. BAD_ARGUMENT
   *  for a negative or non-finite time or an arg that is not a signed 32-bit integer. */
  setWallTimer(us: number, arg: number): TimerHandle {
    this.checkTimer(us, arg);
    return this.timers.setWall(us, () => raiseAlarm(this.signals, arg));
  }

  /** G_MPI_set_task_timer: the same in task time, which stops while the process is stopped
   *  (timers.ts TaskClock). */
  setTaskTimer(us: number, arg: number): TimerHandle {
    this.checkTimer(us, arg);
    return this.timers.setTask(us, () => raiseAlarm(this.signals, arg));
  }

  private checkTimer(us: number, arg: number): void {
    if (this.finalized) throw new GmpiError('CLOSED', 'G-MPI is finalized');
    if (typeof us !== 'number' || !Number.isFinite(us) || us < 0 || us > MAX_TIMER_US) {
      throw new GmpiError('BAD_ARGUMENT', `timer time ${us} µs not in 0..${MAX_TIMER_US}`);
    }
    if (!isSignalArg(arg)) throw new GmpiError('BAD_ARGUMENT', `timer arg ${arg} is not a signed 32-bit integer`);
  }

  dismissTimer(h: TimerHandle): void {
    this.timers.dismiss(h);
  }

  // ---- recovery (spec §5.5) ----------------------------------------------------------------------

  /** G_MPI_Recover_comm: a barrier through the manager (GSIG_REQ_SYNC), then a new world
   *  communicator of the members the atomic broadcasts left at REP_SYNC: the dead removed, the
   *  spawned added, ranks in VPID order. The old communicator is destroyed and its messages
   *  discarded; the flags are cleared. ERR_ALERT if the barrier fails — another notification
   *  came first — or a flag is raised again before the new mesh is complete; call it again
   *  after handling. A request of ours still outstanding is waited for first (its outcome stays
   *  readable). CLOSED after finalize or once the link to the agent is lost. */
  async recoverComm(): Promise<RecoverCode> {
    this.requireLink();
    let point = adoptableSync(this.ledger, this.worldNow.id);
    if (point === null) {
      try {
        // At most one request at a time (spec §4.4): let ours settle, or a caller looping on
        // ERR_ALERT would spin without ever yielding to the delivery that settles it.
        while (this.link.outstanding !== null || this.link.acked !== null) await this.link.requestOutcome();
        this.link.signal(GSIG.REQ_SYNC, GSIG_CM, RECOVER_SYNC_ARG);
      } catch (e) {
        this.requireLink();
        throw mapError(e);
      }
      const outcome = await this.link.requestOutcome().catch(() => null);
      this.requireLink();
      if (outcome === null || outcome.class !== 'own-reply') return 'ERR_ALERT';
      // Our hook recorded the REP_SYNC that answered us when it was delivered, before this
      // continuation; a notification delivered after it leaves a flag raised (below).
      point = syncPointAt(this.ledger, outcome.signal.epoch);
      if (point === null) return 'ERR_ALERT'; // pushed out by later barriers: adopt the latest next time
    }
    const members = [...point.members].sort((a, b) => a - b);
    this.worldNow = adoptMembers(this.p2p, this.layer, this.worldNow, members, point.epoch);
    // A flag raised by a delivery after REP_SYNC stays raised: that notification concerns the
    // new communicator.
    const clear = flagsClearedBy(this.ledger, point);
    if (clear.invalid) this.link.flagClear(FLAG.INVALID);
    if (clear.alert) this.link.alertClear();
    this.syncFlags();
    if (this.flagsRaised()) return 'ERR_ALERT';
    reviveLost(this.p2p, this.link, members);
    try {
      await this.p2p.whenConnected(members);
    } catch {
      return 'ERR_ALERT';
    }
    return this.flagsRaised() ? 'ERR_ALERT' : 'SUCCESS';
  }

  private reporter: ProgressReporter | null = null;
  /** This process has done `fraction` (0 … 1) of its work (PROTOCOL §13.2; throttled, progress.ts). */
  progress(fraction: number): void { this.requireLink(); (this.reporter ??= new ProgressReporter(this.link)).report(fraction); }

  private requireLink(): void {
    if (this.finalized) throw new GmpiError('CLOSED', 'G-MPI is finalized');
    if (this.link.state !== 'ready') throw new GmpiError('CLOSED', `the link to the agent is ${this.link.state}`);
  }

  // ---- the end -----------------------------------------------------------------------------------

  /** MPI_Finalize: timers stop, the mesh closes, the link says finalize (a normal end). */
  async finalize(): Promise<void> {
    if (this.finalized) return;
    this.finalized = true;
    this.timers.dismissAll();
    await this.dgrpGroup?.close();
    if (this.rollback !== null) await closeRollback(this.rollback);
    await this.p2p.close();
    await this.link.finalize();
  }
}

