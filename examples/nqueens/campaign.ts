// `npm run campaign:nqueens`: a fault-injection campaign against the N-Queens example (issue 4;
// spec §8.7, §9.2 A32: ≥ 200 crashes and ≥ 200 hangs, every run ending with the correct count).
//
//   npm run campaign:nqueens -- [--runs 100] [--per-run 4] [--depth 3] [--pace-ms 30] [--seed 1] [--out FILE]
//
// One local 4-node cluster serves every run. A run submits the example (n = 12) as a linked
// task of 4 processes and injects `--per-run` faults into it, alternating crashes (`kill -9`) and
// hangs (SIGSTOP) over the whole campaign, each into a process drawn at random among the task's
// live processes — the manager included — after a random delay, and only once the previous
// fault has been recovered from (a replacement is running). A run passes when the manager prints
// the correct count (14,200). The table and raw results go to bench/results/campaign-nqueens.json.
// A progress line goes to stderr after every run (runs done/total, failures, elapsed, ETA).
// Ctrl-C (SIGINT) or SIGTERM stops the cluster — every daemon and task process, a hung (stopped)
// one included — says so in one line and exits 130 (143 for SIGTERM); the results so far stay.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '../common/seeded-random.ts';
import type { ClusterView, TaskView } from '../../src/core/status.ts';
import { helpFromHeader } from '../common/help.ts';
import { Progress } from '../../src/base/progress.ts';

helpFromHeader(import.meta.url);

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const TRINE = join(REPO, 'bin', 'trine.js');
const EXPECTED = 14200;

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) {
    process.stderr.write(`campaign: --${name} needs a non-negative integer\n`);
    process.exit(2);
  }
  return v;
}
const RUNS = option('runs', 100);
const PER_RUN = option('per-run', 4);
const PACE_MS = option('pace-ms', 60);
const DEPTH = option('depth', 3);
const outIdx = process.argv.indexOf('--out');
const OUT = outIdx >= 0 ? (process.argv[outIdx + 1] as string) : join(REPO, 'bench', 'results', 'campaign-nqueens.json');
/** Deterministic choices, so a campaign can be replayed. */
const random = seededRandom(option('seed', 1));

const root = mkdtempSync(join(tmpdir(), 'trine-campaign-'));
const dir = join(root, 'cluster');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const trine = (args: string[]): string => execFileSync(process.execPath, [TRINE, args[0] as string, '--dir', dir, ...args.slice(1)], { encoding: 'utf8' });
const task = (id: string): TaskView | undefined => (JSON.parse(trine(['ps', '--json'])) as ClusterView).tasks.find((t) => t.id === id);
function appLog(id: string): string {
  let all = '';
  for (let v = 0; v < 64; v++) {
    const f = join(dir, 'logs', 'tasks', id, `${v}.out`);
    if (existsSync(f)) all += readFileSync(f, 'utf8');
  }
  return all;
}

type Injection = { kind: 'crash' | 'hang'; vpid: number; rank: number; pid: number; atMs: number; recoveredMs: number | null };
type RunResult = { run: number; task: string; injections: Injection[]; count: number | null; ok: boolean; seconds: number; note: string };

async function until<T>(what: string, test: () => T | null | undefined | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const r = test();
    if (r !== null && r !== undefined && r !== false) return r;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(100);
  }
}

let faultCounter = 0;
/** Processes this campaign SIGSTOPped: continued before the cluster stops, so each can take its
 *  SIGTERM at once rather than sit stopped through `trine down`'s grace period. */
const stoppedPids = new Set<number>();
async function oneRun(run: number): Promise<RunResult> {
  const started = Date.now();
  let id: string;
  try {
    id = submitRun(run);
  } catch (e) {
    return { run, task: '-', injections: [], count: null, ok: false, seconds: 0, note: `submit failed: ${(e as Error).message}` };
  }
  return inject(run, id, started);
}

function submitRun(run: number): string {
  return trine(['submit', '--linked', '-n', '4', '--name', `nq${run}`, '--cwd', REPO, '--', process.execPath, '--import', 'tsx',
    'examples/nqueens/nqueens.ts', '--n', '12', '--depth', String(DEPTH), '--pace-ms', String(PACE_MS)]).trim();
}

async function inject(run: number, id: string, started: number): Promise<RunResult> {
  const injections: Injection[] = [];
  const result = (ok: boolean, note: string): RunResult => {
    const m = /RESULT n=12 solutions=(\d+)/.exec(appLog(id));
    const count = m === null ? null : Number(m[1]);
    return { run, task: id, injections, count, ok: ok && count === EXPECTED, seconds: (Date.now() - started) / 1000, note };
  };
  try {
    await until('4 processes agreed on the quorum', () => (appLog(id).match(/quorum 3/g) ?? []).length >= 4, 60_000);
    for (let k = 0; k < PER_RUN; k++) {
      await sleep(200 + random() * 800);
      const t = task(id);
      if (t === undefined || t.outcome !== null || /RESULT/.test(appLog(id))) break;
      const live = t.procs.filter((p) => p.state === 'running' && p.pid !== null);
      if (live.length < 4) break;
      const victim = live[Math.floor(random() * live.length)];
      if (victim?.pid == null) break;
      const kind = faultCounter % 2 === 0 ? 'crash' : 'hang';
      faultCounter++;
      const rank = live.map((p) => p.vpid).sort((a, b) => a - b).indexOf(victim.vpid);
      const inj: Injection = { kind, vpid: victim.vpid, rank, pid: victim.pid, atMs: Date.now(), recoveredMs: null };
      injections.push(inj);
      try {
        process.kill(victim.pid, kind === 'crash' ? 'SIGKILL' : 'SIGSTOP');
        if (kind === 'hang') stoppedPids.add(victim.pid);
      } catch {
        injections.pop();
        faultCounter--;
        break; // it just ended
      }
      // Recovered: a replacement runs, and every live process rebuilt its communicator.
      const before = (appLog(id).match(/recoverComm: SUCCESS/g) ?? []).length;
      await until(`recovery from the ${kind} of vpid ${victim.vpid}`, () => {
        const now = task(id);
        if (now === undefined || now.outcome !== null) return true;
        const running = now.procs.filter((p) => p.state === 'running').length;
        return running >= 4 && (appLog(id).match(/recoverComm: SUCCESS/g) ?? []).length >= before + 3;
      }, 90_000);
      inj.recoveredMs = Date.now() - inj.atMs;
    }
    await until('the task to finish', () => task(id)?.outcome != null, 180_000);
    return result(true, '');
  } catch (e) {
    const r = result(false, (e as Error).message);
    spawnSync(process.execPath, [TRINE, 'kill', id, '--dir', dir]);
    return r;
  }
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number);
};

const results: RunResult[] = [];
/** The summary so far, written after every run: a campaign stopped early keeps its results. */
function summarize(): Record<string, unknown> {
  const all = results.flatMap((r) => r.injections);
  const of = (kind: 'crash' | 'hang') => all.filter((i) => i.kind === kind);
  const ms = (kind: 'crash' | 'hang') => of(kind).flatMap((i) => (i.recoveredMs === null ? [] : [i.recoveredMs]));
  const summary = {
    runs: results.length,
    correct: results.filter((r) => r.ok).length,
    crashes: of('crash').length,
    hangs: of('hang').length,
    crashRecoveryMsP50: pct(ms('crash'), 50),
    crashRecoveryMsP99: pct(ms('crash'), 99),
    hangRecoveryMsP50: pct(ms('hang'), 50),
    hangRecoveryMsP99: pct(ms('hang'), 99),
    managerFaults: all.filter((i) => i.rank === 0).length,
    paceMs: PACE_MS,
    depth: DEPTH,
    perRun: PER_RUN,
  };
  mkdirSync(join(REPO, 'bench', 'results'), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify({ summary, results }, null, 2)}\n`);
  return summary;
}

/** Stops the cluster: every daemon, and every task process (`trine down`), once. */
let down = false;
function stop(): void {
  if (down) return;
  down = true;
  for (const pid of stoppedPids) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone already
    }
  }
  spawnSync(process.execPath, [TRINE, 'down', '--dir', dir], { stdio: 'inherit' });
  rmSync(root, { recursive: true, force: true });
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    process.stderr.write(`\ncampaign interrupted (${sig}) after ${results.length} of ${RUNS} runs: stopping the cluster\n`);
    stop();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  });
}

const progress = new Progress('campaign:nqueens', 'runs', RUNS, (line) => process.stderr.write(line));
try {
  execFileSync(process.execPath, [TRINE, 'up', '--nodes', '4', '--dir', dir], { stdio: 'inherit' });
  for (let run = 1; run <= RUNS; run++) {
    const r = await oneRun(run);
    results.push(r);
    const faults = r.injections.map((i) => `${i.kind} r${i.rank}${i.recoveredMs === null ? '' : ` ${(i.recoveredMs / 1000).toFixed(1)}s`}`).join(', ');
    summarize();
    process.stdout.write(`run ${String(run).padStart(3)} ${r.task}: ${r.ok ? 'ok ' : 'FAIL'} count=${r.count ?? '-'} ${r.seconds.toFixed(1)} s  [${faults}]${r.note === '' ? '' : `  ${r.note}`}\n`);
    progress.step(run, results.filter((x) => !x.ok).length);
  }
} finally {
  stop();
}

const summary = summarize();
process.stdout.write(`\n${JSON.stringify(summary, null, 2)}\nraw results: ${OUT}\n`);
process.exit(summary.correct === summary.runs ? 0 : 1);
