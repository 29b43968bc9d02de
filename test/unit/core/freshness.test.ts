// Status and task output only to a fresh request (issue 14 item 7; docs/PROTOCOL.md §7;
// src/core/freshness.ts): a challenge is taken once per sender, within CHALLENGE_TTL_MS, from
// this incarnation only; a replayed status query gets nothing from a replica and is counted
// REPLAYED; the new wire fields decode totally.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import {
  admitChallenge, CHALLENGE_TTL_MS, createFreshness, issueChallenge, MAX_CHALLENGES_PER_SENDER,
} from '../../../src/core/freshness.ts';
import type { CoreEffect, Membership, ReplicaInput } from '../../../src/core/node.ts';
import { createReplica } from '../../../src/core/replica.ts';
import type { DaemonReport } from '../../../src/core/status.ts';
import { pack, unpack } from '../../../src/core/wire/frame.ts';
import { itemWire, type Challenge, type Item } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier } from './harness.ts';

describe('freshness: a challenge of this incarnation, once per sender, within its TTL', () => {
  it('a fresh challenge is admitted once; the same again is REPLAYED, for that sender only', () => {
    const f = createFreshness(7);
    const c = issueChallenge(f, 1_000);
    expect(c).toEqual({ inc: 7, serial: 0, atMs: 1_000 });
    expect(admitChallenge(f, 'op', c, 1_010)).toBe('fresh');
    expect(admitChallenge(f, 'op', c, 1_020)).toBe('REPLAYED');
    // Another member's use is its own (a faulty member cannot spend the operator's challenge).
    expect(admitChallenge(f, 'a1', c, 1_020)).toBe('fresh');
    expect(issueChallenge(f, 1_030).serial).toBe(1);
  });

  it('a challenge older than CHALLENGE_TTL_MS, or of another incarnation, is REPLAYED; one never issued is UNEXPECTED', () => {
    const f = createFreshness(7);
    const c = issueChallenge(f, 1_000);
    expect(admitChallenge(f, 'op', c, 1_000 + CHALLENGE_TTL_MS + 1)).toBe('REPLAYED');
    const d = issueChallenge(f, 1_000);
    expect(admitChallenge(f, 'op', { ...d, inc: 6 }, 1_001)).toBe('REPLAYED');
    expect(admitChallenge(createFreshness(8), 'op', d, 1_001)).toBe('REPLAYED'); // the daemon restarted
    expect(admitChallenge(f, 'op', { ...d, serial: 2 }, 1_001)).toBe('UNEXPECTED');
    expect(admitChallenge(f, 'op', { ...d, atMs: 2_000 }, 1_001)).toBe('UNEXPECTED');
    expect(admitChallenge(f, 'op', d, 1_000 + CHALLENGE_TTL_MS)).toBe('fresh'); // the last good millisecond
  });

  it('a sender uses at most MAX_CHALLENGES_PER_SENDER within a TTL (OUT_OF_WINDOW), others are unaffected, and the table empties as they expire', () => {
    const f = createFreshness(1);
    const cs = Array.from({ length: MAX_CHALLENGES_PER_SENDER + 1 }, () => issueChallenge(f, 0));
    for (const c of cs.slice(0, -1)) expect(admitChallenge(f, 'a1', c, 10)).toBe('fresh');
    const last = cs[cs.length - 1] as Challenge;
    expect(admitChallenge(f, 'a1', last, 10)).toBe('OUT_OF_WINDOW');
    expect(admitChallenge(f, 'op', last, 10)).toBe('fresh');
    expect(f.used.get('a1')?.size).toBe(MAX_CHALLENGES_PER_SENDER);
    const later = issueChallenge(f, CHALLENGE_TTL_MS + 1);
    expect(admitChallenge(f, 'a1', later, CHALLENGE_TTL_MS + 1)).toBe('fresh');
    expect(f.used.get('a1')?.size).toBe(1);
  });
});

describe('a replica answers status only to a fresh query (issue 14 item 7, PROTOCOL §7)', () => {
  const membership: Membership = {
    cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [],
    agents: [{ id: 'a1', node: 'n1' }], scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
  };
  const hash = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());
  const replica = (inc: number) =>
    createReplica({ id: 'r1', membership, hash, inc, signer: hmacSigner('r1'), verifier: hmacVerifier(['r1', 'r2', 'r3', 'a1', 'op', 'scc']) });
  const frame = (from: string, nowMs: number, ...items: Item[]): ReplicaInput => ({ type: 'frame', nowMs, frame: { from, to: 'r1', items } });
  /** What the step answered: status and challenges (not the link's own hellos and heartbeats). */
  const answers = (effects: CoreEffect[]) =>
    effects.flatMap((e) => (e.type === 'send' && (e.item.type === 'status.reply' || e.item.type === 'challenge') ? [[e.to, e.item.type]] : []));
  const challengeOf = (effects: CoreEffect[]): Challenge => {
    const c = effects.find((e) => e.type === 'send' && e.item.type === 'challenge');
    if (c?.type !== 'send' || c.item.type !== 'challenge') throw new Error('expected a challenge');
    return c.item.challenge;
  };

  it('answers a fresh query; a replay of it (same bytes, any time later) gets nothing and is counted REPLAYED', () => {
    const r = replica(1_000);
    r.step({ type: 'tick', nowMs: 1_000 });
    const c = challengeOf(r.step(frame('op', 1_000, { type: 'challenge.ask', nonce: 5 })));
    const query: Item = { type: 'status.query', nonce: 6, challenge: c };
    expect(answers(r.step(frame('op', 1_002, query)))).toEqual([['op', 'status.reply']]);
    expect(answers(r.step(frame('op', 1_003, query)))).toEqual([]);
    expect(answers(r.step(frame('op', 1_000 + 10 * CHALLENGE_TTL_MS, query)))).toEqual([]);
    expect(r.status(1_000 + 10 * CHALLENGE_TTL_MS).drops['REPLAYED']).toBe(2);
    // A fresh query still works, for the operator and for an agent learning the group (§10.7).
    const d = challengeOf(r.step(frame('op', 60_000, { type: 'challenge.ask', nonce: 7 })));
    expect(answers(r.step(frame('op', 60_001, { ...query, challenge: d })))).toEqual([['op', 'status.reply']]);
    const e = challengeOf(r.step(frame('a1', 60_002, { type: 'challenge.ask', nonce: 8 })));
    expect(answers(r.step(frame('a1', 60_003, { type: 'status.query', nonce: 8, challenge: e })))).toEqual([['a1', 'status.reply']]);
  });

  it('the status it answers carries its daemon\'s own report (log lines lost, record writes failed) when the daemon gives one', () => {
    const report: DaemonReport = { logDrops: { ENOSPC: 3 }, records: { tasks: { failures: { EIO: 1 }, pending: true, lastError: 'EIO: i/o error', superseded: 2 } }, supervisor: null };
    const answered = (r: ReturnType<typeof createReplica>) => {
      r.step({ type: 'tick', nowMs: 1_000 });
      const c = challengeOf(r.step(frame('op', 1_000, { type: 'challenge.ask', nonce: 5 })));
      const reply = r.step(frame('op', 1_001, { type: 'status.query', nonce: 6, challenge: c })).find((e) => e.type === 'send' && e.item.type === 'status.reply');
      if (reply?.type !== 'send' || reply.item.type !== 'status.reply') throw new Error('no status.reply');
      return JSON.parse(reply.item.json) as Record<string, unknown>;
    };
    const withDaemon = createReplica({ id: 'r1', membership, hash, inc: 1_000, signer: hmacSigner('r1'), verifier: hmacVerifier(['r1', 'r2', 'r3', 'a1', 'op', 'scc']), daemon: () => report });
    expect(answered(withDaemon)['daemon']).toEqual(report);
    expect(answered(replica(1_000))).not.toHaveProperty('daemon');
  });

  it('a query on a challenge of the replica\'s earlier incarnation gets nothing (REPLAYED)', () => {
    const before = replica(1_000);
    before.step({ type: 'tick', nowMs: 1_000 });
    const c = challengeOf(before.step(frame('op', 1_000, { type: 'challenge.ask', nonce: 1 })));
    const after = replica(2_000);
    after.step({ type: 'tick', nowMs: 2_000 });
    expect(answers(after.step(frame('op', 2_001, { type: 'status.query', nonce: 1, challenge: c })))).toEqual([]);
    expect(after.status(2_001).drops['REPLAYED']).toBe(1);
  });

  it('neither a challenge nor a status goes to anyone but operators and agents (NOT_A_MEMBER); a challenge sent to a replica is UNEXPECTED', () => {
    const r = replica(1_000);
    r.step({ type: 'tick', nowMs: 1_000 });
    expect(answers(r.step(frame('scc', 1_001, { type: 'challenge.ask', nonce: 1 })))).toEqual([]);
    expect(answers(r.step(frame('scc', 1_001, { type: 'status.query', nonce: 1, challenge: { inc: 1_000, serial: 0, atMs: 1_000 } })))).toEqual([]);
    r.step(frame('op', 1_002, { type: 'challenge', nonce: 1, challenge: { inc: 1, serial: 0, atMs: 0 } }));
    const drops = r.status(1_002).drops;
    expect(drops['NOT_A_MEMBER']).toBe(2);
    expect(drops['UNEXPECTED']).toBe(1);
  });
});

describe('the new wire fields decode totally (issue 14 item 7)', () => {
  const challenge: Challenge = { inc: 1_700_000_000_000, serial: 12, atMs: 1_700_000_000_500 };
  const decode = (tree: unknown) => itemWire.dec(tree, 'item');

  it('status.query, challenge.ask and challenge round-trip through the real wire', () => {
    for (const item of [
      { type: 'status.query', nonce: 1, challenge },
      { type: 'challenge.ask', nonce: 2 ** 31 },
      { type: 'challenge', nonce: 0, challenge: { inc: Number.MAX_SAFE_INTEGER, serial: 0, atMs: 0 } },
    ] as const) {
      const tree = unpack(pack(itemWire.enc(item)));
      expect(tree.ok).toBe(true);
      expect(tree.ok && decode(tree.value)).toEqual({ ok: true, value: item });
    }
    expect(itemWire.enc({ type: 'status.query', nonce: 1, challenge })).toEqual([8, 1, [challenge.inc, 12, challenge.atMs]]);
    expect(itemWire.enc({ type: 'challenge.ask', nonce: 3 })).toEqual([21, 3]);
    expect(itemWire.enc({ type: 'challenge', nonce: 3, challenge })).toEqual([22, 3, [challenge.inc, 12, challenge.atMs]]);
  });

  it('a query without a challenge, or with a challenge that is not three unsigned integers, is a typed drop, never a throw', () => {
    const bad: unknown[] = [
      [8, 1], // the old query: no challenge
      [8, 1, null],
      [8, 1, []],
      [8, 1, [1, 2]],
      [8, 1, [1, 2, 3, 4]],
      [8, 1, [-1, 2, 3]],
      [8, 1, [1, 2.5, 3]],
      [8, 1, [1, 2, 2 ** 53]],
      [8, 1, ['1', 2, 3]],
      [8, 1, [1, 2, 3], 'extra'],
      [21],
      [21, -1],
      [22, 1],
      [22, 1, { inc: 1, serial: 2, atMs: 3 }],
      [16, 1, 't3', 0, 0, 0, 10], // a read of task output without its challenge
      [16, 1, 't3', 0, 0, 0, 10, [1, 2]],
    ];
    for (const tree of bad) {
      const r = decode(tree);
      expect(r.ok, JSON.stringify(tree)).toBe(false);
      if (!r.ok) expect(['WIRE_MALFORMED', 'WIRE_LIMIT']).toContain(r.code);
    }
  });
});
