// Bundles keep their logs and records private (issue 14 item 5; docs/OPERATIONS.md §2, §8.2):
// `trine init --hosts examples/hosts.yaml`, run under the usual umask 022, writes every host's
// bundle with its logs/ and run/ 0700 (empty until its daemons write there, 0600 files through
// src/io/private-files.ts), its keys/ 0700 and its private keys 0600. The daemons' own files on
// a running cluster are checked in test/e2e/private-files.test.ts.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTrine } from './helpers.ts';

const EXAMPLE = fileURLToPath(new URL('../../examples/hosts.yaml', import.meta.url));
const modeOf = (path: string): number => statSync(path).mode & 0o777;

let root = '';
let umask = 0;
beforeAll(() => {
  umask = process.umask(0o022); // the CLI child inherits it
  root = mkdtempSync(join(tmpdir(), 'trine-private-bundles-'));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  process.umask(umask);
});

describe('issue 14 item 5: trine init writes private bundles', () => {
  it('every bundle of examples/hosts.yaml: the bundle, logs/, run/ and keys/ 0700, every key file 0600', async () => {
    const out = join(root, 'bundles');
    const run = await runTrine(['init', '--hosts', EXAMPLE, '--out', out]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const hosts = readdirSync(out, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(hosts.sort()).toEqual(['n1', 'n2', 'n3', 'n4', 'ops', 'watchdog']);
    for (const host of hosts) {
      const bundle = join(out, host);
      for (const sub of ['', 'logs', 'run', 'keys']) expect(modeOf(join(bundle, sub)).toString(8), `${host}/${sub}`).toBe('700');
      const keys = readdirSync(join(bundle, 'keys')).filter((f) => f !== 'public.json');
      expect(keys.length, host).toBeGreaterThan(0);
      for (const key of keys) expect(modeOf(join(bundle, 'keys', key)).toString(8), `${host}/keys/${key}`).toBe('600');
      // Nothing yet under logs/ and run/: the daemons create their files there, private.
      expect(readdirSync(join(bundle, 'logs')), host).toEqual([]);
      expect(readdirSync(join(bundle, 'run')), host).toEqual([]);
    }
  });
});
