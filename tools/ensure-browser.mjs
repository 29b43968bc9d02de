#!/usr/bin/env node
// `npm test`'s pretest: makes sure a Chromium is there for the dashboard's browser test
// (test/e2e/dashboard.test.ts drives it with puppeteer-core, which brings no browser of its own).
// Looks for CHROME_PATH, then `chromium` and `chromium-browser` on PATH. If none is found and
// this runs as root with apt-get (CI, a fresh container), installs Debian's `chromium` package,
// refreshing the package index first only if the install fails on a stale one. Otherwise says
// what to do and exits 1. Prints one line either way; fast when the browser is there (no
// process is started to find it).
import { spawnSync } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Names of the browser on PATH, Debian's first. */
const NAMES = ['chromium', 'chromium-browser'];
/** The longest an apt-get run may take: a first install downloads ~100 MB. */
const APT_TIMEOUT_MS = 15 * 60_000;

const executable = (path) => {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

/** The first executable named `name` on PATH, or null. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && executable(join(dir, name))) return join(dir, name);
  }
  return null;
}

/** The browser to drive: CHROME_PATH if set (it must exist), else chromium on PATH; null if none. */
export function findBrowser() {
  const given = process.env.CHROME_PATH;
  if (given !== undefined && given !== '') return executable(given) ? given : null;
  for (const name of NAMES) {
    const found = onPath(name);
    if (found !== null) return found;
  }
  return null;
}

function apt(args) {
  const r = spawnSync('apt-get', args, {
    encoding: 'utf8', timeout: APT_TIMEOUT_MS, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 * 1024 * 1024,
  });
  return { ok: r.status === 0, tail: `${r.stderr ?? ''}${r.error?.message ?? ''}`.trim().split('\n').slice(-3).join(' | ') };
}

function main() {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write('usage: node tools/ensure-browser.mjs\n' +
      'Finds Chromium for the dashboard browser test (CHROME_PATH, chromium, chromium-browser); as root with apt-get, installs Debian\'s chromium if absent.\n');
    return 0;
  }
  const found = findBrowser();
  if (found !== null) {
    process.stdout.write(`ensure-browser: ${found}\n`);
    return 0;
  }
  if (process.env.CHROME_PATH) {
    process.stderr.write(`ensure-browser: CHROME_PATH=${process.env.CHROME_PATH} is not an executable file: point it at a Chromium or Chrome, or unset it\n`);
    return 1;
  }
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!root || onPath('apt-get') === null) {
    process.stderr.write('ensure-browser: no Chromium found (CHROME_PATH, chromium, chromium-browser) for the dashboard test: ' +
      'install it (Debian/Ubuntu: `sudo apt-get install chromium`) or set CHROME_PATH to a Chromium or Chrome\n');
    return 1;
  }
  let r = apt(['install', '-y', '-q', 'chromium']);
  if (!r.ok) {
    // A stale package index names files the mirror no longer has: refresh it and try once more.
    const update = apt(['update', '-q']);
    if (update.ok) r = apt(['install', '-y', '-q', 'chromium']);
  }
  const installed = findBrowser();
  if (!r.ok || installed === null) {
    process.stderr.write(`ensure-browser: installing chromium with apt-get failed (${r.tail || 'no chromium on PATH afterwards'}): install it by hand or set CHROME_PATH\n`);
    return 1;
  }
  process.stdout.write(`ensure-browser: installed ${installed} (apt-get install chromium)\n`);
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main();
