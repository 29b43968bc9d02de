// A manager replica's core (docs/PROTOCOL.md §5; spec §3.5–3.6, §1.3). It owns the links to
// the other replicas and to every agent, orders agent requests (primary: RSN + WRAPPER-MSG to
// the backups; backups: check the RSN sequence and the primary's progress), applies them to the
// replicated state, sends each resulting group message replica on lane 1, and heartbeats its
// peers and the watchdog. Deterministic: no clock, no I/O, no randomness.
import { countDrop, type DropCode } from '../base/result.ts';
import { toHex } from '../base/hex.ts';
import {
  MAX_DELIVERED_LOG, MAX_EVIDENCE_FRAME_BYTES, MAX_HOLDBACK_PER_AGENT, MAX_JOURNAL_EVENTS, MAX_ORDER_AHEAD, TICK_RATE_SLACK, TICK_RATE_WINDOW_MS,
  JOURNAL_RESEND_MS, MAX_JOURNAL_ITEM_BYTES, SHUTDOWN_LINGER_MAX_MS, SHUTDOWN_NOTICE_MS,
} from './constants.ts';
import { createDiagnosis } from './diagnosis.ts';
import { admitChallenge, createFreshness, issueChallenge } from './freshness.ts';
import { addedAmong, movedPorts, successor } from './group-view.ts';
import { decodeState } from './state-codec.ts';
import { createStateTransfer, statePayloads } from './state-transfer.ts';
import { clusterView, liveSubmits, needsTicks } from './cluster-state.ts';
import { encodeJournal, openRestoredOp, openRestoredSubmit } from './task-journal.ts';
import {
  createLinks, flushAcks, linkAddPeer, linkNextWakeMs, linkOweGroupAck, linkReceive, linkRemovePeer, linkSend, linkTimers, linkView,
  logSessionEvent, peerJudged, startLinks, type Delivery, type Links,
} from './link.ts';
import type { Core, CoreEffect, CoreInput, LearntKey, Membership, SuspectReason } from './node.ts';
import { createOrderConfirm, executed, nextStep, type Ordered } from './order-confirm.ts';
import type { Hash, ProcessId, Signer, Verifier } from './ports.ts';
import {
  addedSpares, adoptIncarnation, applyGroupInput, applyOperatorRequest, applyRequest, digestState, encodeState, expectedCsn, initialState,
  isOperatorRequest, mayRequest, type ApplyResult, type OperatorOutcome, type ReplicatedState,
} from './replicated-state.ts';
import type { ClusterEvent, ClusterView, DaemonReport, ReplicaStatus, PeerHealth } from './status.ts';
import { bytesEqual } from '../base/bytes.ts';
import { decodeFrame, pack } from './wire/frame.ts';
import { groupInput, orderClaim, portClaim, type AccuseReason, type GroupInput, type Item, type PtpPayload, type SignedAccusation, type SignedCG } from './wire/messages.ts';

/** `joining`: a replacement replica, started by an agent on the group's command with the group
 *  as it was then (PROTOCOL §10.6); it asks the members for the state before it serves, and
 *  tells them `port` when it listens on another than cluster.json's (its own being taken). */
export type ReplicaOptions = {
  id: ProcessId; membership: Membership; hash: Hash; inc: number; signer: Signer; verifier: Verifier;
  joining?: { view: number; primary: ProcessId; replicas: readonly ProcessId[]; port?: number };
  /** What the daemon says of itself (its disk), added to the status as read (issue 14 item 4):
   *  nothing the replica decides depends on it. */
  daemon?: () => DaemonReport;
};

/** Suspicions that are, from a correct replica, a sound judgement about the one it names
 *  (PROTOCOL §10.2): they become accusations. The others are reported and looked into. */
const ACCUSING: Partial<Record<SuspectReason, AccuseReason>> = {
  'rsn.gap': 'rsn.gap', 'primary.progress': 'primary.progress', 'clock.rate': 'clock.rate',
};

type HeartbeatSeen = { inc: number; counter: number; atMs: number | null; sinceCheck: boolean; missedChecks: number };

/** A node suspected failed (PROTOCOL §8.4): this replica's probe of its agent, and (primary)
 *  whether a backup found it unreachable too. */
type Probe = { inc: number; nonce: number; deadlineMs: number; expired: boolean; backupUnreachable: boolean; declared: boolean };

export type ReplicaCore = Core & {
  status(nowMs: number): ReplicaStatus;
  /** Serving, a replacement installing the state, aligning after the primary was condemned,
   *  or retired (PROTOCOL §10). */
  phase(): 'serving' | 'installing' | 'syncing' | 'retired';
  digestHex(): string;
  rsn(): number;
  /** The replicated state, read-only, for tests and the simulator's invariants. (Fault
   *  injection alone writes to it, `trine inject corrupt-replica`, then calls `forgetDigest`.) */
  state(): Readonly<ReplicatedState>;
  /** Drop the cached digest: the state was changed behind the core's back (fault injection). */
  forgetDigest(): void;
  /** Nodes, tasks and processes with this replica's journal (`trine ps`). */
  clusterView(): ClusterView;
};


export function createReplica(opts: ReplicaOptions): ReplicaCore {
  const { id, membership: m, hash } = opts;
  const t = m.timing;
  const agentIds = new Set(m.agents.map((a) => a.id));
  /** Every id that may ever be a replica (initial and spares, the added nodes' spares once the
   *  state has them): their frames are replica frames. */
  const poolIds = new Set([...m.replicas, ...m.spareReplicas]);
  const operators = new Set(m.operators);
  /** Clients whose requests are identified by nonce, not CSN (PROTOCOL §8.1): the operators,
   *  and the watchdog for its restores after a cluster reset (§10.9). */
  const nonceClients = new Set([...m.operators, m.scc]);
  const state = initialState(m, t);
  if (opts.joining !== undefined) {
    state.replicas = [...opts.joining.replicas];
    state.primary = opts.joining.primary;
  }
  const isMember = (x: ProcessId): boolean => state.replicas.includes(x);
  const links: Links = createLinks(id, opts.inc, t, [...state.replicas, ...agentIds]);

  // ---- non-replicated state ----
  /** Primary: agent requests that arrived ahead of a missing CSN. */
  const holdback = new Map<ProcessId, Map<number, SignedCG>>();
  /** Backups: PrimaryProgressTimeout(c, csn) deadlines (spec §3.6 G8), keyed by progressKey. */
  const progressTimers = new Map<string, { signed: SignedCG; atMs: number }>();
  const progressKey = (cg: SignedCG['cg']) =>
    isOperatorRequest(cg.payload) ? `${cg.client}\u0000${cg.payload.nonce}` : `${cg.client}\u0000${cg.inc}\u0000${cg.csn}`;
  /** Has the group already delivered this request (or one of a later incarnation)? Operator
   *  requests are identified by their nonce (PROTOCOL §8.1). */
  const deliveredCG = (cg: SignedCG['cg']): boolean => {
    if (nonceClients.has(cg.client)) return isOperatorRequest(cg.payload) && state.outcomes.has(cg.payload.nonce);
    const expected = expectedCsn(state, cg.client, cg.inc);
    return expected === null || cg.csn < expected;
  };
  /** The journal of applied task events, stamped with this replica's clock (not replicated). */
  const journal: ClusterEvent[] = [];
  /** Nodes under suspicion, by agent (PROTOCOL §8.4). */
  const probes = new Map<ProcessId, Probe>();
  let probeNonce = 0;
  /** Primary: when the next task-clock tick is due (PROTOCOL §8.3), and whether the clock runs. */
  let tickAtMs = 0;
  let ticking = false;
  /** Nodes declared failed that the watchdog is asked to reset, re-sent with every heartbeat to
   *  it until the node rejoins (a lost request would leave the node dead). */
  const resets = new Map<string, { rsn: number; address: string }>();
  /** Log L of delivered requests (spec §3.3), bounded: [rsn, signed CG]. */
  const deliveredLog: [number, Ordered][] = [];
  const logDelivered = (o: Ordered): void => {
    deliveredLog.push([state.rsn, o]);
    if (deliveredLog.length > MAX_DELIVERED_LOG) deliveredLog.shift();
  };
  const heard = new Map<ProcessId, HeartbeatSeen>();
  /** A peer we know of and have not heard from yet. */
  const unheard = (): HeartbeatSeen => ({ inc: 0, counter: 0, atMs: null, sinceCheck: false, missedChecks: 0 });
  for (const p of [...poolIds, ...agentIds, ...operators]) {
    if (p !== id) heard.set(p, unheard());
  }
  const drops: Partial<Record<DropCode, number>> = {};
  /** Status goes to fresh queries only (PROTOCOL §7): the challenges this incarnation issued. */
  const freshness = createFreshness(opts.inc);
  /** Backups: the primary's order, confirmed between backups before execution (PROTOCOL §5.8).
   *  Replaced when the primary changes: the old primary's order beyond what ran is void. */
  let confirm = createOrderConfirm();
  let suspicions = 0;
  let started = false;
  let startedAtMs = 0;
  /** Backups: digests of the last executed RSNs, to catch a confirmation that differs late. */
  const executedDigests = new Map<number, Uint8Array>();
  let heartbeatCounter = 0;
  let replicaHeartbeatAtMs = 0;
  let replicaCheckAtMs = 0;
  let agentCheckAtMs = 0;
  let digestCache: { rsn: number; gssn: number; digest: Uint8Array } | null = null;

  const isPrimary = () => state.primary === id;
  /** PROTOCOL §8.3, §10.6: the clock runs while a task timer runs or a replacement is awaited. */
  const clockNeeded = (): boolean => needsTicks(state.cluster) || (state.group.recovery !== null && state.group.recovery.node !== null);
  const backups = () => state.replicas.filter((r) => r !== state.primary);

  // ---- self-diagnosis and group changes (PROTOCOL §10), not replicated ----
  const sendPtp = (to: ProcessId, payload: PtpPayload, nowMs: number, out: CoreEffect[]): void => {
    linkSend(links, to, 0, payload, nowMs, out);
  };
  const diagnosis = createDiagnosis({
    id, inc: opts.inc, signer: opts.signer, timing: t, scc: m.scc, view: () => state.group.view, members: () => state.replicas, send: sendPtp,
  });
  /** `installing`: a replacement waiting for the state; `retired`: no longer a member. */
  let phase: 'serving' | 'installing' | 'retired' = opts.joining === undefined ? 'serving' : 'installing';
  const transfer = createStateTransfer(hash, () => state.replicas);
  /** Lane-0 deliveries that arrived while installing, replayed once the state is in; agents'
   *  requests that arrived while installing or syncing, handled once serving in a view. */
  const heldWhileInstalling: Extract<Delivery, { type: 'ptp' }>[] = [];
  const heldRequests: Extract<Delivery, { type: 'grp' }>[] = [];
  const releaseRequests = (nowMs: number, out: CoreEffect[]): void => {
    if (phase !== 'serving' || sync !== null) return;
    for (const d of heldRequests.splice(0)) onDelivery(d, nowMs, out);
  };
  /** PROTOCOL §10.6: the state each replacement is owed, as of the RSN where it joined (`view`:
   *  the view its port claim names), kept until its `state.request` of that view shows which
   *  incarnation asked; and the latest such request heard from each id, with the sender's
   *  incarnation. One entry per spare id at most. */
  const owedState = new Map<ProcessId, { view: number; payloads: PtpPayload[] }>();
  const stateAsked = new Map<ProcessId, { view: number; inc: number }>();
  const sendOwedState = (to: ProcessId, nowMs: number, out: CoreEffect[]): void => {
    const owed = owedState.get(to);
    const asked = stateAsked.get(to);
    if (owed === undefined || asked === undefined || asked.view !== owed.view) return;
    owedState.delete(to);
    for (const p of owed.payloads) linkSend(links, to, 0, p, nowMs, out, asked.inc);
  };
  /** Primary: a condemnation of a backup already ordered in this view. */
  let condemnOrdered = false;
  /** Primary: replacements whose `replica.add` is ordered, as `id@view`: a spare id may start
   *  again in a later view, as a new incarnation (PROTOCOL §10.6). */
  const addOrdered = new Set<string>();
  /** The primary is condemned (PROTOCOL §10.5): the two others align their executed RSNs and the
   *  successor orders the condemnation. `peer`: the other survivor, if any. */
  let sync: { view: number; target: ProcessId; peer: ProcessId | undefined; peerRsn: number | null; evidence: SignedAccusation[]; ordered: boolean } | null = null;
  /** Backups: the primary's signed frame that carried each proposed RSN, evidence if the other
   *  backup was given another order (PROTOCOL §10.2); and the other backup's evidence that
   *  arrived before our own proposal. */
  const orderFrames = new Map<number, Uint8Array>();
  /** Executed RSNs whose primary frame a backup keeps (see executeInOrder). */
  const EXECUTED_FRAMES_KEPT = 64;
  const evidenceWaiting = new Map<number, Uint8Array>();
  /** Backups: the other backup's signed claim (view, signature) with its `order` digest for each
   *  RSN we have not executed, to show the primary if that digest is not of the primary's order;
   *  and the disputes we hold, with the deadline for the other backup's evidence of an
   *  equivocation (PROTOCOL §5.8, §10.2 `order.lie`). */
  const confirmClaims = new Map<number, { view: number; sig: Uint8Array }>();
  /** RSNs whose primary frame we already showed the other backup. */
  const evidenceSent = new Set<number>();
  const disputes = new Map<number, { other: ProcessId; deadlineMs: number }>();
  /** A new primary's order (or a replacement's) starts after the executed RSN: whatever the
   *  old one proposed beyond it is void, with its frames and the evidence about them. */
  const resetOrder = (): void => {
    confirm = createOrderConfirm();
    confirm.proposedRsn = state.rsn;
    orderFrames.clear();
    evidenceWaiting.clear();
    confirmClaims.clear();
    disputes.clear();
    evidenceSent.clear();
  };
  /** view.sync messages that arrived before we condemned the primary ourselves. */
  const earlySync = new Map<ProcessId, { view: number; rsn: number }>();
  let lastNowMs = 0;
  /** The cluster shutdown this replica carries out, once ordered (PROTOCOL §10.11). */
  let stopping: { rsn: number; sinceMs: number; noticeAtMs: number; acked: boolean; done: boolean } | null = null;
  /** Peers whose every connection is down now, as the driver reports it (transport.down). */
  const disconnected = new Set<ProcessId>();

  function digest(): Uint8Array {
    if (digestCache === null || digestCache.rsn !== state.rsn || digestCache.gssn !== state.gssn) {
      digestCache = { rsn: state.rsn, gssn: state.gssn, digest: digestState(state, hash) };
    }
    return digestCache.digest;
  }

  function suspect(out: CoreEffect[], target: ProcessId | null, reason: SuspectReason, detail: string): void {
    // Shutting down, the group stops on purpose: nobody is suspected of it (PROTOCOL §10.11).
    if (stopping !== null) return;
    suspicions++;
    out.push({ type: 'suspect', target, reason, detail });
    out.push({ type: 'log', level: 'warn', event: 'replica.suspect', fields: { target, reason, detail, rsn: state.rsn } });
    const accuse = ACCUSING[reason];
    if (accuse !== undefined && target !== null) diagnosis.accuse(target, accuse, detail, lastNowMs, out);
    else if (reason === 'digest.mismatch' || reason === 'error.report') {
      diagnosis.report(reason === 'error.report' ? 'agent.reports' : 'equivocation', target, detail, lastNowMs, out);
    }
  }

  /** G9's empty GROUP-MSG-GC: a lane-1 `gack`, sent once at the end of the step. */
  function groupAck(client: ProcessId, nowMs: number, out: CoreEffect[]): void {
    linkOweGroupAck(links, client, nowMs);
    void out;
  }

  /** The CSN mark a gack carries: the CSNs of the incarnation we talk to, never a
   *  predecessor's (PROTOCOL §5.7). */
  function csnMark(peer: ProcessId): number {
    const p = links.peers.get(peer);
    return p !== undefined && state.clientInc.get(peer) === p.peerInc ? (state.csnReceived.get(peer) ?? 0) : 0;
  }

  /** Send what an applied input produced: group messages, the operator's answer, journal
   *  entries, the watchdog's reset request, and self-diagnosis triggers. */
  function applied(result: ApplyResult, client: ProcessId | null, nowMs: number, out: CoreEffect[]): void {
    for (const gc of result.messages) {
      const r = linkSend(links, gc.dest, 1, { type: 'gc', gc }, nowMs, out, gc.destInc);
      if (r === 'full' || r === 'unknown-peer') {
        out.push({ type: 'log', level: 'error', event: 'group.send.refused', fields: { dest: gc.dest, gssn: gc.gssn, why: r } });
      }
    }
    if (result.report !== null) {
      const r = result.report;
      const detail = `${client} reports ${r.kind} for ${r.count} gssn from ${r.gssn} (suspects ${r.suspects.join(',')})`;
      // A report naming no member (copies missing from a replica already removed, or from
      // nobody two members agree with) initiates nothing (PROTOCOL §10.2).
      for (const target of r.suspects.filter(isMember)) suspect(out, target, 'error.report', detail);
    }
    if (result.reply !== null && client !== null) reply(client, result.reply, out);
    for (const e of result.events) {
      journal.push({ atMs: nowMs, rsn: state.rsn, task: e.task, vpid: e.vpid, text: e.text });
      out.push({ type: 'log', level: 'info', event: 'task.event', fields: { rsn: state.rsn, task: e.task, vpid: e.vpid, text: e.text } });
    }
    if (journal.length > MAX_JOURNAL_EVENTS) journal.splice(0, journal.length - MAX_JOURNAL_EVENTS);
    for (const target of result.accuse) diagnosis.accuse(target, 'agent.reports', 'error reports from two agents', nowMs, out);
    syncAgents(nowMs, out);
    if (result.viewChanged) onViewChanged(nowMs, out);
    else syncLinks(nowMs, out); // a replacement may have been commanded or abandoned
    if (result.shutdown !== null && stopping === null) {
      stopping = { rsn: result.shutdown.rsn, sinceMs: nowMs, noticeAtMs: nowMs, acked: false, done: false };
      out.push({ type: 'send', to: m.scc, item: { type: 'shutdown.notice', rsn: stopping.rsn } });
      out.push({ type: 'log', level: 'warn', event: 'shutdown.ordered', fields: { rsn: stopping.rsn } });
    }
    if (result.reset !== null) {
      resets.set(result.reset.node, { rsn: result.reset.rsn, address: result.reset.address });
      out.push({ type: 'send', to: m.scc, item: { type: 'reset.node', ...result.reset } });
      out.push({ type: 'log', level: 'warn', event: 'node.reset.requested', fields: result.reset });
    }
  }

  function reply(operator: ProcessId, o: OperatorOutcome, out: CoreEffect[]): void {
    out.push({ type: 'send', to: operator, item: { type: 'op.reply', nonce: o.nonce, rsn: o.rsn, ok: o.ok, text: o.text } });
  }

  /** spec §3.6 G9: deliver an ordered request (an agent's, or an operator's, PROTOCOL §8.1). */
  function deliver(signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
    const cg = signed.cg;
    progressTimers.delete(progressKey(cg));
    // Logged even when refused below: the RSN is spent either way (a no-op), and a survivor
    // syncing after a condemned primary (PROTOCOL §10.5) must be able to replay every RSN the
    // other executed, no-ops included, or it never reaches the other's RSN.
    logDelivered({ type: 'cg', signed });
    if (nonceClients.has(cg.client)) {
      if (!isOperatorRequest(cg.payload) || !mayRequest(cg.client, cg.payload, operators, m.scc)) {
        suspect(out, state.primary, 'rsn.gap', `rsn ${state.rsn} carries a ${cg.payload.type} from ${cg.client}`);
        return;
      }
      out.push({ type: 'deliver.request', rsn: state.rsn, client: cg.client, inc: cg.inc, csn: cg.csn, request: cg.payload });
      applied(applyOperatorRequest(state, cg.payload, { bytes: signed.bytes, sig: signed.sig }), cg.client, nowMs, out);
      return;
    }
    const expected = expectedCsn(state, cg.client, cg.inc);
    if (cg.csn !== expected || isOperatorRequest(cg.payload)) {
      // The primary orders only the next CSN of the newest incarnation, and only operators'
      // task requests, so a backup seeing anything else caught it lying.
      suspect(out, state.primary, 'rsn.gap', `rsn ${state.rsn} carries csn ${cg.csn}/${cg.inc} ${cg.payload.type} of ${cg.client}, expected ${expected}`);
      return;
    }
    adoptIncarnation(state, cg.client, cg.inc);
    state.csnReceived.set(cg.client, cg.csn);
    out.push({ type: 'deliver.request', rsn: state.rsn, client: cg.client, inc: cg.inc, csn: cg.csn, request: cg.payload });
    if (cg.payload.type === 'node.join') {
      // A new incarnation of the agent is alive: any suspicion of its node is over.
      probes.delete(cg.client);
      const node = state.nodes.get(cg.client)?.node;
      if (node !== undefined) resets.delete(node);
    }
    applied(applyRequest(state, cg.client, cg.payload, cg.inc), cg.client, nowMs, out);
    groupAck(cg.client, nowMs, out);
  }

  /** Execute one ordered input at RSN `state.rsn` (already incremented). */
  function execute(o: Ordered, nowMs: number, out: CoreEffect[]): void {
    if (o.type === 'cg') {
      deliver(o.signed, nowMs, out);
    } else {
      logDelivered(o);
      out.push({ type: 'deliver.input', rsn: state.rsn, input: o.input });
      const claimView = state.group.view; // the view a replica.add's port claim names
      applied(applyGroupInput(state, o.input), null, nowMs, out);
      // PROTOCOL §10.6: the new member gets the state as of the RSN where it joined, addressed
      // to the incarnation that asked for it (a spare id started again may still have a session
      // of its dead incarnation here, whose lanes die with the handshake).
      const joined = o.input.type === 'replica.add' ? o.input.id : null;
      if (joined !== null && joined !== id && isMember(joined) && isMember(id)) {
        const seen = heard.get(joined);
        if (seen !== undefined) Object.assign(seen, { atMs: nowMs, sinceCheck: true, missedChecks: 0 }); // its predecessor's silence is not its own
        owedState.set(joined, { view: claimView, payloads: statePayloads(state.rsn, encodeState(state), digest()) });
        sendOwedState(joined, nowMs, out);
      }
    }
    checkpoint(nowMs, out);
  }

  /** PROTOCOL §10.4: the state's digest at every digestEveryRsn-th RSN, whichever path executed
   *  it. The primary's too: under load no heartbeat of a backup's names an RSN the primary took a
   *  heartbeat digest at, so a checkpoint is the only state it can compare with theirs. */
  function checkpoint(nowMs: number, out: CoreEffect[]): void {
    if (state.rsn % t.digestEveryRsn === 0) diagnosis.ownDigest(state.rsn, digest(), nowMs, out);
  }

  // ---- nodes added at run time (PROTOCOL §10.12) ---------------------------------------------

  /** The added nodes' spares, as addedSpares lists them, computed again only when `added`
   *  changed (it only grows, or is replaced whole by a transfer): the heartbeat reads it. */
  let spareCache: { of: ReplicatedState['added']; size: number; list: ReturnType<typeof addedSpares> } | null = null;
  const spareKeysOf = (ids: readonly ProcessId[]) => {
    if (state.added.size === 0) return [];
    if (spareCache === null || spareCache.of !== state.added || spareCache.size !== state.added.size) {
      spareCache = { of: state.added, size: state.added.size, list: addedSpares(state.added) };
    }
    return addedAmong(spareCache.list, ids);
  };

  /** Added agents whose keys (and their nodes' spares') went to the driver (the `keys` effect). */
  const announcedKeys = new Set<ProcessId>();
  /** The state added an agent (applied, or installed by a transfer): the driver learns its key,
   *  and the agent gets a session and heartbeat checks like the others. A removed agent keeps
   *  its session (its last command may still be in flight); its requests change nothing. */
  function syncAgents(nowMs: number, out: CoreEffect[]): void {
    // Called after every applied input: nothing to do unless a node was added (the added set
    // only grows, and every other agent has been known since the start).
    if (state.added.size === announcedKeys.size) return;
    const fresh = [...state.added].filter(([a]) => !announcedKeys.has(a));
    const keys: LearntKey[] = [];
    for (const [a, n] of fresh) {
      announcedKeys.add(a);
      keys.push({ id: a, publicKey: n.publicKey });
      // The node's spares are replicas from now on: their frames are replica frames (§10.12).
      for (const x of n.spares) {
        poolIds.add(x.id);
        if (x.id !== id && !heard.has(x.id)) heard.set(x.id, unheard());
        keys.push({ id: x.id, publicKey: x.publicKey, replica: { node: n.node, address: n.address, port: x.port } });
      }
    }
    out.push({ type: 'keys', keys });
    for (const a of state.nodes.keys()) {
      if (agentIds.has(a)) continue;
      agentIds.add(a);
      heard.set(a, unheard());
      linkAddPeer(links, a, nowMs, out);
    }
  }

  // ---- group changes (PROTOCOL §10.5–10.7) ---------------------------------------------------

  /** Sessions with exactly the members, the replacement under way and the agents. */
  function syncLinks(nowMs: number, out: CoreEffect[]): void {
    const want = new Set([...state.replicas, ...agentIds]);
    const joining = state.group.recovery?.id;
    if (joining !== undefined) want.add(joining);
    for (const p of want) linkAddPeer(links, p, nowMs, out, p === joining && !isMember(p));
    for (const p of [...links.peers.keys()]) if (poolIds.has(p) && !want.has(p)) linkRemovePeer(links, p);
  }

  function onViewChanged(nowMs: number, out: CoreEffect[]): void {
    if (sync !== null) {
      // The new primary's order starts after the RSN of the condemnation.
      resetOrder();
      sync = null;
    }
    condemnOrdered = false;
    earlySync.clear();
    syncLinks(nowMs, out);
    out.push({ type: 'log', level: 'warn', event: 'group.view', fields: { view: state.group.view, replicas: state.replicas, primary: state.primary, rsn: state.rsn } });
    out.push({ type: 'replicas', replicas: [...state.replicas], ports: movedPorts(state.group, state.replicas) });
    // Forwarded requests the old view never ordered go to the primary of this one (or are
    // ordered here): the agent has handed them over and will not send them again.
    const forwarded = [...progressTimers.values()].map((x) => x.signed);
    progressTimers.clear();
    if (isMember(id)) {
      for (const signed of forwarded) {
        if (deliveredCG(signed.cg)) continue;
        if (isPrimary()) order(signed, nowMs, out);
        else forwardToPrimary(signed, nowMs, out);
      }
    }
    if (!isMember(id)) {
      phase = 'retired';
      out.push({ type: 'log', level: 'error', event: 'replica.retired', fields: { view: state.group.view } });
      return;
    }
    for (const r of [...owedState.keys()]) if (!isMember(r)) owedState.delete(r);
    diagnosis.newView(nowMs, out);
    actOnCondemnation(nowMs, out);
    releaseRequests(nowMs, out);
  }

  /** Two accusations condemn a member (PROTOCOL §10.3): a backup is removed by the primary's
   *  ordered `replica.condemn`; a condemned primary by its successor's, after a sync. */
  function actOnCondemnation(nowMs: number, out: CoreEffect[]): void {
    const c = diagnosis.condemned();
    if (c === null || phase !== 'serving') return;
    if (c.target === id) {
      // Two members accuse us, one of them correct: the group removes us whatever we do, and
      // anything we still sent would only be copies nobody matches (PROTOCOL §10.3).
      phase = 'retired';
      out.push({ type: 'log', level: 'error', event: 'replica.retired', fields: { view: state.group.view, why: 'condemned' } });
      return;
    }
    if (c.target === state.primary) {
      if (c.target !== id) startSync(c.target, c.evidence, nowMs, out);
      return;
    }
    if (isPrimary() && !condemnOrdered) {
      condemnOrdered = true;
      orderInput({ type: 'replica.condemn', evidence: c.evidence }, nowMs, out);
    }
  }

  /** PROTOCOL §10.5: stop taking the condemned primary's order, tell the other survivor how far
   *  we executed, and send it what it lacks from our log. */
  function startSync(target: ProcessId, evidence: SignedAccusation[], nowMs: number, out: CoreEffect[]): void {
    if (sync !== null && sync.view === state.group.view) return;
    const peer = state.replicas.find((r) => r !== target && r !== id);
    sync = { view: state.group.view, target, peer, peerRsn: null, evidence, ordered: false };
    resetOrder();
    // Requests we forwarded to the condemned primary are forwarded again to its successor
    // once the view changes (onViewChanged); meanwhile they accuse nobody.
    for (const timer of progressTimers.values()) timer.atMs = Infinity;
    holdback.clear();
    out.push({ type: 'log', level: 'warn', event: 'group.sync', fields: { view: state.group.view, target, peer, rsn: state.rsn } });
    if (peer !== undefined) {
      sendPtp(peer, { type: 'view.sync', view: state.group.view, rsn: state.rsn }, nowMs, out);
      const early = earlySync.get(peer);
      if (early !== undefined) onViewSync(peer, early.view, early.rsn, nowMs, out);
    }
    trySyncOrder(nowMs, out);
  }

  function onViewSync(from: ProcessId, view: number, rsn: number, nowMs: number, out: CoreEffect[]): void {
    if (sync === null || sync.view !== view || sync.peer !== from) {
      if (view >= state.group.view && isMember(from)) earlySync.set(from, { view, rsn });
      return;
    }
    if (sync.peerRsn !== null && sync.peerRsn >= rsn) return;
    sync.peerRsn = rsn;
    for (const [r, o] of deliveredLog) if (r > rsn && r <= state.rsn) sendOrdered(from, r, o, nowMs, out);
    trySyncOrder(nowMs, out);
  }

  function sendOrdered(to: ProcessId, rsn: number, o: Ordered, nowMs: number, out: CoreEffect[]): void {
    sendPtp(to, o.type === 'cg' ? { type: 'wrapper', rsn, signed: o.signed } : { type: 'wrapper.input', rsn, input: o.input }, nowMs, out);
  }

  /** The successor orders the condemnation once it executed everything its peer did. */
  function trySyncOrder(nowMs: number, out: CoreEffect[]): void {
    if (sync === null || sync.ordered || successor(state.replicas, sync.target) !== id) return;
    if (sync.peer !== undefined && (sync.peerRsn === null || state.rsn < sync.peerRsn)) return;
    sync.ordered = true;
    const input: GroupInput = { type: 'replica.condemn', evidence: sync.evidence };
    state.rsn++;
    if (sync.peer !== undefined) sendPtp(sync.peer, { type: 'wrapper.input', rsn: state.rsn, input }, nowMs, out);
    execute({ type: 'input', input }, nowMs, out);
  }

  /** During a sync, the other survivor's log entries and the successor's condemnation are
   *  executed as they come: both are correct (PROTOCOL §10.5). */
  function onSyncOrdered(rsn: number, o: Ordered, nowMs: number, out: CoreEffect[]): void {
    if (rsn !== state.rsn + 1) return;
    state.rsn++;
    execute(o, nowMs, out);
    trySyncOrder(nowMs, out);
  }

  // ---- the replacement's side (PROTOCOL §10.6) ------------------------------------------------

  function onStatePart(from: ProcessId, p: PtpPayload, nowMs: number, out: CoreEffect[]): void {
    const got = transfer.receive(from, p);
    if (got === null) return;
    const decoded = decodeState(got.bytes, { timers: state.timers, pool: state.pool, spareNodes: state.spareNodes });
    if (!decoded.ok) {
      transfer.discard(got.rsn);
      out.push({ type: 'log', level: 'error', event: 'state.refused', fields: { rsn: got.rsn, code: decoded.code, detail: decoded.detail } });
      return;
    }
    Object.assign(state, decoded.value);
    resetOrder();
    phase = isMember(id) ? 'serving' : 'retired';
    out.push({
      type: 'log', level: 'warn', event: 'state.installed',
      fields: { rsn: state.rsn, view: state.group.view, replicas: state.replicas, bytes: got.bytes.length, csnReceived: [...state.csnReceived] },
    });
    out.push({ type: 'replicas', replicas: [...state.replicas], ports: movedPorts(state.group, state.replicas) });
    syncAgents(nowMs, out);
    syncLinks(nowMs, out);
    diagnosis.newView(nowMs, out);
    diagnosis.ownDigest(state.rsn, digest(), nowMs, out);
    replaying = true;
    for (const d of heldWhileInstalling.splice(0)) onDelivery(d, nowMs, out);
    replaying = false;
    releaseRequests(nowMs, out);
  }
  let replaying = false;

  /** Primary: remember the digest of what it ordered at `rsn`, to judge a backup's confirmation
   *  another backup shows it (PROTOCOL §10.2 `order.lie`). */
  function recordOrder(rsn: number, o: Ordered): void {
    executedDigests.set(rsn, orderDigest(o));
    executedDigests.delete(rsn - MAX_ORDER_AHEAD);
  }

  /** Primary: order an input of the group's own (PROTOCOL §8.3, §8.4). */
  function orderInput(input: GroupInput, nowMs: number, out: CoreEffect[]): void {
    state.rsn++;
    recordOrder(state.rsn, { type: 'input', input });
    for (const b of backups()) linkSend(links, b, 0, { type: 'wrapper.input', rsn: state.rsn, input }, nowMs, out);
    execute({ type: 'input', input }, nowMs, out);
  }

  /** Primary: order an operator request once (PROTOCOL §8.1); a retry from the operator itself
   *  is answered again (a backup's forward of it is not: the operator has its own copy). */
  function orderOperator(signed: SignedCG, direct: boolean, nowMs: number, out: CoreEffect[]): void {
    const payload = signed.cg.payload;
    if (!isOperatorRequest(payload)) return;
    const seen = state.outcomes.get(payload.nonce);
    if (seen !== undefined) {
      if (direct) reply(signed.cg.client, seen, out);
      return;
    }
    orderCG(signed, nowMs, out);
  }

  /** Primary: give a request the next RSN, send it to the backups and execute it. */
  function orderCG(signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
    state.rsn++;
    recordOrder(state.rsn, { type: 'cg', signed });
    for (const b of backups()) linkSend(links, b, 0, { type: 'wrapper', rsn: state.rsn, signed }, nowMs, out);
    deliver(signed, nowMs, out);
    checkpoint(nowMs, out);
  }

  /** Primary: order the next request of `client` (spec §3.6 G7, with CSN hold-back). */
  function order(signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
    if (nonceClients.has(signed.cg.client)) return orderOperator(signed, false, nowMs, out);
    if (isOperatorRequest(signed.cg.payload)) {
      countDrop(drops, 'NOT_A_MEMBER'); // an agent may not submit or kill tasks (PROTOCOL §8.1)
      return;
    }
    const { client, inc, csn } = signed.cg;
    const expected = expectedCsn(state, client, inc);
    if (expected === null) return; // a dead incarnation's request, replayed or relayed late
    if (csn < expected) {
      groupAck(client, nowMs, out); // a retransmission: the agent missed our ack
      return;
    }
    if (csn > expected) {
      let held = holdback.get(client);
      if (held === undefined) holdback.set(client, (held = new Map()));
      for (const [k, h] of held) if (h.cg.inc < inc) held.delete(k);
      if (held.size < MAX_HOLDBACK_PER_AGENT && (held.get(csn)?.cg.inc ?? 0) <= inc) held.set(csn, signed);
      return;
    }
    let next: SignedCG | undefined = signed;
    while (next !== undefined) {
      orderCG(next, nowMs, out);
      const held = holdback.get(client);
      const following = (state.csnReceived.get(client) ?? 0) + 1;
      next = held?.get(following);
      held?.delete(following);
      if (next !== undefined && next.cg.inc !== state.clientInc.get(client)) next = undefined;
    }
  }

  /** Backup: a request the primary should order (an agent's fallback, or an operator's request
   *  sent to every replica) goes to the primary; PrimaryProgressTimeout watches it (G8). Not one
   *  the primary already ordered, which waits here for the other backup's confirmation (PROTOCOL
   *  §5.8): its order is not in question, and a backup that withholds its confirmations must not
   *  make a correct primary look as if it never ordered. */
  function forwardToPrimary(signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
    const key = progressKey(signed.cg);
    for (const p of confirm.proposals.values()) if (p.ordered.type === 'cg' && progressKey(p.ordered.signed.cg) === key) return;
    linkSend(links, state.primary, 0, { type: 'wrapper', rsn: 0, signed }, nowMs, out);
    if (!progressTimers.has(key) && progressTimers.size < MAX_HOLDBACK_PER_AGENT * agentIds.size) {
      progressTimers.set(key, { signed, atMs: nowMs + t.primaryProgressMs });
    }
  }

  /** An operator's request, sent to every replica (PROTOCOL §8.1), or the watchdog's restore
   *  (§10.9), whose operator-signed submit is checked here before it is ordered or forwarded. */
  function onOperatorRequest(from: ProcessId, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
    const payload = signed.cg.payload;
    if (!nonceClients.has(from) || !mayRequest(signed.cg.client, payload, operators, m.scc) || signed.cg.csn !== 0 || signed.cg.inc !== 0 ||
      !isOperatorRequest(payload)) {
      countDrop(drops, 'NOT_A_MEMBER');
      return;
    }
    // A restore orders only what an operator signed (PROTOCOL §10.9).
    const opened = payload.type === 'task.restore' ? openRestoredSubmit(payload, opts.verifier, operators)
      : payload.type === 'node.restore' ? openRestoredOp(payload, opts.verifier, operators) : null;
    if (opened !== null && !opened.ok) {
      countDrop(drops, opened.code);
      const what = payload.type === 'task.restore' ? { task: payload.task } : { nonce: payload.nonce };
      out.push({ type: 'log', level: 'warn', event: 'restore.refused', fields: { ...what, code: opened.code, detail: opened.detail } });
      return;
    }
    if (isPrimary()) return orderOperator(signed, true, nowMs, out);
    const seen = state.outcomes.get(payload.nonce);
    if (seen !== undefined) return reply(from, seen, out);
    forwardToPrimary(signed, nowMs, out);
  }

  /** Lane-0 payloads of self-diagnosis and group change (PROTOCOL §10). Returns whether the
   *  payload still needs the ordinary handling. */
  function onGroupPtp(from: ProcessId, p: PtpPayload, nowMs: number, out: CoreEffect[]): boolean {
    switch (p.type) {
      case 'accuse':
        diagnosis.onAccuse(from, p.signed, nowMs, out);
        actOnCondemnation(nowMs, out);
        return false;
      case 'view.sync':
        onViewSync(from, p.view, p.rsn, nowMs, out);
        return false;
      case 'state.request': {
        const inc = links.peers.get(from)?.peerInc ?? 0;
        if (poolIds.has(from) && inc !== 0 && p.view >= (stateAsked.get(from)?.view ?? 0)) {
          stateAsked.set(from, { view: p.view, inc });
          sendOwedState(from, nowMs, out);
        }
        // The primary lets the replacement in at an RSN of its own; the others wait for it.
        if (state.group.recovery?.id === from && isPrimary() && phase === 'serving' && !addOrdered.has(`${from}@${state.group.view}`)) {
          const add: GroupInput = { type: 'replica.add', id: from, port: p.port, sig: p.sig };
          // The backups take it only with the replacement's own signature on its port (§10.6):
          // ordered without one, it would split the group over a replacement's lie.
          if (!portSigned(add)) {
            countDrop(drops, 'SIG_INVALID');
            return false;
          }
          addOrdered.add(`${from}@${state.group.view}`);
          orderInput(add, nowMs, out);
        }
        return false;
      }
      case 'order.evidence':
        if (!isPrimary() && otherBackups().includes(from)) onEvidence(from, p.rsn, p.frame, nowMs, out);
        return false;
      case 'order.claim':
        if (isPrimary() && backups().includes(from)) onOrderClaim(from, p, nowMs, out);
        return false;
      case 'state.digest':
      case 'state.chunk':
        return false; // only a replacement takes the state
      case 'wrapper':
      case 'wrapper.input':
        if (sync === null) return true;
        // The condemned primary's order is void; the other survivor's entries are executed.
        if (from === sync.peer) onSyncOrdered(p.rsn, p.type === 'wrapper' ? { type: 'cg', signed: p.signed } : { type: 'input', input: p.input }, nowMs, out);
        return false;
      case 'order':
        return sync === null;
      default:
        return true;
    }
  }

  function onDelivery(d: Delivery, nowMs: number, out: CoreEffect[]): void {
    if (phase === 'installing' && d.type === 'ptp') {
      const p = d.payload;
      if (p.type === 'state.digest' || p.type === 'state.chunk') onStatePart(d.from, p, nowMs, out);
      else if (heldWhileInstalling.length < MAX_DELIVERED_LOG) heldWhileInstalling.push(d);
      return;
    }
    // Agents' requests received meanwhile wait until the state is in and the primary known: the
    // link has acknowledged them, so the agent will not send them again (PROTOCOL §10.5).
    if ((phase !== 'serving' || sync !== null) && d.type === 'grp') {
      if (phase !== 'retired' && heldRequests.length < MAX_DELIVERED_LOG) heldRequests.push(d);
      return;
    }
    switch (d.type) {
      case 'grp': {
        if (!agentIds.has(d.from) || d.body.type !== 'cg') {
          countDrop(drops, 'UNEXPECTED');
          return;
        }
        const signed = d.body.signed;
        if (isPrimary()) {
          order(signed, nowMs, out);
          return;
        }
        // A backup hears from an agent only when the agent gave up on the primary (G7).
        if (deliveredCG(signed.cg)) {
          groupAck(d.from, nowMs, out);
          return;
        }
        if (isOperatorRequest(signed.cg.payload)) {
          countDrop(drops, 'NOT_A_MEMBER');
          return;
        }
        forwardToPrimary(signed, nowMs, out);
        out.push({ type: 'log', level: 'warn', event: 'agent.fallback', fields: { client: d.from, csn: signed.cg.csn } });
        return;
      }
      case 'ptp': {
        const p = d.payload;
        if (!onGroupPtp(d.from, p, nowMs, out)) return;
        if (p.type === 'wrapper') {
          // Only agents make requests: a replica relaying a request signed by anyone else
          // (itself included) is faulty (PROTOCOL §2.3).
          if (!isMember(d.from) || !(agentIds.has(p.signed.cg.client) || nonceClients.has(p.signed.cg.client))) {
            countDrop(drops, 'NOT_A_MEMBER');
            return;
          }
          if (isPrimary()) {
            order(p.signed, nowMs, out); // forwarded by a backup: order it as if direct
          } else if (d.from === state.primary) {
            // The primary ordered it: PrimaryProgressTimeout (G8) is about ordering, not about
            // how long the backups take to confirm and execute.
            if (p.rsn !== 0) progressTimers.delete(progressKey(p.signed.cg));
            propose(p.rsn, { type: 'cg', signed: p.signed }, hash(p.signed.bytes), nowMs, out);
          }
          return;
        }
        if (p.type === 'wrapper.input') {
          if (isPrimary() || d.from !== state.primary) {
            countDrop(drops, 'NOT_A_MEMBER');
            return;
          }
          if (p.input.type === 'tick') checkTickRate(nowMs, out);
          // Where the replacement listens is its own word, signed, not the primary's (PROTOCOL
          // §10.6): a primary that changes it gets no confirmation, and its order stalls until
          // the progress rule exposes it.
          if (!portSigned(p.input)) {
            countDrop(drops, 'SIG_INVALID');
            return;
          }
          // Distinct from any CG's bytes: a one-byte tag before the input's canonical encoding.
          const bytes = pack(['group-input', groupInput.enc(p.input)]);
          propose(p.rsn, { type: 'input', input: p.input }, hash(bytes), nowMs, out);
          return;
        }
        if (p.type === 'node.suspect') {
          onNodeSuspect(d.from, p.agent, p.inc, p.unreachable, nowMs, out);
          return;
        }
        if (p.type === 'order') {
          // The other backup's view of the primary's order (PROTOCOL §5.8).
          if (isPrimary() || !otherBackups().includes(d.from)) return;
          if (p.rsn > state.rsn) {
            if (p.rsn > state.rsn + MAX_ORDER_AHEAD) return; // bounded: a lying backup cannot fill us
            confirm.confirmations.set(p.rsn, p.digest);
            confirmClaims.set(p.rsn, { view: p.view, sig: p.sig });
            executeInOrder(nowMs, out);
          } else {
            // We executed this RSN without its confirmation: a different one still exposes the lie,
            // and the other backup, which disputes it, needs our frame as evidence.
            const mine = executedDigests.get(p.rsn);
            if (mine !== undefined && !bytesEqual(mine, p.digest)) {
              suspect(out, state.primary, 'digest.mismatch', `${d.from} was given another request at executed rsn ${p.rsn}`);
              sendEvidence(d.from, p.rsn, nowMs, out);
            }
          }
          return;
        }
        if (p.type === 'notice') {
          out.push({ type: 'deliver.notice', from: d.from, text: p.text });
          return;
        }
        if (p.type === 'error.report') {
          out.push({ type: 'log', level: 'warn', event: 'error.report.ptp', fields: { from: d.from, gssn: p.gssn, kind: p.kind } });
          return;
        }
        return;
      }
      case 'gack':
        // An agent's group ack: the link has already released the copies it received from us
        // (spec §3.6 G10); its complete mark needs nothing more from a replica.
        return;
      case 'established':
      case 'reset':
        logSessionEvent(d, out);
        // The primary can only now receive what we forwarded it: its progress is timed from here.
        if (d.type === 'established' && d.peer === state.primary) {
          for (const timer of progressTimers.values()) if (timer.atMs !== Infinity) timer.atMs = Math.max(timer.atMs, nowMs + t.primaryProgressMs);
        }
        return;
      default: {
        const never: never = d;
        return never;
      }
    }
  }

  const otherBackups = (): ProcessId[] => backups().filter((b) => b !== id);

  /** A `replica.add` carries the port its replacement signed (PROTOCOL §10.6); other inputs pass. */
  const portSigned = (input: GroupInput): boolean =>
    input.type !== 'replica.add' || opts.verifier.verify(input.id, pack(portClaim(input.id, state.group.view, input.port)), input.sig);

  /** The digest a backup confirms for an ordered item (PROTOCOL §5.8). */
  const orderDigest = (o: Ordered): Uint8Array => (o.type === 'cg' ? hash(o.signed.bytes) : hash(pack(['group-input', groupInput.enc(o.input)])));

  /** PROTOCOL §10.2: the other backup shows the frame the primary signed for `rsn`. If it holds
   *  a different order than the primary gave us, the primary signed two orders for one RSN:
   *  proof, and we accuse it. A frame that proves nothing proves nothing (it is dropped). */
  function onEvidence(from: ProcessId, rsn: number, frame: Uint8Array, nowMs: number, out: CoreEffect[]): void {
    const mine = confirm.proposals.get(rsn)?.digest ?? executedDigests.get(rsn);
    if (mine === undefined) {
      if (rsn === confirm.proposedRsn + 1 && phase === 'serving' && sync === null) return relayedOrder(from, rsn, frame, nowMs, out);
      if (rsn > state.rsn && evidenceWaiting.size < MAX_ORDER_AHEAD) evidenceWaiting.set(rsn, frame);
      return;
    }
    const decoded = decodeFrame(frame, { cluster: m.cluster, self: from, verifier: opts.verifier });
    if (!decoded.ok || decoded.value.from !== state.primary) return;
    for (const item of decoded.value.items) {
      const b = item.type === 'ptp' ? item.body : null;
      if (b === null || (b.type !== 'wrapper' && b.type !== 'wrapper.input') || b.rsn !== rsn) continue;
      const theirs = orderDigest(b.type === 'wrapper' ? { type: 'cg', signed: b.signed } : { type: 'input', input: b.input });
      if (!bytesEqual(theirs, mine)) {
        disputes.delete(rsn);
        // The other backup holds proof only if it has our frame too (we may have executed this
        // RSN without disputing it); the accusation is once per view, the frame is cheap.
        sendEvidence(from, rsn, nowMs, out);
        diagnosis.accuse(state.primary, 'equivocation', `the primary signed two orders for rsn ${rsn} (${from} holds the other)`, nowMs, out);
        actOnCondemnation(nowMs, out);
      }
      return;
    }
  }

  /** PROTOCOL §5.8: the other backup executed `rsn` without our confirmation and shows us the
   *  primary's signed frame for it, the next RSN we lack. A primary that withholds an order from
   *  one backup cannot stall it: the order is the primary's own, signed, whoever relays it. */
  function relayedOrder(from: ProcessId, rsn: number, frame: Uint8Array, nowMs: number, out: CoreEffect[]): void {
    const decoded = decodeFrame(frame, { cluster: m.cluster, self: from, verifier: opts.verifier });
    if (!decoded.ok || decoded.value.from !== state.primary) return;
    for (const item of decoded.value.items) {
      const b = item.type === 'ptp' ? item.body : null;
      if (b === null || (b.type !== 'wrapper' && b.type !== 'wrapper.input') || b.rsn !== rsn) continue;
      if (b.type === 'wrapper') {
        if (!(agentIds.has(b.signed.cg.client) || nonceClients.has(b.signed.cg.client))) return;
        progressTimers.delete(progressKey(b.signed.cg));
        out.push({ type: 'log', level: 'warn', event: 'order.relayed', fields: { rsn, from } });
        const ordered: Ordered = { type: 'cg', signed: b.signed };
        return propose(rsn, ordered, orderDigest(ordered), nowMs, out);
      }
      if (b.type === 'wrapper.input') {
        if (!portSigned(b.input)) return;
        out.push({ type: 'log', level: 'warn', event: 'order.relayed', fields: { rsn, from } });
        const ordered: Ordered = { type: 'input', input: b.input };
        return propose(rsn, ordered, orderDigest(ordered), nowMs, out);
      }
    }
  }

  /** Backups: show the other backup, once per RSN, the primary's signed frame that gave us `rsn`. */
  function sendEvidence(to: ProcessId, rsn: number, nowMs: number, out: CoreEffect[]): void {
    const frame = orderFrames.get(rsn);
    if (frame === undefined || evidenceSent.has(rsn)) return;
    evidenceSent.add(rsn);
    if (evidenceSent.size > EXECUTED_FRAMES_KEPT) evidenceSent.delete(evidenceSent.values().next().value as number);
    sendPtp(to, { type: 'order.evidence', rsn, frame }, nowMs, out);
  }

  /** PROTOCOL §10.2 `order.lie`, the primary's side: a backup in a dispute shows us the other
   *  backup's signed confirmation of `rsn`. If its digest is not of what we ordered there in this
   *  view, the other backup confirmed an order nobody gave it. */
  function onOrderClaim(from: ProcessId, c: Extract<PtpPayload, { type: 'order.claim' }>, nowMs: number, out: CoreEffect[]): void {
    const mine = executedDigests.get(c.rsn);
    if (mine === undefined || c.view !== state.group.view || c.claimant === from || !backups().includes(c.claimant)) return;
    if (!opts.verifier.verify(c.claimant, pack(orderClaim(c.claimant, c.view, c.rsn, c.digest)), c.sig)) {
      countDrop(drops, 'SIG_INVALID');
      return;
    }
    if (bytesEqual(c.digest, mine)) return;
    diagnosis.accuse(c.claimant, 'order.lie', `${c.claimant} confirmed rsn ${c.rsn} with a digest of no order of ours (${from} showed its signed claim)`, nowMs, out);
    actOnCondemnation(nowMs, out);
  }

  /** PROTOCOL §10.2 `order.lie`, the disputing backup's side: no evidence of an equivocation
   *  came within the bound, so the other backup confirmed an order the primary never gave. */
  function disputeTimers(nowMs: number, out: CoreEffect[]): void {
    for (const [rsn, d] of disputes) {
      if (d.deadlineMs > nowMs) continue;
      disputes.delete(rsn);
      if (!otherBackups().includes(d.other)) continue;
      diagnosis.accuse(d.other, 'order.lie', `${d.other} confirmed rsn ${rsn} with another digest than the primary's order and showed no frame of the primary's for it within ${t.orderConfirmMs} ms`, nowMs, out);
      actOnCondemnation(nowMs, out);
    }
  }

  /** Backup: the primary's order for `rsn` (spec §3.6 G7), confirmed with the other backup
   *  before execution (PROTOCOL §5.8). */
  function propose(rsn: number, ordered: Ordered, digest: Uint8Array, nowMs: number, out: CoreEffect[]): void {
    // A replacement's held wrappers from before the RSN its state came at (PROTOCOL §10.6).
    if (replaying && rsn <= state.rsn) return;
    // spec §3.6 G7: a gap in the primary's RSN sequence initiates self-diagnosis.
    if (rsn !== confirm.proposedRsn + 1) {
      suspect(out, state.primary, 'rsn.gap', `wrapper rsn ${rsn}, expected ${confirm.proposedRsn + 1}`);
      return;
    }
    if (confirm.proposals.size >= MAX_ORDER_AHEAD) {
      // Only a stalled dispute gets here; self-diagnosis (issue 5) resolves it.
      out.push({ type: 'log', level: 'error', event: 'order.backlog-full', fields: { rsn } });
      return;
    }
    confirm.proposedRsn = rsn;
    confirm.proposals.set(rsn, { ordered, digest, atMs: nowMs });
    const waiting = evidenceWaiting.get(rsn);
    if (waiting !== undefined) {
      evidenceWaiting.delete(rsn);
      const other = otherBackups()[0];
      if (other !== undefined) onEvidence(other, rsn, waiting, nowMs, out);
    }
    // Signed on its own, inside a MAC'd frame: evidence only if it lies (PROTOCOL §10.2 order.lie).
    const view = state.group.view;
    const sig = opts.signer.sign(pack(orderClaim(id, view, rsn, digest)));
    for (const b of otherBackups()) linkSend(links, b, 0, { type: 'order', rsn, digest, view, sig }, nowMs, out);
    executeInOrder(nowMs, out);
  }

  /** Backups: the task clock's ticks as they arrived, within the last TICK_RATE_WINDOW_MS. A
   *  tick is ordered, so every replica applies the same ones; how fast they come is the
   *  primary's word. A primary ordering them much faster than taskTickMs (timers would expire
   *  early) is suspected (PROTOCOL §8.3); the ticks are still executed, as the order says. */
  const tickArrivals: number[] = [];
  let tickRateSuspectedAtMs = -Infinity;
  function checkTickRate(nowMs: number, out: CoreEffect[]): void {
    tickArrivals.push(nowMs);
    while ((tickArrivals[0] as number) <= nowMs - TICK_RATE_WINDOW_MS) tickArrivals.shift();
    // Twice the nominal count, plus slack for a burst after a retransmission.
    const limit = 2 * Math.ceil(TICK_RATE_WINDOW_MS / t.taskTickMs) + TICK_RATE_SLACK;
    if (tickArrivals.length > limit && nowMs - tickRateSuspectedAtMs >= TICK_RATE_WINDOW_MS) {
      tickRateSuspectedAtMs = nowMs;
      suspect(out, state.primary, 'clock.rate', `${tickArrivals.length} ticks in ${TICK_RATE_WINDOW_MS} ms (taskTickMs ${t.taskTickMs})`);
    }
  }

  // ---- node failure detection (spec §1.3, PROTOCOL §8.4) ---------------------------------------

  /** A probe that expired longer ago than this is stale: its silence says nothing about now. */
  const staleProbe = (p: Probe, nowMs: number): boolean => p.expired && !p.declared && nowMs - p.deadlineMs > t.probeTimeoutMs;

  /** Probe `agent` unless a current probe of this incarnation runs or just expired. A stale one
   *  is re-armed: the primary hears no agent heartbeats, so without this an old unanswered
   *  probe (its reply lost) would stand as a vote of "unreachable" forever, and one backup's
   *  later word would be enough to declare a healthy node failed. */
  function startProbe(agent: ProcessId, inc: number, nowMs: number, out: CoreEffect[]): Probe {
    let p = probes.get(agent);
    if (p === undefined || p.inc !== inc || staleProbe(p, nowMs)) {
      p = { inc, nonce: ++probeNonce, deadlineMs: nowMs + t.probeTimeoutMs, expired: false, backupUnreachable: false, declared: false };
      probes.set(agent, p);
      out.push({ type: 'send', to: agent, item: { type: 'probe', nonce: p.nonce } });
      out.push({ type: 'log', level: 'warn', event: 'node.probe', fields: { agent, inc, nonce: p.nonce } });
    }
    return p;
  }

  /** Primary: a backup suspects `agent`'s node; `unreachable`: its probe went unanswered. */
  function onNodeSuspect(from: ProcessId, agent: ProcessId, inc: number, unreachable: boolean, nowMs: number, out: CoreEffect[]): void {
    if (!isPrimary() || !backups().includes(from) || !agentIds.has(agent)) {
      countDrop(drops, 'NOT_A_MEMBER');
      return;
    }
    const rec = state.nodes.get(agent);
    if (rec === undefined || rec.failed || rec.inc !== inc) return;
    const p = startProbe(agent, inc, nowMs, out);
    if (unreachable) p.backupUnreachable = true;
    declareIfDue(agent, p, nowMs, out);
  }

  /** Primary: both its own probe and a backup's went unanswered: order the node's failure. One
   *  replica alone cannot declare a node failed (a faulty backup cannot kill a healthy node). */
  function declareIfDue(agent: ProcessId, p: Probe, nowMs: number, out: CoreEffect[]): void {
    if (!isPrimary() || p.declared || !p.backupUnreachable || !p.expired) return;
    p.declared = true;
    orderInput({ type: 'node.failed', agent, inc: p.inc }, nowMs, out);
  }

  function onProbeReply(from: ProcessId, nonce: number): void {
    const p = probes.get(from);
    if (p !== undefined && p.nonce === nonce && !p.declared) probes.delete(from);
  }

  function probeTimers(nowMs: number, out: CoreEffect[]): void {
    for (const [agent, p] of probes) {
      if (p.expired || p.deadlineMs > nowMs) continue;
      p.expired = true;
      if (isPrimary()) declareIfDue(agent, p, nowMs, out);
      else {
        out.push({ type: 'log', level: 'warn', event: 'node.unreachable', fields: { agent, inc: p.inc } });
        linkSend(links, state.primary, 0, { type: 'node.suspect', agent, inc: p.inc, unreachable: true }, nowMs, out);
      }
    }
  }

  /** Backups: execute the primary's order as far as it is confirmed (PROTOCOL §5.8). */
  function executeInOrder(nowMs: number, out: CoreEffect[]): void {
    const others = otherBackups();
    // A backup silent for two heartbeat checks has crashed or is cut off: do not wait for it.
    // One never heard at all, two checks after we started, is just as silent; so is one we
    // condemned, and with no other backup there is nobody to wait for (PROTOCOL §10.5).
    const condemned = diagnosis.condemned()?.target;
    const answers = others.length > 0 && others.every((b) => {
      if (b === condemned) return false;
      const seen = heard.get(b);
      if (seen === undefined || seen.atMs === null) return nowMs - startedAtMs < 2 * t.replicaCheckMs;
      return health(seen) !== 'silent';
    });
    for (;;) {
      const next = nextStep(confirm, state.rsn + 1, nowMs, answers, others.length === 0 || others.every((b) => b === condemned), t.orderConfirmMs);
      if (next.type === 'wait') return;
      if (next.type === 'dispute') {
        const other = others[0] as ProcessId;
        const theirs = confirm.confirmations.get(next.rsn) as Uint8Array;
        const claim = confirmClaims.get(next.rsn);
        if (claim === undefined || claim.view !== state.group.view || !opts.verifier.verify(other, pack(orderClaim(other, claim.view, next.rsn, theirs)), claim.sig)) {
          // A confirmation its sender did not sign proves nothing and confirms nothing: as if it
          // never came (a backup that withholds confirmations only delays us, §5.8).
          countDrop(drops, 'SIG_INVALID');
          confirm.disputed.delete(next.rsn);
          confirm.confirmations.delete(next.rsn);
          confirmClaims.delete(next.rsn);
          continue;
        }
        suspect(out, state.primary, 'digest.mismatch', `${others.join(',')} was given another request at rsn ${next.rsn}`);
        for (const b of others) sendEvidence(b, next.rsn, nowMs, out);
        // Either the primary signed two orders, and the other backup shows us its frame within
        // the bound, or the other backup lied: the primary sees that from its signed claim.
        sendPtp(state.primary, { type: 'order.claim', claimant: other, view: claim.view, rsn: next.rsn, digest: theirs, sig: claim.sig }, nowMs, out);
        disputes.set(next.rsn, { other, deadlineMs: nowMs + t.orderConfirmMs });
        return;
      }
      if (!next.confirmed) {
        out.push({ type: 'log', level: 'info', event: 'order.unconfirmed', fields: { rsn: state.rsn + 1, others } });
        // The other backup heartbeats but did not confirm: the primary may have withheld this
        // order from it. Show it the primary's frame, so it can go on (relayedOrder).
        if (answers) for (const b of others) sendEvidence(b, state.rsn + 1, nowMs, out);
      }
      state.rsn++;
      const proposal = confirm.proposals.get(state.rsn);
      if (proposal !== undefined) {
        executedDigests.set(state.rsn, proposal.digest);
        executedDigests.delete(state.rsn - MAX_ORDER_AHEAD);
      }
      executed(confirm, state.rsn);
      // The primary's frame stays a while after execution: the other backup may dispute an RSN
      // we executed unconfirmed and need it as evidence (PROTOCOL §5.8).
      orderFrames.delete(state.rsn - EXECUTED_FRAMES_KEPT);
      confirmClaims.delete(state.rsn);
      disputes.delete(state.rsn);
      execute(next.ordered, nowMs, out);
    }
  }

  function onHeartbeat(from: ProcessId, item: Extract<Item, { type: 'hb' }>, nowMs: number, out: CoreEffect[]): boolean {
    const seen = heard.get(from);
    if (seen === undefined) return false;
    if (item.inc < seen.inc || (item.inc === seen.inc && item.counter <= seen.counter)) return false;
    if (item.info.type === 'replica' ? !poolIds.has(from) : !agentIds.has(from)) return false;
    seen.inc = item.inc;
    seen.counter = item.counter;
    seen.atMs = nowMs;
    seen.sinceCheck = true;
    seen.missedChecks = 0;
    if (item.info.type === 'replica' && phase === 'serving') {
      diagnosis.heard(from);
      const i = item.info;
      diagnosis.onClaims(from, i.view, [[i.rsn, i.digest], [i.ckptRsn, i.ckptDigest]], nowMs, out);
    }
    if (item.info.type === 'agent') {
      const p = probes.get(from);
      if (p !== undefined && !p.declared) probes.delete(from);
    }
    return true;
  }

  function health(seen: HeartbeatSeen | undefined): PeerHealth {
    if (seen === undefined || seen.atMs === null) return 'unknown';
    return seen.missedChecks === 0 ? 'healthy' : seen.missedChecks === 1 ? 'late' : 'silent';
  }

  function status(nowMs: number): ReplicaStatus {
    const age = (s: HeartbeatSeen | undefined) => (s?.atMs == null ? null : Math.max(0, nowMs - s.atMs));
    return {
      id, role: isPrimary() ? 'primary' : 'backup', inc: opts.inc,
      rsn: state.rsn, gssn: state.gssn, primary: state.primary, digest: toHex(digest()),
      replicas: [...new Set([...state.replicas, ...(state.group.recovery === null ? [] : [state.group.recovery.id])])].filter((r) => r !== id).map((r) => ({
        id: r, connected: linkView(links, r)?.established ?? false, lastHeartbeatAgeMs: age(heard.get(r)), health: health(heard.get(r)),
      })),
      // The nodes the group has now: cluster.json's, less the removed, plus the added (§10.12).
      agents: [...state.nodes].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([agent, n]) => ({ id: agent, node: n.node })).map((a) => ({
        id: a.id, node: a.node, connected: linkView(links, a.id)?.established ?? false,
        joined: state.nodes.get(a.id)?.joined ?? false,
        lastHeartbeatAgeMs: age(heard.get(a.id)),
        health: health(heard.get(a.id)),
      })),
      suspicions, drops: { ...drops },
      view: state.group.view, members: [...state.replicas], phase: sync !== null ? 'syncing' : phase, diagnosis: diagnosis.history(),
      memberNodes: Object.fromEntries(state.group.replicaNodes), retired: [...state.group.retired], ports: movedPorts(state.group, state.replicas),
      added: spareKeysOf(state.replicas).map((x) => ({ ...x, publicKey: toHex(x.publicKey) })),
      replacement: state.group.recovery === null ? null : { id: state.group.recovery.id, node: state.group.recovery.node, tried: [...state.group.recovery.tried] },
      cluster: view(),
      ...(opts.daemon === undefined ? {} : { daemon: opts.daemon() }),
    };
  }

  function view(): ClusterView {
    return { ...clusterView(state.cluster, state.nodes), events: [...journal] };
  }

  /** PROTOCOL §10.11: once the watchdog has taken the shutdown and every node's agent has
   *  acknowledged its copies (or SHUTDOWN_LINGER_MAX_MS passed), this replica exits. */
  function shutdownTimers(nowMs: number, out: CoreEffect[]): void {
    if (stopping === null || stopping.done) return;
    if (!stopping.acked && stopping.noticeAtMs + SHUTDOWN_NOTICE_MS <= nowMs) {
      stopping.noticeAtMs = nowMs;
      out.push({ type: 'send', to: m.scc, item: { type: 'shutdown.notice', rsn: stopping.rsn } });
    }
    // An agent that has gone (it stopped its node on two copies) owes nothing more.
    const owed = [...state.nodes.entries()]
      .filter(([a, n]) => n.joined && !n.failed && !disconnected.has(a) && (linkView(links, a)?.unacked ?? 0) > 0).map(([a]) => a);
    const late = nowMs - stopping.sinceMs >= SHUTDOWN_LINGER_MAX_MS;
    if (!late && (!stopping.acked || owed.length > 0)) return;
    stopping.done = true;
    const reason = late ? `shutdown at RSN ${stopping.rsn}; stopped waiting after ${SHUTDOWN_LINGER_MAX_MS} ms (${stopping.acked ? '' : 'the watchdog never acknowledged; '}${owed.length === 0 ? 'every agent acknowledged' : `copies unacknowledged by ${owed.join(', ')}`})`
      : `shutdown at RSN ${stopping.rsn}: the watchdog and every agent acknowledged`;
    out.push({ type: 'shutdown', reason });
  }

  function timers(nowMs: number, out: CoreEffect[]): void {
    linkTimers(links, nowMs, out);
    disputeTimers(nowMs, out);
    shutdownTimers(nowMs, out);
    if (replicaHeartbeatAtMs <= nowMs) {
      heartbeatCounter++;
      if (phase === 'serving') diagnosis.ownDigest(state.rsn, digest(), nowMs, out);
      const ckpt = phase === 'serving' ? diagnosis.latestCheckpoint() : null;
      const info = {
        type: 'replica' as const, role: isPrimary() ? ('primary' as const) : ('backup' as const), rsn: state.rsn, gssn: state.gssn, digest: digest(),
        view: state.group.view, ckptRsn: ckpt?.[0] ?? 0, ckptDigest: ckpt?.[1] ?? new Uint8Array(32),
      };
      for (const r of state.replicas) {
        if (r !== id) out.push({ type: 'send', to: r, item: { type: 'hb', inc: links.inc, counter: heartbeatCounter, info } });
      }
      out.push({ type: 'send', to: m.scc, item: { type: 'hb', inc: links.inc, counter: heartbeatCounter, info } });
      // The watchdog learns the members cluster.json lacks from two of us (PROTOCOL §10.12).
      const added = spareKeysOf(state.group.recovery === null ? state.replicas : [...state.replicas, state.group.recovery.id]);
      if (added.length > 0) out.push({ type: 'send', to: m.scc, item: { type: 'replica.keys', replicas: added } });
      for (const [node, r] of resets) out.push({ type: 'send', to: m.scc, item: { type: 'reset.node', node, ...r } });
      replicaHeartbeatAtMs = nowMs + t.replicaHeartbeatMs;
    }
    if (stopping !== null) {
      // Shutting down, nobody's silence is a fault (PROTOCOL §10.11): no replica or agent checks.
      replicaCheckAtMs = Math.max(replicaCheckAtMs, nowMs + t.replicaCheckMs);
      agentCheckAtMs = Math.max(agentCheckAtMs, nowMs + t.agentCheckMs);
    }
    if (replicaCheckAtMs <= nowMs) {
      // spec §1.3: one missing replica heartbeat in a 150 ms check initiates self-diagnosis.
      // A replica never heard from is still starting; it is not suspected (docs/PROTOCOL.md §6).
      for (const r of state.replicas) {
        const seen = heard.get(r);
        if (r === id || seen === undefined || seen.atMs === null) continue;
        if (!seen.sinceCheck) {
          seen.missedChecks++;
          // Once per silence: a dead replica is one suspicion, not one every 150 ms.
          if (seen.missedChecks === 1) suspect(out, r, 'heartbeat.missed', `no heartbeat from ${r} for ${nowMs - seen.atMs} ms`);
          if (phase === 'serving') diagnosis.missed(r, nowMs - seen.atMs, nowMs, out);
        }
        seen.sinceCheck = false;
      }
      replicaCheckAtMs = nowMs + t.replicaCheckMs;
    }
    if (agentCheckAtMs <= nowMs) {
      // spec §1.3: backups check agent heartbeats every 225 ms; while self-diagnosis runs those
      // checks are ignored (a node hosting a replica is diagnosed as a replica first).
      const paused = diagnosis.running() || sync !== null || phase !== 'serving';
      if (paused) for (const a of agentIds) {
        const seen = heard.get(a);
        if (seen !== undefined) seen.sinceCheck = false;
      }
      if (!isPrimary() && !paused) {
        // spec §1.3: a node that hosts a replica is diagnosed as a replica first. Agent checks
        // (2 × agentCheckMs) can notice a dead node before the replica check (replicaCheckMs)
        // starts the silence diagnosis that pauses them, so a member whose heartbeat is overdue
        // holds back the probe of its node's agent; the agent's missed checks still count, and
        // it is probed at the first check after the replica is heard again or condemned.
        const overdue = new Set<string>();
        for (const r of state.replicas) {
          const seen = heard.get(r);
          const node = state.group.replicaNodes.get(r);
          if (r !== id && node !== undefined && seen?.atMs != null && nowMs - seen.atMs > t.replicaHeartbeatMs) overdue.add(node);
        }
        for (const a of agentIds) {
          const seen = heard.get(a);
          if (seen === undefined || seen.atMs === null) continue;
          if (!seen.sinceCheck) {
            seen.missedChecks++;
            const rec = state.nodes.get(a);
            const probe = probes.get(a);
            // spec §1.3: two consecutive missed checks → probe; the primary probes too. Again on
            // every later check of the same silence while no current probe of this incarnation
            // runs: the node may have joined since, or died after answering an earlier probe.
            const due = probe === undefined || probe.inc !== rec?.inc || staleProbe(probe, nowMs);
            if (seen.missedChecks >= 2 && due && rec !== undefined && rec.joined && !rec.failed && !overdue.has(rec.node)) {
              out.push({ type: 'log', level: 'warn', event: 'agent.silent', fields: { agent: a, missedChecks: 2 } });
              startProbe(a, rec.inc, nowMs, out);
              linkSend(links, state.primary, 0, { type: 'node.suspect', agent: a, inc: rec.inc, unreachable: false }, nowMs, out);
            }
          }
          seen.sinceCheck = false;
        }
      }
      agentCheckAtMs = nowMs + t.agentCheckMs;
    }
    diagnosis.timers(nowMs, out);
    actOnCondemnation(nowMs, out);
    if (confirm.proposals.size > 0 && phase === 'serving' && sync === null) executeInOrder(nowMs, out);
    for (const timer of progressTimers.values()) {
      if (timer.atMs > nowMs) continue;
      // A primary we have no session with has not received the forward, so its progress cannot
      // be judged (PROTOCOL §5.6): daemons start one by one, and a backup up first must not
      // accuse a primary still booting. Past the start grace, one never met is judged all the same.
      if (!peerJudged(links, state.primary, nowMs, startedAtMs, t.startGraceMs)) {
        timer.atMs = nowMs + t.primaryProgressMs;
        continue;
      }
      // Kept (without a deadline) until delivered: forwarded again if the primary changes.
      timer.atMs = Infinity;
      // spec §3.6 G8: the primary never ordered a request this backup forwarded.
      const cg = timer.signed.cg;
      if (!deliveredCG(cg)) {
        suspect(out, state.primary, 'primary.progress', `${cg.payload.type} csn ${cg.csn} of ${cg.client} not ordered by ${state.primary}`);
      }
    }
    probeTimers(nowMs, out);
    // PROTOCOL §8.3: the task clock advances only while a task timer runs, or while the group
    // waits for a replacement replica (its start timeout counts ticks, PROTOCOL §10.6; A24).
    if (!isPrimary() || !clockNeeded()) {
      ticking = false;
    } else if (!ticking) {
      // A timer just started: its first tick is one period away, not now.
      ticking = true;
      tickAtMs = nowMs + t.taskTickMs;
    } else if (tickAtMs <= nowMs) {
      orderInput({ type: 'tick' }, nowMs, out);
      tickAtMs = nowMs + t.taskTickMs;
    }
  }

  /** PROTOCOL §6.1: this replica did not run for `pausedMs` (its host starved it, or a long
   *  computation held it), so the peers' heartbeats, probe replies and orders of that time may
   *  still be unread in its sockets, and the driver runs overdue timers before it reads them. A
   *  silence judgment due now waits until the next step (1 ms on), when they have been read. The
   *  replica asks to run at least every heartbeat period, so a longer gap is a pause. */
  function afterLocalPause(pausedMs: number, nowMs: number, out: CoreEffect[]): void {
    const judgeAtMs = nowMs + 1;
    replicaCheckAtMs = Math.max(replicaCheckAtMs, judgeAtMs);
    agentCheckAtMs = Math.max(agentCheckAtMs, judgeAtMs);
    diagnosis.putOff(judgeAtMs);
    for (const p of probes.values()) if (!p.expired) p.deadlineMs = Math.max(p.deadlineMs, judgeAtMs);
    for (const timer of progressTimers.values()) if (timer.atMs !== Infinity) timer.atMs = Math.max(timer.atMs, judgeAtMs);
    if (pausedMs > t.replicaCheckMs) out.push({ type: 'log', level: 'warn', event: 'replica.paused', fields: { pausedMs } });
  }

  function step(input: CoreInput): CoreEffect[] {
    const out: CoreEffect[] = [];
    const nowMs = input.nowMs;
    const pausedMs = started ? nowMs - lastNowMs : 0;
    lastNowMs = nowMs;
    if (phase === 'retired') return out; // condemned or abandoned: silent until its agent kills it
    if (pausedMs > t.replicaHeartbeatMs) afterLocalPause(pausedMs, nowMs, out);
    if (!started) {
      started = true;
      startedAtMs = nowMs;
      startLinks(links, nowMs, out);
      // A replacement asks every member for the state (PROTOCOL §10.6).
      if (opts.joining !== undefined) {
        const { view, port = 0 } = opts.joining;
        const sig = opts.signer.sign(pack(portClaim(id, view, port)));
        for (const r of state.replicas) sendPtp(r, { type: 'state.request', view, port, sig }, nowMs, out);
      }
      replicaHeartbeatAtMs = nowMs;
      replicaCheckAtMs = nowMs + t.replicaCheckMs;
      agentCheckAtMs = nowMs + t.agentCheckMs;
    }
    switch (input.type) {
      case 'tick':
        break;
      case 'transport.up':
        disconnected.delete(input.peer);
        break;
      case 'transport.down':
        disconnected.add(input.peer);
        break;
      case 'dropped':
        countDrop(drops, input.code);
        break;
      case 'request':
        out.push({ type: 'log', level: 'warn', event: 'request.ignored', fields: { why: 'replicas do not send agent requests' } });
        break;
      case 'restore.load':
      case 'group':
        countDrop(drops, 'UNEXPECTED'); // the watchdog's and the agents' inputs (PROTOCOL §10.9, §10.7)
        break;
      case 'notice':
        linkSend(links, input.to, 0, { type: 'notice', text: input.text }, nowMs, out);
        break;
      case 'frame': {
        const from = input.frame.from;
        for (const item of input.frame.items) {
          switch (item.type) {
            case 'hb':
              if (!onHeartbeat(from, item, nowMs, out)) countDrop(drops, 'REPLAYED');
              break;
            case 'challenge.ask':
            case 'status.query': {
              // Operators, and agents: a starting agent learns the group from it (PROTOCOL §10.7).
              // A replayed query finds its challenge used or stale and costs a lookup (§7).
              if (!operators.has(from) && !agentIds.has(from)) {
                countDrop(drops, 'NOT_A_MEMBER');
              } else if (item.type === 'challenge.ask') {
                out.push({ type: 'send', to: from, item: { type: 'challenge', nonce: item.nonce, challenge: issueChallenge(freshness, nowMs) } });
              } else {
                const verdict = admitChallenge(freshness, from, item.challenge, nowMs);
                if (verdict === 'fresh') out.push({ type: 'send', to: from, item: { type: 'status.reply', nonce: item.nonce, json: JSON.stringify(status(nowMs)) } });
                else countDrop(drops, verdict);
              }
              break;
            }
            case 'probe':
              if (poolIds.has(from)) out.push({ type: 'send', to: from, item: { type: 'probe.reply', nonce: item.nonce } });
              break;
            case 'probe.reply':
              // A replica's answer does not end its silence diagnosis: only a heartbeat does. A
              // replica that answers probes but stopped heartbeating is faulty (a correct one
              // heartbeats every replicaHeartbeatMs), and ending the diagnosis here restarted it
              // at every check, forever, without a verdict (flaw 11c, spec §9.2 A20).
              if (!poolIds.has(from)) onProbeReply(from, item.nonce);
              break;
            case 'op.request':
              onOperatorRequest(from, item.signed, nowMs, out);
              break;
            case 'shutdown.ack':
              if (from === m.scc && stopping !== null && item.rsn === stopping.rsn) stopping.acked = true;
              else countDrop(drops, 'UNEXPECTED');
              break;
            case 'shutdown.notice':
              countDrop(drops, 'UNEXPECTED');
              break;
            case 'status.reply':
            case 'challenge':
            case 'op.reply':
            case 'reset.node':
            case 'diag.report':
            case 'inject':
            case 'inject.reply':
              countDrop(drops, 'UNEXPECTED');
              break;
            default: {
              if (input.raw !== undefined && from === state.primary && item.type === 'ptp' && item.body !== null &&
                (item.body.type === 'wrapper' || item.body.type === 'wrapper.input') && item.body.rsn > state.rsn &&
                input.raw.length <= MAX_EVIDENCE_FRAME_BYTES && orderFrames.size < MAX_ORDER_AHEAD) {
                orderFrames.set(item.body.rsn, input.raw);
              }
              const r = linkReceive(links, from, item, nowMs, out);
              if (r.drop !== null) countDrop(drops, r.drop);
              for (const d of r.deliveries) onDelivery(d, nowMs, out);
            }
          }
        }
        break;
      }
      default: {
        const never: never = input;
        return never;
      }
    }
    timers(nowMs, out);
    flushAcks(links, out, csnMark, nowMs);
    persistJournal(out, nowMs);
    return out;
  }

  /** The task journal (PROTOCOL §10.9), written again whenever the live tasks or the membership
   *  changes (§10.12) change; only by a replica that serves (a replacement has no state before it
   *  installs one). */
  let journalKey: string | null = null;
  function persistJournal(out: CoreEffect[], nowMs: number): void {
    if (phase === 'serving' && journalRsn !== state.rsn) {
      journalRsn = state.rsn;
      const live = liveSubmits(state.cluster);
      // The membership log only grows (PROTOCOL §10.12): its length tells a change.
      const key = `${state.members.length}\u0002${live.map((l) => `${l.task}\u0000${l.submit.nonce}`).join('\u0001')}`;
      if (key !== journalKey) {
        journalKey = key;
        const tasks = live.map((l) => ({ task: l.task, nonce: l.submit.nonce, submit: l.submit.bytes, submitSig: l.submit.sig }));
        const members = state.members.map((c) => ({ nonce: c.nonce, op: c.op, opSig: c.opSig }));
        taskJournal = encodeJournal({ replica: id, rsn: state.rsn, tasks, members });
        out.push({ type: 'persist.tasks', journal: taskJournal });
        journalSentAtMs = -Infinity;
      }
    }
    // The watchdog keeps a copy too (PROTOCOL §10.9): a cluster of several hosts shares no disk.
    if (phase !== 'serving' || taskJournal === null || nowMs - journalSentAtMs < JOURNAL_RESEND_MS) return;
    journalSentAtMs = nowMs;
    if (taskJournal.length > MAX_JOURNAL_ITEM_BYTES) {
      out.push({ type: 'log', level: 'error', event: 'tasks.journal.too-large', fields: { bytes: taskJournal.length, max: MAX_JOURNAL_ITEM_BYTES } });
      return;
    }
    out.push({ type: 'send', to: m.scc, item: { type: 'tasks.journal', inc: links.inc, journal: taskJournal } });
  }
  let journalRsn = -1;
  /** The latest journal, and when it last went to the watchdog. */
  let taskJournal: Uint8Array | null = null;
  let journalSentAtMs = -Infinity;

  function nextWakeMs(): number | null {
    if (phase === 'retired') return null;
    if (!started) return 0;
    let next = Math.min(replicaHeartbeatAtMs, replicaCheckAtMs, agentCheckAtMs);
    const l = linkNextWakeMs(links);
    if (l !== null) next = Math.min(next, l);
    if (stopping !== null && !stopping.done) next = Math.min(next, stopping.acked ? stopping.sinceMs + SHUTDOWN_LINGER_MAX_MS : stopping.noticeAtMs + SHUTDOWN_NOTICE_MS);
    for (const timer of progressTimers.values()) next = Math.min(next, timer.atMs);
    const d = diagnosis.nextWakeMs();
    if (d !== null) next = Math.min(next, d);
    for (const p of probes.values()) if (!p.expired) next = Math.min(next, p.deadlineMs);
    if (isPrimary() && clockNeeded()) next = Math.min(next, ticking ? tickAtMs : 0);
    const waiting = phase === 'serving' && sync === null ? confirm.proposals.get(state.rsn + 1) : undefined;
    // A disputed RSN waits for self-diagnosis (PROTOCOL §10.2), whose evidence has a deadline.
    if (waiting !== undefined && !confirm.disputed.has(state.rsn + 1)) next = Math.min(next, waiting.atMs + t.orderConfirmMs);
    for (const d of disputes.values()) next = Math.min(next, d.deadlineMs);
    return next;
  }

  return {
    id, step, nextWakeMs, status, digestHex: () => toHex(digest()), rsn: () => state.rsn, state: () => state, clusterView: view,
    phase: () => (sync !== null && phase === 'serving' ? 'syncing' : phase),
    forgetDigest: () => {
      digestCache = null;
    },
  };
}
