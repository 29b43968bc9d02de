// The manager's replicated task and process state (src/core/cluster-inputs.ts and the cluster-*
// modules behind it; spec §6, §6.1 rows T1–T17, §6.2 rows P1–P15) driven through its entry points: a fake node table, synthetic agent reports,
// ordered ticks. Every assertion is something an agent (the commands it receives), an operator
// (`trine ps`, answers) or a replica comparing digests could observe.
import { describe, expect, it } from 'vitest';
import { submitTask } from '../../../src/core/cluster-inputs.ts';
import { liveSubmits, liveTasks, needsTicks, slotsHeldOn, tasksOn, taskTimers, type NodeRecord, type TaskEffect } from '../../../src/core/cluster-state.ts';
import { clusterView, encodeCluster, LINK_HINT_MS, notLinkedYet } from '../../../src/core/cluster-view.ts';
import { DEFAULT_TIMING, MAX_ARGS, MAX_FINISHED_TASKS, MAX_LIVE_TASKS, MAX_TASK_PROCS, MAX_VIEW_TASK_CHARS } from '../../../src/core/constants.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../../../src/core/signals.ts';
import type { TaskSubmit } from '../../../src/core/wire/messages.ts';
import { Cluster, linkedRunning, TIMERS } from './cluster-driver.ts';

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
    expect(c.task('t1').waitReason).toBe('can never fit: needs 6 slots at once, the cluster has 4 on 2 nodes; kill it and submit it with -n 4 or fewer, or add nodes (`trine node add`)');
  });

  it('issue 19: a task larger than every slot of the cluster says at once that it can never fit, with the capacity; not while a node has yet to join and say its slots', () => {
    const c = new Cluster(3, 2, 2); // n3 has not joined: its slots are not known yet
    c.submit(6);
    expect(c.task('t1').waitReason).toBe('needs 6 slots, 4 free on 2 healthy nodes');
    c.join('a3', 1);
    expect(c.task('t1').waitReason).toBe('can never fit: needs 6 slots at once, the cluster has 5 on 3 nodes; kill it and submit it with -n 5 or fewer, or add nodes (`trine node add`)');
    expect(c.events()).toContain('t1 waiting: can never fit: needs 6 slots at once, the cluster has 5 on 3 nodes; kill it and submit it with -n 5 or fewer, or add nodes (`trine node add`)');
    c.fail('a3'); // a failed node still counts: a new agent incarnation brings it back
    expect(c.task('t1').waitReason).toMatch(/^can never fit: .* the cluster has 5 on 3 nodes/);
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

describe('cluster state: placement and the journal (spec §6; PROTOCOL §8.2)', () => {
  it('issue 19: a linked process not connected LINK_HINT_MS after its start says so in the view, with the fix; a connected one and a plain task\'s never do', () => {
    const TICK_MS = LINK_HINT_MS / 2; // two ordered ticks make the hint's second
    const c = new Cluster(2);
    c.submit(2, { mode: 'linked' });
    const reasons = (task: string, of = c) => clusterView(of.cs, of.nodes, TICK_MS).tasks.find((t) => t.id === task)?.procs.map((p) => [p.state, p.reason]);
    c.tick();
    expect(reasons('t1')).toEqual([['spawning', null], ['spawning', null]]);
    c.report('t1', 0, 'spawnSucceeded', { pid: 10, endpoint: 'h:10' });
    c.tick();
    expect(reasons('t1')).toEqual([['running', null], ['spawning', notLinkedYet(LINK_HINT_MS)]]);
    expect(notLinkedYet(LINK_HINT_MS)).toBe("not linked after 1.0 s: a --linked task's program must call link() from trine/app; a plain program is submitted without --linked");
    expect(clusterView(c.cs, c.nodes).tasks[0]?.procs.map((p) => p.reason)).toEqual([null, null]); // no task clock given: no judgement
    const plain = new Cluster(1);
    plain.submit(1, { mode: 'plain' });
    plain.tick(2);
    expect(reasons('t1', plain)).toEqual([['spawning', null]]);
  });

  it('issue 19: a process of an application SPAWN waiting for a slot shows no link hint: nothing was started; once placed, the hint counts from its spawn, not from the SPAWN', () => {
    const TICK_MS = LINK_HINT_MS; // one ordered tick makes the hint's second
    const c = linkedRunning(2); // two nodes of one slot, both taken
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    const spawned = c.task('t1').procs.find((p) => p.vpid === 2);
    expect(spawned).toMatchObject({ state: 'waitForResource', node: null });
    c.tick();
    const view = (vpid: number) => clusterView(c.cs, c.nodes, TICK_MS).tasks[0]?.procs.find((p) => p.vpid === vpid);
    expect(view(2)).toMatchObject({ state: 'waitForResource', node: null, reason: null });
    // VPID 1 dies and its slot goes to VPID 2, a second after the SPAWN started the Start-TO:
    // just spawned, it is not yet late.
    c.report('t1', 1, 'terminatedAbnormally', { pid: 11, signal: 'SIGKILL' });
    expect(view(2)).toMatchObject({ state: 'spawning', node: 'n2', reason: null });
    c.tick();
    expect(view(2)).toMatchObject({ state: 'spawning', reason: notLinkedYet(LINK_HINT_MS) });
  });

  it('submit bounds: exactly MAX_TASK_PROCS processes and MAX_ARGS arguments are accepted; one more, or a fractional size, is refused', () => {
    const c = new Cluster(1, 0);
    expect(c.submit(MAX_TASK_PROCS)).toEqual({ ok: true, text: 't1' });
    expect(c.submit(MAX_TASK_PROCS + 1)).toEqual({ ok: false, text: `size must be 1 to ${MAX_TASK_PROCS} processes, got ${MAX_TASK_PROCS + 1}` });
    expect(c.submit(1.5)).toEqual({ ok: false, text: `size must be 1 to ${MAX_TASK_PROCS} processes, got 1.5` });
    const args = (n: number) => Array.from({ length: n }, (_, i) => `${i}`);
    expect(c.submit(1, { args: args(MAX_ARGS) })).toEqual({ ok: true, text: 't2' });
    expect(c.submit(1, { args: args(MAX_ARGS + 1) })).toEqual({ ok: false, text: `at most ${MAX_ARGS} arguments, got ${MAX_ARGS + 1}` });
  });

  it('T3, T5 / P4: the journal tells the start attempt, the failed spawn and its node, the terminate with its cause, the exit, and the retry', () => {
    const c = new Cluster(2);
    c.submit(2);
    expect(c.events()).toContain('t1 starting (attempt 1 of 3)');
    c.report('t1', 0, 'spawnFailed', { reason: 'ENOENT' });
    expect(c.events()).toEqual(['t1/0 spawn failed on n1: ENOENT', 't1 terminating: spawn failed: ENOENT']);
    c.report('t1', 1, 'terminatedAbnormally', { exitCode: 143 });
    expect(c.events()).toEqual([
      't1/1 terminated abnormally: exit 143', 't1 retrying after: spawn failed: ENOENT', 't1 placed: n1×1 n2×1', 't1 starting (attempt 2 of 3)',
    ]);
  });

  it('gang scheduling (spec §6) [Choice]: a terminate turn goes before a start turn queued earlier', () => {
    const c = new Cluster(2, 2);
    c.submit(2); // t1 starting on n1, n2
    c.submit(2); // t2 placed on n1, n2, queued to start
    c.report('t1', 0, 'spawnFailed', { reason: 'ENOENT' });
    expect(c.terminates()).toEqual(['a2:t1/1']);
    expect(c.spawns()).toEqual([]);
    expect(c.task('t2').state).toBe('waitForStart');
  });

  it('PROTOCOL §8.6: a process placed but not yet spawned (waiting for its start turn) is not adopted', () => {
    const c = new Cluster(2, 2);
    c.submit(2);
    c.submit(2);
    expect(c.proc('t2', 1)).toMatchObject({ node: 'n2', state: 'allocated' });
    expect(c.join('a2', 2)).toEqual([{ task: 't1', vpid: 1, pid: 0, linked: false }]);
  });

  it('PROTOCOL §10.12: a node is held by the live tasks whose processes hold a slot there: not by ended processes, nor by an abandoned task', () => {
    const c = new Cluster(3);
    c.submit(2);
    c.start('t1'); // n1, n2
    expect([1, 2, 3].map((i) => [tasksOn(c.cs, `n${i}`), slotsHeldOn(c.cs, `n${i}`)])).toEqual([[['t1'], 1], [['t1'], 1], [[], 0]]);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect([tasksOn(c.cs, 'n2'), slotsHeldOn(c.cs, 'n2')]).toEqual([[], 0]);
    c.kill('t1');
    c.tick(TIMERS.terminateTimeoutTicks * TIMERS.maxTerminateAttempts); // T17: n1's agent never answers
    expect(c.task('t1').reason).toBe('killed by operator; terminate timed out after 2 attempts');
    expect(c.proc('t1', 0).state).toBe('terminating');
    expect([tasksOn(c.cs, 'n1'), slotsHeldOn(c.cs, 'n1')]).toEqual([[], 0]);
  });

  it('a task\'s wait reason is journalled once, not again at every input while it waits', () => {
    const c = new Cluster(2, 1, 1); // n2 yet to join: t1 may fit once it does
    c.submit(2);
    expect(c.events()).toContain('t1 waiting: needs 2 slots, 1 free on 1 healthy node');
    expect(c.tick()).toEqual([]);
    c.submit(1); // takes the free slot: the reason changes, and is journalled again
    expect(c.events()).toEqual(['t2 submitted: 1 × /bin/sleep', 't2 placed: n1×1', 't1 waiting: needs 2 slots, 0 free on 1 healthy node', 't2 starting (attempt 1 of 3)']);
    expect(c.tick()).toEqual([]);
  });

  it('PROTOCOL §8.4: an idle node lost is journalled as such', () => {
    const c = new Cluster(2);
    expect(c.fail('a2')).toEqual([{ type: 'event', task: null, vpid: null, text: 'node n2 lost: no processes', kind: 'node.lost', subject: 'n2' }]);
  });

  it('the operator\'s kill of a task waiting for its start turn is journalled: requested, then finished (T2 path)', () => {
    const c = new Cluster(1, 2);
    c.submit(1);
    c.submit(1); // placed, waits for its start turn
    expect(c.proc('t2', 0).state).toBe('allocated');
    c.kill('t2');
    expect(c.events()).toEqual(['t2 kill requested by the operator', 't2 finished abnormally: killed by operator']);
  });

  it('PROTOCOL §10.12 / §7: the node view is in agent-id order with each node\'s state; nothing is placed on a draining or joining node', () => {
    const c = new Cluster(10, 1, 9);
    c.nodes.set('a2', { ...(c.nodes.get('a2') as NodeRecord), draining: true });
    c.fail('a3');
    expect(c.view().nodes.map((n) => `${n.agent}:${n.state}`)).toEqual([
      'a1:up', 'a10:joining', 'a2:draining', 'a3:failed', 'a4:up', 'a5:up', 'a6:up', 'a7:up', 'a8:up', 'a9:up',
    ]);
    c.submit(7);
    expect(c.spawns().map((x) => x.agent)).toEqual(['a1', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9']);
    c.submit(1);
    expect(c.task('t2').waitReason).toBe('needs 1 slot, 0 free on 7 healthy nodes');
  });

  it('PROTOCOL §10.9, §10.11: live tasks, the submits to restore and `trine ps` list tasks by number, whatever order they were created in', () => {
    const c = new Cluster(1, 0);
    const req: TaskSubmit = {
      type: 'task.submit', nonce: '0'.repeat(32), name: 'job', size: 1, file: '/bin/true', args: [], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
    };
    const signed = (n: string) => ({ nonce: n, bytes: new Uint8Array([1]), sig: new Uint8Array([2]) });
    expect(submitTask(c.cs, c.nodes, TIMERS, req, 1, signed('a'), 't10').outcome.text).toBe('t10');
    expect(submitTask(c.cs, c.nodes, TIMERS, req, 2, signed('b'), 't9').outcome.text).toBe('t9');
    expect(submitTask(c.cs, c.nodes, TIMERS, req, 3, signed('c')).outcome.text).toBe('t11');
    c.submit(1); // t12: no signed submit (a unit test's), nothing to restore
    c.kill('t11');
    expect(liveTasks(c.cs)).toEqual(['t9', 't10', 't12']);
    expect(liveSubmits(c.cs).map((x) => `${x.task}:${x.submit.nonce}`)).toEqual(['t9:b', 't10:a']);
    // `trine ps` lists them the same way: live tasks by number, then the finished ones.
    expect(clusterView(c.cs, c.nodes).tasks.map((t) => t.id)).toEqual(['t9', 't10', 't12', 't11']);
  });

  it('the status view leaves out every finished task older than one it left out, however small (MAX_VIEW_TASK_CHARS)', () => {
    const c = new Cluster(1, 0);
    const big = Array.from({ length: 50 }, () => 'x'.repeat(4000)); // 200,000 characters
    for (const args of [['small'], big, big]) {
      c.submit(1, { args });
      c.kill(`t${c.cs.nextTask - 1}`);
    }
    c.submit(1);
    const v = c.view();
    expect(v.tasks.map((t) => t.id)).toEqual(['t4', 't3']);
    expect(v.omittedTasks).toBe(2);
  });
});

describe('cluster state: Ghidrah signals (spec §4; PROTOCOL §9)', () => {
  it('§9.3: a linked task reaching Running sends each agent one mapping for its members, listing every member\'s node and endpoint', () => {
    const c = new Cluster(2, 2);
    c.submit(3, { mode: 'linked' });
    c.startLinked('t1');
    const members = [{ vpid: 0, node: 'n1', endpoint: 'h:0' }, { vpid: 1, node: 'n2', endpoint: 'h:1' }, { vpid: 2, node: 'n1', endpoint: 'h:2' }];
    const mapping = { type: 'proc.mapping', task: 't1', restarted: false, recovered: false, epoch: 0, quorum: 3, members, rollback: null, dgrp: null, straggler: null };
    expect(c.mappings()).toEqual([{ ...mapping, agent: 'a1', vpids: [0, 2] }, { ...mapping, agent: 'a2', vpids: [1] }]);
    expect(c.task('t1').procs.map((p) => p.endpoint)).toEqual(['h:0', 'h:1', 'h:2']);
  });

  it('§9.1: a point-to-point signal goes to its destination\'s agent alone, from the sender, with the epoch, which it leaves alone', () => {
    const c = linkedRunning(3);
    c.signal('t1', 1, 100, GSIG_BROADCAST); // epoch 1
    c.signal('t1', 0, 100, 2, 7);
    expect(c.sigs()).toEqual(['a3 [2] 100 0→2 7 @1']);
    expect(c.task('t1')).toMatchObject({ epoch: 1, signals: { broadcasts: 1, pointToPoint: 1, groupRequests: 0, dropped: 0 } });
    c.signal('t1', 0, 99, 2, 7);
    expect(c.events()).toEqual(['dropped signal 99 from t1/0: signal number 99 is not an application signal']);
    c.signal('t1', 0, 100, 5, 7);
    expect(c.events()).toEqual(['dropped signal 100 from t1/0: destination VPID 5 is not a connected member']);
    expect(c.commands()).toEqual([]);
    expect(c.task('t1').signals).toMatchObject({ pointToPoint: 1, dropped: 2 });
  });

  it('§9.1: before the task is Running no signal is routed: dropped and counted, not journalled (routine)', () => {
    const c = new Cluster(3);
    c.submit(3, { mode: 'linked' });
    c.report('t1', 0, 'spawnSucceeded', { pid: 1 });
    c.report('t1', 1, 'spawnSucceeded', { pid: 2 });
    c.signal('t1', 0, 100, 1);
    expect(c.effects).toEqual([]);
    c.signal('t1', 0, 100, GSIG_BROADCAST);
    expect(c.effects).toEqual([]);
    expect(c.task('t1')).toMatchObject({ epoch: 0, signals: { broadcasts: 0, pointToPoint: 0, dropped: 2 } });
  });

  it('§9.2 rules 1–3: the first broadcast request of an epoch reaches every live member at epoch+1; one of a stale epoch is dropped silently', () => {
    const c = linkedRunning(3);
    c.signal('t1', 1, 100, GSIG_BROADCAST, 9);
    expect(c.sigs()).toEqual(['a1 [0] 100 1→ALL 9 @1', 'a2 [1] 100 1→ALL 9 @1', 'a3 [2] 100 1→ALL 9 @1']);
    c.signal('t1', 1, 100, GSIG_BROADCAST, 9, { epoch: 0 });
    expect(c.effects).toEqual([]);
    expect(c.task('t1')).toMatchObject({ epoch: 1, signals: { broadcasts: 1, dropped: 1 } });
  });

  it('§9.2 rules 3–5: a group request is performed once a quorum matches; a second request of a process in the epoch does not count', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0, 1], GSIG.REQ_SYNC, 5);
    expect(c.effects).toEqual([]);
    expect(needsTicks(c.cs)).toBe(true); // the group-request timeout runs
    c.ask('t1', [0], GSIG.REQ_SYNC, 5);
    expect(c.effects).toEqual([]);
    c.ask('t1', [2], GSIG.REQ_SYNC, 5);
    expect(c.events()).toEqual(['t1 group request GSIG_REQ_SYNC(5) accepted']);
    // Accepting is one epoch change, the REP_SYNC broadcast another.
    expect(c.sigs()).toEqual(['a1 [0] 25 CM→ALL 5 @2', 'a2 [1] 25 CM→ALL 5 @2', 'a3 [2] 25 CM→ALL 5 @2']);
    expect(c.task('t1').signals).toEqual({ broadcasts: 1, pointToPoint: 0, groupRequests: 4, dropped: 1 });
    expect(needsTicks(c.cs)).toBe(false);
  });

  it('§9.2 rule 6: requests that can no longer reach the quorum get GSIG_ERR_DISAGREE(0) at once', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    c.ask('t1', [1], GSIG.REQ_SYNC, 2);
    expect(c.events()).toEqual(['t1 group request cannot reach quorum 3 of 3: GSIG_ERR_DISAGREE']);
    expect(c.sigs()).toEqual(['a1 [0] 26 CM→ALL 0 @1', 'a2 [1] 26 CM→ALL 0 @1', 'a3 [2] 26 CM→ALL 0 @1']);
  });

  it('§9.2 rule 7: no quorum within groupRequestTimeoutTicks of the first request: GSIG_ERR_DISAGREE, and the clock may stop', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    expect(c.tick(TIMERS.groupRequestTimeoutTicks - 1)).toEqual([]);
    expect(needsTicks(c.cs)).toBe(true);
    c.tick();
    expect(c.events()).toEqual(['t1 group request timed out without a quorum: GSIG_ERR_DISAGREE']);
    expect(c.sigs()).toEqual(['a1 [0] 26 CM→ALL 0 @1', 'a2 [1] 26 CM→ALL 0 @1']);
    expect(needsTicks(c.cs)).toBe(false);
  });

  it('§9.2 rule 8 (spec item 71): a broadcast request in an epoch with group requests is dropped and counts as a request matching none', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    c.signal('t1', 1, 100, GSIG_BROADCAST);
    expect(c.events()).toEqual(['t1 group request cannot reach quorum 3 of 3: GSIG_ERR_DISAGREE']);
    expect(c.sigs()).toEqual(['a1 [0] 26 CM→ALL 0 @1', 'a2 [1] 26 CM→ALL 0 @1', 'a3 [2] 26 CM→ALL 0 @1']);
    expect(c.task('t1').signals).toEqual({ broadcasts: 1, pointToPoint: 0, groupRequests: 1, dropped: 1 });
  });

  it('§9.2 rule 9: a member that ends normally leaves the collection, and the rest may then reach the quorum', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0, 1], GSIG.REQ_SYNC, 4);
    c.report('t1', 2, 'terminatedNormally', { exitCode: 0 });
    expect(c.events()).toEqual(['t1/2 exited 0', 't1 group request GSIG_REQ_SYNC(4) accepted']);
    expect(c.sigs()).toEqual(['a1 [0] 25 CM→ALL 4 @2', 'a2 [1] 25 CM→ALL 4 @2']);
  });

  it('§9.2 rule 9 SETQUORUM: 1 to the live members is set and answered REP_QUORUMSET; 0 or more than the members is refused', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0, 1], GSIG.REQ_SETQUORUM, 1);
    expect(c.sigs()).toEqual(['a1 [0] 21 CM→ALL 1 @2', 'a2 [1] 21 CM→ALL 1 @2']);
    expect(c.task('t1').quorum).toBe(1);
    c.ask('t1', [0], GSIG.REQ_SETQUORUM, 2); // quorum 1: one request is enough
    expect(c.sigs()).toEqual(['a1 [0] 21 CM→ALL 2 @4', 'a2 [1] 21 CM→ALL 2 @4']);
    expect(c.task('t1').quorum).toBe(2);
    for (const q of [3, 0]) {
      c.ask('t1', [0, 1], GSIG.REQ_SETQUORUM, q);
      expect(c.events()).toEqual([
        `t1 group request GSIG_REQ_SETQUORUM(${q}) accepted`, `t1 GSIG_REQ_SETQUORUM(${q}) accepted but refused: quorum must be 1 to 2: GSIG_ERR_DISAGREE`,
      ]);
      expect(c.sigs().map((x) => x.split(' ').slice(2, 5).join(' '))).toEqual(['26 CM→ALL 0', '26 CM→ALL 0']);
    }
    expect(c.task('t1').quorum).toBe(2);
  });

  it('§9.2 rule 9 KILL (T10–T12): a live member is terminated and NTF_DIED answers to the rest; any other VPID is refused', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0, 1], GSIG.REQ_KILL, 5);
    expect(c.events()).toContain('t1 GSIG_REQ_KILL(5) accepted but refused: VPID 5 is not a live member: GSIG_ERR_DISAGREE');
    expect(c.terminates()).toEqual([]);
    c.ask('t1', [0, 1], GSIG.REQ_KILL, 1);
    expect(c.terminates()).toEqual(['a2:t1/1']);
    expect(c.task('t1').state).toBe('killing');
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGTERM' });
    expect(c.sigs()).toEqual(['a1 [0] 20 CM→ALL 1 @4']); // after the refusal (@2) and the accepted KILL (@3)
    expect(c.task('t1').state).toBe('running');
  });

  it('[Choice, T8/T9] a restart supersedes a kill or spawn in progress: the operator may restart a Killing or Spawning task', () => {
    for (const [signum, arg, state] of [[GSIG.REQ_KILL, 1, 'killing'], [GSIG.REQ_SPAWN, 0, 'spawning']] as const) {
      const c = linkedRunning(2, 3);
      c.ask('t1', [0, 1], signum, arg);
      expect(c.task('t1').state).toBe(state);
      expect(c.kill('t1', 'restart')).toEqual({ ok: true, text: 't1 restarting' });
    }
  });

  it('§9.2 rule 9 SPAWN (T13, T15): the new member gets its mapping (recovered), then REP_SPAWNED with its node and endpoint reaches all', () => {
    const c = linkedRunning(2, 3);
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    expect(c.spawns().map((s) => [s.agent, s.vpid, s.size, s.endpoints.map((e) => e.node).join(' ')])).toEqual([['a3', 2, 3, 'n1 n2 n3']]);
    c.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: 'h:2' });
    expect(c.commands().map((x) => `${x.agent} ${x.command.type}`)).toEqual(['a3 proc.mapping', 'a1 proc.signal', 'a2 proc.signal', 'a3 proc.signal']);
    expect(c.mappings()).toEqual([{
      type: 'proc.mapping', agent: 'a3', task: 't1', vpids: [2], restarted: false, recovered: true, epoch: 1, quorum: 2,
      members: [{ vpid: 0, node: 'n1', endpoint: 'h:0' }, { vpid: 1, node: 'n2', endpoint: 'h:1' }, { vpid: 2, node: 'n3', endpoint: 'h:2' }], rollback: null, dgrp: null, straggler: null,
    }]);
    expect(c.sigs()).toEqual(['a1 [0] 24 CM→ALL 2 @2 n3 h:2', 'a2 [1] 24 CM→ALL 2 @2 n3 h:2', 'a3 [2] 24 CM→ALL 2 @2 n3 h:2']);
    expect(c.events()).toContain('t1 GSIG_REP_SPAWNED(2) on n3 at h:2');
  });

  it('§9.2: what a process could get wrong is dropped with a journalled reason and counted, with no other effect', () => {
    const c = linkedRunning(2);
    const cases: [() => TaskEffect[], string | null, number | null, string][] = [
      [() => c.signal('t1', 0, 100, 1, 0, { agent: 'a2' }), 't1', 0, 'dropped signal 100 from t1/0: the sender is on n1, not n2'],
      [() => c.signal('t1', 7, 100, 1, 0, { agent: 'a1' }), 't1', 7, 'dropped signal 100 from t1/7: the sender is not a connected member of the task'],
      [() => c.signal('t1', 0, 100, GSIG_CM), 't1', 0, 'dropped signal 100 from t1/0: signal number 100 is not a group request'],
      [() => c.signal('t1', 0, GSIG.REQ_SYNC, GSIG_BROADCAST), 't1', 0, 'dropped GSIG_REQ_SYNC from t1/0: signal number 4 is not an application signal'],
      [() => c.signal('t9', 0, 100, GSIG_BROADCAST, 0, { agent: 'a1', epoch: 0 }), null, null, 'dropped signal 100 from t9/0: no such live task'],
    ];
    const before = c.task('t1').epoch;
    for (const [send, task, vpid, text] of cases) expect(send()).toEqual([{ type: 'event', task, vpid, text }]);
    expect(c.task('t1')).toMatchObject({ epoch: before, signals: { broadcasts: 0, pointToPoint: 0, groupRequests: 0, dropped: 4 } });
    c.submit(1);
    c.start('t2');
    c.signal('t2', 0, 100, GSIG_BROADCAST);
    expect(c.events()).toEqual(['dropped signal 100 from t2/0: the task is not linked']);
    expect(c.task('t2').signals.dropped).toBe(1);
    c.kill('t1');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    c.signal('t1', 0, 100, GSIG_BROADCAST);
    expect(c.events()).toEqual(['dropped signal 100 from t1/0: no such live task']);
  });

  it('§9.2 rule 5: the quorum in force is capped at the live members, and the refusal says so', () => {
    const c = linkedRunning(3);
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    c.ask('t1', [1], GSIG.REQ_SYNC, 2);
    expect(c.events()).toEqual(['t1 group request cannot reach quorum 2 of 2: GSIG_ERR_DISAGREE']);
    expect(c.task('t1').quorum).toBe(3);
  });

  it('spec §4.6: a plain task has no one to deliver a broadcast to: a crash commands nothing to the others, yet its epoch counts', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.start('t1');
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events()).toContain('t1 GSIG_NTF_DIED(1)');
    expect(c.commands()).toEqual([]);
    expect(c.task('t1')).toMatchObject({ epoch: 1, signals: { broadcasts: 1 } });
  });

  it('a plain process has no endpoint, even if its agent reports one', () => {
    const c = new Cluster(1);
    c.submit(1);
    c.report('t1', 0, 'spawnSucceeded', { pid: 5, endpoint: 'h:0' });
    expect(c.proc('t1', 0)).toMatchObject({ state: 'running', endpoint: null });
  });

  it('§9.2 rule 7: a task that ends with requests collecting gets no timeout, and the clock may stop', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    c.kill('t1');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(c.task('t1').outcome).toBe('abnormal');
    expect(needsTicks(c.cs)).toBe(false);
    expect(c.tick(TIMERS.groupRequestTimeoutTicks)).toEqual([]);
    expect(c.task('t1').signals.broadcasts).toBe(0);
  });

  it('§9.2: a restart (T9) starts afresh: the quorum is the task\'s size again and the requests collected are forgotten', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0, 1, 2], GSIG.REQ_SETQUORUM, 2);
    c.ask('t1', [0], GSIG.REQ_SYNC, 7);
    expect(c.task('t1').quorum).toBe(2);
    c.kill('t1', 'restart');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(c.events()).toContain('t1 restarting');
    c.startLinked('t1');
    expect(c.task('t1')).toMatchObject({ state: 'running', restarted: true, quorum: 3 });
    expect(c.mappings().map((m) => [m.quorum, m.restarted])).toEqual([[3, true], [3, true], [3, true]]);
    expect(needsTicks(c.cs)).toBe(false);
  });

  it('PROTOCOL §8.6: a new agent incarnation is told which adopted processes are linked', () => {
    const c = linkedRunning(2);
    expect(c.join('a2', 1)).toEqual([{ task: 't1', vpid: 1, pid: 101, linked: true }]);
    expect(c.events()).toEqual(['node n2 joined: 1 slot, adopting 1 process']);
  });

  it('§9.2 rule 9 TERMINATE and RESTART feed App-terminate (a normal end) and App-restart (T8, T9)', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0, 1], GSIG.REQ_TERMINATE);
    expect(c.terminates()).toEqual(['a1:t1/0', 'a2:t1/1']);
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(c.task('t1')).toMatchObject({ outcome: 'normal', reason: "terminated at the application's request" });
    const d = linkedRunning(2);
    d.ask('t1', [0, 1], GSIG.REQ_RESTART);
    d.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(d.events()).toContain('t1 restarting');
    expect(d.spawns().map((x) => [x.vpid, x.restarted])).toEqual([[0, true], [1, true]]);
  });
});
