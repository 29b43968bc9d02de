// A manager replica's state, as one typed record (docs/PROTOCOL.md §5, §10), and the small
// judgements every part of the replica makes on it. `createReplicaRecord` makes it; the parts
// are pure functions that take it:
//   failure-detector.ts  heartbeats, peer health, probes, node suspicion, the tick-rate check
//   primary.ts           the primary's order (RSNs, CSN hold-back, the task clock)
//   backup.ts            the backups' confirmation of that order, evidence, disputes, G8
//   execution.ts         executing an ordered input and sending what it produced
//   group-change.ts      views, condemnation, the survivors' sync, state transfer
//   report.ts            status, the event journal, the task journal, the shutdown
// and ../replica.ts routes each input to one of them. The parts call each other as the protocol
// does (an executed input may change the view, which orders the requests forwarded meanwhile),
// so their imports form cycles inside this directory; nothing runs when a module loads.
import { type DropCode } from '../../base/result.ts';
import { accuse, createDiagnosis, reportInitiation, type Diagnosis } from '../diagnosis.ts';
import { createFreshness, type Freshness } from '../freshness.ts';
import { createStateTransfer, type StateTransfer } from '../state-transfer.ts';
import { needsTicks } from '../cluster-state.ts';
import { createLinks, linkSend, linkOweGroupAck, type Links } from '../link.ts';
import type { CoreEffect, Membership, SuspectReason } from '../node.ts';
import type { Timing } from '../constants.ts';
import { createOrderConfirm, type Ordered } from '../order-confirm.ts';
import { MAX_DELIVERED_LOG } from '../constants.ts';
import { digestState, expectedCsn, initialState, isOperatorRequest, type ReplicatedState } from '../replicated-state.ts';
import { pack } from '../wire/frame.ts';
import { groupInput, portClaim, type AccuseReason, type GroupInput, type PtpPayload, type SignedCG } from '../wire/messages.ts';
import { createDetector, type Detector } from './failure-detector.ts';
import { createPrimaryOrder, type PrimaryOrder } from './primary.ts';
import { createBackupConfirm, type BackupConfirm } from './backup.ts';
import { createGroupChange, type GroupChange } from './group-change.ts';
import { createReport, type Report } from './report.ts';
import type { Hash, ProcessId, Signer, Verifier } from '../ports.ts';
import type { DaemonReport } from '../status.ts';

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

/** A replica's whole state. The fields above the parts are fixed at creation (the sets grow
 *  when nodes are added, PROTOCOL §10.12); `state` is the replicated state, the rest is this
 *  replica's own. */
export type Replica = {
  readonly id: ProcessId;
  readonly opts: ReplicaOptions;
  readonly m: Membership;
  readonly t: Timing;
  readonly hash: ReplicaOptions['hash'];
  /** Every agent the replica knows (cluster.json's and the added nodes'). */
  readonly agentIds: Set<ProcessId>;
  /** Every id that may ever be a replica (initial and spares, the added nodes' spares once the
   *  state has them): their frames are replica frames. */
  readonly poolIds: Set<ProcessId>;
  readonly operators: ReadonlySet<ProcessId>;
  /** Clients whose requests are identified by nonce, not CSN (PROTOCOL §8.1): the operators,
   *  and the watchdog for its restores after a cluster reset (§10.9). */
  readonly nonceClients: ReadonlySet<ProcessId>;
  readonly state: ReplicatedState;
  readonly links: Links;
  readonly diagnosis: Diagnosis;
  readonly transfer: StateTransfer;
  /** Status goes to fresh queries only (PROTOCOL §7): the challenges this incarnation issued. */
  readonly freshness: Freshness;
  /** `installing`: a replacement waiting for the state; `retired`: no longer a member. */
  phase: 'serving' | 'installing' | 'retired';
  started: boolean;
  startedAtMs: number;
  /** The time of the last step, the clock a suspicion raised outside a step's arguments reads. */
  lastNowMs: number;
  /** Log L of delivered requests (spec §3.3), bounded: [rsn, ordered input]. */
  readonly deliveredLog: [number, Ordered][];
  /** Digests of the last ordered (primary) or executed (backup) RSNs: a confirmation that
   *  differs late, or a backup's claim about one, is judged against them (PROTOCOL §10.2). */
  readonly executedDigests: Map<number, Uint8Array>;
  /** Nodes declared failed that the watchdog is asked to reset, re-sent with every heartbeat to
   *  it until the node rejoins (a lost request would leave the node dead). */
  readonly resets: Map<string, { rsn: number; address: string }>;
  readonly drops: Partial<Record<DropCode, number>>;
  suspicions: number;
  digestCache: { rsn: number; gssn: number; digest: Uint8Array } | null;
  readonly detector: Detector;
  readonly primary: PrimaryOrder;
  readonly backup: BackupConfirm;
  readonly change: GroupChange;
  readonly report: Report;
};

export function createReplicaRecord(opts: ReplicaOptions): Replica {
  const { id, membership: m } = opts;
  const t = m.timing;
  const state = initialState(m, t);
  if (opts.joining !== undefined) {
    state.replicas = [...opts.joining.replicas];
    state.primary = opts.joining.primary;
  }
  const agentIds = new Set(m.agents.map((a) => a.id));
  const poolIds = new Set([...m.replicas, ...m.spareReplicas]);
  const operators = new Set(m.operators);
  const links = createLinks(id, opts.inc, t, [...state.replicas, ...agentIds]);
  const diagnosis = createDiagnosis({
    id, inc: opts.inc, signer: opts.signer, timing: t, scc: m.scc, view: () => state.group.view, members: () => state.replicas,
    send: (to, payload, nowMs, out) => linkSend(links, to, 0, payload, nowMs, out),
  });
  return {
    id, opts, m, t, hash: opts.hash, agentIds, poolIds, operators, nonceClients: new Set([...m.operators, m.scc]),
    state, links, diagnosis, transfer: createStateTransfer(opts.hash, () => state.replicas), freshness: createFreshness(opts.inc),
    phase: opts.joining === undefined ? 'serving' : 'installing', started: false, startedAtMs: 0, lastNowMs: 0,
    deliveredLog: [], executedDigests: new Map(), resets: new Map(), drops: {}, suspicions: 0, digestCache: null,
    detector: createDetector(id, [...poolIds, ...agentIds, ...operators]),
    primary: createPrimaryOrder(),
    backup: createBackupConfirm(),
    change: createGroupChange(),
    report: createReport(),
  };
}

export const isPrimary = (r: Replica): boolean => r.state.primary === r.id;
export const isMember = (r: Replica, x: ProcessId): boolean => r.state.replicas.includes(x);
export const backups = (r: Replica): ProcessId[] => r.state.replicas.filter((x) => x !== r.state.primary);
export const otherBackups = (r: Replica): ProcessId[] => backups(r).filter((b) => b !== r.id);

/** PROTOCOL §8.3, §10.6: the clock runs while a task timer runs or a replacement is awaited. */
export const clockNeeded = (r: Replica): boolean =>
  needsTicks(r.state.cluster) || (r.state.group.recovery !== null && r.state.group.recovery.node !== null);

/** A reliable lane-0 message to another replica. */
export function sendPtp(r: Replica, to: ProcessId, payload: PtpPayload, nowMs: number, out: CoreEffect[]): void {
  linkSend(r.links, to, 0, payload, nowMs, out);
}

/** G9's empty GROUP-MSG-GC: a lane-1 `gack`, sent once at the end of the step. */
export function groupAck(r: Replica, client: ProcessId, nowMs: number): void {
  linkOweGroupAck(r.links, client, nowMs);
}

/** The CSN mark a gack carries: the CSNs of the incarnation we talk to, never a
 *  predecessor's (PROTOCOL §5.7). */
export function csnMark(r: Replica, peer: ProcessId): number {
  const p = r.links.peers.get(peer);
  return p !== undefined && r.state.clientInc.get(peer) === p.peerInc ? (r.state.csnReceived.get(peer) ?? 0) : 0;
}

/** The replicated state's digest, computed again only when the state moved on. */
export function digest(r: Replica): Uint8Array {
  let c = r.digestCache;
  if (c === null || c.rsn !== r.state.rsn || c.gssn !== r.state.gssn) {
    c = { rsn: r.state.rsn, gssn: r.state.gssn, digest: digestState(r.state, r.hash) };
    r.digestCache = c;
  }
  return c.digest;
}

/** Suspicions that are, from a correct replica, a sound judgement about the one it names
 *  (PROTOCOL §10.2): they become accusations. The others are reported and looked into. */
const ACCUSING: Partial<Record<SuspectReason, AccuseReason>> = {
  'rsn.gap': 'rsn.gap', 'primary.progress': 'primary.progress', 'clock.rate': 'clock.rate',
};

export function suspect(r: Replica, out: CoreEffect[], target: ProcessId | null, reason: SuspectReason, detail: string): void {
  // Shutting down, the group stops on purpose: nobody is suspected of it (PROTOCOL §10.11).
  if (r.report.stopping !== null) return;
  r.suspicions++;
  out.push({ type: 'suspect', target, reason, detail });
  out.push({ type: 'log', level: 'warn', event: 'replica.suspect', fields: { target, reason, detail, rsn: r.state.rsn } });
  const accusation = ACCUSING[reason];
  if (accusation !== undefined && target !== null) accuse(r.diagnosis, target, accusation, detail, r.lastNowMs, out);
  else if (reason === 'digest.mismatch' || reason === 'error.report') {
    reportInitiation(r.diagnosis, reason === 'error.report' ? 'agent.reports' : 'equivocation', target, detail, r.lastNowMs, out);
  }
}

/** The key of PrimaryProgressTimeout(c, csn) (spec §3.6 G8): operator requests by nonce. */
export const progressKey = (cg: SignedCG['cg']): string =>
  isOperatorRequest(cg.payload) ? `${cg.client}\u0000${cg.payload.nonce}` : `${cg.client}\u0000${cg.inc}\u0000${cg.csn}`;

/** Has the group already delivered this request (or one of a later incarnation)? Operator
 *  requests are identified by their nonce (PROTOCOL §8.1). */
export function deliveredCG(r: Replica, cg: SignedCG['cg']): boolean {
  if (r.nonceClients.has(cg.client)) return isOperatorRequest(cg.payload) && r.state.outcomes.has(cg.payload.nonce);
  const expected = expectedCsn(r.state, cg.client, cg.inc);
  return expected === null || cg.csn < expected;
}

/** Log L (spec §3.3), bounded by MAX_DELIVERED_LOG. */
export function logDelivered(r: Replica, o: Ordered): void {
  r.deliveredLog.push([r.state.rsn, o]);
  if (r.deliveredLog.length > MAX_DELIVERED_LOG) r.deliveredLog.shift();
}

/** The digest a backup confirms for an ordered item (PROTOCOL §5.8): a group input's is taken
 *  over a one-byte tag before its canonical encoding, distinct from any CG's bytes. */
export const orderDigest = (r: Replica, o: Ordered): Uint8Array =>
  (o.type === 'cg' ? r.hash(o.signed.bytes) : r.hash(pack(['group-input', groupInput.enc(o.input)])));

/** A `replica.add` carries the port its replacement signed (PROTOCOL §10.6); other inputs pass. */
export const portSigned = (r: Replica, input: GroupInput): boolean =>
  input.type !== 'replica.add' || r.opts.verifier.verify(input.id, pack(portClaim(input.id, r.state.group.view, input.port)), input.sig);

/** A new primary's order (or a replacement's) starts after the executed RSN: whatever the
 *  old one proposed beyond it is void, with its frames and the evidence about them. */
export function resetOrder(r: Replica): void {
  const b = r.backup;
  b.confirm = createOrderConfirm();
  b.confirm.proposedRsn = r.state.rsn;
  b.orderFrames.clear();
  b.evidenceWaiting.clear();
  b.confirmClaims.clear();
  b.disputes.clear();
  b.evidenceSent.clear();
}
