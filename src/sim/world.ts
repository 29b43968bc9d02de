// A simulated cluster: real cores inside real Shells (src/core/shell.ts), wired to the
// simulated network, clock and keys, with the invariant checker watching every frame and
// every effect. It knows nothing of fault plans or workloads (src/sim/run-seed.ts drives it);
// scenario tests drive it directly.
import { createHash } from 'node:crypto';
import { DEFAULT_TIMING, type Timing } from '../core/constants.ts';
import type { Core, CoreEffect, CoreInput, Membership } from '../core/node.ts';
import type { Hash, LinkAuth, ProcessId, Signer, Transport, Verifier } from '../core/ports.ts';
import type { ReplicatedState } from '../core/replicated-state.ts';
import { Shell } from '../core/shell.ts';
import { decodeFrame, encodeFrame, signCG } from '../core/wire/frame.ts';
import type { AgentRequest, Frame, Item, OperatorRequest } from '../core/wire/messages.ts';
import { byzantineCore, corruptState, type ByzantineBehaviour, type Corruption } from '../faults/byzantine.ts';
import { InvariantChecker, type ProcessKind } from './invariants.ts';
import {
  NO_NETWORK_FAULTS, SimNetwork, type CorruptionKind, type LinkTiming, type NetworkFaults, type NetworkOptions, type WireFrame,
} from './network.ts';
import { streamFor } from './random.ts';
import { Scheduler } from './scheduler.ts';
import { createKeyring, type SimCrypto, type SimKeyring } from './sim-signer.ts';
import { TraceDigest } from './trace-digest.ts';

/** A shell is ticked at least this often even when its core asks for no wake-up, as a daemon's
 *  timer would: a core that forgets to ask still makes progress, just later. */
export const TICK_MAX_GAP_MS = 10;
/** Ticks one process may take without the clock moving: beyond this its core is livelocked
 *  (its nextWakeMs() stays at "now") and the run reports it instead of spinning. */
export const MAX_TICKS_AT_SAME_MS = 64;
/** Incarnations are start times in ms (ReplicaStatus.inc); simulated starts are offset so a
 *  restart's incarnation is always higher and never 0. */
export const INCARNATION_BASE = 1_000_000;
/** Replica ids held in reserve for replacements (PROTOCOL §10.6). */
export const SIM_SPARE_REPLICAS = ['r4', 'r5', 'r6', 'r7', 'r8', 'r9'];
/** Slots each simulated agent announces (node.join); the group layer does not use them. */
export const SIM_AGENT_SLOTS = 4;

/** What the simulator needs of a replica core beyond the Core contract (src/core/replica.ts). */
export type ReplicaCore = Core & {
  digestHex(): string;
  rsn(): number;
  phase(): 'serving' | 'installing' | 'syncing' | 'retired';
  /** Drop the cached digest after a corruption (absent in stand-in cores). */
  forgetDigest?(): void;
  /** The replicated state (absent in stand-in cores of the simulator's own tests). */
  state?(): { replicas: ProcessId[]; group: { view: number; recovery: { node: string | null } | null } };
  /** Its peers' links as it sees them (absent in stand-in cores). */
  status?(nowMs: number): { replicas: readonly { id: ProcessId; connected: boolean; health: string }[] };
};
/** Simulated start-up time of a replacement replica an agent was told to start (PROTOCOL
 *  §10.6): a daemon takes about a second on a loaded machine; the simulator keeps runs short. */
export const REPLICA_SPAWN_DELAY_MS = 40;
export type CoreFactories = {
  replica(opts: {
    id: ProcessId; membership: Membership; hash: Hash; inc: number; signer: Signer; verifier: Verifier;
    joining?: { view: number; primary: ProcessId; replicas: readonly ProcessId[] };
  }): ReplicaCore;
  /** `signer` is the agent's own key: it signs its CGs inside the core (PROTOCOL §2.3). */
  agent(opts: { id: ProcessId; membership: Membership; inc: number; slots: number; signer: Signer; resync?: boolean }): Core;
};

/** What runs beside the cores on a node (src/sim/tasks.ts): it learns of every agent
 *  incarnation and every effect, and tells a new agent whether to ask for `procs.adopt`. */
export type NodeHooks = {
  onAgentBoot(id: ProcessId, inc: number): { resync: boolean };
  onDown(id: ProcessId): void;
  onEffect(id: ProcessId, effect: Exclude<CoreEffect, { type: 'send' }>): void;
  /** Frames to the operator (op.reply). */
  onOperatorFrame?(frame: Frame): void;
};

export const DEFAULT_LINK: LinkTiming = { baseLatencyMs: 0.3, jitterMeanMs: 0.2 };

export type WorldOptions = {
  seed: number;
  agents: number;
  cores: CoreFactories;
  crypto?: SimCrypto;
  timing?: Partial<Timing>;
  link?: LinkTiming;
  networkFaults?: NetworkFaults;
  /** Replicas that run a Byzantine wrapper from the start (they count as faulty). */
  byzantine?: ReadonlyMap<ProcessId, readonly ByzantineBehaviour[]>;
  /** Replicas wrapped the same way but still counted as correct: a deliberate bug the
   *  invariants must catch (tests of the checker). */
  bugs?: ReadonlyMap<ProcessId, readonly ByzantineBehaviour[]>;
  /** Record every frame and effect in `trace` (scenario tests; costs time). */
  trace?: boolean;
  /** Keep a digest of the whole trace (`traceDigest()`, src/sim/trace-digest.ts) without keeping
   *  the trace: what a change that should alter nothing observable is checked by. */
  digest?: boolean;
  /** Tests of the checker: wrap any core (after a Byzantine wrapper) or the shared verifier,
   *  to plant a bug the invariants must catch. */
  wrapCore?: (id: ProcessId, core: Core) => Core;
  wrapVerifier?: (verifier: Verifier) => Verifier;
  /** The same for each process's link keys (PROTOCOL §2.4). */
  wrapLinkAuth?: (linkAuth: LinkAuth) => LinkAuth;
  /** Each process's clock reads simulated time plus its offset (daemons' clocks disagree; a
   *  core must only ever compare its own readings). Default 0. */
  clockOffsetMs?: (id: ProcessId) => number;
  /** Node-side simulation (task processes) and the operator's inbox. */
  hooks?: NodeHooks;
  /** Agent slots (default SIM_AGENT_SLOTS). */
  slots?: number;
  /** Whether `agent` (on `node`) fails to start replica `id` when the group commands it
   *  (spec §9.2 A24, campaign 6Kf): the replica never runs. Default: every start succeeds. */
  refuseReplicaStart?: (id: ProcessId, node: string, agent: ProcessId) => boolean;
};

export type TracedEffect = Exclude<CoreEffect, { type: 'send' }>;
export type TraceEvent =
  | { type: 'out'; atMs: number; from: ProcessId; to: ProcessId; items: readonly Item[] }
  | { type: 'accepted'; atMs: number; at: ProcessId; frame: Frame }
  | { type: 'delivered'; atMs: number; frame: WireFrame; corrupted: CorruptionKind | null }
  | { type: 'effect'; atMs: number; at: ProcessId; effect: Exclude<CoreEffect, { type: 'send' }> }
  | { type: 'crash' | 'restart' | 'hang' | 'resume'; atMs: number; at: ProcessId }
  /** A replica's state corrupted, or a misbehaviour switched on (`detail` says which). */
  | { type: 'corrupt' | 'misbehave'; atMs: number; at: ProcessId; detail: string }
  /** An agent failed to start the replica it was told to (WorldOptions.refuseReplicaStart). */
  | { type: 'start.refused'; atMs: number; at: ProcessId; replica: ProcessId };

type SimProcess = {
  id: ProcessId;
  kind: ProcessKind;
  up: boolean;
  inc: number;
  shell: Shell | null;
  /** The unwrapped replica core (digest, RSN), when this is a replica. */
  replica: ReplicaCore | null;
  /** Time of the pending tick event, Infinity when none is pending. */
  tickAtMs: number;
  tickToken: number;
  sameTimeTicks: number;
  lastTickMs: number;
  /** The items of the frame the shell is about to hand the transport (see onFrameOut). */
  lastItems: readonly Item[];
  clockOffsetMs: number;
  /** The last reading of its clock: readings never go backwards (see `clock`). */
  lastLocalMs: number;
  /** While hung: frames that arrived, handed over in order when it resumes. */
  hungUntilMs: number | null;
  /** A spare replica id: not started with the cluster, only on an agent's command. */
  spare: boolean;
  /** How a replacement joins the group, from the agent's `replica.spawn` (PROTOCOL §10.6). */
  joining: { view: number; primary: ProcessId; replicas: readonly ProcessId[] } | null;
  /** A replica's Byzantine behaviours (WorldOptions.byzantine/bugs, World.misbehave): read by
   *  its wrapper at every step, so they can be switched on while it runs. */
  behaviours: readonly ByzantineBehaviour[];
  backlog: { bytes: Uint8Array; from: ProcessId; corrupted: CorruptionKind | null }[];
};

function totalDrops(shell: Shell): number {
  let n = 0;
  for (const k in shell.counters.drops) n += shell.counters.drops[k as keyof typeof shell.counters.drops] ?? 0;
  return n;
}

const sha256: Hash = (data) => new Uint8Array(createHash('sha256').update(data).digest());

export class World {
  readonly scheduler = new Scheduler();
  readonly network: SimNetwork;
  readonly checker: InvariantChecker;
  readonly membership: Membership;
  readonly keyring: SimKeyring;
  readonly trace: TraceEvent[] = [];
  private readonly digest: TraceDigest | null;
  private readonly procs = new Map<ProcessId, SimProcess>();
  /** The bytes being handed to a shell right now, for the admission check (c). */
  private delivering: Uint8Array | null = null;
  private tickTokens = 0;
  private readonly operatorTransport: Transport;
  private operatorItems: readonly Item[] = [];
  /** Bytes a faulty process made up (sendRaw): the admission check does not ask a decoder to
   *  accept them, only never to accept what the sender's shell did not emit. */
  private readonly forged = new WeakSet<Uint8Array>();
  /** Cluster resets so far: work scheduled by an earlier group (a replacement's start) is void. */
  private era = 0;

  constructor(private readonly opts: WorldOptions) {
    const replicas = ['r1', 'r2', 'r3'];
    const agents = Array.from({ length: opts.agents }, (_, i) => ({ id: `a${i + 1}`, node: `n${i + 1}` }));
    this.membership = {
      cluster: 'sim',
      replicas,
      replicaNodes: ['n1', 'n2', 'n3'],
      spareReplicas: SIM_SPARE_REPLICAS,
      agents,
      scc: 'scc',
      operators: ['op'],
      timing: { ...DEFAULT_TIMING, ...opts.timing },
    };
    this.keyring = createKeyring(opts.crypto ?? 'keyed', [...replicas, ...SIM_SPARE_REPLICAS, ...agents.map((a) => a.id), 'scc', 'op'], `seed-${opts.seed}`);
    this.checker = new InvariantChecker(opts.seed);
    const net: NetworkOptions = {
      scheduler: this.scheduler,
      rng: streamFor(opts.seed, 'network'),
      timing: opts.link ?? DEFAULT_LINK,
      faults: opts.networkFaults ?? NO_NETWORK_FAULTS,
    };
    this.digest = opts.digest === true ? new TraceDigest() : null;
    if (opts.trace === true || this.digest !== null) net.onDeliver = (frame, corrupted) => this.record({ type: 'delivered', atMs: this.now, frame, corrupted });
    this.network = new SimNetwork(net);
    for (const id of replicas) this.addProcess(id, 'replica');
    for (const id of SIM_SPARE_REPLICAS) this.addProcess(id, 'replica', true);
    for (const a of agents) this.addProcess(a.id, 'agent');
    this.network.attach('op', {
      receive: (bytes, from) => {
        const r = decodeFrame(bytes, { cluster: this.membership.cluster, self: 'op', verifier: this.keyring.verifier, linkAuth: this.keyring.linkAuthFor('op') });
        if (r.ok) this.opts.hooks?.onOperatorFrame?.(r.value);
        void from;
      },
    });
    this.operatorTransport = this.network.transport('op', () => this.operatorItems);
    for (const [id] of opts.byzantine ?? []) this.checker.markByzantine(id);
    this.checker.groups = () => {
      const out = new Map<ProcessId, { view: number; members: readonly ProcessId[]; canGrow: boolean }>();
      for (const id of this.liveReplicas()) {
        const r = this.replica(id);
        if (r === null || r.state === undefined || r.phase() !== 'serving') continue;
        const s = r.state();
        // No spare id left, or no node to start one on: the group stays smaller (PROTOCOL §10.6).
        const canGrow = s.group.recovery !== null && s.group.recovery.node !== null;
        out.set(id, { view: s.group.view, members: s.replicas, canGrow });
      }
      return out;
    };
  }

  get now(): number {
    return this.scheduler.nowMs;
  }

  get replicaIds(): readonly ProcessId[] {
    return this.membership.replicas;
  }

  get agentIds(): readonly ProcessId[] {
    return this.membership.agents.map((a) => a.id);
  }

  isUp(id: ProcessId): boolean {
    return this.procs.get(id)?.up === true;
  }

  /** The unwrapped replica core of `id` while it is up. */
  replica(id: ProcessId): ReplicaCore | null {
    return this.procs.get(id)?.replica ?? null;
  }

  shell(id: ProcessId): Shell | null {
    return this.procs.get(id)?.shell ?? null;
  }

  /** Start every process (each at the current time, in membership order); spares wait. */
  start(): void {
    for (const p of this.procs.values()) if (!p.spare) this.boot(p);
  }

  /** Every replica process that is up (initial ids and replacements). */
  liveReplicas(): ProcessId[] {
    return [...this.procs.values()].filter((p) => p.kind === 'replica' && p.up).map((p) => p.id);
  }

  /** An agent was told to start replica `id` (PROTOCOL §10.6): it starts a little later, once. */
  private spawnReplica(agent: ProcessId, id: ProcessId, joining: NonNullable<SimProcess['joining']>): void {
    const p = this.procs.get(id);
    if (p === undefined || p.kind !== 'replica' || p.up || p.joining !== null) return;
    const node = this.membership.agents.find((a) => a.id === agent)?.node ?? '';
    if (this.opts.refuseReplicaStart?.(id, node, agent) === true) {
      this.record({ type: 'start.refused', atMs: this.now, at: agent, replica: id });
      return;
    }
    p.joining = joining;
    const era = this.era;
    this.scheduler.at(this.now + REPLICA_SPAWN_DELAY_MS, () => {
      if (era !== this.era) return; // the cluster was reset meanwhile: the node lost power
      if (p.up || !this.isUp(agent)) {
        p.joining = null;
        return;
      }
      this.checker.setTime(this.now);
      this.checker.onJoining(id);
      this.record({ type: 'restart', atMs: this.now, at: id });
      this.boot(p);
    });
  }

  /** A crash: no more input, no more output, frames in flight to it are lost. */
  crash(id: ProcessId): void {
    const p = this.proc(id);
    if (!p.up) return;
    if (p.kind === 'replica') this.checker.markFaulty(id);
    this.checker.setTime(this.now);
    p.up = false;
    p.shell = null;
    p.replica = null;
    this.network.detach(id);
    this.checker.onDown(id);
    this.opts.hooks?.onDown(id);
    this.record({ type: 'crash', atMs: this.now, at: id });
  }

  /** A power reset of the whole cluster (spec §1.6 rules 2 and 3, §9.2 A21): every replica
   *  (spares and replacements included) and every agent stops at once, and nothing an earlier
   *  group scheduled (a replacement's start) happens any more. The checker starts over with the
   *  fresh group (InvariantChecker.onClusterReset). `clusterPowerOn` starts it. */
  clusterPowerOff(): void {
    this.era++;
    this.checker.setTime(this.now);
    for (const p of this.procs.values()) {
      if (p.up) this.crash(p.id);
      p.joining = null;
    }
    // A Byzantine wrapper stays with its process (a compromised binary); corrupted state does not.
    const byzantine = [...this.procs.values()].filter((p) => p.behaviours.length > 0 && this.opts.bugs?.has(p.id) !== true).map((p) => p.id);
    this.checker.onClusterReset(byzantine);
  }

  /** After `clusterPowerOff`: the initial replicas and every agent start with higher
   *  incarnations, in membership order, as their keepers start them on boot; spares wait. */
  clusterPowerOn(): void {
    for (const p of this.procs.values()) if (!p.spare && !p.up) this.restart(p.id);
  }

  /** Whether the cluster was reset since `era` (a number read from `resets`). */
  get resets(): number {
    return this.era;
  }

  /** Record an effect of a process the world does not run (the watchdog, src/sim/tasks.ts) in
   *  the trace, so `effects()` shows it beside the cores'. */
  recordEffect(at: ProcessId, effect: TracedEffect): void {
    this.record({ type: 'effect', atMs: this.now, at, effect });
  }

  /** A fresh core with a higher incarnation, as the agent-keeper would start it. */
  restart(id: ProcessId): void {
    const p = this.proc(id);
    if (p.up) this.crash(id);
    this.checker.setTime(this.now);
    this.checker.onRestart(id);
    this.record({ type: 'restart', atMs: this.now, at: id });
    this.boot(p);
  }

  /** A hang (a stopped VM, a long pause): the process takes no input and no tick until
   *  `untilMs`, then gets every frame that arrived meanwhile, in order, and its timers fire late.
   *  Unlike a crash it keeps its state and its sessions. */
  hang(id: ProcessId, untilMs: number): void {
    const p = this.proc(id);
    if (!p.up || p.hungUntilMs !== null || untilMs <= this.now) return;
    if (p.kind === 'replica') this.checker.markFaulty(id);
    p.hungUntilMs = untilMs;
    this.record({ type: 'hang', atMs: this.now, at: id });
    const shell = p.shell;
    this.scheduler.at(untilMs, () => {
      if (p.shell !== shell || p.hungUntilMs === null) return;
      p.hungUntilMs = null;
      p.tickAtMs = Infinity; // the tick due while hung was skipped
      this.record({ type: 'resume', atMs: this.now, at: id });
      const backlog = p.backlog;
      p.backlog = [];
      for (const b of backlog) this.receive(p, shell as Shell, b.bytes, b.from, b.corrupted);
      this.input(p, { type: 'tick', nowMs: this.clock(p) });
    });
  }

  /** Corrupt a running replica's replicated state in place, as `trine inject corrupt-replica`
   *  does (src/faults/byzantine.ts corruptState). The replica is faulty from now on: what it
   *  sends or executes later is no evidence of what correct replicas do. Returns what changed,
   *  or null when there was nothing to change yet. */
  corrupt(id: ProcessId, kind: Corruption = 'slots'): string | null {
    const r = this.replica(id);
    if (r === null || r.state === undefined) throw new RangeError(`${id} is not a running replica core`);
    const detail = corruptState(r.state() as ReplicatedState, kind);
    if (detail === null) return null;
    r.forgetDigest?.();
    this.checker.setTime(this.now);
    this.checker.markFaulty(id);
    this.checker.markByzantine(id);
    this.record({ type: 'corrupt', atMs: this.now, at: id, detail });
    // Its next tick (heartbeat, timers) runs on the corrupted state.
    const p = this.proc(id);
    this.armTick(p);
    return detail;
  }

  /** Switch on Byzantine behaviours in a running replica (`trine inject byzantine-replica`);
   *  it counts as faulty from now on. */
  misbehave(id: ProcessId, behaviours: readonly ByzantineBehaviour[]): void {
    const p = this.proc(id);
    if (p.kind !== 'replica') throw new RangeError(`${id} is not a replica`);
    p.behaviours = behaviours;
    this.checker.markFaulty(id);
    this.checker.markByzantine(id);
    this.record({ type: 'misbehave', atMs: this.now, at: id, detail: behaviours.map((b) => b.type).join(',') });
  }

  /** A faulty process puts bytes of its own making on the wire to `to` (issue 5 "Bad input":
   *  garbage, frames signed with the wrong key, floods, replays). They travel like any frame
   *  `from` sends (rules, partitions, latency); `from` counts as faulty. */
  sendRaw(from: ProcessId, to: ProcessId, bytes: Uint8Array): void {
    const p = this.proc(from);
    if (!p.up) return;
    if (p.kind === 'replica') this.checker.markFaulty(from);
    this.forged.add(bytes);
    this.network.send({ from, to, bytes, items: [] });
  }

  /** An agent asks the group for something (spec §3.6 G6). Ignored while the agent is down. */
  request(agent: ProcessId, request: AgentRequest): boolean {
    const p = this.proc(agent);
    if (!p.up) return false;
    const hung = p.hungUntilMs;
    if (hung !== null) {
      // The application's request waits for its hung agent.
      this.scheduler.at(hung, () => this.request(agent, request));
      return true;
    }
    this.checker.setTime(this.now);
    this.checker.onRequestIssued(agent, request);
    this.input(p, { type: 'request', nowMs: this.clock(p), request });
    return true;
  }

  /** The operator sends `op.request` for `payload` to `to` (PROTOCOL §8.1). */
  operate(payload: OperatorRequest, to: readonly ProcessId[] = this.membership.replicas): void {
    const signer = this.keyring.signerFor('op');
    const signed = signCG({ csn: 0, gssnAck: 0, payload, client: 'op', inc: 0 }, signer);
    for (const r of to) {
      const items: Item[] = [{ type: 'op.request', signed }];
      const frame = encodeFrame({ from: 'op', to: r, items }, { cluster: this.membership.cluster, signer, linkAuth: this.keyring.linkAuthFor('op') });
      this.operatorItems = items;
      this.checker.onFrameOut('op', frame, items);
      this.operatorTransport.send(r, frame);
    }
  }

  /** A plain lane-0 message (spec §9.2 A15). Ignored while the sender is down. */
  notice(from: ProcessId, to: ProcessId, text: string): boolean {
    const p = this.proc(from);
    if (!p.up) return false;
    const hung = p.hungUntilMs;
    if (hung !== null) {
      this.scheduler.at(hung, () => this.notice(from, to, text));
      return true;
    }
    this.checker.setTime(this.now);
    this.checker.onNoticeIssued(from, to, text);
    this.input(p, { type: 'notice', nowMs: this.clock(p), to, text });
    return true;
  }

  runUntil(untilMs: number, stop?: () => boolean): 'done' | 'stopped' {
    return this.scheduler.runUntil(untilMs, stop);
  }

  /** (rsn, digest) of every replica that is up, for the end-of-run check. */
  digests(): Map<ProcessId, { rsn: number; digest: string }> {
    const out = new Map<ProcessId, { rsn: number; digest: string }>();
    for (const id of this.liveReplicas()) {
      const r = this.replica(id);
      if (r !== null && r.phase() === 'serving') out.set(id, { rsn: r.rsn(), digest: r.digestHex() });
    }
    return out;
  }

  /** The digest of the trace so far (needs `digest`; src/sim/trace-digest.ts). */
  traceDigest(): string | null {
    return this.digest?.hex() ?? null;
  }

  /** Effects as they happened, optionally filtered (needs `trace`). */
  effects(filter: (e: TracedEffect, at: ProcessId) => boolean = () => true): { atMs: number; at: ProcessId; effect: TracedEffect }[] {
    const out: { atMs: number; at: ProcessId; effect: TracedEffect }[] = [];
    for (const t of this.trace) if (t.type === 'effect' && filter(t.effect, t.at)) out.push({ atMs: t.atMs, at: t.at, effect: t.effect });
    return out;
  }

  // ---- internals ---------------------------------------------------------------------------

  private record(e: TraceEvent): void {
    if (this.opts.trace === true) this.trace.push(e);
    this.digest?.add(e);
  }

  private proc(id: ProcessId): SimProcess {
    const p = this.procs.get(id);
    if (p === undefined) throw new RangeError(`no simulated process ${id}`);
    return p;
  }

  private addProcess(id: ProcessId, kind: ProcessKind, spare = false): void {
    this.procs.set(id, {
      id, kind, up: false, inc: 0, shell: null, replica: null,
      tickAtMs: Infinity, tickToken: 0, sameTimeTicks: 0, lastTickMs: -1, lastItems: [],
      clockOffsetMs: this.opts.clockOffsetMs?.(id) ?? 0, lastLocalMs: -Infinity, hungUntilMs: null, backlog: [], spare, joining: null,
      behaviours: this.opts.byzantine?.get(id) ?? this.opts.bugs?.get(id) ?? [],
    });
    this.checker.addProcess(id, kind, spare);
  }

  private boot(p: SimProcess): void {
    const inc = Math.max(INCARNATION_BASE + Math.floor(this.clock(p)), p.inc + 1);
    p.inc = inc;
    this.checker.onBoot(p.id, inc);
    let core: Core;
    if (p.kind === 'replica') {
      const r = this.opts.cores.replica({
        id: p.id, membership: this.membership, hash: sha256, inc, signer: this.keyring.signerFor(p.id), verifier: this.keyring.verifier,
        ...(p.joining !== null ? { joining: p.joining } : {}),
      });
      p.replica = r;
      core = byzantineCore(r, () => p.behaviours, this.keyring.signerFor(p.id));
    } else {
      const resync = this.opts.hooks?.onAgentBoot(p.id, inc).resync ?? false;
      core = this.opts.cores.agent({
        id: p.id, membership: this.membership, inc, slots: this.opts.slots ?? SIM_AGENT_SLOTS, signer: this.keyring.signerFor(p.id), resync,
      });
    }
    if (this.opts.wrapCore !== undefined) core = this.opts.wrapCore(p.id, core);
    const inner = core;
    const probe: Core = {
      id: core.id,
      step: (input) => {
        if (input.type === 'frame') this.onAccepted(p, input.frame);
        return inner.step(input);
      },
      nextWakeMs: () => inner.nextWakeMs(),
    };
    const shell = new Shell({
      core: probe,
      cluster: this.membership.cluster,
      signer: this.keyring.signerFor(p.id),
      verifier: this.opts.wrapVerifier?.(this.keyring.verifier) ?? this.keyring.verifier,
      linkAuth: this.opts.wrapLinkAuth?.(this.keyring.linkAuthFor(p.id)) ?? this.keyring.linkAuthFor(p.id),
      transport: this.network.transport(p.id, () => p.lastItems),
      onEffect: (e) => this.onEffect(p, shell, e),
      onFrameOut: (to, frame, items) => {
        p.lastItems = items;
        this.checker.onFrameOut(p.id, frame, items);
        this.record({ type: 'out', atMs: this.now, from: p.id, to, items });
      },
    });
    p.shell = shell;
    p.up = true;
    p.tickAtMs = Infinity;
    p.sameTimeTicks = 0;
    p.hungUntilMs = null;
    p.backlog = [];
    this.network.attach(p.id, { receive: (bytes, from, corrupted) => this.receive(p, shell, bytes, from, corrupted) });
    // The first tick starts the handshakes.
    this.input(p, { type: 'tick', nowMs: this.clock(p) });
  }

  private onAccepted(p: SimProcess, frame: Frame): void {
    if (this.delivering === null) {
      this.checker.fail('c.admission', `${p.id} was handed a frame outside a network delivery`);
      return;
    }
    this.checker.onAccepted(p.id, this.delivering, frame);
    this.record({ type: 'accepted', atMs: this.now, at: p.id, frame });
  }

  private onEffect(p: SimProcess, shell: Shell, e: Exclude<CoreEffect, { type: 'send' }>): void {
    if (p.shell !== shell) return; // a step of an incarnation that has just been crashed
    this.checker.onEffect(p.id, e);
    this.record({ type: 'effect', atMs: this.now, at: p.id, effect: e });
    this.opts.hooks?.onEffect(p.id, e);
    // An agent carries out the group's commands about replicas (PROTOCOL §10.6).
    if (e.type === 'deliver.command' && p.kind === 'agent') {
      const c = e.command;
      if (c.type === 'replica.spawn') this.spawnReplica(p.id, c.id, { view: c.view, primary: c.primary, replicas: c.replicas });
      if (c.type === 'replica.kill') {
        const era = this.era;
        this.scheduler.at(this.now, () => (era === this.era ? this.crash(c.id) : undefined));
      }
    }
    if (e.type === 'log' && p.kind === 'replica') {
      if (e.event === 'replica.retired') this.checker.onRetired(p.id);
      if (e.event === 'state.installed') {
        const f = e.fields as { rsn: number; csnReceived: [ProcessId, number][] };
        this.checker.onInstalled(p.id, f.rsn, new Map(f.csnReceived));
      }
    }
    // An agent that terminates itself stops like a crash (spec §3.5 G2 3e).
    if (e.type === 'terminate') {
      p.up = false;
      p.shell = null;
      this.network.detach(p.id);
      this.checker.onDown(p.id);
      this.opts.hooks?.onDown(p.id);
    }
  }

  private receive(p: SimProcess, shell: Shell, bytes: Uint8Array, from: ProcessId, corrupted: CorruptionKind | null): void {
    if (p.shell !== shell || !p.up) return;
    if (p.hungUntilMs !== null) {
      p.backlog.push({ bytes, from, corrupted });
      return;
    }
    const dropsBefore = totalDrops(shell);
    this.delivering = bytes;
    try {
      this.guard(p, () => shell.receive(bytes, this.clock(p), from));
    } finally {
      this.delivering = null;
    }
    // (c) both ways: a damaged copy must be dropped by the decoder, an intact one never.
    const dropped = totalDrops(shell) > dropsBefore;
    if (corrupted !== null && !dropped) this.checker.fail('c.admission', `${p.id} did not drop a ${corrupted}-corrupted frame from ${from}`);
    if (corrupted === null && dropped && !this.forged.has(bytes)) this.checker.fail('c.admission', `${p.id} dropped an intact frame from ${from}: ${JSON.stringify(shell.counters.drops)}`);
    this.armTick(p);
  }

  /** What the process's own clock reads now: simulated time plus its offset, never less than
   *  an earlier reading, and never less than `floorMs` — a tick for a wake-up at local time T
   *  reads at least T, even where (t - offset) + offset rounds one ulp below T. */
  private clock(p: SimProcess, floorMs = -Infinity): number {
    const t = Math.max(p.lastLocalMs, this.now + p.clockOffsetMs, floorMs);
    p.lastLocalMs = t;
    return t;
  }

  private input(p: SimProcess, input: CoreInput): void {
    const shell = p.shell;
    if (shell === null || p.hungUntilMs !== null) return;
    this.guard(p, () => shell.input(input));
    this.armTick(p);
  }

  /** A core that throws has a bug: report it with the seed and stop that process. */
  private guard(p: SimProcess, run: () => void): void {
    this.checker.setTime(this.now);
    try {
      run();
    } catch (e) {
      const err = e as Error;
      this.checker.fail('e.core', `${p.id} threw ${err.name}: ${err.message}`);
      if (p.up) this.crash(p.id);
    }
  }

  private armTick(p: SimProcess): void {
    const shell = p.shell;
    if (!p.up || shell === null || p.hungUntilMs !== null) return;
    const now = this.now;
    let at = now + TICK_MAX_GAP_MS;
    let floorLocal = -Infinity;
    const wakeLocal = this.guardedWake(p, shell);
    const wake = wakeLocal === null ? null : wakeLocal - p.clockOffsetMs;
    if (wakeLocal !== null && wake !== null && wake < at) {
      at = Math.max(wake, now);
      floorLocal = wakeLocal;
    }
    if (at === now && p.lastTickMs === now && p.sameTimeTicks >= MAX_TICKS_AT_SAME_MS) {
      this.checker.fail('e.core', `${p.id} nextWakeMs() stays at ${now} after ${p.sameTimeTicks} ticks (livelock)`);
      at = now + 1;
    }
    if (p.tickAtMs <= at) return;
    const token = ++this.tickTokens;
    p.tickAtMs = at;
    p.tickToken = token;
    this.scheduler.at(at, () => {
      if (p.tickToken !== token || p.shell !== shell || !p.up || p.hungUntilMs !== null) return;
      p.tickAtMs = Infinity;
      if (p.lastTickMs === this.now) p.sameTimeTicks++;
      else p.sameTimeTicks = 0;
      p.lastTickMs = this.now;
      this.input(p, { type: 'tick', nowMs: this.clock(p, floorLocal) });
    });
  }

  private guardedWake(p: SimProcess, shell: Shell): number | null {
    try {
      return shell.nextWakeMs();
    } catch (e) {
      this.checker.fail('e.core', `${p.id} nextWakeMs() threw ${(e as Error).message}`);
      return null;
    }
  }
}
