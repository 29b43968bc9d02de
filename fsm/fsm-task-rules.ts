// FsmTask's rules (spec §6.1, Table 4.4; spec §9.1 items 66–69): what an event says about the
// task's members, why a start failed, the effect actions computed from the context (deaths and
// their GSIG_NTF_DIED, a failed start or App-spawn, a kill's reply, terminating all) and the
// guards. Pure functions of the context and event; the machine (fsm-task.ts) names them.
import { enqueueActions } from 'xstate';
import { assert } from '../src/base/result.ts';
import type { BroadcastParams, FsmTaskContext, FsmTaskEvent, SendToProcsParams } from './fsm-task-types.ts';

type Ctx = FsmTaskContext;
type Ev = FsmTaskEvent;
type EffectAction =
  | { type: 'sendToProcs'; params: SendToProcsParams }
  | { type: 'broadcast'; params: BroadcastParams }
  | { type: 'cancelResources'; params: { vpids: number[] } };

/** `enqueueActions` typed with the effects it may enqueue (inference cannot see them). */
type CollectEffects = Parameters<typeof enqueueActions<Ctx, Ev, undefined, Ev, never, EffectAction, never, never>>[0];
export const enqueueEffects = (collect: CollectEffects) =>
  enqueueActions<Ctx, Ev, undefined, Ev, never, EffectAction, never, never>(collect);

export const KILLED_BY_OPERATOR = 'killed by operator';
/** Why a `task.kill` ends the task: the operator's kill, or the manager's own reason (a
 *  rollback task's rank replaced too often, PROTOCOL §11.2). */
export const killReason = ({ event }: { event: Ev }): string =>
  (event.type === 'task.kill' && event.reason !== undefined ? event.reason : KILLED_BY_OPERATOR);
export const BY_APPLICATION = "terminated at the application's request";
/** The App-spawn failed: its ack if not yet sent, other deaths of the same event, its answer. */
export const SPAWN_FAILED: Array<'ackSpawnOnce' | 'recordDeaths' | 'failSpawn'> = [
  'ackSpawnOnce',
  'recordDeaths',
  'failSpawn',
];
export const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
export const sorted = (xs: number[]): number[] => [...new Set(xs)].sort((a, b) => a - b);

/** The processes an event reports dead, and whether they died abnormally. */
export function deathsOf(event: Ev): { vpids: number[]; abnormal: boolean } {
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

export const hasEnded = (context: Ctx, v: number) => context.deadVpids.includes(v) || context.exitedVpids.includes(v);

/** Members newly ended by `event`, excluding the process a kill/spawn request is about. */
export function newlyEnded(context: Ctx, event: Ev, abnormal: boolean): number[] {
  const deaths = deathsOf(event);
  if (deaths.abnormal !== abnormal) return [];
  const pending = context.killVpid ?? context.spawnVpid;
  return sorted(deaths.vpids.filter((v) => context.vpids.includes(v) && !hasEnded(context, v) && v !== pending));
}
export const newCrashes = (context: Ctx, event: Ev) => newlyEnded(context, event, true);
export const newExits = (context: Ctx, event: Ev) => newlyEnded(context, event, false);

/** The process of the App-spawn in progress (only called in Spawning). */
export function spawnTarget(context: Ctx): number {
  assert(context.spawnVpid !== null, 'no App-spawn in progress');
  return context.spawnVpid;
}

export const touchesMembers = (context: Ctx, vpids: number[]) => vpids.some((v) => context.vpids.includes(v));
export const failureDetail = (event: Ev, context: Ctx): string => {
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

type GuardArgs = { context: Ctx; event: Ev };

/** T7, T11, T14: GSIG_NTF_DIED once per crashed member; while a kill/spawn is in progress
 *  its ack goes first, once (AckedFlag; spec §9.1 item 68). Normal exits are recorded only. */
export const recordDeaths = enqueueEffects(({ context, event, enqueue }) => {
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
});

/** T5: terminate everything, then retry while Start-ctr < limit, else give up. */
export const failStart = enqueueEffects(({ context, event, enqueue }) => {
  const detail = failureDetail(event, context);
  if (context.startCount < context.maxStartAttempts) {
    enqueue.assign({ afterTerminate: 'retry', failure: detail });
  } else {
    const reason = `${detail} (gave up after ${context.startCount} start attempts)`;
    enqueue.assign({ afterTerminate: 'end-abnormally', failure: detail, reason });
  }
});

/** The ack of an App-spawn whose spawn failed, if not yet sent: so the application learns
 *  the VPID of the GSIG_NTF_DIED that answers it (spec §9.1 item 68). */
export const ackSpawnOnce = enqueueEffects(({ context, enqueue }) => {
  if (context.acked || context.spawnVpid === null) return;
  enqueue({ type: 'broadcast', params: { signal: 'GSIG_REP_ACK_SPAWN', arg: context.spawnVpid } });
  enqueue.assign({ acked: true });
});

/** The App-spawn of T13 failed: a hung or unconnected process is terminated, an unplaced one
 *  dropped, and GSIG_NTF_DIED(s) answers the request. [Choice, T13–T15] No retry: the
 *  application asked once and may ask again. */
export const failSpawn = enqueueEffects(({ context, event, enqueue }) => {
  const s = spawnTarget(context);
  if (!context.spawnAllocated) enqueue({ type: 'cancelResources', params: { vpids: [s] } });
  else if (!deathsOf(event).vpids.includes(s)) {
    enqueue({ type: 'sendToProcs', params: { command: 'terminate', vpids: [s] } });
  }
  enqueue({ type: 'broadcast', params: { signal: 'GSIG_NTF_DIED', arg: s } });
  enqueue.assign({ vpids: context.vpids.filter((v) => v !== s) });
});

/** T12: the reply to the kill (spec §4.3: KILL → NTF_DIED(x)); x leaves the task. */
export const completeKill = enqueueEffects(({ context, enqueue }) => {
  const x = context.killVpid;
  assert(x !== null, 'completeKill outside Killing');
  enqueue({ type: 'broadcast', params: { signal: 'GSIG_NTF_DIED', arg: x } });
  enqueue.assign({ vpids: context.vpids.filter((v) => v !== x), killedVpids: sorted([...context.killedVpids, x]), killVpid: null, acked: false });
});

/** A process of an App-spawn that was never placed is dropped with its request. */
export const dropUnplacedSpawn = enqueueEffects(({ context, enqueue }) => {
  const s = context.spawnVpid;
  if (s === null || context.spawnAllocated) return;
  enqueue({ type: 'cancelResources', params: { vpids: [s] } });
  enqueue.assign({ vpids: context.vpids.filter((v) => v !== s) });
});

/** T8/T9 "on Terminate", and T17: send Terminate to all FsmProc, (re)schedule
 *  Terminate-TO, increment Terminate-ctr. */
export const sendTerminateAll = enqueueEffects(({ context, enqueue }) => {
  enqueue({ type: 'sendToProcs', params: { command: 'terminate', vpids: context.vpids } });
  enqueue.assign({
    terminateTimerTicks: context.terminateTimeoutTicks,
    terminateCount: context.terminateCount + 1,
  });
});

/** The machine's guards (named in its transitions). */
export const taskGuards = {
  startTimerExpires: ({ context }: GuardArgs) => context.startTimerTicks !== null && context.startTimerTicks <= 1,
  terminateTimerExpires: ({ context }: GuardArgs) =>
    context.terminateTimerTicks !== null && context.terminateTimerTicks <= 1,
  terminateAttemptsRemain: ({ context }: GuardArgs) => context.terminateCount < context.maxTerminateAttempts,
  touchesMembers: ({ context, event }: GuardArgs) => touchesMembers(context, deathsOf(event).vpids),
  crashedMember: ({ context, event }: GuardArgs) => touchesMembers(context, deathsOf(event).vpids) && deathsOf(event).abnormal,
  noCrashes: ({ context }: GuardArgs) => context.deadVpids.length === 0,
  isLiveMember: ({ context, event }: GuardArgs) =>
    event.type === 'app.kill' && context.vpids.includes(event.vpid) && !hasEnded(context, event.vpid),
  killTargetDied: ({ context, event }: GuardArgs) =>
    context.killVpid !== null && deathsOf(event).vpids.includes(context.killVpid),
  spawnTargetDied: ({ context, event }: GuardArgs) =>
    context.spawnVpid !== null && deathsOf(event).vpids.includes(context.spawnVpid),
  isSpawnTarget: ({ context, event }: GuardArgs) =>
    (event.type === 'proc.running' || event.type === 'proc.spawnFailed') && event.vpid === context.spawnVpid,
  spawnFailedMember: ({ context, event }: GuardArgs) =>
    event.type === 'proc.spawnFailed' && context.vpids.includes(event.vpid),
  spawnNotAllocated: ({ context }: GuardArgs) => !context.spawnAllocated,
  afterIsRetry: ({ context }: GuardArgs) => context.afterTerminate === 'retry',
  afterIsRestart: ({ context }: GuardArgs) => context.afterTerminate === 'restart',
  afterIsEndNormally: ({ context }: GuardArgs) => context.afterTerminate === 'end-normally',
};
