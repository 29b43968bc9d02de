// Builds the installable `trine/app` into dist/ (`npm run build:lib`; `npm pack` runs it as its
// prepack step). Plain JavaScript so that it runs before anything is compiled.
//   - dist/app/library.js: src/app/index.ts and everything it imports from src/core and src/base,
//     msgpackr's two parts included (no package resolution at load), bundled by esbuild into one
//     CommonJS-style function. One file loads in ~30 ms of CPU where ~70 modules under the tsx
//     loader took ~220 ms (docs/PERFORMANCE.md §5, SPAWN with the compiled library). Without
//     comments or whitespace (esbuild's minifyWhitespace; names are kept, so a stack trace still
//     names its functions) and in ASCII only (non-ASCII escaped), which the loader reads as a
//     one-byte latin1 string: ~250 KB instead of ~355 and no UTF-8 decoding, ~1.5 ms less CPU.
//   - dist/app/library.v8cache: V8's code cache for library.js. Node 20 has no compile cache for
//     ES modules, so the library is compiled through vm.Script, whose `cachedData` skips the
//     compile: made here by a child `node` that runs library.js's top level once and then links
//     as a spawned process does, against the real agent socket (tools/warmup-agent.ts: welcome,
//     mapping, the worker's attach, a signal, finalize), so the functions a spawned process runs
//     until its first signal are compiled too (~2 ms less from `Link.init()` to ready), and calls
//     script.createCachedData(). It is only good for this node's V8 and flags; V8 rejects it
//     elsewhere and the body is then compiled from source.
//   - dist/app/index.js: the package's entry, a small generated ES module (loaderSource below):
//     reads library.js and the cache (nothing is written at run time: the package may be
//     read-only), uses the cache only if its SHA-256 with the body's is the build's (V8 does not
//     check a cache's payload, and a damaged one can crash the process), runs the body with its
//     own import.meta.url, and re-exports the body's names, listed here at build time.
//     Measured with bench/lib-load.ts (a fresh node importing it, p50 CPU, load ~2): ~27 ms as
//     one ES module with msgpackr external, ~22 with msgpackr bundled, ~15 now (~21 when the
//     cache goes unused).
//   - dist/app/tester-worker.js: the DGRP tester thread, bundled on its own as an ES module (a
//     chunk shared with the library measured no faster to load), which tester-boot.mjs loads when
//     it finds it beside itself; dist/app/worker.cjs and tester-boot.mjs are copied as they are
//     (plain JavaScript already). The code that starts them names them relative to its own module
//     (`new URL('./worker.cjs', import.meta.url)`, which in library.js is index.js's URL), so they
//     must sit beside index.js.
//   - dist/types/: the declarations tsc emits from the sources (tsconfig.build.json); the package's
//     `types` condition points at dist/types/src/app/index.d.ts.
// `--pack` (prepack) also swaps package.json's `exports["./app"]` from the TypeScript source, which
// the repository's own programs load under tsx, to the compiled files; `--unpack` (postpack) puts
// the repository's manifest back byte for byte. See PACKED_APP_EXPORT below for why.
// `--app DIR` builds only dist/app's JavaScript, into DIR (test/integration/lib-load.test.ts).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join, resolve as resolvePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(REPO, 'dist');
const MANIFEST = join(REPO, 'package.json');
/** The repository's own package.json while a pack is under way (restored by --unpack). */
const SAVED = join(REPO, 'package.json.repo');
/** What the repository's manifest says: its programs (tests, examples, fixtures) import
 *  'trine/app' and run under tsx, which loads the TypeScript itself. */
const REPO_APP_EXPORT = './src/app/index.ts';
/** What the packed manifest says. One package.json serves both, and no export condition tells
 *  `node --import tsx` from plain `node` (tsx adds none), so the packed copy is rewritten while
 *  npm packs (npm reads package.json from disk after prepack) and put back after. */
const PACKED_APP_EXPORT = { types: './dist/types/src/app/index.d.ts', import: './dist/app/index.js', default: './dist/app/index.js' };
/** The library itself, beside the entry (index.js) that loads it, and V8's code cache for it. */
const BODY_FILE = 'library.js';
const CACHE_FILE = 'library.v8cache';

/** msgpackr's main entry also loads its streams, iterators, record structures and, when installed,
 *  the native msgpackr-extract: ~23 ms of CPU at every process start, where the two parts the
 *  library uses (Packr, C1; useRecords off, so no structures) take ~7 ms. The repository's own
 *  install replaces msgpackr-extract with an empty package (package.json overrides), so its
 *  programs already run the pure-JavaScript decoder this imports. */
const msgpackrParts = {
  name: 'msgpackr-parts',
  setup(b) {
    b.onResolve({ filter: /^msgpackr$/ }, () => ({ path: 'msgpackr', namespace: 'msgpackr-parts' }));
    b.onLoad({ filter: /.*/, namespace: 'msgpackr-parts' }, () => ({
      contents: "export { Packr } from 'msgpackr/pack';\nexport { C1 } from 'msgpackr/unpack';\n",
      resolveDir: REPO,
    }));
  },
};

/** The body's wrapper: the parameters a CommonJS module gets, and the URL its `import.meta.url`
 *  becomes (esbuild `define`), which the loader sets to its own: the files the library starts by
 *  URL (worker.cjs, tester-boot.mjs) sit beside it. Strict, as the ES modules it was built from. */
const BODY_PARAMS = 'exports, require, module, __filename, __dirname, __trineImportMetaUrl';

/** What the build's child `node` runs to make the code cache: compile the body exactly as the
 *  loader does, run its top level, then link as a spawned process does against the real agent
 *  socket (tools/warmup-agent.ts: the mapping, the worker's attach, a signal, finalize), so the
 *  functions both run are compiled and in the cache; then write V8's cache and print the body's
 *  export names. A link that does not come up fails the build: the library is broken. */
const MAKE_CACHE = `
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
const [entry, bodyPath, cachePath, agentUrl] = process.argv.slice(1);
const { startWarmupAgent, WARMUP_SIGNAL } = await import(agentUrl);
const agent = await startWarmupAgent();
const script = new Script(readFileSync(bodyPath, 'latin1'), { filename: bodyPath });
const module = { exports: {} };
script.runInThisContext().call(module.exports, module.exports, createRequire(bodyPath), module, bodyPath,
  fileURLToPath(new URL('.', entry)), entry);
const { Link } = module.exports;
const link = await Link.init({ env: agent.env, initTimeoutMs: 20000 });
const got = new Promise((resolve) => link.on(WARMUP_SIGNAL, resolve));
await agent.attached;
agent.signal();
await got;
await link.finalize();
await agent.close();
writeFileSync(cachePath, script.createCachedData());
process.stdout.write(JSON.stringify(Object.keys(module.exports)));
`;

/** dist/app/index.js: the package's entry. Kept small (an ES module's compile has no cache in Node
 *  20); the body's names are re-exported one by one, so that `import { Link } from 'trine/app'` is
 *  checked at link time as before. */
function loaderSource(names, digest) {
  return `// trine/app's entry, generated by tools/build-lib.mjs: the library is ${BODY_FILE}, one function
// compiled through node:vm with the V8 code cache the build made (${CACHE_FILE}), which saves the
// compile of ~250 KB at every process start (Node 20 caches no ES module's compile). The cache is
// used only when it is the one built with this body (SHA-256 of both, below) and V8 accepts it (the
// same Node, the same V8 flags); otherwise the body is compiled from its source. Nothing is written.
import { createRequire } from 'node:module';

// Builtins by require(), not import: an ES module's import of node:crypto reads every export,
// webcrypto's getter included, which loads modules nothing here uses (~0.3 ms of CPU).
const require = createRequire(import.meta.url);
const { createHash } = require('node:crypto');
const { readFileSync } = require('node:fs');
const { fileURLToPath } = require('node:url');
const { Script } = require('node:vm');

const BODY = fileURLToPath(new URL('./${BODY_FILE}', import.meta.url));
const CACHE = fileURLToPath(new URL('./${CACHE_FILE}', import.meta.url));
/** SHA-256 of the body then the cache, as built. V8 checks a cache's version, flags and the
 *  source's length, not its payload: a damaged cache it accepts can crash the process. */
const DIGEST = '${digest}';

const source = readFileSync(BODY);
let cachedData;
/** What became of the cache: 'used' | 'missing' | 'mismatch' (not this body's, or damaged) |
 *  'rejected' (by V8: another Node or other V8 flags). Read by the tests. */
let cache = 'missing';
try {
  cachedData = readFileSync(CACHE);
} catch {
  cachedData = undefined;
}
if (cachedData !== undefined) {
  const digest = createHash('sha256').update(source).update(cachedData).digest('hex');
  cache = digest === DIGEST ? 'used' : 'mismatch';
  if (cache === 'mismatch') cachedData = undefined;
}
// latin1: the build keeps the body ASCII, and a one-byte string needs no UTF-8 decoding.
const script = new Script(source.toString('latin1'), cachedData === undefined ? { filename: BODY } : { filename: BODY, cachedData });
if (cache === 'used' && script.cachedDataRejected === true) cache = 'rejected';
globalThis[Symbol.for('trine.app.load')] = Object.freeze({ cache });
const module = { exports: {} };
script.runInThisContext().call(module.exports, module.exports, require, module, BODY,
  fileURLToPath(new URL('.', import.meta.url)), import.meta.url);

export const {
${names.map((n) => `  ${n},`).join('\n')}
} = module.exports;
`;
}

/** Run MAKE_CACHE in a child node: this node (the cache is V8's, for its version) with no flags and
 *  no NODE_OPTIONS (V8 rejects a cache made under other flags), and no TRINE_* (the warm-up
 *  agent's environment is the only one it links with). Returns the body's export names. */
async function makeCache(entryUrl, bodyPath, cachePath) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TRINE_') && k !== 'NODE_OPTIONS'));
  // The warm-up agent, bundled on its own into a temporary directory (never shipped).
  const tmp = mkdtempSync(join(tmpdir(), 'trine-build-warmup-'));
  try {
    const agent = join(tmp, 'warmup-agent.mjs');
    await createRequire(import.meta.url)('esbuild').build({
      absWorkingDir: REPO, entryPoints: ['tools/warmup-agent.ts'], outfile: agent, bundle: true, platform: 'node', target: 'node20',
      format: 'esm', logLevel: 'warning',
    });
    return await new Promise((resolve, reject) => {
      const args = ['--input-type=module', '-e', MAKE_CACHE, entryUrl, bodyPath, cachePath, pathToFileURL(agent).href];
      execFile(process.execPath, args, { env, timeout: WARMUP_TIMEOUT_MS }, (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`build-lib: making the code cache failed (the warm-up link, exit ${String(error.code)}):\n${stderr}`));
        else resolve(JSON.parse(stdout));
      });
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The warm-up link takes ~0.2 s; a loaded CI machine gets far more before the build fails. */
const WARMUP_TIMEOUT_MS = 60_000;

/** An export name the loader can re-export as `export const { name }`. */
const EXPORT_NAME = /^[A-Za-z_$][\w$]*$/;

async function build() {
  rmSync(DIST, { recursive: true, force: true });
  // The declarations (tsc, a few seconds) are emitted while esbuild bundles.
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const declarations = new Promise((resolve, reject) => {
    execFile(process.execPath, [tsc, '-p', join(REPO, 'tsconfig.build.json')], { cwd: REPO }, (error, stdout, stderr) => {
      if (error === null) resolve();
      else reject(new Error(`tsc (declarations) failed:\n${stdout}${stderr}`));
    });
  });
  // Both awaited: a failed tsc is not an unhandled rejection while the JavaScript builds.
  await Promise.all([buildApp(join(DIST, 'app')), declarations]);
}

/** dist/app's JavaScript, into `app` (the build's, or a directory of the tests' or a bench's). */
async function buildApp(app) {
  const esbuild = createRequire(import.meta.url)('esbuild');
  const common = {
    absWorkingDir: REPO,
    bundle: true,
    platform: 'node',
    target: 'node20',
    // msgpackr's two parts are bundled as well: resolving and loading them as packages at every
    // start cost ~4 ms of CPU of the ~27 (bench/lib-load.ts). They are the only packages the
    // library imports.
    plugins: [msgpackrParts],
    logLevel: 'warning',
  };
  const bodyPath = join(app, BODY_FILE);
  const [body] = await Promise.all([
    esbuild.build({
      ...common,
      entryPoints: ['src/app/index.ts'],
      outfile: bodyPath,
      format: 'cjs',
      metafile: true,
      define: { 'import.meta.url': '__trineImportMetaUrl' },
      banner: { js: `(function (${BODY_PARAMS}) {'use strict';` },
      footer: { js: '})' },
      // ASCII, so the loader may read it as latin1 (checked below); see the header.
      minifyWhitespace: true,
      charset: 'ascii',
      legalComments: 'none',
    }),
    esbuild.build({ ...common, entryPoints: { 'tester-worker': 'src/app/dgrp/tester-worker.ts' }, outdir: app, format: 'esm' }),
  ]);
  if (/[^\x00-\x7f]/.test(readFileSync(bodyPath, 'latin1'))) throw new Error('build-lib: the library body is not ASCII: the loader reads it as latin1');
  // vm.Script without importModuleDynamically cannot run import(): the body must have none.
  const dynamic = Object.entries(body.metafile.inputs)
    .flatMap(([file, input]) => input.imports.filter((i) => i.kind === 'dynamic-import').map((i) => `${file} → ${i.path}`));
  if (dynamic.length > 0) throw new Error(`build-lib: the library body cannot hold import(): ${dynamic.join(', ')}`);
  for (const f of ['src/app/link/worker.cjs', 'src/app/dgrp/tester-boot.mjs']) {
    copyFileSync(join(REPO, f), join(app, f.slice(f.lastIndexOf('/') + 1)));
  }
  const entry = join(app, 'index.js');
  const cachePath = join(app, CACHE_FILE);
  const names = await makeCache(pathToFileURL(entry).href, bodyPath, cachePath);
  const bad = names.filter((n) => !EXPORT_NAME.test(n) || n === 'default');
  if (names.length === 0 || bad.length > 0) throw new Error(`build-lib: the body's exports cannot be re-exported by name: ${JSON.stringify(bad)} of ${names.length}`);
  const digest = createHash('sha256').update(readFileSync(bodyPath)).update(readFileSync(cachePath)).digest('hex');
  writeFileSync(entry, loaderSource(names, digest));
}

/** Replace package.json atomically: a program starting meanwhile reads one whole manifest. */
function writeManifest(text) {
  const tmp = `${MANIFEST}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, MANIFEST);
}

async function pack() {
  const text = readFileSync(MANIFEST, 'utf8');
  const m = JSON.parse(text);
  if (m.exports?.['./app'] !== REPO_APP_EXPORT) {
    throw new Error(`package.json exports["./app"] is not ${JSON.stringify(REPO_APP_EXPORT)}: a pack left it rewritten? ` +
      `restore it with \`node tools/build-lib.mjs --unpack\` or \`git checkout package.json\``);
  }
  await build();
  writeFileSync(SAVED, text);
  m.exports['./app'] = PACKED_APP_EXPORT;
  writeManifest(`${JSON.stringify(m, null, 2)}\n`);
}

function unpack() {
  if (!existsSync(SAVED)) return;
  writeManifest(readFileSync(SAVED, 'utf8'));
  rmSync(SAVED);
}

const args = process.argv.slice(2);
const arg = args[0];
// `npm run prepack -- --help` arrives as `--pack --help`: help wins, whatever precedes it.
if (args.includes('--help') || args.includes('-h')) {
  console.log('usage: node tools/build-lib.mjs [--pack | --unpack | --app DIR]\n' +
    '  builds trine/app into dist/ (JavaScript + declarations); --pack/--unpack are npm pack\'s\n' +
    '  prepack/postpack steps (point package.json at dist/ while packing, then restore it);\n' +
    '  --app DIR builds only dist/app\'s JavaScript, into DIR (the tests; a build to compare).');
} else if (arg === '--app' && args.length === 2) {
  mkdirSync(resolvePath(args[1]), { recursive: true });
  await buildApp(resolvePath(args[1]));
} else if (args.length > 1) {
  console.error(`build-lib: one argument at most, got ${args.join(' ')} (try --help)`);
  process.exit(2);
} else if (arg === '--pack') {
  await pack();
} else if (arg === '--unpack') {
  unpack();
} else if (arg === undefined) {
  await build();
} else {
  console.error(`build-lib: unknown argument ${arg} (try --help)`);
  process.exit(2);
}
