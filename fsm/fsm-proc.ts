// FsmProc: the cluster manager's state machine for one task process (spec §6.2, Table 4.5,
// Fig. 4.22 — diagram lost, states reconstructed). One instance per VPID, part of the replicated
// manager state: the manager advances it with xstate's pure `transition()` (fsm/plain-data.ts)
// inside the replicated step and executes the named actions it returns. Nothing here performs an
// effect; context is plain JSON-able data (STYLE.md 1, 4; DESIGN.md §3).
//
// Inputs: commands from FsmTask (`res.allocated`, `task.spawn`, `task.terminate`), the CM event
// `res.removed` (this process's node was lost), and the Agent's reports (`agent.*`, each already
// accepted by the manager's ordered group layer from the Agent on this process's node).
// Outputs: `commandAgent` — the manager turns it into a group message to the Agent on `node`,
// which executes it only on 2 matching authenticated copies (spec §6.2) — and `reportToTask`,
// emitted once on every state change so FsmTask can evaluate "Any/All FsmProc in st".
//
// Transitions (P-numbers are cited by test/unit/fsm/fsm-proc.test.ts):
//   P1  Wait-for-resource --res.allocated-->            Allocated
//   P2  Allocated         --task.spawn-->               Spawning          (commandAgent spawn)
//   P3  Spawning          --agent.spawnSucceeded-->     Running
//   P4  Spawning          --agent.spawnFailed-->        Spawn-failed
//   P5  Running           --task.terminate-->           Terminating       (commandAgent terminate)
//   P6  Terminating       --agent.terminatedNormally--> Terminated-normally
//   P7  Terminating       --agent.terminatedAbnormally-> Terminated-abnormally
//   P8  Running           --agent.terminatedNormally--> Terminated-normally
//   P9  Running           --agent.terminatedAbnormally-> Terminated-abnormally
//   P10 Allocated | Spawning | Running | Terminating --res.removed--> Terminated-abnormally
//       ([INTERP] node lost; reason 'node lost')
// Where the spec is silent (each choice explained at the transition):
//   P11 Spawning          --task.terminate-->           Terminating       (commandAgent terminate)
//   P12 Terminating       --task.terminate-->           Terminating       (commandAgent terminate again)
//   P13 Terminating       --agent.spawnFailed-->        Spawn-failed
//   P14 Terminating       --agent.spawnSucceeded-->     Terminating       (pid recorded)
//   P15 Wait-for-resource | Allocated --task.terminate--> Terminated-normally (nothing ran)
// Any other event in any state is ignored: the snapshot is returned unchanged, no action.
import { assertEvent, assign, setup } from 'xstate';
import { assert } from '../src/base/result.ts';

export type FsmProcInput = { taskId: string; vpid: number };

/** State values of FsmProc (spec §6.2 names, camelCased). The last three are final. */
export type FsmProcState =
  | 'waitForResource'
  | 'allocated'
  | 'spawning'
  | 'running'
  | 'terminating'
  | 'spawnFailed'
  | 'terminatedNormally'
  | 'terminatedAbnormally';

export const FSM_PROC_FINAL_STATES: readonly FsmProcState[] = ['spawnFailed', 'terminatedNormally', 'terminatedAbnormally'];

export type FsmProcContext = {
  taskId: string;
  vpid: number;
  /** Node allocated to the process (P1); null until then. */
  node: string | null;
  /** OS pid reported by the Agent with Spawn succeeded. */
  pid: number | null;
  /** Exit code, when the process exited with one. */
  exitCode: number | null;
  /** Signal that ended the process, e.g. 'SIGKILL'. */
  signal: string | null;
  /** Why the process failed or ended abnormally ('node lost', the Agent's reason, …). */
  reason: string | null;
};

export type FsmProcEvent =
  | { type: 'res.allocated'; node: string }
  | { type: 'res.removed' }
  | { type: 'task.spawn' }
  | { type: 'task.terminate' }
  | { type: 'agent.spawnSucceeded'; pid: number }
  | { type: 'agent.spawnFailed'; reason: string }
  /** `signal` and `reason` only for a rollback rank killed after it finalized (PROTOCOL §11.3). */
  | { type: 'agent.terminatedNormally'; exitCode: number; signal?: string | null; reason?: string | null }
  | { type: 'agent.terminatedAbnormally'; exitCode: number | null; signal: string | null; reason: string };

export type CommandAgentParams = { command: 'spawn' | 'terminate'; node: string; taskId: string; vpid: number };
export type ReportToTaskParams = { taskId: string; vpid: number; state: FsmProcState };

/** The node a command goes to. Only reachable from states entered after P1 set it. */
function nodeOf(context: FsmProcContext): string {
  assert(context.node !== null, `FsmProc ${context.taskId}/${context.vpid}: command without a node`);
  return context.node;
}

const command = (which: 'spawn' | 'terminate') => ({
  type: 'commandAgent' as const,
  params: ({ context }: { context: FsmProcContext }): CommandAgentParams => ({
    command: which,
    node: nodeOf(context),
    taskId: context.taskId,
    vpid: context.vpid,
  }),
});

const report = (state: FsmProcState) => ({
  type: 'reportToTask' as const,
  params: ({ context }: { context: FsmProcContext }): ReportToTaskParams => ({
    taskId: context.taskId,
    vpid: context.vpid,
    state,
  }),
});

const procSetup = setup({
  types: {
    context: {} as FsmProcContext,
    events: {} as FsmProcEvent,
    input: {} as FsmProcInput,
  },
  actions: {
    // Placeholders: the replicated manager state executes the actions transition() returns.
    commandAgent: (_: unknown, _params: CommandAgentParams) => {},
    reportToTask: (_: unknown, _params: ReportToTaskParams) => {},
  },
});

/** How a spawned process ends, the same from Running and from Terminating (P6–P10). */
const ending = procSetup.createStateConfig({
  on: {
    'agent.terminatedNormally': {
      target: 'terminatedNormally',
      actions: procSetup.assign(({ event }) => {
        assertEvent(event, 'agent.terminatedNormally');
        return { exitCode: event.exitCode, signal: event.signal ?? null, reason: event.reason ?? null };
      }),
    },
    'agent.terminatedAbnormally': {
      target: 'terminatedAbnormally',
      actions: procSetup.assign(({ event }) => {
        assertEvent(event, 'agent.terminatedAbnormally');
        return { exitCode: event.exitCode, signal: event.signal, reason: event.reason };
      }),
    },
    'res.removed': { target: 'terminatedAbnormally', actions: procSetup.assign({ reason: 'node lost' }) },
  },
}).on;

export const fsmProc = procSetup.createMachine({
  id: 'fsmProc',
  initial: 'waitForResource',
  context: ({ input }) => ({
    taskId: input.taskId,
    vpid: input.vpid,
    node: null,
    pid: null,
    exitCode: null,
    signal: null,
    reason: null,
  }),
  states: {
    waitForResource: {
      on: {
        // P1
        'res.allocated': { target: 'allocated', actions: assign({ node: ({ event }) => event.node }) },
        // P15 [spec silent] The task is terminated (operator kill, restart) before this process
        // got a node: nothing runs, nothing is commanded; it ends so "All FsmProc terminated"
        // can hold. Not abnormal — nothing crashed and nothing was lost.
        'task.terminate': {
          target: 'terminatedNormally',
          actions: assign({ reason: 'terminated before spawn' }),
        },
        // res.removed is ignored here [spec silent]: with no node allocated, no node can be lost.
      },
    },
    allocated: {
      entry: report('allocated'),
      on: {
        // P2
        'task.spawn': { target: 'spawning', actions: command('spawn') },
        // P10
        'res.removed': { target: 'terminatedAbnormally', actions: assign({ reason: 'node lost' }) },
        // P15 [spec silent] as in Wait-for-resource: the Agent was never commanded.
        'task.terminate': {
          target: 'terminatedNormally',
          actions: assign({ reason: 'terminated before spawn' }),
        },
      },
    },
    spawning: {
      entry: report('spawning'),
      on: {
        // P3
        'agent.spawnSucceeded': { target: 'running', actions: assign({ pid: ({ event }) => event.pid }) },
        // P4
        'agent.spawnFailed': { target: 'spawnFailed', actions: assign({ reason: ({ event }) => event.reason }) },
        // P10
        'res.removed': { target: 'terminatedAbnormally', actions: assign({ reason: 'node lost' }) },
        // P11 [spec silent] FsmTask T5: on Start-TO (or another process's spawn failure) the task
        // terminates all its processes, including ones still spawning; the Agent kills the
        // unconnected process and answers Spawn failed (P13) or, if it had connected, a
        // termination report (P6, P7).
        'task.terminate': { target: 'terminating', actions: command('terminate') },
      },
    },
    running: {
      entry: report('running'),
      on: {
        // P5
        'task.terminate': { target: 'terminating', actions: command('terminate') },
        // P8 (normally), P9 (abnormally), P10 (node lost)
        ...ending,
      },
    },
    terminating: {
      entry: report('terminating'),
      on: {
        // P6 (normally), P7 (abnormally), P10 (node lost)
        ...ending,
        // P12 [spec silent] FsmTask T17 re-sends Terminate on Terminate-TO: the command is sent
        // again (the Agent escalates to SIGKILL); the state does not change, so no report.
        'task.terminate': { actions: command('terminate') },
        // P13 [spec silent] terminated while spawning (P11): the process never connected, and
        // the Agent reports that as Spawn failed.
        'agent.spawnFailed': { target: 'spawnFailed', actions: assign({ reason: ({ event }) => event.reason }) },
        // P14 [spec silent] the success report crossed our Terminate (P11): keep the pid for
        // `trine ps`, stay Terminating; a termination report follows.
        'agent.spawnSucceeded': { actions: assign({ pid: ({ event }) => event.pid }) },
      },
    },
    spawnFailed: { type: 'final', entry: report('spawnFailed') },
    terminatedNormally: { type: 'final', entry: report('terminatedNormally') },
    terminatedAbnormally: { type: 'final', entry: report('terminatedAbnormally') },
  },
});
