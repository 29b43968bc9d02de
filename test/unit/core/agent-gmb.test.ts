// A node agent's group message buffer (src/core/agent-gmb.ts; PROTOCOL §5.2–§5.3), stepped by
// hand on its state record: the group-ack mark over finished GSSNs, who an error report names,
// how often reports leave, and the flow control on entries a replica may open.
import { describe, expect, it } from 'vitest';
import { finish, groupRoom, noteReport, sendReports } from '../../../src/core/agent-gmb.ts';
import type { AgentState, Entry } from '../../../src/core/agent-state.ts';
import { DEFAULT_TIMING, MAX_GMB_ENTRIES } from '../../../src/core/constants.ts';
import type { CoreEffect } from '../../../src/core/node.ts';
import type { GroupCommand } from '../../../src/core/wire/messages.ts';
import { copyOf as gc, freshAgent as fresh, terminateCmd as proc } from './agent-state-fixture.ts';

/** An entry as onCopy leaves it: `copies` maps each replica to its content. */
function entry(s: AgentState, gssn: number, copies: Record<string, GroupCommand>, delivered = false): Entry {
  const e: Entry = { gssn, opener: 'r1', copies: new Map(), contents: new Map(), delivered, complete: false, firings: 0, timerAtMs: null };
  for (const [from, payload] of Object.entries(copies)) {
    const key = JSON.stringify(payload);
    e.copies.set(from, key);
    const c = e.contents.get(key);
    if (c === undefined) e.contents.set(key, { gc: gc(gssn, payload), count: 1 });
    else c.count++;
  }
  s.gmb.set(gssn, e);
  return e;
}

describe('agent group message buffer (PROTOCOL §5.3)', () => {
  it('the group-ack mark moves over a finished GSSN only once every GSSN before it is finished', () => {
    const s = fresh();
    s.awaitingCompletion.push(1, 2);
    finish(s, entry(s, 2, {}, true), 0);
    expect(s.gssnAcked).toBe(0);
    finish(s, entry(s, 1, {}, true), 0);
    expect([s.gssnAcked, s.awaitingCompletion.length, s.finished.size, s.gmb.size]).toEqual([2, 0, 0, 0]);
  });

  it('a report names the replicas whose copy differs from one two members agree on, and nobody without such a content', () => {
    const s = fresh();
    noteReport(s, 'mismatch', entry(s, 3, { r1: proc(1), r2: proc(1), r3: proc(2) }));
    noteReport(s, 'replica-timeout', entry(s, 4, { r1: proc(1) }));
    expect(s.reports.get('mismatch')).toEqual({ gssn: 3, count: 1, suspects: new Set(['r3']) });
    expect(s.reports.get('replica-timeout')).toEqual({ gssn: 4, count: 1, suspects: new Set() });
  });

  it('reports leave aggregated, as requests, at most once per ReplicaTimeout', () => {
    const s = fresh();
    noteReport(s, 'mismatch', entry(s, 3, { r1: proc(1), r2: proc(1), r3: proc(2) }));
    noteReport(s, 'mismatch', entry(s, 2, { r1: proc(1), r2: proc(1), r3: proc(2) }));
    const out: CoreEffect[] = [];
    sendReports(s, 100, out);
    expect(out.filter((e) => e.type === 'log').map((e) => e.type === 'log' && e.fields)).toEqual([{ gssn: 2, count: 2, kind: 'mismatch', suspects: ['r3'] }]);
    expect([s.errorReports, s.csnSent, s.reportAtMs]).toEqual([1, 1, 100 + DEFAULT_TIMING.replicaTimeoutMs]);
    noteReport(s, 'mismatch', entry(s, 5, { r1: proc(1), r2: proc(1), r3: proc(2) }));
    sendReports(s, 100 + DEFAULT_TIMING.replicaTimeoutMs - 1, []);
    expect(s.csnSent).toBe(1);
    sendReports(s, 100 + DEFAULT_TIMING.replicaTimeoutMs, []);
    expect(s.csnSent).toBe(2);
  });

  it('flow control: a replica may open at most MAX_GMB_ENTRIES undelivered entries', () => {
    const s = fresh();
    const body = (gssn: number) => ({ type: 'gc' as const, gc: gc(gssn, proc(gssn)) });
    s.opened.set('r1', MAX_GMB_ENTRIES - 1);
    expect(groupRoom(s, 'r1', body(10))).toBe(true);
    s.opened.set('r1', MAX_GMB_ENTRIES);
    expect(groupRoom(s, 'r1', body(10))).toBe(false);
    expect(groupRoom(s, 'r2', body(10))).toBe(true);
    entry(s, 10, {});
    expect(groupRoom(s, 'r1', body(10))).toBe(true); // a copy of an entry already open takes no room
  });
});
