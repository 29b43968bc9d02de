// The distributed HyperQuickSort on the DGRP (examples/hqsort/hqsort.ts; issue 18 item 3; spec
// mpichv-dgrp 2.2.7, 2.6) on a real local cluster: real daemons, real processes testing each
// other, slowness injected by the agents (`trine inject slow`). What is asserted is what a user
// sees: the one line the collector prints (sorted, the input's numbers: "correct") and the
// group's journal in `trine ps` (the slow process left the DGRP). Times are printed, never
// asserted (STYLE.md 17).
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

const APP = 'examples/hqsort/hqsort.ts';
/** Tests every 200 ms, rejoin after 3 passes: a run of seconds sees removals. */
const FLAGS = ['--dgrp', '--dgrp-interval', '200', '--dgrp-zeta', '3'];
/** A process slowed from the start is removed before sorting begins (its init is slow too), so a
 *  few million numbers suffice; the tests that slow one mid-sort sort more. */
const SLOW_COUNT = '4000000';
/** With no slow process nothing depends on the run's length: what is checked is the answer. */
const PLAIN_COUNT = '1000000';
const SIZE = 4;
const VPIDS = [0, 1, 2, 3];
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let c: GmpiCluster;
beforeAll(async () => {
  c = await GmpiCluster.up('trine-hqsort-', ['--allow-inject']);
}, 120_000);
afterAll(async () => {
  await c?.down();
}, 60_000);

/** The collector's line, once the task has ended (any process may be the collector). */
async function answer(id: string, ms = 90_000): Promise<string> {
  const end = Date.now() + ms;
  for (;;) {
    const t = await c.task(id);
    if (t.outcome !== null) break;
    if (Date.now() > end) throw new Error(`${id} did not end:\n${c.dump(id, VPIDS)}`);
    await sleep(500);
  }
  const lines = VPIDS.flatMap((v) => c.lines(id, v)).filter((l) => l.startsWith('hqsort: '));
  expect(lines, c.dump(id, VPIDS)).toHaveLength(1);
  return lines[0]!;
}

async function journal(id: string): Promise<string[]> {
  const r = await trine(['ps', '--dir', c.dir, id]);
  return r.stdout.split('\n').filter((l) => /DGRP/.test(l));
}

/** `trine inject slow` at 10 % CPU with long stops (the DGRP's tests see those). */
async function slow(id: string, vpid: number): Promise<void> {
  const r = await trine(['inject', 'slow', `${id}/${vpid}`, '--share', '10', '--period', '500', '--dir', c.dir]);
  expect(r.code, r.stderr).toBe(0);
}

/** Submit, and slow `vpids` as soon as their agents can (while they start: before the first
 *  round barrier), so the group can tell them slow before sorting begins. */
async function submitSlow(env: Record<string, string>, args: readonly string[], vpids: readonly number[]): Promise<string> {
  const id = await c.submit(APP, SIZE, env, args, FLAGS);
  for (const v of vpids) {
    const end = Date.now() + 60_000;
    for (;;) {
      const r = await trine(['inject', 'slow', `${id}/${v}`, '--share', '10', '--period', '500', '--dir', c.dir]);
      if (r.code === 0) break;
      if (Date.now() > end) throw new Error(`could not slow ${id}/${v}: ${r.stderr}\n${await c.describe(id)}`);
      await sleep(100);
    }
  }
  return id;
}

describe('HyperQuickSort on the DGRP (spec 2.2.7, 2.6)', () => {
  it('no slow process: sorted and correct, with the DGRP and with --no-dgrp', async () => {
    const id = await c.start(APP, SIZE, {}, ['--count', PLAIN_COUNT, '--seed', '7'], FLAGS);
    const line = await answer(id);
    console.log(`hqsort e2e, no slow process: ${line}`);
    expect(line).toMatch(new RegExp(`^hqsort: sorted ${PLAIN_COUNT} numbers in \\d+ ms on 4 processes, members at the end \\[[\\d,]+\\], removals \\d+, rejoins \\d+: correct$`));
    const base = await c.start(APP, SIZE, {}, ['--count', PLAIN_COUNT, '--seed', '7', '--no-dgrp'], FLAGS);
    const baseLine = await answer(base);
    console.log(`hqsort e2e, no slow process, --no-dgrp: ${baseLine}`);
    expect(baseLine).toMatch(/\(--no-dgrp\), members at the end \[0,1,2,3\].*: correct$/);
  }, 120_000);

  it('spec 2.6 "slow-process removal": one process slow from the start is removed, the others sort its share, correct', async () => {
    const id = await submitSlow({}, ['--count', SLOW_COUNT], [3]);
    const line = await answer(id);
    const events = await journal(id);
    console.log(`hqsort e2e, t/3 slow: ${line}\n${events.join('\n')}`);
    expect(line).toMatch(/: correct$/);
    expect(events.some((e) => e.includes(`${id}/3 left the DGRP`)), events.join('\n')).toBe(true);
  }, 120_000);

  it('slow once sorting started: removed at the next barrier, its replacement takes its list from the backup copy and sorts it', async () => {
    const id = await c.start(APP, SIZE, { HQSORT_DEBUG: '1' }, ['--count', '32000000', '--trace'], FLAGS);
    await c.line(id, 3, /"hqsort":"start".*"round":1,/, 60_000);
    await slow(id, 3);
    const line = await answer(id);
    const rounds = VPIDS.flatMap((v) => c.lines(id, v).filter((l) => l.startsWith('{"hqsort":"round"')).map((l) => ({ vpid: v, ...(JSON.parse(l) as { round: number; members: number[]; held: number[] }) })));
    const absorbed = rounds.filter((r) => r.vpid !== 3 && r.held.includes(3));
    console.log(`hqsort e2e, t/3 slow from round 1: ${line}\n${rounds.map((r) => JSON.stringify(r)).join('\n')}`);
    expect(line).toMatch(/: correct$/);
    expect(absorbed.length, c.dump(id, VPIDS)).toBeGreaterThan(0);
    expect(absorbed.every((r) => !r.members.includes(3))).toBe(true);
  }, 120_000);

  it('spec 2.6 "rejoin": a process out from the start, healed once sorting started, rejoins and takes its virtual rank back from its replacement', async () => {
    // The scenario needs VPID 3 out before round 1 is released. Slowed as it starts, it usually
    // is; on a loaded machine the others can reach the first barrier before the group has judged
    // it, and the run tests nothing: that task is killed and the scenario run again, at most
    // three times (the precondition is still asserted below).
    let id = '';
    let start = '';
    const tried: string[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      id = await submitSlow({ HQSORT_DEBUG: '1' }, ['--count', '48000000', '--trace'], [3]);
      start = await c.line(id, 0, /"hqsort":"start".*"round":1,/, 60_000);
      if (!(JSON.parse(start) as { members: number[] }).members.includes(3)) break;
      tried.push(`${id}: ${start}`);
      console.log(`hqsort e2e, rejoin: attempt ${attempt}, VPID 3 was still a member of round 1 (${start}); again`);
      const killed = await trine(['kill', id, '--dir', c.dir]);
      expect(killed.code, killed.stderr).toBe(0);
      // Its processes gone before the next attempt, which they would load.
      const end = Date.now() + 30_000;
      while ((await c.task(id)).outcome === null && Date.now() < end) await sleep(200);
    }
    expect(JSON.parse(start).members, `VPID 3 was not out by round 1 in any attempt:\n${[...tried, `${id}: ${start}`].join('\n')}`).not.toContain(3);
    const heal = await trine(['inject', 'heal', `${id}/3`, '--dir', c.dir]);
    expect(heal.code, heal.stderr).toBe(0);
    const line = await answer(id);
    const events = await journal(id);
    const mine = c.lines(id, 3).filter((l) => l.startsWith('{"hqsort":"round"')).map((l) => JSON.parse(l) as { round: number; members: number[]; held: number[] });
    console.log(`hqsort e2e, t/3 out then healed: ${line}\nround 1 began ${start}\n${events.join('\n')}\n${mine.map((r) => JSON.stringify(r)).join('\n')}`);
    expect(line).toMatch(/: correct$/);
    expect(events.some((e) => e.includes(`${id}/3 rejoined the DGRP`)), events.join('\n')).toBe(true);
    // Back in round 2 with its own virtual rank, which it asked round 1's holder for.
    expect(mine.find((r) => r.round === 2), c.dump(id, VPIDS)).toMatchObject({ held: [3] });
    expect(c.lines(id, 3, 'err').some((l) => /^ask \d \{"round":1,"v":3,"from":null\}$/.test(l)), c.dump(id, [3])).toBe(true);
  }, 330_000);

  it('spec 2.6 "N−1 tolerance": three of four processes slow, still correct', async () => {
    const id = await submitSlow({}, ['--count', SLOW_COUNT], [1, 2, 3]);
    const line = await answer(id, 110_000);
    console.log(`hqsort e2e, t/1..3 slow: ${line}\n${(await journal(id)).join('\n')}`);
    expect(line).toMatch(/: correct$/);
  }, 150_000);
});

describe('hqsort refuses what it cannot run, naming the fix (exit 2)', () => {
  const run = (args: string[], env: Record<string, string> = {}) => new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', APP, ...args], { cwd: REPO, env: { ...process.env, ...env } }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stderr });
    });
  });

  it('a bad option, a task size that is not a power of 2', async () => {
    const bad = await run(['--count', 'many']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^hqsort: --count needs an integer from 0 to \d+, not "many"\n$/);
    const three = await run([], { TRINE_SIZE: '3' });
    expect(three.code).toBe(2);
    expect(three.stderr).toMatch(/power of 2 \(submit with -n 1, 2, 4, 8/);
  });
});
