// A rollback task's ranks and replacements in the manager's replicated state
// (src/core/cluster-rollback.ts and the cluster-* steps that call it; docs/PROTOCOL.md §11.1,
// §11.2; spec radic-hmpl A.2.7–A.2.8: the protector detects the failure and the process is
// restarted with its rank on a healthy node). Driven through the group's entry points with a
// fake node table (cluster-driver.ts); every assertion is what an agent (its commands), an
// operator (answers, `trine ps`, the events) or a replica comparing digests could observe.
import { describe, expect, it } from 'vitest';
import { submitTask } from '../../../src/core/cluster-inputs.ts';
import { markRank, protectorAfter, rollbackTableOf } from '../../../src/core/cluster-rollback.ts';
import { encodeCluster } from '../../../src/core/cluster-view.ts';
import {
  ROLLBACK_MAX_INTERVAL_MS, ROLLBACK_MAX_REPLACEMENTS, ROLLBACK_MAX_STATE_BYTES, ROLLBACK_MIN_INTERVAL_MS,
} from '../../../src/core/constants.ts';
import { GSIG } from '../../../src/core/signals.ts';
import type { Recovery, RollbackOptions, TaskSubmit } from '../../../src/core/wire/messages.ts';
import { Cluster, TIMERS } from './cluster-driver.ts';

const OPTIONS = { logging: 'rbml', checkpoint: 'nco', intervalMs: 2000, maxStateBytes: 1 << 20 } as const;
const ROLLBACK: Recovery = { kind: 'rollback', ...OPTIONS };

/** Cluster of `nodes` × `slots` with rollback task t1 of `size` connected and Running. */
function rollbackRunning(size: number, nodes: number, slots = 1): Cluster {
  const c = new Cluster(nodes, slots);
  expect(c.submit(size, { mode: 'linked', recovery: ROLLBACK })).toEqual({ ok: true, text: 't1' });
  c.startLinked('t1');
  expect(c.task('t1').state).toBe('running');
  return c;
}

/** The task's rank table as the replicated state holds it. */
const ranksOf = (c: Cluster) => {
  const t = c.cs.tasks.get('t1')?.rollback;
  if (t === null || t === undefined) return t;
  const { marks: _marks, groups: _groups, ...rest } = t; // marks and groups have tests of their own
  return rest;
};

describe('PROTOCOL §11.2: a rollback task\'s ranks are replaced by the group (radic-hmpl A.2.7)', () => {
  it('every member\'s first mapping carries its rank table, the options, and each rank\'s protector: the next node of the ring (§11.4, radic-hmpl A.1)', () => {
    const c = new Cluster(3, 2);
    for (const [agent, n] of c.nodes) c.nodes.set(agent, { ...n, protector: `${n.node}:9` });
    c.submit(3, { mode: 'linked', recovery: ROLLBACK });
    // Every protector learns the task's key first.
    expect(c.effects.flatMap((e) => (e.type === 'command' && e.command.type === 'rollback.guard' ? [e.agent] : []))).toEqual(['a1', 'a2', 'a3']);
    c.startLinked('t1');
    const protectors = ['n2:9', 'n3:9', 'n1:9']; // rank r on node n(r+1); the ring wraps
    expect(c.mappings().map((m) => [m.agent, m.vpids, m.recovered, m.rollback])).toEqual([
      ['a1', [0], false, { ranks: [0, 1, 2], protectors, marks: [[], [], []], groups: [0, 1, 2], finished: [false, false, false], ...OPTIONS }],
      ['a2', [1], false, { ranks: [0, 1, 2], protectors, marks: [[], [], []], groups: [0, 1, 2], finished: [false, false, false], ...OPTIONS }],
      ['a3', [2], false, { ranks: [0, 1, 2], protectors, marks: [[], [], []], groups: [0, 1, 2], finished: [false, false, false], ...OPTIONS }],
    ]);
    expect(ranksOf(c)).toEqual({ ranks: [0, 1, 2], vacant: [], replacements: [0, 0, 0], spawning: null });
  });

  it('a crashed member is replaced with the same rank, and the replacement\'s mapping says so (recovered)', () => {
    const c = rollbackRunning(2, 3);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGSEGV' });
    expect(c.events()).toEqual([
      't1/1 terminated abnormally: SIGSEGV', 't1 GSIG_NTF_DIED(1)', 't1 replacing rank 1 (VPID 1) with VPID 2: replacement 1 of 16', 't1 placed: n2×1',
    ]);
    // Spawned as an application's SPAWN is (T13): a fresh VPID, one per rank listed, the task's size its ranks.
    expect(c.spawns().map((s) => [s.agent, s.vpid, s.size, s.endpoints])).toEqual([
      ['a2', 2, 2, [{ vpid: 0, node: 'n1' }, { vpid: 2, node: 'n2' }]],
    ]);
    expect(c.task('t1').state).toBe('spawning');
    // `trine ps` shows the rank each process holds (the dead one until it is replaced), or is being spawned to take over.
    expect(c.task('t1').procs.map((p) => [p.vpid, p.state, p.rank])).toEqual([[0, 'running', 0], [1, 'terminatedAbnormally', 1], [2, 'spawning', 1]]);
    c.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: 'h:2' });
    expect(c.mappings()).toEqual([{
      type: 'proc.mapping', agent: 'a2', task: 't1', vpids: [2], restarted: false, recovered: true, epoch: 1, quorum: 2,
      members: [{ vpid: 0, node: 'n1', endpoint: 'h:0' }, { vpid: 2, node: 'n2', endpoint: 'h:2' }], rollback: { ranks: [0, 2], protectors: ['', ''], marks: [[], []], groups: [0, 1], finished: [false, false], ...OPTIONS }, dgrp: null, straggler: null,
    }]);
    expect(c.events()).toContain('t1 rank 1 held by VPID 2');
    expect(c.sigs()).toContain(`a1 [0] ${GSIG.REP_SPAWNED} CM→ALL 2 @2 n2 h:2`);
    expect(ranksOf(c)).toEqual({ ranks: [0, 2], vacant: [], replacements: [0, 1], spawning: null });
    expect(c.task('t1')).toMatchObject({ state: 'running', outcome: null });
    expect(c.task('t1').procs.map((p) => p.rank)).toEqual([0, null, 1]);
  });

  it('radic-hmpl A.2.8: both ranks of a lost node are replaced, one after the other, on healthy nodes', () => {
    const c = rollbackRunning(4, 3, 2); // n1: VPIDs 0 and 3
    c.fail('a1');
    expect(c.events()).toEqual([
      'node n1 lost: t1/0 t1/3 dead', 't1 GSIG_NTF_DIED(0)', 't1 GSIG_NTF_DIED(3)', 't1 replacing rank 0 (VPID 0) with VPID 4: replacement 1 of 16',
      't1 placed: n2×1',
    ]);
    expect(ranksOf(c)).toMatchObject({ vacant: [3], spawning: { rank: 0, vpid: 4 } });
    expect(c.spawns().map((s) => `${s.agent}:${s.vpid}`)).toEqual(['a2:4']);
    c.report('t1', 4, 'spawnSucceeded', { pid: 14, endpoint: 'h:4' });
    expect(c.mappings().map((m) => [m.vpids, m.rollback?.ranks])).toEqual([[[4], [4, 1, 2, 3]]]);
    expect(c.events()).toContain('t1 replacing rank 3 (VPID 3) with VPID 5: replacement 1 of 16');
    expect(c.spawns().map((s) => `${s.agent}:${s.vpid}`)).toEqual(['a3:5']);
    c.report('t1', 5, 'spawnSucceeded', { pid: 15, endpoint: 'h:5' });
    expect(c.mappings().map((m) => [m.vpids, m.rollback?.ranks])).toEqual([[[5], [4, 1, 2, 5]]]);
    expect(ranksOf(c)).toEqual({ ranks: [4, 1, 2, 5], vacant: [], replacements: [1, 0, 0, 1], spawning: null });
    expect(c.task('t1').state).toBe('running');
  });

  it('a replacement that fails to start puts its rank back at the end of the vacant ones, and it is tried again', () => {
    const c = rollbackRunning(3, 3, 2);
    c.fail('a2'); // n2: VPID 1 only (n1: 0, n3: 2)
    expect(c.spawns().map((s) => s.vpid)).toEqual([3]);
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGKILL' }); // rank 2 waits behind rank 1's replacement
    expect(ranksOf(c)).toMatchObject({ vacant: [2], spawning: { rank: 1, vpid: 3 } });
    c.report('t1', 3, 'spawnFailed', { reason: 'spawn failed: ENOMEM' });
    expect(c.events()).toEqual(expect.arrayContaining([
      't1 replacement VPID 3 for rank 1 did not start', 't1 replacing rank 2 (VPID 2) with VPID 4: replacement 1 of 16',
    ]));
    expect(ranksOf(c)).toMatchObject({ vacant: [1], spawning: { rank: 2, vpid: 4 } });
    c.report('t1', 4, 'spawnSucceeded', { pid: 4, endpoint: 'h:4' });
    expect(c.events()).toContain('t1 replacing rank 1 (VPID 1) with VPID 5: replacement 2 of 16');
    c.report('t1', 5, 'spawnSucceeded', { pid: 5, endpoint: 'h:5' });
    expect(ranksOf(c)).toEqual({ ranks: [0, 5, 4], vacant: [], replacements: [0, 2, 1], spawning: null });
  });

  it('a replacement that never reports is timed out (Start-TO) and tried again', () => {
    const c = rollbackRunning(2, 3);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.tick(3); // TIMERS.startTimeoutTicks
    expect(c.events()).toContain('t1 replacement VPID 2 for rank 1 did not start');
    expect(c.terminates()).toEqual(['a2:t1/2']);
    expect(ranksOf(c)).toMatchObject({ spawning: { rank: 1, vpid: 3 }, replacements: [0, 2] });
  });

  it(`past ROLLBACK_MAX_REPLACEMENTS (${ROLLBACK_MAX_REPLACEMENTS}) replacements of one rank the task ends abnormally, naming the rank`, () => {
    const c = rollbackRunning(2, 2);
    let holder = 1;
    for (let i = 1; i <= ROLLBACK_MAX_REPLACEMENTS; i++) {
      c.report('t1', holder, 'terminatedAbnormally', { signal: 'SIGSEGV' });
      expect(c.events()).toContain(`t1 replacing rank 1 (VPID ${holder}) with VPID ${i + 1}: replacement ${i} of 16`);
      holder = i + 1;
      c.report('t1', holder, 'spawnSucceeded', { pid: 100 + holder, endpoint: `h:${holder}` });
      expect(ranksOf(c)?.ranks).toEqual([0, holder]);
    }
    c.report('t1', holder, 'terminatedAbnormally', { signal: 'SIGSEGV' });
    const reason = 'rank 1 died again after 16 replacements, the limit (ROLLBACK_MAX_REPLACEMENTS)';
    expect(c.events()).toContain(`t1 terminating: ${reason}`);
    expect(c.spawns()).toEqual([]);
    expect(c.terminates()).toContain('a1:t1/0');
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGTERM' });
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason });
    expect(c.events()).toContain(`t1 finished abnormally: ${reason}`);
  });

  it('the outcome counts each rank\'s current holder: normal when they all end normally, though an earlier holder crashed', () => {
    const c = rollbackRunning(2, 3);
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: 'h:2' });
    c.report('t1', 1, 'terminatedNormally', { exitCode: 0 });
    expect(c.task('t1').outcome).toBeNull();
    c.report('t1', 2, 'terminatedNormally', { exitCode: 0 });
    expect(c.task('t1')).toMatchObject({ state: 'terminatedNormally', outcome: 'normal', reason: 'all processes terminated normally' });
    // A holder that ends abnormally at the end is no crash to hide: it is replaced, and its rank's
    // work is done again.
    const d = rollbackRunning(2, 3);
    d.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    d.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(d.task('t1')).toMatchObject({ state: 'spawning', outcome: null });
    d.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: 'h:2' });
    d.report('t1', 2, 'terminatedAbnormally', { exitCode: 3 });
    d.report('t1', 3, 'spawnSucceeded', { pid: 9, endpoint: 'h:3' });
    d.report('t1', 3, 'terminatedNormally', { exitCode: 0 });
    expect(d.task('t1')).toMatchObject({ outcome: 'normal' });
  });

  it('an app task is unchanged: a crash is only announced (T7), no replacement, and its mapping has no ranks', () => {
    const c = new Cluster(3);
    c.submit(2, { mode: 'linked' });
    c.startLinked('t1');
    expect(c.mappings().map((m) => m.rollback)).toEqual([null, null]);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events()).toEqual(['t1/1 terminated abnormally: SIGKILL', 't1 GSIG_NTF_DIED(1)']);
    expect(c.spawns()).toEqual([]);
    expect(c.cs.tasks.get('t1')?.rollback).toBeNull();
    c.report('t1', 0, 'terminatedNormally', { exitCode: 0 });
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 1)' });
  });

  it('the application cannot SPAWN into a rollback task: its members are its ranks (GSIG_ERR_DISAGREE)', () => {
    const c = rollbackRunning(2, 3);
    c.ask('t1', [0, 1], GSIG.REQ_SPAWN);
    expect(c.events()).toContain("t1 GSIG_REQ_SPAWN(0) accepted but refused: a rollback task's ranks are replaced by the group, not spawned by the application: GSIG_ERR_DISAGREE");
    expect(c.spawns()).toEqual([]);
    expect(c.task('t1').state).toBe('running');
  });

  it('a restart (T9) gives VPIDs 0 … size − 1 their ranks again; replacement counts run on for the task\'s life', () => {
    const c = rollbackRunning(2, 3);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    c.report('t1', 2, 'spawnSucceeded', { pid: 9, endpoint: 'h:2' });
    expect(c.kill('t1', 'restart')).toEqual({ ok: true, text: 't1 restarting' });
    c.reportAll('t1', 'terminatedAbnormally', () => ({ signal: 'SIGTERM' }));
    expect(ranksOf(c)).toEqual({ ranks: [0, 1], vacant: [], replacements: [0, 1], spawning: null });
    c.startLinked('t1');
    expect(c.mappings().map((m) => m.rollback?.ranks)).toEqual([[0, 1], [0, 1]]);
  });

  it('an operator kill while a replacement is being spawned ends the task; nothing more is replaced', () => {
    const c = rollbackRunning(2, 3);
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.kill('t1')).toEqual({ ok: true, text: 't1 terminating' });
    expect(c.terminates().sort()).toEqual(['a1:t1/0', 'a2:t1/2']);
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGTERM' });
    c.report('t1', 2, 'spawnFailed', { reason: 'terminated before it connected' });
    expect(c.spawns()).toEqual([]);
    expect(c.task('t1')).toMatchObject({ outcome: 'abnormal', reason: 'killed by operator' });
  });

  it('PROTOCOL §10.9: a rollback task restored after a cluster reset keeps its option and starts with fresh ranks', () => {
    const c = new Cluster(2);
    const req: TaskSubmit = {
      type: 'task.submit', nonce: '0'.repeat(32), name: 'heat', size: 2, file: '/bin/heat', args: [], cwd: '/', env: [], mode: 'linked', recovery: ROLLBACK, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
    };
    expect(submitTask(c.cs, c.nodes, TIMERS, req, 1, null, 't4').outcome).toEqual({ ok: true, text: 't4' });
    const rec = c.cs.tasks.get('t4');
    expect(rec?.recovery).toEqual(ROLLBACK);
    expect(rec?.rollback).toEqual({ ranks: [0, 1], vacant: [], replacements: [0, 0], spawning: null, marks: [[], []], groups: [0, 1] });
    c.startLinked('t4');
    expect(c.mappings().map((m) => [m.restarted, m.rollback?.ranks])).toEqual([[true, [0, 1]], [true, [0, 1]]]);
    // A forged restore is judged as a submit is.
    expect(submitTask(c.cs, c.nodes, TIMERS, { ...req, mode: 'plain' }, 2, null, 't5').outcome.ok).toBe(false);
  });

  it('the rank table is part of the state digest: replicas that replaced differently disagree', () => {
    const a = rollbackRunning(2, 3);
    const b = rollbackRunning(2, 3);
    expect(a.digest()).toBe(b.digest());
    a.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    b.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(a.digest()).toBe(b.digest());
    const t = b.cs.tasks.get('t1');
    if (t?.rollback == null) throw new Error('no rank table');
    t.rollback.replacements[1] = 2;
    expect(a.digest()).not.toBe(b.digest());
    // The option itself is encoded too.
    const h = new Cluster(1);
    h.submit(1, { mode: 'linked', recovery: { ...ROLLBACK, logging: 'hmpl' } });
    const r = new Cluster(1);
    r.submit(1, { mode: 'linked', recovery: ROLLBACK });
    expect(JSON.stringify(encodeCluster(h.cs))).not.toBe(JSON.stringify(encodeCluster(r.cs)));
  });
});

describe('PROTOCOL §11.7: semi-coordinated checkpoint groups (radic-hmpl A.2.8)', () => {
  const sco = (checkpoint: 'bsco' | 'sco' | 'nco', size = 4, nodes = 2, slots = 2): Cluster => {
    const c = new Cluster(nodes, slots);
    expect(c.submit(size, { mode: 'linked', recovery: { ...ROLLBACK, checkpoint } })).toEqual({ ok: true, text: 't1' });
    c.startLinked('t1');
    expect(c.task('t1').state).toBe('running');
    return c;
  };
  const groupsOf = (c: Cluster) => c.cs.tasks.get('t1')?.rollback?.groups;

  it('A.2.8 "all processes on one node form a group": the ranks placed on one node when the task starts, named by the lowest; every mapping carries them', () => {
    const c = sco('bsco'); // spread placement: n1 holds VPIDs 0 and 2, n2 holds 1 and 3
    expect(groupsOf(c)).toEqual([0, 1, 0, 1]);
    expect(c.mappings().map((m) => [m.agent, m.vpids, m.rollback?.groups])).toEqual([['a1', [0, 2], [0, 1, 0, 1]], ['a2', [1, 3], [0, 1, 0, 1]]]);
  });

  it('under nco every rank is its own group', () => {
    expect(groupsOf(sco('nco'))).toEqual([0, 1, 2, 3]);
  });

  it('A.2.8 "the failed group ... rolls forward together": a rank\'s death kills the other live holders of its group, the reason in the events; the replacements wait until the group has ended', () => {
    const c = sco('sco');
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events()).toEqual([
      't1/0 terminated abnormally: SIGKILL',
      't1 killing VPID 2 (rank 2): rank 0 of its checkpoint group died, the group rolls back together', 't1 GSIG_NTF_DIED(0)',
    ]);
    expect(c.terminates()).toEqual(['a1:t1/2']);
    expect(c.spawns()).toEqual([]); // rank 0 is not replaced while VPID 2 may still talk to it
    expect(ranksOf(c)).toMatchObject({ vacant: [0, 2], spawning: null });
    c.report('t1', 2, 'terminatedAbnormally', { signal: 'SIGTERM' });
    expect(c.events()).toEqual(expect.arrayContaining(['t1 GSIG_NTF_DIED(2)', 't1 replacing rank 0 (VPID 0) with VPID 4: replacement 1 of 16']));
    c.report('t1', 4, 'spawnSucceeded', { pid: 14, endpoint: 'h:4' });
    expect(c.events()).toContain('t1 replacing rank 2 (VPID 2) with VPID 5: replacement 1 of 16');
    c.report('t1', 5, 'spawnSucceeded', { pid: 15, endpoint: 'h:5' });
    expect(ranksOf(c)).toEqual({ ranks: [4, 1, 5, 3], vacant: [], replacements: [1, 0, 1, 0], spawning: null });
    // A replacement keeps its rank's group wherever it runs.
    expect(groupsOf(c)).toEqual([0, 1, 0, 1]);
    expect(c.task('t1').procs.filter((p) => p.state === 'running').map((p) => p.vpid)).toEqual([1, 3, 4, 5]);
  });

  it('a holder killed for its group that exits normally is still replaced, and the task\'s outcome counts the replacements', () => {
    const c = sco('bsco');
    c.report('t1', 1, 'terminatedAbnormally', { signal: 'SIGSEGV' });
    c.report('t1', 3, 'terminatedNormally', { exitCode: 0 });
    expect(ranksOf(c)).toMatchObject({ vacant: [3], spawning: { rank: 1, vpid: 4 } });
  });

  it('§11.3: a member that had finished runs again with its group when another member dies (its messages inside the group were never logged); until its replacement runs it is not finished in any mapping', () => {
    const c = sco('sco'); // groups {0, 2} on n1 and {1, 3} on n2
    c.report('t1', 2, 'terminatedNormally', { exitCode: 0 });
    expect(c.events()).toEqual(['t1/2 exited 0', 't1 GSIG_NTF_FINISHED(2)']);
    expect(c.sigs()).toContain(`a1 [0] ${GSIG.NTF_FINISHED} CM→ALL 2 @1`);
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.events()).toEqual([
      't1/0 terminated abnormally: SIGKILL',
      't1 rank 2 (VPID 2) had finished, and runs again: rank 0 of its checkpoint group died, the group rolls back together',
      't1 GSIG_NTF_DIED(0)', 't1 replacing rank 0 (VPID 0) with VPID 4: replacement 1 of 16', 't1 placed: n1×1',
    ]);
    expect(c.terminates()).toEqual([]); // nothing left to kill
    c.report('t1', 4, 'spawnSucceeded', { pid: 14, endpoint: 'h:4' });
    // The replacement of rank 0 must wait for rank 2's new holder: rank 2 is not finished for it.
    expect(c.mappings().map((m) => m.rollback?.finished)).toEqual([[false, false, false, false]]);
    expect(c.events()).toContain('t1 replacing rank 2 (VPID 2) with VPID 5: replacement 1 of 16');
    c.report('t1', 5, 'spawnSucceeded', { pid: 15, endpoint: 'h:5' });
    expect(ranksOf(c)).toEqual({ ranks: [4, 1, 5, 3], vacant: [], replacements: [1, 0, 1, 0], spawning: null });
    for (const v of [1, 3, 4, 5]) c.report('t1', v, 'terminatedNormally', { exitCode: 0 });
    expect(c.task('t1')).toMatchObject({ outcome: 'normal' });
  });

  it('a node failure takes the whole group at once: nothing more is killed', () => {
    const c = sco('bsco');
    c.fail('a2');
    expect(c.terminates()).toEqual([]);
    expect(c.events().filter((e) => e.includes('killing'))).toEqual([]);
    expect(ranksOf(c)).toMatchObject({ vacant: [3], spawning: { rank: 1, vpid: 4 } });
  });

  it('under nco a death kills no one', () => {
    const c = sco('nco');
    c.report('t1', 0, 'terminatedAbnormally', { signal: 'SIGKILL' });
    expect(c.terminates()).toEqual([]);
    expect(ranksOf(c)).toMatchObject({ vacant: [], spawning: { rank: 0, vpid: 4 } });
  });

  it('the groups are part of the state digest', () => {
    const a = sco('bsco');
    const b = sco('bsco');
    expect(a.digest()).toBe(b.digest());
    b.cs.tasks.get('t1')!.rollback!.groups[3] = 3;
    expect(a.digest()).not.toBe(b.digest());
  });
});

describe('PROTOCOL §11.1: the group refuses a rollback task it cannot protect (a request that bypassed the CLI)', () => {
  const rollback = (over: Partial<RollbackOptions>): Recovery => ({ ...ROLLBACK, ...over });
  it('one that is not linked', () => {
    const c = new Cluster(2);
    expect(c.submit(2, { mode: 'plain', recovery: ROLLBACK })).toEqual({
      ok: false, text: 'rollback recovery needs a linked task: its processes must use the application library (submit it with --linked, mode linked)',
    });
    expect(c.cs.tasks.size).toBe(0);
  });

  it('channel memories with semi-coordinated checkpoints (PROTOCOL §11.6): refused, naming the combinations that work', () => {
    const c = new Cluster(2);
    for (const checkpoint of ['bsco', 'sco'] as const) {
      const r = c.submit(1, { mode: 'linked', recovery: rollback({ logging: 'cm', checkpoint }) });
      expect(r).toEqual({ ok: false, text: expect.stringMatching(new RegExp(`${checkpoint} checkpoints have nothing to save: use --checkpoint nco with --logging cm`)) });
    }
    expect(c.submit(1, { mode: 'linked', recovery: rollback({ logging: 'cm', checkpoint: 'nco' }) }).ok).toBe(true);
  });

  it('a checkpoint interval or a state bound out of range; the bounds themselves are accepted', () => {
    const c = new Cluster(2);
    const cases: [Recovery, string][] = [
      [rollback({ intervalMs: ROLLBACK_MIN_INTERVAL_MS - 1 }), `checkpoint interval must be 100 to 86400000 ms, got ${ROLLBACK_MIN_INTERVAL_MS - 1}`],
      [rollback({ intervalMs: ROLLBACK_MAX_INTERVAL_MS + 1 }), 'checkpoint interval must be 100 to 86400000 ms, got 86400001'],
      [rollback({ maxStateBytes: 0 }), 'the largest state of a rank must be 1 to 67108864 bytes, got 0'],
      [rollback({ maxStateBytes: ROLLBACK_MAX_STATE_BYTES + 1 }), 'the largest state of a rank must be 1 to 67108864 bytes, got 67108865'],
    ];
    for (const [recovery, text] of cases) expect(c.submit(1, { mode: 'linked', recovery })).toEqual({ ok: false, text });
    expect(c.submit(1, { mode: 'linked', recovery: rollback({ intervalMs: ROLLBACK_MIN_INTERVAL_MS, maxStateBytes: 1 }) }).ok).toBe(true);
    expect(c.submit(1, { mode: 'linked', recovery: rollback({ intervalMs: ROLLBACK_MAX_INTERVAL_MS, maxStateBytes: ROLLBACK_MAX_STATE_BYTES }) }).ok).toBe(true);
  });

  it('PROTOCOL §11.4: the group keeps a rank\'s last two checkpoint marks, from the process that holds the rank on its own node only', () => {
    const c = rollbackRunning(2, 2);
    const rec = c.cs.tasks.get('t1')!;
    const mark = (id: number, logPos: number, extent = logPos, protector = 'n2:9') => ({
      id, logPos, digest: new Uint8Array(32).fill(id), protector, base: new Uint8Array(32).fill(logPos), extent, chain: new Uint8Array(32).fill(extent),
    });
    expect(markRank(rec, 'n2', 0, mark(1, 4))).toMatch(/holds no rank on n2/); // VPID 0 runs on n1
    expect(markRank(rec, 'n1', 5, mark(1, 4))).toMatch(/holds no rank/);
    expect(markRank(rec, 'n1', 0, mark(1, 4))).toBeNull();
    expect(markRank(rec, 'n1', 0, mark(1, 9))).toMatch(/not newer/);
    expect(markRank(rec, 'n1', 0, mark(2, 9))).toBeNull();
    expect(markRank(rec, 'n1', 0, mark(3, 12))).toBeNull();
    expect(rec.rollback!.marks[0]!.map((m) => m.id)).toEqual([2, 3]);
    expect(rec.rollback!.marks[1]).toEqual([]);
    // The mapping a replacement gets carries them.
    expect(rollbackTableOf(rec, c.nodes)!.marks[0]!.map((m) => [m.id, m.logPos])).toEqual([[2, 9], [3, 12]]);
  });

  it('PROTOCOL §11.4: the log\'s extent grows in the newest mark; a move keeps only the moved one; an extent before the position is refused', () => {
    const c = rollbackRunning(2, 2);
    const rec = c.cs.tasks.get('t1')!;
    const mark = (id: number, logPos: number, extent = logPos, protector = 'n2:9') => ({
      id, logPos, digest: new Uint8Array(32).fill(id), protector, base: new Uint8Array(32).fill(logPos), extent, chain: new Uint8Array(32).fill(extent),
    });
    expect(markRank(rec, 'n1', 0, mark(0, 0, 5))).toBeNull(); // no checkpoint yet: the log reaches 5
    expect(markRank(rec, 'n1', 0, mark(0, 0, 9))).toBeNull();
    expect(markRank(rec, 'n1', 0, mark(0, 0, 9))).toMatch(/not beyond 9/);
    expect(rec.rollback!.marks[0]!.map((m) => [m.id, m.extent, m.chain[0]])).toEqual([[0, 9, 9]]);
    expect(markRank(rec, 'n1', 0, mark(1, 12))).toBeNull();
    expect(markRank(rec, 'n1', 0, mark(1, 12, 20))).toBeNull();
    expect(rec.rollback!.marks[0]!.map((m) => [m.id, m.extent])).toEqual([[0, 9], [1, 20]]);
    expect(markRank(rec, 'n1', 0, mark(2, 25, 24))).toMatch(/before the checkpoint's position 25/);
    // Its protector failed: the same checkpoint, now at n3, and the log as far as it reached there.
    expect(markRank(rec, 'n1', 0, mark(1, 12, 21, 'n3:9'))).toBeNull();
    expect(rec.rollback!.marks[0]!.map((m) => [m.id, m.extent, m.protector])).toEqual([[1, 21, 'n3:9']]);
  });

  it('radic-hmpl A.1: a rank\'s protector is the next live node of the ring; a failed node is skipped; alone, none', () => {
    const ring = [{ node: 'n1', endpoint: 'a' }, { node: 'n2', endpoint: 'b' }, { node: 'n4', endpoint: 'd' }];
    expect(protectorAfter(ring, 'n1')).toBe('b');
    expect(protectorAfter(ring, 'n2')).toBe('d'); // n3 failed: skipped
    expect(protectorAfter(ring, 'n3')).toBe('d');
    expect(protectorAfter(ring, 'n4')).toBe('a'); // wraps
    expect(protectorAfter([{ node: 'n1', endpoint: 'a' }], 'n1')).toBe('');
  });
});
