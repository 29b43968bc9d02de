// The watchdog's failure detection (src/core/watchdog-liveness.ts; spec §1.6 rules 2 and 3,
// PROTOCOL §10.8): it resets the cluster when consistent heartbeats from two replicas stop
// (rule 2) or self-diagnosis repeats too often (rule 3).
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect } from '../../../src/core/node.ts';
import { checkSilence, consistentUntilMs, noteInput, onDiagReport, onHeartbeat, silenceDeadlineMs, tally } from '../../../src/core/watchdog-liveness.ts';
import { createWatchdogState, MAX_CLUSTER_RESET_HISTORY, WATCHDOG_STALL_PERIODS } from '../../../src/core/watchdog-state.ts';
import { FRESH, PERIOD, SILENCE, frame, hb, keys, membership, setup, withSpare } from './watchdog-harness.ts';

describe('watchdog rule 2: consistent heartbeats from two replicas (spec §1.6)', () => {
  it('arms once two replicas report the same view while both are fresh', () => {
    const g = setup();
    g.beat('r1', 1000);
    expect(g.w.status(1000).armed).toBe(false);
    expect(g.w.nextWakeMs()).toBeNull();
    g.beat('r2', 1000 + FRESH + 1); // r1 is no longer fresh: never two fresh together
    expect(g.w.status(1000 + FRESH + 1).armed).toBe(false);
    g.beat('r3', 1200, 1); // fresh alongside r2, but in another view
    expect(g.w.status(1200).armed).toBe(false);
    g.beat('r1', 1250);
    expect(g.w.status(1250).armed).toBe(true);
    // r1 (1250) and r2 (1151) stay consistent until r2's heartbeat ages out.
    expect(g.deadline()).toBe(1000 + FRESH + 1 + FRESH + SILENCE);
  });

  it('never resets while two replicas heartbeat consistently, even with the third silent', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 1000);
    g.run(['r1', 'r2'], 1000, 20_000);
    g.tick(20_000);
    expect(g.clusterResets()).toEqual([]);
    const s = g.w.status(20_000);
    expect(s.armed).toBe(true);
    expect(s.replicas.find((r) => r.id === 'r3')?.health).toBe('silent');
    expect(s.clusterResets).toEqual([]);
  });

  it('A21: two replicas fail at once → cluster reset after watchdogSilenceMs, exactly once', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 1000); // last round at 975
    g.run(['r1'], 1050, 1500);
    const deadline = 975 + FRESH + SILENCE; // when r2 and r3's last heartbeats aged out, plus the silence
    expect(g.deadline()).toBe(deadline);
    g.run(['r1'], 1500, deadline);
    expect(g.clusterResets()).toEqual([]);
    const out = g.tick(deadline);
    expect(out.filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
    expect(out.some((e) => e.type === 'log' && e.level === 'warn' && e.event === 'cluster.reset')).toBe(true);
    g.run(['r1'], deadline, deadline + 10 * SILENCE);
    expect(g.clusterResets()).toHaveLength(1);
    // What a booting node reads to start its initial replica again (PROTOCOL §10.10).
    expect(g.w.status(deadline + 10 * SILENCE).clusterResetCount).toBe(1);
    expect(g.w.nextWakeMs()).toBeNull();
    const s = g.w.status(deadline);
    expect(s.armed).toBe(false);
    expect(s.clusterResets).toHaveLength(1);
    expect(s.clusterResets[0]).toMatchObject({ atMs: deadline, rule: 'heartbeats' });
    expect(s.clusterResets[0]?.reason).toContain('r1 (view 0)');
  });

  it('resets when the two replicas still heartbeating disagree on the view', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 1000);
    // r3 falls silent; r1 and r2 do not agree on the view that follows.
    for (let t = 1000; t < 1000 + 2 * SILENCE; t += PERIOD) {
      g.beat('r1', t, 1);
      g.beat('r2', t, 2);
      g.tick(t);
      // Two replicas last agreed (view 0, fresh) at 1000, just before r2 left view 0.
      if (t === 1000) expect(g.deadline()).toBe(1000 + SILENCE);
    }
    const resets = g.w.status(1000 + 2 * SILENCE).clusterResets;
    expect(resets).toHaveLength(1);
    expect(resets[0]?.atMs).toBe(1000 + 27 * PERIOD); // the first input at or after the deadline
  });

  it('a heartbeat that arrives after the deadline does not undo the silence before it', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 1000);
    const deadline = g.deadline();
    g.tick(deadline - 1); // the watchdog runs, woken every period
    const out = g.beat('r2', deadline + 5); // the frame brings the time past the deadline
    expect(out.filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
  });

  it('a stall of the watchdog itself does not reset a group whose heartbeats wait unread; a dead group is still reset after the grace', () => {
    // Loaded host: the watchdog's event loop does not run for 3 s; the heartbeats sent meanwhile
    // are read only after. They are judged, not the silence the watchdog could not observe.
    const g = setup();
    g.run(['r1', 'r2'], 0, 1000);
    const stalledAt = g.deadline() + 1000;
    const first = g.beat('r1', stalledAt);
    expect(first.some((e) => e.type === 'log' && e.event === 'watchdog.stalled')).toBe(true);
    g.beat('r2', stalledAt + 1);
    g.run(['r1', 'r2'], stalledAt + 75, stalledAt + 3000);
    expect(g.clusterResets()).toEqual([]);
    // Stalled again, and this time the group is gone: reset once the grace has passed.
    const again = g.deadline() + 1000;
    expect(g.stallUntil(again).filter((e) => e.type === 'reset.cluster')).toEqual([]);
    expect(g.tick(again + FRESH).filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
  });

  it('never resets before it is armed', () => {
    const g = setup();
    g.run(['r1'], 0, 10 * SILENCE); // one replica only
    const h = setup();
    for (let t = 0; t < 10 * SILENCE; t += PERIOD) { // two replicas that never agree on the view
      h.beat('r1', t, 0);
      h.beat('r2', t, 1);
      h.tick(t);
    }
    for (const x of [g, h]) {
      expect(x.clusterResets()).toEqual([]);
      expect(x.w.nextWakeMs()).toBeNull();
      expect(x.w.status(10 * SILENCE).armed).toBe(false);
    }
  });

  it('after a reset, only the restarted group (new incarnations) re-arms it', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    g.run(['r1', 'r2'], 3000, 4000); // the old processes, still up: they do not re-arm
    expect(g.w.status(4000).armed).toBe(false);
    g.run(['r1', 'r3'], 5000, 5200, 0, 11); // restarted: new incarnations
    expect(g.w.status(5200).armed).toBe(true);
    expect(g.deadline()).toBe(5150 + FRESH + SILENCE);
    g.tick(5150 + FRESH + SILENCE);
    expect(g.clusterResets()).toHaveLength(2);
  });

  it('accepts heartbeats from spare replicas, which count like the initial three', () => {
    const g = setup();
    g.beat('r4', 1000, 1);
    expect(g.w.status(1000).replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(setup().w.status(0).replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3']); // r4 not heard yet
    g.beat('r1', 1010, 1);
    const s = g.w.status(1010);
    expect(s.armed).toBe(true);
    expect(s.replicas[3]).toMatchObject({ id: 'r4', view: 1, health: 'healthy', heartbeats: 1 });
    g.beat('r9', 1020); // not a member, not even a spare
    expect(g.w.status(1020).drops['NOT_A_MEMBER']).toBe(1);
  });

  it('keeps the last MAX_CLUSTER_RESET_HISTORY cluster resets; clusterResetCount counts every one', () => {
    const g = setup();
    for (let k = 0; k <= MAX_CLUSTER_RESET_HISTORY; k++) {
      g.run(['r1', 'r2'], 10_000 * k, 10_000 * k + 2 * PERIOD, 0, 10 + k); // each time the restarted group
      g.tick(g.deadline());
    }
    const s = g.w.status(10_000 * (MAX_CLUSTER_RESET_HISTORY + 1));
    expect(s.clusterResetCount).toBe(MAX_CLUSTER_RESET_HISTORY + 1);
    expect(s.clusterResets).toHaveLength(MAX_CLUSTER_RESET_HISTORY);
    expect(s.clusterResets[0]?.atMs).toBe(10_000 + PERIOD + FRESH + SILENCE); // the second
  });

  it('two heartbeats exactly freshMs apart were fresh together: it arms (PROTOCOL §10.8: age ≤ 2 × sccHeartbeatMs)', () => {
    const g = setup();
    g.beat('r1', 1000);
    g.beat('r2', 1000 + FRESH);
    expect(g.w.status(1000 + FRESH).armed).toBe(true);
    expect(g.deadline()).toBe(1000 + FRESH + SILENCE);
  });

  it('armed, it asks to be woken every period, and at the silence deadline when that comes first', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500); // last round at 450
    expect(g.w.nextWakeMs()).toBe(450 + PERIOD);
    const deadline = g.deadline();
    g.tick(deadline - 10); // the group is silent; the watchdog runs on
    expect(g.w.nextWakeMs()).toBe(deadline);
  });

  it('the reset\'s reason gives the silence and the replicas still fresh, with their views', () => {
    const gone = setup();
    gone.run(['r1', 'r2'], 0, 500);
    gone.tick(gone.deadline());
    expect(gone.w.status(5000).clusterResets[0]?.reason).toBe(`no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: no replica`);
    const split = setup();
    split.run(['r1', 'r2', 'r3'], 0, 1000);
    for (let t = 1000; t < 1000 + 2 * SILENCE; t += PERIOD) { // r3 silent; r1 and r2 in views of their own
      split.beat('r1', t, 1);
      split.beat('r2', t, 2);
      split.tick(t);
    }
    const reason = split.w.status(5000).clusterResets[0]?.reason;
    expect(reason).toBe(`no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: r1 (view 1), r2 (view 2)`);
  });

  it('a stall is an input more than WATCHDOG_STALL_PERIODS periods after the last one, while armed: logged with its length, and the deadline held for two periods', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500); // armed; last input at 450
    const stalls = (out: CoreEffect[]) => out.filter((e) => e.type === 'log' && e.event === 'watchdog.stalled');
    const limit = WATCHDOG_STALL_PERIODS * PERIOD;
    expect(stalls(g.stallUntil(450 + limit))).toEqual([]);
    expect(stalls(g.stallUntil(450 + 2 * limit + 1))).toEqual([{ type: 'log', level: 'warn', event: 'watchdog.stalled', fields: { forMs: limit + 1, graceMs: FRESH } }]);
    const late = g.deadline() + 1000;
    g.stallUntil(late);
    expect(g.deadline()).toBe(late + FRESH);
    // Not armed, it asks for no wake-up, so a long gap between inputs is no stall of its own.
    const idle = setup();
    idle.beat('r1', 0);
    expect(stalls(idle.beat('r1', 10_000))).toEqual([]);
  });

  it('arming is logged (watchdog.armed) with the replica whose heartbeat armed it and the view the two agree on (PROTOCOL §10.8)', () => {
    const g = setup();
    g.beat('r1', 1000, 3);
    expect(g.beat('r2', 1010, 3)).toEqual([{ type: 'log', level: 'info', event: 'watchdog.armed', fields: { replica: 'r2', view: 3 } }]);
  });

  it('the cluster.reset log gives the rule and the reason the status records (PROTOCOL §10.8)', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    const deadline = g.deadline();
    const out = g.tick(deadline);
    const reason = `no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: no replica`;
    expect(out).toContainEqual({ type: 'log', level: 'warn', event: 'cluster.reset', fields: { rule: 'heartbeats', reason } });
    expect(g.w.status(deadline).clusterResets).toEqual([{ atMs: deadline, rule: 'heartbeats', reason }]);
  });

  it('the reset\'s reason counts a replica heard exactly freshMs before as fresh (PROTOCOL §10.8: age ≤ 2 × sccHeartbeatMs)', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500); // last round at 450
    const deadline = g.deadline();
    g.tick(deadline - FRESH);
    g.beat('r1', deadline - FRESH, 1); // alone in its view: the deadline stays
    expect(g.deadline()).toBe(deadline);
    g.tick(deadline);
    expect(g.w.status(deadline).clusterResets[0]?.reason).toBe(`no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: r1 (view 1)`);
  });

  it('a third replica heard long after the other two does not extend their consistency: the deadline counts from the last moment two were fresh together (PROTOCOL §10.8)', () => {
    const g = setup();
    g.beat('r3', 0);
    g.beat('r2', 100); // armed: r2 and r3 fresh together until 0 + FRESH
    g.tick(1000);
    g.beat('r1', 1000); // the same view, fresh with neither
    expect(g.deadline()).toBe(FRESH + SILENCE);
  });

  it('two views each held by a consistent pair: the deadline follows the pair fresh the longest, whichever view was heard first (PROTOCOL §10.8)', () => {
    for (const [again, view] of [[['r1', 'r2'], 0], [['r3', 'r4'], 1]] as const) {
      const g = setup();
      g.beat('r1', 0, 0);
      g.beat('r2', 0, 0);
      g.beat('r3', 10, 1);
      g.beat('r4', 10, 1);
      for (const r of again) g.beat(r, 100, view);
      expect(g.deadline()).toBe(100 + FRESH + SILENCE);
    }
  });
});

describe('watchdog rule 3: self-diagnosis initiations (spec §1.6, flaw 11c)', () => {
  const THRESHOLD = DEFAULT_TIMING.diagnosisThreshold;
  const TIMEOUT = DEFAULT_TIMING.diagnosisTimeoutMs;

  it('A20: repeated self-diagnosis exceeds the threshold → cluster reset, exactly once', () => {
    const g = setup();
    let resetAtMs: number | null = null;
    for (let k = 0; k < 40; k++) {
      for (const [from, t] of [['r1', 1000 + 500 * k], ['r2', 1250 + 500 * k]] as const) {
        if (g.report(from, t).some((e) => e.type === 'reset.cluster')) resetAtMs = t;
      }
    }
    // Each replica's share is capped at threshold/2 + 1: r1's (T/2 + 1)th report, with r2's T/2,
    // crosses the threshold T.
    expect(resetAtMs).toBe(1000 + 500 * (THRESHOLD / 2));
    expect(g.clusterResets()).toHaveLength(1); // the old group's further reports do not count
    const s = g.w.status(30_000);
    expect(s.clusterResets).toHaveLength(1);
    expect(s.clusterResets[0]).toMatchObject({ atMs: 1000 + 500 * (THRESHOLD / 2), rule: 'diagnosis' });
    expect(s.clusterResets[0]?.reason).toContain('from r1, r2');
    expect(s.diagnosisReports).toHaveLength(80);
    expect(s.diagnosisReports.filter((d) => d.counted)).toHaveLength(THRESHOLD + 1);
    expect(s.diagnosisInWindow).toBe(0); // cleared by the reset
    // The restarted group's initiations count again.
    for (let k = 0; k <= THRESHOLD / 2; k++) {
      g.report('r1', 40_000 + 500 * k, 11);
      g.report('r3', 40_250 + 500 * k, 11);
    }
    expect(g.clusterResets()).toHaveLength(2);
  });

  it('one replica flooding reports never resets the cluster', () => {
    const g = setup();
    for (let t = 0; t < 120_000; t += 10) g.report('r1', t);
    expect(g.clusterResets()).toEqual([]);
    const s = g.w.status(120_000);
    expect(s.replicas[0]?.diagnosisReports).toBe(12_000);
    expect(s.diagnosisInWindow).toBe(Math.floor(THRESHOLD / 2) + 1);
  });

  it('one replica alone never resets the cluster, even with a diagnosisThreshold below one (cluster.json takes any positive number)', () => {
    const g = setup({ ...withSpare, timing: { ...DEFAULT_TIMING, diagnosisThreshold: 0.5 } });
    for (let t = 0; t < 10 * TIMEOUT; t += TIMEOUT) g.report('r1', t);
    expect(g.clusterResets()).toEqual([]);
    expect(g.w.status(10 * TIMEOUT).diagnosisInWindow).toBe(1);
    g.report('r2', 10 * TIMEOUT);
    expect(g.clusterResets()).toHaveLength(1);
  });

  it('a flooding replica plus one other replica reporting once does not reset it either', () => {
    const g = setup();
    g.report('r2', 0);
    for (let t = 0; t < 30_000; t += 10) g.report('r1', t);
    expect(g.clusterResets()).toEqual([]);
  });

  it('counts one initiation per replica per diagnosisTimeoutMs', () => {
    const g = setup();
    for (const t of [0, 100, TIMEOUT - 1, TIMEOUT, TIMEOUT + 10, 2 * TIMEOUT]) g.report('r1', t);
    expect(g.w.status(1000).diagnosisReports.map((d) => [d.atMs, d.counted])).toEqual([
      [0, true], [100, false], [TIMEOUT - 1, false], [TIMEOUT, true], [TIMEOUT + 10, false], [2 * TIMEOUT, true],
    ]);
  });

  it('drops replayed reports: (inc, counter) must increase per sender', () => {
    const g = setup();
    const report = (from: string, nowMs: number, inc: number, counter: number) =>
      g.w.step(frame(from, nowMs, { type: 'diag.report', inc, counter, view: 0, reason: 'digest', target: 'r3' }));
    report('r1', 0, 10, 5);
    report('r2', 0, 10, 5);
    for (let k = 1; k <= 30; k++) {
      for (const r of ['r1', 'r2']) {
        report(r, 1000 * k, 10, 5); // the same report again
        report(r, 1000 * k, 9, 99); // an older incarnation
      }
    }
    const s = g.w.status(31_000);
    expect(g.clusterResets()).toEqual([]);
    expect(s.drops['REPLAYED']).toBe(120);
    expect(s.diagnosisReports).toHaveLength(2);
    expect(s.diagnosisReports[0]).toEqual({ atMs: 0, from: 'r1', view: 0, reason: 'digest', target: 'r3', counted: true });
  });

  it('counts only the initiations of the last diagnosisWindowMs', () => {
    const g = setup();
    // Two replicas each initiating T/2 times per window, evenly: exactly T in any window, never
    // more, for four windows.
    const every = DEFAULT_TIMING.diagnosisWindowMs / (THRESHOLD / 2);
    for (let t = 0; t < 120_000; t += every) {
      g.report('r1', t);
      g.report('r2', t + every / 2);
    }
    expect(g.clusterResets()).toEqual([]);
    expect(g.w.status(120_000 - every / 2).diagnosisInWindow).toBe(THRESHOLD); // just after r2's last report
  });

  it('keeps a bounded history, and ignores reports from non-replicas', () => {
    const g = setup();
    for (let t = 0; t < 300 * TIMEOUT; t += TIMEOUT) g.report('r4', t); // a spare, accepted
    g.report('a1', 0);
    const s = g.w.status(300 * TIMEOUT);
    expect(s.diagnosisReports).toHaveLength(256);
    expect(s.diagnosisReports[255]?.atMs).toBe(299 * TIMEOUT);
    expect(s.drops['NOT_A_MEMBER']).toBe(1);
    expect(s.replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3', 'r4']);
  });

  it('an initiation counts for diagnosisWindowMs, and no longer at the window\'s end', () => {
    const g = setup();
    g.report('r1', 0);
    expect(g.w.status(DEFAULT_TIMING.diagnosisWindowMs - 1).diagnosisInWindow).toBe(1);
    expect(g.w.status(DEFAULT_TIMING.diagnosisWindowMs).diagnosisInWindow).toBe(0);
  });

  it('after a cluster reset the restarted group\'s first initiation counts at once: the old group\'s rate limit is gone with it', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    const deadline = g.deadline();
    g.tick(deadline - PERIOD);
    g.report('r1', deadline - PERIOD);
    g.tick(deadline);
    expect(g.clusterResets()).toHaveLength(1);
    g.report('r1', deadline + 1, 11); // restarted, well within diagnosisTimeoutMs of the last
    expect(g.w.status(deadline + 1).diagnosisReports.map((d) => d.counted)).toEqual([true, true]);
    expect(g.w.status(deadline + 1).diagnosisInWindow).toBe(1);
  });

  it('each accepted report is logged diag.report with its sender, view, reason, target and whether it counted: info if it did, debug if the rate limit kept it out (PROTOCOL §10.8)', () => {
    const g = setup();
    const fields = { from: 'r1', view: 0, reason: 'silent', target: 'r3' };
    expect(g.report('r1', 0)).toEqual([{ type: 'log', level: 'info', event: 'diag.report', fields: { ...fields, counted: true } }]);
    expect(g.report('r1', 100)).toEqual([{ type: 'log', level: 'debug', event: 'diag.report', fields: { ...fields, counted: false } }]);
  });

  it('a rule-3 reset names its replicas sorted, whichever initiated first, in the status and the cluster.reset log (PROTOCOL §10.8)', () => {
    const g = setup();
    const out: CoreEffect[] = [];
    for (let k = 0; k <= THRESHOLD / 2; k++) {
      out.push(...g.report('r2', 1000 + 500 * k)); // r2 first
      out.push(...g.report('r1', 1250 + 500 * k));
    }
    const reason = `${THRESHOLD + 1} self-diagnosis initiations from r1, r2 within ${DEFAULT_TIMING.diagnosisWindowMs} ms (threshold ${THRESHOLD})`;
    expect(out).toContainEqual({ type: 'log', level: 'warn', event: 'cluster.reset', fields: { rule: 'diagnosis', reason } });
    expect(g.w.status(20_000).clusterResets.map((c) => c.reason)).toEqual([reason]);
  });
});

describe('watchdog-liveness stepped by hand over one WatchdogState', () => {
  const fresh = () => createWatchdogState({ id: 'scc', membership, inc: 1, ...keys });
  const resetsIn = (out: CoreEffect[]) => out.filter((e) => e.type === 'reset.cluster');

  it('rule 2: two consistent heartbeats arm it; the silence deadline passing orders one reset; only new incarnations re-arm it', () => {
    const s = fresh();
    const out: CoreEffect[] = [];
    onHeartbeat(s, 'r1', 1000, hb(10, 1), out);
    expect(s.armed).toBe(false);
    expect(consistentUntilMs(s)).toBeNull();
    expect(silenceDeadlineMs(s)).toBeNull();
    onHeartbeat(s, 'r2', 1050, hb(10, 1), out);
    expect(s.armed).toBe(true);
    expect(consistentUntilMs(s)).toBe(1000 + FRESH);
    expect(silenceDeadlineMs(s)).toBe(1000 + FRESH + SILENCE);
    checkSilence(s, 1000 + FRESH + SILENCE - 1, out);
    expect(resetsIn(out)).toEqual([]);
    checkSilence(s, 1000 + FRESH + SILENCE, out);
    expect(resetsIn(out)).toHaveLength(1);
    expect(s.armed).toBe(false);
    expect(s.clusterResetCount).toBe(1);
    expect([...s.preResetInc]).toEqual([['r1', 10], ['r2', 10]]);
    // The old group's heartbeats, still consistent, do not arm it again; the restarted group's do.
    const t = 1000 + FRESH + SILENCE + 10;
    onHeartbeat(s, 'r1', t, hb(10, 2), out);
    onHeartbeat(s, 'r2', t, hb(10, 2), out);
    expect(s.armed).toBe(false);
    onHeartbeat(s, 'r1', t + 1, hb(11, 1), out);
    onHeartbeat(s, 'r2', t + 1, hb(11, 1), out);
    expect(s.armed).toBe(true);
  });

  it('a replayed heartbeat is counted and refreshes nothing', () => {
    const s = fresh();
    const out: CoreEffect[] = [];
    onHeartbeat(s, 'r1', 1000, hb(10, 2), out);
    onHeartbeat(s, 'r1', 1100, hb(10, 2), out);
    onHeartbeat(s, 'r1', 1200, hb(9, 5), out);
    expect(s.records.get('r1')?.lastAtMs).toBe(1000);
    expect(s.replays.get('r1')).toBe(2);
    expect(s.drops).toEqual({ REPLAYED: 2 });
  });

  it('a stall: armed, an input more than WATCHDOG_STALL_PERIODS periods after the last holds the deadline for FRESH', () => {
    const s = fresh();
    const out: CoreEffect[] = [];
    noteInput(s, 0, out);
    onHeartbeat(s, 'r1', 0, hb(10, 1), out);
    onHeartbeat(s, 'r2', 0, hb(10, 1), out);
    noteInput(s, WATCHDOG_STALL_PERIODS * PERIOD, out); // exactly the limit: no stall
    expect(s.stallGraceUntilMs).toBe(-Infinity);
    const late = 2 * WATCHDOG_STALL_PERIODS * PERIOD + 1;
    noteInput(s, late, out);
    expect(s.stallGraceUntilMs).toBe(late + FRESH);
    expect(silenceDeadlineMs(s)).toBe(Math.max(FRESH + SILENCE, late + FRESH));
    expect(out.filter((e) => e.type === 'log' && e.event === 'watchdog.stalled')).toHaveLength(1);
  });

  it('rule 3: one replica\'s share is capped at floor(threshold / 2) + 1; a second replica tips it over', () => {
    const timing = { ...DEFAULT_TIMING, diagnosisThreshold: 2, diagnosisTimeoutMs: 10, diagnosisWindowMs: 1000 };
    const s = createWatchdogState({ id: 'scc', membership: { ...membership, timing }, inc: 1, ...keys });
    const out: CoreEffect[] = [];
    const report = (from: string, nowMs: number, counter: number) =>
      onDiagReport(s, from, nowMs, { type: 'diag.report', inc: 10, counter, view: 0, reason: 'silent', target: 'r3' }, out);
    expect(s.perSenderCap).toBe(2);
    report('r1', 0, 1);
    report('r1', 5, 2); // within diagnosisTimeoutMs: recorded, not counted
    report('r1', 10, 3);
    report('r1', 20, 4);
    expect(s.counted).toHaveLength(3);
    expect(tally(s, 20)).toEqual({ total: 2, senders: ['r1'] });
    expect(resetsIn(out)).toEqual([]);
    report('r2', 30, 1);
    expect(resetsIn(out)).toHaveLength(1);
    expect(s.counted).toEqual([]); // a reset starts the count again
    expect(tally(s, 1000).total).toBe(0);
  });
});
