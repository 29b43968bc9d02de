// Spare replica ids of nodes added at run time (docs/PROTOCOL.md §10.12, issue 13 item 5: "a
// cluster can replace replicas for as long as it has healthy nodes"): `node.add` brings the
// node's spare ids with their keys and ports, the pool grows by them, bound to that node, and a
// replacement may start there; the group tells agents the keys of such members (the `replicas`
// and `replica.spawn` commands), two replicas tell the watchdog (`replica.keys`), and the state
// transfers them to a replica whose cluster.json never named them. Stepped on the replicated
// state and the cores directly; a real added host that runs a replacement:
// test/e2e/hosts-added-spares.test.ts.
import { describe, expect, it } from 'vitest';
import { createAgent } from '../../../src/core/agent.ts';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, Membership } from '../../../src/core/node.ts';
import { applyGroupInput, applyOperatorRequest, applyRequest } from '../../../src/core/replicated-apply.ts';
import { addedSpares, encodeState, initialState, type ApplyResult, type ReplicatedState } from '../../../src/core/replicated-state.ts';
import { decodeState } from '../../../src/core/state-codec.ts';
import { createWatchdog } from '../../../src/core/watchdog.ts';
import type { AddedReplica, AddedSpare, GroupCommand, NodeAdd, SignedAccusation } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier } from './harness.ts';

let n = 0;
const nonce = () => (++n).toString(16).padStart(32, '0');
const key = (b: number) => new Uint8Array(32).fill(b);
const spare = (id: string, port: number, b: number): AddedSpare => ({ id, port, publicKey: key(b) });
const add = (agent: string, node: string, spares: AddedSpare[], address = '10.0.0.14'): NodeAdd =>
  ({ type: 'node.add', nonce: nonce(), agent, node, address, port: 7403, publicKey: key(1), spares });

const m = {
  replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [] as string[],
  agents: [{ id: 'a1', node: 'n1' }, { id: 'a2', node: 'n2' }, { id: 'a3', node: 'n3' }],
};
/** A group of r1..r3 on n1..n3, with no spare id of its own (a hosts file with
 *  `spares-per-host: 0`), its three agents joined. */
function group(): ReplicatedState {
  const s = initialState(m, DEFAULT_TIMING);
  for (const a of m.agents) applyRequest(s, a.id, { type: 'node.join', slots: 4, resync: false }, 1);
  return s;
}
const join = (s: ReplicatedState, agent: string) => applyRequest(s, agent, { type: 'node.join', slots: 4, resync: false }, 1);
/** Two members' accusations against `target` (signatures are the frame decoder's business). */
const condemn = (s: ReplicatedState, target: string, by: [string, string]): ApplyResult => {
  const evidence: SignedAccusation[] = by.map((from) => ({ bytes: new Uint8Array(1), sig: new Uint8Array(64), accusation: { from, view: s.group.view, target, reason: 'silent' } }));
  return applyGroupInput(s, { type: 'replica.condemn', evidence });
};
const commands = (r: ApplyResult, type: GroupCommand['type']) =>
  r.messages.filter((g) => g.payload.type === type).map((g) => ({ dest: g.dest, ...g.payload }) as GroupCommand & { dest: string });
const r4: AddedReplica = { id: 'r4', node: 'n4', address: '10.0.0.14', port: 7402, publicKey: key(4) };

describe('node.add with spare ids (PROTOCOL §10.12)', () => {
  it('the pool grows by the node\'s spares, bound to it, in the order the request gave them; the outcome names them', () => {
    const s = group();
    const r = applyOperatorRequest(s, add('a4', 'n4', [spare('r4', 7402, 4), spare('r5', 7401, 5)]));
    expect(r.reply).toMatchObject({ ok: true, text: 'node n4 added (agent a4 at 10.0.0.14, spare replicas r4, r5); it joins when its agent starts' });
    expect(s.pool).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
    expect([...s.spareNodes]).toEqual([['r4', 'n4'], ['r5', 'n4']]);
    expect(addedSpares(s.added)).toEqual([r4, { id: 'r5', node: 'n4', address: '10.0.0.14', port: 7401, publicKey: key(5) }]);
  });

  it('refused, changing nothing: a spare id that is a replica, an agent or another added spare; an id or a port twice', () => {
    const s = group();
    applyOperatorRequest(s, add('a4', 'n4', [spare('r4', 7402, 4)]));
    const refused = (q: NodeAdd) => applyOperatorRequest(s, q).reply?.text;
    expect(refused(add('a5', 'n5', [spare('r2', 7402, 6)], '10.0.0.15'))).toBe('cannot add n5: r2 is already a process of this cluster');
    expect(refused(add('a5', 'n5', [spare('a1', 7402, 6)], '10.0.0.15'))).toBe('cannot add n5: a1 is already a process of this cluster');
    expect(refused(add('a5', 'n5', [spare('r4', 7402, 6)], '10.0.0.15'))).toBe('cannot add n5: r4 is already a process of this cluster');
    expect(refused(add('r4', 'n5', [], '10.0.0.15'))).toBe('cannot add n5: r4 is already a process of this cluster');
    expect(refused(add('a5', 'n5', [spare('r6', 7402, 6), spare('r6', 7401, 7)], '10.0.0.15'))).toBe('cannot add n5: the request names a5, r6, r6: an id twice');
    expect(refused(add('a5', 'n5', [spare('a5', 7402, 6)], '10.0.0.15'))).toBe('cannot add n5: the request names a5, a5: an id twice');
    expect(refused(add('a5', 'n5', [spare('r6', 7403, 6)], '10.0.0.15'))).toBe('cannot add n5: the request gives ports 7403, 7403: a port twice on one host');
    expect(s.pool).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect([...s.added.keys()]).toEqual(['a4']);
    expect([...s.nodes.keys()]).toEqual(['a1', 'a2', 'a3', 'a4']);
  });

  it('§10.6: with no other node able to, a replacement starts on the added node with its spare; the agents then learn the new member\'s key and address', () => {
    const s = group();
    applyOperatorRequest(s, add('a4', 'n4', [spare('r4', 7402, 4)]));
    // Before its agent joined, no node can host the replacement: n1..n3 hold no spare id.
    const early = condemn(s, 'r2', ['r1', 'r3']);
    expect(s.replicas).toEqual(['r1', 'r3']);
    expect(commands(early, 'replica.spawn')).toEqual([]);
    expect(s.group.recovery).toMatchObject({ id: 'r4', node: null });
    // a4 joins: the replacement goes there, and its command names the members' added keys (none).
    const joined = join(s, 'a4');
    expect(commands(joined, 'replica.spawn')).toEqual([{ dest: 'a4', type: 'replica.spawn', id: 'r4', view: 1, primary: 'r1', replicas: ['r1', 'r3'], added: [] }]);
    // r4 joins the group: every agent is told, with r4's key and where it listens.
    const added = applyGroupInput(s, { type: 'replica.add', id: 'r4', port: 0, sig: new Uint8Array(64) });
    expect(s.replicas).toEqual(['r1', 'r3', 'r4']);
    const told = commands(added, 'replicas');
    expect(told.map((c) => c.dest).sort()).toEqual(['a1', 'a2', 'a3', 'a4']);
    for (const c of told) expect(c).toMatchObject({ type: 'replicas', view: 2, replicas: ['r1', 'r3', 'r4'], added: [r4] });
    // An agent that (re)joins now learns the group with r4's key as well.
    const rejoined = join(s, 'a2');
    expect(commands(rejoined, 'replicas')).toEqual([{ dest: 'a2', type: 'replicas', view: 2, primary: 'r1', replicas: ['r1', 'r3', 'r4'], ports: [], added: [r4] }]);
  });

  it('the state transfers the spares: a replica whose cluster.json never named them, or named them in another place, decodes the same pool', () => {
    const s = group();
    applyOperatorRequest(s, add('a5', 'n5', [spare('r6', 7402, 6)], '10.0.0.15'));
    applyOperatorRequest(s, add('a4', 'n4', [spare('r4', 7402, 4), spare('r5', 7401, 5)]));
    const bytes = encodeState(s);
    const timers = s.timers;
    // An initial replica's cluster.json: no spares at all.
    const plain = decodeState(bytes, { timers, pool: ['r1', 'r2', 'r3'], spareNodes: new Map() });
    // A spare of n4's bundle, written after n5 was added and before n4 was (operator's order).
    const later = decodeState(bytes, { timers, pool: ['r1', 'r2', 'r3', 'r6', 'r4', 'r5'], spareNodes: new Map([['r6', 'n5'], ['r4', 'n4'], ['r5', 'n4']]) });
    for (const d of [plain, later]) {
      expect(d.ok).toBe(true);
      if (!d.ok) continue;
      // By agent id, then as each request listed them: a4's r4, r5, then a5's r6.
      expect(d.value.pool).toEqual(['r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
      expect([...d.value.spareNodes].sort()).toEqual([['r4', 'n4'], ['r5', 'n4'], ['r6', 'n5']]);
      expect(encodeState(d.value)).toEqual(bytes);
    }
    expect(s.pool).toEqual(['r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
  });
});

describe('the agent learns the keys of added members (PROTOCOL §10.12)', () => {
  const membership: Membership = { cluster: 'test', ...m, scc: 'scc', operators: ['op'], timing: { ...DEFAULT_TIMING } };

  it('from the `group` input two replicas agreed on: a `keys` effect with where r4 listens, before the group changes; once per id', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1') });
    a.step({ type: 'tick', nowMs: 0 });
    const out = a.step({ type: 'group', nowMs: 10, view: 2, primary: 'r1', replicas: ['r1', 'r3', 'r4'], ports: [], added: [r4] });
    const types = out.map((e) => e.type);
    const keys = out.filter((e): e is Extract<CoreEffect, { type: 'keys' }> => e.type === 'keys');
    expect(keys).toEqual([{ type: 'keys', keys: [{ id: 'r4', publicKey: key(4), replica: { node: 'n4', address: '10.0.0.14', port: 7402 } }] }]);
    expect(types.indexOf('keys')).toBeLessThan(types.indexOf('replicas'));
    expect(a.status(10).replicas.map((r) => r.id).sort()).toEqual(['r1', 'r3', 'r4']);
    const again = a.step({ type: 'group', nowMs: 20, view: 3, primary: 'r1', replicas: ['r1', 'r4', 'r5'], ports: [], added: [r4] });
    expect(again.some((e) => e.type === 'keys')).toBe(false);
  });
});

describe('the watchdog learns the keys of added members from two replicas (PROTOCOL §10.12)', () => {
  const membership: Membership = { cluster: 'test', ...m, scc: 'scc', operators: ['op'], timing: { ...DEFAULT_TIMING } };
  const info = { type: 'replica' as const, role: 'backup' as const, rsn: 5, gssn: 0, digest: key(7), view: 2, ckptRsn: 0, ckptDigest: new Uint8Array(32) };
  const wd = () => createWatchdog({ id: 'scc', membership, inc: 1, signer: hmacSigner('scc'), verifier: hmacVerifier(['r1', 'r2', 'r3', 'op']) });
  const keysFrom = (w: ReturnType<typeof wd>, from: string, replicas: AddedReplica[], nowMs: number) =>
    w.step({ type: 'frame', nowMs, frame: { from, to: 'scc', items: [{ type: 'replica.keys', replicas }] } });
  const hb = (w: ReturnType<typeof wd>, from: string, nowMs: number) =>
    w.step({ type: 'frame', nowMs, frame: { from, to: 'scc', items: [{ type: 'hb', inc: 1, counter: nowMs, info }] } });
  const heard = (w: ReturnType<typeof wd>, nowMs: number) => w.status(nowMs).replicas.filter((r) => r.heartbeats > 0).map((r) => r.id);

  it('one replica\'s claim, or two that differ in the key, give r4 nothing: its heartbeats are not taken', () => {
    const w = wd();
    expect(keysFrom(w, 'r1', [r4], 10).filter((e) => e.type === 'keys')).toEqual([]);
    expect(keysFrom(w, 'r3', [{ ...r4, publicKey: key(9) }], 20).filter((e) => e.type === 'keys')).toEqual([]);
    hb(w, 'r4', 30);
    expect(heard(w, 30)).toEqual([]);
    expect(w.status(30).drops['NOT_A_MEMBER']).toBe(1);
    // A stranger's claim counts for nothing, and is dropped too.
    keysFrom(w, 'a1', [r4], 40);
    keysFrom(w, 'a1', [r4], 41);
    expect(w.status(41).drops['NOT_A_MEMBER']).toBe(3);
    hb(w, 'r4', 50);
    expect(heard(w, 50)).toEqual([]);
  });

  it('two replicas that agree make r4 a replica of the watchdog: a `keys` effect, and its heartbeats count from then on', () => {
    const w = wd();
    keysFrom(w, 'r1', [r4], 10);
    const out = keysFrom(w, 'r3', [r4], 20);
    expect(out.filter((e) => e.type === 'keys')).toEqual([{ type: 'keys', keys: [{ id: 'r4', publicKey: key(4), replica: { node: 'n4', address: '10.0.0.14', port: 7402 } }] }]);
    hb(w, 'r4', 30);
    expect(heard(w, 30)).toEqual(['r4']);
    expect(w.status(30).replicas.map((r) => r.id)).toContain('r4');
    // Ids of cluster.json's processes never become replicas, however many replicas say so.
    const op = { ...r4, id: 'op' };
    const a1 = { ...r4, id: 'a1' };
    expect(keysFrom(w, 'r1', [op, a1], 32).concat(keysFrom(w, 'r3', [op, a1], 33)).filter((e) => e.type === 'keys')).toEqual([]);
    // Learnt once: the same claims again change nothing, and no later claim gives it another key.
    expect(keysFrom(w, 'r1', [{ ...r4, publicKey: key(9) }], 40).concat(keysFrom(w, 'r3', [{ ...r4, publicKey: key(9) }], 50)).filter((e) => e.type === 'keys')).toEqual([]);
  });
});
