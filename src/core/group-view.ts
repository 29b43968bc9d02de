// The manager group's own membership as replicated state (docs/PROTOCOL.md §10): the view, where
// each replica runs, the ids that may never serve again, the replacement under way, and the agents'
// error reports against each replica. Every replica applies the same ordered inputs here —
// `replica.condemn`, `replica.add`, ticks, error reports — so every correct replica changes the
// group at the same RSN and sends the agents the same `replicas`, `replica.spawn` and
// `replica.kill` commands. Pure: no clock, no I/O.
import { REPLICA_COUNT } from './constants.ts';
import { assert } from '../base/result.ts';
import type { ProcessId } from './ports.ts';
import type { EventKind, EventTag } from './status.ts';
import type { AccuseReason, AddedReplica, ErrorReportKind, GroupCommand, MovedPort, SignedAccusation } from './wire/messages.ts';

/** A replacement replica the group commanded and waits for (PROTOCOL §10.6). */
export type Recovery = {
  id: ProcessId;
  /** The node it was commanded to start on; null while no node is eligible. */
  node: string | null;
  /** Task-clock tick (PROTOCOL §8.3) at which the spawn was commanded. */
  sinceTick: number;
  /** Nodes already tried in this replacement, oldest first. */
  tried: string[];
};

export type GroupView = {
  /** Incremented by every change of the replica set (condemnation, a replica added). */
  view: number;
  /** Node of every replica in the set, and of the replica joining. */
  replicaNodes: Map<ProcessId, string>;
  /** Condemned or abandoned ids, never used again (their keys may be in a faulty node's hands). */
  retired: ProcessId[];
  recovery: Recovery | null;
  /** Agents' error reports in this view: replica → agent → [mismatch reports, timeout reports]. */
  reports: Map<ProcessId, Map<ProcessId, [number, number]>>;
  /** Members listening on another port than cluster.json's, theirs being taken when they
   *  started (a squatted port, PROTOCOL §10.6): the port each said it has in its state request. */
  ports: Map<ProcessId, number>;
};

/** Timeout reports one agent must send against a replica before it counts towards
 *  `agent.reports` (PROTOCOL §10.2): three aggregated reports are ≥ 1.5 s of missing copies,
 *  not a replica that was merely slow for a moment. */
export const TIMEOUT_REPORTS_TO_COUNT = 3;
/** Distinct agents whose reports condemn a replica: with f = 1 one of two may be faulty, not both. */
export const REPORTING_AGENTS = 2;

export function initialGroupView(replicas: readonly ProcessId[], nodes: readonly string[]): GroupView {
  const replicaNodes = new Map<ProcessId, string>();
  replicas.forEach((r, i) => replicaNodes.set(r, nodes[i] ?? ''));
  return { view: 0, replicaNodes, retired: [], recovery: null, reports: new Map(), ports: new Map() };
}

const byKey = <V>(m: Map<string, V>): [string, V][] => [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

export function encodeGroupView(g: GroupView): unknown {
  return [
    g.view,
    byKey(g.replicaNodes),
    g.retired,
    g.recovery === null ? null : [g.recovery.id, g.recovery.node, g.recovery.sinceTick, g.recovery.tried],
    byKey(g.reports).map(([r, byAgent]) => [r, byKey(byAgent)]),
    byKey(g.ports),
  ];
}

/** `ports` of a replica's status (JSON, ReplicaStatus.ports) if it is that shape, else null: a
 *  verified replica may still be faulty and send nonsense. */
export function parseMovedPorts(v: unknown): MovedPort[] | null {
  if (!Array.isArray(v)) return null;
  const out: MovedPort[] = [];
  for (const x of v) {
    if (typeof x !== 'object' || x === null) return null;
    const { id, port } = x as Record<string, unknown>;
    if (typeof id !== 'string' || typeof port !== 'number' || !Number.isSafeInteger(port) || port < 1 || port > 65_535) return null;
    out.push({ id, port });
  }
  return out;
}

/** The members' moved ports, by id (GroupView.ports). */
export const movedPorts = (g: GroupView, replicas: readonly ProcessId[]): MovedPort[] =>
  byKey(g.ports).filter(([id]) => replicas.includes(id)).map(([id, port]) => ({ id, port }));

/** What the rest of the replicated state the group view needs to read. */
export type GroupContext = {
  replicas: ProcessId[];
  primary: ProcessId;
  /** Joined, non-failed agents with their nodes, sorted by agent id. */
  liveAgents: { id: ProcessId; node: string }[];
  /** The replica id pool: initial ids, then spares (membership). */
  pool: readonly ProcessId[];
  /** Spares bound to a node: only that node's agent can start them (membership.spareNodes). */
  spareNodes: ReadonlyMap<ProcessId, string>;
  /** The added nodes' spares with their keys and addresses (replicated-state.ts addedSpares). */
  added: readonly AddedReplica[];
  tick: number;
  replicaStartTimeoutTicks: number;
};

export type ViewChange = {
  /** New replica set and primary, when they changed. */
  replicas: ProcessId[];
  primary: ProcessId;
  commands: { agent: ProcessId; command: GroupCommand }[];
  /** Journal lines; `tag` on those a timeline pairs (status.ts EventKind). */
  events: { text: string; tag?: EventTag }[];
};

/** Journal `text`, tagged with what it is about. */
function journal(out: ViewChange, text: string, kind: EventKind, subject: ProcessId): void {
  out.events.push({ text, tag: { kind, subject } });
}

/** Checks evidence for a condemnation (PROTOCOL §10.3): two accusations, signatures already
 *  verified by the frame decoder, from two distinct members of the current set other than the
 *  target, in the current view, against the same member. Returns the target or why not. */
export function checkEvidence(g: GroupView, replicas: readonly ProcessId[], evidence: readonly SignedAccusation[]): { target: ProcessId } | { refused: string } {
  const [a, b] = evidence.map((e) => e.accusation);
  if (a === undefined || b === undefined || evidence.length !== 2) return { refused: 'needs two accusations' };
  if (a.view !== g.view || b.view !== g.view) return { refused: `accusations of views ${a.view}/${b.view}, not ${g.view}` };
  if (a.target !== b.target) return { refused: `accusations against ${a.target} and ${b.target}` };
  if (a.from === b.from) return { refused: `both accusations by ${a.from}` };
  const members = new Set(replicas);
  if (!members.has(a.target)) return { refused: `${a.target} is not in the group` };
  for (const x of [a, b]) if (!members.has(x.from) || x.from === a.target) return { refused: `${x.from} cannot accuse ${a.target}` };
  return { target: a.target };
}

/** The next primary when `primary` leaves: the first other member in set order. */
export const successor = (replicas: readonly ProcessId[], primary: ProcessId): ProcessId | undefined => replicas.find((r) => r !== primary);

const agentOfNode = (ctx: GroupContext, node: string): ProcessId | undefined => ctx.liveAgents.find((a) => a.node === node)?.id;

/** The added nodes' spares among `ids`: the keys an agent needs to verify them (PROTOCOL §10.12). */
export const addedAmong = (added: readonly AddedReplica[], ids: readonly ProcessId[]): AddedReplica[] => added.filter((x) => ids.includes(x.id));

/** The `replicas` command of the group as it is (PROTOCOL §10.7). */
export function replicasCommand(g: GroupView, replicas: readonly ProcessId[], primary: ProcessId, added: readonly AddedReplica[]): Extract<GroupCommand, { type: 'replicas' }> {
  return { type: 'replicas', view: g.view, primary, replicas: [...replicas], ports: movedPorts(g, replicas), added: addedAmong(added, replicas) };
}

function announce(ctx: GroupContext, g: GroupView, replicas: ProcessId[], primary: ProcessId, out: ViewChange['commands']): void {
  for (const a of ctx.liveAgents) out.push({ agent: a.id, command: replicasCommand(g, replicas, primary, ctx.added) });
}

/** A spare id never used that may start on `node` (null: on some node): bound to it or to none. */
function freshSpare(ctx: GroupContext, g: GroupView, replicas: readonly ProcessId[], node: string | null): ProcessId | undefined {
  return ctx.pool.find((p) => isSpare(ctx, p) && !replicas.includes(p) && !g.retired.includes(p) && boundTo(ctx, p, node));
}

/** With no fresh spare left, the spare retired longest ago that may start on `node`, again
 *  (PROTOCOL §10.6: a new incarnation of a retired spare id). Its old process is gone: its agent
 *  killed it (`replica.kill`) or a reset took it with its node, and only a live node's agent can
 *  start it. The new one runs from the same key on the same host at a higher incarnation, which
 *  every peer's link and the watchdog take as a restart. So a cluster replaces replicas for as
 *  long as it has healthy nodes that hold spare keys. The initial ids are never reused: a
 *  booting node may start its own (PROTOCOL §10.10). */
function recycledSpare(ctx: GroupContext, g: GroupView, replicas: readonly ProcessId[], node: string | null): ProcessId | undefined {
  return g.retired.find((p) => isSpare(ctx, p) && !replicas.includes(p) && boundTo(ctx, p, node));
}

/** The initial replicas come first in the pool; the rest are spares (membership). */
const isSpare = (ctx: GroupContext, p: ProcessId): boolean => ctx.pool.indexOf(p) >= REPLICA_COUNT;
const boundTo = (ctx: GroupContext, p: ProcessId, node: string | null): boolean => node === null || (ctx.spareNodes.get(p) ?? node) === node;
const spareFor = (ctx: GroupContext, g: GroupView, replicas: readonly ProcessId[], node: string | null): ProcessId | undefined =>
  freshSpare(ctx, g, replicas, node) ?? recycledSpare(ctx, g, replicas, node);

/** Choose the next spare id and a node for it, and command the spawn (PROTOCOL §10.6). */
function startRecovery(ctx: GroupContext, g: GroupView, replicas: ProcessId[], primary: ProcessId, tried: string[], out: ViewChange): void {
  const id = spareFor(ctx, g, replicas, null);
  if (id === undefined) {
    g.recovery = null;
    out.events.push({ text: 'no spare replica id is left: the group runs with two replicas' });
    return;
  }
  g.recovery = { id, node: null, sinceTick: ctx.tick, tried };
  placeRecovery(ctx, g, replicas, primary, out);
}

/** Give the waiting replacement a node, if one is eligible: a live node that hosts no member,
 *  has a spare id it can start, and was not tried in this replacement, the first by agent id.
 *  The id is fixed here: with spares bound to nodes it is the chosen node's first free one. */
function placeRecovery(ctx: GroupContext, g: GroupView, replicas: ProcessId[], primary: ProcessId, out: ViewChange): void {
  const r = g.recovery;
  if (r === null || r.node !== null) return;
  const hosting = new Set(replicas.map((x) => g.replicaNodes.get(x)));
  // Fresh spares first, on any eligible node; a retired one again only when none is left.
  const withSpare = (find: typeof freshSpare) => ctx.liveAgents.filter((a) => !hosting.has(a.node) && find(ctx, g, replicas, a.node) !== undefined);
  const fresh = withSpare(freshSpare);
  const find = fresh.length > 0 ? freshSpare : recycledSpare;
  const eligible = fresh.length > 0 ? fresh : withSpare(recycledSpare);
  let pick = eligible.find((a) => !r.tried.includes(a.node));
  // Every eligible node was tried once: start over, from the first by agent id.
  if (pick === undefined && r.tried.length > 0) {
    pick = eligible[0];
    if (pick !== undefined) r.tried = [];
  }
  if (pick === undefined) return;
  const id = find(ctx, g, replicas, pick.node);
  assert(id !== undefined, `node ${pick.node} was picked for holding a spare id`); // eligible: withSpare(find)
  r.id = id;
  r.node = pick.node;
  r.sinceTick = ctx.tick;
  r.tried.push(pick.node);
  g.replicaNodes.set(r.id, pick.node);
  const again = g.retired.includes(r.id);
  if (again) g.retired = g.retired.filter((x) => x !== r.id);
  out.commands.push({ agent: pick.id, command: { type: 'replica.spawn', id: r.id, view: g.view, primary, replicas: [...replicas], added: addedAmong(ctx.added, replicas) } });
  journal(out, `replica ${r.id} to start on ${pick.node}${again ? ' (a new incarnation of a retired spare id)' : ''}`, 'replica.starting', r.id);
}

function retire(ctx: GroupContext, g: GroupView, id: ProcessId, out: ViewChange): void {
  if (!g.retired.includes(id)) g.retired.push(id);
  g.ports.delete(id);
  const node = g.replicaNodes.get(id);
  g.replicaNodes.delete(id);
  const agent = node === undefined ? undefined : agentOfNode(ctx, node);
  if (agent !== undefined) out.commands.push({ agent, command: { type: 'replica.kill', id } });
}

/** Apply `replica.condemn` with checked evidence against `target`. */
export function applyCondemn(ctx: GroupContext, g: GroupView, target: ProcessId, reason: AccuseReason): ViewChange {
  const out: ViewChange = { replicas: ctx.replicas, primary: ctx.primary, commands: [], events: [] };
  const replicas = ctx.replicas.filter((r) => r !== target);
  let primary = ctx.primary;
  if (target === ctx.primary) {
    const next = successor(ctx.replicas, target);
    // Two other members accused it (PROTOCOL §10.3): the group has more than the target.
    assert(next !== undefined, `the condemned primary ${target} has no successor`);
    primary = next;
  }
  const condemnedNode = g.replicaNodes.get(target);
  g.view++;
  g.reports = new Map();
  retire(ctx, g, target, out);
  journal(out, `replica ${target} condemned (${reason}); group ${replicas.join(',')}, primary ${primary}, view ${g.view}`, 'replica.condemned', target);
  // A replacement under way is kept: it joins the smaller group just the same.
  announce(ctx, g, replicas, primary, out.commands);
  // Another node first: the condemned replica's may be the faulty one (spec §2.1 (ii)).
  if (g.recovery === null) startRecovery(ctx, g, replicas, primary, condemnedNode === undefined ? [] : [condemnedNode], out);
  out.replicas = replicas;
  out.primary = primary;
  return out;
}

/** Apply `replica.add`: the replacement asked for the state; it joins as a backup at this RSN,
 *  listening on `port` (0: cluster.json's). */
export function applyAdd(ctx: GroupContext, g: GroupView, id: ProcessId, port: number): ViewChange | null {
  if (g.recovery === null || g.recovery.id !== id || g.recovery.node === null || ctx.replicas.length >= 3) return null;
  const out: ViewChange = { replicas: [...ctx.replicas, id], primary: ctx.primary, commands: [], events: [] };
  g.view++;
  g.reports = new Map();
  g.recovery = null;
  if (port === 0) g.ports.delete(id);
  else g.ports.set(id, port);
  announce(ctx, g, out.replicas, ctx.primary, out.commands);
  journal(out, `replica ${id} joined${port === 0 ? '' : ` on port ${port}, its own being taken`}; group ${out.replicas.join(',')}, view ${g.view}`, 'replica.joined', id);
  return out;
}

/** On every tick and node change: a replacement that did not ask for the state in time is
 *  abandoned (its id retired, killed where it was started) and another is started elsewhere
 *  (A24); one waiting for a node gets one when a node is eligible. */
export function recoveryStep(ctx: GroupContext, g: GroupView): ViewChange {
  const out: ViewChange = { replicas: ctx.replicas, primary: ctx.primary, commands: [], events: [] };
  const r = g.recovery;
  if (r === null) return out;
  // Its node failed before it joined: it will not start there, so do not wait out the timeout.
  const nodeLost = r.node !== null && !ctx.liveAgents.some((a) => a.node === r.node);
  if (r.node !== null && (nodeLost || ctx.tick - r.sinceTick >= ctx.replicaStartTimeoutTicks)) {
    journal(out, nodeLost ? `replica ${r.id}: ${r.node} failed before it joined: abandoned` : `replica ${r.id} did not start on ${r.node}: abandoned`, 'replica.abandoned', r.id);
    retire(ctx, g, r.id, out);
    startRecovery(ctx, g, ctx.replicas, ctx.primary, r.tried, out);
    return out;
  }
  placeRecovery(ctx, g, ctx.replicas, ctx.primary, out);
  return out;
}

/** Record an agent's error report; returns the replicas that now have reports from
 *  REPORTING_AGENTS distinct agents (PROTOCOL §10.2 `agent.reports`). */
export function recordReport(g: GroupView, replicas: readonly ProcessId[], agent: ProcessId, kind: ErrorReportKind, suspects: readonly ProcessId[]): ProcessId[] {
  const now: ProcessId[] = [];
  for (const r of suspects) {
    if (!replicas.includes(r)) continue;
    let byAgent = g.reports.get(r);
    if (byAgent === undefined) g.reports.set(r, (byAgent = new Map()));
    const counts = byAgent.get(agent) ?? [0, 0];
    const was = counting(byAgent);
    byAgent.set(agent, kind === 'mismatch' ? [counts[0] + 1, counts[1]] : [counts[0], counts[1] + 1]);
    if (was < REPORTING_AGENTS && counting(byAgent) >= REPORTING_AGENTS) now.push(r);
  }
  return now;
}

/** Agents whose reports count: any mismatch, or enough timeouts. */
function counting(byAgent: Map<ProcessId, [number, number]>): number {
  let n = 0;
  for (const [m, t] of byAgent.values()) if (m > 0 || t >= TIMEOUT_REPORTS_TO_COUNT) n++;
  return n;
}
