// The watchdog's failure detection (spec §1.6 rules 2 and 3; PROTOCOL §6, §10.8): the replicas'
// heartbeats and whether two of them still agree (rule 2), the watchdog's own stalls, and the
// self-diagnosis initiations counted towards rule 3. Either rule, when it fires, hands over to
// resetCluster (watchdog-resets.ts). Verbs over WatchdogState (watchdog-state.ts).
import { QUORUM } from './constants.ts';
import { toHex } from '../base/hex.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import { resetCluster } from './watchdog-resets.ts';
import {
  ignore, MAX_COUNTED_INITIATIONS, MAX_DIAGNOSIS_HISTORY, newer, push, replayed, sinceReset, WATCHDOG_STALL_PERIODS, type WatchdogState,
} from './watchdog-state.ts';
import type { Item } from './wire/messages.ts';

// ---- rule 2: consistent heartbeats from two replicas ------------------------------------

/** Under the current records, the end of the last moment at which two distinct replicas of
 *  the restarted group had fresh heartbeats (age ≤ freshMs) reporting the same view — in the
 *  future while that still holds — or null if the current records never show it. "Consistent"
 *  is spec §1.6's word; the paper leaves it open, and the view is what a correct group agrees
 *  on even while its RSNs and digests move. */
export function consistentUntilMs(s: WatchdogState): number | null {
  const byView = new Map<number, number[]>();
  for (const [from, r] of s.records) {
    if (sinceReset(s, from, r.inc)) byView.set(r.view, [...(byView.get(r.view) ?? []), r.lastAtMs]);
  }
  let best: number | null = null;
  for (const times of byView.values()) {
    times.sort((a, b) => b - a);
    // Two heartbeats were fresh together iff the later arrived within freshMs of the earlier;
    // the newest such adjacent pair stays consistent the longest.
    for (let i = 0; i + 1 < times.length; i++) {
      const later = times[i] ?? 0;
      const earlier = times[i + 1] ?? 0;
      if (later - earlier > s.freshMs) continue;
      if (best === null || earlier + s.freshMs > best) best = earlier + s.freshMs;
      break;
    }
  }
  return best;
}

export function silenceDeadlineMs(s: WatchdogState): number | null {
  if (!s.armed) return null;
  const end = Math.max(s.consistentPastMs ?? -Infinity, consistentUntilMs(s) ?? -Infinity);
  return Number.isFinite(end) ? Math.max(end + s.watchdogSilenceMs, s.stallGraceUntilMs) : null;
}

/** See WATCHDOG_STALL_PERIODS. */
export function noteInput(s: WatchdogState, nowMs: number, out: CoreEffect[]): void {
  if (s.armed && s.lastInputMs !== null && nowMs - s.lastInputMs > WATCHDOG_STALL_PERIODS * s.periodMs) {
    s.stallGraceUntilMs = nowMs + s.freshMs;
    out.push({ type: 'log', level: 'warn', event: 'watchdog.stalled', fields: { forMs: nowMs - s.lastInputMs, graceMs: s.freshMs } });
  }
  s.lastInputMs = nowMs;
}

/** Spec §1.6 rule 2: armed, and for watchdogSilenceMs never two consistent fresh heartbeats. */
export function checkSilence(s: WatchdogState, nowMs: number, out: CoreEffect[]): void {
  const deadline = silenceDeadlineMs(s);
  if (deadline === null || nowMs < deadline) return;
  const heard = [...s.records]
    .filter(([from, r]) => sinceReset(s, from, r.inc) && nowMs - r.lastAtMs <= s.freshMs)
    .map(([from, r]) => `${from} (view ${r.view})`);
  const fresh = heard.length === 0 ? 'no replica' : heard.join(', ');
  resetCluster(s, nowMs, 'heartbeats', `no consistent heartbeats from two replicas for ${s.watchdogSilenceMs} ms; fresh now: ${fresh}`, out);
}

/** Heartbeats from the manager group (PROTOCOL §6). Replays never refresh liveness. */
export function onHeartbeat(s: WatchdogState, from: ProcessId, nowMs: number, item: Extract<Item, { type: 'hb' }>, out: CoreEffect[]): void {
  if (!s.replicaIds.has(from) || item.info.type !== 'replica') {
    ignore(s, s.replicaIds.has(from) ? 'UNEXPECTED' : 'NOT_A_MEMBER');
    return;
  }
  const rec = s.records.get(from);
  if (!newer(item.inc, item.counter, rec)) {
    s.replays.set(from, (s.replays.get(from) ?? 0) + 1);
    replayed(s, 'hb.replayed', from, item, out);
    return;
  }
  if (rec !== undefined && item.inc !== rec.inc) {
    out.push({ type: 'log', level: 'info', event: 'replica.restarted', fields: { replica: from, inc: item.inc } });
  }
  // The records current until now held up to now; this heartbeat replaces one of them.
  const before = consistentUntilMs(s);
  if (before !== null) s.consistentPastMs = Math.max(s.consistentPastMs ?? -Infinity, Math.min(before, nowMs));
  s.records.set(from, {
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
  const after = consistentUntilMs(s);
  // A cluster shut down by the operator stays disarmed (PROTOCOL §10.11): its replicas may
  // still heartbeat, consistent, while they wind down.
  if (!s.armed && s.shutDown === null && after !== null && after >= nowMs) {
    s.armed = true;
    out.push({ type: 'log', level: 'info', event: 'watchdog.armed', fields: { replica: from, view: item.info.view } });
  }
}

// ---- rule 3: self-diagnosis initiations -------------------------------------------------

/** Counted initiations within the window, each sender's share capped at perSenderCap. */
export function tally(s: WatchdogState, nowMs: number): { total: number; senders: ProcessId[] } {
  const bySender = new Map<ProcessId, number>();
  for (const c of s.counted) if (nowMs - c.atMs < s.diagnosisWindowMs) bySender.set(c.from, (bySender.get(c.from) ?? 0) + 1);
  let total = 0;
  for (const n of bySender.values()) total += Math.min(n, s.perSenderCap);
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
export function onDiagReport(s: WatchdogState, from: ProcessId, nowMs: number, item: Extract<Item, { type: 'diag.report' }>, out: CoreEffect[]): void {
  if (!s.replicaIds.has(from)) {
    ignore(s, 'NOT_A_MEMBER');
    return;
  }
  const seq = s.reportSequences.get(from);
  if (!newer(item.inc, item.counter, seq)) {
    replayed(s, 'diag.replayed', from, item, out);
    return;
  }
  s.reportSequences.set(from, { inc: item.inc, counter: item.counter, reports: (seq?.reports ?? 0) + 1 });
  const last = s.lastCountedAtMs.get(from);
  const counts = sinceReset(s, from, item.inc) && (last === undefined || nowMs - last >= s.diagnosisTimeoutMs);
  push(s.diagnoses, { atMs: nowMs, from, view: item.view, reason: item.reason, target: item.target, counted: counts }, MAX_DIAGNOSIS_HISTORY);
  out.push({
    type: 'log', level: counts ? 'info' : 'debug', event: 'diag.report',
    fields: { from, view: item.view, reason: item.reason, target: item.target, counted: counts },
  });
  if (!counts) return;
  s.lastCountedAtMs.set(from, nowMs);
  while (s.counted.length > 0 && nowMs - (s.counted[0]?.atMs ?? nowMs) >= s.diagnosisWindowMs) s.counted.shift();
  push(s.counted, { atMs: nowMs, from }, MAX_COUNTED_INITIATIONS);
  const { total, senders } = tally(s, nowMs);
  if (total <= s.diagnosisThreshold || senders.length < QUORUM) return;
  resetCluster(s, nowMs, 'diagnosis',
    `${total} self-diagnosis initiations from ${senders.join(', ')} within ${s.diagnosisWindowMs} ms (threshold ${s.diagnosisThreshold})`, out);
}
