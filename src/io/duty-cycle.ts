// The numbers of `trine inject slow` (docs/OPERATIONS.md §7), shared by the CLI, which checks
// what the operator typed, and the node agent, which runs the duty cycle
// (src/daemon/inject-slow.ts) and checks the same values again as they arrive. Pure: limits,
// parsers that return null for anything out of bounds, and the split of one period.
//
// A slowed process is stopped (SIGSTOP) for part of every period and continued (SIGCONT) for
// the rest: over a period it keeps `share` % of the CPU it would have had. The period sets what
// the slowness looks like: a short one, a process uniformly slower (its throughput); a long one,
// a process unresponsive for stretches (a loaded core's long scheduling delays).

/** One run + stop period when `--period` is not given. Short enough that a slowed process looks
 *  uniformly slow to anything that measures it over a few hundred ms (heartbeats, progress
 *  counters), long enough that the agent's two signals and its timer per period cost nothing
 *  measurable (20 wake-ups a second per target) and that timer jitter (~1 ms) stays small beside
 *  1 % of it. */
export const DEFAULT_SLOW_PERIOD_MS = 100;
/** `--period`, shortest: 100 wake-ups a second per target is still cheap for the agent, and a
 *  1 ms timer jitter is 5 % of the period. Shorter, the jitter and the scheduler's own time slices
 *  (a few ms) would blur the share, and a small share would round to no run at all. */
export const MIN_SLOW_PERIOD_MS = 20;
/** `--period`, longest: stops of up to ~10 s are the long stalls a loaded core gives a process,
 *  which a responsiveness test (the DGRP's, docs/PROTOCOL.md §12) is there to catch. A process
 *  stopped much longer is not slow but hung: `inject hang` says that. */
export const MAX_SLOW_PERIOD_MS = 10_000;
/** The share of CPU a slowed target keeps, in %: at 0 it would be a hang (`inject hang`), at 100
 *  not slowed. */
export const MIN_SLOW_SHARE_PERCENT = 1;
export const MAX_SLOW_SHARE_PERCENT = 99;
/** `--for`: at least one period, the one typed (a shorter slowness is not one; see parseSlowForMs),
 *  at most an hour (a test or demo that wants longer can inject again, or omit --for and heal). */
export const MAX_SLOW_FOR_MS = 3_600_000;
/** Targets one agent slows at once (its node, and processes by name): each costs a timer; a
 *  node runs a few dozen processes at most (4 slots by default). */
export const MAX_SLOW_TARGETS = 64;

/** How one period of `periodMs` splits for a share: run first, then stop, each to the nearest ms
 *  and at least 1 ms (at a short period a small share rounds up: 1 % of 20 ms runs 1 ms). */
export function dutyCycle(sharePercent: number, periodMs: number = DEFAULT_SLOW_PERIOD_MS): { runMs: number; stopMs: number } {
  if (!Number.isInteger(sharePercent) || sharePercent < MIN_SLOW_SHARE_PERCENT || sharePercent > MAX_SLOW_SHARE_PERCENT) {
    throw new RangeError(`share ${sharePercent} % is outside ${MIN_SLOW_SHARE_PERCENT}..${MAX_SLOW_SHARE_PERCENT}`);
  }
  if (!Number.isInteger(periodMs) || periodMs < MIN_SLOW_PERIOD_MS || periodMs > MAX_SLOW_PERIOD_MS) {
    throw new RangeError(`period ${periodMs} ms is outside ${MIN_SLOW_PERIOD_MS}..${MAX_SLOW_PERIOD_MS}`);
  }
  const runMs = Math.min(periodMs - 1, Math.max(1, Math.round((periodMs * sharePercent) / 100)));
  const stopMs = periodMs - runMs;
  if (runMs < 1 || stopMs < 1) throw new Error(`period ${periodMs} ms split into ${runMs} + ${stopMs} ms`);
  return { runMs, stopMs };
}

const DIGITS = /^[0-9]{1,9}$/;

/** `--share P`: an integer percentage within the bounds, or null. */
export function parseSharePercent(text: string): number | null {
  const n = DIGITS.test(text) ? Number(text) : NaN;
  return n >= MIN_SLOW_SHARE_PERCENT && n <= MAX_SLOW_SHARE_PERCENT ? n : null;
}

/** `--period MS`: whole milliseconds within the bounds, or null. */
export function parseSlowPeriodMs(text: string): number | null {
  const n = DIGITS.test(text) ? Number(text) : NaN;
  return n >= MIN_SLOW_PERIOD_MS && n <= MAX_SLOW_PERIOD_MS ? n : null;
}

/** `--for MS`: whole milliseconds from one period (`periodMs`, the one in force) to
 *  MAX_SLOW_FOR_MS, or null. */
export function parseSlowForMs(text: string, periodMs: number = DEFAULT_SLOW_PERIOD_MS): number | null {
  if (!Number.isInteger(periodMs) || periodMs < MIN_SLOW_PERIOD_MS || periodMs > MAX_SLOW_PERIOD_MS) {
    throw new RangeError(`period ${periodMs} ms is outside ${MIN_SLOW_PERIOD_MS}..${MAX_SLOW_PERIOD_MS}`);
  }
  const n = DIGITS.test(text) ? Number(text) : NaN;
  return n >= periodMs && n <= MAX_SLOW_FOR_MS ? n : null;
}
