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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { ProcView, TaskView } from '../../src/core/status.ts';
import { heatReference, type HeatParams } from '../../examples/heat/heat-core.ts';
import { heatSummary } from '../../examples/heat/heat-state.ts';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

/** How long a run may take on this loaded 2-core machine, from submit to its end. */
const RUN_MS = 120_000;
/** How long a group's replacements may take to run. */
const REPLACE_MS = 40_000;
const POLL_MS = 250;
/** Submissions a run makes when the cluster, not the code under test, failed its start. */
const START_TRIES = 3;
/** From the task's running to the kill: several checkpoint intervals (500 ms). */
const AFTER_CHECKPOINT_MS = 3_000;
const INTERVAL_MS = 500;
const RANKS = 6;
/** The groups spread placement makes of 6 ranks on 3 nodes of 4 slots (cluster-machines.ts). */
const GROUPS = [[0, 3], [1, 4], [2, 5]];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
let cluster: GmpiCluster;
const tasks: string[] = [];

beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-rollback-sco-', ['--nodes', '3', '--allow-inject']);
}, 120_000);

afterAll(async () => {
  if (process.env.GMPI_DUMP) for (const id of tasks) console.log(`${await cluster.describe(id)}\n${dumpAll(id)}`);
  await cluster?.down();
}, 60_000);

function vpidsOf(id: string): number[] {
  const out: number[] = [];
  for (let v = 0; v < 64; v++) if (cluster.lines(id, v).length > 0 || cluster.lines(id, v, 'err').length > 0) out.push(v);
  return out;
}
const dumpAll = (id: string): string => cluster.dump(id, vpidsOf(id));
async function diagnose(id: string): Promise<string> {
  const ps = await trine(['ps', id, '--dir', cluster.dir]);
  return `${await cluster.describe(id)}\n${ps.code === 0 ? ps.stdout : ps.stderr}\n${dumpAll(id)}`;
}

const HEAT: HeatParams = { rows: 24, cols: 8192, steps: 120 };
const heatArgs = (p: HeatParams, paceMs: number): string[] =>
  ['--rows', String(p.rows), '--cols', String(p.cols), '--steps', String(p.steps), '--pace-ms', String(paceMs), '--verify'];
const HEAT_LINE = /^\{"app":"heat"/;

async function stop(id: string): Promise<void> {
  const t = await cluster.task(id).catch(() => null);
  if (t !== null && t.outcome === null) await trine(['kill', id, '--dir', cluster.dir]);
}

async function start(checkpoint: string): Promise<{ id: string; at: number }> {
  const failures: string[] = [];
  for (let attempt = 1; attempt <= START_TRIES; attempt++) {
    const s = await trine(['submit', '--dir', cluster.dir, '--linked', '--recovery', 'rollback', '--checkpoint', checkpoint, '--checkpoint-interval', String(INTERVAL_MS),
      '-n', String(RANKS), '--cwd', REPO, '--', process.execPath, '--import', 'tsx', join(REPO, 'examples/heat/heat.ts'), ...heatArgs(HEAT, 100)]);
    if (s.code !== 0) throw new Error(`trine submit failed: ${s.stderr}`);
    const id = s.stdout.trim();
    tasks.push(id);
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

const holder = (t: TaskView, rank: number): ProcView | undefined => t.procs.find((p) => p.rank === rank && p.state === 'running' && p.pid !== null);

async function end(id: string): Promise<TaskView> {
  const deadline = Date.now() + RUN_MS;
  for (;;) {
    const t = await cluster.task(id);
    if (t.outcome !== null) return t;
    if (Date.now() > deadline) throw new Error(`the task did not end within ${RUN_MS} ms:\n${await diagnose(id)}`);
    await sleep(POLL_MS);
  }
}

/** The recovery lines the replacements printed (rollback-init.ts report), by rank. */
function recoveries(id: string): Map<number, { restoredFrom: number; replayed: number }> {
  const out = new Map<number, { restoredFrom: number; replayed: number }>();
  for (const v of vpidsOf(id)) {
    for (const l of cluster.lines(id, v, 'err')) {
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
      const t0 = await cluster.task(id);
      // The placement: two ranks per node, the groups the group computed from it.
      const nodeOf = (rank: number) => t0.procs.find((p) => p.rank === rank)?.node;
      for (const [a, b] of GROUPS) expect(nodeOf(a!), `ranks ${a} and ${b}`).toBe(nodeOf(b!));
      await sleep(Math.max(0, at + AFTER_CHECKPOINT_MS - Date.now()));
      const victim = holder(await cluster.task(id), 1);
      if (victim === undefined) throw new Error(`no running holder of rank 1:\n${await diagnose(id)}`);
      process.kill(victim.pid as number, 'SIGKILL');
      const t = await end(id);
      const why = await diagnose(id);
      expect(t.outcome, why).toBe('normal');
      const ref = heatReference(HEAT);
      let answer: unknown;
      for (const v of vpidsOf(id)) {
        const line = cluster.lines(id, v).find((l) => HEAT_LINE.test(l));
        if (line !== undefined) answer = JSON.parse(line);
      }
      expect(answer, why).toEqual(heatSummary(HEAT, ref.grid, ref.residuals));
      expect(vpidsOf(id).some((v) => cluster.lines(id, v).includes('heat: verify OK')), why).toBe(true);
      // Rank 1's group partner, rank 4, was killed by the group (the reason is in the events),
      // and both were replaced; the other groups' ranks kept their first VPIDs.
      const ps = await trine(['ps', id, '--dir', cluster.dir]);
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
      const before = await cluster.task(id);
      expect(before.procs.filter((p) => p.node === 'n1').map((p) => p.rank).sort()).toEqual([0, 3]);
      await sleep(Math.max(0, at + AFTER_CHECKPOINT_MS - Date.now()));
      const r = await trine(['inject', 'kill-node', 'n1', '--dir', cluster.dir]);
      expect(r.code, r.stderr).toBe(0);
      const t = await end(id);
      const why = await diagnose(id);
      expect(t.outcome, why).toBe('normal');
      expect(vpidsOf(id).some((v) => cluster.lines(id, v).includes('heat: verify OK')), why).toBe(true);
      const rec = recoveries(id);
      expect([...rec.keys()].sort(), why).toEqual([0, 3]);
      expect(rec.get(0)!.restoredFrom, why).toBe(rec.get(3)!.restoredFrom);
      // Nothing was killed for a group: the node took the whole group.
      const ps = await trine(['ps', id, '--dir', cluster.dir]);
      expect(ps.stdout, why).not.toMatch(/killing VPID/);
    } finally {
      await stop(id);
    }
  }, 180_000);
});
