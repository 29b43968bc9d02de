// The `trine` CLI as a real process, the way an operator runs it: shared by the e2e tests.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StatusDocument } from '../../cli/status-report.ts';

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

/** A queue of async steps that run one at a time, in call order (a failed one does not stop the
 *  next): for what tests running concurrently share (describe.concurrent). */
export function oneAtATime(): <T>(step: () => Promise<T>) => Promise<T> {
  let last: Promise<unknown> = Promise.resolve();
  return (step) => {
    const run = last.then(step);
    last = run.catch(() => undefined);
    return run;
  };
}

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

/** The JSON log events of cluster process `id` (`<dir>/logs/<id>.log`), oldest first; a line
 *  the daemon is still writing is left for the next look. */
export function logEvents(dir: string, id: string): Record<string, unknown>[] {
  const path = join(dir, 'logs', `${id}.log`);
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').split('\n').flatMap((line) => {
    try {
      return line.length === 0 ? [] : [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

/** The live process in `dir`/run/`id`.`file` (a daemon's pid file); throws if there is none. */
export function livePid(dir: string, id: string, file = 'pid'): number {
  const pid = Number(readFileSync(join(dir, 'run', `${id}.${file}`), 'utf8').trim());
  if (!Number.isSafeInteger(pid) || pid <= 1 || !alive(pid)) throw new Error(`no live process in run/${id}.${file}`);
  return pid;
}

/** `trine status --json` of the cluster in `dir`: its exit code and document. */
export async function clusterStatus(dir: string): Promise<{ code: number; doc: StatusDocument }> {
  const r = await trine(['status', '--json', '--dir', dir]);
  return { code: r.code, doc: JSON.parse(r.stdout) as StatusDocument };
}

/** Once the group of the cluster in `dir` is healthy again without `victim`, replaced past `view`
 *  (a condemnation and an addition: two views): three serving members that agree. */
export function waitForReplacement(dir: string, victim: string, view: number, ms: number, what = ''): Promise<StatusDocument> {
  return waitFor(`a healthy group without ${victim}${what}`, ms, async () => {
    const s = (await clusterStatus(dir)).doc;
    const ok = s.healthy && (s.group.view ?? -1) > view + 1 && s.group.members.length === 3 && !s.group.members.includes(victim) &&
      s.replicas.every((r) => r.answered && r.phase === 'serving');
    return ok ? s : undefined;
  }, 250);
}

/** `trine up --nodes N` in a new temporary dir `<tmp>/<prefix>XXXXXX/cluster`: the root (to
 *  remove, and to find the cluster's processes by) and the cluster dir. Throws if up fails. */
export async function upCluster(prefix: string, nodes = 4): Promise<{ root: string; dir: string }> {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const dir = join(root, 'cluster');
  const up = await trine(['up', '--nodes', String(nodes), '--dir', dir], 90_000);
  if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
  return { root, dir };
}

/** Tears down a test's cluster whatever state it is in: `trine down` (if `dir` was set), then
 *  SIGKILL of anything still mentioning `root`, then `root` removed. */
export async function downCluster(root: string, dir: string): Promise<void> {
  try {
    if (dir !== '') await trine(['down', '--dir', dir]);
  } finally {
    for (const pid of processesMentioning(root)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (root !== '') rmSync(root, { recursive: true, force: true });
  }
}
