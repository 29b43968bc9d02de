// The manager group as the operator sees it (docs/PROTOCOL.md §10): which replicas form the
// current view and who is its primary, which ids are retired and why, the replacement under
// way, and the recent condemnations, all worked out from the replicas' status replies. The
// group changes (a condemned replica is removed, a spare id joins), so `trine status` and the
// task commands follow it instead of assuming the initial three of cluster.json.
// Pure: no I/O here; cli/status-client.ts asks, cli/status-report.ts shows.
import type { Membership } from '../src/core/node.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { ClusterEvent, ReplicaStatus } from '../src/core/status.ts';
import type { MovedPort } from '../src/core/wire/messages.ts';
import { AGREEING_REPLIES, parseClusterView } from './replies.ts';

export type ReplicaPhase = ReplicaStatus['phase'];
type GroupStatus = Pick<ReplicaStatus, 'id' | 'view' | 'members' | 'primary' | 'phase'>;

/** A replica that speaks for its view: `serving`, or `syncing` (a member aligning its log with
 *  the other before a primary change is ordered, PROTOCOL §10.5: still a member of its view).
 *  An `installing` replacement has no state yet and a `retired` one has left the group. */
export const inService = (s: Pick<ReplicaStatus, 'phase'>): boolean => s.phase === 'serving' || s.phase === 'syncing';

export type GroupPick = {
  /** The view number; null when no replica in service answered. */
  view: number | null;
  members: ProcessId[];
  primary: ProcessId | null;
  /** Replicas in service that report exactly this view, members and primary. */
  confirmedBy: ProcessId[];
  /** `agreed`: AGREEING_REPLIES replicas in service report it identically (trustworthy: with
   *  f = 1 one of two is correct); `unconfirmed`: one replica alone reports it (a view change
   *  half applied, or a faulty replica); `assumed`: no replica in service answered, so this is
   *  the initial group of cluster.json, not an observation. */
  basis: 'agreed' | 'unconfirmed' | 'assumed';
  /** Replicas in service that report a view above an agreed one, which nobody confirms. */
  ahead: { id: ProcessId; view: number; members: ProcessId[]; primary: ProcessId }[];
};

const groupKey = (s: GroupStatus) => JSON.stringify([s.view, s.members, s.primary]);

/** The current group: the highest view two replicas in service report identically (view,
 *  members, primary). With f = 1 a single replica's claim may be a lie, and two correct
 *  replicas report the same group once both executed the change (every correct replica changes
 *  the group at the same RSN, PROTOCOL §10.1). If no two agree, the highest view one replica in
 *  service reports, marked unconfirmed; if none is in service, the initial three. */
export function pickGroup(membership: Pick<Membership, 'replicas'>, answers: Iterable<GroupStatus>): GroupPick {
  const serving = [...answers].filter(inService);
  const groups = new Map<string, GroupStatus[]>();
  for (const s of serving) groups.set(groupKey(s), [...(groups.get(groupKey(s)) ?? []), s]);
  let best: { first: GroupStatus; all: GroupStatus[] } | null = null;
  for (const g of groups.values()) {
    const first = g[0];
    if (first === undefined || g.length < AGREEING_REPLIES) continue;
    if (best === null || first.view > best.first.view || (first.view === best.first.view && g.length > best.all.length)) best = { first, all: g };
  }
  if (best !== null) {
    const a = best.first;
    return {
      view: a.view, members: [...a.members], primary: a.primary, confirmedBy: best.all.map((s) => s.id), basis: 'agreed',
      ahead: serving.filter((s) => s.view > a.view).map((s) => ({ id: s.id, view: s.view, members: [...s.members], primary: s.primary })),
    };
  }
  const top = serving.reduce<GroupStatus | null>((x, s) => (x === null || s.view > x.view ? s : x), null);
  if (top !== null) {
    const confirmedBy = groups.get(groupKey(top))?.map((s) => s.id) ?? [top.id];
    return { view: top.view, members: [...top.members], primary: top.primary, confirmedBy, basis: 'unconfirmed', ahead: [] };
  }
  return { view: null, members: [...membership.replicas], primary: membership.replicas[0] ?? null, confirmedBy: [], basis: 'assumed', ahead: [] };
}

/** Whether the replicas still pending can no longer change what `trine status` shows, so the
 *  query may stop before its timeout: two replicas in service agree on the group, and every
 *  pending replica is known to be dead (its pid file names a process that is gone), or is
 *  neither running nor a member. Waiting for a replica that cannot answer only delays the
 *  report; a member that runs but does not answer (hung) is waited for. */
export function statusSettled(
  membership: Pick<Membership, 'replicas'>,
  answered: ReadonlyMap<ProcessId, GroupStatus>,
  pending: readonly ProcessId[],
  running: ReadonlySet<ProcessId>,
  dead: ReadonlySet<ProcessId> = new Set(),
): boolean {
  if (pending.length === 0) return true;
  const g = pickGroup(membership, answered.values());
  return g.basis === 'agreed' && pending.every((id) => dead.has(id) || (!running.has(id) && !g.members.includes(id)));
}

// ---- history: retired ids, the replacement, condemnations ----------------------------------------

/** A condemnation as the replicas' self-diagnosis histories record it (PROTOCOL §10.3). Each
 *  replica keeps its own history (not replicated), so one condemnation appears in several. */
export type Condemnation = {
  /** The view in which it was condemned (the group moved to the next one). */
  view: number;
  target: ProcessId;
  reason: string;
  /** The accusers whose two accusations condemned it. */
  by: ProcessId[];
  /** When the first replica recorded it (that replica's wall clock, ms since the epoch). */
  atMs: number;
  /** The replicas whose history holds it. */
  recordedBy: ProcessId[];
};

export type RetiredReplica = {
  id: ProcessId;
  /** The node it last ran on, if known. */
  node: string | null;
  /** `condemned` (PROTOCOL §10.3); `abandoned`: a replacement that did not ask for the state in
   *  time (§10.6); `retired`: no longer a member, for a reason no answering replica remembers. */
  how: 'condemned' | 'abandoned' | 'retired';
  /** The accusation reason (`silent`, `digest`, …) or, abandoned, what did not happen. */
  reason: string | null;
  by: ProcessId[];
  /** The view it was condemned in, if known. */
  view: number | null;
  /** It still answered this query (a retired replica stays silent towards the group until its
   *  agent kills it). */
  answered: boolean;
};

export type Replacement = {
  id: ProcessId;
  node: string | null;
  /** Already a member (added, still installing the state) or only commanded / started. */
  member: boolean;
  /** `starting`: commanded, its daemon has not answered; otherwise the phase it reports. */
  phase: ReplicaPhase | 'starting';
};

export type GroupHistory = {
  /** Where each replica id runs (or last ran): cluster.json for the initial three, the group's
   *  journal ("replica r4 to start on n4") for spares. */
  nodes: Map<ProcessId, string>;
  retired: RetiredReplica[];
  replacement: Replacement | null;
  /** Oldest first. */
  condemnations: Condemnation[];
};

/** The group's own journal lines (src/core/group-view.ts) that say where a spare went and why
 *  an id left. They are the events journal of each replica (bounded, not replicated), so they
 *  are hints: what they cannot say (journal rolled over, replica restarted) shows as unknown. */
const JOURNAL = {
  condemned: /^replica ([a-z][a-z0-9-]*) condemned \(([^)]*)\)/,
  toStart: /^replica ([a-z][a-z0-9-]*) to start on ([a-z][a-z0-9-]*)$/,
  joined: /^replica ([a-z][a-z0-9-]*) joined;/,
  abandoned: /^replica ([a-z][a-z0-9-]*) did not start on ([a-z][a-z0-9-]*): abandoned$/,
};

type JournalFacts = { started: Map<ProcessId, { node: string; rsn: number }>; ended: Map<ProcessId, { rsn: number; how: 'condemned' | 'abandoned' | 'joined'; reason: string }> };

function journalFacts(statuses: readonly ReplicaStatus[]): JournalFacts {
  const seen = new Set<string>();
  const events: ClusterEvent[] = [];
  for (const s of statuses) {
    const view = parseClusterView((s as ReplicaStatus & { cluster?: unknown }).cluster);
    for (const e of view?.events ?? []) {
      const key = `${e.rsn} ${e.text}`;
      if (e.task !== null || seen.has(key)) continue;
      seen.add(key);
      events.push(e);
    }
  }
  events.sort((a, b) => a.rsn - b.rsn);
  const facts: JournalFacts = { started: new Map(), ended: new Map() };
  for (const e of events) {
    let m: RegExpExecArray | null;
    if ((m = JOURNAL.toStart.exec(e.text)) !== null) {
      facts.started.set(m[1] as string, { node: m[2] as string, rsn: e.rsn });
      facts.ended.delete(m[1] as string);
    } else if ((m = JOURNAL.condemned.exec(e.text)) !== null) facts.ended.set(m[1] as string, { rsn: e.rsn, how: 'condemned', reason: m[2] as string });
    else if ((m = JOURNAL.abandoned.exec(e.text)) !== null) facts.ended.set(m[1] as string, { rsn: e.rsn, how: 'abandoned', reason: `did not start on ${m[2] as string}` });
    else if ((m = JOURNAL.joined.exec(e.text)) !== null) facts.ended.set(m[1] as string, { rsn: e.rsn, how: 'joined', reason: '' });
  }
  return facts;
}

/** Condemnations from every answering replica's history, one per (view, target). */
export function collectCondemnations(statuses: readonly Pick<ReplicaStatus, 'id' | 'diagnosis'>[]): Condemnation[] {
  const byKey = new Map<string, Condemnation>();
  for (const s of statuses) {
    for (const d of s.diagnosis) {
      if (d.kind !== 'condemned') continue;
      const key = `${d.view} ${d.target}`;
      const by = d.by.split(',').filter((x) => x !== '');
      const c = byKey.get(key);
      if (c === undefined) {
        byKey.set(key, { view: d.view, target: d.target, reason: d.reason, by, atMs: d.atMs, recordedBy: [s.id] });
        continue;
      }
      for (const b of by) if (!c.by.includes(b)) c.by.push(b);
      if (!c.recordedBy.includes(s.id)) c.recordedBy.push(s.id);
      c.atMs = Math.min(c.atMs, d.atMs);
    }
  }
  for (const c of byKey.values()) c.by.sort();
  return [...byKey.values()].sort((a, b) => a.view - b.view || a.atMs - b.atMs);
}

/** Retired ids, the replacement under way and the condemnations, for the group `group`.
 *  `answers`: every replica that answered; `running`: pool ids whose daemon runs. */
export function groupHistory(
  membership: Pick<Membership, 'replicas' | 'replicaNodes' | 'spareReplicas'>,
  group: GroupPick,
  answers: ReadonlyMap<ProcessId, ReplicaStatus>,
  running: ReadonlySet<ProcessId>,
): GroupHistory {
  const pool = [...membership.replicas, ...membership.spareReplicas];
  const all = [...answers.values()];
  const facts = journalFacts(all.filter(inService));
  const condemnations = collectCondemnations(all);
  const nodes = new Map<ProcessId, string>();
  membership.replicas.forEach((r, i) => {
    const n = membership.replicaNodes[i];
    if (n !== undefined && n !== '') nodes.set(r, n);
  });
  for (const [id, s] of facts.started) nodes.set(id, s.node);

  // The replacement: a member still installing, else a replica that answered as installing, else
  // one the journal says was commanded and has neither joined nor been given up.
  let replacement: Replacement | null = null;
  const installing = all.find((s) => s.phase === 'installing' && group.members.includes(s.id)) ?? all.find((s) => s.phase === 'installing' && !group.members.includes(s.id));
  if (installing !== undefined) {
    replacement = { id: installing.id, node: nodes.get(installing.id) ?? null, member: group.members.includes(installing.id), phase: 'installing' };
  } else if (group.basis !== 'assumed') {
    const commanded = [...facts.started.keys()].find((id) => !group.members.includes(id) && !facts.ended.has(id));
    if (commanded !== undefined) {
      const s = answers.get(commanded);
      replacement = { id: commanded, node: nodes.get(commanded) ?? null, member: false, phase: s === undefined ? 'starting' : s.phase };
    }
  }

  // Retired: every id that served or was started and is neither a member nor the replacement.
  // Ids are used in pool order and never reused (PROTOCOL §10.1), so this is the used part of
  // the pool less the current group. Unknown while no replica in service answered.
  const retired: RetiredReplica[] = [];
  if (group.basis !== 'assumed') {
    const used = new Set<ProcessId>([
      ...membership.replicas, ...group.members, ...facts.started.keys(), ...facts.ended.keys(),
      ...condemnations.map((c) => c.target), ...answers.keys(), ...running,
    ]);
    for (const id of pool) {
      if (!used.has(id) || group.members.includes(id) || replacement?.id === id) continue;
      const c = [...condemnations].reverse().find((x) => x.target === id);
      const j = facts.ended.get(id);
      const base = { id, node: nodes.get(id) ?? null, answered: answers.has(id) };
      if (c !== undefined) retired.push({ ...base, how: 'condemned', reason: c.reason, by: [...c.by], view: c.view });
      else if (j !== undefined && j.how !== 'joined') retired.push({ ...base, how: j.how, reason: j.reason, by: [], view: null });
      else retired.push({ ...base, how: 'retired', reason: null, by: [], view: null });
    }
    retired.sort((a, b) => (a.view ?? Infinity) - (b.view ?? Infinity) || pool.indexOf(a.id) - pool.indexOf(b.id));
  }
  return { nodes, retired, replacement, condemnations };
}

/** Where the members listen, as status replies say (PROTOCOL §10.6): a moved port, or 0 for
 *  cluster.json's. A place is taken once AGREEING_REPLIES replies agree on it, as agents take
 *  the group (src/daemon/group-learner.ts): one faulty replica can neither move a member nor
 *  keep one from moving. Each replier's latest word counts. */
export class PortPlacement {
  private readonly placed = new Map<ProcessId, number>();
  private readonly votes = new Map<ProcessId, Map<number, Set<ProcessId>>>();

  /** `from` says `members` listen at cluster.json's ports but for `moved`; returns the places
   *  this settles or changes. */
  vote(from: ProcessId, members: readonly ProcessId[], moved: readonly MovedPort[]): MovedPort[] {
    const out: MovedPort[] = [];
    for (const id of members) {
      const port = moved.find((p) => p.id === id)?.port ?? 0;
      let byPort = this.votes.get(id);
      if (byPort === undefined) this.votes.set(id, (byPort = new Map()));
      for (const voters of byPort.values()) voters.delete(from);
      const voters = byPort.get(port) ?? new Set<ProcessId>();
      byPort.set(port, voters.add(from));
      if (voters.size < AGREEING_REPLIES || this.placed.get(id) === port) continue;
      this.placed.set(id, port);
      out.push({ id, port });
    }
    return out;
  }

  has(id: ProcessId): boolean {
    return this.placed.has(id);
  }
}
