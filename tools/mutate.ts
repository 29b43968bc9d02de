// `npm run mutate [-- STRYKER OPTIONS]` (issue 15): StrykerJS over src/core and fsm/ as
// stryker.config.json says (options such as `--mutate src/core/link.ts` narrow it), then
// docs/MUTATION.md (tools/mutation-report.ts). Incremental: mutants and tests that did not change
// since the last run keep their result (docs/mutation/stryker-incremental.json); `--force`
// retests them anyway (Stryker cannot tell that a test file changed under the vitest runner).
// Stryker writes that file with only the files (or line ranges) of this run; the results of
// earlier, narrower runs are merged back, so a run over one file, or part of one, neither forgets
// the others' results nor drops them from the report.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

type Mutant = { mutatorName: string; replacement?: string; location: { start: { line: number; column: number }; end: { line: number; column: number } } };
type FileResult = { source: string; mutants: Mutant[] };
type Incremental = { files: Record<string, FileResult>; testFiles?: Record<string, unknown> };

const mutantKey = (m: Mutant) => `${m.location.start.line}:${m.location.start.column}-${m.location.end.line}:${m.location.end.column}:${m.mutatorName}:${m.replacement ?? ''}`;

/** This run's results for a file over the last run's: a run over part of a file (`--mutate
 *  file.ts:15-66`) replaces only the mutants it tested, as long as the source is unchanged. */
function mergeFile(before: FileResult | undefined, after: FileResult): FileResult {
  if (before === undefined || before.source !== after.source) return after;
  const tested = new Set(after.mutants.map(mutantKey));
  return { ...after, mutants: [...before.mutants.filter((m) => !tested.has(mutantKey(m))), ...after.mutants] };
}

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
