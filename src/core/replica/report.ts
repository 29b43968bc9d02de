// What a replica tells the outside (docs/PROTOCOL.md §7, §10.9, §10.11, §10.12): its status for
// `trine status` and `trine ps`, the journal of applied task events, the task journal it writes
// to disk and sends the watchdog, and the cluster shutdown it carries out once ordered.
import { diagnosisHistory } from '../diagnosis.ts';
import { JOURNAL_RESEND_MS, MAX_JOURNAL_ITEM_BYTES, SHUTDOWN_LINGER_MAX_MS, SHUTDOWN_NOTICE_MS } from '../constants.ts';
import { toHex } from '../../base/hex.ts';
import { addedAmong, movedPorts } from '../group-view.ts';
import { liveSubmits } from '../cluster-state.ts';
import { clusterView } from '../cluster-view.ts';
import { linkView } from '../link-views.ts';
import type { CoreEffect } from '../node.ts';
import type { ProcessId } from '../ports.ts';
import { addedSpares, type ReplicatedState } from '../replicated-state.ts';
import type { ClusterEvent, ClusterView, ReplicaStatus } from '../status.ts';
import { encodeJournal } from '../task-journal.ts';
import { digest, isPrimary, type Replica } from './record.ts';
import { health, type HeartbeatSeen } from './failure-detector.ts';

/** The cluster shutdown this replica carries out, once ordered (PROTOCOL §10.11). */
export type Stopping = { rsn: number; sinceMs: number; noticeAtMs: number; acked: boolean; done: boolean };

export type Report = {
  /** The journal of applied task events, stamped with this replica's clock (not replicated). */
  readonly journal: ClusterEvent[];
  stopping: Stopping | null;
  /** Peers whose every connection is down now, as the driver reports it (transport.down). */
  readonly disconnected: Set<ProcessId>;
  /** The added nodes' spares, as addedSpares lists them, computed again only when `added`
   *  changed (it only grows, or is replaced whole by a transfer): the heartbeat reads it. */
  spareCache: { of: ReplicatedState['added']; size: number; list: ReturnType<typeof addedSpares> } | null;
  /** The task journal: what it was last written for, the RSN it was last looked at, the latest
   *  journal, and when it last went to the watchdog. */
  journalKey: string | null;
  journalRsn: number;
  taskJournal: Uint8Array | null;
  journalSentAtMs: number;
};

export const createReport = (): Report => ({
  journal: [], stopping: null, disconnected: new Set(), spareCache: null, journalKey: null, journalRsn: -1, taskJournal: null, journalSentAtMs: -Infinity,
});

/** The added nodes' spares among `ids` (PROTOCOL §10.12). */
export function spareKeysOf(r: Replica, ids: readonly ProcessId[]): ReturnType<typeof addedAmong> {
  const { added } = r.state;
  if (added.size === 0) return [];
  const rep = r.report;
  if (rep.spareCache === null || rep.spareCache.of !== added || rep.spareCache.size !== added.size) {
    rep.spareCache = { of: added, size: added.size, list: addedSpares(added) };
  }
  return addedAmong(rep.spareCache.list, ids);
}

export function status(r: Replica, nowMs: number): ReplicaStatus {
  const { state, links, id } = r;
  const heard = r.detector.heard;
  const age = (s: HeartbeatSeen | undefined) => (s?.atMs == null ? null : Math.max(0, nowMs - s.atMs));
  return {
    id, role: isPrimary(r) ? 'primary' : 'backup', inc: r.opts.inc,
    rsn: state.rsn, gssn: state.gssn, primary: state.primary, digest: toHex(digest(r)),
    replicas: [...new Set([...state.replicas, ...(state.group.recovery === null ? [] : [state.group.recovery.id])])].filter((x) => x !== id).map((x) => ({
      id: x, connected: linkView(links, x)?.established ?? false, lastHeartbeatAgeMs: age(heard.get(x)), health: health(heard.get(x)),
    })),
    // The nodes the group has now: cluster.json's, less the removed, plus the added (§10.12).
    agents: [...state.nodes].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([agent, n]) => ({ id: agent, node: n.node })).map((a) => ({
      id: a.id, node: a.node, connected: linkView(links, a.id)?.established ?? false,
      joined: state.nodes.get(a.id)?.joined ?? false,
      lastHeartbeatAgeMs: age(heard.get(a.id)),
      health: health(heard.get(a.id)),
    })),
    suspicions: r.suspicions, drops: { ...r.drops },
    view: state.group.view, members: [...state.replicas], phase: r.change.sync !== null ? 'syncing' : r.phase, diagnosis: diagnosisHistory(r.diagnosis),
    memberNodes: Object.fromEntries(state.group.replicaNodes), retired: [...state.group.retired], ports: movedPorts(state.group, state.replicas),
    added: spareKeysOf(r, state.replicas).map((x) => ({ ...x, publicKey: toHex(x.publicKey) })),
    replacement: state.group.recovery === null ? null : { id: state.group.recovery.id, node: state.group.recovery.node, tried: [...state.group.recovery.tried] },
    cluster: replicaClusterView(r),
    ...(r.opts.daemon === undefined ? {} : { daemon: r.opts.daemon() }),
  };
}

/** Nodes, tasks and processes with this replica's journal (`trine ps`). */
export function replicaClusterView(r: Replica): ClusterView {
  return { ...clusterView(r.state.cluster, r.state.nodes, r.opts.membership.timing.taskTickMs), events: [...r.report.journal] };
}

/** PROTOCOL §10.11: once the watchdog has taken the shutdown and every node's agent has
 *  acknowledged its copies (or SHUTDOWN_LINGER_MAX_MS passed), this replica exits. */
export function shutdownTimers(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const stopping = r.report.stopping;
  if (stopping === null || stopping.done) return;
  if (!stopping.acked && stopping.noticeAtMs + SHUTDOWN_NOTICE_MS <= nowMs) {
    stopping.noticeAtMs = nowMs;
    out.push({ type: 'send', to: r.m.scc, item: { type: 'shutdown.notice', rsn: stopping.rsn } });
  }
  // An agent that has gone (it stopped its node on two copies) owes nothing more.
  const owed = [...r.state.nodes.entries()]
    .filter(([a, n]) => n.joined && !n.failed && !r.report.disconnected.has(a) && (linkView(r.links, a)?.unacked ?? 0) > 0).map(([a]) => a);
  const late = nowMs - stopping.sinceMs >= SHUTDOWN_LINGER_MAX_MS;
  if (!late && (!stopping.acked || owed.length > 0)) return;
  stopping.done = true;
  const reason = late ? `shutdown at RSN ${stopping.rsn}; stopped waiting after ${SHUTDOWN_LINGER_MAX_MS} ms (${stopping.acked ? '' : 'the watchdog never acknowledged; '}${owed.length === 0 ? 'every agent acknowledged' : `copies unacknowledged by ${owed.join(', ')}`})`
    : `shutdown at RSN ${stopping.rsn}: the watchdog and every agent acknowledged`;
  out.push({ type: 'shutdown', reason });
}

/** The shutdown's next deadline: the notice again, or the end of the linger. */
export function shutdownNextWakeMs(r: Replica): number {
  const s = r.report.stopping;
  if (s === null || s.done) return Infinity;
  return s.acked ? s.sinceMs + SHUTDOWN_LINGER_MAX_MS : s.noticeAtMs + SHUTDOWN_NOTICE_MS;
}

/** The task journal (PROTOCOL §10.9), written again whenever the live tasks or the membership
 *  changes (§10.12) change; only by a replica that serves (a replacement has no state before it
 *  installs one). */
export function persistJournal(r: Replica, out: CoreEffect[], nowMs: number): void {
  const { state } = r;
  const rep = r.report;
  if (r.phase === 'serving' && rep.journalRsn !== state.rsn) {
    rep.journalRsn = state.rsn;
    const live = liveSubmits(state.cluster);
    // The membership log only grows (PROTOCOL §10.12): its length tells a change.
    const key = `${state.members.length}\u0002${live.map((l) => `${l.task}\u0000${l.submit.nonce}`).join('\u0001')}`;
    if (key !== rep.journalKey) {
      rep.journalKey = key;
      const tasks = live.map((l) => ({ task: l.task, nonce: l.submit.nonce, submit: l.submit.bytes, submitSig: l.submit.sig }));
      const members = state.members.map((c) => ({ nonce: c.nonce, op: c.op, opSig: c.opSig }));
      rep.taskJournal = encodeJournal({ replica: r.id, rsn: state.rsn, tasks, members });
      out.push({ type: 'persist.tasks', journal: rep.taskJournal });
      rep.journalSentAtMs = -Infinity;
    }
  }
  // The watchdog keeps a copy too (PROTOCOL §10.9): a cluster of several hosts shares no disk.
  if (r.phase !== 'serving' || rep.taskJournal === null || nowMs - rep.journalSentAtMs < JOURNAL_RESEND_MS) return;
  rep.journalSentAtMs = nowMs;
  if (rep.taskJournal.length > MAX_JOURNAL_ITEM_BYTES) {
    out.push({ type: 'log', level: 'error', event: 'tasks.journal.too-large', fields: { bytes: rep.taskJournal.length, max: MAX_JOURNAL_ITEM_BYTES } });
    return;
  }
  out.push({ type: 'send', to: r.m.scc, item: { type: 'tasks.journal', inc: r.links.inc, journal: rep.taskJournal } });
}
