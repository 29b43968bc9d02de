// Rollback recovery under channel memories end to end on a real local cluster (issue 17,
// PROTOCOL §11.6; mpichv-dgrp 1.2.1–1.2.4, 1.6): programs with no recovery code
// (examples/heat, examples/nqueens/nqueens-rollback.ts) submitted with `--recovery rollback
// --logging cm`, a process killed with SIGKILL mid-run. Every message went through its
// receiver's home CM (its protector); the group replaces the dead rank with a fresh VPID, which
// fetches its checkpoint and log from its CM, replays them in the CM's order (no determinants,
// even for N-Queens' any-source receives) and goes on from the CM; the task ends normally and
// the answer equals a failure-free run's bit for bit. GMPI_DUMP=1 prints every task's logs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { ProcView, TaskView } from '../../src/core/status.ts';
import { heatReference, type HeatParams } from '../../examples/heat/heat-core.ts';
import { heatSummary } from '../../examples/heat/heat-state.ts';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

/** The first stderr line of `vpid` matching `re`, once there is one. */
async function errLine(id: string, vpid: number, re: RegExp, ms = REPLACE_MS): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const hit = cluster.lines(id, vpid, 'err').find((l) => re.test(l));
    if (hit !== undefined) return hit;
    if (Date.now() > deadline) throw new Error(`no ${re} on ${id}/${vpid}'s stderr:\n${await diagnose(id)}`);
    await sleep(POLL_MS);
  }
}

/** How long a run may take on this loaded 2-core machine, from submit to its end. */
const RUN_MS = 60_000;
/** How long a killed rank's replacement may take to run. */
const REPLACE_MS = 30_000;
/** How often the tests ask the group (`trine ps`, a CLI run each) where a task stands. */
const POLL_MS = 250;
/** Submissions a run makes when the cluster, not the code under test, failed its start (as
 *  GmpiCluster.start does): a node declared lost or a spawn failed on this loaded machine. */
const START_TRIES = 3;
/** Time from the task's running to a kill "after the first checkpoint": the checkpoint interval
 *  below (500 ms) several times over, so each rank has passed snapshot() past its interval. */
const AFTER_CHECKPOINT_MS = 2_500;
const INTERVAL_MS = 500;
/** An interval longer than any run here: no rank ever checkpoints. */
const NEVER_MS = 86_400_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
let cluster: GmpiCluster;
const tasks: string[] = [];

beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-rollback-cm-', ['--allow-inject']);
}, 120_000);

afterAll(async () => {
  if (process.env.GMPI_DUMP) for (const id of tasks) console.log(`${await cluster.describe(id)}\n${dumpAll(id)}`);
  await cluster?.down();
}, 60_000);

/** Every VPID a task has had (replacements included), from its log files. */
function vpidsOf(id: string): number[] {
  const out: number[] = [];
  for (let v = 0; v < 64; v++) if (cluster.lines(id, v).length > 0 || cluster.lines(id, v, 'err').length > 0) out.push(v);
  return out;
}
const dumpAll = (id: string): string => cluster.dump(id, vpidsOf(id));
/** The task as the group sees it (`trine ps ID`: its processes, ranks and the group's events)
 *  and every log of it, for a failure's message. */
async function diagnose(id: string): Promise<string> {
  const ps = await trine(['ps', id, '--dir', cluster.dir]);
  return `${await cluster.describe(id)}\n${ps.code === 0 ? ps.stdout : ps.stderr}\n${dumpAll(id)}`;
}

/** Submit `app` as a linked rollback task of `n` ranks; its id. */
async function submit(app: string, n: number, flags: readonly string[], args: readonly string[]): Promise<string> {
  const s = await trine(['submit', '--dir', cluster.dir, '--linked', '--recovery', 'rollback', ...flags, '-n', String(n), '--cwd', REPO, '--',
    process.execPath, '--import', 'tsx', join(REPO, app), ...args]);
  if (s.code !== 0) throw new Error(`trine submit failed: ${s.stderr}`);
  const id = s.stdout.trim();
  tasks.push(id);
  return id;
}

/** submit(), then wait until every rank runs; a start the cluster failed is submitted again. */
async function start(app: string, n: number, flags: readonly string[], args: readonly string[]): Promise<{ id: string; at: number }> {
  const failures: string[] = [];
  for (let attempt = 1; attempt <= START_TRIES; attempt++) {
    const id = await submit(app, n, flags, args);
    for (;;) {
      const t = await cluster.task(id);
      if (t.state === 'running') return { id, at: Date.now() };
      if (t.outcome !== null) break;
      await sleep(POLL_MS);
    }
    failures.push(await diagnose(id));
  }
  throw new Error(`the task never started:\n${failures.join('\n')}`);
}

/** The running process that holds `rank` now. */
const holder = (t: TaskView, rank: number): ProcView | undefined => t.procs.find((p) => p.rank === rank && p.state === 'running' && p.pid !== null);

/** SIGKILL the process that holds `rank` (kill -9, as a user would); its VPID. */
async function killRank(id: string, rank: number): Promise<number> {
  const p = holder(await cluster.task(id), rank);
  if (p === undefined) throw new Error(`no running holder of rank ${rank}:\n${await diagnose(id)}`);
  process.kill(p.pid as number, 'SIGKILL');
  return p.vpid;
}

/** Wait until `trine ps` shows a VPID other than `dead` running as `rank`'s holder: the
 *  replacement (PROTOCOL §11.2). A short run may end between two looks (a `trine ps` takes
 *  seconds on this loaded machine): then the holder the ended task shows. */
async function replacementOf(id: string, rank: number, dead: number): Promise<ProcView> {
  const end = Date.now() + REPLACE_MS;
  for (;;) {
    const t = await cluster.task(id);
    const p = t.outcome === null ? holder(t, rank) : t.procs.find((q) => q.rank === rank);
    if (p !== undefined && p.vpid !== dead) return p;
    if (t.outcome !== null || Date.now() > end) throw new Error(`rank ${rank} was not replaced:\n${await diagnose(id)}`);
    await sleep(POLL_MS);
  }
}

/** Wait until `ms` after `at` (a fault is injected that long into a run). */
const until = (at: number, ms: number): Promise<void> => sleep(Math.max(0, at + ms - Date.now()));

/** Wait for the task's end. `failFast`: a stderr line of any process that ends the wait at once
 *  (the task is then still running: the caller kills it). */
async function end(id: string, failFast: RegExp | null = null): Promise<TaskView> {
  const deadline = Date.now() + RUN_MS;
  for (;;) {
    const t = await cluster.task(id);
    if (t.outcome !== null) return t;
    if (failFast !== null) {
      const hit = vpidsOf(id).flatMap((v) => cluster.lines(id, v, 'err').map((l) => `${id}/${v}: ${l}`)).find((l) => failFast.test(l));
      if (hit !== undefined) throw new Error(`a process failed: ${hit}\n${await diagnose(id)}`);
    }
    if (Date.now() > deadline) throw new Error(`the task did not end within ${RUN_MS} ms:\n${await diagnose(id)}`);
    await sleep(POLL_MS);
  }
}

/** The first line matching `re` that any of the task's processes printed (rank 0 prints the
 *  answer; rank 0 may be a replacement), parsed. */
function answerOf(id: string, re: RegExp): Record<string, unknown> | undefined {
  for (const v of vpidsOf(id)) {
    const line = cluster.lines(id, v).find((l) => re.test(l));
    if (line !== undefined) return JSON.parse(line) as Record<string, unknown>;
  }
  return undefined;
}

async function stop(id: string): Promise<void> {
  const t = await cluster.task(id).catch(() => null);
  if (t !== null && t.outcome === null) await trine(['kill', id, '--dir', cluster.dir]);
}

// ---- the heat stencil ------------------------------------------------------------------------

const HEAT: HeatParams = { rows: 24, cols: 8192, steps: 60 };
const heatArgs = (p: HeatParams, paceMs: number): string[] =>
  ['--rows', String(p.rows), '--cols', String(p.cols), '--steps', String(p.steps), '--pace-ms', String(paceMs), '--verify'];
const HEAT_LINE = /^\{"app":"heat"/;
const heatExpected = (() => {
  const memo = new Map<string, ReturnType<typeof heatSummary>>();
  return (p: HeatParams) => {
    const k = JSON.stringify(p);
    if (!memo.has(k)) {
      const ref = heatReference(p);
      memo.set(k, heatSummary(p, ref.grid, ref.residuals));
    }
    return memo.get(k) as ReturnType<typeof heatSummary>;
  };
})();

/** A normal end with the reference's answer, rank 0's own check (--verify) agreeing. */
async function expectHeatAnswer(id: string, t: TaskView, p: HeatParams): Promise<void> {
  const why = await diagnose(id);
  expect(t.outcome, why).toBe('normal');
  expect(answerOf(id, HEAT_LINE), why).toEqual(heatExpected(p));
  expect(vpidsOf(id).some((v) => cluster.lines(id, v).includes('heat: verify OK')), why).toBe(true);
}

/** After the end: `killed` lost its rank, `replacement` holds it and ended normally, and no
 *  other rank was rolled back (radic-hmpl A.6: only the failed processes restart). */
function expectRankMoved(t: TaskView, rank: number, killed: number, replacement: number, ranks: number): void {
  const by = (v: number) => t.procs.find((p) => p.vpid === v);
  expect(by(killed)).toMatchObject({ state: 'terminatedAbnormally', rank: null });
  expect(by(replacement)).toMatchObject({ state: 'terminatedNormally', rank });
  for (let r = 0; r < ranks; r++) {
    const holders = t.procs.filter((p) => p.rank === r);
    expect(holders.length, `rank ${r}'s holders`).toBe(1);
  }
}

const CM = ['--logging', 'cm'];

describe('PROTOCOL §11.6, mpichv-dgrp 1.2.4 and 1.6: the heat stencil under channel memories, a rank killed with SIGKILL mid-run', () => {
  it('after its first checkpoint (1.6 crash after checkpoint k): the replacement holds the same rank, heat: verify OK, the answer is heatReference\'s bit for bit', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 4, [...CM, '--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await killRank(id, 1);
    const repl = await replacementOf(id, 1, killed);
    expect(repl.vpid).toBe(4);
    const t = await end(id, /rollback recovery of rank \d failed/);
    await expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 1, killed, repl.vpid, 4);
    expect([0, 2, 3].map((r) => t.procs.find((p) => p.rank === r)?.vpid)).toEqual([0, 2, 3]);
    // The replacement said what it restored and replayed (from its home CM).
    expect(cluster.lines(id, repl.vpid, 'err').join('\n')).toMatch(/trine: rollback recovery \{"rank":1,"restoredFrom":[1-9]/);
  }, 120_000);

  it('before any checkpoint (1.6): the replacement replays its whole log from the CM and the answer is still the reference\'s', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 4, [...CM, '--checkpoint-interval', String(NEVER_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await killRank(id, 2);
    const repl = await replacementOf(id, 2, killed);
    const t = await end(id, /rollback recovery of rank \d failed/);
    await expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 2, killed, repl.vpid, 4);
  }, 120_000);
});

const NQ_LINE = /^\{"app":"nqueens-rollback"/;

describe('PROTOCOL §11.6, mpichv-dgrp 1.2.1 and 1.6 deterministic replay: N-Queens master/worker under channel memories (its any-source receives decided by the CM\'s order)', () => {
  it('rank 0, the master, killed mid-run: the replacement holds rank 0, the count is 724 (n = 10), the task ends normally', async () => {
    const { id, at } = await start('examples/nqueens/nqueens-rollback.ts', 4, [...CM, '--checkpoint-interval', String(INTERVAL_MS)], ['--n', '10', '--pace-ms', '400']);
    await until(at, 1_500);
    const killed = await killRank(id, 0);
    const repl = await replacementOf(id, 0, killed);
    const t = await end(id, /rollback recovery of rank \d failed/);
    const why = await diagnose(id);
    expect(t.outcome, why).toBe('normal');
    expect(answerOf(id, NQ_LINE), why).toMatchObject({ n: 10, schedule: 'dynamic', ranks: 4, units: 72, solutions: 724, expected: 724, correct: true });
    expectRankMoved(t, 0, killed, repl.vpid, 4);
  }, 120_000);
});

// ---- a CM's node fails (last: it leaves the cluster a node short) ------------------------------

describe('PROTOCOL §11.6 "CM failure" (mpichv-dgrp 1.5 item 12: CMs assumed stable): the node of a home CM fails (trine inject kill-node)', () => {
  // One rank per node, n1…n4; rank r's home CM is the protector of the next node of the ring, so
  // n4's is rank 2's. Killing n4 takes rank 3 and rank 2's CM: rank 2 must not run on
  // unprotected; it stops with status 70 and says why.
  it('the rank homed on the failed node fails visibly, the reason on its stderr, and so do the ranks that send to it', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 4, [...CM, '--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    try {
      const before = await cluster.task(id);
      expect(before.procs.map((p) => [p.rank, p.node])).toEqual([[0, 'n1'], [1, 'n2'], [2, 'n3'], [3, 'n4']]);
      await until(at, AFTER_CHECKPOINT_MS);
      const r = await trine(['inject', 'kill-node', 'n4', '--dir', cluster.dir]);
      expect(r.code, r.stderr).toBe(0);
      const reason = /rollback recovery of rank \d failed, stopping: the channel memory at \S+ failed/;
      await errLine(id, 2, reason);
      // Ranks 1 and 3 send to rank 2 (heat's halo): their deposits went to that CM too.
      await errLine(id, 1, reason);
      for (let t = await cluster.task(id); ; t = await cluster.task(id)) {
        const p = t.procs.find((q) => q.vpid === 2);
        // It exits 70; the group may see SIGKILL instead: its agent kills a linked process whose
        // library closed the link without finalize (src/core/agent-procs-app.ts), racing the exit.
        if (p?.state === 'terminatedAbnormally') break;
        if (t.outcome !== null) throw new Error(`the task ended first:\n${await diagnose(id)}`);
        await sleep(POLL_MS);
      }
    } finally {
      await stop(id);
    }
  }, 120_000);
});
