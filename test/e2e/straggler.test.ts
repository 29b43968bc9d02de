// Stragglers on a real local cluster (docs/PROTOCOL.md §13; issue 18 item 4): a linked G-MPI task
// of four processes (test/fixtures/apps/straggler-app.ts) with --straggler-factor 1.5
// --straggler-after 0.5 reports its progress as it computes; VPID 3 does four times the work per
// step. Once the others are half done, the manager flags it: `trine ps --json` shows it a
// straggler with its progress, every process is delivered GSIG_NTF_STRAGGLER(3), and nothing is
// killed: the straggler runs to its end, is unflagged as it comes within the factor of the others
// (who count as done once they finished), and the task ends normally.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster } from './gmpi-cluster.ts';

const APP = 'test/fixtures/apps/straggler-app.ts';
const VPIDS = [0, 1, 2, 3];
const SLOW = 3;
/** 100 steps of ~42 ms: the others finish in about 4–5 s, the straggler in about 17–20 s. */
const ENV = { STRAGGLER_STEPS: '100', STRAGGLER_STEP_MS: '40', STRAGGLER_SLOW_VPID: String(SLOW), STRAGGLER_SLOW_FACTOR: '4' };
const FLAGS = ['--straggler-factor', '1.5', '--straggler-after', '0.5'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: GmpiCluster;
let id = '';

beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-straggler-');
  id = await cluster.start(APP, 4, ENV, [], FLAGS);
}, 150_000);

afterAll(async () => {
  if (id !== '' && cluster !== undefined && (process.env.GMPI_DUMP || !VPIDS.every((v) => cluster.lines(id, v).some((l) => l.startsWith('done'))))) {
    console.log(`${await cluster.describe(id)}\n${cluster.dump(id, VPIDS)}`);
  }
  await cluster?.down();
}, 60_000);

describe('a straggler in a linked task on a 4-node cluster', () => {
  it('trine ps --json shows the slow process flagged with its progress, the others not; every process got GSIG_NTF_STRAGGLER for it', async () => {
    // Poll the agreed view until the flag shows (the others pass half their work ~2–3 s in).
    const end = Date.now() + 60_000;
    let seen: { progress: (number | null)[]; straggler: boolean[] } | null = null;
    while (seen === null && Date.now() < end) {
      const t = await cluster.task(id);
      if (t.procs.some((p) => p.straggler)) seen = { progress: t.procs.map((p) => p.progress), straggler: t.procs.map((p) => p.straggler) };
      else await sleep(200);
    }
    expect(seen, await cluster.describe(id)).not.toBeNull();
    expect(seen?.straggler).toEqual([false, false, false, true]);
    const slow = seen?.progress[SLOW] ?? null;
    expect(slow).not.toBeNull();
    // Flagged means at most 1/1.5 of the median; the others are at 500 ‰ or more by then.
    expect(slow as number).toBeLessThanOrEqual(667);
    for (const v of VPIDS) expect(await cluster.line(id, v, /^straggler flagged=/, 30_000)).toBe(`straggler flagged=${SLOW}`);
  }, 90_000);

  it('no kill: the straggler runs to its end, is unflagged once within the factor, and the task ends normally', async () => {
    expect(await cluster.line(id, SLOW, /^straggler unflagged=/, 60_000)).toBe(`straggler unflagged=${SLOW}`);
    await cluster.lineFromEach(id, VPIDS, /^done /, 60_000);
    const end = Date.now() + 30_000;
    let t = await cluster.task(id);
    while (t.outcome === null && Date.now() < end) {
      await sleep(300);
      t = await cluster.task(id);
    }
    expect(t.outcome, await cluster.describe(id)).toBe('normal');
    expect(t.procs.map((p) => [p.state, p.exitCode, p.straggler])).toEqual(VPIDS.map(() => ['terminatedNormally', 0, false]));
    // The straggler was delivered its flag once and its unflag once; no process saw another flag.
    expect(cluster.lines(id, SLOW).filter((l) => l.startsWith('straggler'))).toEqual([`straggler flagged=${SLOW}`, `straggler unflagged=${SLOW}`]);
    for (const v of [0, 1, 2]) expect(cluster.lines(id, v).filter((l) => l.startsWith('straggler flagged'))).toEqual([`straggler flagged=${SLOW}`]);
  }, 120_000);
});
