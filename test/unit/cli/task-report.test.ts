// How tasks and nodes look to the operator (cli/task-report.ts): the ps and nodes tables, the
// progress lines of `submit --wait`, and the exit code a finished task maps to.
import { describe, expect, it } from 'vitest';
import { describeTask, formatEvents, formatNodes, formatTasks, narrowView, TaskWatch } from '../../../cli/task-report.ts';
import { node, proc, task, view } from './fixtures.ts';

describe('trine ps table', () => {
  it('one row per task, then one per process, in shared columns', () => {
    const out = formatTasks([
      task('t1'),
      task('t2', { name: 'big', size: 8, state: 'waitForResource', waitReason: 'needs 8 slots, 3 free on 2 healthy nodes', procs: [] }),
      task('t3', {
        size: 1, state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 0)',
        procs: [proc(0, { state: 'terminatedAbnormally', exitCode: 3, reason: 'exited with code 3' })],
      }),
    ]).split('\n');
    expect(out[0]).toMatch(/^ID\s+NAME\s+STATE\s+SIZE\s+NODE\s+PID\s+EXIT\s+INFO$/);
    expect(out[1]).toMatch(/^t1\s+sleep\s+running\s+2$/);
    expect(out[2]).toMatch(/^t1\/0\s+running\s+n1\s+1000\s+-$/);
    expect(out[4]).toMatch(/^t2\s+big\s+waitForResource\s+8\s+needs 8 slots, 3 free on 2 healthy nodes$/);
    expect(out[5]).toMatch(/^t3\s+sleep\s+terminatedAbnormally\s+1\s+abnormal: processes terminated abnormally \(VPIDs 0\)$/);
    expect(out[6]).toMatch(/^t3\/0\s+terminatedAbnormally\s+n1\s+1000\s+code 3\s+exited with code 3$/);
  });

  it('PROTOCOL §11.2: a rollback task\'s process shows the rank it holds in the NAME column', () => {
    const out = formatTasks([task('t5', { mode: 'linked', procs: [proc(2, { rank: 0 }), proc(1, { rank: 1 }), proc(0, { state: 'terminatedAbnormally', exitCode: 9 })] })]).split('\n');
    expect(out[2]).toMatch(/^t5\/2\s+rank 0\s+running\s+n3\s+1002\s+-$/);
    expect(out[3]).toMatch(/^t5\/1\s+rank 1\s+running\s+n2\s+1001\s+-$/);
    expect(out[4]).toMatch(/^t5\/0\s+terminatedAbnormally\s+n1\s+1000\s+code 9$/);
  });

  it('PROTOCOL §13: a straggler-policy task\'s process shows its progress in INFO, and STRAGGLER when flagged', () => {
    const out = formatTasks([task('t6', {
      mode: 'linked',
      procs: [proc(0, { progress: 620 }), proc(1, { progress: 310, straggler: true }), proc(2, { progress: null }), proc(3, { state: 'terminatedAbnormally', exitCode: 1, reason: 'exited with code 1', progress: 5 })],
    })]).split('\n');
    expect(out[2]).toMatch(/^t6\/0\s+running\s+n1\s+1000\s+-\s+62 % done$/);
    expect(out[3]).toMatch(/^t6\/1\s+running\s+n2\s+1001\s+-\s+31 % done, STRAGGLER$/);
    expect(out[4]).toMatch(/^t6\/2\s+running\s+n3\s+1002\s+-$/);
    expect(out[5]).toMatch(/^t6\/3\s+terminatedAbnormally\s+n4\s+1003\s+code 1\s+exited with code 1; 0 % done$/);
  });

  it('PROTOCOL §12.3: a DGRP task\'s process left out of the group says so in INFO', () => {
    const out = formatTasks([task('t7', { mode: 'linked', procs: [proc(0, { recommended: true }), proc(1, { recommended: false })] })]).split('\n');
    expect(out[2]).toMatch(/^t7\/0\s+running\s+n1\s+1000\s+-$/);
    expect(out[3]).toMatch(/^t7\/1\s+running\s+n2\s+1001\s+-\s+out of the DGRP$/);
  });

  it('no tasks: says how to submit one', () => {
    expect(formatTasks([])).toMatch(/no tasks: submit one with `trine submit/);
  });

  it('a failed start attempt shows while the task retries', () => {
    const out = formatTasks([task('t4', { state: 'waitForResource', startAttempts: 1, failure: 'spawn failed: ENOENT /x', procs: [] })]);
    expect(out).toMatch(/start attempt 1 failed: spawn failed: ENOENT \/x/);
  });

  it('narrowView keeps one task and its events; formatEvents names whose clock', () => {
    const v = narrowView(view({ tasks: [task('t1'), task('t2')], events: [
      { atMs: 0, rsn: 1, task: null, vpid: null, text: 'node n1 joined' },
      { atMs: 1000, rsn: 5, task: 't2', vpid: null, text: 't2 submitted' },
    ] }), 't2');
    expect(v.tasks.map((t) => t.id)).toEqual(['t2']);
    expect(v.events.map((e) => e.text)).toEqual(['t2 submitted']);
    expect(formatEvents(v.events, 'r1')).toMatch(/^events \(r1's clock, UTC\):\nTIME\s+RSN\s+EVENT\n00:00:01\.000\s+5\s+t2 submitted$/);
  });
});

describe('trine nodes table', () => {
  it('node, agent, state, slots used/total, incarnation', () => {
    const out = formatNodes([node(1, { used: 3 }), node(2, { state: 'failed' }), node(3, { state: 'joining', inc: 0 })]).split('\n');
    expect(out[0]).toMatch(/^NODE\s+AGENT\s+STATE\s+SLOTS\s+INC$/);
    expect(out[1]).toMatch(/^n1\s+a1\s+up\s+3\/4\s+1700000000001$/);
    expect(out[2]).toMatch(/^n2\s+a2\s+failed\s+0\/4/);
    expect(out[3]).toMatch(/^n3\s+a3\s+joining\s+0\/4\s+0$/);
  });
});

describe('submit --wait: progress and exit code', () => {
  it('prints a line per change, not per poll', () => {
    const w = new TaskWatch();
    expect(w.observe(task('t3', { state: 'waitForResource', waitReason: 'needs 4 slots, 2 free', procs: [] }))).toEqual(['t3 waitForResource: needs 4 slots, 2 free']);
    expect(w.observe(task('t3', { state: 'waitForResource', waitReason: 'needs 4 slots, 2 free', procs: [] }))).toEqual([]);
    expect(w.observe(task('t3', { size: 4, procs: [proc(0), proc(1), proc(2), proc(3)] }))).toEqual(['t3 running (4 processes)']);
    expect(describeTask(task('t3', { size: 1, procs: [proc(0)] }))).toBe('t3 running (1 process)');
  });

  it('a normal end: exit 0, no reason', () => {
    const w = new TaskWatch();
    const done = task('t3', { state: 'terminatedNormally', outcome: 'normal', reason: 'all processes terminated normally', procs: [proc(0, { state: 'terminatedNormally', exitCode: 0 })] });
    expect(w.observe(done)).toEqual(['t3/0 terminatedNormally (code 0)', 't3 terminatedNormally: all processes terminated normally']);
    expect(w.exitFor(done)).toEqual({ code: 0, reason: null });
  });

  it('abnormal with exit codes: the code of the first process seen exiting non-zero', () => {
    const w = new TaskWatch();
    w.observe(task('t3', { procs: [proc(0), proc(1, { state: 'terminatedAbnormally', exitCode: 7 })] }));
    const done = task('t3', {
      state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 0, 1)',
      procs: [proc(0, { state: 'terminatedAbnormally', exitCode: 2 }), proc(1, { state: 'terminatedAbnormally', exitCode: 7 })],
    });
    expect(w.observe(done)).toEqual(['t3/0 terminatedAbnormally (code 2)', 't3 terminatedAbnormally: processes terminated abnormally (VPIDs 0, 1)']);
    expect(w.exitFor(done)).toEqual({ code: 7, reason: 't3 terminated abnormally: processes terminated abnormally (VPIDs 0, 1)' });
    // Seen together (or never seen running): the lowest VPID's.
    expect(new TaskWatch().exitFor(done).code).toBe(2);
  });

  it('exit codes are capped to 1..125', () => {
    const done = (code: number) => task('t3', { state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'x', procs: [proc(0, { state: 'terminatedAbnormally', exitCode: code })] });
    expect(new TaskWatch().exitFor(done(255)).code).toBe(125);
    expect(new TaskWatch().exitFor(done(126)).code).toBe(125);
    expect(new TaskWatch().exitFor(done(125)).code).toBe(125);
  });

  it('abnormal without an exit code (killed, spawn failed): exit 1 with the reason', () => {
    const killed = task('t3', { state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'killed by operator', procs: [proc(0, { state: 'terminatedAbnormally', signal: 'SIGTERM' })] });
    expect(new TaskWatch().exitFor(killed)).toEqual({ code: 1, reason: 't3 terminated abnormally: killed by operator' });
    const enoent = task('t4', {
      state: 'terminatedAbnormally', outcome: 'abnormal', failure: 'spawn failed: ENOENT /no/such', startAttempts: 3,
      reason: 'spawn failed: ENOENT /no/such (gave up after 3 start attempts)', procs: [proc(0, { state: 'spawnFailed', pid: null })],
    });
    const r = new TaskWatch().exitFor(enoent);
    expect(r.code).toBe(1);
    expect(r.reason).toBe('t4 terminated abnormally: spawn failed: ENOENT /no/such (gave up after 3 start attempts)');
  });

  it('a restarted process ending again is reported again', () => {
    const w = new TaskWatch();
    const dead = task('t3', { state: 'running', restarted: true, procs: [proc(0, { state: 'terminatedAbnormally', signal: 'SIGKILL', reason: 'node failed' })] });
    expect(w.observe(dead)[0]).toBe('t3/0 terminatedAbnormally (SIGKILL): node failed');
    w.observe(task('t3', { procs: [proc(0)] }));
    expect(w.observe(dead)[0]).toBe('t3/0 terminatedAbnormally (SIGKILL): node failed');
  });

  it('changes(): the same changes as data, for --json (trine.task-change/1)', () => {
    const w = new TaskWatch();
    const done = task('t3', {
      state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'processes terminated abnormally (VPIDs 1)',
      procs: [proc(0, { state: 'terminatedNormally', exitCode: 0 }), proc(1, { state: 'terminatedAbnormally', exitCode: null, signal: 'SIGKILL', reason: 'killed by SIGKILL' })],
    });
    expect(w.changes(done)).toEqual([
      { change: 'proc', task: 't3', vpid: 0, state: 'terminatedNormally', node: 'n1', exitCode: 0, signal: null, reason: null, text: 't3/0 terminatedNormally (code 0)' },
      { change: 'proc', task: 't3', vpid: 1, state: 'terminatedAbnormally', node: 'n2', exitCode: null, signal: 'SIGKILL', reason: 'killed by SIGKILL', text: 't3/1 terminatedAbnormally (SIGKILL): killed by SIGKILL' },
      { change: 'task', task: 't3', state: 'terminatedAbnormally', running: 0, info: 'abnormal: processes terminated abnormally (VPIDs 1)', text: 't3 terminatedAbnormally: processes terminated abnormally (VPIDs 1)' },
    ]);
    expect(w.changes(done)).toEqual([]);
  });
});
