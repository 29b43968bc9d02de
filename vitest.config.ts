import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // e2e tests start real daemons; keep files parallel but bounded on 2 cores.
    maxWorkers: 2,
  },
});
