// The dynamic group of recommended processes on a real local cluster (issue 18;
// docs/PERFORMANCE.md §10; PROTOCOL §12): `trine up --nodes 4 --allow-inject` in a temporary dir,
// then test/fixtures/apps/dgrp-rounds-app.ts on 4 processes (rounds of one CPU-bound unit of work
// per process, dealt among the round's members), each run from the CLI as an operator would:
//   1. Overhead with no fault: the same rounds without the DGRP (`DGRP_PLAIN=1`: every process,
//      G-MPI's own barrier) and with it (tests every 1000 ms, the paper's, and every 200 ms),
//      alternated; the application's own elapsed time (first round to last).
//   2. One slow process (`trine inject slow t/3 --share 10 --period 500` from the start): the
//      plain run waits for it every round; the DGRP run removes it and deals its units to the
//      others. And the time from the injection to the removal in the group's journal.
//   3. False removals: every removal of a process that nothing slowed, in every run of 1 and 2,
//      counted with the machine's load average.
//   4. HyperQuickSort (examples/hqsort/hqsort.ts, spec 2.2.7) of HQS_COUNT numbers on 4 processes
//      with 0 to 3 of them slowed as soon as they run, on the DGRP and with --no-dgrp (every round
//      waits for every process): the program's own sort time, and that its answer is correct.
// The spec's figures to compare (spec 2.4): DGRP's overhead ~9 % against ULFM; no absolute times.
// Run alone: `node --import tsx bench/dgrp.ts`; TRINE_BENCH_DGRP_ROUNDS (3) alternated rounds.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Figure } from './crypto.ts';
import { p50 as median } from './stats.ts';
import { trine as runTrine } from '../test/e2e/helpers.ts';
import { helpFromHeader } from '../examples/common/help.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const APP = join(REPO, 'test/fixtures/apps/dgrp-rounds-app.ts');
const ROUNDS = Number(process.env.TRINE_BENCH_DGRP_ROUNDS ?? 3);
/** 40 rounds of 60 ms units: about 3 s of work per run, long enough for tests every second. */
const APP_ENV = { DGRP_ROUNDS: '40', DGRP_UNIT_MS: '60' };
const SLOW = ['--share', '10', '--period', '500'];
const POLL_MS = 200;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** The CLI as the e2e tests run it; `trine up` and a slow run get longer than its default. */
const trine = (args: string[], timeoutMs = 120_000) => runTrine(args, timeoutMs);

type Mode = { name: string; flags: string[]; env: Record<string, string> };
const MODES: Mode[] = [
  { name: 'plain', flags: [], env: { DGRP_PLAIN: '1' } },
  { name: 'dgrp-1000ms', flags: ['--dgrp'], env: {} },
  { name: 'dgrp-200ms', flags: ['--dgrp', '--dgrp-interval', '200', '--dgrp-zeta', '3'], env: {} },
];
type Outcome = { elapsedMs: number; removals: string[]; removedAfterMs: number | null; load: number; slow: boolean };

async function runOnce(dir: string, mode: Mode, slow: boolean): Promise<Outcome> {
  const env = Object.entries({ ...APP_ENV, ...mode.env }).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
  const s = await trine(['submit', '--dir', dir, '--linked', '-n', '4', '--cwd', REPO, ...env, ...mode.flags, '--', process.execPath, '--import', 'tsx', APP]);
  if (s.code !== 0) throw new Error(`submit: ${s.stderr}`);
  const id = s.stdout.trim();
  const log = (v: number) => join(dir, 'logs', 'tasks', id, `${v}.out`);
  const lines = (v: number) => { try { return readFileSync(log(v), 'utf8').split('\n').filter((l) => l !== ''); } catch { return []; } };
  let injectedAt: number | null = null;
  for (let waited = 0; ; waited += POLL_MS) {
    if (waited > 180_000) throw new Error(`${id} (${mode.name}) did not finish`);
    if (slow && injectedAt === null && lines(3).some((l) => l.includes('"round":1,'))) {
      const r = await trine(['inject', 'slow', `${id}/3`, ...SLOW, '--dir', dir]);
      if (r.code !== 0) throw new Error(`inject: ${r.stderr}`);
      injectedAt = Date.now();
    }
    if ([0, 1, 2].every((v) => lines(v).some((l) => l.includes('"done":true')))) break;
    await sleep(POLL_MS);
  }
  if (slow) await trine(['inject', 'heal', `${id}/3`, '--dir', dir]);
  const elapsed = Math.max(...[0, 1, 2].map((v) => (JSON.parse(lines(v).find((l) => l.includes('elapsedMs')) ?? '{"elapsedMs":0}') as { elapsedMs: number }).elapsedMs));
  const ps = await trine(['ps', '--dir', dir, id]);
  const removals = ps.stdout.split('\n').filter((l) => l.includes('left the DGRP'));
  let removedAfterMs: number | null = null;
  const first = removals.find((l) => l.includes(`${id}/3 left`));
  if (injectedAt !== null && first !== undefined) {
    const [h, m, sec] = (first.trim().split(/\s+/)[0] ?? '').split(':').map(Number);
    const at = new Date(injectedAt);
    at.setUTCHours(h ?? 0, m ?? 0, 0, 0);
    removedAfterMs = at.getTime() + (sec ?? 0) * 1000 - injectedAt;
  }
  // Let the cluster settle: the next run must not start while this one's processes exit.
  for (let i = 0; i < 50; i++) {
    const v = await trine(['ps', '--dir', dir, '--json', id]);
    if (v.code === 0 && (JSON.parse(v.stdout) as { tasks: { id: string; outcome: string | null }[] }).tasks.find((t) => t.id === id)?.outcome !== null) break;
    await sleep(POLL_MS);
  }
  return { elapsedMs: elapsed, removals, removedAfterMs, load: loadavg()[0] ?? 0, slow };
}

/** 8 million numbers: about 1 s of sorting on 4 processes of this machine with none slowed. */
const HQS_COUNT = 8_000_000;
const HQS = join(REPO, 'examples/hqsort/hqsort.ts');

/** One HyperQuickSort run with VPIDs 4 − slowCount … 3 slowed from the start: its sort time. */
async function hqsortOnce(dir: string, slowCount: number, dgrp: boolean): Promise<{ sortMs: number; correct: boolean; removals: number }> {
  const flags = ['--dgrp', '--dgrp-interval', '200', '--dgrp-zeta', '3'];
  const s = await trine(['submit', '--dir', dir, '--linked', '-n', '4', '--cwd', REPO, ...flags, '--', process.execPath, '--import', 'tsx', HQS, '--count', String(HQS_COUNT), ...(dgrp ? [] : ['--no-dgrp'])]);
  if (s.code !== 0) throw new Error(`submit: ${s.stderr}`);
  const id = s.stdout.trim();
  const slowed = new Set<number>();
  for (let waited = 0; ; waited += POLL_MS) {
    if (waited > 300_000) throw new Error(`${id} did not finish`);
    for (let v = 4 - slowCount; v < 4; v++) {
      if (slowed.has(v)) continue;
      const r = await trine(['inject', 'slow', `${id}/${v}`, ...SLOW, '--dir', dir]);
      if (r.code === 0) slowed.add(v);
    }
    const v = await trine(['ps', '--dir', dir, '--json', id]);
    const t = v.code === 0 ? (JSON.parse(v.stdout) as { tasks: { id: string; outcome: string | null }[] }).tasks.find((x) => x.id === id) : undefined;
    if (t !== undefined && t.outcome !== null) break;
    await sleep(POLL_MS);
  }
  const line = [0, 1, 2, 3].flatMap((v) => { try { return readFileSync(join(dir, 'logs', 'tasks', id, `${v}.out`), 'utf8').split('\n'); } catch { return []; } })
    .find((l) => l.startsWith('hqsort: sorted')) ?? '';
  const ms = /in (\d+) ms/.exec(line);
  const removals = /removals (\d+)/.exec(line);
  return { sortMs: ms === null ? NaN : Number(ms[1]), correct: line.endsWith(': correct'), removals: removals === null ? 0 : Number(removals[1]) };
}

export async function benchDgrp(): Promise<Figure[]> {
  const root = mkdtempSync(join(tmpdir(), 'trine-bench-dgrp-'));
  const dir = join(root, 'cluster');
  const figures: Figure[] = [];
  try {
    const up = await trine(['up', '--nodes', '4', '--allow-inject', '--dir', dir], 120_000);
    if (up.code !== 0) throw new Error(`trine up: ${up.stderr}`);
    const clean = new Map<string, Outcome[]>(MODES.map((m) => [m.name, []]));
    const slowRuns = new Map<string, Outcome[]>(MODES.filter((m) => m.name !== 'dgrp-1000ms').map((m) => [m.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of MODES) clean.get(mode.name)?.push(await runOnce(dir, mode, false));
      for (const mode of MODES) if (slowRuns.has(mode.name)) slowRuns.get(mode.name)?.push(await runOnce(dir, mode, true));
    }
    const med = (xs: Outcome[] | undefined) => median((xs ?? []).map((o) => o.elapsedMs));
    const plain = med(clean.get('plain'));
    figures.push({ name: 'no fault, plain G-MPI rounds (every process, its own barrier): elapsed p50', value: plain, unit: 'ms' });
    for (const m of ['dgrp-1000ms', 'dgrp-200ms']) {
      figures.push({ name: `no fault, ${m}: elapsed p50`, value: med(clean.get(m)), unit: 'ms' });
      figures.push({ name: `no fault, ${m} ÷ plain (the DGRP's overhead)`, value: med(clean.get(m)) / plain, unit: '×' });
    }
    const slowPlain = med(slowRuns.get('plain'));
    const slowDgrp = med(slowRuns.get('dgrp-200ms'));
    figures.push({ name: 'one process at 10 % (stopped 450 ms of every 500): plain, waiting for it, elapsed p50', value: slowPlain, unit: 'ms' });
    figures.push({ name: 'one process at 10 %: dgrp-200ms, removing it, elapsed p50', value: slowDgrp, unit: 'ms' });
    figures.push({ name: 'one process at 10 %: dgrp ÷ plain', value: slowDgrp / slowPlain, unit: '×' });
    const latencies = (slowRuns.get('dgrp-200ms') ?? []).flatMap((o) => (o.removedAfterMs === null ? [] : [o.removedAfterMs]));
    figures.push({ name: 'injection → removal in the journal (dgrp-200ms) p50', value: median(latencies), unit: 'ms' });
    const all = [...clean.values(), ...slowRuns.values()].flat();
    // A removal of any process but the slowed one, or of VPID 3 in a run that did not slow it.
    const falseRemovals = all.flatMap((o) => o.removals.filter((l) => !(o.slow && /\/3 left/.test(l)))).length;
    figures.push({ name: `false removals (a process nothing slowed) over ${all.length} runs of 4 processes`, value: falseRemovals, unit: 'removals' });
    figures.push({ name: 'load average (1 min) during the runs, p50', value: median(all.map((o) => o.load)), unit: '' });
    for (let slowCount = 0; slowCount <= 3; slowCount++) {
      for (const dgrp of [true, false]) {
        const r = await hqsortOnce(dir, slowCount, dgrp);
        if (!r.correct) throw new Error(`hqsort with ${slowCount} slow (${dgrp ? 'dgrp' : '--no-dgrp'}) was not correct`);
        figures.push({ name: `HyperQuickSort of ${HQS_COUNT / 1e6}M on 4, ${slowCount} slowed, ${dgrp ? 'on the DGRP' : '--no-dgrp (waits)'}: sort time (removals ${r.removals})`, value: r.sortMs, unit: 'ms' });
      }
    }
  } finally {
    await trine(['down', '--dir', dir]);
    rmSync(root, { recursive: true, force: true });
  }
  return figures;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  helpFromHeader(import.meta.url);
  for (const f of await benchDgrp()) console.log(`${f.name}: ${f.value >= 100 ? f.value.toFixed(0) : f.value.toFixed(3)} ${f.unit}`);
}
