// Membership changes and the shutdown in the manager's replicated state (docs/PROTOCOL.md
// §10.9, §10.11, §10.12): nodes added and removed at run time, drained nodes leaving, the
// membership log a cluster reset keeps, and the operator's shutdown of the whole cluster.
// Called by replicated-apply.ts at the request's RSN.
import { operateTask } from './cluster-inputs.ts';
import { eventEffect, liveTasks, slotsHeldOn, tasksOn, type TaskEffect } from './cluster-state.ts';
import { MAX_MEMBER_CHANGES } from './constants.ts';
import type { ProcessId } from './ports.ts';
import { absorb, emit, poolWithAdded, type ApplyResult, type MemberChange, type ReplicatedState } from './replicated-state.ts';
import type { NodeAdd, NodeRemove } from './wire/messages.ts';

/** What an operator request did: its answer, and the task effects still to absorb. */
export type Done = { outcome: { ok: boolean; text: string }; effects: TaskEffect[] };

/** PROTOCOL §10.11: every live task is killed (its processes get their terminate), every joined
 *  agent is told to stop its node, and the replicas learn (ApplyResult.shutdown) that they are to
 *  tell the watchdog and exit. A second shutdown changes nothing. */
export function shutdown(s: ReplicatedState, r: ApplyResult): Done {
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
  r.events.push(eventEffect(null, null, `cluster shutdown ordered by the operator: ${nodes.length} node${nodes.length === 1 ? '' : 's'} told to stop, ${killed.length} task${killed.length === 1 ? '' : 's'} killed`));
  r.shutdown = { rsn: s.rsn };
  const text = `cluster shutting down: ${nodes.map(([, n]) => n.node).join(', ') || 'no nodes'} told to stop; ${killed.length === 0 ? 'no task was running' : `killed ${killed.join(', ')}`}`;
  return { outcome: { ok: true, text }, effects: [] };
}

/** PROTOCOL §10.12: a node added at run time. Its agent id and node name must be new to the
 *  cluster: a replica or operator id, a known agent or node, even a removed one, is refused. */
export function addNode(s: ReplicatedState, q: NodeAdd, op: SignedBytes | null): Done {
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
  s.nodes.set(q.agent, { node: q.node, joined: false, slots: 0, failed: false, inc: 0, draining: false, protector: '' });
  if (spares.length > 0) Object.assign(s, poolWithAdded(s, s.added));
  record(s, q.nonce, 'add', q.agent, q.node, op);
  const holding = spares.length === 0 ? '' : `, spare replica${spares.length === 1 ? '' : 's'} ${spares.map((x) => x.id).join(', ')}`;
  return { outcome: { ok: true, text: `node ${q.node} added (agent ${q.agent} at ${q.address}${holding}); it joins when its agent starts` }, effects: [] };
}

/** PROTOCOL §10.12: drain a node; it leaves once no live task holds a slot there (finishDrains).
 *  A node hosting a member of the group stays: the group would lose a replica with it. */
export function removeNode(s: ReplicatedState, q: NodeRemove, op: SignedBytes | null, r: ApplyResult): Done {
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
  r.events.push(eventEffect(null, null, `node ${q.node} draining: removed by the operator${there.length === 0 ? '' : `; ${q.kill ? 'killing' : 'waiting for'} ${there.join(', ')}`}`));
  const text = there.length === 0 ? `${q.node} removed` : q.kill ? `${q.node} draining: killing ${there.join(', ')}` : `${q.node} draining: waiting for ${there.join(', ')} to finish`;
  return { outcome: { ok: true, text }, effects };
}

export type SignedBytes = { bytes: Uint8Array; sig: Uint8Array };

const fullLog = `the group has made ${MAX_MEMBER_CHANGES} membership changes since it started, all kept for a cluster reset (PROTOCOL §10.12): no more until the next one`;

/** Keeps an applied change for the task journal (PROTOCOL §10.9); one with no signed request
 *  (applied by a test directly) is not journalled. */
function record(s: ReplicatedState, nonce: string, kind: MemberChange['kind'], agent: ProcessId, node: string, op: SignedBytes | null): void {
  if (op !== null) s.members.push({ nonce, kind, agent, node, op: new Uint8Array(op.bytes), opSig: new Uint8Array(op.sig) });
}

/** Was `agent`'s node removed by an operator (PROTOCOL §10.12)? */
export const wasRemoved = (s: ReplicatedState, agent: ProcessId): boolean => s.members.some((c) => c.kind === 'remove' && c.agent === agent);

/** A draining node that no live task holds a slot on leaves the cluster: its agent is told to
 *  stop (like a shutdown of that node alone), and the group forgets it (PROTOCOL §10.12). */
export function finishDrains(s: ReplicatedState, r: ApplyResult): void {
  for (const [agent, rec] of [...s.nodes]) {
    if (!rec.draining || slotsHeldOn(s.cluster, rec.node) > 0) continue;
    if (rec.joined && !rec.failed) emit(s, agent, { type: 'node.shutdown', rsn: s.rsn, removed: true }, r.messages);
    s.nodes.delete(agent);
    r.events.push(eventEffect(null, null, `node ${rec.node} removed (agent ${agent})`));
  }
}
