// A fixed slice of simulator seeds as one vitest test: every seed must end with no violation.
// A failure lists each failing seed with its replay command and first violation.
import { expect, it } from 'vitest';
import { realCores } from '../../../src/sim/cores.ts';
import { runSeed } from '../../../src/sim/run-seed.ts';

/** Agents per simulated cluster in the fixed slices (the CLI default). */
export const SLICE_AGENTS = 4;

export function seedSlice(from: number, count: number): void {
  it(`seeds ${from}..${from + count - 1} (mixed faults) end with no invariant violated`, () => {
    const failures: string[] = [];
    let commands = 0;
    for (let seed = from; seed < from + count; seed++) {
      const r = runSeed(seed, { agents: SLICE_AGENTS, cores: realCores });
      commands += r.counts.commands;
      const first = r.violations[0];
      if (first !== undefined) {
        failures.push(`seed ${seed} (replay: npm run sim -- --seed ${seed}): [${first.invariant}] ${first.message}`);
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
    // The slice did real work: group messages were delivered, not just heartbeats exchanged.
    expect(commands).toBeGreaterThan(count * 5);
  });
}
