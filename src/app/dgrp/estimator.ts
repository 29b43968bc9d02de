// The adaptive recommendation threshold of one tester for one tested process: DGRP's Algorithm 1
// (spec 2.2.2, mpichv-dgrp.md PAPER 2), a TCP/Jacobson-style estimator of the reply time of the
// test. This file owns the arithmetic and the pass/fail verdict of a single test; who tests whom,
// when, and what a verdict does to the syndrome are the caller's. Pure: the caller measures the
// test time (its clock, not ours) and passes it in.
//
// Algorithm 1, as printed (α = 0.9, β = 4):
//   mean      ← α·mean + (1−α)·test_time
//   variance  ← α·variance + (1−α)·|mean − test_time|     (the mean just updated, as printed)
//   timeout   ← mean + β·variance
//   threshold ← timeout + getFactor()
// and a test passes when the reply is correct and test_time ≤ the threshold in force.
//
// Departures from the paper (docs/PROTOCOL.md copies this list):
//   (a) First sample. The paper starts mean = variance = 0, so one sample t would leave
//       mean = 0.1·t, variance = 0.09·t and a timeout of ~0.46·t: the next reply of the same
//       length would fail. As RFC 6298 (§2.2) does for SRTT/RTTVAR, the first sample sets
//       mean = t and variance = t/2. Before any sample the threshold is initialThresholdMs
//       (paper: 8 s), as the paper's experiments start.
//   (b) A failing sample does not update the estimator. Otherwise a process that turns slow
//       drags the threshold up to its own slowness and soon "passes" while still slow. This is
//       the spirit of Karn's rule (a sample one cannot trust is not fed to the estimator). The
//       price: a process whose normal speed rises for good stays failing until it speeds up
//       again (it rejoins through spec 2.2.5's ζ passes, which this threshold then judges); and a
//       process slower than initialThresholdMs from the start never gets a first sample.
//   (c) Two margins. Algorithm 1 adds getFactor(); the experiments multiply the TCP timeout by
//       2.5 (spec 2.2.2 note). Both are supported:
//         threshold = (mean + β·variance) · factor + marginMs
//       factor = 1 and marginMs = getFactor() is Algorithm 1 as printed; factor = 2.5 and
//       marginMs = 0 is the paper's experiments (DEFAULT_ESTIMATOR).
//   (d) A reply that passes only thanks to the margins (above Algorithm 1's timeout, within the
//       threshold) is fed only when it is the SHIFT_RUN-th such reply in a row. With the margins
//       ×2.5, a reply near the threshold raises mean + β·variance by about its own length: each
//       such pass lets a slower one pass, and a process stopped 80 % of the time (spec 2.6's
//       "artificially delayed" process: most replies late, some at once) dragged its threshold
//       past 300 ms within seconds on a real cluster (docs/PERFORMANCE.md §10). A real change of
//       speed gives a run of such replies, and the estimator follows it (Fig. 11's second case).
// A missed reply (timed out, lost, or wrong) is a fail with no sample: miss().
//
// timeoutMs is Algorithm 1's `timeout` (mean + β·variance), reported for the caller's figures.
// How long a tester waits for a reply before calling miss() is the driver's wait limit, which
// must not be below thresholdMs (a reply later than the threshold fails anyway).
import { assert } from '../../base/result.ts';

export type EstimatorOptions = {
  /** EWMA weight of the past (paper: 0.9). In (0, 1). */
  alpha: number;
  /** Weight of the mean deviation in the timeout (paper: 4). ≥ 0. */
  beta: number;
  /** Multiplicative margin ≥ 1 (paper's experiments: 2.5). */
  factor: number;
  /** Additive margin ≥ 0 (Algorithm 1's getFactor()). */
  marginMs: number;
  /** The threshold before any sample (paper: 8000). > 0. */
  initialThresholdMs: number;
};

/** The paper's experiments (spec 2.2.2, 2.4): α = 0.9, β = 4, 2.5 × the TCP timeout, 8 s at first. */
export const DEFAULT_ESTIMATOR: EstimatorOptions = Object.freeze({
  alpha: 0.9,
  beta: 4,
  factor: 2.5,
  marginMs: 0,
  initialThresholdMs: 8000,
});

export type Verdict = { pass: boolean; thresholdMs: number };

/** Departure (d): passing replies past the timeout, in a row, before one is fed. */
export const SHIFT_RUN = 3;

function checkOptions(opts: EstimatorOptions): void {
  assert(Number.isFinite(opts.alpha) && opts.alpha > 0 && opts.alpha < 1, `estimator: alpha ${opts.alpha} not in (0, 1)`);
  assert(Number.isFinite(opts.beta) && opts.beta >= 0, `estimator: beta ${opts.beta} < 0`);
  assert(Number.isFinite(opts.factor) && opts.factor >= 1, `estimator: factor ${opts.factor} < 1`);
  assert(Number.isFinite(opts.marginMs) && opts.marginMs >= 0, `estimator: marginMs ${opts.marginMs} < 0`);
  assert(Number.isFinite(opts.initialThresholdMs) && opts.initialThresholdMs > 0, `estimator: initialThresholdMs ${opts.initialThresholdMs} ≤ 0`);
}

/** Algorithm 1 for one (tester, tested) pair (spec 2.2.2). */
export class ReplyEstimator {
  private readonly opts: EstimatorOptions;
  private mean = 0;
  private variance = 0;
  private count = 0;
  /** Consecutive passing replies past the timeout (departure (d)). */
  private run = 0;

  constructor(opts: EstimatorOptions) {
    checkOptions(opts);
    this.opts = { ...opts };
  }

  /** The recommendation threshold in force: a test time above it fails. */
  get thresholdMs(): number {
    if (this.count === 0) return this.opts.initialThresholdMs;
    return this.timeoutMs * this.opts.factor + this.opts.marginMs;
  }

  /** Algorithm 1's timeout: mean + β·variance (initialThresholdMs before any sample). */
  get timeoutMs(): number {
    if (this.count === 0) return this.opts.initialThresholdMs;
    return this.mean + this.opts.beta * this.variance;
  }

  get meanMs(): number {
    return this.mean;
  }

  /** Algorithm 1's `variance`: the EWMA of the mean deviation |mean − test_time|. */
  get varianceMs(): number {
    return this.variance;
  }

  /** Samples fed to the estimator (passing tests only: departure (b)). */
  get samples(): number {
    return this.count;
  }

  /** Judges testTimeMs against the threshold in force, then (only if it passed) updates. */
  observe(testTimeMs: number): Verdict {
    // The caller measured this on its own clock: a negative or non-finite time is our bug.
    assert(Number.isFinite(testTimeMs) && testTimeMs >= 0, `estimator: test time ${testTimeMs} is not a duration`);
    const thresholdMs = this.thresholdMs;
    const pass = testTimeMs <= thresholdMs;
    // Departure (d): a reply past Algorithm 1's timeout teaches the estimator only as the
    // SHIFT_RUN-th of a run of such replies.
    const beyond = this.count > 0 && testTimeMs > this.timeoutMs;
    this.run = pass && beyond ? this.run + 1 : 0;
    if (pass && (!beyond || this.run >= SHIFT_RUN)) this.update(testTimeMs);
    return { pass, thresholdMs };
  }

  /** A test that got no reply (timed out or lost): a fail, no update. */
  miss(): { pass: false; thresholdMs: number } {
    return { pass: false, thresholdMs: this.thresholdMs };
  }

  private update(testTimeMs: number): void {
    const { alpha } = this.opts;
    if (this.count === 0) {
      // Departure (a): RFC 6298's first sample.
      this.mean = testTimeMs;
      this.variance = testTimeMs / 2;
    } else {
      this.mean = alpha * this.mean + (1 - alpha) * testTimeMs;
      this.variance = alpha * this.variance + (1 - alpha) * Math.abs(this.mean - testTimeMs);
    }
    this.count += 1;
    assert(this.mean >= 0 && this.variance >= 0, 'estimator: mean and variance stay non-negative');
  }
}
