// Tasks in the simulator (issue 3): the real replica and agent cores, the real process table of
// each agent (src/core/agent-procs.ts) on a simulated OS (src/sim/sim-spawner.ts), the real
// watchdog core resetting nodes the group declares failed, and an operator that submits and
// kills tasks and accepts an outcome only from two matching replies (PROTOCOL §8.1).
//
// Faults of one seed: task processes crash, an agent dies and its keeper restarts it, a whole
// node loses power, an agent is partitioned from the group, one replica crashes, or two replicas
// crash at once and the watchdog power-resets the whole cluster (spec §1.6 rule 2, §9.2 A21):
// every replica keeps its last task journal on its node's disk (`persist.tasks`), the watchdog
// reads them all after the reset (`restore.load`) and has the fresh group restore every task in
// them (PROTOCOL §10.9). The checks:
//   t.reported-once   every process's end is applied by a correct replica at most once;
//   t.commanded       nothing is spawned or killed without a command delivered on 2 matching
//                     copies (the group layer's own check covers the copies, this one covers
//                     the driver: every spawn answers a delivered proc.spawn);
//   t.accepted        every task the operator saw accepted exists at every correct replica and,
//                     once the faults have healed, finishes;
//   t.outcome         at the end, a finished task's processes ended as a correct replica says
//                     (exit code, signal) on their nodes' OS, and a task that ended normally
//                     had every process exit 0 by itself (a rollback task: every rank's
//                     current holder, PROTOCOL §11.2);
//   t.slots           a node never runs more task processes than its slots when its agent
//                     spawns one (counted on the simulated OS, not in any core's view);
//   t.group-request   every SYNC or SETQUORUM reply answers a quorum of matching requests sent
//                     in its own epoch by members (src/sim/group-requests.ts);
//   t.truth           at the end, what correct replicas believe runs is what the OS runs: no
//                     process both running (to the manager) and dead (on its node), and no live
//                     process the manager does not know;
//   g.cluster-reset   the watchdog resets the cluster only while two replicas of the group have
//                     failed (crashed, hung, cut off, Byzantine; not yet condemned);
//   t.restored        at a cluster reset, every accepted task live at a correct replica is in
//                     some journal; within RESTORE_BOUND_MS of the reset, every accepted task the
//                     journals held is a task of every serving correct replica of the fresh group
//                     with the restarted flag set (running, or finished after it restarted), the
//                     watchdog has no restore pending, and the fresh group holds no task that is
//                     neither restored from the journals nor submitted by the operator;
//   and the group layer's invariants, digests equal at equal RSN among them (src/sim/invariants.ts).
import { drainOutbox } from '../core/agent-outbox.ts';
import { adoptedProcs, recoveredProcs, stepProcs } from '../core/agent-procs.ts';
import { connectApp } from '../core/agent-procs-app.ts';
import { createAgentProcs, type AgentProcs, type AgentProcsEffect, type ProcRecord, type ProcRef } from '../core/agent-procs-state.ts';
import type { Timing } from '../core/constants.ts';
import type { CoreEffect } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import { unreachable } from '../base/result.ts';
import type { ClusterView } from '../core/status.ts';
import type { WatchdogStatus } from '../core/watchdog-state.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../core/signals.ts';
import type { AgentToProc, Mapping } from '../core/wire/app-wire.ts';
import type { Frame, GroupCommand, OperatorRequest, ProcMode, Recovery, TaskSubmit } from '../core/wire/messages.ts';
import type { SpawnerEvent } from '../core/ports.ts';
import { checkGroupRequests, type QuorumHeard, type SentRequest } from './group-requests.ts';
import type { InvariantName } from './invariants.ts';
import { streamFor, type SeededRandom } from './random.ts';
import { SimSpawner, type PidCounter } from './sim-spawner.ts';
import {
  checkNotInvented, checkRestored, journalledTasks, servingReplicas, tasksByNonce, type ClusterResetRun, type HeldTask,
} from './restore-checks.ts';
import { SimWatchdog } from './sim-watchdog.ts';
import { SIM_AGENT_SLOTS, World, type NodeHooks, type WorldOptions } from './world.ts';

/** Timing of task seeds: the defaults, with task timeouts short enough for a seed to retry. */
export const SIM_TASK_TIMING: Partial<Timing> = { startTimeoutMs: 1000, terminateTimeoutMs: 400, connectTimeoutMs: 800 };
/** The operator resends an unanswered request this often, as `trine` does (cli/op-client.ts). */
export const OPERATOR_RESEND_MS = 200;
/** A node's "reboot" after the watchdog's power reset, before its keeper starts the agent. */
export const NODE_REBOOT_MS = 40;
/** A linked process's library connects to its agent this long after the exec. */
export const APP_CONNECT_MS = 1;
/** Agent → process socket delivery. */
export const APP_DELIVERY_MS = 0.1;
/** After the watchdog's cluster reset, every node reboots as one does after a node reset; then
 *  the keepers start the initial replicas and the agents (PROTOCOL §10.9). */
export const CLUSTER_REBOOT_MS = NODE_REBOOT_MS;
/** t.restored: how long after a cluster reset every accepted task of the journals must be a task
 *  of the fresh group again. The path: the nodes reboot (CLUSTER_REBOOT_MS, 40 ms); the replicas'
 *  handshakes (a retry is 50 ms) and two heartbeats of the fresh group at the watchdog
 *  (sccHeartbeatMs, 75 ms) re-arm it; it sends the restores at once and every RESTORE_RESEND_MS
 *  (200 ms) until two replicas confirm; ordering one takes a few retransmissions (40 ms) at worst.
 *  Without loss that is about 45 ms (the worst of the 100 A21 seeds in 1..2000: 43 ms from the
 *  reset to the second confirmation); 1 s leaves room for several lost restore rounds and
 *  handshakes, and is still small next to the 2 s of silence that ordered the reset. */
export const RESTORE_BOUND_MS = 1000;

/** A signal as a simulated linked process received it. */
export type AppSignal = Extract<AgentToProc, { type: 'signal' }> & { atMs: number };

/** A linked task process as the simulator scripts it: the library's state (epoch, mapping) and
 *  everything delivered to it, in order. */
export type SimApp = {
  task: string;
  vpid: number;
  agent: ProcessId;
  pid: number;
  epoch: number;
  mapping: Mapping | null;
  /** The epoch its first mapping carried (t.group-request: a member from then on). */
  mappedEpoch: number | null;
  received: AppSignal[];
  alive: boolean;
  /** Cluster resets before it started: epochs start over in each fresh group. */
  era: number;
  /** Called at each delivered signal (a scripted process reacts here). */
  onSignal: ((app: SimApp, s: AppSignal) => void) | null;
};

type Node = {
  agent: ProcessId;
  node: string;
  os: SimSpawner;
  /** The procs file: survives agent crashes and power resets, as a disk does. */
  records: ProcRecord[];
  procs: AgentProcs | null;
  /** Bumped by every boot and crash: callbacks of an old incarnation are ignored. */
  epoch: number;
  /** proc.spawn commands delivered to the current incarnation, by task/vpid: each allows one spawn. */
  allowed: Map<string, number>;
};

type Pending = { payload: OperatorRequest; replies: Map<ProcessId, string>; done: ((ok: boolean, text: string) => void) | null };

/** A task the operator saw accepted (two matching replies), by its submit's nonce. */
export type AcceptedTask = {
  /** The id the accepting group gave it (a restore keeps it only if free in the fresh group). */
  id: string;
  payload: TaskSubmit;
  /** Cluster resets before it was accepted. */
  era: number;
  /** It had finished before a cluster reset (no journal held it): the fresh group owes it nothing. */
  gone: boolean;
};

export type TaskSimOptions = Omit<WorldOptions, 'hooks'>;
export type { ClusterResetRun, HeldTask } from './restore-checks.ts';

export class TaskSim implements NodeHooks {
  readonly world: World;
  readonly nodes = new Map<ProcessId, Node>();
  /** Tasks the operator saw accepted (two matching replies), by their submit's nonce. */
  readonly accepted = new Map<string, AcceptedTask>();
  readonly refused: { payload: OperatorRequest; text: string }[] = [];
  readonly stats = { spawns: 0, kills: 0, reports: 0, resets: 0, clusterResets: 0, restores: 0, operatorRequests: 0, groupReplies: 0 };
  /** Each replica's node disk: the last task journal it wrote (`persist.tasks`). It survives the
   *  replica's crash; the watchdog reads and deletes them all at a cluster reset. */
  readonly disks = new Map<ProcessId, Uint8Array>();
  /** Cluster resets carried out, oldest first. */
  readonly clusterResets: ClusterResetRun[] = [];
  /** Nonces of every task.submit the operator sent. */
  private readonly submitted = new Set<string>();
  private readonly pending = new Map<string, Pending>();
  private readonly watchdog: SimWatchdog;
  /** Terminal reports applied per correct replica and pid (t.reported-once). */
  private readonly deaths = new Map<string, number>();
  private readonly pids: PidCounter = { next: 1000 };
  private readonly rng: SeededRandom;
  private nonces = 0;
  private readonly timing: Timing;
  /** Slots of every node (the agents are started with them). */
  private readonly slots: number;

  constructor(opts: TaskSimOptions) {
    this.rng = streamFor(opts.seed, 'os');
    this.world = new World({ ...opts, timing: { ...SIM_TASK_TIMING, ...opts.timing }, hooks: this });
    this.timing = this.world.membership.timing;
    this.slots = opts.slots ?? SIM_AGENT_SLOTS;
    for (const a of this.world.membership.agents) {
      this.nodes.set(a.id, {
        agent: a.id, node: a.node, os: new SimSpawner(a.node, this.world.scheduler, this.rng, this.pids), records: [], procs: null,
        epoch: 0, allowed: new Map(),
      });
    }
    // The watchdog: the real core on its own computer, fed by the replicas (src/sim/sim-watchdog.ts).
    this.watchdog = new SimWatchdog(this.world, (e) => this.onWatchdogEffect(e));
  }

  /** What the watchdog reports to an operator's `trine status`. */
  watchdogStatus(): WatchdogStatus {
    return this.watchdog.status();
  }

  private onWatchdogEffect(e: Exclude<CoreEffect, { type: 'send' }>): void {
    if (e.type === 'reset.node') this.powerReset(e.node);
    // Not from inside the watchdog's step: the daemon hands the order to its reset hook.
    if (e.type === 'reset.cluster') this.world.scheduler.after(0, () => this.resetCluster(e.reason));
    if (e.type === 'log' && e.event === 'restore.done') this.stats.restores++;
  }

  get now(): number {
    return this.world.now;
  }

  private fail(invariant: InvariantName, message: string): void {
    this.world.checker.fail(invariant, message);
  }

  // ---- the operator ------------------------------------------------------------------------

  /** Send a request; `done` gets the outcome two replicas agree on. Returns its nonce. */
  operate(make: (nonce: string) => OperatorRequest, done?: (ok: boolean, text: string) => void): string {
    const nonce = (++this.nonces).toString(16).padStart(32, '0');
    const payload = make(nonce);
    const p: Pending = { payload, replies: new Map(), done: done ?? null };
    this.pending.set(nonce, p);
    if (payload.type === 'task.submit') this.submitted.add(nonce);
    this.stats.operatorRequests++;
    const send = (): void => {
      if (!this.pending.has(nonce)) return;
      this.world.operate(payload);
      this.world.scheduler.after(OPERATOR_RESEND_MS, send);
    };
    send();
    return nonce;
  }

  /** Submit a task; returns the submit's nonce (what identifies the task across a reset). */
  submit(spec: { name: string; size: number; file: string; args?: string[]; mode?: ProcMode; recovery?: Recovery }, done?: (ok: boolean, text: string) => void): string {
    const mode = spec.mode ?? (spec.file === 'sim-linked' ? 'linked' : 'plain');
    // The task key (PROTOCOL §9.5) from the nonce, which the seeded generator drew: reproducible.
    const taskKey = (nonce: string): Uint8Array => Uint8Array.from({ length: 32 }, (_, i) => parseInt(nonce.slice((i % 16) * 2, (i % 16) * 2 + 2), 16));
    return this.operate((nonce) => ({
      type: 'task.submit', nonce, name: spec.name, size: spec.size, file: spec.file, args: spec.args ?? [], cwd: '/', env: [], mode, recovery: spec.recovery ?? { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: taskKey(nonce),
    }), done);
  }

  // ---- linked processes (PROTOCOL §9) ------------------------------------------------------

  /** Linked processes by task/vpid (the latest incarnation of each). */
  readonly apps = new Map<string, SimApp>();
  /** Every linked process that ever ran, for the end-of-run checks. */
  readonly allApps: SimApp[] = [];
  /** Every request a linked process's library sent, and the quorum as processes were told it
   *  (t.group-request, src/sim/group-requests.ts). */
  readonly sentRequests: SentRequest[] = [];
  readonly quorumsHeard: QuorumHeard[] = [];
  /** When the operator first asked to kill each task, by era and id. */
  private readonly killsAsked = new Map<string, number>();
  /** Node faults, per agent: while one lasts the group may drop the node's processes, which
   *  still run (t.group-request counts no member there). */
  private readonly troubles = new Map<ProcessId, { fromMs: number; untilMs: number }[]>();
  /** What a linked process does at each delivered signal when its test gave it nothing else. */
  appBehaviour: ((app: SimApp, s: AppSignal) => void) | null = null;

  app(task: string, vpid: number): SimApp {
    const a = this.apps.get(`${task}/${vpid}`);
    if (a === undefined) throw new RangeError(`no linked process ${task}/${vpid}`);
    return a;
  }

  /** The process sends a signal through its library: its current epoch is attached unless
   *  `epoch` overrides it (a stale or forged one). */
  appSend(app: SimApp, signum: number, dest: number, arg: number, epoch = app.epoch): void {
    const n = this.node(app.agent);
    if (!app.alive || n.procs === null) return;
    this.sentRequests.push({ era: app.era, task: app.task, vpid: app.vpid, pid: app.pid, signum, dest, arg, epoch, atMs: this.now });
    this.run(n, stepProcs(n.procs, { type: 'app.signal', task: app.task, vpid: app.vpid, request: { signum, dest, arg, epoch } }));
  }

  private onDeliver(n: Node, task: string, vpid: number, message: AgentToProc): void {
    const app = this.apps.get(`${task}/${vpid}`);
    if (app === undefined || app.agent !== n.agent) return;
    this.world.scheduler.after(APP_DELIVERY_MS, () => {
      if (!app.alive) return;
      if (message.type === 'mapping') {
        app.mapping = { ...message };
        app.epoch = message.epoch;
        app.mappedEpoch ??= message.epoch;
        this.quorumsHeard.push({ era: app.era, task, epoch: message.epoch, quorum: message.quorum, atMs: this.now });
      } else if (message.type === 'signal') {
        // Spec §4.6 step 4: a delivered broadcast sets the process's epoch.
        if (message.dest === GSIG_BROADCAST) app.epoch = message.epoch;
        if (message.dest === GSIG_BROADCAST && message.src === GSIG_CM && message.signum === GSIG.REP_QUORUMSET) {
          this.quorumsHeard.push({ era: app.era, task, epoch: message.epoch, quorum: message.arg, atMs: this.now });
        }
        const s: AppSignal = { ...message, atMs: this.world.now };
        app.received.push(s);
        (app.onSignal ?? this.appBehaviour)?.(app, s);
      }
    });
  }

  kill(task: string): void {
    const key = `${this.world.resets}|${task}`;
    if (!this.killsAsked.has(key)) this.killsAsked.set(key, this.now);
    this.operate((nonce) => ({ type: 'task.kill', nonce, task }));
  }

  onOperatorFrame(frame: Frame): void {
    for (const item of frame.items) {
      if (item.type !== 'op.reply') continue;
      const p = this.pending.get(item.nonce);
      if (p === undefined) continue;
      p.replies.set(frame.from, `${item.rsn}|${item.ok}|${item.text}`);
      const votes = new Map<string, number>();
      for (const v of p.replies.values()) votes.set(v, (votes.get(v) ?? 0) + 1);
      if ((votes.get(`${item.rsn}|${item.ok}|${item.text}`) ?? 0) < 2) continue;
      this.pending.delete(item.nonce);
      if (p.payload.type === 'task.submit') {
        if (item.ok) this.accepted.set(item.nonce, { id: item.text, payload: p.payload, era: this.world.resets, gone: false });
        else this.refused.push({ payload: p.payload, text: item.text });
      }
      p.done?.(item.ok, item.text);
    }
  }

  // ---- faults --------------------------------------------------------------------------------

  /** A task process crashes (`kill -9` from outside). */
  crashProcess(pick: (running: number) => number): void {
    const all = [...this.nodes.values()].flatMap((n) => n.os.running().map((p) => ({ n, p })));
    if (all.length === 0) return;
    const chosen = all[pick(all.length)];
    chosen?.n.os.crash(chosen.p.pid);
  }

  /** The agent dies; its keeper starts a new incarnation after `restartAfterMs`. */
  agentDeath(agent: ProcessId, restartAfterMs: number): void {
    this.trouble(agent, this.now, this.now + restartAfterMs);
    this.world.crash(agent);
    const era = this.world.resets;
    this.world.scheduler.after(restartAfterMs, () => {
      // A cluster reset meanwhile restarted it already (and its keeper with it).
      if (era === this.world.resets && !this.world.isUp(agent)) this.world.restart(agent);
    });
  }

  /** The node loses power: agent, keeper and every process. Only the watchdog brings it back. */
  powerOff(agent: ProcessId): void {
    const n = this.node(agent);
    this.trouble(agent, this.now, this.now);
    n.os.powerOff();
    for (const app of this.allApps) if (app.agent === agent) app.alive = false;
    this.world.crash(agent);
  }

  /** The watchdog's power reset of `nodeName`: off, then the keeper starts the agent. */
  private powerReset(nodeName: string): void {
    const n = [...this.nodes.values()].find((x) => x.node === nodeName);
    if (n === undefined) return;
    this.stats.resets++;
    this.powerOff(n.agent);
    const era = this.world.resets;
    this.world.scheduler.after(NODE_REBOOT_MS, () => {
      if (era === this.world.resets) this.world.restart(n.agent);
    });
  }

  /** `agent`'s node is cut off from everyone in [fromMs, untilMs). */
  partition(agent: ProcessId, fromMs: number, untilMs: number): void {
    this.trouble(agent, fromMs, untilMs);
    this.world.network.addPartition({ fromMs, untilMs, isolated: [agent] });
  }

  private trouble(agent: ProcessId, fromMs: number, untilMs: number): void {
    const list = this.troubles.get(agent) ?? [];
    list.push({ fromMs, untilMs });
    this.troubles.set(agent, list);
  }

  /** Two replicas crash at the same moment (spec §9.2 A21): the group cannot go on (f = 1), and
   *  only the watchdog's cluster reset brings it back. */
  crashReplicas(replicas: readonly ProcessId[]): void {
    for (const r of replicas) this.world.crash(r);
  }

  /** The watchdog's cluster reset (spec §1.6 rules 2 and 3; PROTOCOL §10.9), as the local reset
   *  hook of `trine scc` carries it out: every node loses power at once — every replica (spares
   *  and replacements too), every agent, every task process — then the watchdog reads every
   *  replica's task journal from the disks, which are then deleted, and the nodes boot: the
   *  initial replicas and every agent start with higher incarnations, a fresh group. */
  private resetCluster(reason: string): void {
    const checker = this.world.checker;
    checker.setTime(this.now);
    const failed = checker.onWatchdogReset(reason);
    checker.reach('inv t.restored');
    // What the disks hold, in membership order (initial replicas, then spares).
    const ids = [...this.world.membership.replicas, ...this.world.membership.spareReplicas].filter((id) => this.disks.has(id));
    const journals = ids.map((id) => ({ source: `${id}.journal`, data: this.disks.get(id) as Uint8Array }));
    const held = journalledTasks(journals);
    // t.restored, the journals' part: an accepted task a correct replica of the group still ran
    // must be on some disk, or the reset loses it.
    const owed = new Map<string, string>();
    for (const [nonce, a] of this.accepted) {
      if (a.gone) continue;
      if (held.has(nonce)) {
        owed.set(nonce, a.id);
        continue;
      }
      for (const rid of this.servingReplicas()) {
        const rec = this.recordsByNonce(rid).get(nonce);
        if (rec !== undefined && rec.outcome === null) this.fail('t.restored', `task ${rec.id} (accepted as ${a.id}) is live at ${rid} but no journal holds it at the cluster reset`);
      }
      a.gone = true;
    }
    const run: ClusterResetRun = { atMs: this.now, reason, failed, journals: ids, held, owed };
    this.clusterResets.push(run);
    this.stats.clusterResets++;
    // Power off.
    for (const n of this.nodes.values()) n.os.powerOff();
    for (const app of this.allApps) app.alive = false;
    this.world.clusterPowerOff();
    this.deaths.clear();
    // The operator's client reconnects to the fresh group; what the old one answered is void.
    for (const p of this.pending.values()) p.replies.clear();
    // The watchdog reads every journal, then the disks are wiped.
    this.watchdog.input({ type: 'restore.load', nowMs: this.now, journals });
    this.disks.clear();
    const era = this.world.resets;
    this.world.scheduler.after(CLUSTER_REBOOT_MS, () => {
      if (era === this.world.resets) this.world.clusterPowerOn();
    });
    this.world.scheduler.after(RESTORE_BOUND_MS, () => {
      if (era === this.world.resets) checkRestored(this.world, run, this.watchdog.status(), this.submitted, RESTORE_BOUND_MS);
    });
  }

  /** The tasks replica `rid` holds, by their submit's nonce (src/sim/restore-checks.ts). */
  recordsByNonce(rid: ProcessId): Map<string, HeldTask> {
    return tasksByNonce(this.world, rid);
  }

  private servingReplicas(): ProcessId[] {
    return servingReplicas(this.world);
  }

  /** The id of the task submitted with `nonce` in the group now, while it is live there. */
  liveTaskId(nonce: string): string | null {
    for (const rid of this.servingReplicas()) {
      const t = this.recordsByNonce(rid).get(nonce);
      if (t !== undefined && t.outcome === null) return t.id;
    }
    return null;
  }

  // ---- node hooks (World) --------------------------------------------------------------------

  onAgentBoot(id: ProcessId, _inc: number): { resync: boolean } {
    const n = this.node(id);
    n.epoch++;
    n.allowed.clear();
    n.procs = createAgentProcs({
      connectTimeoutTicks: Math.max(1, Math.ceil(this.timing.connectTimeoutMs / this.timing.taskTickMs)),
      recovered: n.records,
    });
    const epoch = n.epoch;
    const tick = (): void => {
      if (n.epoch !== epoch || n.procs === null) return;
      this.run(n, stepProcs(n.procs, { type: 'tick' }));
      for (const { ref, pid } of adoptedProcs(n.procs)) {
        if (!n.os.alive(pid)) this.run(n, stepProcs(n.procs, { type: 'os', ref, event: { type: 'os.exited', code: null, signal: null } }));
      }
      this.world.scheduler.after(this.timing.taskTickMs, tick);
    };
    this.world.scheduler.after(this.timing.taskTickMs, tick);
    return { resync: n.records.length > 0 };
  }

  onDown(id: ProcessId): void {
    const n = this.nodes.get(id);
    if (n === undefined) return;
    n.epoch++;
    n.procs = null;
    n.os.detachObservers();
  }

  onEffect(id: ProcessId, effect: Exclude<CoreEffect, { type: 'send' }>): void {
    const n = this.nodes.get(id);
    if (n !== undefined) {
      if (effect.type === 'deliver.command') this.onCommand(n, effect.command);
      return;
    }
    if (effect.type === 'persist.tasks') this.disks.set(id, effect.journal);
    if (effect.type === 'deliver.request' && effect.request.type === 'proc.report' && this.world.checker.isCorrect(id)) {
      for (const r of effect.request.reports) {
        if (r.pid === 0 || r.kind === 'spawnSucceeded') continue;
        const k = `${id}|${r.pid}`;
        const count = (this.deaths.get(k) ?? 0) + 1;
        this.deaths.set(k, count);
        this.world.checker.reach('inv t.reported-once');
        if (count > 1) this.fail('t.reported-once', `${id} applied the end of pid ${r.pid} (${r.task}/${r.vpid}) ${count} times`);
      }
    }
  }

  private onCommand(n: Node, command: GroupCommand): void {
    const procs = n.procs;
    if (procs === null) return;
    if (command.type === 'proc.spawn') {
      const k = `${command.task}/${command.vpid}`;
      n.allowed.set(k, (n.allowed.get(k) ?? 0) + 1);
    }
    const local = recoveredProcs(procs).map((r) => ({ ...r, alive: n.os.alive(r.pid) }));
    this.run(n, stepProcs(procs, { type: 'command', command, local }));
  }

  /** The agent driver's work (src/daemon/proc-driver.ts does the same against the real OS). */
  private run(n: Node, effects: AgentProcsEffect[]): void {
    const epoch = n.epoch;
    for (const e of effects) {
      switch (e.type) {
        case 'spawn': {
          const k = `${e.spec.taskId}/${e.spec.vpid}`;
          const left = n.allowed.get(k) ?? 0;
          this.world.checker.reach('inv t.commanded');
          if (left <= 0) this.fail('t.commanded', `${n.agent} spawned ${k} without a delivered proc.spawn`);
          n.allowed.set(k, left - 1);
          this.stats.spawns++;
          const ref: ProcRef = e.ref;
          const linked = e.linked;
          n.os.spawnProcess({ ...e.spec, logDir: '/sim' }, (ev: SpawnerEvent) => {
            const key = `${ref.task}/${ref.vpid}`;
            // What runs on the node, not what any replica believes: a placement bug anywhere
            // (the group's count, the agent's, a faulty replica's) shows here, as it forks.
            const live = ev.type === 'os.spawned' ? n.os.running().length : 0;
            if (ev.type === 'os.spawned') this.world.checker.reach('inv t.slots');
            if (live > this.slots) this.fail('t.slots', `${key} started on ${n.node} as its process number ${live}: the node has ${this.slots} slot(s)`);
            if (ev.type === 'os.exited') {
              const app = this.apps.get(key);
              if (app !== undefined && app.agent === n.agent) app.alive = false;
            }
            if (n.epoch === epoch && n.procs !== null) this.run(n, stepProcs(n.procs, { type: 'os', ref, event: ev }));
            if (linked && ev.type === 'os.spawned') {
              const app: SimApp = {
                task: ref.task, vpid: ref.vpid, agent: n.agent, pid: ev.pid, epoch: 0, mapping: null, mappedEpoch: null, received: [], alive: true, era: this.world.resets, onSignal: null,
              };
              const previous = this.apps.get(key);
              if (previous !== undefined) app.onSignal = previous.onSignal;
              this.apps.set(key, app);
              this.allApps.push(app);
              this.world.scheduler.after(APP_CONNECT_MS, () => {
                if (n.epoch !== epoch || n.procs === null || !n.os.alive(ev.pid)) return;
                const r = connectApp(n.procs, ref.task, ref.vpid, `sim-${n.node}:${ev.pid}`);
                this.run(n, r.effects);
              });
            }
          });
          break;
        }
        case 'kill':
          this.stats.kills++;
          n.os.killProcess(e.pid, e.signal);
          break;
        case 'report':
          this.stats.reports++; // queued in the table's outbox
          break;
        case 'flush':
          // Not from inside the core's step: on the next event, as the daemon's setImmediate.
          this.world.scheduler.after(0, () => this.flushRequests(n, epoch));
          break;
        case 'records':
          n.records = e.procs;
          break;
        case 'deliver':
          this.onDeliver(n, e.task, e.vpid, e.message);
          break;
        case 'log':
          break;
        default:
          unreachable(e);
      }
    }
  }

  /** What the daemon's setImmediate flush does: what the table's outbox gives, in its order
   *  (src/core/agent-outbox.ts). An incarnation that went down meanwhile took its outbox along. */
  private flushRequests(n: Node, epoch: number): void {
    if (n.epoch !== epoch || n.procs === null) return;
    for (const r of drainOutbox(n.procs.outbox)) this.world.request(n.agent, r);
  }

  /** t.atomic-broadcast (spec §4.1 (b), §9.1 item 54): the processes of a task received the
   *  same broadcast at each epoch, and each received its broadcasts in increasing epochs. */
  private checkAtomicBroadcast(): void {
    const byEpoch = new Map<string, { what: string; who: string }>();
    for (const app of this.allApps) {
      let last = -1;
      for (const r of app.received) {
        if (r.dest !== GSIG_BROADCAST) continue;
        const who = `${app.task}/${app.vpid} (pid ${app.pid})`;
        if (r.epoch <= last) this.fail('t.atomic-broadcast', `${who} received epoch ${r.epoch} after ${last}`);
        last = r.epoch;
        const key = `${app.era}|${app.task}|${r.epoch}`;
        const what = `${r.signum}/${r.src}/${r.arg}`;
        this.world.checker.reach('inv t.atomic-broadcast');
        const seen = byEpoch.get(key);
        if (seen === undefined) byEpoch.set(key, { what, who });
        else if (seen.what !== what) this.fail('t.atomic-broadcast', `epoch ${r.epoch} of ${app.task}: ${seen.who} got ${seen.what}, ${who} got ${what}`);
      }
    }
  }

  /** t.group-request (src/sim/group-requests.ts). */
  private checkGroupRequests(): void {
    const judged = checkGroupRequests({
      requests: this.sentRequests,
      quorums: this.quorumsHeard,
      apps: this.allApps,
      lifetime: (agent, pid) => this.node(agent).os.processes.get(pid) ?? null,
      troubled: (agent, fromMs, toMs) => (this.troubles.get(agent) ?? []).some((t) => t.fromMs <= toMs && fromMs <= t.untilMs),
      killAskedAtMs: (era, task) => this.killsAsked.get(`${era}|${task}`) ?? null,
    }, (message) => this.fail('t.group-request', message));
    this.stats.groupReplies += judged;
    this.world.checker.reach('inv t.group-request', judged);
  }

  private node(agent: ProcessId): Node {
    const n = this.nodes.get(agent);
    if (n === undefined) throw new RangeError(`no simulated node for ${agent}`);
    return n;
  }

  // ---- checks ----------------------------------------------------------------------------------

  /** The views of the correct replicas that are up. */
  views(): Map<ProcessId, ClusterView> {
    const out = new Map<ProcessId, ClusterView>();
    for (const id of this.world.replicaIds) {
      const r = this.world.replica(id);
      if (r !== null && this.world.checker.isCorrect(id)) out.set(id, (r as unknown as { clusterView(): ClusterView }).clusterView());
    }
    return out;
  }

  /** The accepted tasks the group owes now, each with its id at replica `rid` (null: unknown
   *  there). A task that had finished before a cluster reset is owed nothing after it. */
  private owedAt(rid: ProcessId): { nonce: string; accepted: AcceptedTask; id: string | null }[] {
    const held = this.recordsByNonce(rid);
    return [...this.accepted].filter(([, a]) => !a.gone).map(([nonce, a]) => ({ nonce, accepted: a, id: held.get(nonce)?.id ?? null }));
  }

  /** Every accepted task has finished at every correct replica, and no process runs. */
  settled(): boolean {
    for (const [rid, v] of this.views()) {
      for (const { id } of this.owedAt(rid)) {
        const t = id === null ? undefined : v.tasks.find((x) => x.id === id);
        if (t === undefined || t.outcome === null) return false;
        // A process's last report may still be in flight after its task gave up (T17).
        if (t.procs.some((p) => p.state === 'spawning' || p.state === 'running' || p.state === 'terminating')) return false;
      }
    }
    return this.pending.size === 0 && [...this.nodes.values()].every((n) => n.os.running().length === 0);
  }

  /** t.outcome: what a correct replica says of a finished task's processes is what happened to
   *  them on their nodes' OS: each one's exit code and signal, and a task that ended normally
   *  had every process exit 0 by itself. A rollback task's outcome counts only each rank's
   *  current holder (PROTOCOL §11.2): a holder it replaced may have crashed. */
  private checkOutcomes(): void {
    const os = new Map<string, SimSpawner>([...this.nodes.values()].map((n) => [n.node, n.os]));
    for (const [rid, v] of this.views()) {
      for (const t of v.tasks) {
        if (t.outcome === null) continue;
        const rollback = t.procs.some((p) => p.rank !== null);
        for (const p of t.procs) {
          const real = p.pid === null || p.node === null ? undefined : os.get(p.node)?.processes.get(p.pid);
          if (real === undefined || real.exitedAtMs === null) continue; // t.truth's to judge
          const what = `${rid}: ${t.id}/${p.vpid} (pid ${p.pid} on ${p.node})`;
          this.world.checker.reach('inv t.outcome');
          if (p.exitCode !== null || p.signal !== null) {
            if (p.exitCode !== real.code || p.signal !== real.signal) {
              this.fail('t.outcome', `${what} ended with code ${p.exitCode}, signal ${p.signal}, but its OS says code ${real.code}, signal ${real.signal}`);
            }
          }
          if (t.outcome === 'normal' && (!rollback || p.rank !== null) && (real.code !== 0 || real.signal !== null)) {
            this.fail('t.outcome', `${what}: the task ended normally but the process ended with code ${real.code}, signal ${real.signal}`);
          }
        }
      }
    }
  }

  /** End-of-run checks; `healed`: the faults are over and the run had time to settle. */
  finish(healed: boolean): void {
    for (const [rid, v] of this.views()) {
      for (const { accepted: a, id: heldAs } of this.owedAt(rid)) {
        const id = heldAs ?? a.id;
        const t = heldAs === null ? undefined : v.tasks.find((x) => x.id === heldAs);
        this.world.checker.reach('inv t.accepted');
        if (t === undefined) {
          this.fail('t.accepted', `task ${a.id} was accepted but ${rid} does not know it`);
          continue;
        }
        if (healed && t.outcome === null) this.fail('t.accepted', `task ${id} never finished at ${rid}: ${t.state}${t.waitReason !== null ? ` (${t.waitReason})` : ''}`);
        if (!healed) continue;
        for (const p of t.procs) {
          if (p.pid === null || (p.state !== 'running' && p.state !== 'terminating')) continue;
          const n = [...this.nodes.values()].find((x) => x.node === p.node);
          const os = n?.os.processes.get(p.pid);
          this.world.checker.reach('inv t.truth');
          if (os !== undefined && os.exitedAtMs !== null) {
            this.fail('t.truth', `${rid} believes ${id}/${p.vpid} (pid ${p.pid}) ${p.state} but it ended at ${os.exitedAtMs} ms`);
          }
        }
      }
    }
    this.checkOutcomes();
    this.checkAtomicBroadcast();
    this.checkGroupRequests();
    const last = this.clusterResets[this.clusterResets.length - 1];
    if (last !== undefined) checkNotInvented(this.world, last, this.submitted);
    if (!healed) return;
    for (const n of this.nodes.values()) {
      for (const p of n.os.running()) this.fail('t.truth', `pid ${p.pid} (${p.task}/${p.vpid}) still runs on ${n.node} after every task finished`);
    }
    if (this.pending.size > 0) this.fail('t.accepted', `${this.pending.size} operator request(s) never got two matching replies`);
  }
}
