// Group change (docs/PROTOCOL.md §10.3–10.7, §10.12): what a replica does when the view changes,
// when two accusations condemn a member (a backup is removed by the primary's order; a condemned
// primary by its successor's, after the two survivors aligned their executed RSNs), and the
// state transfer to a replacement: the members' side (the state owed as of the RSN it joined)
// and the replacement's own (install, then replay what came meanwhile).
import { condemned, diagnosisNewView, ownDigest } from '../diagnosis.ts';
import { MAX_DELIVERED_LOG } from '../constants.ts';
import { countDrop } from '../../base/result.ts';
import { movedPorts, successor } from '../group-view.ts';
import { linkAddPeer, linkRemovePeer, linkSend, type Delivery } from '../link.ts';
import type { CoreEffect } from '../node.ts';
import type { Ordered } from '../order-confirm.ts';
import type { ProcessId } from '../ports.ts';
import { decodeState } from '../state-codec.ts';
import type { GroupInput, PtpPayload, SignedAccusation } from '../wire/messages.ts';
import { deliveredCG, digest, isMember, isPrimary, portSigned, resetOrder, sendPtp, type Replica } from './record.ts';
import { order, orderInput } from './primary.ts';
import { forwardToPrimary } from './backup.ts';
import { execute, syncAgents } from './execution.ts';
import { onDelivery } from './deliveries.ts';

/** The survivors' sync after the primary is condemned (PROTOCOL §10.5): `peer` is the other
 *  survivor, if any, and `peerRsn` how far it says it executed. */
export type Sync = { view: number; target: ProcessId; peer: ProcessId | undefined; peerRsn: number | null; evidence: SignedAccusation[]; ordered: boolean };

export type GroupChange = {
  sync: Sync | null;
  /** view.sync messages that arrived before we condemned the primary ourselves. */
  readonly earlySync: Map<ProcessId, { view: number; rsn: number }>;
  /** PROTOCOL §10.6: the state each replacement is owed, as of the RSN where it joined (`view`:
   *  the view its port claim names), kept until its `state.request` of that view shows which
   *  incarnation asked; and the latest such request heard from each id, with the sender's
   *  incarnation. One entry per spare id at most. */
  readonly owedState: Map<ProcessId, { view: number; payloads: PtpPayload[] }>;
  readonly stateAsked: Map<ProcessId, { view: number; inc: number }>;
  /** Lane-0 deliveries that arrived while installing, replayed once the state is in; agents'
   *  requests that arrived while installing or syncing, handled once serving in a view. */
  readonly heldWhileInstalling: Extract<Delivery, { type: 'ptp' }>[];
  readonly heldRequests: Extract<Delivery, { type: 'grp' }>[];
  /** Replaying the held lane-0 deliveries just after installing the state. */
  replaying: boolean;
  /** Added agents whose keys (and their nodes' spares') went to the driver (the `keys` effect). */
  readonly announcedKeys: Set<ProcessId>;
};

export const createGroupChange = (): GroupChange => ({
  sync: null, earlySync: new Map(), owedState: new Map(), stateAsked: new Map(), heldWhileInstalling: [], heldRequests: [], replaying: false,
  announcedKeys: new Set(),
});

/** Sessions with exactly the members, the replacement under way and the agents. */
export function syncLinks(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const want = new Set([...r.state.replicas, ...r.agentIds]);
  const joining = r.state.group.recovery?.id;
  if (joining !== undefined) want.add(joining);
  for (const p of want) linkAddPeer(r.links, p, nowMs, out, p === joining && !isMember(r, p));
  for (const p of [...r.links.peers.keys()]) if (r.poolIds.has(p) && !want.has(p)) linkRemovePeer(r.links, p);
}

/** Agents' requests held while installing or syncing, handled once serving in a view. */
export function releaseRequests(r: Replica, nowMs: number, out: CoreEffect[]): void {
  if (r.phase !== 'serving' || r.change.sync !== null) return;
  for (const d of r.change.heldRequests.splice(0)) onDelivery(r, d, nowMs, out);
}

export function onViewChanged(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const { state, change } = r;
  if (change.sync !== null) {
    // The new primary's order starts after the RSN of the condemnation.
    resetOrder(r);
    change.sync = null;
  }
  r.primary.condemnOrdered = false;
  change.earlySync.clear();
  syncLinks(r, nowMs, out);
  out.push({ type: 'log', level: 'warn', event: 'group.view', fields: { view: state.group.view, replicas: state.replicas, primary: state.primary, rsn: state.rsn } });
  out.push({ type: 'replicas', replicas: [...state.replicas], ports: movedPorts(state.group, state.replicas) });
  // Forwarded requests the old view never ordered go to the primary of this one (or are
  // ordered here): the agent has handed them over and will not send them again.
  const forwarded = [...r.backup.progressTimers.values()].map((x) => x.signed);
  r.backup.progressTimers.clear();
  if (isMember(r, r.id)) {
    for (const signed of forwarded) {
      if (deliveredCG(r, signed.cg)) continue;
      if (isPrimary(r)) order(r, signed, nowMs, out);
      else forwardToPrimary(r, signed, nowMs, out);
    }
  }
  // Asked again: ordering those may have executed a view change that removed us.
  if (!isMember(r, r.id)) {
    r.phase = 'retired';
    out.push({ type: 'log', level: 'error', event: 'replica.retired', fields: { view: state.group.view } });
    return;
  }
  for (const x of [...change.owedState.keys()]) if (!isMember(r, x)) change.owedState.delete(x);
  diagnosisNewView(r.diagnosis, nowMs, out);
  actOnCondemnation(r, nowMs, out);
  releaseRequests(r, nowMs, out);
}

/** Two accusations condemn a member (PROTOCOL §10.3): a backup is removed by the primary's
 *  ordered `replica.condemn`; a condemned primary by its successor's, after a sync. */
export function actOnCondemnation(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const c = condemned(r.diagnosis);
  if (c === null || r.phase !== 'serving') return;
  if (c.target === r.id) {
    // Two members accuse us, one of them correct: the group removes us whatever we do, and
    // anything we still sent would only be copies nobody matches (PROTOCOL §10.3).
    r.phase = 'retired';
    out.push({ type: 'log', level: 'error', event: 'replica.retired', fields: { view: r.state.group.view, why: 'condemned' } });
    return;
  }
  if (c.target === r.state.primary) {
    startSync(r, c.target, c.evidence, nowMs, out);
    return;
  }
  if (isPrimary(r) && !r.primary.condemnOrdered) {
    r.primary.condemnOrdered = true;
    orderInput(r, { type: 'replica.condemn', evidence: c.evidence }, nowMs, out);
  }
}

/** PROTOCOL §10.5: stop taking the condemned primary's order, tell the other survivor how far
 *  we executed, and send it what it lacks from our log. */
function startSync(r: Replica, target: ProcessId, evidence: SignedAccusation[], nowMs: number, out: CoreEffect[]): void {
  const { state, change } = r;
  if (change.sync !== null && change.sync.view === state.group.view) return;
  const peer = state.replicas.find((x) => x !== target && x !== r.id);
  change.sync = { view: state.group.view, target, peer, peerRsn: null, evidence, ordered: false };
  resetOrder(r);
  // Requests we forwarded to the condemned primary are forwarded again to its successor
  // once the view changes (onViewChanged); meanwhile they accuse nobody.
  for (const timer of r.backup.progressTimers.values()) timer.atMs = Infinity;
  r.primary.holdback.clear();
  out.push({ type: 'log', level: 'warn', event: 'group.sync', fields: { view: state.group.view, target, peer, rsn: state.rsn } });
  if (peer !== undefined) {
    sendPtp(r, peer, { type: 'view.sync', view: state.group.view, rsn: state.rsn }, nowMs, out);
    const early = change.earlySync.get(peer);
    if (early !== undefined) onViewSync(r, peer, early.view, early.rsn, nowMs, out);
  }
  trySyncOrder(r, nowMs, out);
}

/** The other survivor says how far it executed: it gets what it lacks from our log. */
export function onViewSync(r: Replica, from: ProcessId, view: number, rsn: number, nowMs: number, out: CoreEffect[]): void {
  const { state, change } = r;
  const sync = change.sync;
  if (sync === null || sync.view !== view || sync.peer !== from) {
    if (view >= state.group.view && isMember(r, from)) change.earlySync.set(from, { view, rsn });
    return;
  }
  if (sync.peerRsn !== null && sync.peerRsn >= rsn) return;
  sync.peerRsn = rsn;
  for (const [x, o] of r.deliveredLog) if (x > rsn && x <= state.rsn) sendOrdered(r, from, x, o, nowMs, out);
  trySyncOrder(r, nowMs, out);
}

function sendOrdered(r: Replica, to: ProcessId, rsn: number, o: Ordered, nowMs: number, out: CoreEffect[]): void {
  sendPtp(r, to, o.type === 'cg' ? { type: 'wrapper', rsn, signed: o.signed } : { type: 'wrapper.input', rsn, input: o.input }, nowMs, out);
}

/** The successor orders the condemnation once it executed everything its peer did. */
function trySyncOrder(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  const sync = r.change.sync;
  if (sync === null || sync.ordered || successor(state.replicas, sync.target) !== r.id) return;
  if (sync.peer !== undefined && (sync.peerRsn === null || state.rsn < sync.peerRsn)) return;
  sync.ordered = true;
  const input: GroupInput = { type: 'replica.condemn', evidence: sync.evidence };
  state.rsn++;
  if (sync.peer !== undefined) sendPtp(r, sync.peer, { type: 'wrapper.input', rsn: state.rsn, input }, nowMs, out);
  execute(r, { type: 'input', input }, nowMs, out);
}

/** During a sync, the other survivor's log entries and the successor's condemnation are
 *  executed as they come: both are correct (PROTOCOL §10.5). */
export function onSyncOrdered(r: Replica, rsn: number, o: Ordered, nowMs: number, out: CoreEffect[]): void {
  if (rsn !== r.state.rsn + 1) return;
  r.state.rsn++;
  execute(r, o, nowMs, out);
  trySyncOrder(r, nowMs, out);
}

// ---- a replacement joins (PROTOCOL §10.6) ----------------------------------------------------

/** Send a replacement the state it is owed, once its request shows which incarnation asked. */
export function sendOwedState(r: Replica, to: ProcessId, nowMs: number, out: CoreEffect[]): void {
  const owed = r.change.owedState.get(to);
  const asked = r.change.stateAsked.get(to);
  if (owed === undefined || asked === undefined || asked.view !== owed.view) return;
  r.change.owedState.delete(to);
  for (const p of owed.payloads) linkSend(r.links, to, 0, p, nowMs, out, asked.inc);
}

/** A replacement asks for the state. The primary lets it in at an RSN of its own (`replica.add`);
 *  the others wait for it. */
export function onStateRequest(r: Replica, from: ProcessId, p: Extract<PtpPayload, { type: 'state.request' }>, nowMs: number, out: CoreEffect[]): void {
  const { state, change } = r;
  const inc = r.links.peers.get(from)?.peerInc ?? 0;
  if (r.poolIds.has(from) && inc !== 0 && p.view >= (change.stateAsked.get(from)?.view ?? 0)) {
    change.stateAsked.set(from, { view: p.view, inc });
    sendOwedState(r, from, nowMs, out);
  }
  const key = `${from}@${state.group.view}`;
  if (state.group.recovery?.id !== from || !isPrimary(r) || r.phase !== 'serving' || r.primary.addOrdered.has(key)) return;
  const add: GroupInput = { type: 'replica.add', id: from, port: p.port, sig: p.sig };
  // The backups take it only with the replacement's own signature on its port (§10.6):
  // ordered without one, it would split the group over a replacement's lie.
  if (!portSigned(r, add)) {
    countDrop(r.drops, 'SIG_INVALID');
    return;
  }
  r.primary.addOrdered.add(key);
  orderInput(r, add, nowMs, out);
}

/** The replacement's side: a part of the state; once it is whole and its digest matches, the
 *  state is installed and what arrived meanwhile is replayed. */
export function onStatePart(r: Replica, from: ProcessId, p: PtpPayload, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  const got = r.transfer.receive(from, p);
  if (got === null) return;
  const decoded = decodeState(got.bytes, { timers: state.timers, pool: state.pool, spareNodes: state.spareNodes });
  if (!decoded.ok) {
    r.transfer.discard(got.rsn);
    out.push({ type: 'log', level: 'error', event: 'state.refused', fields: { rsn: got.rsn, code: decoded.code, detail: decoded.detail } });
    return;
  }
  Object.assign(state, decoded.value);
  resetOrder(r);
  r.phase = isMember(r, r.id) ? 'serving' : 'retired';
  out.push({
    type: 'log', level: 'warn', event: 'state.installed',
    fields: { rsn: state.rsn, view: state.group.view, replicas: state.replicas, bytes: got.bytes.length, csnReceived: [...state.csnReceived] },
  });
  out.push({ type: 'replicas', replicas: [...state.replicas], ports: movedPorts(state.group, state.replicas) });
  syncAgents(r, nowMs, out);
  syncLinks(r, nowMs, out);
  diagnosisNewView(r.diagnosis, nowMs, out);
  ownDigest(r.diagnosis, state.rsn, digest(r), nowMs, out);
  r.change.replaying = true;
  for (const d of r.change.heldWhileInstalling.splice(0)) onDelivery(r, d, nowMs, out);
  r.change.replaying = false;
  releaseRequests(r, nowMs, out);
}

/** While installing, a lane-0 delivery waits for the state (bounded). */
export function holdWhileInstalling(r: Replica, d: Extract<Delivery, { type: 'ptp' }>): void {
  if (r.change.heldWhileInstalling.length < MAX_DELIVERED_LOG) r.change.heldWhileInstalling.push(d);
}
