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

import { and, assign, enqueueActions, setup } from 'xstate';
import { assert } from '../src/base/result.ts';

export type FsmTaskInput = {
  taskId: string;
  /** Processes at submission: VPIDs 0 … size-1. */
  size: number;
  startTimeoutTicks: number;
  terminateTimeoutTicks: number;
  /** Start attempts (T3) before the task is given up (T5). */
  maxStartAttempts: number;
  /** Terminate commands sent (T8, T17) before the task is given up. */
  maxTerminateAttempts: number;
  /** Started again after a cluster reset (PROTOCOL §10.9): the mapping's restarted flag is set
   *  from the first start, as after a restart (T9). Absent: false. */
  restarted?: boolean;
};

/** What the task does once all its processes have terminated (T16). */
export type AfterTerminate = 'retry' | 'restart' | 'end-normally' | 'end-abnormally';

export type FsmTaskContext = FsmTaskInput & {
  /** Members, ascending: the processes the task consists of now. */
  vpids: number[];
  nextVpid: number;
  /** Members that died abnormally while the task ran; each has had its GSIG_NTF_DIED. */
  deadVpids: number[];
  /** Members that terminated normally while the task ran (no broadcast: not a crash). */
  exitedVpids: number[];
  /** Remaining ticks of Start-TO / Terminate-TO; null when not scheduled. */
  startTimerTicks: number | null;
  terminateTimerTicks: number | null;
  startCount: number;
  terminateCount: number;
  acked: boolean;
  /** x of Killing(x); null outside Killing. */
  killVpid: number | null;
  /** The process of an App-spawn in progress; null outside Spawning. */
  spawnVpid: number | null;
  spawnAllocated: boolean;
  /** Mapping message flag (spec §7): set by a restart (T9). */
  restarted: boolean;
  afterTerminate: AfterTerminate | null;
  /** Why the last start attempt failed (T5). */
  failure: string | null;
  /** Why the task ended (or will end, once terminated). */
  reason: string | null;
};

export type FsmTaskEvent =
  | { type: 'res.allocated' }
  | { type: 'res.removed'; vpids: number[] }
  | { type: 'cm.spawn' }
  | { type: 'cm.terminate' }
  | { type: 'clock.tick' }
  | { type: 'app.restart' }
  | { type: 'app.terminate' }
  | { type: 'app.kill'; vpid: number }
  | { type: 'app.spawn' }
  /** The operator's `trine kill TASK`: accepted in every state that is not final. */
  | { type: 'task.kill' }
  | { type: 'procs.allRunning' }
  | { type: 'procs.anySpawnFailed'; detail?: string }
  | { type: 'procs.allTerminatedNormally' }
  | { type: 'procs.anyTerminatedAbnormally'; vpids: number[] }
  | { type: 'procs.allTerminated' }
  | { type: 'proc.running'; vpid: number }
  | { type: 'proc.spawnFailed'; vpid: number; detail?: string }
  | { type: 'proc.terminated'; vpid: number; normally: boolean };

/** State values: the spec's names (§6.1) camelCased, as FsmProc and FsmAgentProc do; Killing
 *  and Spawning are the states of Fig. 4.21 (T10–T15). The last two are final. */
export type FsmTaskState =
  | 'waitForResource'
  | 'waitForStart'
  | 'starting'
  | 'running'
  | 'killing'
  | 'spawning'
  | 'waitForTerminate'
  | 'terminating'
  | 'terminatedNormally'
  | 'terminatedAbnormally';

export const FSM_TASK_FINAL_STATES: readonly FsmTaskState[] = ['terminatedNormally', 'terminatedAbnormally'];

export type Service = 'start' | 'terminate';
export type SendToProcsParams = { command: 'spawn' | 'terminate' | 'res-allocated'; vpids: number[] };
export type BroadcastParams = {
  signal: 'GSIG_NTF_DIED' | 'GSIG_REP_ACK_KILL' | 'GSIG_REP_ACK_SPAWN' | 'GSIG_REP_SPAWNED';
  arg: number;
};
export type TaskFinishedParams = { outcome: 'normal' | 'abnormal'; reason: string };

type Ctx = FsmTaskContext;
type Ev = FsmTaskEvent;
type EffectAction =
  | { type: 'sendToProcs'; params: SendToProcsParams }
  | { type: 'broadcast'; params: BroadcastParams }
  | { type: 'cancelResources'; params: { vpids: number[] } };

/** `enqueueActions` typed with the effects it may enqueue (inference cannot see them). */
type CollectEffects = Parameters<typeof enqueueActions<Ctx, Ev, undefined, Ev, never, EffectAction, never, never>>[0];
const enqueueEffects = (collect: CollectEffects) =>
  enqueueActions<Ctx, Ev, undefined, Ev, never, EffectAction, never, never>(collect);

const KILLED_BY_OPERATOR = 'killed by operator';
const BY_APPLICATION = "terminated at the application's request";
/** The App-spawn failed: its ack if not yet sent, other deaths of the same event, its answer. */
const SPAWN_FAILED: Array<'ackSpawnOnce' | 'recordDeaths' | 'failSpawn'> = [
  'ackSpawnOnce',
  'recordDeaths',
  'failSpawn',
];
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const sorted = (xs: number[]): number[] => [...new Set(xs)].sort((a, b) => a - b);

/** The processes an event reports dead, and whether they died abnormally. */
function deathsOf(event: Ev): { vpids: number[]; abnormal: boolean } {
  switch (event.type) {
    case 'procs.anyTerminatedAbnormally':
    case 'res.removed': // a lost node takes its processes with it (spec §6.2 [INTERP])
      return { vpids: event.vpids, abnormal: true };
    case 'proc.terminated':
      return { vpids: [event.vpid], abnormal: !event.normally };
    default:
      return { vpids: [], abnormal: false };
  }
}

const hasEnded = (context: Ctx, v: number) => context.deadVpids.includes(v) || context.exitedVpids.includes(v);

/** Members newly ended by `event`, excluding the process a kill/spawn request is about. */
function newlyEnded(context: Ctx, event: Ev, abnormal: boolean): number[] {
  const deaths = deathsOf(event);
  if (deaths.abnormal !== abnormal) return [];
  const pending = context.killVpid ?? context.spawnVpid;
  return sorted(deaths.vpids.filter((v) => context.vpids.includes(v) && !hasEnded(context, v) && v !== pending));
}
const newCrashes = (context: Ctx, event: Ev) => newlyEnded(context, event, true);
const newExits = (context: Ctx, event: Ev) => newlyEnded(context, event, false);

/** The process of the App-spawn in progress (only called in Spawning). */
function spawnTarget(context: Ctx): number {
  assert(context.spawnVpid !== null, 'no App-spawn in progress');
  return context.spawnVpid;
}

const touchesMembers = (context: Ctx, vpids: number[]) => vpids.some((v) => context.vpids.includes(v));
const failureDetail = (event: Ev, context: Ctx): string => {
  switch (event.type) {
    case 'procs.anySpawnFailed':
    case 'proc.spawnFailed': {
      // The agent's text usually says "spawn failed: ENOENT …" itself (src/io/spawner.ts).
      const detail = event.detail ?? 'no detail from the agent';
      return detail.startsWith('spawn failed') ? detail : `spawn failed: ${detail}`;
    }
    case 'clock.tick':
      return `start timed out after ${context.startTimeoutTicks} ticks`;
    case 'res.removed':
      return `node lost while starting (VPIDs ${event.vpids.join(', ')})`;
    default:
      return `process terminated abnormally while starting (VPIDs ${deathsOf(event).vpids.join(', ')})`;
  }
};

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

    /** T7, T11, T14: GSIG_NTF_DIED once per crashed member; while a kill/spawn is in progress
     *  its ack goes first, once (AckedFlag; spec §9.1 item 68). Normal exits are recorded only. */
    recordDeaths: enqueueEffects(({ context, event, enqueue }) => {
      const exited = newExits(context, event);
      if (exited.length > 0) enqueue.assign({ exitedVpids: sorted([...context.exitedVpids, ...exited]) });
      const crashed = newCrashes(context, event);
      if (crashed.length === 0) return;
      if (!context.acked && context.killVpid !== null) {
        enqueue({ type: 'broadcast', params: { signal: 'GSIG_REP_ACK_KILL', arg: context.killVpid } });
        enqueue.assign({ acked: true });
      } else if (!context.acked && context.spawnVpid !== null) {
        enqueue({ type: 'broadcast', params: { signal: 'GSIG_REP_ACK_SPAWN', arg: context.spawnVpid } });
        enqueue.assign({ acked: true });
      }
      for (const v of crashed) enqueue({ type: 'broadcast', params: { signal: 'GSIG_NTF_DIED', arg: v } });
      enqueue.assign({ deadVpids: sorted([...context.deadVpids, ...crashed]) });
    }),

    /** T5: terminate everything, then retry while Start-ctr < limit, else give up. */
    failStart: enqueueEffects(({ context, event, enqueue }) => {
      const detail = failureDetail(event, context);
      if (context.startCount < context.maxStartAttempts) {
        enqueue.assign({ afterTerminate: 'retry', failure: detail });
      } else {
        const reason = `${detail} (gave up after ${context.startCount} start attempts)`;
        enqueue.assign({ afterTerminate: 'end-abnormally', failure: detail, reason });
      }
    }),

    /** The ack of an App-spawn whose spawn failed, if not yet sent: so the application learns
     *  the VPID of the GSIG_NTF_DIED that answers it (spec §9.1 item 68). */
    ackSpawnOnce: enqueueEffects(({ context, enqueue }) => {
      if (context.acked || context.spawnVpid === null) return;
      enqueue({ type: 'broadcast', params: { signal: 'GSIG_REP_ACK_SPAWN', arg: context.spawnVpid } });
      enqueue.assign({ acked: true });
    }),

    /** The App-spawn of T13 failed: a hung or unconnected process is terminated, an unplaced one
     *  dropped, and GSIG_NTF_DIED(s) answers the request. [Choice, T13–T15] No retry: the
     *  application asked once and may ask again. */
    failSpawn: enqueueEffects(({ context, event, enqueue }) => {
      const s = spawnTarget(context);
      if (!context.spawnAllocated) enqueue({ type: 'cancelResources', params: { vpids: [s] } });
      else if (!deathsOf(event).vpids.includes(s)) {
        enqueue({ type: 'sendToProcs', params: { command: 'terminate', vpids: [s] } });
      }
      enqueue({ type: 'broadcast', params: { signal: 'GSIG_NTF_DIED', arg: s } });
      enqueue.assign({ vpids: context.vpids.filter((v) => v !== s) });
    }),

    /** T12: the reply to the kill (spec §4.3: KILL → NTF_DIED(x)); x leaves the task. */
    completeKill: enqueueEffects(({ context, enqueue }) => {
      const x = context.killVpid;
      assert(x !== null, 'completeKill outside Killing');
      enqueue({ type: 'broadcast', params: { signal: 'GSIG_NTF_DIED', arg: x } });
      enqueue.assign({ vpids: context.vpids.filter((v) => v !== x), killVpid: null, acked: false });
    }),

    /** A process of an App-spawn that was never placed is dropped with its request. */
    dropUnplacedSpawn: enqueueEffects(({ context, enqueue }) => {
      const s = context.spawnVpid;
      if (s === null || context.spawnAllocated) return;
      enqueue({ type: 'cancelResources', params: { vpids: [s] } });
      enqueue.assign({ vpids: context.vpids.filter((v) => v !== s) });
    }),

    /** T8/T9 "on Terminate", and T17: send Terminate to all FsmProc, (re)schedule
     *  Terminate-TO, increment Terminate-ctr. */
    sendTerminateAll: enqueueEffects(({ context, enqueue }) => {
      enqueue({ type: 'sendToProcs', params: { command: 'terminate', vpids: context.vpids } });
      enqueue.assign({
        terminateTimerTicks: context.terminateTimeoutTicks,
        terminateCount: context.terminateCount + 1,
      });
    }),

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
      terminateCount: 0,
      afterTerminate: null,
      acked: false,
    }),
  },
  guards: {
    startTimerExpires: ({ context }) => context.startTimerTicks !== null && context.startTimerTicks <= 1,
    terminateTimerExpires: ({ context }) =>
      context.terminateTimerTicks !== null && context.terminateTimerTicks <= 1,
    terminateAttemptsRemain: ({ context }) => context.terminateCount < context.maxTerminateAttempts,
    touchesMembers: ({ context, event }) => touchesMembers(context, deathsOf(event).vpids),
    crashedMember: ({ context, event }) => touchesMembers(context, deathsOf(event).vpids) && deathsOf(event).abnormal,
    noCrashes: ({ context }) => context.deadVpids.length === 0,
    isLiveMember: ({ context, event }) =>
      event.type === 'app.kill' && context.vpids.includes(event.vpid) && !hasEnded(context, event.vpid),
    killTargetDied: ({ context, event }) =>
      context.killVpid !== null && deathsOf(event).vpids.includes(context.killVpid),
    spawnTargetDied: ({ context, event }) =>
      context.spawnVpid !== null && deathsOf(event).vpids.includes(context.spawnVpid),
    isSpawnTarget: ({ context, event }) =>
      (event.type === 'proc.running' || event.type === 'proc.spawnFailed') && event.vpid === context.spawnVpid,
    spawnFailedMember: ({ context, event }) =>
      event.type === 'proc.spawnFailed' && context.vpids.includes(event.vpid),
    spawnNotAllocated: ({ context }) => !context.spawnAllocated,
    afterIsRetry: ({ context }) => context.afterTerminate === 'retry',
    afterIsRestart: ({ context }) => context.afterTerminate === 'restart',
    afterIsEndNormally: ({ context }) => context.afterTerminate === 'end-normally',
  },
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
      actions: assign({ afterTerminate: 'end-abnormally', reason: KILLED_BY_OPERATOR }),
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
        'task.kill': { target: 'terminatedAbnormally', actions: assign({ reason: KILLED_BY_OPERATOR }) },
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
          actions: [{ type: 'cancelService', params: { service: 'start' } }, assign({ reason: KILLED_BY_OPERATOR })],
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
          actions: assign({ afterTerminate: 'end-abnormally', reason: KILLED_BY_OPERATOR }),
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
              reason: ({ context }) => `processes terminated abnormally (VPIDs ${context.deadVpids.join(', ')})`,
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
          actions: ['dropUnplacedSpawn', assign({ afterTerminate: 'end-abnormally', reason: KILLED_BY_OPERATOR })],
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
        'task.kill': { actions: assign({ afterTerminate: 'end-abnormally', reason: KILLED_BY_OPERATOR }) },
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
        'task.kill': { actions: assign({ afterTerminate: 'end-abnormally', reason: KILLED_BY_OPERATOR }) },
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
