// One replica's self-diagnosis (src/core/diagnosis.ts, docs/PROTOCOL.md §10.2–10.4), stepped
// directly: what it accuses and sends, which accusations it keeps, when two condemn a member,
// the silence follow-up of a missed heartbeat (spec §1.3: probe, then accuse after
// diagnosisTimeoutMs), and the digest comparison at equal RSNs. Every row is what a peer or the
// watchdog would observe: the sends, the reports, the condemnation and its evidence.
import { beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_TIMING, MAX_CHECKPOINTS } from '../../../src/core/constants.ts';
import {
  MAX_DIAGNOSIS_HISTORY, accuse, condemned, createDiagnosis, diagnosisHistory, diagnosisNewView, diagnosisNextWakeMs, diagnosisRunning, diagnosisTimers, heardFrom, latestCheckpoint, missedHeartbeat, onAccuse, onDigestClaims, ownDigest, reportInitiation,
} from '../../../src/core/diagnosis.ts';
import type { CoreEffect } from '../../../src/core/node.ts';
import { signAccusation } from '../../../src/core/wire/frame.ts';
import type { AccuseReason, PtpPayload, SignedAccusation } from '../../../src/core/wire/messages.ts';
import { hmacSigner } from './harness.ts';

const T = { ...DEFAULT_TIMING }; // diagnosisTimeoutMs 400, digestEveryRsn 16
let view = 0;
let members = ['r1', 'r2', 'r3'];
let sent: { to: string; payload: PtpPayload; nowMs: number }[] = [];
const make = (id = 'r1') => createDiagnosis({
  id, inc: 7, signer: hmacSigner(id), timing: T, scc: 'scc', view: () => view, members: () => members,
  send: (to, payload, nowMs) => sent.push({ to, payload, nowMs }),
});
const accusation = (from: string, target: string, v = view, reason: AccuseReason = 'rsn.gap'): SignedAccusation =>
  signAccusation({ from, view: v, target, reason }, hmacSigner(from));
const reports = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'send' && e.item.type === 'diag.report' ? [{ to: e.to, ...e.item }] : []));
const probes = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'send' && e.item.type === 'probe' ? [e.to] : []));
const events = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'log' ? [e.event] : []));
const digest = (b: number) => new Uint8Array(32).fill(b);

beforeEach(() => {
  view = 0;
  members = ['r1', 'r2', 'r3'];
  sent = [];
});

describe('accusing (PROTOCOL §10.2)', () => {
  it('signs it, sends it to every other member, reports it to the watchdog (not a silence: that was reported when it began) and records it', () => {
    const d = make();
    const out: CoreEffect[] = [];
    accuse(d, 'r2', 'rsn.gap', 'gap at 5', 100, out);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
    for (const s of sent) {
      expect(s.payload).toMatchObject({ type: 'accuse', signed: { accusation: { from: 'r1', view: 0, target: 'r2', reason: 'rsn.gap' } } });
      expect(s.nowMs).toBe(100);
    }
    expect(reports(out)).toEqual([{ to: 'scc', type: 'diag.report', inc: 7, counter: 1, view: 0, reason: 'rsn.gap', target: 'r2' }]);
    expect(events(out)).toEqual(['diagnosis.initiated', 'replica.accuse']);
    expect(diagnosisHistory(d).map((h) => `${h.kind}:${h.target}:${h.by}:${h.reason}:${h.detail}`)).toEqual(['initiated:r2:r1:rsn.gap:gap at 5', 'accused:r2:r1:rsn.gap:gap at 5']);
    // A silent accusation is not reported again.
    const silent: CoreEffect[] = [];
    accuse(d, 'r3', 'silent', 'unresponsive', 110, silent);
    expect(reports(silent)).toEqual([]);
    expect(diagnosisHistory(d).at(-1)).toMatchObject({ kind: 'accused', target: 'r3', reason: 'silent', atMs: 110, view: 0 });
  });

  it('never itself, never a non-member, and each target once per view; a new view may accuse it again', () => {
    const d = make();
    accuse(d, 'r1', 'rsn.gap', '', 0, []);
    accuse(d, 'r9', 'rsn.gap', '', 0, []);
    expect(sent).toEqual([]);
    accuse(d, 'r2', 'rsn.gap', '', 0, []);
    accuse(d, 'r2', 'digest', '', 1, []);
    expect(sent).toHaveLength(2);
    view = 1;
    diagnosisNewView(d, 2, []);
    accuse(d, 'r2', 'digest', '', 3, []);
    expect(sent).toHaveLength(4);
    expect(sent[3]?.payload).toMatchObject({ signed: { accusation: { view: 1, reason: 'digest' } } });
  });
});

describe('condemning (PROTOCOL §10.3): two accusations from two other members in the current view', () => {
  it('ours and one peer\'s condemn the target, with both as evidence, sorted by accuser', () => {
    const d = make();
    const out: CoreEffect[] = [];
    onAccuse(d, 'r3', accusation('r3', 'r2'), 10, out);
    expect(condemned(d)).toBeNull();
    expect(diagnosisRunning(d)).toBe(false);
    accuse(d, 'r2', 'digest', '', 20, out);
    const c = condemned(d);
    expect(c?.target).toBe('r2');
    expect(c?.evidence.map((e) => e.accusation.from)).toEqual(['r1', 'r3']);
    expect(diagnosisRunning(d)).toBe(true);
    expect(events(out).filter((e) => e === 'replica.condemned')).toHaveLength(1);
    expect(diagnosisHistory(d).filter((h) => h.kind === 'condemned')).toEqual([{ atMs: 20, view: 0, kind: 'condemned', target: 'r2', by: 'r1,r3', reason: 'digest', detail: '' }]);
  });

  it('two peers\' accusations condemn without ours; the target\'s own, a non-member\'s, another view\'s or a forged sender\'s do not count', () => {
    const d = make();
    onAccuse(d, 'r2', accusation('r2', 'r2'), 0, []); // the target about itself
    onAccuse(d, 'r9', accusation('r9', 'r2'), 0, []); // a non-member
    onAccuse(d, 'r3', accusation('r3', 'r2', 1), 0, []); // a view ahead
    expect(condemned(d)).toBeNull();
    onAccuse(d, 'r3', accusation('r3', 'r2'), 1, []);
    expect(condemned(d)).toBeNull(); // one valid accuser only
    onAccuse(d, 'r2', accusation('r2', 'r3'), 2, []);
    accuse(d, 'r3', 'rsn.gap', '', 3, []);
    expect(condemned(d)?.target).toBe('r3');
  });

  it('an accusation relayed by another member than its accuser counts for nothing', () => {
    const d = make();
    onAccuse(d, 'r3', accusation('r2', 'r3'), 0, []); // r2's accusation, sent by r3
    accuse(d, 'r3', 'rsn.gap', '', 1, []);
    expect(condemned(d)).toBeNull();
    expect(diagnosisHistory(d).map((h) => h.kind)).toEqual(['initiated', 'accused']);
  });

  it('the evidence is the two lowest accusers, whatever order the accusations came in', () => {
    const d = make('r4');
    members = ['r1', 'r2', 'r3', 'r4', 'r5'];
    // In arrival order r3, r5, then r2: neither sorted nor reversed.
    for (const by of ['r3', 'r5']) onAccuse(d, by, accusation(by, 'r1'), 0, []);
    expect(condemned(d)?.evidence.map((e) => e.accusation.from)).toEqual(['r3', 'r5']);
    onAccuse(d, 'r2', accusation('r2', 'r1'), 1, []);
    expect(condemned(d)?.evidence.map((e) => e.accusation.from)).toEqual(['r2', 'r3']);
  });

  it('a peer\'s accusation is recorded and logged with who, whom, why and the view', () => {
    const d = make();
    const out: CoreEffect[] = [];
    onAccuse(d, 'r2', accusation('r2', 'r3', 0, 'digest'), 42, out);
    expect(diagnosisHistory(d)).toEqual([{ atMs: 42, view: 0, kind: 'accusation', target: 'r3', by: 'r2', reason: 'digest', detail: '' }]);
    expect(out).toEqual([{ type: 'log', level: 'warn', event: 'replica.accusation', fields: { from: 'r2', target: 'r3', reason: 'digest', view: 0 } }]);
  });

  it('a duplicate accusation is kept once and recorded once; an accusation of a past view, or more than two views ahead, is dropped', () => {
    const d = make();
    view = 3;
    onAccuse(d, 'r2', accusation('r2', 'r3', 3), 0, []);
    onAccuse(d, 'r2', accusation('r2', 'r3', 3, 'digest'), 1, []);
    onAccuse(d, 'r2', accusation('r2', 'r3', 2), 2, []);
    onAccuse(d, 'r2', accusation('r2', 'r1', 6), 3, []);
    expect(diagnosisHistory(d).map((h) => `${h.kind}:${h.target}:${h.reason}`)).toEqual(['accusation:r3:rsn.gap']);
    // Two views ahead is kept until we get there, then condemns at once.
    onAccuse(d, 'r2', accusation('r2', 'r1', 5), 4, []);
    onAccuse(d, 'r3', accusation('r3', 'r1', 5), 5, []);
    expect(condemned(d)).toBeNull();
    view = 5;
    const out: CoreEffect[] = [];
    diagnosisNewView(d, 6, out);
    expect(condemned(d)?.target).toBe('r1');
    expect(events(out)).toEqual(['replica.condemned']);
  });

  it('one condemnation per view, the first member in set order with evidence; a new view forgets it and past views\' accusations', () => {
    const d = make('r3');
    members = ['r1', 'r2', 'r3', 'r4'];
    for (const t of ['r2', 'r1']) for (const by of ['r3', 'r4']) (by === 'r3' ? accuse(d, t, 'rsn.gap', '', 0, []) : onAccuse(d, by, accusation(by, t), 0, []));
    // r2 was condemned first (it had evidence first); r1's evidence waits.
    expect(condemned(d)?.target).toBe('r2');
    view = 1;
    members = ['r1', 'r3', 'r4'];
    diagnosisNewView(d, 1, []);
    // View 0's accusations against r1 no longer count.
    expect(condemned(d)).toBeNull();
    expect(diagnosisRunning(d)).toBe(false);
  });

  it('condemned() is null once the evidence no longer holds: the target left the set', () => {
    const d = make();
    accuse(d, 'r2', 'rsn.gap', '', 0, []);
    onAccuse(d, 'r3', accusation('r3', 'r2'), 0, []);
    expect(condemned(d)?.target).toBe('r2');
    members = ['r1', 'r3'];
    expect(condemned(d)).toBeNull();
  });
});

describe('a missed heartbeat (spec §1.3): probe, then accuse if still silent after diagnosisTimeoutMs', () => {
  it('reports the silence to the watchdog and probes at once; accuses at the deadline, not before', () => {
    const d = make();
    const out: CoreEffect[] = [];
    missedHeartbeat(d, 'r2', 160, 1000, out);
    expect(reports(out)).toEqual([{ to: 'scc', type: 'diag.report', inc: 7, counter: 1, view: 0, reason: 'silent', target: 'r2' }]);
    expect(probes(out)).toEqual(['r2']);
    expect(diagnosisHistory(d)[0]).toMatchObject({ kind: 'initiated', target: 'r2', reason: 'silent', detail: 'no heartbeat for 160 ms' });
    expect(diagnosisRunning(d)).toBe(true);
    expect(diagnosisNextWakeMs(d)).toBe(1000 + T.diagnosisTimeoutMs);
    diagnosisTimers(d, 1000 + T.diagnosisTimeoutMs - 1, []);
    expect(sent).toEqual([]);
    const late: CoreEffect[] = [];
    diagnosisTimers(d, 1000 + T.diagnosisTimeoutMs, late);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
    expect(sent[0]?.payload).toMatchObject({ signed: { accusation: { target: 'r2', reason: 'silent' } } });
    expect(diagnosisHistory(d).at(-1)?.detail).toBe(`unresponsive for ${T.diagnosisTimeoutMs} ms after a missed heartbeat`);
    expect(diagnosisNextWakeMs(d)).toBeNull();
    expect(diagnosisRunning(d)).toBe(false);
  });

  it('a heartbeat or probe reply before the deadline ends it: no accusation', () => {
    const d = make();
    missedHeartbeat(d, 'r2', 160, 0, []);
    heardFrom(d, 'r2');
    diagnosisTimers(d, 10_000, []);
    expect(sent).toEqual([]);
    expect(diagnosisRunning(d)).toBe(false);
  });

  it('one follow-up per silent peer: a second miss meanwhile, or after we accused it, starts nothing; the earliest deadline wakes us', () => {
    const d = make();
    missedHeartbeat(d, 'r2', 160, 0, []);
    const again: CoreEffect[] = [];
    missedHeartbeat(d, 'r2', 310, 150, again);
    expect(again).toEqual([]);
    missedHeartbeat(d, 'r3', 160, 100, []);
    expect(diagnosisNextWakeMs(d)).toBe(T.diagnosisTimeoutMs);
    diagnosisTimers(d, T.diagnosisTimeoutMs, []);
    expect(diagnosisNextWakeMs(d)).toBe(100 + T.diagnosisTimeoutMs);
    const after: CoreEffect[] = [];
    missedHeartbeat(d, 'r2', 900, 500, after);
    expect(after).toEqual([]);
  });

  it('a new view drops the silences under way', () => {
    const d = make();
    missedHeartbeat(d, 'r2', 160, 0, []);
    view = 1;
    diagnosisNewView(d, 10, []);
    expect(diagnosisNextWakeMs(d)).toBeNull();
    diagnosisTimers(d, 10_000, []);
    expect(sent).toEqual([]);
  });

  it('report counters increase per initiation, so the watchdog counts each once', () => {
    const d = make();
    const out: CoreEffect[] = [];
    missedHeartbeat(d, 'r2', 160, 0, out);
    accuse(d, 'r3', 'digest', '', 1, out);
    reportInitiation(d, 'agent.reports', null, 'reports', 2, out);
    expect(reports(out).map((r) => `${r.counter}:${r.reason}:${r.target}`)).toEqual(['1:silent:r2', '2:digest:r3', '3:agent.reports:']);
  });
});

describe('digests at equal RSNs (PROTOCOL §10.4)', () => {
  it('a peer\'s digest at an RSN we have, that differs, is accused; an equal one is not; RSN 0 is never compared', () => {
    const d = make();
    ownDigest(d, 16, digest(1), 0, []);
    ownDigest(d, 20, digest(2), 0, []);
    onDigestClaims(d, 'r2', 0, [[16, digest(1)], [20, digest(2)], [0, digest(9)]], 1, []);
    expect(sent).toEqual([]);
    const out: CoreEffect[] = [];
    onDigestClaims(d, 'r3', 0, [[20, digest(3)]], 2, out);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
    expect(sent[0]?.payload).toMatchObject({ signed: { accusation: { target: 'r3', reason: 'digest' } } });
    expect(diagnosisHistory(d).find((h) => h.kind === 'accused')?.detail).toBe(`state digest at rsn 20: ${'03'.repeat(6)} vs ours ${'02'.repeat(6)}`);
  });

  it('a digest one byte off is a different digest', () => {
    const d = make();
    ownDigest(d, 16, digest(1), 0, []);
    const off = digest(1);
    off[31] = 2;
    onDigestClaims(d, 'r2', 0, [[16, off]], 1, []);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
  });

  it('claims of another view, or of a non-member, are ignored', () => {
    const d = make();
    ownDigest(d, 16, digest(1), 0, []);
    onDigestClaims(d, 'r2', 1, [[16, digest(2)]], 1, []);
    onDigestClaims(d, 'r9', 0, [[16, digest(2)]], 1, []);
    expect(sent).toEqual([]);
  });

  it('a checkpoint claim ahead of us waits for our own digest there; a non-checkpoint one is not kept', () => {
    const d = make();
    onDigestClaims(d, 'r2', 0, [[32, digest(5)], [33, digest(5)]], 0, []);
    ownDigest(d, 33, digest(6), 1, []);
    expect(sent).toEqual([]); // 33 was not kept
    ownDigest(d, 32, digest(6), 2, []);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
    expect(diagnosisHistory(d).find((h) => h.kind === 'accused')?.detail).toBe(`state digest at rsn 32: ${'05'.repeat(6)} vs ours ${'06'.repeat(6)}`);
    // Compared once: the claim is gone.
    sent = [];
    view = 1;
    diagnosisNewView(d, 3, []);
    ownDigest(d, 32, digest(7), 4, []);
    expect(sent).toEqual([]);
  });

  it('a matching claim ahead of us accuses nobody when we get there; a new view forgets pending claims', () => {
    const d = make();
    onDigestClaims(d, 'r2', 0, [[48, digest(5)]], 0, []);
    ownDigest(d, 48, digest(5), 1, []);
    expect(sent).toEqual([]);
    onDigestClaims(d, 'r3', 0, [[64, digest(5)]], 2, []);
    view = 1;
    diagnosisNewView(d, 3, []);
    ownDigest(d, 64, digest(6), 4, []);
    expect(sent).toEqual([]);
  });

  it('at most four pending claims per peer: the oldest goes', () => {
    const d = make();
    onDigestClaims(d, 'r2', 0, [16, 32, 48, 64, 80].map((r): [number, Uint8Array] => [r, digest(1)]), 0, []);
    ownDigest(d, 16, digest(2), 1, []);
    expect(sent).toEqual([]); // 16 was dropped
    ownDigest(d, 32, digest(2), 2, []);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
  });

  it('our digests: the first at an RSN stays, at most MAX_CHECKPOINTS, oldest out; the latest checkpoint is the highest multiple of digestEveryRsn', () => {
    const d = make();
    expect(latestCheckpoint(d)).toBeNull();
    ownDigest(d, 5, digest(1), 0, []);
    expect(latestCheckpoint(d)).toBeNull();
    ownDigest(d, 16, digest(4), 0, []);
    ownDigest(d, 48, digest(2), 0, []);
    ownDigest(d, 48, digest(3), 0, []);
    ownDigest(d, 32, digest(3), 0, []);
    // The highest, neither the first nor the last recorded.
    expect(latestCheckpoint(d)).toEqual([48, digest(2)]);
    for (let k = 1; k <= MAX_CHECKPOINTS - 4; k++) ownDigest(d, 1001 + 2 * k, digest(5), 0, []); // odd: no checkpoint
    // MAX_CHECKPOINTS kept: the first, at 5, is still there, so a claim there is compared.
    onDigestClaims(d, 'r3', 0, [[5, digest(8)]], 1, []);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
    sent = [];
    view = 1;
    diagnosisNewView(d, 1, []);
    for (let k = MAX_CHECKPOINTS - 3; k <= MAX_CHECKPOINTS; k++) ownDigest(d, 1001 + 2 * k, digest(5), 0, []);
    expect(latestCheckpoint(d)).toBeNull(); // 5, 32 and 16 went first, and none of the rest is a checkpoint
    // Our digest at 5 is gone: a differing claim there accuses nobody now.
    onDigestClaims(d, 'r2', 1, [[5, digest(9)]], 1, []);
    expect(sent).toEqual([]);
    onDigestClaims(d, 'r2', 1, [[1001 + 2 * MAX_CHECKPOINTS, digest(9)]], 1, []);
    expect(sent.map((s) => s.to)).toEqual(['r2', 'r3']);
  });
});

describe('history', () => {
  it(`keeps the last ${MAX_DIAGNOSIS_HISTORY} records, each with the view it happened in, and hands out a copy`, () => {
    const d = make();
    for (let k = 0; k < MAX_DIAGNOSIS_HISTORY + 5; k++) reportInitiation(d, 'rsn.gap', 'r2', `n${k}`, k, []);
    view = 4;
    reportInitiation(d, 'rsn.gap', 'r2', 'last', 99, []);
    const h = diagnosisHistory(d);
    expect(h).toHaveLength(MAX_DIAGNOSIS_HISTORY);
    expect(h[0]?.detail).toBe('n6');
    expect(h.at(-1)).toEqual({ atMs: 99, view: 4, kind: 'initiated', target: 'r2', by: 'r1', reason: 'rsn.gap', detail: 'last' });
    h.pop();
    expect(diagnosisHistory(d)).toHaveLength(MAX_DIAGNOSIS_HISTORY);
  });
});
