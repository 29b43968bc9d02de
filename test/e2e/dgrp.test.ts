// The dynamic group of recommended processes on a real local cluster (docs/PROTOCOL.md §12; spec
// mpichv-dgrp 2.6): real daemons, real task processes testing each other over UDP, a slowness
// injected by the process's own agent (`trine inject slow`: SIGSTOP/SIGCONT duty cycles), a
// Byzantine process forging reports, a process killed. What is asserted is what a user sees:
// the rounds each process prints (test/fixtures/apps/dgrp-rounds-app.ts) and the group's journal
// in `trine ps`. The count of false removals (a correct, fast process removed) is printed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

const APP = 'test/fixtures/apps/dgrp-rounds-app.ts';
/** Tests every 200 ms, rejoin after 3 passes: a run of seconds sees removals and rejoins. */
const FLAGS = ['--dgrp', '--dgrp-interval', '200', '--dgrp-zeta', '3'];
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
type Round = { round: number; members: number[]; recommended: boolean };

let c: GmpiCluster;
beforeAll(async () => {
  c = await GmpiCluster.up('trine-dgrp-', ['--allow-inject']);
}, 120_000);
afterAll(async () => {
  await c?.down();
}, 60_000);

const rounds = (id: string, vpid: number): Round[] =>
  c.lines(id, vpid).map((l) => JSON.parse(l) as Partial<Round>).filter((r): r is Round => typeof r.round === 'number' && Array.isArray(r.members));

/** The group's journal for the task, from its DGRP views to its processes' ends. */
async function journal(id: string): Promise<string[]> {
  const r = await trine(['ps', '--dir', c.dir, id]);
  return r.stdout.split('\n').filter((l) => /DGRP|exited|terminated/.test(l));
}

/** Until `vpid` printed `done` (its last round), then the task's journal. */
async function finished(id: string, vpids: readonly number[], ms = 90_000): Promise<string[]> {
  await c.lineFromEach(id, vpids, /"done":true/, ms);
  return journal(id);
}

/** Removals of processes other than `slow` while every process still ran: a correct, fast
 *  process removed. Once the others have ended, a group of two may lose a member to one liar by
 *  design (PROTOCOL §12.3), and the fixture's liar lies until it ends. */
function falseRemovals(events: readonly string[], id: string, slow: readonly number[]): string[] {
  const end = events.findIndex((e) => / exited | terminated /.test(e));
  return events.slice(0, end < 0 ? events.length : end)
    .filter((e) => new RegExp(`${id}/(\\d+) left the DGRP`).test(e) && !slow.some((v) => e.includes(`${id}/${v} left`)));
}

describe('PROTOCOL §12 (spec 2.6): a slow process leaves the group and comes back', () => {
  it('spec 2.6 "slow-process removal" and "rejoin": removed at a round barrier while slow, the others share its work, back after heal', async () => {
    const id = await c.start(APP, 4, { DGRP_ROUNDS: '70', DGRP_UNIT_MS: '30' }, [], FLAGS);
    await c.line(id, 0, /"round":5,/, 60_000);
    const slow = await trine(['inject', 'slow', `${id}/3`, '--share', '10', '--period', '500', '--dir', c.dir]);
    expect(slow.code, slow.stderr).toBe(0);
    // Removed: a later round of VPID 0's has three members, and it took more units than one.
    for (let waited = 0; !rounds(id, 0).some((r) => r.members.length === 3); waited += 200) {
      if (waited > 30_000) throw new Error(`never removed:\n${(await journal(id)).join('\n')}\n${c.dump(id, [0, 3])}`);
      await sleep(200);
    }
    const heal = await trine(['inject', 'heal', `${id}/3`, '--dir', c.dir]);
    expect(heal.code, heal.stderr).toBe(0);
    const events = await finished(id, [0, 1, 2, 3]);
    const r0 = rounds(id, 0);
    const out = r0.findIndex((r) => !r.members.includes(3));
    const back = r0.findIndex((r, i) => i > out && r.members.includes(3));
    console.log(`dgrp e2e: removed at round ${r0[out]?.round}, back at round ${r0[back]?.round}; false removals: ${falseRemovals(events, id, [3]).length}`);
    expect(events.some((e) => e.includes(`${id}/3 left the DGRP`)), events.join('\n')).toBe(true);
    expect(events.some((e) => e.includes(`${id}/3 rejoined the DGRP`)), events.join('\n')).toBe(true);
    expect(back, JSON.stringify(r0)).toBeGreaterThan(out);
    // Every member of a round saw the same members (one ordered view released it).
    for (const r of r0) {
      for (const v of r.members.filter((m) => m !== 0)) {
        const theirs = rounds(id, v).find((x) => x.round === r.round);
        if (theirs !== undefined) expect(theirs.members).toEqual(r.members);
      }
    }
    expect(falseRemovals(events, id, [3]), events.join("\n")).toEqual([]);
  }, 180_000);

  it('a Byzantine process that forges reports against a correct one cannot remove it on its own (§12.3, two accusers)', async () => {
    const id = await c.start(APP, 4, { DGRP_ROUNDS: '30', DGRP_UNIT_MS: '20', DGRP_LIAR: '0:2' }, [], FLAGS);
    const events = await finished(id, [0, 1, 2, 3]);
    console.log(`dgrp e2e (liar): false removals: ${falseRemovals(events, id, []).length}`);
    expect(falseRemovals(events, id, []), events.join('\n')).toEqual([]);
    expect(rounds(id, 2).every((r) => r.members.length === 4 && r.recommended)).toBe(true);
  }, 120_000);

  it('spec 2.6 "crash removal": a killed process leaves the group, the barrier does not wait for it, the others finish', async () => {
    const id = await c.start(APP, 4, { DGRP_ROUNDS: '30', DGRP_UNIT_MS: '20' }, [], FLAGS);
    await c.line(id, 0, /"round":3,/, 60_000);
    const t = await c.task(id);
    const pid = t.procs.find((p) => p.vpid === 1)?.pid;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid as number, 'SIGKILL');
    await finished(id, [0, 2, 3]);
    const r0 = rounds(id, 0);
    expect(r0.at(-1)?.members.includes(1), JSON.stringify(r0)).toBe(false);
    expect(r0.filter((r) => r.round > 3 && !r.members.includes(1)).length, JSON.stringify(r0)).toBeGreaterThan(10);
  }, 120_000);

  it('with --recovery rollback: a killed process is replaced by the group, and its replacement joins the DGRP as a new member', async () => {
    const id = await c.start(APP, 4, { DGRP_ROUNDS: '40', DGRP_UNIT_MS: '20' }, [], [...FLAGS, '--recovery', 'rollback']);
    await c.line(id, 0, /"round":3,/, 60_000);
    const pid = (await c.task(id)).procs.find((p) => p.vpid === 2)?.pid;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid as number, 'SIGKILL');
    // The replacement (VPID 4) holds rank 2: it prints rounds, and so do the survivors to the end.
    await c.line(id, 4, /"round":/, 60_000);
    await finished(id, [0, 1, 3, 4]);
    const t = await c.task(id);
    expect(t.outcome, await c.describe(id)).toBe('normal');
    expect(rounds(id, 0).at(-1)?.members).toEqual([0, 1, 2, 3]);
  }, 150_000);
});
