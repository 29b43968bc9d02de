// The manager's replicated task and process state (src/core/cluster-state.ts; spec §6, §6.1
// rows T1–T17, §6.2 rows P1–P15) driven directly: a fake node table, synthetic agent reports,
// ordered ticks. Every assertion is something an agent (the commands it receives), an operator
// (`trine ps`, answers) or a replica comparing digests could observe.
import { describe, expect, it } from 'vitest';
import {
  clusterView, createClusterState, encodeCluster, operateTask, needsTicks, nodeFailed, nodeJoined, procReports, submitTask,
  taskTimers, tick, type ClusterState, type NodeRecord, type TaskEffect, type TaskTimers,
} from '../../../src/core/cluster-state.ts';
import { DEFAULT_TIMING, MAX_FINISHED_TASKS, MAX_LIVE_TASKS, MAX_TASK_PROCS, MAX_VIEW_TASK_CHARS } from '../../../src/core/constants.ts';
import type { TaskView } from '../../../src/core/status.ts';
import type { GroupCommand, ProcReport, ProcSpawn, TaskSubmit } from '../../../src/core/wire/messages.ts';

const TIMERS: TaskTimers = { startTimeoutTicks: 3, terminateTimeoutTicks: 2, maxStartAttempts: 3, maxTerminateAttempts: 2, groupRequestTimeoutTicks: 4, replicaStartTimeoutTicks: 300 };

type Cmd = { agent: string; command: GroupCommand };

/** A manager's cluster state with agents a1…aN on nodes n1…nN, and what its last input did. */
class Cluster {
  cs: ClusterState = createClusterState();
  nodes = new Map<string, NodeRecord>();
  effects: TaskEffect[] = [];
  rsn = 0;
  constructor(count: number, slots = 1, joined = count) {
    for (let i = 1; i <= count; i++) {
      this.nodes.set(`a${i}`, { node: `n${i}`, joined: i <= joined, slots: i <= joined ? slots : 0, failed: false, draining: false, inc: 1 });
    }
  }
  submit(size: number, extra: Partial<TaskSubmit> = {}): { ok: boolean; text: string } {
    const req: TaskSubmit = {
      type: 'task.submit', nonce: '0'.repeat(32), name: 'job', size, file: '/bin/sleep', args: ['1'], cwd: '/tmp',
      env: [['A', '1'], ['B', '2']], mode: 'plain', taskKey: new Uint8Array(32).fill(7), ...extra,
    };
    const r = submitTask(this.cs, this.nodes, TIMERS, req, ++this.rsn);
    this.effects = r.effects;
    return r.outcome;
  }
  kill(task: string, what: 'kill' | 'restart' = 'kill'): { ok: boolean; text: string } {
    const r = operateTask(this.cs, this.nodes, TIMERS, task, what);
    this.effects = r.effects;
    return r.outcome;
  }
  /** A report from `agent` (by default the agent of the process's node). */
  report(task: string, vpid: number, kind: ProcReport['kind'], extra: Partial<ProcReport> & { agent?: string } = {}): TaskEffect[] {
    const { agent, ...fields } = extra;
    const from = agent ?? this.agentOf(this.proc(task, vpid).node ?? '');
    const r: ProcReport = { task, vpid, kind, pid: 0, exitCode: null, signal: null, reason: '', endpoint: '', ...fields };
    this.effects = procReports(this.cs, this.nodes, TIMERS, from, [r]);
    return this.effects;
  }
  /** Reports for every member of `task` in turn; returns every effect. */
  reportAll(task: string, kind: ProcReport['kind'], extra: (vpid: number) => Partial<ProcReport> = () => ({})): TaskEffect[] {
    const all: TaskEffect[] = [];
    for (const p of this.task(task).procs) all.push(...this.report(task, p.vpid, kind, extra(p.vpid)));
    this.effects = all;
    return all;
  }
  tick(n = 1): TaskEffect[] {
    const all: TaskEffect[] = [];
    for (let i = 0; i < n; i++) all.push(...tick(this.cs, this.nodes, TIMERS));
    this.effects = all;
    return all;
  }
  fail(agent: string): TaskEffect[] {
    const rec = this.nodes.get(agent) as NodeRecord;
    this.nodes.set(agent, { ...rec, failed: true });
    this.effects = nodeFailed(this.cs, this.nodes, TIMERS, agent);
    return this.effects;
  }
  join(agent: string, slots: number) {
    const rec = this.nodes.get(agent) as NodeRecord;
    this.nodes.set(agent, { ...rec, joined: true, failed: false, slots, inc: rec.inc + 1 });
    const r = nodeJoined(this.cs, this.nodes, TIMERS, agent);
    this.effects = r.effects;
    return r.adopt;
  }
  agentOf(node: string): string {
    return [...this.nodes].find(([, n]) => n.node === node)?.[0] ?? 'a?';
  }
  view() {
    return clusterView(this.cs, this.nodes);
  }
  task(id: string): TaskView {
    const t = this.view().tasks.find((x) => x.id === id);
    if (t === undefined) throw new Error(`no ${id} in view`);
    return t;
  }
  proc(task: string, vpid: number) {
    const p = this.task(task).procs.find((x) => x.vpid === vpid);
    if (p === undefined) throw new Error(`no ${task}/${vpid}`);
    return p;
  }
  commands(effects = this.effects): Cmd[] {
    return effects.flatMap((e) => (e.type === 'command' ? [{ agent: e.agent, command: e.command }] : []));
  }
  spawns(effects = this.effects): (ProcSpawn & { agent: string })[] {
    return this.commands(effects).flatMap((c) => (c.command.type === 'proc.spawn' ? [{ ...c.command, agent: c.agent }] : []));
  }
  terminates(effects = this.effects): string[] {
    return this.commands(effects).flatMap((c) => (c.command.type === 'proc.terminate' ? [`${c.agent}:${c.command.task}/${c.command.vpid}`] : []));
  }
  events(effects = this.effects): string[] {
    return effects.flatMap((e) => (e.type === 'event' ? [e.text] : []));
  }
  digest(): string {
    return JSON.stringify(encodeCluster(this.cs));
  }
  /** Every member spawns (pid 100+vpid) and, unless `stay`, the task is then running. */
  start(task: string): void {
    this.reportAll(task, 'spawnSucceeded', (v) => ({ pid: 100 + v }));
  }
}

describe('cluster state: tasks and processes (spec §6)', () => {
  it('the task key reaches every spawn command, a replacement\'s too, and nothing people see (PROTOCOL §9.5)', () => {
    const c = new Cluster(4);
    const key = new Uint8Array(32).fill(0xab);
    c.submit(2, { taskKey: key, mode: 'linked' });
    const events = [...c.events()];
    const spawns = c.spawns();
    expect(spawns).toHaveLength(2);
    for (const s of spawns) expect(s.taskKey).toEqual(key);
    c.start('t1');
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    events.push(...c.events());
    const shown = [JSON.stringify(c.view()), ...events].join('\n');
    expect(shown).not.toContain('abab');
    expect(shown).not.toContain('171,171');
    expect(shown).not.toMatch(/taskKey/i);
    // Replicas that applied the same submit agree on it: it is part of the digest.
    const other = new Cluster(4);
    other.submit(2, { taskKey: new Uint8Array(32).fill(0xcd), mode: 'linked' });
    const same = new Cluster(4);
    same.submit(2, { taskKey: key, mode: 'linked' });
    const fresh = new Cluster(4);
    fresh.submit(2, { taskKey: key, mode: 'linked' });
    expect(same.digest()).toBe(fresh.digest());
    expect(same.digest()).not.toBe(other.digest());
  });

  it('taskTimers converts ms to ticks of taskTickMs, at least 1', () => {
    expect(taskTimers(DEFAULT_TIMING)).toEqual({ groupRequestTimeoutTicks: 20, startTimeoutTicks: 400, terminateTimeoutTicks: 40, maxStartAttempts: 3, maxTerminateAttempts: 3, replicaStartTimeoutTicks: 300 });
    expect(taskTimers({ ...DEFAULT_TIMING, startTimeoutMs: 1, terminateTimeoutMs: 0 }).startTimeoutTicks).toBe(1);
  });

  it('T1–T4, T6 / P1–P3, P8: a 4-process task over 4 nodes spawns with the mapping, runs and ends normally', () => {
    const c = new Cluster(4);
    expect(c.submit(4, { args: ['5'] })).toEqual({ ok: true, text: 't1' });
    const spawns = c.spawns();
    expect(spawns.map((s) => `${s.agent}:${s.vpid}`)).toEqual(['a1:0', 'a2:1', 'a3:2', 'a4:3']);
    const endpoints = [0, 1, 2, 3].map((v) => ({ vpid: v, node: `n${v + 1}` }));
    for (const s of spawns) {
      expect(s).toMatchObject({ task: 't1', mode: 'plain', file: '/bin/sleep', args: ['5'], cwd: '/tmp', env: [['A', '1'], ['B', '2']], size: 4, restarted: false, endpoints });
    }
    expect(c.events()).toContain('t1 submitted: 4 × /bin/sleep');
    expect(c.task('t1').state).toBe('starting');
    expect(c.view().nodes.map((n) => [n.node, n.used, n.state])).toEqual([['n1', 1, 'up'], ['n2', 1, 'up'], ['n3', 1, 'up'], ['n4', 1, 'up']]);

    c.start('t1');
    expect(c.events()).toContain('t1/2 running pid 102 on n3');
    expect(c.events()).toContain('t1 running: 4 processes');
    expect(c.task('t1').state).toBe('running');
    expect(c.commands()).toEqual([]);

    c.reportAll('t1', 'terminatedNormally', () => ({ exitCode: 0 }));
    expect(c.task('t1')).toMatchObject({ state: 'terminatedNormally', outcome: 'normal', reason: 'all processes terminated normally' });
    expect(c.events()).toContain('t1 finished normally: all processes terminated normally');
    expect(c.view().nodes.every((n) => n.used === 0)).toBe(true);
    expect(needsTicks(c.cs)).toBe(false);
  });

  it('T7 / P9: a crash while Running is recorded with one GSIG_NTF_DIED and the task stays Running', () => {
    const c = new Cluster(4);
    c.submit(4);
    c.start('t1');
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL', reason: 'killed by SIGKILL' });
    expect(c.events()).toEqual(['t1/2 terminated abnormally: SIGKILL', 't1 GSIG_NTF_DIED(2)']);
    expect(c.task('t1').state).toBe('running');
    expect(c.proc('t1', 2)).toMatchObject({ state: 'terminatedAbnormally', signal: 'SIGKILL' });
    // [Choice, T6/T7] the others end normally, but a crash is never hidden by an exit status.
    for (const v of [0, 1, 3]) c.report('t1', v, 'terminatedNormally', { exitCode: 0 });
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 2)' });
  });

  it('kill of a running task: terminate commands, then terminatedAbnormally "killed by operator" (T8 path, P5, P7)', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.start('t1');
    expect(c.kill('t1')).toEqual({ ok: true, text: 't1 terminating' });
    expect(c.terminates()).toEqual(['a1:t1/0', 'a2:t1/1']);
    expect(c.task('t1').state).toBe('terminating');
    expect(needsTicks(c.cs)).toBe(true); // Terminate-TO runs
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM', reason: 'killed by SIGTERM' }));
    expect(c.task('t1')).toMatchObject({ state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'killed by operator' });
    expect(c.kill('t1')).toEqual({ ok: false, text: 't1 already finished (abnormally: killed by operator)' });
    expect(c.kill('t9')).toEqual({ ok: false, text: 'no task t9' });
  });

  it('T9: the operator restarts a running task: terminate all, then a fresh spawn with the restarted flag', () => {
    const c = new Cluster(2);
    c.submit(2);
    expect(c.kill('t1', 'restart')).toEqual({ ok: false, text: 't1 is starting: only a running task can be restarted' });
    c.start('t1');
    expect(c.kill('t1', 'restart')).toEqual({ ok: true, text: 't1 restarting' });
    expect(c.terminates()).toEqual(['a1:t1/0', 'a2:t1/1']);
    const after = c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM', reason: 'killed by SIGTERM' }));
    const respawned = c.spawns(after);
    expect(respawned.map((x) => x.vpid).sort()).toEqual([0, 1]);
    for (const sp of respawned) expect(sp).toMatchObject({ restarted: true, size: 2 });
    expect(c.task('t1')).toMatchObject({ state: 'starting', restarted: true, outcome: null });
    c.start('t1');
    expect(c.task('t1').state).toBe('running');
  });

  it('P15: a task killed while waiting for slots ends at once, commanding nothing', () => {
    const c = new Cluster(1);
    c.submit(2);
    expect(c.kill('t1')).toEqual({ ok: true, text: 't1 killed' });
    expect(c.commands()).toEqual([]);
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'killed by operator', waitReason: null });
  });

  it('T5 / P4, P11, P13: spawn failed → terminate all and retry up to maxStartAttempts, then give up', () => {
    const c = new Cluster(2);
    c.submit(2, { file: '/no/such' });
    for (let attempt = 1; attempt <= TIMERS.maxStartAttempts; attempt++) {
      expect(c.spawns().map((s) => s.vpid)).toEqual([0, 1]);
      expect(c.task('t1').startAttempts).toBe(attempt);
      c.report('t1', 0, 'spawnFailed', { reason: 'ENOENT /no/such' });
      expect(c.terminates()).toEqual(['a2:t1/1']); // the failed one is gone already
      expect(c.task('t1').failure).toBe('spawn failed: ENOENT /no/such');
      c.report('t1', 1, 'spawnFailed', { reason: 'terminated before it connected' });
    }
    expect(c.spawns()).toEqual([]);
    expect(c.task('t1')).toMatchObject({
      outcome: 'abnormal', reason: 'spawn failed: ENOENT /no/such (gave up after 3 start attempts)',
    });
    expect(c.events()).toContain('t1 finished abnormally: spawn failed: ENOENT /no/such (gave up after 3 start attempts)');
  });

  it('T3–T5 Start-TO: a process that never reports is timed out and retried; the task is never stuck', () => {
    const c = new Cluster(1);
    c.submit(1);
    for (let attempt = 1; attempt <= TIMERS.maxStartAttempts; attempt++) {
      expect(needsTicks(c.cs)).toBe(true);
      expect(c.tick(TIMERS.startTimeoutTicks - 1)).toEqual([]);
      c.tick();
      expect(c.terminates()).toEqual(['a1:t1/0']);
      c.report('t1', 0, 'spawnFailed', { reason: 'terminated before it connected' });
      if (attempt < TIMERS.maxStartAttempts) expect(c.spawns().map((s) => s.vpid)).toEqual([0]);
    }
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'start timed out after 3 ticks (gave up after 3 start attempts)' });
    expect(needsTicks(c.cs)).toBe(false);
  });

  it('T17: an agent that never answers Terminate gets it again, then the task is abandoned', () => {
    const c = new Cluster(1);
    c.submit(1);
    c.tick(TIMERS.startTimeoutTicks);
    expect(c.terminates()).toEqual(['a1:t1/0']);
    c.tick(TIMERS.terminateTimeoutTicks);
    expect(c.terminates()).toEqual(['a1:t1/0']); // P12: sent again
    c.tick(TIMERS.terminateTimeoutTicks);
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'terminate timed out after 2 attempts' });
    expect(needsTicks(c.cs)).toBe(false);
    expect(c.view().nodes[0]?.used).toBe(0); // a finished task holds no slot
  });

  it('too few slots: waitReason says why; a node joining gets the task placed', () => {
    const c = new Cluster(4, 1, 3);
    c.submit(4);
    expect(c.task('t1')).toMatchObject({ state: 'waitForResource', waitReason: 'needs 4 slots, 3 free on 3 healthy nodes' });
    expect(c.events()).toContain('t1 waiting: needs 4 slots, 3 free on 3 healthy nodes');
    expect(c.commands()).toEqual([]);
    expect(needsTicks(c.cs)).toBe(false);
    expect(c.join('a4', 1)).toEqual([]);
    expect(c.task('t1').waitReason).toBeNull();
    expect(c.spawns().map((s) => s.agent)).toEqual(['a1', 'a2', 'a3', 'a4']);
  });

  it('placement is first-fit: a request that does not fit does not block a smaller one behind it', () => {
    const c = new Cluster(2, 2);
    c.submit(6);
    c.submit(3);
    expect(c.spawns().map((s) => `${s.agent}:${s.vpid}`)).toEqual(['a1:0', 'a2:1', 'a1:2']); // most free first, ties by name
    expect(c.task('t1').waitReason).toBe('needs 6 slots, 1 free on 2 healthy nodes');
  });

  it('gang scheduling (spec §6): the second task spawns only once the first leaves Starting', () => {
    const c = new Cluster(4, 2);
    c.submit(4);
    c.submit(4);
    expect(c.spawns().map((s) => s.task)).toEqual([]); // t2 submitted: placed but waits its turn
    expect(c.task('t2').state).toBe('waitForStart');
    for (const v of [0, 1, 2]) expect(c.spawns(c.report('t1', v, 'spawnSucceeded', { pid: 10 + v }))).toEqual([]);
    c.report('t1', 3, 'spawnSucceeded', { pid: 13 });
    expect(c.task('t1').state).toBe('running');
    expect(c.spawns().map((s) => `${s.task}/${s.vpid}`)).toEqual(['t2/0', 't2/1', 't2/2', 't2/3']);
  });

  it('T7 / P10: a lost node ends its processes once each (node lost) and the task keeps running', () => {
    const c = new Cluster(4);
    c.submit(4);
    c.start('t1');
    c.fail('a3');
    expect(c.events()).toEqual(['node n3 lost: t1/2 dead', 't1 GSIG_NTF_DIED(2)']);
    expect(c.proc('t1', 2)).toMatchObject({ state: 'terminatedAbnormally', reason: 'node lost' });
    expect(c.task('t1').state).toBe('running');
    expect(c.view().nodes.find((n) => n.node === 'n3')).toMatchObject({ state: 'failed', used: 0 });
    // A late report from the failed node changes nothing: its process is already dead.
    const before = c.digest();
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events().filter((e) => e.includes('GSIG'))).toEqual([]);
    expect(c.digest()).toBe(before);
  });

  it('T5 with Res-removed: a node lost while starting → terminate, retry on the healthy nodes', () => {
    const c = new Cluster(3);
    c.submit(2);
    c.report('t1', 0, 'spawnSucceeded', { pid: 7 });
    c.fail('a2');
    expect(c.terminates()).toEqual(['a1:t1/0']);
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGTERM' });
    expect(c.spawns().map((s) => `${s.agent}:${s.vpid}`)).toEqual(['a1:0', 'a3:1']);
    expect(c.task('t1')).toMatchObject({ state: 'starting', startAttempts: 2, failure: 'node lost while starting (VPIDs 1)' });
  });

  it('[Choice, T2] a node lost while a task waits for its start turn: it gives the turn back and is placed again', () => {
    const c = new Cluster(3, 2);
    c.submit(3); // t1 starting: n1, n2, n3
    c.submit(2); // t2 placed on n1, n2, waiting behind t1
    c.fail('a2');
    expect(c.events()).toContain('t2 placing again: a node was lost before the spawn');
    expect(c.events()).toContain('t2 placed: n1×1 n3×1');
    // t1 lost a process while starting (T5): its terminate turn comes before t2's new start turn.
    expect(c.task('t2').state).toBe('waitForStart');
    expect(c.terminates()).toEqual(['a1:t1/0', 'a3:t1/2']);
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGTERM' });
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGTERM' });
    // t1 retries and needs 3 slots; t2 holds 2 of the 4 healthy ones, so t1 waits now.
    expect(c.task('t2').state).toBe('starting');
    expect(c.spawns().map((s) => `${s.agent}:${s.task}/${s.vpid}`)).toEqual(['a1:t2/0', 'a3:t2/1']);
    expect(c.task('t1').waitReason).toBe('needs 3 slots, 2 free on 2 healthy nodes');
  });

  it('a report from an agent that is not the process\'s node is dropped and changes nothing', () => {
    const c = new Cluster(2);
    c.submit(2);
    const before = c.digest();
    c.report('t1', 0, 'spawnSucceeded', { pid: 5, agent: 'a2' });
    expect(c.events()).toEqual(['dropped spawnSucceeded from a2 for t1/0: the process is on n1, not n2']);
    c.report('t1', 7, 'spawnSucceeded', { pid: 5, agent: 'a1' });
    expect(c.events()).toEqual(['dropped spawnSucceeded from a1 for t1/7: no such process']);
    expect(c.commands()).toEqual([]);
    expect(c.digest()).toBe(before);
  });

  it('submit validation refuses with a reason the user can act on', () => {
    const c = new Cluster(1);
    expect(c.submit(0)).toEqual({ ok: false, text: `size must be 1 to ${MAX_TASK_PROCS} processes, got 0` });
    expect(c.submit(MAX_TASK_PROCS + 1).ok).toBe(false);
    expect(c.submit(1, { file: '' })).toEqual({ ok: false, text: 'no executable given: pass the path of the file to run' });
    expect(c.submit(1, { cwd: 'tmp' })).toEqual({ ok: false, text: "cwd must be an absolute path, got 'tmp'" });
    expect(c.submit(1, { env: [['B', '1'], ['A', '2']] })).toEqual({ ok: false, text: "env must be sorted by name without repeats: 'A' follows 'B'" });
    expect(c.submit(1, { env: [['A', '1'], ['A', '2']] }).ok).toBe(false);
    expect(c.cs.tasks.size).toBe(0);
    expect(c.submit(1)).toEqual({ ok: true, text: 't1' }); // numbering starts at the first accepted
  });

  it(`refuses a task beyond ${MAX_LIVE_TASKS} live ones`, () => {
    const c = new Cluster(1, 0);
    for (let i = 1; i <= MAX_LIVE_TASKS; i++) expect(c.submit(1).text).toBe(`t${i}`);
    expect(c.submit(1)).toEqual({ ok: false, text: `${MAX_LIVE_TASKS} tasks are live, the limit: wait for some to finish or kill some` });
    c.kill('t1');
    expect(c.submit(1)).toEqual({ ok: true, text: `t${MAX_LIVE_TASKS + 1}` });
  });

  it(`keeps at most ${MAX_FINISHED_TASKS} finished tasks, forgetting the oldest`, () => {
    const c = new Cluster(1, 0);
    for (let i = 1; i <= MAX_FINISHED_TASKS + 2; i++) {
      c.submit(1);
      c.kill(`t${i}`);
    }
    c.submit(1);
    const ids = c.view().tasks.map((t) => t.id);
    expect(ids).toHaveLength(MAX_FINISHED_TASKS + 1);
    expect(ids[0]).toBe(`t${MAX_FINISHED_TASKS + 3}`); // live first
    expect(ids[1]).toBe('t3');
    expect(c.kill('t1')).toEqual({ ok: false, text: 'no task t1' });
  });

  it('the view fits a status reply: the oldest finished tasks are left out (counted), live ones never', () => {
    // Few processes with long reasons: as large a view as many small ones, at a quarter of the
    // FSM work (this test runs beside the simulator seeds on a loaded 2-core host).
    const c = new Cluster(4, 16);
    const args = Array.from({ length: 8 }, (_, i) => `--argument-${i}=${'x'.repeat(40)}`);
    for (let i = 1; i <= 60; i++) {
      c.submit(16, { args });
      c.start(`t${i}`);
      c.reportAll(`t${i}`, 'terminatedAbnormally', () => ({ signal: 'SIGKILL', reason: 'killed by SIGKILL '.repeat(40) }));
    }
    c.submit(2);
    const v = c.view();
    expect(JSON.stringify(v.tasks).length).toBeLessThanOrEqual(MAX_VIEW_TASK_CHARS);
    expect(v.omittedTasks).toBeGreaterThan(0);
    expect(v.tasks.length + v.omittedTasks).toBe(61);
    expect(v.tasks.some((t) => t.id === 't61' && t.outcome === null)).toBe(true);
    // The newest finished ones are kept.
    expect(v.tasks.some((t) => t.id === 't60')).toBe(true);
    expect(v.tasks.some((t) => t.id === 't1')).toBe(false);
  });

  it('needsTicks only while a Start-TO or Terminate-TO runs', () => {
    const c = new Cluster(1);
    expect(needsTicks(c.cs)).toBe(false);
    c.submit(1);
    expect(needsTicks(c.cs)).toBe(true);
    c.start('t1');
    expect(needsTicks(c.cs)).toBe(false);
    c.tick();
    expect(c.view().tick).toBe(1);
  });

  it('nodeJoined: a new agent incarnation is told which of its processes to adopt (PROTOCOL §8.6)', () => {
    const c = new Cluster(2, 2);
    c.submit(4);
    c.report('t1', 1, 'spawnSucceeded', { pid: 41 });
    // a2 holds t1/1 (running, pid 41) and t1/3 (spawning, pid not known yet).
    expect(c.join('a2', 2)).toEqual([{ task: 't1', vpid: 1, pid: 41, linked: false }, { task: 't1', vpid: 3, pid: 0, linked: false }]);
    expect(c.events()).toEqual(['node n2 joined: 2 slots, adopting 2 processes']);
  });

  it('encodeCluster: equal for the same inputs, different after different ones', () => {
    const run = (crash: boolean) => {
      const c = new Cluster(3, 2);
      c.submit(4);
      c.submit(2);
      c.start('t1');
      c.tick(2);
      if (crash) c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGSEGV' });
      else c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
      return c;
    };
    const [a, b, d] = [run(false), run(false), run(true)];
    expect(a.digest()).toBe(b.digest());
    expect(a.effects).toEqual(b.effects);
    expect(a.digest()).not.toBe(d.digest());
    // Plain data only: it survives JSON unchanged.
    expect(JSON.parse(a.digest())).toEqual(encodeCluster(a.cs));
  });
});
