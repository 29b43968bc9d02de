// The compiled trine/app's loader (tools/build-lib.mjs; issue 19 item 4): dist/app/index.js
// compiles library.js with the V8 code cache the build made. Built once into a temp dir
// (`build-lib.mjs --app DIR`), then loaded by real `node` children (no loader) with the cache as
// built, missing, cut short, replaced by noise, damaged inside, and under a V8 flag that makes V8
// reject it. Whatever becomes of the cache, the entry must export what src/app/index.ts exports
// and the library must work, its DGRP tester thread included (the link's worker thread starts
// only at an agent's welcome: the build's warm-up link and test/e2e/pack.test.ts start it).
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CACHE = 'library.v8cache';
const BUILD_TIMEOUT_MS = 60_000;
const CHILD_TIMEOUT_MS = 30_000;

/** What each child reports: the loader's account of the cache, the entry's names, a DGRP test
 *  answered and checked (library code run after the load), and the two threads the library
 *  starts from files beside the entry, named from the body's import.meta.url: Link.init()'s
 *  error with a socket that does not exist ("cannot reach the agent" comes from the main thread's
 *  socket pump, worker.cjs bundled into the body), and the DGRP tester thread (tester-boot.mjs),
 *  opened for a stand-in link.
 *  A file, not \`node -e\`: the tester thread inherits the process's flags, --input-type too. */
const CHILD = `
const m = await import(process.argv[2]);
const standIn = { attachTester() {}, taskKey: new Uint8Array(32), onDgrpView() {} };
let tester = '';
try {
  const g = await m.DgrpGroup.open({ link: standIn, self: 0, options: {}, host: '127.0.0.1', port: 0,
    rankOf: () => 0, commOf: null, discardComm() {}, testModule: null });
  tester = 'started view ' + g.current.view;
} catch (e) {
  tester = 'failed ' + e.message;
}
const challenge = m.PRIMES_TEST.challenge(() => 123456);
const primesOk = m.PRIMES_TEST.check(challenge, m.PRIMES_TEST.answer(challenge));
let link = '';
try {
  await m.Link.init();
} catch (e) {
  link = (e instanceof m.LinkError ? 'LinkError ' : 'other ') + e.code + ' ' + e.message;
}
const load = globalThis[Symbol.for('trine.app.load')];
process.stdout.write(JSON.stringify({ cache: load?.cache ?? null, names: Object.keys(m).sort(), primesOk, link, tester }));
process.exit(0);
`;

type Report = { cache: string | null; names: string[]; primesOk: boolean; link: string; tester: string };

let root = '';
let built = '';

function node(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: REPO, env: { PATH: process.env.PATH, ...env }, timeout: CHILD_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`node ${args.slice(0, 2).join(' ')} failed (${error.message}):\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Load `dir`'s entry in a fresh node, as a linked process whose agent socket does not exist. */
async function load(dir: string, flags: string[] = []): Promise<Report> {
  const sock = join(root, 'no-agent.sock');
  const env = { TRINE_AGENT_SOCKET: sock, TRINE_TASK: 't1', TRINE_VPID: '0', TRINE_TOKEN: '0123456789abcdef0123456789abcdef' };
  const out = await node([...flags, join(root, 'child.mjs'), pathToFileURL(join(dir, 'index.js')).href], env);
  return JSON.parse(out) as Report;
}

/** A copy of the build whose cache `damage` rewrites (or removes). */
function damaged(name: string, damage: (cache: Buffer) => Buffer | null): string {
  const dir = join(root, name);
  cpSync(built, dir, { recursive: true });
  const next = damage(readFileSync(join(dir, CACHE)));
  if (next === null) rmSync(join(dir, CACHE));
  else writeFileSync(join(dir, CACHE), next);
  return dir;
}

/** How a cache is spoilt, and what the loader must make of it. */
const DAMAGES: [string, (c: Buffer) => Buffer | null, string][] = [
  ['missing', () => null, 'missing'],
  ['truncated', (c) => c.subarray(0, c.length >> 1), 'mismatch'],
  ['garbage', (c) => Buffer.alloc(c.length, 0xa5), 'mismatch'],
  // V8 checks a cache's header and length, not its payload: this one it would accept, and crash.
  ['damaged inside', (c) => {
    const d = Buffer.from(c);
    for (let i = d.length >> 1; i < (d.length >> 1) + 64; i++) d[i] = (d[i] as number) ^ 0x5a;
    return d;
  }, 'mismatch'],
];

let sourceNames: string[] = [];
let filesBefore: string[] = [];
/** Each case's child, all started at once: a child spends ~1.5 s in the link's connect retries,
 *  asleep, so running them side by side keeps the file to a few seconds. */
const loads = new Map<string, Promise<Report>>();

const listing = (dir: string): string[] => readdirSync(dir).map((f) => `${f} ${statSync(join(dir, f)).mtimeMs}`);

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-lib-load-'));
  built = join(root, 'app');
  writeFileSync(join(root, 'child.mjs'), CHILD);
  const names = node(['--import', 'tsx', '--input-type=module', '-e',
    `const m = await import(${JSON.stringify(pathToFileURL(join(REPO, 'src/app/index.ts')).href)}); process.stdout.write(JSON.stringify(Object.keys(m).sort()));`]);
  await node([join(REPO, 'tools', 'build-lib.mjs'), '--app', built]);
  sourceNames = JSON.parse(await names) as string[];
  filesBefore = listing(built);
  loads.set('as built', load(built));
  for (const [name, damage] of DAMAGES) loads.set(name, load(damaged(name.replace(' ', '-'), damage)));
  loads.set('rejected', load(built, ['--max-old-space-size=512']));
  // Awaited by their tests; not an unhandled rejection meanwhile.
  for (const p of loads.values()) p.catch(() => undefined);
}, BUILD_TIMEOUT_MS);

afterAll(() => {
  if (root !== '') rmSync(root, { recursive: true, force: true });
});

/** What every load must give, whatever became of the cache. */
function expectWorking(r: Report): void {
  expect(r.names).toEqual(sourceNames);
  expect(r.primesOk).toBe(true);
  expect(r.link).toMatch(/^LinkError LINK_LOST cannot reach the agent at .*no-agent\.sock/);
  expect(r.tester).toBe('started view 0');
}

describe('the compiled library loader', () => {
  it('exports every name src/app/index.ts exports, and no other', async () => {
    expect(sourceNames).toContain('Link');
    expect((await (loads.get('as built') as Promise<Report>)).names).toEqual(sourceNames);
  });

  it('uses the build\'s code cache with the build\'s own node, and writes nothing', async () => {
    const r = await (loads.get('as built') as Promise<Report>);
    expect(r.cache).toBe('used');
    expectWorking(r);
    await loads.get('rejected'); // the other child that loads this directory
    expect(listing(built)).toEqual(filesBefore);
  });

  for (const [name, , want] of DAMAGES) {
    it(`compiles from source when the cache is ${name}`, async () => {
      const r = await (loads.get(name) as Promise<Report>);
      expect(r.cache).toBe(want);
      expectWorking(r);
    });
  }

  it('compiles from source when V8 rejects the cache (other V8 flags)', async () => {
    const r = await (loads.get('rejected') as Promise<Report>);
    expect(r.cache).toBe('rejected');
    expectWorking(r);
  });
});
