// `npm run demo` is the README's first command: it must run end to end on a fresh cluster —
// a 4-process task, one process crashed with kill -9 and recorded, the output shown — and stop
// everything it started (issue 3 item 7).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const DEMO = fileURLToPath(new URL('../../bin/demo.js', import.meta.url));

it('npm run demo: submits a 4-process task, records the kill -9 of one process, shows its output, stops everything', async () => {
  const r = await new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(process.execPath, [DEMO], { timeout: 180_000 }, (error, stdout) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout });
    });
  });
  expect(r.stdout).toMatch(/demo OK\n$/);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/t1 running: 4 processes/);
  expect(r.stdout).toMatch(/t1\/2 terminated abnormally: SIGKILL/);
  expect(r.stdout).toMatch(/kill -9 sent at \+[0-9]+ ms; recorded [0-9]+ ms later/);
  expect(r.stdout).toMatch(/t1 finished abnormally: processes terminated abnormally \(VPIDs 2\)/);
  expect(r.stdout).toMatch(/\[t1\/3\] vpid 3 done/);
  expect(r.stdout).toMatch(/stopped 8 processes/);
}, 200_000);
