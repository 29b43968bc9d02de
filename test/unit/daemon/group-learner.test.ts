// How a new agent incarnation learns the group (docs/PROTOCOL.md §10.7, src/daemon/group-learner.ts):
// it asks the pool on its own transport, takes only its own replies out of verified frames, and
// takes a group only when two replicas report it alike. One faulty replica cannot choose it.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Frame, Item } from '../../../src/core/wire/messages.ts';
import { agreedGroup, parseGroupOf, startGroupLearner, type LearntGroup } from '../../../src/daemon/group-learner.ts';

const POOL = ['r1', 'r2', 'r3', 'r4', 'r5'];
const NONCE = 77;

const statusJson = (id: string, view: number, primary: string, members: string[]) =>
  JSON.stringify({ id, role: id === primary ? 'primary' : 'backup', view, primary, members, phase: 'serving', rsn: 3 });
const reply = (from: string, json: string, nonce = NONCE): Frame => ({ from, to: 'a1', items: [{ type: 'status.reply', nonce, json }] });

function learner(waitMs = 60_000) {
  const sent: { to: string; item: Item }[] = [];
  const learnt: LearntGroup[] = [];
  const logs: string[] = [];
  const l = startGroupLearner({
    pool: POOL, send: (to, item) => sent.push({ to, item }), onLearnt: (g) => learnt.push(g),
    log: (_level, event) => logs.push(event), nonce: () => NONCE, queryMs: 300, waitMs,
  });
  return { l, sent, learnt, logs };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('parseGroupOf: what the agent takes from a replica\'s status reply', () => {
  it('takes view, primary and members of a reply that names its sender', () => {
    expect(parseGroupOf(statusJson('r2', 2, 'r2', ['r2', 'r3', 'r7']), 'r2')).toEqual({ view: 2, primary: 'r2', replicas: ['r2', 'r3', 'r7'], ports: [], added: [] });
  });

  it('takes the members\' moved ports (PROTOCOL §10.6); a malformed list makes the reply nothing', () => {
    const base = { id: 'r2', view: 2, primary: 'r2', members: ['r2', 'r3', 'r7'] };
    expect(parseGroupOf(JSON.stringify({ ...base, ports: [{ id: 'r7', port: 41_234 }] }), 'r2')?.ports).toEqual([{ id: 'r7', port: 41_234 }]);
    for (const ports of [[{ id: 'r7', port: 0 }], [{ id: 'r7', port: 70_000 }], [{ id: 7, port: 4 }], 'r7:4', [null]]) {
      expect(parseGroupOf(JSON.stringify({ ...base, ports }), 'r2')).toBeNull();
    }
  });

  it('takes the added members\' keys (PROTOCOL §10.12); a bad key, a bad address or a key of a non-member makes the reply nothing', () => {
    const base = { id: 'r2', view: 2, primary: 'r2', members: ['r2', 'r3', 'r12'] };
    const r12 = { id: 'r12', node: 'n5', address: '10.0.0.15', port: 7402, publicKey: '0a'.repeat(32) };
    expect(parseGroupOf(JSON.stringify({ ...base, added: [r12] }), 'r2')?.added).toEqual([{ ...r12, publicKey: new Uint8Array(32).fill(10) }]);
    for (const added of [
      [{ ...r12, publicKey: '0a'.repeat(31) }], [{ ...r12, publicKey: 'zz'.repeat(32) }], [{ ...r12, address: 'a b' }], [{ ...r12, port: 0 }],
      [{ ...r12, id: 'r13' }], [null], 'r12', [r12, r12, r12, r12, r12],
    ]) expect(parseGroupOf(JSON.stringify({ ...base, added }), 'r2'), JSON.stringify(added)).toBeNull();
  });

  it('is total: not JSON, another sender, a bad view, a primary outside the members, members not strings → null', () => {
    for (const json of [
      'not json', '[]', 'null', '{}',
      statusJson('r3', 2, 'r2', ['r2', 'r3']),
      JSON.stringify({ id: 'r2', view: -1, primary: 'r2', members: ['r2'] }),
      JSON.stringify({ id: 'r2', view: 1.5, primary: 'r2', members: ['r2'] }),
      JSON.stringify({ id: 'r2', view: 1, primary: 'r9', members: ['r2', 'r3'] }),
      JSON.stringify({ id: 'r2', view: 1, primary: 'r2', members: ['r2', 3] }),
      JSON.stringify({ id: 'r2', view: 1, primary: 'r2', members: 'r2' }),
    ]) expect(parseGroupOf(json, 'r2'), json).toBeNull();
  });
});

describe('agreedGroup: two replicas alike, the highest such', () => {
  const g = (view: number, primary: string, replicas: string[]): LearntGroup => ({ view, primary, replicas, ports: [], added: [] });

  it('two reports that differ only in an added member\'s key choose nothing: one faulty replica cannot give a member its own key', () => {
    const r12 = { id: 'r12', node: 'n5', address: '10.0.0.15', port: 7402, publicKey: new Uint8Array(32).fill(1) };
    const a: LearntGroup = { view: 3, primary: 'r2', replicas: ['r2', 'r3', 'r12'], ports: [], added: [r12] };
    expect(agreedGroup([a, { ...a, added: [{ ...r12, publicKey: new Uint8Array(32).fill(2) }] }])).toBeUndefined();
    expect(agreedGroup([a, { ...a, added: [{ ...r12, port: 7401 }] }])).toBeUndefined();
    expect(agreedGroup([a, { ...a, added: [{ ...r12 }] }])).toEqual(a);
  });

  it('one report alone, or two that differ in anything, choose nothing', () => {
    expect(agreedGroup([g(3, 'r2', ['r2', 'r3', 'r7'])])).toBeUndefined();
    expect(agreedGroup([g(3, 'r2', ['r2', 'r3', 'r7']), g(3, 'r3', ['r2', 'r3', 'r7'])])).toBeUndefined();
    expect(agreedGroup([g(3, 'r2', ['r2', 'r3', 'r7']), g(3, 'r2', ['r2', 'r3', 'r8'])])).toBeUndefined();
    expect(agreedGroup([g(3, 'r2', ['r2', 'r3', 'r7']), g(4, 'r2', ['r2', 'r3', 'r7'])])).toBeUndefined();
  });

  it('a lying replica\'s higher view does not win over two that agree', () => {
    expect(agreedGroup([g(2, 'r2', ['r2', 'r3', 'r7']), g(9, 'r1', ['r1', 'r8', 'r9']), g(2, 'r2', ['r2', 'r3', 'r7'])]))
      .toEqual(g(2, 'r2', ['r2', 'r3', 'r7']));
  });
});

describe('startGroupLearner: the agent\'s question on its own transport', () => {
  it('asks the whole pool at once and again every 300 ms until two agree, then stops asking', () => {
    vi.useFakeTimers();
    const { l, sent, learnt } = learner();
    expect(sent.map((s) => s.to)).toEqual(POOL);
    // A replica answers status on a fresh challenge only (PROTOCOL §7): the learner asks for one.
    expect(sent.every((s) => s.item.type === 'challenge.ask' && s.item.nonce === NONCE)).toBe(true);
    vi.advanceTimersByTime(300);
    expect(sent).toHaveLength(2 * POOL.length);
    l.intercept(reply('r2', statusJson('r2', 2, 'r2', ['r2', 'r3', 'r7'])));
    expect(learnt).toEqual([]);
    l.intercept(reply('r3', statusJson('r3', 2, 'r2', ['r2', 'r3', 'r7'])));
    expect(learnt).toEqual([{ view: 2, primary: 'r2', replicas: ['r2', 'r3', 'r7'], ports: [], added: [] }]);
    vi.advanceTimersByTime(3_000);
    expect(sent).toHaveLength(2 * POOL.length);
    // A late third reply changes nothing.
    l.intercept(reply('r7', statusJson('r7', 2, 'r2', ['r2', 'r3', 'r7'])));
    expect(learnt).toHaveLength(1);
  });

  it('issue 14 item 7: answers a replica\'s challenge for its nonce with a status query carrying it, at once', () => {
    vi.useFakeTimers();
    const { l, sent } = learner();
    sent.length = 0;
    const challenge = { inc: 5, serial: 3, atMs: 1_000 };
    expect(l.intercept({ from: 'r2', to: 'a1', items: [{ type: 'challenge', nonce: NONCE, challenge }] })).toBeNull();
    expect(sent).toEqual([{ to: 'r2', item: { type: 'status.query', nonce: NONCE, challenge } }]);
    // Another nonce's challenge, or a stranger's, is not ours.
    const other: Frame = { from: 'r2', to: 'a1', items: [{ type: 'challenge', nonce: NONCE + 1, challenge }] };
    expect(l.intercept(other)).toBe(other);
    expect(sent).toHaveLength(1);
    l.stop();
  });

  it('takes its own replies out of the frame, leaves everything else for the core', () => {
    vi.useFakeTimers();
    const { l } = learner();
    expect(l.intercept(reply('r2', statusJson('r2', 0, 'r1', ['r1', 'r2', 'r3'])))).toBeNull();
    const mixed: Frame = { from: 'r3', to: 'a1', items: [{ type: 'status.reply', nonce: NONCE, json: '{}' }, { type: 'hb', inc: 1, counter: 2, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } } as Item] };
    expect(l.intercept(mixed)?.items.map((i) => i.type)).toEqual(['hb']);
    // Another nonce, or a sender outside the pool: not ours, passed on whole.
    const other = reply('r2', statusJson('r2', 0, 'r1', ['r1', 'r2', 'r3']), NONCE + 1);
    expect(l.intercept(other)).toBe(other);
    const stranger = reply('scc', statusJson('scc', 0, 'r1', ['r1', 'r2', 'r3']));
    expect(l.intercept(stranger)).toBe(stranger);
    l.stop();
  });

  it('a faulty replica\'s bad or lone reply chooses nothing; a later agreeing pair does', () => {
    vi.useFakeTimers();
    const { l, learnt, logs } = learner();
    l.intercept(reply('r1', 'garbage'));
    l.intercept(reply('r1', statusJson('r1', 9, 'r1', ['r1', 'r4', 'r5'])));
    l.intercept(reply('r2', statusJson('r2', 1, 'r2', ['r2', 'r3'])));
    expect(learnt).toEqual([]);
    expect(logs).toContain('agent.group.bad-reply');
    l.intercept(reply('r3', statusJson('r3', 1, 'r2', ['r2', 'r3'])));
    expect(learnt).toEqual([{ view: 1, primary: 'r2', replicas: ['r2', 'r3'], ports: [], added: [] }]);
  });

  it('gives up after waitMs, says so once, and stops asking', () => {
    vi.useFakeTimers();
    const { sent, learnt, logs } = learner(1_000);
    vi.advanceTimersByTime(5_000);
    expect(learnt).toEqual([]);
    expect(logs.filter((e) => e === 'agent.group.unknown')).toHaveLength(1);
    const asked = sent.length;
    vi.advanceTimersByTime(5_000);
    expect(sent).toHaveLength(asked);
  });
});
