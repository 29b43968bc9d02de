// `trine node add` and `trine node remove` (cli/node-admin.ts, docs/OPERATIONS.md §8.7) as an
// operator runs them, the real CLI as a process, on the bundles `trine init` wrote for the test
// hosts file (test/fixtures/hosts/host-lines.ts). No cluster runs here: every mistake is one line
// on stderr, `trine: …`, and exit 2, before anything is sent or written; a request nobody
// answers is exit 1 with nothing written. What the group does with a request (and a refusal
// leaving no file) is test/e2e/hosts-nodes.test.ts, on a running cluster.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOST_LINES } from '../fixtures/hosts/host-lines.ts';
import { expectOneErrorLine, runTrine } from './helpers.ts';

/** Every command here ends within a few seconds; past this it is stuck. */
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const trine = runTrine;
const expectOneLine = expectOneErrorLine;

let root: string;
let bundles: string;
let ops: string;
/** The bundles dir's entries and the operator's cluster.json before each command: a refused
 *  command changes neither. */
let before: { entries: string[]; config: string };

const snapshot = () => ({ entries: readdirSync(bundles).sort(), config: readFileSync(join(ops, 'cluster.json'), 'utf8') });

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-node-admin-'));
  bundles = join(root, 'bundles');
  ops = join(bundles, 'ops');
  writeFileSync(join(root, 'hosts.yaml'), ['cluster: lab', 'hosts:', ...HOST_LINES, ''].join('\n'));
  const init = await trine(['init', '--hosts', join(root, 'hosts.yaml'), '--out', bundles]);
  expect(init.code, init.stderr).toBe(0);
  before = snapshot();
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('trine node add: bad input is one line and exit 2, nothing sent or written', () => {
  const cases: [string, string[], string[]][] = [
    ['a host id already in the cluster', ['--id', 'n4', '--address', '10.0.0.15'], ['host n4 is already in cluster lab-', "(agent a4's node)", 'give the new host an id of its own']],
    ["the operator host's id", ['--id', 'ops', '--address', '10.0.0.15'], ['host ops is already in cluster', '(the operator host)']],
    ['an address already in the cluster', ['--id', 'n5', '--address', '10.0.0.14'], ['address 10.0.0.14 is already used by node n4', 'every host needs its own']],
    ["the watchdog host's address", ['--id', 'n5', '--address', '10.0.0.2'], ['address 10.0.0.2 is already used by the watchdog host (scc)']],
    ['a bad host id', ['--id', 'N5', '--address', '10.0.0.15'], ['--id "N5" is not a host id', 'lower-case letters, digits and "-"']],
    ['a host id too long', ['--id', `n${'x'.repeat(24)}`, '--address', '10.0.0.15'], ['is not a host id', 'at most 24']],
    ['a loopback address', ['--id', 'n5', '--address', '127.0.0.1'], ['--address 127.0.0.1 is not one the other hosts can dial']],
    ['a malformed address', ['--id', 'n5', '--address', '10.0.0.15;rm'], ['--address "10.0.0.15;rm" is not an IP address or a DNS name']],
    ['no --address', ['--id', 'n5'], ["required option '--address <addr>' not specified", 'run `trine node add --help` for its options']],
    ['no --id', ['--address', '10.0.0.15'], ["required option '--id <host>' not specified"]],
    ['zero slots', ['--id', 'n5', '--address', '10.0.0.15', '--slots', '0'], ['--slots must be an integer from 1 to 1024']],
    ['more spares than a node.add carries', ['--id', 'n5', '--address', '10.0.0.15', '--spares', '9'], ['--spares must be an integer from 0 to 8']],
    ['a negative spare count', ['--id', 'n5', '--address', '10.0.0.15', '--spares', '-1'], ['--spares must be an integer from 0 to 8']],
  ];
  for (const [what, args, says] of cases) {
    it(what, async () => {
      const run = await trine(['node', 'add', '--dir', ops, ...args]);
      expectOneLine(run, EXIT_USAGE, ...says);
      expect(snapshot()).toEqual(before);
    });
  }

  it("a host's bundle instead of the operator's: one line naming whose it is", async () => {
    const run = await trine(['node', 'add', '--dir', join(bundles, 'n1'), '--id', 'n5', '--address', '10.0.0.15']);
    expectOneLine(run, EXIT_USAGE, "is host n1's (replica, agent), not the operator's", 'pass the operator bundle with --dir');
    expect(snapshot()).toEqual(before);
  });

  it('a dir that is no bundle: one line saying node add needs the operator bundle', async () => {
    const run = await trine(['node', 'add', '--dir', root, '--id', 'n5', '--address', '10.0.0.15']);
    expectOneLine(run, EXIT_USAGE, `${root} is not a bundle from \`trine init\` (no bundle.json)`);
  });

  it("a host whose bundle dir is taken (the watchdog host's id): one line naming it", async () => {
    const run = await trine(['node', 'add', '--dir', ops, '--id', 'watchdog', '--address', '10.0.0.15']);
    expectOneLine(run, EXIT_USAGE, `${join(bundles, 'watchdog')} exists`, 'pass another --out');
    expect(snapshot()).toEqual(before);
  });
});

describe('trine node add with no cluster running', () => {
  it('no two replicas agree: exit 1, one line, no bundle and the operator bundle unchanged', async () => {
    const run = await trine(['node', 'add', '--dir', ops, '--id', 'n5', '--address', '10.0.0.15', '--timeout', '1000']);
    expectOneLine(run, EXIT_FAILED, 'no two replicas agreed on the outcome of the addition of n5 within 1000 ms', 'no bundle was written');
    expect(snapshot()).toEqual(before);
  });
});

describe('trine node remove: bad input is one line and exit 2', () => {
  it('a node not in the cluster', async () => {
    const run = await trine(['node', 'remove', 'n9', '--dir', ops]);
    expectOneLine(run, EXIT_USAGE, `no node n9 in ${join(ops, 'cluster.json')}`, 'use one of n1, n2, n3, n4');
  });

  it('no node named', async () => {
    const run = await trine(['node', 'remove', '--dir', ops]);
    expectOneLine(run, EXIT_USAGE, "missing required argument 'host'", 'run `trine node remove --help`');
  });

  it('an unknown node command', async () => {
    const run = await trine(['node', 'delete', 'n4']);
    expectOneLine(run, EXIT_USAGE);
  });
});
