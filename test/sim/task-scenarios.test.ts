// Task scenarios in the simulator (issue 3; spec §1.3, §1.4, §6, §9.2 A11): the real cores, the
// real agent process table on a simulated OS, the real watchdog core. Each asserts what an
// operator or a peer could observe, then the task and group invariants.
import { describe, expect, it } from 'vitest';
import type { CoreInput } from '../../src/core/node.ts';
import type { ClusterView } from '../../src/core/status.ts';
import type { ProcReport } from '../../src/core/wire/messages.ts';
import { realCores } from '../../src/sim/cores.ts';
import { TaskSim } from '../../src/sim/tasks.ts';

function sim(seed = 1): TaskSim {
  const s = new TaskSim({ seed, agents: 4, cores: realCores, trace: true });
  s.world.start();
  // Every agent joins first, as `trine up` waits for a healthy cluster before returning.
  s.world.runUntil(50);
  return s;
}
const view = (s: TaskSim, r = 'r2'): ClusterView => s.views().get(r) as ClusterView;
const task = (s: TaskSim, id: string, r = 'r2') => view(s, r).tasks.find((t) => t.id === id);
function finish(s: TaskSim): void {
  s.finish(true);
  s.world.checker.finish({ livenessExpected: true, digests: s.world.digests() });
  expect(s.world.checker.violations).toEqual([]);
}
function submitted(s: TaskSim, spec: Parameters<TaskSim['submit']>[0]): { id: string | null } {
  const out = { id: null as string | null };
  s.submit(spec, (ok, text) => {
    if (ok) out.id = text;
  });
  return out;
}
const deathsOf = (s: TaskSim, pid: number) =>
  s.world.effects((e, at) => at === 'r1' && e.type === 'deliver.request' && e.request.type === 'proc.report')
    .flatMap((o) => (o.effect.type === 'deliver.request' && o.effect.request.type === 'proc.report' ? o.effect.request.reports.map((r) => ({ ...o, r })) : []))
    .filter(({ r }) => r.pid === pid && r.kind !== 'spawnSucceeded');

describe('tasks in the simulator', () => {
  it('a 4-process task runs on 4 nodes and ends normally with every exit code 0 (T1–T4, T6)', () => {
    const s = sim();
    const t = submitted(s, { name: 'ok', size: 4, file: 'sim-work', args: ['200', '0'] });
    s.world.runUntil(150);
    expect(t.id).toBe('t1');
    expect(task(s, 't1')?.state).toBe('running');
    expect(new Set(task(s, 't1')?.procs.map((p) => p.node))).toEqual(new Set(['n1', 'n2', 'n3', 'n4']));
    s.world.runUntil(600);
    expect(task(s, 't1')).toMatchObject({ state: 'terminatedNormally', outcome: 'normal' });
    for (const p of task(s, 't1')?.procs ?? []) expect(p).toMatchObject({ state: 'terminatedNormally', exitCode: 0 });
    finish(s);
  });

  it('a crashed process is reported dead exactly once, within a few ms, and the task keeps running (T7)', () => {
    const s = sim();
    submitted(s, { name: 'crash', size: 3, file: 'sim-forever' });
    s.world.runUntil(150);
    const victim = [...s.nodes.values()].flatMap((n) => n.os.running())[0];
    expect(victim).toBeDefined();
    const at = s.now;
    s.nodes.get(`a${victim?.node.slice(1)}`)?.os.crash(victim?.pid ?? 0);
    s.world.runUntil(at + 50);
    const p = task(s, 't1')?.procs.find((x) => x.pid === victim?.pid);
    expect(p).toMatchObject({ state: 'terminatedAbnormally', signal: 'SIGKILL' });
    expect(task(s, 't1')?.state).toBe('running');
    const recorded = deathsOf(s, victim?.pid ?? 0);
    expect(recorded).toHaveLength(1);
    expect((recorded[0]?.atMs ?? Infinity) - at).toBeLessThan(10);
    s.kill('t1');
    s.world.runUntil(at + 1000);
    expect(task(s, 't1')).toMatchObject({ outcome: 'abnormal', reason: 'killed by operator' });
    finish(s);
  });

  it('a missing executable ends the task "spawn failed: ENOENT …" after its start attempts; the cluster stays healthy', () => {
    const s = sim();
    submitted(s, { name: 'missing', size: 2, file: 'sim-missing' });
    s.world.runUntil(3000);
    const t = task(s, 't1');
    expect(t).toMatchObject({ state: 'terminatedAbnormally', outcome: 'abnormal' });
    expect(t?.reason).toMatch(/^spawn failed: ENOENT sim-missing .*gave up after 3 start attempts/);
    // Healthy: the next task runs.
    submitted(s, { name: 'after', size: 1, file: 'sim-work', args: ['10', '0'] });
    s.world.runUntil(3300);
    expect(task(s, 't2')?.outcome).toBe('normal');
    finish(s);
  });

  it('more processes than free slots: the task waits and says why, then runs when slots free up', () => {
    const s = sim();
    submitted(s, { name: 'big', size: 14, file: 'sim-work', args: ['300', '0'] });
    s.world.runUntil(70);
    submitted(s, { name: 'next', size: 4, file: 'sim-work', args: ['10', '0'] });
    s.world.runUntil(150);
    expect(task(s, 't2')?.state).toBe('waitForResource');
    expect(task(s, 't2')?.waitReason).toMatch(/needs 4 slots, 2 free/);
    s.world.runUntil(1000);
    expect(task(s, 't2')?.outcome).toBe('normal');
    finish(s);
  });

  it('issue 15: the t.slots check can fail: agents that tell the group two slots more than their nodes have are caught as the group fills them', () => {
    const liars = { ...realCores, agent: (o: Parameters<typeof realCores.agent>[0]) => realCores.agent({ ...o, slots: o.slots + 2 }) };
    const s = new TaskSim({ seed: 7, agents: 4, cores: liars, trace: true });
    s.world.start();
    s.world.runUntil(50);
    submitted(s, { name: 'over', size: 20, file: 'sim-work', args: ['300', '0'] });
    s.world.runUntil(400);
    const caught = s.world.checker.violations.filter((v) => v.invariant === 't.slots');
    expect(caught.length).toBeGreaterThan(0);
    expect(caught[0]).toMatchObject({ seed: 7 });
    expect(caught[0]?.message).toMatch(/^t1\/\d+ started on n\d as its process number 5: the node has 4 slot\(s\)$/);
  });

  it('issue 15: the t.outcome check can fail: agents that report every exit as a clean exit 0 are caught against the OS', () => {
    const liars = {
      ...realCores,
      agent: (o: Parameters<typeof realCores.agent>[0]) => {
        const core = realCores.agent(o);
        const clean = (r: ProcReport): ProcReport => (r.kind === 'terminatedAbnormally' ? { ...r, kind: 'terminatedNormally', exitCode: 0, signal: null, reason: '' } : r);
        return {
          id: core.id, nextWakeMs: () => core.nextWakeMs(),
          step: (i: CoreInput) => core.step(i.type === 'request' && i.request.type === 'proc.report' ? { ...i, request: { ...i.request, reports: i.request.reports.map(clean) } } : i),
        };
      },
    };
    const s = new TaskSim({ seed: 8, agents: 4, cores: liars, trace: true });
    s.world.start();
    s.world.runUntil(50);
    submitted(s, { name: 'fails', size: 2, file: 'sim-work', args: ['30', '3'] });
    s.world.runUntil(600);
    expect(task(s, 't1')?.outcome).toBe('normal'); // what the lying agents made the group believe
    s.finish(true);
    const caught = s.world.checker.violations.filter((v) => v.invariant === 't.outcome');
    expect(caught.length).toBeGreaterThan(0);
    expect(caught[0]).toMatchObject({ seed: 8 });
    expect(caught[0]?.message).toMatch(/^r\d: t1\/\d \(pid \d+ on n\d\) ended with code 0, signal null, but its OS says code 3, signal null$/);
  });

  it('an agent killed and restarted by its keeper adopts the processes that still run; nothing is reported dead (spec §1.4)', () => {
    const s = sim();
    submitted(s, { name: 'adopt', size: 4, file: 'sim-forever' });
    s.world.runUntil(150);
    s.agentDeath('a2', 30);
    s.world.runUntil(400);
    expect(view(s).nodes.find((n) => n.agent === 'a2')?.state).toBe('up');
    expect(task(s, 't1')?.procs.every((p) => p.state === 'running')).toBe(true);
    expect(s.world.effects((e, at) => at === 'a2' && e.type === 'deliver.command' && e.command.type === 'procs.adopt')).toHaveLength(1);
    s.kill('t1');
    s.world.runUntil(1500);
    expect(task(s, 't1')?.outcome).toBe('abnormal');
    finish(s);
  });

  it('A11: a node that loses power is declared failed within 600 ms, its processes die once, and the watchdog resets it', () => {
    const s = sim();
    submitted(s, { name: 'node', size: 4, file: 'sim-forever' });
    s.world.runUntil(150);
    const lost = task(s, 't1')?.procs.find((p) => p.node === 'n3');
    const at = s.now;
    s.powerOff('a3');
    s.world.runUntil(at + 600);
    const failed = s.world.effects((e, id) => id === 'r1' && e.type === 'deliver.input' && e.input.type === 'node.failed');
    expect(failed).toHaveLength(1);
    expect(task(s, 't1')?.procs.find((p) => p.vpid === lost?.vpid)).toMatchObject({ state: 'terminatedAbnormally', reason: 'node lost' });
    expect(task(s, 't1')?.state).toBe('running');
    expect(view(s).events.filter((e) => e.text === `t1 GSIG_NTF_DIED(${lost?.vpid})`)).toHaveLength(1);
    s.world.runUntil(at + 1200);
    expect(s.stats.resets).toBe(1);
    expect(view(s).nodes.find((n) => n.agent === 'a3')?.state).toBe('up');
    s.kill('t1');
    s.world.runUntil(at + 2500);
    finish(s);
  });

  it('a partitioned agent is declared failed and reset: its processes are stopped and reported dead only once', () => {
    const s = sim();
    submitted(s, { name: 'part', size: 4, file: 'sim-forever' });
    s.world.runUntil(150);
    s.world.network.addPartition({ fromMs: 100, untilMs: 800, isolated: ['a4'] });
    s.world.runUntil(1500);
    expect(view(s).nodes.find((n) => n.agent === 'a4')?.state).toBe('up');
    expect(s.stats.resets).toBe(1);
    expect(s.nodes.get('a4')?.os.running()).toHaveLength(0);
    s.kill('t1');
    s.world.runUntil(2500);
    finish(s);
  });

  it('the checks catch a planted bug: an agent that drops terminate commands leaves tasks unfinished and processes running', () => {
    const s = new TaskSim({
      seed: 1, agents: 4, cores: realCores,
      wrapCore: (id, core) => (id !== 'a1' ? core : {
        ...core,
        step: (input) => core.step(input).filter((e) => !(e.type === 'deliver.command' && e.command.type === 'proc.terminate')),
      }),
    });
    s.world.start();
    s.world.runUntil(50);
    submitted(s, { name: 'doomed', size: 4, file: 'sim-forever' });
    s.world.runUntil(300);
    s.kill('t1');
    s.world.runUntil(3000);
    s.finish(true);
    const names = new Set(s.world.checker.violations.map((v) => v.invariant));
    expect(names.has('t.truth')).toBe(true);
  });
});
