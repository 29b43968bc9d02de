// `npm run mutate [-- STRYKER OPTIONS]` (issue 15): StrykerJS over src/core and fsm/ as
// stryker.config.json says (options such as `--mutate src/core/link.ts` narrow it), then
// docs/MUTATION.md (tools/mutation-report.ts). Incremental: mutants and tests that did not change
// since the last run keep their result (docs/mutation/stryker-incremental.json); `--force`
// retests them anyway (Stryker cannot tell that a test file changed under the vitest runner).
// Stryker writes that file with only the files (or line ranges) of this run; the results of
// earlier, narrower runs are merged back, so a run over one file, or part of one, neither forgets
// the others' results nor drops them from the report. After an edit to the file, an earlier
// result is kept only for a mutant whose lines the edit left as they were (moved with them, as
// Stryker's own incremental mode keeps it); a mutant on an edited line is gone until a run over
// its lines tests it again.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { type Incremental, mergeFile } from './mutation-merge.ts';
import { helpFromHeader } from '../examples/common/help.ts';

helpFromHeader(import.meta.url);

const root = fileURLToPath(new URL('..', import.meta.url));
const incrementalFile = `${root}docs/mutation/stryker-incremental.json`;
const read = (): Incremental | null => (existsSync(incrementalFile) ? (JSON.parse(readFileSync(incrementalFile, 'utf8')) as Incremental) : null);

const before = read();
const stryker = spawnSync(process.execPath, [`${root}node_modules/@stryker-mutator/core/bin/stryker.js`, 'run', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
const after = read();
if (before !== null && after !== null) {
  const files = { ...before.files };
  for (const [f, r] of Object.entries(after.files)) files[f] = mergeFile(before.files[f], r);
  after.files = files;
  after.testFiles = { ...before.testFiles, ...after.testFiles };
  writeFileSync(incrementalFile, JSON.stringify(after));
}
if (stryker.status !== 0) process.exit(stryker.status ?? 1);
const report = spawnSync(process.execPath, ['--import', 'tsx', `${root}tools/mutation-report.ts`], { cwd: root, stdio: 'inherit' });
process.exit(report.status ?? 1);
