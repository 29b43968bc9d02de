// Cluster-state behaviours no other row pins down (issue 15, mutation testing of
// src/core/cluster-state.ts lines 201–972, now the cluster-* modules behind cluster-inputs.ts): each row is what an agent (the group commands it
// receives), an operator (`trine ps`, answers, the journal) or a replica comparing digests
// observes after a slip in placement, the service queue, process reports, node failure and
// adoption, signals and group requests, submit validation or the canonical encoding
// (docs/PROTOCOL.md §8.1–§8.6, §9.1–§9.3, §10.9, §10.12). The driver is cluster-driver.ts.
import { describe, expect, it } from 'vitest';
import { nodeFailed, nodeJoined, procReports, submitTask } from '../../../src/core/cluster-inputs.ts';
import type { NodeRecord } from '../../../src/core/cluster-state.ts';
import { MAX_SPAWNS } from '../../../src/core/cluster-signals.ts';
import { encodeCluster } from '../../../src/core/cluster-view.ts';
import { MAX_VIEW_TASK_CHARS } from '../../../src/core/constants.ts';
import { GSIG, GSIG_BROADCAST } from '../../../src/core/signals.ts';
import type { TaskSubmit } from '../../../src/core/wire/messages.ts';
import { Cluster, linkedRunning, TIMERS } from './cluster-driver.ts';

/** Cluster whose agents are on the given nodes with the given slots, inserted in that order. */
function clusterOf(spec: [agent: string, node: string, slots: number][]): Cluster {
  const c = new Cluster(0);
  for (const [agent, node, slots] of spec) c.nodes.set(agent, { node, joined: true, slots, failed: false, draining: false, inc: 1, protector: '' });
  return c;
}

type Encoded = [number, number, unknown[][], string[], unknown[], unknown[], unknown];
const enc = (c: Cluster) => encodeCluster(c.cs) as Encoded;

describe('placement (PROTOCOL §8.2)', () => {
  it('§8.2: each process goes to the node with the most free slots, ties by node name whatever the join order; the journal lists nodes by name', () => {
    const c = clusterOf([['a1', 'nb', 3], ['a2', 'na', 1], ['a3', 'nc', 1]]);
    c.submit(4, { mode: 'linked' });
    // nb 3 → 2 → 1; then na, nb, nc tie at 1: na first by name, then nb before nc.
    expect(c.spawns().map((s) => `${s.agent}:${s.vpid}`)).toEqual(['a1:0', 'a1:1', 'a2:2', 'a1:3']);
    expect(c.events()).toContain('t1 placed: na×1 nb×3');
    c.startLinked('t1');
    // One mapping per agent, agents in node-name order: na's (a2) before nb's (a1).
    expect(c.mappings().map((m) => `${m.agent}:${m.vpids.join(',')}`)).toEqual(['a2:2', 'a1:0,1,3']);
  });

  it('§8.2: a node that rejoins with fewer slots than its processes hold offers 0 free slots, never a negative count', () => {
    const c = new Cluster(2, 2);
    c.submit(4);
    c.start('t1');
    c.join('a1', 1); // n1 holds 2 with 1 slot
    c.submit(1);
    expect(c.task('t2').waitReason).toBe('needs 1 slot, 0 free on 2 healthy nodes');
  });
});

describe('the journal of task states (PROTOCOL §8.2)', () => {
  it('a one-process task is "running: 1 process"; a restart is journalled as such; a failed start after a restart is a retry', () => {
    const c = new Cluster(1);
    c.submit(1);
    c.start('t1');
    expect(c.events()).toContain('t1 running: 1 process');
    c.kill('t1', 'restart');
    expect(c.events()).toEqual(['t1 restart requested by the operator', 't1 terminating: restart']);
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGTERM' });
    expect(c.events()).toContain('t1 restarting');
    c.report('t1', 0, 'spawnFailed', { reason: 'ENOENT' });
    expect(c.events()).toContain('t1 retrying after: spawn failed: ENOENT');
    expect(c.events()).not.toContain('t1 restarting');
  });

  it('T5: the last failed start is journalled as the giving up, not as one more failure', () => {
    const c = new Cluster(2);
    c.submit(2);
    for (let i = 1; i <= TIMERS.maxStartAttempts; i++) {
      c.report('t1', 0, 'spawnFailed', { reason: 'ENOENT' });
      expect(c.events()[1]).toBe(`t1 terminating: spawn failed: ENOENT${i === TIMERS.maxStartAttempts ? ' (gave up after 3 start attempts)' : ''}`);
      c.report('t1', 1, 'spawnFailed', { reason: 'terminated before it connected' });
    }
  });

  it('the kill of a running task is journalled with its cause', () => {
    const c = new Cluster(1);
    c.submit(1);
    c.start('t1');
    c.kill('t1');
    expect(c.events()).toEqual(['t1 kill requested by the operator', 't1 terminating: killed by operator']);
  });

  it('§8.5: an abnormal end with neither signal nor exit code is journalled with its reason; a normal one without a code as exit 0', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.start('t1');
    c.report('t1', 0, 'terminatedAbnormally', { reason: 'lost its connection' });
    expect(c.events()[0]).toBe('t1/0 terminated abnormally: lost its connection');
    c.report('t1', 1, 'terminatedNormally', { exitCode: null });
    expect(c.events()[0]).toBe('t1/1 exited 0');
    expect(c.proc('t1', 1).exitCode).toBe(0);
  });

  it('§8.5: a failure reported with an empty reason is journalled as having no reason given, never as a bare colon', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.report('t1', 0, 'spawnFailed', { reason: '' });
    expect(c.events()).toContain('t1/0 spawn failed on n1: no reason given');
    const d = new Cluster(2);
    d.submit(2);
    d.start('t1');
    d.report('t1', 0, 'terminatedAbnormally', { reason: '' });
    expect(d.events()[0]).toBe('t1/0 terminated abnormally: no reason given');
  });

  it('a second crash while Running is one more NTF_DIED, for the new VPID only', () => {
    const c = new Cluster(3);
    c.submit(3);
    c.start('t1');
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events()).toEqual(['t1/1 terminated abnormally: SIGKILL', 't1 GSIG_NTF_DIED(1)']);
    expect(c.task('t1').signals.broadcasts).toBe(2);
  });

  it('[Choice, T6/T7]: a running task whose every process crashes ends abnormally, never as having ended normally', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.start('t1');
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.report('t1', 1, 'terminatedAbnormally', { exitCode: 3 });
    expect(c.task('t1')).toMatchObject({ state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 0, 1)' });
  });

  it('a member that ran and exited normally before the last one connected still counts as having run: the task reaches Running', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.report('t1', 0, 'spawnSucceeded', { pid: 5 });
    c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    c.report('t1', 1, 'spawnSucceeded', { pid: 6 });
    expect(c.events()).toContain('t1 running: 2 processes');
    expect(c.task('t1').state).toBe('running');
  });

  it('the operator is told how an already finished task ended, normally too', () => {
    const c = new Cluster(1);
    c.submit(1);
    c.start('t1');
    c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    expect(c.kill('t1')).toEqual({ ok: false, text: 't1 already finished (normally: all processes terminated normally)' });
  });
});

describe('the gang-scheduling queue (spec §6)', () => {
  it('a task killed while it waits its start turn gives up only its own turn: the next one still starts', () => {
    const c = new Cluster(3, 3);
    c.submit(3);
    c.submit(3);
    c.submit(3);
    expect([c.task('t2').state, c.task('t3').state]).toEqual(['waitForStart', 'waitForStart']);
    c.kill('t2');
    c.start('t1');
    expect(c.spawns().map((s) => `${s.task}/${s.vpid}`)).toEqual(['t3/0', 't3/1', 't3/2']);
    expect(enc(c)[6]).toEqual(['t3', 'start']);
  });

  it('PROTOCOL §5.4: the digest carries the allocation requests, the service queue and the active turn', () => {
    const c = new Cluster(2);
    c.submit(2); // t1 starting
    c.submit(1); // t2 waits for slots
    expect(enc(c).slice(3)).toEqual([[], [['t2', [0]]], [], ['t1', 'start']]);
    const d = new Cluster(2, 2);
    d.submit(2);
    d.submit(2);
    expect(enc(d).slice(3)).toEqual([[], [], [['t2', 'start']], ['t1', 'start']]);
  });

  it('spec §6: a task that loses its node while it waits its start turn is placed again and queues behind the tasks that waited meanwhile', () => {
    const c = new Cluster(4);
    c.submit(1); // t1 on n1, starting
    c.submit(1); // t2 on n2, waits its turn
    c.submit(1); // t3 on n3, waits its turn
    c.fail('a2'); // t2 is placed again, on n4
    expect(c.events()).toContain('t2 placed: n4×1');
    expect(enc(c).slice(5)).toEqual([[['t3', 'start'], ['t2', 'start']], ['t1', 'start']]);
    c.start('t1');
    expect(c.spawns().map((s) => `${s.task}/${s.vpid}`)).toEqual(['t3/0']);
  });

  it('spec §6: a finished task gives its slot to the task waiting for one, which is placed and started at once', () => {
    const c = new Cluster(1);
    c.submit(1);
    c.start('t1');
    c.submit(1); // t2 waits for the slot
    c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    expect(c.events()).toContain('t2 placed: n1×1');
    expect(c.spawns().map((s) => `${s.agent}:${s.task}/${s.vpid}`)).toEqual(['a1:t2/0']);
    expect(enc(c).slice(4)).toEqual([[], [], ['t2', 'start']]);
  });
});

describe('process reports (PROTOCOL §8.2, §8.4)', () => {
  it('reports from an unknown agent, about an unplaced process or an unknown task are dropped, journalled under the right task', () => {
    const c = new Cluster(1);
    c.submit(2); // waits: its processes have no node
    c.submit(1); // t2 on n1
    const r = (agent: string, task: string, vpid: number) =>
      procReports(c.cs, c.nodes, TIMERS, agent, [{ task, vpid, kind: 'spawnSucceeded', pid: 1, exitCode: null, signal: null, reason: '', endpoint: '' }]);
    expect(r('a9', 't2', 0)).toEqual([{ type: 'event', task: 't2', vpid: 0, text: 'dropped spawnSucceeded from a9 for t2/0: the process is on n1, not an unknown node' }]);
    expect(r('a1', 't1', 1)).toEqual([{ type: 'event', task: 't1', vpid: 1, text: 'dropped spawnSucceeded from a1 for t1/1: the process is on no node, not n1' }]);
    expect(r('a9', 't1', 1)).toEqual([{ type: 'event', task: 't1', vpid: 1, text: 'dropped spawnSucceeded from a9 for t1/1: the process is on no node, not an unknown node' }]);
    expect(c.task('t1').procs.map((p) => p.state)).toEqual(['waitForResource', 'waitForResource']);
    expect(r('a1', 't1', 5)).toEqual([{ type: 'event', task: 't1', vpid: null, text: 'dropped spawnSucceeded from a1 for t1/5: no such process' }]);
    expect(r('a1', 't7', 0)).toEqual([{ type: 'event', task: null, vpid: null, text: 'dropped spawnSucceeded from a1 for t7/0: no such process' }]);
  });

  it('§9.3: a linked member that announces no endpoint has none, and its mapping entry is empty', () => {
    const c = new Cluster(2);
    c.submit(2, { mode: 'linked' });
    c.report('t1', 0, 'spawnSucceeded', { pid: 1, endpoint: '' });
    c.report('t1', 1, 'spawnSucceeded', { pid: 2, endpoint: 'h:1' });
    expect(c.task('t1').procs.map((p) => p.endpoint)).toEqual([null, 'h:1']);
    expect(c.mappings()[0]?.members).toEqual([{ vpid: 0, node: 'n1', endpoint: '' }, { vpid: 1, node: 'n2', endpoint: 'h:1' }]);
  });

  it('§9.2: a restart forgets the old endpoints: a respawned member has none until it connects again', () => {
    const c = linkedRunning(2);
    c.kill('t1', 'restart');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(c.task('t1').procs.map((p) => [p.state, p.endpoint])).toEqual([['spawning', null], ['spawning', null]]);
  });

  it('§10.12: a process whose node left the table is journalled as having no agent for its command', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.start('t1');
    c.nodes.delete('a2');
    c.kill('t1');
    expect(c.terminates()).toEqual(['a1:t1/0']);
    expect(c.events()).toContain('t1/1: no agent on n2 for terminate');
  });
});

describe('membership changes (spec §4.5; PROTOCOL §9.2)', () => {
  it('T9 after a KILL and a SPAWN: the restarted task is VPIDs 0…size-1 afresh; the spawned VPID\'s process is history', () => {
    const c = linkedRunning(3, 4);
    c.ask('t1', [0, 1, 2], GSIG.REQ_KILL, 2);
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGTERM' });
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    expect(c.spawns().map((s) => s.vpid)).toEqual([3]);
    c.report('t1', 3, 'spawnSucceeded', { pid: 9, endpoint: 'h:3' });
    c.kill('t1', 'restart');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(c.spawns().map((s) => s.vpid)).toEqual([0, 1, 2]);
    expect(c.task('t1').procs.map((p) => `${p.vpid}:${p.state}`)).toEqual(['0:spawning', '1:spawning', '2:spawning']);
  });

  it('issue 19, spec §7 item 2: a replacement is told the task\'s size as submitted and the rank it takes (TRINE_SIZE, TRINE_RANK), not the VPIDs used so far', () => {
    const c = linkedRunning(4, 5);
    expect(c.task('t1').procs.map((p) => p.vpid)).toEqual([0, 1, 2, 3]);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.ask('t1', [0, 2, 3], GSIG.REQ_SPAWN);
    expect(c.spawns().map((s) => [s.vpid, s.size, s.rank])).toEqual([[4, 4, 3]]); // alive: 0 2 3 4
    c.report('t1', 4, 'spawnSucceeded', { pid: 9, endpoint: 'h:9' });
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.ask('t1', [2, 3, 4], GSIG.REQ_SPAWN);
    expect(c.spawns().map((s) => [s.vpid, s.size, s.rank])).toEqual([[5, 4, 3]]); // alive: 2 3 4 5
  });

  it('issue 19: a task that ends abnormally names the processes the application killed (KILL) beside those that crashed', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0, 1, 2], GSIG.REQ_KILL, 2);
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGTERM' });
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGSEGV' });
    c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 1); killed on the application\'s request: VPIDs 2' });
  });

  it('issue 19: SPAWNs per start are bounded (--max-spawns): the one past the bound kills the task with the reason', () => {
    const c = new Cluster(3);
    c.submit(2, { mode: 'linked', maxSpawns: 1 });
    c.startLinked('t1');
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGSEGV' });
    c.ask('t1', [0], GSIG.REQ_SPAWN);
    expect(c.spawns().map((s) => s.vpid)).toEqual([2]);
    c.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: 'h:9' });
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGSEGV' });
    c.ask('t1', [0], GSIG.REQ_SPAWN);
    expect(c.spawns()).toEqual([]);
    expect(c.task('t1').state).toBe('terminating');
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: '1 process spawned since the start, the task\'s bound (--max-spawns 1): its replacements keep dying?' });
  });

  it('issue 19: a submit with --max-spawns beyond MAX_SPAWNS is refused with the range', () => {
    expect(new Cluster(1).submit(1, { maxSpawns: MAX_SPAWNS + 1 })).toEqual({ ok: false, text: `--max-spawns must be 0 to ${MAX_SPAWNS}, got ${MAX_SPAWNS + 1}` });
    expect(new Cluster(1).submit(1, { maxSpawns: MAX_SPAWNS }).ok).toBe(true);
  });

  it('T13: a SPAWN waiting for a free slot is cancelled by a kill: the slot that frees later goes to no one', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    expect(c.task('t1')).toMatchObject({ state: 'spawning', waitReason: 'needs 1 slot, 0 free on 2 healthy nodes' });
    expect(enc(c)[4]).toEqual([['t1', [2]]]);
    c.kill('t1');
    expect(enc(c)[4]).toEqual([]);
    c.nodes.set('a3', { node: 'n3', joined: true, slots: 1, failed: false, draining: false, protector: '', inc: 1 });
    c.join('a3', 1);
    expect(c.spawns()).toEqual([]);
  });

  it('T13, PROTOCOL §8.2: a SPAWN cancelled while it waits for a slot (a kill, or Start-TO) is never journalled as placed', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    c.kill('t1');
    expect(c.events()).toEqual(['t1 kill requested by the operator', 't1 terminating: killed by operator']);
    const d = linkedRunning(2);
    d.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    d.tick(TIMERS.startTimeoutTicks);
    expect(d.task('t1').state).toBe('running');
    expect(d.events().filter((e) => e.includes('placed'))).toEqual([]);
  });

  it('a task killed while it waits for slots leaves no allocation request behind', () => {
    const c = new Cluster(1);
    c.submit(2);
    c.kill('t1');
    expect(enc(c).slice(4)).toEqual([[], [], null]);
  });

  it('§10.12: a broadcast reaches the members whose node has an agent; none is addressed to a missing one', () => {
    const c = linkedRunning(3);
    c.nodes.delete('a3');
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.sigs()).toEqual(['a2 [1] 20 CM→ALL 0 @1']);
  });
});

describe('node failure and adoption (PROTOCOL §8.4, §8.6)', () => {
  it('§8.4: a node lost with several processes names each of them once; each gets its NTF_DIED', () => {
    const c = new Cluster(2, 2);
    c.submit(4);
    c.start('t1'); // n1: 0, 2; n2: 1, 3
    c.fail('a1');
    expect(c.events()[0]).toBe('node n1 lost: t1/0 t1/2 dead');
    expect(c.events().filter((e) => e.includes('NTF_DIED'))).toEqual(['t1 GSIG_NTF_DIED(0)', 't1 GSIG_NTF_DIED(2)']);
  });

  it('§8.6: a terminating process is adopted by its node\'s new agent; a finished task\'s process never is, nor is it lost again', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.start('t1');
    c.kill('t1');
    expect(c.join('a1', 1)).toEqual([{ task: 't1', vpid: 0, pid: 100, linked: false }]);
    c.tick(TIMERS.terminateTimeoutTicks * TIMERS.maxTerminateAttempts); // T17: abandoned, t1/0 still 'terminating'
    expect(c.task('t1').outcome).toBe('abnormal');
    expect(c.join('a1', 1)).toEqual([]);
    expect(c.fail('a2')).toEqual([{ type: 'event', task: null, vpid: null, text: 'node n2 lost: no processes', kind: 'node.lost', subject: 'n2' }]);
  });

  it('an agent the table does not know joins or fails with no effect', () => {
    const c = new Cluster(1);
    c.submit(1);
    expect(nodeJoined(c.cs, c.nodes, TIMERS, 'a9')).toEqual({ adopt: [], effects: [] });
    expect(nodeFailed(c.cs, c.nodes, TIMERS, 'a9')).toEqual([]);
  });
});

describe('signals (PROTOCOL §9.1, §9.2)', () => {
  it('§9.1: a signal sent by an agent the table does not know is dropped, and says so', () => {
    const c = linkedRunning(2);
    expect(c.signal('t1', 0, 100, 1, 0, { agent: 'a9' })).toEqual([{ type: 'event', task: 't1', vpid: 0, text: 'dropped signal 100 from t1/0: the sender is on n1, not an unknown node' }]);
  });

  it('§9.1: point-to-point signals are routed while the task is Killing or Spawning (every member has its mapping)', () => {
    const c = linkedRunning(3, 4);
    c.ask('t1', [0, 1, 2], GSIG.REQ_KILL, 2);
    expect(c.task('t1').state).toBe('killing');
    c.signal('t1', 0, 100, 1, 3);
    expect(c.sigs()).toEqual(['a2 [1] 100 0→1 3 @1']);
    const d = linkedRunning(2, 3);
    d.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    expect(d.task('t1').state).toBe('spawning');
    d.signal('t1', 1, 100, 0, 4);
    expect(d.sigs()).toEqual(['a1 [0] 100 1→0 4 @1']);
  });

  it('§9.2: a group request while the task is Killing is dropped silently and counted; nothing is performed', () => {
    const c = linkedRunning(3, 4);
    c.ask('t1', [0, 1, 2], GSIG.REQ_KILL, 2);
    const epoch = c.task('t1').epoch;
    c.ask('t1', [0, 1], GSIG.REQ_SYNC, 1);
    expect(c.effects).toEqual([]);
    expect(c.task('t1')).toMatchObject({ epoch, signals: { groupRequests: 3, dropped: 2 } });
  });

  it('§9.2 rule 4/8: a broadcast from a process that already sent a group request this epoch is dropped once, silently', () => {
    const c = linkedRunning(3);
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    c.signal('t1', 0, 100, GSIG_BROADCAST);
    expect(c.effects).toEqual([]);
    expect(c.task('t1').signals).toEqual({ broadcasts: 0, pointToPoint: 0, groupRequests: 1, dropped: 1 });
  });

  it('§9.3: a spawned member that announces no endpoint: REP_SPAWNED is journalled with its node alone', () => {
    const c = linkedRunning(2, 3);
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    c.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: '' });
    expect(c.events()).toContain('t1 GSIG_REP_SPAWNED(2) on n3');
  });
});

describe('submit and restore (PROTOCOL §8.1, §10.9)', () => {
  it('§10.9: a restore whose old id is taken gets the next number; a fresh one keeps its id, restarted, journalled as restored', () => {
    const c = new Cluster(1, 0);
    c.submit(1);
    const req: TaskSubmit = {
      type: 'task.submit', nonce: '0'.repeat(32), name: 'job', size: 1, file: '/bin/true', args: [], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
    };
    expect(submitTask(c.cs, c.nodes, TIMERS, req, 2, null, 't1').outcome).toEqual({ ok: true, text: 't2' });
    const r = submitTask(c.cs, c.nodes, TIMERS, req, 3, null, 't5');
    expect(r.outcome).toEqual({ ok: true, text: 't5' });
    expect(r.effects[0]).toEqual({ type: 'event', task: 't5', vpid: null, text: 't5 restored after a cluster reset (it was t5), restarted flag set: 1 × /bin/true' });
    expect(c.task('t5').restarted).toBe(true);
    expect(c.task('t2').restarted).toBe(true);
    expect(c.task('t1').restarted).toBe(false);
  });

  it('§8.1: an env of three names out of order at the end is refused', () => {
    const c = new Cluster(1);
    expect(c.submit(1, { env: [['A', '1'], ['C', '2'], ['B', '3']] })).toEqual({ ok: false, text: "env must be sorted by name without repeats: 'B' follows 'C'" });
  });
});

describe('the canonical encoding (PROTOCOL §5.4)', () => {
  it('tasks by number, endpoints by VPID whatever order they arrived in, counters in fixed order, the signed submit', () => {
    const c = new Cluster(2);
    const req: TaskSubmit = {
      type: 'task.submit', nonce: '0'.repeat(32), name: 'job', size: 2, file: '/bin/true', args: [], cwd: '/', env: [], mode: 'linked', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
    };
    submitTask(c.cs, c.nodes, TIMERS, req, 1, { nonce: 'n', bytes: new Uint8Array([1]), sig: new Uint8Array([2]) }, 't10');
    submitTask(c.cs, c.nodes, TIMERS, { ...req, size: 1 }, 2, null, 't9');
    c.report('t10', 1, 'spawnSucceeded', { pid: 1, endpoint: 'h:1' });
    c.report('t10', 0, 'spawnSucceeded', { pid: 2, endpoint: 'h:0' });
    c.signal('t10', 0, 100, GSIG_BROADCAST);
    c.signal('t10', 0, 100, 1);
    c.signal('t10', 1, 100, 0);
    c.signal('t10', 0, 100, 1, 0, { agent: 'a2' });
    const tasks = enc(c)[2];
    expect(tasks.map((t) => t[0])).toEqual(['t9', 't10']);
    const t10 = tasks[1] as unknown[];
    expect(t10[16]).toEqual([[0, 'h:0'], [1, 'h:1']]);
    expect(t10[17]).toEqual([1, 2, 0, 1]);
    expect(t10[18]).toEqual(['n', new Uint8Array([1]), new Uint8Array([2])]);
    expect((tasks[0] as unknown[])[18]).toBeNull();
  });
});

describe('journal and status view (PROTOCOL §7, §9.3)', () => {
  it('§9.3: a KILL completed brings the task back to Running without a second mapping or "running" journal line', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0, 1], GSIG.REQ_KILL, 1);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGTERM' });
    expect(c.task('t1').state).toBe('running');
    expect(c.commands().map((x) => `${x.agent} ${x.command.type}`)).toEqual(['a1 proc.signal']);
    expect(c.events().filter((e) => e.includes('running'))).toEqual([]);
  });

  it('PROTOCOL §7: the status view shows every field of a node, a task and its processes', () => {
    const c = new Cluster(2, 2);
    c.nodes.set('a2', { ...(c.nodes.get('a2') as NodeRecord), inc: 4 });
    c.submit(2, { name: 'sim', args: ['-x', 'y'], cwd: '/srv', mode: 'linked' });
    c.report('t1', 0, 'spawnSucceeded', { pid: 70, endpoint: 'h:0' });
    c.report('t1', 1, 'spawnSucceeded', { pid: 71, endpoint: 'h:1' });
    c.signal('t1', 0, 100, 1);
    c.report('t1', 1, 'terminatedAbnormally', { exitCode: 3, signal: 'SIGSEGV', reason: 'crashed' });
    expect(c.view()).toEqual({
      tick: 0,
      nodes: [
        { agent: 'a1', node: 'n1', slots: 2, used: 1, state: 'up', inc: 1 },
        { agent: 'a2', node: 'n2', slots: 2, used: 0, state: 'up', inc: 4 },
      ],
      tasks: [{
        id: 't1', name: 'sim', size: 2, state: 'running', command: ['/bin/sleep', '-x', 'y'], cwd: '/srv', submittedRsn: 1,
        startAttempts: 0, restarted: false, waitReason: null, outcome: null, reason: null, failure: null, mode: 'linked', epoch: 1, quorum: 2,
        signals: { broadcasts: 1, pointToPoint: 1, groupRequests: 0, dropped: 0 },
        procs: [
          { vpid: 0, node: 'n1', pid: 70, state: 'running', exitCode: null, signal: null, reason: null, endpoint: 'h:0', rank: null, progress: null, straggler: false, recommended: null },
          { vpid: 1, node: 'n2', pid: 71, state: 'terminatedAbnormally', exitCode: 3, signal: 'SIGSEGV', reason: 'crashed', endpoint: 'h:1', rank: null, progress: null, straggler: false, recommended: null },
        ],
      }],
      omittedTasks: 0,
    });
  });
});

describe('order within one input (PROTOCOL §8.2, §8.3)', () => {
  it('§8.2: reports of one proc.report are checked one after the other: a report about a process a retry just replaced is dropped', () => {
    const c = new Cluster(2);
    c.submit(2);
    c.report('t1', 0, 'spawnFailed', { reason: 'ENOENT' });
    expect(c.terminates()).toEqual(['a2:t1/1']);
    const base = { pid: 0, exitCode: null, signal: null, reason: '', endpoint: '' };
    const effects = procReports(c.cs, c.nodes, TIMERS, 'a2', [
      { ...base, task: 't1', vpid: 1, kind: 'terminatedAbnormally', signal: 'SIGTERM' },
      { ...base, task: 't1', vpid: 1, kind: 'spawnSucceeded', pid: 9 },
    ]);
    expect(c.events(effects)).toContain('dropped spawnSucceeded from a2 for t1/1: the process is on no node, not n2');
  });

  it('§8.3: a tick that abandons a task (T17) leaves no group-request timeout to broadcast for it', () => {
    const c = linkedRunning(2);
    c.ask('t1', [0], GSIG.REQ_SYNC, 1);
    c.kill('t1');
    c.tick(TIMERS.terminateTimeoutTicks * TIMERS.maxTerminateAttempts - 1);
    const last = c.tick();
    expect(c.task('t1').outcome).toBe('abnormal');
    expect(c.events(last).filter((e) => e.includes('timed out without a quorum'))).toEqual([]);
    expect(c.task('t1').signals.broadcasts).toBe(0);
  });
});

describe('the status view\'s size bound (PROTOCOL §7)', () => {
  it('a finished task that brings the view to exactly MAX_VIEW_TASK_CHARS is shown; one character more and it is left out', () => {
    const make = (k: number) => {
      const c = new Cluster(1, 0);
      c.submit(1, { args: ['x'.repeat(k)] });
      c.kill('t1');
      c.submit(1);
      return c.view();
    };
    const v0 = make(0);
    const [live, done] = v0.tasks;
    const k = MAX_VIEW_TASK_CHARS - JSON.stringify([live]).length - (JSON.stringify(done).length + 1);
    expect(make(k)).toMatchObject({ omittedTasks: 0 });
    expect(make(k).tasks.map((t) => t.id)).toEqual(['t2', 't1']);
    expect(make(k + 1)).toMatchObject({ omittedTasks: 1 });
  });
});
