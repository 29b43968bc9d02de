// The agent's report batching (src/core/agent-outbox.ts), stepped by hand: what the process
// table queued leaves as the group receives it — signals first, then the reports in requests of
// at most MAX_REPORTS_PER_REQUEST — and the driver is told to schedule a drain exactly when the
// outbox stops being empty. Then the same through the table (src/core/agent-procs.ts): a report
// is a `report` effect followed by `flush` only for the first of a turn.
import { describe, expect, it } from 'vitest';
import { createOutbox, drainOutbox, queueReport, queueSignal, type SignalRequest } from '../../../src/core/agent-outbox.ts';
import { commandProcs } from '../../../src/core/agent-procs.ts';
import { createAgentProcs } from '../../../src/core/agent-procs-state.ts';
import { MAX_REPORTS_PER_REQUEST } from '../../../src/core/constants.ts';
import { agentRequest, type ProcReport } from '../../../src/core/wire/messages.ts';

const report = (vpid: number): ProcReport => ({
  task: 't1', vpid, kind: 'terminatedAbnormally', pid: 100 + vpid, exitCode: null, signal: 'SIGKILL', reason: 'killed', endpoint: '',
});
const signal = (vpid: number): SignalRequest => ({ type: 'sig.request', task: 't1', vpid, signum: 20, dest: 0, arg: vpid, epoch: 1 });

describe('agent outbox', () => {
  it('asks for one drain per turn: only the item that finds it empty says so', () => {
    const o = createOutbox();
    expect(queueReport(o, report(0))).toBe(true);
    expect(queueSignal(o, signal(1))).toBe(false);
    expect(queueReport(o, report(2))).toBe(false);
    drainOutbox(o);
    expect(queueSignal(o, signal(3))).toBe(true);
  });

  it('gives the signals first, in their order, then the reports in one request (spec §4.1 (c))', () => {
    const o = createOutbox();
    queueReport(o, report(0));
    queueSignal(o, signal(1));
    queueReport(o, report(2));
    queueSignal(o, signal(3));
    expect(drainOutbox(o)).toEqual([signal(1), signal(3), { type: 'proc.report', reports: [report(0), report(2)] }]);
    expect(drainOutbox(o)).toEqual([]);
  });

  it('cuts the reports into requests of MAX_REPORTS_PER_REQUEST, each one the wire accepts', () => {
    const o = createOutbox();
    const all = Array.from({ length: 2 * MAX_REPORTS_PER_REQUEST + 1 }, (_, i) => report(i));
    for (const r of all) queueReport(o, r);
    const sent = drainOutbox(o);
    expect(sent.map((r) => (r.type === 'proc.report' ? r.reports.length : 0))).toEqual([MAX_REPORTS_PER_REQUEST, MAX_REPORTS_PER_REQUEST, 1]);
    expect(sent.flatMap((r) => (r.type === 'proc.report' ? r.reports : []))).toEqual(all);
    for (const r of sent) expect(agentRequest.dec(agentRequest.enc(r), 'req').ok).toBe(true);
  });

  it('is empty before anything is sent: what a send causes queues for a new drain', () => {
    const o = createOutbox();
    queueReport(o, report(0));
    const sent = drainOutbox(o);
    expect(sent).toHaveLength(1);
    expect(queueReport(o, report(1))).toBe(true);
    expect(drainOutbox(o)).toEqual([{ type: 'proc.report', reports: [report(1)] }]);
  });

  it('through the process table: each report is a `report` effect, and the first of a turn is followed by `flush`', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: 4, recovered: [{ task: 't1', vpid: 0, pid: 100 }, { task: 't1', vpid: 1, pid: 101 }] });
    const out = commandProcs(procs, {
      type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid: 100, linked: false }, { task: 't1', vpid: 1, pid: 0, linked: false }],
    }, []);
    expect(out.filter((e) => e.type === 'report' || e.type === 'flush').map((e) => e.type)).toEqual(['report', 'flush', 'report']);
    expect(drainOutbox(procs.outbox)).toEqual([{
      type: 'proc.report',
      reports: [
        { task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 100, exitCode: null, signal: null, reason: 'exited while its agent was down (exit status unknown)', endpoint: '' },
        { task: 't1', vpid: 1, kind: 'spawnFailed', pid: 0, exitCode: null, signal: null, reason: 'agent restarted while spawning', endpoint: '' },
      ],
    }]);
  });
});
