// FsmTask's rules (fsm/fsm-task-rules.ts; spec §6.1, §9.1 items 66–69) called by hand on a
// context and an event: what an event says died, which members are newly ended, why a start
// failed, and the guards the machine names.
import { describe, expect, it } from 'vitest';
import { deathsOf, failureDetail, newCrashes, newExits, range, sorted, spawnTarget, taskGuards } from '../../../fsm/fsm-task-rules.ts';
import type { FsmTaskContext, FsmTaskEvent } from '../../../fsm/fsm-task-types.ts';
import { InvariantError } from '../../../src/base/result.ts';

const context = (over: Partial<FsmTaskContext> = {}): FsmTaskContext => ({
  taskId: 't1', size: 3, startTimeoutTicks: 5, terminateTimeoutTicks: 4, maxStartAttempts: 2, maxTerminateAttempts: 2,
  vpids: [0, 1, 2], nextVpid: 3, deadVpids: [], exitedVpids: [], killedVpids: [], startTimerTicks: null, terminateTimerTicks: null,
  startCount: 0, terminateCount: 0, acked: false, killVpid: null, spawnVpid: null, spawnAllocated: false, restarted: false,
  afterTerminate: null, failure: null, reason: null, ...over,
});

describe('fsm-task-rules', () => {
  it('deathsOf: a lost node and an abnormal aggregate are abnormal deaths; one process\'s end says how it ended; other events report none', () => {
    expect(deathsOf({ type: 'res.removed', vpids: [1, 2] })).toEqual({ vpids: [1, 2], abnormal: true });
    expect(deathsOf({ type: 'procs.anyTerminatedAbnormally', vpids: [0] })).toEqual({ vpids: [0], abnormal: true });
    expect(deathsOf({ type: 'proc.terminated', vpid: 2, normally: true })).toEqual({ vpids: [2], abnormal: false });
    expect(deathsOf({ type: 'proc.terminated', vpid: 2, normally: false })).toEqual({ vpids: [2], abnormal: true });
    expect(deathsOf({ type: 'clock.tick' })).toEqual({ vpids: [], abnormal: false });
  });

  it('newly ended: members only, once each, sorted, never the process a kill or spawn request is about', () => {
    const c = context({ deadVpids: [0], killVpid: 2 });
    const lost: FsmTaskEvent = { type: 'res.removed', vpids: [2, 1, 0, 7] };
    expect(newCrashes(c, lost)).toEqual([1]);
    expect(newExits(c, lost)).toEqual([]);
    expect(newExits(context(), { type: 'proc.terminated', vpid: 1, normally: true })).toEqual([1]);
    expect(sorted([3, 1, 3, 2])).toEqual([1, 2, 3]);
    expect(range(3)).toEqual([0, 1, 2]);
  });

  it('failureDetail: the agent\'s text is not prefixed twice; a timeout, a lost node and a crash each say so', () => {
    const c = context();
    expect(failureDetail({ type: 'proc.spawnFailed', vpid: 0, detail: 'spawn failed: ENOENT' }, c)).toBe('spawn failed: ENOENT');
    expect(failureDetail({ type: 'procs.anySpawnFailed', detail: 'EACCES' }, c)).toBe('spawn failed: EACCES');
    expect(failureDetail({ type: 'procs.anySpawnFailed' }, c)).toBe('spawn failed: no detail from the agent');
    expect(failureDetail({ type: 'clock.tick' }, c)).toBe('start timed out after 5 ticks');
    expect(failureDetail({ type: 'res.removed', vpids: [1, 2] }, c)).toBe('node lost while starting (VPIDs 1, 2)');
    expect(failureDetail({ type: 'procs.anyTerminatedAbnormally', vpids: [0] }, c)).toBe('process terminated abnormally while starting (VPIDs 0)');
  });

  it('guards: timers expire on their last tick; a kill targets a live member only; the spawn target is asserted', () => {
    const tick: FsmTaskEvent = { type: 'clock.tick' };
    expect(taskGuards.startTimerExpires({ context: context({ startTimerTicks: 2 }), event: tick })).toBe(false);
    expect(taskGuards.startTimerExpires({ context: context({ startTimerTicks: 1 }), event: tick })).toBe(true);
    expect(taskGuards.startTimerExpires({ context: context(), event: tick })).toBe(false);
    expect(taskGuards.terminateAttemptsRemain({ context: context({ terminateCount: 1 }), event: tick })).toBe(true);
    expect(taskGuards.terminateAttemptsRemain({ context: context({ terminateCount: 2 }), event: tick })).toBe(false);
    expect(taskGuards.isLiveMember({ context: context({ exitedVpids: [1] }), event: { type: 'app.kill', vpid: 1 } })).toBe(false);
    expect(taskGuards.isLiveMember({ context: context(), event: { type: 'app.kill', vpid: 1 } })).toBe(true);
    expect(taskGuards.crashedMember({ context: context(), event: { type: 'proc.terminated', vpid: 1, normally: true } })).toBe(false);
    expect(taskGuards.crashedMember({ context: context(), event: { type: 'proc.terminated', vpid: 1, normally: false } })).toBe(true);
    expect(spawnTarget(context({ spawnVpid: 3 }))).toBe(3);
    expect(() => spawnTarget(context())).toThrow(InvariantError);
  });
});
