// `npm run sim:compare -- REV [--seeds N] [--tasks-seeds M]`: whether the working tree behaves
// as commit REV did, seed for seed (issue 16: a redesign must change nothing observable). Runs
// `npm run sim -- --digests` on REV (a temporary git worktree sharing this checkout's
// node_modules) and on the working tree, for N group seeds (default 10000) and M task seeds
// (default 2000; 0 skips them), and compares the digests of each seed's whole trace
// (src/sim/trace-digest.ts). Prints the seeds that differ (replay each with `npm run sim -- --seed S`
// on both) and ends with `sim:compare: D of T seeds differ`; exits 1 when D > 0, 2 on a usage
// error. REV must have `--digests` (commit eca1deb or later). REV's digests are kept in
// node_modules/.cache/trine-sim-compare/ (a commit's trace never changes), so a second comparison
// with the same REV runs only the working tree.
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { helpFromHeader } from '../examples/common/help.ts';

helpFromHeader(import.meta.url);

function usage(message: string): never {
  process.stderr.write(`sim:compare: ${message}. Usage: npm run sim:compare -- REV [--seeds N] [--tasks-seeds M]\n`);
  process.exit(2);
}

function count(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) usage(`--${name} must be a whole number, got "${value}"`);
  return Number(value);
}

/** Seed → digest, as a `--digests` file lists them. */
function readDigests(file: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [seed, d] = line.split(' ');
    if (seed !== undefined && seed !== '' && d !== undefined) map.set(seed, d);
  }
  return map;
}

/** Seed → digest, as `npm run sim -- --digests` wrote them in `dir`. */
function digests(dir: string, args: string[], out: string): Map<string, string> {
  const r = spawnSync('node', ['--import', 'tsx', 'src/sim/cli.ts', ...args, '--digests', out], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  process.stdout.write(`  ${dir === process.cwd() ? 'working tree' : 'REV'} ${args.join(' ')}: ${last}\n`);
  if (r.status === 2) throw new Error(`npm run sim ${args.join(' ')} in ${dir} refused its arguments (does REV have --digests?)`);
  return readDigests(out);
}

/** REV's digests for `args`: from the cache when an earlier comparison computed them. */
function revDigests(commit: string, tmp: string, args: string[]): Map<string, string> {
  const cacheDir = resolve('node_modules', '.cache', 'trine-sim-compare');
  const cached = join(cacheDir, `${commit}${args.join('')}.txt`);
  if (existsSync(cached)) {
    process.stdout.write(`  REV ${args.join(' ')}: digests from ${cached}\n`);
    return readDigests(cached);
  }
  const tree = join(tmp, 'tree');
  if (!existsSync(tree)) {
    execFileSync('git', ['worktree', 'add', '--detach', tree, commit], { stdio: 'ignore' });
    symlinkSync(resolve('node_modules'), join(tree, 'node_modules'));
  }
  const out = join(tmp, 'before.txt');
  const map = digests(tree, args, out);
  mkdirSync(cacheDir, { recursive: true });
  copyFileSync(out, cached);
  return map;
}

function main(): void {
  let parsed;
  try {
    parsed = parseArgs({ options: { seeds: { type: 'string' }, 'tasks-seeds': { type: 'string' } }, allowPositionals: true, strict: true });
  } catch (e) {
    usage((e as Error).message.split('\n')[0] ?? 'bad arguments');
  }
  const [rev, ...rest] = parsed.positionals;
  if (rev === undefined || rest.length > 0) usage('give one commit to compare with');
  const seeds = count('seeds', parsed.values.seeds, 10_000);
  const taskSeeds = count('tasks-seeds', parsed.values['tasks-seeds'], 2_000);
  let commit: string;
  try {
    commit = execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    usage(`${rev} is no commit of this repository: give a hash, a tag or a branch (git log --oneline)`);
  }
  const tmp = mkdtempSync(join(tmpdir(), 'trine-sim-compare-'));
  const tree = join(tmp, 'tree');
  let differ = 0;
  let total = 0;
  try {
    const runs: string[][] = [];
    if (seeds > 0) runs.push(['--seeds', String(seeds)]);
    if (taskSeeds > 0) runs.push(['--tasks', '--seeds', String(taskSeeds)]);
    for (const args of runs) {
      const before = revDigests(commit, tmp, args);
      const after = digests(process.cwd(), args, join(tmp, 'after.txt'));
      const kind = args[0] === '--tasks' ? 'task seed' : 'seed';
      for (const [seed, d] of before) {
        total++;
        if (after.get(seed) === d) continue;
        differ++;
        if (differ <= 20) process.stdout.write(`differs: ${kind} ${seed} (replay: npm run sim -- ${args[0] === '--tasks' ? '--tasks ' : ''}--seed ${seed})\n`);
      }
      if (after.size !== before.size) throw new Error(`the two runs wrote ${before.size} and ${after.size} digests`);
    }
  } finally {
    if (existsSync(tree)) spawnSync('git', ['worktree', 'remove', '--force', tree], { stdio: 'ignore' });
    rmSync(tmp, { recursive: true, force: true });
  }
  process.stdout.write(`sim:compare: ${differ} of ${total} seeds differ from ${commit.slice(0, 7)}\n`);
  process.exitCode = differ > 0 ? 1 : 0;
}

main();
