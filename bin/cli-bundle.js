// The CLI and its daemons as one prebuilt JavaScript file, so that a process starts without
// compiling TypeScript. Under the tsx loader every `trine` process (each daemon, each `trine ps`)
// spent ~0.9 s of CPU compiling and loading its modules; from an ES-module bundle ~0.2 s; now
// ~0.1 s. A cluster start launches a dozen processes on a machine that may have two cores, so
// this is the difference between replicas that heartbeat on time and replicas starved while
// their peers load, and every `trine` command an operator types waits for it.
//
// The bundle is built with esbuild (a dependency, pinned to the version tsx itself uses) into
// node_modules/.cache/trine/, beside the packages it imports, on first use and again whenever
// one of its source files changes: a manifest records each input's size and mtime. Nothing is
// committed and there is no build step to remember. TRINE_NO_BUNDLE=1 runs the sources under tsx.
//
// It is one CommonJS-style body with the packages it uses inside (commander, ws, xstate,
// msgpackr; prom-client, pino and yaml are loaded at run time, when needed; no import(), which a
// script compiled from a code cache cannot run in Node 20), which runCli()
// compiles through node:vm with V8's code cache (cli.v8cache beside it): Node 20 caches no
// module's compile, and the bundle's ~1 MB took ~20 ms to compile and its packages ~80 ms to
// load at every start. The first run that finds no usable cache writes one as it exits (the
// functions that run compiled too), for the runs after it. The cache is used only with the
// body it was made from (a SHA-256 of both heads the file; V8 checks a cache's length, version
// and flags, not its payload, and a damaged one could crash the process).
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Where the bundle of `repo`'s CLI lives, and what it is built from. The cache is keyed by the
 *  checkout's real path: checkouts that share one node_modules (git worktrees with a symlinked
 *  node_modules) would otherwise rebuild over each other's bundle, and one could run another's. */
function layout(repo) {
  const key = createHash('sha256').update(realpathSync(repo)).digest('hex').slice(0, 12);
  const cache = join(repo, 'node_modules', '.cache', 'trine', key);
  return { repo, entry: join(repo, 'cli', 'main.ts'), bundle: join(cache, 'cli.cjs'), manifest: join(cache, 'cli.json') };
}

function stamp(path) {
  const s = statSync(path);
  return `${s.size}:${s.mtimeMs}`;
}

/** Whether the bundle on disk was built from exactly the sources now on disk. */
function fresh(l) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(l.manifest, 'utf8'));
    statSync(l.bundle);
  } catch {
    return false;
  }
  if (manifest === null || typeof manifest !== 'object' || typeof manifest.inputs !== 'object') return false;
  try {
    for (const [file, s] of Object.entries(manifest.inputs)) if (stamp(join(l.repo, file)) !== s) return false;
  } catch {
    return false; // an input was removed or renamed
  }
  return true;
}

function build(l) {
  const esbuild = createRequire(import.meta.url)('esbuild');
  const tmp = `${l.bundle}.${process.pid}.tmp`;
  try {
    buildInto(esbuild, l, tmp);
  } finally {
    rmSync(tmp, { force: true }); // renamed into place, or a failed build's
  }
}

function buildInto(esbuild, l, tmp) {
  const result = esbuild.buildSync({
    absWorkingDir: l.repo,
    entryPoints: [l.entry],
    outfile: tmp,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // Loaded at run time: optional native helpers (ws's, absent; msgpackr's, which finds its
    // addon beside its own files), and what the code loads only when it needs it (prom-client,
    // pino and yaml, by createRequire).
    external: ['bufferutil', 'utf-8-validate', 'msgpackr-extract', 'prom-client', 'pino', 'yaml'],
    // No import() in the body: a script compiled from a code cache loses the callback import()
    // needs (Node 20), and a command would fail the second time it ran. esbuild writes any
    // import() as a require() instead.
    supported: { 'dynamic-import': false },
    // The code in ASCII, so that runCli reads it as a one-byte latin1 string (kept comments may
    // not be; read as latin1 they are only garbled).
    charset: 'ascii',
    // The body's own URL, which its modules' import.meta.url becomes (runCli and a plain `node
    // cli.cjs` both define __filename).
    define: { 'import.meta.url': '__trineCliUrl' },
    // Strict, as the ES modules it is built from were.
    banner: { js: "'use strict'; var __trineCliUrl = require('node:url').pathToFileURL(__filename).href;" },
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = {};
  for (const file of Object.keys(result.metafile.inputs)) {
    const abs = resolve(l.repo, file);
    inputs[relative(l.repo, abs)] = stamp(abs);
  }
  // Renames are atomic: a concurrent start reads either the old pair or the new one. The old
  // body's cache goes too (it would be refused anyway: its digest names the old body).
  renameSync(tmp, l.bundle);
  rmSync(cachePath(l.bundle), { force: true });
  rmSync(join(dirname(l.bundle), 'cli.mjs'), { force: true }); // the ES-module bundle of earlier releases
  writeFileSync(`${l.manifest}.${process.pid}.tmp`, JSON.stringify({ inputs }));
  renameSync(`${l.manifest}.${process.pid}.tmp`, l.manifest);
}

/** The bundle's path, built or rebuilt if needed; null when it cannot be had (no esbuild, a
 *  read-only tree, a compile error: the tsx path then reports the error as it always did).
 *  `repo` is this checkout unless a test names another tree laid out the same way. */
export function cliBundle(repo = REPO) {
  if (process.env.TRINE_NO_BUNDLE === '1') return null;
  const l = layout(repo);
  if (fresh(l)) return l.bundle;
  try {
    mkdirSync(dirname(l.bundle), { recursive: true });
    build(l);
    return l.bundle;
  } catch {
    return null;
  }
}

const cachePath = (bundle) => join(dirname(bundle), 'cli.v8cache');
/** The cache file's head: SHA-256 of the body then the cache. */
const DIGEST_BYTES = 32;
const cacheDigest = (source, data) => createHash('sha256').update(source).update(data).digest();

/** Run the bundle at `bundle` (from cliBundle()) in this process, through its code cache when
 *  there is a good one (see the header); if there is none, write one when the process exits.
 *  What became of the cache ('used' | 'missing' | 'mismatch' | 'rejected') is left in
 *  globalThis[Symbol.for('trine.cli.load')] for the tests. */
export function runCli(bundle) {
  const source = readFileSync(bundle);
  const cacheFile = cachePath(bundle);
  let cachedData;
  let cache = 'missing';
  try {
    const file = readFileSync(cacheFile);
    const data = file.subarray(DIGEST_BYTES);
    cache = cacheDigest(source, data).equals(file.subarray(0, DIGEST_BYTES)) ? 'used' : 'mismatch';
    if (cache === 'used') cachedData = data;
  } catch {
    // no cache file yet
  }
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source.toString('latin1')}\n})`, { filename: bundle, cachedData });
  if (cache === 'used' && script.cachedDataRejected === true) cache = 'rejected';
  globalThis[Symbol.for('trine.cli.load')] = Object.freeze({ cache });
  if (cache !== 'used') process.once('exit', () => writeCache(script, source, bundle, cacheFile));
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(bundle), module, bundle, dirname(bundle));
}

/** Write the cache for `script`, atomically, unless the body was rebuilt meanwhile (its cache
 *  would be refused: churn); a cache that cannot be written is only a slower start. */
function writeCache(script, source, bundle, cacheFile) {
  const tmp = `${cacheFile}.${process.pid}.tmp`;
  try {
    if (!readFileSync(bundle).equals(source)) return;
    const data = script.createCachedData();
    writeFileSync(tmp, Buffer.concat([cacheDigest(source, data), data]));
    renameSync(tmp, cacheFile);
  } catch {
    rmSync(tmp, { force: true }); // read-only tree, full disk: nothing more to do
  }
}
