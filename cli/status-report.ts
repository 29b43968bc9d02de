// The `trine status` document (docs/OPERATIONS.md §3 documents it field by field): built from
// the replicas' and the watchdog's answers, with the cluster's health judged in one place so
// `trine status` and `trine up` agree on what "healthy" means. Pure: no I/O here.
import type { WatchdogStatus } from '../src/core/watchdog.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { PeerHealth, ReplicaStatus } from '../src/core/status.ts';
import type { Role } from '../src/core/wire/messages.ts';
import type { ClusterConfig } from '../src/io/cluster-dir.ts';
import type { StatusAnswers } from './status-client.ts';

export const STATUS_DOCUMENT_VERSION = 1;
/** Hex digits of a digest shown in the table: enough to tell digests apart at a glance. */
export const SHORT_DIGEST_CHARS = 12;

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
  replicas: { id: ProcessId; health: PeerHealth; lastHeartbeatAgeMs: number | null; role: Role | null; rsn: number | null; gssn: number | null }[];
  /** Node resets the watchdog carried out (spec §1.6 rule 1), oldest first. */
  resets: WatchdogStatus['resets'];
};

export type StatusDocument = {
  version: typeof STATUS_DOCUMENT_VERSION;
  cluster: string;
  dir: string;
  at: string;
  healthy: boolean;
  converged: boolean;
  problems: string[];
  primary: ProcessId | null;
  replicas: ReplicaRow[];
  nodes: NodeRow[];
  watchdog: WatchdogRow;
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
  const nodeOf = (id: ProcessId) => config.processes.find((p) => p.id === id)?.node ?? null;
  const answered = new Map<ProcessId, ReplicaStatus>();
  for (const [id, a] of answers.replicas) if (a.ok) answered.set(id, a.status);

  // Digests: replicas at the same RSN must hold the same state (docs/PROTOCOL.md §5).
  const diverged = new Set<ProcessId>();
  const byRsn = new Map<number, ReplicaStatus[]>();
  for (const s of answered.values()) byRsn.set(s.rsn, [...(byRsn.get(s.rsn) ?? []), s]);
  for (const [rsn, group] of byRsn) {
    const digests = new Map<string, ProcessId[]>();
    for (const s of group) digests.set(s.digest, [...(digests.get(s.digest) ?? []), s.id]);
    if (digests.size <= 1) continue;
    const sizes = [...digests.values()].map((ids) => ids.length).sort((a, b) => b - a);
    const majority = sizes[0] !== sizes[1] ? [...digests.entries()].find(([, ids]) => ids.length === sizes[0])?.[0] : undefined;
    for (const [digest, ids] of digests) if (digest !== majority) for (const id of ids) diverged.add(id);
    problems.push(`digest mismatch at RSN ${rsn}: ${group.map((s) => `${s.id} ${s.digest.slice(0, SHORT_DIGEST_CHARS)}`).join(', ')}`);
  }

  const replicas: ReplicaRow[] = m.replicas.map((id) => {
    const a = answers.replicas.get(id);
    const s = answered.get(id);
    if (s === undefined) {
      const error = a !== undefined && !a.ok ? a.error : 'not asked';
      problems.push(`replica ${id} did not answer (${error})`);
      return {
        id, node: nodeOf(id), answered: false, error, role: null, inc: null, rsn: null, gssn: null, primary: null, digest: null,
        health: 'unreachable', replicas: [], suspicions: null, drops: {}, latencyMs: null,
      };
    }
    const views = [...answered.values()].filter((o) => o.id !== id).map((o) => o.replicas.find((r) => r.id === id)?.health ?? 'unknown');
    const health: ReplicaHealth = diverged.has(id) ? 'diverged' : worstKnown(views);
    if (health === 'late' || health === 'silent') problems.push(`replica ${id} is ${health} in its peers' view`);
    return {
      id, node: nodeOf(id), answered: true, error: null, role: s.role, inc: s.inc, rsn: s.rsn, gssn: s.gssn, primary: s.primary,
      digest: s.digest, health, replicas: s.replicas, suspicions: s.suspicions, drops: s.drops,
      latencyMs: a !== undefined && a.ok ? a.latencyMs : null,
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
  if (answered.size === m.replicas.length && backups.length !== m.replicas.length - 1) {
    problems.push(`expected ${m.replicas.length - 1} backups, found ${backups.length}`);
  }
  if (claimed.size > 1) problems.push(`replicas disagree on the primary: ${[...claimed].join(', ')}`);

  // Nodes: agents heartbeat the backups only (spec §1.3), so their view is the one that counts.
  const backupViews = [...answered.values()].filter((s) => s.role === 'backup');
  const nodes: NodeRow[] = m.agents.map(({ id: agent, node }) => {
    const seen = backupViews.map((s) => ({ by: s.id, view: s.agents.find((x) => x.id === agent) })).filter((x) => x.view !== undefined);
    const health = best(seen.map((x) => x.view?.health ?? 'unknown'));
    const ages = seen.map((x) => x.view?.lastHeartbeatAgeMs ?? null).filter((x): x is number => x !== null);
    // Replicated state: a majority of the answering replicas speaks for the group (a replica
    // that restarted without state transfer must not hide the group's view).
    const joinedVotes = [...answered.values()].filter((s) => s.agents.find((x) => x.id === agent)?.joined === true).length;
    const joined = joinedVotes * 2 > answered.size;
    if (!joined) problems.push(`node ${node} (${agent}) has not joined`);
    if (health !== 'healthy') problems.push(`node ${node} (${agent}) is ${health === 'unknown' ? 'not heard from yet' : health} in the backups' view`);
    return {
      id: node, agent, replica: config.processes.find((p) => p.kind === 'replica' && p.node === node)?.id ?? null, joined, health,
      lastHeartbeatAgeMs: ages.length === 0 ? null : Math.min(...ages), seenBy: seen.map((x) => x.by),
    };
  });

  // The watchdog must hear every replica (spec §1.6 rule 2).
  const w = answers.watchdog;
  const watchdog: WatchdogRow = w.ok
    ? {
        id: m.scc, answered: true, error: null,
        replicas: w.status.replicas.map((r) => ({ id: r.id, health: r.health, lastHeartbeatAgeMs: r.lastHeartbeatAgeMs, role: r.role, rsn: r.rsn, gssn: r.gssn })),
        resets: Array.isArray(w.status.resets) ? w.status.resets : [],
      }
    : { id: m.scc, answered: false, error: w.error, replicas: [], resets: [] };
  if (!w.ok) problems.push(`watchdog ${m.scc} did not answer (${w.error})`);
  for (const r of watchdog.replicas) {
    if (r.health !== 'healthy') problems.push(`watchdog ${m.scc} hears replica ${r.id} as ${r.health === 'unknown' ? 'never heard' : r.health}`);
  }

  const rsns = new Set([...answered.values()].map((s) => s.rsn));
  const digests = new Set([...answered.values()].map((s) => s.digest));
  const converged = answered.size === m.replicas.length && rsns.size === 1 && digests.size === 1;
  return {
    version: STATUS_DOCUMENT_VERSION, cluster: config.cluster, dir, at: at.toISOString(),
    healthy: problems.length === 0, converged, problems, primary, replicas, nodes, watchdog,
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

export function formatStatus(doc: StatusDocument): string {
  const verdict = doc.healthy ? (doc.converged ? 'healthy' : 'healthy (replicas catching up)') : `NOT HEALTHY (${doc.problems.length} problem${doc.problems.length === 1 ? '' : 's'})`;
  const out = [`cluster ${doc.cluster} at ${doc.dir}: ${verdict}`, ''];
  out.push(table(
    ['REPLICA', 'NODE', 'ROLE', 'RSN', 'GSSN', 'DIGEST', 'HEALTH'],
    doc.replicas.map((r) => [r.id, opt(r.node), opt(r.role), opt(r.rsn), opt(r.gssn), r.digest === null ? '-' : r.digest.slice(0, SHORT_DIGEST_CHARS), r.health]),
  ));
  out.push('');
  out.push(table(
    ['NODE', 'AGENT', 'REPLICA', 'JOINED', 'HEALTH', 'LAST HEARTBEAT'],
    doc.nodes.map((n) => [n.id, n.agent, opt(n.replica), n.joined ? 'yes' : 'no', n.health, ms(n.lastHeartbeatAgeMs)]),
  ));
  out.push('');
  out.push(doc.watchdog.answered
    ? `watchdog ${doc.watchdog.id}: ${doc.watchdog.replicas.map((r) => `${r.id} ${r.health} (${ms(r.lastHeartbeatAgeMs)})`).join(', ')}`
    : `watchdog ${doc.watchdog.id}: ${doc.watchdog.error ?? 'no answer'}`);
  if (doc.problems.length > 0) {
    out.push('', 'problems:');
    for (const p of doc.problems) out.push(`  - ${p}`);
  }
  return out.join('\n');
}
