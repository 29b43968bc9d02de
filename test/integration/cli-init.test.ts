// `trine init`, `trine node run --bundle` and `trine scc run --bundle` (cli/node-run.ts,
// docs/OPERATIONS.md §8) as an operator runs them: the real CLI as a process. Success prints one
// line per bundle; every mistake is exactly one line on stderr, `trine: …`, naming the problem,
// and exit code 2, before anything is written or started. A child that unexpectedly keeps
// running is killed after 20 s, and so is anything it started (found by the test's dir).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeDeployment } from '../../src/io/deploy.ts';
import { readHostsFile } from '../../src/io/hosts-file.ts';
import { processesMentioning } from '../e2e/helpers.ts';
import { expectOneErrorLine, killAll, runTrine, type Run } from './helpers.ts';
import { HOST_LINES as HOSTS } from '../fixtures/hosts/host-lines.ts';

const EXAMPLE = fileURLToPath(new URL('../../examples/hosts.yaml', import.meta.url));
const EXIT_USAGE = 2;
const trine = runTrine;
const expectUsageError = (run: Run, ...says: string[]): void => expectOneErrorLine(run, EXIT_USAGE, ...says);

let root: string;
/** Bundles of examples/hosts.yaml, for the `run` commands. */
let bundles: string;

/** A hosts file in the test's dir with HOSTS line `i` replaced (or removed, for null). */
function hostsFile(name: string, changes: Record<number, string | null>): string {
  const lines = HOSTS.flatMap((line, i) => (i in changes ? (changes[i] === null ? [] : [changes[i] as string]) : [line]));
  const path = join(root, name);
  writeFileSync(path, ['cluster: lab', 'hosts:', ...lines, ''].join('\n'));
  return path;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-cli-init-'));
  bundles = join(root, 'bundles');
  writeDeployment(readHostsFile(EXAMPLE), bundles);
});

afterEach(() => {
  // Nothing here may start a daemon; if one did, kill it and say so.
  const stray = processesMentioning(root);
  killAll(stray);
  expect(stray, 'processes left running from the test dir').toEqual([]);
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('trine init', () => {
  it('writes the bundles of examples/hosts.yaml and prints one line per bundle (exit 0)', async () => {
    const out = join(root, 'init-ok');
    const run = await trine(['init', '--hosts', EXAMPLE, '--out', out]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const file = readHostsFile(EXAMPLE);
    expect(readdirSync(out).sort()).toEqual([...file.hosts.map((h) => h.id), 'cluster.json'].sort());
    const lines = run.stdout.split('\n').filter((l) => l !== '');
    const cluster = (JSON.parse(readFileSync(join(out, 'cluster.json'), 'utf8')) as { cluster: string }).cluster;
    expect(lines[0]).toBe(`cluster ${cluster}: 6 bundles in ${out}`);
    const bundleLines = lines.filter((l) => l.startsWith('  '));
    expect(bundleLines).toHaveLength(file.hosts.length);
    for (const h of file.hosts) {
      const mine = bundleLines.filter((l) => l.includes(`${join(out, h.id)}/`));
      expect(mine, h.id).toHaveLength(1);
      expect(mine[0]).toContain(` ${h.id} ${h.address} `);
    }
    expect(bundleLines.find((l) => l.includes(' watchdog '))).toContain('(trine-scc.service)');
    expect(bundleLines.find((l) => l.includes(' ops '))).toContain('(no unit)');
    expect(bundleLines.find((l) => l.includes(' n4 '))).toContain('keys: r7 r11 a4  (trine-node.service)');
    expect(lines[lines.length - 1]).toContain('every bundle holds that host\'s keys only');
  });

  const refused = [
    ['a duplicate address', { 1: '  - { id: n2, address: 10.0.0.11, roles: [replica, agent] }' }, ['hosts[1] (n2)', 'address 10.0.0.11 is already used by n1']],
    ['an unknown role', { 3: '  - { id: n4, address: 10.0.0.14, roles: [agnet] }' }, ['hosts[3] (n4)', 'unknown role "agnet"', 'use replica, agent, watchdog, operator']],
    ['no watchdog', { 4: null }, ['no host has the watchdog role', 'a cluster needs exactly one']],
  ] as const;
  for (const [what, changes, says] of refused) {
    it(`a hosts file with ${what}: one line naming it, exit 2, nothing written`, async () => {
      const hosts = hostsFile(`${what.replace(/ /g, '-')}.yaml`, changes);
      const out = join(root, `out-${what.replace(/ /g, '-')}`);
      const run = await trine(['init', '--hosts', hosts, '--out', out]);
      expectUsageError(run, `${hosts}: `, ...says);
      expect(existsSync(out)).toBe(false);
    });
  }

  it('a missing --hosts file: one line naming it, exit 2', async () => {
    const hosts = join(root, 'no-such-hosts.yaml');
    const out = join(root, 'out-missing');
    const run = await trine(['init', '--hosts', hosts, '--out', out]);
    expectUsageError(run, `cannot read ${hosts} (ENOENT)`, 'pass the hosts file with --hosts');
    expect(existsSync(out)).toBe(false);
  });

  it('no --hosts at all: one line naming the option, exit 2', async () => {
    const run = await trine(['init', '--out', join(root, 'out-no-option')]);
    expectUsageError(run, '--hosts');
  });

  it('an existing non-empty --out dir: one line naming it, exit 2, the dir untouched', async () => {
    const out = join(root, 'out-taken');
    mkdirSync(out);
    writeFileSync(join(out, 'keep.txt'), 'mine\n');
    const run = await trine(['init', '--hosts', EXAMPLE, '--out', out]);
    expectUsageError(run, `${out} exists and is not empty`, 'pass a new --out');
    expect(readdirSync(out)).toEqual(['keep.txt']);
  });
});

describe('trine node run / scc run --bundle: the wrong bundle fails before anything starts', () => {
  it('node run on a dir without bundle.json: one line, exit 2', async () => {
    const dir = join(root, 'not-a-bundle');
    mkdirSync(dir);
    const run = await trine(['node', 'run', '--bundle', dir]);
    expectUsageError(run, `${dir} is not a Trine bundle (no bundle.json)`, 'pass the directory `trine init` wrote for this host');
    expect(readdirSync(dir)).toEqual([]);
  });

  it("node run on the watchdog host's bundle: one line pointing at `trine scc run`, exit 2", async () => {
    const dir = join(bundles, 'watchdog');
    const run = await trine(['node', 'run', '--bundle', dir]);
    expectUsageError(run, "host watchdog's (watchdog)", 'runs no node', 'use `trine scc run`');
    expect(readdirSync(join(dir, 'run'))).toEqual([]);
  });

  it("scc run on an agent host's bundle: one line pointing at `trine node run`, exit 2", async () => {
    const dir = join(bundles, 'n1');
    const run = await trine(['scc', 'run', '--bundle', dir]);
    expectUsageError(run, "host n1's (replica, agent)", 'runs no watchdog', 'use `trine node run`');
    expect(readdirSync(join(dir, 'run'))).toEqual([]);
  });
});
