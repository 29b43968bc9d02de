// Logs, run records and task output are private (issue 14 item 5; docs/OPERATIONS.md §2,
// FAULT-MODEL "What a local user on a node can no longer do"): on a real `trine up` cluster whose
// daemons run under the usual umask 022, after a task has written output, every directory under
// the cluster dir's logs/ and run/ is 0700 and every file in them 0600, so no other local user
// can read them. The cluster is brought down in afterAll whatever happened.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pidsIn, trine } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';

let root = '';
let dir = '';
let umask = 0;

/** Every directory and file under `top` (itself included), as `path mode`, mode in octal. */
function modesUnder(top: string): { dirs: string[]; files: string[] } {
  const dirs: string[] = [];
  const files: string[] = [];
  const show = (path: string) => `${relative(dir, path) || '.'} ${(statSync(path).mode & 0o777).toString(8)}`;
  const walk = (path: string) => {
    dirs.push(show(path));
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) walk(child);
      else files.push(show(child));
    }
  };
  walk(top);
  return { dirs, files };
}

beforeAll(async () => {
  // What a default login shell has: files 0644 and directories 0755 unless the code says otherwise.
  umask = process.umask(0o022);
  root = mkdtempSync(join(tmpdir(), 'trine-private-'));
  // Set before `up`, so afterAll brings down whatever a failed `up` left running.
  dir = join(root, 'cluster');
  const up = await trine(['up', '--nodes', '3', '--dir', dir], 90_000);
  if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
}, 120_000);

afterAll(async () => {
  if (dir !== '') {
    await trine(['down', '--dir', dir]);
    killAll(pidsIn(dir));
  }
  if (root !== '') rmSync(root, { recursive: true, force: true });
  process.umask(umask);
}, 60_000);

describe('issue 14 item 5: a trine up cluster keeps its logs, records and task output private', () => {
  it('after a task wrote stdout and stderr, every dir under logs/ and run/ is 0700 and every file 0600', async () => {
    const r = await trine(['submit', '--dir', dir, '-n', '2', '--wait', '--', 'sh', '-c', 'echo the-secret; echo oops >&2']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const task = r.stdout.split('\n')[0] ?? '';
    const logs = await trine(['logs', task, '--dir', dir]);
    expect(logs.stdout).toContain(`[${task}/0] the-secret`);

    const [logsDir, runDir] = [modesUnder(join(dir, 'logs')), modesUnder(join(dir, 'run'))];
    const dirs = [...logsDir.dirs, ...runDir.dirs];
    const files = [...logsDir.files, ...runDir.files];
    // What is there: the daemons' logs and output, the task's output, and the run records.
    expect(dirs).toEqual(expect.arrayContaining(['logs 700', 'logs/tasks 700', `logs/tasks/${task} 700`, 'run 700']));
    expect(files).toEqual(expect.arrayContaining([
      'logs/r1.log 600', 'logs/scc.log 600', 'logs/a1.log 600', 'logs/a1-keeper.log 600', 'logs/r1.out 600', 'logs/a1.out 600',
      `logs/tasks/${task}/0.out 600`, `logs/tasks/${task}/0.err 600`, `logs/tasks/${task}/1.out 600`,
      'run/r1.pid 600', 'run/r1.inc 600', 'run/a1.procs.json 600', 'run/a1.agent-pid 600', 'run/r1.tasks 600',
    ]));
    expect(dirs.filter((d) => !d.endsWith(' 700')), 'directories open to others').toEqual([]);
    expect(files.filter((f) => !f.endsWith(' 600')), 'files open to others').toEqual([]);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  }, 60_000);
});
