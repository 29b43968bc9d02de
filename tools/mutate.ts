// `npm run mutate [-- STRYKER OPTIONS]` (issue 15): StrykerJS over src/core and fsm/ as
// stryker.config.json says (options such as `--mutate src/core/link.ts` narrow it), then
// docs/MUTATION.md (tools/mutation-report.ts). Incremental: mutants and tests that did not change
// since the last run keep their result (docs/mutation/stryker-incremental.json). Stryker writes
// that file with only the files of this run; the files of earlier, narrower runs are merged back,
// so a run over one file neither forgets the others' results nor drops them from the report.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

type Incremental = { files: Record<string, unknown>; testFiles?: Record<string, unknown> };

const root = fileURLToPath(new URL('..', import.meta.url));
const incrementalFile = `${root}docs/mutation/stryker-incremental.json`;
const read = (): Incremental | null => (existsSync(incrementalFile) ? (JSON.parse(readFileSync(incrementalFile, 'utf8')) as Incremental) : null);

const before = read();
const stryker = spawnSync(process.execPath, [`${root}node_modules/@stryker-mutator/core/bin/stryker.js`, 'run', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
const after = read();
if (before !== null && after !== null) {
  after.files = { ...before.files, ...after.files };
  after.testFiles = { ...before.testFiles, ...after.testFiles };
  writeFileSync(incrementalFile, JSON.stringify(after));
}
if (stryker.status !== 0) process.exit(stryker.status ?? 1);
const report = spawnSync(process.execPath, ['--import', 'tsx', `${root}tools/mutation-report.ts`], { cwd: root, stdio: 'inherit' });
process.exit(report.status ?? 1);
