// The straggler policy in the manager's replicated state (src/core/straggler.ts,
// src/core/cluster-straggler.ts; docs/PROTOCOL.md §13; the model is Spark's
// spark.speculation.multiplier/quantile). The pure rule first, then driven through the group's
// entry points with a fake node table (cluster-driver.ts): every assertion is what a process (its
// signals), an operator (the events, `trine ps`) or a replica comparing digests could observe.
import { describe, expect, it } from 'vitest';
import { progressRequest } from '../../../src/core/cluster-inputs.ts';
import { STRAGGLER_DEFAULT_AFTER_PERMILLE, STRAGGLER_DEFAULT_FACTOR_HUNDREDTHS } from '../../../src/core/constants.ts';
import { GSIG } from '../../../src/core/signals.ts';
import {
  createStragglerState, judge, recordProgress, STRAGGLER_HYSTERESIS_PERCENT, stragglerPart, stragglerState, twiceMedian, type ProcStanding,
} from '../../../src/core/straggler.ts';
import type { StragglerOptions } from '../../../src/core/wire/messages.ts';
import { Cluster } from './cluster-driver.ts';

const POLICY: StragglerOptions = { factorHundredths: STRAGGLER_DEFAULT_FACTOR_HUNDREDTHS, afterPermille: STRAGGLER_DEFAULT_AFTER_PERMILLE };

describe('PROTOCOL §13.2: the rule (k × the median, after a share of the work)', () => {
  const running = (): ProcStanding => 'running';
  const state = (progress: Record<number, number>) => {
    const s = createStragglerState();
    for (const [v, p] of Object.entries(progress)) expect(recordProgress(s, Number(v), p)).toBe(true);
    return s;
  };

  it('the median is the mean of the two middle values for an even count (kept doubled: integers)', () => {
    expect(twiceMedian([5])).toBe(10);
    expect(twiceMedian([900, 100, 500])).toBe(1000);
    expect(twiceMedian([100, 800, 600, 700])).toBe(1300);
  });

  it('no flag before the median reaches the quantile, however far behind a process is', () => {
    const s = state({ 0: 490, 1: 490, 2: 490, 3: 0 });
    expect(judge(s, POLICY, running)).toEqual([]);
  });

  it('at the quantile, a process at or below median / k is flagged; one just above is not', () => {
    // Median 600 (1.5 × 400): 400 is a straggler (400 × 1.5 ≤ 600), 401 is not.
    expect(judge(state({ 0: 600, 1: 600, 2: 600, 3: 400 }), POLICY, running)).toEqual([{ kind: 'flagged', vpid: 3, permille: 400, medianPermille: 600 }]);
    expect(judge(state({ 0: 600, 1: 600, 2: 600, 3: 401 }), POLICY, running)).toEqual([]);
    // A stricter factor flags less.
    expect(judge(state({ 0: 600, 1: 600, 2: 600, 3: 400 }), { ...POLICY, factorHundredths: 200 }, running)).toEqual([]);
  });

  it('a flag is raised once; a straggler that catches up within the factor is unflagged', () => {
    const s = state({ 0: 620, 1: 640, 2: 600, 3: 310 });
    expect(judge(s, POLICY, running).map((c) => `${c.kind} ${c.vpid}`)).toEqual(['flagged 3']);
    recordProgress(s, 3, 350);
    expect(judge(s, POLICY, running)).toEqual([]);
    expect(s.entries.get(3)?.flagged).toBe(true);
    recordProgress(s, 3, 500);
    expect(judge(s, POLICY, running)).toEqual([{ kind: 'unflagged', vpid: 3, permille: 500, medianPermille: 610 }]);
    expect(s.flags).toBe(1);
  });

  it('a flagged process is unflagged only past the bar by STRAGGLER_HYSTERESIS_PERCENT (each change starts an epoch)', () => {
    const s = state({ 0: 600, 1: 600, 2: 600, 3: 400 });
    expect(judge(s, POLICY, running).map((c) => c.kind)).toEqual(['flagged']);
    // 410 × 1.5 = 615 > 600: past the bar, but within 10 % of it (660): still flagged.
    recordProgress(s, 3, 410);
    expect(judge(s, POLICY, running)).toEqual([]);
    // 441 × 1.5 = 661.5 > 660: unflagged.
    recordProgress(s, 3, 441);
    expect(judge(s, POLICY, running).map((c) => c.kind)).toEqual(['unflagged']);
    expect(STRAGGLER_HYSTERESIS_PERCENT).toBe(10);
  });

  it('a dead process leaves the computation; one that ended normally counts as done (1000 ‰); neither keeps a flag', () => {
    const s = state({ 0: 800, 1: 800, 2: 100, 3: 200 });
    // Median 500 of [100, 200, 800, 800]: 100 and 200 flagged (× 1.5 ≤ 500).
    expect(judge(s, POLICY, running).map((c) => `${c.kind} ${c.vpid}`)).toEqual(['flagged 2', 'flagged 3']);
    // 2 died: the median of [200, 800, 800] is 800; 3 stays flagged, 2 leaves quietly.
    const dead = (v: number): ProcStanding => (v === 2 ? 'out' : 'running');
    expect(judge(s, POLICY, dead)).toEqual([]);
    expect(s.entries.get(2)?.flagged).toBe(false);
    expect(s.entries.get(3)?.flagged).toBe(true);
    // 0 and 1 finished: they count as done, so 3, alone running, stays a straggler.
    const done = (v: number): ProcStanding => (v === 2 ? 'out' : v === 3 ? 'running' : 'done');
    expect(judge(s, POLICY, done)).toEqual([]);
    expect(s.entries.get(3)?.flagged).toBe(true);
    // Had they died instead, 3 would be the median of itself: unflagged.
    const alone = (v: number): ProcStanding => (v === 3 ? 'running' : 'out');
    expect(judge(s, POLICY, alone)).toEqual([{ kind: 'unflagged', vpid: 3, permille: 200, medianPermille: 200 }]);
  });

  it('a permille over 1000 is not recorded', () => {
    const s = createStragglerState();
    expect(recordProgress(s, 0, 1001)).toBe(false);
    expect(recordProgress(s, 0, -1)).toBe(false);
    expect(recordProgress(s, 0, 1000)).toBe(true);
  });

  it('the canonical tree: entries in VPID order, decoded exactly; a reordered, repeated or out-of-range entry is refused', () => {
    const s = state({ 3: 100, 1: 900, 2: 800 });
    judge(s, POLICY, running);
    const tree = stragglerState.enc(s);
    expect(tree).toEqual([[[1, 900, false], [2, 800, false], [3, 100, true]], 1]);
    const back = stragglerState.dec(tree, 's');
    expect(back.ok && JSON.stringify(stragglerState.enc(back.value))).toBe(JSON.stringify(tree));
    expect(stragglerState.dec([[[2, 800, false], [1, 900, false]], 0], 's').ok).toBe(false);
    expect(stragglerState.dec([[[1, 800, false], [1, 900, false]], 0], 's').ok).toBe(false);
    expect(stragglerState.dec([[[1, 1001, false]], 0], 's').ok).toBe(false);
    expect(stragglerPart.dec([null, tree], 'p').ok).toBe(false);
    expect(stragglerPart.dec([[150, 500], null], 'p').ok).toBe(false);
    expect(stragglerPart.dec([null, null], 'p')).toEqual({ ok: true, value: { straggler: null, stragglerState: null } });
  });
});

// ---- In the group ------------------------------------------------------------------------------

function stragglerRunning(size: number, policy = POLICY): Cluster {
  const c = new Cluster(size);
  expect(c.submit(size, { mode: 'linked', straggler: policy })).toEqual({ ok: true, text: 't1' });
  c.startLinked('t1');
  return c;
}
const progress = (c: Cluster, vpid: number, permille: number, agent = c.agentOf(c.proc('t1', vpid).node ?? '')) => {
  c.effects = progressRequest(c.cs, c.nodes, agent, { task: 't1', vpid, permille });
  return c.effects;
};

describe('PROTOCOL §13: the straggler policy in the group', () => {
  it('bad options are refused: a plain task (naming --linked), a factor below 1.1, a share outside 0.05–0.95', () => {
    const c = new Cluster(2);
    expect(c.submit(2, { straggler: POLICY })).toEqual({ ok: false, text: expect.stringMatching(/needs a linked task \(--linked\)/) });
    expect(c.submit(2, { mode: 'linked', straggler: { ...POLICY, factorHundredths: 109 } }).text).toMatch(/straggler factor must be 1.1 to 100, got 1.09/);
    expect(c.submit(2, { mode: 'linked', straggler: { ...POLICY, afterPermille: 49 } }).text).toMatch(/straggler after must be 0.05 to 0.95/);
    expect(c.submit(2, { mode: 'linked', straggler: { ...POLICY, afterPermille: 951 } }).ok).toBe(false);
    expect(c.submit(2, { mode: 'linked', straggler: { factorHundredths: 110, afterPermille: 50 } }).ok).toBe(true);
  });

  it('the mapping tells every process the policy (the library reports progress only then)', () => {
    const c = new Cluster(3);
    c.submit(3, { mode: 'linked', straggler: POLICY });
    c.startLinked('t1');
    expect(c.mappings().map((m) => m.straggler)).toEqual([POLICY, POLICY, POLICY]);
    const plain = new Cluster(2);
    plain.submit(2, { mode: 'linked' });
    plain.startLinked('t1');
    expect(plain.mappings().map((m) => m.straggler)).toEqual([null, null]);
  });

  it('trine ps shows each process\'s progress; no flag before the quantile', () => {
    const c = stragglerRunning(4);
    expect(c.task('t1').procs.map((p) => [p.progress, p.straggler])).toEqual([[null, false], [null, false], [null, false], [null, false]]);
    for (const v of [0, 1, 2]) progress(c, v, 400);
    progress(c, 3, 10);
    expect(c.sigs()).toEqual([]);
    expect(c.task('t1').procs.map((p) => [p.progress, p.straggler])).toEqual([[400, false], [400, false], [400, false], [10, false]]);
  });

  it('flag at k × the median: journalled, GSIG_NTF_STRAGGLER(vpid) to every member, shown in trine ps; never a kill', () => {
    const c = stragglerRunning(4);
    for (const v of [0, 1, 2]) progress(c, v, 620);
    const epoch = c.task('t1').epoch;
    progress(c, 3, 310);
    expect(c.events()).toEqual(['t1/3 is a straggler: 31 % done, the median 62 %']);
    expect(c.sigs()).toEqual([0, 1, 2, 3].map((v) => `a${v + 1} [${v}] ${GSIG.NTF_STRAGGLER} CM→ALL 3 @${epoch + 1}`));
    expect(c.terminates()).toEqual([]);
    expect(c.task('t1').procs.map((p) => p.straggler)).toEqual([false, false, false, true]);
    expect(c.task('t1').procs.every((p) => p.state === 'running')).toBe(true);
    // Another report that keeps it behind changes nothing.
    progress(c, 3, 320);
    expect(c.sigs()).toEqual([]);
  });

  it('unflag on catching up: journalled, GSIG_NTF_STRAGGLER(−1 − vpid)', () => {
    const c = stragglerRunning(3);
    progress(c, 0, 600);
    progress(c, 1, 600);
    progress(c, 2, 0);
    expect(c.events()).toEqual(['t1/2 is a straggler: 0 % done, the median 60 %']);
    progress(c, 2, 450);
    expect(c.events()).toEqual(['t1/2 is no longer a straggler: 45 % done, the median 60 %']);
    expect(c.sigs().map((s) => s.split(' ').slice(2, 5).join(' '))).toEqual([0, 1, 2].map(() => `${GSIG.NTF_STRAGGLER} CM→ALL -3`));
    expect(c.task('t1').procs.map((p) => p.straggler)).toEqual([false, false, false]);
  });

  it('dead and finished processes leave the computation: a dead straggler is dropped without a notice; the finished count as done', () => {
    const c = stragglerRunning(4);
    for (const v of [0, 1]) progress(c, v, 800);
    progress(c, 2, 100);
    progress(c, 3, 200);
    expect(c.task('t1').procs.map((p) => p.straggler)).toEqual([false, false, true, true]);
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events().filter((e) => /straggler/.test(e))).toEqual([]);
    expect(c.task('t1').procs.map((p) => p.straggler)).toEqual([false, false, false, true]);
    // 0 and 1 finish: 3 is still far behind the work done.
    c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    c.report('t1', 1, 'terminatedNormally', { exitCode: 0 });
    expect(c.proc('t1', 3).straggler).toBe(true);
    expect(c.sigs().filter((s) => s.includes(` ${GSIG.NTF_STRAGGLER} `))).toEqual([]);
  });

  it('reports the group cannot use are dropped and counted: wrong node, over 1000 ‰, a task without a policy', () => {
    const c = stragglerRunning(2);
    progress(c, 0, 500, 'a2');
    expect(c.events()).toEqual(['dropped progress from t1/0: the sender is on n1, not n2']);
    progress(c, 0, 1001);
    expect(c.events()).toEqual(['dropped progress from t1/0: 1001 ‰ is more than the whole']);
    expect(c.task('t1').signals.dropped).toBe(2);
    expect(c.proc('t1', 0).progress).toBeNull();
    const plain = new Cluster(2);
    plain.submit(2, { mode: 'linked' });
    plain.startLinked('t1');
    plain.effects = progressRequest(plain.cs, plain.nodes, 'a1', { task: 't1', vpid: 0, permille: 500 });
    expect(plain.events()).toEqual([]);
    expect(plain.proc('t1', 0).progress).toBeNull();
    expect(plain.task('t1').signals.dropped).toBe(1);
  });

  it('a restart forgets the progress and the flags: every process of the new start is new', () => {
    const c = stragglerRunning(3);
    progress(c, 0, 600);
    progress(c, 1, 600);
    progress(c, 2, 0);
    expect(c.proc('t1', 2).straggler).toBe(true);
    c.kill('t1', 'restart');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    c.tick(2);
    expect(c.task('t1').procs.map((p) => [p.progress, p.straggler])).toEqual([[null, false], [null, false], [null, false]]);
  });

  it('the digest is canonical: two clusters given the same inputs in the same order encode the same', () => {
    const a = stragglerRunning(4);
    const b = stragglerRunning(4);
    for (const c of [a, b]) {
      for (const v of [3, 1, 0]) progress(c, v, 700 - v);
      progress(c, 2, 50);
      progress(c, 2, 600);
    }
    expect(a.digest()).toBe(b.digest());
    expect(a.digest()).toContain('[[0,700,false],[1,699,false],[2,600,false],[3,697,false]],1]');
  });
});
