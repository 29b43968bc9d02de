// Rollback tasks in the simulator (docs/PROTOCOL.md §11.2; radic-hmpl A.2.7–A.2.8): the real
// replica and agent cores and the agents' process tables, linked processes scripted through the
// agent's socket interface (src/sim/tasks.ts SimApp). A dead rank's replacement is spawned by
// the group alone (no process asks), gets its rank in its mapping, and the safety checker
// finds nothing wrong.
import { describe, expect, it } from 'vitest';
import { finalizeApp } from '../../src/core/agent-procs-app.ts';
import type { TaskView } from '../../src/core/status.ts';
import { realCores } from '../../src/sim/cores.ts';
import { TaskSim, type SimApp } from '../../src/sim/tasks.ts';
import type { Recovery } from '../../src/core/wire/messages.ts';

const OPTIONS = { logging: 'rbml', checkpoint: 'nco', intervalMs: 2000, maxStateBytes: 1 << 20 } as const;
const ROLLBACK: Recovery = { kind: 'rollback', ...OPTIONS };

function rollbackTask(size: number, agents: number) {
  const s = new TaskSim({ seed: 17, agents, cores: realCores, trace: true });
  s.world.start();
  s.world.runUntil(50);
  s.submit({ name: 'heat', size, file: 'sim-linked', recovery: ROLLBACK });
  s.world.runUntil(200);
  const apps = Array.from({ length: size }, (_, v) => s.app('t1', v));
  for (const a of apps) expect(a.mapping?.rollback, `t1/${a.vpid} has its rank`).toMatchObject({ rank: a.vpid, ranks: [0, 1, 2].slice(0, size) });
  return { s, apps };
}

const task = (s: TaskSim): TaskView => s.views().get('r2')?.tasks.find((t) => t.id === 't1') as TaskView;

function finish(s: TaskSim): void {
  s.finish(false);
  s.world.checker.finish({ livenessExpected: false, digests: s.world.digests() });
  expect(s.world.checker.violations).toEqual([]);
}

describe('PROTOCOL §11.2: a rollback task in the simulator', () => {
  it('radic-hmpl A.2.7: a crashed rank comes back as a new VPID with the same rank; no process asked for it', () => {
    const { s, apps } = rollbackTask(3, 4);
    const v = apps[1] as SimApp;
    [...s.nodes.values()].find((n) => n.agent === v.agent)?.os.crash(v.pid);
    s.world.runUntil(s.now + 200);
    const fresh = s.app('t1', 3);
    expect(fresh.mapping).toMatchObject({ vpid: 3, recovered: true, rollback: { rank: 1, ranks: [0, 3, 2], ...OPTIONS } });
    expect(task(s).procs.map((p) => [p.vpid, p.rank])).toEqual([[0, 0], [1, null], [2, 2], [3, 1]]);
    expect(task(s).state).toBe('running');
    // The current holders finalize and exit 0: the task ends normally, the crash of VPID 1
    // notwithstanding (its rank's holder now is VPID 3).
    for (const a of [apps[0] as SimApp, fresh, apps[2] as SimApp]) {
      const n = [...s.nodes.values()].find((x) => x.agent === a.agent);
      if (n?.procs != null) finalizeApp(n.procs, 't1', a.vpid);
      n?.os.finish(a.pid, 0);
    }
    s.world.runUntil(s.now + 200);
    expect(task(s)).toMatchObject({ outcome: 'normal', reason: 'all processes terminated normally' });
    finish(s);
  });

  it('radic-hmpl A.2.8: a lost node\'s ranks are replaced on the healthy nodes', () => {
    const { s, apps } = rollbackTask(3, 4);
    const v = apps[2] as SimApp;
    s.powerOff(v.agent);
    s.world.runUntil(s.now + 2000);
    const t = task(s);
    const holder = t.procs.find((p) => p.rank === 2 && p.state === 'running');
    expect(holder?.vpid).toBe(3);
    expect(holder?.node).not.toBe(t.procs.find((p) => p.vpid === 2)?.node);
    expect(s.app('t1', 3).mapping?.rollback).toMatchObject({ rank: 2, ranks: [0, 1, 3] });
    finish(s);
  });

  it('PROTOCOL §11.7, radic-hmpl A.2.8 "the failed group ... rolls forward together": under bsco a crashed rank\'s group partner is killed and both are replaced', () => {
    const s = new TaskSim({ seed: 17, agents: 2, slots: 2, cores: realCores, trace: true });
    s.world.start();
    s.world.runUntil(50);
    s.submit({ name: 'heat', size: 4, file: 'sim-linked', recovery: { ...ROLLBACK, checkpoint: 'bsco' } });
    s.world.runUntil(200);
    const apps = Array.from({ length: 4 }, (_, v) => s.app('t1', v));
    const groups = apps[0]!.mapping?.rollback?.groups;
    expect(groups).toEqual([0, 1, 0, 1]); // spread placement: VPIDs 0 and 2 on one node
    const v = apps[0] as SimApp;
    [...s.nodes.values()].find((n) => n.agent === v.agent)?.os.crash(v.pid);
    s.world.runUntil(s.now + 2000);
    const t = task(s);
    expect(t.procs.filter((p) => p.state === 'running').map((p) => [p.vpid, p.rank])).toEqual([[1, 1], [3, 3], [4, 0], [5, 2]]);
    expect(s.app('t1', 5).mapping?.rollback).toMatchObject({ rank: 2, ranks: [4, 1, 5, 3], groups: [0, 1, 0, 1] });
    finish(s);
  });
});
