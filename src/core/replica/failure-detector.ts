// A replica's failure detector (spec §1.3; docs/PROTOCOL.md §6, §8.3, §8.4): the heartbeats it
// sends and hears, each peer's health, the replica check that starts self-diagnosis of a silent
// member, the agent check and the probes that lead the primary to declare a node failed, the
// backups' watch on the rate of the primary's task-clock ticks, and what a pause of this replica
// itself does to all of those judgements (§6.1).
import { diagnosisRunning, heardFrom, latestCheckpoint, missedHeartbeat, onDigestClaims, ownDigest, putOffDiagnosis } from '../diagnosis.ts';
import { TICK_RATE_SLACK, TICK_RATE_WINDOW_MS } from '../constants.ts';
import { countDrop } from '../../base/result.ts';
import { linkSend } from '../link.ts';
import type { CoreEffect } from '../node.ts';
import type { ProcessId } from '../ports.ts';
import type { PeerHealth } from '../status.ts';
import type { Item } from '../wire/messages.ts';
import { backups, digest, isPrimary, suspect, type Replica } from './record.ts';
import { orderInput } from './primary.ts';
import { spareKeysOf } from './report.ts';

/** What this replica last heard from a peer: the newest heartbeat (incarnation, counter, when),
 *  whether one came since the last check, and how many checks in a row found none. */
export type HeartbeatSeen = { inc: number; counter: number; atMs: number | null; sinceCheck: boolean; missedChecks: number };

/** A node suspected failed (PROTOCOL §8.4): this replica's probe of its agent, and (primary)
 *  whether a backup found it unreachable too. */
export type Probe = { inc: number; nonce: number; deadlineMs: number; expired: boolean; backupUnreachable: boolean; declared: boolean };

export type Detector = {
  readonly heard: Map<ProcessId, HeartbeatSeen>;
  /** Nodes under suspicion, by agent (PROTOCOL §8.4). */
  readonly probes: Map<ProcessId, Probe>;
  probeNonce: number;
  heartbeatCounter: number;
  replicaHeartbeatAtMs: number;
  replicaCheckAtMs: number;
  agentCheckAtMs: number;
  /** Backups: the task clock's ticks as they arrived, within the last TICK_RATE_WINDOW_MS. */
  readonly tickArrivals: number[];
  tickRateSuspectedAtMs: number;
};

/** A peer we know of and have not heard from yet. */
export const unheard = (): HeartbeatSeen => ({ inc: 0, counter: 0, atMs: null, sinceCheck: false, missedChecks: 0 });

/** `peers`: every replica, agent and operator that may heartbeat this replica. */
export function createDetector(self: ProcessId, peers: readonly ProcessId[]): Detector {
  const heard = new Map<ProcessId, HeartbeatSeen>();
  for (const p of peers) if (p !== self) heard.set(p, unheard());
  return {
    heard, probes: new Map(), probeNonce: 0, heartbeatCounter: 0, replicaHeartbeatAtMs: 0, replicaCheckAtMs: 0, agentCheckAtMs: 0,
    tickArrivals: [], tickRateSuspectedAtMs: -Infinity,
  };
}

/** The first step: heartbeat at once, check one period on. */
export function startDetector(r: Replica, nowMs: number): void {
  const d = r.detector;
  d.replicaHeartbeatAtMs = nowMs;
  d.replicaCheckAtMs = nowMs + r.t.replicaCheckMs;
  d.agentCheckAtMs = nowMs + r.t.agentCheckMs;
}

export function health(seen: HeartbeatSeen | undefined): PeerHealth {
  if (seen === undefined || seen.atMs === null) return 'unknown';
  return seen.missedChecks === 0 ? 'healthy' : seen.missedChecks === 1 ? 'late' : 'silent';
}

/** A heartbeat newer than the last one heard from a peer of its kind; false: a replay, a stale
 *  one, or from nobody who heartbeats this replica. */
export function onHeartbeat(r: Replica, from: ProcessId, item: Extract<Item, { type: 'hb' }>, nowMs: number, out: CoreEffect[]): boolean {
  const seen = r.detector.heard.get(from);
  if (seen === undefined) return false;
  if (item.inc < seen.inc || (item.inc === seen.inc && item.counter <= seen.counter)) return false;
  if (item.info.type === 'replica' ? !r.poolIds.has(from) : !r.agentIds.has(from)) return false;
  seen.inc = item.inc;
  seen.counter = item.counter;
  seen.atMs = nowMs;
  seen.sinceCheck = true;
  seen.missedChecks = 0;
  if (item.info.type === 'replica' && r.phase === 'serving') {
    heardFrom(r.diagnosis, from);
    const i = item.info;
    onDigestClaims(r.diagnosis, from, i.view, [[i.rsn, i.digest], [i.ckptRsn, i.ckptDigest]], nowMs, out);
  }
  if (item.info.type === 'agent') {
    const p = r.detector.probes.get(from);
    if (p !== undefined && !p.declared) r.detector.probes.delete(from);
  }
  return true;
}

/** The replica's heartbeat to the members and the watchdog, with its RSN, digest and latest
 *  checkpoint; the watchdog also gets the added members' keys and the resets it owes. */
function sendHeartbeats(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const d = r.detector;
  const { state } = r;
  d.heartbeatCounter++;
  if (r.phase === 'serving') ownDigest(r.diagnosis, state.rsn, digest(r), nowMs, out);
  const ckpt = r.phase === 'serving' ? latestCheckpoint(r.diagnosis) : null;
  const info = {
    type: 'replica' as const, role: isPrimary(r) ? ('primary' as const) : ('backup' as const), rsn: state.rsn, gssn: state.gssn, digest: digest(r),
    view: state.group.view, ckptRsn: ckpt?.[0] ?? 0, ckptDigest: ckpt?.[1] ?? new Uint8Array(32),
  };
  for (const x of state.replicas) {
    if (x !== r.id) out.push({ type: 'send', to: x, item: { type: 'hb', inc: r.links.inc, counter: d.heartbeatCounter, info } });
  }
  out.push({ type: 'send', to: r.m.scc, item: { type: 'hb', inc: r.links.inc, counter: d.heartbeatCounter, info } });
  // The watchdog learns the members cluster.json lacks from two of us (PROTOCOL §10.12).
  const added = spareKeysOf(r, state.group.recovery === null ? state.replicas : [...state.replicas, state.group.recovery.id]);
  if (added.length > 0) out.push({ type: 'send', to: r.m.scc, item: { type: 'replica.keys', replicas: added } });
  for (const [node, x] of r.resets) out.push({ type: 'send', to: r.m.scc, item: { type: 'reset.node', node, ...x } });
  d.replicaHeartbeatAtMs = nowMs + r.t.replicaHeartbeatMs;
}

/** spec §1.3: one missing replica heartbeat in a 150 ms check initiates self-diagnosis. A
 *  replica never heard from is still starting; it is not suspected (docs/PROTOCOL.md §6). */
function checkReplicas(r: Replica, nowMs: number, out: CoreEffect[]): void {
  for (const x of r.state.replicas) {
    const seen = r.detector.heard.get(x);
    if (x === r.id || seen === undefined || seen.atMs === null) continue;
    if (!seen.sinceCheck) {
      seen.missedChecks++;
      // Once per silence: a dead replica is one suspicion, not one every 150 ms.
      if (seen.missedChecks === 1) suspect(r, out, x, 'heartbeat.missed', `no heartbeat from ${x} for ${nowMs - seen.atMs} ms`);
      if (r.phase === 'serving') missedHeartbeat(r.diagnosis, x, nowMs - seen.atMs, nowMs, out);
    }
    seen.sinceCheck = false;
  }
  r.detector.replicaCheckAtMs = nowMs + r.t.replicaCheckMs;
}

/** spec §1.3: backups check agent heartbeats every 225 ms; while self-diagnosis runs those
 *  checks are ignored (a node hosting a replica is diagnosed as a replica first). */
function checkAgents(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const { heard, probes } = r.detector;
  const paused = diagnosisRunning(r.diagnosis) || r.change.sync !== null || r.phase !== 'serving';
  if (paused) for (const a of r.agentIds) {
    const seen = heard.get(a);
    if (seen !== undefined) seen.sinceCheck = false;
  }
  if (!isPrimary(r) && !paused) {
    // spec §1.3: a node that hosts a replica is diagnosed as a replica first. Agent checks
    // (2 × agentCheckMs) can notice a dead node before the replica check (replicaCheckMs)
    // starts the silence diagnosis that pauses them, so a member whose heartbeat is overdue
    // holds back the probe of its node's agent; the agent's missed checks still count, and
    // it is probed at the first check after the replica is heard again or condemned.
    const overdue = new Set<string>();
    for (const x of r.state.replicas) {
      const seen = heard.get(x);
      const node = r.state.group.replicaNodes.get(x);
      if (x !== r.id && node !== undefined && seen?.atMs != null && nowMs - seen.atMs > r.t.replicaHeartbeatMs) overdue.add(node);
    }
    for (const a of r.agentIds) {
      const seen = heard.get(a);
      if (seen === undefined || seen.atMs === null) continue;
      if (!seen.sinceCheck) {
        seen.missedChecks++;
        const rec = r.state.nodes.get(a);
        const probe = probes.get(a);
        // spec §1.3: two consecutive missed checks → probe; the primary probes too. Again on
        // every later check of the same silence while no current probe of this incarnation
        // runs: the node may have joined since, or died after answering an earlier probe.
        const due = probe === undefined || probe.inc !== rec?.inc || staleProbe(r, probe, nowMs);
        if (seen.missedChecks >= 2 && due && rec !== undefined && rec.joined && !rec.failed && !overdue.has(rec.node)) {
          out.push({ type: 'log', level: 'warn', event: 'agent.silent', fields: { agent: a, missedChecks: 2 } });
          startProbe(r, a, rec.inc, nowMs, out);
          linkSend(r.links, r.state.primary, 0, { type: 'node.suspect', agent: a, inc: rec.inc, unreachable: false }, nowMs, out);
        }
      }
      seen.sinceCheck = false;
    }
  }
  r.detector.agentCheckAtMs = nowMs + r.t.agentCheckMs;
}

/** The detector's periodic work, in this order: heartbeat, replica check, agent check. */
export function detectorTimers(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const d = r.detector;
  if (d.replicaHeartbeatAtMs <= nowMs) sendHeartbeats(r, nowMs, out);
  if (r.report.stopping !== null) {
    // Shutting down, nobody's silence is a fault (PROTOCOL §10.11): no replica or agent checks.
    d.replicaCheckAtMs = Math.max(d.replicaCheckAtMs, nowMs + r.t.replicaCheckMs);
    d.agentCheckAtMs = Math.max(d.agentCheckAtMs, nowMs + r.t.agentCheckMs);
  }
  if (d.replicaCheckAtMs <= nowMs) checkReplicas(r, nowMs, out);
  if (d.agentCheckAtMs <= nowMs) checkAgents(r, nowMs, out);
}

// ---- node failure (spec §1.3, PROTOCOL §8.4) ------------------------------------------------

/** A probe that expired longer ago than this is stale: its silence says nothing about now. */
export const staleProbe = (r: Replica, p: Probe, nowMs: number): boolean => p.expired && !p.declared && nowMs - p.deadlineMs > r.t.probeTimeoutMs;

/** Probe `agent` unless a current probe of this incarnation runs or just expired. A stale one
 *  is re-armed: the primary hears no agent heartbeats, so without this an old unanswered
 *  probe (its reply lost) would stand as a vote of "unreachable" forever, and one backup's
 *  later word would be enough to declare a healthy node failed. */
function startProbe(r: Replica, agent: ProcessId, inc: number, nowMs: number, out: CoreEffect[]): Probe {
  const d = r.detector;
  let p = d.probes.get(agent);
  if (p === undefined || p.inc !== inc || staleProbe(r, p, nowMs)) {
    p = { inc, nonce: ++d.probeNonce, deadlineMs: nowMs + r.t.probeTimeoutMs, expired: false, backupUnreachable: false, declared: false };
    d.probes.set(agent, p);
    out.push({ type: 'send', to: agent, item: { type: 'probe', nonce: p.nonce } });
    out.push({ type: 'log', level: 'warn', event: 'node.probe', fields: { agent, inc, nonce: p.nonce } });
  }
  return p;
}

/** Primary: a backup suspects `agent`'s node; `unreachable`: its probe went unanswered. */
export function onNodeSuspect(r: Replica, from: ProcessId, agent: ProcessId, inc: number, unreachable: boolean, nowMs: number, out: CoreEffect[]): void {
  if (!isPrimary(r) || !backups(r).includes(from) || !r.agentIds.has(agent)) {
    countDrop(r.drops, 'NOT_A_MEMBER');
    return;
  }
  const rec = r.state.nodes.get(agent);
  if (rec === undefined || rec.failed || rec.inc !== inc) return;
  const p = startProbe(r, agent, inc, nowMs, out);
  if (unreachable) p.backupUnreachable = true;
  declareIfDue(r, agent, p, nowMs, out);
}

/** Primary: both its own probe and a backup's went unanswered: order the node's failure. One
 *  replica alone cannot declare a node failed (a faulty backup cannot kill a healthy node). */
function declareIfDue(r: Replica, agent: ProcessId, p: Probe, nowMs: number, out: CoreEffect[]): void {
  if (!isPrimary(r) || p.declared || !p.backupUnreachable || !p.expired) return;
  p.declared = true;
  orderInput(r, { type: 'node.failed', agent, inc: p.inc }, nowMs, out);
}

/** An agent answered our probe: its node is not failed. */
export function onProbeReply(r: Replica, from: ProcessId, nonce: number): void {
  const p = r.detector.probes.get(from);
  if (p !== undefined && p.nonce === nonce && !p.declared) r.detector.probes.delete(from);
}

/** Probes past their deadline: the primary declares if a backup agreed; a backup tells it. */
export function probeTimers(r: Replica, nowMs: number, out: CoreEffect[]): void {
  for (const [agent, p] of r.detector.probes) {
    if (p.expired || p.deadlineMs > nowMs) continue;
    p.expired = true;
    if (isPrimary(r)) declareIfDue(r, agent, p, nowMs, out);
    else {
      out.push({ type: 'log', level: 'warn', event: 'node.unreachable', fields: { agent, inc: p.inc } });
      linkSend(r.links, r.state.primary, 0, { type: 'node.suspect', agent, inc: p.inc, unreachable: true }, nowMs, out);
    }
  }
}

/** Backups: a tick is ordered, so every replica applies the same ones; how fast they come is
 *  the primary's word. A primary ordering them much faster than taskTickMs (timers would
 *  expire early) is suspected (PROTOCOL §8.3); the ticks are still executed, as the order says. */
export function checkTickRate(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const d = r.detector;
  d.tickArrivals.push(nowMs);
  // Never empties: the tick just pushed is inside the window.
  for (let first = d.tickArrivals[0]; first !== undefined && first <= nowMs - TICK_RATE_WINDOW_MS; first = d.tickArrivals[0]) d.tickArrivals.shift();
  // Twice the nominal count, plus slack for a burst after a retransmission.
  const limit = 2 * Math.ceil(TICK_RATE_WINDOW_MS / r.t.taskTickMs) + TICK_RATE_SLACK;
  if (d.tickArrivals.length > limit && nowMs - d.tickRateSuspectedAtMs >= TICK_RATE_WINDOW_MS) {
    d.tickRateSuspectedAtMs = nowMs;
    suspect(r, out, r.state.primary, 'clock.rate', `${d.tickArrivals.length} ticks in ${TICK_RATE_WINDOW_MS} ms (taskTickMs ${r.t.taskTickMs})`);
  }
}

/** PROTOCOL §6.1: this replica did not run for `pausedMs` (its host starved it, or a long
 *  computation held it), so the peers' heartbeats, probe replies and orders of that time may
 *  still be unread in its sockets, and the driver runs overdue timers before it reads them. A
 *  silence judgment due now waits until the next step (1 ms on), when they have been read. The
 *  replica asks to run at least every heartbeat period, so a longer gap is a pause. */
export function afterLocalPause(r: Replica, pausedMs: number, nowMs: number, out: CoreEffect[]): void {
  const d = r.detector;
  const judgeAtMs = nowMs + 1;
  d.replicaCheckAtMs = Math.max(d.replicaCheckAtMs, judgeAtMs);
  d.agentCheckAtMs = Math.max(d.agentCheckAtMs, judgeAtMs);
  putOffDiagnosis(r.diagnosis, judgeAtMs);
  for (const p of d.probes.values()) if (!p.expired) p.deadlineMs = Math.max(p.deadlineMs, judgeAtMs);
  for (const timer of r.backup.progressTimers.values()) if (timer.atMs !== Infinity) timer.atMs = Math.max(timer.atMs, judgeAtMs);
  if (pausedMs > r.t.replicaCheckMs) out.push({ type: 'log', level: 'warn', event: 'replica.paused', fields: { pausedMs } });
}

/** The detector's next deadline: heartbeat, checks, and the probes still running. */
export function detectorNextWakeMs(d: Detector): number {
  let next = Math.min(d.replicaHeartbeatAtMs, d.replicaCheckAtMs, d.agentCheckAtMs);
  for (const p of d.probes.values()) if (!p.expired) next = Math.min(next, p.deadlineMs);
  return next;
}
