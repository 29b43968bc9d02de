// How a contract rig (test/unit/io/*-contract.ts) lets simulated time pass: `until` runs the
// scheduler until a condition holds (or gives up after GIVE_UP_MS of simulated time), `settle`
// runs one more simulated second so a late or duplicate event would show. Never the wall clock.
import type { Scheduler } from '../../../src/sim/scheduler.ts';

const GIVE_UP_MS = 60_000;
const SETTLE_MS = 1_000;

export function simWait(scheduler: Scheduler): { until(done: () => boolean): Promise<void>; settle(): Promise<void> } {
  return {
    until: async (done) => {
      if (done()) return;
      scheduler.runUntil(scheduler.nowMs + GIVE_UP_MS, done);
      if (!done()) throw new Error(`not done after ${GIVE_UP_MS} simulated ms`);
    },
    settle: async () => {
      scheduler.runUntil(scheduler.nowMs + SETTLE_MS);
    },
  };
}
