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
import { describe, expect, it } from 'vitest';
import type { HeatParams } from '../../examples/heat/heat-core.ts';
import {
  AFTER_CHECKPOINT_MS, clusterForFile, expectRankMoved, HEAT, heatArgs, INTERVAL_MS, NEVER_MS, NQ_LINE, POLL_MS, RUN_MS, sleep, until,
} from './rollback-harness.ts';

const rollback = clusterForFile('trine-rollback-recovery-', ['--allow-inject']);

// ---- the heat stencil ------------------------------------------------------------------------

// Two at a time (vitest.config.ts maxConcurrency): each run is paced and mostly sleeps; their
// starts take turns (RollbackCluster.start), and each task has its own ranks and VPIDs.
describe.concurrent('PROTOCOL §11.2–§11.3, radic-hmpl A.2.7 and A.6: the heat stencil, a rank killed with SIGKILL mid-run', () => {
  it('after its first checkpoint: the replacement holds the same rank, the task ends normally, the answer equals heatReference bit for bit', async () => {
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await rollback.killRank(id, 1);
    const repl = await rollback.replacementOf(id, 1, killed);
    expect(repl.vpid).toBe(4); // the task's next VPID (§11.2)
    const t = await rollback.end(id);
    await rollback.expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 1, killed, repl.vpid, 4);
    // Ranks 0, 2, 3 kept their first VPIDs: they paused, nothing restarted them.
    expect([0, 2, 3].map((r) => t.procs.find((p) => p.rank === r)?.vpid)).toEqual([0, 2, 3]);
  }, 120_000);

  it('before any checkpoint (an interval longer than the run): the replacement replays its whole log and the answer is still the reference\'s', async () => {
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(NEVER_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await rollback.killRank(id, 2);
    const repl = await rollback.replacementOf(id, 2, killed);
    const t = await rollback.end(id);
    await rollback.expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 2, killed, repl.vpid, 4);
  }, 120_000);

  it('two crashes in one run: rank 1, then rank 3 once rank 1\'s replacement runs; both replaced, the answer is the reference\'s', async () => {
    const p: HeatParams = { ...HEAT, steps: 80 };
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(p, 100));
    await until(at, 2_000);
    const first = await rollback.killRank(id, 1);
    const r1 = await rollback.replacementOf(id, 1, first);
    await until(Date.now(), 1_000);
    const second = await rollback.killRank(id, 3);
    const r3 = await rollback.replacementOf(id, 3, second);
    expect([r1.vpid, r3.vpid]).toEqual([4, 5]);
    const t = await rollback.end(id);
    await rollback.expectHeatAnswer(id, t, p);
    expectRankMoved(t, 1, first, r1.vpid, 4);
    expectRankMoved(t, 3, second, r3.vpid, 4);
  }, 150_000);
});

// ---- N-Queens without recovery code ----------------------------------------------------------

describe.concurrent('PROTOCOL §11.3, mpichv-dgrp 1.2.4: N-Queens master/worker (any-source receives logged as determinants), a process killed mid-run', () => {
  for (const [who, rank] of [['rank 0, the master, who does the wildcard receives', 0], ['a worker (rank 2)', 2]] as const) {
    it(`${who}: the replacement holds rank ${rank}, the count is 724 (n = 10), the task ends normally`, async () => {
      const { id, at } = await rollback.start('examples/nqueens/nqueens-rollback.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], ['--n', '10', '--pace-ms', '400']); // ≈ 10 s: the kill lands mid-run even on a loaded machine
      await until(at, 1_500);
      const killed = await rollback.killRank(id, rank);
      const repl = await rollback.replacementOf(id, rank, killed);
      const t = await rollback.end(id);
      const why = await rollback.diagnose(id);
      expect(t.outcome, why).toBe('normal');
      expect(rollback.answerOf(id, NQ_LINE), why).toMatchObject({ n: 10, schedule: 'dynamic', ranks: 4, units: 72, solutions: 724, expected: 724, correct: true });
      expectRankMoved(t, rank, killed, repl.vpid, 4);
    }, 120_000);
  }
});

// ---- bad input -------------------------------------------------------------------------------

const BAD_APP = 'test/fixtures/apps/rollback-bad-app.ts';

describe('issue 17 "Bad input": a rollback process that cannot be protected fails visibly (PROTOCOL §11.3)', () => {
  it(`a restore that throws: each replacement fails naming the error, and the task ends abnormally at ROLLBACK_MAX_REPLACEMENTS`, async () => {
    const { id } = await rollback.start(BAD_APP, 2, ['--checkpoint-interval', '100'], ['restore-throws', '--steps', '400', '--pace-ms', '100']);
    try {
      // Rank 1 has checkpointed: five steps at 100 ms each, the interval 100 ms.
      await rollback.cluster.line(id, 1, /^step 5$/);
      const killed = await rollback.killRank(id, 1);
      expect(killed).toBe(1);
      const err = await rollback.errLine(id, 2, /restoring the application's state failed: rollback-bad-app: this restore always throws/);
      expect(err).toMatch(/RollbackError/);
      const t = await rollback.end(id);
      expect(t.outcome, await rollback.diagnose(id)).toBe('abnormal');
      expect(t.reason).toBe('rank 1 died again after 16 replacements, the limit (ROLLBACK_MAX_REPLACEMENTS)');
      // Each of the 16 replacements (VPIDs 2 … 17) said why it failed.
      for (let v = 2; v <= 17; v++) expect(rollback.cluster.lines(id, v, 'err').join('\n'), `${id}/${v}`).toMatch(/this restore always throws/);
    } finally {
      await rollback.stop(id);
    }
  }, 150_000);

  it('a state larger than --max-state: the first checkpoint fails with STATE_TOO_LARGE on stderr', async () => {
    // Every rank fails at its first checkpoint and every replacement again: the task spends its
    // life spawning, so this waits for the first failure, not for the task to run.
    const id = await rollback.submit(BAD_APP, 2, ['--checkpoint-interval', '100', '--max-state', '1024'], ['big-state', '--steps', '400']);
    try {
      const err = await rollback.errLine(id, 0, /above the task's limit of 1024/, RUN_MS);
      expect(err).toMatch(/RollbackError: the checkpoint is \d+ bytes, above the task's limit of 1024: raise --max-state or keep less state/);
      expect(rollback.cluster.lines(id, 0, 'err').join('\n')).toMatch(/STATE_TOO_LARGE/);
      // …and the process ended abnormally, as the group sees it.
      for (let t = await rollback.cluster.task(id); t.procs.find((p) => p.vpid === 0)?.state !== 'terminatedAbnormally'; t = await rollback.cluster.task(id)) {
        if (t.outcome !== null) throw new Error(`the task ended first:\n${await rollback.diagnose(id)}`);
        await sleep(POLL_MS);
      }
    } finally {
      await rollback.stop(id);
    }
  }, 90_000);

  it('an application that registers no state: init fails with a clear error on stderr', async () => {
    const id = await rollback.submit(BAD_APP, 2, ['--checkpoint-interval', '100'], ['no-state']);
    try {
      const err = await rollback.errLine(id, 0, /register the application's state/, RUN_MS);
      expect(err).toMatch(/this task runs with rollback recovery: register the application's state with Gmpi\.init\(\{ state \}\)/);
      expect(rollback.cluster.lines(id, 0)).not.toContain('step 1');
    } finally {
      await rollback.stop(id);
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
    const { id, at } = await rollback.start('examples/heat/heat.ts', 3, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    try {
      const before = await rollback.cluster.task(id);
      expect(before.procs.map((p) => [p.rank, p.node])).toEqual([[0, 'n1'], [1, 'n2'], [2, 'n3']]);
      await until(at, AFTER_CHECKPOINT_MS);
      await rollback.killNode('n1');
      const repl = await rollback.replacementOf(id, 0, 0);
      const t = await rollback.end(id);
      await rollback.expectHeatAnswer(id, t, HEAT);
      expect(t.procs.find((p) => p.vpid === 0)).toMatchObject({ state: 'terminatedAbnormally', rank: null });
      expect(t.procs.find((p) => p.vpid === repl.vpid)).toMatchObject({ state: 'terminatedNormally', rank: 0 });
    } finally {
      await rollback.stop(id); // a task left running would take the next test's slots
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
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, ['--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    try {
      const before = await rollback.cluster.task(id);
      expect(before.procs.map((p) => [p.rank, p.node])).toEqual([[0, 'n1'], [1, 'n2'], [2, 'n3'], [3, 'n4']]);
      await until(at, AFTER_CHECKPOINT_MS);
      await rollback.killNode('n4');
      const t = await rollback.end(id, LOST_PROTECTOR);
      await rollback.expectHeatAnswer(id, t, HEAT);
      // Rank 2 was never replaced: its process went on after the move.
      expect(t.procs.filter((p) => p.rank === 2).map((p) => p.vpid)).toEqual([2]);
    } finally {
      await rollback.stop(id);
    }
  }, 120_000);
});
