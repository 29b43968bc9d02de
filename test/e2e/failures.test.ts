// Failures on a real local cluster (issue 3 items 4–5; docs/PROTOCOL.md §8.4–§8.6; spec §1.4,
// §1.6): one `trine up --nodes 4`, then, as an operator sees them through the CLI,
//   - a task process killed with SIGKILL: reported terminatedAbnormally by SIGKILL, task running;
//   - an agent killed with SIGKILL: the keeper's warm standby takes over before the group could
//     declare the node failed; the new incarnation adopts the processes still running;
//   - a whole node killed (keeper, agent, standby, task processes): the node is declared failed,
//     its processes lost (FsmTask T7: the task runs on), the watchdog resets the node with the
//     local reset driver and a new agent incarnation joins;
//   - `trine down` then leaves nothing: no process whose command line mentions the test dir.
// Liveness is polled with generous deadlines; the latencies the protocol cares about (failure
// detection, agent replacement) are printed from the replicas' own journal timestamps, not
// asserted (STYLE.md 17: timing belongs to bench/).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { alive, trine, waitFor } from './helpers.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterView, NodeView, ProcView, TaskView } from '../../src/core/status.ts';

/** Liveness deadlines: generous, for a loaded 2-core host running two e2e files at once. */
const SOON_MS = 15_000;
const REJOIN_MS = 30_000;

let root = '';
let dir = '';
/** A task process that runs until killed; its path (in the test dir) marks it in /proc. */
let sleeper = '';

type View = ClusterView & { rsn: number; agreedBy: string[] };
async function view(): Promise<View> {
  const r = await trine(['ps', '--json', '--dir', dir]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as View;
}
async function nodes(): Promise<NodeView[]> {
  const r = await trine(['nodes', '--json', '--dir', dir]);
  expect(r.code).toBe(0);
  return (JSON.parse(r.stdout) as { nodes: NodeView[] }).nodes;
}
const nodeOf = async (node: string): Promise<NodeView> => {
  const n = (await nodes()).find((x) => x.node === node);
  if (n === undefined) throw new Error(`no node ${node}`);
  return n;
};

/** Live (not zombie) processes other than this one whose command line mentions the test dir. */
function processesOfTestDir(): { pid: number; cmdline: string }[] {
  const out: { pid: number; cmdline: string }[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmdline.includes(root) && alive(Number(name))) out.push({ pid: Number(name), cmdline });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function kill9(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** A pid record in the run dir (`a4.pid`, `a4.agent-pid`, `a4.standby-pid`). */
function recordedPid(file: string): number | null {
  try {
    const n = Number(readFileSync(join(dir, 'run', file), 'utf8').trim());
    return Number.isSafeInteger(n) && n > 1 ? n : null;
  } catch {
    return null;
  }
}

/** Log events of one process (`logs/<id>.log`). */
function logEvents(id: string): Record<string, unknown>[] {
  const path = join(dir, 'logs', `${id}.log`);
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The pid of `agent`'s standby once its keeper says it is loaded and waiting. */
const standbyReady = (agent: string): Promise<number> => waitFor(`a loaded standby for ${agent}`, SOON_MS, () => {
  const pid = recordedPid(`${agent}.standby-pid`);
  const ready = pid !== null && alive(pid) && logEvents(`${agent}-keeper`).some((e) => e['event'] === 'standby.ready' && e['standbyPid'] === pid);
  return ready ? pid : undefined;
});

/** Submits `size` sleepers and waits until every process runs; one per node when size is 4
 *  and the cluster is idle (placement takes the node with the most free slots). */
async function runningTask(name: string, size: number): Promise<TaskView> {
  // One process per node only if every node is up with all its slots free: under load the last
  // test's processes may still hold a slot (CI once saw n4 skipped, its process not yet gone).
  await waitFor('every node up and idle', SOON_MS, async () => ((await nodes()).every((n) => n.state === 'up' && n.used === 0) ? true : undefined));
  const s = await trine(['submit', '--dir', dir, '-n', String(size), '--name', name, '--', process.execPath, sleeper]);
  expect(s.stderr).toBe('');
  expect(s.code).toBe(0);
  const id = s.stdout.trim();
  return waitFor(`${id} running`, SOON_MS, async () => {
    const t = (await view()).tasks.find((x) => x.id === id);
    return t?.state === 'running' && t.procs.every((p) => p.state === 'running' && p.pid !== null) ? t : undefined;
  });
}

/** Kills a task through the CLI and waits until it has finished and its processes are gone. */
async function killTask(task: TaskView): Promise<void> {
  const k = await trine(['kill', '--dir', dir, task.id]);
  expect(k.stderr).toBe('');
  expect(k.stdout).toBe(`${task.id} killed\n`);
  const done = await waitFor(`${task.id} finished`, SOON_MS, async () => {
    const t = (await view()).tasks.find((x) => x.id === task.id);
    return t?.outcome !== null ? t : undefined;
  });
  expect(done).toMatchObject({ state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'killed by operator' });
  const pids = task.procs.map((p) => p.pid as number);
  await waitFor(`${task.id}'s processes gone`, SOON_MS, () => (pids.every((pid) => !alive(pid)) ? true : undefined));
}

const procOn = (task: TaskView, node: string): ProcView => {
  const p = task.procs.find((x) => x.node === node);
  if (p === undefined || p.pid === null) throw new Error(`${task.id} has no running process on ${node}: ${JSON.stringify(task.procs)}`);
  return p;
};

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-failures-'));
  dir = join(root, 'cluster');
  sleeper = join(root, 'sleeper.mjs');
  writeFileSync(sleeper, 'setInterval(() => {}, 1 << 30);\n');
  const up = await trine(['up', '--nodes', '4', '--dir', dir], 90_000);
  if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
}, 120_000);

afterAll(async () => {
  // The last test checks that `trine down` leaves nothing; this only cleans up after a failure.
  if (existsSync(join(dir, 'run'))) await trine(['down', '--dir', dir]);
  for (const p of processesOfTestDir()) {
    kill9(-p.pid);
    kill9(p.pid);
  }
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('failures on a 4-node cluster (PROTOCOL §8.4–§8.6)', () => {
  it('a process crash: the VPID killed with SIGKILL ends terminatedAbnormally by SIGKILL, the task keeps running', async () => {
    const task = await runningTask('crash', 4);
    const victim = task.procs[1] as ProcView;
    const killedAtMs = Date.now();
    process.kill(victim.pid as number, 'SIGKILL');

    const after = await waitFor('the crash reported', SOON_MS, async () => {
      const v = await view();
      const t = v.tasks.find((x) => x.id === task.id);
      return t?.procs[1]?.state === 'terminatedAbnormally' ? { v, t } : undefined;
    });
    expect(after.t.procs[1]).toMatchObject({ vpid: 1, pid: victim.pid, state: 'terminatedAbnormally', signal: 'SIGKILL' });
    expect(after.t.state).toBe('running');
    expect(after.t.procs.filter((p) => p.vpid !== 1).map((p) => p.state)).toEqual(['running', 'running', 'running']);
    const reported = after.v.events.find((e) => e.task === task.id && e.vpid === 1 && e.text.includes('terminated abnormally'));
    expect(reported?.text).toMatch(/terminated abnormally: SIGKILL/);
    console.log(`process crash: kill → report applied ${(reported?.atMs ?? NaN) - killedAtMs} ms`);

    await killTask(task);
  });

  it('an agent death: the keeper promotes its standby; the node stays up, adopts its running process, with a new incarnation', { timeout: 120_000 }, async () => {
    // The standby joins in about 100 ms, well inside the ≈ 350 ms a silent node takes to be
    // declared failed (PROTOCOL §8.6). On a host loaded by other test files the join can come
    // later than that: the node is then declared failed and reset, which is the failure
    // detector doing its job outside its timing bounds (docs/FAULT-MODEL.md). Such a trial is
    // reported and tried once more, once the node is back.
    let attempt = 0;
    for (;;) {
      attempt++;
      const task = await runningTask(`agent-death-${attempt}`, 4);
      const before = await nodeOf('n4');
      expect(before.state).toBe('up');
      const standby = await standbyReady('a4');
      const agent = recordedPid('a4.agent-pid');
      expect(agent).not.toBeNull();
      const killedAtMs = Date.now();
      process.kill(agent as number, 'SIGKILL');
      const rejoined = await waitFor('a new a4 incarnation', SOON_MS, async () => {
        const n = await nodeOf('n4');
        return n.inc > before.inc ? n : undefined;
      });
      const lost = (await view()).events.some((e) => e.atMs >= killedAtMs && e.text.startsWith('node n4 lost'));
      if (lost && attempt === 1) {
        console.log('agent death: n4 was declared failed before the standby joined (host overloaded); trying once more');
        await waitFor('n4 up again', REJOIN_MS, async () => ((await nodeOf('n4')).state === 'up' ? true : undefined));
        await killTask(task).catch(() => null);
        continue;
      }
      await checkAgentDeath(task, rejoined, standby, killedAtMs);
      return;
    }
  });

  async function checkAgentDeath(task: TaskView, rejoined: NodeView, standby: number, killedAtMs: number): Promise<void> {
    const survivor = procOn(task, 'n4');
    expect(rejoined.state).toBe('up');
    // The standby is the new agent: its pid is recorded as the agent's.
    expect(recordedPid('a4.agent-pid')).toBe(standby);

    const v = await view();
    const since = v.events.filter((e) => e.atMs >= killedAtMs);
    expect(since.some((e) => e.text.startsWith('node n4 lost'))).toBe(false);
    const joined = since.find((e) => e.text.startsWith('node n4 joined'));
    expect(joined?.text).toBe('node n4 joined: 4 slots, adopting 1 process');
    const t = v.tasks.find((x) => x.id === task.id) as TaskView;
    expect(t.state).toBe('running');
    expect(procOn(t, 'n4')).toMatchObject({ pid: survivor.pid, state: 'running' });
    expect(alive(survivor.pid as number)).toBe(true);
    const replaced = logEvents('a4-keeper').find((e) => e['event'] === 'agent.start' && e['agentPid'] === standby);
    console.log(`agent death: kill → standby promoted ${String(replaced?.['replaceMs'])} ms (keeper), kill → node.join applied ${(joined?.atMs ?? NaN) - killedAtMs} ms`);

    // The adopted process is the new agent's to kill.
    await killTask(task);
  }

  it('a node failure: declared failed with its processes lost (T7: the task runs on), then reset by the watchdog and rejoined', { timeout: 120_000 }, async () => {
    const task = await runningTask('node-failure', 4);
    const lost = procOn(task, 'n4');
    const before = await nodeOf('n4');
    await standbyReady('a4');
    const keeper = recordedPid('a4.pid');
    const agent = recordedPid('a4.agent-pid');
    const standby = recordedPid('a4.standby-pid');
    const victims = [keeper, agent, standby, lost.pid].filter((p): p is number => p !== null);
    expect(victims).toHaveLength(4);
    const killedAtMs = Date.now();
    for (const pid of victims) process.kill(pid, 'SIGKILL');

    const failed = await waitFor('n4 declared failed', SOON_MS, async () => {
      const v = await view();
      const t = v.tasks.find((x) => x.id === task.id);
      const event = v.events.find((e) => e.atMs >= killedAtMs && e.text.startsWith('node n4 lost'));
      return event !== undefined && t !== undefined ? { v, t, event } : undefined;
    });
    expect(failed.event.text).toBe(`node n4 lost: ${task.id}/${lost.vpid} dead`);
    expect(procOn(failed.t, 'n4')).toMatchObject({ pid: lost.pid, state: 'terminatedAbnormally', reason: 'node lost' });
    expect(failed.t.state).toBe('running');
    expect(failed.t.procs.filter((p) => p.node !== 'n4').every((p) => p.state === 'running')).toBe(true);

    const rejoined = await waitFor('n4 up again with a new incarnation', REJOIN_MS, async () => {
      const n = await nodeOf('n4');
      return n.state === 'up' && n.inc > before.inc ? n : undefined;
    });
    expect(rejoined.slots).toBe(4);
    // The watchdog ordered the reset (two replicas asked) and its local driver ran it: a new
    // keeper, recorded in the pid file, runs the node's new agent.
    const scc = logEvents('scc');
    const ordered = scc.find((e) => e['event'] === 'node.reset' && e['node'] === 'n4');
    expect((ordered?.['requestedBy'] as string[] | undefined)?.length).toBe(2);
    const done = scc.find((e) => e['event'] === 'reset.done' && e['node'] === 'n4');
    expect(done).toBeDefined();
    expect(scc.some((e) => e['event'] === 'reset.failed')).toBe(false);
    const newKeeper = recordedPid('a4.pid');
    expect(newKeeper).not.toBe(keeper);
    expect(alive(newKeeper as number)).toBe(true);
    for (const pid of victims) expect(alive(pid)).toBe(false);
    const v = await view();
    const joined = v.events.find((e) => e.atMs >= killedAtMs && e.text.startsWith('node n4 joined'));
    console.log(`node failure: kill → node.failed applied ${failed.event.atMs - killedAtMs} ms, reset ${String(done?.['durationMs'])} ms, kill → rejoined ${(joined?.atMs ?? NaN) - killedAtMs} ms`);

    await killTask(task);
  });

  it('A22: the agent and keeper of a node that hosts the primary replica die; the node is declared failed and reset, its replica with it, and the group replaces the primary', { timeout: 120_000 }, async () => {
    const before = await nodeOf('n1');
    await standbyReady('a1');
    const replica = recordedPid('r1.pid');
    expect(replica).not.toBeNull();
    const victims = [recordedPid('a1.pid'), recordedPid('a1.agent-pid'), recordedPid('a1.standby-pid')].filter((p): p is number => p !== null);
    expect(victims).toHaveLength(3);
    const killedAtMs = Date.now();
    for (const pid of victims) process.kill(pid, 'SIGKILL');

    const lost = await waitFor('n1 declared failed', SOON_MS, async () => (await view()).events.find((e) => e.atMs >= killedAtMs && e.text.startsWith('node n1 lost')));
    await waitFor('n1 up again with a new incarnation', REJOIN_MS, async () => {
      const n = await nodeOf('n1');
      return n.state === 'up' && n.inc > before.inc ? n : undefined;
    });
    // A reset takes the whole node down, as a power cycle does: the replica on it too. The
    // group condemns it and a spare takes its place; r1 is not started again (PROTOCOL §10.10).
    expect(alive(replica as number)).toBe(false);
    const status = await waitFor('a healthy, converged group without r1', REJOIN_MS, async () => {
      const r = await trine(['status', '--json', '--dir', dir]);
      const doc = JSON.parse(r.stdout) as { healthy: boolean; converged: boolean; primary: string | null; group: { members: string[] } };
      return doc.healthy && doc.converged && !doc.group.members.includes('r1') && doc.group.members.length === 3 ? doc : undefined;
    });
    expect(status.primary).toBe('r2');
    console.log(`A22: kill → node n1 declared failed ${lost.atMs - killedAtMs} ms; group ${status.group.members.join(',')}`);
  });

  it('trine down stops everything — keepers (one started by the watchdog), agents, standbys — leaving no process that mentions the cluster dir', async () => {
    // Every node runs a keeper, an agent and a standby (the one reset above included).
    for (const a of ['a1', 'a2', 'a3', 'a4']) await standbyReady(a);
    const pids = ['a1', 'a2', 'a3', 'a4'].flatMap((a) => [`${a}.pid`, `${a}.agent-pid`, `${a}.standby-pid`].map(recordedPid));
    expect(pids.every((p) => p !== null && alive(p))).toBe(true);
    const r = await trine(['down', '--dir', dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(processesOfTestDir()).toEqual([]);
    expect(readdirSync(join(dir, 'run')).filter((f) => /pid$|procs\.json$/.test(f))).toEqual([]);
  });
});
