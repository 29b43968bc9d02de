// The task commands' bad input, as the real CLI process sees it (issue 3 item 6): a missing
// `--` or command, a bad -n or --env, a malformed task id, a missing argument, a missing
// cluster dir → one line on stderr, exit 2, nothing created. No cluster runs here.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trine } from './helpers.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';



let root = '';
let missing = '';
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-cli-tasks-'));
  missing = join(root, 'missing');
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** One line on stderr matching `pattern`, nothing on stdout, exit 2. */
async function usage(args: string[], pattern: RegExp): Promise<void> {
  const r = await trine(args);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(/^trine: /);
  expect(r.stderr).toMatch(pattern);
  expect(r.stdout).toBe('');
  expect(r.code).toBe(2);
}

describe('trine submit: bad input', () => {
  it('no command at all', () => usage(['submit', '--dir', missing], /submit needs a command after `--`/));
  it('-- with nothing after it', () => usage(['submit', '--dir', missing, '--'], /submit needs a command after `--`/));
  it('a command without --', () => usage(['submit', '--dir', missing, 'sleep', '1'], /put the command after `--`.*trine submit -n 2 -- sleep 10/));
  it('a command with options but without --', () => usage(['submit', '--dir', missing, 'ls', '-l'], /put the command after `--`/));
  it('-n 0', () => usage(['submit', '-n', '0', '--dir', missing, '--', 'true'], /-n must be an integer from 1 to 1024.*trine submit --help/));
  it('-n not a number', () => usage(['submit', '-n', 'many', '--', 'true'], /-n must be an integer/));
  it('--env without =', () => usage(['submit', '--env', 'FOO', '--dir', missing, '--', 'true'], /--env "FOO" has no '='/));
  it('--env given twice', () => usage(['submit', '--env', 'A=1', '--env', 'A=2', '--', 'true'], /--env A is given twice/));
  it('an unknown option before --', () => usage(['submit', '--bogus', '--', 'true'], /unknown option '--bogus'.*trine submit --help/));
  it('--max-spawns out of range', () => usage(['submit', '--max-spawns', '8193', '--', 'true'], /--max-spawns must be an integer from 0 to 8192/));
  it('--name too long', () => usage(['submit', '--name', 'x'.repeat(65), '--', 'true'], /--name must have 1 to 64 characters/));
  it('no cluster dir', async () => {
    await usage(['submit', '--dir', missing, '--', 'true'], /no cluster at .*missing: run `trine up/);
    expect(existsSync(missing)).toBe(false);
  });
});

describe('trine ps / nodes / kill / logs: bad input', () => {
  it('ps with a malformed task id', () => usage(['ps', 't0', '--dir', missing], /bad task id "t0": task ids look like t1, t2.*trine ps/));
  it('kill with a malformed task id', () => usage(['kill', '3', '--dir', missing], /bad task id "3"/));
  it('logs with a malformed task id', () => usage(['logs', 'task1', '--dir', missing], /bad task id "task1"/));
  it('kill without a task', () => usage(['kill'], /missing required argument 'task'.*trine kill --help/));
  it('logs without a task', () => usage(['logs'], /missing required argument 'task'.*trine logs --help/));
  it('ps with two tasks', () => usage(['ps', 't1', 't2'], /too many arguments for 'ps'/));
  it('logs --vpid -1', () => usage(['logs', 't1', '--vpid', '-1'], /--vpid must be an integer from 0/));
  it('nodes with an argument', () => usage(['nodes', 'n1'], /too many arguments for 'nodes'/));
  it('--timeout 0', () => usage(['ps', '--timeout', '0'], /--timeout must be an integer from 1/));
  for (const args of [['ps'], ['ps', 't1'], ['nodes'], ['kill', 't1'], ['logs', 't1'], ['logs', 't1', '--follow']]) {
    it(`${args.join(' ')} with no cluster dir`, async () => {
      await usage([...args, '--dir', missing], /no cluster at .*missing: run `trine up/);
      expect(existsSync(missing)).toBe(false);
    });
  }
  it('ps on a dir that is not a cluster', () => usage(['ps', '--dir', tmpdir()], /is not a trine cluster dir/));
});
