// What a node agent receives from the group (docs/PROTOCOL.md §5; spec §3.5): it votes on the
// group message replicas the replicas send — a command is delivered on f+1 = 2 matching copies,
// in the order of the per-agent GSSN chain — and applies the group changes those commands carry
// (PROTOCOL §10.7) and the keys of members added at run time (§10.12). Verbs over the agent's
// state (src/core/agent-state.ts). Pure: no clock, no I/O.
import { QUORUM } from './constants.ts';
import { toHex } from '../base/hex.ts';
import { linkAddPeer, linkRemovePeer } from './link.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import { assert } from '../base/result.ts';
import { pack } from './wire/frame.ts';
import { groupMsgGC, type AddedReplica, type GroupCommand, type GroupMsgGC } from './wire/messages.ts';
import { completeEntry, finish, forget, release } from './agent-gmb.ts';
import { onCsnAck, resendToPrimary } from './agent-requests.ts';
import { bestContent, expectedFor, type AgentState } from './agent-state.ts';

/** With |R| = 3: more mismatching copies than this and 2 matching copies are impossible. */
const MAX_MISMATCHES = 1;

/** spec §3.5 G2: one admitted copy from replica `from`. */
export function onCopy(s: AgentState, from: ProcessId, gc: GroupMsgGC, nowMs: number, out: CoreEffect[]): void {
  // Copies for a predecessor incarnation chain from its chain, not ours: they are not ours to
  // vote on, and their CSN acks are not about our requests (PROTOCOL §5.7).
  if (gc.dest !== s.id || gc.destInc !== s.inc || !s.replicas.includes(from)) return;
  onCsnAck(s, from, gc.csnAck, nowMs);
  const key = toHex(pack(groupMsgGC.enc(gc)));
  let e = s.gmb.get(gc.gssn);
  if (e === undefined) {
    // G2 4a: a late copy of a GSSN already finished (or never seen) is discarded.
    if (gc.gssn <= s.gssnDelivered) return;
    s.opened.set(from, (s.opened.get(from) ?? 0) + 1);
    const timerAtMs = nowMs + s.timing.replicaTimeoutMs;
    e = { gssn: gc.gssn, opener: from, copies: new Map(), contents: new Map(), delivered: false, complete: false, firings: 0, timerAtMs };
    s.gmb.set(gc.gssn, e);
    s.replicaTimeoutsDueAtMs = Math.min(s.replicaTimeoutsDueAtMs, timerAtMs);
  }
  if (e.copies.has(from)) return; // G2 3a: a duplicate from the same replica
  e.copies.set(from, key);
  const c = e.contents.get(key);
  if (c === undefined) e.contents.set(key, { gc, count: 1 });
  else c.count++;
  const best = bestContent(e);
  assert(best !== null, 'an entry holds the copy just added');

  if (!e.delivered && best.count === QUORUM && best.key === key) s.ready.set(gc.prevGssn, e);
  if (!e.delivered && e.copies.size - best.count > MAX_MISMATCHES) {
    // G2 3e: f+1 matching copies are impossible, so by the fault model this agent is faulty.
    s.terminated = `gssn ${e.gssn}: ${e.copies.size} copies, no ${QUORUM} match`;
    out.push({ type: 'terminate', reason: s.terminated });
    return;
  }
  if (expectedFor(s, e.gssn).every((x) => e.copies.has(x))) completeEntry(s, e);
  deliverReady(s, nowMs, out);
  if (e.complete && e.delivered) finish(s, e, nowMs);
}

/** Delivers every entry whose content has f+1 matching copies and chains from the last one
 *  delivered (spec §3.5 G3). */
function deliverReady(s: AgentState, nowMs: number, out: CoreEffect[]): void {
  for (let e = s.ready.get(s.gssnDelivered); e !== undefined; e = s.ready.get(s.gssnDelivered)) {
    s.ready.delete(s.gssnDelivered);
    const best = bestContent(e);
    if (best === null) break;
    e.delivered = true;
    release(s, e.opener);
    s.gssnDelivered = e.gssn;
    s.awaitingCompletion.push(e.gssn);
    const command = best.gc.payload;
    // Keys first: the replica a `replica.spawn` starts reads them from this node's disk.
    if (command.type === 'replicas' || command.type === 'replica.spawn') learnKeys(s, command.added, out);
    out.push({ type: 'deliver.command', gssn: e.gssn, command });
    if (command.type === 'replicas') applyGroup(s, command, nowMs, out, e.gssn);
    if (e.complete) finish(s, e, nowMs);
  }
  // Undelivered entries the chain has passed were never sent by two correct replicas.
  for (const [g, e] of s.gmb) if (!e.delivered && g < s.gssnDelivered) forget(s, e);
  for (const prev of s.ready.keys()) if (prev < s.gssnDelivered) s.ready.delete(prev);
}

/** PROTOCOL §10.12: members whose keys cluster.json lacks, as two replicas' matching copies of
 *  a command named them (or two status replies, the `group` input): the driver verifies their
 *  frames and dials them from now on. An id is learnt once; its key never changes. */
export function learnKeys(s: AgentState, added: readonly AddedReplica[], out: CoreEffect[]): void {
  const fresh = added.filter((x) => !s.learnt.has(x.id));
  if (fresh.length === 0) return;
  for (const x of fresh) s.learnt.add(x.id);
  out.push({ type: 'keys', keys: fresh.map((x) => ({ id: x.id, publicKey: x.publicKey, replica: { node: x.node, address: x.address, port: x.port } })) });
}

/** PROTOCOL §10.7: the group changed. Sessions follow the set; requests not yet acknowledged
 *  by f+1 members go to the new primary at once (the old one may be the faulty one). */
export function applyGroup(
  s: AgentState, c: Extract<GroupCommand, { type: 'replicas' }>, nowMs: number, out: CoreEffect[], delivering: number | null = null,
): void {
  if (c.view <= s.view || !c.replicas.includes(c.primary)) return;
  s.view = c.view;
  const removed = s.replicas.filter((r) => !c.replicas.includes(r));
  for (const r of c.replicas) if (!s.replicas.includes(r)) s.joinedAtGssn.set(r, s.gssnDelivered);
  s.replicas = [...c.replicas];
  for (const r of s.replicas) linkAddPeer(s.links, r, nowMs, out);
  for (const r of removed) {
    linkRemovePeer(s.links, r);
    s.csnAckBy.delete(r);
  }
  const primaryChanged = c.primary !== s.primary;
  s.primary = c.primary;
  out.push({ type: 'log', level: 'warn', event: 'agent.group', fields: { view: s.view, replicas: s.replicas, primary: s.primary } });
  out.push({ type: 'replicas', replicas: [...s.replicas], ports: c.ports.filter((x) => s.replicas.includes(x.id)) });
  // Entries that waited only for a removed member's copy have every copy they are owed now:
  // settled, without timing out three times and reporting nobody (PROTOCOL §5.3). The entry
  // that carried this command (`delivering`) is finished by deliverReady right after; a group
  // reported by two replicas (the `group` input) has no such entry, so every one is finished here.
  for (const e of [...s.gmb.values()]) {
    if (e.complete || !expectedFor(s, e.gssn).every((x) => e.copies.has(x))) continue;
    completeEntry(s, e);
    if (e.delivered && e.gssn !== delivering) finish(s, e, nowMs);
  }
  assert(s.replicas.includes(s.primary), 'the primary is a member of the group');
  if (primaryChanged) resendToPrimary(s, nowMs, out);
}
