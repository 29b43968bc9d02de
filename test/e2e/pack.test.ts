// The installable library, used the way someone outside this repository would (issue 19 item 4):
// `npm pack` the repository, `npm install` the tarball into a fresh application directory under
// the system's temp dir, run a plain-JavaScript application that imports 'trine/app' with plain
// `node` as a linked task of a real 4-node cluster, and type-check a TypeScript file against the
// declarations the tarball installed. npm installs the dependencies from its cache (the repo's
// own install filled it), so nothing here needs the network.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

/** Processes in the task. */
const SIZE = 2;
/** The application signal every process broadcasts. */
const APP_SIGNAL = 100;
/** npm pack builds the library first (esbuild and tsc); on a loaded 2-core machine that is slow. */
const PACK_TIMEOUT_MS = 240_000;
const INSTALL_TIMEOUT_MS = 120_000;
const TSC_TIMEOUT_MS = 120_000;
const TASK_TIMEOUT_MS = 90_000;

/** What the user writes: plain JavaScript, an ES module, no loader. Each process prints its rank
 *  and the task's size, broadcasts its rank, and ends once it has heard every other process's. */
const APP_JS = `import { GSIG_BROADCAST, Link } from 'trine/app';

const link = await Link.init();
console.log(\`linked vpid=\${link.vpid} size=\${link.mapping.size}\`);
const heard = new Set();
link.on(${APP_SIGNAL}, (_signum, src, _dest, arg) => {
  if (src === link.vpid) return;
  heard.add(src);
  console.log(\`heard \${arg} from \${src}\`);
});
// Broadcasts sent at once share an epoch: one is delivered, the others dropped; send again.
for (;;) {
  link.signal(${APP_SIGNAL}, GSIG_BROADCAST, link.vpid);
  if ((await link.requestOutcome()).class !== 'dropped') break;
}
// Awaiting the link keeps the process alive; the handler above has run before each wait ends.
while (heard.size < link.mapping.size - 1) await link.waitSignal();
await link.finalize();
process.exit(0);
`;

/** What a TypeScript user writes against the installed declarations. The expected error proves
 *  the types are the library's, not `any`: were 'trine/app' untyped, the directive would fail. */
const CHECK_TS = `import { GSIG_BROADCAST, Link, LinkError, type Mapping } from 'trine/app';

const link: Link = await Link.init();
const mapping: Mapping = link.mapping;
link.signal(${APP_SIGNAL}, GSIG_BROADCAST, mapping.size);
// @ts-expect-error a signal's number is a number
link.signal('${APP_SIGNAL}', GSIG_BROADCAST, 1);
export const failed = (e: unknown): boolean => e instanceof LinkError;
`;

/** A strict project as `tsc --init` makes one (skipLibCheck on: checking @types/node as well costs
 *  ~5 s of CPU). Declarations that did not resolve would make `Link` an `any`, and CHECK_TS's
 *  expected error would then be missing: tsc fails on an unused @ts-expect-error. */
const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, types: ['node'], skipLibCheck: true,
  },
  files: ['check.ts'],
};

type Run = { code: number; stdout: string; stderr: string };

function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, timeout: timeoutMs, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

const must = (r: Run, what: string): Run => {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}:\n${r.stderr}\n${r.stdout}`);
  return r;
};

let root = '';
let appDir = '';
let tarball = '';
let cluster: GmpiCluster | null = null;
let typeCheck: Promise<Run> | null = null;
const manifestBefore = readFileSync(join(REPO, 'package.json'), 'utf8');

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-pack-'));
  appDir = join(root, 'my-app');
  const packed = must(await run('npm', ['pack', '--pack-destination', root, '--silent'], REPO, PACK_TIMEOUT_MS), 'npm pack');
  tarball = join(root, packed.stdout.trim().split('\n').at(-1) ?? '');
  mkdirSync(appDir);
  writeFileSync(join(appDir, 'package.json'), JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module' }, null, 2));
  writeFileSync(join(appDir, 'app.js'), APP_JS);
  writeFileSync(join(appDir, 'check.ts'), CHECK_TS);
  writeFileSync(join(appDir, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
  // @types/node: the declarations name Node's types, as any Node library's do.
  const typesNode = (createRequire(join(REPO, 'package.json'))('@types/node/package.json') as { version: string }).version;
  const up = GmpiCluster.up('trine-pack-cluster-').then((c) => {
    cluster = c;
    return c;
  });
  up.catch(() => undefined); // awaited below, after the install: not an unhandled rejection meanwhile
  const installed = await run('npm', ['install', tarball, `@types/node@${typesNode}`, '--prefer-offline', '--no-audit', '--no-fund'], appDir, INSTALL_TIMEOUT_MS);
  if (installed.code === 0) {
    // The type check runs while the cluster starts and the task runs; its test awaits it.
    const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
    typeCheck = run(process.execPath, [tsc, '-p', appDir], appDir, TSC_TIMEOUT_MS);
  }
  await up;
  must(installed, 'npm install');
}, PACK_TIMEOUT_MS + INSTALL_TIMEOUT_MS);

afterAll(async () => {
  // A pack that failed between prepack and postpack left the packed manifest in the repository:
  // put the repository's back, as postpack would have, so later tests load the sources.
  if (existsSync(join(REPO, 'package.json.repo'))) await run(process.execPath, [join(REPO, 'tools', 'build-lib.mjs'), '--unpack'], REPO, 10_000);
  await typeCheck;
  await cluster?.down();
  if (root !== '') rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('npm pack → npm install → plain node', () => {
  it('the tarball holds the compiled library, its declarations and the CLI, not the tests', async () => {
    const files = must(await run('tar', ['-tzf', tarball], root, 10_000), 'tar').stdout.split('\n');
    for (const f of ['dist/app/index.js', 'dist/app/library.js', 'dist/app/library.v8cache', 'dist/app/worker.cjs', 'dist/app/tester-boot.mjs', 'dist/app/tester-worker.js',
      'dist/types/src/app/index.d.ts', 'bin/trine.js', 'cli/main.ts', 'package.json', 'README.md']) {
      expect(files).toContain(`package/${f}`);
    }
    expect(files.filter((f) => /^package\/(test|bench|node_modules|examples|tools)\//.test(f))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(appDir, 'node_modules', 'trine', 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    expect(manifest.exports['./app']).toMatchObject({ types: './dist/types/src/app/index.d.ts', default: './dist/app/index.js' });
    // The repository's manifest is back as it was (its programs load the TypeScript under tsx).
    expect(readFileSync(join(REPO, 'package.json'), 'utf8')).toBe(manifestBefore);
    expect(existsSync(join(REPO, 'package.json.repo'))).toBe(false);
  });

  it(`a plain-JavaScript app runs with plain node as a linked task of ${SIZE} processes`, async () => {
    const c = cluster as GmpiCluster;
    const s = await trine(['submit', '--dir', c.dir, '--linked', '-n', String(SIZE), '--cwd', appDir, '--wait', '--', process.execPath, 'app.js'], TASK_TIMEOUT_MS);
    const id = /\bt[0-9]+\b/.exec(s.stdout)?.[0] ?? '';
    const out = (v: number) => c.lines(id, v);
    const err = (v: number) => c.lines(id, v, 'err');
    expect(s.code, `submit --wait: ${s.stdout}\n${s.stderr}\n${[0, 1].map((v) => err(v).join('\n')).join('\n')}`).toBe(0);
    for (let v = 0; v < SIZE; v++) {
      expect(out(v)).toContain(`linked vpid=${v} size=${SIZE}`);
      const other = 1 - v;
      expect(out(v)).toContain(`heard ${other} from ${other}`);
      // No TypeScript loader: the process ran the tarball's JavaScript (a loader's warnings or a
      // stack through src/*.ts would show on stderr).
      expect(err(v).join('\n')).not.toMatch(/\.ts\b|tsx/);
    }
  }, TASK_TIMEOUT_MS);

  it('the installed library loads through the code cache the pack built (same node)', async () => {
    // The application's own import of 'trine/app', resolved through its node_modules.
    const probe = "await import('trine/app'); console.log(globalThis[Symbol.for('trine.app.load')].cache);";
    const r = must(await run(process.execPath, ['--input-type=module', '-e', probe], appDir, 10_000), 'node -e import');
    expect(r.stdout.trim()).toBe('used');
  });

  it('tsc type-checks a TypeScript file against the installed declarations', async () => {
    const r = await (typeCheck as Promise<Run>);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  }, TSC_TIMEOUT_MS);
});
