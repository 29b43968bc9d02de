// FsmTask's types (spec §6.1, Table 4.4): its input, context, events, state values and the
// params of its effects. The machine and its contract with the manager are in fsm-task.ts.

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
  /** Members killed on the application's request (KILL, T10–T12): no longer members, named in
   *  the task's reason when it ends abnormally (issue 19). */
  killedVpids: number[];
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
  /** The operator's `trine kill TASK`: accepted in every state that is not final. `reason`: the
   *  manager's own kill says why (PROTOCOL §11.2); absent, "killed by operator". */
  | { type: 'task.kill'; reason?: string }
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
