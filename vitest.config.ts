import { defineConfig } from 'vitest/config';

// Two projects. e2e files start whole clusters of real daemons (a dozen processes each); two of
// them starting at once on a 2-core machine starve each other's replicas past their heartbeat
// bounds, so they run one file at a time. Everything else (unit, integration, simulator seeds)
// runs in the other worker beside them.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], fileParallelism: false },
      },
      {
        extends: true,
        test: { name: 'core', include: ['test/**/*.test.ts'], exclude: ['test/e2e/**'], maxWorkers: 2 },
      },
    ],
  },
});
