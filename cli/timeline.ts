// The cluster's life as the operator reads it: the replicas' event journals merged into one log
// (each replica journals what it applied, stamped with its own clock; one event is in several
// journals), their self-diagnosis records, and the episodes these make — a fault, its detection
// and the recovery, with their latencies. `trine events` prints them, `trine dashboard` draws
// them (docs/OPERATIONS.md §10, §11). Pure: status replies in, records out; no I/O, no clock.
//
// An episode is paired from the events' kinds (src/core/status.ts EventKind), not their text:
//   replica   last heartbeat (a suspicion "no heartbeat for N ms" dates it) → first suspicion →
//             condemned (ordered) → replacement commanded → replacement joined (installed);
//   process   died (the group ordered its agent's report of the exit) → a replacement in the
//             same task running, or the task finished (then it ended, nothing replaced it);
//   node      lost (declared failed) → a node of that name joined again.
// A replica's death itself is not observed by anyone: its last heartbeat is the latest time it
// is known to have run. A process's exit is reported by its agent as it happens, so the group's
// time for it is the death's time to within the ordering delay.
import type { ClusterEvent, ReplicaStatus } from '../src/core/status.ts';

export type DiagnosisEntry = ReplicaStatus['diagnosis'][number];

/** One replica's journals as it answered. */
export type ReplicaJournal = { id: string; events: readonly ClusterEvent[]; diagnosis: readonly DiagnosisEntry[] };

/** An event of the merged log, with the replicas whose journals hold it. */
export type LogEvent = ClusterEvent & { from: string[] };

/** A self-diagnosis record, with the replica that keeps it. */
export type LogDiagnosis = DiagnosisEntry & { replica: string };

export type Step = { label: string; atMs: number };

export type Episode = {
  /** Stable across polls: `replica:r1:3` (condemned in view… / at RSN 3), `proc:t1/2:41`, `node:n4:57`. */
  id: string;
  what: 'replica' | 'process' | 'node';
  /** `r1`, `t1/2`, `n4`. */
  subject: string;
  /** `silent`, `SIGKILL`, … */
  cause: string;
  /** `detecting`: suspected, not yet condemned; `recovering`: known, nothing replaced it yet;
   *  `recovered`; `ended`: a process whose task finished instead of replacing it. */
  state: 'detecting' | 'recovering' | 'recovered' | 'ended';
  /** Oldest first: the fault (or the earliest time known for it), detection, recovery. */
  steps: Step[];
  /** Fault (last heartbeat, else first suspicion) → the group's knowledge (condemnation);
   *  null when the fault's time is the knowledge's own (a process, a node). */
  detectionMs: number | null;
  /** The group's knowledge → the replacement installed or running (or the node back). */
  recoveryMs: number | null;
};

/** Events a merged log keeps: each replica journals at most MAX_JOURNAL_EVENTS (512), and the
 *  replicas mostly hold the same ones. */
export const MAX_LOG_EVENTS = 2_048;

const eventKey = (e: Pick<ClusterEvent, 'rsn' | 'text'>) => `${e.rsn}\u0000${e.text}`;
export const diagnosisKey = (d: LogDiagnosis) => `${d.replica}\u0000${d.atMs}\u0000${d.kind}\u0000${d.target}\u0000${d.by}\u0000${d.view}`;

/** One log of every replica's events: an event applied at one RSN is the same event in every
 *  journal (the replicated state makes it), so (rsn, text) identifies it; its time is the
 *  earliest replica's. Ordered by RSN, then by position in the journals. */
export function mergeEvents(journals: readonly ReplicaJournal[]): LogEvent[] {
  const byKey = new Map<string, { e: LogEvent; pos: number }>();
  for (const j of journals) {
    j.events.forEach((e, pos) => {
      const k = eventKey(e);
      const seen = byKey.get(k);
      if (seen === undefined) byKey.set(k, { e: { ...e, from: [j.id] }, pos });
      else {
        if (!seen.e.from.includes(j.id)) seen.e.from.push(j.id);
        seen.e.atMs = Math.min(seen.e.atMs, e.atMs);
      }
    });
  }
  const all = [...byKey.values()].sort((a, b) => a.e.rsn - b.e.rsn || a.pos - b.pos).map((x) => x.e);
  return all.slice(Math.max(0, all.length - MAX_LOG_EVENTS));
}

/** Every replica's self-diagnosis records (each replica's own judgement: not merged). */
export function collectDiagnosis(journals: readonly ReplicaJournal[]): LogDiagnosis[] {
  const byKey = new Map<string, LogDiagnosis>();
  for (const j of journals) for (const d of j.diagnosis) byKey.set(diagnosisKey({ ...d, replica: j.id }), { ...d, replica: j.id });
  return [...byKey.values()].sort((a, b) => a.atMs - b.atMs);
}

const SILENT_FOR = /^no heartbeat for ([0-9]+) ms$/;
/** How far before a condemnation its suspicions are looked for: a condemnation follows the
 *  first suspicion within a diagnosis timeout (400 ms) and the ordering of the evidence. */
export const SUSPICION_WINDOW_MS = 5_000;
/** The first event after `after` in the log (merged order: RSN, then journal order) passing `ok`. */
const firstAfter = (events: readonly LogEvent[], after: LogEvent, ok: (e: LogEvent) => boolean): LogEvent | undefined => {
  const i = events.indexOf(after);
  return events.slice(i + 1).find(ok);
};

/** A condemned replica's episode: its suspicions are the diagnosis records against it since
 *  its previous condemnation (ids are reused only for a retired spare started again). */
function replicaEpisode(events: readonly LogEvent[], diagnosis: readonly LogDiagnosis[], c: LogEvent, sinceMs: number): Episode {
  const target = c.subject ?? '';
  // The diagnosis that led here: suspicions since its previous condemnation and within
  // SUSPICION_WINDOW_MS (an older one, e.g. of a replica slow to start, was cleared).
  const against = diagnosis.filter((d) => d.target === target && d.atMs > Math.max(sinceMs, c.atMs - SUSPICION_WINDOW_MS) && d.atMs <= c.atMs);
  // The fault is after the last heartbeat any replica received: the latest one they report.
  const heartbeats = against.flatMap((d) => {
    const m = d.kind === 'initiated' ? SILENT_FOR.exec(d.detail) : null;
    return m === null ? [] : [d.atMs - Number(m[1])];
  });
  const lastHeartbeatMs = heartbeats.length === 0 ? null : Math.max(...heartbeats);
  const suspicion = against.find((d) => (d.kind === 'initiated' || d.kind === 'accused') && d.atMs >= (lastHeartbeatMs ?? -Infinity));
  // Why: the accusation reason the replicas recorded with the condemnation (the evidence's).
  const cause = against.find((d) => d.kind === 'condemned')?.reason ?? suspicion?.reason ?? 'unknown';
  const steps: Step[] = [];
  if (lastHeartbeatMs !== null) steps.push({ label: `${target}: last heartbeat`, atMs: lastHeartbeatMs });
  if (suspicion !== undefined) steps.push({ label: `${suspicion.by} suspects ${target} (${suspicion.reason})`, atMs: suspicion.atMs });
  steps.push({ label: `${target} condemned (${cause})`, atMs: c.atMs });
  const faultMs = lastHeartbeatMs ?? suspicion?.atMs ?? null;
  let from = c;
  let recoveredMs: number | null = null;
  // The replacement: commanded, perhaps abandoned and commanded again elsewhere, then joined.
  for (;;) {
    const start = firstAfter(events, from, (e) => e.kind === 'replica.starting' || e.kind === 'replica.condemned');
    if (start === undefined || start.kind !== 'replica.starting') break;
    steps.push({ label: start.text, atMs: start.atMs });
    const end = firstAfter(events, start, (e) => (e.kind === 'replica.joined' || e.kind === 'replica.abandoned') && e.subject === start.subject);
    if (end === undefined) break;
    steps.push({ label: end.kind === 'replica.joined' ? `${start.subject ?? '?'} joined (installed)` : end.text, atMs: end.atMs });
    from = end;
    if (end.kind === 'replica.joined') {
      recoveredMs = end.atMs;
      break;
    }
  }
  return {
    id: `replica:${target}:${c.rsn}`, what: 'replica', subject: target, cause, state: recoveredMs === null ? 'recovering' : 'recovered', steps,
    detectionMs: faultMs === null ? null : c.atMs - faultMs, recoveryMs: recoveredMs === null ? null : recoveredMs - c.atMs,
  };
}

function processEpisode(events: readonly LogEvent[], d: LogEvent): Episode {
  const task = d.task ?? '?';
  const subject = `${task}/${d.vpid ?? '?'}`;
  const cause = d.text.replace(/^.* terminated abnormally: /, '');
  const steps: Step[] = [{ label: `${subject} died (${cause})${d.subject === undefined ? '' : ` on ${d.subject}`}`, atMs: d.atMs }];
  const before = new Set(events.filter((e) => e.task === task && e.rsn <= d.rsn && e.vpid !== null).map((e) => e.vpid));
  const replacement = firstAfter(events, d, (e) => e.task === task && e.kind === 'proc.running' && !before.has(e.vpid));
  const finished = firstAfter(events, d, (e) => e.task === task && e.kind === 'task.finished');
  const base = { id: `proc:${subject}:${d.rsn}`, what: 'process' as const, subject, cause, detectionMs: null };
  if (replacement !== undefined && (finished === undefined || events.indexOf(replacement) < events.indexOf(finished))) {
    steps.push({ label: `replacement ${task}/${replacement.vpid ?? '?'} running${replacement.subject === undefined ? '' : ` on ${replacement.subject}`}`, atMs: replacement.atMs });
    return { ...base, state: 'recovered', steps, recoveryMs: replacement.atMs - d.atMs };
  }
  if (finished !== undefined) {
    steps.push({ label: finished.text, atMs: finished.atMs });
    return { ...base, state: 'ended', steps, recoveryMs: null };
  }
  return { ...base, state: 'recovering', steps, recoveryMs: null };
}

function nodeEpisode(events: readonly LogEvent[], l: LogEvent): Episode {
  const node = l.subject ?? '?';
  const steps: Step[] = [{ label: l.text, atMs: l.atMs }];
  const back = firstAfter(events, l, (e) => e.kind === 'node.joined' && e.subject === node);
  if (back !== undefined) steps.push({ label: back.text, atMs: back.atMs });
  return {
    id: `node:${node}:${l.rsn}`, what: 'node', subject: node, cause: 'lost', state: back === undefined ? 'recovering' : 'recovered', steps,
    detectionMs: null, recoveryMs: back === undefined ? null : back.atMs - l.atMs,
  };
}

/** How long an accusation no condemnation followed is shown as a diagnosis under way: a
 *  condemnation follows once a second replica accuses too, within a diagnosis timeout (400 ms)
 *  and ordering; one accuser alone (a faulty one, or a cut link) condemns nobody. */
export const OPEN_SUSPICION_MS = 5_000;

/** The replicas under diagnosis now: an accusation of a current member, newer than its last
 *  condemnation and than `nowMs - OPEN_SUSPICION_MS`, one episode per target. A suspicion alone
 *  (a missed heartbeat) is not shown: most clear at the next heartbeat (a replica starting, a
 *  loaded host); an accusation follows one that did not (PROTOCOL §10.2). */
function openSuspicions(diagnosis: readonly LogDiagnosis[], condemnedAt: ReadonlyMap<string, number>, members: ReadonlySet<string>, nowMs: number): Episode[] {
  const out = new Map<string, Episode>();
  for (const d of diagnosis) {
    if (d.kind !== 'accused' || !members.has(d.target) || out.has(d.target)) continue;
    if (d.atMs <= (condemnedAt.get(d.target) ?? -Infinity) || d.atMs < nowMs - OPEN_SUSPICION_MS) continue;
    out.set(d.target, {
      id: `suspect:${d.target}:${d.atMs}`, what: 'replica', subject: d.target, cause: d.reason, state: 'detecting',
      steps: [{ label: `${d.by} accuses ${d.target} (${d.reason})`, atMs: d.atMs }], detectionMs: null, recoveryMs: null,
    });
  }
  return [...out.values()];
}

/** The episodes in `events` (merged, RSN order) and `diagnosis`, oldest first; with `now`
 *  (the group's members and the time), also the suspicions under way. */
export function episodes(events: readonly LogEvent[], diagnosis: readonly LogDiagnosis[], now?: { members: readonly string[]; nowMs: number }): Episode[] {
  const out: Episode[] = [];
  const lastCondemned = new Map<string, number>();
  for (const e of events) {
    if (e.kind === 'replica.condemned' && e.subject !== undefined) {
      out.push(replicaEpisode(events, diagnosis, e, lastCondemned.get(e.subject) ?? -Infinity));
      lastCondemned.set(e.subject, e.atMs);
    } else if (e.kind === 'proc.died') out.push(processEpisode(events, e));
    else if (e.kind === 'node.lost') out.push(nodeEpisode(events, e));
  }
  if (now !== undefined) out.push(...openSuspicions(diagnosis, lastCondemned, new Set(now.members), now.nowMs));
  return out.sort((a, b) => (a.steps[0]?.atMs ?? 0) - (b.steps[0]?.atMs ?? 0));
}

/** The journals in status replies (only a well-formed `cluster` view counts). */
export function journalsOf(statuses: Iterable<ReplicaStatus>, parse: (v: unknown) => { events: ClusterEvent[] } | null): ReplicaJournal[] {
  return [...statuses].map((s) => ({ id: s.id, events: parse((s as ReplicaStatus & { cluster?: unknown }).cluster)?.events ?? [], diagnosis: s.diagnosis }));
}

// ---- following: what is new since the last look ------------------------------------------

/** Keys remembered by a follower: far more than one look returns (MAX_LOG_EVENTS and the
 *  replicas' diagnosis histories), so nothing is printed twice while it is in the journals. */
export const MAX_SEEN_KEYS = 16_384;

export type LogItem =
  | { type: 'event'; event: LogEvent }
  | { type: 'diagnosis'; diagnosis: LogDiagnosis }
  | { type: 'episode'; episode: Episode };

/** Remembers what was shown: each look returns only the events, diagnosis records and settled
 *  episodes not shown before, in order, whichever replicas answered this time. */
export class LogFollower {
  private readonly seen = new Set<string>();
  private readonly order: string[] = [];

  private fresh(key: string): boolean {
    if (this.seen.has(key)) return false;
    this.seen.add(key);
    this.order.push(key);
    if (this.order.length > MAX_SEEN_KEYS) this.seen.delete(this.order.shift() as string);
    return true;
  }

  /** New items of one look. Episodes are shown once settled (recovered or ended), or when
   *  `all`: every episode as it stands, each state once. */
  take(journals: readonly ReplicaJournal[]): LogItem[] {
    const events = mergeEvents(journals);
    const diagnosis = collectDiagnosis(journals);
    const items: (LogItem & { atMs: number })[] = [];
    for (const e of events) if (this.fresh(`e\u0000${eventKey(e)}`)) items.push({ type: 'event', event: e, atMs: e.atMs });
    for (const d of diagnosis) if (this.fresh(`d\u0000${diagnosisKey(d)}`)) items.push({ type: 'diagnosis', diagnosis: d, atMs: d.atMs });
    // Events first in RSN order (merged), diagnosis records placed by time among them.
    const ordered = mergeByTime(items);
    for (const ep of episodes(events, diagnosis)) {
      if (ep.state !== 'recovered' && ep.state !== 'ended') continue;
      if (this.fresh(`p\u0000${ep.id}`)) ordered.push({ type: 'episode', episode: ep });
    }
    return ordered;
  }
}

/** Events keep their RSN order; a diagnosis record goes before the first event stamped later. */
function mergeByTime(items: readonly (LogItem & { atMs: number })[]): LogItem[] {
  const events = items.filter((i) => i.type === 'event');
  const diags = items.filter((i) => i.type !== 'event');
  const out: LogItem[] = [];
  let d = 0;
  for (const e of events) {
    while (d < diags.length && (diags[d]?.atMs ?? Infinity) < e.atMs) out.push(strip(diags[d++] as LogItem & { atMs: number }));
    out.push(strip(e));
  }
  while (d < diags.length) out.push(strip(diags[d++] as LogItem & { atMs: number }));
  return out;
}

const strip = ({ atMs: _atMs, ...item }: LogItem & { atMs: number }): LogItem => item as LogItem;

// ---- text --------------------------------------------------------------------------------

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);
const ms = (v: number | null) => (v === null ? '-' : `${v} ms`);

/** One line of `trine events` (UTC times: each replica's clock, the earliest one's). */
export function formatItem(item: LogItem): string {
  switch (item.type) {
    case 'event': {
      const e = item.event;
      return `${clock(e.atMs)}  ${String(e.rsn).padStart(6)}  ${e.text}`;
    }
    case 'diagnosis': {
      const d = item.diagnosis;
      const what = d.kind === 'initiated' ? `suspects ${d.target || 'the group'}`
        : d.kind === 'accused' ? `accuses ${d.target}`
          : d.kind === 'accusation' ? `hears ${d.by} accuse ${d.target}`
            : `sees ${d.target} condemned by ${d.by}`;
      return `${clock(d.atMs)}       -  ${d.replica} ${what} (${d.reason})${d.detail === '' ? '' : `: ${d.detail}`}`;
    }
    case 'episode':
      return formatEpisode(item.episode);
    default: {
      const never: never = item;
      return never;
    }
  }
}

/** "  => replica r1 (silent): detected in 612 ms, recovered in 1830 ms: last heartbeat → …". */
export function formatEpisode(ep: Episode): string {
  const first = ep.steps[0]?.atMs ?? 0;
  const path = ep.steps.map((s, i) => (i === 0 ? s.label : `+${s.atMs - first} ms ${s.label}`)).join(' → ');
  const outcome = ep.state === 'ended' ? 'not replaced' : `recovered in ${ms(ep.recoveryMs)}`;
  // A process's exit and a node's loss are known when the group orders them: no earlier time.
  const detected = ep.detectionMs === null ? 'known when ordered' : `detected in ${ms(ep.detectionMs)}`;
  return `${clock(first)}       => ${ep.what} ${ep.subject} (${ep.cause}): ${detected}, ${outcome}: ${path}`;
}
