// The order in which `npm run mutate` runs the test files covering a mutant (vitest.mutate.config.ts).
// Stryker stops at the first failing test (bail 1), so a mutant costs the tests run before the one
// that kills it, and a survivor costs them all. vitest's own order runs the slowest files first,
// which suits a whole-suite run on many workers and is the worst order here: a mutant of
// diagnosis.ts waited for the wire fuzzers before the diagnosis rows that kill it. This one runs a
// file that failed last time first (the test that killed the last mutant of a file often kills the
// next), then files with no record yet, smallest first, then the fastest files first.
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { relative } from 'node:path';

export default class FastFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const key = (s: TestSpecification) => `${s.project.name}:${relative(this.ctx.config.root, s.moduleId)}`;
    // [failed last time 0 | never run 1 | passed 2, duration in ms (or size in bytes if never run)]
    const rank = (s: TestSpecification): [number, number] => {
      const state = cache.getFileTestResults(key(s));
      if (state !== undefined) return [state.failed ? 0 : 2, state.duration];
      return [1, cache.getFileStats(key(s))?.size ?? 0];
    };
    return [...files]
      .map((s) => ({ s, r: rank(s) }))
      .sort((a, b) => a.r[0] - b.r[0] || a.r[1] - b.r[1])
      .map(({ s }) => s);
  }
}
