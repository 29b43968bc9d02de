// Tasks on a real local cluster (issue 3 item 6): `trine up --nodes 4`, then submit, ps, nodes,
// logs, kill and submit --wait as an operator uses them, each answer agreed by two replicas.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pidsIn, trine } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterView } from '../../src/core/status.ts';




let root = '';
let dir = '';
const at = (args: string[]) => trine([...args.slice(0, 1), '--dir', dir, ...args.slice(1)]);
/** `trine submit [opts] -- command…` on the test cluster. */
const submit = (opts: string[], command: string[]) => trine(['submit', '--dir', dir, ...opts, '--', ...command]);
const view = async (): Promise<ClusterView & { rsn: number; agreedBy: string[] }> => {
  const r = await at(['ps', '--json']);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ClusterView & { rsn: number; agreedBy: string[] };
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-tasks-'));
  dir = join(root, 'cluster');
  const up = await trine(['up', '--nodes', '4', '--dir', dir], 90_000);
  if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
}, 120_000);

afterAll(async () => {
  await trine(['down', '--dir', dir]);
  killAll(pidsIn(dir));
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('trine tasks on a 4-node cluster', () => {
  it('nodes: four nodes up, slots free, as two replicas agree', async () => {
    const r = await at(['nodes']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NODE\s+AGENT\s+STATE\s+SLOTS\s+INC$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 4).join(' '))).toEqual(['n1 a1 up 0/4', 'n2 a2 up 0/4', 'n3 a3 up 0/4', 'n4 a4 up 0/4']);
    const json = JSON.parse((await at(['nodes', '--json'])).stdout) as { agreedBy: string[]; nodes: unknown[] };
    expect(json.agreedBy.length).toBeGreaterThanOrEqual(2);
    expect(json.nodes).toHaveLength(4);
  });

  it('submit prints the task id; ps shows it running; kill kills it; a second kill is refused', async () => {
    const s = await submit(['-n', '3', '--name', 'sleepers'], ['sleep', '60']);
    expect(s.stderr).toBe('');
    expect(s.code).toBe(0);
    const id = s.stdout.trim();
    expect(id).toMatch(/^t[1-9][0-9]*$/);

    let t = (await view()).tasks.find((x) => x.id === id);
    for (let i = 0; i < 50 && t?.state !== 'running'; i++) {
      await sleep(100);
      t = (await view()).tasks.find((x) => x.id === id);
    }
    expect(t).toMatchObject({ name: 'sleepers', size: 3, state: 'running', command: ['sleep', '60'] });
    expect(t?.procs.map((p) => p.state)).toEqual(['running', 'running', 'running']);
    const table = await at(['ps', id]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^${id}\\s+sleepers\\s+running\\s+3`, 'm'));
    expect(table.stdout).toMatch(new RegExp(`^${id}/2\\s+running\\s+n[1-4]\\s+[0-9]+`, 'm'));
    expect(table.stdout).toMatch(/events \(r[1-3]'s clock, UTC\)/);

    const k = await at(['kill', id]);
    expect(k.stderr).toBe('');
    expect(k.stdout).toBe(`${id} killed\n`);
    expect(k.code).toBe(0);
    let done = (await view()).tasks.find((x) => x.id === id);
    for (let i = 0; i < 50 && done?.outcome === null; i++) {
      await sleep(100);
      done = (await view()).tasks.find((x) => x.id === id);
    }
    expect(done).toMatchObject({ state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'killed by operator' });

    const again = await at(['kill', id]);
    expect(again.code).toBe(1);
    expect(again.stderr.trim().split('\n')).toHaveLength(1);
    expect(again.stderr).toMatch(new RegExp(`cannot kill ${id}: .*already finished`));
  });

  it('restart (T9): every process is terminated and started again with TRINE_RESTARTED=1', async () => {
    const s = await submit(['-n', '2', '--name', 'again'], ['sh', '-c', 'echo "restarted=$TRINE_RESTARTED"; exec sleep 60']);
    const id = s.stdout.trim();
    const until = async (test: (t: ClusterView['tasks'][number] | undefined) => boolean) => {
      let t = (await view()).tasks.find((x) => x.id === id);
      for (let i = 0; i < 100 && !test(t); i++) {
        await sleep(100);
        t = (await view()).tasks.find((x) => x.id === id);
      }
      return t;
    };
    const first = await until((t) => t?.state === 'running');
    const pids = first?.procs.map((p) => p.pid);
    const r = await at(['restart', id]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${id} restarting\n`);
    const second = await until((t) => t?.state === 'running' && t.restarted && t.procs.every((p) => p.pid !== null && !pids?.includes(p.pid)));
    expect(second).toMatchObject({ state: 'running', restarted: true });
    const logs = await at(['logs', id]);
    for (const vpid of [0, 1]) {
      expect(logs.stdout.split('\n').filter((l) => l.startsWith(`[${id}/${vpid}] `))).toEqual([`[${id}/${vpid}] restarted=0`, `[${id}/${vpid}] restarted=1`]);
    }
    expect((await at(['kill', id])).code).toBe(0);
    const bad = await at(['restart', id]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(new RegExp(`cannot restart ${id}: `));
  });

  it('submit --wait of a command that succeeds: progress lines, exit 0', async () => {
    const r = await submit(['--wait'], ['true']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^t[1-9][0-9]*$/);
    expect(lines.at(-1)).toBe(`${lines[0]} terminatedNormally: all processes terminated normally`);
    expect(r.stderr).toBe('');
  });

  it('submit --wait of a command that exits 3: exit 3, the reason on stderr', async () => {
    const r = await submit(['-n', '2', '--wait'], ['sh', '-c', 'exit 3']);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/terminatedAbnormally \(code 3\)/);
    expect(r.stderr).toMatch(/^trine: t[0-9]+ terminated abnormally: /);
  });

  it('submit --wait of a missing executable: exit 1, ends "spawn failed: ENOENT …" after the retries', async () => {
    const r = await submit(['--wait'], ['/no/such/executable']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/terminated abnormally: .*spawn failed: ENOENT \/no\/such\/executable/);
  });

  it('--env and --cwd reach the processes; logs prints their output prefixed by task and vpid', async () => {
    const cwd = join(root, 'work');
    mkdirSync(cwd);
    const r = await submit(['--wait', '--env', 'GREETING=hello', '--cwd', cwd], ['sh', '-c', 'echo "$GREETING"; pwd; echo oops >&2']);
    expect(r.code).toBe(0);
    const id = r.stdout.split('\n')[0] ?? '';
    const both = await at(['logs', id]);
    expect(both.code).toBe(0);
    expect(both.stdout).toBe(`[${id}/0] hello\n[${id}/0] ${cwd}\n[${id}/0 err] oops\n`);
    expect((await at(['logs', id, '--err'])).stdout).toBe(`[${id}/0 err] oops\n`);
    expect((await at(['logs', id, '--out', '--vpid', '0'])).stdout).toBe(`[${id}/0] hello\n[${id}/0] ${cwd}\n`);
  });

  it('logs --follow prints output as it comes and returns when the task has finished', async () => {
    const s = await submit(['-n', '2'], ['sh', '-c', 'for i in 1 2 3; do echo line $i; sleep 0.3; done']);
    const id = s.stdout.trim();
    const r = await at(['logs', id, '--follow']);
    expect(r.code).toBe(0);
    for (const vpid of [0, 1]) {
      expect(r.stdout.split('\n').filter((l) => l.startsWith(`[${id}/${vpid}] `))).toEqual([1, 2, 3].map((i) => `[${id}/${vpid}] line ${i}`));
    }
  });

  it('ps --json: the ClusterView agreed by two replicas', async () => {
    const v = await view();
    expect(v.agreedBy.length).toBeGreaterThanOrEqual(2);
    expect(v.nodes).toHaveLength(4);
    expect(v.tasks.length).toBeGreaterThanOrEqual(5);
    expect(v.events.length).toBeGreaterThan(0);
  });

  it('an unknown task: ps, kill and logs say so and exit 1', async () => {
    for (const args of [['ps', 't999'], ['logs', 't999']]) {
      const r = await at(args);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('trine: no task t999: see `trine ps`\n');
    }
    const k = await at(['kill', 't999']);
    expect(k.code).toBe(1);
    expect(k.stderr).toMatch(/^trine: cannot kill t999: .*t999/);
  });
});
