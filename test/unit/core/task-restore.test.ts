// The task journal and the watchdog's restore after a cluster reset (docs/PROTOCOL.md §10.9;
// spec §1.6 rules 2–3, issue 5 item 4: "every task that was running is restarted with the
// restarted flag set — keep on disk exactly what that needs, so no accepted task is lost"):
// what the replicas journal, what the fresh group makes of the watchdog's `task.restore`, and
// what either refuses. The daemon side (files, the reset itself) is test/e2e/cluster-reset.
import { describe, expect, it } from 'vitest';
import { JOURNAL_RESEND_MS, MAX_JOURNAL_ITEM_BYTES } from '../../../src/core/constants.ts';
import { collectRestores, decodeJournal, encodeJournal, type TaskJournal } from '../../../src/core/task-journal.ts';
import { signCG } from '../../../src/core/wire/frame.ts';
import type { OperatorRequest, TaskRestore } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier, journals, makeCluster } from './harness.ts';

const nonce = (n: number) => n.toString(16).padStart(32, '0');
const submit = (n: number, size: number): Extract<OperatorRequest, { type: 'task.submit' }> => ({
  type: 'task.submit', nonce: nonce(n), name: `job${n}`, size, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(n & 0xff),
});
const verifier = hmacVerifier(['r1', 'r2', 'r3', 'a1', 'a2', 'scc', 'op']);
const operators = new Set(['op']);


/** A restore as the watchdog builds it from a journal entry. */
function restoreOf(j: TaskJournal, i = 0): TaskRestore {
  const e = j.tasks[i];
  if (e === undefined) throw new Error('no such entry');
  return { type: 'task.restore', nonce: e.nonce, task: e.task, submit: e.submit, submitSig: e.submitSig };
}

/** A cluster that accepted submits 1..n and journalled them. */
function acceptedCluster(n: number): { journal: TaskJournal; all: Map<string, TaskJournal> } {
  const c = makeCluster(2);
  c.run(100);
  for (let i = 1; i <= n; i++) c.operate(submit(i, 1));
  c.run(200);
  const all = journals(c);
  const j = all.get('r1');
  if (j === undefined) throw new Error('r1 wrote no journal');
  return { journal: j, all };
}

describe('the task journal (PROTOCOL §10.9)', () => {
  it('every serving replica also sends its journal to the watchdog, at once and again every JOURNAL_RESEND_MS (several hosts share no disk)', () => {
    const c = makeCluster(2);
    const sent: { from: string; atMs: number; inc: number; tasks: string[]; rsn: number }[] = [];
    c.filters.push((from, to, item) => {
      if (to === 'scc' && item.type === 'tasks.journal') {
        const j = decodeJournal(item.journal);
        if (!j.ok || j.value.replica !== from) throw new Error(`${from} sent an unreadable or foreign journal`);
        sent.push({ from, atMs: c.now(), inc: item.inc, tasks: j.value.tasks.map((t) => t.task), rsn: j.value.rsn });
      }
      return item;
    });
    c.run(100);
    c.operate(submit(1, 2));
    c.run(200);
    const last = (r: string) => sent.filter((x) => x.from === r).at(-1);
    for (const r of ['r1', 'r2', 'r3']) expect(last(r)?.tasks).toEqual(['t1']);
    const changedAt = Math.max(...['r1', 'r2', 'r3'].map((r) => last(r)?.atMs ?? NaN));
    c.run(JOURNAL_RESEND_MS + 200);
    for (const r of ['r1', 'r2', 'r3']) {
      const again = sent.filter((x) => x.from === r && x.atMs > changedAt);
      expect(again.length, `${r} resends its journal`).toBeGreaterThanOrEqual(1);
      expect(again.every((x) => x.tasks.join() === 't1' && x.rsn === last(r)?.rsn)).toBe(true);
    }
  });

  it('an unchanged journal goes to the watchdog again JOURNAL_RESEND_MS after the last copy, not a millisecond sooner', () => {
    const c = makeCluster(2);
    const sent = c.sent((from, to, i) => (from === 'r1' && to === 'scc' && i.type === 'tasks.journal' ? String(c.now()) : null));
    c.run(100);
    c.operate(submit(1, 2));
    c.run(200);
    const last = Number(sent.at(-1));
    const copies = sent.length;
    c.runUntil(last + JOURNAL_RESEND_MS - 2);
    expect(sent.length).toBe(copies);
    // r1's next steps, at the last millisecond before the resend is due and at that one.
    c.input('r1', { type: 'tick', nowMs: last + JOURNAL_RESEND_MS - 1 });
    expect(sent.length).toBe(copies);
    c.input('r1', { type: 'tick', nowMs: last + JOURNAL_RESEND_MS });
    expect(sent.length).toBe(copies + 1);
  });

  it(`a journal larger than MAX_JOURNAL_ITEM_BYTES (${MAX_JOURNAL_ITEM_BYTES} bytes) is still written to disk, but no longer sent to the watchdog: each replica logs tasks.journal.too-large with its size`, () => {
    const c = makeCluster(2);
    const sent = c.sent((from, to, i) => (to === 'scc' && i.type === 'tasks.journal' ? String(i.journal.length) : null));
    c.run(100);
    // Four submits of about 200 KB each (50 arguments of 4000 characters).
    for (let n = 1; n <= 4; n++) c.operate({ ...submit(n, 1), args: Array.from({ length: 50 }, () => 'x'.repeat(4000)) });
    c.run(300);
    for (const r of ['r1', 'r2', 'r3']) {
      const written = c.effects('persist.tasks', r).at(-1)?.effect.journal as Uint8Array;
      const j = decodeJournal(written);
      expect(j.ok && j.value.tasks.map((t) => t.task)).toEqual(['t1', 't2', 't3', 't4']);
      expect(written.length).toBeGreaterThan(MAX_JOURNAL_ITEM_BYTES);
      const tooLarge = c.effects('log', r).filter((o) => o.effect.event === 'tasks.journal.too-large').map((o) => [o.effect.level, o.effect.fields]);
      expect(tooLarge.at(-1)).toEqual(['error', { bytes: written.length, max: MAX_JOURNAL_ITEM_BYTES }]);
    }
    expect(sent.length).toBeGreaterThan(0); // the smaller journals before it went
    expect(sent.filter((bytes) => Number(bytes) > MAX_JOURNAL_ITEM_BYTES)).toEqual([]);
  });

  it(`a journal of exactly MAX_JOURNAL_ITEM_BYTES still goes to the watchdog`, () => {
    /** r1's last journal and the last it sent the watchdog, after four submits of about 200 KB
     *  (the fourth a little smaller, its last argument `lastArg` characters long). */
    const journalWith = (lastArg: number) => {
      const c = makeCluster(2);
      const sent = c.sent((from, to, i) => (from === 'r1' && to === 'scc' && i.type === 'tasks.journal' ? String(i.journal.length) : null));
      c.run(100);
      for (let n = 1; n <= 4; n++) c.operate({ ...submit(n, 1), args: [...Array.from({ length: n < 4 ? 49 : 46 }, () => 'x'.repeat(4000)), 'x'.repeat(n < 4 ? 4000 : lastArg)] });
      c.run(300);
      const tooLarge = c.effects('log', 'r1').filter((o) => o.effect.event === 'tasks.journal.too-large');
      return { written: c.effects('persist.tasks', 'r1').at(-1)?.effect.journal.length ?? NaN, sent: Number(sent.at(-1)), tooLarge };
    };
    // The encoding's length prefixes make the size a step function of the argument's: aim, then
    // correct until it lands.
    let lastArg = 1000;
    let got = journalWith(lastArg);
    for (let k = 0; k < 3 && got.written !== MAX_JOURNAL_ITEM_BYTES; k++) {
      lastArg += MAX_JOURNAL_ITEM_BYTES - got.written;
      got = journalWith(lastArg);
    }
    expect(got.written).toBe(MAX_JOURNAL_ITEM_BYTES);
    expect(got.sent).toBe(MAX_JOURNAL_ITEM_BYTES);
    expect(got.tooLarge).toEqual([]);
  });

  it('every replica journals each accepted task with the operator\'s signed submit, and drops it once the task ends', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(1, 2));
    c.run(200);
    const all = journals(c);
    expect([...all.keys()].sort()).toEqual(['r1', 'r2', 'r3']);
    for (const j of all.values()) {
      expect(j.tasks.map((t) => t.task)).toEqual(['t1']);
      expect(j.tasks[0]?.nonce).toBe(nonce(1));
    }
    // What was journalled is the operator's own signature: it verifies as an operator's submit.
    const found = collectRestores([...all.values()].map((j) => ({ source: j.replica, data: encodeJournal(j) })), verifier, operators);
    expect(found.refused).toEqual([]);
    expect(found.restores.map((r) => r.task)).toEqual(['t1']);

    // Killed; its processes never report (no OS here), so it ends when Terminate-TO gives up.
    c.operate({ type: 'task.kill', nonce: nonce(2), task: 't1' });
    c.run(12_000);
    expect(c.replicas[0]?.clusterView().tasks[0]?.state).toMatch(/terminated/i);
    for (const j of journals(c).values()) expect(j.tasks).toEqual([]);
  });

  it('decoding is total: truncated, foreign or random bytes give a typed reason, never a throw', () => {
    const { journal } = acceptedCluster(1);
    const bytes = encodeJournal(journal);
    expect(decodeJournal(bytes).ok).toBe(true);
    for (let cut = 0; cut < bytes.length; cut += Math.max(1, Math.floor(bytes.length / 40))) {
      const r = decodeJournal(bytes.subarray(0, cut));
      expect(r.ok).toBe(false);
    }
    let seed = 7;
    for (let i = 0; i < 200; i++) {
      const junk = new Uint8Array(1 + (i % 97)).map(() => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff);
      expect(() => decodeJournal(junk)).not.toThrow();
    }
    const other = new Uint8Array(bytes);
    other[1] = 9; // the version
    expect(decodeJournal(other)).toMatchObject({ ok: false, code: 'WIRE_VERSION' });
  });

  it('the watchdog restores only what an operator signed, once per task, in the old order', () => {
    const { all } = acceptedCluster(2);
    const [j1, j2] = [all.get('r1'), all.get('r2')] as TaskJournal[];
    const forged = signCG({ csn: 0, gssnAck: 0, inc: 0, client: 'a1', payload: submit(9, 1) }, hmacSigner('a1'));
    const bad: TaskJournal = {
      replica: 'r3', rsn: 5, tasks: [
        // A faulty replica's journal: a submit signed by an agent, a signature that does not match,
        // and a nonce that is not the submit's.
        { task: 't9', nonce: nonce(9), submit: forged.bytes, submitSig: forged.sig },
        { ...(j1 as TaskJournal).tasks[0]!, task: 't7', submitSig: new Uint8Array(64) },
        { ...(j1 as TaskJournal).tasks[1]!, task: 't8', nonce: nonce(3) },
      ],
      members: [],
    };
    const found = collectRestores([
      { source: 'r2', data: encodeJournal(j2 as TaskJournal) },
      { source: 'r3', data: encodeJournal(bad) },
      { source: 'r1', data: encodeJournal(j1 as TaskJournal) },
      { source: 'junk', data: new Uint8Array([1, 2, 3]) },
    ], verifier, operators);
    expect(found.restores.map((r) => [r.task, r.nonce])).toEqual([['t1', nonce(1)], ['t2', nonce(2)]]);
    expect(found.refused.map((r) => [r.source, r.task, r.code])).toEqual([
      ['r3', 't9', 'NOT_A_MEMBER'], ['r3', 't7', 'SIG_INVALID'], ['r3', 't8', 'WIRE_MALFORMED'], ['junk', null, 'WIRE_MALFORMED'],
    ]);
  });
});

describe('task.restore in the fresh group (PROTOCOL §10.9)', () => {
  it('the watchdog\'s restore starts the task again under its old id with the restarted flag, on every replica alike', () => {
    const { journal } = acceptedCluster(2);
    const c = makeCluster(2); // the restarted cluster: fresh state, RSN 0
    c.run(100);
    c.operate(restoreOf(journal, 1), undefined, 'scc');
    c.run(300);
    const replies = c.opReplies.filter((r) => r.to === 'scc');
    expect(replies.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(new Set(replies.map((r) => `${r.ok}|${r.text}`))).toEqual(new Set(['true|t2']));
    for (const r of c.replicas) {
      const [task] = r.clusterView().tasks;
      expect(task).toMatchObject({ id: 't2', restarted: true, name: 'job2' });
    }
    // The agents are told: the mapping's restarted flag is set on the spawn.
    const spawns = [...c.effects('deliver.command', 'a1'), ...c.effects('deliver.command', 'a2')]
      .map((o) => o.effect.command).filter((x) => x.type === 'proc.spawn');
    expect(spawns.length).toBe(1);
    expect(spawns[0]).toMatchObject({ task: 't2', restarted: true });
    // It is journalled again, so a second reset restores it too.
    for (const j of journals(c).values()) expect(j.tasks.map((t) => t.task)).toEqual(['t2']);
    // A restore sent again (the watchdog resends until two replicas answer) is answered, not re-applied.
    c.operate(restoreOf(journal, 1), undefined, 'scc');
    c.run(200);
    for (const r of c.replicas) expect(r.clusterView().tasks).toHaveLength(1);
  });

  it('a restored task whose id is taken gets the next one; later submits do not reuse the old id', () => {
    const { journal } = acceptedCluster(1);
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(50, 1)); // t1 in the fresh group
    c.run(100);
    c.operate(restoreOf(journal, 0), undefined, 'scc'); // was t1
    c.run(200);
    c.operate(submit(51, 1));
    c.run(200);
    expect(c.replicas[0]?.clusterView().tasks.map((t) => [t.id, t.restarted])).toEqual([['t1', false], ['t2', true], ['t3', false]]);
  });

  it('only the watchdog may restore, only operators may submit, and a restore of a forged submit is never ordered', () => {
    const { journal } = acceptedCluster(1);
    const c = makeCluster(2);
    c.run(100);
    c.operate(restoreOf(journal, 0)); // from an operator
    c.operate(submit(60, 1), undefined, 'scc'); // a submit from the watchdog
    const forged = signCG({ csn: 0, gssnAck: 0, inc: 0, client: 'a1', payload: submit(61, 1) }, hmacSigner('a1'));
    c.operate({ type: 'task.restore', nonce: nonce(61), task: 't1', submit: forged.bytes, submitSig: forged.sig }, undefined, 'scc');
    c.run(500);
    expect(c.opReplies).toEqual([]);
    for (const r of c.replicas) {
      // The operator reads which task's restore was refused, and why.
      expect(c.effects('log', r.id).filter((o) => o.effect.event === 'restore.refused').map((o) => o.effect.fields['task'])).toContain('t1');
      expect(r.clusterView().tasks).toEqual([]);
      expect(r.rsn()).toBe(c.replicas[0]?.rsn());
    }
  });
});

describe('journals that outlived their task (PROTOCOL §10.9)', () => {
  const at = (j: TaskJournal, replica: string, rsn: number, keep: (task: string) => boolean): { source: string; data: Uint8Array } => ({
    source: `run/${replica}.tasks`, data: encodeJournal({ replica, rsn, tasks: j.tasks.filter((e) => keep(e.task)), members: [] }),
  });

  it('a task two later journals no longer hold ended: the stale journal of a retired replica does not bring it back', () => {
    const { journal } = acceptedCluster(2); // t1 and t2, journalled at some RSN
    const rsn = journal.rsn;
    const found = collectRestores([
      at(journal, 'r5', rsn, () => true), // retired while its node was down: its file outlived it
      at(journal, 'r1', rsn + 40, (t) => t !== 't1'), // t1 ended at a later RSN
      at(journal, 'r2', rsn + 40, (t) => t !== 't1'),
    ], verifier, operators);
    expect(found.restores.map((r) => r.task)).toEqual(['t2']);
    expect(found.refused).toEqual([{
      source: 'journals', task: 't1', code: 'FINISHED',
      detail: `last journalled at RSN ${rsn}, absent from run/r1.tasks (RSN ${rsn + 40}) and run/r2.tasks (RSN ${rsn + 40}): it ended since`,
    }]);
  });

  it('one later journal alone (it may be the faulty one) or journals of an earlier RSN never cancel an accepted task', () => {
    const { journal } = acceptedCluster(2);
    const rsn = journal.rsn;
    // Only r3 claims a later live set without t1: t1 stays.
    const one = collectRestores([
      at(journal, 'r1', rsn, () => true), at(journal, 'r2', rsn, () => true), at(journal, 'r3', rsn + 99, () => false),
    ], verifier, operators);
    expect(one.restores.map((r) => r.task)).toEqual(['t1', 't2']);
    expect(one.refused).toEqual([]);
    // t2 accepted after two replicas last wrote (they crashed, or wrote before it): held by one
    // journal at the newest RSN, it is restored; older journals without it say nothing.
    const late = collectRestores([
      at(journal, 'r1', rsn, () => true), at(journal, 'r2', rsn - 5, (t) => t !== 't2'), at(journal, 'r3', rsn - 5, (t) => t !== 't2'),
    ], verifier, operators);
    expect(late.restores.map((r) => r.task)).toEqual(['t1', 't2']);
  });
});
