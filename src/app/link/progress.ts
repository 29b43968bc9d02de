// A process's progress reports (docs/PROTOCOL.md §13.2): the application says how much of its
// work it has done, a fraction 0 … 1; the agent relays it to the group, which flags stragglers
// for a task with a straggler policy. Throttled here: a report leaves only when its permille
// differs from the last one sent, and at most one per PROGRESS_MIN_INTERVAL_MS; a report that
// comes sooner waits for the interval's end (only the latest is kept), so the last word on a
// process's progress is never lost to the throttle. Only a task with a straggler policy (its
// mapping says so) sends any: elsewhere a report costs nothing, so an application may report
// unconditionally. Link users build one on their link; Gmpi.progress uses one of its own.
import { LinkError } from './errors.ts';
import type { Link } from './link.ts';
import { PROGRESS_MIN_INTERVAL_MS } from './limits.ts';

/** permille of a fraction 0 … 1, rounded down; a RangeError-like LinkError otherwise. */
export function toPermille(fraction: number): number {
  if (typeof fraction !== 'number' || !Number.isFinite(fraction) || fraction < 0 || fraction > 1) {
    throw new LinkError('BAD_ARG', `progress must be a fraction from 0 to 1 of the process's work, got ${String(fraction)}`);
  }
  return Math.floor(fraction * 1000);
}

export class ProgressReporter {
  private lastSent: number | null = null;
  private lastSentAtMs = -Infinity;
  private pending: number | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;

  /** `now`: the clock (tests pass a fake one with fake timers). */
  constructor(private readonly link: Link, private readonly now: () => number = () => Date.now()) {}

  /** This process has done `fraction` (0 … 1) of its work. Throws for a fraction out of range
   *  or a link that is not ready; otherwise never blocks. */
  report(fraction: number): void {
    const permille = toPermille(fraction);
    // A link that is not ready refuses at once, with the error its own calls give (requireReady).
    if (this.link.state !== 'ready') this.link.sendOwn({ type: 'progress', permille });
    if (this.link.mapping.straggler === null) return;
    if (this.timer !== null) {
      this.pending = permille;
      return;
    }
    if (permille === this.lastSent) return;
    const waitMs = this.lastSentAtMs + PROGRESS_MIN_INTERVAL_MS - this.now();
    if (waitMs <= 0) return this.send(permille);
    this.pending = permille;
    this.timer = setTimeout(() => this.flush(), waitMs);
    this.timer.unref?.();
  }

  /** Stop: a report still waiting is dropped. */
  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
  }

  private flush(): void {
    this.timer = null;
    const p = this.pending;
    this.pending = null;
    // The link may have finalized or been lost meanwhile: nothing is left to tell.
    if (p === null || p === this.lastSent || this.link.state !== 'ready') return;
    this.send(p);
  }

  private send(permille: number): void {
    this.link.sendOwn({ type: 'progress', permille });
    this.lastSent = permille;
    this.lastSentAtMs = this.now();
  }
}
