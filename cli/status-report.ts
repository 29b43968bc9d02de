// The `trine status` document (docs/OPERATIONS.md §3 documents it field by field): built from
// the replicas' and the watchdog's answers, with the cluster's health judged in one place so
// `trine status` and `trine up` agree on what "healthy" means. The replica rows are the members
// of the current group (cli/replica-group.ts), which changes when a condemned replica is
// replaced by a spare id (docs/PROTOCOL.md §10). What the daemons say of their disks and the
// watchdog of its restarts (issue 14 item 4) are `warnings`, not problems (OPERATIONS §3.4).
// Pure: no I/O here.
import type { ClusterResetRecord, DiagnosisRecord, RestoreRecord, WatchdogStatus } from '../src/core/watchdog-state.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { DaemonReport, PeerHealth, ReplicaStatus } from '../src/core/status.ts';
import type { Role } from '../src/core/wire/messages.ts';
import { REPLICA_COUNT, type ClusterConfig } from '../src/io/cluster-dir.ts';
import { metricsEndpoints, metricsLine, type MetricsEndpoint } from './metrics-endpoints.ts';
import { groupHistory, inService, pickGroup, type Condemnation, type GroupPick, type ReplicaPhase, type Replacement, type RetiredReplica } from './replica-group.ts';
import { daemonWarnings, readDaemonReport } from './daemon-report.ts';
import type { StatusAnswers } from './status-client.ts';

export const STATUS_DOCUMENT_VERSION = 1;
/** Hex digits of a digest shown in the table: enough to tell digests apart at a glance. */
export const SHORT_DIGEST_CHARS = 12;
/** Self-diagnosis reports and cluster resets the table shows (the JSON has the watchdog's whole
 *  bounded history): the latest few say whether diagnosis is churning right now. */
export const STATUS_HISTORY_LINES = 5;

export type ReplicaHealth = PeerHealth | 'unreachable' | 'diverged';

export type ReplicaRow = {
  id: ProcessId;
  node: string | null;
  answered: boolean;
  error: string | null;
  role: Role | null;
  inc: number | null;
  rsn: number | null;
  gssn: number | null;
  primary: ProcessId | null;
  digest: string | null;
  health: ReplicaHealth;
  replicas: ReplicaStatus['replicas'];
  suspicions: number | null;
  drops: Record<string, number>;
  latencyMs: number | null;
  /** The group as this replica sees it (PROTOCOL §10.1); null when it did not answer. */
  phase: ReplicaPhase | null;
  view: number | null;
  members: ProcessId[] | null;
  /** What its daemon could not write to disk; null if it did not answer or does not say. */
  daemon: DaemonReport | null;
};

/** The current group: see pickGroup (cli/replica-group.ts) for how it is chosen. */
export type GroupRow = {
  view: number | null;
  members: ProcessId[];
  primary: ProcessId | null;
  confirmedBy: ProcessId[];
  basis: GroupPick['basis'];
  /** Higher views single replicas report, unconfirmed (each also a problem). */
  unconfirmedViews: GroupPick['ahead'];
};

export type NodeRow = {
  id: string;
  agent: ProcessId;
  replica: ProcessId | null;
  joined: boolean;
  health: PeerHealth;
  lastHeartbeatAgeMs: number | null;
  seenBy: ProcessId[];
};

export type WatchdogRow = {
  id: ProcessId;
  answered: boolean;
  error: string | null;
  replicas: {
    id: ProcessId; health: PeerHealth; lastHeartbeatAgeMs: number | null; role: Role | null; rsn: number | null; gssn: number | null;
    /** The view in the replica's last heartbeat; null if never heard (or an older watchdog). */
    view: number | null;
    /** A member of the current group (the watchdog also lists retired ids it heard once). */
    member: boolean;
  }[];
  /** Node resets the watchdog carried out (spec §1.6 rule 1), oldest first. */
  resets: WatchdogStatus['resets'];
  /** Frames and items the watchdog dropped, by reason: replayed status queries are `REPLAYED`
   *  (PROTOCOL §7). */
  drops: Record<string, number>;
  /** Rule 2 is armed (two replicas heard consistently since the last cluster reset); null if
   *  the watchdog did not answer or does not say. */
  armed: boolean | null;
  /** Self-diagnosis reports the watchdog received (spec §1.6 rule 3), oldest first. */
  diagnosisReports: DiagnosisRecord[];
  /** Cluster resets the watchdog ordered (spec §1.6 rules 2 and 3), oldest first. */
  clusterResets: ClusterResetRecord[];
  /** Tasks (by their old id) and membership changes (`node.add n5`, PROTOCOL §10.12) the
   *  watchdog is restoring after a cluster reset (§10.9): sent to the restarted group until two
   *  replicas confirm each. */
  restoresPending: WatchdogStatus['restoresPending'];
  /** Restores two replicas confirmed (`text`: the restored task's id, or why the group refused
   *  it) and task journals or journal entries the watchdog refused, oldest first. */
  restores: RestoreRecord[];
  /** The replicas' task journals the watchdog keeps for a cluster reset (PROTOCOL §10.9). */
  journalsKept: WatchdogStatus['journalsKept'];
  /** What its daemon could not write to disk, and its restarts by its supervisor. */
  daemon: DaemonReport | null;
};

export type StatusDocument = {
  version: typeof STATUS_DOCUMENT_VERSION;
  cluster: string;
  dir: string;
  at: string;
  healthy: boolean;
  converged: boolean;
  problems: string[];
  /** Worth an operator's look without making the cluster unhealthy: log lines or records a
   *  daemon could not write, watchdog restarts (OPERATIONS §3.4). */
  warnings: string[];
  primary: ProcessId | null;
  group: GroupRow;
  /** One per member of the current group, in the group's order. */
  replicas: ReplicaRow[];
  /** Ids that left the group for good (condemned or abandoned), by the view they left in. */
  retired: RetiredReplica[];
  /** The replacement under way, if any (PROTOCOL §10.6). */
  replacement: Replacement | null;
  /** Condemnations in the answering replicas' self-diagnosis histories, oldest first. */
  condemnations: Condemnation[];
  nodes: NodeRow[];
  watchdog: WatchdogRow;
  /** Where each daemon serves Prometheus metrics (OPERATIONS §9), in cluster.json's order; null
   *  with metrics off (no metrics.json in the dir). */
  metrics: MetricsEndpoint[] | null;
};


/** Why a member that answered is not in service, as a problem. */
const PHASE_PROBLEM: Record<ReplicaPhase, string> = {
  serving: 'serving',
  installing: 'still installing the state (a replacement, PROTOCOL §10.6)',
  syncing: 'syncing with the other member before a primary change (PROTOCOL §10.5)',
  retired: 'retired (condemned) yet still listed as a member',
};

const HEALTH_RANK: Record<PeerHealth, number> = { healthy: 0, late: 1, silent: 2, unknown: 3 };
const best = (hs: PeerHealth[]): PeerHealth => hs.reduce<PeerHealth>((a, b) => (HEALTH_RANK[b] < HEALTH_RANK[a] ? b : a), 'unknown');
const worstKnown = (hs: PeerHealth[]): PeerHealth => {
  const known = hs.filter((h) => h !== 'unknown');
  return known.length === 0 ? 'unknown' : known.reduce((a, b) => (HEALTH_RANK[b] > HEALTH_RANK[a] ? b : a));
};

export function buildStatusDocument(config: ClusterConfig, dir: string, answers: StatusAnswers, at: Date): StatusDocument {
  const m = config.membership;
  const problems: string[] = [];
  const answered = new Map<ProcessId, ReplicaStatus>();
  for (const [id, a] of answers.replicas) if (a.ok) answered.set(id, a.status);
  const running = new Set(answers.running ?? []);

  // The current group (PROTOCOL §10.1), and everything below is judged against it: a replica
  // the group condemned and removed is history, not a problem; a member not answering is.
  const pick = pickGroup(m, answered.values());
  const history = groupHistory(m, pick, answered, running);
  const members = pick.members;
  const nodeOf = (id: ProcessId) => history.nodes.get(id) ?? config.processes.find((p) => p.id === id)?.node ?? null;
  /** Members in service: the replicas that speak for the group's state. */
  const inGroup = new Map([...answered].filter(([id, s]) => members.includes(id) && inService(s)));
  if (pick.basis === 'assumed') problems.push(`no replica in service answered, so the current group is unknown: showing the initial replicas ${members.join(', ')}`);
  if (pick.basis === 'unconfirmed') {
    problems.push(`view ${pick.view ?? '?'} (${members.join(', ')}, primary ${pick.primary ?? '?'}) is reported by ${pick.confirmedBy.join(', ')} alone: no second replica in service confirms it`);
  }
  for (const a of pick.ahead) {
    problems.push(`${a.id} reports view ${a.view} (${a.members.join(', ')}, primary ${a.primary}), above the group's view ${pick.view ?? '?'}, and no second replica confirms it`);
  }
  if (members.length < REPLICA_COUNT) {
    const r = history.replacement;
    const next = r === null
      ? 'no replacement under way (no spare id left, or no node without a replica)'
      : `replacement ${r.id} ${r.phase === 'starting' ? 'commanded' : r.phase}${r.node === null ? '' : ` on ${r.node}`}`;
    problems.push(`the group has ${members.length} replicas (${members.join(', ')}), not ${REPLICA_COUNT}: ${next}`);
  }

  // Digests: replicas at the same RSN must hold the same state (docs/PROTOCOL.md §5).
  const diverged = new Set<ProcessId>();
  const byRsn = new Map<number, ReplicaStatus[]>();
  for (const s of inGroup.values()) byRsn.set(s.rsn, [...(byRsn.get(s.rsn) ?? []), s]);
  for (const [rsn, group] of byRsn) {
    const digests = new Map<string, ProcessId[]>();
    for (const s of group) digests.set(s.digest, [...(digests.get(s.digest) ?? []), s.id]);
    if (digests.size <= 1) continue;
    const sizes = [...digests.values()].map((ids) => ids.length).sort((a, b) => b - a);
    const majority = sizes[0] !== sizes[1] ? [...digests.entries()].find(([, ids]) => ids.length === sizes[0])?.[0] : undefined;
    for (const [digest, ids] of digests) if (digest !== majority) for (const id of ids) diverged.add(id);
    problems.push(`digest mismatch at RSN ${rsn}: ${group.map((s) => `${s.id} ${s.digest.slice(0, SHORT_DIGEST_CHARS)}`).join(', ')}`);
  }

  const replicas: ReplicaRow[] = members.map((id) => {
    const a = answers.replicas.get(id);
    const s = answered.get(id);
    if (s === undefined) {
      const error = a !== undefined && !a.ok ? a.error : `not running (no live daemon behind run/${id}.pid)`;
      problems.push(`replica ${id} did not answer (${error})`);
      return {
        id, node: nodeOf(id), answered: false, error, role: null, inc: null, rsn: null, gssn: null, primary: null, digest: null,
        health: 'unreachable', replicas: [], suspicions: null, drops: {}, latencyMs: null, phase: null, view: null, members: null, daemon: null,
      };
    }
    const views = [...inGroup.values()].filter((o) => o.id !== id).map((o) => o.replicas.find((r) => r.id === id)?.health ?? 'unknown');
    const health: ReplicaHealth = diverged.has(id) ? 'diverged' : worstKnown(views);
    if (health === 'late' || health === 'silent') problems.push(`replica ${id} is ${health} in its peers' view`);
    if (!inService(s)) problems.push(`replica ${id} is ${PHASE_PROBLEM[s.phase]}`);
    else if (pick.view !== null && s.view < pick.view) problems.push(`replica ${id} is at view ${s.view}, behind the group's view ${pick.view}`);
    return {
      id, node: nodeOf(id), answered: true, error: null, role: s.role, inc: s.inc, rsn: s.rsn, gssn: s.gssn, primary: s.primary,
      digest: s.digest, health, replicas: s.replicas, suspicions: s.suspicions, drops: s.drops,
      latencyMs: a !== undefined && a.ok ? a.latencyMs : null, phase: s.phase, view: s.view, members: [...s.members],
      daemon: readDaemonReport(s.daemon),
    };
  });

  // Roles: exactly one primary, the others backups, and everyone agrees who the primary is.
  const primaries = replicas.filter((r) => r.role === 'primary').map((r) => r.id);
  const backups = replicas.filter((r) => r.role === 'backup').map((r) => r.id);
  const claimed = new Set(replicas.filter((r) => r.primary !== null).map((r) => r.primary));
  let primary: ProcessId | null = null;
  if (primaries.length === 1) primary = primaries[0] ?? null;
  else if (primaries.length === 0) problems.push('no replica is primary');
  else problems.push(`${primaries.length} replicas claim to be primary: ${primaries.join(', ')}`);
  if (primary !== null && pick.primary !== null && primary !== pick.primary) problems.push(`${primary} acts as primary, but the group's primary is ${pick.primary}`);
  const answeredMembers = replicas.filter((r) => r.answered).length;
  if (answeredMembers === members.length && backups.length !== members.length - 1) {
    problems.push(`expected ${members.length - 1} backups, found ${backups.length}`);
  }
  if (claimed.size > 1) problems.push(`replicas disagree on the primary: ${[...claimed].join(', ')}`);

  // Nodes: agents heartbeat the backups only (spec §1.3), so their view is the one that counts.
  const backupViews = [...inGroup.values()].filter((s) => s.role === 'backup');
  // The group's nodes, as a majority of the members in service list them: nodes are added and
  // removed at run time (PROTOCOL §10.12), so cluster.json's list is only where it started.
  const listed = new Map<ProcessId, { node: string; votes: number }>();
  for (const s of inGroup.values()) {
    for (const a of s.agents) listed.set(a.id, { node: a.node, votes: (listed.get(a.id)?.votes ?? 0) + 1 });
  }
  const groupAgents = inGroup.size === 0
    ? m.agents
    : [...listed].filter(([, e]) => e.votes * 2 > inGroup.size).map(([id, e]) => ({ id, node: e.node }))
      .sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }));
  const nodes: NodeRow[] = groupAgents.map(({ id: agent, node }) => {
    const seen = backupViews.map((s) => ({ by: s.id, view: s.agents.find((x) => x.id === agent) })).filter((x) => x.view !== undefined);
    const health = best(seen.map((x) => x.view?.health ?? 'unknown'));
    const ages = seen.map((x) => x.view?.lastHeartbeatAgeMs ?? null).filter((x): x is number => x !== null);
    // Replicated state: a majority of the members in service speaks for the group (a replica
    // that restarted without state transfer must not hide the group's view).
    const joinedVotes = [...inGroup.values()].filter((s) => s.agents.find((x) => x.id === agent)?.joined === true).length;
    const joined = joinedVotes * 2 > inGroup.size;
    if (!joined) problems.push(`node ${node} (${agent}) has not joined`);
    if (health !== 'healthy') problems.push(`node ${node} (${agent}) is ${health === 'unknown' ? 'not heard from yet' : health} in the backups' view`);
    return {
      id: node, agent, replica: members.find((r) => nodeOf(r) === node) ?? null, joined, health,
      lastHeartbeatAgeMs: ages.length === 0 ? null : Math.min(...ages), seenBy: seen.map((x) => x.by),
    };
  });

  // The watchdog must hear every member (spec §1.6 rule 2); retired ids it still lists are not
  // expected to heartbeat.
  const w = answers.watchdog;
  const watchdog: WatchdogRow = w.ok
    ? {
        id: m.scc, answered: true, error: null,
        replicas: w.status.replicas.map((r) => ({
          id: r.id, health: r.health, lastHeartbeatAgeMs: r.lastHeartbeatAgeMs, role: r.role, rsn: r.rsn, gssn: r.gssn,
          view: typeof r.view === 'number' ? r.view : null, member: members.includes(r.id),
        })),
        // Fields a watchdog of an older release does not send read as empty.
        resets: Array.isArray(w.status.resets) ? w.status.resets : [],
        drops: typeof w.status.drops === 'object' && w.status.drops !== null ? w.status.drops : {},
        armed: typeof w.status.armed === 'boolean' ? w.status.armed : null,
        diagnosisReports: Array.isArray(w.status.diagnosisReports) ? w.status.diagnosisReports : [],
        clusterResets: Array.isArray(w.status.clusterResets) ? w.status.clusterResets : [],
        restoresPending: Array.isArray(w.status.restoresPending) ? w.status.restoresPending : [],
        restores: Array.isArray(w.status.restores) ? w.status.restores : [],
        journalsKept: Array.isArray(w.status.journalsKept) ? w.status.journalsKept : [],
        daemon: readDaemonReport(w.status.daemon),
      }
    : {
        id: m.scc, answered: false, error: w.error, replicas: [], resets: [], drops: {}, armed: null, diagnosisReports: [], clusterResets: [],
        restoresPending: [], restores: [], journalsKept: [], daemon: null,
      };
  if (!w.ok) problems.push(`watchdog ${m.scc} did not answer (${w.error})`);
  else {
    // Accepted tasks not yet back after a cluster reset: the cluster has not recovered yet.
    if (watchdog.restoresPending.length > 0) {
      problems.push(`watchdog ${m.scc} is still restoring ${watchdog.restoresPending.map((r) => r.task).join(', ')} after a cluster reset (until two replicas of the restarted group confirm each)`);
    }
    for (const id of members) {
      const r = watchdog.replicas.find((x) => x.id === id);
      if (r === undefined) problems.push(`watchdog ${m.scc} has not heard replica ${id} yet`);
      else if (r.health !== 'healthy') problems.push(`watchdog ${m.scc} hears replica ${id} as ${r.health === 'unknown' ? 'never heard' : r.health}`);
    }
  }

  const rsns = new Set([...inGroup.values()].map((s) => s.rsn));
  const digests = new Set([...inGroup.values()].map((s) => s.digest));
  const converged = inGroup.size === members.length && rsns.size === 1 && digests.size === 1;
  const warnings = [...replicas.flatMap((r) => daemonWarnings(`replica ${r.id}`, r.daemon)), ...daemonWarnings(`watchdog ${m.scc}`, watchdog.daemon)];
  const metrics = metricsEndpoints(config, dir, warnings);
  return {
    version: STATUS_DOCUMENT_VERSION, cluster: config.cluster, dir, at: at.toISOString(),
    healthy: problems.length === 0, converged, problems, warnings, primary,
    group: { view: pick.view, members: [...members], primary: pick.primary, confirmedBy: pick.confirmedBy, basis: pick.basis, unconfirmedViews: pick.ahead },
    replicas, retired: history.retired, replacement: history.replacement, condemnations: history.condemnations, nodes, watchdog, metrics,
  };
}

// ---- the table ---------------------------------------------------------------------------------

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

const ms = (v: number | null) => (v === null ? '-' : `${Math.round(v)} ms`);
const opt = (v: number | string | null) => (v === null ? '-' : String(v));
/** The watchdog's clock is milliseconds on the Date scale (src/daemon/run-core.ts clockMs). */
const when = (atMs: number) => (Number.isFinite(atMs) ? new Date(atMs).toISOString() : String(atMs));

/** The last STATUS_HISTORY_LINES entries of a history, under a heading that says how many. */
function history<T>(title: string, all: T[], line: (entry: T) => string): string[] {
  if (all.length === 0) return [];
  const shown = all.slice(-STATUS_HISTORY_LINES);
  const heading = shown.length === all.length ? `${title}:` : `${title} (last ${shown.length} of ${all.length}):`;
  return [heading, ...shown.map((e) => `  ${line(e)}`)];
}

/** "view 4, primary r2: r2, r4, r5 (confirmed by r2, r4, r5)" */
function groupLine(doc: StatusDocument): string {
  const g = doc.group;
  if (g.basis === 'assumed') return `group: unknown (no replica in service answered); showing the initial replicas ${g.members.join(', ')}`;
  const basis = g.basis === 'agreed' ? `confirmed by ${g.confirmedBy.join(', ')}` : `reported by ${g.confirmedBy.join(', ')} alone, unconfirmed`;
  return `group: view ${g.view ?? '?'}, primary ${g.primary ?? '?'}, members ${g.members.join(', ')} (${basis})`;
}

/** "r3 (condemned: silent, by r1,r2)" */
function retiredText(r: RetiredReplica): string {
  const why = r.how === 'retired' ? 'retired' : `${r.how}: ${r.reason ?? '?'}${r.by.length === 0 ? '' : `, by ${r.by.join(',')}`}`;
  return `${r.id} (${why}${r.answered ? '; still answering' : ''})`;
}

function replacementText(r: Replacement): string {
  const where = r.node === null ? '' : ` on ${r.node}`;
  if (r.phase === 'starting') return `${r.id} commanded to start${where}, not answering yet`;
  return `${r.id} ${r.phase}${where}${r.member ? ' (already a member)' : ''}`;
}

/** "t1 → t1 (restarted)", "t2 not restored: …", "node.add n5: node n5 added (…)" (a membership
 *  change, PROTOCOL §10.12), "refused: run/r2.tasks, t3: SIG_INVALID (…)" */
function restoreText(r: RestoreRecord, dir: string): string {
  if (r.kind === 'restored' && r.task.startsWith('node.')) return `${r.task}: ${r.ok ? '' : 'not restored: '}${r.text}`;
  if (r.kind === 'restored') return r.ok ? `${r.task} → ${r.text} (restarted)` : `${r.task} not restored: ${r.text}`;
  const source = r.source.startsWith(`${dir}/`) ? r.source.slice(dir.length + 1) : r.source;
  return `refused: ${source}${r.task === null ? '' : `, ${r.task}`}: ${r.code} (${r.detail})`;
}

export function formatStatus(doc: StatusDocument): string {
  const verdict = doc.healthy ? (doc.converged ? 'healthy' : 'healthy (replicas catching up)') : `NOT HEALTHY (${doc.problems.length} problem${doc.problems.length === 1 ? '' : 's'})`;
  const out = [`cluster ${doc.cluster} at ${doc.dir}: ${verdict}`, groupLine(doc), ''];
  out.push(table(
    ['REPLICA', 'NODE', 'ROLE', 'RSN', 'GSSN', 'DIGEST', 'HEALTH', 'PHASE', 'VIEW'],
    doc.replicas.map((r) => [
      r.id, opt(r.node), opt(r.role), opt(r.rsn), opt(r.gssn), r.digest === null ? '-' : r.digest.slice(0, SHORT_DIGEST_CHARS), r.health, opt(r.phase), opt(r.view),
    ]),
  ));
  if (doc.replacement !== null) out.push(`replacement: ${replacementText(doc.replacement)}`);
  if (doc.retired.length > 0) out.push(`retired: ${doc.retired.map(retiredText).join(', ')}`);
  out.push('');
  out.push(table(
    ['NODE', 'AGENT', 'REPLICA', 'JOINED', 'HEALTH', 'LAST HEARTBEAT'],
    doc.nodes.map((n) => [n.id, n.agent, opt(n.replica), n.joined ? 'yes' : 'no', n.health, ms(n.lastHeartbeatAgeMs)]),
  ));
  out.push('');
  // Members and the replacement: the retired ids the watchdog still lists are in the JSON.
  const heard = doc.watchdog.replicas.filter((r) => r.member || r.id === doc.replacement?.id);
  out.push(doc.watchdog.answered
    ? `watchdog ${doc.watchdog.id}: ${heard.map((r) => `${r.id} ${r.health} (${ms(r.lastHeartbeatAgeMs)})`).join(', ')}${
      doc.watchdog.armed === false ? ' (cluster-reset guard not armed: two replicas in one view not heard yet)' : ''}`
    : `watchdog ${doc.watchdog.id}: ${doc.watchdog.error ?? 'no answer'}`);
  out.push(...history('condemnations', doc.condemnations, (c) =>
    `${when(c.atMs)}  view ${c.view}: ${c.target} condemned (${c.reason}) by ${c.by.join(',')}`));
  out.push(...history('self-diagnosis history', doc.watchdog.diagnosisReports, (d) =>
    `${when(d.atMs)}  ${d.from} view ${d.view}: ${d.reason}${d.target === '' ? '' : ` against ${d.target}`}${d.counted ? '' : ' (not counted)'}`));
  out.push(...history('cluster resets', doc.watchdog.clusterResets, (r) => `${when(r.atMs)}  ${r.reason}`));
  out.push(...history('restored after cluster reset', doc.watchdog.restores, (r) => `${when(r.atMs)}  ${restoreText(r, doc.dir)}`));
  if (doc.metrics !== null && doc.metrics.length > 0) out.push(metricsLine(doc.metrics));
  if (doc.watchdog.restoresPending.length > 0) {
    out.push(`restores pending: ${doc.watchdog.restoresPending.map((r) => r.task).join(', ')} (until two replicas of the restarted group confirm each)`);
  }
  if (doc.warnings.length > 0) {
    out.push('', 'warnings:');
    for (const w of doc.warnings) out.push(`  - ${w}`);
  }
  if (doc.problems.length > 0) {
    out.push('', 'problems:');
    for (const p of doc.problems) out.push(`  - ${p}`);
  }
  return out.join('\n');
}
