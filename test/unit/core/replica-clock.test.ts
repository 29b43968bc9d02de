// One replica driven as run-core drives it (src/daemon/run-core.ts: a tick at each nextWakeMs,
// and a step per frame or driver event), without a network, so each step's time is exact: when a
// replica judges silence after its own pause (docs/PROTOCOL.md §6, §6.1), and what it makes of
// the driver's inputs and of peers' probes (§6, STYLE.md 6). Issue 15: each row was planted by
// hand against the mutants of src/core/replica.ts it names first.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, Membership, ReplicaInput } from '../../../src/core/node.ts';
import { InvariantError } from '../../../src/base/result.ts';
import type { ProcessId } from '../../../src/core/ports.ts';
import { createReplica } from '../../../src/core/replica.ts';
import type { HeartbeatInfo, Item } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier } from './harness.ts';

const T = DEFAULT_TIMING;
const membership: Membership = {
  cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [],
  agents: [{ id: 'a1', node: 'n1' }], scc: 'scc', operators: ['op'], timing: T,
};
const hash = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());

/** Replica `id` of a fresh cluster, every effect recorded with the time of its step. */
function driven(id: ProcessId) {
  const r = createReplica({ id, membership, hash, inc: 1, signer: hmacSigner(id), verifier: hmacVerifier(['r1', 'r2', 'r3', 'a1', 'scc', 'op']) });
  const seen: { at: number; effect: CoreEffect }[] = [];
  let counter = 0;
  const step = (input: ReplicaInput): CoreEffect[] => {
    const out = r.step(input);
    for (const effect of out) seen.push({ at: input.nowMs, effect });
    return out;
  };
  const frame = (from: ProcessId, nowMs: number, ...items: Item[]) => step({ type: 'frame', nowMs, frame: { from, to: id, items } });
  /** What a peer of the initial state, or an agent, says in its heartbeat. */
  const info = (from: ProcessId): HeartbeatInfo => (from.startsWith('a')
    ? { type: 'agent', gssnDelivered: 0, csnSent: 0 }
    : { type: 'replica', role: from === 'r1' ? 'primary' : 'backup', rsn: 0, gssn: 0, digest: Buffer.from(r.digestHex(), 'hex'), view: r.status(0).view, ckptRsn: 0, ckptDigest: new Uint8Array(32) });
  return {
    r, seen, step, frame,
    tick: (nowMs: number) => step({ type: 'tick', nowMs }),
    hb: (from: ProcessId, nowMs: number) => frame(from, nowMs, { type: 'hb', inc: 1, counter: ++counter, info: info(from) }),
    /** Steps at each time the replica asks for, up to `endMs`, as its driver takes them. */
    runTo(endMs: number): void {
      for (let w = r.nextWakeMs(); w !== null && w <= endMs; w = r.nextWakeMs()) step({ type: 'tick', nowMs: w });
    },
    suspicions: () => seen.flatMap((s) => (s.effect.type === 'suspect' ? [[s.at, s.effect.target, s.effect.reason, s.effect.detail]] : [])),
    logs: (event: string) => seen.flatMap((s) => (s.effect.type === 'log' && s.effect.event === event ? [{ at: s.at, fields: s.effect.fields }] : [])),
  };
}

describe('a replica judges silence on its own clock, and only its own pause puts a judgment off (PROTOCOL §6, §6.1)', () => {
  it('§6.1: steps exactly a heartbeat period (75 ms) apart are no pause: the peers, silent since 10 ms, are suspected at the 300 ms check, silent 290 ms', () => {
    const d = driven('r2');
    d.tick(0);
    d.hb('r1', 10);
    d.hb('r3', 10);
    for (let t = T.replicaHeartbeatMs; t <= 2 * T.replicaCheckMs; t += T.replicaHeartbeatMs) d.tick(t);
    expect(d.suspicions()).toEqual([
      [300, 'r1', 'heartbeat.missed', 'no heartbeat from r1 for 290 ms'],
      [300, 'r3', 'heartbeat.missed', 'no heartbeat from r3 for 290 ms'],
    ]);
    expect(d.logs('replica.paused')).toEqual([]);
  });

  it('§6.1: a pause that no check fell in leaves the replica checks where they were: the peers are still suspected at 300 ms, not sooner', () => {
    const d = driven('r2');
    d.tick(0);
    d.hb('r1', 10);
    d.hb('r3', 10);
    d.tick(100); // 90 ms after its previous step: a pause, with the 150 ms check still ahead
    d.runTo(2 * T.replicaCheckMs);
    expect(d.suspicions()).toEqual([
      [300, 'r1', 'heartbeat.missed', 'no heartbeat from r1 for 290 ms'],
      [300, 'r3', 'heartbeat.missed', 'no heartbeat from r3 for 290 ms'],
    ]);
  });

  it('§6, §6.1: a pause that no agent check fell in leaves the agent checks where they were: an agent silent since 10 ms turns late at the 220 ms check, not sooner', () => {
    const d = driven('r2');
    d.tick(0);
    d.hb('a1', 10);
    d.tick(100); // a pause, with the 110 ms agent check still ahead
    const health = () => d.r.status(0).agents.find((a) => a.id === 'a1')?.health;
    d.runTo(2 * T.agentCheckMs - 1);
    expect(health()).toBe('healthy');
    d.runTo(2 * T.agentCheckMs);
    expect(health()).toBe('late');
    d.runTo(3 * T.agentCheckMs);
    expect(health()).toBe('silent');
  });

  it('§6.1: only a pause longer than a replica check (150 ms) is logged, as replica.paused with its length', () => {
    const d = driven('r2');
    d.tick(0);
    d.tick(T.replicaCheckMs);
    expect(d.logs('replica.paused')).toEqual([]);
    d.tick(2 * T.replicaCheckMs + 1);
    expect(d.logs('replica.paused')).toEqual([{ at: 301, fields: { pausedMs: 151 } }]);
  });
});

describe('what a replica makes of its driver\'s inputs and of probes (PROTOCOL §6, STYLE.md 6)', () => {
  it('a frame its driver dropped is counted by its code in status, nothing else', () => {
    const d = driven('r2');
    d.tick(0);
    expect(d.step({ type: 'dropped', nowMs: 5, from: 'r3', code: 'SIG_INVALID', detail: 'bad signature' })).toEqual([]);
    expect(d.r.status(5).drops).toEqual({ SIG_INVALID: 1 });
  });

  it('an agent\'s input is no replica\'s: the types refuse it (typecheck.test.ts), and a driver wired wrong gets an InvariantError, not a silent step', () => {
    const d = driven('r2');
    d.tick(0);
    const request = { type: 'request', nowMs: 5, request: { type: 'echo', tag: 'x', fanout: 'self', count: 1, data: new Uint8Array([1]) } } as const;
    // @ts-expect-error a replica takes ReplicaInput only (issue 16 item 5)
    expect(() => d.r.step(request)).toThrow(InvariantError);
    expect(d.r.status(5).drops).toEqual({});
  });

  it('§6: a replica answers a peer replica\'s probe with its nonce; an agent\'s or an operator\'s probe gets nothing', () => {
    const d = driven('r2');
    d.tick(0);
    const replies = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'send' && e.item.type === 'probe.reply' ? [[e.to, e.item.nonce]] : []));
    expect(replies(d.frame('r3', 5, { type: 'probe', nonce: 7 }))).toEqual([['r3', 7]]);
    expect(replies(d.frame('a1', 6, { type: 'probe', nonce: 8 }))).toEqual([]);
    expect(replies(d.frame('op', 7, { type: 'probe', nonce: 9 }))).toEqual([]);
  });
});
