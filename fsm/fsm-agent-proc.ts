// FsmAgentProc: the Agent's state machine for one task process on its node (spec §6.3,
// Table 4.6, Fig. 4.23 — diagram lost, states reconstructed). Driven by the manager's commands
// (`cm.*`, delivered only after 2 matching signed copies), by OS events the Agent's driver
// observes (`os.*`) and by `clock.tick`. It is advanced with xstate's pure `transition()`; the
// driver binds the named actions it returns to real effects (spawn, kill, pipes, a report to the
// manager group). No effect, clock or I/O here (STYLE.md 1, 4).
//
// Transitions (A-numbers are cited by test/unit/fsm/fsm-agent-proc.test.ts):
//   A1  Idle        --cm.spawn-->        Spawning     spawnProcess (create pipes, fork/exec)
//   A2  Spawning    --os.spawned-->      Spawning     pid recorded
//   A3  Spawning    --os.connected-->    Running      sendMapping; report spawnSucceeded
//   A4  Spawning    --os.forkFailed-->   Dead         report spawnFailed            [INTERP]
//   A5  Spawning    --os.exited-->       Dead         report spawnFailed            [SRC-ISSUE]
//   A6  Spawning    --clock.tick-->      Spawning     one tick of the connect timeout gone
//   A7  Spawning    --clock.tick (Nth)-> Aborting     killProcess SIGKILL           [SRC-ISSUE]
//   A8  Spawning    --cm.terminate-->    Aborting     killProcess SIGKILL
//   A9  Aborting    --os.exited-->       Dead         report spawnFailed
//   A10 Aborting    --os.forkFailed-->   Dead         report spawnFailed
//   A11 Aborting    --cm.terminate-->    Aborting     killProcess SIGKILL again
//   A12 Aborting    --os.spawned-->      Aborting     pid recorded
//   A13 Running     --os.disconnected--> Running      clean disconnect recorded
//   A14 Running     --os.exited-->       Dead         report terminatedNormally | terminatedAbnormally
//   A15 Running     --cm.terminate-->    Terminating  killProcess SIGTERM
//   A16 Terminating --os.disconnected--> Terminating  clean disconnect recorded
//   A17 Terminating --os.exited-->       Dead         report terminatedNormally | terminatedAbnormally
//   A18 Terminating --cm.terminate-->    Terminating  killProcess SIGKILL (escalation)
// Entering Dead always emits exactly `destroyPipes` then one `report` (its entry actions), so
// every path to Dead reports exactly once; `spawnSucceeded` is reported at most once, before.
// Any other event in any state is ignored: the snapshot is returned unchanged, no action.
//
// Spawn failed ([SRC-ISSUE] §6.3: FsmProc consumes it, Table 4.6 never outputs it) is reported
// when (a) fork/exec fails (A4, A10), (b) the process does not connect within
// `connectTimeoutTicks` ticks — it is then killed and the report is sent once it is gone (A7, A9),
// (c) it exits before connecting (A5), or (d) the manager terminates it before it connected (A8,
// A9). It is always sent once the process is gone, so the manager never re-allocates a VPID whose
// previous process may still run.
//
// Normal vs abnormal termination — the exact rule (spec §6.3 Process-disconnect /
// Process-nonexistent, §7 items 6–7):
//   terminatedNormally   ⇔ the process disconnected cleanly (os.disconnected) BEFORE os.exited,
//                          AND os.exited carries exit code 0 and no signal;
//   terminatedAbnormally otherwise: killed by a signal (even after a clean disconnect), a
//                          non-zero exit code (even after a clean disconnect), or any exit
//                          without a prior clean disconnect (even with code 0).
// This holds whether or not the manager asked for the termination (Running or Terminating).
import { assign, setup } from 'xstate';
import { assert } from '../src/base/result.ts';

/** What a `cm.spawn` command carries: how to start the process (issue 3 item 2) and the mapping
 *  message sent to it when it connects (spec §7 item 2). Plain data only. */
export type SpawnCommand = {
  taskId: string;
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Total number of processes in the task. */
  taskSize: number;
  /** The task has been restarted (mapping message flag). */
  restarted: boolean;
  /** Every process of the task: VPID and node. */
  endpoints: Array<{ vpid: number; node: string }>;
};

/** Why a linked process that never connected failed its start (A7), and what to do: most
 *  often a plain program submitted with --linked (issue 19). */
export const NEVER_LINKED = 'never linked: no connection to its agent';
export const LINK_FIX = "a --linked task's program must call link() from trine/app; a plain program is submitted without --linked";

export type FsmAgentProcInput = { vpid: number; connectTimeoutTicks: number };

export type FsmAgentProcState = 'idle' | 'spawning' | 'aborting' | 'running' | 'terminating' | 'dead';

export type DeathKind = 'spawnFailed' | 'terminatedNormally' | 'terminatedAbnormally';

export type FsmAgentProcContext = {
  vpid: number;
  connectTimeoutTicks: number;
  /** Ticks left before the connect timeout fires (meaningful in Spawning). */
  ticksLeft: number;
  command: SpawnCommand | null;
  pid: number | null;
  /** The process closed its pipes cleanly (Process-disconnect) before exiting. */
  disconnected: boolean;
  /** Set by the transition into Dead: what Dead's entry reports. */
  result: DeathKind | null;
  exitCode: number | null;
  signal: string | null;
  reason: string | null;
};

export type FsmAgentProcEvent =
  | { type: 'cm.spawn'; command: SpawnCommand }
  | { type: 'cm.terminate' }
  | { type: 'os.forkFailed'; error: string }
  | { type: 'os.spawned'; pid: number }
  | { type: 'os.connected' }
  | { type: 'os.disconnected' }
  | { type: 'os.exited'; code: number | null; signal: string | null }
  | { type: 'clock.tick' };

export type SpawnProcessParams = {
  vpid: number;
  taskId: string;
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
};
export type KillProcessParams = { vpid: number; pid: number | null; signal: 'SIGTERM' | 'SIGKILL' };
export type SendMappingParams = {
  vpid: number;
  taskId: string;
  taskSize: number;
  restarted: boolean;
  endpoints: Array<{ vpid: number; node: string }>;
};
export type DestroyPipesParams = { vpid: number };
/** The Agent's report to FsmProc (spec §6.2 inputs); fields match FsmProc's `agent.*` events. */
export type AgentProcReport =
  | { kind: 'spawnSucceeded'; vpid: number; pid: number }
  | { kind: 'spawnFailed'; vpid: number; reason: string }
  | { kind: 'terminatedNormally'; vpid: number; exitCode: number }
  | { kind: 'terminatedAbnormally'; vpid: number; exitCode: number | null; signal: string | null; reason: string };

type Exit = { code: number | null; signal: string | null };

/** The rule in the header: how a process that had connected ended. */
export function classifyExit(disconnected: boolean, exit: Exit): { result: DeathKind; reason: string | null } {
  if (exit.signal !== null) return { result: 'terminatedAbnormally', reason: `killed by ${exit.signal}` };
  if (exit.code !== 0) return { result: 'terminatedAbnormally', reason: `exited with code ${String(exit.code)}` };
  if (!disconnected) return { result: 'terminatedAbnormally', reason: 'exited without disconnecting' };
  return { result: 'terminatedNormally', reason: null };
}

const exitDetail = (exit: Exit): string => (exit.signal !== null ? `signal ${exit.signal}` : `code ${String(exit.code)}`);

/** Dead's report, built from what the transition into Dead recorded. */
function deathReport(context: FsmAgentProcContext): AgentProcReport {
  const vpid = context.vpid;
  switch (context.result) {
    case 'spawnFailed':
      return { kind: 'spawnFailed', vpid, reason: context.reason ?? 'spawn failed' };
    case 'terminatedNormally':
      return { kind: 'terminatedNormally', vpid, exitCode: context.exitCode ?? 0 };
    case 'terminatedAbnormally':
    case null:
      // null cannot happen: every transition into Dead sets `result` first.
      return { kind: 'terminatedAbnormally', vpid, exitCode: context.exitCode, signal: context.signal, reason: context.reason ?? 'unknown' };
  }
}

/** The spawn command; set by A1, so present in every state after Idle. */
function commandOf(context: FsmAgentProcContext): SpawnCommand {
  assert(context.command !== null, `FsmAgentProc ${context.vpid}: no spawn command`);
  return context.command;
}

/** The pid; present once os.spawned arrived (guard hasPid). */
function pidOf(context: FsmAgentProcContext): number {
  assert(context.pid !== null, `FsmAgentProc ${context.vpid}: no pid`);
  return context.pid;
}

const kill = (signal: 'SIGTERM' | 'SIGKILL') => ({
  type: 'killProcess' as const,
  params: ({ context }: { context: FsmAgentProcContext }): KillProcessParams => ({ vpid: context.vpid, pid: context.pid, signal }),
});

/** What an exit before the process connected records: Spawn failed (A5). */
function spawnExit(exit: Exit): Partial<FsmAgentProcContext> {
  return { result: 'spawnFailed', exitCode: exit.code, signal: exit.signal, reason: `exited before connecting (${exitDetail(exit)})` };
}

/** What an exit after the process connected records, by the rule in the header (A14, A17). */
function connectedExit(disconnected: boolean, exit: Exit): Partial<FsmAgentProcContext> {
  const { result, reason } = classifyExit(disconnected, exit);
  return { result, reason, exitCode: exit.code, signal: exit.signal };
}

export const fsmAgentProc = setup({
  types: {
    context: {} as FsmAgentProcContext,
    events: {} as FsmAgentProcEvent,
    input: {} as FsmAgentProcInput,
  },
  actions: {
    // Placeholders: the Agent's driver binds the real effects (STYLE.md 4).
    spawnProcess: (_: unknown, _params: SpawnProcessParams) => {},
    killProcess: (_: unknown, _params: KillProcessParams) => {},
    sendMapping: (_: unknown, _params: SendMappingParams) => {},
    destroyPipes: (_: unknown, _params: DestroyPipesParams) => {},
    report: (_: unknown, _params: AgentProcReport) => {},
  },
  guards: {
    /** The connect timeout still has more than this tick to run. */
    connectTimeLeft: ({ context }) => context.ticksLeft > 1,
    /** The OS has given us the process (os.spawned), so a connection can be its. */
    hasPid: ({ context }) => context.pid !== null,
    /** No pid yet: os.spawned arrives at most once. */
    noPid: ({ context }) => context.pid === null,
  },
}).createMachine({
  id: 'fsmAgentProc',
  initial: 'idle',
  context: ({ input }) => ({
    vpid: input.vpid,
    connectTimeoutTicks: input.connectTimeoutTicks,
    ticksLeft: input.connectTimeoutTicks,
    command: null,
    pid: null,
    disconnected: false,
    result: null,
    exitCode: null,
    signal: null,
    reason: null,
  }),
  states: {
    idle: {
      on: {
        // A1. cm.terminate in Idle is ignored [spec silent]: nothing to kill; the Agent's driver
        // answers a command for a VPID it does not run.
        'cm.spawn': {
          target: 'spawning',
          actions: [
            assign({
              command: ({ event }) => event.command,
              ticksLeft: ({ context }) => context.connectTimeoutTicks,
            }),
            {
              type: 'spawnProcess',
              params: ({ context }) => {
                const c = commandOf(context);
                return { vpid: context.vpid, taskId: c.taskId, file: c.file, args: c.args, cwd: c.cwd, env: c.env };
              },
            },
          ],
        },
      },
    },
    spawning: {
      on: {
        // A2
        'os.spawned': { guard: 'noPid', actions: assign({ pid: ({ event }) => event.pid }) },
        // A3. Guarded on the pid [spec silent]: the driver knows the pid as soon as spawn()
        // returns and must deliver os.spawned first; a connect without one is ignored (the
        // connect timeout then reclaims the process).
        'os.connected': {
          guard: 'hasPid',
          target: 'running',
          actions: [
            {
              type: 'sendMapping',
              params: ({ context }) => {
                const c = commandOf(context);
                return { vpid: context.vpid, taskId: c.taskId, taskSize: c.taskSize, restarted: c.restarted, endpoints: c.endpoints };
              },
            },
            {
              type: 'report',
              params: ({ context }) => ({ kind: 'spawnSucceeded' as const, vpid: context.vpid, pid: pidOf(context) }),
            },
          ],
        },
        // A4
        'os.forkFailed': {
          target: 'dead',
          actions: assign({ result: 'spawnFailed', reason: ({ event }) => event.error }), // the driver's text, e.g. "spawn failed: ENOENT …"
        },
        // A5
        'os.exited': { target: 'dead', actions: assign(({ event }) => spawnExit(event)) },
        'clock.tick': [
          // A6
          { guard: 'connectTimeLeft', actions: assign({ ticksLeft: ({ context }) => context.ticksLeft - 1 }) },
          // A7. The Nth tick after cm.spawn (N = connectTimeoutTicks; N ≤ 1 fires on the first).
          {
            target: 'aborting',
            actions: [
              assign({ ticksLeft: 0, reason: ({ context }) => `${NEVER_LINKED} within ${context.connectTimeoutTicks} ticks: ${LINK_FIX}` }),
              kill('SIGKILL'),
            ],
          },
        ],
        // A8 [spec silent] the manager gave up on the spawn (FsmTask Start-TO): an unconnected
        // process has no library to close cleanly, so it is killed outright.
        'cm.terminate': {
          target: 'aborting',
          actions: [assign({ reason: 'terminated before connecting' }), kill('SIGKILL')],
        },
      },
    },
    // Killed before it connected; waiting for the OS to confirm it is gone before reporting.
    aborting: {
      on: {
        // A9. A late os.connected here is ignored: the spawn has already failed.
        'os.exited': {
          target: 'dead',
          actions: assign({
            result: 'spawnFailed',
            exitCode: ({ event }) => event.code,
            signal: ({ event }) => event.signal,
          }),
        },
        // A10
        'os.forkFailed': {
          target: 'dead',
          actions: assign({ result: 'spawnFailed', reason: ({ event }) => event.error }), // the driver's text, e.g. "spawn failed: ENOENT …"
        },
        // A11 a re-sent Terminate (FsmTask T17) kills again.
        'cm.terminate': { actions: kill('SIGKILL') },
        // A12 the spawn had not completed when we killed it.
        'os.spawned': { guard: 'noPid', actions: assign({ pid: ({ event }) => event.pid }) },
      },
    },
    running: {
      on: {
        // A13
        'os.disconnected': { actions: assign({ disconnected: true }) },
        // A14
        'os.exited': { target: 'dead', actions: assign(({ context, event }) => connectedExit(context.disconnected, event)) },
        // A15 SIGTERM first so the library can close its pipes and end normally (spec §6.3
        // Terminating → Process-disconnect).
        'cm.terminate': { target: 'terminating', actions: kill('SIGTERM') },
      },
    },
    terminating: {
      on: {
        // A16
        'os.disconnected': { actions: assign({ disconnected: true }) },
        // A17
        'os.exited': { target: 'dead', actions: assign(({ context, event }) => connectedExit(context.disconnected, event)) },
        // A18 [spec silent] the manager re-sent Terminate (FsmTask T17, Terminate-TO): the
        // process ignored SIGTERM, so this time it is SIGKILL.
        'cm.terminate': { actions: kill('SIGKILL') },
      },
    },
    dead: {
      type: 'final',
      entry: [
        { type: 'destroyPipes', params: ({ context }) => ({ vpid: context.vpid }) },
        { type: 'report', params: ({ context }) => deathReport(context) },
      ],
    },
  },
});
