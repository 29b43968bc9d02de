// The applications with no recovery code (issue 17 item 4, PROTOCOL §11) on a real local
// cluster, in ordinary (app) mode with no failure: the heat stencil's printed checksums equal
// the sequential reference's bit for bit, and N-Queens without recovery code prints the known
// count under both schedules, each task ending normally. These are the failure-free runs that
// rollback mode's runs (with crashes) are compared against.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heatReference, type HeatParams } from '../../examples/heat/heat-core.ts';
import { heatSummary } from '../../examples/heat/heat-state.ts';
import { GmpiCluster } from './gmpi-cluster.ts';

const RANKS = [0, 1, 2, 3];
/** How long a task may take to start and run on this loaded 2-core machine. */
const RUN_MS = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let cluster: GmpiCluster;
const tasks: string[] = [];

beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-rollback-apps-');
}, 120_000);

afterAll(async () => {
  if (process.env.GMPI_DUMP) for (const id of tasks) console.log(`${await cluster.describe(id)}\n${cluster.dump(id, RANKS)}`);
  await cluster?.down();
}, 60_000);

/** Submissions a run makes when the cluster, not the program, failed it (a node declared lost
 *  or a spawn failed on this loaded 2-core machine), as GmpiCluster.start does. */
const SUBMIT_TRIES = 3;
const clusterFailure = /node lost|spawn failed|start/;

/** Run `app` as a linked task of 4 until it ends, and return rank 0's JSON answer once the task
 *  ended normally; a failure carries every process's log. These tasks end in about a second,
 *  often before `trine ps` would see them running, so this waits for the end, not the start. */
async function answer(app: string, args: readonly string[], re: RegExp): Promise<Record<string, unknown>> {
  const failures: string[] = [];
  for (let attempt = 1; attempt <= SUBMIT_TRIES; attempt++) {
    const id = await cluster.submit(app, RANKS.length, {}, args);
    tasks.push(id);
    const end = Date.now() + RUN_MS;
    let t = await cluster.task(id);
    for (; t.outcome === null && Date.now() < end; t = await cluster.task(id)) await sleep(250);
    const line = cluster.lines(id, 0).find((l) => re.test(l));
    if (t.outcome === 'normal' && line !== undefined) return JSON.parse(line) as Record<string, unknown>;
    failures.push(`${await cluster.describe(id)}\n${cluster.dump(id, RANKS)}`);
    if (!t.procs.some((p) => clusterFailure.test(p.reason ?? ''))) break;
  }
  throw new Error(`the task did not end normally with an answer:\n${failures.join('\n')}`);
}

describe('applications with no recovery code, app mode, no failure (issue 17 item 4)', () => {
  it('heat stencil on 4 ranks, 64 KiB halo rows, uneven blocks: the checksums equal the sequential reference\'s', async () => {
    const p: HeatParams = { rows: 25, cols: 8192, steps: 30 };
    const args = ['--rows', String(p.rows), '--cols', String(p.cols), '--steps', String(p.steps), '--verify'];
    const got = await answer('examples/heat/heat.ts', args, /^\{"app":"heat"/);
    const ref = heatReference(p);
    expect(got).toEqual(heatSummary(p, ref.grid, ref.residuals));
    // Rank 0's own check against the reference (--verify) agrees.
    expect(cluster.lines(tasks[tasks.length - 1] as string, 0)).toContain('heat: verify OK');
  }, 90_000);

  it('N-Queens without recovery code, master/worker (any-source receives): n = 10 gives 724', async () => {
    const got = await answer('examples/nqueens/nqueens-rollback.ts', ['--n', '10'], /^\{"app":"nqueens-rollback"/);
    expect(got).toMatchObject({ n: 10, schedule: 'dynamic', ranks: 4, units: 72, solutions: 724, expected: 724, correct: true });
  }, 90_000);

  it('N-Queens without recovery code, static split combined with reduce: n = 9 gives 352', async () => {
    const got = await answer('examples/nqueens/nqueens-rollback.ts', ['--n', '9', '--schedule', 'static'], /^\{"app":"nqueens-rollback"/);
    expect(got).toMatchObject({ n: 9, schedule: 'static', ranks: 4, solutions: 352, expected: 352, correct: true });
  }, 90_000);
});
