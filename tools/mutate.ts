// `npm run mutate [-- STRYKER OPTIONS]` (issue 15): StrykerJS over src/core and fsm/ as
// stryker.config.json says (options such as `--mutate src/core/link.ts` narrow it), then
// docs/MUTATION.md from its report (tools/mutation-report.ts). Incremental: mutants and tests
// that did not change since the last run keep their result (docs/mutation/stryker-incremental.json).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stryker = spawnSync(process.execPath, [`${root}node_modules/@stryker-mutator/core/bin/stryker.js`, 'run', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
if (stryker.status !== 0) process.exit(stryker.status ?? 1);
const report = spawnSync(process.execPath, ['--import', 'tsx', `${root}tools/mutation-report.ts`], { cwd: root, stdio: 'inherit' });
process.exit(report.status ?? 1);
