// The numbers of `trine inject slow` (docs/OPERATIONS.md §7), shared by the CLI, which checks
// what the operator typed, and the node agent, which runs the duty cycle
// (src/daemon/inject-slow.ts) and checks the same values again as they arrive. Pure: limits,
// parsers that return null for anything out of bounds, and the split of one period.
//
// A slowed process is stopped (SIGSTOP) for part of every period and continued (SIGCONT) for
// the rest: over a period it keeps `share` % of the CPU it would have had.

/** One run + stop period. Short enough that a slowed process looks uniformly slow to anything
 *  that measures it over a few hundred ms (heartbeats, progress counters), long enough that the
 *  agent's two signals and its timer per period cost nothing measurable (20 wake-ups a second
 *  per target) and that timer jitter (~1 ms) stays small beside 1 % of it. */
export const SLOW_PERIOD_MS = 100;
/** The share of CPU a slowed target keeps, in %: at 0 it would be a hang (`inject hang`), at 100
 *  not slowed. */
export const MIN_SLOW_SHARE_PERCENT = 1;
export const MAX_SLOW_SHARE_PERCENT = 99;
/** `--for`: at least one period (a shorter slowness is not one), at most an hour (a test or demo
 *  that wants longer can inject again, or omit --for and heal). */
export const MIN_SLOW_FOR_MS = SLOW_PERIOD_MS;
export const MAX_SLOW_FOR_MS = 3_600_000;
/** Targets one agent slows at once (its node, and processes by name): each costs a timer; a
 *  node runs a few dozen processes at most (4 slots by default). */
export const MAX_SLOW_TARGETS = 64;

/** How one period splits for a share: run first, then stop. Both at least 1 ms. */
export function dutyCycle(sharePercent: number): { runMs: number; stopMs: number } {
  if (!Number.isInteger(sharePercent) || sharePercent < MIN_SLOW_SHARE_PERCENT || sharePercent > MAX_SLOW_SHARE_PERCENT) {
    throw new RangeError(`share ${sharePercent} % is outside ${MIN_SLOW_SHARE_PERCENT}..${MAX_SLOW_SHARE_PERCENT}`);
  }
  const runMs = Math.round((SLOW_PERIOD_MS * sharePercent) / 100);
  return { runMs, stopMs: SLOW_PERIOD_MS - runMs };
}

const DIGITS = /^[0-9]{1,9}$/;

/** `--share P`: an integer percentage within the bounds, or null. */
export function parseSharePercent(text: string): number | null {
  const n = DIGITS.test(text) ? Number(text) : NaN;
  return n >= MIN_SLOW_SHARE_PERCENT && n <= MAX_SLOW_SHARE_PERCENT ? n : null;
}

/** `--for T`: whole milliseconds within the bounds, or null. */
export function parseSlowForMs(text: string): number | null {
  const n = DIGITS.test(text) ? Number(text) : NaN;
  return n >= MIN_SLOW_FOR_MS && n <= MAX_SLOW_FOR_MS ? n : null;
}
