// The whole tree typechecks under tsconfig.json's strict options (STYLE.md 13), tests included:
// vitest strips types without checking them, so without this row a type error (or a guarantee the
// types give, such as a core refusing at compile time an input that belongs to another core,
// checked with @ts-expect-error) would pass `npm test` unseen.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

it('tsc --noEmit reports no error over src, fsm, cli, test, bench, examples and tools', { timeout: 240_000 }, () => {
  const r = spawnSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '--noEmit', '-p', root], { cwd: root, encoding: 'utf8' });
  expect(r.stdout + r.stderr).toBe('');
  expect(r.status).toBe(0);
});
