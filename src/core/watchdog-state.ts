// The watchdog's state (spec §1.6 and §2.3; PROTOCOL §6, §8.4, §10.8): its limits, the status
// it reports, and `WatchdogState`, the one typed record every watchdog verb takes
// (watchdog-liveness.ts, watchdog-resets.ts, watchdog-restore.ts, watchdog.ts). One function,
// createWatchdogState, creates it; the small helpers here are shared by those verbs.
import { createFreshness, type Freshness } from './freshness.ts';
import type { CoreEffect, Membership } from './node.ts';
import type { ProcessId, Signer, Verifier } from './ports.ts';
import type { DropCode } from '../base/result.ts';
import type { DaemonReport, PeerHealth } from './status.ts';
import type { MembershipChanges } from './task-journal.ts';
import type { AccuseReason, AddedReplica, Role, SignedCG } from './wire/messages.ts';

/** A heartbeat older than this many periods makes its replica `late`, older than
 *  WATCHDOG_SILENT_PERIODS `silent`. Two periods tolerate one lost heartbeat without alarm;
 *  four match the spec §1.7 node-failure detection window (two missed checks). A heartbeat
 *  counts towards rule 2 only while its replica is `healthy`. */
export const WATCHDOG_LATE_PERIODS = 2;
export const WATCHDOG_SILENT_PERIODS = 4;
/** The watchdog's own event loop can stall on a loaded host: heartbeats then wait unread in its
 *  sockets while its clock runs on, and judging the silence before reading them would reset a
 *  healthy cluster. While armed, the core asks to be woken every heartbeat period, so an input
 *  that comes more than this many periods after the previous one means the watchdog itself was
 *  not running. It then reads what is queued before it judges: no reset within
 *  WATCHDOG_LATE_PERIODS periods of the stall's end. */
export const WATCHDOG_STALL_PERIODS = 4;
/** Node resets, self-diagnosis reports and cluster resets remembered for status (and, for node
 *  resets, to ignore re-sent requests): enough to read back a whole incident, bounded. */
export const MAX_RESET_HISTORY = 256;
export const MAX_DIAGNOSIS_HISTORY = 256;
export const MAX_CLUSTER_RESET_HISTORY = 256;
/** Counted self-diagnosis initiations kept for rule 3. The per-sender rate limit already bounds
 *  them (window / diagnosisTimeoutMs per replica); this caps a misconfigured timing too. */
export const MAX_COUNTED_INITIATIONS = 1024;
/** A restore not yet confirmed by two replicas is sent again this often (as the operator CLI
 *  resends its requests, PROTOCOL §8.1). */
export const RESTORE_RESEND_MS = 200;
/** Restores and refused journal entries remembered for status. */
export const MAX_RESTORE_HISTORY = 1024;
/** Pending reset votes one replica may hold for nodes cluster.json does not list (added at run
 *  time, PROTOCOL §10.12): more than a run of simultaneous node failures, few enough that a
 *  faulty replica inventing nodes cannot grow the table. */
export const MAX_ADDED_NODE_VOTES = 16;
/** After it takes a shutdown (PROTOCOL §10.11) the watchdog stays this long, acknowledging the
 *  notices of replicas slower than the first two, before it exits. */
export const SCC_SHUTDOWN_LINGER_MS = 1_000;

/** What the watchdog knows of one replica. */
export type WatchdogReplicaView = {
  id: ProcessId;
  /** Incarnation and counter of the last accepted heartbeat (replays must increase them). */
  inc: number | null;
  counter: number | null;
  lastHeartbeatAgeMs: number | null;
  health: PeerHealth;
  role: Role | null;
  rsn: number | null;
  gssn: number | null;
  /** The view of the group the replica reported in its last heartbeat (rule 2). */
  view: number | null;
  /** SHA-256 state digest from the last heartbeat, hex. */
  digest: string | null;
  heartbeats: number;
  /** Heartbeats dropped because (inc, counter) did not increase. */
  replays: number;
  /** Fresh self-diagnosis reports accepted from this replica (rule 3). */
  diagnosisReports: number;
};

/** One accepted self-diagnosis report. `counted` is false when rule 3's per-sender rate limit
 *  (or a report from before the last cluster reset) kept it out of the count. */
export type DiagnosisRecord = { atMs: number; from: ProcessId; view: number; reason: AccuseReason; target: string; counted: boolean };
export type ClusterResetRecord = { atMs: number; rule: 'heartbeats' | 'diagnosis'; reason: string };

export type WatchdogStatus = {
  id: ProcessId;
  role: 'watchdog';
  inc: number;
  /** The initial replicas, then every spare heard from, in membership order, then the added
   *  nodes' spares learnt at run time. */
  replicas: WatchdogReplicaView[];
  /** Items ignored because the watchdog does not take them from their sender. */
  ignored: number;
  /** Node resets ordered by the group (spec §1.6 rule 1), oldest first, bounded. */
  resets: { node: string; rsn: number; requestedBy: ProcessId[]; atMs: number }[];
  /** Dropped frames (by the shell) and items (replays, non-members), by reason. */
  drops: Record<string, number>;
  /** Rule 2 is armed: two replicas have been heard consistently since the last cluster reset. */
  armed: boolean;
  /** When rule 2 resets the cluster unless two consistent heartbeats come first; null if disarmed. */
  silenceDeadlineMs: number | null;
  /** Initiations counting towards rule 3 now (each replica's share capped, see below). */
  diagnosisInWindow: number;
  /** Self-diagnosis reports, oldest first, bounded ("self-diagnosis history"). */
  diagnosisReports: DiagnosisRecord[];
  /** Cluster resets ordered (rules 2 and 3), oldest first, bounded. */
  clusterResets: ClusterResetRecord[];
  /** Cluster resets ordered by this incarnation, unbounded: a booting node of a cluster of
   *  several hosts compares it with the count it saw when it last started its initial replica
   *  (cli/node-run.ts): a replica is started again after a cluster reset, never after a reset
   *  of its node alone, when the group has gone on without it (PROTOCOL §10.10). */
  clusterResetCount: number;
  /** The operator's shutdown the watchdog took (PROTOCOL §10.11), or null. */
  shutdown: { rsn: number; by: ProcessId[]; atMs: number } | null;
  /** The replicas' task journals the watchdog keeps for a cluster reset (PROTOCOL §10.9): the
   *  latest of each replica since the last reset, by incarnation then RSN. */
  journalsKept: { replica: ProcessId; inc: number; rsn: number; tasks: number }[];
  /** Tasks being restored after a cluster reset (PROTOCOL §10.9), by their old id. */
  restoresPending: { task: string; nonce: string }[];
  /** Restores two replicas confirmed (`text`: the restored task's id, or why it was refused),
   *  and journal entries or journals refused, oldest first, bounded. */
  restores: RestoreRecord[];
  /** What its daemon could not write to disk, and its restarts; absent from the simulator. */
  daemon?: DaemonReport;
};

export type RestoreRecord =
  | { atMs: number; kind: 'restored'; task: string; ok: boolean; text: string }
  | { atMs: number; kind: 'refused'; source: string; task: string | null; code: string; detail: string };

export type ReplicaRecord = {
  inc: number; counter: number; lastAtMs: number; role: Role; rsn: number; gssn: number; view: number; digest: string; heartbeats: number;
};

export type ReportSequence = { inc: number; counter: number; reports: number };

/** `signer` signs the watchdog's restores; `verifier` checks the operator signatures in the task
 *  journals (PROTOCOL §10.9). */
export type WatchdogOptions = {
  id: ProcessId; membership: Membership; inc: number; signer: Signer; verifier: Verifier;
  /** What the daemon says of itself (its disk, its supervisor), added to the status as read
   *  (issue 14 item 4): nothing the watchdog decides depends on it. */
  daemon?: () => DaemonReport;
};

export const newer = (inc: number, counter: number, last: { inc: number; counter: number } | undefined): boolean =>
  last === undefined || inc > last.inc || (inc === last.inc && counter > last.counter);

/** Everything the watchdog knows: its configuration (read only) and what it has heard. */
export type WatchdogState = {
  readonly id: ProcessId;
  readonly inc: number;
  readonly membership: Membership;
  readonly signer: Signer;
  readonly verifier: Verifier;
  readonly daemon: (() => DaemonReport) | undefined;
  /** membership.timing.sccHeartbeatMs: the replicas' heartbeat period. */
  readonly periodMs: number;
  readonly watchdogSilenceMs: number;
  readonly diagnosisWindowMs: number;
  readonly diagnosisThreshold: number;
  readonly diagnosisTimeoutMs: number;
  /** Spares become replicas when the group replaces one (PROTOCOL §10.6): they heartbeat, report
   *  and vote for node resets like the initial three. Each signs with its own key, so one faulty
   *  node still speaks for one replica only. */
  replicaIds: Set<ProcessId>;
  /** Spares of nodes added at run time, learnt from two replicas (PROTOCOL §10.12), in order. */
  learnt: ProcessId[];
  /** Each replica's latest `replica.keys`: bounded by the replicas, at MAX_REPLICAS entries each. */
  keyClaims: Map<ProcessId, AddedReplica[]>;
  readonly operatorIds: Set<ProcessId>;
  /** Agents may ask for the status too: a booting node reads clusterResetCount (see above). */
  readonly statusClients: Set<ProcessId>;
  readonly freshness: Freshness;
  /** A heartbeat at most this old is fresh (WATCHDOG_LATE_PERIODS periods). */
  readonly freshMs: number;
  records: Map<ProcessId, ReplicaRecord>;
  replays: Map<ProcessId, number>;
  reportSequences: Map<ProcessId, ReportSequence>;
  drops: Record<string, number>;
  ignored: number;
  /** Reset requests per (node, rsn): the replicas that asked. Two distinct replicas make a
   *  command (f + 1: one faulty replica cannot reset a node on its own). */
  resetVotes: Map<string, Set<ProcessId>>;
  resets: WatchdogStatus['resets'];
  /** The (node, RSN) resets ordered since the last cluster reset, to ignore re-sent requests. */
  ordered: Set<string>;
  readonly knownNodes: Set<string>;
  /** Rule 2 state. `consistentPastMs`: the latest moment, up to the last heartbeat, at which the
   *  records then current showed two consistent fresh heartbeats; the records now current may
   *  extend it (consistentUntilMs). */
  armed: boolean;
  consistentPastMs: number | null;
  /** Rule 3 state: counted initiations in arrival order, and each sender's last counted one. */
  counted: { atMs: number; from: ProcessId }[];
  lastCountedAtMs: Map<ProcessId, number>;
  /** A reset needs more than the threshold; one replica's initiations count at most this many,
   *  so a reset needs at least two replicas and the second must bring threshold + 1 − cap. */
  readonly perSenderCap: number;
  /** Per replica, the highest incarnation seen before the last cluster reset: its messages are
   *  the old group's. Only the restarted group (new incarnations) re-arms rule 2 or counts for
   *  rule 3, so a group still going down cannot order a second reset of a cluster restarting. */
  preResetInc: Map<ProcessId, number>;
  diagnoses: DiagnosisRecord[];
  clusterResets: ClusterResetRecord[];
  clusterResetCount: number;
  /** PROTOCOL §10.11: the shutdown two replicas noticed, and the replicas voting for one. After
   *  it the watchdog resets nothing, acknowledges notices for SCC_SHUTDOWN_LINGER_MS, and exits. */
  shutDown: { rsn: number; by: ProcessId[]; atMs: number; exited: boolean } | null;
  shutdownVotes: Map<ProcessId, number>;
  /** The latest task journal of each replica since the last cluster reset (onJournal). */
  journalsKept: Map<ProcessId, { inc: number; rsn: number; tasks: number; data: Uint8Array }>;
  /** Restores not yet confirmed, by nonce: what is restored (a task's old id, or `node.add n5`),
   *  whether it is a membership change, the watchdog's signed request, and the replicas'
   *  outcomes so far. */
  restoring: Map<string, { label: string; member: boolean; signed: SignedCG; replies: Map<ProcessId, string> }>;
  /** The membership the pending membership restores bring back, until two replicas confirmed
   *  them all (then the restarted group journals it itself); null when none is pending. */
  restoringMembership: MembershipChanges | null;
  restores: RestoreRecord[];
  /** When the pending restores are sent next. */
  restoreAtMs: number;
  /** When the last input was taken, and until when a stall of the watchdog's own (see
   *  WATCHDOG_STALL_PERIODS) holds back rule 2. */
  lastInputMs: number | null;
  stallGraceUntilMs: number;
};

export function createWatchdogState(opts: WatchdogOptions): WatchdogState {
  const { id, membership, inc } = opts;
  const { sccHeartbeatMs: periodMs, watchdogSilenceMs, diagnosisWindowMs, diagnosisThreshold, diagnosisTimeoutMs } = membership.timing;
  return {
    id, inc, membership, signer: opts.signer, verifier: opts.verifier, daemon: opts.daemon,
    periodMs, watchdogSilenceMs, diagnosisWindowMs, diagnosisThreshold, diagnosisTimeoutMs,
    replicaIds: new Set([...membership.replicas, ...membership.spareReplicas]),
    learnt: [],
    keyClaims: new Map(),
    operatorIds: new Set(membership.operators),
    statusClients: new Set([...membership.operators, ...membership.agents.map((a) => a.id)]),
    freshness: createFreshness(inc),
    freshMs: WATCHDOG_LATE_PERIODS * periodMs,
    records: new Map(),
    replays: new Map(),
    reportSequences: new Map(),
    drops: {},
    ignored: 0,
    resetVotes: new Map(),
    resets: [],
    ordered: new Set(),
    knownNodes: new Set(membership.agents.map((a) => a.node)),
    armed: false,
    consistentPastMs: null,
    counted: [],
    lastCountedAtMs: new Map(),
    perSenderCap: Math.floor(diagnosisThreshold / 2) + 1,
    preResetInc: new Map(),
    diagnoses: [],
    clusterResets: [],
    clusterResetCount: 0,
    shutDown: null,
    shutdownVotes: new Map(),
    journalsKept: new Map(),
    restoring: new Map(),
    restoringMembership: null,
    restores: [],
    restoreAtMs: 0,
    lastInputMs: null,
    stallGraceUntilMs: -Infinity,
  };
}

/** Whether an item of incarnation `itemInc` is the restarted group's (see preResetInc). */
export const sinceReset = (s: WatchdogState, from: ProcessId, itemInc: number): boolean => itemInc > (s.preResetInc.get(from) ?? -1);

/** Appends to a bounded history, dropping the oldest past `max`. */
export const push = <T>(list: T[], value: T, max: number): void => {
  list.push(value);
  if (list.length > max) list.shift();
};

/** An item the watchdog does not take from this sender: counted, never acted on. */
export function ignore(s: WatchdogState, code: DropCode): void {
  s.ignored++;
  s.drops[code] = (s.drops[code] ?? 0) + 1;
}

export function replayed(s: WatchdogState, event: string, from: ProcessId, item: { inc: number; counter: number }, out: CoreEffect[]): void {
  s.drops['REPLAYED'] = (s.drops['REPLAYED'] ?? 0) + 1;
  out.push({ type: 'log', level: 'debug', event, fields: { from, inc: item.inc, counter: item.counter } });
}
