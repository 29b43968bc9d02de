// `--json` where no cluster needs to run (issue 19 item 3; docs/OPERATIONS.md §5.1),
// the real CLI as a process:
// - errors: every command refuses a missing cluster dir, a bad flag or a bad value exactly as
//   without --json (same exit code, same one stderr line) and also prints one `trine.error/1`
//   object on stdout, whose message is that line; a `--json` after `--` is the task's, not trine's;
// - keygen and init print what they wrote as one object; down on a cluster dir with nothing
//   running says so as one; node add and shutdown from an operator bundle whose replicas are not
//   reachable fail with NO_AGREEMENT; logs prints one `trine.log/1` per line of a finished task's output
//   (read from the cluster dir, as on a one-host cluster), text that JSON must escape included.
import { existsSync, readFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterIds, paths, planCluster, writeClusterConfig } from '../../src/io/cluster-dir.ts';
import { readHostsFile } from '../../src/io/hosts-file.ts';
import { processLogPaths } from '../../src/io/spawner.ts';
import { runTrine, type Run } from './helpers.ts';
import { lines, one, type Obj } from './json-lines.ts';

const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
/** CLI processes started at once. */
const PARALLEL_RUNS = 3;
const EXAMPLE = fileURLToPath(new URL('../../examples/hosts.yaml', import.meta.url));


/** A failure under --json: one stderr line, and stdout one error object saying the same. */
function failed(r: Run, exitCode: number, code: string): string {
  expect(r.code, r.stderr).toBe(exitCode);
  const err = r.stderr.split('\n').filter((l) => l !== '');
  expect(err).toHaveLength(1);
  expect(lines(r)).toEqual([{ schema: 'trine.error/1', ok: false, exitCode, error: { code, message: (err[0] as string).replace(/^trine: /, '') } }]);
  return err[0] as string;
}

let root = '';
/** A cluster dir as `trine up` writes it, nothing running, with a finished task's output. */
let dir = '';
let missing = '';
/** What t1/0 wrote to stdout: characters JSON escapes, and a last line without a newline. */
const OUT_LINES = ['plain', 'a "quoted" word, a back\\slash and a\ttab', 'ünïcödé ✓', 'no newline at the end'];

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-cli-json-'));
  dir = join(root, 'cluster');
  missing = join(root, 'missing');
  const ids = clusterIds(3).all;
  const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
  writeClusterConfig(dir, planCluster({ nodes: 3, ports: clusterIds(3).listeners.map((_, i) => 7301 + i) }, keys));
  mkdirSync(join(paths.taskLogs(dir), 't1'), { recursive: true });
  for (const vpid of [0, 1]) {
    const p = processLogPaths(paths.taskLogs(dir), 't1', vpid);
    writeFileSync(p.out, vpid === 0 ? OUT_LINES.join('\n') : `out of ${vpid}\n`);
    writeFileSync(p.err, `err of ${vpid}\n`);
  }
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('errors under --json: the same exit code and stderr line, and one error object on stdout', () => {
  /** Each command that reads a cluster; the first few are also run without --json to compare. */
  const noCluster: string[][] = [
    ['ps'], ['submit', '--wait', '--', 'true'], ['logs', 't1', '--follow'], ['node', 'remove', 'n2'],
    ['status'], ['nodes'], ['submit', '--', 'true'], ['kill', 't1'], ['restart', 't1'], ['logs', 't1'], ['inject', 'hang', 'r1'], ['shutdown'], ['down'],
  ];
  const COMPARED = 4;
  /** `args` with `--dir missing` (and --json) before any `--`. */
  const at = (args: string[], json: boolean) => {
    const end = args.includes('--') ? args.indexOf('--') : args.length;
    return [...args.slice(0, end), '--dir', missing, ...(json ? ['--json'] : []), ...args.slice(end)];
  };
  it('every command with no cluster dir: exit 2, NO_CLUSTER; the stderr line and exit code are those without --json', async () => {
    const all = [...noCluster.map((args) => at(args, true)), ...noCluster.slice(0, COMPARED).map((args) => at(args, false))];
    const runs: Run[] = [];
    // A few at a time: a CLI process costs a few hundred ms of CPU, and the machine has two cores.
    for (let i = 0; i < all.length; i += PARALLEL_RUNS) runs.push(...(await Promise.all(all.slice(i, i + PARALLEL_RUNS).map(runTrine))));
    noCluster.forEach((args, i) => {
      const json = runs[i] as Run;
      expect(failed(json, EXIT_USAGE, 'NO_CLUSTER'), args.join(' ')).toContain(`no cluster at ${missing}`);
      // Without --json: the same line and exit code, and nothing on stdout.
      if (i < COMPARED) expect(runs[noCluster.length + i]).toEqual({ code: EXIT_USAGE, stdout: '', stderr: json.stderr });
    });
  });

  it('usage errors commander finds (an unknown flag, a bad value, an unknown command): exit 2, USAGE', async () => {
    const [flag, value, command, taskId] = await Promise.all([
      runTrine(['ps', '--json', '--bogus']), runTrine(['up', '--json', '--nodes', '2']), runTrine(['frobnicate', '--json']), runTrine(['kill', 'x1', '--json']),
    ]);
    expect(failed(flag, EXIT_USAGE, 'USAGE')).toContain("unknown option '--bogus'");
    expect(failed(value, EXIT_USAGE, 'USAGE')).toContain('--nodes must be an integer from 3 to 64');
    expect(failed(command, EXIT_USAGE, 'USAGE')).toContain("unknown command 'frobnicate'");
    expect(failed(taskId, EXIT_USAGE, 'USAGE')).toContain('bad task id "x1"');
  });

  it('--json after `--` belongs to the task: a text error, nothing on stdout', async () => {
    const r = await runTrine(['submit', '--dir', missing, '--', 'node', 'app.js', '--json']);
    expect(r.code).toBe(EXIT_USAGE);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^trine: no cluster at /);
  });

  it('a foreign dir (up) and a cluster with nothing running (inject): their codes', async () => {
    const foreign = join(root, 'foreign');
    mkdirSync(foreign);
    writeFileSync(join(foreign, 'notes.txt'), 'mine\n');
    const [up, inject] = await Promise.all([runTrine(['up', '--json', '--dir', foreign]), runTrine(['inject', '--json', 'hang', 'r1', '--dir', dir])]);
    expect(failed(up, EXIT_USAGE, 'FOREIGN_DIR')).toContain('is not a trine cluster dir');
    expect(failed(inject, EXIT_FAILED, 'NOT_RUNNING')).toContain(`no cluster is running in ${dir}`);
  });
});

describe('commands that need no running cluster, with --json', () => {
  it('keygen --json: the ids and their public keys, as keys/public.json has them; again without --force: KEYS_EXIST, exit 2', async () => {
    const d = join(root, 'keys');
    const k = one(await runTrine(['keygen', '--json', '--dir', d, '--ids', 'r1,r2,op']), 'trine.keygen/1');
    expect(k).toMatchObject({ dir: d, ids: ['r1', 'r2', 'op'], keysDir: join(d, 'keys'), publicKeysFile: join(d, 'keys', 'public.json'), clusterJsonUpdated: false });
    const table = JSON.parse(readFileSync(join(d, 'keys', 'public.json'), 'utf8')) as unknown;
    const published = Object.fromEntries(Object.entries(k['publicKeys'] as Record<string, string>));
    expect(JSON.stringify(table)).toContain(published['r1'] as string);
    expect(Object.keys(published).sort()).toEqual(['op', 'r1', 'r2']);
    for (const key of Object.values(published)) expect(Buffer.from(key, 'base64')).toHaveLength(32);
    failed(await runTrine(['keygen', '--json', '--dir', d, '--ids', 'r1']), EXIT_USAGE, 'KEYS_EXIST');
  });

  it('init --json: one object listing every bundle with its roles, ids, unit and path; down --json on a bundle: nothing running', async () => {
    const out = join(root, 'bundles');
    const init = one(await runTrine(['init', '--json', '--hosts', EXAMPLE, '--out', out]), 'trine.init/1') as Obj & {
      bundles: { host: string; address: string; roles: string[]; ids: string[]; unit: string | null; path: string }[];
    };
    const file = readHostsFile(EXAMPLE);
    expect(init.out).toBe(out);
    expect(init.installDir).toBe(file.install.dir);
    expect(init.bundles.map((b) => [b.host, b.address])).toEqual(file.hosts.map((h) => [h.id, h.address]));
    for (const b of init.bundles) expect(b.path).toBe(join(out, b.host));
    expect(init.bundles.find((b) => b.roles.includes('watchdog'))?.unit).toBe('trine-scc.service');
    expect(init.bundles.find((b) => b.host === 'n4')).toMatchObject({ ids: ['r7', 'r11', 'a4'], unit: 'trine-node.service' });
    expect(init.bundles.find((b) => b.roles.join() === 'operator')?.unit).toBeNull();
    const down = one(await runTrine(['down', '--json', '--dir', join(out, 'n1')]), 'trine.down/1');
    expect(down).toEqual({ schema: 'trine.down/1', dir: join(out, 'n1'), nothingRunning: true, stopped: [], killed: [], tasks: 0 });
    // The operator bundle's requests reach no replica (the example's addresses are not this
    // host's): no two agree, exit 1, and node add writes nothing.
    const ops = join(out, 'ops');
    const [add, shutdown] = await Promise.all([
      runTrine(['node', 'add', '--json', '--id', 'n9', '--address', '10.0.0.99', '--dir', ops, '--timeout', '200']),
      runTrine(['shutdown', '--json', '--dir', ops, '--timeout', '200']),
    ]);
    expect(failed(add, EXIT_FAILED, 'NO_AGREEMENT')).toContain('no bundle was written');
    expect(existsSync(join(out, 'n9'))).toBe(false);
    expect(failed(shutdown, EXIT_FAILED, 'NO_AGREEMENT')).toContain('the shutdown');
    failed(await runTrine(['node', 'add', '--json', '--id', 'N9!', '--address', '10.0.0.99', '--dir', ops]), EXIT_USAGE, 'USAGE');
  });

  it('logs --json: one trine.log/1 per line, by VPID, stdout before stderr; the text round-trips, escapes and all', async () => {
    const r = await runTrine(['logs', 't1', '--json', '--dir', dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n').filter((l) => l !== '')).toHaveLength(OUT_LINES.length + 3);
    expect(lines(r)).toEqual([
      ...OUT_LINES.map((line) => ({ schema: 'trine.log/1', task: 't1', vpid: 0, stream: 'out', line })),
      { schema: 'trine.log/1', task: 't1', vpid: 0, stream: 'err', line: 'err of 0' },
      { schema: 'trine.log/1', task: 't1', vpid: 1, stream: 'out', line: 'out of 1' },
      { schema: 'trine.log/1', task: 't1', vpid: 1, stream: 'err', line: 'err of 1' },
    ]);
    const err = await runTrine(['logs', 't1', '--json', '--err', '--vpid', '1', '--dir', dir]);
    expect(lines(err)).toEqual([{ schema: 'trine.log/1', task: 't1', vpid: 1, stream: 'err', line: 'err of 1' }]);
  });
});
