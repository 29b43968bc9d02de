// `npm run campaign:rollback`: a crash campaign against the applications with no recovery code,
// run in rollback mode (issue 17 Tests: "at least 300 crashes across the modes, all ending with
// the right answer"; PROTOCOL §11).
//
//   npm run campaign:rollback -- [--runs 100] [--per-run 3] [--node-every 4] [--modes LIST] [--pace-ms 100] [--seed 1] [--out FILE] [--keep DIR]
//
// A failed run's logs (task, daemons) and `trine ps --json` are copied to `--keep` (default
// bench/results/campaign-rollback-failures/run-N-tK) before the cluster goes.
//
// A local 4-node cluster (started with --allow-inject) serves the runs. Run k submits, in turn,
// the heat stencil and N-Queens without recovery code (master/worker, any-source receives) under
// each mode of `--modes` (logging/checkpoint: by default rbml, hmpl and cm with uncoordinated
// checkpoints, and rbml/bsco, rbml/sco, hmpl/bsco, hmpl/sco), as a linked rollback task of 4 (6
// under bsco/sco, so that some nodes hold two ranks: a checkpoint group), and kills `--per-run` of
// its processes with SIGKILL, each drawn at random among the running ones after a random delay,
// each once the previous crash's replacements run. In every `--node-every`-th run (0: never) the
// first crash is a node failure instead (`trine inject kill-node` of a node holding a rank: its
// agent, keeper, replica and every task process on it), and a fresh cluster serves the next run.
// A run passes when the task ends normally with the right
// answer: the heat stencil's checksums equal the sequential reference's bit for bit, N-Queens
// prints the known count. The table and raw results go to bench/results/campaign-rollback.json.
// A progress line goes to stderr after every run (runs done/total, failures, elapsed, ETA).
// Ctrl-C (SIGINT) or SIGTERM stops the cluster (every daemon and task process), says so in one
// line and exits 130 (143 for SIGTERM); the results so far stay.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '../common/seeded-random.ts';
import type { ClusterView, TaskView } from '../../src/core/status.ts';
import { heatReference, type HeatParams } from '../heat/heat-core.ts';
import { heatSummary } from '../heat/heat-state.ts';
import { Progress } from '../../src/base/progress.ts';

const USAGE = 'usage: npm run campaign:rollback -- [--runs N] [--per-run K] [--node-every K] [--modes rbml,hmpl,cm,rbml/bsco,…] [--pace-ms MS] [--seed S] [--out FILE] [--keep DIR]';
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const TRINE = join(REPO, 'bin', 'trine.js');

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) {
    process.stderr.write(`campaign: --${name} needs a non-negative integer\n${USAGE}\n`);
    process.exit(2);
  }
  return v;
}
const RUNS = option('runs', 100);
const PER_RUN = option('per-run', 3);
const PACE_MS = option('pace-ms', 100);
const NODE_EVERY = option('node-every', 4);
/** Where a failed run's task and agent logs are copied before the cluster goes (`--keep DIR`). */
const keepIdx = process.argv.indexOf('--keep');
const KEEP = keepIdx >= 0 ? (process.argv[keepIdx + 1] as string) : join(REPO, 'bench', 'results', 'campaign-rollback-failures');
const outIdx = process.argv.indexOf('--out');
const OUT = outIdx >= 0 ? (process.argv[outIdx + 1] as string) : join(REPO, 'bench', 'results', 'campaign-rollback.json');
/** Deterministic choices, so a campaign can be replayed. */
const random = seededRandom(option('seed', 1));

const HEAT: HeatParams = { rows: 24, cols: 8192, steps: 120 };
const heatAnswer = JSON.stringify(heatSummary(HEAT, heatReference(HEAT).grid, heatReference(HEAT).residuals));
type App = { name: 'heat' | 'nqueens'; args: string[]; ok: (out: string) => boolean };
const APPS: App[] = [
  {
    name: 'heat', args: ['examples/heat/heat.ts', '--rows', String(HEAT.rows), '--cols', String(HEAT.cols), '--steps', String(HEAT.steps), '--pace-ms', String(PACE_MS)],
    ok: (out) => out.split('\n').some((l) => l.startsWith('{"app":"heat"') && JSON.stringify(JSON.parse(l)) === heatAnswer),
  },
  // 2.5× the pace per unit: N-Queens' 90 units would end before the third crash otherwise.
  { name: 'nqueens', args: ['examples/nqueens/nqueens-rollback.ts', '--n', '11', '--pace-ms', String(Math.round(PACE_MS * 2.5))], ok: (out) => /"solutions":2680,"expected":2680,"correct":true/.test(out) },
];
/** `logging/checkpoint`, the checkpoint policy nco when absent. */
type Mode = { label: string; logging: string; checkpoint: string; size: number };
const modesIdx = process.argv.indexOf('--modes');
const MODE_LIST = modesIdx >= 0 ? (process.argv[modesIdx + 1] ?? '') : 'rbml,hmpl,cm,rbml/bsco,rbml/sco,hmpl/bsco,hmpl/sco';
const MODES: Mode[] = MODE_LIST.split(',').map((m) => {
  const [logging = '', checkpoint = 'nco'] = m.split('/');
  if (!['rbml', 'hmpl', 'cm'].includes(logging) || !['nco', 'bsco', 'sco'].includes(checkpoint)) {
    process.stderr.write(`campaign: --modes: ${JSON.stringify(m)} is not logging[/checkpoint] (rbml, hmpl, cm / nco, bsco, sco)\n${USAGE}\n`);
    process.exit(2);
  }
  return { label: checkpoint === 'nco' ? logging : `${logging}/${checkpoint}`, logging, checkpoint, size: checkpoint === 'nco' ? 4 : 6 };
});

const root = mkdtempSync(join(tmpdir(), 'trine-campaign-rollback-'));
const dir = join(root, 'cluster');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const trine = (args: string[]): string => execFileSync(process.execPath, [TRINE, args[0] as string, '--dir', dir, ...args.slice(1)], { encoding: 'utf8' });
const task = (id: string): TaskView | undefined => (JSON.parse(trine(['ps', '--json'])) as ClusterView).tasks.find((t) => t.id === id);
const output = (id: string): string => {
  let all = '';
  for (let v = 0; v < 64; v++) {
    const f = join(dir, 'logs', 'tasks', id, `${v}.out`);
    if (existsSync(f)) all += readFileSync(f, 'utf8');
  }
  return all;
};

async function until<T>(what: string, test: () => T | null | undefined | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const r = test();
    if (r !== null && r !== undefined && r !== false) return r;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(100);
  }
}

/** A process killed (`kind: 'process'`, one rank) or a node failed (every rank on it). */
/** A failed run's evidence: its task's logs, the daemons' logs and the cluster's view. */
function keepLogs(run: number, id: string): void {
  const to = join(KEEP, `run-${run}-${id}`);
  try {
    mkdirSync(to, { recursive: true });
    cpSync(join(dir, 'logs'), join(to, 'logs'), { recursive: true });
    writeFileSync(join(to, 'ps.json'), trine(['ps', '--json']));
  } catch (e) {
    process.stderr.write(`campaign: could not keep run ${run}'s logs in ${to}: ${(e as Error).message}\n`);
  }
}

type Crash = { kind: 'process' | 'node'; node: string; ranks: number[]; vpids: number[]; atMs: number; replacedMs: number | null };
type RunResult = { run: number; app: string; logging: string; task: string; crashes: Crash[]; ok: boolean; seconds: number; note: string };

async function oneRun(run: number): Promise<RunResult> {
  const mode = MODES[Math.floor(run / APPS.length) % MODES.length]!;
  // BSCO needs the ranks of a node to call snapshot() in step (SPMD, PROTOCOL §11.7); N-Queens'
  // master and workers do not, so its BSCO runs take the heat stencil.
  const app = mode.checkpoint === 'bsco' ? APPS[0]! : APPS[run % APPS.length]!;
  const logging = mode.label;
  const started = Date.now();
  const crashes: Crash[] = [];
  const id = trine(['submit', '--linked', '-n', String(mode.size), '--recovery', 'rollback', '--logging', mode.logging, '--checkpoint', mode.checkpoint, '--checkpoint-interval', '300', '--name', `rb${run}`,
    '--cwd', REPO, '--', process.execPath, '--import', 'tsx', ...app.args]).trim();
  const result = (ok: boolean, note: string): RunResult => {
    if (!ok) keepLogs(run, id);
    return { run, app: app.name, logging, task: id, crashes, ok, seconds: (Date.now() - started) / 1000, note };
  };
  try {
    await until('the task to run', () => task(id)?.state === 'running' || task(id)?.outcome != null, 60_000);
    // Not under channel memories: a CM's node failure fails the ranks that need it, visibly, by
    // design (MPICH-V assumes its CMs stable; PROTOCOL §11.6).
    const nodeRun = NODE_EVERY > 0 && run % NODE_EVERY === 0 && mode.logging !== 'cm';
    for (let k = 0; k < PER_RUN; k++) {
      await sleep(300 + random() * 1200);
      const t = task(id);
      if (t === undefined || t.outcome !== null) break;
      const live = t.procs.filter((p) => p.state === 'running' && p.pid !== null && p.rank !== null);
      if (live.length < mode.size) break;
      const victim = live[Math.floor(random() * live.length)]!;
      const kind = nodeRun && k === 0 ? 'node' : 'process';
      const hit = kind === 'node' ? live.filter((p) => p.node === victim.node) : [victim];
      const crash: Crash = { kind, node: victim.node ?? '?', ranks: hit.map((p) => p.rank!), vpids: hit.map((p) => p.vpid), atMs: Date.now(), replacedMs: null };
      try {
        if (kind === 'node') trine(['inject', 'kill-node', victim.node!]);
        else process.kill(victim.pid!, 'SIGKILL');
      } catch {
        break; // it just ended
      }
      crashes.push(crash);
      await until(`a replacement for rank(s) ${crash.ranks.join(', ')}`, () => {
        const now = task(id);
        // Under bsco/sco the crashed rank's checkpoint group is replaced with it: wait for all.
        return now === undefined || now.outcome !== null
          || (crash.ranks.every((rank, i) => now.procs.some((p) => p.rank === rank && p.vpid > crash.vpids[i]! && p.state === 'running'))
            && now.procs.filter((p) => p.rank !== null && p.state === 'running').length >= mode.size);
      }, 60_000);
      crash.replacedMs = Date.now() - crash.atMs;
    }
    const end = await until('the task to finish', () => { const t = task(id); return t?.outcome != null ? t : null; }, 180_000);
    if (end.outcome !== 'normal') return result(false, `ended ${end.outcome}: ${end.reason ?? ''}`);
    return result(app.ok(output(id)), app.ok(output(id)) ? '' : 'wrong or missing answer');
  } catch (e) {
    spawnSync(process.execPath, [TRINE, 'kill', id, '--dir', dir]);
    return result(false, (e as Error).message);
  }
}

const results: RunResult[] = [];
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number);
};
function summarize(): Record<string, unknown> {
  const table: Record<string, { runs: number; correct: number; crashes: number; nodeFailures: number; ranksKilled: number }> = {};
  for (const r of results) {
    const k = `${r.app}/${r.logging}`;
    const row = (table[k] ??= { runs: 0, correct: 0, crashes: 0, nodeFailures: 0, ranksKilled: 0 });
    row.runs++;
    row.correct += r.ok ? 1 : 0;
    row.crashes += r.crashes.length;
    row.nodeFailures += r.crashes.filter((c) => c.kind === 'node').length;
    row.ranksKilled += r.crashes.reduce((n, c) => n + c.ranks.length, 0);
  }
  const ms = results.flatMap((r) => r.crashes.flatMap((c) => (c.replacedMs === null ? [] : [c.replacedMs])));
  const summary = {
    runs: results.length, correct: results.filter((r) => r.ok).length, crashes: results.reduce((n, r) => n + r.crashes.length, 0),
    nodeFailures: results.reduce((n, r) => n + r.crashes.filter((c) => c.kind === 'node').length, 0),
    ranksKilled: results.reduce((n, r) => n + r.crashes.reduce((m, c) => m + c.ranks.length, 0), 0),
    replacedMsP50: pct(ms, 50), replacedMsP99: pct(ms, 99), perRun: PER_RUN, paceMs: PACE_MS, table,
  };
  mkdirSync(join(REPO, 'bench', 'results'), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify({ summary, results }, null, 2)}\n`);
  return summary;
}

/** Stops the cluster, once: the end, or Ctrl-C in the middle. */
let down = false;
const stop = (): void => {
  if (down) return;
  down = true;
  spawnSync(process.execPath, [TRINE, 'down', '--dir', dir], { stdio: 'inherit' });
  rmSync(root, { recursive: true, force: true });
};
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => {
  process.stderr.write(`\ncampaign interrupted (${sig}) after ${results.length} of ${RUNS} runs: stopping the cluster\n`);
  stop();
  process.exit(sig === 'SIGINT' ? 130 : 143);
});
const progress = new Progress('campaign:rollback', 'runs', RUNS, (line) => process.stderr.write(line));
try {
  const up = () => execFileSync(process.execPath, [TRINE, 'up', '--nodes', '4', '--allow-inject', '--dir', dir], { stdio: 'inherit' });
  up();
  for (let run = 1; run <= RUNS; run++) {
    const r = await oneRun(run);
    results.push(r);
    summarize();
    if (r.crashes.some((c) => c.kind === 'node') && run < RUNS) {
      // A failed node stays down: the next run gets a whole cluster again.
      spawnSync(process.execPath, [TRINE, 'down', '--dir', dir], { stdio: 'ignore' });
      rmSync(dir, { recursive: true, force: true });
      up();
    }
    const crashes = r.crashes.map((c) => `${c.kind === 'node' ? `${c.node}{r${c.ranks.join(',r')}}` : `r${c.ranks[0]}`}${c.replacedMs === null ? '' : ` ${(c.replacedMs / 1000).toFixed(1)}s`}`).join(', ');
    process.stdout.write(`run ${String(run).padStart(3)}/${RUNS} ${r.task} ${r.app}/${r.logging}: ${r.ok ? 'ok ' : 'FAIL'} ${r.seconds.toFixed(1)} s  [${crashes}]${r.note === '' ? '' : `  ${r.note}`}\n`);
    progress.step(run, results.filter((x) => !x.ok).length);
  }
} finally {
  stop();
}
const summary = summarize();
process.stdout.write(`\n${JSON.stringify(summary, null, 2)}\nraw results: ${OUT}\n`);
process.exit(summary.correct === summary.runs ? 0 : 1);
