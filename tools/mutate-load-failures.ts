// A vitest reporter for `npm run mutate` only (vitest.mutate.config.ts): a test file that fails to
// load becomes one failed test. A mutant of code that runs when a module loads (an xstate machine's
// `initial: ''`, a constant a module checks) can make the module throw on import; every test file
// importing it then fails with no test collected. Stryker's vitest runner builds a mutant's result
// from the collected tests only, finds none failed, and reports Survived (stryker-js issue 6150,
// open in 9.x and 10.0): a mutant the suite does catch would count against the score and send a
// reader after a test gap that does not exist. Runs at the end of each run, before Stryker reads
// the files' tasks; a file that loaded is left as it is.
import type { File, Test } from '@vitest/runner';
import type { Reporter, Vitest } from 'vitest/node';

export const LOAD_FAILURE_TEST = '(this test file failed to load)';

/** The failed test standing for a file that failed to load, or null if the file loaded. */
export function loadFailureTest(file: File): Test | null {
  if (file.result?.state !== 'fail' || file.tasks.length > 0) return null;
  // A Test as Stryker reads one (name, suite, file, mode, result); vitest's type also wants a
  // context only vitest can build, which nothing reads once the run is over.
  return {
    type: 'test', id: `${file.id}_load`, name: LOAD_FAILURE_TEST, mode: 'run', suite: file, file,
    result: { state: 'fail', errors: file.result.errors ?? [] }, meta: {}, annotations: [], artifacts: [], timeout: 0,
  } as unknown as Test;
}

export default class LoadFailuresAsFailedTests implements Reporter {
  private vitest: Vitest | null = null;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(): void {
    for (const file of this.vitest?.state.getFiles() ?? []) {
      const test = loadFailureTest(file);
      if (test !== null) file.tasks.push(test);
    }
  }
}
