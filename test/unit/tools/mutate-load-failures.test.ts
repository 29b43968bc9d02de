// tools/mutate-load-failures.ts in a real vitest run: a test file that fails to load reaches
// Stryker as one failed test (so the mutant that broke the load counts as killed, issue 15), and a
// file that loaded reaches it unchanged. Tests are collected the way Stryker's vitest runner does
// (suite tasks only).
import { fileURLToPath } from 'node:url';
import type { File, Task } from '@vitest/runner';
import { describe, expect, it } from 'vitest';
import { createVitest, type Reporter } from 'vitest/node';
import LoadFailuresAsFailedTests, { LOAD_FAILURE_TEST } from '../../../tools/mutate-load-failures.ts';

const FIXTURES = fileURLToPath(new URL('../../fixtures/mutate-load/', import.meta.url));

const collect = (t: Task): Task[] => (t.type === 'suite' ? t.tasks.flatMap(collect) : t.type === 'test' ? [t] : []);

/** Runs the fixtures' own tests (one of which fails on purpose) with `reporters` and no output. */
async function runFixtures(reporters: Reporter[]): Promise<File[]> {
  const silent: Reporter = {};
  const vitest = await createVitest('test', { root: FIXTURES, config: false, include: ['*.check.ts'], watch: false, reporters: [...reporters, silent] });
  try {
    await vitest.start();
    return vitest.state.getFiles();
  } finally {
    await vitest.close();
  }
}

const byName = (files: File[], name: string) => files.find((f) => f.name.endsWith(name)) as File;

describe('npm run mutate: a test file that fails to load', () => {
  it('is one failed test carrying the load error; a file that loaded keeps its own tests', async () => {
    const files = await runFixtures([new LoadFailuresAsFailedTests()]);
    const unloadable = collect(byName(files, 'unloadable.check.ts'));
    expect(unloadable.map((t) => [t.name, t.result?.state])).toEqual([[LOAD_FAILURE_TEST, 'fail']]);
    expect(unloadable[0]?.result?.errors?.[0]?.message).toContain('No initial state specified');
    expect(collect(byName(files, 'loads.check.ts')).map((t) => [t.name, t.result?.state])).toEqual([['passes', 'pass'], ['fails', 'fail']]);
  }, 60_000);

  it('without the reporter collects no test at all, which Stryker reads as a survivor', async () => {
    const files = await runFixtures([]);
    expect(byName(files, 'unloadable.check.ts').result?.state).toBe('fail');
    expect(collect(byName(files, 'unloadable.check.ts'))).toEqual([]);
  }, 60_000);
});
