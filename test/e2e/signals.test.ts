// Ghidrah signals on a real local cluster (issue 4; spec §4, §7; §9.2 A10): linked task
// processes (test/fixtures/apps/signals-app.ts) link trine/app, connect to their agents' Unix
// sockets and receive the mapping; an application broadcast reaches every process, the sender
// included; a `kill -9` of one process is announced to every survivor by GSIG_NTF_DIED; a
// clean finalize ends a process normally, the crash abnormally.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster } from './gmpi-cluster.ts';
import { trine } from './helpers.ts';

const APP = 'test/fixtures/apps/signals-app.ts';
let c: GmpiCluster;
const taskView = (id: string) => c.task(id);
const logOf = async (id: string, vpid: number): Promise<string> => c.lines(id, vpid).join('\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it holds (or fails after `ms`). */
async function eventually(check: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for: ${what}`);
}

beforeAll(async () => {
  c = await GmpiCluster.up('trine-signals-');
}, 120_000);

afterAll(async () => {
  await c.down();
}, 60_000);

describe('signals between linked processes on a 4-node cluster', () => {
  it('mapping, atomic broadcast, NTF_DIED to every survivor after kill -9 (A10), finalize vs crash', async () => {
    const id = await c.start(APP, 4, { SIG_BROADCAST_FROM: '0' });
    const t = await taskView(id);
    expect(t.mode).toBe('linked');
    // Every process got its mapping and the broadcast of process 0, the sender included.
    await eventually(async () => {
      for (let v = 0; v < 4; v++) if (!(await logOf(id, v)).includes('signal 100 src=0 dest=all arg=7')) return false;
      return true;
    }, 'the broadcast at every process');
    expect((await trine(['logs', id, '--vpid', '0', '--dir', c.dir])).stdout).toContain('signal 100 src=0 dest=all arg=7');
    for (let v = 0; v < 4; v++) expect(await logOf(id, v)).toMatch(new RegExp(`mapping vpid=${v} size=4 epoch=0 recovered=false members=0@n\\d,1@n\\d,2@n\\d,3@n\\d`));

    // kill -9 of process 2: every survivor is told, once.
    const victim = t.procs.find((p) => p.vpid === 2);
    expect(victim?.pid).toBeGreaterThan(1);
    process.kill(victim?.pid as number, 'SIGKILL');
    await eventually(async () => {
      for (const v of [0, 1, 3]) if (!(await logOf(id, v)).includes('signal NTF_DIED src=cm dest=all arg=2')) return false;
      return true;
    }, 'NTF_DIED(2) at every survivor');
    for (const v of [0, 1, 3]) expect((await logOf(id, v)).match(/NTF_DIED/g)).toHaveLength(1);
    expect((await taskView(id)).state).toBe('running');

    // The operator ends the task: SIGTERM, each survivor finalizes and exits 0 (normal); the
    // crashed one stays abnormal.
    const k = await trine(['kill', id, '--dir', c.dir]);
    expect(k.code, k.stderr).toBe(0);
    await eventually(async () => (await taskView(id)).outcome !== null, 'the task finished');
    const end = await taskView(id);
    for (const p of end.procs) expect(p.state, `vpid ${p.vpid}`).toBe(p.vpid === 2 ? 'terminatedAbnormally' : 'terminatedNormally');
  }, 120_000);
});
