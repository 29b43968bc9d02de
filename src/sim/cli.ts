// `npm run sim`: run seeds of the simulator and report violations (issue 2 item 8).
//   npm run sim -- --seeds N [--from S]     run seeds S .. S+N-1 (default 100 from 1)
//   npm run sim -- --seed S                 replay one seed, printing its plan and every violation
//   --agents M (default 4)   --crypto keyed|ed25519 (default keyed: keyed SHA-512)
//   --digests FILE           also write `SEED DIGEST` per seed to FILE: the digest of the seed's
//                            whole trace (src/sim/trace-digest.ts); two runs of a change that
//                            alters nothing observable write the same file (issue 16)
//   --progress-ms MS         a progress line on stderr at most every MS ms (default 5000; 0: after
//                            every seed): seeds done/total, failing so far, elapsed, ETA
//   --tasks                  task seeds instead (src/sim/task-seed.ts, issue 3): tasks, process
//                            crashes, agent deaths, power-offs, partitions, and in one seed of 20
//                            two replicas at once (A21: a cluster reset); replay with --tasks --seed S
// Prints one line per failing seed with its replay command and first violation, then (for a run
// of several seeds) the coverage: how many seeds injected each kind of fault, had each invariant
// judge something, and took each protocol path (issue 15 item 4); and ends with exactly
// `sim: N seeds, V violations`; exits 1 when V > 0, 2 on a usage error.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Progress } from '../base/progress.ts';
import { realCores } from './cores.ts';
import { describePlan, faultLabels } from './fault-plan.ts';
import type { Violation } from './invariants.ts';
import { runSeed } from './run-seed.ts';
import { describeTaskPlan, runTaskSeed, taskFaultLabels } from './task-seed.ts';
import type { SimCrypto } from './sim-signer.ts';

/** More agents than this is a typo, not a simulation: per-seed work grows with the square. */
export const MAX_SIM_AGENTS = 32;
export const DEFAULT_SIM_AGENTS = 4;
export const DEFAULT_SEEDS = 100;
/** A long run of seeds says where it stands this often on stderr (issue 19 item 5). */
export const DEFAULT_PROGRESS_MS = 5_000;

function usage(message: string): never {
  process.stderr.write(`sim: ${message}. Usage: npm run sim -- [--tasks] --seeds N [--from S] | --seed S [--agents M] [--crypto keyed|ed25519] [--digests FILE] [--progress-ms MS]\n`);
  process.exit(2);
}

function intArg(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) usage(`--${name} must be a whole number, got "${value}"`);
  const n = Number(value);
  if (n < min || n > max) usage(`--${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** The coverage summary: one line per kind (fault, workload, inv, path), each entry `name seeds`,
 *  rarest first, so a path that few seeds reach stands out. */
function coverageReport(seedsWith: ReadonlyMap<string, number>, seeds: number): string {
  const kinds = new Map<string, [string, number][]>();
  for (const [key, n] of seedsWith) {
    const space = key.indexOf(' ');
    const kind = key.slice(0, space);
    kinds.set(kind, [...(kinds.get(kind) ?? []), [key.slice(space + 1), n]]);
  }
  const lines = [`coverage (seeds of ${seeds} that reached each):`];
  for (const kind of ['fault', 'workload', 'inv', 'path']) {
    const entries = (kinds.get(kind) ?? []).sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1));
    if (entries.length > 0) lines.push(`  ${kind}: ${entries.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  }
  return `${lines.join('\n')}\n`;
}

function main(): void {
  // `npm run sim | head` closes the pipe early: stop quietly instead of crashing on EPIPE.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        seeds: { type: 'string' }, from: { type: 'string' }, seed: { type: 'string' },
        agents: { type: 'string' }, crypto: { type: 'string' }, tasks: { type: 'boolean' }, digests: { type: 'string' }, 'progress-ms': { type: 'string' }, help: { type: 'boolean', short: 'h' },
      },
      strict: true, allowPositionals: false,
    });
  } catch (e) {
    usage((e as Error).message.split('\n')[0] ?? 'bad arguments');
  }
  const v = parsed.values;
  if (v.help === true) {
    process.stdout.write('npm run sim -- [--tasks] --seeds N [--from S] | --seed S [--agents M] [--crypto keyed|ed25519] [--digests FILE] [--progress-ms MS]\n');
    return;
  }
  if (v.seed !== undefined && (v.seeds !== undefined || v.from !== undefined)) usage('--seed replays one seed; do not combine it with --seeds or --from');
  const agents = intArg('agents', v.agents, DEFAULT_SIM_AGENTS, 1, MAX_SIM_AGENTS);
  const crypto = (v.crypto ?? 'keyed') as SimCrypto;
  if (crypto !== 'keyed' && crypto !== 'ed25519') usage(`--crypto must be keyed or ed25519, got "${String(v.crypto)}"`);
  const single = v.seed !== undefined;
  const from = single ? intArg('seed', v.seed, 1, 0, 0xffffffff) : intArg('from', v.from, 1, 0, 0xffffffff);
  const count = single ? 1 : intArg('seeds', v.seeds, DEFAULT_SEEDS, 1, 100_000_000);
  const tasks = v.tasks === true;
  const progressMs = intArg('progress-ms', v['progress-ms'], DEFAULT_PROGRESS_MS, 0, 86_400_000);
  if (tasks && crypto !== 'keyed') usage('--tasks seeds use the keyed signer; drop --crypto');
  const extra = `${tasks ? ' --tasks' : ''}${agents !== DEFAULT_SIM_AGENTS ? ` --agents ${agents}` : ''}${crypto !== 'keyed' ? ` --crypto ${crypto}` : ''}`;

  const digestsTo = v.digests;
  if (digestsTo === '') usage('--digests needs a file to write');
  const digest = digestsTo !== undefined;
  const digests: string[] = [];

  let violations = 0;
  let failingSeeds = 0;
  let simulatedMs = 0;
  const started = process.hrtime.bigint();
  // Coverage: per fault label, invariant and path, the seeds that had it.
  const seedsWith = new Map<string, number>();
  const cover = (labels: readonly string[], reached: ReadonlyMap<string, number>): void => {
    for (const k of new Set([...labels, ...reached.keys()])) seedsWith.set(k, (seedsWith.get(k) ?? 0) + 1);
  };
  const fail = (seed: number, found: readonly Violation[]): void => {
    const first = found[0];
    if (first === undefined) return;
    violations += found.length;
    failingSeeds++;
    process.stdout.write(`FAIL seed ${seed} (replay: npm run sim -- --seed ${seed}${extra}): [${first.invariant}] ${first.message}\n`);
  };
  // On stderr, so stdout (the FAIL lines, the coverage, the last line) reads as before.
  const progress = single ? null : new Progress('sim', 'seeds', count, (line) => process.stderr.write(line), progressMs);
  for (let seed = from; seed < from + count; seed++) {
    runOne(seed);
    progress?.step(seed - from + 1, failingSeeds);
  }
  function runOne(seed: number): void {
    if (tasks) {
      const r = runTaskSeed(seed, { agents, cores: realCores, digest });
      if (digest) digests.push(`${seed} ${r.traceDigest ?? ''}\n`);
      simulatedMs += r.simulatedMs;
      cover(taskFaultLabels(r.plan), r.reached);
      if (single) {
        process.stdout.write(`seed ${seed}: ${describeTaskPlan(r.plan)}\n`);
        const st = r.stats;
        process.stdout.write(`  ${r.simulatedMs} ms simulated; ${r.accepted} tasks accepted; ${st.spawns} spawns, ${st.kills} kills, ` +
          `${st.reports} reports, ${st.resets} node resets, ${st.clusterResets} cluster resets, ${st.restores} restores, ${st.operatorRequests} operator requests\n`);
        for (const x of r.violations) process.stdout.write(`  [${x.invariant}] at ${x.atMs.toFixed(3)} ms: ${x.message}\n`);
      }
      fail(seed, r.violations);
      return;
    }
    const r = runSeed(seed, { agents, cores: realCores, crypto, digest });
    if (digest) digests.push(`${seed} ${r.traceDigest ?? ''}\n`);
    simulatedMs += r.simulatedMs;
    cover(faultLabels(r.plan), r.reached);
    if (single) {
      process.stdout.write(`seed ${seed}: ${describePlan(r.plan)}\n`);
      const n = r.network;
      process.stdout.write(`  ${r.simulatedMs} ms simulated, ${r.events} events, ${n.sent} frames sent, ${n.delivered} delivered, ` +
        `${n.lost} lost, ${n.duplicated} duplicated, ${n.corrupted} corrupted, ${n.partitioned} cut by partitions\n`);
      const c = r.counts;
      process.stdout.write(`  delivered: ${c.requests} requests at replicas, ${c.commands} commands at agents, ${c.notices} notices; ` +
        `${c.suspects} suspicions, ${c.terminations} terminations\n`);
      for (const x of r.violations) process.stdout.write(`  [${x.invariant}] at ${x.atMs.toFixed(3)} ms: ${x.message}\n`);
    }
    fail(seed, r.violations);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (digestsTo !== undefined) {
    try {
      writeFileSync(digestsTo, digests.join(''));
    } catch (e) {
      process.stderr.write(`sim: cannot write the digests to ${digestsTo}: ${(e as Error).message}; give a writable path\n`);
      process.exitCode = 2;
      return;
    }
  }
  if (!single) {
    process.stdout.write(coverageReport(seedsWith, count));
    process.stdout.write(`sim: ${failingSeeds} failing seeds; ${(simulatedMs / 1000).toFixed(1)} s simulated in ${seconds.toFixed(1)} s (${(count / seconds).toFixed(1)} seeds/s)\n`);
  }
  process.stdout.write(`sim: ${count} seeds, ${violations} violations\n`);
  process.exitCode = violations > 0 ? 1 : 0;
}

main();
