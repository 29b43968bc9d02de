// The watchdog's part in restoring a cluster (src/core/watchdog-restore.ts; PROTOCOL §10.9,
// §10.12): the journals it keeps, the restores it sends until two replicas agree.
import { describe, expect, it } from 'vitest';
import type { CoreEffect } from '../../../src/core/node.ts';
import { encodeJournal } from '../../../src/core/task-journal.ts';
import { onHeartbeat } from '../../../src/core/watchdog-liveness.ts';
import { freshReplicas, mergeMembership } from '../../../src/core/watchdog-restore.ts';
import { createWatchdogState, MAX_RESTORE_HISTORY, RESTORE_RESEND_MS } from '../../../src/core/watchdog-state.ts';
import { signCG } from '../../../src/core/wire/frame.ts';
import type { NodeAdd, NodeRemove } from '../../../src/core/wire/messages.ts';
import { hmacSigner } from './harness.ts';
import { FRESH, frame, hb, keys, membership, setup } from './watchdog-harness.ts';

describe('watchdog: restoring the journalled tasks after a cluster reset (PROTOCOL §10.9)', () => {
  const opSigner = hmacSigner('op');
  const journalOf = (replica: string, tasks: [string, number][]): Uint8Array => encodeJournal({
    replica, rsn: 9, tasks: tasks.map(([task, n]) => {
      const nonce = n.toString(16).padStart(32, '0');
      const s = signCG({ csn: 0, gssnAck: 0, inc: 0, client: 'op', payload: {
        type: 'task.submit', nonce, name: task, size: 1, file: '/bin/sleep', args: ['9'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
      } }, opSigner);
      return { task, nonce, submit: s.bytes, submitSig: s.sig };
    }),
    members: [],
  });
  const restoresSent = (effects: CoreEffect[]) => effects.flatMap((e) =>
    e.type === 'send' && e.item.type === 'op.request' && e.item.signed.cg.payload.type === 'task.restore'
      ? [`${e.to}:${e.item.signed.cg.payload.task}`] : []);

  it('keeps the latest journal of each replica (by incarnation, then RSN) and hands them over with its cluster reset order, then starts a new set', () => {
    const g = setup();
    const journal = (replica: string, rsn: number, tasks: [string, number][] = []) => {
      const j = journalOf(replica, tasks);
      return rsn === 9 ? j : encodeJournal({ replica, rsn, tasks: [], members: [] });
    };
    const send = (from: string, nowMs: number, inc: number, data: Uint8Array) => g.w.step(frame(from, nowMs, { type: 'tasks.journal', inc, journal: data }));
    send('r1', 10, 10, journal('r1', 9, [['t1', 1]]));
    send('r1', 20, 10, journal('r1', 5)); // an older one (a replay) does not replace it
    send('r2', 30, 10, journal('r2', 9, [['t1', 1]]));
    send('a1', 40, 1, journal('a1', 12)); // not a replica
    send('r3', 50, 10, journal('r2', 12)); // r3 cannot send r2's journal
    send('r3', 60, 10, new Uint8Array([0xc1])); // not a journal
    expect(g.w.status(100).journalsKept).toEqual([
      { replica: 'r1', inc: 10, rsn: 9, tasks: 1 },
      { replica: 'r2', inc: 10, rsn: 9, tasks: 1 },
    ]);
    expect(g.w.status(100).drops).toMatchObject({ REPLAYED: 1, NOT_A_MEMBER: 1, WIRE_MALFORMED: 2 });
    g.run(['r1', 'r2', 'r3'], 0, 500);
    g.run(['r1'], 575, 700); // r2 and r3 fail at once
    const order = g.tick(g.deadline()).find((e) => e.type === 'reset.cluster');
    if (order?.type !== 'reset.cluster') throw new Error('expected a cluster reset order');
    expect(order.journals.map((j) => j.source)).toEqual([
      "r1's journal kept by the watchdog (inc 10, rsn 9)", "r2's journal kept by the watchdog (inc 10, rsn 9)",
    ]);
    expect(g.w.status(5000).journalsKept).toEqual([]);
    // After the reset only the restarted group's journals are kept: the old r1's is refused.
    send('r1', 5010, 10, journal('r1', 10));
    send('r1', 5020, 11, journal('r1', 1));
    expect(g.w.status(5100).journalsKept).toEqual([{ replica: 'r1', inc: 11, rsn: 1, tasks: 0 }]);
  });

  it('sends each restore to the restarted group once it serves, resends until two replicas agree, then stops', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 500);
    g.run(['r1'], 575, 700); // r2 and r3 fail at once
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    const t0 = 5000;
    const loaded = g.w.step({ type: 'restore.load', nowMs: t0, journals: [
      { source: 'r1.tasks', data: journalOf('r1', [['t1', 1], ['t3', 3]]) },
      { source: 'r2.tasks', data: journalOf('r2', [['t3', 3]]) },
      { source: 'r9.tasks', data: new Uint8Array([0xc1]) },
    ] });
    // Nothing goes to the old group, nor before the new one heartbeats consistently.
    expect(restoresSent(loaded)).toEqual([]);
    expect(g.w.status(t0).restoresPending.map((p) => p.task)).toEqual(['t1', 't3']);
    expect(g.w.status(t0).restores.map((r) => r.kind)).toEqual(['refused']);
    expect(restoresSent(g.beat('r1', t0 + 10, 0, 10))).toEqual([]); // an old incarnation
    g.beat('r1', t0 + 20, 0, 11);
    const first = g.beat('r2', t0 + 30, 0, 11); // armed: two fresh replicas agree on a view
    expect(restoresSent(first).sort()).toEqual(['r1:t1', 'r1:t3', 'r2:t1', 'r2:t3']);
    g.beat('r1', t0 + 100, 0, 11);
    expect(restoresSent(g.beat('r2', t0 + 110, 0, 11))).toEqual([]); // not yet due
    expect(restoresSent(g.tick(t0 + 30 + RESTORE_RESEND_MS)).length).toBe(4); // resent
    const reply = (from: string, n: number, text: string, nowMs: number) =>
      g.w.step(frame(from, nowMs, { type: 'op.reply', nonce: n.toString(16).padStart(32, '0'), rsn: 4, ok: true, text }));
    g.beat('r3', t0 + 250, 0, 11); // the third restarted replica
    reply('r1', 1, 't1', t0 + 300);
    reply('r2', 1, 't9', t0 + 301); // a different answer: not yet two alike
    expect(g.w.status(t0 + 301).restoresPending.map((p) => p.task)).toEqual(['t1', 't3']);
    reply('r3', 1, 't1', t0 + 302);
    reply('r1', 3, 't3', t0 + 303);
    const done = reply('r2', 3, 't3', t0 + 304);
    expect(done.some((e) => e.type === 'log' && e.event === 'restore.done')).toBe(true);
    const s = g.w.status(t0 + 304);
    expect(s.restoresPending).toEqual([]);
    expect(s.restores.filter((r) => r.kind === 'restored').map((r) => r.kind === 'restored' && `${r.task}→${r.text}`)).toEqual(['t1→t1', 't3→t3']);
    expect(restoresSent(g.tick(t0 + 1000))).toEqual([]);
  });

  it('ignores replies from the old group and from non-replicas', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    g.tick(g.deadline());
    g.w.step({ type: 'restore.load', nowMs: 4000, journals: [{ source: 'r1.tasks', data: journalOf('r1', [['t1', 1]]) }] });
    const n = (1).toString(16).padStart(32, '0');
    g.w.step(frame('r1', 4001, { type: 'op.reply', nonce: n, rsn: 1, ok: true, text: 't1' })); // old incarnation 10
    g.w.step(frame('op', 4002, { type: 'op.reply', nonce: n, rsn: 1, ok: true, text: 't1' }));
    g.w.step(frame('r2', 4003, { type: 'op.reply', nonce: n, rsn: 1, ok: true, text: 't1' }));
    expect(g.w.status(4003).restoresPending.map((p) => p.task)).toEqual(['t1']);
  });

  it('a journal replaces the kept one when of a higher incarnation, whatever its RSN, or of the same one at no lower RSN: the same journal re-sent is no replay', () => {
    const g = setup();
    const send = (nowMs: number, inc: number, rsn: number) =>
      g.send('r1', nowMs, { type: 'tasks.journal', inc, journal: encodeJournal({ replica: 'r1', rsn, tasks: [], members: [] }) });
    send(10, 10, 9);
    send(20, 10, 9);
    expect(g.w.status(20).drops).toEqual({});
    send(30, 11, 1); // restarted
    send(40, 10, 50); // the old incarnation's
    expect(g.w.status(40).journalsKept).toEqual([{ replica: 'r1', inc: 11, rsn: 1, tasks: 0 }]);
    expect(g.w.status(40).drops).toEqual({ REPLAYED: 1 });
  });

  /** A cluster reset of a group of r1, r2 and r3, then r1's journal of t1 loaded. */
  const resetThenLoad = () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 500);
    g.tick(g.deadline());
    g.w.step({ type: 'restore.load', nowMs: 5000, journals: [{ source: 'r1.tasks', data: journalOf('r1', [['t1', 1]]) }] });
    return g;
  };
  const replyT1 = (g: ReturnType<typeof setup>, from: string, nowMs: number, ok: boolean, text: string) =>
    g.send(from, nowMs, { type: 'op.reply', nonce: (1).toString(16).padStart(32, '0'), rsn: 4, ok, text });

  it('restores go only to the restarted group\'s replicas heard within freshMs, again every RESTORE_RESEND_MS (it asks to be woken then)', () => {
    const g = resetThenLoad();
    g.beat('r1', 5010, 0, 11);
    g.beat('r3', 5100, 0, 10); // the old r3, still up
    const first = g.beat('r2', 5010 + FRESH, 0, 11); // armed; r1's heartbeat is exactly freshMs old
    expect(restoresSent(first).sort()).toEqual(['r1:t1', 'r2:t1']);
    g.beat('r2', 5300, 0, 11);
    expect(g.w.nextWakeMs()).toBe(5010 + FRESH + RESTORE_RESEND_MS); // before the next period's wake-up
    expect(restoresSent(g.tick(5010 + FRESH + RESTORE_RESEND_MS))).toEqual(['r2:t1']); // r1 no longer fresh
  });

  it('two replies settle a restore only if they agree on the outcome as well as its text; a refusal is recorded and logged as an error', () => {
    const g = resetThenLoad();
    g.run(['r1', 'r2', 'r3'], 5000, 5100, 0, 11);
    replyT1(g, 'r1', 5100, true, 'no slots');
    replyT1(g, 'r2', 5101, false, 'no slots');
    expect(g.w.status(5101).restoresPending.map((p) => p.task)).toEqual(['t1']);
    const done = replyT1(g, 'r3', 5102, false, 'no slots');
    expect(done).toContainEqual({ type: 'log', level: 'error', event: 'restore.done', fields: { task: 't1', ok: false, text: 'no slots', rsn: 4 } });
    expect(g.w.status(5102).restores).toEqual([{ atMs: 5102, kind: 'restored', task: 't1', ok: false, text: 'no slots' }]);
  });

  it('keeps the last MAX_RESTORE_HISTORY restore records', () => {
    const g = resetThenLoad();
    const junk = Array.from({ length: MAX_RESTORE_HISTORY + 1 }, (_, i) => ({ source: `j${i}`, data: new Uint8Array([0xc1]) }));
    g.w.step({ type: 'restore.load', nowMs: 5001, journals: junk });
    const restores = g.w.status(5001).restores;
    expect(restores).toHaveLength(MAX_RESTORE_HISTORY);
    expect(restores[0]).toMatchObject({ kind: 'refused', source: 'j1' });
  });

  it('the same journals loaded again add nothing: a pending restore keeps the replies it had', () => {
    const g = resetThenLoad();
    g.run(['r1', 'r2'], 5000, 5100, 0, 11);
    replyT1(g, 'r1', 5100, true, 't1');
    const again = g.w.step({ type: 'restore.load', nowMs: 5101, journals: [{ source: 'r1.tasks', data: journalOf('r1', [['t1', 1]]) }] });
    expect(again).toContainEqual({ type: 'log', level: 'warn', event: 'restore.loaded', fields: { journals: 1, members: [], tasks: ['t1'], added: 0, refused: 0 } });
    replyT1(g, 'r2', 5102, true, 't1');
    expect(g.w.status(5102).restoresPending).toEqual([]);
  });

  it('after a cluster reset the old group\'s journal is not kept (UNEXPECTED)', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    g.send('r1', 3000, { type: 'tasks.journal', inc: 10, journal: encodeJournal({ replica: 'r1', rsn: 12, tasks: [], members: [] }) });
    expect(g.w.status(3000)).toMatchObject({ journalsKept: [], drops: { UNEXPECTED: 1 } });
  });

  const nonceOf = (n: number) => n.toString(16).padStart(32, '0');
  const addNode = (n: number, agent: string, node: string): NodeAdd =>
    ({ type: 'node.add', nonce: nonceOf(n), agent, node, address: `10.0.0.${n}`, port: 7403, publicKey: new Uint8Array(32).fill(9), spares: [] });
  const removeNode = (n: number, node: string): NodeRemove => ({ type: 'node.remove', nonce: nonceOf(n), node, kill: false });
  /** `replica`'s journal of `tasks` (as journalOf) and of the operator's membership `changes`. */
  const journalWith = (replica: string, tasks: [string, number][], changes: (NodeAdd | NodeRemove)[]): Uint8Array => encodeJournal({
    replica, rsn: 9, tasks: tasks.map(([task, n]) => {
      const s = signCG({ csn: 0, gssnAck: 0, inc: 0, client: 'op', payload: {
        type: 'task.submit', nonce: nonceOf(n), name: task, size: 1, file: '/bin/sleep', args: ['9'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
      } }, opSigner);
      return { task, nonce: nonceOf(n), submit: s.bytes, submitSig: s.sig };
    }),
    members: changes.map((payload) => {
      const s = signCG({ csn: 0, gssnAck: 0, inc: 0, client: 'op', payload }, opSigner);
      return { nonce: payload.nonce, op: s.bytes, opSig: s.sig };
    }),
  });
  /** The op.requests sent, as `to:task` or `to:node.restore <nonce number>`. */
  const requested = (effects: CoreEffect[]) => effects.flatMap((e) => {
    if (e.type !== 'send' || e.item.type !== 'op.request') return [];
    const p = e.item.signed.cg.payload;
    return [`${e.to}:${p.type === 'task.restore' ? p.task : p.type === 'node.restore' ? `node.restore ${Number.parseInt(p.nonce, 16)}` : p.type}`];
  }).sort();

  it('membership restores go first: one confirmed while another is pending sends nothing early, the last one sends the tasks at once, a confirmed task hastens no other (PROTOCOL §10.9, §10.12)', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 500);
    g.tick(g.deadline());
    const t0 = 5000;
    g.w.step({ type: 'restore.load', nowMs: t0, journals: [{ source: 'r1.tasks', data: journalWith('r1', [['t1', 1], ['t3', 3]], [addNode(5, 'a5', 'n5'), addNode(6, 'a6', 'n6')]) }] });
    expect(g.w.status(t0).restoresPending.map((p) => p.task)).toEqual(['node.add n5', 'node.add n6', 't1', 't3']);
    g.beat('r1', t0 + 10, 0, 11);
    expect(requested(g.beat('r2', t0 + 20, 0, 11))).toEqual(['r1:node.restore 5', 'r1:node.restore 6', 'r2:node.restore 5', 'r2:node.restore 6']);
    const reply = (from: string, n: number, text: string, nowMs: number) => g.send(from, nowMs, { type: 'op.reply', nonce: nonceOf(n), rsn: 4, ok: true, text });
    expect(requested([...reply('r1', 5, 'n5 added', t0 + 30), ...reply('r2', 5, 'n5 added', t0 + 31)])).toEqual([]); // n6 waits for the resend
    expect(requested([...reply('r1', 6, 'n6 added', t0 + 40), ...reply('r2', 6, 'n6 added', t0 + 41)])).toEqual(['r1:t1', 'r1:t3', 'r2:t1', 'r2:t3']);
    expect(requested([...reply('r1', 1, 't1', t0 + 50), ...reply('r2', 1, 't1', t0 + 51)])).toEqual([]); // t3 waits for the resend
    g.beat('r1', t0 + 200, 0, 11);
    g.beat('r2', t0 + 200, 0, 11);
    expect(requested(g.tick(t0 + 41 + RESTORE_RESEND_MS))).toEqual(['r1:t3', 'r2:t3']);
  });

  it('a second reset while membership restores are unconfirmed merges them with the restarted group\'s journals: the removals sorted, a node either removed not added (PROTOCOL §10.9, §10.12)', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 500);
    g.tick(g.deadline());
    g.w.step({ type: 'restore.load', nowMs: 5000, journals: [{ source: 'r1.tasks', data: journalWith('r1', [], [addNode(5, 'a5', 'n5'), removeNode(7, 'n7')]) }] });
    // Nobody confirms them; the restarted group journals n5 and n6 removed, then goes silent.
    for (const r of ['r1', 'r2']) g.send(r, 5000, { type: 'tasks.journal', inc: 11, journal: journalWith(r, [], [removeNode(8, 'n5'), removeNode(9, 'n6')]) });
    g.run(['r1', 'r2', 'r3'], 5000, 5500, 0, 11);
    const order = g.tick(g.deadline()).find((e) => e.type === 'reset.cluster');
    if (order?.type !== 'reset.cluster') throw new Error('expected a cluster reset order');
    expect(order.membership).toEqual({ added: [], removed: ['n5', 'n6', 'n7'] });
  });
});

describe('watchdog-restore stepped by hand', () => {
  it('mergeMembership: the later view\'s address wins, a node either removed is not added, removals sorted', () => {
    const a = { added: [{ agent: 'a5', node: 'n5', address: 'h5:1' }], removed: ['n7'] };
    const b = { added: [{ agent: 'a5', node: 'n5', address: 'h5:2' }, { agent: 'a7', node: 'n7', address: 'h7:1' }], removed: ['n6'] };
    expect(mergeMembership(a, b)).toEqual({ added: [{ agent: 'a5', node: 'n5', address: 'h5:2' }], removed: ['n6', 'n7'] });
  });

  it('restores go to the restarted group\'s replicas heard within FRESH only', () => {
    const s = createWatchdogState({ id: 'scc', membership, inc: 1, ...keys });
    const out: CoreEffect[] = [];
    onHeartbeat(s, 'r1', 0, hb(10, 1), out);
    onHeartbeat(s, 'r2', 100, hb(10, 1), out);
    onHeartbeat(s, 'r3', 100, hb(10, 1), out);
    s.preResetInc.set('r3', 10); // r3 has not restarted since the last cluster reset
    expect(freshReplicas(s, FRESH)).toEqual(['r1', 'r2']);
    expect(freshReplicas(s, FRESH + 1)).toEqual(['r2']);
  });
});
