// The agent's table of task processes on its node (spec §1.4 Agent, §6.3 FsmAgentProc, §7;
// issue 3 item 2). It owns one FsmAgentProc per (task, vpid), turns the group's commands
// (`proc.spawn`, `proc.terminate`, `procs.adopt`, `proc.signal`, `proc.mapping`,
// `node.shutdown`), the OS events the driver observes and ticks into effects for the driver:
// spawn, kill, the set of live processes to record, and log lines; what goes back to the group
// (reports, a linked process's signals) waits in the table's outbox until the driver drains it
// (src/core/agent-outbox.ts). Pure (STYLE.md 1): no clock, no I/O; the drivers
// (src/daemon/proc-driver.ts, src/sim/tasks.ts) execute the effects.
//
// The state is one record (src/core/agent-procs-state.ts) and each part of the table is a module
// of verbs over it: the children and their machines (agent-procs-child.ts, plain mode there),
// adoption after an agent restart (agent-procs-adopt.ts, PROTOCOL §8.6), and linked processes'
// connections (agent-procs-app.ts, PROTOCOL §9.4). This file dispatches the inputs.
//
// A terminate for an absent key reports nothing (FsmProc already has, or will get, the death
// report) and is logged.
import { unreachable } from '../base/result.ts';
import type { GroupCommand, RollbackMark } from './wire/messages.ts';
import { adoptProcs, onAdoptedEvent, terminateAdopted, tickAdopted } from './agent-procs-adopt.ts';
import {
  closeApp, deliverDgrp, deliverMapping, deliverSignal, dgrpFromApp, finalizeApp, markFromApp, progressFromApp, signalFromApp, type AppDgrp,
} from './agent-procs-app.ts';
import { advanceChild, onChildEvent, spawnChild, tickChild } from './agent-procs-child.ts';
import {
  keyOf, logEffect, noteRecords,
  type AgentProcs, type AgentProcsEffect, type LocalProc, type ProcOsEvent, type ProcRecord, type ProcRef,
} from './agent-procs-state.ts';

/** What a driver hands the table. A linked process's hello is `connectApp`
 *  (src/core/agent-procs-app.ts): the socket needs its yes or no at once. */
export type AgentProcsInput =
  /** A group command delivered on 2 matching copies. `local` is the liveness of
   *  recoveredProcs(), read by the driver; only `procs.adopt` uses it. */
  | { type: 'command'; command: GroupCommand; local?: readonly LocalProc[] }
  /** Something the OS said about the process `ref`. */
  | { type: 'os'; ref: ProcRef; event: ProcOsEvent }
  /** One task tick (taskTickMs): the connect timeouts and kill graces. */
  | { type: 'tick' }
  /** A linked process's connection said finalize (Process-disconnect). */
  | { type: 'app.finalized'; task: string; vpid: number }
  /** Its connection closed; `clean` when finalize came first. */
  | { type: 'app.closed'; task: string; vpid: number; clean: boolean }
  /** A signal from the process, for the group. */
  | { type: 'app.signal'; task: string; vpid: number; request: { signum: number; dest: number; arg: number; epoch: number } }
  /** A rollback task's process stored a checkpoint: its mark, for the group (PROTOCOL §11.4). */
  | { type: 'app.mark'; task: string; vpid: number; mark: RollbackMark }
  /** A DGRP task's process reported a testing interval or reached a barrier (PROTOCOL §12). */
  | { type: 'app.dgrp'; task: string; vpid: number; message: AppDgrp }
  /** A process reported its progress, for the group (PROTOCOL §13.2). */
  | { type: 'app.progress'; task: string; vpid: number; permille: number };

export function stepProcs(s: AgentProcs, input: AgentProcsInput): AgentProcsEffect[] {
  switch (input.type) {
    case 'command':
      return commandProcs(s, input.command, input.local ?? []);
    case 'os':
      return onProcOs(s, input.ref, input.event);
    case 'tick':
      return tickProcs(s);
    case 'app.finalized':
      return finalizeApp(s, input.task, input.vpid);
    case 'app.closed':
      return closeApp(s, input.task, input.vpid, input.clean);
    case 'app.signal':
      return signalFromApp(s, input.task, input.vpid, input.request);
    case 'app.mark':
      return markFromApp(s, input.task, input.vpid, input.mark);
    case 'app.dgrp':
      return dgrpFromApp(s, input.task, input.vpid, input.message);
    case 'app.progress':
      return progressFromApp(s, input.task, input.vpid, input.permille);
    default:
      return unreachable(input);
  }
}

function terminate(s: AgentProcs, task: string, vpid: number, out: AgentProcsEffect[]): void {
  const entry = s.entries.get(keyOf(task, vpid));
  if (entry === undefined) out.push(logEffect('info', 'proc.terminate.unknown', { task, vpid }));
  else if (entry.kind === 'child') advanceChild(s, entry, { type: 'cm.terminate' }, out);
  else terminateAdopted(entry, out);
}

/** A group command delivered on 2 matching copies. */
export function commandProcs(s: AgentProcs, command: GroupCommand, local: readonly LocalProc[] = []): AgentProcsEffect[] {
  const out: AgentProcsEffect[] = [];
  switch (command.type) {
    case 'proc.spawn':
      spawnChild(s, command, out);
      break;
    case 'proc.terminate':
      terminate(s, command.task, command.vpid, out);
      break;
    case 'procs.adopt':
      adoptProcs(s, command.procs, local, out);
      break;
    case 'proc.signal':
      deliverSignal(s, command, out);
      break;
    case 'proc.mapping':
      deliverMapping(s, command, out);
      break;
    case 'proc.dgrp':
      deliverDgrp(s, command, out);
      break;
    case 'node.shutdown':
      // PROTOCOL §10.11: every process on this node ends. The driver repeats the command
      // after a grace, and a repeated terminate is a SIGKILL.
      for (const e of [...s.entries.values()]) terminate(s, e.ref.task, e.ref.vpid, out);
      break;
    case 'echo.reply':
    case 'replicas':
    case 'replica.spawn':
    case 'replica.kill':
    case 'rollback.guard':
    case 'rollback.release':
      break; // not about task processes (the agent core and its driver, PROTOCOL §10.7)
    default:
      unreachable(command);
  }
  return noteRecords(s, out);
}

/** Something the OS said about the process `ref`. */
export function onProcOs(s: AgentProcs, ref: ProcRef, event: ProcOsEvent): AgentProcsEffect[] {
  const out: AgentProcsEffect[] = [];
  const entry = s.entries.get(keyOf(ref.task, ref.vpid));
  if (entry === undefined || entry.ref.serial !== ref.serial) {
    // A spawner reports each process's end exactly once, so this is an event for an entry
    // already settled (e.g. a kill racing a liveness poll): nothing to do.
    out.push(logEffect('debug', 'proc.os.stale', { task: ref.task, vpid: ref.vpid, serial: ref.serial, event: event.type }));
    return out;
  }
  if (entry.kind === 'adopted') onAdoptedEvent(s, entry, event, out);
  else onChildEvent(s, entry, event, out);
  return noteRecords(s, out);
}

/** One task tick (taskTickMs). */
export function tickProcs(s: AgentProcs): AgentProcsEffect[] {
  const out: AgentProcsEffect[] = [];
  for (const entry of [...s.entries.values()]) {
    if (entry.kind === 'child') tickChild(s, entry, out);
    else tickAdopted(entry, out);
  }
  return noteRecords(s, out);
}

/** Records of the previous incarnation not yet settled by `procs.adopt`. */
export const recoveredProcs = (s: AgentProcs): ProcRecord[] => s.recovered.map((r) => ({ ...r }));

/** Adopted processes, whose liveness the driver polls (they are not its children). */
export const adoptedProcs = (s: AgentProcs): { ref: ProcRef; pid: number }[] =>
  [...s.entries.values()].flatMap((e) => (e.kind === 'adopted' ? [{ ref: { ...e.ref }, pid: e.pid }] : []));
