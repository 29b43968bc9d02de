// Membership changes across a cluster reset (docs/PROTOCOL.md §10.9, §10.12): the replicas
// journal every applied `node.add` / `node.remove` with the operator's own signed request; the
// watchdog reads back only what an operator signed, as the net effect on cluster.json's nodes
// (a node added and later removed is neither), refuses forged or stale entries with a typed code,
// and has the fresh group apply the changes (`node.restore`, watchdog only) before any task is
// restored. Also: a removed node's agent that comes back is told to stop again, the group's
// membership log is bounded (MAX_MEMBER_CHANGES), and the version-2 journal is read totally.
// Task entries of the same journal: test/unit/core/task-restore.test.ts; the watchdog's task
// restores: test/unit/core/watchdog.test.ts; node.add/node.remove themselves:
// test/unit/core/nodes-runtime.test.ts.
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING, MAX_MEMBER_CHANGES } from '../../../src/core/constants.ts';
import type { CoreEffect, WatchdogInput, Membership } from '../../../src/core/node.ts';
import { applyOperatorRequest, applyRequest } from '../../../src/core/replicated-apply.ts';
import { initialState } from '../../../src/core/replicated-state.ts';
import { collectRestores, decodeJournal, encodeJournal, JOURNAL_VERSION, openRestoredOp, type MemberEntry, type TaskJournal } from '../../../src/core/task-journal.ts';
import { createWatchdog } from '../../../src/core/watchdog.ts';
import { RESTORE_RESEND_MS } from '../../../src/core/watchdog-state.ts';
import { pack, signCG } from '../../../src/core/wire/frame.ts';
import type { Item, NodeAdd, NodeRemove, NodeRestore, OperatorRequest, TaskSubmit } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier, journals, makeCluster } from './harness.ts';

type Cluster = ReturnType<typeof makeCluster>;

const nonce = (n: number) => n.toString(16).padStart(32, '0');
const KEY = new Uint8Array(32).fill(9);
const add = (n: number, agent: string, node: string, address = `10.0.0.${n}`): NodeAdd =>
  ({ type: 'node.add', nonce: nonce(n), agent, node, address, port: 7403, publicKey: KEY, spares: [] });
const remove = (n: number, node: string, kill = false): NodeRemove => ({ type: 'node.remove', nonce: nonce(n), node, kill });
const submit = (n: number, size = 1): TaskSubmit => ({
  type: 'task.submit', nonce: nonce(n), name: `job${n}`, size, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(n & 0xff),
});

const verifier = hmacVerifier(['r1', 'r2', 'r3', 'a1', 'a2', 'a3', 'a4', 'scc', 'op']);
const operators = new Set(['op']);

/** `payload` as `client` signs it, unsequenced (PROTOCOL §8.1). */
const signedBy = (client: string, payload: OperatorRequest) => signCG({ csn: 0, gssnAck: 0, inc: 0, client, payload }, hmacSigner(client));
/** A journal's membership entry for `payload`, signed by `client`. */
const memberEntry = (client: string, payload: NodeAdd | NodeRemove | TaskSubmit): MemberEntry => {
  const s = signedBy(client, payload);
  return { nonce: payload.nonce, op: s.bytes, opSig: s.sig };
};
/** The watchdog's restore of a journalled membership change. */
const restoreOf = (e: MemberEntry): NodeRestore => ({ type: 'node.restore', nonce: e.nonce, op: e.op, opSig: e.opSig });
/** Bytes as hex, deeply: decoded journals hold Buffers where the signer gave Uint8Arrays. */
const hexed = (v: unknown): unknown => JSON.parse(JSON.stringify(v, (_k, x: unknown) =>
  x instanceof Uint8Array ? Buffer.from(x).toString('hex')
    : typeof x === 'object' && x !== null && (x as { type?: unknown }).type === 'Buffer' ? Buffer.from((x as { data: number[] }).data).toString('hex') : x));
const journalFile = (j: TaskJournal, source = `run/${j.replica}.tasks`) => ({ source, data: encodeJournal(j) });

/** The outcome every replica gave `nonce` (all three, alike). */
function outcome(c: Cluster, n: string): { ok: boolean; text: string } {
  const replies = c.opReplies.filter((r) => r.nonce === n);
  expect(replies.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
  expect(new Set(replies.map((r) => `${r.ok}|${r.text}`)).size).toBe(1);
  return { ok: replies[0]?.ok ?? false, text: replies[0]?.text ?? '' };
}
function operate(c: Cluster, q: OperatorRequest, client = 'op'): { ok: boolean; text: string } {
  c.operate(q, undefined, client);
  c.run(300);
  return outcome(c, q.nonce);
}
const nodesOf = (c: Cluster) => (c.replicas[0]?.clusterView().nodes ?? []).map((x) => `${x.agent}:${x.node}`).sort();

/** A cluster of four nodes (n1–n3 host the replicas) whose operator made `changes`. */
function changedCluster(changes: OperatorRequest[]): { c: Cluster; all: Map<string, TaskJournal> } {
  const c = makeCluster(4);
  c.run(200);
  for (const q of changes) operate(c, q);
  return { c, all: journals(c) };
}

describe('the replicas journal membership changes (PROTOCOL §10.9, §10.12)', () => {
  it('every replica journals each applied node.add and node.remove, in order, as the operator signed it; a refused one is not journalled', () => {
    const a5 = add(1, 'a5', 'n5');
    const taken = add(2, 'a6', 'n1'); // the name is in use: refused
    const r4 = remove(3, 'n4');
    const { c, all } = changedCluster([a5, taken, r4]);
    expect(outcome(c, taken.nonce)).toEqual({ ok: false, text: 'cannot add n1: a node n1 is already in this cluster' });
    expect([...all.keys()].sort()).toEqual(['r1', 'r2', 'r3']);
    for (const j of all.values()) {
      expect(j.members.map((m) => m.nonce)).toEqual([a5.nonce, r4.nonce]);
      // What was journalled is the operator's own request: it verifies as such.
      expect(hexed(j.members.map((m) => openRestoredOp(m, verifier, operators)))).toEqual(hexed([{ ok: true, value: a5 }, { ok: true, value: r4 }]));
    }
    // The journal that goes to the watchdog carries them too.
    const sent: TaskJournal[] = [];
    c.filters.push((_from, to, item) => {
      if (to === 'scc' && item.type === 'tasks.journal') {
        const j = decodeJournal(item.journal);
        if (j.ok) sent.push(j.value);
      }
      return item;
    });
    c.run(DEFAULT_TIMING.sccHeartbeatMs * 10 + 10_000);
    expect(sent.length).toBeGreaterThan(0);
    for (const j of sent) expect(j.members.map((m) => m.nonce)).toEqual([a5.nonce, r4.nonce]);
  });

  it('a second removal of a node still draining (`--kill` after a plain one) is journalled once', () => {
    const c = makeCluster(4);
    c.run(200);
    operate(c, submit(1, 16)); // four slots on each of the four nodes
    expect(operate(c, remove(2, 'n4')).text).toBe('n4 draining: waiting for t1 to finish');
    expect(operate(c, remove(3, 'n4', true)).text).toBe('n4 draining: killing t1');
    for (const j of journals(c).values()) expect(j.members.map((m) => m.nonce)).toEqual([nonce(2)]);
  });
});

describe('collectRestores: membership as its net effect (PROTOCOL §10.9, §10.12)', () => {
  it('a node added and still there is restored and power-cycled; one added then removed is neither; a cluster.json node removed stays removed', () => {
    const changes = [
      remove(1, 'n4'), // an initial node, removed first
      add(2, 'a10', 'n10'), add(3, 'a9', 'n9'), // added in that order, restored by agent number
      add(4, 'a6', 'n6'), remove(5, 'n6'), // added, then removed
    ];
    const { c, all } = changedCluster(changes);
    for (const q of changes) expect(outcome(c, q.nonce).ok).toBe(true);
    const found = collectRestores([...all.values()].map((j) => journalFile(j)), verifier, operators);
    expect(found.refused).toEqual([]);
    expect(found.restores).toEqual([]);
    // One restore per change, adds (by agent number) before removals, whatever the journal order.
    expect(found.members.map((m) => openRestoredOp(m, verifier, operators)).map((r) => r.ok && `${r.value.type} ${r.value.node}`))
      .toEqual(['node.add n9', 'node.add n10', 'node.remove n4']);
    expect(found.members.map((m) => m.nonce)).toEqual([nonce(3), nonce(2), nonce(1)]);
    expect(found.membership).toEqual({
      added: [{ agent: 'a9', node: 'n9', address: '10.0.0.3' }, { agent: 'a10', node: 'n10', address: '10.0.0.2' }],
      removed: ['n4', 'n6'],
    });
  });

  it('two journals with the same changes, or a replica listing one twice, give one restore per change', () => {
    const e = memberEntry('op', add(1, 'a5', 'n5'));
    const j = (replica: string, members: MemberEntry[]): TaskJournal => ({ replica, rsn: 7, tasks: [], members });
    const found = collectRestores([journalFile(j('r1', [e])), journalFile(j('r2', [e, e])), journalFile(j('r3', [e]))], verifier, operators);
    expect(hexed(found.members)).toEqual(hexed([restoreOf(e)]));
    expect(found.membership.added).toEqual([{ agent: 'a5', node: 'n5', address: '10.0.0.1' }]);
  });
});

describe('collectRestores: forged and stale membership entries (PROTOCOL §10.9, §10.12)', () => {
  it('only an operator\'s signed node.add or node.remove with its own nonce is restored; the others are refused with a typed code', () => {
    const good = memberEntry('op', add(1, 'a5', 'n5'));
    const bySig = memberEntry('op', add(2, 'a6', 'n6'));
    const bad: TaskJournal = {
      replica: 'r3', rsn: 9, tasks: [], members: [
        memberEntry('a1', add(3, 'a7', 'n7')), // an agent's
        { ...bySig, opSig: new Uint8Array(64) }, // a signature that does not match
        { ...memberEntry('op', remove(4, 'n4')), nonce: nonce(5) }, // not the request's nonce
        memberEntry('op', submit(6)), // an operator's, but a task.submit
        memberEntry('r2', remove(7, 'n4')), // a replica's
      ],
    };
    const found = collectRestores([
      journalFile({ replica: 'r1', rsn: 9, tasks: [], members: [good] }), journalFile(bad),
    ], verifier, operators);
    expect(hexed(found.members)).toEqual(hexed([restoreOf(good)]));
    expect(found.membership).toEqual({ added: [{ agent: 'a5', node: 'n5', address: '10.0.0.1' }], removed: [] });
    expect(found.refused.map((r) => [r.source, r.code])).toEqual([
      ['run/r3.tasks', 'NOT_A_MEMBER'], ['run/r3.tasks', 'SIG_INVALID'], ['run/r3.tasks', 'WIRE_MALFORMED'], ['run/r3.tasks', 'WIRE_MALFORMED'],
      ['run/r3.tasks', 'NOT_A_MEMBER'],
    ]);
    expect(found.refused.every((r) => r.detail.startsWith('membership change '))).toBe(true);
  });

  it('a change two later journals no longer hold is refused (REFUSED); one later journal alone never cancels it', () => {
    const e = memberEntry('op', add(1, 'a5', 'n5'));
    const j = (replica: string, rsn: number, members: MemberEntry[]) => journalFile({ replica, rsn, tasks: [], members });
    // Only a retired replica's old file holds it; two replicas wrote later without it.
    const stale = collectRestores([j('r5', 10, [e]), j('r1', 40, []), j('r2', 41, [])], verifier, operators);
    expect(stale.members).toEqual([]);
    expect(stale.membership).toEqual({ added: [], removed: [] });
    expect(stale.refused).toEqual([{
      source: 'journals', task: 'node.add n5', code: 'REFUSED',
      detail: 'last journalled at RSN 10, absent from run/r1.tasks (RSN 40) and run/r2.tasks (RSN 41): the group never applied it',
    }]);
    // One later journal without it (it may be the faulty one), or journals of earlier RSNs: kept.
    const one = collectRestores([j('r1', 10, [e]), j('r2', 10, [e]), j('r3', 99, [])], verifier, operators);
    expect(hexed(one.members)).toEqual(hexed([restoreOf(e)]));
    expect(one.refused).toEqual([]);
    const earlier = collectRestores([j('r1', 10, [e]), j('r2', 5, []), j('r3', 5, [])], verifier, operators);
    expect(hexed(earlier.members)).toEqual(hexed([restoreOf(e)]));
  });
});

describe('node.restore in the fresh group (PROTOCOL §10.9, §10.12)', () => {
  /** The old cluster: n5 added (agent a5), n4 removed; its journals. */
  function oldCluster() {
    const { all } = changedCluster([add(1, 'a5', 'n5'), remove(2, 'n4')]);
    const j = all.get('r1');
    if (j === undefined) throw new Error('r1 wrote no journal');
    const [added, removed] = j.members;
    if (added === undefined || removed === undefined) throw new Error('expected two membership changes');
    return { added, removed };
  }

  it('the watchdog\'s restores give the fresh group the added node and its key, and take the removed one off; the changes are journalled again', () => {
    const { added, removed } = oldCluster();
    const c = makeCluster(4); // the restarted cluster: cluster.json's nodes, RSN 0
    c.run(200);
    expect(nodesOf(c)).toEqual(['a1:n1', 'a2:n2', 'a3:n3', 'a4:n4']);
    expect(operate(c, restoreOf(added), 'scc')).toEqual({ ok: true, text: 'node n5 added (agent a5 at 10.0.0.1); it joins when its agent starts' });
    expect(nodesOf(c)).toEqual(['a1:n1', 'a2:n2', 'a3:n3', 'a4:n4', 'a5:n5']);
    // Every replica hands the added agent's key to its driver, and its agent can join.
    expect(c.effects('keys').map((o) => `${o.proc}:${o.effect.keys.map((k) => k.id).join()}`).sort()).toEqual(['r1:a5', 'r2:a5', 'r3:a5']);
    expect(c.effects('keys')[0]?.effect.keys[0]?.publicKey).toEqual(KEY);
    c.addAgent('a5');
    c.run(500);
    expect(c.replicas[0]?.clusterView().nodes.find((x) => x.node === 'n5')?.state).toBe('up');

    expect(operate(c, restoreOf(removed), 'scc')).toEqual({ ok: true, text: 'n4 removed' });
    expect(nodesOf(c)).toEqual(['a1:n1', 'a2:n2', 'a3:n3', 'a5:n5']);
    expect(c.effects('deliver.command', 'a4').map((o) => o.effect.command).filter((x) => x.type === 'node.shutdown'))
      .toEqual([{ type: 'node.shutdown', rsn: expect.any(Number), removed: true }]);
    // Journalled again, with the operator's signature: a second reset restores them too.
    for (const j of journals(c).values()) expect(hexed(j.members)).toEqual(hexed([added, removed]));
    // A restore resent (until two replicas answer) is answered again, not re-applied.
    c.operate(restoreOf(added), undefined, 'scc');
    c.run(300);
    for (const j of journals(c).values()) expect(j.members).toHaveLength(2);
    expect(new Set(c.replicas.map((r) => r.digestHex())).size).toBe(1);
  });

  it('only the watchdog may send node.restore, and a forged change inside one is never ordered (logged restore.refused)', () => {
    const { added } = oldCluster();
    const c = makeCluster(4);
    c.run(200);
    const before = c.replicas.map((r) => r.status(c.now()).drops['NOT_A_MEMBER'] ?? 0);
    c.operate(restoreOf(added)); // from an operator
    c.run(300);
    expect(c.replicas.map((r) => r.status(c.now()).drops['NOT_A_MEMBER'] ?? 0)).toEqual(before.map((n) => n + 1));
    // From the watchdog, but the change is an agent's, or its signature is not the operator's.
    const forged = memberEntry('a1', add(7, 'a7', 'n7'));
    c.operate(restoreOf(forged), undefined, 'scc');
    c.operate({ ...restoreOf(added), opSig: new Uint8Array(64) }, undefined, 'scc');
    c.run(300);
    expect(c.opReplies).toEqual([]);
    for (const r of ['r1', 'r2', 'r3']) {
      const logged = c.effects('log', r).filter((o) => o.effect.event === 'restore.refused').map((o) => o.effect.fields);
      expect(logged).toEqual([
        expect.objectContaining({ nonce: nonce(7), code: 'NOT_A_MEMBER' }),
        expect.objectContaining({ nonce: added.nonce, code: 'SIG_INVALID' }),
      ]);
    }
    expect(nodesOf(c)).toEqual(['a1:n1', 'a2:n2', 'a3:n3', 'a4:n4']);
    for (const j of journals(c).values()) expect(j.members).toEqual([]);
  });
});

describe('a removed node\'s agent that joins again (PROTOCOL §10.12)', () => {
  const m = { replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [1, 2, 3, 4].map((i) => ({ id: `a${i}`, node: `n${i}` })) };

  it('is told again to stop its node (node.shutdown, removed); an agent the cluster never knew gets nothing', () => {
    const s = initialState(m);
    for (const a of ['a1', 'a2', 'a3', 'a4']) applyRequest(s, a, { type: 'node.join', slots: 4, resync: false }, 1);
    const q = remove(1, 'n4');
    const s4 = signedBy('op', q);
    const r = applyOperatorRequest(s, q, { bytes: s4.bytes, sig: s4.sig });
    expect(r.reply).toMatchObject({ ok: true, text: 'n4 removed' });
    expect(s.nodes.has('a4')).toBe(false);
    // Its agent restarts (or a reset booted it before the removal was restored) and joins.
    const again = applyRequest(s, 'a4', { type: 'node.join', slots: 4, resync: false }, 2);
    expect(again.messages.map((x) => [x.dest, x.payload])).toEqual([['a4', { type: 'node.shutdown', rsn: s.rsn, removed: true }]]);
    expect(s.nodes.has('a4')).toBe(false);
    expect(applyRequest(s, 'a9', { type: 'node.join', slots: 4, resync: false }, 1).messages).toEqual([]);
  });

  it('in a running group, the removed node\'s restarted agent gets node.shutdown {removed: true} again', () => {
    const c = makeCluster(4);
    c.run(200);
    operate(c, remove(1, 'n4'));
    const shutdowns = () => c.effects('deliver.command', 'a4').filter((o) => o.effect.command.type === 'node.shutdown');
    expect(shutdowns()).toHaveLength(1);
    c.restartAgent('a4', 2);
    c.run(1_000);
    expect(shutdowns().map((o) => o.effect.command)).toEqual([
      { type: 'node.shutdown', rsn: expect.any(Number), removed: true }, { type: 'node.shutdown', rsn: expect.any(Number), removed: true },
    ]);
    expect(nodesOf(c)).toEqual(['a1:n1', 'a2:n2', 'a3:n3']);
  });
});

describe('the membership log is bounded: MAX_MEMBER_CHANGES (PROTOCOL §10.12)', () => {
  const m = { replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [1, 2, 3, 4].map((i) => ({ id: `a${i}`, node: `n${i}` })) };
  const signed = (q: OperatorRequest) => {
    const s = signedBy('op', q);
    return { bytes: s.bytes, sig: s.sig };
  };

  it('at the limit, node.add and node.remove are refused with a reason naming it; below it, they are applied and recorded', () => {
    const s = initialState(m);
    const filler = { kind: 'add' as const, agent: 'ax', node: 'nx', op: new Uint8Array(1), opSig: new Uint8Array(64) };
    while (s.members.length < MAX_MEMBER_CHANGES - 1) s.members.push({ ...filler, nonce: nonce(100_000 + s.members.length) });
    const q1 = add(1, 'a5', 'n5');
    expect(applyOperatorRequest(s, q1, signed(q1)).reply).toMatchObject({ ok: true });
    expect(s.members).toHaveLength(MAX_MEMBER_CHANGES);
    expect(s.members.at(-1)).toMatchObject({ nonce: q1.nonce, kind: 'add', agent: 'a5', node: 'n5' });
    const q2 = add(2, 'a6', 'n6');
    const full = `the group has made ${MAX_MEMBER_CHANGES} membership changes since it started, all kept for a cluster reset (PROTOCOL §10.12): no more until the next one`;
    expect(applyOperatorRequest(s, q2, signed(q2)).reply).toMatchObject({ ok: false, text: `cannot add n6: ${full}` });
    const q3 = remove(3, 'n4');
    expect(applyOperatorRequest(s, q3, signed(q3)).reply).toMatchObject({ ok: false, text: `cannot remove n4: ${full}` });
    expect(s.members).toHaveLength(MAX_MEMBER_CHANGES);
    expect(s.nodes.has('a6')).toBe(false);
    expect(s.nodes.get('a4')?.draining).toBe(false);
  });

  it('a change applied without its signed request (signed = null) is not recorded', () => {
    const s = initialState(m);
    expect(applyOperatorRequest(s, add(1, 'a5', 'n5')).reply).toMatchObject({ ok: true });
    expect(s.members).toEqual([]);
  });
});

// ---- the watchdog (PROTOCOL §10.9) ---------------------------------------------------------

describe('watchdog: membership restores go first after a cluster reset (PROTOCOL §10.9, §10.12)', () => {
  const membership: Membership = {
    cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [{ id: 'a1', node: 'n1' }],
    scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
  };
  const PERIOD = DEFAULT_TIMING.sccHeartbeatMs;
  const hb = (inc: number, counter: number): Item => ({
    type: 'hb', inc, counter, info: { type: 'replica', role: 'backup', rsn: 1, gssn: 2, digest: new Uint8Array(32), view: 0, ckptRsn: 0, ckptDigest: new Uint8Array(32) },
  });
  const frame = (from: string, nowMs: number, ...items: Item[]): WatchdogInput => ({ type: 'frame', nowMs, frame: { from, to: 'scc', items } });
  /** The op.requests sent, as `to:label`. */
  const requests = (out: CoreEffect[]) => out.flatMap((e) => {
    if (e.type !== 'send' || e.item.type !== 'op.request') return [];
    const p = e.item.signed.cg.payload;
    return [`${e.to}:${p.type === 'node.restore' ? `${p.type} ${p.nonce.slice(-2)}` : p.type === 'task.restore' ? `${p.type} ${p.task}` : p.type}`];
  });

  it('the reset order names the added nodes; node.restore goes alone until two replicas confirm it, then the task.restore at once', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, signer: hmacSigner('scc'), verifier: hmacVerifier(['scc', 'op', 'r1', 'r2', 'r3']) });
    let counter = 0;
    const beat = (from: string, nowMs: number, inc: number) => w.step(frame(from, nowMs, hb(inc, ++counter)));
    // The old group added n5 and runs t1; two of its replicas sent their journals.
    const s = signedBy('op', submit(2));
    const old: TaskJournal = {
      replica: 'r1', rsn: 12, tasks: [{ task: 't1', nonce: nonce(2), submit: s.bytes, submitSig: s.sig }], members: [memberEntry('op', add(1, 'a5', 'n5'))],
    };
    const files = ['r1', 'r2'].map((r) => ({ source: `${r}.tasks`, data: encodeJournal({ ...old, replica: r }) }));
    let t = 0;
    for (; t < 1000; t += PERIOD) for (const r of ['r1', 'r2', 'r3']) beat(r, t, 10);
    files.forEach((f, i) => w.step(frame(`r${i + 1}`, t, { type: 'tasks.journal', inc: 10, journal: f.data })));
    // Only r1 goes on: rule 2 resets the cluster (the watchdog wakes as it asks).
    let order: Extract<CoreEffect, { type: 'reset.cluster' }> | undefined;
    for (let i = 0; i < 10_000 && order === undefined; i++) {
      t = w.nextWakeMs() ?? t + PERIOD;
      order = [...beat('r1', t, 10), ...w.step({ type: 'tick', nowMs: t })].find((e) => e.type === 'reset.cluster');
    }
    if (order === undefined) throw new Error('expected a cluster reset order');
    expect(order.journals).toHaveLength(2);
    expect(order.membership).toEqual({ added: [{ agent: 'a5', node: 'n5', address: '10.0.0.1' }], removed: [] });

    // The journals read back; the restarted group (incarnation 11) heartbeats.
    t += 5000;
    expect(requests(w.step({ type: 'restore.load', nowMs: t, journals: files }))).toEqual([]);
    expect(w.status(t).restoresPending.map((p) => p.task)).toEqual(['node.add n5', 't1']);
    beat('r1', t + 10, 11);
    expect(requests(beat('r2', t + 20, 11)).sort()).toEqual(['r1:node.restore 01', 'r2:node.restore 01']);
    // Resent alone while unconfirmed.
    beat('r1', t + 100, 11);
    beat('r2', t + 110, 11);
    expect(requests(w.step({ type: 'tick', nowMs: t + 20 + RESTORE_RESEND_MS })).sort()).toEqual(['r1:node.restore 01', 'r2:node.restore 01']);
    // One answer, then a second that differs: not confirmed, no task restore.
    const u = t + 20 + RESTORE_RESEND_MS + 10;
    const reply = (from: string, nowMs: number, text: string) =>
      w.step(frame(from, nowMs, { type: 'op.reply', nonce: nonce(1), rsn: 3, ok: true, text }));
    const added = 'node n5 added (agent a5 at 10.0.0.1); it joins when its agent starts';
    expect(requests(reply('r1', u, added))).toEqual([]);
    expect(requests(reply('r2', u + 1, 'something else'))).toEqual([]);
    beat('r3', u + 2, 11);
    // The second identical answer: the task restore goes in the same step, to every fresh replica.
    expect(requests(reply('r3', u + 3, added)).sort()).toEqual(['r1:task.restore t1', 'r2:task.restore t1', 'r3:task.restore t1']);
    expect(w.status(u + 3).restoresPending.map((p) => p.task)).toEqual(['t1']);
    expect(w.status(u + 3).restores).toContainEqual(expect.objectContaining({ kind: 'restored', task: 'node.add n5', ok: true, text: added }));
  });

  it('a second reset before the restarted group confirmed the membership restores still power-cycles the added node (its fresh journals are empty)', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, signer: hmacSigner('scc'), verifier: hmacVerifier(['scc', 'op', 'r1', 'r2', 'r3']) });
    let counter = 0;
    const beat = (from: string, nowMs: number, inc: number) => w.step(frame(from, nowMs, hb(inc, ++counter)));
    const journal = (replica: string, inc: number, j: TaskJournal) => ({ type: 'tasks.journal' as const, inc, journal: encodeJournal({ ...j, replica }) });
    /** r1–r3 of incarnation `inc` heartbeat from `t` for a second, r1 and r2 send `j`; then only r1
     *  goes on until the watchdog orders a cluster reset. */
    const untilReset = (t: number, inc: number, j: TaskJournal): { order: Extract<CoreEffect, { type: 'reset.cluster' }>; t: number } => {
      const end = t + 1000;
      for (; t < end; t += PERIOD) for (const r of ['r1', 'r2', 'r3']) beat(r, t, inc);
      for (const r of ['r1', 'r2']) w.step(frame(r, t, journal(r, inc, j)));
      for (let i = 0; i < 10_000; i++) {
        t = w.nextWakeMs() ?? t + PERIOD;
        const order = [...beat('r1', t, inc), ...w.step({ type: 'tick', nowMs: t })].find((e) => e.type === 'reset.cluster');
        if (order !== undefined && order.type === 'reset.cluster') return { order, t };
      }
      throw new Error('expected a cluster reset order');
    };
    const withN5: TaskJournal = { replica: 'r1', rsn: 12, tasks: [], members: [memberEntry('op', add(1, 'a5', 'n5'))] };
    const first = untilReset(0, 10, withN5);
    expect(first.order.membership.added.map((n) => n.node)).toEqual(['n5']);
    w.step({ type: 'restore.load', nowMs: first.t + 5000, journals: first.order.journals });
    // The restarted group serves and journals its (still empty) state; nobody confirms n5.
    const second = untilReset(first.t + 5000, 11, { replica: 'r1', rsn: 2, tasks: [], members: [] });
    expect(second.order.journals.length).toBeGreaterThanOrEqual(2);
    expect(second.order.membership).toEqual({ added: [{ agent: 'a5', node: 'n5', address: '10.0.0.1' }], removed: [] });
    expect(w.status(second.t).restoresPending.map((p) => p.task)).toEqual(['node.add n5']);
  });
});

describe('a removed node\'s name and agent id stay taken (PROTOCOL §10.12)', () => {
  it('the group refuses to add a node under the name or agent id of a cluster.json node it removed: the journal keys the net effect by name', () => {
    const c = makeCluster(4);
    c.run(200);
    operate(c, remove(1, 'n4', false));
    expect(operate(c, add(2, 'a9', 'n4'))).toEqual({ ok: false, text: 'cannot add n4: a node n4 was removed from this cluster: a name is never used again' });
    expect(operate(c, add(3, 'a4', 'n9'))).toEqual({ ok: false, text: 'cannot add n9: a4 is already a process of this cluster' });
    expect(nodesOf(c)).toEqual(['a1:n1', 'a2:n2', 'a3:n3']);
  });
});

// ---- the journal file (PROTOCOL §10.9) -----------------------------------------------------

describe('the version-2 journal with membership changes (PROTOCOL §10.9)', () => {
  const j: TaskJournal = {
    replica: 'r2', rsn: 42, tasks: [],
    members: [memberEntry('op', add(1, 'a5', 'n5')), memberEntry('op', remove(2, 'n4', true))],
  };

  it('round-trips byte for byte', () => {
    const bytes = encodeJournal(j);
    const back = decodeJournal(bytes);
    expect(hexed(back)).toEqual(hexed({ ok: true, value: j }));
    if (back.ok) expect(Buffer.from(encodeJournal(back.value)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('decoding is total: every truncation gives a typed reason, never a throw', () => {
    const bytes = encodeJournal(j);
    for (let cut = 0; cut < bytes.length; cut++) {
      const r = decodeJournal(bytes.subarray(0, cut));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.code).toMatch(/^WIRE_/);
    }
  });

  it('a version-1 file (no membership changes) is refused with WIRE_VERSION; an oversized membership change is refused', () => {
    expect(JOURNAL_VERSION).toBe(2);
    const v1 = pack([1, ['r1', 5, []]]);
    expect(decodeJournal(v1)).toMatchObject({ ok: false, code: 'WIRE_VERSION' });
    const huge = { ...j, members: [{ nonce: nonce(1), op: new Uint8Array(4096), opSig: new Uint8Array(64) }] };
    expect(decodeJournal(encodeJournal(huge))).toMatchObject({ ok: false, code: 'WIRE_LIMIT' });
  });
});
