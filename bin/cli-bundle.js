// The CLI and its daemons as one prebuilt JavaScript file, so that a process starts without
// compiling TypeScript. Under the tsx loader every `trine` process (each daemon, each `trine ps`)
// spent ~0.9 s of CPU compiling and loading its modules; from the bundle it spends ~0.3 s. A
// cluster start launches a dozen processes on a machine that may have two cores, so this is the
// difference between replicas that heartbeat on time and replicas starved while their peers load.
//
// The bundle is built with esbuild (a dependency, pinned to the version tsx itself uses) into
// node_modules/.cache/trine/, beside the packages it imports, on first use and again whenever
// one of its source files changes: a manifest records each input's size and mtime. Nothing is
// committed and there is no build step to remember. TRINE_NO_BUNDLE=1 runs the sources under tsx.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Where the bundle of `repo`'s CLI lives, and what it is built from. The cache is keyed by the
 *  checkout's real path: checkouts that share one node_modules (git worktrees with a symlinked
 *  node_modules) would otherwise rebuild over each other's bundle, and one could run another's. */
function layout(repo) {
  const key = createHash('sha256').update(realpathSync(repo)).digest('hex').slice(0, 12);
  const cache = join(repo, 'node_modules', '.cache', 'trine', key);
  return { repo, entry: join(repo, 'cli', 'main.ts'), bundle: join(cache, 'cli.mjs'), manifest: join(cache, 'cli.json') };
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
  const result = esbuild.buildSync({
    absWorkingDir: l.repo,
    entryPoints: [l.entry],
    outfile: tmp,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = {};
  for (const file of Object.keys(result.metafile.inputs)) {
    const abs = resolve(l.repo, file);
    inputs[relative(l.repo, abs)] = stamp(abs);
  }
  // Renames are atomic: a concurrent start reads either the old pair or the new one.
  renameSync(tmp, l.bundle);
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
