// What the real-process integration tests share: the CLI entry, their wait budget, running the
// CLI and checking its one-line errors, and the cleanup that kills every process group they
// learned of.
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

export const NODE = process.execPath;
export const TRINE = fileURLToPath(new URL('../../bin/trine.js', import.meta.url));
/** vi.waitFor budget: generous, for a loaded 2-core host. */
export const WAIT = { timeout: 30_000, interval: 20 };

/** SIGKILL each pid's process group and the pid itself; a Set is emptied afterwards. */
export function killAll(pids: Iterable<number>): void {
  for (const pid of pids) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  if (pids instanceof Set) pids.clear();
}

/** A sleeping process with `args` on its command line (so it passes for a cluster process of a
 *  dir it names), leading its own process group like every daemon and task process; its pid is
 *  added to `pids` for killAll. */
export function standIn(pids: Set<number>, ...args: string[]): number {
  const child = spawn(NODE, ['-e', 'setInterval(() => {}, 1 << 30)', ...args], { detached: true, stdio: 'ignore' });
  if (child.pid === undefined) throw new Error('stand-in process did not start');
  child.unref();
  pids.add(child.pid);
  return child.pid;
}

/** A CLI command run here ends on its own within a second or two; past this it is stuck. */
export const CHILD_TIMEOUT_MS = 20_000;

export type Run = { code: number | string; stdout: string; stderr: string };

/** Runs `trine args…` to completion, SIGKILLed after CHILD_TIMEOUT_MS; never rejects. */
export function runTrine(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(NODE, [TRINE, ...args], { timeout: CHILD_TIMEOUT_MS, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : `killed (${String(error.signal ?? error.code)})`;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Asserts the run failed as the CLI fails (STYLE.md 7): exit `code`, nothing on stdout, one
 *  `trine: ` line on stderr containing every one of `says`, and no internal error. */
export function expectOneErrorLine(run: Run, code: number, ...says: string[]): void {
  const lines = run.stderr.split('\n').filter((l) => l !== '');
  expect(lines, run.stderr).toHaveLength(1);
  const line = lines[0] as string;
  expect(line.startsWith('trine: '), line).toBe(true);
  expect(line).not.toContain('internal error');
  for (const s of says) expect(line).toContain(s);
  expect(run.stdout).toBe('');
  expect(run.code, line).toBe(code);
}
