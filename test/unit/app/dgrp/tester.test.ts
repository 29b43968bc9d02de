// One process's DGRP tests (src/app/dgrp/tester.ts, probe-wire.ts; docs/PROTOCOL.md §12.2; spec
// mpichv-dgrp 2.2.1–2.2.5, 2.6) under a fake clock: testers and tested processes exchange real
// datagrams (encoded, MACed) through an in-memory network whose delay per process the test sets.
// Every assertion is what the group would receive (the reports) or a peer would see.
import { describe, expect, it } from 'vitest';
import { PRIMES_TEST } from '../../../../src/app/dgrp/challenge.ts';
import { decodeProbe, encodeProbe } from '../../../../src/app/dgrp/probe-wire.ts';
import { DGRP_FAILS_TO_ACCUSE, DGRP_WARMUP_TESTS, DgrpTester } from '../../../../src/app/dgrp/tester.ts';
import type { DgrpOptions, DgrpReport, DgrpView } from '../../../../src/core/wire/dgrp.ts';

const KEY = new Uint8Array(32).fill(3);
const OPTIONS: DgrpOptions = { intervalMs: 100, zeta: 3, factorPercent: 250, marginMs: 2, initialThresholdMs: 8000 };

/** N processes, each a DgrpTester; datagrams take `delay[vpid]` ms to reach or leave `vpid`. */
class Net {
  now = 0;
  readonly testers: DgrpTester[] = [];
  readonly reports: { from: number; report: DgrpReport }[] = [];
  readonly delay: number[];
  readonly heldUp = new Set<number>();
  private queue: { at: number; run: () => void }[] = [];
  private seed = 1;
  constructor(n: number) {
    this.delay = Array.from({ length: n }, () => 1);
    for (let v = 0; v < n; v++) {
      this.testers.push(new DgrpTester(v, KEY, OPTIONS, PRIMES_TEST, {
        now: () => this.now,
        heldUp: () => this.heldUp.has(v),
        random: () => (this.seed = (this.seed * 1103515245 + 12345) >>> 0),
        report: (report) => this.reports.push({ from: v, report }),
        later: (ms, fn) => this.queue.push({ at: this.now + ms, run: fn }),
        send: (endpoint, bytes) => {
          const to = Number(endpoint.split(':')[1]) - 9000;
          this.queue.push({ at: this.now + (this.delay[v] ?? 0) + (this.delay[to] ?? 0), run: () => this.testers[to]?.onDatagram(bytes) });
        },
      }));
    }
    this.view(Array.from({ length: n }, () => 0));
  }
  view(counters: number[]): void {
    const v: DgrpView = { view: 1, released: 0, entries: counters.map((counter, vpid) => ({ vpid, counter, endpoint: `127.0.0.1:${9000 + vpid}` })) };
    for (const t of this.testers) t.onView(v);
  }
  /** Run `intervals` testing intervals: each ticks every tester, then delivers in time order. */
  run(intervals: number): void {
    for (let i = 0; i < intervals; i++) {
      for (const t of this.testers) t.tick();
      const end = this.now + OPTIONS.intervalMs;
      for (;;) {
        this.queue.sort((a, b) => a.at - b.at);
        const next = this.queue[0];
        if (next === undefined || next.at >= end) break;
        this.queue.shift();
        this.now = Math.max(this.now, next.at);
        next.run();
      }
      this.now = end;
    }
  }
  reportsAbout(vpid: number): { from: number; pass: boolean; passes: number }[] {
    return this.reports.flatMap((r) => r.report.verdicts.filter((v) => v.vpid === vpid).map((v) => ({ from: r.from, pass: v.pass, passes: v.passes })));
  }
}

describe('PROTOCOL §12.2: tests and reports', () => {
  it('spec 2.6 "slow-process removal": every member fails a process whose replies turn slow; nothing is reported while all are fast', () => {
    const net = new Net(4);
    net.run(DGRP_WARMUP_TESTS + 10);
    expect(net.reports).toEqual([]);
    net.delay[3] = 40;
    net.run(1 + DGRP_FAILS_TO_ACCUSE);
    expect(new Set(net.reportsAbout(3).filter((v) => !v.pass).map((v) => v.from))).toEqual(new Set([0, 1, 2]));
    // The slow one sees everyone slow (its own delay is on every reply): one accuser each, not
    // enough to remove anyone (§12.3).
    expect(new Set(net.reportsAbout(0).map((v) => v.from))).toEqual(new Set([3]));
  });

  it('spec 2.2.1: a process that does not answer at all (crashed, partitioned) is failed after one interval', () => {
    const net = new Net(3);
    net.run(DGRP_WARMUP_TESTS + 5);
    net.delay[2] = 10_000;
    net.run(1 + DGRP_FAILS_TO_ACCUSE);
    expect(net.reportsAbout(2).filter((v) => !v.pass).map((v) => v.from).sort()).toEqual([0, 1]);
  });

  it('an accusation is withdrawn by an empty report once the process is fast again (§12.3: accusations are current)', () => {
    const net = new Net(3);
    net.run(DGRP_WARMUP_TESTS + 8);
    net.delay[2] = 40;
    net.run(DGRP_FAILS_TO_ACCUSE);
    net.delay[2] = 1;
    const before = net.reports.length;
    net.run(3);
    // A report closes each interval at the next tick: the slow interval's accusation, then the
    // empty report that withdraws it, then silence.
    const after = net.reports.slice(before).filter((r) => r.from === 0);
    expect(after.map((r) => r.report.verdicts.length)).toEqual([1, 0]);
  });

  it('spec 2.2.5: a non-member is counted, pass by pass, against the threshold it left with; a slow reply resets its count', () => {
    const net = new Net(3);
    net.run(DGRP_WARMUP_TESTS + 8);
    net.view([0, 0, 1]);
    net.run(3);
    expect(net.reportsAbout(2).filter((v) => v.from === 0).map((v) => v.passes)).toEqual([1, 2, 3]);
    net.delay[2] = 40;
    net.run(2);
    expect(net.reportsAbout(2).filter((v) => v.from === 0).at(-1)).toEqual({ from: 0, pass: false, passes: 0 });
    // Its slow replies did not teach the estimator: once fast again, it passes from 1.
    net.delay[2] = 1;
    net.run(2);
    expect(net.reportsAbout(2).filter((v) => v.from === 0).at(-1)).toEqual({ from: 0, pass: true, passes: 1 });
  });

  it('a non-member does not test (spec 2.2.3) but answers, and a tester held up judges nothing it measured across the gap', () => {
    const net = new Net(3);
    net.view([0, 0, 1]);
    net.run(DGRP_WARMUP_TESTS + 6);
    expect(net.reports.some((r) => r.from === 2)).toBe(false);
    net.heldUp.add(0);
    net.delay[1] = 40;
    net.run(2);
    expect(net.reports.filter((r) => r.from === 0).flatMap((r) => r.report.verdicts).filter((v) => v.vpid === 1)).toEqual([]);
    expect(net.testers[0]?.stats.abstained).toBeGreaterThan(0);
  });

  it('one late reply is not reported: a member is named after DGRP_FAILS_TO_ACCUSE failed tests in a row', () => {
    const net = new Net(3);
    net.run(DGRP_WARMUP_TESTS + 8);
    net.delay[2] = 40;
    net.run(1);
    net.delay[2] = 1;
    net.run(4);
    expect(net.reports).toEqual([]);
  });

  it('the first DGRP_WARMUP_TESTS tests of a process are not judged: a slow start condemns no one', () => {
    const net = new Net(3);
    net.delay[1] = 60;
    net.run(DGRP_WARMUP_TESTS);
    expect(net.reports).toEqual([]);
  });
});

describe('PROTOCOL §12.2: probe datagrams', () => {
  const probe = { kind: 'challenge' as const, tester: 1, tested: 2, seq: 7, body: Uint8Array.of(1, 2, 3) };
  it('round-trip, and any forged, truncated or foreign datagram is refused with a typed reason', () => {
    const bytes = encodeProbe(KEY, probe);
    expect(decodeProbe(KEY, bytes)).toEqual({ ok: true, probe });
    expect(decodeProbe(new Uint8Array(32).fill(4), bytes)).toEqual({ ok: false, reason: 'BAD_MAC' });
    const flipped = Uint8Array.from(bytes);
    flipped[13] = (flipped[13] ?? 0) ^ 1; // another sequence: the MAC no longer matches
    expect(decodeProbe(KEY, flipped)).toEqual({ ok: false, reason: 'BAD_MAC' });
    expect(decodeProbe(KEY, bytes.subarray(0, 10))).toEqual({ ok: false, reason: 'SHORT' });
    expect(decodeProbe(KEY, bytes.subarray(0, bytes.length - 1))).toEqual({ ok: false, reason: 'BAD_LENGTH' });
    const wrongKind = Uint8Array.from(bytes);
    wrongKind[3] = 9;
    expect(decodeProbe(KEY, wrongKind)).toEqual({ ok: false, reason: 'BAD_KIND' });
    expect(decodeProbe(KEY, new Uint8Array(64))).toEqual({ ok: false, reason: 'BAD_MAGIC' });
  });

  it('a tester drops replies that do not answer its test in flight (replayed, for another tester, wrong answer counts as a fail)', () => {
    const net = new Net(2);
    net.run(DGRP_WARMUP_TESTS + 2);
    const t0 = net.testers[0] as DgrpTester;
    const replay = encodeProbe(KEY, { kind: 'reply', tester: 0, tested: 1, seq: 1, body: new Uint8Array(8) });
    t0.onDatagram(replay);
    expect(t0.stats.refused.STALE).toBeGreaterThan(0);
  });
});
