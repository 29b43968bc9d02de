// The state of a node agent's core (src/core/agent.ts), as one record that createAgentState
// makes and the agent's verbs take (STYLE.md rule 1, as src/core/link.ts does): the group as the
// agent knows it, its links to the replicas, the group message buffer it votes in (spec §3.5
// GMB), the requests it has sent and not yet seen acknowledged by f+1 replicas (spec §3.6 G6),
// the error reports it is gathering, and its heartbeat schedule. Also the small reads every part
// of the agent makes of it. Pure: no clock, no I/O.
import { PRIMARY_RETRIES_BEFORE_FALLBACK, type Timing } from './constants.ts';
import { createLinks, type Links } from './link.ts';
import type { Membership } from './node.ts';
import type { ProcessId, Signer } from './ports.ts';
import { assert, type DropCode } from '../base/result.ts';
import type { ErrorReportKind, GroupMsgGC, SignedCG } from './wire/messages.ts';

export type AgentOptions = {
  id: ProcessId;
  membership: Membership;
  inc: number;
  slots: number;
  /** A predecessor incarnation left processes on record: ask the group which still belong to the
   *  node (PROTOCOL §8.6). */
  resync?: boolean;
  /** Signs this agent's requests so a replica can relay but never forge them (spec §1.3). */
  signer: Signer;
  /** The group as two replicas reported it when this incarnation started (PROTOCOL §10.7): a
   *  new incarnation begins from it, not from cluster.json's initial three, since after two
   *  replacements no two of those are members and no command could ever reach two matching. */
  group?: { view: number; primary: ProcessId; replicas: readonly ProcessId[] };
};

/** The copies of one GSSN the agent has admitted (spec §3.5 GMB). */
export type Entry = {
  gssn: number;
  /** The replica whose copy opened the entry (its flow-control quota pays for it). */
  opener: ProcessId;
  /** Content key of each replica's copy. */
  copies: Map<ProcessId, string>;
  /** Distinct contents with how many replicas sent each. */
  contents: Map<string, { gc: GroupMsgGC; count: number }>;
  delivered: boolean;
  /** Copies from every replica arrived. */
  complete: boolean;
  firings: number;
  timerAtMs: number | null;
};

/** A request not yet acknowledged by f+1 replicas (spec §3.6 G6, PROTOCOL §5.6). */
export type Pending = {
  signed: SignedCG;
  sentAtMs: number;
  /** Sent to the backups too, after the primary did not acknowledge it in time (spec §3.4 P6). */
  fellBack: boolean;
  /** Its sequence number on the lane to the primary, or null if the lane did not take it. */
  primarySeq: number | null;
  /** When it goes to the backups again, once it fell back. */
  retryAtMs: number;
};

/** Error reports gathered since the last one sent, of one kind (PROTOCOL §5.3). */
export type ReportAccumulator = { gssn: number; count: number; suspects: Set<ProcessId> };

export type AgentState = {
  id: ProcessId;
  inc: number;
  slots: number;
  resync: boolean;
  signer: Signer;
  timing: Timing;
  links: Links;
  /** The group as this agent knows it: changed only by a `replicas` command delivered on two
   *  matching copies (PROTOCOL §10.7). */
  replicas: ProcessId[];
  primary: ProcessId;
  view: number;
  started: boolean;
  startedAtMs: number;
  terminated: string | null;
  csnSent: number;
  csnAcked: number;
  csnAckBy: Map<ProcessId, number>;
  gssnDelivered: number;
  /** Highest GSSN through which every delivered message is complete or purged: the only
   *  mark the agent ever acknowledges (flaw 1 fix, PROTOCOL §5.3). */
  gssnAcked: number;
  gmb: Map<number, Entry>;
  /** Delivered GSSNs, in order, waiting for their last copies. */
  awaitingCompletion: number[];
  finished: Set<number>;
  /** Contents with f+1 matching copies, by the prevGssn they chain from. */
  ready: Map<number, Entry>;
  errorReports: number;
  /** Requests not yet acknowledged by f+1 replicas, by CSN (spec §3.6 G6, PROTOCOL §5.6). */
  pending: Map<number, Pending>;
  /** Smoothed time for a request to be acknowledged by f+1 replicas (ms), or null. */
  ackTimeMs: number | null;
  /** The earliest deadline of the pending requests (src/core/agent-requests.ts requestsDue),
   *  and the key of what it was computed from. */
  requestsDueAtMs: number;
  requestsDueKey: string;
  /** The earliest ReplicaTimeout of the GMB entries (src/core/agent-gmb.ts). */
  replicaTimeoutsDueAtMs: number;
  /** Error reports gathered since the last one sent, per kind (PROTOCOL §5.3). */
  reports: Map<ErrorReportKind, ReportAccumulator>;
  reportAtMs: number;
  drops: Partial<Record<DropCode, number>>;
  heartbeatCounter: number;
  heartbeatAtMs: number;
  nextBackup: number;
  /** Members that joined the group, with the GSSN of the `replicas` command that announced them
   *  (expectedFor). */
  joinedAtGssn: Map<ProcessId, number>;
  /** Spares of nodes added at run time whose keys this agent has handed to its driver. */
  learnt: Set<ProcessId>;
  /** Undelivered GMB entries each replica opened (its first copy created them). A removed
   *  member's count stays while its entries do: a retired spare id can join again (PROTOCOL
   *  §10.6), and its old entries still take room. */
  opened: Map<ProcessId, number>;
};

export function createAgentState(opts: AgentOptions): AgentState {
  const m = opts.membership;
  const known = opts.group !== undefined && opts.group.replicas.includes(opts.group.primary) ? opts.group : null;
  const replicas = [...(known?.replicas ?? m.replicas)];
  const primary = known?.primary ?? replicas[0];
  assert(primary !== undefined && replicas.includes(primary), 'the group an agent starts from has its primary among its members');
  return {
    id: opts.id, inc: opts.inc, slots: opts.slots, resync: opts.resync ?? false, signer: opts.signer, timing: m.timing,
    links: createLinks(opts.id, opts.inc, m.timing, replicas),
    replicas, primary, view: known?.view ?? 0,
    started: false, startedAtMs: 0, terminated: null,
    csnSent: 0, csnAcked: 0, csnAckBy: new Map(),
    gssnDelivered: 0, gssnAcked: 0, gmb: new Map(), awaitingCompletion: [], finished: new Set(), ready: new Map(),
    errorReports: 0, pending: new Map(), ackTimeMs: null,
    requestsDueAtMs: Infinity, requestsDueKey: '', replicaTimeoutsDueAtMs: Infinity,
    reports: new Map(), reportAtMs: 0, drops: {},
    heartbeatCounter: 0, heartbeatAtMs: 0, nextBackup: 0,
    joinedAtGssn: new Map(), learnt: new Set(), opened: new Map(),
  };
}

export const backups = (s: AgentState): ProcessId[] => s.replicas.filter((r) => r !== s.primary);

/** Members that owe a copy of `gssn`: a replica that joined the group owes only copies after
 *  the `replicas` command that announced it (PROTOCOL §10.7). */
export const expectedFor = (s: AgentState, gssn: number): ProcessId[] => s.replicas.filter((r) => (s.joinedAtGssn.get(r) ?? 0) < gssn);

/** The content most replicas sent for an entry, or null before any copy. */
export function bestContent(e: Entry): { key: string; gc: GroupMsgGC; count: number } | null {
  let best: { key: string; gc: GroupMsgGC; count: number } | null = null;
  for (const [key, c] of e.contents) if (best === null || c.count > best.count) best = { key, ...c };
  return best;
}

/** spec §3.4 P6: how long a request the primary has not even received waits before it goes to
 *  the backups: three retransmissions (the lane to the primary keeps a steady period until then). */
export const unreceivedFallbackMs = (s: AgentState): number => (1 + PRIMARY_RETRIES_BEFORE_FALLBACK) * s.timing.retransmitMs;
