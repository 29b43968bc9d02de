// FsmTask: the cluster manager's state machine for one task (spec §6, §6.1, Table 4.4,
// Figs 4.20–4.21; rows T1–T17 cited below). It owns allocation, gang-scheduled start and
// terminate, Start-TO / Terminate-TO with their retry counters, the application's kill, spawn,
// terminate and restart requests, and the AckedFlag rule (spec §9.1 items 66–69).
//
// Pure: the manager advances it with xstate's `transition()` (via fsm/plain-data.ts `step()`)
// inside its replicated step and executes the returned named actions itself. There are no xstate
// delays: a timer is a count of remaining `clock.tick` events, which the manager feeds in RSN
// order (DESIGN.md §3, STYLE.md 1 and 4). The context is plain JSON data.
//
// The contract with the manager (what each event means, what each action asks of it):
// - Events `proc.*` are fed for each FsmProc that changes state; the `procs.*` aggregates are
//   computed after that over the task's members (`context.vpids`) and may be fed again and again
//   (each is idempotent here). `procs.allRunning` means every member has reached Running (a member
//   that has since terminated normally counts: it did run). Feed `procs.allTerminatedNormally`
//   when every member terminated normally, else `procs.allTerminated` once all have terminated.
// - `requestResources {vpids}`: (re)create a fresh FsmProc for each VPID and allocate it a node;
//   answer with `res.allocated` once all are placed. `cancelResources {vpids}`: drop that request.
// - `enqueueService {service}`: queue the task for the gang-scheduled start / terminate slot;
//   answer with `cm.spawn` / `cm.terminate` on its turn. `serviceDone` frees the slot;
//   `cancelService` removes the task from the queue without a turn.
// - `sendToProcs {command, vpids}`: command those FsmProcs. A spawn carries `context.restarted`
//   in the mapping message (spec §7).
// - `broadcast {signal, arg}`: a Ghidrah signal to the task's processes; `arg` is a VPID. For
//   GSIG_REP_SPAWNED the manager adds the node address of FsmProc(arg) (spec §4.3).
// - `taskFinished {outcome, reason}`: the task reached a final state; release what it holds.
//
// Its types are in fsm-task-types.ts; the guards, the effect actions computed from the context
// and the helpers they share are in fsm-task-rules.ts.

import { and, assign, setup } from 'xstate';
import { assert } from '../src/base/result.ts';
import {
  ackSpawnOnce, BY_APPLICATION, completeKill, dropUnplacedSpawn, failSpawn, failStart, killReason, range, recordDeaths, sendTerminateAll,
  SPAWN_FAILED, spawnTarget, taskGuards,
} from './fsm-task-rules.ts';
import type {
  BroadcastParams, FsmTaskContext, FsmTaskEvent, FsmTaskInput, SendToProcsParams, Service, TaskFinishedParams,
} from './fsm-task-types.ts';

/** The effects: no-ops here; `transition()` returns them with their params for the manager. */
const withEffects = setup({
  types: {
    context: {} as FsmTaskContext,
    events: {} as FsmTaskEvent,
    input: {} as FsmTaskInput,
  },
  actions: {
    sendToProcs: (_, _params: SendToProcsParams) => {},
    broadcast: (_, _params: BroadcastParams) => {},
    requestResources: (_, _params: { vpids: number[] }) => {},
    cancelResources: (_, _params: { vpids: number[] }) => {},
    enqueueService: (_, _params: { service: Service }) => {},
    cancelService: (_, _params: { service: Service }) => {},
    serviceDone: (_, _params: { service: Service }) => {},
    taskFinished: (_, _params: TaskFinishedParams) => {},
  },
});

const taskSetup = withEffects.extend({
  actions: {
    // Context updates and effect lists computed from the context (only effects are returned).
    scheduleStartTimer: assign({ startTimerTicks: ({ context }) => context.startTimeoutTicks }),
    dismissStartTimer: assign({ startTimerTicks: null }),
    tickStartTimer: assign({ startTimerTicks: ({ context }) => (context.startTimerTicks ?? 1) - 1 }),
    dismissTerminateTimer: assign({ terminateTimerTicks: null }),
    tickTerminateTimer: assign({
      terminateTimerTicks: ({ context }) => (context.terminateTimerTicks ?? 1) - 1,
    }),
    recordDeaths, failStart, ackSpawnOnce, failSpawn, completeKill, dropUnplacedSpawn, sendTerminateAll,
    /** T16 → restart (T9): the task as submitted, with the mapping's restarted flag set. */
    resetForRestart: assign(({ context }) => ({
      vpids: range(context.size),
      nextVpid: context.size,
      restarted: true,
      startCount: 0,
    })),
    /** Leaving Killing(x) or Spawning: no kill or spawn request is in progress any more. */
    clearRequest: assign({ killVpid: null, spawnVpid: null, spawnAllocated: false }),
    resetAfterTerminate: assign({
      deadVpids: [],
      exitedVpids: [],
      killedVpids: [],
      terminateCount: 0,
      afterTerminate: null,
      acked: false,
    }),
  },
  guards: taskGuards,
});

/** T8, T9 and the operator's kill, the same from Running and from Killing(x) (which they
 *  supersede); Spawning has its own variant, which also drops an unplaced process. */
const endRequests = taskSetup.createStateConfig({
  on: {
    // T8. [Choice] Ending at the application's own request is a normal end.
    'app.terminate': {
      target: 'waitForTerminate',
      actions: assign({ afterTerminate: 'end-normally', reason: BY_APPLICATION }),
    },
    // T9
    'app.restart': { target: 'waitForTerminate', actions: assign({ afterTerminate: 'restart' }) },
    'task.kill': {
      target: 'waitForTerminate',
      actions: assign({ afterTerminate: 'end-abnormally', reason: killReason }),
    },
  },
}).on;

export const fsmTask = taskSetup.createMachine({
  id: 'fsmTask',
  // T1: a submitted task starts by waiting for resources.
  initial: 'waitForResource',
  context: ({ input }) => {
    for (const [name, n] of Object.entries(input)) {
      if (name === 'taskId' || name === 'restarted') continue;
      assert(Number.isInteger(n) && (n as number) >= 1, `fsmTask input ${name}: ${String(n)}`);
    }
    return {
      ...input,
      vpids: range(input.size),
      nextVpid: input.size,
      deadVpids: [],
      exitedVpids: [],
      killedVpids: [],
      startTimerTicks: null,
      terminateTimerTicks: null,
      startCount: 0,
      terminateCount: 0,
      acked: false,
      killVpid: null,
      spawnVpid: null,
      spawnAllocated: false,
      restarted: input.restarted === true,
      afterTerminate: null,
      failure: null,
      reason: null,
    };
  },
  states: {
    waitForResource: {
      entry: { type: 'requestResources', params: ({ context }) => ({ vpids: context.vpids }) },
      on: {
        // T2
        'res.allocated': {
          target: 'waitForStart',
          actions: { type: 'sendToProcs', params: ({ context }) => ({ command: 'res-allocated', vpids: context.vpids }) },
        },
        'task.kill': { target: 'terminatedAbnormally', actions: assign({ reason: killReason }) },
      },
    },
    waitForStart: {
      // Gang scheduling (spec §6): wait in the service queue for the task's turn to start.
      entry: { type: 'enqueueService', params: { service: 'start' } },
      on: {
        // T3 (its actions are Starting's entry, so a retry repeats them exactly).
        'cm.spawn': { target: 'starting' },
        // [Choice, T2] A node lost before the spawn: give the turn back and allocate again.
        'res.removed': {
          guard: 'touchesMembers',
          target: 'waitForResource',
          actions: { type: 'cancelService', params: { service: 'start' } },
        },
        'task.kill': {
          target: 'terminatedAbnormally',
          actions: [{ type: 'cancelService', params: { service: 'start' } }, assign({ reason: killReason })],
        },
      },
    },
    starting: {
      entry: [
        { type: 'sendToProcs', params: ({ context }) => ({ command: 'spawn', vpids: context.vpids }) },
        'scheduleStartTimer',
        assign({ startCount: ({ context }) => context.startCount + 1 }),
      ],
      exit: ['dismissStartTimer', { type: 'serviceDone', params: { service: 'start' } }],
      on: {
        // T4
        'procs.allRunning': { target: 'running', actions: assign({ startCount: 0, failure: null }) },
        // [Choice, T4+T6] A short task may finish before the last process is seen running.
        'procs.allTerminatedNormally': { target: 'terminatedNormally' },
        // T5: spawn failure, crash or lost node while starting, or Start-TO.
        'procs.anySpawnFailed': { target: 'waitForTerminate', actions: 'failStart' },
        'proc.spawnFailed': { guard: 'spawnFailedMember', target: 'waitForTerminate', actions: 'failStart' },
        'procs.anyTerminatedAbnormally': { guard: 'crashedMember', target: 'waitForTerminate', actions: 'failStart' },
        'proc.terminated': { guard: 'crashedMember', target: 'waitForTerminate', actions: 'failStart' },
        'res.removed': { guard: 'touchesMembers', target: 'waitForTerminate', actions: 'failStart' },
        'clock.tick': [
          { guard: 'startTimerExpires', target: 'waitForTerminate', actions: 'failStart' },
          { actions: 'tickStartTimer' },
        ],
        'task.kill': {
          target: 'waitForTerminate',
          actions: assign({ afterTerminate: 'end-abnormally', reason: killReason }),
        },
      },
    },
    running: {
      entry: 'clearRequest',
      on: {
        // T6
        'procs.allTerminatedNormally': { target: 'terminatedNormally' },
        // [Choice, T6/T7] All members ended, some abnormally: the task ends abnormally even if
        // the application recovered, so an exit status never hides a crash.
        'procs.allTerminated': [
          { guard: 'noCrashes', target: 'terminatedNormally' },
          {
            target: 'terminatedAbnormally',
            actions: assign({
              reason: ({ context }) => `processes terminated abnormally (VPIDs ${context.deadVpids.join(', ')})${context.killedVpids.length === 0 ? '' : `; killed on the application's request: VPIDs ${context.killedVpids.join(', ')}`}`,
            }),
          },
        ],
        // T7: with the new services the task stays Running and the application recovers.
        'procs.anyTerminatedAbnormally': { actions: 'recordDeaths' },
        'proc.terminated': { actions: 'recordDeaths' },
        'res.removed': { actions: 'recordDeaths' },
        ...endRequests,
        // T10. [Choice] A kill of a VPID that is not a live member is ignored.
        'app.kill': {
          guard: 'isLiveMember',
          target: 'killing',
          actions: [
            assign({ acked: false, killVpid: ({ event }) => event.vpid }),
            { type: 'sendToProcs', params: ({ event }) => ({ command: 'terminate', vpids: [event.vpid] }) },
          ],
        },
        // T13: a new member with a fresh VPID; Start-TO covers allocation and spawn.
        'app.spawn': {
          target: 'spawning',
          actions: [
            assign(({ context }) => ({
              acked: false,
              spawnVpid: context.nextVpid,
              spawnAllocated: false,
              vpids: [...context.vpids, context.nextVpid],
              nextVpid: context.nextVpid + 1,
            })),
            'scheduleStartTimer',
            { type: 'requestResources', params: ({ context }) => ({ vpids: [context.nextVpid - 1] }) },
          ],
        },
      },
    },
    killing: {
      on: {
        // T12 (first the reply, then any other deaths: no ack is then needed), and T11.
        'proc.terminated': [
          { guard: 'killTargetDied', target: 'running', actions: ['completeKill', 'recordDeaths'] },
          { actions: 'recordDeaths' },
        ],
        'procs.anyTerminatedAbnormally': [
          { guard: 'killTargetDied', target: 'running', actions: ['completeKill', 'recordDeaths'] },
          { actions: 'recordDeaths' },
        ],
        'res.removed': [
          { guard: 'killTargetDied', target: 'running', actions: ['completeKill', 'recordDeaths'] },
          { actions: 'recordDeaths' },
        ],
        // [Choice, T8/T9] Ending or restarting the task supersedes the kill in progress.
        ...endRequests,
      },
    },
    spawning: {
      // Exit actions run before a transition's own actions, so the request (spawnVpid) is
      // cleared on entering the next state instead (`clearRequest`).
      exit: 'dismissStartTimer',
      on: {
        // T13 (continued): the new process's node is allocated; command it.
        'res.allocated': {
          guard: 'spawnNotAllocated',
          actions: [
            assign({ spawnAllocated: true }),
            { type: 'sendToProcs', params: ({ context }) => ({ command: 'res-allocated', vpids: [spawnTarget(context)] }) },
            { type: 'sendToProcs', params: ({ context }) => ({ command: 'spawn', vpids: [spawnTarget(context)] }) },
          ],
        },
        // T15
        'proc.running': {
          guard: 'isSpawnTarget',
          target: 'running',
          actions: {
            type: 'broadcast',
            params: ({ context }) => ({ signal: 'GSIG_REP_SPAWNED', arg: spawnTarget(context) }),
          },
        },
        // T14, and the spawn's own failure (spawn failed, died before running, Start-TO).
        'proc.spawnFailed': { guard: 'isSpawnTarget', target: 'running', actions: SPAWN_FAILED },
        'procs.anySpawnFailed': { target: 'running', actions: SPAWN_FAILED },
        'proc.terminated': [
          { guard: 'spawnTargetDied', target: 'running', actions: SPAWN_FAILED },
          { actions: 'recordDeaths' },
        ],
        'procs.anyTerminatedAbnormally': [
          { guard: 'spawnTargetDied', target: 'running', actions: SPAWN_FAILED },
          { actions: 'recordDeaths' },
        ],
        'res.removed': [
          { guard: 'spawnTargetDied', target: 'running', actions: SPAWN_FAILED },
          { actions: 'recordDeaths' },
        ],
        'clock.tick': [
          { guard: 'startTimerExpires', target: 'running', actions: SPAWN_FAILED },
          { actions: 'tickStartTimer' },
        ],
        // [Choice, T8/T9] Ending the task supersedes the spawn; an unplaced process is dropped.
        'app.terminate': {
          target: 'waitForTerminate',
          actions: ['dropUnplacedSpawn', assign({ afterTerminate: 'end-normally', reason: BY_APPLICATION })],
        },
        'app.restart': {
          target: 'waitForTerminate',
          actions: ['dropUnplacedSpawn', assign({ afterTerminate: 'restart' })],
        },
        'task.kill': {
          target: 'waitForTerminate',
          actions: ['dropUnplacedSpawn', assign({ afterTerminate: 'end-abnormally', reason: killReason })],
        },
      },
    },
    waitForTerminate: {
      // Gang scheduling (spec §6): terminating is a task-level service too.
      entry: ['clearRequest', { type: 'enqueueService', params: { service: 'terminate' } }],
      on: {
        'cm.terminate': { target: 'terminating' },
        // [Choice, T16] Everything ended on its own while queued: no terminate turn needed.
        'procs.allTerminated': {
          target: 'routeAfterTerminate',
          actions: { type: 'cancelService', params: { service: 'terminate' } },
        },
        'procs.allTerminatedNormally': {
          target: 'routeAfterTerminate',
          actions: { type: 'cancelService', params: { service: 'terminate' } },
        },
        'task.kill': { actions: assign({ afterTerminate: 'end-abnormally', reason: killReason }) },
      },
    },
    terminating: {
      // T8/T9 "on Terminate": send Terminate to all FsmProc, Schedule Terminate-TO, Increment ctr.
      entry: 'sendTerminateAll',
      exit: ['dismissTerminateTimer', { type: 'serviceDone', params: { service: 'terminate' } }],
      on: {
        // T16
        'procs.allTerminated': { target: 'routeAfterTerminate' },
        'procs.allTerminatedNormally': { target: 'routeAfterTerminate' },
        'clock.tick': [
          // T17: re-send Terminate while Terminate-ctr < limit.
          { guard: and(['terminateTimerExpires', 'terminateAttemptsRemain']), actions: 'sendTerminateAll' },
          {
            guard: 'terminateTimerExpires',
            target: 'terminatedAbnormally',
            actions: assign({
              reason: ({ context }) => {
                const timedOut = `terminate timed out after ${context.terminateCount} attempts`;
                return context.reason === null ? timedOut : `${context.reason}; ${timedOut}`;
              },
            }),
          },
          { actions: 'tickTerminateTimer' },
        ],
        'task.kill': { actions: assign({ afterTerminate: 'end-abnormally', reason: killReason }) },
      },
    },
    // T16: route on why the task was terminated. A transient state: it never rests here.
    routeAfterTerminate: {
      always: [
        { guard: 'afterIsRetry', target: 'waitForResource', actions: 'resetAfterTerminate' },
        { guard: 'afterIsRestart', target: 'waitForResource', actions: ['resetAfterTerminate', 'resetForRestart'] },
        { guard: 'afterIsEndNormally', target: 'terminatedNormally' },
        { target: 'terminatedAbnormally' },
      ],
    },
    terminatedNormally: {
      type: 'final',
      entry: {
        type: 'taskFinished',
        params: ({ context }) => ({
          outcome: 'normal',
          reason: context.reason ?? 'all processes terminated normally',
        }),
      },
    },
    terminatedAbnormally: {
      type: 'final',
      entry: {
        type: 'taskFinished',
        params: ({ context }) => ({ outcome: 'abnormal', reason: context.reason ?? 'terminated abnormally' }),
      },
    },
  },
});
