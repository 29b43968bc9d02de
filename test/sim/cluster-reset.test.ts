// Cluster reset and task restore in the simulator (spec §1.6 rule 2, §9.2 A21; PROTOCOL §10.8,
// §10.9): the real replica, agent and watchdog cores; every replica's task journal kept on its
// node's disk across the reset. Each test asserts what an operator could observe — the watchdog's
// status, the replicas' views, the processes on the nodes — then the task and group invariants.
import { describe, expect, it } from 'vitest';
import type { ClusterView } from '../../src/core/status.ts';
import { realCores } from '../../src/sim/cores.ts';
import { RESTORE_BOUND_MS, TaskSim } from '../../src/sim/tasks.ts';

function sim(seed = 1): TaskSim {
  const s = new TaskSim({ seed, agents: 4, cores: realCores, trace: true });
  s.world.start();
  // Every agent joins first, as `trine up` waits for a healthy cluster before returning.
  s.world.runUntil(50);
  return s;
}
const view = (s: TaskSim, r: string): ClusterView => s.views().get(r) as ClusterView;
const task = (s: TaskSim, id: string, r: string) => view(s, r).tasks.find((t) => t.id === id);
function submitted(s: TaskSim, spec: Parameters<TaskSim['submit']>[0]): { id: string | null } {
  const out = { id: null as string | null };
  s.submit(spec, (ok, text) => {
    if (ok) out.id = text;
  });
  return out;
}
function finish(s: TaskSim): void {
  s.finish(true);
  s.world.checker.finish({ livenessExpected: true, digests: s.world.digests() });
  expect(s.world.checker.violations).toEqual([]);
}
/** Pids running task `id` on the simulated nodes, per node. */
const running = (s: TaskSim, id: string) =>
  [...s.nodes.values()].flatMap((n) => n.os.running().filter((p) => p.task === id).map((p) => ({ node: n.node, pid: p.pid, startedAtMs: p.startedAtMs })));

describe('cluster reset (A21)', () => {
  it('A21: two replicas fail at once → the watchdog resets the cluster → every accepted task runs again with the restarted flag', () => {
    const s = sim();
    const forever = submitted(s, { name: 'forever', size: 4, file: 'sim-forever' });
    s.world.runUntil(70);
    const linked = submitted(s, { name: 'linked', size: 2, file: 'sim-linked' });
    s.world.runUntil(90);
    const short = submitted(s, { name: 'short', size: 1, file: 'sim-work', args: ['20', '0'] });
    s.world.runUntil(400);
    expect([forever.id, linked.id, short.id]).toEqual(['t1', 't2', 't3']);
    expect(task(s, 't1', 'r1')?.state).toBe('running');
    expect(task(s, 't2', 'r1')?.state).toBe('running');
    expect(task(s, 't3', 'r1')?.outcome).toBe('normal');
    const before = new Map(s.watchdogStatus().replicas.map((r) => [r.id, r.inc ?? 0]));
    const oldPids = new Set([...running(s, 't1'), ...running(s, 't2')].map((p) => p.pid));
    expect(oldPids.size).toBe(6);

    // Two replicas fail at the same moment: r1 alone cannot serve (f = 1).
    const crashAt = s.now;
    s.crashReplicas(['r2', 'r3']);
    s.world.runUntil(crashAt + 1900);
    expect(s.watchdogStatus().clusterResets).toEqual([]);
    s.world.runUntil(crashAt + 2500);

    // The watchdog reset the cluster once, by rule 2, about watchdogSilenceMs after the last two
    // consistent heartbeats.
    const resets = s.world.effects((e, at) => at === 'scc' && e.type === 'reset.cluster');
    expect(resets).toHaveLength(1);
    const resetAt = resets[0]?.atMs ?? 0;
    expect(resetAt - crashAt).toBeGreaterThanOrEqual(2000);
    expect(resetAt - crashAt).toBeLessThan(2000 + 2 * 75 + 10);
    expect(s.watchdogStatus().clusterResets).toMatchObject([{ rule: 'heartbeats' }]);
    expect(s.clusterResets[0]).toMatchObject({ failed: ['r2', 'r3'], journals: ['r1', 'r2', 'r3'] });
    // Only the two live tasks were journalled; the finished one is not restored.
    expect([...(s.clusterResets[0]?.held.values() ?? [])].sort()).toEqual(['t1', 't2']);

    s.world.runUntil(resetAt + RESTORE_BOUND_MS);
    // The fresh group: r1–r3 with higher incarnations, serving, at equal RSNs and digests.
    const status = s.watchdogStatus();
    for (const id of ['r1', 'r2', 'r3']) {
      expect(s.world.replica(id)?.phase()).toBe('serving');
      const inc = status.replicas.find((r) => r.id === id)?.inc ?? 0;
      expect(inc).toBeGreaterThan(before.get(id) ?? Infinity);
    }
    expect(status.armed).toBe(true);
    const digests = s.world.digests();
    expect(new Set([...digests.values()].map((d) => `${d.rsn}/${d.digest}`)).size).toBe(1);
    // The watchdog restored both tasks, each confirmed by two replicas, under its old id.
    expect(status.restoresPending).toEqual([]);
    expect(status.restores).toMatchObject([
      { kind: 'restored', task: 't1', ok: true, text: 't1' },
      { kind: 'restored', task: 't2', ok: true, text: 't2' },
    ]);
    // Every replica of the fresh group runs them with the restarted flag, on new processes.
    for (const r of ['r1', 'r2', 'r3']) {
      expect(task(s, 't1', r)).toMatchObject({ state: 'running', restarted: true, size: 4 });
      expect(task(s, 't2', r)).toMatchObject({ state: 'running', restarted: true, size: 2 });
      expect(task(s, 't3', r)).toBeUndefined();
    }
    const t1 = running(s, 't1');
    const t2 = running(s, 't2');
    // Placed on whichever nodes had joined the fresh group when the restore was ordered (the
    // watchdog restores as soon as two replicas serve; agents join within the same few ms).
    expect(t1).toHaveLength(4);
    expect(t2).toHaveLength(2);
    // What the group believes runs is what runs on the nodes.
    for (const [id, procs] of [['t1', t1], ['t2', t2]] as const) {
      const believed = (task(s, id, 'r1')?.procs ?? []).map((p) => `${p.node}:${p.pid}`).sort();
      expect(believed).toEqual(procs.map((p) => `${p.node}:${p.pid}`).sort());
    }
    for (const p of [...t1, ...t2]) {
      expect(oldPids.has(p.pid)).toBe(false);
      expect(p.startedAtMs).toBeGreaterThan(resetAt);
    }
    // The linked processes learn from their mapping that the task restarted (PROTOCOL §9).
    for (const vpid of [0, 1]) expect(s.app('t2', vpid).mapping).toMatchObject({ restarted: true });

    s.kill('t1');
    s.kill('t2');
    s.world.runUntil(resetAt + 3000);
    expect(task(s, 't1', 'r2')?.outcome).toBe('abnormal');
    expect(task(s, 't2', 'r2')?.outcome).toBe('abnormal');
    expect(s.settled()).toBe(true);
    finish(s);
  });

  it('a request pending during the outage is answered by the fresh group; the restored task keeps its id', () => {
    const s = sim(2);
    submitted(s, { name: 'forever', size: 2, file: 'sim-forever' });
    s.world.runUntil(300);
    s.crashReplicas(['r1', 'r3']);
    s.world.runUntil(400);
    // Submitted while the group cannot answer: the operator resends it until two replicas agree.
    const late = submitted(s, { name: 'late', size: 1, file: 'sim-work', args: ['50', '0'] });
    s.world.runUntil(2300);
    expect(late.id).toBeNull();
    s.world.runUntil(4000);
    expect(s.stats.clusterResets).toBe(1);
    expect(late.id).not.toBeNull();
    expect(late.id).not.toBe('t1');
    expect(task(s, 't1', 'r1')).toMatchObject({ state: 'running', restarted: true });
    expect(task(s, late.id ?? '', 'r1')).toMatchObject({ restarted: false, outcome: 'normal' });
    s.kill('t1');
    s.world.runUntil(5000);
    finish(s);
  });

  it('a group that had replaced a replica is reset as a whole: every disk is read (the replacement\'s too), and the fresh group replaces its own failures with the same spare ids', () => {
    const s = sim(6);
    submitted(s, { name: 'forever', size: 3, file: 'sim-forever' });
    s.world.runUntil(100);
    s.world.crash('r2');
    s.world.runUntil(3000);
    expect(s.world.replica('r1')?.state?.().replicas).toEqual(['r1', 'r3', 'r4']);
    s.crashReplicas(['r3', 'r4']);
    s.world.runUntil(6000);
    expect(s.clusterResets).toMatchObject([{ failed: ['r3', 'r4'], journals: ['r1', 'r2', 'r3', 'r4'] }]);
    expect(s.world.liveReplicas().sort()).toEqual(['r1', 'r2', 'r3']);
    expect(task(s, 't1', 'r2')).toMatchObject({ state: 'running', restarted: true });
    // A failure in the fresh group is handled as in any group: r4 starts again as the replacement.
    s.world.crash('r3');
    s.world.runUntil(10_000);
    expect(s.world.replica('r1')?.state?.().replicas).toEqual(['r1', 'r2', 'r4']);
    expect(s.stats.clusterResets).toBe(1);
    s.kill('t1');
    s.world.runUntil(11_000);
    finish(s);
  });

  it('one replica failing never resets the cluster: the group replaces it and the tasks run on (spec §1.6 rule 2 needs two)', () => {
    const s = sim(3);
    submitted(s, { name: 'forever', size: 3, file: 'sim-forever' });
    s.world.runUntil(300);
    const pids = running(s, 't1').map((p) => p.pid);
    s.world.crash('r2');
    s.world.runUntil(6000);
    expect(s.watchdogStatus().clusterResets).toEqual([]);
    expect(s.stats.clusterResets).toBe(0);
    expect(running(s, 't1').map((p) => p.pid)).toEqual(pids);
    expect(task(s, 't1', 'r1')).toMatchObject({ state: 'running', restarted: false });
    s.kill('t1');
    s.world.runUntil(7000);
    finish(s);
  });

  // Found by this test: the watchdog ignored a node reset whose (node, RSN) it had ordered before
  // a cluster reset, though the fresh group's RSNs start over, and n3 stayed off for good. It now
  // forgets the ordered (node, RSN)s and pending votes at a cluster reset (src/core/watchdog.ts).
  it('a node the fresh group declares failed is power-reset even at an RSN where the old group had one reset (watchdog: node-reset history across a cluster reset)', () => {
    const s = sim(1);
    submitted(s, { name: 'forever', size: 2, file: 'sim-forever' });
    s.world.runUntil(200);
    s.powerOff('a3');
    s.world.runUntil(1200);
    expect(s.watchdogStatus().resets).toMatchObject([{ node: 'n3', rsn: 8 }]);
    s.crashReplicas(['r2', 'r3']);
    s.world.runUntil(3600);
    const resetAt = s.clusterResets[0]?.atMs ?? Infinity;
    s.world.runUntil(resetAt + 100);
    s.powerOff('a3');
    s.world.runUntil(resetAt + 1600);
    // The fresh group declared n3 failed at RSN 8 as well …
    const failed = s.world.effects((e, at) => at === 'r1' && e.type === 'deliver.input' && e.input.type === 'node.failed');
    expect(failed.map((f) => (f.effect.type === 'deliver.input' ? f.effect.rsn : 0))).toEqual([8, 8]);
    // … and the watchdog must reset it again, so that its agent comes back.
    expect(s.watchdogStatus().resets).toMatchObject([{ node: 'n3', rsn: 8 }, { node: 'n3', rsn: 8 }]);
    expect(s.world.isUp('a3')).toBe(true);
  });

  it('the checks catch a lost journal: a task live at the reset that no disk holds (t.restored)', () => {
    const s = sim(4);
    submitted(s, { name: 'forever', size: 2, file: 'sim-forever' });
    s.world.runUntil(300);
    s.crashReplicas(['r2', 'r3']);
    s.world.runUntil(400);
    // Planted: every disk loses its journal (as a replica that never wrote one would leave it).
    s.disks.clear();
    s.world.runUntil(3500);
    expect(s.stats.clusterResets).toBe(1);
    const found = s.world.checker.violations.filter((v) => v.invariant === 't.restored').map((v) => v.message);
    expect(found.some((m) => /t1 .*no journal holds it/.test(m))).toBe(true);
    expect(found.some((m) => /t1 was accepted and live at the cluster reset, but r1 does not hold it/.test(m))).toBe(false);
  });

  it('the checks catch a needless cluster reset: the watchdog cut off from three correct replicas (g.cluster-reset)', () => {
    const s = sim(5);
    s.world.runUntil(300);
    // Planted: the network drops every heartbeat to the watchdog from 300 ms on, so rule 2 fires
    // though no replica failed.
    s.world.network.addRule((f, nowMs) => (f.to === 'scc' && nowMs >= 300 ? 'drop' : 'pass'));
    s.world.runUntil(2700);
    expect(s.watchdogStatus().clusterResets).toHaveLength(1);
    expect(s.world.checker.violations.map((v) => v.invariant)).toContain('g.cluster-reset');
  });
});
