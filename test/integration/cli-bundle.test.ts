// bin/cli-bundle.js: the prebuilt CLI every `trine` process runs from. It must never run stale
// code: a changed, added-to or removed source makes the next start rebuild it. Exercised on a
// small tree laid out like the repo (cli/main.ts importing a module), run by a real node.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module without declarations
import { cliBundle } from '../../bin/cli-bundle.js';
import { TRINE } from './helpers.ts';

const bundleOf = cliBundle as (repo?: string) => string | null;
const CLI_BUNDLE = new URL('../../bin/cli-bundle.js', import.meta.url).href;
/** Run `bundle` as bin/trine.js does (runCli: through its code cache); what it printed. */
const runCached = (bundle: string): string =>
  execFileSync(process.execPath, ['--input-type=module', '-e', `(await import(${JSON.stringify(CLI_BUNDLE)})).runCli(${JSON.stringify(bundle)})`], { encoding: 'utf8' }).trim();
let repo: string;

const write = (rel: string, text: string): void => {
  mkdirSync(join(repo, rel, '..'), { recursive: true });
  writeFileSync(join(repo, rel), text);
};
const run = (bundle: string): string => execFileSync(process.execPath, [bundle], { encoding: 'utf8' }).trim();

beforeEach(() => {
  repo = mkdtempSync(join(tmpdir(), 'trine-bundle-'));
  write('cli/main.ts', "import { word } from '../src/word.ts';\nconst n: number = 1;\nconsole.log(word(), n);\n");
  write('src/word.ts', "export const word = (): string => 'first';\n");
});
afterEach(() => rmSync(repo, { recursive: true, force: true }));

describe('the CLI bundle', () => {
  it('is built on first use, with the TypeScript compiled, and reused while no source changes', () => {
    const b = bundleOf(repo);
    expect(b).toMatch(new RegExp(`^${join(repo, 'node_modules/.cache/trine/')}[0-9a-f]{12}/cli\\.cjs$`));
    expect(run(b as string)).toBe('first 1');
    const built = statSync(b as string).mtimeMs;
    expect(bundleOf(repo)).toBe(b);
    expect(statSync(b as string).mtimeMs).toBe(built);
    const manifest = JSON.parse(readFileSync(join(dirname(b as string), 'cli.json'), 'utf8')) as { inputs: Record<string, string> };
    expect(Object.keys(manifest.inputs).sort()).toEqual(['cli/main.ts', 'src/word.ts']);
  });

  it('is kept apart for two checkouts sharing one node_modules (worktrees): each runs its own sources', () => {
    const other = mkdtempSync(join(tmpdir(), 'trine-bundle-'));
    try {
      cpSync(join(repo, 'cli'), join(other, 'cli'), { recursive: true });
      mkdirSync(join(other, 'src'));
      writeFileSync(join(other, 'src/word.ts'), "export const word = (): string => 'other';\n");
      mkdirSync(join(repo, 'node_modules'), { recursive: true });
      symlinkSync(join(repo, 'node_modules'), join(other, 'node_modules'));
      const mine = bundleOf(repo) as string;
      const theirs = bundleOf(other) as string;
      expect(realpathSync(dirname(theirs))).not.toBe(realpathSync(dirname(mine)));
      expect(run(theirs)).toBe('other 1');
      expect(run(bundleOf(repo) as string)).toBe('first 1');
      expect(statSync(mine).mtimeMs).toBe(statSync(bundleOf(repo) as string).mtimeMs); // not rebuilt
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('is rebuilt when an imported source changes, even keeping its size', () => {
    bundleOf(repo);
    write('src/word.ts', "export const word = (): string => 'again';\n"); // same length as 'first'
    expect(run(bundleOf(repo) as string)).toBe('again 1');
  });

  it('is rebuilt when only a source\'s mtime changes (a checkout), and when a new import appears', () => {
    const manifestPath = join(dirname(bundleOf(repo) as string), 'cli.json');
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(repo, 'src/word.ts'), later, later);
    const before = readFileSync(manifestPath, 'utf8');
    bundleOf(repo);
    expect(readFileSync(manifestPath, 'utf8')).not.toBe(before);

    write('src/other.ts', "export const other = 'new';\n");
    write('cli/main.ts', "import { word } from '../src/word.ts';\nimport { other } from '../src/other.ts';\nconsole.log(word(), other);\n");
    expect(run(bundleOf(repo) as string)).toBe('first new');
  });

  it('is rebuilt when a source it was built from is gone, and refused (null) when the sources do not compile', () => {
    bundleOf(repo);
    rmSync(join(repo, 'src/word.ts'));
    // main.ts still imports it: the rebuild fails, and the caller falls back to tsx, which
    // reports the missing module as it always did.
    expect(bundleOf(repo)).toBeNull();
    write('src/word.ts', "export const word = (): string => 'back!';\n");
    expect(run(bundleOf(repo) as string)).toBe('back! 1');
  });

  it('runs through V8\'s code cache: the first run writes it, the next uses it; a damaged one, or one of another body, is not used and is written again', () => {
    write('cli/main.ts', "const load = (globalThis as Record<symbol, { cache: string } | undefined>)[Symbol.for('trine.cli.load')];\nconsole.log(load?.cache ?? 'plain', import.meta.url.endsWith('/cli.cjs'));\n");
    const b = bundleOf(repo) as string;
    const cacheFile = join(dirname(b), 'cli.v8cache');
    expect(run(b)).toBe('plain true'); // `node cli.cjs` runs it too, without the cache
    expect(runCached(b)).toBe('missing true');
    expect(runCached(b)).toBe('used true');
    const damaged = readFileSync(cacheFile);
    damaged.writeUInt8((damaged.at(-1) ?? 0) ^ 0xff, damaged.length - 1);
    writeFileSync(cacheFile, damaged);
    expect(runCached(b)).toBe('mismatch true');
    expect(runCached(b)).toBe('used true');
    // A rebuilt body drops its old cache.
    write('cli/main.ts', `${readFileSync(join(repo, 'cli/main.ts'), 'utf8')}export {};\n`);
    expect(runCached(bundleOf(repo) as string)).toBe('missing true');
  });

  it('TRINE_NO_BUNDLE=1 runs the sources under tsx: the same CLI answers either way', () => {
    const viaBundle = execFileSync(process.execPath, [TRINE, 'help'], { encoding: 'utf8' });
    const viaTsx = execFileSync(process.execPath, [TRINE, 'help'], { encoding: 'utf8', env: { ...process.env, TRINE_NO_BUNDLE: '1' } });
    expect(viaTsx).toBe(viaBundle);
    expect(viaBundle).toContain('Usage: trine');
  });
});
