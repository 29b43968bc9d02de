import { defineConfig } from 'vitest/config';
import LoadFailuresAsFailedTests from './tools/mutate-load-failures.ts';
import FastFirstSequencer from './tools/mutate-sequencer.ts';

// The tests `npm run mutate` (StrykerJS, stryker.config.json) runs against each mutant of
// src/core and fsm/: the unit tests and the simulator's named scenarios, in this process's
// workers, where Stryker sees which test covers which mutant. Not the e2e and integration
// tests: their daemons run in processes of their own, from the CLI bundle, which mutants never
// reach. Not the simulator's seed slices either: each covers nearly every line of the core and
// takes 20–50 s, so every mutant would pay for all of them; `npm run sim` runs them.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    include: [
      'test/unit/**/*.test.ts',
      'test/sim/{scenarios,diagnosis-scenarios,task-scenarios,signal-scenarios,regressions,cluster-reset,checker,machinery}.test.ts',
    ],
    maxWorkers: 1,
    sequence: { sequencer: FastFirstSequencer },
    reporters: ['default', new LoadFailuresAsFailedTests()],
  },
});
