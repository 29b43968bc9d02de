// A CLI command's output reaches a pipe whole before the process exits (cli/exit.ts): a 3 MB
// answer, as a large `trine ps --json` is, read through a pipe by another program.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const EXIT = fileURLToPath(new URL('../../cli/exit.ts', import.meta.url));

it('exitWhenFlushed: 3 MB written to a pipe arrive whole, and the exit code is kept', () => {
  const script = `import { exitWhenFlushed } from ${JSON.stringify(EXIT)}; process.stdout.write('x'.repeat(3_000_000) + '\\n'); exitWhenFlushed(0);`;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' });
  expect(out.length).toBe(3_000_001);
  let code = 0;
  try {
    execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script.replace('exitWhenFlushed(0)', 'exitWhenFlushed(4)')], { maxBuffer: 16 * 1024 * 1024 });
  } catch (e) {
    code = (e as { status: number }).status;
  }
  expect(code).toBe(4);
});
