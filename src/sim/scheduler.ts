// The simulated clock and the discrete-event scheduler. Time only moves when the next event
// is taken from the queue; events at the same time run in the order they were scheduled
// (a global sequence number breaks ties), so a run is a pure function of its seed.
import { assert } from '../base/result.ts';

/** Events one seed may run before the scheduler refuses: a livelocked core (a timer that
 *  always re-arms at `now`) must end as a reported failure, not a hung test. */
export const MAX_EVENTS_PER_RUN = 2_000_000;

export type SimEvent = () => void;

export class Scheduler {
  private timeMs = 0;
  private seq = 0;
  private executed = 0;
  // A binary min-heap over (time, seq), held as parallel arrays to keep allocation low.
  private times: number[] = [];
  private seqs: number[] = [];
  private events: SimEvent[] = [];

  get nowMs(): number {
    return this.timeMs;
  }

  get eventsRun(): number {
    return this.executed;
  }

  get pending(): number {
    return this.events.length;
  }

  /** Run `event` at `atMs` (never in the past: an earlier time runs now, after what is queued). */
  at(atMs: number, event: SimEvent): void {
    const t = atMs < this.timeMs ? this.timeMs : atMs;
    this.push(t, this.seq++, event);
  }

  after(delayMs: number, event: SimEvent): void {
    this.at(this.timeMs + Math.max(0, delayMs), event);
  }

  /** Time of the next event, or null when the queue is empty. */
  peekMs(): number | null {
    return this.times.length > 0 ? (this.times[0] as number) : null;
  }

  /** Run events up to and including `untilMs`, then set the clock to `untilMs`. `stop` is asked
   *  after every event; true ends the run early (the clock stays at that event's time). */
  runUntil(untilMs: number, stop?: () => boolean): 'done' | 'stopped' {
    for (;;) {
      const next = this.peekMs();
      if (next === null || next > untilMs) break;
      this.runOne();
      if (stop !== undefined && stop()) return 'stopped';
    }
    if (untilMs > this.timeMs) this.timeMs = untilMs;
    return 'done';
  }

  private runOne(): void {
    assert(this.executed < MAX_EVENTS_PER_RUN, `scheduler: more than ${MAX_EVENTS_PER_RUN} events (livelock?)`);
    const t = this.times[0] as number;
    const ev = this.events[0] as SimEvent;
    this.popTop();
    assert(t >= this.timeMs, 'scheduler: time went backwards');
    this.timeMs = t;
    this.executed++;
    ev();
  }

  private less(i: number, j: number): boolean {
    const ti = this.times[i] as number;
    const tj = this.times[j] as number;
    return ti < tj || (ti === tj && (this.seqs[i] as number) < (this.seqs[j] as number));
  }

  private swap(i: number, j: number): void {
    const t = this.times[i] as number;
    this.times[i] = this.times[j] as number;
    this.times[j] = t;
    const s = this.seqs[i] as number;
    this.seqs[i] = this.seqs[j] as number;
    this.seqs[j] = s;
    const e = this.events[i] as SimEvent;
    this.events[i] = this.events[j] as SimEvent;
    this.events[j] = e;
  }

  private push(t: number, s: number, ev: SimEvent): void {
    this.times.push(t);
    this.seqs.push(s);
    this.events.push(ev);
    let i = this.times.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  private popTop(): void {
    const last = this.times.length - 1;
    if (last > 0) this.swap(0, last);
    this.times.pop();
    this.seqs.pop();
    this.events.pop();
    const n = this.times.length;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.less(l, m)) m = l;
      if (r < n && this.less(r, m)) m = r;
      if (m === i) break;
      this.swap(i, m);
      i = m;
    }
  }
}
