// Ghidrah signals on a real local cluster (issue 4; spec §4, §7; §9.2 A10): linked task
// processes (test/fixtures/apps/signals-app.ts) link trine/app, connect to their agents' Unix
// sockets and receive the mapping; an application broadcast reaches every process, the sender
// included; a `kill -9` of one process is announced to every survivor by GSIG_NTF_DIED; a
// clean finalize ends a process normally, the crash abnormally.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterView, TaskView } from '../../src/core/status.ts';
import { pidsIn, trine } from './helpers.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const APP = join(REPO, 'test/fixtures/apps/signals-app.ts');
let root = '';
let dir = '';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function taskView(id: string): Promise<TaskView> {
  const r = await trine(['ps', '--dir', dir, '--json']);
  expect(r.code, r.stderr).toBe(0);
  const t = (JSON.parse(r.stdout) as ClusterView).tasks.find((x) => x.id === id);
  if (t === undefined) throw new Error(`no task ${id}`);
  return t;
}
/** A process's stdout as `trine logs` shows it (read directly: a CLI per poll is slow). */
const logOf = async (id: string, vpid: number): Promise<string> => {
  const f = join(dir, 'logs', 'tasks', id, `${vpid}.out`);
  return existsSync(f) ? readFileSync(f, 'utf8') : '';
};

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
  root = mkdtempSync(join(tmpdir(), 'trine-signals-'));
  dir = join(root, 'cluster');
  const up = await trine(['up', '--nodes', '4', '--dir', dir], 90_000);
  if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
}, 120_000);

afterAll(async () => {
  await trine(['down', '--dir', dir]);
  for (const pid of pidsIn(dir)) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('signals between linked processes on a 4-node cluster', () => {
  it('mapping, atomic broadcast, NTF_DIED to every survivor after kill -9 (A10), finalize vs crash', async () => {
    const s = await trine(['submit', '--dir', dir, '--linked', '-n', '4', '--cwd', REPO, '--env', 'SIG_BROADCAST_FROM=0', '--', process.execPath, '--import', 'tsx', APP]);
    expect(s.code, s.stderr).toBe(0);
    const id = s.stdout.trim();
    await eventually(async () => (await taskView(id)).state === 'running', 'the linked task running', 60_000);
    const t = await taskView(id);
    expect(t.mode).toBe('linked');
    // Every process got its mapping and the broadcast of process 0, the sender included.
    await eventually(async () => {
      for (let v = 0; v < 4; v++) if (!(await logOf(id, v)).includes('signal 100 src=0 dest=all arg=7')) return false;
      return true;
    }, 'the broadcast at every process');
    expect((await trine(['logs', id, '--vpid', '0', '--dir', dir])).stdout).toContain('signal 100 src=0 dest=all arg=7');
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
    const k = await trine(['kill', id, '--dir', dir]);
    expect(k.code, k.stderr).toBe(0);
    await eventually(async () => (await taskView(id)).outcome !== null, 'the task finished');
    const end = await taskView(id);
    for (const p of end.procs) expect(p.state, `vpid ${p.vpid}`).toBe(p.vpid === 2 ? 'terminatedAbnormally' : 'terminatedNormally');
  }, 120_000);
});
