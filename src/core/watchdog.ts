// The watchdog core (the paper's spacecraft control computer, spec §1.6 and §2.3; PROTOCOL §6,
// §8.4, §10.8): a pure, deterministic step that records the replicas' heartbeats and
// self-diagnosis reports, orders the node resets the group commands (rule 1), resets the whole
// cluster when consistent heartbeats from two replicas stop (rule 2) or self-diagnosis repeats
// too often (rule 3), and answers operator status queries. It is kept tiny and never sends on
// the routine path (spec §1.6: "must not be burdened with routine operation").
// The state is one WatchdogState record (watchdog-state.ts); its verbs live by responsibility in
// watchdog-liveness.ts (rules 2 and 3), watchdog-resets.ts (rule 1, shutdown, cluster reset,
// added replicas) and watchdog-restore.ts (journals and restores). This file answers status
// queries and holds `stepWatchdog`, the dispatch from an input to those verbs.
import { admitChallenge, issueChallenge } from './freshness.ts';
import type { Core, CoreEffect, WatchdogInput } from './node.ts';
import type { ProcessId } from './ports.ts';
import { unreachable } from '../base/result.ts';
import type { PeerHealth } from './status.ts';
import { checkSilence, noteInput, onDiagReport, onHeartbeat, silenceDeadlineMs, tally } from './watchdog-liveness.ts';
import { endShutdown, onReplicaKeys, onResetRequest, onShutdownNotice } from './watchdog-resets.ts';
import { onJournal, onRestoreLoad, onRestoreReply, sendRestores } from './watchdog-restore.ts';
import {
  createWatchdogState, ignore, SCC_SHUTDOWN_LINGER_MS, WATCHDOG_LATE_PERIODS, WATCHDOG_SILENT_PERIODS,
  type WatchdogOptions, type WatchdogState, type WatchdogStatus,
} from './watchdog-state.ts';
import type { Item } from './wire/messages.ts';

/** Status to operators and agents, on a fresh challenge only (PROTOCOL §7): a replayed query
 *  costs a lookup and gets nothing. */
export function onStatusQuery(s: WatchdogState, from: ProcessId, nowMs: number, item: Extract<Item, { type: 'status.query' | 'challenge.ask' }>, out: CoreEffect[]): void {
  if (!s.statusClients.has(from)) return ignore(s, 'NOT_A_MEMBER');
  if (item.type === 'challenge.ask') {
    out.push({ type: 'send', to: from, item: { type: 'challenge', nonce: item.nonce, challenge: issueChallenge(s.freshness, nowMs) } });
    return;
  }
  const verdict = admitChallenge(s.freshness, from, item.challenge, nowMs);
  if (verdict !== 'fresh') return ignore(s, verdict);
  out.push({ type: 'send', to: from, item: { type: 'status.reply', nonce: item.nonce, json: JSON.stringify(watchdogStatus(s, nowMs)) } });
}
// ---- status ------------------------------------------------------------------------------

function health(s: WatchdogState, ageMs: number | null): PeerHealth {
  if (ageMs === null) return 'unknown';
  if (ageMs <= WATCHDOG_LATE_PERIODS * s.periodMs) return 'healthy';
  if (ageMs <= WATCHDOG_SILENT_PERIODS * s.periodMs) return 'late';
  return 'silent';
}

export function watchdogStatus(s: WatchdogState, nowMs: number): WatchdogStatus {
  const initial = new Set(s.membership.replicas);
  const listed = [...new Set([...s.membership.replicas, ...s.membership.spareReplicas, ...s.learnt])]
    .filter((r) => initial.has(r) || s.records.has(r) || s.reportSequences.has(r));
  return {
    id: s.id,
    role: 'watchdog',
    inc: s.inc,
    replicas: listed.map((r) => {
      const rec = s.records.get(r);
      const age = rec === undefined ? null : Math.max(0, nowMs - rec.lastAtMs);
      return {
        id: r,
        inc: rec?.inc ?? null,
        counter: rec?.counter ?? null,
        lastHeartbeatAgeMs: age,
        health: health(s, age),
        role: rec?.role ?? null,
        rsn: rec?.rsn ?? null,
        gssn: rec?.gssn ?? null,
        view: rec?.view ?? null,
        digest: rec?.digest ?? null,
        heartbeats: rec?.heartbeats ?? 0,
        replays: s.replays.get(r) ?? 0,
        diagnosisReports: s.reportSequences.get(r)?.reports ?? 0,
      };
    }),
    ignored: s.ignored,
    resets: s.resets.map((r) => ({ ...r, requestedBy: [...r.requestedBy] })),
    drops: { ...s.drops },
    armed: s.armed,
    silenceDeadlineMs: silenceDeadlineMs(s),
    diagnosisInWindow: tally(s, nowMs).total,
    diagnosisReports: s.diagnoses.map((d) => ({ ...d })),
    clusterResets: s.clusterResets.map((c) => ({ ...c })),
    clusterResetCount: s.clusterResetCount,
    shutdown: s.shutDown === null ? null : { rsn: s.shutDown.rsn, by: [...s.shutDown.by], atMs: s.shutDown.atMs },
    journalsKept: [...s.journalsKept].map(([replica, j]) => ({ replica, inc: j.inc, rsn: j.rsn, tasks: j.tasks })),
    restoresPending: [...s.restoring].map(([nonce, p]) => ({ task: p.label, nonce })),
    restores: s.restores.map((r) => ({ ...r })),
    ...(s.daemon === undefined ? {} : { daemon: s.daemon() }),
  };
}

/** One item of a frame, to the verb that takes it from this sender. */
function onItem(s: WatchdogState, from: ProcessId, nowMs: number, item: Item, out: CoreEffect[]): void {
  switch (item.type) {
    case 'hb': return onHeartbeat(s, from, nowMs, item, out);
    case 'diag.report': return onDiagReport(s, from, nowMs, item, out);
    case 'reset.node': return onResetRequest(s, from, nowMs, item, out);
    case 'shutdown.notice': return onShutdownNotice(s, from, nowMs, item, out);
    case 'replica.keys': return onReplicaKeys(s, from, item, out);
    case 'tasks.journal': return onJournal(s, from, item, out);
    case 'op.reply': return s.replicaIds.has(from) ? onRestoreReply(s, from, nowMs, item, out) : ignore(s, 'UNEXPECTED');
    case 'status.query':
    case 'challenge.ask': return onStatusQuery(s, from, nowMs, item, out);
    default: return ignore(s, 'UNEXPECTED');
  }
}

export function stepWatchdog(s: WatchdogState, input: WatchdogInput): CoreEffect[] {
  const out: CoreEffect[] = [];
  // Every input carries the time: a silence deadline that has passed acts before the input
  // (a heartbeat arriving after the deadline does not undo the silence before it).
  noteInput(s, input.nowMs, out);
  checkSilence(s, input.nowMs, out);
  switch (input.type) {
    case 'frame':
      for (const item of input.frame.items) onItem(s, input.frame.from, input.nowMs, item, out);
      break;
    case 'dropped':
      s.drops[input.code] = (s.drops[input.code] ?? 0) + 1;
      break;
    case 'tick':
    case 'transport.up':
    case 'transport.down':
    case 'notice': // the watchdog sends no lane-0 message
      break;
    case 'restore.load':
      onRestoreLoad(s, input.nowMs, input.journals, out);
      break;
    default:
      return unreachable(input);
  }
  sendRestores(s, input.nowMs, out);
  endShutdown(s, input.nowMs, out);
  return out;
}

/** The watchdog's next wake-up: the silence deadline, the next restore send, the next period
 *  while armed, or the end of a shutdown's linger, whichever comes first. */
export function watchdogWakeMs(s: WatchdogState): number | null {
  const silence = silenceDeadlineMs(s);
  const restore = s.restoring.size > 0 && s.armed ? s.restoreAtMs : null;
  // Armed, it wakes every period as well, so that a long gap between inputs is a stall.
  const beat = s.armed && s.lastInputMs !== null ? s.lastInputMs + s.periodMs : null;
  const stop = s.shutDown !== null && !s.shutDown.exited ? s.shutDown.atMs + SCC_SHUTDOWN_LINGER_MS : null;
  const due = [silence, restore, beat, stop].filter((x): x is number => x !== null);
  return due.length === 0 ? null : Math.min(...due);
}

/** The watchdog as a Core for its drivers (src/daemon/scc.ts, src/sim/sim-watchdog.ts). */
export function createWatchdog(opts: WatchdogOptions): Core<WatchdogInput> & { status(nowMs: number): WatchdogStatus } {
  const s = createWatchdogState(opts);
  return {
    id: s.id,
    step: (input) => stepWatchdog(s, input),
    nextWakeMs: () => watchdogWakeMs(s),
    status: (nowMs) => watchdogStatus(s, nowMs),
  };
}
