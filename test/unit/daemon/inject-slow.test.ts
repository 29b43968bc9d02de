// `trine inject slow` at the agent (src/daemon/inject-slow.ts, docs/OPERATIONS.md §7): the duty
// cycle a target runs under, stepped with fake timers against a fake host that records every
// signal, so each stop and continue is visible. What must hold: P % of every period running,
// the rest stopped, whatever the period (--period); --for ending on time however long the period; nothing left stopped when a cycle ends, whichever way it ends (heal, --for,
// the process exiting, a new slow of the same target, the agent stopping); a node's cycle
// covers its task processes except those slowed by name. And the handlers' refusals.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Item } from '../../../src/core/wire/messages.ts';
import { clusterIds, planCluster, type Cluster } from '../../../src/io/cluster-dir.ts';
import {
  DEFAULT_SLOW_PERIOD_MS, dutyCycle, MAX_SLOW_PERIOD_MS, MAX_SLOW_TARGETS, MIN_SLOW_PERIOD_MS, parseSharePercent, parseSlowForMs, parseSlowPeriodMs,
} from '../../../src/io/duty-cycle.ts';
import { installInjection } from '../../../src/daemon/inject-handlers.ts';
import type { LiveTaskProcess } from '../../../src/daemon/inject.ts';
import { SlowCycles, type SlowHost } from '../../../src/daemon/inject-slow.ts';

type Sent = { atMs: number; pid: number; signal: 'SIGSTOP' | 'SIGCONT' };

function fakeNode(procs: LiveTaskProcess[]) {
  const sent: Sent[] = [];
  const gone = new Set<number>();
  const host: SlowHost = {
    signal: (pid, signal) => {
      if (pid <= 1) throw new RangeError(`not a task process pid: ${pid}`);
      if (gone.has(pid)) return false;
      sent.push({ atMs: Date.now(), pid, signal });
      return true;
    },
    isSame: (pid) => !gone.has(pid),
    nowMs: () => Date.now(),
    log: () => {},
  };
  const tasks = { live: () => procs.filter((p) => !gone.has(p.pid)) };
  /** Pids stopped now: a SIGSTOP not followed by a SIGCONT. */
  const stoppedNow = () => {
    const s = new Set<number>();
    for (const e of sent) (e.signal === 'SIGSTOP' ? s.add(e.pid) : s.delete(e.pid));
    return [...s].sort();
  };
  return { sent, gone, cycles: new SlowCycles(tasks, host), stoppedNow };
}

const proc = (task: string, vpid: number, pid: number): LiveTaskProcess => ({ task, vpid, pid, startTime: `st${pid}` });

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('the duty cycle', () => {
  it('splits one period by the share, both phases at least 1 ms; the parsers take only in-bounds integers', () => {
    expect(dutyCycle(25)).toEqual({ runMs: 25, stopMs: 75 });
    expect(dutyCycle(1)).toEqual({ runMs: 1, stopMs: 99 });
    expect(dutyCycle(99)).toEqual({ runMs: 99, stopMs: 1 });
    expect(() => dutyCycle(0)).toThrow(RangeError);
    expect(() => dutyCycle(100)).toThrow(RangeError);
    expect([parseSharePercent('25'), parseSharePercent('0'), parseSharePercent('100'), parseSharePercent('2.5'), parseSharePercent('')]).toEqual([25, null, null, null, null]);
    expect([parseSlowForMs('100'), parseSlowForMs('99'), parseSlowForMs('3600000'), parseSlowForMs('3600001'), parseSlowForMs('5s')]).toEqual([100, null, 3600000, null, null]);
  });

  it('--period: from 20 to 10000 ms, split to the nearest ms with each phase at least 1 ms; --for at least one period', () => {
    expect([MIN_SLOW_PERIOD_MS, DEFAULT_SLOW_PERIOD_MS, MAX_SLOW_PERIOD_MS]).toEqual([20, 100, 10_000]);
    expect(dutyCycle(25, 100)).toEqual(dutyCycle(25));
    expect(dutyCycle(20, 500)).toEqual({ runMs: 100, stopMs: 400 });
    expect(dutyCycle(50, 10_000)).toEqual({ runMs: 5_000, stopMs: 5_000 });
    expect(dutyCycle(1, 20)).toEqual({ runMs: 1, stopMs: 19 }); // 0.2 ms rounds up to 1
    expect(dutyCycle(99, 20)).toEqual({ runMs: 19, stopMs: 1 });
    expect(dutyCycle(33, 30)).toEqual({ runMs: 10, stopMs: 20 });
    for (const period of [19, 10_001, 0, 99.5]) expect(() => dutyCycle(25, period)).toThrow(RangeError);
    expect(['20', '19', '10000', '10001', '500', '0', '1e3', '', '-20'].map(parseSlowPeriodMs)).toEqual([20, null, 10_000, null, 500, null, null, null, null]);
    expect([parseSlowForMs('500', 500), parseSlowForMs('499', 500), parseSlowForMs('20', 20), parseSlowForMs('9999', 10_000), parseSlowForMs('3600000', 10_000)])
      .toEqual([500, null, 20, null, 3_600_000]);
    expect(() => parseSlowForMs('1000', 10_001)).toThrow(RangeError);
  });

  it('a process at 20 % over a 500 ms period: runs 100 ms, is stopped 400 ms, every period', () => {
    const n = fakeNode([proc('t3', 0, 501)]);
    const started = n.cycles.start({ proc: proc('t3', 0, 501) }, 20, null, 500);
    if (typeof started === 'string') throw new Error(started);
    expect([started.cycle.runMs, started.cycle.stopMs, started.cycle.periodMs]).toEqual([100, 400, 500]);
    vi.advanceTimersByTime(2 * 500);
    expect(n.sent).toEqual([
      { atMs: 1_000_100, pid: 501, signal: 'SIGSTOP' }, { atMs: 1_000_500, pid: 501, signal: 'SIGCONT' },
      { atMs: 1_000_600, pid: 501, signal: 'SIGSTOP' }, { atMs: 1_001_000, pid: 501, signal: 'SIGCONT' },
    ]);
    vi.advanceTimersByTime(300); // inside a stop phase
    expect(n.stoppedNow()).toEqual([501]);
    n.cycles.heal('t3/0');
    expect(n.stoppedNow()).toEqual([]);
  });

  it('--for with a long period ends when it runs out, cutting the stop phase short, not a period later', () => {
    const n = fakeNode([proc('t3', 0, 501)]);
    n.cycles.start({ proc: proc('t3', 0, 501) }, 10, 12_000, MAX_SLOW_PERIOD_MS);
    vi.advanceTimersByTime(11_999);
    expect(n.stoppedNow()).toEqual([501]); // stopped since 11 000, a phase meant to last until 20 000
    vi.advanceTimersByTime(1);
    expect(n.cycles.cycles.size).toBe(0);
    expect(n.stoppedNow()).toEqual([]);
    expect(n.sent.at(-1)).toEqual({ atMs: 1_012_000, pid: 501, signal: 'SIGCONT' });
    expect(n.sent.map((e) => e.atMs - 1_000_000)).toEqual([1_000, 10_000, 11_000, 12_000]);
  });

  it('a process at 25 %: runs 25 ms, is stopped 75 ms, every period; heal continues it at once', () => {
    const n = fakeNode([proc('t3', 0, 501)]);
    const started = n.cycles.start({ proc: proc('t3', 0, 501) }, 25, null);
    if (typeof started === 'string') throw new Error(started);
    expect(n.sent).toEqual([]);
    vi.advanceTimersByTime(3 * DEFAULT_SLOW_PERIOD_MS);
    expect(n.sent).toEqual([
      { atMs: 1_000_025, pid: 501, signal: 'SIGSTOP' }, { atMs: 1_000_100, pid: 501, signal: 'SIGCONT' },
      { atMs: 1_000_125, pid: 501, signal: 'SIGSTOP' }, { atMs: 1_000_200, pid: 501, signal: 'SIGCONT' },
      { atMs: 1_000_225, pid: 501, signal: 'SIGSTOP' }, { atMs: 1_000_300, pid: 501, signal: 'SIGCONT' },
    ]);
    vi.advanceTimersByTime(40); // inside a stop phase
    expect(n.stoppedNow()).toEqual([501]);
    expect(n.cycles.heal('t3/0')).toBe(started.cycle);
    expect(n.stoppedNow()).toEqual([]);
    const count = n.sent.length;
    vi.advanceTimersByTime(10 * DEFAULT_SLOW_PERIOD_MS);
    expect(n.sent).toHaveLength(count);
    expect(n.cycles.cycles.size).toBe(0);
    expect(n.cycles.heal('t3/0')).toBeNull();
  });

  it('--for: the cycle ends by itself within a period of its end, and leaves the process running', () => {
    const n = fakeNode([proc('t3', 0, 501)]);
    n.cycles.start({ proc: proc('t3', 0, 501) }, 50, 1_000);
    vi.advanceTimersByTime(1_000 + DEFAULT_SLOW_PERIOD_MS);
    expect(n.cycles.cycles.size).toBe(0);
    expect(n.stoppedNow()).toEqual([]);
    const last = n.sent.at(-1) as Sent;
    expect(last.signal).toBe('SIGCONT');
    expect(last.atMs).toBeLessThanOrEqual(1_000_000 + 1_000 + DEFAULT_SLOW_PERIOD_MS);
    const count = n.sent.length;
    vi.advanceTimersByTime(5 * DEFAULT_SLOW_PERIOD_MS);
    expect(n.sent).toHaveLength(count);
  });

  it('a process that exits while slowed ends its cycle cleanly; a later process with its pid is never signalled', () => {
    const n = fakeNode([proc('t3', 0, 501)]);
    n.cycles.start({ proc: proc('t3', 0, 501) }, 25, null);
    vi.advanceTimersByTime(50); // stopped
    n.gone.add(501);
    vi.advanceTimersByTime(5 * DEFAULT_SLOW_PERIOD_MS);
    expect(n.cycles.cycles.size).toBe(0);
    // Only the one SIGSTOP before it exited: no SIGCONT to a pid that no longer names it.
    expect(n.sent).toEqual([{ atMs: 1_000_025, pid: 501, signal: 'SIGSTOP' }]);
  });

  it('slowing the same target again replaces its cycle (continuing it first); the agent stopping ends every cycle', () => {
    const n = fakeNode([proc('t3', 0, 501), proc('t4', 1, 502)]);
    n.cycles.start({ proc: proc('t3', 0, 501) }, 25, null);
    n.cycles.start({ proc: proc('t4', 1, 502) }, 10, null);
    vi.advanceTimersByTime(50);
    expect(n.stoppedNow()).toEqual([501, 502]);
    const again = n.cycles.start({ proc: proc('t3', 0, 501) }, 80, null);
    if (typeof again === 'string') throw new Error(again);
    expect(again.replaced?.sharePercent).toBe(25);
    expect(n.stoppedNow()).toEqual([502]);
    expect(n.cycles.cycles.size).toBe(2);
    vi.advanceTimersByTime(85);
    expect(n.stoppedNow()).toEqual([501, 502]);
    n.cycles.endAll('agent stopping');
    expect(n.stoppedNow()).toEqual([]);
    expect(n.cycles.cycles.size).toBe(0);
  });

  it("a node's cycle stops every task process of the node, new ones included, but not those slowed by name", () => {
    const procs = [proc('t3', 0, 501), proc('t3', 1, 502)];
    const n = fakeNode(procs);
    n.cycles.start({ node: 'n2' }, 50, null);
    vi.advanceTimersByTime(60);
    expect(n.stoppedNow()).toEqual([501, 502]);
    vi.advanceTimersByTime(40);
    procs.push(proc('t5', 0, 503));
    n.cycles.start({ proc: proc('t3', 1, 502) }, 90, null);
    vi.advanceTimersByTime(60);
    // 502 follows its own cycle (stopped 90..100 of its period), the node's takes 501 and 503.
    expect(n.stoppedNow()).toEqual([501, 503]);
    expect(n.cycles.heal('n2')?.sharePercent).toBe(50);
    expect(n.stoppedNow()).toEqual([]);
    vi.advanceTimersByTime(35);
    expect(n.stoppedNow()).toEqual([502]);
    n.cycles.endAll('agent stopping');
    expect(n.stoppedNow()).toEqual([]);
  });

  it('a phase that throws ends its cycle, continuing what it stopped, instead of crashing the agent', () => {
    const procs = [proc('t3', 0, 501), proc('t3', 1, 502)];
    const n = fakeNode(procs);
    n.cycles.start({ node: 'n2' }, 50, null);
    vi.advanceTimersByTime(60);
    expect(n.stoppedNow()).toEqual([501, 502]);
    vi.advanceTimersByTime(40);
    procs.push({ task: 't4', vpid: 0, pid: 1, startTime: 'st1' }); // a pid the signal refuses
    const before = n.sent.length;
    expect(() => vi.advanceTimersByTime(60)).not.toThrow();
    // 501 and 502 were stopped before the throw, and continued by the end.
    expect(n.sent.slice(before).map((e) => `${e.signal} ${e.pid}`)).toEqual(['SIGSTOP 501', 'SIGSTOP 502', 'SIGCONT 501', 'SIGCONT 502']);
    expect(n.cycles.cycles.size).toBe(0);
    expect(n.stoppedNow()).toEqual([]);
  });

  it(`at most ${MAX_SLOW_TARGETS} targets at once; slowing one of them again is still allowed`, () => {
    const procs = Array.from({ length: MAX_SLOW_TARGETS + 1 }, (_, i) => proc(`t${i + 1}`, 0, 1000 + i));
    const n = fakeNode(procs);
    for (const p of procs.slice(0, MAX_SLOW_TARGETS)) expect(typeof n.cycles.start({ proc: p }, 50, null)).toBe('object');
    expect(n.cycles.start({ proc: procs[MAX_SLOW_TARGETS] as LiveTaskProcess }, 50, null)).toBe(`${MAX_SLOW_TARGETS} targets are slowed already: heal some first`);
    expect(typeof n.cycles.start({ proc: procs[0] as LiveTaskProcess }, 20, null)).toBe('object');
    n.cycles.endAll('agent stopping');
  });
});

describe('slow and heal T as inject items', () => {
  const ids = clusterIds(4).all;
  const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
  const cluster: Cluster = {
    dir: '/nonexistent', config: planCluster({ nodes: 4, ports: clusterIds(4).listeners.map((_, i) => 7001 + i), allowInject: true }, keys), publicKeys: keys,
  };

  function ask(self: string, kind: 'agent' | 'replica', mode: string, args: string[], live: LiveTaskProcess[] = []) {
    const replies: Item[] = [];
    const injection = installInjection({
      self, kind, cluster, core: { id: self, step: () => [], nextWakeMs: () => null }, reply: (_to, item) => replies.push(item), log: () => {},
      ...(kind === 'agent' ? { tasks: { live: () => live } } : {}),
    });
    injection.intercept({ from: 'op', to: self, items: [{ type: 'inject', nonce: 1, mode, args }] }, 0);
    injection.close();
    return replies[0];
  }

  it('only an agent slows, only its own node or a task process it runs, with a share and duration in bounds', () => {
    expect(ask('r2', 'replica', 'slow', ['t3/0', '25'])).toMatchObject({ ok: false, text: "r2 is a replica, not an agent: slow and heal T go to the agent of T's node" });
    expect(ask('a2', 'agent', 'slow', ['n3', '25'])).toMatchObject({ ok: false, text: 'a2: "n3" is neither a task process (t3/0) nor this agent\'s node n2' });
    expect(ask('a2', 'agent', 'slow', ['t3/0', '25'])).toMatchObject({ ok: false, text: 'a2: no task process t3/0 runs on n2 now (it ended, or runs elsewhere: see `trine ps`)' });
    expect(ask('a2', 'agent', 'slow', ['t3/0', '100'])).toMatchObject({ ok: false, text: 'a2: slow needs a share of CPU from 1 to 99 %, got "100"' });
    expect(ask('a2', 'agent', 'slow', ['t3/0', '25', '50'])).toMatchObject({ ok: false, text: 'a2: slow got a bad duration "50" (ms, at least the period, 100)' });
  });

  it('a period as a fourth argument (FOR empty when none): in bounds, and --for at least one of it', () => {
    for (const period of ['19', '10001', 'x', '']) {
      expect(ask('a2', 'agent', 'slow', ['n2', '25', '', period])).toMatchObject({ ok: false, text: `a2: slow got a bad period ${JSON.stringify(period)} (ms, 20 to 10000)` });
    }
    expect(ask('a2', 'agent', 'slow', ['n2', '25', '400', '500'])).toMatchObject({ ok: false, text: 'a2: slow got a bad duration "400" (ms, at least the period, 500)' });
    expect(ask('a2', 'agent', 'slow', ['n2', '25', '', '500', 'x'])).toMatchObject({ ok: false, text: 'a2: slow takes T, P, and at most FOR and PERIOD, got 5 arguments' });
    expect(ask('a2', 'agent', 'slow', ['n2', '20', '', '500'])).toMatchObject({
      ok: true, text: 'every task process of n2 (0 now, and any it starts) runs at 20 % CPU (stopped 400 ms of every 500) until `trine inject heal n2`',
    });
    expect(ask('a2', 'agent', 'slow', ['t3/0', '5', '60000', '10000'], [proc('t3', 0, 501)])).toMatchObject({
      ok: true, text: 't3/0 (pid 501 on n2) runs at 5 % CPU (stopped 9500 ms of every 10000) for 60000 ms, or until `trine inject heal t3/0`',
    });
  });

  it('heal T with nothing slowed says so; heal A B still reaches the link faults', () => {
    expect(ask('a2', 'agent', 'heal', ['t3/0'])).toMatchObject({ ok: true, text: 't3/0 healed on n2 (was: not slowed)' });
    expect(ask('a2', 'agent', 'heal', ['a2'])).toMatchObject({ ok: true, text: 'n2 healed on n2 (was: not slowed)' });
    expect(ask('r2', 'replica', 'heal', ['r2', 'scc'])).toMatchObject({ ok: true, text: 'r2 → scc healed at r2 (was: none)' });
  });

  it('a node with no task process yet can be slowed: its cycle takes them as they start', () => {
    expect(ask('a2', 'agent', 'slow', ['n2', '25', '1000'])).toMatchObject({
      ok: true, text: 'every task process of n2 (0 now, and any it starts) runs at 25 % CPU (stopped 75 ms of every 100) for 1000 ms, or until `trine inject heal n2`',
    });
  });
});
