// The `trine` CLI as a real process, the way an operator runs it: shared by the e2e tests.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TRINE = fileURLToPath(new URL('../../bin/trine.js', import.meta.url));

export type Run = { code: number; stdout: string; stderr: string };

/** Runs `trine args…` to completion; never rejects (the exit code is part of the answer). */
export function trine(args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [TRINE, ...args], { timeout: timeoutMs }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Whether a pid is a live process: present in /proc and not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The pids recorded in a cluster dir's `run/*.pid` files. */
export function pidsIn(dir: string): number[] {
  const run = join(dir, 'run');
  if (!existsSync(run)) return [];
  return readdirSync(run)
    .filter((f) => f.endsWith('.pid'))
    .map((f) => Number(readFileSync(join(run, f), 'utf8').trim()))
    .filter((p) => Number.isInteger(p) && p > 1);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every `pollMs` until it returns something other than undefined; throws naming
 *  `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string, timeoutMs: number, probe: () => Promise<T | undefined> | T | undefined, pollMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
    await sleep(pollMs);
  }
}

/** Live processes other than this one whose command line mentions `root` (a test's dir). */
export function processesMentioning(root: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(root) && alive(Number(name))) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
