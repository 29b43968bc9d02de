// Progress lines for long runs (issue 19: the campaigns and the simulator's long seed runs said
// nothing until the end). One line on stderr per step, or at most one per `everyMs` — runs
// done/total, failures so far, elapsed, ETA — so stdout and the JSON outputs stay as they were.
// A leaf: the clock and the writer are passed in, so the line is a pure function of them.

/** "42 s", "3 min 05 s", "1 h 02 min": short enough for one line, exact enough for an ETA. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

export type ProgressState = { label: string; unit: string; done: number; total: number; failures: number; elapsedMs: number };

/** `campaign: 3/10 runs, 1 failed, 1 min 02 s elapsed, ETA 2 min 25 s`: the ETA is the mean time
 *  per finished step times the steps left (unknown before the first, 0 s at the end). */
export function progressLine(p: ProgressState): string {
  const eta = p.done === 0 ? 'ETA unknown' : p.done >= p.total ? 'done' : `ETA ${duration((p.elapsedMs / p.done) * (p.total - p.done))}`;
  return `${p.label}: ${p.done}/${p.total} ${p.unit}, ${p.failures} failed, ${duration(p.elapsedMs)} elapsed, ${eta}`;
}

/** Writes a progress line after a step, at most one per `everyMs` (0: every step); the last
 *  step always gets its line. */
export class Progress {
  private readonly started: number;
  private lastAt = -Infinity;

  constructor(
    private readonly label: string,
    private readonly unit: string,
    private readonly total: number,
    private readonly write: (line: string) => void,
    private readonly everyMs = 0,
    private readonly now: () => number = Date.now,
  ) {
    this.started = now();
  }

  /** After a step: `done` steps finished so far, `failures` of them failed. */
  step(done: number, failures: number): void {
    const at = this.now();
    if (done < this.total && at - this.lastAt < this.everyMs) return;
    this.lastAt = at;
    this.write(`${progressLine({ label: this.label, unit: this.unit, done, total: this.total, failures, elapsedMs: at - this.started })}\n`);
  }
}
