// The manager's replicated state (docs/PROTOCOL.md §5.4; spec §3.3 Fig. 4.25): the record every
// replica keeps, the one function that creates it, its canonical encoding and digest, the
// per-agent CSN and GSSN bookkeeping, and the ApplyResult an ordered input gives with the
// helpers that fill it. Every replica applies the same requests in the same RSN order and must
// reach bit-identical state; the SHA-256 digest of the canonical encoding is what replicas
// compare (heartbeats now, self-diagnosis in issue 5). The transitions themselves are in
// replicated-apply.ts; membership changes and the shutdown in replicated-members.ts.
//
// Kept small on purpose (spec §1.3): unacknowledged group messages are not here — they live in
// each replica's own link state.
import { createClusterState, eventEffect, taskTimers, type ClusterState, type EventEffect, type NodeRecord, type TaskEffect, type TaskTimers } from './cluster-state.ts';
import { encodeCluster } from './cluster-view.ts';
import { encodeGroupView, initialGroupView, type GroupContext, type GroupView, type ViewChange } from './group-view.ts';
import { DEFAULT_TIMING, type Timing } from './constants.ts';
import type { Hash, ProcessId } from './ports.ts';
import { pack } from './wire/frame.ts';
import type { AgentRequest, GroupMsgGC, GroupCommand, OperatorRequest, AddedReplica, AddedSpare } from './wire/messages.ts';

/** The answer to an operator request, kept so a retried request is answered again, never
 *  applied twice (PROTOCOL §8.1). */
export type OperatorOutcome = { nonce: string; rsn: number; ok: boolean; text: string };

export type ReplicatedState = {
  /** Last RSN processed (spec rsn_last). */
  rsn: number;
  /** Last GSSN used, for any destination (spec gssn_sent). */
  gssn: number;
  /** The replica set R and the primary (B = R − primary). */
  replicas: ProcessId[];
  primary: ProcessId;
  /** Per agent: the incarnation whose CSNs `csnReceived` counts (PROTOCOL §5.7). */
  clientInc: Map<ProcessId, number>;
  /** Per agent: last in-order CSN delivered (spec csn_rcvd). */
  csnReceived: Map<ProcessId, number>;
  /** Per agent: GSSN of the last group message sent to it (the prevGssn chain, PROTOCOL §5.2). */
  lastGssnTo: Map<ProcessId, number>;
  /** Per agent: its node and what it announced. */
  nodes: Map<ProcessId, NodeRecord>;
  /** Tasks and processes (PROTOCOL §8). */
  cluster: ClusterState;
  /** Operator outcomes by nonce, and the nonces oldest first (bounded, MAX_OPERATOR_OUTCOMES). */
  outcomes: Map<string, OperatorOutcome>;
  outcomeOrder: string[];
  /** The group's own membership: view, replica nodes, replacement (PROTOCOL §10). */
  group: GroupView;
  /** The RSN at which an operator shut the cluster down, or null (PROTOCOL §10.11). From then on
   *  no task is accepted, no node declared failed, no replica replaced. */
  shutdownAt: number | null;
  /** Nodes an operator added at run time, by agent (PROTOCOL §10.12): the agent's key, which
   *  replicas verify its frames with, and where its host is. Kept after the node is removed. */
  added: Map<ProcessId, AddedNode>;
  /** Every membership change applied since the group started (or restored after a cluster
   *  reset), in order, with the operator's signed request: journalled, so a cluster reset keeps
   *  them (PROTOCOL §10.9, §10.12). At most MAX_MEMBER_CHANGES. */
  members: MemberChange[];
  /** Configuration, the same on every replica (cluster.json); not part of the digest. */
  timers: TaskTimers;
  /** The replica id pool: initial ids, then cluster.json's spares, then the added nodes' spares
   *  (addedSpares); derived from configuration and `added`, so not part of the digest itself. */
  pool: readonly ProcessId[];
  /** Spares bound to a node: cluster.json's (membership.spareNodes) and the added nodes'. */
  spareNodes: ReadonlyMap<ProcessId, string>;
};

/** `spares`: the spare replica ids the node's bundle holds keys for (PROTOCOL §10.12), in the
 *  order the operator's request gave them. */
export type AddedNode = { node: string; address: string; port: number; publicKey: Uint8Array; spares: AddedSpare[] };

/** The added nodes' spares as agents and the watchdog learn them (AddedReplica), in pool order:
 *  by agent id, then as each request listed them. The same on every replica for the same state. */
export function addedSpares(added: ReadonlyMap<ProcessId, AddedNode>): AddedReplica[] {
  return sortedEntries(added).flatMap(([, a]) =>
    a.spares.map((x) => ({ id: x.id, node: a.node, address: a.address, port: x.port, publicKey: x.publicKey })));
}

/** The pool and spare bindings of configuration `config` with the added nodes' spares: those
 *  last, in addedSpares order, wherever this replica's cluster.json already lists some of them
 *  (a bundle written after the node was added), so every replica has the same pool. */
export function poolWithAdded(
  config: { pool: readonly ProcessId[]; spareNodes: ReadonlyMap<ProcessId, string> }, added: ReadonlyMap<ProcessId, AddedNode>,
): { pool: ProcessId[]; spareNodes: Map<ProcessId, string> } {
  const spares = addedSpares(added);
  const extra = new Set(spares.map((x) => x.id));
  return {
    pool: [...config.pool.filter((p) => !extra.has(p)), ...spares.map((x) => x.id)],
    spareNodes: new Map([...config.spareNodes, ...spares.map((x): [ProcessId, string] => [x.id, x.node])]),
  };
}
/** One applied membership change: which, of which agent and node, and the operator's signed CG
 *  (canonical bytes and signature) that asked for it. */
export type MemberChange = { nonce: string; kind: 'add' | 'remove'; agent: ProcessId; node: string; op: Uint8Array; opSig: Uint8Array };

export type StateMembership = {
  replicas: readonly ProcessId[];
  replicaNodes: readonly string[];
  spareReplicas: readonly ProcessId[];
  spareNodes?: Readonly<Record<ProcessId, string>>;
  agents: readonly { id: ProcessId; node: string }[];
};

export function initialState(m: StateMembership, timing: Timing = DEFAULT_TIMING): ReplicatedState {
  const { replicas, agents } = m;
  const primary = replicas[0];
  if (primary === undefined) throw new Error('a manager group needs replicas');
  const nodes = new Map<ProcessId, NodeRecord>();
  for (const a of [...agents].sort((x, y) => (x.id < y.id ? -1 : 1))) nodes.set(a.id, { node: a.node, joined: false, slots: 0, failed: false, inc: 0, draining: false, protector: '' });
  return {
    rsn: 0, gssn: 0, replicas: [...replicas], primary, clientInc: new Map(), csnReceived: new Map(), lastGssnTo: new Map(), nodes,
    cluster: createClusterState(), outcomes: new Map(), outcomeOrder: [], group: initialGroupView(replicas, m.replicaNodes), shutdownAt: null, added: new Map(), members: [],
    timers: taskTimers(timing), pool: [...replicas, ...m.spareReplicas], spareNodes: new Map(Object.entries(m.spareNodes ?? {})),
  };
}

const sortedEntries = <V>(m: ReadonlyMap<string, V>): [string, V][] => [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

/** Canonical bytes: arrays in a fixed order, map entries sorted by key (DESIGN.md §3). */
export function encodeState(s: ReplicatedState): Uint8Array {
  return pack([
    s.rsn, s.gssn, s.replicas, s.primary,
    sortedEntries(s.clientInc),
    sortedEntries(s.csnReceived),
    sortedEntries(s.lastGssnTo),
    sortedEntries(s.nodes).map(([id, n]) => [id, n.node, n.joined, n.slots, n.failed, n.inc, n.draining, n.protector]),
    encodeCluster(s.cluster),
    s.outcomeOrder.map((nonce) => {
      const o = s.outcomes.get(nonce) as OperatorOutcome;
      return [o.nonce, o.rsn, o.ok, o.text];
    }),
    encodeGroupView(s.group),
    s.shutdownAt,
    sortedEntries(s.added).map(([id, a]) => [id, a.node, a.address, a.port, a.publicKey, a.spares.map((x) => [x.id, x.port, x.publicKey])]),
    s.members.map((c) => [c.nonce, c.kind, c.agent, c.node, c.op, c.opSig]),
  ]);
}

export function digestState(s: ReplicatedState, hash: Hash): Uint8Array {
  return hash(encodeState(s));
}

/** Group messages the transition asks to send, and what it tells the replica's shell. */
export type ApplyResult = {
  messages: GroupMsgGC[];
  /** An agent reported copies that timed out or did not match: a self-diagnosis trigger. */
  report: { gssn: number; count: number; kind: string; suspects: ProcessId[] } | null;
  /** The answer to an operator request (also when it was a retry of one already applied). */
  reply: OperatorOutcome | null;
  /** What happened to tasks and processes, for the replica's journal. */
  events: EventEffect[];
  /** A node declared failed at this RSN: the watchdog is asked to reset it (spec §1.6 rule 1).
   *  `address`: a node added at run time's (PROTOCOL §10.12), which the watchdog's cluster.json
   *  does not list; empty for the others. */
  reset: { node: string; rsn: number; address: string } | null;
  /** Replicas every correct replica now accuses, from the agents' reports (PROTOCOL §10.2). */
  accuse: ProcessId[];
  /** The replica set or primary changed at this RSN (PROTOCOL §10.5–10.7). */
  viewChanged: boolean;
  /** The operator shut the cluster down at this RSN (PROTOCOL §10.11): the replica tells the
   *  watchdog, then exits. */
  shutdown: { rsn: number } | null;
};

export const noResult = (): ApplyResult => ({ messages: [], report: null, reply: null, events: [], reset: null, accuse: [], viewChanged: false, shutdown: null });

export function groupContext(s: ReplicatedState): GroupContext {
  // A draining node hosts no replacement: it is about to leave (PROTOCOL §10.12).
  const liveAgents = [...s.nodes.entries()].filter(([, n]) => n.joined && !n.failed && !n.draining).map(([id, n]) => ({ id, node: n.node }))
    .sort((a, b) => (a.id < b.id ? -1 : 1));
  return {
    replicas: s.replicas, primary: s.primary, liveAgents, pool: s.pool, spareNodes: s.spareNodes, added: addedSpares(s.added), tick: s.cluster.tick,
    replicaStartTimeoutTicks: s.timers.replicaStartTimeoutTicks,
  };
}

/** Apply a change of the group's membership: new set, commands to agents, journal lines. */
export function absorbView(s: ReplicatedState, change: ViewChange | null, r: ApplyResult): void {
  if (change === null) return;
  if (change.replicas !== s.replicas || change.primary !== s.primary) {
    s.replicas = change.replicas;
    s.primary = change.primary;
    r.viewChanged = true;
  }
  for (const c of change.commands) emit(s, c.agent, c.command, r.messages);
  for (const e of change.events) r.events.push(eventEffect(null, null, e.text, e.tag));
}

/** Turn task effects into group messages and journal events. */
export function absorb(s: ReplicatedState, effects: TaskEffect[], r: ApplyResult): void {
  for (const e of effects) {
    if (e.type === 'command') emit(s, e.agent, e.command, r.messages);
    else r.events.push(e);
  }
}

export function emit(s: ReplicatedState, dest: ProcessId, payload: GroupCommand, out: GroupMsgGC[]): void {
  s.gssn++;
  out.push({
    gssn: s.gssn, prevGssn: s.lastGssnTo.get(dest) ?? 0, csnAck: s.csnReceived.get(dest) ?? 0,
    destInc: s.clientInc.get(dest) ?? 0, payload, dest,
  });
  s.lastGssnTo.set(dest, s.gssn);
}

/** The CSN the next request of `client` must carry, given the incarnation `inc` it comes
 *  from, or null for an older incarnation (a replay of a dead agent's request). */
export function expectedCsn(s: ReplicatedState, client: ProcessId, inc: number): number | null {
  const known = s.clientInc.get(client) ?? 0;
  if (inc < known) return null;
  return inc > known ? 1 : (s.csnReceived.get(client) ?? 0) + 1;
}

/** A request from a newer incarnation of `client` is being delivered: its CSNs and its GSSN
 *  chain start afresh (PROTOCOL §5.7). Deterministic: it happens at the request's RSN. */
export function adoptIncarnation(s: ReplicatedState, client: ProcessId, inc: number): void {
  if (inc <= (s.clientInc.get(client) ?? 0)) return;
  s.clientInc.set(client, inc);
  s.csnReceived.set(client, 0);
  s.lastGssnTo.set(client, 0);
}

/** Is this request one an operator sends (PROTOCOL §8.1)? Agents may not send them, operators
 *  may send nothing else. */
export const isOperatorRequest = (r: AgentRequest): r is OperatorRequest =>
  r.type === 'task.submit' || r.type === 'task.kill' || r.type === 'task.restart' || r.type === 'task.restore' || r.type === 'cluster.shutdown' ||
  r.type === 'node.add' || r.type === 'node.remove' || r.type === 'node.restore';

/** Who may send which nonce-identified request (PROTOCOL §8.1, §10.9): operators their task
 *  requests; the watchdog only `task.restore` and `node.restore`. */
export function mayRequest(client: ProcessId, request: AgentRequest, operators: ReadonlySet<ProcessId>, scc: ProcessId): boolean {
  if (!isOperatorRequest(request)) return false;
  return request.type === 'task.restore' || request.type === 'node.restore' ? client === scc : operators.has(client);
}
