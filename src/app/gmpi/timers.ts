// G-MPI's timers (spec §5.4): wall timers (setTimeout) and task timers, which count only the
// time the process actually ran (TaskClock), each firing a callback once; gmpi.ts turns that
// into LOCAL_ALARM. Owns the timer handles, the task clock and stopping every timer at
// finalize. Argument checks are gmpi.ts's (its errors).
import { cpuUsage, hrtime } from 'node:process';

/** The task clock advances in steps of this; a gap much longer means the process was stopped
 *  or its main thread was busy. */
export const TASK_CLOCK_STEP_MS = 5;
/** A step gap beyond this many steps counts only the CPU time the process used in it: a
 *  stopped process (SIGSTOP, descheduled by gang scheduling) uses none, a busy one all of it. */
export const TASK_CLOCK_GAP_STEPS = 4;
/** Timer durations are C longs of microseconds in the source; this bound (about 24.8 days) is
 *  what Node's timers accept. */
export const MAX_TIMER_US = 2_147_483_647 * 1000;

export type TimerHandle = { readonly id: number };

// ---- the task clock (spec §5.4 task timers) ----------------------------------------------------

/** Time this process actually ran: wall time less the gaps in which it could not run (it was
 *  stopped, as gang scheduling stops a descheduled task). Measured by a ticker: a step that
 *  took far longer than its period counts as one period. */
const wallMs = (): number => Number(hrtime.bigint()) / 1e6;
const cpuMs = (): number => {
  const u = cpuUsage();
  return (u.user + u.system) / 1000;
};

class TaskClock {
  private ms = 0;
  private last = wallMs();
  private lastCpu = cpuMs();
  private timer: NodeJS.Timeout | null = null;
  private readonly waiting = new Map<number, { at: number; fire: () => void }>();

  now(): number {
    this.step();
    return this.ms;
  }

  at(id: number, afterMs: number, fire: () => void): void {
    this.waiting.set(id, { at: this.now() + afterMs, fire });
    // Referenced, like a wall timer's setTimeout: a pending timer keeps the process alive.
    if (this.timer === null) this.timer = setInterval(() => this.step(), TASK_CLOCK_STEP_MS);
  }

  cancel(id: number): void {
    this.waiting.delete(id);
    if (this.waiting.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private step(): void {
    const t = wallMs();
    const c = cpuMs();
    const d = t - this.last;
    const used = c - this.lastCpu;
    this.last = t;
    this.lastCpu = c;
    // While ticking, a long gap is either a stop (no CPU used) or a busy main thread (CPU used
    // throughout): count the CPU time, at least one step. Not ticking, nothing is waiting.
    const gap = this.timer !== null && d > TASK_CLOCK_STEP_MS * TASK_CLOCK_GAP_STEPS;
    this.ms += gap ? Math.max(TASK_CLOCK_STEP_MS, Math.min(d, used)) : d;
    for (const [id, w] of [...this.waiting]) {
      if (this.ms >= w.at) {
        this.cancel(id);
        w.fire();
      }
    }
  }
}

// ---- the timers of one process -----------------------------------------------------------------

export class GmpiTimers {
  private readonly timers = new Map<number, NodeJS.Timeout | 'task'>();
  private nextTimer = 1;
  private readonly taskClock = new TaskClock();

  /** `fire` after `us` microseconds of wall time. */
  setWall(us: number, fire: () => void): TimerHandle {
    const id = this.nextTimer++;
    const t = setTimeout(() => {
      this.timers.delete(id);
      fire();
    }, us / 1000);
    this.timers.set(id, t);
    return { id };
  }

  /** The same in task time, which stops while the process is stopped (TaskClock). */
  setTask(us: number, fire: () => void): TimerHandle {
    const id = this.nextTimer++;
    this.timers.set(id, 'task');
    this.taskClock.at(id, us / 1000, () => {
      this.timers.delete(id);
      fire();
    });
    return { id };
  }

  dismiss(h: TimerHandle): void {
    const t = this.timers.get(h.id);
    this.timers.delete(h.id);
    if (t === 'task') this.taskClock.cancel(h.id);
    else if (t !== undefined) clearTimeout(t);
  }

  /** Stop every timer (finalize). */
  dismissAll(): void {
    for (const h of [...this.timers.keys()]) this.dismiss({ id: h });
  }
}
