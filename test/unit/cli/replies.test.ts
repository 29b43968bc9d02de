// Which replies and views the operator believes (cli/replies.ts; the requests in cli/op-client.ts): f + 1 = 2 replicas must
// report the same thing, so one faulty replica cannot lie to the operator (PROTOCOL §8.1).
import { describe, expect, it } from 'vitest';
import { newNonce } from '../../../cli/op-client.ts';
import { parseClusterView, pickClusterView, pickOutcome, toViewAnswer, viewSettled, type OpReply } from '../../../cli/replies.ts';
import type { ReplicaStatus } from '../../../src/core/status.ts';
import { answer, task, view } from './fixtures.ts';

const replies = (entries: [string, OpReply][]) => new Map(entries);

describe('pickOutcome: the outcome two replicas report identically', () => {
  it('accepts two matching replies and names who agreed', () => {
    const r = pickOutcome(replies([['r1', { rsn: 7, ok: true, text: 't3' }], ['r2', { rsn: 7, ok: true, text: 't3' }]]));
    expect(r).toEqual({ rsn: 7, ok: true, text: 't3', agreedBy: ['r1', 'r2'] });
  });

  it('does not accept one reply alone, however plausible', () => {
    expect(pickOutcome(replies([['r1', { rsn: 7, ok: true, text: 't3' }]]))).toBeNull();
  });

  it('a faulty replica that lies is outvoted by the two that agree', () => {
    const r = pickOutcome(replies([
      ['r1', { rsn: 7, ok: true, text: 't99' }],
      ['r2', { rsn: 7, ok: true, text: 't3' }],
      ['r3', { rsn: 7, ok: true, text: 't3' }],
    ]));
    expect(r?.text).toBe('t3');
    expect(r?.agreedBy).toEqual(['r2', 'r3']);
  });

  it('replies that differ in rsn, ok or text do not agree', () => {
    expect(pickOutcome(replies([['r1', { rsn: 7, ok: true, text: 't3' }], ['r2', { rsn: 8, ok: true, text: 't3' }]]))).toBeNull();
    expect(pickOutcome(replies([['r1', { rsn: 7, ok: true, text: 't3' }], ['r2', { rsn: 7, ok: false, text: 't3' }]]))).toBeNull();
    expect(pickOutcome(replies([['r1', { rsn: 7, ok: false, text: 'no task t3' }], ['r2', { rsn: 7, ok: false, text: 'no task t4' }]]))).toBeNull();
  });

  it('a refusal two replicas agree on is an outcome too', () => {
    const r = pickOutcome(replies([['r2', { rsn: 9, ok: false, text: 'no task t8' }], ['r3', { rsn: 9, ok: false, text: 'no task t8' }]]));
    expect(r).toMatchObject({ ok: false, text: 'no task t8' });
  });
});

describe('newNonce', () => {
  it('is 32 lowercase hex digits, fresh each time', () => {
    const a = newNonce();
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(newNonce()).not.toBe(a);
  });
});

describe('pickClusterView: the view of two agreeing replicas', () => {
  it('takes the highest RSN two replicas agree on, shown from the primary when it is one of them', () => {
    const p = pickClusterView([answer('r1', 10), answer('r2', 10), answer('r3', 9)]);
    expect(p).toMatchObject({ rsn: 10, from: 'r1', agreedBy: ['r1', 'r2'], warning: null });
  });

  it('prefers an agreeing pair over a lone replica further ahead', () => {
    const p = pickClusterView([answer('r1', 12), answer('r2', 10), answer('r3', 10)]);
    expect(p).toMatchObject({ rsn: 10, from: 'r2', agreedBy: ['r2', 'r3'], warning: null });
  });

  it('an agreeing pair that two replicas are past is stale: a condemned replica and a lagging one agree on an old state while the members answer a tick apart', () => {
    const p = pickClusterView([answer('r3', 9), answer('r4', 9), answer('r1', 12, { role: 'primary' }), answer('r2', 11, { role: 'backup' })]);
    expect(p).toMatchObject({ from: 'r1', rsn: 12, agreedBy: ['r1'] });
    expect(p?.warning).toMatch(/^views differ; showing r1's/);
  });

  it('equal RSN but another digest is no agreement', () => {
    const p = pickClusterView([answer('r1', 10), answer('r2', 10, { digest: 'other' })]);
    expect(p?.warning).toMatch(/^views differ; showing r1's/);
    expect(p?.agreedBy).toEqual(['r1']);
  });

  it('a replica with the right digest but a forged task list does not agree', () => {
    const forged = view({ tasks: [task('t1', { state: 'terminatedNormally', outcome: 'normal' })] });
    const p = pickClusterView([answer('r1', 10, { view: forged }), answer('r2', 10), answer('r3', 9)]);
    expect(p?.warning).toMatch(/^views differ; showing r1's \(r1 at RSN 10, r2 at RSN 10, r3 at RSN 9\)/);
    const q = pickClusterView([answer('r1', 10), answer('r2', 10, { view: forged }), answer('r3', 10)]);
    expect(q).toMatchObject({ from: 'r1', agreedBy: ['r1', 'r3'], warning: null });
  });

  it('journals (wall-clock events) may differ between agreeing replicas', () => {
    const other = view({ events: [{ atMs: 99, rsn: 5, task: 't1', vpid: null, text: 't1 submitted: 2 × sleep' }] });
    const p = pickClusterView([answer('r1', 10), answer('r2', 10, { view: other })]);
    expect(p).toMatchObject({ from: 'r1', warning: null });
    expect(p?.view.events[0]?.atMs).toBe(0);
  });

  it('with no agreement, falls back to the primary the answers name', () => {
    const p = pickClusterView([answer('r2', 11, { primary: 'r3' }), answer('r3', 10, { role: 'primary', primary: 'r3' }), answer('r1', 9, { role: 'backup', primary: 'r3' })]);
    expect(p).toMatchObject({ from: 'r3', rsn: 10 });
    expect(p?.warning).toMatch(/^views differ; showing r3's/);
  });

  it('with no agreement and no primary answering, shows the most advanced replica', () => {
    const p = pickClusterView([answer('r2', 11), answer('r3', 12)]);
    expect(p).toMatchObject({ from: 'r3', rsn: 12 });
    expect(p?.warning).toMatch(/views differ; showing r3's/);
  });

  it('one answer alone is shown, said to be unconfirmed', () => {
    const p = pickClusterView([answer('r2', 11)]);
    expect(p?.from).toBe('r2');
    expect(p?.warning).toMatch(/only r2 answered.*unconfirmed/);
  });

  it('no answers: nothing to show', () => {
    expect(pickClusterView([])).toBeNull();
  });
});

describe('viewSettled: stop waiting once the rest cannot change the answer', () => {
  it('two of three agree: settled, whatever the third would say', () => {
    expect(viewSettled([answer('r1', 10), answer('r2', 10)], 1)).toBe(true);
  });

  it('two answers that disagree: wait for the third', () => {
    expect(viewSettled([answer('r1', 10), answer('r2', 11)], 1)).toBe(false);
  });

  it('one answer: wait', () => {
    expect(viewSettled([answer('r1', 10)], 2)).toBe(false);
  });

  it('everyone answered: settled', () => {
    expect(viewSettled([answer('r1', 10), answer('r2', 11), answer('r3', 12)], 0)).toBe(true);
    expect(viewSettled([], 0)).toBe(true);
  });

  it('with four replicas, a pair at a lower RSN is not final while a higher one may still pair up', () => {
    expect(viewSettled([answer('r1', 10), answer('r2', 10), answer('r3', 11)], 1)).toBe(false);
    expect(viewSettled([answer('r1', 10), answer('r2', 10), answer('r3', 9)], 1)).toBe(true);
  });
});

describe('parseClusterView: what a replica may send', () => {
  it('accepts a well-formed view', () => {
    expect(parseClusterView(JSON.parse(JSON.stringify(view())))).toEqual(view());
  });

  it('accepts every node state a replica reports, draining included (PROTOCOL §10.12)', () => {
    for (const state of ['joining', 'up', 'failed', 'draining'] as const) {
      const v = { ...view(), nodes: [{ agent: 'a1', node: 'n1', slots: 4, used: 0, state, inc: 1 }] };
      expect(parseClusterView(JSON.parse(JSON.stringify(v))), state).toEqual(v);
    }
  });

  it('refuses a missing view, a wrong type anywhere, an unknown node state', () => {
    expect(parseClusterView(undefined)).toBeNull();
    expect(parseClusterView({ ...view(), tick: '3' })).toBeNull();
    expect(parseClusterView({ ...view(), tasks: [{ ...task('t1'), procs: [{ vpid: 0 }] }] })).toBeNull();
    expect(parseClusterView({ ...view(), nodes: [{ agent: 'a1', node: 'n1', slots: 4, used: 0, state: 'bored', inc: 1 }] })).toBeNull();
    expect(parseClusterView({ ...view(), tasks: [{ ...task('t1'), outcome: 'meh' }] })).toBeNull();
    expect(parseClusterView({ ...view(), events: 'none' })).toBeNull();
  });

  it('an event kind this release does not know (a newer replica\'s) reads as an untagged event; a kind that is not `area.what` is refused', () => {
    const ev = { atMs: 1, rsn: 2, task: null, vpid: null, text: 'replica r4 joined', subject: 'r4' };
    const known = { ...ev, kind: 'replica.joined' };
    const v = { ...view(), events: [known, { ...ev, kind: 'replica.warped' }, ev] };
    expect(parseClusterView(JSON.parse(JSON.stringify(v)))?.events).toEqual([known, ev, ev]);
    for (const kind of ['Replica.joined', 'replica', 'x'.repeat(40), 7]) {
      expect(parseClusterView({ ...view(), events: [{ ...ev, kind }] }), String(kind)).toBeNull();
    }
  });

  it('toViewAnswer: a status without a view (a replica that predates tasks) has none', () => {
    const status = { id: 'r1', role: 'primary', primary: 'r1', rsn: 4, digest: 'ab' } as unknown as ReplicaStatus;
    expect(toViewAnswer(status)).toBeNull();
    expect(toViewAnswer({ ...status, cluster: view() } as ReplicaStatus)).toMatchObject({ id: 'r1', rsn: 4, digest: 'ab' });
  });
});
