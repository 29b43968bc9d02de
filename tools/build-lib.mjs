// Builds the installable `trine/app` into dist/ (`npm run build:lib`; `npm pack` runs it as its
// prepack step). Plain JavaScript so that it runs before anything is compiled.
//   - dist/app/index.js: src/app/index.ts and everything it imports from src/core and src/base,
//     bundled by esbuild into one ES module, msgpackr's two parts included (no package resolution
//     at load: ~4 ms of CPU, bench/lib-load.ts). One file
//     loads in ~30 ms of CPU where ~70 modules under the tsx loader took ~220 ms
//     (docs/PERFORMANCE.md §5, SPAWN with the compiled library).
//   - dist/app/tester-worker.js: the DGRP tester thread, bundled on its own (a chunk shared with
//     index.js measured no faster to load), which tester-boot.mjs loads when it finds it beside
//     itself; dist/app/worker.cjs and tester-boot.mjs are copied as they are (plain
//     JavaScript already). The code that starts them names them relative to its own module
//     (`new URL('./worker.cjs', import.meta.url)`), so they must sit in the bundle's directory.
//   - dist/types/: the declarations tsc emits from the sources (tsconfig.build.json); the package's
//     `types` condition points at dist/types/src/app/index.d.ts.
// `--pack` (prepack) also swaps package.json's `exports["./app"]` from the TypeScript source, which
// the repository's own programs load under tsx, to the compiled files; `--unpack` (postpack) puts
// the repository's manifest back byte for byte. See PACKED_APP_EXPORT below for why.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

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

async function build() {
  rmSync(DIST, { recursive: true, force: true });
  const esbuild = createRequire(import.meta.url)('esbuild');
  // The declarations (tsc, a few seconds) are emitted while esbuild bundles.
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const declarations = new Promise((resolve, reject) => {
    execFile(process.execPath, [tsc, '-p', join(REPO, 'tsconfig.build.json')], { cwd: REPO }, (error, stdout, stderr) => {
      if (error === null) resolve();
      else reject(new Error(`tsc (declarations) failed:\n${stdout}${stderr}`));
    });
  });
  await esbuild.build({
    absWorkingDir: REPO,
    entryPoints: { index: 'src/app/index.ts', 'tester-worker': 'src/app/dgrp/tester-worker.ts' },
    outdir: join(DIST, 'app'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // msgpackr's two parts are bundled as well: resolving and loading them as packages at every
    // start cost ~4 ms of CPU of the ~27 (bench/lib-load.ts). They are the only packages the
    // library imports.
    plugins: [msgpackrParts],
    logLevel: 'warning',
  });
  for (const f of ['src/app/link/worker.cjs', 'src/app/dgrp/tester-boot.mjs']) {
    copyFileSync(join(REPO, f), join(DIST, 'app', f.slice(f.lastIndexOf('/') + 1)));
  }
  await declarations;
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
  console.log('usage: node tools/build-lib.mjs [--pack | --unpack]\n' +
    '  builds trine/app into dist/ (JavaScript + declarations); --pack/--unpack are npm pack\'s\n' +
    '  prepack/postpack steps (point package.json at dist/ while packing, then restore it).');
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
