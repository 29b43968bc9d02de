// The simulator's invariants (issue 2 item 8; DESIGN.md §3), checked as every event happens
// and once more at the end of a run. Safety (a)–(c) must hold while faults run; liveness (d)
// is asked only after the faults heal.
//   (a) group messages: every correct agent delivers each GSSN meant for it exactly once, in
//       GSSN order along its prevGssn chain, with the content the correct replicas sent;
//       correct replicas never send different content for the same GSSN.
//   (b) agent requests: each correct replica delivers in strictly increasing RSN order, each
//       client's CSNs exactly once in FIFO order, and all correct replicas deliver the same
//       (client, csn, request) at the same RSN; nothing a client did not issue.
//   (c) admission: every frame a shell accepts is byte-identical to a frame the claimed
//       sender's shell emitted; corrupted copies only ever show up as drops.
//   (d) liveness after heal: every request of a correct agent reached every correct replica,
//       every reply reached its correct agent, lane-0 notices arrived, digests agree.
import { isOperatorRequest } from '../core/replicated-state.ts';
import type { CoreEffect } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import { unreachable } from '../base/result.ts';
import { groupInput, type AgentRequest, type Frame, type GroupCommand, type GroupMsgGC, type Item } from '../core/wire/messages.ts';
import { pack } from '../core/wire/frame.ts';
import { toHex } from '../base/hex.ts';
import { bytesEqual } from '../base/bytes.ts';
import { commandKey, describeGC, frameKey, gcKey, requestKey } from './canonical.ts';

/** Violations kept per seed: the first explains the failure, the rest are usually echoes. */
export const MAX_VIOLATIONS_PER_SEED = 20;

export type InvariantName =
  | 'a.group-delivery'
  | 'b.request-order'
  | 'c.admission'
  | 'd.liveness'
  | 'e.core'
  /** Tasks (src/sim/tasks.ts): each process's end applied once; no spawn without a command;
   *  no accepted task lost; the manager's view matches what runs. */
  | 't.reported-once'
  | 't.commanded'
  | 't.accepted'
  | 't.truth'
  /** Placement: a node never runs more task processes than it has slots. */
  | 't.slots'
  /** A finished task's outcome, and its processes' exits, are what happened on the OS. */
  | 't.outcome'
  /** Linked tasks: every process of a task received the same broadcast at each epoch. */
  | 't.atomic-broadcast'
  /** Linked tasks: a group request acted on had a quorum of matching requests from members in
   *  its epoch; a stale request counts for nothing (src/sim/group-requests.ts). */
  | 't.group-request'
  /** Self-diagnosis (PROTOCOL §10): a correct replica is never condemned; after the faults heal
   *  the group is three serving replicas again. */
  | 'g.condemned-correct'
  | 'g.recovered'
  /** Detection bounds (src/sim/detection.ts): a faulty replica is condemned by the rule meant
   *  for its fault, within that rule's bound; a corrupted one is never merely tolerated. */
  | 'g.detection'
  /** Cluster reset (spec §1.6 rule 2, §9.2 A21; PROTOCOL §10.8): the watchdog resets the cluster
   *  only when two replicas of the group have failed, and does when they have. */
  | 'g.cluster-reset'
  /** Task restore (PROTOCOL §10.9): every accepted task live at the reset runs again in the fresh
   *  group with the restarted flag, within RESTORE_BOUND_MS (src/sim/tasks.ts); nothing else is
   *  restored. */
  | 't.restored';

/** The log events that mark a protocol path worth counting (self-diagnosis, order confirmation,
 *  state transfer, fall-backs), with the reason that tells their branches apart. */
const PATH_EVENTS: ReadonlyMap<string, string | null> = new Map([
  ['replica.suspect', 'reason'], ['replica.accuse', 'reason'], ['replica.condemned', 'reason'], ['diagnosis.initiated', 'reason'],
  ['order.unconfirmed', null], ['state.installed', null], ['state.refused', null], ['group.sync', null], ['agent.fallback', null],
  ['replica.retired', null], ['node.unreachable', null],
]);

function pathOf(event: string, fields: Readonly<Record<string, unknown>> | undefined): string | null {
  if (!PATH_EVENTS.has(event)) return null;
  const key = PATH_EVENTS.get(event);
  const why = key === null || key === undefined ? undefined : fields?.[key];
  return typeof why === 'string' ? `path ${event} ${why}` : `path ${event}`;
}

export type Violation = { seed: number; atMs: number; invariant: InvariantName; message: string };

export type ProcessKind = 'replica' | 'agent';

/** What correct replicas sent to one agent for one GSSN. A replica that crashes later was
 *  still correct when it sent, so its sends stay evidence; Byzantine replicas never count. */
type SentGC = { key: string; commandKey: string; prevGssn: number; from: ProcessId; gc: GroupMsgGC; senders: Set<ProcessId> };

/** One echo request as its agent issued it. */
type IssuedEcho = {
  client: ProcessId; tag: string; fanout: 'self' | 'all'; count: number; key: string;
  /** The client's incarnation when it issued the request. */
  incarnation: number;
};

type AgentView = {
  /** Incarnations seen (1 = never restarted). */
  incarnation: number;
  /** The current incarnation's `inc` (PROTOCOL §3.1). */
  inc: number;
  lastGssn: number;
  /** GSSNs the current incarnation delivered. */
  delivered: Set<number>;
};

type ReplicaView = {
  /** The RSN its state was installed at (a replacement), 0 for the initial replicas. */
  installedAt: number;
  lastRsn: number;
  /** Last CSN delivered per client. */
  lastCsn: Map<ProcessId, number>;
  delivered: Map<number, string>;
  echoTags: Set<string>;
};

export class InvariantChecker {
  readonly violations: Violation[] = [];
  private readonly kinds = new Map<ProcessId, ProcessKind>();
  /** Byzantine replicas: faulty for the whole run; their sends and deliveries prove nothing. */
  private readonly byzantine = new Set<ProcessId>();
  /** Processes down right now (crashed and not restarted, or terminated). */
  private readonly down = new Set<ProcessId>();
  /** Processes that were ever down: their lane-0 streams restarted. */
  private readonly everDown = new Set<ProcessId>();
  private readonly restarted = new Set<ProcessId>();
  /** Frame key (its signature) → emitted frame bytes, per sender (c). */
  private readonly emitted = new Map<ProcessId, Map<number, Uint8Array>>();
  /** `${dest}|${gssn}` → what the first correct replica sent (a). */
  private readonly sentGC = new Map<string, SentGC>();
  /** Per replica, GCs already recorded (retransmissions are not re-checked). */
  private readonly seenGC = new Map<ProcessId, Set<string>>();
  private readonly agents = new Map<ProcessId, AgentView>();
  private readonly replicas = new Map<ProcessId, ReplicaView>();
  /** GSSN → command as the first agent delivered it: one GSSN never carries two contents. */
  private readonly deliveredContent = new Map<number, { agent: ProcessId; key: string }>();
  /** RSN → `${client}|${csn}|${request}` as the first correct replica delivered it (b). */
  private readonly order = new Map<number, string>();
  /** Who recorded each RSN of `order` first. */
  private readonly orderBy = new Map<number, ProcessId>();
  private readonly issued = new Map<string, IssuedEcho>();
  /** RSN at which each echo (`client|tag`) and each agent's first node.join were ordered. */
  private readonly echoRsn = new Map<string, number>();
  /** Each agent's ordered joins: the RSN and the incarnation (`inc`) the group adopted there. */
  private readonly joins = new Map<ProcessId, { rsn: number; inc: number }[]>();
  /** Each agent's incarnations declared failed, with the RSN (PROTOCOL §8.4). */
  private readonly failures = new Map<ProcessId, { rsn: number; inc: number }[]>();
  /** Lane-0 notices: `${from}>${to}` → texts in send order, and how many arrived. */
  private readonly noticesSent = new Map<string, string[]>();
  private readonly noticesDelivered = new Map<string, number>();
  private readonly terminated = new Set<ProcessId>();
  /** Replicas no longer in the group (condemned, abandoned): not owed anything. */
  private readonly retired = new Set<ProcessId>();
  /** Replacements started but still without the state. */
  private readonly installing = new Set<ProcessId>();
  /** Replicas the run made faulty beyond the Byzantine ones: crashed, hung, or cut off by a
   *  partition (any of these may rightly be condemned). */
  private readonly faulty = new Set<ProcessId>();
  /** Spare replica ids: out of the group until an agent starts one (and again after a reset). */
  private readonly spares = new Set<ProcessId>();
  /** Cluster resets so far: each starts a fresh group whose RSNs and GSSNs start over. */
  clusterResets = 0;
  /** The network went beyond the timing bounds of the fault model (heavy loss, long spikes):
   *  timing-based accusations of correct replicas are then possible and not a violation. */
  outOfBounds = false;
  /** Two replicas were faulty at once (see demoteFrom): requests are no longer owed, only the
   *  group's recovery is. */
  doubleFault = false;
  /** The group as each serving replica sees it (the world's answer), for recovery checks. */
  groups: () => Map<ProcessId, { view: number; members: readonly ProcessId[]; canGrow: boolean }> = () => new Map();
  private nowMs = 0;
  /** The first condemnation a correct replica executed of each target: when, the reasons its
   *  evidence gives, and the accusers (the detection bounds of src/sim/detection.ts). */
  readonly condemnations = new Map<ProcessId, { atMs: number; reasons: string[]; by: ProcessId[] }>();
  /** What happened, for reports: deliveries seen and suspicions raised, by kind. */
  readonly counts = { commands: 0, requests: 0, notices: 0, suspects: 0, terminations: 0 };
  /** What this run reached (issue 15 item 4; `npm run sim` sums it over seeds): `inv NAME`, the
   *  judgements each invariant made; `path …`, the protocol paths the cores took, from their logs. */
  readonly reached = new Map<string, number>();

  reach(key: string, n = 1): void {
    if (n > 0) this.reached.set(key, (this.reached.get(key) ?? 0) + n);
  }

  constructor(readonly seed: number) {}

  // ---- bookkeeping the world reports -----------------------------------------------------

  setTime(nowMs: number): void {
    this.nowMs = nowMs;
  }

  /** `spare`: a replica id that runs only once an agent starts it as a replacement. */
  addProcess(id: ProcessId, kind: ProcessKind, spare = false): void {
    this.kinds.set(id, kind);
    if (spare) this.spares.add(id);
    if (spare) this.retired.add(id);
    if (kind === 'agent') this.agents.set(id, { incarnation: 1, inc: 0, lastGssn: 0, delivered: new Set() });
    else this.replicas.set(id, { installedAt: 0, lastRsn: 0, lastCsn: new Map(), delivered: new Map(), echoTags: new Set() });
  }

  /** A replica that misbehaves from the start (at most one in the fault model). */
  markByzantine(id: ProcessId): void {
    this.byzantine.add(id);
  }

  /** A crash (or an agent's self-termination): no input, no output until a restart. */
  onDown(id: ProcessId): void {
    this.down.add(id);
    this.everDown.add(id);
    this.installing.delete(id);
  }

  /** A condemned replica is out of the group: what it sends from now on, or sent for GSSNs the
   *  group has not settled, is no evidence of what correct replicas send (it may have kept
   *  ordering alone while cut off, PROTOCOL §10.3). */
  private demoteFrom(id: ProcessId, rsn: number): void {
    this.reach('inv g.condemned-correct');
    if (!this.byzantine.has(id) && !this.faulty.has(id)) {
      if (!this.outOfBounds) this.fail('g.condemned-correct', `the group condemned ${id} at RSN ${rsn}, which the run never made faulty`);
      // A correct replica condemned because the network broke the timing bounds is a fault
      // outside the model; with another replica faulty as well, that is two faults, and what
      // only those two had executed may be lost (the agents dropped it on their acks).
      else if (this.byzantine.size > 0 || [...this.faulty].some((f) => f !== id && this.kinds.get(f) === 'replica')) this.doubleFault = true;
    }
    for (const [r, by] of this.orderBy) {
      if (r < rsn || by !== id) continue;
      this.order.delete(r);
      this.orderBy.delete(r);
    }
    // What only its order said (joins, failures, echoes at RSNs no correct replica confirmed).
    const unconfirmed = (r: number) => r >= rsn && !this.order.has(r);
    for (const [k, r] of this.echoRsn) if (unconfirmed(r)) this.echoRsn.delete(k);
    for (const m of [this.joins, this.failures]) for (const [a, list] of m) m.set(a, list.filter((x) => !unconfirmed(x.rsn)));
    // A replica that turned Byzantine while it ran (World.misbehave, World.corrupt) sent as a
    // correct one before: those sends are demoted like any condemned replica's.
    this.byzantine.add(id);
    this.retired.add(id);
    for (const [slot, s] of this.sentGC) {
      if (!s.senders.has(id)) continue;
      const dest = this.agents.get(s.gc.dest);
      if (dest !== undefined && dest.delivered.has(s.gc.gssn)) continue;
      s.senders.delete(id);
      if (s.senders.size === 0) this.sentGC.delete(slot);
      else s.from = [...s.senders][0] as ProcessId;
    }
  }

  /** A replica the fault plan crashed, hung or cut off. */
  markFaulty(id: ProcessId): void {
    this.faulty.add(id);
  }

  /** Replicas of the group that have failed now: crashed, hung, cut off or Byzantine, and not
   *  (yet) condemned out of it. A cluster reset is owed only when there are two (spec §1.6). */
  failedReplicas(): ProcessId[] {
    const out: ProcessId[] = [];
    for (const [id, kind] of this.kinds) {
      if (kind === 'replica' && (this.faulty.has(id) || this.byzantine.has(id)) && !this.retired.has(id)) out.push(id);
    }
    return out;
  }

  /** The watchdog ordered a cluster reset (g.cluster-reset): owed only with two replicas of the
   *  group failed (spec §1.6), unless the network broke the timing bounds. Returns the failed
   *  replicas. */
  onWatchdogReset(reason: string): ProcessId[] {
    this.reach('inv g.cluster-reset');
    const failed = this.failedReplicas();
    if (failed.length < 2 && !this.outOfBounds) {
      this.fail('g.cluster-reset', `the watchdog reset the cluster with ${failed.length === 0 ? 'no replica' : `only ${failed.join(', ')}`} failed: ${reason}`);
    }
    return failed;
  }

  /** The whole cluster was powered off at once (spec §1.6 rules 2 and 3, PROTOCOL §10.9): every
   *  process is down, and the group that starts next is a fresh one — its RSNs, GSSNs and CSNs
   *  start over, so what the old group ordered and sent is no evidence about the new one. Only
   *  the violations, the frames emitted (admission) and what processes terminated are kept.
   *  `byzantine`: the replicas that will misbehave in the fresh group too (a wrapper that
   *  survives a restart); corrupted state and crashes do not survive a reset. */
  onClusterReset(byzantine: Iterable<ProcessId>): void {
    this.clusterResets++;
    this.byzantine.clear();
    for (const id of byzantine) this.byzantine.add(id);
    this.faulty.clear();
    this.doubleFault = false;
    this.installing.clear();
    this.retired.clear();
    for (const id of this.spares) this.retired.add(id);
    this.sentGC.clear();
    this.seenGC.clear();
    this.deliveredContent.clear();
    this.order.clear();
    this.orderBy.clear();
    this.echoRsn.clear();
    this.joins.clear();
    this.failures.clear();
    for (const v of this.replicas.values()) {
      v.installedAt = 0;
      v.lastRsn = 0;
      v.lastCsn = new Map();
      v.delivered = new Map();
      v.echoTags = new Set();
    }
  }

  /** A replacement replica started (PROTOCOL §10.6). */
  onJoining(id: ProcessId): void {
    this.installing.add(id);
    this.retired.delete(id);
    this.down.delete(id);
  }

  /** A replacement installed the state at `rsn`: it is owed RSNs and CSNs from there on. */
  onInstalled(id: ProcessId, rsn: number, csnReceived: ReadonlyMap<ProcessId, number>): void {
    this.installing.delete(id);
    const view = this.replicas.get(id);
    if (view === undefined) return;
    view.lastRsn = rsn;
    view.installedAt = rsn;
    view.lastCsn = new Map(csnReceived);
  }

  onRetired(id: ProcessId): void {
    this.retired.add(id);
  }

  /** Up, not Byzantine, serving in the group: what liveness asks of a replica. */
  private serving(id: ProcessId): boolean {
    return this.isCorrect(id) && !this.retired.has(id) && !this.installing.has(id);
  }

  /** Correct = not Byzantine and up. A replica that crashed was correct until then. */
  isCorrect(id: ProcessId): boolean {
    return !this.byzantine.has(id) && !this.down.has(id);
  }

  /** A process (re)started with incarnation number `inc`. */
  onBoot(id: ProcessId, inc: number): void {
    const a = this.agents.get(id);
    if (a !== undefined) a.inc = inc;
  }

  /** A fresh incarnation (after a crash): its channels and delivery state start over. */
  onRestart(id: ProcessId): void {
    this.restarted.add(id);
    this.down.delete(id);
    const a = this.agents.get(id);
    if (a !== undefined) {
      a.incarnation++;
      a.lastGssn = 0;
      a.delivered = new Set();
    }
  }

  onRequestIssued(client: ProcessId, request: AgentRequest): void {
    if (request.type !== 'echo') return;
    this.issued.set(`${client}|${request.tag}`, {
      client, tag: request.tag, fanout: request.fanout, count: request.count, key: requestKey(request),
      incarnation: this.agents.get(client)?.incarnation ?? 1,
    });
  }

  onNoticeIssued(from: ProcessId, to: ProcessId, text: string): void {
    const k = `${from}>${to}`;
    let list = this.noticesSent.get(k);
    if (list === undefined) this.noticesSent.set(k, (list = []));
    list.push(text);
  }

  fail(invariant: InvariantName, message: string): void {
    if (this.violations.length >= MAX_VIOLATIONS_PER_SEED) return;
    this.violations.push({ seed: this.seed, atMs: this.nowMs, invariant, message });
  }

  // ---- (c) admission -----------------------------------------------------------------------

  onFrameOut(from: ProcessId, frame: Uint8Array, items: readonly Item[]): void {
    let m = this.emitted.get(from);
    if (m === undefined) this.emitted.set(from, (m = new Map()));
    m.set(frameKey(frame), frame);
    if (this.kinds.get(from) === 'replica' && !this.byzantine.has(from)) this.recordReplicaSends(from, items);
  }

  /** A shell handed its core a verified frame; `bytes` is what the network delivered. */
  onAccepted(to: ProcessId, bytes: Uint8Array, frame: Frame): void {
    this.reach('inv c.admission');
    const sent = this.emitted.get(frame.from)?.get(frameKey(bytes));
    if (sent === undefined || !bytesEqual(sent, bytes)) {
      this.fail('c.admission', `${to} accepted a frame claiming to be from ${frame.from} that ${frame.from}'s shell never emitted (${bytes.length} bytes)`);
    }
    if (frame.to !== to) this.fail('c.admission', `${to} accepted a frame addressed to ${frame.to}`);
  }

  // ---- (a) group messages ------------------------------------------------------------------

  private recordReplicaSends(from: ProcessId, items: readonly Item[]): void {
    for (const item of items) {
      if (item.type !== 'grp' || item.body.type !== 'gc') continue;
      const gc = item.body.gc;
      const slot = `${gc.dest}|${gc.gssn}`;
      let seen = this.seenGC.get(from);
      if (seen === undefined) this.seenGC.set(from, (seen = new Set()));
      if (seen.has(slot)) continue;
      seen.add(slot);
      const key = gcKey(gc);
      const prior = this.sentGC.get(slot);
      if (prior === undefined) {
        this.sentGC.set(slot, { key, commandKey: commandKey(gc.payload), prevGssn: gc.prevGssn, from, gc, senders: new Set([from]) });
      } else if (prior.key === key) {
        prior.senders.add(from);
      } else {
        this.fail('a.group-delivery', `correct replicas ${prior.from} and ${from} sent different GCs to ${gc.dest} for GSSN ${gc.gssn}: ${describeGC(prior.gc)} vs ${describeGC(gc)}`);
      }
    }
  }

  private onDeliverCommand(agent: ProcessId, gssn: number, command: GroupCommand): void {
    const view = this.agents.get(agent);
    if (view === undefined) return this.fail('a.group-delivery', `${agent} is not an agent but delivered GSSN ${gssn}`);
    if (gssn <= view.lastGssn) {
      this.fail('a.group-delivery', `${agent} delivered GSSN ${gssn} after GSSN ${view.lastGssn} (duplicate or out of order)`);
    }
    const sent = this.sentGC.get(`${agent}|${gssn}`);
    const ck = commandKey(command);
    if (sent === undefined) {
      this.fail('a.group-delivery', `${agent} delivered GSSN ${gssn} (${ck}) that no correct replica sent to it`);
    } else {
      if (sent.commandKey !== ck) {
        this.fail('a.group-delivery', `${agent} delivered GSSN ${gssn} as ${ck}, correct replica ${sent.from} sent ${sent.commandKey}`);
      }
      // The prevGssn chain: an agent must not skip a message meant for it.
      if (sent.prevGssn !== view.lastGssn) {
        this.fail('a.group-delivery', `${agent} delivered GSSN ${gssn} (prevGssn ${sent.prevGssn}) but its last delivery was GSSN ${view.lastGssn}: a gap`);
      }
    }
    const other = this.deliveredContent.get(gssn);
    if (other === undefined) this.deliveredContent.set(gssn, { agent, key: ck });
    else if (other.key !== ck) this.fail('a.group-delivery', `GSSN ${gssn} delivered as ${ck} at ${agent} but as ${other.key} at ${other.agent}`);
    view.lastGssn = Math.max(view.lastGssn, gssn);
    view.delivered.add(gssn);
  }

  // ---- (b) agent requests ------------------------------------------------------------------

  private onDeliverRequest(replica: ProcessId, rsn: number, client: ProcessId, inc: number, csn: number, request: AgentRequest): void {
    if (this.byzantine.has(replica)) return;
    const view = this.replicas.get(replica);
    if (view === undefined) return this.fail('b.request-order', `${replica} is not a replica but delivered RSN ${rsn}`);
    if (rsn <= view.lastRsn) this.fail('b.request-order', `${replica} delivered RSN ${rsn} after RSN ${view.lastRsn}`);
    view.lastRsn = Math.max(view.lastRsn, rsn);
    const lastCsn = view.lastCsn.get(client) ?? 0;
    // Operator requests carry no CSN: they are identified by their nonce (PROTOCOL §8.1).
    const operator = isOperatorRequest(request);
    if (!operator && !this.restarted.has(client) && csn !== lastCsn + 1) {
      this.fail('b.request-order', `${replica} delivered CSN ${csn} of ${client} after CSN ${lastCsn} (not FIFO exactly-once)`);
    }
    view.lastCsn.set(client, Math.max(lastCsn, csn));
    const key = `${client} csn ${csn} ${requestKey(request)}`;
    view.delivered.set(rsn, key);
    const prior = this.order.get(rsn);
    if (prior === undefined) {
      this.order.set(rsn, key);
      this.orderBy.set(rsn, replica);
    }
    else if (prior !== key) {
      const short = (k: string) => k.slice(0, k.lastIndexOf('|'));
      this.fail('b.request-order', `${replica} delivered ${short(key)} at RSN ${rsn}, another correct replica delivered ${short(prior)}`);
    }
    if (request.type === 'node.join') {
      const list = this.joins.get(client) ?? [];
      if (!list.some((j) => j.rsn === rsn)) list.push({ rsn, inc });
      this.joins.set(client, list);
    }
    if (request.type === 'echo') {
      const tagKey = `${client}|${request.tag}`;
      if (!this.echoRsn.has(tagKey)) this.echoRsn.set(tagKey, rsn);
      const issued = this.issued.get(tagKey);
      if (issued === undefined || issued.key !== requestKey(request)) {
        this.fail('b.request-order', `${replica} delivered echo ${request.tag} from ${client} that ${client} never issued`);
      }
      if (view.echoTags.has(tagKey)) this.fail('b.request-order', `${replica} delivered echo ${request.tag} of ${client} twice`);
      view.echoTags.add(tagKey);
    }
  }

  // ---- effects -------------------------------------------------------------------------------

  onEffect(id: ProcessId, effect: Exclude<CoreEffect, { type: 'send' }>): void {
    switch (effect.type) {
      case 'deliver.command':
        this.counts.commands++;
        this.reach('inv a.group-delivery');
        return this.onDeliverCommand(id, effect.gssn, effect.command);
      case 'deliver.request':
        this.counts.requests++;
        this.reach('inv b.request-order');
        return this.onDeliverRequest(id, effect.rsn, effect.client, effect.inc, effect.csn, effect.request);
      case 'deliver.input': {
        if (!this.isCorrect(id)) return;
        // Correct replicas execute the same inputs at the same RSNs; an input takes its RSN like
        // a request does (liveness compares what each replica executed).
        const key = `input ${toHex(pack(groupInput.enc(effect.input)))}`;
        // The condemned replica's own order from this RSN on (it may have kept ordering while
        // cut off) is no evidence of the group's.
        if (effect.input.type === 'replica.condemn') {
          const target = effect.input.evidence[0]?.accusation.target;
          if (target !== undefined) this.demoteFrom(target, effect.rsn);
          if (target !== undefined && !this.condemnations.has(target)) {
            const ev = effect.input.evidence.map((e) => e.accusation);
            this.condemnations.set(target, { atMs: this.nowMs, reasons: [...new Set(ev.map((a) => a.reason))].sort(), by: ev.map((a) => a.from).sort() });
          }
        }
        const view = this.replicas.get(id);
        if (view !== undefined) {
          if (effect.rsn <= view.lastRsn) this.fail('b.request-order', `${id} executed RSN ${effect.rsn} after RSN ${view.lastRsn}`);
          view.lastRsn = Math.max(view.lastRsn, effect.rsn);
          view.delivered.set(effect.rsn, key);
        }
        const prior = this.order.get(effect.rsn);
        if (prior === undefined) {
          this.order.set(effect.rsn, key);
          this.orderBy.set(effect.rsn, id);
        }
        else if (prior !== key) this.fail('b.request-order', `${id} executed ${key} at RSN ${effect.rsn}, another correct replica ${prior.slice(0, 80)}`);
        if (effect.input.type === 'replica.condemn') return;
        if (effect.input.type !== 'node.failed') return;
        const list = this.failures.get(effect.input.agent) ?? [];
        if (!list.some((f) => f.rsn === effect.rsn)) list.push({ rsn: effect.rsn, inc: effect.input.inc });
        this.failures.set(effect.input.agent, list);
        return;
      }
      case 'deliver.notice': {
        this.counts.notices++;
        const k = `${effect.from}>${id}`;
        const n = this.noticesDelivered.get(k) ?? 0;
        const expected = this.noticesSent.get(k)?.[n];
        if (!this.everDown.has(id) && !this.everDown.has(effect.from) && expected !== effect.text) {
          this.fail('a.group-delivery', `${id} delivered notice "${effect.text}" from ${effect.from}, expected "${expected ?? '(none)'}" (lane 0 not FIFO exactly-once)`);
        }
        this.noticesDelivered.set(k, n + 1);
        return;
      }
      case 'terminate':
        this.counts.terminations++;
        this.terminated.add(id);
        return;
      case 'suspect':
        this.counts.suspects++;
        return;
      case 'log': {
        const path = pathOf(effect.event, effect.fields);
        if (path !== null) this.reach(path);
        return;
      }
      case 'keys':
      case 'shutdown':
      case 'reset.node':
      case 'reset.cluster':
      case 'persist.tasks':
      case 'replicas':
        return;
      default:
        return unreachable(effect);
    }
  }

  // ---- (d) liveness --------------------------------------------------------------------------

  /** Whether liveness asks for GSSN `s` at its destination: the agent is up and the GC is
   *  addressed to its current incarnation (destInc 0: not yet known, only before any restart).
   *  Messages for an earlier incarnation die with it (PROTOCOL §5.7). */
  private owed(s: SentGC): boolean {
    const view = this.agents.get(s.gc.dest);
    if (view === undefined || this.down.has(s.gc.dest)) return false;
    return s.gc.destInc === 0 ? view.incarnation === 1 : s.gc.destInc === view.inc;
  }

  /** Whether liveness asks for echo `e`: its client is up in the incarnation that issued it. */
  private echoOwed(e: IssuedEcho): boolean {
    return !this.down.has(e.client) && this.agents.get(e.client)?.incarnation === e.incarnation;
  }

  /** What is still missing for liveness, or [] when everything arrived. `limit` bounds the work. */
  missing(limit = 1): string[] {
    const out: string[] = [];
    if (this.doubleFault) return this.groupMissing(out, limit);
    const correctReplicas = [...this.replicas.keys()].filter((r) => this.serving(r));
    // Every echo of an agent that is up, at every correct replica.
    for (const e of this.issued.values()) {
      if (!this.echoOwed(e)) continue;
      const orderedAt = this.echoRsn.get(`${e.client}|${e.tag}`);
      for (const r of correctReplicas) {
        const v = this.replicas.get(r) as ReplicaView;
        if (orderedAt !== undefined && orderedAt <= v.installedAt) continue; // in the state it received
        if (!v.echoTags.has(`${e.client}|${e.tag}`)) {
          out.push(`echo ${e.tag} of ${e.client} never delivered at ${r}`);
          if (out.length >= limit) return out;
        }
      }
    }
    // Every group message the correct replicas sent, delivered where it is owed.
    for (const s of this.sentGC.values()) {
      if (!this.owed(s)) continue;
      const view = this.agents.get(s.gc.dest) as AgentView;
      if (!view.delivered.has(s.gc.gssn)) {
        out.push(`GSSN ${s.gc.gssn} (${s.commandKey}, prevGssn ${s.prevGssn}) sent by ${s.from} to ${s.gc.dest} never delivered; ${s.gc.dest} delivered up to GSSN ${view.lastGssn}`);
        if (out.length >= limit) return out;
      }
    }
    // All replies of each owed echo were sent: count per (request, target).
    if (correctReplicas.length > 0) {
      const perTarget = new Map<string, number>();
      for (const s of this.sentGC.values()) {
        if (s.gc.payload.type !== 'echo.reply') continue;
        const k = `${s.gc.payload.origin}|${s.gc.payload.tag}|${s.gc.dest}`;
        perTarget.set(k, (perTarget.get(k) ?? 0) + 1);
      }
      for (const e of this.issued.values()) {
        if (!this.echoOwed(e)) continue;
        const rsn = this.echoRsn.get(`${e.client}|${e.tag}`);
        if (rsn === undefined) continue; // never ordered: reported above
        // 'all' means every agent that had joined when the echo was ordered (PROTOCOL §5.4), and
        // the replies are owed only if the incarnation the group knew then is the one alive now:
        // messages for an incarnation die with it (§5.7).
        const adoptedAt = (a: ProcessId): number | null => {
          let inc: number | null = null;
          for (const j of this.joins.get(a) ?? []) if (j.rsn < rsn) inc = j.inc;
          return inc;
        };
        const targets = e.fanout === 'self'
          ? [e.client]
          : [...this.agents.keys()].filter((a) => {
            const inc = adoptedAt(a);
            // A node declared failed before the echo was ordered is no target (PROTOCOL §8.4).
            const failed = (this.failures.get(a) ?? []).some((f) => f.rsn < rsn && f.inc === inc);
            return inc !== null && !failed && !this.down.has(a) && inc === this.agents.get(a)?.inc;
          });
        for (const t of targets) {
          const n = perTarget.get(`${e.client}|${e.tag}|${t}`) ?? 0;
          if (n !== e.count) {
            out.push(`echo ${e.tag} of ${e.client} asked for ${e.count} replies to ${t}, correct replicas sent ${n}`);
            if (out.length >= limit) return out;
          }
        }
      }
    }
    // Lane-0 notices between processes that never went down.
    for (const [k, list] of this.noticesSent) {
      const [from, to] = k.split('>') as [ProcessId, ProcessId];
      if (this.everDown.has(from) || this.everDown.has(to) || this.byzantine.has(from) || this.byzantine.has(to)) continue;
      const n = this.noticesDelivered.get(k) ?? 0;
      if (n < list.length) {
        out.push(`${list.length - n} notice(s) ${from}→${to} never delivered ("${list[n] ?? ''}" first)`);
        if (out.length >= limit) return out;
      }
    }
    // All serving replicas executed up to the same RSN (which RSN carried what is (b)).
    let rsnSet: string | null = null;
    for (const r of correctReplicas) {
      const s = `${(this.replicas.get(r) as ReplicaView).lastRsn}`;
      if (rsnSet !== null && s !== rsnSet) {
        out.push(`correct replicas executed up to different RSNs (${rsnSet} vs ${r} ${s})`);
        break;
      }
      rsnSet = s;
    }
    return this.groupMissing(out, limit);
  }

  /** PROTOCOL §10.6: the group is back to three serving replicas, all in one view. */
  private groupMissing(out: string[], limit: number): string[] {
    const groups = this.groups();
    for (const [r, g] of groups) {
      if (!this.serving(r)) continue;
      if (g.members.length !== 3 && (g.canGrow || g.members.length > 3)) {
        out.push(`${r} sees a group of ${g.members.length} (${g.members.join(',')}) in view ${g.view}, not 3`);
        break;
      }
      const others = [...groups].filter(([x]) => x !== r && this.serving(x) && groups.get(x)?.view !== g.view);
      if (others.length > 0) {
        out.push(`serving replicas in different views: ${r}@${g.view} vs ${others.map(([x, o]) => `${x}@${o.view}`).join(',')}`);
        break;
      }
    }
    return out.slice(0, limit);
  }

  /** The checks of the end of a run. `digests` are the (rsn, digest) of the replicas up. */
  finish(opts: { livenessExpected: boolean; digests: ReadonlyMap<ProcessId, { rsn: number; digest: string }> }): void {
    // With at most one faulty replica, two matching copies are always possible (G2 3e).
    if (this.byzantine.size <= 1) {
      for (const a of this.terminated) this.fail('a.group-delivery', `agent ${a} terminated itself with at most one faulty replica`);
    }
    const byRsn = new Map<number, { id: ProcessId; digest: string }>();
    for (const [id, d] of opts.digests) {
      if (!this.serving(id)) continue;
      const prior = byRsn.get(d.rsn);
      if (prior !== undefined && prior.digest !== d.digest) {
        this.fail('b.request-order', `digests differ at RSN ${d.rsn}: ${prior.id} ${prior.digest.slice(0, 16)} vs ${id} ${d.digest.slice(0, 16)}`);
      }
      byRsn.set(d.rsn, { id, digest: d.digest });
    }
    if (!opts.livenessExpected) return;
    this.reach('inv d.liveness');
    for (const m of this.missing(5)) this.fail('d.liveness', m);
    if (byRsn.size > 1) {
      const at = [...opts.digests].filter(([id]) => this.serving(id)).map(([id, d]) => `${id}@${d.rsn}`).join(' ');
      this.fail('d.liveness', `correct replicas ended at different RSNs: ${at}`);
    }
  }

  /** Whether a process terminated (agents, spec §3.5 G2 3e). */
  hasTerminated(id: ProcessId): boolean {
    return this.terminated.has(id);
  }
}
