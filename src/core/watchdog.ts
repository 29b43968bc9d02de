// The watchdog core (the paper's spacecraft control computer, spec §1.6 and §2.3; PROTOCOL §6,
// §8.4, §10.8): a pure, deterministic step that records the replicas' heartbeats and
// self-diagnosis reports, orders the node resets the group commands (rule 1), resets the whole
// cluster when consistent heartbeats from two replicas stop (rule 2) or self-diagnosis repeats
// too often (rule 3), and answers operator status queries. It is kept tiny and never sends on
// the routine path (spec §1.6: "must not be burdened with routine operation").
import { QUORUM } from './constants.ts';
import { admitChallenge, createFreshness, issueChallenge } from './freshness.ts';
import { toHex } from '../base/hex.ts';
import type { Core, CoreEffect, CoreInput, Membership } from './node.ts';
import type { ProcessId, Signer, Verifier } from './ports.ts';
import { unreachable, type DropCode } from '../base/result.ts';
import type { DaemonReport, PeerHealth } from './status.ts';
import { collectRestores, decodeJournal, memberLabel, openRestoredOp, type MembershipChanges } from './task-journal.ts';
import { signCG } from './wire/frame.ts';
import type { AccuseReason, AddedReplica, Item, Role, SignedCG, NodeRestore, TaskRestore } from './wire/messages.ts';

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

type ReplicaRecord = {
  inc: number; counter: number; lastAtMs: number; role: Role; rsn: number; gssn: number; view: number; digest: string; heartbeats: number;
};

type ReportSequence = { inc: number; counter: number; reports: number };

/** `signer` signs the watchdog's restores; `verifier` checks the operator signatures in the task
 *  journals (PROTOCOL §10.9). */
export type WatchdogOptions = {
  id: ProcessId; membership: Membership; inc: number; signer: Signer; verifier: Verifier;
  /** What the daemon says of itself (its disk, its supervisor), added to the status as read
   *  (issue 14 item 4): nothing the watchdog decides depends on it. */
  daemon?: () => DaemonReport;
};

const newer = (inc: number, counter: number, last: { inc: number; counter: number } | undefined): boolean =>
  last === undefined || inc > last.inc || (inc === last.inc && counter > last.counter);

export function createWatchdog(opts: WatchdogOptions): Core & { status(nowMs: number): WatchdogStatus } {
  const { id, membership, inc } = opts;
  const { sccHeartbeatMs: periodMs, watchdogSilenceMs, diagnosisWindowMs, diagnosisThreshold, diagnosisTimeoutMs } = membership.timing;
  // Spares become replicas when the group replaces one (PROTOCOL §10.6): they heartbeat, report
  // and vote for node resets like the initial three. Each signs with its own key, so one faulty
  // node still speaks for one replica only.
  const replicaIds = new Set([...membership.replicas, ...membership.spareReplicas]);
  /** Spares of nodes added at run time, learnt from two replicas (PROTOCOL §10.12), in order. */
  const learnt: ProcessId[] = [];
  /** Each replica's latest `replica.keys`: bounded by the replicas, at MAX_REPLICAS entries each. */
  const keyClaims = new Map<ProcessId, AddedReplica[]>();
  const operatorIds = new Set(membership.operators);
  /** Agents may ask for the status too: a booting node reads clusterResetCount (see above). */
  const statusClients = new Set([...membership.operators, ...membership.agents.map((a) => a.id)]);
  const freshness = createFreshness(inc);
  const freshMs = WATCHDOG_LATE_PERIODS * periodMs;
  const records = new Map<ProcessId, ReplicaRecord>();
  const replays = new Map<ProcessId, number>();
  const reportSequences = new Map<ProcessId, ReportSequence>();
  const drops: Record<string, number> = {};
  let ignored = 0;
  /** Reset requests per (node, rsn): the replicas that asked. Two distinct replicas make a
   *  command (f + 1: one faulty replica cannot reset a node on its own). */
  const resetVotes = new Map<string, Set<ProcessId>>();
  const resets: WatchdogStatus['resets'] = [];
  /** The (node, RSN) resets ordered since the last cluster reset, to ignore re-sent requests. */
  const ordered = new Set<string>();
  const knownNodes = new Set(membership.agents.map((a) => a.node));

  // Rule 2 state. `consistentPastMs`: the latest moment, up to the last heartbeat, at which the
  // records then current showed two consistent fresh heartbeats; the records now current may
  // extend it (consistentUntilMs).
  let armed = false;
  let consistentPastMs: number | null = null;
  // Rule 3 state: counted initiations in arrival order, and each sender's last counted one.
  const counted: { atMs: number; from: ProcessId }[] = [];
  const lastCountedAtMs = new Map<ProcessId, number>();
  /** A reset needs more than the threshold; one replica's initiations count at most this many,
   *  so a reset needs at least two replicas and the second must bring threshold + 1 − cap. */
  const perSenderCap = Math.floor(diagnosisThreshold / 2) + 1;
  /** Per replica, the highest incarnation seen before the last cluster reset: its messages are
   *  the old group's. Only the restarted group (new incarnations) re-arms rule 2 or counts for
   *  rule 3, so a group still going down cannot order a second reset of a cluster restarting. */
  const preResetInc = new Map<ProcessId, number>();
  const diagnoses: DiagnosisRecord[] = [];
  const clusterResets: ClusterResetRecord[] = [];
  let clusterResetCount = 0;
  /** PROTOCOL §10.11: the shutdown two replicas noticed, and the replicas voting for one. After
   *  it the watchdog resets nothing, acknowledges notices for SCC_SHUTDOWN_LINGER_MS, and exits. */
  let shutDown: { rsn: number; by: ProcessId[]; atMs: number; exited: boolean } | null = null;
  const shutdownVotes = new Map<ProcessId, number>();
  /** The latest task journal of each replica since the last cluster reset (onJournal). */
  const journalsKept = new Map<ProcessId, { inc: number; rsn: number; tasks: number; data: Uint8Array }>();
  /** Restores not yet confirmed, by nonce, with each replica's reply so far; and when to send. */
  /** By nonce: what is restored (a task's old id, or `node.add n5`), whether it is a membership
   *  change, the watchdog's signed request, and the replicas' outcomes so far. */
  const restoring = new Map<string, { label: string; member: boolean; signed: SignedCG; replies: Map<ProcessId, string> }>();
  /** The membership the pending membership restores bring back, until two replicas confirmed
   *  them all (then the restarted group journals it itself); null when none is pending. */
  let restoringMembership: MembershipChanges | null = null;
  const restores: RestoreRecord[] = [];
  let restoreAtMs = 0;
  /** When the last input was taken, and until when a stall of the watchdog's own (see
   *  WATCHDOG_STALL_PERIODS) holds back rule 2. */
  let lastInputMs: number | null = null;
  let stallGraceUntilMs = -Infinity;

  const sinceReset = (from: ProcessId, itemInc: number): boolean => itemInc > (preResetInc.get(from) ?? -1);
  const push = <T>(list: T[], value: T, max: number): void => {
    list.push(value);
    if (list.length > max) list.shift();
  };

  /** An item the watchdog does not take from this sender: counted, never acted on. */
  function ignore(code: DropCode): void {
    ignored++;
    drops[code] = (drops[code] ?? 0) + 1;
  }

  function replayed(event: string, from: ProcessId, item: { inc: number; counter: number }, out: CoreEffect[]): void {
    drops['REPLAYED'] = (drops['REPLAYED'] ?? 0) + 1;
    out.push({ type: 'log', level: 'debug', event, fields: { from, inc: item.inc, counter: item.counter } });
  }

  /** Status to operators and agents, on a fresh challenge only (PROTOCOL §7): a replayed query
   *  costs a lookup and gets nothing. */
  function onStatusQuery(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'status.query' | 'challenge.ask' }>, out: CoreEffect[]): void {
    if (!statusClients.has(from)) return ignore('NOT_A_MEMBER');
    if (item.type === 'challenge.ask') {
      out.push({ type: 'send', to: from, item: { type: 'challenge', nonce: item.nonce, challenge: issueChallenge(freshness, nowMs) } });
      return;
    }
    const verdict = admitChallenge(freshness, from, item.challenge, nowMs);
    if (verdict !== 'fresh') return ignore(verdict);
    out.push({ type: 'send', to: from, item: { type: 'status.reply', nonce: item.nonce, json: JSON.stringify(status(nowMs)) } });
  }

  /** Spec §1.6 rule 1: the group commands a node's power reset. */
  function onResetRequest(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'reset.node' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from)) return ignore('NOT_A_MEMBER');
    // A node cluster.json does not list was added at run time (PROTOCOL §10.12): its address
    // comes with the request, and two replicas must give the same one. A faulty replica's
    // invented nodes hold at most MAX_ADDED_NODE_VOTES pending votes; moving its vote for one of
    // them to another RSN holds no more, so the node asked about is not counted.
    const added = !knownNodes.has(item.node);
    const heldElsewhere = (k: string, v: Set<ProcessId>): boolean => {
      const node = k.split('@')[0] as string;
      return !knownNodes.has(node) && node !== item.node && v.has(from);
    };
    if (added && (item.address === '' || [...resetVotes].filter(([k, v]) => heldElsewhere(k, v)).length >= MAX_ADDED_NODE_VOTES)) {
      return ignore('UNEXPECTED');
    }
    // After a cluster reset only the restarted group commands resets: the old group's requests
    // (an unrestarted replica's, still arriving) name RSNs of a history that is gone.
    const rec = records.get(from);
    if (clusterResets.length > 0 && (rec === undefined || !sinceReset(from, rec.inc))) {
      ignore('UNEXPECTED');
      return;
    }
    if (shutDown !== null) return ignore('UNEXPECTED'); // its nodes stop on purpose (PROTOCOL §10.11)
    const key = `${item.node}@${item.rsn}@${added ? item.address : ''}`;
    if (ordered.has(key)) return; // done already; re-sent
    let votes = resetVotes.get(key);
    if (votes === undefined) {
      // Bounded: a faulty replica inventing RSNs can hold one pending vote per node at most.
      for (const k of [...resetVotes.keys()]) if (k.startsWith(`${item.node}@`) && resetVotes.get(k)?.has(from)) resetVotes.delete(k);
      resetVotes.set(key, (votes = new Set()));
    }
    votes.add(from);
    if (votes.size < QUORUM) return;
    resetVotes.delete(key);
    ordered.add(key);
    if (ordered.size > MAX_RESET_HISTORY) ordered.delete(ordered.values().next().value as string);
    push(resets, { node: item.node, rsn: item.rsn, requestedBy: [...votes].sort(), atMs: nowMs }, MAX_RESET_HISTORY);
    out.push({ type: 'reset.node', node: item.node, rsn: item.rsn, address: added ? item.address : '' });
    out.push({ type: 'log', level: 'warn', event: 'node.reset', fields: { node: item.node, rsn: item.rsn, requestedBy: [...votes] } });
  }

  /** PROTOCOL §10.11: a replica's notice that the operator shut the cluster down at `rsn`. Two
   *  matching ones from the current group stand the watchdog down; one faulty replica cannot. */
  function onShutdownNotice(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'shutdown.notice' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from)) return ignore('NOT_A_MEMBER');
    const rec = records.get(from);
    if (clusterResets.length > 0 && (rec === undefined || !sinceReset(from, rec.inc))) return ignore('UNEXPECTED');
    if (shutDown !== null) {
      if (item.rsn === shutDown.rsn) out.push({ type: 'send', to: from, item: { type: 'shutdown.ack', rsn: item.rsn } });
      return;
    }
    shutdownVotes.set(from, item.rsn);
    const by = [...shutdownVotes].filter(([, rsn]) => rsn === item.rsn).map(([r]) => r).sort();
    if (by.length < QUORUM) return;
    shutDown = { rsn: item.rsn, by, atMs: nowMs, exited: false };
    armed = false;
    consistentPastMs = null;
    for (const r of by) out.push({ type: 'send', to: r, item: { type: 'shutdown.ack', rsn: item.rsn } });
    out.push({ type: 'log', level: 'warn', event: 'shutdown', fields: { rsn: item.rsn, by } });
  }

  /** Rules 2 and 3: power-reset every node. The restarted group re-arms rule 2. */
  function resetCluster(nowMs: number, rule: ClusterResetRecord['rule'], reason: string, out: CoreEffect[]): void {
    if (shutDown !== null) return; // the operator stopped the cluster: nothing comes back
    armed = false;
    consistentPastMs = null;
    counted.length = 0;
    lastCountedAtMs.clear();
    // The restarted group numbers its RSNs from 0 again: a node reset it orders at an RSN the
    // old group used is a new one.
    resetVotes.clear();
    ordered.clear();
    // Only the current group's notices stand the watchdog down (PROTOCOL §10.11): an old vote
    // must not make up a pair with one restarted replica's.
    shutdownVotes.clear();
    for (const [from, r] of records) preResetInc.set(from, Math.max(preResetInc.get(from) ?? 0, r.inc));
    for (const [from, s] of reportSequences) preResetInc.set(from, Math.max(preResetInc.get(from) ?? 0, s.inc));
    push(clusterResets, { atMs: nowMs, rule, reason }, MAX_CLUSTER_RESET_HISTORY);
    clusterResetCount++;
    // What the old group's replicas last told us; the restarted group starts a new set.
    const journals = [...journalsKept].map(([r, j]) => ({ source: `${r}'s journal kept by the watchdog (inc ${j.inc}, rsn ${j.rsn})`, data: j.data }));
    journalsKept.clear();
    // A reset while the last one's membership restores are still unconfirmed: the fresh group
    // may have journalled nothing yet, so the nodes the last restore named are kept too.
    const found = collectRestores(journals, opts.verifier, operatorIds).membership;
    const membership = restoringMembership === null ? found : mergeMembership(restoringMembership, found);
    out.push({ type: 'reset.cluster', reason, journals, membership });
    out.push({ type: 'log', level: 'warn', event: 'cluster.reset', fields: { rule, reason } });
  }

  // ---- restoring tasks after a cluster reset (PROTOCOL §10.9) -------------------------------

  /** A replica's task journal: kept, the latest per replica, for the next cluster reset. Only
   *  from a pool replica, about itself, and after a reset only from the restarted group. */
  function onJournal(from: ProcessId, item: Extract<Item, { type: 'tasks.journal' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from)) return ignore('NOT_A_MEMBER');
    if (clusterResets.length > 0 && !sinceReset(from, item.inc)) return ignore('UNEXPECTED');
    const j = decodeJournal(item.journal);
    if (!j.ok || j.value.replica !== from) {
      out.push({ type: 'log', level: 'warn', event: 'tasks.journal.refused', fields: { from, why: j.ok ? `a journal of ${j.value.replica}` : j.detail } });
      return ignore('WIRE_MALFORMED');
    }
    const had = journalsKept.get(from);
    if (had !== undefined && (item.inc < had.inc || (item.inc === had.inc && j.value.rsn < had.rsn))) return ignore('REPLAYED');
    journalsKept.set(from, { inc: item.inc, rsn: j.value.rsn, tasks: j.value.tasks.length, data: item.journal });
  }

  /** The journals read from the nodes after a reset: every verified entry is restored, once. */
  function onRestoreLoad(nowMs: number, journals: { source: string; data: Uint8Array }[], out: CoreEffect[]): void {
    const { restores: found, members, membership, refused } = collectRestores(journals, opts.verifier, operatorIds);
    if (members.length > 0) restoringMembership = restoringMembership === null ? membership : mergeMembership(restoringMembership, membership);
    for (const r of refused) push(restores, { atMs: nowMs, kind: 'refused', ...r }, MAX_RESTORE_HISTORY);
    for (const r of refused) out.push({ type: 'log', level: 'error', event: 'restore.entry-refused', fields: { ...r } });
    let added = 0;
    // Membership changes first: a task placed before its node is back would miss it.
    for (const restore of [...members, ...found]) {
      if (restoring.has(restore.nonce)) continue;
      const signed = signCG({ csn: 0, gssnAck: 0, inc: 0, client: id, payload: restore }, opts.signer);
      restoring.set(restore.nonce, { label: restoreLabel(restore), member: restore.type === 'node.restore', signed, replies: new Map() });
      added++;
    }
    restoreAtMs = nowMs;
    out.push({
      type: 'log', level: 'warn', event: 'restore.loaded',
      fields: { journals: journals.length, members: members.map(restoreLabel), tasks: found.map((r) => r.task), added, refused: refused.length },
    });
  }

  /** What a restore is called in the records: a task's old id, or `node.add n5`. */
  function restoreLabel(r: TaskRestore | NodeRestore): string {
    if (r.type === 'task.restore') return r.task;
    const change = openRestoredOp(r, opts.verifier, operatorIds);
    return change.ok ? memberLabel(change.value) : `membership change ${r.nonce}`;
  }

  /** Replicas of the restarted group heard lately: where restores go. */
  function freshReplicas(nowMs: number): ProcessId[] {
    return [...records].filter(([from, r]) => sinceReset(from, r.inc) && nowMs - r.lastAtMs <= freshMs).map(([from]) => from);
  }

  /** Sends every unconfirmed restore to the restarted group once rule 2 is armed again (two
   *  consistent replicas: the group serves), and again every RESTORE_RESEND_MS. */
  function sendRestores(nowMs: number, out: CoreEffect[]): void {
    if (restoring.size === 0 || !armed || nowMs < restoreAtMs) return;
    restoreAtMs = nowMs + RESTORE_RESEND_MS;
    // The membership changes, until two replicas confirmed all of them; then the tasks.
    const pending = [...restoring.values()];
    const now = pending.some((p) => p.member) ? pending.filter((p) => p.member) : pending;
    for (const to of freshReplicas(nowMs)) {
      for (const { signed } of now) out.push({ type: 'send', to, item: { type: 'op.request', signed } });
    }
  }

  /** A replica's outcome for a restore; two identical ones (f + 1) settle it. */
  function onRestoreReply(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'op.reply' }>, out: CoreEffect[]): void {
    const pending = restoring.get(item.nonce);
    const rec = records.get(from);
    if (pending === undefined || rec === undefined || !sinceReset(from, rec.inc)) {
      ignore('UNEXPECTED');
      return;
    }
    const outcome = `${item.ok ? 'ok' : 'refused'}\u0000${item.text}`;
    pending.replies.set(from, outcome);
    if ([...pending.replies.values()].filter((o) => o === outcome).length < QUORUM) return;
    restoring.delete(item.nonce);
    const task = pending.label;
    // The last membership change confirmed: the tasks go at once, not a resend period later.
    if (pending.member && ![...restoring.values()].some((p) => p.member)) {
      restoreAtMs = nowMs;
      restoringMembership = null;
    }
    push(restores, { atMs: nowMs, kind: 'restored', task, ok: item.ok, text: item.text }, MAX_RESTORE_HISTORY);
    out.push({ type: 'log', level: item.ok ? 'warn' : 'error', event: 'restore.done', fields: { task, ok: item.ok, text: item.text, rsn: item.rsn } });
  }

  // ---- rule 2: consistent heartbeats from two replicas ------------------------------------

  /** Under the current records, the end of the last moment at which two distinct replicas of
   *  the restarted group had fresh heartbeats (age ≤ freshMs) reporting the same view — in the
   *  future while that still holds — or null if the current records never show it. "Consistent"
   *  is spec §1.6's word; the paper leaves it open, and the view is what a correct group agrees
   *  on even while its RSNs and digests move. */
  function consistentUntilMs(): number | null {
    const byView = new Map<number, number[]>();
    for (const [from, r] of records) {
      if (sinceReset(from, r.inc)) byView.set(r.view, [...(byView.get(r.view) ?? []), r.lastAtMs]);
    }
    let best: number | null = null;
    for (const times of byView.values()) {
      times.sort((a, b) => b - a);
      // Two heartbeats were fresh together iff the later arrived within freshMs of the earlier;
      // the newest such adjacent pair stays consistent the longest.
      for (let i = 0; i + 1 < times.length; i++) {
        const later = times[i] ?? 0;
        const earlier = times[i + 1] ?? 0;
        if (later - earlier > freshMs) continue;
        if (best === null || earlier + freshMs > best) best = earlier + freshMs;
        break;
      }
    }
    return best;
  }

  function silenceDeadlineMs(): number | null {
    if (!armed) return null;
    const end = Math.max(consistentPastMs ?? -Infinity, consistentUntilMs() ?? -Infinity);
    return Number.isFinite(end) ? Math.max(end + watchdogSilenceMs, stallGraceUntilMs) : null;
  }

  /** See WATCHDOG_STALL_PERIODS. */
  function noteInput(nowMs: number, out: CoreEffect[]): void {
    if (armed && lastInputMs !== null && nowMs - lastInputMs > WATCHDOG_STALL_PERIODS * periodMs) {
      stallGraceUntilMs = nowMs + freshMs;
      out.push({ type: 'log', level: 'warn', event: 'watchdog.stalled', fields: { forMs: nowMs - lastInputMs, graceMs: freshMs } });
    }
    lastInputMs = nowMs;
  }

  /** Spec §1.6 rule 2: armed, and for watchdogSilenceMs never two consistent fresh heartbeats. */
  function checkSilence(nowMs: number, out: CoreEffect[]): void {
    const deadline = silenceDeadlineMs();
    if (deadline === null || nowMs < deadline) return;
    const heard = [...records]
      .filter(([from, r]) => sinceReset(from, r.inc) && nowMs - r.lastAtMs <= freshMs)
      .map(([from, r]) => `${from} (view ${r.view})`);
    const fresh = heard.length === 0 ? 'no replica' : heard.join(', ');
    resetCluster(nowMs, 'heartbeats', `no consistent heartbeats from two replicas for ${watchdogSilenceMs} ms; fresh now: ${fresh}`, out);
  }

  /** Heartbeats from the manager group (PROTOCOL §6). Replays never refresh liveness. */
  function onHeartbeat(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'hb' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from) || item.info.type !== 'replica') {
      ignore(replicaIds.has(from) ? 'UNEXPECTED' : 'NOT_A_MEMBER');
      return;
    }
    const rec = records.get(from);
    if (!newer(item.inc, item.counter, rec)) {
      replays.set(from, (replays.get(from) ?? 0) + 1);
      replayed('hb.replayed', from, item, out);
      return;
    }
    if (rec !== undefined && item.inc !== rec.inc) {
      out.push({ type: 'log', level: 'info', event: 'replica.restarted', fields: { replica: from, inc: item.inc } });
    }
    // The records current until now held up to now; this heartbeat replaces one of them.
    const before = consistentUntilMs();
    if (before !== null) consistentPastMs = Math.max(consistentPastMs ?? -Infinity, Math.min(before, nowMs));
    records.set(from, {
      inc: item.inc,
      counter: item.counter,
      lastAtMs: nowMs,
      role: item.info.role,
      rsn: item.info.rsn,
      gssn: item.info.gssn,
      view: item.info.view,
      digest: toHex(item.info.digest),
      heartbeats: (rec?.heartbeats ?? 0) + 1,
    });
    const after = consistentUntilMs();
    // A cluster shut down by the operator stays disarmed (PROTOCOL §10.11): its replicas may
    // still heartbeat, consistent, while they wind down.
    if (!armed && shutDown === null && after !== null && after >= nowMs) {
      armed = true;
      out.push({ type: 'log', level: 'info', event: 'watchdog.armed', fields: { replica: from, view: item.info.view } });
    }
  }

  // ---- replicas cluster.json lacks (PROTOCOL §10.12) -----------------------------------------

  /** A replica names the members that are spares of added nodes, with their keys. One that two
   *  replicas name alike (same node, address, port and key) is a replica from now on: its
   *  frames verify, it heartbeats and votes like the others. One faulty replica alone cannot
   *  give an id a key; an id learnt keeps its key. */
  function onReplicaKeys(from: ProcessId, item: Extract<Item, { type: 'replica.keys' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from)) return ignore('NOT_A_MEMBER');
    keyClaims.set(from, item.replicas);
    const same = (a: AddedReplica, b: AddedReplica) =>
      a.id === b.id && a.node === b.node && a.address === b.address && a.port === b.port && toHex(a.publicKey) === toHex(b.publicKey);
    // An id of cluster.json's (an agent, an operator, the watchdog) never becomes a replica.
    const known = (x: AddedReplica) => replicaIds.has(x.id) || statusClients.has(x.id) || x.id === id;
    const agreed = item.replicas.filter((x) => !known(x) && [...keyClaims].filter(([, c]) => c.some((y) => same(x, y))).length >= QUORUM);
    if (agreed.length === 0) return;
    for (const x of agreed) {
      replicaIds.add(x.id);
      learnt.push(x.id);
    }
    out.push({ type: 'keys', keys: agreed.map((x) => ({ id: x.id, publicKey: x.publicKey, replica: { node: x.node, address: x.address, port: x.port } })) });
    out.push({ type: 'log', level: 'info', event: 'replica.learnt', fields: { replicas: agreed.map((x) => x.id), by: [...keyClaims.keys()] } });
  }

  // ---- rule 3: self-diagnosis initiations -------------------------------------------------

  /** Counted initiations within the window, each sender's share capped at perSenderCap. */
  function tally(nowMs: number): { total: number; senders: ProcessId[] } {
    const bySender = new Map<ProcessId, number>();
    for (const c of counted) if (nowMs - c.atMs < diagnosisWindowMs) bySender.set(c.from, (bySender.get(c.from) ?? 0) + 1);
    let total = 0;
    for (const n of bySender.values()) total += Math.min(n, perSenderCap);
    return { total, senders: [...bySender.keys()].sort() };
  }

  /** Spec §1.6 rule 3, the flaw 11c guard (spec §2.1). A correct replica's round lasts up to
   *  diagnosisTimeoutMs, so one initiation per sender per diagnosisTimeoutMs is counted: a
   *  flood of reports counts no faster than real rounds. One replica alone can never reset the
   *  cluster: it might be the faulty one (f = 1), and a faulty replica that could reset the
   *  cluster at will would be a denial of service the group's voting otherwise prevents. So a
   *  reset needs more than diagnosisThreshold counted initiations in diagnosisWindowMs with
   *  each replica's share capped at floor(threshold / 2) + 1: at least two replicas, and the
   *  second must itself have initiated repeatedly (a faulty flood plus one correct replica's
   *  single legitimate report is not enough). Repeated rounds from two replicas are what a
   *  self-diagnosis that never converges (flaw 11c) looks like. */
  function onDiagReport(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'diag.report' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from)) {
      ignore('NOT_A_MEMBER');
      return;
    }
    const seq = reportSequences.get(from);
    if (!newer(item.inc, item.counter, seq)) {
      replayed('diag.replayed', from, item, out);
      return;
    }
    reportSequences.set(from, { inc: item.inc, counter: item.counter, reports: (seq?.reports ?? 0) + 1 });
    const last = lastCountedAtMs.get(from);
    const counts = sinceReset(from, item.inc) && (last === undefined || nowMs - last >= diagnosisTimeoutMs);
    push(diagnoses, { atMs: nowMs, from, view: item.view, reason: item.reason, target: item.target, counted: counts }, MAX_DIAGNOSIS_HISTORY);
    out.push({
      type: 'log', level: counts ? 'info' : 'debug', event: 'diag.report',
      fields: { from, view: item.view, reason: item.reason, target: item.target, counted: counts },
    });
    if (!counts) return;
    lastCountedAtMs.set(from, nowMs);
    while (counted.length > 0 && nowMs - (counted[0]?.atMs ?? nowMs) >= diagnosisWindowMs) counted.shift();
    push(counted, { atMs: nowMs, from }, MAX_COUNTED_INITIATIONS);
    const { total, senders } = tally(nowMs);
    if (total <= diagnosisThreshold || senders.length < QUORUM) return;
    resetCluster(nowMs, 'diagnosis',
      `${total} self-diagnosis initiations from ${senders.join(', ')} within ${diagnosisWindowMs} ms (threshold ${diagnosisThreshold})`, out);
  }

  // ---- status ------------------------------------------------------------------------------

  function health(ageMs: number | null): PeerHealth {
    if (ageMs === null) return 'unknown';
    if (ageMs <= WATCHDOG_LATE_PERIODS * periodMs) return 'healthy';
    if (ageMs <= WATCHDOG_SILENT_PERIODS * periodMs) return 'late';
    return 'silent';
  }

  function status(nowMs: number): WatchdogStatus {
    const initial = new Set(membership.replicas);
    const listed = [...new Set([...membership.replicas, ...membership.spareReplicas, ...learnt])]
      .filter((r) => initial.has(r) || records.has(r) || reportSequences.has(r));
    return {
      id,
      role: 'watchdog',
      inc,
      replicas: listed.map((r) => {
        const rec = records.get(r);
        const age = rec === undefined ? null : Math.max(0, nowMs - rec.lastAtMs);
        return {
          id: r,
          inc: rec?.inc ?? null,
          counter: rec?.counter ?? null,
          lastHeartbeatAgeMs: age,
          health: health(age),
          role: rec?.role ?? null,
          rsn: rec?.rsn ?? null,
          gssn: rec?.gssn ?? null,
          view: rec?.view ?? null,
          digest: rec?.digest ?? null,
          heartbeats: rec?.heartbeats ?? 0,
          replays: replays.get(r) ?? 0,
          diagnosisReports: reportSequences.get(r)?.reports ?? 0,
        };
      }),
      ignored,
      resets: resets.map((r) => ({ ...r, requestedBy: [...r.requestedBy] })),
      drops: { ...drops },
      armed,
      silenceDeadlineMs: silenceDeadlineMs(),
      diagnosisInWindow: tally(nowMs).total,
      diagnosisReports: diagnoses.map((d) => ({ ...d })),
      clusterResets: clusterResets.map((c) => ({ ...c })),
      clusterResetCount,
      shutdown: shutDown === null ? null : { rsn: shutDown.rsn, by: [...shutDown.by], atMs: shutDown.atMs },
      journalsKept: [...journalsKept].map(([replica, j]) => ({ replica, inc: j.inc, rsn: j.rsn, tasks: j.tasks })),
      restoresPending: [...restoring].map(([nonce, p]) => ({ task: p.label, nonce })),
      restores: restores.map((r) => ({ ...r })),
      ...(opts.daemon === undefined ? {} : { daemon: opts.daemon() }),
    };
  }

  function step(input: CoreInput): CoreEffect[] {
    const out: CoreEffect[] = [];
    // Every input carries the time: a silence deadline that has passed acts before the input
    // (a heartbeat arriving after the deadline does not undo the silence before it).
    noteInput(input.nowMs, out);
    checkSilence(input.nowMs, out);
    switch (input.type) {
      case 'frame': {
        const from = input.frame.from;
        for (const item of input.frame.items) {
          if (item.type === 'hb') {
            onHeartbeat(from, input.nowMs, item, out);
          } else if (item.type === 'diag.report') {
            onDiagReport(from, input.nowMs, item, out);
          } else if (item.type === 'reset.node') {
            onResetRequest(from, input.nowMs, item, out);
          } else if (item.type === 'shutdown.notice') {
            onShutdownNotice(from, input.nowMs, item, out);
          } else if (item.type === 'replica.keys') {
            onReplicaKeys(from, item, out);
          } else if (item.type === 'tasks.journal') {
            onJournal(from, item, out);
          } else if (item.type === 'op.reply' && replicaIds.has(from)) {
            onRestoreReply(from, input.nowMs, item, out);
          } else if (item.type === 'status.query' || item.type === 'challenge.ask') {
            onStatusQuery(from, input.nowMs, item, out);
          } else {
            ignore('UNEXPECTED');
          }
        }
        break;
      }
      case 'dropped':
        drops[input.code] = (drops[input.code] ?? 0) + 1;
        break;
      case 'tick':
      case 'transport.up':
      case 'transport.down':
      case 'request':
      case 'notice':
      case 'group':
        break;
      case 'restore.load':
        onRestoreLoad(input.nowMs, input.journals, out);
        break;
      default:
        return unreachable(input);
    }
    sendRestores(input.nowMs, out);
    if (shutDown !== null && !shutDown.exited && input.nowMs >= shutDown.atMs + SCC_SHUTDOWN_LINGER_MS) {
      shutDown.exited = true;
      out.push({ type: 'shutdown', reason: `shutdown at RSN ${shutDown.rsn}, noticed by ${shutDown.by.join(', ')}` });
    }
    return out;
  }

  function nextWakeMs(): number | null {
    const silence = silenceDeadlineMs();
    const restore = restoring.size > 0 && armed ? restoreAtMs : null;
    // Armed, it wakes every period as well, so that a long gap between inputs is a stall.
    const beat = armed && lastInputMs !== null ? lastInputMs + periodMs : null;
    const stop = shutDown !== null && !shutDown.exited ? shutDown.atMs + SCC_SHUTDOWN_LINGER_MS : null;
    const due = [silence, restore, beat, stop].filter((x): x is number => x !== null);
    return due.length === 0 ? null : Math.min(...due);
  }

  return { id, step, nextWakeMs, status };
}

/** Two views of the membership changes as one: every added node (the later view's address for a
 *  node in both) not removed in either, and every removal. */
function mergeMembership(a: MembershipChanges, b: MembershipChanges): MembershipChanges {
  const removed = [...new Set([...a.removed, ...b.removed])].sort();
  const added = new Map([...a.added, ...b.added].map((n) => [n.node, n]));
  return { added: [...added.values()].filter((n) => !removed.includes(n.node)), removed };
}
