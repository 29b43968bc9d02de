// `--json` on a real cluster (issue 19 item 3; docs/OPERATIONS.md §5.1), as a script
// uses it: one cluster (`trine up --json` in beforeAll), then submit, submit --wait, logs,
// ps, inject (hang/resume, slow/heal), restart, kill, a refused kill and an unknown task (their
// exit codes and error objects), and `trine down --json`. Every stdout line is parsed with
// JSON.parse and must name its schema; the checks read the fields a script would use.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, pidsIn, trine, waitFor, type Run } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';
import { lines, one, type Obj } from '../integration/json-lines.ts';
import type { TaskView } from '../../src/core/status.ts';

/** Liveness deadlines: generous, for a loaded 2-core host running several e2e files at once. */
const SOON_MS = 15_000;
const EXIT_FAILED = 1;


/** A failed command under --json: its usual one stderr line, and one error object on stdout. */
function failed(r: Run, exitCode: number, code: string): { code: string; message: string } {
  expect(r.code).toBe(exitCode);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  const out = lines(r);
  const last = out[out.length - 1] as Obj & { ok: boolean; exitCode: number; error: { code: string; message: string } };
  expect(last.schema).toBe('trine.error/1');
  expect(last.ok).toBe(false);
  expect(last.exitCode).toBe(exitCode);
  expect(last.error.code).toBe(code);
  expect(`trine: ${last.error.message}\n`).toBe(r.stderr);
  return last.error;
}

let root = '';
let dir = '';
let up: Obj;
/** Set once the last test took the cluster down. */
let wentDown = false;
const at = (args: string[]) => trine([...args, '--dir', dir, '--json']);

/** The task as `trine ps TASK --json` shows it. */
async function task(id: string): Promise<TaskView> {
  const ps = one(await at(['ps', id]), 'trine.ps/1') as Obj & { tasks: TaskView[]; agreedBy: string[] };
  expect(ps.agreedBy.length).toBeGreaterThanOrEqual(2);
  expect(ps.tasks.map((t) => t.id)).toEqual([id]);
  return ps.tasks[0] as TaskView;
}

const allRunning = async (id: string) => {
  const t = await task(id);
  return t.state === 'running' && t.procs.every((p) => p.state === 'running' && p.pid !== null) ? t : undefined;
};

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-cli-json-'));
  dir = join(root, 'cluster');
  const r = await trine(['up', '--nodes', '3', '--allow-inject', '--dir', dir, '--json'], 90_000);
  if (r.code !== 0) throw new Error(`trine up failed: ${r.stderr}`);
  up = one(r, 'trine.up/1');
}, 120_000);

afterAll(async () => {
  // Stops whatever a failed test left running; after the last test, it finds nothing left.
  const r = await trine(['down', '--dir', dir, '--json']);
  killAll(pidsIn(dir));
  rmSync(root, { recursive: true, force: true });
  if (wentDown) expect(one(r, 'trine.down/1')).toMatchObject({ nothingRunning: true, stopped: [] });
}, 60_000);

describe('--json on a 3-node cluster', () => {
  it('up --json: the cluster, its replicas, primary, agents and watchdog', () => {
    expect(up).toMatchObject({ dir, replicas: ['r1', 'r2', 'r3'], watchdog: 'scc', allowInject: true });
    expect(['r1', 'r2', 'r3']).toContain(up['primary']);
    expect(up['agents']).toEqual([{ id: 'a1', node: 'n1' }, { id: 'a2', node: 'n2' }, { id: 'a3', node: 'n3' }]);
    expect(up['elapsedMs']).toBeGreaterThan(0);
  });

  let waited = '';
  it('submit --wait --json: accepted, the changes, then the end with every exit code; the failed VPID\'s exit code', async () => {
    // VPID 0 exits 3, VPID 1 exits 0: the command exits 3 (docs/OPERATIONS.md §1.1). A process
    // that fails before every process of the task runs is a failed start, which the group retries
    // (PROTOCOL §8.3, three attempts): the sleep makes that rare, and the checks allow it.
    const script = 'echo out-$TRINE_VPID; echo err-$TRINE_VPID >&2; sleep 1; [ $TRINE_VPID = 0 ] && exit 3; exit 0';
    const r = await trine(['submit', '-n', '2', '--wait', '--json', '--dir', dir, '--', 'sh', '-c', script], 60_000);
    expect(r.code).toBe(3);
    const out = lines(r);
    const first = out[0] as Obj & { task: string };
    expect(first).toMatchObject({ schema: 'trine.submit/1', size: 2, wait: true });
    expect(first.task).toMatch(/^t[1-9][0-9]*$/);
    waited = first.task;
    const middle = out.slice(1, -1);
    expect(middle.length).toBeGreaterThan(0);
    for (const c of middle) expect(c).toMatchObject({ schema: 'trine.task-change/1', task: waited });
    // Each process's ending is reported once, with its code.
    const ends = new Set(middle.filter((c) => c['change'] === 'proc').map((c) => `${String(c['vpid'])}:${String(c['exitCode'])}`));
    expect([...ends].sort()).toEqual(['0:3', '1:0']);
    const end = out[out.length - 1] as Obj & { procs: { vpid: number; exitCode: number | null; state: string }[] };
    expect(end).toMatchObject({ schema: 'trine.task-end/1', task: waited, state: 'terminatedAbnormally', outcome: 'abnormal', exitCode: 3 });
    expect(end.procs.map((p) => [p.vpid, p.state, p.exitCode])).toEqual([[0, 'terminatedAbnormally', 3], [1, 'terminatedNormally', 0]]);
    // stderr says why, as without --json.
    expect(r.stderr).toMatch(new RegExp(`^trine: ${waited} terminated abnormally: `));
  });

  it('logs --json (and --follow --json): one trine.log/1 per line, by VPID, stdout before stderr', async () => {
    // Each file holds one line per start attempt (a retried start appends: see above).
    const expected = ['0 out out-0', '0 err err-0', '1 out out-1', '1 err err-1'];
    const distinct = (xs: string[]) => xs.filter((x, i) => i === 0 || xs[i - 1] !== x);
    for (const extra of [[], ['--follow']]) {
      const r = await at(['logs', waited, ...extra]);
      expect(r.code).toBe(0);
      const out = lines(r);
      for (const o of out) expect(o).toMatchObject({ schema: 'trine.log/1', task: waited });
      const got = out.map((o) => `${String(o['vpid'])} ${String(o['stream'])} ${String(o['line'])}`);
      expect(distinct(got)).toEqual(expected);
      expect(got.length % expected.length).toBe(0);
    }
    const only = lines(await at(['logs', waited, '--vpid', '1', '--err']));
    expect(new Set(only.map((o) => o['line']))).toEqual(new Set(['err-1']));
  });

  let running = '';
  let pids: number[] = [];
  it('submit --json: the task id; ps --json shows it running on two processes', async () => {
    const s = one(await trine(['submit', '-n', '2', '--json', '--dir', dir, '--', 'sleep', '300']), 'trine.submit/1');
    expect(s).toMatchObject({ size: 2, wait: false });
    expect(s['rsn']).toBeGreaterThan(0);
    running = s['task'] as string;
    const t = await waitFor(`${running} running`, SOON_MS, () => allRunning(running), 200);
    pids = t.procs.map((p) => p.pid as number);
    expect(pids.every(alive)).toBe(true);
  });

  it('inject --json: hang and resume a task process (by the CLI, with its pid), slow and heal one (by its agent)', async () => {
    const hang = one(await at(['inject', 'hang', `${running}/0`]), 'trine.inject/1');
    expect(hang).toMatchObject({ mode: 'hang', args: [`${running}/0`], by: 'cli', target: `${running}/0`, pid: pids[0] });
    expect(hang['message']).toMatch(/SIGSTOP/);
    const resume = one(await at(['inject', 'resume', String(pids[0])]), 'trine.inject/1');
    expect(resume).toMatchObject({ mode: 'resume', by: 'cli', pid: pids[0] });
    const slow = one(await at(['inject', 'slow', `${running}/1`, '--share', '50']), 'trine.inject/1');
    expect(slow).toMatchObject({ mode: 'slow', by: 'agent' });
    expect(slow['target']).toMatch(/^a[1-3]$/);
    const heal = one(await at(['inject', 'heal', `${running}/1`]), 'trine.inject/1');
    expect(heal).toMatchObject({ mode: 'heal', by: 'agent', target: slow['target'] });
  });

  it('restart --json, then kill --json: each agreed by two replicas at an RSN', async () => {
    const restart = one(await at(['restart', running]), 'trine.restart/1');
    expect(restart).toMatchObject({ task: running, result: 'restarting' });
    expect((restart['agreedBy'] as string[]).length).toBeGreaterThanOrEqual(2);
    const t = await waitFor(`${running} running again`, SOON_MS, async () => {
      const v = await allRunning(running);
      return v !== undefined && v.restarted ? v : undefined;
    }, 200);
    expect(t.procs.map((p) => p.pid)).not.toEqual(pids);
    const kill = one(await at(['kill', running]), 'trine.kill/1');
    expect(kill).toMatchObject({ task: running, result: 'killed' });
    expect(kill['rsn']).toBeGreaterThan(restart['rsn'] as number);
  });

  it('errors keep their exit codes: a refused kill and an unknown task exit 1 with an error object; a bad task id exits 2', async () => {
    const [kill, ps, logs, restart] = await Promise.all([at(['kill', waited]), at(['ps', 't999']), at(['logs', 't999']), at(['restart', 'x1'])]);
    expect(failed(kill, EXIT_FAILED, 'REFUSED').message).toContain(`cannot kill ${waited}`);
    failed(ps, EXIT_FAILED, 'NO_TASK');
    failed(logs, EXIT_FAILED, 'NO_TASK');
    failed(restart, 2, 'USAGE');
  });

  it('issue 19: a task larger than the cluster says at once it can never fit, with the capacity; a plain program submitted --linked says within seconds that it has not linked, with the fix', async () => {
    const big = (one(await trine(['submit', '-n', '1000', '--dir', dir, '--json', '--', 'sleep', '30']), 'trine.submit/1') as Obj & { task: string }).task;
    const capacity = (one(await at(['nodes']), 'trine.nodes/1') as Obj & { nodes: { slots: number }[] }).nodes.reduce((a, n) => a + n.slots, 0);
    expect((await task(big)).waitReason).toBe(`can never fit: needs 1000 slots at once, the cluster has ${capacity} on 3 nodes; kill it and submit it with -n ${capacity} or fewer, or add nodes (\`trine node add\`)`);
    one(await at(['kill', big]), 'trine.kill/1');
    const plain = (one(await trine(['submit', '--linked', '--dir', dir, '--json', '--', 'sleep', '30']), 'trine.submit/1') as Obj & { task: string }).task;
    const hint = await waitFor(`${plain}/0 shown as not linked`, SOON_MS, async () => (await task(plain)).procs[0]?.reason ?? undefined, 200);
    expect(hint).toMatch(/^not linked after [0-9.]+ s: a --linked task's program must call link\(\) from trine\/app; a plain program is submitted without --linked$/);
    one(await at(['kill', plain]), 'trine.kill/1');
  });

  it('status and nodes --json: one line each, with their schema and their documented fields', async () => {
    const [statusRun, nodesRun] = await Promise.all([at(['status']), at(['nodes'])]);
    const status = lines(statusRun);
    expect(status).toHaveLength(1);
    // The primary is up's unless a loaded host got a replica replaced meanwhile: any member then.
    expect(status[0]).toMatchObject({ schema: 'trine.status/1', version: 1, healthy: true });
    expect(status[0]?.['primary']).toMatch(/^r[0-9]+$/);
    const nodes = one(nodesRun, 'trine.nodes/1') as Obj & { nodes: { node: string; state: string }[] };
    expect(nodes.nodes.map((n) => [n.node, n.state])).toEqual([['n1', 'up'], ['n2', 'up'], ['n3', 'up']]);
  });

  it('down --json: what it stopped', async () => {
    const down = one(await trine(['down', '--dir', dir, '--json']), 'trine.down/1') as Obj & { stopped: string[] };
    expect(down).toMatchObject({ dir, nothingRunning: false });
    expect(down.stopped).toEqual(expect.arrayContaining(['scc', 'a1', 'a2', 'a3']));
    expect(down.stopped.filter((id) => /^r[0-9]+$/.test(id)).length).toBeGreaterThanOrEqual(3); // a replaced replica has another id
    expect(pidsIn(dir).filter(alive)).toEqual([]);
    wentDown = true;
  });
});
