// One process's side of the DGRP's tests (docs/PROTOCOL.md §12.2; spec 2.2.1–2.2.5): as a
// tester, every testing interval it challenges every other live process of its task and judges
// each reply with that process's adaptive threshold (estimator.ts, Algorithm 1); at the end of
// the interval it reports to the group what the group must know; as a tested process it answers
// every challenge. The clock, the datagrams out and the reports out are the caller's
// (tester-worker.ts), so this runs the same under a test's fake clock.
//
// - Only a member of the group tests (spec 2.2.3: a non-member's information is ignored anyway);
//   everyone answers.
// - Each test leaves at a random moment of the interval's first half (no aliasing with a
//   periodic load) and waits until the next tick: a reply that has not come by then is a miss
//   (spec 2.2.1's separate timeout). A reply past the threshold fails (the estimator's verdict).
// - The report of an interval names each member that failed its last DGRP_FAILS_TO_ACCUSE
//   tests, and each non-member tested, with
//   this tester's count of its consecutive passes (its rejoin vote, spec 2.2.5). A member it does
//   not name passed. An interval with nothing to name sends nothing, unless the last report
//   named something: then an empty report withdraws it (§12.3: accusations are current ones).
// - A process outside the group is judged against the threshold it had when it left, without
//   feeding its replies to the estimator (§12.2).
// - A tester that was itself held up (stopped, starved: its own clock jumped, `noteLag`) judges
//   nothing it measured across that gap: a slow tester must not see its peers as slow.
import type { DgrpEntry, DgrpOptions, DgrpReport, DgrpVerdict, DgrpView } from '../../core/wire/dgrp.ts';
import type { DgrpTest } from './challenge.ts';
import { ReplyEstimator } from './estimator.ts';
import { decodeProbe, encodeProbe, type ProbeRefusal } from './probe-wire.ts';

/** Algorithm 1's weights (spec 2.2.2: "approximations of the original values proposed by Jacobson"). */
export const DGRP_ALPHA = 0.9;
export const DGRP_BETA = 4;
/** Failed tests in a row before a tester reports a member (a departure: the paper reports one
 *  failure, spec 2.2.4). On a node whose load average is three times its cores, a correct
 *  process's reply was sometimes late once; two members each seeing it late once at the same time
 *  removed it (docs/PERFORMANCE.md §10). A process slow for real fails again at once. */
export const DGRP_FAILS_TO_ACCUSE = 2;
/** Tests of a process that are neither judged nor fed to its estimator: the first replies come
 *  while the task's processes still load (tens of ms on a busy node), and one such sample would
 *  hold the threshold up for dozens of intervals (α = 0.9 forgets 10 % a sample). */
export const DGRP_WARMUP_TESTS = 3;

export type TesterIo = {
  now(): number;
  /** A datagram to the tester thread of the process listening at `endpoint` (`host:port`). */
  send(endpoint: string, datagram: Uint8Array): void;
  report(r: DgrpReport): void;
  random(): number;
  /** Run `fn` after `ms` (each test leaves at a random moment of the interval's first half). */
  later(ms: number, fn: () => void): void;
  /** Whether this thread is being held up right now: its loop probe is overdue (an I/O event
   *  can run before the overdue timer that would have called noteLag). */
  heldUp(): boolean;
  /** Each judged test, for TRINE_DGRP_TRACE=1 (docs/OPERATIONS.md). */
  trace?: (line: string) => void;
};

type Tested = {
  estimator: ReplyEstimator;
  /** Consecutive passes while it is outside the group (spec 2.2.5). */
  passes: number;
  /** The test in flight: its sequence, start and challenge. */
  inFlight: { seq: number; startMs: number; challenge: Uint8Array } | null;
  /** This interval's verdict; null: none (not tested, or judged across a gap of ours). */
  verdict: boolean | null;
  /** Tests sent to it: the first DGRP_WARMUP_TESTS are not judged. */
  sent: number;
  /** Its failed tests in a row (DGRP_FAILS_TO_ACCUSE). */
  failsInRow: number;
};

export type TesterStats = {
  tests: number; fails: number; abstained: number; reports: number; refused: Partial<Record<ProbeRefusal | 'STALE', number>>;
  /** Per tested VPID: its threshold now and the slowest reply it judged, ms. */
  thresholds: Record<number, { thresholdMs: number; slowestMs: number }>;
};

export class DgrpTester {
  private entries: DgrpEntry[] = [];
  private readonly tested = new Map<number, Tested>();
  private seq = 0;
  private round = 0;
  private lastNamed = false;
  /** The last time our own clock jumped (noteLag); tests begun before it are not judged. */
  private laggedAtMs = -Infinity;
  readonly stats: TesterStats = { tests: 0, fails: 0, abstained: 0, reports: 0, refused: {}, thresholds: {} };

  constructor(
    private readonly self: number,
    private readonly key: Uint8Array,
    private readonly options: DgrpOptions,
    private readonly test: DgrpTest,
    private readonly io: TesterIo,
  ) {}

  /** A view from the group (§12.4): who is live, who is a member. */
  onView(v: DgrpView): void {
    this.entries = v.entries.map((e) => ({ ...e }));
    for (const vpid of [...this.tested.keys()]) if (!this.entries.some((e) => e.vpid === vpid)) this.tested.delete(vpid);
    for (const e of this.entries) {
      const t = this.tested.get(e.vpid);
      // Its state changed since it was last judged: its rejoin count starts again.
      if (t !== undefined && e.counter % 2 === 0) t.passes = 0;
    }
  }

  get isMember(): boolean {
    return this.entries.some((e) => e.vpid === this.self && e.counter % 2 === 0);
  }

  /** Our own clock jumped by more than it should (tester-worker.ts measures it). */
  noteLag(): void {
    this.laggedAtMs = this.io.now();
  }

  /** The end of one testing interval and the start of the next. */
  tick(): void {
    this.closeRound();
    if (!this.isMember) return;
    this.round++;
    const round = this.round;
    for (const e of this.entries) {
      if (e.vpid === this.self || e.endpoint === '') continue;
      // A random moment: tests in step with a periodic load (a duty cycle, a periodic job) would
      // see the same phase of it every time, and a slowly drifting delay the estimator follows.
      this.io.later(this.io.random() % Math.max(1, Math.floor(this.options.intervalMs / 2)), () => {
        if (this.round === round && this.isMember) this.challenge(e.vpid, e.endpoint);
      });
    }
  }

  private challenge(vpid: number, endpoint: string): void {
    const t = this.entry(vpid);
    const challenge = this.test.challenge(this.io.random);
    this.seq = (this.seq + 1) >>> 0;
    t.inFlight = { seq: this.seq, startMs: this.io.now(), challenge };
    t.sent++;
    this.stats.tests++;
    this.io.send(endpoint, encodeProbe(this.key, { kind: 'challenge', tester: this.self, tested: vpid, seq: this.seq, body: challenge }));
  }

  /** A datagram from another process's tester thread. */
  onDatagram(bytes: Uint8Array): void {
    const d = decodeProbe(this.key, bytes);
    if (!d.ok) return this.refuse(d.reason);
    const p = d.probe;
    if (p.kind === 'challenge') {
      if (p.tested !== this.self) return this.refuse('STALE');
      const endpoint = this.entries.find((e) => e.vpid === p.tester)?.endpoint;
      if (endpoint === undefined || endpoint === '') return this.refuse('STALE');
      const answer = this.test.answer(p.body);
      this.io.send(endpoint, encodeProbe(this.key, { kind: 'reply', tester: p.tester, tested: this.self, seq: p.seq, body: answer }));
      return;
    }
    const t = this.tested.get(p.tested);
    const f = t?.inFlight;
    if (t === undefined || f === undefined || f === null || p.tester !== this.self || p.seq !== f.seq) return this.refuse('STALE');
    t.inFlight = null;
    if (this.io.heldUp() || this.laggedAtMs >= f.startMs || t.sent <= DGRP_WARMUP_TESTS) {
      this.stats.abstained++;
      return;
    }
    const ms = this.io.now() - f.startMs;
    // A process outside the group is judged against the threshold it left with: it must prove
    // itself as fast as it was, not as fast as its own slow self (its replies teach nothing).
    const member = this.entries.some((e) => e.vpid === p.tested && e.counter % 2 === 0);
    const correct = this.test.check(f.challenge, p.body);
    t.verdict = !correct ? t.estimator.miss().pass : member ? t.estimator.observe(ms).pass : ms <= t.estimator.thresholdMs;
    this.io.trace?.(`dgrp test ${this.self}->${p.tested} ${ms.toFixed(2)} ms vs ${t.estimator.thresholdMs.toFixed(2)}: ${t.verdict ? 'pass' : 'fail'}`);
    const was = this.stats.thresholds[p.tested];
    this.stats.thresholds[p.tested] = { thresholdMs: t.estimator.thresholdMs, slowestMs: Math.max(was?.slowestMs ?? 0, ms) };
  }

  private closeRound(): void {
    if (this.io.heldUp()) this.noteLag();
    const verdicts: DgrpVerdict[] = [];
    for (const e of this.entries) {
      const t = this.tested.get(e.vpid);
      if (t === undefined) continue;
      if (t.inFlight !== null) {
        // No reply within the interval: a miss, unless we were the ones held up.
        if (this.laggedAtMs >= t.inFlight.startMs || t.sent <= DGRP_WARMUP_TESTS) this.stats.abstained++;
        else {
          t.verdict = t.estimator.miss().pass;
          this.io.trace?.(`dgrp test ${this.self}->${e.vpid} no reply within the interval: fail`);
        }
        t.inFlight = null;
      }
      const v = t.verdict;
      t.verdict = null;
      if (v === false) this.stats.fails++;
      if (v !== null) t.failsInRow = v ? 0 : t.failsInRow + 1;
      if (e.counter % 2 === 0) {
        if (t.failsInRow >= DGRP_FAILS_TO_ACCUSE) verdicts.push({ vpid: e.vpid, pass: false, passes: 0 });
      } else if (v !== null) {
        t.passes = v ? t.passes + 1 : 0;
        verdicts.push({ vpid: e.vpid, pass: v, passes: t.passes });
      }
    }
    if (this.round === 0 || !this.isMember || (verdicts.length === 0 && !this.lastNamed)) return;
    this.lastNamed = verdicts.length > 0;
    this.stats.reports++;
    this.io.report({ round: this.round, verdicts });
  }

  private entry(vpid: number): Tested {
    let t = this.tested.get(vpid);
    if (t === undefined) {
      const o = this.options;
      t = {
        estimator: new ReplyEstimator({
          alpha: DGRP_ALPHA, beta: DGRP_BETA, factor: o.factorPercent / 100, marginMs: o.marginMs, initialThresholdMs: o.initialThresholdMs,
        }),
        passes: 0, inFlight: null, verdict: null, sent: 0, failsInRow: 0,
      };
      this.tested.set(vpid, t);
    }
    return t;
  }

  private refuse(reason: ProbeRefusal | 'STALE'): void {
    this.stats.refused[reason] = (this.stats.refused[reason] ?? 0) + 1;
  }
}
