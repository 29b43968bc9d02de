// The order in which `npm run mutate` runs the test files covering a mutant (vitest.mutate.config.ts).
// Stryker stops at the first failing test (bail 1), so a mutant costs the tests run before the one
// that kills it, and a survivor costs them all. vitest's own order runs the slowest files first,
// which suits a whole-suite run on many workers and is the worst order here: a mutant of
// diagnosis.ts waited for the wire fuzzers before the diagnosis rows that kill it. This one runs
// first the test files named after the mutated file (Stryker's vitest runner passes it as the
// `related` file: cluster-state.test.ts and cluster-state-slips.test.ts for a mutant of
// cluster-state.ts), then a file that failed last time (the test that killed the last mutant of a
// file often kills the next), then files with no record yet, smallest first, then the fastest
// files first; within each group the fastest first.
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { basename, relative } from 'node:path';

/** `cluster-state` for `…/src/core/cluster-state.ts`. */
const stem = (path: string): string => basename(path).replace(/\.[cm]?[jt]s$/, '');

export default class FastFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const related = (Array.isArray(this.ctx.config.related) ? this.ctx.config.related : []).map(stem);
    const key = (s: TestSpecification) => `${s.project.name}:${relative(this.ctx.config.root, s.moduleId)}`;
    const namedAfter = (s: TestSpecification): boolean => {
      const name = basename(s.moduleId);
      return related.some((r) => name.startsWith(`${r}.`) || name.startsWith(`${r}-`));
    };
    // [named after the mutated file 0 | failed last time 1 | never run 2 | passed 3,
    //  duration in ms (or size in bytes if never run)]
    const rank = (s: TestSpecification): [number, number] => {
      const state = cache.getFileTestResults(key(s));
      const group = namedAfter(s) ? 0 : state === undefined ? 2 : state.failed ? 1 : 3;
      return [group, state?.duration ?? cache.getFileStats(key(s))?.size ?? 0];
    };
    return [...files]
      .map((s) => ({ s, r: rank(s) }))
      .sort((a, b) => a.r[0] - b.r[0] || a.r[1] - b.r[1])
      .map(({ s }) => s);
  }
}
