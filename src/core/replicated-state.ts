// The manager's replicated state and its deterministic transition on an ordered agent request
// (docs/PROTOCOL.md §5.4; spec §3.3 Fig. 4.25). Every replica applies the same requests in the
// same RSN order and must reach bit-identical state; the SHA-256 digest of the canonical
// encoding is what replicas compare (heartbeats now, self-diagnosis in issue 5).
//
// Kept small on purpose (spec §1.3): unacknowledged group messages are not here — they live in
// each replica's own link state.
import {
  createClusterState, encodeCluster, liveTasks, nodeFailed, slotsHeldOn, tasksOn, operateTask, nodeJoined, procReports, signalRequest, submitTask, taskTimers, tick,
  type ClusterState, type NodeRecord, type TaskEffect, type TaskTimers,
} from './cluster-state.ts';
import {
  applyAdd, applyCondemn, checkEvidence, encodeGroupView, initialGroupView, recordReport, recoveryStep, replicasCommand,
  type GroupContext, type GroupView, type ViewChange,
} from './group-view.ts';
import { DEFAULT_TIMING, MAX_BURST_COUNT, MAX_MEMBER_CHANGES, MAX_OPERATOR_OUTCOMES, type Timing } from './constants.ts';
import type { Hash, ProcessId } from './ports.ts';
import { unreachable } from '../base/result.ts';
import { pack, unpack } from './wire/frame.ts';
import { groupMsgCG, type AgentRequest, type GroupInput, type GroupMsgGC, type GroupCommand, type NodeAdd, type NodeRemove, type NodeRestore, type OperatorRequest, type TaskRestore, type TaskSubmit, type AddedReplica, type AddedSpare } from './wire/messages.ts';

export type { NodeRecord } from './cluster-state.ts';

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
  for (const a of [...agents].sort((x, y) => (x.id < y.id ? -1 : 1))) nodes.set(a.id, { node: a.node, joined: false, slots: 0, failed: false, inc: 0, draining: false });
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
    sortedEntries(s.nodes).map(([id, n]) => [id, n.node, n.joined, n.slots, n.failed, n.inc, n.draining]),
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
  events: Extract<TaskEffect, { type: 'event' }>[];
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

const noResult = (): ApplyResult => ({ messages: [], report: null, reply: null, events: [], reset: null, accuse: [], viewChanged: false, shutdown: null });

function groupContext(s: ReplicatedState): GroupContext {
  // A draining node hosts no replacement: it is about to leave (PROTOCOL §10.12).
  const liveAgents = [...s.nodes.entries()].filter(([, n]) => n.joined && !n.failed && !n.draining).map(([id, n]) => ({ id, node: n.node }))
    .sort((a, b) => (a.id < b.id ? -1 : 1));
  return {
    replicas: s.replicas, primary: s.primary, liveAgents, pool: s.pool, spareNodes: s.spareNodes, added: addedSpares(s.added), tick: s.cluster.tick,
    replicaStartTimeoutTicks: s.timers.replicaStartTimeoutTicks,
  };
}

/** Apply a change of the group's membership: new set, commands to agents, journal lines. */
function absorbView(s: ReplicatedState, change: ViewChange | null, r: ApplyResult): void {
  if (change === null) return;
  if (change.replicas !== s.replicas || change.primary !== s.primary) {
    s.replicas = change.replicas;
    s.primary = change.primary;
    r.viewChanged = true;
  }
  for (const c of change.commands) emit(s, c.agent, c.command, r.messages);
  for (const text of change.events) r.events.push({ type: 'event', task: null, vpid: null, text });
}

/** Turn task effects into group messages and journal events. */
function absorb(s: ReplicatedState, effects: TaskEffect[], r: ApplyResult): void {
  for (const e of effects) {
    if (e.type === 'command') emit(s, e.agent, e.command, r.messages);
    else r.events.push(e);
  }
}

function emit(s: ReplicatedState, dest: ProcessId, payload: GroupCommand, out: GroupMsgGC[]): void {
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

/** The submit a restore carries, decoded (its operator signature was checked before ordering:
 *  by the watchdog, and by each replica that received the restore, PROTOCOL §10.9). */
function restoredSubmit(request: TaskRestore): TaskSubmit | null {
  const tree = unpack(request.submit);
  const cg = tree.ok ? groupMsgCG.dec(tree.value, 'restore.submit') : tree;
  return cg.ok && cg.value.payload.type === 'task.submit' && cg.value.payload.nonce === request.nonce ? cg.value.payload : null;
}

/** The membership change a `node.restore` carries, decoded (its operator signature was checked
 *  before ordering, like a restored submit's). */
function restoredChange(request: NodeRestore): NodeAdd | NodeRemove | null {
  const tree = unpack(request.op);
  const cg = tree.ok ? groupMsgCG.dec(tree.value, 'restore.op') : tree;
  if (!cg.ok) return null;
  const p = cg.value.payload;
  return (p.type === 'node.add' || p.type === 'node.remove') && p.nonce === request.nonce ? p : null;
}

type Done = { outcome: { ok: boolean; text: string }; effects: TaskEffect[] };

/** What one operator request does (applyOperatorRequest records and answers it). */
function operatorStep(s: ReplicatedState, request: OperatorRequest, signed: { bytes: Uint8Array; sig: Uint8Array } | null, r: ApplyResult): Done {
  const accepting = s.shutdownAt === null;
  const stopped: Done = { outcome: { ok: false, text: `the cluster is shutting down (ordered at RSN ${s.shutdownAt ?? 0}): nothing new is accepted` }, effects: [] };
  switch (request.type) {
    case 'cluster.shutdown':
      return shutdown(s, r);
    case 'node.add':
      return addNode(s, request, signed);
    case 'node.remove':
      return removeNode(s, request, signed, r);
    case 'node.restore': {
      const change = restoredChange(request);
      if (change === null) return { outcome: { ok: false, text: 'restore: not an operator\'s node.add or node.remove' }, effects: [] };
      const op = { bytes: request.op, sig: request.opSig };
      return change.type === 'node.add' ? addNode(s, change, op) : removeNode(s, change, op, r);
    }
    case 'task.submit':
      if (!accepting) return stopped;
      return submitTask(s.cluster, s.nodes, s.timers, request, s.rsn, signed === null ? null : { nonce: request.nonce, ...signed });
    case 'task.restore': {
      if (!accepting) return stopped;
      const submit = restoredSubmit(request);
      if (submit === null) return { outcome: { ok: false, text: `restore of ${request.task}: not an operator's task.submit` }, effects: [] };
      return submitTask(s.cluster, s.nodes, s.timers, submit, s.rsn, { nonce: request.nonce, bytes: request.submit, sig: request.submitSig }, request.task);
    }
    case 'task.kill':
    case 'task.restart':
      return operateTask(s.cluster, s.nodes, s.timers, request.task, request.type === 'task.kill' ? 'kill' : 'restart');
    default:
      return unreachable(request);
  }
}

/** Apply an operator request at RSN `s.rsn`; a nonce seen before is answered, not re-applied.
 *  `signed`: the CG it came in, journalled with a submitted task (PROTOCOL §10.9). */
export function applyOperatorRequest(s: ReplicatedState, request: OperatorRequest, signed: { bytes: Uint8Array; sig: Uint8Array } | null = null): ApplyResult {
  const r = noResult();
  const seen = s.outcomes.get(request.nonce);
  if (seen !== undefined) {
    r.reply = seen;
    return r;
  }
  const done = operatorStep(s, request, signed, r);
  absorb(s, done.effects, r);
  finishDrains(s, r);
  const outcome: OperatorOutcome = { nonce: request.nonce, rsn: s.rsn, ok: done.outcome.ok, text: done.outcome.text };
  s.outcomes.set(request.nonce, outcome);
  s.outcomeOrder.push(request.nonce);
  while (s.outcomeOrder.length > MAX_OPERATOR_OUTCOMES) s.outcomes.delete(s.outcomeOrder.shift() as string);
  r.reply = outcome;
  return r;
}

/** PROTOCOL §10.11: every live task is killed (its processes get their terminate), every joined
 *  agent is told to stop its node, and the replicas learn (ApplyResult.shutdown) that they are to
 *  tell the watchdog and exit. A second shutdown changes nothing. */
function shutdown(s: ReplicatedState, r: ApplyResult): Done {
  if (s.shutdownAt !== null) return { outcome: { ok: true, text: `the cluster is already shutting down (ordered at RSN ${s.shutdownAt})` }, effects: [] };
  s.shutdownAt = s.rsn;
  const effects: TaskEffect[] = [];
  const killed: string[] = [];
  for (const task of liveTasks(s.cluster)) {
    const k = operateTask(s.cluster, s.nodes, s.timers, task, 'kill');
    if (k.outcome.ok) killed.push(task);
    effects.push(...k.effects);
  }
  absorb(s, effects, r);
  const nodes = [...s.nodes.entries()].filter(([, n]) => n.joined && !n.failed).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  for (const [agent] of nodes) emit(s, agent, { type: 'node.shutdown', rsn: s.rsn, removed: false }, r.messages);
  r.events.push({ type: 'event', task: null, vpid: null, text: `cluster shutdown ordered by the operator: ${nodes.length} node${nodes.length === 1 ? '' : 's'} told to stop, ${killed.length} task${killed.length === 1 ? '' : 's'} killed` });
  r.shutdown = { rsn: s.rsn };
  const text = `cluster shutting down: ${nodes.map(([, n]) => n.node).join(', ') || 'no nodes'} told to stop; ${killed.length === 0 ? 'no task was running' : `killed ${killed.join(', ')}`}`;
  return { outcome: { ok: true, text }, effects: [] };
}

/** PROTOCOL §10.12: a node added at run time. Its agent id and node name must be new to the
 *  cluster: a replica or operator id, a known agent or node, even a removed one, is refused. */
function addNode(s: ReplicatedState, q: NodeAdd, op: SignedBytes | null): Done {
  const refuse = (why: string) => ({ outcome: { ok: false, text: `cannot add ${q.node}: ${why}` }, effects: [] });
  if (s.shutdownAt !== null) return refuse('the cluster is shutting down');
  if (s.members.length >= MAX_MEMBER_CHANGES) return refuse(fullLog);
  const nodesInUse = new Set([...s.nodes.values()].map((n) => n.node));
  for (const a of s.added.values()) nodesInUse.add(a.node);
  for (const n of s.group.replicaNodes.values()) nodesInUse.add(n);
  for (const n of s.spareNodes.values()) nodesInUse.add(n);
  const taken = (id: ProcessId) => s.nodes.has(id) || s.added.has(id) || s.pool.includes(id) || s.clientInc.has(id) || s.members.some((c) => c.agent === id);
  for (const id of [q.agent, ...q.spares.map((x) => x.id)]) if (taken(id)) return refuse(`${id} is already a process of this cluster`);
  const ids = [q.agent, ...q.spares.map((x) => x.id)];
  if (new Set(ids).size !== ids.length) return refuse(`the request names ${ids.join(', ')}: an id twice`);
  const ports = [q.port, ...q.spares.map((x) => x.port)];
  if (new Set(ports).size !== ports.length) return refuse(`the request gives ports ${ports.join(', ')}: a port twice on one host`);
  if (nodesInUse.has(q.node)) return refuse(`a node ${q.node} is already in this cluster`);
  // A removed node of cluster.json is in neither map any more; the membership log remembers it.
  if (s.members.some((c) => c.node === q.node)) return refuse(`a node ${q.node} was removed from this cluster: a name is never used again`);
  // A removed node's address is free again (a repaired machine may come back); its name and agent
  // id are not: finished tasks still name the node, and the id's key can never be revoked.
  if ([...s.added].some(([a, n]) => n.address === q.address && s.nodes.has(a))) return refuse(`address ${q.address} is already an added node's`);
  const spares = q.spares.map((x) => ({ id: x.id, port: x.port, publicKey: new Uint8Array(x.publicKey) }));
  s.added.set(q.agent, { node: q.node, address: q.address, port: q.port, publicKey: new Uint8Array(q.publicKey), spares });
  s.nodes.set(q.agent, { node: q.node, joined: false, slots: 0, failed: false, inc: 0, draining: false });
  if (spares.length > 0) Object.assign(s, poolWithAdded(s, s.added));
  record(s, q.nonce, 'add', q.agent, q.node, op);
  const holding = spares.length === 0 ? '' : `, spare replica${spares.length === 1 ? '' : 's'} ${spares.map((x) => x.id).join(', ')}`;
  return { outcome: { ok: true, text: `node ${q.node} added (agent ${q.agent} at ${q.address}${holding}); it joins when its agent starts` }, effects: [] };
}

/** PROTOCOL §10.12: drain a node; it leaves once no live task holds a slot there (finishDrains).
 *  A node hosting a member of the group stays: the group would lose a replica with it. */
function removeNode(s: ReplicatedState, q: NodeRemove, op: SignedBytes | null, r: ApplyResult): Done {
  const refuse = (why: string) => ({ outcome: { ok: false, text: `cannot remove ${q.node}: ${why}` }, effects: [] });
  const entry = [...s.nodes.entries()].find(([, n]) => n.node === q.node);
  if (entry === undefined) return refuse('no such node in the cluster (see `trine nodes`)');
  const hosting = s.replicas.filter((x) => s.group.replicaNodes.get(x) === q.node);
  if (hosting.length > 0) return refuse(`it hosts replica ${hosting.join(', ')} of the manager group`);
  const [agent, rec] = entry;
  // A second removal (`--kill` after a plain one) is recorded once: a reset repeats the first.
  if (!rec.draining) {
    if (s.members.length >= MAX_MEMBER_CHANGES) return refuse(fullLog);
    record(s, q.nonce, 'remove', agent, q.node, op);
  }
  s.nodes.set(agent, { ...rec, draining: true });
  const effects: TaskEffect[] = [];
  const there = tasksOn(s.cluster, q.node);
  if (q.kill) for (const task of there) effects.push(...operateTask(s.cluster, s.nodes, s.timers, task, 'kill').effects);
  r.events.push({ type: 'event', task: null, vpid: null, text: `node ${q.node} draining: removed by the operator${there.length === 0 ? '' : `; ${q.kill ? 'killing' : 'waiting for'} ${there.join(', ')}`}` });
  const text = there.length === 0 ? `${q.node} removed` : q.kill ? `${q.node} draining: killing ${there.join(', ')}` : `${q.node} draining: waiting for ${there.join(', ')} to finish`;
  return { outcome: { ok: true, text }, effects };
}

type SignedBytes = { bytes: Uint8Array; sig: Uint8Array };

const fullLog = `the group has made ${MAX_MEMBER_CHANGES} membership changes since it started, all kept for a cluster reset (PROTOCOL §10.12): no more until the next one`;

/** Keeps an applied change for the task journal (PROTOCOL §10.9); one with no signed request
 *  (applied by a test directly) is not journalled. */
function record(s: ReplicatedState, nonce: string, kind: MemberChange['kind'], agent: ProcessId, node: string, op: SignedBytes | null): void {
  if (op !== null) s.members.push({ nonce, kind, agent, node, op: new Uint8Array(op.bytes), opSig: new Uint8Array(op.sig) });
}

/** Was `agent`'s node removed by an operator (PROTOCOL §10.12)? */
const wasRemoved = (s: ReplicatedState, agent: ProcessId): boolean => s.members.some((c) => c.kind === 'remove' && c.agent === agent);

/** A draining node that no live task holds a slot on leaves the cluster: its agent is told to
 *  stop (like a shutdown of that node alone), and the group forgets it (PROTOCOL §10.12). */
function finishDrains(s: ReplicatedState, r: ApplyResult): void {
  for (const [agent, rec] of [...s.nodes]) {
    if (!rec.draining || slotsHeldOn(s.cluster, rec.node) > 0) continue;
    if (rec.joined && !rec.failed) emit(s, agent, { type: 'node.shutdown', rsn: s.rsn, removed: true }, r.messages);
    s.nodes.delete(agent);
    r.events.push({ type: 'event', task: null, vpid: null, text: `node ${rec.node} removed (agent ${agent})` });
  }
}

/** Apply an input of the group's own (PROTOCOL §8.3, §8.4) at RSN `s.rsn`. */
export function applyGroupInput(s: ReplicatedState, input: GroupInput): ApplyResult {
  const r = noResult();
  switch (input.type) {
    case 'tick':
      absorb(s, tick(s.cluster, s.nodes, s.timers), r);
      finishDrains(s, r);
      if (s.shutdownAt === null) absorbView(s, recoveryStep(groupContext(s), s.group), r);
      return r;
    case 'replica.condemn': {
      // The primary checked the evidence before ordering it; a correct primary never orders a
      // refused one, so nothing changes (the backups' order confirmation keeps them equal).
      const checked = checkEvidence(s.group, s.replicas, input.evidence);
      if ('refused' in checked) {
        r.events.push({ type: 'event', task: null, vpid: null, text: `condemnation refused: ${checked.refused}` });
        return r;
      }
      const reason = input.evidence[0]?.accusation.reason ?? 'silent';
      absorbView(s, applyCondemn(groupContext(s), s.group, checked.target, reason), r);
      return r;
    }
    case 'replica.add':
      absorbView(s, applyAdd(groupContext(s), s.group, input.id, input.port), r);
      return r;
    case 'node.failed': {
      const rec = s.nodes.get(input.agent);
      // A newer incarnation joined since the suspicion began, or it was already declared; or the
      // cluster is shutting down, and its nodes stop on purpose (PROTOCOL §10.11).
      if (rec === undefined || rec.failed || !rec.joined || rec.inc !== input.inc || s.shutdownAt !== null) return r;
      s.nodes.set(input.agent, { ...rec, failed: true });
      absorb(s, nodeFailed(s.cluster, s.nodes, s.timers, input.agent), r);
      finishDrains(s, r);
      r.reset = { node: rec.node, rsn: s.rsn, address: s.added.get(input.agent)?.address ?? '' };
      absorbView(s, recoveryStep(groupContext(s), s.group), r);
      return r;
    }
    default:
      return unreachable(input);
  }
}

/** Apply one request from agent `client` (incarnation `inc`), already accepted in CSN order, at
 *  RSN `s.rsn`. */
export function applyRequest(s: ReplicatedState, client: ProcessId, request: AgentRequest, inc = 0): ApplyResult {
  const messages: GroupMsgGC[] = [];
  const result = (): ApplyResult => ({ ...noResult(), messages });
  switch (request.type) {
    case 'node.join': {
      // Every agent's first request; its incarnation was adopted just before (replica.ts deliver).
      const rec = s.nodes.get(client);
      if (rec === undefined) {
        // A removed node's agent that came back (restarted, or booted by a cluster reset before
        // the removal was restored) is told again to stop (PROTOCOL §10.12).
        const r = result();
        if (wasRemoved(s, client)) emit(s, client, { type: 'node.shutdown', rsn: s.rsn, removed: true }, messages);
        return r;
      }
      s.nodes.set(client, { ...rec, joined: true, slots: request.slots, failed: false, inc });
      // The new incarnation learns which of its node's processes the group believes run, when
      // there are any or it asks (PROTOCOL §8.6); placement may use its slots now.
      const r = result();
      const joined = nodeJoined(s.cluster, s.nodes, s.timers, client);
      if (request.resync || joined.adopt.length > 0) emit(s, client, { type: 'procs.adopt', procs: joined.adopt }, messages);
      absorb(s, joined.effects, r);
      // A (re)joined agent learns the group as it is now, and may host a replacement.
      if (s.group.view > 0) emit(s, client, replicasCommand(s.group, s.replicas, s.primary, addedSpares(s.added)), messages);
      // One that joins while the cluster shuts down stops too (PROTOCOL §10.11).
      if (s.shutdownAt !== null) emit(s, client, { type: 'node.shutdown', rsn: s.shutdownAt, removed: false }, messages);
      else absorbView(s, recoveryStep(groupContext(s), s.group), r);
      return r;
    }
    case 'echo': {
      if (!s.nodes.has(client)) return result(); // a removed node's (PROTOCOL §10.12)
      // Only agents that joined: their incarnation is adopted, so their chain is well defined
      // (PROTOCOL §5.7). The sender itself has joined by now: its request was just ordered.
      const joined = [...s.nodes.entries()].filter(([, n]) => n.joined && !n.failed).map(([id]) => id).sort();
      const targets = request.fanout === 'self' ? [client] : joined;
      // A faulty agent cannot make the group flood the cluster (constants.ts MAX_BURST_COUNT).
      const count = Math.min(request.count, MAX_BURST_COUNT);
      for (let index = 0; index < count; index++) {
        for (const dest of targets) {
          emit(s, dest, { type: 'echo.reply', origin: client, tag: request.tag, rsn: s.rsn, index, data: request.data }, messages);
        }
      }
      return result();
    }
    case 'error.report':
      return {
        ...result(), report: { gssn: request.gssn, count: request.count, kind: request.kind, suspects: request.suspects },
        accuse: recordReport(s.group, s.replicas, client, request.kind, request.suspects),
      };
    case 'proc.report': {
      const r = result();
      // A failed node's reports are stale: its processes were declared dead (PROTOCOL §8.4); a
      // removed node has none left (§10.12).
      if (s.nodes.get(client)?.failed !== false) return r;
      absorb(s, procReports(s.cluster, s.nodes, s.timers, client, request.reports), r);
      finishDrains(s, r);
      return r;
    }
    case 'sig.request': {
      const r = result();
      if (s.nodes.get(client)?.failed !== false) return r;
      absorb(s, signalRequest(s.cluster, s.nodes, s.timers, client, request), r);
      return r;
    }
    case 'task.submit':
    case 'task.kill':
    case 'task.restart':
    case 'task.restore':
    case 'cluster.shutdown':
    case 'node.add':
    case 'node.remove':
    case 'node.restore':
      // Replicas refuse these from agents before ordering; a primary that ordered one anyway
      // changes nothing.
      return result();
    default:
      return unreachable(request);
  }
}
