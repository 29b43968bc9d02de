// Self-diagnosis, one replica's side (docs/PROTOCOL.md §10.2–10.4): what it accuses, what it
// has been told, when two accusations condemn a member, a missed heartbeat followed up for
// `diagnosisTimeoutMs`, and the comparison of state digests at equal RSNs. Not replicated: each
// replica judges from what it saw; only two matching accusations change the group, through an
// ordered `replica.condemn` that carries them as evidence. Pure: no clock, no I/O.
import { MAX_CHECKPOINTS, QUORUM, type Timing } from './constants.ts';
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

export type Diagnosis = ReturnType<typeof createDiagnosis>;

const same = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

export function createDiagnosis(d: DiagnosisDeps) {
  /** Accusations by view, then target, then accuser. */
  const accusations = new Map<number, Map<ProcessId, Map<ProcessId, SignedAccusation>>>();
  /** A missed heartbeat followed up: accuse when still silent at the deadline (spec §1.3). */
  const silence = new Map<ProcessId, number>();
  /** Own digests at checkpoint RSNs (and at heartbeat times), for peers that lag. */
  const mine = new Map<number, Uint8Array>();
  /** Peers' digests at RSNs we have not reached yet: peer → rsn → digest (latest few). */
  const claims = new Map<ProcessId, Map<number, Uint8Array>>();
  const history: DiagnosisRecord[] = [];
  let reportCounter = 0;
  let condemnedTarget: ProcessId | null = null;

  function record(r: Omit<DiagnosisRecord, 'view'>): void {
    history.push({ ...r, view: d.view() });
    if (history.length > MAX_DIAGNOSIS_HISTORY) history.shift();
  }

  /** spec §1.6 rule 3: every initiation is reported to the watchdog. */
  function report(reason: AccuseReason, target: ProcessId | null, detail: string, nowMs: number, out: CoreEffect[]): void {
    reportCounter++;
    out.push({ type: 'send', to: d.scc, item: { type: 'diag.report', inc: d.inc, counter: reportCounter, view: d.view(), reason, target: target ?? '' } });
    out.push({ type: 'log', level: 'warn', event: 'diagnosis.initiated', fields: { reason, target, detail, view: d.view() } });
    record({ atMs: nowMs, kind: 'initiated', target: target ?? '', by: d.id, reason, detail });
  }

  function store(s: SignedAccusation): boolean {
    const a = s.accusation;
    let byTarget = accusations.get(a.view);
    if (byTarget === undefined) accusations.set(a.view, (byTarget = new Map()));
    let byAccuser = byTarget.get(a.target);
    if (byAccuser === undefined) byTarget.set(a.target, (byAccuser = new Map()));
    if (byAccuser.has(a.from)) return false;
    byAccuser.set(a.from, s);
    return true;
  }

  /** Two accusations against one member in the current view, from two other members. */
  function evidenceAgainst(target: ProcessId): SignedAccusation[] | null {
    const members = d.members();
    const byAccuser = accusations.get(d.view())?.get(target);
    if (byAccuser === undefined || !members.includes(target)) return null;
    const valid = [...byAccuser.values()].filter((s) => s.accusation.from !== target && members.includes(s.accusation.from));
    valid.sort((a, b) => (a.accusation.from < b.accusation.from ? -1 : 1));
    return valid.length >= QUORUM ? valid.slice(0, QUORUM) : null;
  }

  function checkCondemned(nowMs: number, out: CoreEffect[]): void {
    if (condemnedTarget !== null) return;
    for (const target of d.members()) {
      const ev = evidenceAgainst(target);
      if (ev === null) continue;
      condemnedTarget = target;
      const by = ev.map((e) => e.accusation.from).join(',');
      out.push({ type: 'log', level: 'error', event: 'replica.condemned', fields: { target, by, view: d.view(), reason: ev[0]?.accusation.reason } });
      record({ atMs: nowMs, kind: 'condemned', target, by, reason: ev[0]?.accusation.reason ?? '', detail: '' });
      return;
    }
  }

  return {
    /** This replica accuses `target` (once per view): signed, sent to every other member. */
    accuse(target: ProcessId, reason: AccuseReason, detail: string, nowMs: number, out: CoreEffect[]): void {
      const view = d.view();
      if (target === d.id || !d.members().includes(target) || accusations.get(view)?.get(target)?.has(d.id)) return;
      const signed = signAccusation({ from: d.id, view, target, reason }, d.signer);
      store(signed);
      if (reason !== 'silent') report(reason, target, detail, nowMs, out);
      out.push({ type: 'log', level: 'error', event: 'replica.accuse', fields: { target, reason, detail, view } });
      record({ atMs: nowMs, kind: 'accused', target, by: d.id, reason, detail });
      for (const m of d.members()) if (m !== d.id) d.send(m, { type: 'accuse', signed }, nowMs, out);
      checkCondemned(nowMs, out);
    },

    /** Another replica's accusation (its signature checked by the frame decoder). */
    onAccuse(from: ProcessId, s: SignedAccusation, nowMs: number, out: CoreEffect[]): void {
      const a = s.accusation;
      if (a.from !== from || a.view < d.view() || a.view > d.view() + VIEWS_AHEAD) return;
      if (!store(s)) return;
      record({ atMs: nowMs, kind: 'accusation', target: a.target, by: a.from, reason: a.reason, detail: '' });
      out.push({ type: 'log', level: 'warn', event: 'replica.accusation', fields: { from, target: a.target, reason: a.reason, view: a.view } });
      if (a.view === d.view()) checkCondemned(nowMs, out);
    },

    /** The member two accusations condemn in the current view, with the evidence. */
    condemned(): { target: ProcessId; evidence: SignedAccusation[] } | null {
      if (condemnedTarget === null) return null;
      const evidence = evidenceAgainst(condemnedTarget);
      return evidence === null ? null : { target: condemnedTarget, evidence };
    },

    /** The group changed (an ordered condemnation or addition was executed). */
    newView(nowMs: number, out: CoreEffect[]): void {
      condemnedTarget = null;
      silence.clear();
      claims.clear();
      for (const v of [...accusations.keys()]) if (v < d.view()) accusations.delete(v);
      checkCondemned(nowMs, out); // accusations that arrived ahead of us
    },

    /** spec §1.3: a missed replica heartbeat initiates self-diagnosis: probe it and wait. */
    missed(r: ProcessId, silentForMs: number, nowMs: number, out: CoreEffect[]): void {
      if (silence.has(r) || accusations.get(d.view())?.get(r)?.has(d.id)) return;
      silence.set(r, nowMs + d.timing.diagnosisTimeoutMs);
      report('silent', r, `no heartbeat for ${silentForMs} ms`, nowMs, out);
      out.push({ type: 'send', to: r, item: { type: 'probe', nonce: 0 } });
    },

    /** Anything fresh from `r` (heartbeat, probe reply) ends a silence diagnosis. */
    heard(r: ProcessId): void {
      silence.delete(r);
    },

    /** Silence diagnoses that ran out: the replica is unresponsive (spec §1.3: 400 ms). */
    timers(nowMs: number, out: CoreEffect[]): void {
      for (const [r, deadline] of silence) {
        if (deadline > nowMs) continue;
        silence.delete(r);
        this.accuse(r, 'silent', `unresponsive for ${d.timing.diagnosisTimeoutMs} ms after a missed heartbeat`, nowMs, out);
      }
    },

    /** This replica was paused (PROTOCOL §6.1): no silence diagnosis runs out before `atMs`. */
    putOff(atMs: number): void {
      for (const [r, deadline] of silence) if (deadline < atMs) silence.set(r, atMs);
    },

    /** Self-diagnosis in progress: agent-heartbeat checks are paused meanwhile (spec §1.3). */
    running(): boolean {
      return silence.size > 0 || condemnedTarget !== null;
    },

    nextWakeMs(): number | null {
      let next: number | null = null;
      for (const t of silence.values()) next = next === null ? t : Math.min(next, t);
      return next;
    },

    /** Record our own digest at `rsn` (every checkpoint, and what heartbeats carry), and compare
     *  it with what peers claimed for that RSN before we got there. */
    ownDigest(rsn: number, digest: Uint8Array, nowMs: number, out: CoreEffect[]): void {
      if (!mine.has(rsn)) {
        mine.set(rsn, digest);
        if (mine.size > MAX_CHECKPOINTS) mine.delete(mine.keys().next().value as number);
      }
      for (const [peer, byRsn] of claims) {
        const theirs = byRsn.get(rsn);
        if (theirs === undefined) continue;
        byRsn.delete(rsn);
        if (!same(theirs, digest)) this.accuse(peer, 'digest', `state digest at rsn ${rsn}: ${toHex(theirs).slice(0, 12)} vs ours ${toHex(digest).slice(0, 12)}`, nowMs, out);
      }
    },

    /** A member's heartbeat claims digests at two RSNs (PROTOCOL §10.4). Equal RSN in the same
     *  view means equal state: a different digest is a faulty replica, and since we are correct
     *  (from where we stand), it is the peer. */
    onClaims(peer: ProcessId, view: number, pairs: readonly [number, Uint8Array][], nowMs: number, out: CoreEffect[]): void {
      if (view !== d.view() || !d.members().includes(peer)) return;
      for (const [rsn, digest] of pairs) {
        if (rsn === 0) continue;
        const ours = mine.get(rsn);
        if (ours !== undefined) {
          if (!same(ours, digest)) this.accuse(peer, 'digest', `state digest at rsn ${rsn}: ${toHex(digest).slice(0, 12)} vs ours ${toHex(ours).slice(0, 12)}`, nowMs, out);
          continue;
        }
        if (rsn % d.timing.digestEveryRsn !== 0) continue; // only checkpoints are worth waiting for
        let byRsn = claims.get(peer);
        if (byRsn === undefined) claims.set(peer, (byRsn = new Map()));
        byRsn.set(rsn, digest);
        if (byRsn.size > 4) byRsn.delete(byRsn.keys().next().value as number);
      }
    },

    /** Our latest checkpoint, for heartbeats. */
    latestCheckpoint(): [number, Uint8Array] | null {
      let best: [number, Uint8Array] | null = null;
      for (const [rsn, digest] of mine) if (rsn % d.timing.digestEveryRsn === 0 && (best === null || rsn > best[0])) best = [rsn, digest];
      return best;
    },

    report,
    history: (): DiagnosisRecord[] => [...history],
  };
}
