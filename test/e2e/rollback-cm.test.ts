// Rollback recovery under channel memories end to end on a real local cluster (issue 17,
// PROTOCOL §11.6; mpichv-dgrp 1.2.1–1.2.4, 1.6): programs with no recovery code
// (examples/heat, examples/nqueens/nqueens-rollback.ts) submitted with `--recovery rollback
// --logging cm`, a process killed with SIGKILL mid-run. Every message went through its
// receiver's home CM (its protector); the group replaces the dead rank with a fresh VPID, which
// fetches its checkpoint and log from its CM, replays them in the CM's order (no determinants,
// even for N-Queens' any-source receives) and goes on from the CM; the task ends normally and
// the answer equals a failure-free run's bit for bit. GMPI_DUMP=1 prints every task's logs.
import { describe, expect, it } from 'vitest';
import {
  AFTER_CHECKPOINT_MS, clusterForFile, expectRankMoved, HEAT, heatArgs, INTERVAL_MS, NEVER_MS, NQ_LINE, POLL_MS, sleep, until,
} from './rollback-harness.ts';

const rollback = clusterForFile('trine-rollback-cm-', ['--allow-inject']);

const CM = ['--logging', 'cm'];

// Both at once (vitest.config.ts maxConcurrency): paced runs that mostly sleep; their starts
// take turns (RollbackCluster.start).
describe.concurrent('PROTOCOL §11.6, mpichv-dgrp 1.2.4 and 1.6: the heat stencil under channel memories, a rank killed with SIGKILL mid-run', () => {
  it('after its first checkpoint (1.6 crash after checkpoint k): the replacement holds the same rank, heat: verify OK, the answer is heatReference\'s bit for bit', async () => {
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, [...CM, '--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await rollback.killRank(id, 1);
    const repl = await rollback.replacementOf(id, 1, killed);
    expect(repl.vpid).toBe(4);
    const t = await rollback.end(id, /rollback recovery of rank \d failed/);
    await rollback.expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 1, killed, repl.vpid, 4);
    expect([0, 2, 3].map((r) => t.procs.find((p) => p.rank === r)?.vpid)).toEqual([0, 2, 3]);
    // The replacement said what it restored and replayed (from its home CM).
    expect(rollback.cluster.lines(id, repl.vpid, 'err').join('\n')).toMatch(/trine: rollback recovery \{"rank":1,"restoredFrom":[1-9]/);
  }, 120_000);

  it('before any checkpoint (1.6): the replacement replays its whole log from the CM and the answer is still the reference\'s', async () => {
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, [...CM, '--checkpoint-interval', String(NEVER_MS)], heatArgs(HEAT, 100));
    await until(at, AFTER_CHECKPOINT_MS);
    const killed = await rollback.killRank(id, 2);
    const repl = await rollback.replacementOf(id, 2, killed);
    const t = await rollback.end(id, /rollback recovery of rank \d failed/);
    await rollback.expectHeatAnswer(id, t, HEAT);
    expectRankMoved(t, 2, killed, repl.vpid, 4);
  }, 120_000);
});

describe('PROTOCOL §11.6, mpichv-dgrp 1.2.1 and 1.6 deterministic replay: N-Queens master/worker under channel memories (its any-source receives decided by the CM\'s order)', () => {
  it('rank 0, the master, killed mid-run: the replacement holds rank 0, the count is 724 (n = 10), the task ends normally', async () => {
    const { id, at } = await rollback.start('examples/nqueens/nqueens-rollback.ts', 4, [...CM, '--checkpoint-interval', String(INTERVAL_MS)], ['--n', '10', '--pace-ms', '400']);
    await until(at, 1_500);
    const killed = await rollback.killRank(id, 0);
    const repl = await rollback.replacementOf(id, 0, killed);
    const t = await rollback.end(id, /rollback recovery of rank \d failed/);
    const why = await rollback.diagnose(id);
    expect(t.outcome, why).toBe('normal');
    expect(rollback.answerOf(id, NQ_LINE), why).toMatchObject({ n: 10, schedule: 'dynamic', ranks: 4, units: 72, solutions: 724, expected: 724, correct: true });
    expectRankMoved(t, 0, killed, repl.vpid, 4);
  }, 120_000);
});

// ---- a CM's node fails (last: it leaves the cluster a node short) ------------------------------

describe('PROTOCOL §11.6 "CM failure" (mpichv-dgrp 1.5 item 12: CMs assumed stable): the node of a home CM fails (trine inject kill-node)', () => {
  // One rank per node, n1…n4; rank r's home CM is the protector of the next node of the ring, so
  // n4's is rank 2's. Killing n4 takes rank 3 and rank 2's CM: rank 2 must not run on
  // unprotected; it stops with status 70 and says why.
  it('the rank homed on the failed node fails visibly, the reason on its stderr, and so do the ranks that send to it', async () => {
    const { id, at } = await rollback.start('examples/heat/heat.ts', 4, [...CM, '--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));
    try {
      const before = await rollback.cluster.task(id);
      expect(before.procs.map((p) => [p.rank, p.node])).toEqual([[0, 'n1'], [1, 'n2'], [2, 'n3'], [3, 'n4']]);
      await until(at, AFTER_CHECKPOINT_MS);
      await rollback.killNode('n4');
      const reason = /rollback recovery of rank \d failed, stopping: the channel memory at \S+ failed/;
      await rollback.errLine(id, 2, reason);
      // Ranks 1 and 3 send to rank 2 (heat's halo): their deposits went to that CM too.
      await rollback.errLine(id, 1, reason);
      for (let t = await rollback.cluster.task(id); ; t = await rollback.cluster.task(id)) {
        const p = t.procs.find((q) => q.vpid === 2);
        // It exits 70; the group may see SIGKILL instead: its agent kills a linked process whose
        // library closed the link without finalize (src/core/agent-procs-app.ts), racing the exit.
        if (p?.state === 'terminatedAbnormally') break;
        if (t.outcome !== null) throw new Error(`the task ended first:\n${await rollback.diagnose(id)}`);
        await sleep(POLL_MS);
      }
    } finally {
      await rollback.stop(id);
    }
  }, 120_000);
});
