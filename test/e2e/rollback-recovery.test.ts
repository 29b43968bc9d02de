// Rollback recovery end to end on a real local cluster (issue 17, PROTOCOL §11): programs with
// no recovery code (examples/heat, examples/nqueens/nqueens-rollback.ts) submitted with
// `--recovery rollback`, their processes killed with SIGKILL mid-run or their node failed with
// `trine inject kill-node`. The group replaces a dead rank with a fresh VPID holding the same
// rank (§11.2, radic-hmpl A.2.7), which restores its last checkpoint from its protector and
// replays its log (§11.3, mpichv-dgrp 1.2.4); the survivors only pause, the task ends normally
// and the answer equals a failure-free run's bit for bit (radic-hmpl A.6). Then the bad input
// a user may give (issue 17 "Bad input"): each process fails visibly, its stderr names why.
//
// One cluster for the file. The node failures come last: they leave the cluster with fewer
// nodes, one of which protects a live rank (its store moves to the next protector).
// GMPI_DUMP=1 prints every task's logs at the end.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { ProcView, TaskView } from '../../src/core/status.ts';
import { heatReference, type HeatParams } from '../../examples/heat/heat-core.ts';
import { heatSummary } from '../../examples/heat/heat-state.ts';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

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
  cluster = await GmpiCluster.up('trine-rollback-recovery-', ['--allow-inject']);
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

describe('PROTOCOL §11.2–§11.3, radic-hmpl A.2.7 and A.6: the heat stencil, a rank killed with SIGKILL mid-run', () => {
  it('after its first checkpoint: the replacement holds the same rank, the task ends normally, the answer equals heatReference bit for bit', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await killRank(id, 1);
    const repl = await replacementOf(id, 1, killed);
    expect(repl.vpid).toBe(4); // the task's next VPID (§11.2)
    const t = await end(id);
    await expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 1, killed, repl.vpid, 4);
    // Ranks 0, 2, 3 kept their first VPIDs: they paused, nothing restarted them.
    expect([0, 2, 3].map((r) => t.procs.find((p) => p.rank === r)?.vpid)).toEqual([0, 2, 3]);
  }, 120_000);

  it('before any checkpoint (an interval longer than the run): the replacement replays its whole log and the answer is still the reference\'s', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(NEVER_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await killRank(id, 2);
    const repl = await replacementOf(id, 2, killed);
    const t = await end(id);
    await expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 2, killed, repl.vpid, 4);
  }, 120_000);

  it('two crashes in one run: rank 1, then rank 3 once rank 1\'s replacement runs; both replaced, the answer is the reference\'s', async () => {
    const p: HeatParams = { ...HEAT, steps: 80 };
    const { id, at } = await start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(p, 100));
    await until(at, 2_000);
    const first = await killRank(id, 1);
    const r1 = await replacementOf(id, 1, first);
    await until(Date.now(), 1_000);
    const second = await killRank(id, 3);
    const r3 = await replacementOf(id, 3, second);
    expect([r1.vpid, r3.vpid]).toEqual([4, 5]);
    const t = await end(id);
    await expectHeatAnswer(id, t, p);
    expectRankMoved(t, 1, first, r1.vpid, 4);
    expectRankMoved(t, 3, second, r3.vpid, 4);
  }, 150_000);
});

// ---- N-Queens without recovery code ----------------------------------------------------------

const NQ_LINE = /^\{"app":"nqueens-rollback"/;

describe('PROTOCOL §11.3, mpichv-dgrp 1.2.4: N-Queens master/worker (any-source receives logged as determinants), a process killed mid-run', () => {
  for (const [who, rank] of [['rank 0, the master, who does the wildcard receives', 0], ['a worker (rank 2)', 2]] as const) {
    it(`${who}: the replacement holds rank ${rank}, the count is 724 (n = 10), the task ends normally`, async () => {
      const { id, at } = await start('examples/nqueens/nqueens-rollback.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], ['--n', '10', '--pace-ms', '400']); // ≈ 10 s: the kill lands mid-run even on a loaded machine
      await until(at, 1_500);
      const killed = await killRank(id, rank);
      const repl = await replacementOf(id, rank, killed);
      const t = await end(id);
      const why = await diagnose(id);
      expect(t.outcome, why).toBe('normal');
      expect(answerOf(id, NQ_LINE), why).toMatchObject({ n: 10, schedule: 'dynamic', ranks: 4, units: 72, solutions: 724, expected: 724, correct: true });
      expectRankMoved(t, rank, killed, repl.vpid, 4);
    }, 120_000);
  }
});

// ---- bad input -------------------------------------------------------------------------------

const BAD_APP = 'test/fixtures/apps/rollback-bad-app.ts';

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

describe('issue 17 "Bad input": a rollback process that cannot be protected fails visibly (PROTOCOL §11.3)', () => {
  it(`a restore that throws: each replacement fails naming the error, and the task ends abnormally at ROLLBACK_MAX_REPLACEMENTS`, async () => {
    const { id } = await start(BAD_APP, 2, ['--checkpoint-interval', '100'], ['restore-throws', '--steps', '400', '--pace-ms', '100']);
    try {
      // Rank 1 has checkpointed: five steps at 100 ms each, the interval 100 ms.
      await cluster.line(id, 1, /^step 5$/);
      const killed = await killRank(id, 1);
      expect(killed).toBe(1);
      const err = await errLine(id, 2, /restoring the application's state failed: rollback-bad-app: this restore always throws/);
      expect(err).toMatch(/RollbackError/);
      const t = await end(id);
      expect(t.outcome, await diagnose(id)).toBe('abnormal');
      expect(t.reason).toBe('rank 1 died again after 16 replacements, the limit (ROLLBACK_MAX_REPLACEMENTS)');
      // Each of the 16 replacements (VPIDs 2 … 17) said why it failed.
      for (let v = 2; v <= 17; v++) expect(cluster.lines(id, v, 'err').join('\n'), `${id}/${v}`).toMatch(/this restore always throws/);
    } finally {
      await stop(id);
    }
  }, 150_000);

  it('a state larger than --max-state: the first checkpoint fails with STATE_TOO_LARGE on stderr', async () => {
    // Every rank fails at its first checkpoint and every replacement again: the task spends its
    // life spawning, so this waits for the first failure, not for the task to run.
    const id = await submit(BAD_APP, 2, ['--checkpoint-interval', '100', '--max-state', '1024'], ['big-state', '--steps', '400']);
    try {
      const err = await errLine(id, 0, /above the task's limit of 1024/, RUN_MS);
      expect(err).toMatch(/RollbackError: the checkpoint is \d+ bytes, above the task's limit of 1024: raise --max-state or keep less state/);
      expect(cluster.lines(id, 0, 'err').join('\n')).toMatch(/STATE_TOO_LARGE/);
      // …and the process ended abnormally, as the group sees it.
      for (let t = await cluster.task(id); t.procs.find((p) => p.vpid === 0)?.state !== 'terminatedAbnormally'; t = await cluster.task(id)) {
        if (t.outcome !== null) throw new Error(`the task ended first:\n${await diagnose(id)}`);
        await sleep(POLL_MS);
      }
    } finally {
      await stop(id);
    }
  }, 90_000);

  it('an application that registers no state: init fails with a clear error on stderr', async () => {
    const id = await submit(BAD_APP, 2, ['--checkpoint-interval', '100'], ['no-state']);
    try {
      const err = await errLine(id, 0, /register the application's state/, RUN_MS);
      expect(err).toMatch(/this task runs with rollback recovery: register the application's state with Gmpi\.init\(\{ state \}\)/);
      expect(cluster.lines(id, 0)).not.toContain('step 1');
    } finally {
      await stop(id);
    }
  }, 90_000);
  // `--recovery rollback` without --linked, and --checkpoint-interval 5: the CLI refuses them
  // before sending (test/integration/cli-edges.test.ts, "PROTOCOL §11.1").
});

// ---- node failures (last: each leaves the cluster a node short) ------------------------------

describe('PROTOCOL §11.4, radic-hmpl A.2.7 and A.6: a node fails (trine inject kill-node)', () => {
  // Placement spreads a task's processes over the nodes in name order, one each, and the ranks
  // on node nK are protected by the next live node of the ring (protectorAfter in
  // src/core/cluster-rollback.ts). A task of 3 ranks on 4 nodes leaves n4 empty, so n1 holds
  // rank 0 and protects no live rank: its failure takes only rank 0, whose store is on n2. Its
  // replacement, wherever it lands, finds the store through the group's marks (§11.4), even if
  // n1 is back by then (the cluster restarts a killed node within seconds).
  it('n1, which holds rank 0 and protects no live rank: rank 0 restarts on a live node, the answer is the reference\'s', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 3, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    try {
      const before = await cluster.task(id);
      expect(before.procs.map((p) => [p.rank, p.node])).toEqual([[0, 'n1'], [1, 'n2'], [2, 'n3']]);
      await until(at, AFTER_CHECKPOINT_MS);
      const r = await trine(['inject', 'kill-node', 'n1', '--dir', cluster.dir]);
      expect(r.code, r.stderr).toBe(0);
      const repl = await replacementOf(id, 0, 0);
      const t = await end(id);
      await expectHeatAnswer(id, t, HEAT);
      expect(t.procs.find((p) => p.vpid === 0)).toMatchObject({ state: 'terminatedAbnormally', rank: null });
      expect(t.procs.find((p) => p.vpid === repl.vpid)).toMatchObject({ state: 'terminatedNormally', rank: 0 });
    } finally {
      await stop(id); // a task left running would take the next test's slots
    }
  }, 120_000);

  // radic-hmpl A.2.7 ("the observers on the failed node's successor redirect their logs and
  // checkpoints to T_x"): n4 holds rank 3 and protects rank 2 (on n3). Its failure takes rank 3,
  // which is replaced, and rank 2's store, which rank 2 moves to the next protector of the ring
  // (failover-store.ts) without stopping; both end normally with the reference's answer.
  /** How rank 2 would stop if its store could not move: the library's fatal path. (Rank 3's own
   *  process, on the failed node, may say it lost its agent as it dies: that is no failure.) */
  const LOST_PROTECTOR = /rollback recovery of rank 2 failed|ProtectorError: /;
  it('n4, which holds rank 3 and protects rank 2: rank 3 restarts, rank 2 moves its store to the next protector, the answer is the reference\'s', async () => {
    const { id, at } = await start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    try {
      const before = await cluster.task(id);
      expect(before.procs.map((p) => [p.rank, p.node])).toEqual([[0, 'n1'], [1, 'n2'], [2, 'n3'], [3, 'n4']]);
      await until(at, AFTER_CHECKPOINT_MS);
      const r = await trine(['inject', 'kill-node', 'n4', '--dir', cluster.dir]);
      expect(r.code, r.stderr).toBe(0);
      const t = await end(id, LOST_PROTECTOR);
      await expectHeatAnswer(id, t, HEAT);
      // Rank 2 was never replaced: its process went on after the move.
      expect(t.procs.filter((p) => p.rank === 2).map((p) => p.vpid)).toEqual([2]);
    } finally {
      await stop(id);
    }
  }, 120_000);
});
