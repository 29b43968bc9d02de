// Linked processes (PROTOCOL §9.4) in an agent's process table (src/core/agent-procs.ts): what
// passes between the table and a process's connection to the agent's Unix socket. Pure: no
// clock, no I/O.
//
// A `linked` process links the application library, which connects to the agent's Unix socket
// and says hello with its task, VPID and the secret token the driver put in its environment.
// The driver authenticates the token and calls `connectApp`: that is FsmAgentProc's
// Process-connect (A3), and the spawnSucceeded report carries the endpoint the process
// announced. `finalizeApp` is Process-disconnect (A13/A16). A connection that closes without
// finalize while the process lives means the library is gone: the process is killed (SIGKILL),
// so its end is reported abnormal and promptly. The mapping message travels as the group's
// `proc.mapping` command once every member has connected (the machine's own `sendMapping` at
// connect has no endpoints to send yet); `proc.signal` commands are delivered to the named
// processes' connections in the order they arrive, and a process's own signals go to the group
// through the outbox (src/core/agent-outbox.ts).
import { queueSignal, type SignalRequest } from './agent-outbox.ts';
import { advanceChild } from './agent-procs-child.ts';
import {
  contextOf, keyOf, logEffect, noteRecords, stateOf, type AgentProcs, type AgentProcsEffect, type ChildEntry,
} from './agent-procs-state.ts';
import { rankOf, type DgrpVerdict, type ProcDgrp, type ProcMapping, type ProcSignal, type RollbackMapping, type RollbackMark } from './wire/messages.ts';

/** A connected linked child of `task`/`vpid`, or null. */
function linkedRunning(s: AgentProcs, task: string, vpid: number): ChildEntry | null {
  const e = s.entries.get(keyOf(task, vpid));
  if (e === undefined || e.kind !== 'child' || !e.linked) return null;
  const state = stateOf(e.data);
  return state === 'running' || state === 'terminating' ? e : null;
}

/** The named processes of a command that are connected; each other one is logged `event`
 *  (with `fields`) as undeliverable. */
function connected(s: AgentProcs, cmd: { task: string; vpids: readonly number[] }, event: string, out: AgentProcsEffect[], fields: Record<string, unknown> = {}): number[] {
  return cmd.vpids.filter((vpid) => {
    if (linkedRunning(s, cmd.task, vpid) !== null) return true;
    out.push(logEffect('debug', event, { task: cmd.task, vpid, ...fields }));
    return false;
  });
}

/** A request of linked process `request.vpid` (a signal, a mark, a DGRP report or arrival, a
 *  progress report), queued for the group in order with its others; from a process that is not
 *  connected, only logged `event`. */
function fromApp(s: AgentProcs, request: SignalRequest, level: 'warn' | 'debug', event: string, fields: Record<string, unknown> = {}): AgentProcsEffect[] {
  if (linkedRunning(s, request.task, request.vpid) === null) return [logEffect(level, event, { task: request.task, vpid: request.vpid, ...fields })];
  return queueSignal(s.outbox, request) ? [{ type: 'flush' }] : [];
}

/** `proc.signal`: the signal to each named process's connection. */
export function deliverSignal(s: AgentProcs, cmd: ProcSignal, out: AgentProcsEffect[]): void {
  for (const vpid of connected(s, cmd, 'proc.signal.undeliverable', out, { signum: cmd.signum })) {
    out.push({
      type: 'deliver', task: cmd.task, vpid,
      message: { type: 'signal', signum: cmd.signum, src: cmd.src, dest: cmd.dest, arg: cmd.arg, epoch: cmd.epoch, node: cmd.node, data: cmd.data },
    });
  }
}

/** `proc.mapping`: the mapping to each named process's connection. A rollback task's process
 *  gets the rank table with its own rank (PROTOCOL §11.2); one the table does not list gets
 *  nothing (a correct group never sends that) rather than run unprotected with a guessed rank. */
export function deliverMapping(s: AgentProcs, cmd: ProcMapping, out: AgentProcsEffect[]): void {
  for (const vpid of connected(s, cmd, 'proc.mapping.undeliverable', out)) {
    let rollback: RollbackMapping | null = null;
    if (cmd.rollback !== null) {
      const rank = rankOf(cmd.rollback, vpid);
      if (rank === null) {
        out.push(logEffect('warn', 'proc.mapping.no-rank', { task: cmd.task, vpid }));
        continue;
      }
      const e = linkedRunning(s, cmd.task, vpid);
      if (e !== null) e.rollback = true;
      rollback = { rank, protector: cmd.rollback.protectors[rank] ?? '', ...cmd.rollback, ranks: [...cmd.rollback.ranks], protectors: [...cmd.rollback.protectors], groups: [...cmd.rollback.groups], finished: [...cmd.rollback.finished] };
    }
    out.push({
      type: 'deliver', task: cmd.task, vpid,
      message: {
        type: 'mapping', task: cmd.task, vpid, size: cmd.members.length, restarted: cmd.restarted, recovered: cmd.recovered,
        epoch: cmd.epoch, quorum: cmd.quorum, members: cmd.members.map((m) => ({ ...m })), rollback, dgrp: cmd.dgrp === null ? null : { ...cmd.dgrp },
        straggler: cmd.straggler === null ? null : { ...cmd.straggler },
      },
    });
  }
}

/** A linked process proved its identity on the agent's socket (Process-connect). `ok` false:
 *  refuse the connection (no such spawning linked process). */
export function connectApp(s: AgentProcs, task: string, vpid: number, endpoint: string): { ok: boolean; effects: AgentProcsEffect[] } {
  const out: AgentProcsEffect[] = [];
  const e = s.entries.get(keyOf(task, vpid));
  if (e === undefined || e.kind !== 'child' || !e.linked || stateOf(e.data) !== 'spawning' || contextOf(e.data).pid === null) {
    out.push(logEffect('warn', 'app.connect.refused', { task, vpid }));
    return { ok: false, effects: out };
  }
  e.endpoint = endpoint;
  advanceChild(s, e, { type: 'os.connected' }, out);
  return { ok: true, effects: noteRecords(s, out) };
}

/** Its connection said finalize (Process-disconnect). */
export function finalizeApp(s: AgentProcs, task: string, vpid: number): AgentProcsEffect[] {
  const out: AgentProcsEffect[] = [];
  const e = linkedRunning(s, task, vpid);
  if (e === null) return out;
  e.finalized = true;
  advanceChild(s, e, { type: 'os.disconnected' }, out);
  return noteRecords(s, out);
}

/** Its connection closed; `clean` when finalize came first. */
export function closeApp(s: AgentProcs, task: string, vpid: number, clean: boolean): AgentProcsEffect[] {
  const out: AgentProcsEffect[] = [];
  const e = linkedRunning(s, task, vpid);
  if (e === null || clean || e.finalized) return out;
  // The library vanished while its process runs on (see the header): a crash.
  const pid = contextOf(e.data).pid;
  out.push(logEffect('warn', 'app.connection.lost', { task, vpid, pid }));
  if (pid !== null) out.push({ type: 'kill', task, vpid, pid, signal: 'SIGKILL', child: true });
  return out;
}

/** A checkpoint's mark from the process, queued for the group like its signals (§11.4). */
export function markFromApp(s: AgentProcs, task: string, vpid: number, mark: RollbackMark): AgentProcsEffect[] {
  return fromApp(s, { type: 'rollback.mark', task, vpid, ...mark }, 'warn', 'app.mark.unconnected');
}

/** `proc.dgrp`: a DGRP task's view to each named process's connection (PROTOCOL §12.4). */
export function deliverDgrp(s: AgentProcs, cmd: ProcDgrp, out: AgentProcsEffect[]): void {
  for (const vpid of connected(s, cmd, 'proc.dgrp.undeliverable', out)) {
    out.push({
      type: 'deliver', task: cmd.task, vpid,
      message: { type: 'dgrp', view: cmd.view, released: cmd.released, entries: cmd.entries.map((e) => ({ ...e })) },
    });
  }
}

/** What a DGRP task's process sends about its group: a report or an arrival (§12.2, §12.4). */
export type AppDgrp = { type: 'dgrp.report'; round: number; verdicts: DgrpVerdict[] } | { type: 'dgrp.arrive'; round: number };

/** …queued for the group like its signals. */
export function dgrpFromApp(s: AgentProcs, task: string, vpid: number, m: AppDgrp): AgentProcsEffect[] {
  const request: SignalRequest = m.type === 'dgrp.arrive'
    ? { type: m.type, task, vpid, round: m.round }
    : { type: m.type, task, vpid, round: m.round, verdicts: m.verdicts.map((v) => ({ ...v })) };
  return fromApp(s, request, 'warn', 'app.dgrp.unconnected');
}

/** A progress report (PROTOCOL §13.2), queued for the group like its signals. */
export function progressFromApp(s: AgentProcs, task: string, vpid: number, permille: number): AgentProcsEffect[] {
  return fromApp(s, { type: 'proc.progress', task, vpid, permille }, 'debug', 'app.progress.unconnected');
}

/** A signal from the process, queued for the group (PROTOCOL §9). */
export function signalFromApp(
  s: AgentProcs, task: string, vpid: number, req: { signum: number; dest: number; arg: number; epoch: number },
): AgentProcsEffect[] {
  const request: SignalRequest = { type: 'sig.request', task, vpid, signum: req.signum, dest: req.dest, arg: req.arg, epoch: req.epoch };
  return fromApp(s, request, 'warn', 'app.signal.unconnected', { signum: req.signum });
}
