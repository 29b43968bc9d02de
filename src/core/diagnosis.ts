// Self-diagnosis, one replica's side (docs/PROTOCOL.md §10.2–10.4): what it accuses, what it
// has been told, when two accusations condemn a member, a missed heartbeat followed up for
// `diagnosisTimeoutMs`, and the comparison of state digests at equal RSNs. Not replicated: each
// replica judges from what it saw; only two matching accusations change the group, through an
// ordered `replica.condemn` that carries them as evidence. Pure: no clock, no I/O.
import { bytesEqual } from '../base/bytes.ts';
import { MAX_CHECKPOINTS, QUORUM, type Timing } from './constants.ts';
import { assert } from '../base/result.ts';
import { toHex } from '../base/hex.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId, Signer } from './ports.ts';
import { signAccusation } from './wire/frame.ts';
import type { AccuseReason, PtpPayload, SignedAccusation } from './wire/messages.ts';

export type DiagnosisDeps = {
  id: ProcessId;
  inc: number;
  signer: Signer;
  timing: Timing;
  scc: ProcessId;
  view(): number;
  members(): readonly ProcessId[];
  /** Reliable lane-0 send to another replica. */
  send(to: ProcessId, payload: PtpPayload, nowMs: number, out: CoreEffect[]): void;
};

/** Views ahead of ours whose accusations are kept until we get there (a replica one view
 *  behind has not executed the last change yet). */
const VIEWS_AHEAD = 2;
/** Diagnosis records kept for `trine status`. */
export const MAX_DIAGNOSIS_HISTORY = 64;

export type DiagnosisRecord = { atMs: number; view: number; kind: 'initiated' | 'accused' | 'accusation' | 'condemned'; target: string; by: string; reason: string; detail: string };

/** Peers' checkpoint digests kept per peer for RSNs we have not reached: the latest few (a
 *  peer ahead of us by more checkpoints than this is compared at its later ones). */
const MAX_CLAIMS_PER_PEER = 4;

/** One replica's diagnosis state: `deps` reads the replica's view and members as they are now. */
export type Diagnosis = {
  readonly deps: DiagnosisDeps;
  /** Accusations by view, then target, then accuser. */
  readonly accusations: Map<number, Map<ProcessId, Map<ProcessId, SignedAccusation>>>;
  /** A missed heartbeat followed up: accuse when still silent at the deadline (spec §1.3). */
  readonly silence: Map<ProcessId, number>;
  /** Own digests at checkpoint RSNs (and at heartbeat times), for peers that lag. */
  readonly mine: Map<number, Uint8Array>;
  /** Peers' digests at RSNs we have not reached yet: peer → rsn → digest (latest few). */
  readonly claims: Map<ProcessId, Map<number, Uint8Array>>;
  readonly history: DiagnosisRecord[];
  reportCounter: number;
  condemnedTarget: ProcessId | null;
};

export const createDiagnosis = (deps: DiagnosisDeps): Diagnosis => ({
  deps, accusations: new Map(), silence: new Map(), mine: new Map(), claims: new Map(), history: [], reportCounter: 0, condemnedTarget: null,
});

function record(g: Diagnosis, r: Omit<DiagnosisRecord, 'view'>): void {
  g.history.push({ ...r, view: g.deps.view() });
  if (g.history.length > MAX_DIAGNOSIS_HISTORY) g.history.shift();
}

/** spec §1.6 rule 3: every initiation is reported to the watchdog. */
export function reportInitiation(g: Diagnosis, reason: AccuseReason, target: ProcessId | null, detail: string, nowMs: number, out: CoreEffect[]): void {
  const d = g.deps;
  g.reportCounter++;
  out.push({ type: 'send', to: d.scc, item: { type: 'diag.report', inc: d.inc, counter: g.reportCounter, view: d.view(), reason, target: target ?? '' } });
  out.push({ type: 'log', level: 'warn', event: 'diagnosis.initiated', fields: { reason, target, detail, view: d.view() } });
  record(g, { atMs: nowMs, kind: 'initiated', target: target ?? '', by: d.id, reason, detail });
}

function store(g: Diagnosis, s: SignedAccusation): boolean {
  const a = s.accusation;
  let byTarget = g.accusations.get(a.view);
  if (byTarget === undefined) g.accusations.set(a.view, (byTarget = new Map()));
  let byAccuser = byTarget.get(a.target);
  if (byAccuser === undefined) byTarget.set(a.target, (byAccuser = new Map()));
  if (byAccuser.has(a.from)) return false;
  byAccuser.set(a.from, s);
  return true;
}

/** Two accusations against one member in the current view, from two other members. */
function evidenceAgainst(g: Diagnosis, target: ProcessId): SignedAccusation[] | null {
  const members = g.deps.members();
  const byAccuser = g.accusations.get(g.deps.view())?.get(target);
  if (byAccuser === undefined || !members.includes(target)) return null;
  const valid = [...byAccuser.values()].filter((s) => s.accusation.from !== target && members.includes(s.accusation.from));
  valid.sort((a, b) => (a.accusation.from < b.accusation.from ? -1 : 1));
  return valid.length >= QUORUM ? valid.slice(0, QUORUM) : null;
}

function checkCondemned(g: Diagnosis, nowMs: number, out: CoreEffect[]): void {
  if (g.condemnedTarget !== null) return;
  for (const target of g.deps.members()) {
    const ev = evidenceAgainst(g, target);
    if (ev === null) continue;
    g.condemnedTarget = target;
    const by = ev.map((e) => e.accusation.from).join(',');
    out.push({ type: 'log', level: 'error', event: 'replica.condemned', fields: { target, by, view: g.deps.view(), reason: ev[0]?.accusation.reason } });
    record(g, { atMs: nowMs, kind: 'condemned', target, by, reason: ev[0]?.accusation.reason ?? '', detail: '' });
    return;
  }
}

/** This replica accuses `target` (once per view): signed, sent to every other member. */
export function accuse(g: Diagnosis, target: ProcessId, reason: AccuseReason, detail: string, nowMs: number, out: CoreEffect[]): void {
  const d = g.deps;
  const view = d.view();
  if (target === d.id || !d.members().includes(target) || g.accusations.get(view)?.get(target)?.has(d.id)) return;
  const signed = signAccusation({ from: d.id, view, target, reason }, d.signer);
  store(g, signed);
  if (reason !== 'silent') reportInitiation(g, reason, target, detail, nowMs, out);
  out.push({ type: 'log', level: 'error', event: 'replica.accuse', fields: { target, reason, detail, view } });
  record(g, { atMs: nowMs, kind: 'accused', target, by: d.id, reason, detail });
  for (const m of d.members()) if (m !== d.id) d.send(m, { type: 'accuse', signed }, nowMs, out);
  checkCondemned(g, nowMs, out);
}

/** Another replica's accusation (its signature checked by the frame decoder). */
export function onAccuse(g: Diagnosis, from: ProcessId, s: SignedAccusation, nowMs: number, out: CoreEffect[]): void {
  const a = s.accusation;
  const view = g.deps.view();
  if (a.from !== from || a.view < view || a.view > view + VIEWS_AHEAD) return;
  if (!store(g, s)) return;
  record(g, { atMs: nowMs, kind: 'accusation', target: a.target, by: a.from, reason: a.reason, detail: '' });
  out.push({ type: 'log', level: 'warn', event: 'replica.accusation', fields: { from, target: a.target, reason: a.reason, view: a.view } });
  if (a.view === view) checkCondemned(g, nowMs, out);
}

/** The member two accusations condemn in the current view, with the evidence. */
export function condemned(g: Diagnosis): { target: ProcessId; evidence: SignedAccusation[] } | null {
  if (g.condemnedTarget === null) return null;
  const evidence = evidenceAgainst(g, g.condemnedTarget);
  return evidence === null ? null : { target: g.condemnedTarget, evidence };
}

/** The group changed (an ordered condemnation or addition was executed). */
export function diagnosisNewView(g: Diagnosis, nowMs: number, out: CoreEffect[]): void {
  g.condemnedTarget = null;
  g.silence.clear();
  g.claims.clear();
  for (const v of [...g.accusations.keys()]) if (v < g.deps.view()) g.accusations.delete(v);
  checkCondemned(g, nowMs, out); // accusations that arrived ahead of us
}

/** spec §1.3: a missed replica heartbeat initiates self-diagnosis: probe it and wait. */
export function missedHeartbeat(g: Diagnosis, r: ProcessId, silentForMs: number, nowMs: number, out: CoreEffect[]): void {
  if (g.silence.has(r) || g.accusations.get(g.deps.view())?.get(r)?.has(g.deps.id)) return;
  g.silence.set(r, nowMs + g.deps.timing.diagnosisTimeoutMs);
  reportInitiation(g, 'silent', r, `no heartbeat for ${silentForMs} ms`, nowMs, out);
  out.push({ type: 'send', to: r, item: { type: 'probe', nonce: 0 } });
}

/** Anything fresh from `r` (its heartbeat) ends a silence diagnosis. */
export function heardFrom(g: Diagnosis, r: ProcessId): void {
  g.silence.delete(r);
}

/** Silence diagnoses that ran out: the replica is unresponsive (spec §1.3: 400 ms). */
export function diagnosisTimers(g: Diagnosis, nowMs: number, out: CoreEffect[]): void {
  for (const [r, deadline] of g.silence) {
    if (deadline > nowMs) continue;
    g.silence.delete(r);
    accuse(g, r, 'silent', `unresponsive for ${g.deps.timing.diagnosisTimeoutMs} ms after a missed heartbeat`, nowMs, out);
  }
}

/** This replica was paused (PROTOCOL §6.1): no silence diagnosis runs out before `atMs`. */
export function putOffDiagnosis(g: Diagnosis, atMs: number): void {
  for (const [r, deadline] of g.silence) if (deadline < atMs) g.silence.set(r, atMs);
}

/** Self-diagnosis in progress: agent-heartbeat checks are paused meanwhile (spec §1.3). */
export const diagnosisRunning = (g: Diagnosis): boolean => g.silence.size > 0 || g.condemnedTarget !== null;

export function diagnosisNextWakeMs(g: Diagnosis): number | null {
  let next: number | null = null;
  for (const t of g.silence.values()) next = next === null ? t : Math.min(next, t);
  return next;
}

/** Record our own digest at `rsn` (every checkpoint, and what heartbeats carry), and compare
 *  it with what peers claimed for that RSN before we got there. */
export function ownDigest(g: Diagnosis, rsn: number, digest: Uint8Array, nowMs: number, out: CoreEffect[]): void {
  if (!g.mine.has(rsn)) {
    g.mine.set(rsn, digest);
    if (g.mine.size > MAX_CHECKPOINTS) dropOldest(g.mine);
  }
  for (const [peer, byRsn] of g.claims) {
    const theirs = byRsn.get(rsn);
    if (theirs === undefined) continue;
    byRsn.delete(rsn);
    if (!bytesEqual(theirs, digest)) accuse(g, peer, 'digest', `state digest at rsn ${rsn}: ${toHex(theirs).slice(0, 12)} vs ours ${toHex(digest).slice(0, 12)}`, nowMs, out);
  }
}

/** A member's heartbeat claims digests at two RSNs (PROTOCOL §10.4). Equal RSN in the same
 *  view means equal state: a different digest is a faulty replica, and since we are correct
 *  (from where we stand), it is the peer. */
export function onDigestClaims(g: Diagnosis, peer: ProcessId, view: number, pairs: readonly [number, Uint8Array][], nowMs: number, out: CoreEffect[]): void {
  if (view !== g.deps.view() || !g.deps.members().includes(peer)) return;
  for (const [rsn, digest] of pairs) {
    if (rsn === 0) continue;
    const ours = g.mine.get(rsn);
    if (ours !== undefined) {
      if (!bytesEqual(ours, digest)) accuse(g, peer, 'digest', `state digest at rsn ${rsn}: ${toHex(digest).slice(0, 12)} vs ours ${toHex(ours).slice(0, 12)}`, nowMs, out);
      continue;
    }
    if (rsn % g.deps.timing.digestEveryRsn !== 0) continue; // only checkpoints are worth waiting for
    let byRsn = g.claims.get(peer);
    if (byRsn === undefined) g.claims.set(peer, (byRsn = new Map()));
    byRsn.set(rsn, digest);
    if (byRsn.size > MAX_CLAIMS_PER_PEER) dropOldest(byRsn);
  }
}

/** The first entry of a map over its bound (maps keep insertion order). */
function dropOldest(m: Map<number, Uint8Array>): void {
  const oldest = m.keys().next().value;
  assert(oldest !== undefined, 'a map over its bound is not empty');
  m.delete(oldest);
}

/** Our latest checkpoint, for heartbeats. */
export function latestCheckpoint(g: Diagnosis): [number, Uint8Array] | null {
  let best: [number, Uint8Array] | null = null;
  for (const [rsn, digest] of g.mine) if (rsn % g.deps.timing.digestEveryRsn === 0 && (best === null || rsn > best[0])) best = [rsn, digest];
  return best;
}

export const diagnosisHistory = (g: Diagnosis): DiagnosisRecord[] => [...g.history];
