// The state of an agent's process table (src/core/agent-procs.ts), as one record that
// createAgentProcs makes and the table's verbs take (STYLE.md rule 1, as src/core/link.ts does):
// its entries (one FsmAgentProc per child, or an adopted process), the previous incarnation's
// records until `procs.adopt` settles them, and the outbox of what goes to the group
// (src/core/agent-outbox.ts). Also the effects the table asks of its driver and the small
// helpers every part of the table uses to emit them. Pure: no clock, no I/O.
import { MAX_TEXT_CHARS } from './constants.ts';
import { createOutbox, queueReport, type Outbox } from './agent-outbox.ts';
import { assert } from '../base/result.ts';
import { clipText } from './wire/schema.ts';
import type { LogLevel } from './node.ts';
import type { AgentToProc } from './wire/app-wire.ts';
import type { ProcReport } from './wire/messages.ts';
import type { FsmAgentProcContext, FsmAgentProcEvent, KillProcessParams, SpawnProcessParams } from '../../fsm/fsm-agent-proc.ts';
import type { MachineData } from '../../fsm/plain-data.ts';

/** Ticks between the SIGTERM and the SIGKILL of an adopted process under terminate (10 × 50 ms:
 *  time for a clean shutdown, well within one Terminate-TO). */
export const ADOPTED_KILL_GRACE_TICKS = 10;
/** The same grace for a child under terminate: a process that ignores SIGTERM, or cannot take
 *  it (stopped, hung in a handler), gets SIGKILL after it, without waiting for the manager to
 *  re-send Terminate — an application's KILL request (FsmTask Killing) sends Terminate once. */
export const TERMINATE_KILL_GRACE_TICKS = ADOPTED_KILL_GRACE_TICKS;

/** One process this agent started, as recorded in its procs file (without the start time,
 *  which only the driver can read). */
export type ProcRecord = { task: string; vpid: number; pid: number };
/** A recovered record with the liveness the driver found (pid exists, start time matches). */
export type LocalProc = ProcRecord & { alive: boolean };

/** Which spawn an OS event belongs to: `serial` grows with every entry, so an event from an
 *  earlier process of the same key can never be taken for the current one's. */
export type ProcRef = { task: string; vpid: number; serial: number };

/** What the driver observes about one process. `os.connected` / `os.disconnected` come from the
 *  application library's pipes (issue 4); plain processes get them synthesised here. */
export type ProcOsEvent = Extract<
  FsmAgentProcEvent,
  { type: 'os.spawned' | 'os.forkFailed' | 'os.exited' | 'os.connected' | 'os.disconnected' }
>;

export type AgentProcsEffect =
  /** Start a process: FsmAgentProc's spawnProcess with the mapping in its environment.
   *  `taskKey`: the task's G-MPI key, which the driver hands a linked process in its socket's
   *  welcome (PROTOCOL §9.5) — not part of `spec`, so never in the environment or a log line. */
  | { type: 'spawn'; ref: ProcRef; spec: SpawnProcessParams; linked: boolean; taskKey: Uint8Array }
  /** Signal the process group of `pid`. `child` is false for a process this incarnation did not
   *  start (adopted, orphan): its pid could have been reused, so the driver re-checks the start
   *  time before signalling; a child's pid cannot be reused before we reap it. */
  | { type: 'kill'; task: string; vpid: number; pid: number; signal: KillProcessParams['signal']; child: boolean }
  /** This report was queued in the outbox (for the driver's log and bookkeeping: it is sent by
   *  the drain, not on this effect). */
  | { type: 'report'; report: ProcReport }
  /** The outbox was empty and holds something now: drain it (drainOutbox) on a later turn and
   *  send what it gives, in that order. */
  | { type: 'flush' }
  /** Write this message to the process's connection (PROTOCOL §9.4). */
  | { type: 'deliver'; task: string; vpid: number; message: AgentToProc }
  /** The live processes changed: the driver rewrites its procs file with these. */
  | { type: 'records'; procs: ProcRecord[] }
  | { type: 'log'; level: LogLevel; event: string; fields: Record<string, unknown> };

export type ChildEntry = {
  kind: 'child';
  ref: ProcRef;
  data: MachineData;
  /** A kill the machine asked for before the pid was known (A7/A8 before os.spawned). */
  pendingKill: KillProcessParams['signal'] | null;
  linked: boolean;
  /** The task's key (ProcSpawn.taskKey), for the spawn effect. */
  taskKey: Uint8Array;
  /** What the linked process announced at connect ("host:port"); empty before, or plain. */
  endpoint: string;
  /** Its connection said finalize (Process-disconnect). */
  finalized: boolean;
  /** Its mapping was a rollback task's (PROTOCOL §11): once finalized, its rank has finished. */
  rollback: boolean;
  /** Ticks spent in Terminating (TERMINATE_KILL_GRACE_TICKS). */
  terminatingTicks: number;
};
export type AdoptedEntry = {
  kind: 'adopted';
  ref: ProcRef;
  pid: number;
  /** Terminates received: the first sends SIGTERM, any later one SIGKILL (as A15/A18). */
  terminates: number;
  /** Ticks left before a SIGTERM'd adopted process gets SIGKILL anyway; null when none is due. */
  killInTicks: number | null;
  /** Why its end is reported, when this agent itself killed it on adoption. */
  endReason: string | null;
};
export type Entry = ChildEntry | AdoptedEntry;

export type AgentProcsOptions = {
  /** FsmAgentProc's connect timeout in ticks (DEFAULT_TIMING.connectTimeoutMs / taskTickMs). */
  connectTimeoutTicks: number;
  /** The previous incarnation's records (procs file), held until `procs.adopt` decides. */
  recovered?: readonly ProcRecord[];
};

export type AgentProcs = {
  connectTimeoutTicks: number;
  /** Live entries by task/vpid (keyOf). */
  entries: Map<string, Entry>;
  /** Records of the previous incarnation not yet settled by `procs.adopt`. */
  recovered: ProcRecord[];
  adoptDone: boolean;
  /** Grows with every entry (ProcRef.serial). */
  serial: number;
  /** The last `records` effect, so one is emitted only when the set changes. */
  lastRecords: string;
  /** What goes to the group on the next drain (src/core/agent-outbox.ts). */
  outbox: Outbox;
};

export function createAgentProcs(opts: AgentProcsOptions): AgentProcs {
  assert(Number.isSafeInteger(opts.connectTimeoutTicks) && opts.connectTimeoutTicks >= 1, 'connectTimeoutTicks must be a positive integer');
  return {
    connectTimeoutTicks: opts.connectTimeoutTicks,
    entries: new Map(),
    recovered: (opts.recovered ?? []).map((r) => ({ task: r.task, vpid: r.vpid, pid: r.pid })),
    adoptDone: false,
    serial: 0,
    lastRecords: '',
    outbox: createOutbox(),
  };
}

export const keyOf = (task: string, vpid: number): string => `${task}/${vpid}`;

export const stateOf = (data: MachineData): string => String(data.value);
export const contextOf = (data: MachineData): FsmAgentProcContext => data.context as FsmAgentProcContext;

export const logEffect = (level: LogLevel, event: string, fields: Record<string, unknown>): AgentProcsEffect => ({ type: 'log', level, event, fields });

/** Queues a report for the group and tells the driver: the `report` effect, then `flush` if the
 *  outbox was empty (src/core/agent-outbox.ts). */
export function sendReport(
  s: AgentProcs, out: AgentProcsEffect[],
  task: string, vpid: number, kind: ProcReport['kind'], pid: number, exitCode: number | null, signal: string | null, reason: string, endpoint = '',
): void {
  const report: ProcReport = { task, vpid, kind, pid, exitCode, signal, reason: clipText(reason, MAX_TEXT_CHARS), endpoint };
  out.push({ type: 'report', report });
  if (queueReport(s.outbox, report)) out.push({ type: 'flush' });
}

/** Every process believed alive: what the procs file must hold. */
export function procRecords(s: AgentProcs): ProcRecord[] {
  const out: ProcRecord[] = [...s.recovered];
  for (const e of s.entries.values()) {
    const pid = e.kind === 'adopted' ? e.pid : contextOf(e.data).pid;
    if (pid !== null) out.push({ task: e.ref.task, vpid: e.ref.vpid, pid });
  }
  return out.sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : a.vpid - b.vpid));
}

/** Appends a `records` effect if the live set changed since the last one. */
export function noteRecords(s: AgentProcs, out: AgentProcsEffect[]): AgentProcsEffect[] {
  const procs = procRecords(s);
  const text = JSON.stringify(procs);
  if (text !== s.lastRecords) {
    s.lastRecords = text;
    out.push({ type: 'records', procs });
  }
  return out;
}
