// Semi-coordinated checkpoints end to end on a real local cluster (PROTOCOL §11.7; radic-hmpl
// A.2.8 BSCO, SCO; A.6 "BSCO/SCO"): the heat stencil, with no recovery code, submitted with
// `--recovery rollback --checkpoint bsco|sco` on 6 ranks over the 3 nodes of `trine up --nodes 3`
// (spread placement: two ranks per node, so three checkpoint groups {0, 3}, {1, 4}, {2, 5}). A
// rank killed with SIGKILL mid-run takes its group down: the group kills the other member, both
// are replaced, both restore the same complete checkpoint (the stderr recovery line), the other
// groups only pause, and the answer equals heatReference bit for bit (`heat: verify OK`).
//
// Last, a node failure (`trine inject kill-node`): the whole group on it restarts, and the group
// it protected moves its stores to the next protector and goes on.
//
// One cluster for the file; GMPI_DUMP=1 prints every task's logs at the end.
import { describe, expect, it } from 'vitest';
import type { HeatParams } from '../../examples/heat/heat-core.ts';
import { trine } from './helpers.ts';
import { clusterForFile, HEAT_LINE, heatArgs, heatExpected, INTERVAL_MS, until } from './rollback-harness.ts';

/** How long a run may take on this loaded 2-core machine, from submit to its end. */
const RUN_MS = 120_000;
/** How long a group's replacements may take to run. */
const REPLACE_MS = 40_000;
/** From the task's running to the kill: several checkpoint intervals (500 ms). */
const AFTER_CHECKPOINT_MS = 3_000;
const RANKS = 6;
/** The groups spread placement makes of 6 ranks on 3 nodes of 4 slots (cluster-machines.ts). */
const GROUPS = [[0, 3], [1, 4], [2, 5]];
const HEAT: HeatParams = { rows: 24, cols: 8192, steps: 120 };

const rollback = clusterForFile('trine-rollback-sco-', ['--nodes', '3', '--allow-inject'], { runMs: RUN_MS, replaceMs: REPLACE_MS });

/** Start heat on RANKS ranks with semi-coordinated checkpoints of kind `checkpoint`. */
const start = (checkpoint: string) =>
  rollback.start('examples/heat/heat.ts', RANKS, ['--checkpoint', checkpoint, '--checkpoint-interval', String(INTERVAL_MS)], heatArgs(HEAT, 100));

/** The recovery lines the replacements printed (rollback-init.ts report), by rank. */
function recoveries(id: string): Map<number, { restoredFrom: number; replayed: number }> {
  const out = new Map<number, { restoredFrom: number; replayed: number }>();
  for (const v of rollback.vpidsOf(id)) {
    for (const l of rollback.cluster.lines(id, v, 'err')) {
      const m = /^trine: rollback recovery (\{.*\})$/.exec(l);
      if (m !== null) {
        const r = JSON.parse(m[1]!) as { rank: number; restoredFrom: number; replayed: number };
        out.set(r.rank, r);
      }
    }
  }
  return out;
}

describe('PROTOCOL §11.7, radic-hmpl A.2.8 and A.6: heat on 6 ranks, 2 per node, a rank killed with SIGKILL mid-run', () => {
  for (const checkpoint of ['bsco', 'sco'] as const) {
    it(`${checkpoint}: the killed rank's checkpoint group rolls back together, the other groups keep their processes, the answer equals heatReference bit for bit`, async () => {
      const { id, at } = await start(checkpoint);
      const t0 = await rollback.cluster.task(id);
      // The placement: two ranks per node, the groups the group computed from it.
      const nodeOf = (rank: number) => t0.procs.find((p) => p.rank === rank)?.node;
      for (const [a, b] of GROUPS) expect(nodeOf(a!), `ranks ${a} and ${b}`).toBe(nodeOf(b!));
      await until(at, AFTER_CHECKPOINT_MS);
      await rollback.killRank(id, 1);
      const t = await rollback.end(id);
      const why = await rollback.diagnose(id);
      expect(t.outcome, why).toBe('normal');
      expect(rollback.answerOf(id, HEAT_LINE), why).toEqual(heatExpected(HEAT));
      expect(rollback.heatVerified(id), why).toBe(true);
      // Rank 1's group partner, rank 4, was killed by the group (the reason is in the events),
      // and both were replaced; the other groups' ranks kept their first VPIDs.
      const ps = await trine(['ps', id, '--dir', rollback.cluster.dir]);
      expect(ps.stdout, why).toMatch(/killing VPID 4 \(rank 4\): rank 1 of its checkpoint group died, the group rolls back together/);
      const holderOf = (r: number) => t.procs.find((p) => p.rank === r)?.vpid;
      expect([0, 2, 3, 5].map(holderOf), why).toEqual([0, 2, 3, 5]);
      expect([holderOf(1), holderOf(4)].every((v) => v !== undefined && v >= RANKS), why).toBe(true);
      // Both restored the same checkpoint of their group (A.2.8 commit rule); nobody else recovered.
      const rec = recoveries(id);
      expect([...rec.keys()].sort(), why).toEqual([1, 4]);
      expect(rec.get(1)!.restoredFrom, why).toBe(rec.get(4)!.restoredFrom);
      expect(rec.get(1)!.restoredFrom, why).toBeGreaterThanOrEqual(1);
    }, 180_000);
  }
});

describe('PROTOCOL §11.7, radic-hmpl A.2.8 "a node failure naturally makes all of that node\'s processes roll back together": a node fails (trine inject kill-node)', () => {
  it('sco, n1 (ranks 0 and 3; it protects the group on n3): the group restarts from one complete checkpoint, the protected group moves its stores, the answer is the reference\'s', async () => {
    const { id, at } = await start('sco');
    try {
      const before = await rollback.cluster.task(id);
      expect(before.procs.filter((p) => p.node === 'n1').map((p) => p.rank).sort()).toEqual([0, 3]);
      await until(at, AFTER_CHECKPOINT_MS);
      await rollback.killNode('n1');
      const t = await rollback.end(id);
      const why = await rollback.diagnose(id);
      expect(t.outcome, why).toBe('normal');
      expect(rollback.heatVerified(id), why).toBe(true);
      const rec = recoveries(id);
      expect([...rec.keys()].sort(), why).toEqual([0, 3]);
      expect(rec.get(0)!.restoredFrom, why).toBe(rec.get(3)!.restoredFrom);
      // Nothing was killed for a group: the node took the whole group.
      const ps = await trine(['ps', id, '--dir', rollback.cluster.dir]);
      expect(ps.stdout, why).not.toMatch(/killing VPID/);
    } finally {
      await rollback.stop(id);
    }
  }, 180_000);
});
