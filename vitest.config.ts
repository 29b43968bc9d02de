import { defineConfig } from 'vitest/config';

// Two projects, run one after the other (sequence.groupOrder). e2e files start whole clusters
// of real daemons (a dozen processes each); two of them starting at once on a 2-core machine, or
// one beside two CPU-bound simulator slices, starve the replicas past their heartbeat bounds.
// So `core` (unit, integration, simulator seeds) runs first on two workers, then `e2e`, one
// file at a time.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'core', include: ['test/**/*.test.ts'], exclude: ['test/e2e/**'], maxWorkers: 2, sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        // maxConcurrency: the tests a file marks concurrent (paced runs that share its cluster and
        // mostly sleep) run two at a time.
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], fileParallelism: false, maxConcurrency: 2, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
