// A node agent's core (docs/PROTOCOL.md §5; spec §3.5–3.6, §1.4). It votes on the group message
// replicas the three replicas send: a command is delivered on f+1 = 2 matching copies, in the
// order of the per-agent GSSN chain; its group-ack mark advances only once every replica's copy
// has arrived and matched (flaw 1 fix). It sends its own requests with a CSN to the primary,
// keeps each until f+1 replicas acknowledge it, falls back to both backups when that takes
// longer than four retransmission periods, and heartbeats the backups.
// Deterministic: no clock, no I/O, no randomness.
import { countDrop, type DropCode } from '../base/result.ts';
import { toHex } from '../base/hex.ts';
import { MAX_FALLBACK_MS, MAX_GMB_ENTRIES, PRIMARY_RETRIES_BEFORE_FALLBACK, QUORUM, REPLICA_TIMEOUT_FIRINGS } from './constants.ts';
import {
  createLinks, linkAddPeer, linkRemovePeer, flushAcks, laneMarks, linkCanSend, linkNextWakeMs, linkOweGroupAck, linkReceive, linkSend, linkTimers, linkView,
  logSessionEvent, peerJudged, startLinks,
  type Delivery, type Links,
} from './link.ts';
import type { Core, CoreEffect, CoreInput, Membership } from './node.ts';
import type { ProcessId } from './ports.ts';
import { pack, signCG } from './wire/frame.ts';
import { groupMsgGC, type AddedReplica, type AgentRequest, type ErrorReportKind, type GroupBody, type GroupCommand, type GroupMsgGC, type SignedCG } from './wire/messages.ts';
import type { Signer } from './ports.ts';

export type AgentOptions = {
  id: ProcessId;
  membership: Membership;
  inc: number;
  slots: number;
  /** A predecessor incarnation left processes on record: ask the group which still belong to the
   *  node (PROTOCOL §8.6). */
  resync?: boolean;
  /** Signs this agent's requests so a replica can relay but never forge them (spec §1.3). */
  signer: Signer;
  /** The group as two replicas reported it when this incarnation started (PROTOCOL §10.7): a
   *  new incarnation begins from it, not from cluster.json's initial three, since after two
   *  replacements no two of those are members and no command could ever reach two matching. */
  group?: { view: number; primary: ProcessId; replicas: readonly ProcessId[] };
};

/** The copies of one GSSN the agent has admitted (spec §3.5 GMB). */
type Entry = {
  gssn: number;
  /** The replica whose copy opened the entry (its flow-control quota pays for it). */
  opener: ProcessId;
  /** Content key of each replica's copy. */
  copies: Map<ProcessId, string>;
  /** Distinct contents with how many replicas sent each. */
  contents: Map<string, { gc: GroupMsgGC; count: number }>;
  delivered: boolean;
  /** Copies from every replica arrived. */
  complete: boolean;
  firings: number;
  timerAtMs: number | null;
};

/** A request not yet acknowledged by f+1 replicas (spec §3.6 G6, PROTOCOL §5.6). */
type Pending = {
  signed: SignedCG;
  sentAtMs: number;
  /** Sent to the backups too, after the primary did not acknowledge it in time (spec §3.4 P6). */
  fellBack: boolean;
  /** Its sequence number on the lane to the primary, or null if the lane did not take it. */
  primarySeq: number | null;
  /** When it goes to the backups again, once it fell back. */
  retryAtMs: number;
};

export type AgentStatus = {
  id: ProcessId;
  inc: number;
  primary: ProcessId;
  gssnDelivered: number;
  gssnAcked: number;
  csnSent: number;
  csnAcked: number;
  pendingCopies: number;
  pendingRequests: number;
  errorReports: number;
  drops: Record<string, number>;
  terminated: string | null;
  replicas: { id: ProcessId; connected: boolean; unacked: number; queued: number }[];
  /** The group's view as this agent last learnt it (PROTOCOL §10.7). */
  view: number;
};

export type AgentCore = Core & { status(nowMs: number): AgentStatus };


export function createAgent(opts: AgentOptions): AgentCore {
  const { id, membership: m } = opts;
  const t = m.timing;
  /** The group as this agent knows it: changed only by a `replicas` command delivered on two
   *  matching copies (PROTOCOL §10.7). */
  const known = opts.group !== undefined && opts.group.replicas.includes(opts.group.primary) ? opts.group : null;
  let replicas = [...(known?.replicas ?? m.replicas)];
  let primary = known?.primary ?? (replicas[0] as ProcessId);
  let view = known?.view ?? 0;
  const deliverQuorum = QUORUM;
  const maxMismatches = 1; // with |R| = 3: more than this and 2 matching copies are impossible
  const links: Links = createLinks(id, opts.inc, t, replicas);

  let started = false;
  let startedAtMs = 0;
  let terminated: string | null = null;
  let csnSent = 0;
  let csnAcked = 0;
  const csnAckBy = new Map<ProcessId, number>();
  let gssnDelivered = 0;
  /** Highest GSSN through which every delivered message is complete or purged: the only
   *  mark the agent ever acknowledges (flaw 1 fix, PROTOCOL §5.3). */
  let gssnAcked = 0;
  const gmb = new Map<number, Entry>();
  /** Delivered GSSNs, in order, waiting for their last copies. */
  const awaitingCompletion: number[] = [];
  const finished = new Set<number>();
  /** Contents with f+1 matching copies, by the prevGssn they chain from. */
  const ready = new Map<number, Entry>();
  let errorReports = 0;
  /** Requests not yet acknowledged by f+1 replicas, by CSN (spec §3.6 G6, PROTOCOL §5.6). */
  const pending = new Map<number, Pending>();
  /** Smoothed time for a request to be acknowledged by f+1 replicas (ms), or null. */
  let ackTimeMs: number | null = null;
  /** spec §3.4 P6: a request the primary has not even received goes to the backups after three
   *  retransmissions (the lane to the primary keeps a steady period until then). One it did
   *  receive but f+1 replicas have not acknowledged waits longer under load, since falling back
   *  only doubles the load: like TCP's RTO, four times the smoothed acknowledgement time,
   *  within [4 x retransmitMs, 2 s] (PROTOCOL §5.6). */
  const unreceivedFallbackMs = (1 + PRIMARY_RETRIES_BEFORE_FALLBACK) * t.retransmitMs;
  const fallbackAfterMs = (p: Pending): number => {
    const received = p.primarySeq !== null && p.primarySeq <= laneMarks(links, primary, 1).acked;
    if (!received || ackTimeMs === null) return unreceivedFallbackMs;
    return Math.min(MAX_FALLBACK_MS, Math.max(unreceivedFallbackMs, 4 * ackTimeMs));
  };
  const dueOf = (p: Pending): number => (p.fellBack ? p.retryAtMs : p.sentAtMs + fallbackAfterMs(p));
  /** The earliest deadline of the pending requests and of the ReplicaTimeouts, kept so that a
   *  step (one per frame) does not walk every pending request and GMB entry: with the primary
   *  unreachable, up to MAX_QUEUED_WHILE_DISCONNECTED requests wait, and walking them all at
   *  every step made a backlog quadratic (65,536 requests: 75 s of stepping). Each is exact
   *  after a walk, lowered by a new deadline, and may be early after a removal (the next walk
   *  corrects it). A request's deadline also reads what fallbackAfterMs reads: a change of the
   *  primary, of its lane's ack mark or of the smoothed ack time recomputes it. */
  let requestsDueAtMs = Infinity;
  let requestsDueKey = '';
  let replicaTimeoutsDueAtMs = Infinity;
  function requestsDue(): number {
    const key = `${primary} ${laneMarks(links, primary, 1).acked} ${ackTimeMs}`;
    if (key !== requestsDueKey) {
      requestsDueKey = key;
      requestsDueAtMs = Infinity;
      for (const p of pending.values()) requestsDueAtMs = Math.min(requestsDueAtMs, dueOf(p));
    }
    return requestsDueAtMs;
  }
  /** Error reports gathered since the last one sent, per kind (PROTOCOL §5.3). */
  const reports = new Map<ErrorReportKind, { gssn: number; count: number; suspects: Set<ProcessId> }>();
  let reportAtMs = 0;
  const drops: Partial<Record<DropCode, number>> = {};
  let heartbeatCounter = 0;
  let heartbeatAtMs = 0;
  let nextBackup = 0;

  const backups = () => replicas.filter((r) => r !== primary);

  function sendRequest(request: AgentRequest, nowMs: number, out: CoreEffect[]): void {
    if (!linkCanSend(links, primary, 1)) {
      // Refused, not accepted: no CSN is spent, so the requests after it are not held back.
      out.push({ type: 'log', level: 'error', event: 'request.refused', fields: { request: request.type, why: 'backlog to the primary is full' } });
      return;
    }
    csnSent++;
    const signed = signCG({ csn: csnSent, gssnAck: gssnAcked, payload: request, client: id, inc: opts.inc }, opts.signer);
    const r = linkSend(links, primary, 1, { type: 'cg', signed }, nowMs, out);
    const p: Pending = { signed, sentAtMs: nowMs, fellBack: false, primarySeq: r === 'sent' ? laneMarks(links, primary, 1).sent : null, retryAtMs: Infinity };
    pending.set(csnSent, p);
    requestsDueAtMs = Math.min(requestsDueAtMs, dueOf(p));
  }

  /** An entry whose missing copies are all owed by replicas not judged yet (peerJudged: no
   *  session, start grace not over) waits for the end of the grace instead of timing out: a
   *  backup up a second and a half after the others was condemned on the agents' reports of
   *  copies it could not send. One booting late sends them then; one that never comes is named
   *  after the grace. */
  const waitsOnlyForUnmet = (e: Entry, nowMs: number): boolean => {
    const missing = expectedFor(e.gssn).filter((x) => !e.copies.has(x));
    return missing.length > 0 && missing.every((x) => !peerJudged(links, x, nowMs, startedAtMs, t.startGraceMs));
  };

  /** Note an error report; reports go out aggregated, at most one per kind per ReplicaTimeout,
   *  so a slow replica under load cannot turn every GSSN into another request. */
  function report(kind: ErrorReportKind, e: Entry): void {
    const best = bestContent(e);
    const r = reports.get(kind);
    const acc = r ?? { gssn: e.gssn, count: 0, suspects: new Set<ProcessId>() };
    acc.gssn = Math.min(acc.gssn, e.gssn);
    acc.count++;
    // Only a copy that differs from (or is missing next to) a content two members agree on
    // names its sender; without such a content nobody is named (PROTOCOL §10.2).
    if (best !== null && best.count >= deliverQuorum) {
      for (const x of expectedFor(e.gssn)) if (e.copies.get(x) !== best.key) acc.suspects.add(x);
    }
    reports.set(kind, acc);
  }

  /** Members that owe a copy of `gssn`: a replica that joined the group owes only copies after
   *  the `replicas` command that announced it (PROTOCOL §10.7). */
  const joinedAtGssn = new Map<ProcessId, number>();
  const expectedFor = (gssn: number): ProcessId[] => replicas.filter((r) => (joinedAtGssn.get(r) ?? 0) < gssn);

  function sendReports(nowMs: number, out: CoreEffect[]): void {
    if (reports.size === 0 || reportAtMs > nowMs) return;
    for (const [kind, acc] of reports) {
      errorReports++;
      const suspects = replicas.filter((x) => acc.suspects.has(x));
      out.push({ type: 'log', level: 'warn', event: 'agent.error-report', fields: { gssn: acc.gssn, count: acc.count, kind, suspects } });
      // spec §3.5 G2 4c / G5: the report goes to the group like any request, so every replica
      // sees it in the same order.
      sendRequest({ type: 'error.report', gssn: acc.gssn, count: acc.count, kind, suspects }, nowMs, out);
    }
    reports.clear();
    reportAtMs = nowMs + t.replicaTimeoutMs;
  }

  function bestContent(e: Entry): { key: string; gc: GroupMsgGC; count: number } | null {
    let best: { key: string; gc: GroupMsgGC; count: number } | null = null;
    for (const [key, c] of e.contents) if (best === null || c.count > best.count) best = { key, ...c };
    return best;
  }

  /** A delivered entry has every copy it is owed, or has stopped waiting for them (the callers
   *  finish delivered entries only): the group-ack mark moves over it once every GSSN before it
   *  is finished too. */
  function finish(e: Entry, nowMs: number, out: CoreEffect[]): void {
    forget(e);
    finished.add(e.gssn);
    let advanced = false;
    while (awaitingCompletion.length > 0 && finished.has(awaitingCompletion[0] as number)) {
      const g = awaitingCompletion.shift() as number;
      finished.delete(g);
      gssnAcked = g;
      advanced = true;
    }
    if (advanced) for (const r of replicas) linkOweGroupAck(links, r, nowMs);
  }

  function onCsnAck(from: ProcessId, ack: number, nowMs: number, out: CoreEffect[]): void {
    if (ack > csnSent) return; // acknowledges what we never sent: a faulty replica
    if (ack <= (csnAckBy.get(from) ?? 0)) return;
    csnAckBy.set(from, ack);
    // A request is safe once f+1 replicas have delivered it (spec §3.5 G4, by quorum).
    const acks = replicas.map((r) => csnAckBy.get(r) ?? 0).sort((a, b) => b - a);
    const mark = acks[deliverQuorum - 1] ?? 0;
    if (mark > csnAcked) {
      csnAcked = mark;
      for (const [csn, p] of pending) {
        if (csn > csnAcked) continue;
        // Karn's rule: a request sent twice gives an ambiguous sample.
        if (!p.fellBack) {
          const sample = nowMs - p.sentAtMs;
          ackTimeMs = ackTimeMs === null ? sample : ackTimeMs + (sample - ackTimeMs) / 8;
        }
        pending.delete(csn);
      }
    }
    void out;
  }

  function deliverReady(nowMs: number, out: CoreEffect[]): void {
    for (let e = ready.get(gssnDelivered); e !== undefined; e = ready.get(gssnDelivered)) {
      ready.delete(gssnDelivered);
      const best = bestContent(e);
      if (best === null) break;
      e.delivered = true;
      release(e.opener);
      gssnDelivered = e.gssn;
      awaitingCompletion.push(e.gssn);
      const command = best.gc.payload;
      // Keys first: the replica a `replica.spawn` starts reads them from this node's disk.
      if (command.type === 'replicas' || command.type === 'replica.spawn') learnKeys(command.added, out);
      out.push({ type: 'deliver.command', gssn: e.gssn, command });
      if (command.type === 'replicas') onReplicas(command, nowMs, out, e.gssn);
      if (e.complete) finish(e, nowMs, out);
    }
    // Undelivered entries the chain has passed were never sent by two correct replicas.
    for (const [g, e] of gmb) if (!e.delivered && g < gssnDelivered) forget(e);
    for (const prev of ready.keys()) if (prev < gssnDelivered) ready.delete(prev);
  }

  /** Spares of nodes added at run time whose keys this agent has handed to its driver. */
  const learnt = new Set<ProcessId>();
  /** PROTOCOL §10.12: members whose keys cluster.json lacks, as two replicas' matching copies of
   *  a command named them (or two status replies, the `group` input): the driver verifies their
   *  frames and dials them from now on. An id is learnt once; its key never changes. */
  function learnKeys(added: readonly AddedReplica[], out: CoreEffect[]): void {
    const fresh = added.filter((x) => !learnt.has(x.id));
    if (fresh.length === 0) return;
    for (const x of fresh) learnt.add(x.id);
    out.push({ type: 'keys', keys: fresh.map((x) => ({ id: x.id, publicKey: x.publicKey, replica: { node: x.node, address: x.address, port: x.port } })) });
  }

  /** PROTOCOL §10.7: the group changed. Sessions follow the set; requests not yet acknowledged
   *  by f+1 members go to the new primary at once (the old one may be the faulty one). */
  function onReplicas(c: Extract<GroupCommand, { type: 'replicas' }>, nowMs: number, out: CoreEffect[], delivering: number | null = null): void {
    if (c.view <= view || !c.replicas.includes(c.primary)) return;
    view = c.view;
    const removed = replicas.filter((r) => !c.replicas.includes(r));
    for (const r of c.replicas) if (!replicas.includes(r)) joinedAtGssn.set(r, gssnDelivered);
    replicas = [...c.replicas];
    for (const r of replicas) linkAddPeer(links, r, nowMs, out);
    for (const r of removed) {
      linkRemovePeer(links, r);
      csnAckBy.delete(r);
    }
    const primaryChanged = c.primary !== primary;
    primary = c.primary;
    out.push({ type: 'log', level: 'warn', event: 'agent.group', fields: { view, replicas, primary } });
    out.push({ type: 'replicas', replicas: [...replicas], ports: c.ports.filter((x) => replicas.includes(x.id)) });
    // Entries that waited only for a removed member's copy have every copy they are owed now:
    // settled, without timing out three times and reporting nobody (PROTOCOL §5.3). The entry
    // that carried this command (`delivering`) is finished by deliverReady right after; a group
    // reported by two replicas (the `group` input) has no such entry, so every one is finished here.
    for (const e of [...gmb.values()]) {
      if (e.complete || !expectedFor(e.gssn).every((x) => e.copies.has(x))) continue;
      e.complete = true;
      e.timerAtMs = null;
      const best = bestContent(e);
      if (best !== null && expectedFor(e.gssn).some((x) => e.copies.get(x) !== best.key)) report('mismatch', e);
      if (e.delivered && e.gssn !== delivering) finish(e, nowMs, out);
    }
    if (!primaryChanged) return;
    for (const p of pending.values()) {
      const r = linkSend(links, primary, 1, { type: 'cg', signed: p.signed }, nowMs, out);
      p.sentAtMs = nowMs;
      p.fellBack = false;
      p.retryAtMs = Infinity;
      p.primarySeq = r === 'sent' ? laneMarks(links, primary, 1).sent : null;
    }
  }

  /** Undelivered GMB entries each replica opened (its first copy created them). A removed
   *  member's count stays while its entries do: a retired spare id can join again (PROTOCOL
   *  §10.6), and its old entries still take room. */
  const opened = new Map<ProcessId, number>();
  /** An entry `opener` opened was delivered or forgotten undelivered: its place is free again. */
  function release(opener: ProcessId): void {
    const n = (opened.get(opener) ?? 0) - 1;
    if (n > 0) opened.set(opener, n);
    else opened.delete(opener);
  }

  /** Lane-1 flow control (PROTOCOL §5.2): may `from` open another undelivered entry? */
  function groupRoom(from: ProcessId, body: GroupBody): boolean {
    if (body.type !== 'gc') return true;
    const gc = body.gc;
    if (gc.dest !== id || gc.destInc !== opts.inc || gc.gssn <= gssnDelivered || gmb.has(gc.gssn)) return true;
    return (opened.get(from) ?? 0) < MAX_GMB_ENTRIES;
  }

  function forget(e: Entry): void {
    gmb.delete(e.gssn);
    if (!e.delivered) release(e.opener);
  }

  /** spec §3.5 G2: one admitted copy from replica `from`. */
  function onCopy(from: ProcessId, gc: GroupMsgGC, nowMs: number, out: CoreEffect[]): void {
    // Copies for a predecessor incarnation chain from its chain, not ours: they are not ours to
    // vote on, and their CSN acks are not about our requests (PROTOCOL §5.7).
    if (gc.dest !== id || gc.destInc !== opts.inc || !replicas.includes(from)) return;
    onCsnAck(from, gc.csnAck, nowMs, out);
    const key = toHex(pack(groupMsgGC.enc(gc)));
    let e = gmb.get(gc.gssn);
    if (e === undefined) {
      // G2 4a: a late copy of a GSSN already finished (or never seen) is discarded.
      if (gc.gssn <= gssnDelivered) return;
      opened.set(from, (opened.get(from) ?? 0) + 1);
      e = { gssn: gc.gssn, opener: from, copies: new Map(), contents: new Map(), delivered: false, complete: false, firings: 0, timerAtMs: nowMs + t.replicaTimeoutMs };
      gmb.set(gc.gssn, e);
      replicaTimeoutsDueAtMs = Math.min(replicaTimeoutsDueAtMs, e.timerAtMs as number);
    }
    if (e.copies.has(from)) return; // G2 3a: a duplicate from the same replica
    e.copies.set(from, key);
    const c = e.contents.get(key);
    if (c === undefined) e.contents.set(key, { gc, count: 1 });
    else c.count++;
    const best = bestContent(e) as { key: string; gc: GroupMsgGC; count: number };

    if (!e.delivered && best.count === deliverQuorum && best.key === key) ready.set(gc.prevGssn, e);
    if (!e.delivered && e.copies.size - best.count > maxMismatches) {
      // G2 3e: f+1 matching copies are impossible, so by the fault model this agent is faulty.
      terminated = `gssn ${e.gssn}: ${e.copies.size} copies, no ${deliverQuorum} match`;
      out.push({ type: 'terminate', reason: terminated });
      return;
    }
    const expected = expectedFor(e.gssn);
    if (expected.every((x) => e.copies.has(x))) {
      e.complete = true;
      e.timerAtMs = null;
      if (expected.some((x) => e.copies.get(x) !== best.key)) report('mismatch', e);
    }
    deliverReady(nowMs, out);
    if (e.complete && e.delivered) finish(e, nowMs, out);
  }

  function onDelivery(d: Delivery, nowMs: number, out: CoreEffect[]): void {
    switch (d.type) {
      case 'grp':
        if (d.body.type === 'gc') onCopy(d.from, d.body.gc, nowMs, out);
        return;
      case 'gack':
        onCsnAck(d.from, d.ack, nowMs, out);
        return;
      case 'ptp':
        if (d.payload.type === 'notice') out.push({ type: 'deliver.notice', from: d.from, text: d.payload.text });
        return;
      case 'established':
      case 'reset':
        logSessionEvent(d, out);
        return;
      default: {
        const never: never = d;
        return never;
      }
    }
  }

  function timers(nowMs: number, out: CoreEffect[]): void {
    if (requestsDue() <= nowMs) requestTimers(nowMs, out);
    linkTimers(links, nowMs, out, primary);
    if (replicaTimeoutsDueAtMs <= nowMs) replicaTimeouts(nowMs, out);
    sendReports(nowMs, out);
    if (heartbeatAtMs <= nowMs) {
      // spec §1.3: every 75 ms to one backup, alternating.
      const bs = backups();
      const to = bs[nextBackup % bs.length];
      nextBackup++;
      heartbeatCounter++;
      if (to !== undefined) {
        out.push({ type: 'send', to, item: { type: 'hb', inc: links.inc, counter: heartbeatCounter, info: { type: 'agent', gssnDelivered, csnSent } } });
      }
      heartbeatAtMs = nowMs + t.agentHeartbeatMs;
    }
  }

  /** The pending requests' fallbacks and resends that are due (spec §3.6 G6, PROTOCOL §5.6). */
  function requestTimers(nowMs: number, out: CoreEffect[]): void {
    let next = Infinity;
    for (const [csn, p] of pending) {
      if (p.fellBack && p.retryAtMs <= nowMs) {
        // Still not acknowledged by f+1 long after the fallback: the replicas that received it
        // may have lost it in a change of the group (PROTOCOL §10.5). Send it to every member
        // again, less and less often.
        p.retryAtMs = nowMs + Math.min(MAX_FALLBACK_MS, 2 * (p.retryAtMs - p.sentAtMs));
        out.push({ type: 'log', level: 'warn', event: 'agent.resend', fields: { csn, primary } });
        for (const r of replicas) linkSend(links, r, 1, { type: 'cg', signed: p.signed }, nowMs, out);
      } else if (!p.fellBack && p.sentAtMs + fallbackAfterMs(p) <= nowMs) {
        // spec §3.4 P6 / §3.6 G6: the primary has had the time of three retransmissions and f+1
        // replicas still have not acknowledged: send the request to both backups as well.
        p.fellBack = true;
        p.retryAtMs = nowMs + MAX_FALLBACK_MS / 4;
        out.push({ type: 'log', level: 'warn', event: 'agent.fallback', fields: { csn, primary } });
        for (const b of backups()) linkSend(links, b, 1, { type: 'cg', signed: p.signed }, nowMs, out);
      }
      next = Math.min(next, dueOf(p));
    }
    requestsDueAtMs = next;
  }

  /** spec §3.5 G5 ReplicaTimeout(gssn), for the GMB entries whose timer is due. */
  function replicaTimeouts(nowMs: number, out: CoreEffect[]): void {
    let next = Infinity;
    for (const e of [...gmb.values()]) {
      const due = e.timerAtMs !== null && e.timerAtMs <= nowMs;
      if (due && waitsOnlyForUnmet(e, nowMs)) {
        e.timerAtMs = startedAtMs + t.startGraceMs; // the copies may come once they are up
      } else if (due) {
        e.firings++;
        report('replica-timeout', e);
        if (e.firings >= REPLICA_TIMEOUT_FIRINGS) {
          e.timerAtMs = null;
          // A delivered GSSN is settled without the missing copy; an undelivered one stays
          // admitted (its copies may yet be matched) until the chain passes it.
          if (e.delivered) finish(e, nowMs, out);
        } else {
          e.timerAtMs = nowMs + t.replicaTimeoutMs;
        }
      }
      if (e.timerAtMs !== null) next = Math.min(next, e.timerAtMs);
    }
    replicaTimeoutsDueAtMs = next;
  }

  function status(_nowMs: number): AgentStatus {
    return {
      id, inc: opts.inc, primary, view, gssnDelivered, gssnAcked, csnSent, csnAcked, pendingCopies: gmb.size,
      pendingRequests: pending.size, errorReports, drops: { ...drops }, terminated,
      replicas: replicas.map((r) => {
        const v = linkView(links, r);
        return { id: r, connected: v?.established ?? false, unacked: v?.unacked ?? 0, queued: v?.queued ?? 0 };
      }),
    };
  }

  function step(input: CoreInput): CoreEffect[] {
    const out: CoreEffect[] = [];
    if (terminated !== null) return out;
    const nowMs = input.nowMs;
    if (!started) {
      started = true;
      startedAtMs = nowMs;
      startLinks(links, nowMs, out);
      heartbeatAtMs = nowMs;
      sendRequest({ type: 'node.join', slots: opts.slots, resync: opts.resync ?? false }, nowMs, out);
    }
    switch (input.type) {
      case 'tick':
      case 'transport.up':
      case 'transport.down':
        break;
      case 'dropped':
        countDrop(drops, input.code);
        break;
      case 'request':
        sendRequest(input.request, nowMs, out);
        break;
      case 'restore.load':
        countDrop(drops, 'UNEXPECTED'); // the watchdog's input (PROTOCOL §10.9)
        break;
      case 'group':
        learnKeys(input.added, out);
        onReplicas({ type: 'replicas', view: input.view, primary: input.primary, replicas: input.replicas, ports: input.ports, added: input.added }, nowMs, out);
        break;
      case 'notice':
        linkSend(links, input.to, 0, { type: 'notice', text: input.text }, nowMs, out);
        break;
      case 'frame': {
        const from = input.frame.from;
        for (const item of input.frame.items) {
          if (terminated !== null) break;
          if (item.type === 'probe') {
            if (replicas.includes(from)) out.push({ type: 'send', to: from, item: { type: 'probe.reply', nonce: item.nonce } });
            continue;
          }
          if (item.type === 'hb' || item.type === 'probe.reply' || item.type === 'status.query' || item.type === 'status.reply' || item.type === 'challenge') continue;
          const r = linkReceive(links, from, item, nowMs, out, groupRoom);
          if (r.drop !== null) countDrop(drops, r.drop);
          for (const d of r.deliveries) onDelivery(d, nowMs, out);
        }
        break;
      }
      default: {
        const never: never = input;
        return never;
      }
    }
    if (terminated === null) timers(nowMs, out);
    flushAcks(links, out, () => gssnAcked, nowMs);
    return out;
  }

  function nextWakeMs(): number | null {
    if (terminated !== null) return null;
    if (!started) return 0;
    let next = heartbeatAtMs;
    const l = linkNextWakeMs(links);
    if (l !== null) next = Math.min(next, l);
    next = Math.min(next, replicaTimeoutsDueAtMs, requestsDue());
    if (reports.size > 0) next = Math.min(next, reportAtMs);
    return next;
  }

  return { id, step, nextWakeMs, status };
}
