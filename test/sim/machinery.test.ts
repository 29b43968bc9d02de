// The simulator's own machinery — random source, scheduler, network faults, crashes, the
// admission check — tested with a tiny stand-in core, so a failure here is the simulator's
// fault and never the protocol's.
import { describe, expect, it } from 'vitest';
import { SeededRandom, streamFor } from '../../src/sim/random.ts';
import { Scheduler } from '../../src/sim/scheduler.ts';
import { corruptFrame, NO_NETWORK_FAULTS, type NetworkFaults } from '../../src/sim/network.ts';
import { InvariantChecker } from '../../src/sim/invariants.ts';
import { World, INCARNATION_BASE } from '../../src/sim/world.ts';
import { fakeCores } from './helpers/fake-core.ts';

const HOSTILE: NetworkFaults = { loss: 0.2, duplicate: 0.2, corrupt: 0.3, spike: 0.2, spikeMaxMs: 30 };

function fakeWorld(seed: number, faults: NetworkFaults = NO_NETWORK_FAULTS, trace = false, before?: (w: World) => void): World {
  const w = new World({ seed, agents: 2, cores: fakeCores, networkFaults: faults, trace });
  w.network.setFaultWindow(true);
  before?.(w);
  w.start();
  return w;
}

describe('SeededRandom', () => {
  it('replays the same sequence for the same seed and stream, and another for another', () => {
    const a = new SeededRandom(42);
    const b = new SeededRandom(42);
    const xs = Array.from({ length: 100 }, () => a.u32());
    expect(Array.from({ length: 100 }, () => b.u32())).toEqual(xs);
    expect(Array.from({ length: 100 }, () => new SeededRandom(43).u32())).not.toEqual(xs);
    expect(streamFor(7, 'network').u32()).not.toBe(streamFor(7, 'workload').u32());
  });

  it('draws int(n) uniformly within [0, n)', () => {
    const r = new SeededRandom(1);
    const counts = [0, 0, 0, 0, 0, 0];
    for (let i = 0; i < 60_000; i++) counts[r.int(6)]! += 1;
    for (const c of counts) expect(c).toBeGreaterThan(9_000);
    for (const c of counts) expect(c).toBeLessThan(11_000);
    for (let i = 0; i < 1000; i++) {
      const x = r.range(3, 5);
      expect(x >= 3 && x <= 5 && Number.isInteger(x)).toBe(true);
      const f = r.next();
      expect(f >= 0 && f < 1).toBe(true);
    }
  });
});

describe('Scheduler', () => {
  it('runs events in time order, and same-time events in the order they were scheduled', () => {
    const s = new Scheduler();
    const seen: string[] = [];
    s.at(5, () => seen.push('b5'));
    s.at(1, () => seen.push('a1'));
    s.at(5, () => seen.push('c5'));
    s.at(3, () => {
      seen.push('x3');
      s.after(0, () => seen.push('y3'));
      s.at(0, () => seen.push('z-past')); // never in the past: runs now, after what is queued
    });
    s.runUntil(10);
    expect(seen).toEqual(['a1', 'x3', 'y3', 'z-past', 'b5', 'c5']);
    expect(s.nowMs).toBe(10);
  });

  it('stops early when asked and leaves later events queued', () => {
    const s = new Scheduler();
    let n = 0;
    for (let t = 1; t <= 10; t++) s.at(t, () => n++);
    expect(s.runUntil(100, () => n === 4)).toBe('stopped');
    expect(s.nowMs).toBe(4);
    expect(s.pending).toBe(6);
  });
});

describe('simulated network', () => {
  it('without faults delivers every frame once and every notice in order', () => {
    const w = fakeWorld(1);
    w.scheduler.at(5, () => w.notice('r1', 'a1', 'one'));
    w.scheduler.at(6, () => w.notice('r1', 'a1', 'two'));
    w.runUntil(100);
    const n = w.network.stats;
    expect(n.sent).toBeGreaterThan(0);
    // Everything sent was delivered, except what is still in flight at the end.
    expect(n.delivered).toBe(n.sent - w.scheduler.pending + w.agentIds.length + w.replicaIds.length);
    expect(n.lost + n.duplicated + n.corrupted + n.partitioned + n.undeliverable).toBe(0);
    expect(w.checker.missing(10)).toEqual([]);
    expect(w.checker.violations).toEqual([]);
  });

  it('under hostile faults loses, duplicates and corrupts frames, yet admits none that was altered', () => {
    const w = fakeWorld(2, HOSTILE);
    w.runUntil(500);
    const n = w.network.stats;
    expect(n.lost).toBeGreaterThan(0);
    expect(n.duplicated).toBeGreaterThan(0);
    expect(n.corruptions.flip).toBeGreaterThan(0);
    expect(n.corruptions['flip-recrc']).toBeGreaterThan(0);
    expect(n.corruptions.truncate).toBeGreaterThan(0);
    // Every corrupted delivery shows up as a typed drop at the receiving shell.
    let drops = 0;
    for (const id of [...w.replicaIds, ...w.agentIds]) {
      for (const c of Object.values(w.shell(id)?.counters.drops ?? {})) drops += c;
    }
    expect(drops).toBe(n.corruptions.flip + n.corruptions['flip-recrc'] + n.corruptions.truncate);
    expect(w.checker.violations).toEqual([]);
  });

  it('a notice lost in the fault window is reported missing by the liveness check (the fake core never retransmits)', () => {
    const w = fakeWorld(3, { ...NO_NETWORK_FAULTS, loss: 1 });
    w.scheduler.at(5, () => w.notice('a1', 'r2', 'lost'));
    w.runUntil(50);
    expect(w.checker.missing(1)).toEqual(['1 notice(s) a1→r2 never delivered ("lost" first)']);
  });

  it('cuts a partitioned process off in both directions, only during the partition', () => {
    const w = fakeWorld(4, NO_NETWORK_FAULTS, true, (x) => x.network.addPartition({ fromMs: 0, untilMs: 50, isolated: ['a2'] }));
    w.runUntil(100);
    const accepted = w.trace.filter((t) => t.type === 'accepted');
    const crossing = (t: (typeof accepted)[number]) => t.type === 'accepted' && (t.at === 'a2') !== (t.frame.from === 'a2');
    expect(accepted.filter((t) => crossing(t) && t.atMs < 50)).toEqual([]);
    expect(accepted.filter((t) => crossing(t) && t.atMs > 50).length).toBeGreaterThan(0);
    expect(w.network.stats.partitioned).toBeGreaterThan(0);
  });

  it('a crashed process neither sends nor receives; a restart brings a fresh core with a higher incarnation', () => {
    const w = fakeWorld(5, NO_NETWORK_FAULTS, true);
    w.runUntil(20);
    const firstInc = w.shell('a1')?.core !== undefined ? INCARNATION_BASE : -1;
    w.crash('a1');
    expect(w.isUp('a1')).toBe(false);
    w.runUntil(60);
    const during = w.trace.filter((t) => t.atMs > 20 && t.atMs <= 60 && ((t.type === 'out' && t.from === 'a1') || (t.type === 'accepted' && t.at === 'a1')));
    expect(during).toEqual([]);
    w.restart('a1');
    w.runUntil(100);
    expect(w.isUp('a1')).toBe(true);
    const hbs = w.trace.filter((t) => t.type === 'out' && t.from === 'a1' && t.atMs > 60).flatMap((t) => (t.type === 'out' ? t.items : []));
    const incs = hbs.flatMap((i) => (i.type === 'hb' ? [i.inc] : []));
    expect(incs.length).toBeGreaterThan(0);
    for (const inc of incs) expect(inc).toBeGreaterThan(firstInc);
  });

  it('a hung process takes nothing while hung, then gets what arrived, in order, keeping its state', () => {
    const w = fakeWorld(7, NO_NETWORK_FAULTS, true);
    w.runUntil(20);
    w.hang('r2', 60);
    w.scheduler.at(30, () => w.notice('a1', 'r2', 'first'));
    w.scheduler.at(31, () => w.notice('a1', 'r2', 'second'));
    w.runUntil(100);
    const atR2 = w.trace.filter((t) => t.type === 'accepted' && t.at === 'r2');
    expect(atR2.filter((t) => t.atMs > 20 && t.atMs < 60)).toEqual([]);
    const notices = w.effects((e, at) => at === 'r2' && e.type === 'deliver.notice');
    expect(notices.map((n) => [n.atMs, n.effect.type === 'deliver.notice' ? n.effect.text : ''])).toEqual([[60, 'first'], [60, 'second']]);
    expect(w.trace.some((t) => t.type === 'out' && t.from === 'r2' && t.atMs > 20 && t.atMs < 60)).toBe(false);
    expect(w.checker.violations).toEqual([]);
  });

  it('gives each process its own clock: simulated time plus its offset, never going backwards', () => {
    const seen = new Map<string, { simMs: number; nowMs: number }[]>();
    let world: World | null = null;
    const w = new World({
      seed: 8, agents: 2, cores: fakeCores, clockOffsetMs: (id) => (id === 'a2' ? 5_000.5 : id === 'r1' ? 123 : 0),
      wrapCore: (id, core) => ({
        id, nextWakeMs: () => core.nextWakeMs(),
        step: (input) => {
          let list = seen.get(id);
          if (list === undefined) seen.set(id, (list = []));
          list.push({ simMs: (world as World).now, nowMs: input.nowMs });
          return core.step(input);
        },
      }),
    });
    world = w;
    w.start();
    w.runUntil(200);
    for (const [id, offset] of [['a2', 5_000.5], ['r1', 123], ['r3', 0]] as const) {
      const list = seen.get(id) ?? [];
      expect(list.length).toBeGreaterThan(10);
      for (let i = 0; i < list.length; i++) {
        const x = list[i] as { simMs: number; nowMs: number };
        expect(Math.abs(x.nowMs - (x.simMs + offset))).toBeLessThan(1e-6);
        if (i > 0) expect(x.nowMs).toBeGreaterThanOrEqual((list[i - 1] as { nowMs: number }).nowMs);
      }
    }
  });

  it('replays a seed exactly: the same frames at the same times', () => {
    const run = () => {
      const w = fakeWorld(6, HOSTILE, true);
      w.runUntil(300);
      return w.trace.map((t) => `${t.atMs}:${t.type}:${t.type === 'delivered' ? Buffer.from(t.frame.bytes).toString('hex') : ''}`).join('\n');
    };
    const a = run();
    expect(a.length).toBeGreaterThan(1000);
    expect(run()).toBe(a);
  });

  it('never produces a corrupted copy equal to the original', () => {
    const r = new SeededRandom(9);
    const frame = r.bytes(200);
    for (let i = 0; i < 2000; i++) {
      for (const kind of ['flip', 'flip-recrc', 'truncate'] as const) {
        expect(Buffer.from(corruptFrame(frame, kind, r)).equals(Buffer.from(frame))).toBe(false);
      }
    }
  });
});

describe('admission check (invariant c)', () => {
  it('flags a frame a shell accepted that the claimed sender never emitted', () => {
    const c = new InvariantChecker(77);
    c.addProcess('r1', 'replica');
    c.addProcess('a1', 'agent');
    const emitted = new Uint8Array(100).fill(7);
    c.onFrameOut('r1', emitted, []);
    c.onAccepted('a1', emitted, { from: 'r1', to: 'a1', items: [] });
    expect(c.violations).toEqual([]);
    const forged = emitted.slice();
    forged[3] = 8;
    c.onAccepted('a1', forged, { from: 'r1', to: 'a1', items: [] });
    expect(c.violations).toHaveLength(1);
    expect(c.violations[0]).toMatchObject({ seed: 77, invariant: 'c.admission' });
  });
});
