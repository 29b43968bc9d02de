// The agent's report batching (issue 16 item 3): what its process table sends the group, held
// until the driver's next event-loop turn and then given back in the order and the chunks it goes
// on the wire. Both drivers (src/daemon/proc-driver.ts, src/sim/tasks.ts) only decide WHEN to drain it
// (a later turn, never inside the agent core's step: the requests feed that core); WHAT leaves,
// in which order and how many per request, is decided here once.
//   - Signals first: a process that signals and then dies in the same turn must have its signals
//     ordered while it is still a member (spec §4.1 (c)). No signal of a turn can depend on a
//     report of the same turn: a process signals only after its mapping.
//   - Then the reports, one `proc.report` request per MAX_REPORTS_PER_REQUEST: one signature and
//     one RSN for a burst of spawns (measured, a 16-process task cost 16 requests, bench/tasks.ts),
//     and never more than the wire's list takes (src/core/wire/messages.ts).
// Pure: no clock, no I/O.
import { MAX_REPORTS_PER_REQUEST } from './constants.ts';
import { assert } from '../base/result.ts';
import type { AgentRequest, ProcReport } from './wire/messages.ts';

/** A linked process's own requests: its signals, a rollback task's checkpoint marks, a DGRP
 *  task's test reports and barrier arrivals, its progress reports, in the order it sent them. */
export type SignalRequest = Extract<AgentRequest, { type: 'sig.request' | 'rollback.mark' | 'dgrp.report' | 'dgrp.arrive' | 'proc.progress' }>;

/** What the process table has to send and the driver has not taken yet. */
export type Outbox = { signals: SignalRequest[]; reports: ProcReport[] };

export function createOutbox(): Outbox {
  return { signals: [], reports: [] };
}

const isEmpty = (o: Outbox): boolean => o.signals.length === 0 && o.reports.length === 0;

/** Queues a process's report. True when the outbox was empty: the driver must schedule one
 *  drain on a later turn (one is already scheduled otherwise). */
export function queueReport(o: Outbox, report: ProcReport): boolean {
  const first = isEmpty(o);
  o.reports.push(report);
  return first;
}

/** Queues a linked process's signal; true as for queueReport. */
export function queueSignal(o: Outbox, request: SignalRequest): boolean {
  const first = isEmpty(o);
  o.signals.push(request);
  return first;
}

/** Empties the outbox into the requests to send, in order: every signal, then the reports in
 *  chunks of MAX_REPORTS_PER_REQUEST. Emptied before the driver sends any, so what a send
 *  causes (the core may deliver a command at once) queues for a new drain. */
export function drainOutbox(o: Outbox): AgentRequest[] {
  const out: AgentRequest[] = o.signals.splice(0);
  const reports = o.reports.splice(0);
  for (let i = 0; i < reports.length; i += MAX_REPORTS_PER_REQUEST) {
    const chunk = reports.slice(i, i + MAX_REPORTS_PER_REQUEST);
    assert(chunk.length > 0 && chunk.length <= MAX_REPORTS_PER_REQUEST, 'a proc.report request holds 1..MAX_REPORTS_PER_REQUEST reports');
    out.push({ type: 'proc.report', reports: chunk });
  }
  return out;
}
