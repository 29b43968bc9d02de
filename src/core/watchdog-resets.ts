// The watchdog's orders (spec §1.6 rule 1; PROTOCOL §8.4, §10.11, §10.12): the node resets two
// replicas command, the operator's shutdown two replicas notice, the cluster reset rules 2 and 3
// order (watchdog-liveness.ts), and the replicas of nodes added at run time that two replicas
// name alike. Verbs over WatchdogState (watchdog-state.ts).
import { QUORUM } from './constants.ts';
import { toHex } from '../base/hex.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import { collectRestores } from './task-journal.ts';
import { mergeMembership } from './watchdog-restore.ts';
import {
  ignore, MAX_ADDED_NODE_VOTES, MAX_CLUSTER_RESET_HISTORY, MAX_RESET_HISTORY, push, SCC_SHUTDOWN_LINGER_MS, sinceReset,
  type ClusterResetRecord, type WatchdogState,
} from './watchdog-state.ts';
import type { AddedReplica, Item } from './wire/messages.ts';

/** Spec §1.6 rule 1: the group commands a node's power reset. */
export function onResetRequest(s: WatchdogState, from: ProcessId, nowMs: number, item: Extract<Item, { type: 'reset.node' }>, out: CoreEffect[]): void {
  if (!s.replicaIds.has(from)) return ignore(s, 'NOT_A_MEMBER');
  // A node cluster.json does not list was added at run time (PROTOCOL §10.12): its address
  // comes with the request, and two replicas must give the same one. A faulty replica's
  // invented nodes hold at most MAX_ADDED_NODE_VOTES pending votes; moving its vote for one of
  // them to another RSN holds no more, so the node asked about is not counted.
  const added = !s.knownNodes.has(item.node);
  const heldElsewhere = (k: string, v: Set<ProcessId>): boolean => {
    const node = k.split('@')[0] as string;
    return !s.knownNodes.has(node) && node !== item.node && v.has(from);
  };
  if (added && (item.address === '' || [...s.resetVotes].filter(([k, v]) => heldElsewhere(k, v)).length >= MAX_ADDED_NODE_VOTES)) {
    return ignore(s, 'UNEXPECTED');
  }
  // After a cluster reset only the restarted group commands resets: the old group's requests
  // (an unrestarted replica's, still arriving) name RSNs of a history that is gone.
  const rec = s.records.get(from);
  if (s.clusterResets.length > 0 && (rec === undefined || !sinceReset(s, from, rec.inc))) {
    ignore(s, 'UNEXPECTED');
    return;
  }
  if (s.shutDown !== null) return ignore(s, 'UNEXPECTED'); // its nodes stop on purpose (PROTOCOL §10.11)
  const key = `${item.node}@${item.rsn}@${added ? item.address : ''}`;
  if (s.ordered.has(key)) return; // done already; re-sent
  let votes = s.resetVotes.get(key);
  if (votes === undefined) {
    // Bounded: a faulty replica inventing RSNs can hold one pending vote per node at most.
    for (const k of [...s.resetVotes.keys()]) if (k.startsWith(`${item.node}@`) && s.resetVotes.get(k)?.has(from)) s.resetVotes.delete(k);
    s.resetVotes.set(key, (votes = new Set()));
  }
  votes.add(from);
  if (votes.size < QUORUM) return;
  s.resetVotes.delete(key);
  s.ordered.add(key);
  if (s.ordered.size > MAX_RESET_HISTORY) s.ordered.delete(s.ordered.values().next().value as string);
  push(s.resets, { node: item.node, rsn: item.rsn, requestedBy: [...votes].sort(), atMs: nowMs }, MAX_RESET_HISTORY);
  out.push({ type: 'reset.node', node: item.node, rsn: item.rsn, address: added ? item.address : '' });
  out.push({ type: 'log', level: 'warn', event: 'node.reset', fields: { node: item.node, rsn: item.rsn, requestedBy: [...votes] } });
}

/** PROTOCOL §10.11: a replica's notice that the operator shut the cluster down at `rsn`. Two
 *  matching ones from the current group stand the watchdog down; one faulty replica cannot. */
export function onShutdownNotice(s: WatchdogState, from: ProcessId, nowMs: number, item: Extract<Item, { type: 'shutdown.notice' }>, out: CoreEffect[]): void {
  if (!s.replicaIds.has(from)) return ignore(s, 'NOT_A_MEMBER');
  const rec = s.records.get(from);
  if (s.clusterResets.length > 0 && (rec === undefined || !sinceReset(s, from, rec.inc))) return ignore(s, 'UNEXPECTED');
  if (s.shutDown !== null) {
    if (item.rsn === s.shutDown.rsn) out.push({ type: 'send', to: from, item: { type: 'shutdown.ack', rsn: item.rsn } });
    return;
  }
  s.shutdownVotes.set(from, item.rsn);
  const by = [...s.shutdownVotes].filter(([, rsn]) => rsn === item.rsn).map(([r]) => r).sort();
  if (by.length < QUORUM) return;
  s.shutDown = { rsn: item.rsn, by, atMs: nowMs, exited: false };
  s.armed = false;
  s.consistentPastMs = null;
  for (const r of by) out.push({ type: 'send', to: r, item: { type: 'shutdown.ack', rsn: item.rsn } });
  out.push({ type: 'log', level: 'warn', event: 'shutdown', fields: { rsn: item.rsn, by } });
}

/** Rules 2 and 3: power-reset every node. The restarted group re-arms rule 2. */
export function resetCluster(s: WatchdogState, nowMs: number, rule: ClusterResetRecord['rule'], reason: string, out: CoreEffect[]): void {
  if (s.shutDown !== null) return; // the operator stopped the cluster: nothing comes back
  s.armed = false;
  s.consistentPastMs = null;
  s.counted.length = 0;
  s.lastCountedAtMs.clear();
  // The restarted group numbers its RSNs from 0 again: a node reset it orders at an RSN the
  // old group used is a new one.
  s.resetVotes.clear();
  s.ordered.clear();
  // Only the current group's notices stand the watchdog down (PROTOCOL §10.11): an old vote
  // must not make up a pair with one restarted replica's.
  s.shutdownVotes.clear();
  for (const [from, r] of s.records) s.preResetInc.set(from, Math.max(s.preResetInc.get(from) ?? 0, r.inc));
  for (const [from, seq] of s.reportSequences) s.preResetInc.set(from, Math.max(s.preResetInc.get(from) ?? 0, seq.inc));
  push(s.clusterResets, { atMs: nowMs, rule, reason }, MAX_CLUSTER_RESET_HISTORY);
  s.clusterResetCount++;
  // What the old group's replicas last told us; the restarted group starts a new set.
  const journals = [...s.journalsKept].map(([r, j]) => ({ source: `${r}'s journal kept by the watchdog (inc ${j.inc}, rsn ${j.rsn})`, data: j.data }));
  s.journalsKept.clear();
  // A reset while the last one's membership restores are still unconfirmed: the fresh group
  // may have journalled nothing yet, so the nodes the last restore named are kept too.
  const found = collectRestores(journals, s.verifier, s.operatorIds).membership;
  const membership = s.restoringMembership === null ? found : mergeMembership(s.restoringMembership, found);
  out.push({ type: 'reset.cluster', reason, journals, membership });
  out.push({ type: 'log', level: 'warn', event: 'cluster.reset', fields: { rule, reason } });
}

/** Once SCC_SHUTDOWN_LINGER_MS have passed since the shutdown it took, the watchdog exits, once. */
export function endShutdown(s: WatchdogState, nowMs: number, out: CoreEffect[]): void {
  if (s.shutDown !== null && !s.shutDown.exited && nowMs >= s.shutDown.atMs + SCC_SHUTDOWN_LINGER_MS) {
    s.shutDown.exited = true;
    out.push({ type: 'shutdown', reason: `shutdown at RSN ${s.shutDown.rsn}, noticed by ${s.shutDown.by.join(', ')}` });
  }
}

// ---- replicas cluster.json lacks (PROTOCOL §10.12) -----------------------------------------

/** A replica names the members that are spares of added nodes, with their keys. One that two
 *  replicas name alike (same node, address, port and key) is a replica from now on: its
 *  frames verify, it heartbeats and votes like the others. One faulty replica alone cannot
 *  give an id a key; an id learnt keeps its key. */
export function onReplicaKeys(s: WatchdogState, from: ProcessId, item: Extract<Item, { type: 'replica.keys' }>, out: CoreEffect[]): void {
  if (!s.replicaIds.has(from)) return ignore(s, 'NOT_A_MEMBER');
  s.keyClaims.set(from, item.replicas);
  const same = (a: AddedReplica, b: AddedReplica) =>
    a.id === b.id && a.node === b.node && a.address === b.address && a.port === b.port && toHex(a.publicKey) === toHex(b.publicKey);
  // An id of cluster.json's (an agent, an operator, the watchdog) never becomes a replica.
  const known = (x: AddedReplica) => s.replicaIds.has(x.id) || s.statusClients.has(x.id) || x.id === s.id;
  const agreed = item.replicas.filter((x) => !known(x) && [...s.keyClaims].filter(([, c]) => c.some((y) => same(x, y))).length >= QUORUM);
  if (agreed.length === 0) return;
  for (const x of agreed) {
    s.replicaIds.add(x.id);
    s.learnt.push(x.id);
  }
  out.push({ type: 'keys', keys: agreed.map((x) => ({ id: x.id, publicKey: x.publicKey, replica: { node: x.node, address: x.address, port: x.port } })) });
  out.push({ type: 'log', level: 'info', event: 'replica.learnt', fields: { replicas: agreed.map((x) => x.id), by: [...s.keyClaims.keys()] } });
}
