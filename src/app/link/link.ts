// The application library's main-thread API (spec §4.2, §5.2, §5.4, §7): Ghidrah signals, the
// shared alert and invalid flags, critical sections and finalisation. A worker thread owns the
// agent socket (worker.cjs); this file owns every decision: what may be sent, the epoch and the
// outstanding request (requests.ts), the task view and call rules (task-view.ts), the
// lifecycle's effects (its states are lifecycle.ts's), and delivery to handlers, one at a time in
// order (dispatcher.ts). The source delivers by SIGINT into a signal handler; here a delivery is
// a message from the worker, and the flags the worker raises on arrival stand in for the
// interruption of a computation that never yields. Public types are link-types.ts's.
import { GSIG_BROADCAST, GSIG_CM, type SignalRequest } from '../../core/signals.ts';
import type { MessagePort } from 'node:worker_threads';
import type { AgentToProc, Mapping, Member, ProcToAgent } from '../../core/wire/app-wire.ts';
import type { DgrpView } from '../../core/wire/dgrp.ts';
import type { RollbackMark } from '../../core/wire/recovery.ts';
import type { WorkerToMain } from './channel.ts';
import { AgentConnection } from './connection.ts';
import { Dispatcher, runGuarded } from './dispatcher.ts';
import { readLinkEnv, type LinkEnv } from './env.ts';
import { LinkError } from './errors.ts';
import { FLAG, SharedFlags } from './flags.ts';
import {
  awaitInit, becomeReady, beginFinalize, createLifecycle, endFinalize, loseLink, requireReady, type Lifecycle, type LinkState,
} from './lifecycle.ts';
import { FINALIZE_TIMEOUT_MS, MAX_CS_DEPTH, MAX_QUEUED_SIGNALS } from './limits.ts';
import { checkLinkOptions, type DeliveredSignal, type LinkOptions, type LinkStats, type SignalHandler } from './link-types.ts';
import { isRequestDest, RequestTracker, type RequestOutcome } from './requests.ts';
import {
  adoptMapping, applyManagerBroadcast, checkFlagWord, checkRuleSignal, checkRuleSignals, checkSignalArg, checkSignalToSend, createTaskView,
  memberList,
} from './task-view.ts';
import { Waiters } from './waiters.ts';

export class Link {
  readonly task: string;
  readonly vpid: number;
  /** connecting, ready, finalizing, finalized or lost, and the init and finalize promises (lifecycle.ts). */
  private readonly life: Lifecycle<Link> = createLifecycle();
  private tracker: RequestTracker;
  /** The mapping, the members now and the quorum (task-view.ts). */
  private readonly view = createTaskView();
  private readonly handlers = new Map<number, SignalHandler>();
  private readonly dispatcher: Dispatcher<DeliveredSignal>;
  private readonly flags = SharedFlags.create();
  private userCsDepth = 0;
  private readonly waiters = new Waiters<DeliveredSignal>();
  private deliveredCount = 0;
  private welcomed = false;
  /** From the welcome (PROTOCOL §9.5): kept in this process's memory only. */
  private taskKeyNow: Uint8Array | null = null;
  private selfDiagnosisHook: ((signal: DeliveredSignal) => void) | null = null;
  private handlerErrorHook: ((error: unknown, signal: DeliveredSignal) => void) | null = null;
  private lostHook: ((error: LinkError) => void) | null = null;
  private dgrpHook: ((view: DgrpView) => void) | null = null;
  private lastDgrp: DgrpView | null = null;
  private conn: AgentConnection | null = null;

  private constructor(private readonly env: LinkEnv) {
    this.task = env.task;
    this.vpid = env.vpid;
    this.tracker = new RequestTracker(env.vpid, 0);
    this.dispatcher = new Dispatcher((s) => this.deliverOne(s), MAX_QUEUED_SIGNALS);
  }

  /** Connect to the local agent (spec §7 item 1), say hello, and resolve once the mapping
   *  (item 2) arrives: when every member has connected, or at once for a process spawned into
   *  a running task (mapping.recovered). Rejects with NOT_IN_TRINE outside Trine. */
  static init(opts: LinkOptions = {}): Promise<Link> {
    try {
      return Link.start(opts);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  private static start(opts: LinkOptions): Promise<Link> {
    const env = readLinkEnv(opts.env ?? process.env);
    const { endpoint, timeoutMs } = checkLinkOptions(opts);
    const link = new Link(env);
    link.conn = AgentConnection.open(env, endpoint, link.flags.buffers, {
      onMessage: (m) => link.onWorkerMessage(m),
      onWorkerError: (e) => link.fail('LINK_LOST', `the link's worker thread failed: ${e.message}`),
    });
    return awaitInit(link.life, timeoutMs, () => link.fail('INIT_TIMEOUT', `no mapping from the agent within ${timeoutMs} ms`));
  }

  // ---- State -----------------------------------------------------------------------------------

  get state(): LinkState {
    return this.life.state;
  }

  /** The task's G-MPI key, which the agent handed over in its welcome (PROTOCOL §9.5): every
   *  process of this task, and no other process, holds it. G-MPI authenticates its hellos with
   *  it; keep it in this process (do not log it, put it in a file or pass it to a child). */
  get taskKey(): Uint8Array {
    if (this.taskKeyNow === null) throw new LinkError('PROTOCOL', 'no task key: the link is not welcomed yet');
    return new Uint8Array(this.taskKeyNow);
  }

  /** The mapping as received at init. */
  get mapping(): Mapping {
    if (this.view.mapping === null) throw new LinkError('LINK_LOST', 'no mapping yet');
    return this.view.mapping;
  }

  /** The current epoch (spec §4.6): the mapping's, then each delivered broadcast's. */
  get epoch(): number {
    return this.tracker.epoch;
  }

  /** The members now: the mapping's, less GSIG_NTF_DIED's, plus GSIG_REP_SPAWNED's (spec §5.5). */
  get memberList(): readonly Member[] {
    return memberList(this.view);
  }

  isMember(vpid: number): boolean { return this.view.members.has(vpid); }
  get quorum(): number { return this.view.quorum; }

  /** The request sent and not yet classified, if any. */
  get outstanding(): SignalRequest | null { return this.tracker.outstanding; }
  /** The group request acknowledged (own-ack) whose reply is still to come, if any. */
  get acked(): SignalRequest | null { return this.tracker.acked; }

  stats(): LinkStats {
    return { delivered: this.deliveredCount, droppedSignals: this.dispatcher.dropped, queued: this.dispatcher.queued };
  }

  // ---- Signals (spec §4.2) ---------------------------------------------------------------------

  /** G_Signal: dest = a member VPID (point to point), GSIG_BROADCAST (a broadcast request) or
   *  GSIG_CM (a group request). Misuse throws a LinkError and sends nothing. Returns what was
   *  sent, with the epoch attached. It is written at once, on this thread's connection to the
   *  agent; a process that exits right after may lose it, so end with finalize(), awaited,
   *  which follows every earlier signal to the agent on the same connection. */
  signal(signum: number, dest: number, arg: number): SignalRequest {
    requireReady(this.life);
    checkSignalToSend(this.view, this.task, this.tracker, signum, dest, arg);
    const req = this.tracker.send(signum, dest, arg);
    if (isRequestDest(dest)) this.waiters.newRequest();
    this.conn?.send({ type: 'signal', ...req });
    return req;
  }

  /** A rollback task's checkpoint, stored at its protector: its mark goes to the group through
   *  the agent, in order with this process's signals (PROTOCOL §11.4). */
  mark(m: RollbackMark): void {
    this.sendOwn({ type: 'mark', ...m });
  }

  /** A message about this process's own state, in order with its signals: a mark, a DGRP
   *  task's barrier arrival (§12.4), a progress report (§13.2, progress.ts). */
  sendOwn(m: Extract<ProcToAgent, { type: 'mark' | 'dgrp.arrive' | 'progress' }>): void {
    requireReady(this.life);
    this.conn?.send(m);
  }

  /** A DGRP task's views (PROTOCOL §12.4), the last one at once; and a port for its tester
   *  thread, which the link's worker feeds with every view and lets send (worker.cjs). */
  onDgrpView(hook: ((view: DgrpView) => void) | null): void {
    this.dgrpHook = hook;
    if (hook !== null && this.lastDgrp !== null) hook(this.lastDgrp);
  }
  attachTester(port: MessagePort): void {
    this.conn?.attach(port);
  }

  /** G_Signal_handler: one handler per signal number; null removes it. */
  on(signum: number, handler: SignalHandler | null): void {
    checkRuleSignal(signum);
    if (handler === null) this.handlers.delete(signum);
    else this.handlers.set(signum, handler);
  }

  /** A local signal (spec §5.4 Table 4.3): src = dest = this process, through the same queue.
   *  Delivered before this returns unless a critical section or a handler is running. */
  raiseLocal(signum: number, arg: number): void {
    requireReady(this.life);
    checkRuleSignal(signum);
    checkSignalArg(arg);
    this.flags.applyRules(signum);
    this.dispatcher.push({ signum, src: this.vpid, dest: this.vpid, arg, epoch: this.tracker.epoch, node: '', data: '' });
    this.dispatcher.drain();
  }

  /** G_MPI_Signal_wait: the next delivered signal (after its handler ran). */
  waitSignal(): Promise<DeliveredSignal> {
    requireReady(this.life);
    const p = this.waiters.nextSignal();
    this.updateRef();
    return p;
  }

  /** The next unread outcome of our requests: the class of the broadcast that followed a
   *  request (spec §4.4), and after an own-ack, the reply that completes it. */
  requestOutcome(): Promise<RequestOutcome> {
    const busy = this.life.state === 'ready' && this.tracker.busy;
    const p = this.waiters.nextOutcome(busy);
    if (p !== null) {
      this.updateRef();
      return p;
    }
    requireReady(this.life);
    throw new LinkError('NO_REQUEST', 'no broadcast or group request is outstanding');
  }

  /** Spec §4.6: called for GSIG_ERR_DISAGREE when we have no pending group request. */
  onSelfDiagnosis(hook: ((signal: DeliveredSignal) => void) | null): void {
    this.selfDiagnosisHook = hook;
  }

  /** Called when a handler (or hook) throws; later deliveries go on. Default: console.error. */
  onHandlerError(hook: ((error: unknown, signal: DeliveredSignal) => void) | null): void {
    this.handlerErrorHook = hook;
  }

  /** Called once if the connection to the agent is lost (not after finalize). */
  onLost(hook: ((error: LinkError) => void) | null): void {
    this.lostHook = hook;
  }

  // ---- Critical sections (spec §5.4) -----------------------------------------------------------

  /** G_MPI_Enter_cs: hold deliveries. Nests. */
  enterCs(): void {
    if (this.userCsDepth >= MAX_CS_DEPTH) throw new LinkError('LIMIT', `critical sections nested deeper than ${MAX_CS_DEPTH}: a missing exitCs()?`);
    this.userCsDepth++;
    this.dispatcher.enter();
  }

  /** G_MPI_Exit_cs: leaving the outermost section delivers everything that arrived meanwhile,
   *  even what the worker relayed while this thread never yielded, before returning. */
  exitCs(): void {
    if (this.userCsDepth === 0) throw new LinkError('NOT_IN_CS', 'exitCs() without enterCs()');
    this.userCsDepth--;
    this.dispatcher.exit();
    if (this.dispatcher.csDepth === 0) {
      this.conn?.pull((m) => this.onWorkerMessage(m));
      this.dispatcher.drain();
    }
  }

  get inCs(): boolean {
    return this.userCsDepth > 0;
  }

  // ---- Flags (spec §5.2) -----------------------------------------------------------------------

  alertRaise(): void { this.flags.raise(FLAG.ALERT); }
  alertClear(): void { this.flags.clear(FLAG.ALERT); }
  alertCheck(): boolean { return this.flags.check(FLAG.ALERT); }

  /** From now on the worker raises the alert flag the moment one of these signals arrives. */
  alertOn(signums: readonly number[]): void {
    this.flagOn(FLAG.ALERT, signums);
  }

  flagRaise(word: number): void { this.flags.raise(checkFlagWord(word)); }
  flagClear(word: number): void { this.flags.clear(checkFlagWord(word)); }
  flagCheck(word: number): boolean { return this.flags.check(checkFlagWord(word)); }

  /** Raise `word` on arrival of any of `signums` (e.g. FLAG.INVALID on GSIG.NTF_DIED). */
  flagOn(word: number, signums: readonly number[]): void {
    this.flags.addRule(checkFlagWord(word), checkRuleSignals(signums));
  }

  flagOff(word: number, signums: readonly number[]): void {
    this.flags.removeRule(checkFlagWord(word), checkRuleSignals(signums));
  }

  /** The shared words themselves (Atomics.wait on one blocks until a raise). */
  get flagWords(): Int32Array {
    return this.flags.view;
  }

  // ---- Finalisation (spec §7 item 6) -----------------------------------------------------------

  /** Send finalize and close the socket: the agent sees a clean Process-disconnect. */
  finalize(): Promise<void> {
    const begun = beginFinalize(this.life, FINALIZE_TIMEOUT_MS, () => this.finishFinalize());
    if (begun.kind === 'done') return begun.done;
    this.waiters.rejectAll(new LinkError('FINALIZED', 'the link was finalized'));
    this.conn?.finalize();
    this.updateRef();
    return begun.done;
  }

  // ---- Internals -------------------------------------------------------------------------------

  private onWorkerMessage(m: WorkerToMain): void {
    switch (m.type) {
      case 'agent':
        this.onAgentMessage(m.msg);
        return;
      case 'lost':
        if (this.life.state === 'finalizing') this.finishFinalize();
        else if (this.life.state === 'connecting') this.fail('LINK_LOST', `cannot reach the agent at ${this.env.socketPath}: ${m.detail}`);
        else this.fail(m.code === 'WIRE' ? 'PROTOCOL' : 'LINK_LOST', m.detail);
        return;
      case 'closed':
        this.finishFinalize();
        return;
    }
  }

  private onAgentMessage(msg: AgentToProc): void {
    if (this.life.state !== 'connecting' && this.life.state !== 'ready') return;
    switch (msg.type) {
      case 'welcome':
        if (this.life.state !== 'connecting' || this.welcomed) return this.fail('PROTOCOL', 'unexpected welcome');
        this.welcomed = true;
        this.taskKeyNow = msg.taskKey;
        return;
      case 'refused':
        return this.fail('REFUSED', `the agent refused this process: ${msg.reason}`);
      case 'mapping': {
        if (this.life.state !== 'connecting' || !this.welcomed) return this.fail('PROTOCOL', 'unexpected mapping');
        const { type: _type, ...mapping } = msg;
        if (mapping.task !== this.task || mapping.vpid !== this.vpid) {
          return this.fail('PROTOCOL', `mapping for ${mapping.task}/${mapping.vpid}, we are ${this.task}/${this.vpid}`);
        }
        adoptMapping(this.view, mapping);
        this.tracker = new RequestTracker(this.vpid, mapping.epoch);
        const w = becomeReady(this.life);
        // Hold deliveries until the code awaiting init() has run and registered its handlers.
        this.dispatcher.enter();
        setImmediate(() => {
          this.dispatcher.exit();
          this.dispatcher.drain();
        });
        this.updateRef();
        w?.resolve(this);
        return;
      }
      case 'dgrp': {
        const { type: _type, ...view } = msg;
        if (this.life.state !== 'ready') return this.fail('PROTOCOL', 'a DGRP view before the mapping');
        this.lastDgrp = view;
        return this.dgrpHook?.(view);
      }
      case 'signal': {
        if (this.life.state !== 'ready') return this.fail('PROTOCOL', 'signal before the mapping');
        const { type: _type, ...sig } = msg;
        this.dispatcher.push(sig);
        this.dispatcher.drain();
        return;
      }
    }
  }

  /** One delivery: epoch, membership and request state first, then the handler, then waiters. */
  private deliverOne(s: DeliveredSignal): void {
    if (this.life.state !== 'ready') return;
    this.deliveredCount++;
    if (s.dest === GSIG_BROADCAST) {
      if (s.src === GSIG_CM) applyManagerBroadcast(this.view, s);
      const effect = this.tracker.onBroadcast(s);
      for (const o of effect.outcomes) if (this.waiters.outcome(o)) this.updateRef();
      if (effect.selfDiagnosis) runGuarded(s, () => this.selfDiagnosisHook?.(s), this.handlerErrorHook);
    }
    const handler = this.handlers.get(s.signum);
    if (handler !== undefined) runGuarded(s, () => handler(s.signum, s.src, s.dest, s.arg, s), this.handlerErrorHook);
    if (this.waiters.signalDelivered(s)) this.updateRef();
  }

  /** The link is gone (or never came up): reject everything, stop the worker. */
  private fail(code: 'LINK_LOST' | 'REFUSED' | 'PROTOCOL' | 'INIT_TIMEOUT', detail: string): void {
    const e = new LinkError(code, detail);
    const lost = loseLink(this.life, e);
    if (lost.kind === 'ignored') return;
    if (lost.kind === 'finalizing') return this.finishFinalize();
    this.waiters.rejectAll(e);
    this.teardown();
    if (lost.wasReady && this.lostHook !== null) {
      try {
        this.lostHook(e);
      } catch (err) {
        console.error('trine/app: onLost hook threw:', err);
      }
    }
  }

  private finishFinalize(): void {
    const resolve = endFinalize(this.life);
    if (resolve === null) return;
    this.teardown();
    resolve();
  }

  private teardown(): void {
    this.conn?.close();
    this.conn = null;
  }

  /** Keep the process alive only while something awaits the agent: init, finalize, or a
   *  waiter. Otherwise a program that is done exits (without finalize: a crash to the agent). */
  private updateRef(): void {
    this.conn?.keepAlive(
      this.life.state === 'connecting' || this.life.state === 'finalizing' || this.waiters.pending,
    );
  }
}
