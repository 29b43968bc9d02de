// FsmTask (spec §6.1, rows T1–T17) and the plain-data step it is stored and advanced with
// (fsm/plain-data.ts, DESIGN.md §3). Everything goes through the pure initialTransition() /
// transition(); no actor is started.
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { fsmTask } from '../../../fsm/fsm-task.ts';
import type { FsmTaskContext, FsmTaskEvent, FsmTaskInput } from '../../../fsm/fsm-task-types.ts';
import { fromData, initialStep, step, toData } from '../../../fsm/plain-data.ts';
import type { MachineAction, MachineData } from '../../../fsm/plain-data.ts';
import { InvariantError } from '../../../src/base/result.ts';

const INPUT: FsmTaskInput = {
  taskId: 't1',
  size: 3,
  startTimeoutTicks: 5,
  terminateTimeoutTicks: 4,
  maxStartAttempts: 2,
  maxTerminateAttempts: 2,
};

/** A task driven through plain data, as the manager drives it. */
class Task {
  data: MachineData;
  actions: MachineAction[];
  constructor(input: FsmTaskInput = INPUT) {
    const r = initialStep(fsmTask, input);
    this.data = r.data;
    this.actions = r.actions;
  }
  get state(): unknown {
    return this.data.value;
  }
  get ctx(): FsmTaskContext {
    return this.data.context as FsmTaskContext;
  }
  send(...events: FsmTaskEvent[]): MachineAction[] {
    this.actions = [];
    for (const event of events) {
      const r = step(fsmTask, this.data, event);
      // Stored data is plain: it survives JSON unchanged after every step.
      expect(JSON.parse(JSON.stringify(r.data))).toEqual(r.data);
      this.data = r.data;
      this.actions.push(...r.actions);
    }
    return this.actions;
  }
  tick(n: number): MachineAction[] {
    return this.send(...Array.from({ length: n }, () => ({ type: 'clock.tick' }) as const));
  }
  /** Broadcasts of the last send, as `SIGNAL(arg)`. */
  broadcasts(): string[] {
    return this.actions
      .filter((a) => a.type === 'broadcast')
      .map((a) => {
        const p = a.params as { signal: string; arg: number };
        return `${p.signal}(${p.arg})`;
      });
  }
}

const act = (type: string, params: unknown): MachineAction => ({ type, params });

function running(input: FsmTaskInput = INPUT): Task {
  const t = new Task(input);
  t.send({ type: 'res.allocated' }, { type: 'cm.spawn' }, { type: 'procs.allRunning' });
  expect(t.state).toBe('running');
  return t;
}

function starting(input: FsmTaskInput = INPUT): Task {
  const t = new Task(input);
  t.send({ type: 'res.allocated' }, { type: 'cm.spawn' });
  expect(t.state).toBe('starting');
  return t;
}

describe('FsmTask transitions (spec §6.1)', () => {
  it('T1 a submitted task starts in Wait-for-resource and asks for nodes for VPIDs 0…size-1', () => {
    const t = new Task();
    expect(t.state).toBe('waitForResource');
    expect(t.actions).toEqual([act('requestResources', { vpids: [0, 1, 2] })]);
    expect(t.ctx.restarted).toBe(false);
  });

  it('T2 Wait-for-resource → Res-allocated sends Res-allocated to every FsmProc and queues for its turn', () => {
    const t = new Task();
    expect(t.send({ type: 'res.allocated' })).toEqual([
      act('sendToProcs', { command: 'res-allocated', vpids: [0, 1, 2] }),
      act('enqueueService', { service: 'start' }),
    ]);
    expect(t.state).toBe('waitForStart');
  });

  it("T3 Wait-for-start → Spawn (the task's turn) spawns all, schedules Start-TO and increments Start-ctr", () => {
    const t = new Task();
    t.send({ type: 'res.allocated' });
    expect(t.send({ type: 'cm.spawn' })).toEqual([act('sendToProcs', { command: 'spawn', vpids: [0, 1, 2] })]);
    expect(t.state).toBe('starting');
    expect(t.ctx.startTimerTicks).toBe(INPUT.startTimeoutTicks);
    expect(t.ctx.startCount).toBe(1);
  });

  it('T4 Starting → all FsmProc Running dismisses Start-TO, resets Start-ctr and frees the start slot', () => {
    const t = starting();
    expect(t.send({ type: 'procs.allRunning' })).toEqual([act('serviceDone', { service: 'start' })]);
    expect(t.state).toBe('running');
    expect(t.ctx.startTimerTicks).toBeNull();
    expect(t.ctx.startCount).toBe(0);
    // Start-TO is dismissed: ticks in Running change nothing.
    const before = JSON.stringify(t.data);
    expect(t.tick(10)).toEqual([]);
    expect(JSON.stringify(t.data)).toBe(before);
  });

  it('T5 Starting → a spawn failure terminates all and retries allocation while Start-ctr < limit', () => {
    const t = starting();
    expect(t.send({ type: 'procs.anySpawnFailed', detail: 'ENOENT ./missing' })).toEqual([
      act('serviceDone', { service: 'start' }),
      act('enqueueService', { service: 'terminate' }),
    ]);
    expect(t.state).toBe('waitForTerminate');
    expect(t.ctx.afterTerminate).toBe('retry');
    expect(t.ctx.failure).toBe('spawn failed: ENOENT ./missing');
    expect(t.send({ type: 'cm.terminate' })).toEqual([act('sendToProcs', { command: 'terminate', vpids: [0, 1, 2] })]);
    expect(t.state).toBe('terminating');
    expect(t.send({ type: 'procs.allTerminated' })).toEqual([
      act('serviceDone', { service: 'terminate' }),
      act('requestResources', { vpids: [0, 1, 2] }),
    ]);
    expect(t.state).toBe('waitForResource');
    expect(t.ctx.restarted).toBe(false);
    // The retry is a full second attempt: allocation, turn, spawn.
    t.send({ type: 'res.allocated' }, { type: 'cm.spawn' });
    expect(t.ctx.startCount).toBe(2);
    t.send({ type: 'procs.allRunning' });
    expect(t.state).toBe('running');
  });

  it("T5 the failed start's reason says what failed: the agent's own 'spawn failed' text as it is, any other detail prefixed, none said so, a lost node's VPIDs", () => {
    const failure = (event: FsmTaskEvent): string | null => {
      const t = starting();
      t.send(event);
      expect(t.state).toBe('waitForTerminate');
      return t.ctx.failure;
    };
    expect(failure({ type: 'procs.anySpawnFailed', detail: 'spawn failed: EACCES ./x' })).toBe('spawn failed: EACCES ./x');
    expect(failure({ type: 'proc.spawnFailed', vpid: 1, detail: 'EACCES ./x' })).toBe('spawn failed: EACCES ./x');
    expect(failure({ type: 'proc.spawnFailed', vpid: 1 })).toBe('spawn failed: no detail from the agent');
    expect(failure({ type: 'res.removed', vpids: [2, 0] })).toBe('node lost while starting (VPIDs 2, 0)');
    expect(failure({ type: 'procs.anyTerminatedAbnormally', vpids: [0, 1] })).toBe('process terminated abnormally while starting (VPIDs 0, 1)');
  });

  it('T5 Starting → Start-TO terminates all and retries, as a spawn failure does', () => {
    const t = starting();
    t.tick(INPUT.startTimeoutTicks);
    expect(t.state).toBe('waitForTerminate');
    expect(t.ctx.afterTerminate).toBe('retry');
    expect(t.ctx.failure).toBe('start timed out after 5 ticks');
  });

  it('T5 Starting → a process crashing or a node lost before all run is a failed start', () => {
    const crash = starting();
    crash.send({ type: 'proc.terminated', vpid: 1, normally: false });
    expect(crash.state).toBe('waitForTerminate');
    expect(crash.ctx.failure).toMatch(/terminated abnormally while starting \(VPIDs 1\)/);
    const lost = starting();
    lost.send({ type: 'res.removed', vpids: [2] });
    expect(lost.state).toBe('waitForTerminate');
    expect(lost.ctx.failure).toMatch(/node lost/);
    // A process of another task (not a member) is not this task's failure.
    const other = starting();
    other.send({ type: 'res.removed', vpids: [7] }, { type: 'proc.spawnFailed', vpid: 9 });
    expect(other.state).toBe('starting');
  });

  it('T6 Running → all FsmProc Terminated-normally ends the task normally', () => {
    const t = running();
    expect(t.send({ type: 'procs.allTerminatedNormally' })).toEqual([
      act('taskFinished', { outcome: 'normal', reason: 'all processes terminated normally' }),
    ]);
    expect(t.state).toBe('terminatedNormally');
    expect(fromData(fsmTask, t.data).status).toBe('done');
  });

  it('T6 Running → all terminated after a crash ends the task abnormally, naming the crashed VPIDs', () => {
    const t = running();
    t.send({ type: 'procs.anyTerminatedAbnormally', vpids: [2] }, { type: 'procs.allTerminated' });
    expect(t.state).toBe('terminatedAbnormally');
    expect(t.ctx.reason).toBe('processes terminated abnormally (VPIDs 2)');
    // With no crash recorded, "all terminated" is a normal end.
    const clean = running();
    clean.send({ type: 'procs.allTerminated' });
    expect(clean.state).toBe('terminatedNormally');
  });

  it('T7 Running → a crash or a lost node broadcasts GSIG_NTF_DIED(x) exactly once and stays Running', () => {
    const t = running();
    t.send({ type: 'procs.anyTerminatedAbnormally', vpids: [1] });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(1)']);
    expect(t.state).toBe('running');
    // The same death seen again (aggregate re-fed, per-process event, node removal): no repeat.
    t.send(
      { type: 'procs.anyTerminatedAbnormally', vpids: [1] },
      { type: 'proc.terminated', vpid: 1, normally: false },
      { type: 'res.removed', vpids: [1] },
    );
    expect(t.broadcasts()).toEqual([]);
    t.send({ type: 'res.removed', vpids: [2, 0] });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(0)', 'GSIG_NTF_DIED(2)']);
    // A normal exit is no crash: nothing is broadcast.
    const n = running();
    n.send({ type: 'proc.terminated', vpid: 0, normally: true });
    expect(n.broadcasts()).toEqual([]);
    expect(n.ctx.deadVpids).toEqual([]);
  });

  it('T8 Running → App-terminate waits for its turn, then terminates all under Terminate-TO', () => {
    const t = running();
    expect(t.send({ type: 'app.terminate' })).toEqual([act('enqueueService', { service: 'terminate' })]);
    expect(t.state).toBe('waitForTerminate');
    expect(t.send({ type: 'cm.terminate' })).toEqual([act('sendToProcs', { command: 'terminate', vpids: [0, 1, 2] })]);
    expect(t.state).toBe('terminating');
    expect(t.ctx.terminateTimerTicks).toBe(INPUT.terminateTimeoutTicks);
    expect(t.ctx.terminateCount).toBe(1);
    t.send({ type: 'procs.allTerminated' });
    expect(t.state).toBe('terminatedNormally');
    expect(t.actions).toContainEqual(
      act('taskFinished', { outcome: 'normal', reason: "terminated at the application's request" }),
    );
  });

  it('T9 Running → App-restart terminates all, then re-allocates and re-spawns with restarted = true', () => {
    const t = running();
    t.send({ type: 'procs.anyTerminatedAbnormally', vpids: [0] });
    t.send({ type: 'app.restart' }, { type: 'cm.terminate' }, { type: 'procs.allTerminated' });
    expect(t.state).toBe('waitForResource');
    expect(t.actions).toContainEqual(act('requestResources', { vpids: [0, 1, 2] }));
    expect(t.ctx.restarted).toBe(true);
    expect(t.ctx.deadVpids).toEqual([]);
    t.send({ type: 'res.allocated' }, { type: 'cm.spawn' }, { type: 'procs.allRunning' });
    expect(t.state).toBe('running');
    expect(t.ctx.restarted).toBe(true);
  });

  it('T10 Running → App-kill(x) clears AckedFlag and sends Terminate to FsmProc(x) only', () => {
    const t = running();
    expect(t.send({ type: 'app.kill', vpid: 1 })).toEqual([act('sendToProcs', { command: 'terminate', vpids: [1] })]);
    expect(t.state).toBe('killing');
    expect(t.ctx.killVpid).toBe(1);
    expect(t.ctx.acked).toBe(false);
    // A kill of a VPID that is not a live member is ignored.
    const u = running();
    const before = JSON.stringify(u.data);
    expect(u.send({ type: 'app.kill', vpid: 9 })).toEqual([]);
    expect(JSON.stringify(u.data)).toBe(before);
  });

  it('T10 Running → App-kill of a process that already exited is ignored, so no kill waits forever', () => {
    const t = running();
    t.send({ type: 'proc.terminated', vpid: 2, normally: true });
    expect(t.ctx.exitedVpids).toEqual([2]);
    expect(t.send({ type: 'app.kill', vpid: 2 })).toEqual([]);
    expect(t.state).toBe('running');
  });

  it('T11 Killing(x) → a crash during the kill broadcasts GSIG_REP_ACK_KILL(x) once, before the notification', () => {
    const t = running();
    t.send({ type: 'app.kill', vpid: 1 });
    t.send({ type: 'proc.terminated', vpid: 2, normally: false });
    expect(t.broadcasts()).toEqual(['GSIG_REP_ACK_KILL(1)', 'GSIG_NTF_DIED(2)']);
    expect(t.ctx.acked).toBe(true);
    expect(t.state).toBe('killing');
    t.send({ type: 'res.removed', vpids: [0] });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(0)']);
  });

  it('T12 Killing(x) → FsmProc(x) terminated broadcasts GSIG_NTF_DIED(x) and returns to Running (no ack if no error)', () => {
    const t = running();
    t.send({ type: 'app.kill', vpid: 1 });
    t.send({ type: 'proc.terminated', vpid: 1, normally: false });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(1)']);
    expect(t.state).toBe('running');
    expect(t.ctx.vpids).toEqual([0, 2]);
    expect(t.ctx.killVpid).toBeNull();
    // A killed process is not a crash: the task can still end normally.
    expect(t.ctx.deadVpids).toEqual([]);
    t.send({ type: 'procs.allTerminated' });
    expect(t.state).toBe('terminatedNormally');
  });

  it('T12 Killing(x) → x exiting normally on the terminate command also completes the kill', () => {
    const t = running();
    t.send({ type: 'app.kill', vpid: 0 }, { type: 'proc.terminated', vpid: 0, normally: true });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(0)']);
    expect(t.state).toBe('running');
    expect(t.ctx.vpids).toEqual([1, 2]);
  });

  it('T12 Killing(x) → x and another process dying together: the reply first, then the notice, no ack', () => {
    const t = running();
    t.send({ type: 'app.kill', vpid: 1 });
    t.send({ type: 'procs.anyTerminatedAbnormally', vpids: [2, 1] });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(1)', 'GSIG_NTF_DIED(2)']);
    expect(t.state).toBe('running');
  });

  it('T13 Running → App-spawn takes a fresh VPID, schedules Start-TO, and on allocation commands the new FsmProc', () => {
    const t = running();
    expect(t.send({ type: 'app.spawn' })).toEqual([act('requestResources', { vpids: [3] })]);
    expect(t.state).toBe('spawning');
    expect(t.ctx.spawnVpid).toBe(3);
    expect(t.ctx.acked).toBe(false);
    expect(t.ctx.startTimerTicks).toBe(INPUT.startTimeoutTicks);
    expect(t.send({ type: 'res.allocated' })).toEqual([
      act('sendToProcs', { command: 'res-allocated', vpids: [3] }),
      act('sendToProcs', { command: 'spawn', vpids: [3] }),
    ]);
    // A second allocation is not a second spawn.
    expect(t.send({ type: 'res.allocated' })).toEqual([]);
  });

  it('T14 Spawning → a crash during the spawn broadcasts GSIG_REP_ACK_SPAWN once, before the notification', () => {
    const t = running();
    t.send({ type: 'app.spawn' }, { type: 'res.allocated' });
    t.send({ type: 'procs.anyTerminatedAbnormally', vpids: [0] });
    expect(t.broadcasts()).toEqual(['GSIG_REP_ACK_SPAWN(3)', 'GSIG_NTF_DIED(0)']);
    t.send({ type: 'proc.terminated', vpid: 2, normally: false });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(2)']);
    expect(t.state).toBe('spawning');
  });

  it('T15 Spawning → the new FsmProc Running broadcasts GSIG_REP_SPAWNED(vpid) and dismisses Start-TO', () => {
    const t = running();
    t.send({ type: 'app.spawn' }, { type: 'res.allocated' }, { type: 'proc.running', vpid: 1 });
    expect(t.state).toBe('spawning'); // another process's state is not the spawn's answer
    t.send({ type: 'proc.running', vpid: 3 });
    expect(t.broadcasts()).toEqual(['GSIG_REP_SPAWNED(3)']);
    expect(t.state).toBe('running');
    expect(t.ctx.startTimerTicks).toBeNull();
    expect(t.ctx.vpids).toEqual([0, 1, 2, 3]);
    expect(t.ctx.spawnVpid).toBeNull();
  });

  it('T16 Terminating → all FsmProc terminated dismisses Terminate-TO and ends the task', () => {
    const t = running();
    t.send({ type: 'task.kill' }, { type: 'cm.terminate' });
    expect(t.ctx.terminateTimerTicks).toBe(INPUT.terminateTimeoutTicks);
    expect(t.send({ type: 'procs.allTerminated' })).toEqual([
      act('serviceDone', { service: 'terminate' }),
      act('taskFinished', { outcome: 'abnormal', reason: 'killed by operator' }),
    ]);
    expect(t.state).toBe('terminatedAbnormally');
    expect(t.ctx.terminateTimerTicks).toBeNull();
  });

  it('T17 Terminating → Terminate-TO re-sends Terminate while Terminate-ctr < limit, then gives up', () => {
    const t = running();
    t.send({ type: 'app.terminate' }, { type: 'cm.terminate' });
    expect(t.tick(INPUT.terminateTimeoutTicks - 1)).toEqual([]);
    expect(t.tick(1)).toEqual([act('sendToProcs', { command: 'terminate', vpids: [0, 1, 2] })]);
    expect(t.state).toBe('terminating');
    expect(t.ctx.terminateCount).toBe(2);
    expect(t.ctx.terminateTimerTicks).toBe(INPUT.terminateTimeoutTicks);
    t.tick(INPUT.terminateTimeoutTicks);
    expect(t.state).toBe('terminatedAbnormally');
    expect(t.ctx.reason).toBe("terminated at the application's request; terminate timed out after 2 attempts");
    expect(t.actions).toContainEqual(act('serviceDone', { service: 'terminate' }));
  });

  it('T17 a restart whose terminate times out ends the task abnormally with the timeout alone as reason', () => {
    const t = running();
    t.send({ type: 'app.restart' }, { type: 'cm.terminate' });
    t.tick(2 * INPUT.terminateTimeoutTicks);
    expect(t.state).toBe('terminatedAbnormally');
    expect(t.actions.at(-1)).toEqual(act('taskFinished', { outcome: 'abnormal', reason: 'terminate timed out after 2 attempts' }));
  });
});

describe('FsmTask timers, retries and the paths around the table', () => {
  it('Start-TO fires after exactly N ticks and not before', () => {
    const t = starting();
    t.tick(INPUT.startTimeoutTicks - 1);
    expect(t.state).toBe('starting');
    expect(t.ctx.startTimerTicks).toBe(1);
    t.tick(1);
    expect(t.state).toBe('waitForTerminate');
  });

  it('Terminate-TO fires after exactly N ticks and not before', () => {
    const t = running();
    t.send({ type: 'app.terminate' }, { type: 'cm.terminate' });
    t.tick(INPUT.terminateTimeoutTicks - 1);
    expect(t.ctx.terminateCount).toBe(1);
    t.tick(1);
    expect(t.ctx.terminateCount).toBe(2);
  });

  it('retries stop at maxStartAttempts: the task ends Terminated-abnormally with the spawn error as reason', () => {
    const t = starting({ ...INPUT, maxStartAttempts: 3 });
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect(t.ctx.startCount).toBe(attempt);
      t.send({ type: 'procs.anySpawnFailed', detail: 'ENOENT ./missing' }, { type: 'cm.terminate' }, { type: 'procs.allTerminated' });
      if (attempt < 3) {
        expect(t.state).toBe('waitForResource');
        t.send({ type: 'res.allocated' }, { type: 'cm.spawn' });
      }
    }
    expect(t.state).toBe('terminatedAbnormally');
    const reason = 'spawn failed: ENOENT ./missing (gave up after 3 start attempts)';
    expect(t.ctx.reason).toBe(reason);
    expect(t.actions.at(-1)).toEqual(act('taskFinished', { outcome: 'abnormal', reason }));
    // A finished task stays finished, whatever arrives.
    const before = JSON.stringify(t.data);
    expect(t.send({ type: 'res.allocated' }, { type: 'cm.spawn' }, { type: 'clock.tick' }, { type: 'task.kill' })).toEqual([]);
    expect(JSON.stringify(t.data)).toBe(before);
  });

  it('Start-TO at the limit also gives up, after terminating what was started', () => {
    const t = starting({ ...INPUT, maxStartAttempts: 1 });
    t.tick(INPUT.startTimeoutTicks);
    expect(t.ctx.afterTerminate).toBe('end-abnormally');
    t.send({ type: 'cm.terminate' }, { type: 'procs.allTerminated' });
    expect(t.state).toBe('terminatedAbnormally');
    expect(t.ctx.reason).toBe('start timed out after 5 ticks (gave up after 1 start attempts)');
  });

  it('an App-spawn that fails answers with its ack and GSIG_NTF_DIED(vpid) and terminates the new process', () => {
    const t = running();
    t.send({ type: 'app.spawn' }, { type: 'res.allocated' });
    t.send({ type: 'proc.spawnFailed', vpid: 3, detail: 'ENOENT' });
    expect(t.broadcasts()).toEqual(['GSIG_REP_ACK_SPAWN(3)', 'GSIG_NTF_DIED(3)']);
    expect(t.actions).toContainEqual(act('sendToProcs', { command: 'terminate', vpids: [3] }));
    expect(t.state).toBe('running');
    expect(t.ctx.vpids).toEqual([0, 1, 2]);
    // The late death of the dropped process is not reported again.
    t.send({ type: 'proc.terminated', vpid: 3, normally: false });
    expect(t.broadcasts()).toEqual([]);
  });

  it('an App-spawn never placed times out after exactly N ticks and cancels its resource request', () => {
    const t = running();
    t.send({ type: 'app.spawn' });
    t.tick(INPUT.startTimeoutTicks - 1);
    expect(t.state).toBe('spawning');
    t.tick(1);
    expect(t.state).toBe('running');
    expect(t.actions).toEqual([
      act('broadcast', { signal: 'GSIG_REP_ACK_SPAWN', arg: 3 }),
      act('cancelResources', { vpids: [3] }),
      act('broadcast', { signal: 'GSIG_NTF_DIED', arg: 3 }),
    ]);
  });

  it('an App-spawn already acked is not acked again when it fails', () => {
    const t = running();
    t.send({ type: 'app.spawn' }, { type: 'res.allocated' }, { type: 'proc.terminated', vpid: 0, normally: false });
    t.send({ type: 'proc.terminated', vpid: 3, normally: false });
    expect(t.broadcasts()).toEqual(['GSIG_NTF_DIED(3)']);
    expect(t.actions).not.toContainEqual(act('sendToProcs', { command: 'terminate', vpids: [3] }));
  });

  it('a short task whose processes all exit before the last is seen running ends normally', () => {
    const t = starting();
    t.send({ type: 'procs.allTerminatedNormally' });
    expect(t.state).toBe('terminatedNormally');
    expect(t.actions[0]).toEqual(act('serviceDone', { service: 'start' }));
  });

  it('a node lost while waiting for the start turn gives the turn back and allocates again', () => {
    const t = new Task();
    t.send({ type: 'res.allocated' });
    expect(t.send({ type: 'res.removed', vpids: [1] })).toEqual([
      act('cancelService', { service: 'start' }),
      act('requestResources', { vpids: [0, 1, 2] }),
    ]);
    expect(t.state).toBe('waitForResource');
  });

  it('the operator kill ends a task in any state; one with no process ends at once', () => {
    const waiting = new Task();
    expect(waiting.send({ type: 'task.kill' })).toEqual([
      act('taskFinished', { outcome: 'abnormal', reason: 'killed by operator' }),
    ]);
    const queued = new Task();
    queued.send({ type: 'res.allocated' });
    queued.send({ type: 'task.kill' });
    expect(queued.state).toBe('terminatedAbnormally');
    expect(queued.actions[0]).toEqual(act('cancelService', { service: 'start' }));
    for (const t of [starting(), running()]) {
      t.send({ type: 'task.kill' }, { type: 'cm.terminate' }, { type: 'procs.allTerminated' });
      expect(t.state).toBe('terminatedAbnormally');
      expect(t.ctx.reason).toBe('killed by operator');
    }
    // It overrides a pending retry or restart.
    const retrying = starting();
    retrying.send({ type: 'procs.anySpawnFailed' }, { type: 'task.kill' }, { type: 'cm.terminate' }, { type: 'procs.allTerminated' });
    expect(retrying.state).toBe('terminatedAbnormally');
  });

  it('PROTOCOL §11.2: a kill the manager sends with its own reason ends the task with that reason, in any state', () => {
    const reason = 'rank 1 died again after 16 replacements, the limit (ROLLBACK_MAX_REPLACEMENTS)';
    const waiting = new Task();
    expect(waiting.send({ type: 'task.kill', reason })).toEqual([act('taskFinished', { outcome: 'abnormal', reason })]);
    for (const t of [starting(), running()]) {
      t.send({ type: 'task.kill', reason }, { type: 'cm.terminate' }, { type: 'procs.allTerminated' });
      expect(t.state).toBe('terminatedAbnormally');
      expect(t.ctx.reason).toBe(reason);
    }
    const spawning = running();
    spawning.send({ type: 'app.spawn' }, { type: 'task.kill', reason }, { type: 'cm.terminate' }, { type: 'procs.allTerminated' });
    expect(spawning.actions.at(-1)).toEqual(act('taskFinished', { outcome: 'abnormal', reason }));
  });

  it('ending the task during a kill or spawn supersedes the request; an unplaced spawn is dropped', () => {
    const k = running();
    k.send({ type: 'app.kill', vpid: 0 }, { type: 'app.terminate' });
    expect(k.state).toBe('waitForTerminate');
    expect(k.ctx.killVpid).toBeNull();
    const s = running();
    s.send({ type: 'app.spawn' }, { type: 'app.restart' });
    expect(s.actions).toContainEqual(act('cancelResources', { vpids: [3] }));
    expect(s.ctx.vpids).toEqual([0, 1, 2]);
    expect(s.ctx.startTimerTicks).toBeNull();
  });

  it('processes that all end while the task waits for its terminate turn end it without a turn', () => {
    const t = running();
    t.send({ type: 'app.terminate' });
    expect(t.send({ type: 'procs.allTerminatedNormally' })).toEqual([
      act('cancelService', { service: 'terminate' }),
      act('taskFinished', { outcome: 'normal', reason: "terminated at the application's request" }),
    ]);
  });

  it('events not valid in a state leave the snapshot unchanged and never throw', () => {
    const probes: FsmTaskEvent[] = [
      { type: 'cm.spawn' },
      { type: 'cm.terminate' },
      { type: 'procs.allRunning' },
      { type: 'app.kill', vpid: 99 },
      { type: 'proc.running', vpid: 42 },
      { type: 'proc.spawnFailed', vpid: 42 },
      { type: 'res.removed', vpids: [42] },
      { type: 'proc.terminated', vpid: 42, normally: false },
      { type: 'bogus.event' } as unknown as FsmTaskEvent,
    ];
    const states: Array<[string, () => Task]> = [
      ['waitForResource', () => new Task()],
      ['running', () => running()],
      ['terminatedNormally', () => {
        const t = running();
        t.send({ type: 'procs.allTerminatedNormally' });
        return t;
      }],
    ];
    for (const [name, make] of states) {
      const t = make();
      expect(t.state).toBe(name);
      for (const e of probes) {
        if (name === 'waitForResource' && e.type === 'cm.terminate') continue;
        const snapshot = fromData(fsmTask, t.data);
        const [next, actions] = transition(fsmTask, snapshot, e);
        expect(next).toBe(snapshot);
        expect(actions).toEqual([]);
        expect(JSON.stringify(step(fsmTask, t.data, e).data)).toBe(JSON.stringify(t.data));
      }
    }
    // Wait-for-resource and Running ignore a terminate turn they did not ask for; Killing
    // ignores a second request.
    const k = running();
    k.send({ type: 'app.kill', vpid: 0 });
    const before = JSON.stringify(k.data);
    expect(k.send({ type: 'app.kill', vpid: 1 }, { type: 'app.spawn' }, { type: 'cm.terminate' }, { type: 'clock.tick' })).toEqual([]);
    expect(JSON.stringify(k.data)).toBe(before);
  });

  it('transition() returns the named actions with their params (parameterized actions)', () => {
    const [s0, initial] = initialTransition(fsmTask, INPUT);
    expect(initial.map((a) => [a.type, a.params])).toEqual([['requestResources', { vpids: [0, 1, 2] }]]);
    const [s1] = transition(fsmTask, s0, { type: 'res.allocated' });
    const [s2] = transition(fsmTask, s1, { type: 'cm.spawn' });
    const [s3] = transition(fsmTask, s2, { type: 'procs.allRunning' });
    const [s4, actions] = transition(fsmTask, s3, { type: 'procs.anyTerminatedAbnormally', vpids: [2] });
    expect(actions.map((a) => ({ type: a.type, params: a.params }))).toEqual([
      { type: 'broadcast', params: { signal: 'GSIG_NTF_DIED', arg: 2 } },
    ]);
    expect(s4.value).toBe('running');
  });

  it('the machine input is validated: a zero limit is a bug of the caller', () => {
    expect(() => initialStep(fsmTask, { ...INPUT, maxStartAttempts: 0 })).toThrow(InvariantError);
    expect(() => initialStep(fsmTask, { ...INPUT, size: 1.5 })).toThrow(InvariantError);
    // Raw xstate keeps the error in the snapshot instead; initialStep() refuses to store it.
    expect(initialTransition(fsmTask, { ...INPUT, startTimeoutTicks: 0 })[0].status).toBe('error');
  });
});

/** A long sequence through every state, used by the determinism and plain-data tests. */
const SCRIPT: FsmTaskEvent[] = [
  { type: 'res.allocated' },
  { type: 'cm.spawn' },
  { type: 'clock.tick' },
  { type: 'procs.anySpawnFailed', detail: 'EACCES' },
  { type: 'cm.terminate' },
  { type: 'clock.tick' },
  { type: 'procs.allTerminated' },
  { type: 'res.allocated' },
  { type: 'cm.spawn' },
  { type: 'procs.allRunning' },
  { type: 'app.kill', vpid: 2 },
  { type: 'proc.terminated', vpid: 0, normally: false },
  { type: 'proc.terminated', vpid: 2, normally: false },
  { type: 'app.spawn' },
  { type: 'res.allocated' },
  { type: 'clock.tick' },
  { type: 'proc.running', vpid: 3 },
  { type: 'app.restart' },
  { type: 'cm.terminate' },
  { type: 'clock.tick' },
  { type: 'clock.tick' },
  { type: 'clock.tick' },
  { type: 'clock.tick' },
  { type: 'procs.allTerminated' },
  { type: 'res.allocated' },
  { type: 'cm.spawn' },
  { type: 'procs.allRunning' },
  { type: 'procs.allTerminatedNormally' },
];

describe('plain data (fsm/plain-data.ts)', () => {
  it('determinism: the same events from the same plain data yield identical plain data and actions', () => {
    const run = (): string => {
      let { data } = initialStep(fsmTask, INPUT);
      const out: unknown[] = [];
      for (const e of SCRIPT) {
        const r = step(fsmTask, data, e);
        data = r.data;
        out.push(r.actions);
      }
      return JSON.stringify({ data, out });
    };
    const first = run();
    expect(run()).toBe(first);
    expect(JSON.parse(first).data.value).toBe('terminatedNormally');
  });

  it('step(fromData(toData(x))) equals step(x), and the data survives JSON at every step', () => {
    let [snapshot] = initialTransition(fsmTask, INPUT);
    let data = toData(snapshot);
    for (const e of SCRIPT) {
      const [next, actions] = transition(fsmTask, snapshot, e);
      const viaJson = JSON.parse(JSON.stringify(data)) as MachineData;
      const r = step(fsmTask, viaJson, e);
      expect(JSON.stringify(r.data)).toBe(JSON.stringify(toData(next)));
      expect(r.actions).toEqual(actions.map((a) => ({ type: a.type, params: a.params ?? null })));
      snapshot = next;
      data = r.data;
    }
    expect(fromData(fsmTask, data).status).toBe('done');
  });

  it('toData keeps only plain data with sorted keys and rejects a Map, a function or NaN', () => {
    const d = toData({ value: 'a', context: { b: 1, a: [1, { d: null, c: 'x' }] } });
    expect(JSON.stringify(d)).toBe('{"value":"a","context":{"a":[1,{"c":"x","d":null}],"b":1}}');
    expect(() => toData({ value: 'a', context: { m: new Map() } })).toThrow(InvariantError);
    expect(() => toData({ value: 'a', context: { f: () => 1 } })).toThrow(InvariantError);
    expect(() => toData({ value: 'a', context: { n: Number.NaN } })).toThrow(InvariantError);
  });
});
