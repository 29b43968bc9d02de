// A fixed slice of simulator seeds as one vitest test: every seed must end with no violation.
// A failure lists each failing seed with its replay command and first violation.
import { expect, it } from 'vitest';
import { realCores } from '../../../src/sim/cores.ts';
import { runSeed } from '../../../src/sim/run-seed.ts';
import { A21_SEED_EVERY, A21_SEED_OFFSET, runTaskSeed } from '../../../src/sim/task-seed.ts';

/** Agents per simulated cluster in the fixed slices (the CLI default). */
export const SLICE_AGENTS = 4;
/** A slice is deterministic CPU work (about 20–40 s alone on one core): a busy shared machine
 *  slows it, never changes its answer, so the bound is generous. */
const SLICE_TIMEOUT_MS = 300_000;

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
  }, SLICE_TIMEOUT_MS);
}

/** A fixed slice of task seeds (issue 3): tasks with process crashes, agent deaths, power-offs,
 *  partitions and a replica crash, and in one seed of A21_SEED_EVERY two replicas crashing at
 *  once (spec §9.2 A21: a cluster reset and the restore); every seed must end with no invariant
 *  violated. */
export function taskSeedSlice(from: number, count: number): void {
  it(`task seeds ${from}..${from + count - 1} (crashes, agent deaths, node failures, partitions, A21 cluster resets) end with no invariant violated`, () => {
    const failures: string[] = [];
    let accepted = 0;
    let resets = 0;
    let clusterResets = 0;
    let restores = 0;
    for (let seed = from; seed < from + count; seed++) {
      const r = runTaskSeed(seed, { agents: SLICE_AGENTS, cores: realCores });
      accepted += r.accepted;
      resets += r.stats.resets;
      clusterResets += r.stats.clusterResets;
      restores += r.stats.restores;
      const first = r.violations[0];
      if (first !== undefined) {
        failures.push(`seed ${seed} (replay: npm run sim -- --tasks --seed ${seed}): [${first.invariant}] ${first.message}`);
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
    // The slice did real work: tasks were accepted, nodes declared failed were reset, and its
    // A21 seeds reset the cluster and restored tasks.
    expect(accepted).toBeGreaterThan(count);
    expect(resets).toBeGreaterThan(0);
    expect(clusterResets).toBe(Math.floor((from + count - 1 - A21_SEED_OFFSET) / A21_SEED_EVERY) - Math.floor((from - 1 - A21_SEED_OFFSET) / A21_SEED_EVERY));
    expect(restores).toBeGreaterThan(0);
  }, SLICE_TIMEOUT_MS);
}
