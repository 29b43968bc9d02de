// The group as the operator sees it (cli/replica-group.ts; docs/PROTOCOL.md §10): the current
// view is the one two replicas in service report identically (f = 1: one may lie), retired ids
// and the replacement are read from the replicas' diagnosis histories and journals.
import { describe, expect, it } from 'vitest';
import { collectCondemnations, groupHistory, pickGroup, PortPlacement, statusSettled } from '../../../cli/replica-group.ts';
import type { ReplicaStatus } from '../../../src/core/status.ts';
import { condemned, config, journal, replica } from './status-fixtures.ts';

const m = config().membership;
const v0 = { view: 0, members: ['r1', 'r2', 'r3'], primary: 'r1' };
const v1 = { view: 1, members: ['r1', 'r2'], primary: 'r1' };
const v2 = { view: 2, members: ['r1', 'r2', 'r4'], primary: 'r1' };
const byId = (...ss: ReplicaStatus[]) => new Map(ss.map((s) => [s.id, s]));

describe('pickGroup: the current view, members and primary', () => {
  it('the initial group while nothing changed', () => {
    const g = pickGroup(m, [replica('r1', v0), replica('r2', v0), replica('r3', v0)]);
    expect(g).toEqual({ view: 0, members: ['r1', 'r2', 'r3'], primary: 'r1', confirmedBy: ['r1', 'r2', 'r3'], basis: 'agreed', ahead: [] });
  });

  it('follows a replacement: the highest view two serving replicas agree on', () => {
    const g = pickGroup(m, [replica('r1', v2), replica('r2', v2), replica('r4', v2)]);
    expect(g).toMatchObject({ view: 2, members: ['r1', 'r2', 'r4'], primary: 'r1', basis: 'agreed' });
  });

  it('one replica alone claiming a higher view is not believed: it is listed as ahead', () => {
    const lie = { view: 9, members: ['r4', 'r7', 'r8'], primary: 'r4' };
    const g = pickGroup(m, [replica('r1', v2), replica('r2', v2), replica('r4', lie)]);
    expect(g).toMatchObject({ view: 2, members: ['r1', 'r2', 'r4'], basis: 'agreed' });
    expect(g.ahead).toEqual([{ id: 'r4', ...lie }]);
  });

  it('a replacement still installing, or a retired replica, does not speak for the group', () => {
    const installing = replica('r4', v1, { phase: 'installing' });
    const retired = replica('r3', { view: 5, members: ['r3', 'r5', 'r6'], primary: 'r3' }, { phase: 'retired' });
    const g = pickGroup(m, [replica('r1', v1), replica('r2', v1), installing, retired]);
    expect(g).toMatchObject({ view: 1, members: ['r1', 'r2'], confirmedBy: ['r1', 'r2'], basis: 'agreed', ahead: [] });
  });

  it('a syncing member still speaks for its view (a primary change under way, PROTOCOL §10.5)', () => {
    const g = pickGroup(m, [replica('r2', v2, { phase: 'syncing' }), replica('r4', v2, { phase: 'syncing' })]);
    expect(g).toMatchObject({ view: 2, basis: 'agreed', confirmedBy: ['r2', 'r4'] });
  });

  it('without two that agree: the highest view one replica reports, unconfirmed', () => {
    const g = pickGroup(m, [replica('r1', v1), replica('r2', v2)]);
    expect(g).toMatchObject({ view: 2, members: ['r1', 'r2', 'r4'], confirmedBy: ['r2'], basis: 'unconfirmed' });
  });

  it('with no replica in service: the initial group of cluster.json, assumed', () => {
    expect(pickGroup(m, [])).toEqual({ view: null, members: ['r1', 'r2', 'r3'], primary: 'r1', confirmedBy: [], basis: 'assumed', ahead: [] });
  });
});

describe('statusSettled: when `trine status` may stop waiting', () => {
  const answered = byId(replica('r1', v2), replica('r2', v2), replica('r4', v2));

  it('a retired replica that is not running is not waited for', () => {
    expect(statusSettled(m, answered, ['r3'], new Set(['r1', 'r2', 'r4']))).toBe(true);
  });

  it('a member is waited for while its daemon runs (it may be slow or hung)', () => {
    const two = byId(replica('r1', v2), replica('r2', v2));
    expect(statusSettled(m, two, ['r4'], new Set(['r1', 'r2', 'r4']))).toBe(false);
  });

  it('a member whose pid file names a dead process is not waited for', () => {
    const two = byId(replica('r1', v2), replica('r2', v2));
    expect(statusSettled(m, two, ['r4'], new Set(['r1', 'r2']), new Set(['r4']))).toBe(true);
  });

  it('a member with no pid file at all (daemons started elsewhere) is waited for', () => {
    const two = byId(replica('r1', v2), replica('r2', v2));
    expect(statusSettled(m, two, ['r4'], new Set())).toBe(false);
  });

  it('until two replicas agree on the group nothing is settled', () => {
    expect(statusSettled(m, byId(replica('r1', v2)), ['r3'], new Set(['r1']))).toBe(false);
  });
});

describe('groupHistory: retired ids, the replacement, condemnations', () => {
  it('a condemned backup replaced by a spare: retired with the reason and accusers, the spare on its node', () => {
    const events = journal([10, 'replica r3 condemned (silent); group r1,r2, primary r1, view 1'], [10, 'replica r4 to start on n4'], [23, 'replica r4 joined; group r1,r2,r4, view 2']);
    const r1 = replica('r1', v2, { diagnosis: [condemned('r3', 'r1,r2', 0, 1_000)], cluster: events });
    const r2 = replica('r2', v2, { diagnosis: [condemned('r3', 'r1,r2', 0, 1_003)], cluster: events });
    const r4 = replica('r4', v2);
    const answers = byId(r1, r2, r4);
    const h = groupHistory(m, pickGroup(m, answers.values()), answers, new Set(['r1', 'r2', 'r4']));
    expect(h.nodes.get('r4')).toBe('n4');
    expect(h.replacement).toBeNull();
    expect(h.retired).toEqual([{ id: 'r3', node: 'n3', how: 'condemned', reason: 'silent', by: ['r1', 'r2'], view: 0, answered: false }]);
    expect(h.condemnations).toEqual([{ view: 0, target: 'r3', reason: 'silent', by: ['r1', 'r2'], atMs: 1_000, recordedBy: ['r1', 'r2'] }]);
  });

  it('the replacement under way: commanded (not answering), then installing', () => {
    const events = journal([10, 'replica r3 condemned (silent); group r1,r2, primary r1, view 1'], [10, 'replica r4 to start on n4']);
    const serving = [replica('r1', v1, { cluster: events }), replica('r2', v1, { cluster: events })];
    const commanded = byId(...serving);
    const h1 = groupHistory(m, pickGroup(m, commanded.values()), commanded, new Set(['r1', 'r2']));
    expect(h1.replacement).toEqual({ id: 'r4', node: 'n4', member: false, phase: 'starting' });
    expect(h1.retired.map((r) => r.id)).toEqual(['r3']);
    expect(h1.retired[0]).toMatchObject({ how: 'condemned', reason: 'silent', by: [] });

    const installing = byId(...serving, replica('r4', v1, { phase: 'installing' }));
    const h2 = groupHistory(m, pickGroup(m, installing.values()), installing, new Set(['r1', 'r2', 'r4']));
    expect(h2.replacement).toEqual({ id: 'r4', node: 'n4', member: false, phase: 'installing' });
    expect(h2.retired.map((r) => r.id)).toEqual(['r3']);
  });

  it('a replacement that did not start in time is retired as abandoned', () => {
    const events = journal(
      [10, 'replica r3 condemned (silent); group r1,r2, primary r1, view 1'], [10, 'replica r4 to start on n4'],
      [300, 'replica r4 did not start on n4: abandoned'], [300, 'replica r5 to start on n3'],
    );
    const answers = byId(replica('r1', v1, { cluster: events }), replica('r2', v1, { cluster: events }));
    const h = groupHistory(m, pickGroup(m, answers.values()), answers, new Set(['r1', 'r2']));
    expect(h.replacement).toMatchObject({ id: 'r5', node: 'n3', phase: 'starting' });
    expect(h.retired.find((r) => r.id === 'r4')).toMatchObject({ how: 'abandoned', reason: 'did not start on n4', node: 'n4' });
  });

  it('ids left the group with no record of why are still retired', () => {
    const v4 = { view: 4, members: ['r2', 'r4', 'r5'], primary: 'r2' };
    const answers = byId(replica('r2', v4), replica('r4', v4), replica('r5', v4));
    const h = groupHistory(m, pickGroup(m, answers.values()), answers, new Set(['r2', 'r4', 'r5']));
    expect(h.retired.map((r) => [r.id, r.how])).toEqual([['r1', 'retired'], ['r3', 'retired']]);
  });

  it('with the group unknown, nothing is called retired', () => {
    const h = groupHistory(m, pickGroup(m, []), new Map(), new Set());
    expect(h).toMatchObject({ retired: [], replacement: null, condemnations: [] });
  });
});

describe('collectCondemnations', () => {
  it('one entry per view and target, merged across the replicas that recorded it, oldest first', () => {
    const c = collectCondemnations([
      { id: 'r2', diagnosis: [condemned('r3', 'r1,r2', 0, 50), condemned('r1', 'r2,r4', 2, 900)] },
      { id: 'r4', diagnosis: [condemned('r1', 'r2,r4', 2, 880), { ...condemned('r1', '', 2), kind: 'accused' }] },
    ]);
    expect(c).toEqual([
      { view: 0, target: 'r3', reason: 'silent', by: ['r1', 'r2'], atMs: 50, recordedBy: ['r2'] },
      { view: 2, target: 'r1', reason: 'silent', by: ['r2', 'r4'], atMs: 880, recordedBy: ['r2', 'r4'] },
    ]);
  });
});

describe('PortPlacement: where the members listen, once two replies agree (PROTOCOL §10.6)', () => {
  it('one reply moves nothing; a second that agrees does, once; the configured port is a place too', () => {
    const p = new PortPlacement();
    expect(p.vote('r1', ['r1', 'r2', 'r5'], [{ id: 'r5', port: 41_000 }])).toEqual([]);
    expect(p.has('r5')).toBe(false);
    expect(p.vote('r2', ['r1', 'r2', 'r5'], [{ id: 'r5', port: 41_000 }])).toEqual([{ id: 'r1', port: 0 }, { id: 'r2', port: 0 }, { id: 'r5', port: 41_000 }]);
    expect(p.vote('r5', ['r1', 'r2', 'r5'], [{ id: 'r5', port: 41_000 }])).toEqual([]);
    expect(p.has('r5')).toBe(true);
  });

  it('a faulty replica alone can neither move a member nor keep one from moving; its latest word is all that counts', () => {
    const p = new PortPlacement();
    // r2 (faulty) says r1 and r3 moved; r1 and r3 say nobody did.
    p.vote('r2', ['r1', 'r2', 'r3'], [{ id: 'r1', port: 9 }, { id: 'r3', port: 9 }]);
    expect(p.vote('r1', ['r1', 'r2', 'r3'], [])).toEqual([{ id: 'r2', port: 0 }]); // r2's own place, on which they agree
    expect(p.vote('r3', ['r1', 'r2', 'r3'], [])).toEqual([{ id: 'r1', port: 0 }, { id: 'r3', port: 0 }]);
    // r2 repeating itself is one voice, not two.
    expect(p.vote('r2', ['r1', 'r2', 'r3'], [{ id: 'r1', port: 9 }])).toEqual([]);
    // Two that agree on a new port for r3 (it was replaced on another port) move it.
    p.vote('r1', ['r1', 'r2', 'r3'], [{ id: 'r3', port: 41_001 }]);
    expect(p.vote('r3', ['r1', 'r2', 'r3'], [{ id: 'r3', port: 41_001 }])).toEqual([{ id: 'r3', port: 41_001 }]);
  });
});
