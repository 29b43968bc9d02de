// A rank that dies while the others wait in MPI_Finalize (issue 17, PROTOCOL §11.3): rollback
// mode's finalize begins with a barrier, so no rank leaves while a replacement may still need
// what it holds; the ranks in that barrier must still take the replacement's connection. The
// campaign found the opposite (docs/CAMPAIGN.md, seed 5 run 7): a rank in finalize ignored the
// group's REP_SPAWNED, the replacement waited for it forever, and so did the task.
//
// test/fixtures/apps/rollback-late-app.ts keeps its last rank out of finalize for a while; it is
// killed (SIGKILL) then, with every other rank inside finalize's barrier.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { TaskView } from '../../src/core/status.ts';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

const APP = 'test/fixtures/apps/rollback-late-app.ts';
const RANKS = 4;
const STEPS = 20;
/** The answer rank 0 prints: the sum over the steps of every rank's step number. */
const TOTAL = RANKS * ((STEPS * (STEPS - 1)) / 2);
/** How long the task may take from the kill to its end on this loaded machine. */
const END_MS = 60_000;
const POLL_MS = 250;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let cluster: GmpiCluster;
beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-rollback-finalize-');
}, 120_000);
afterAll(async () => {
  await cluster?.down();
}, 60_000);

async function submit(flags: readonly string[], args: readonly string[] = ['--linger-ms', '3000']): Promise<string> {
  const s = await trine(['submit', '--dir', cluster.dir, '--linked', '--recovery', 'rollback', ...flags, '--checkpoint-interval', '200', '-n', String(RANKS), '--cwd', REPO, '--',
    process.execPath, '--import', 'tsx', join(REPO, APP), '--steps', String(STEPS), ...args]);
  if (s.code !== 0) throw new Error(`trine submit failed: ${s.stderr}`);
  return s.stdout.trim();
}

/** SIGKILL the running holder of the last rank, then wait for the task's end: that holder's VPID,
 *  the ended task, and every log of it for a failing assertion's message. */
async function killLastAndEnd(id: string): Promise<{ victim: number; t: TaskView; all: string }> {
  const victim = (await cluster.task(id)).procs.find((p) => p.rank === RANKS - 1 && p.state === 'running');
  expect(victim?.pid, await cluster.describe(id)).toBeTypeOf('number');
  process.kill(victim!.pid!, 'SIGKILL');
  const deadline = Date.now() + END_MS;
  let t = await cluster.task(id);
  while (t.outcome === null && Date.now() < deadline) {
    await sleep(POLL_MS);
    t = await cluster.task(id);
  }
  const all = `${await cluster.describe(id)}\n${cluster.dump(id, t.procs.map((p) => p.vpid))}`;
  return { victim: victim!.vpid, t, all };
}

describe('PROTOCOL §11.3: a rank killed while the others are in finalize is replaced, and the task ends normally', () => {
  for (const flags of [['--logging', 'rbml'], ['--logging', 'hmpl', '--checkpoint', 'sco']]) {
    it(`${flags.join(' ')}: the last rank killed outside finalize, the others inside it`, async () => {
      const id = await submit(flags);
      try {
        const last = RANKS - 1;
        await cluster.line(id, last, /^lingering$/, 60_000);
        await cluster.line(id, 0, new RegExp(`^done ${TOTAL}$`));
        const { victim, t, all } = await killLastAndEnd(id);
        expect(t.outcome, all).toBe('normal');
        // The replacement held the last rank, restored it and re-ran into finalize.
        const repl = t.procs.find((p) => p.rank === last && p.vpid > victim);
        expect(repl, all).toBeDefined();
        expect(cluster.lines(id, repl!.vpid, 'err').join('\n'), all).toMatch(/^trine: rollback recovery \{"rank":3,/m);
        expect(cluster.lines(id, repl!.vpid)).toContain('lingering');
        // Rank 0 answered once, right.
        expect(cluster.lines(id, 0)).toEqual([`done ${TOTAL}`]);
      } finally {
        if ((await cluster.task(id)).outcome === null) await trine(['kill', id, '--dir', cluster.dir]);
      }
    }, 150_000);
  }

  it('--logging hmpl: the last rank killed after it finalized has finished: no replacement, and the task ends normally', async () => {
    const id = await submit(['--logging', 'hmpl'], ['--linger-ms', '0', '--after-ms', '5000']);
    try {
      await cluster.line(id, RANKS - 1, /^finalized$/, 60_000);
      const { victim, t, all } = await killLastAndEnd(id);
      expect(t.outcome, all).toBe('normal');
      expect(t.procs.map((p) => p.vpid).sort(), all).toEqual([0, 1, 2, 3]);
      expect(t.procs.find((p) => p.vpid === victim)).toMatchObject({
        state: 'terminatedNormally', signal: 'SIGKILL', reason: 'killed by SIGKILL after it finalized: its rank had finished (PROTOCOL §11.3)',
      });
      expect(cluster.lines(id, 0)).toEqual([`done ${TOTAL}`]);
    } finally {
      if ((await cluster.task(id)).outcome === null) await trine(['kill', id, '--dir', cluster.dir]);
    }
  }, 150_000);
});
