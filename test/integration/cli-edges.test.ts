// Two rough edges of the CLI (issue 14 item 9; docs/OPERATIONS.md §1), the real CLI as a process:
// - an error quotes a 100,000-character argument cut short: one stderr line of a few hundred
//   characters at most that still says what went wrong and what to do (cli/errors.ts,
//   src/core/quoted.ts);
// - a reader that goes away early, as `trine logs T | head` does, ends the command quietly:
//   exit 0, nothing on stderr, no stack trace (cli/exit.ts); another write error is one line.
// `trine logs` reads a one-host cluster's task output from the cluster dir, so the cluster here
// is a cluster dir with a finished task's output in it, as the spawner leaves it; no daemon runs.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterIds, paths, planCluster, writeClusterConfig } from '../../src/io/cluster-dir.ts';
import { processLogPaths } from '../../src/io/spawner.ts';
import { CHILD_TIMEOUT_MS, expectOneErrorLine, NODE, runTrine, TRINE } from './helpers.ts';

const EXIT_USAGE = 2;
const LONG = 'a'.repeat(100_000);
/** An error line that echoes such an argument stays below this. */
const SHORT_LINE_CHARS = 300;
/** Lines of the task's output: megabytes, far more than a pipe holds. */
const OUTPUT_LINES = 200_000;

let root = '';
let dir = '';
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-cli-edges-'));
  dir = join(root, 'cluster');
  const ids = clusterIds(3).all;
  const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: clusterIds(3).listeners.map((_, i) => 7301 + i) }, keys));
  const out = processLogPaths(paths.taskLogs(dir), 't1', 0);
  mkdirSync(join(paths.taskLogs(dir), 't1'), { recursive: true });
  writeFileSync(out.out, Array.from({ length: OUTPUT_LINES }, (_, i) => `line ${i} of a long output`).join('\n') + '\n');
  writeFileSync(out.err, '');
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('issue 14 item 9: an error echoes a 100,000-character argument cut short', () => {
  const cases: [string, string[], string[]][] = [
    ['a bad task id (trine ps)', ['ps', LONG], ['bad task id "aaaa', '…" (100000 characters)', 'task ids look like t1, t2', 'see `trine ps`']],
    ['a bad task id (trine logs)', ['logs', LONG], ['bad task id "aaaa', '(100000 characters)', 'see `trine ps`']],
    ['a bad --env (trine submit)', ['submit', '--env', LONG, '--', 'true'], ['--env "aaaa', '(100000 characters)', "has no '='", 'write --env NAME=VALUE']],
    ['a bad option value commander refuses (trine up --nodes)', ['up', '--nodes', LONG], ["--nodes", '(100000 characters)', 'must be an integer from 3 to 64', 'run `trine up --help`']],
    ['an unknown command', [LONG], ['unknown command', '(100000 characters)', 'run `trine --help`']],
  ];
  for (const [what, args, says] of cases) {
    it(`${what}: one line shorter than ${SHORT_LINE_CHARS} characters saying what and what to do, exit 2`, async () => {
      const run = await runTrine(args);
      expectOneErrorLine(run, EXIT_USAGE, ...says);
      expect(run.stderr.trimEnd().length).toBeLessThan(SHORT_LINE_CHARS);
    });
  }

  it('a 100,000-character --dir of spaces (echoed as a path, not quoted): one line of at most 1,000 characters, at once', async () => {
    const started = Date.now();
    const run = await runTrine(['ps', '--dir', join(root, `x${' '.repeat(100_000)}y`)]);
    expectOneErrorLine(run, EXIT_USAGE, 'no cluster at', 'characters cut');
    expect(run.stderr.trimEnd().length).toBeLessThanOrEqual(1_000);
    // Joining the lines once took quadratic time on a run of spaces: minutes for this one.
    expect(Date.now() - started).toBeLessThan(CHILD_TIMEOUT_MS);
  });
});

describe('PROTOCOL §11.1: trine submit refuses a rollback task it cannot protect before sending it', () => {
  const cases: [string, string[], string[]][] = [
    ['rollback without --linked', ['submit', '--recovery', 'rollback', '--', 'true'], ['--recovery rollback needs a linked task', 'add --linked']],
    ['an interval out of range', ['submit', '--linked', '--recovery', 'rollback', '--checkpoint-interval', '5', '--', 'true'], ['--checkpoint-interval "5"', 'from 100 to 86400000']],
    ['a rollback option without --recovery rollback', ['submit', '--linked', '--logging', 'hmpl', '--', 'true'], ['--logging applies to rollback recovery only', 'add --recovery rollback']],
  ];
  for (const [what, args, says] of cases) {
    it(`${what}: one line saying what to do, exit 2`, async () => {
      expectOneErrorLine(await runTrine([...args.slice(0, 1), '--dir', dir, ...args.slice(1)]), EXIT_USAGE, ...says);
    });
  }
});

describe('issue 14 item 9: a reader that goes away ends the command quietly', () => {
  it('trine logs T into a pipe closed after the first chunk: exit 0, nothing on stderr', async () => {
    const child = spawn(NODE, [TRINE, 'logs', 't1', '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let received = 0;
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    child.stdout.once('data', (chunk: Buffer) => {
      received = chunk.length;
      child.stdout.destroy(); // `head` has had its lines
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
    clearTimeout(timer);
    expect(received, 'the first chunk arrived').toBeGreaterThan(0);
    expect(received, 'the reader left long before the end').toBeLessThan(OUTPUT_LINES * 10);
    expect(stderr).toBe('');
    expect(signal).toBeNull();
    expect(code).toBe(0);
  });

  it.skipIf(!existsSync('/dev/full'))('trine logs T > /dev/full (a full disk, not a reader gone): one line on stderr, exit 1', async () => {
    const full = openSync('/dev/full', 'w');
    try {
      const child = spawn(NODE, [TRINE, 'logs', 't1', '--dir', dir], { stdio: ['ignore', full, 'pipe'] });
      let stderr = '';
      child.stderr?.setEncoding('utf8').on('data', (s: string) => {
        stderr += s;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
      const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
      clearTimeout(timer);
      expect(stderr).toBe('trine: cannot write the output (ENOSPC): check where stdout goes\n');
      expect(code).toBe(1);
    } finally {
      closeSync(full);
    }
  });
});
