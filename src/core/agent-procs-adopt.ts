// Adoption (PROTOCOL §8.6) in an agent's process table (src/core/agent-procs.ts): the processes a
// previous incarnation left running, which this one did not start. Pure: no clock, no I/O.
//
// A new agent incarnation reads the previous one's record of the processes it started
// (`recovered`), and the group's `procs.adopt` says which processes it believes run here. The
// driver checks each recovered record's liveness (pid present AND its start time unchanged,
// against pid reuse) and hands it in with the command. For each adopt entry: a live local record
// is adopted (monitored; if the group's pid is 0 it never heard of the spawn's success, so
// spawnSucceeded is reported with the real pid); otherwise the process is reported dead — pid 0:
// spawnFailed "agent restarted while spawning", else terminatedAbnormally "exited while its
// agent was down (exit status unknown)". A live local record the group does not list is an
// orphan and is killed with SIGKILL.
//
// Adopted processes are not our children: no exit status ever reaches us. The driver polls their
// liveness every tick and feeds os.exited (code and signal unknown) when one is gone; its end is
// always reported terminatedAbnormally with a null exit code — also when it was terminated on
// command, since nothing proves it ended cleanly (a plain process ends normally only with exit
// code 0 and no signal, which we cannot observe); the reason says which case it was.
import type { AdoptEntry } from './wire/messages.ts';
import {
  ADOPTED_KILL_GRACE_TICKS, keyOf, logEffect, sendReport,
  type AdoptedEntry, type AgentProcs, type AgentProcsEffect, type LocalProc, type ProcOsEvent,
} from './agent-procs-state.ts';

export const RESTARTED_WHILE_SPAWNING = 'agent restarted while spawning';
export const EXITED_WHILE_DOWN = 'exited while its agent was down (exit status unknown)';
export const ADOPTED_EXIT = 'exit status unknown (adopted after an agent restart)';
export const ADOPTED_EXIT_TERMINATED = 'exit status unknown (adopted after an agent restart; terminated on command)';
export const LINKED_ORPHANED = 'killed after an agent restart: a linked process cannot reconnect to the new agent';

/** `procs.adopt`: settles every recovered record (see the header). */
export function adoptProcs(s: AgentProcs, list: readonly AdoptEntry[], local: readonly LocalProc[], out: AgentProcsEffect[]): void {
  if (s.adoptDone) {
    // One per incarnation (sent at node.join); a second one would re-judge settled processes.
    out.push(logEffect('warn', 'procs.adopt.again', { count: list.length }));
    return;
  }
  s.adoptDone = true;
  const alive = new Map<string, LocalProc>();
  for (const l of local) if (l.alive) alive.set(keyOf(l.task, l.vpid), l);
  const listed = new Set<string>();
  for (const a of list) {
    const key = keyOf(a.task, a.vpid);
    if (listed.has(key)) continue;
    listed.add(key);
    if (s.entries.has(key)) {
      out.push(logEffect('warn', 'procs.adopt.known', { task: a.task, vpid: a.vpid }));
      continue;
    }
    adoptOne(s, a, alive.get(key), out);
  }
  for (const [key, l] of alive) {
    if (listed.has(key)) continue;
    out.push(logEffect('warn', 'proc.orphan', { task: l.task, vpid: l.vpid, pid: l.pid }));
    out.push({ type: 'kill', task: l.task, vpid: l.vpid, pid: l.pid, signal: 'SIGKILL', child: false });
  }
  s.recovered = [];
}

/** One listed process the table does not know: `mine` is its live local record, if any. */
function adoptOne(s: AgentProcs, a: AdoptEntry, mine: LocalProc | undefined, out: AgentProcsEffect[]): void {
  if (mine !== undefined && a.linked) {
    // Its library's connection died with the old agent and cannot be re-established: a
    // member that can neither hear nor send signals would stall its task's group requests.
    // Killed now, its end is reported by the liveness poll, and the task is told.
    s.serial += 1;
    s.entries.set(keyOf(a.task, a.vpid), {
      kind: 'adopted', ref: { task: a.task, vpid: a.vpid, serial: s.serial }, pid: mine.pid, terminates: 2, killInTicks: null, endReason: LINKED_ORPHANED,
    });
    out.push(logEffect('warn', 'proc.adopted.linked-killed', { task: a.task, vpid: a.vpid, pid: mine.pid }));
    out.push({ type: 'kill', task: a.task, vpid: a.vpid, pid: mine.pid, signal: 'SIGKILL', child: false });
    if (a.pid === 0) sendReport(s, out, a.task, a.vpid, 'spawnSucceeded', mine.pid, null, null, 'running (adopted after an agent restart)');
  } else if (mine !== undefined) {
    s.serial += 1;
    s.entries.set(keyOf(a.task, a.vpid), { kind: 'adopted', ref: { task: a.task, vpid: a.vpid, serial: s.serial }, pid: mine.pid, terminates: 0, killInTicks: null, endReason: null });
    out.push(logEffect('info', 'proc.adopted', { task: a.task, vpid: a.vpid, pid: mine.pid, groupPid: a.pid }));
    if (a.pid === 0) sendReport(s, out, a.task, a.vpid, 'spawnSucceeded', mine.pid, null, null, 'running (adopted after an agent restart)');
    else if (a.pid !== mine.pid) out.push(logEffect('warn', 'proc.adopted.pid-differs', { task: a.task, vpid: a.vpid, pid: mine.pid, groupPid: a.pid }));
  } else if (a.pid === 0) {
    sendReport(s, out, a.task, a.vpid, 'spawnFailed', 0, null, null, RESTARTED_WHILE_SPAWNING);
  } else {
    sendReport(s, out, a.task, a.vpid, 'terminatedAbnormally', a.pid, null, null, EXITED_WHILE_DOWN);
  }
}

/** `proc.terminate` of an adopted process: SIGTERM, then SIGKILL (by itself after the grace, or
 *  at the next terminate). */
export function terminateAdopted(entry: AdoptedEntry, out: AgentProcsEffect[]): void {
  entry.terminates += 1;
  const signal = entry.terminates === 1 ? 'SIGTERM' : 'SIGKILL';
  // The group may have sent its terminates to the dead predecessor already, so the escalation
  // cannot wait for the next one (it may be the last, T17): SIGKILL follows by itself.
  entry.killInTicks = signal === 'SIGTERM' ? ADOPTED_KILL_GRACE_TICKS : null;
  out.push({ type: 'kill', task: entry.ref.task, vpid: entry.ref.vpid, pid: entry.pid, signal, child: false });
}

/** What the OS said about an adopted process: only its end is observable. */
export function onAdoptedEvent(s: AgentProcs, entry: AdoptedEntry, event: ProcOsEvent, out: AgentProcsEffect[]): void {
  if (event.type !== 'os.exited') return;
  s.entries.delete(keyOf(entry.ref.task, entry.ref.vpid));
  const reason = entry.endReason ?? (entry.terminates > 0 ? ADOPTED_EXIT_TERMINATED : ADOPTED_EXIT);
  sendReport(s, out, entry.ref.task, entry.ref.vpid, 'terminatedAbnormally', entry.pid, null, null, reason);
}

/** One task tick of an adopted process: the SIGKILL after a SIGTERM's grace. */
export function tickAdopted(entry: AdoptedEntry, out: AgentProcsEffect[]): void {
  if (entry.killInTicks !== null && --entry.killInTicks <= 0) {
    entry.killInTicks = null;
    out.push({ type: 'kill', task: entry.ref.task, vpid: entry.ref.vpid, pid: entry.pid, signal: 'SIGKILL', child: false });
  }
}
