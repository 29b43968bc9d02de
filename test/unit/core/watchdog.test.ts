// The watchdog core (spec §1.6, §2.3; docs/PROTOCOL.md §6–§7, §10.8): it records replica
// heartbeats, drops replays and heartbeats from anyone else, answers operators' status queries,
// never sends anything on the routine path, and resets the cluster when consistent heartbeats
// from two replicas stop (rule 2) or self-diagnosis repeats too often (rule 3).
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, CoreInput, Membership } from '../../../src/core/node.ts';
import type { DaemonReport } from '../../../src/core/status.ts';
import { encodeJournal } from '../../../src/core/task-journal.ts';
import {
  createWatchdog, MAX_ADDED_NODE_VOTES, MAX_CLUSTER_RESET_HISTORY, MAX_RESET_HISTORY, MAX_RESTORE_HISTORY, RESTORE_RESEND_MS, SCC_SHUTDOWN_LINGER_MS, WATCHDOG_LATE_PERIODS, WATCHDOG_SILENT_PERIODS,
  WATCHDOG_STALL_PERIODS, type WatchdogStatus,
} from '../../../src/core/watchdog.ts';
import { signCG } from '../../../src/core/wire/frame.ts';
import type { AddedReplica, Item, NodeAdd, NodeRemove } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier } from './harness.ts';

const keys = { signer: hmacSigner('scc'), verifier: hmacVerifier(['scc', 'op', 'r1', 'r2', 'r3']) };

const membership: Membership = {
  cluster: 'c1',
  replicas: ['r1', 'r2', 'r3'],
  replicaNodes: ['n1', 'n2', 'n3'],
  spareReplicas: [],
  agents: [{ id: 'a1', node: 'n1' }],
  scc: 'scc',
  operators: ['op'],
  timing: DEFAULT_TIMING,
};

const hb = (inc: number, counter: number, rsn = 1, role: 'primary' | 'backup' = 'backup', view = 0): Item => ({
  type: 'hb', inc, counter, info: { type: 'replica', role, rsn, gssn: 2, digest: new Uint8Array(32).fill(0xab), view, ckptRsn: 0, ckptDigest: new Uint8Array(32) },
});
const frame = (from: string, nowMs: number, ...items: Item[]): CoreInput => ({ type: 'frame', nowMs, frame: { from, to: 'scc', items } });
const sends = (effects: CoreEffect[]) => effects.filter((e) => e.type === 'send');

describe('watchdog core', () => {
  it('records replica heartbeats and reports their age, role, RSN and GSSN', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    expect(sends(w.step(frame('r1', 1000, hb(10, 1, 5, 'primary'))))).toEqual([]);
    expect(sends(w.step(frame('r2', 1010, hb(11, 1))))).toEqual([]);
    const s = w.status(1100);
    expect(s.replicas.map((r) => [r.id, r.health, r.lastHeartbeatAgeMs, r.role, r.rsn, r.gssn])).toEqual([
      ['r1', 'healthy', 100, 'primary', 5, 2],
      ['r2', 'healthy', 90, 'backup', 1, 2],
      ['r3', 'unknown', null, null, null, null],
    ]);
    expect(s.replicas[0]?.digest).toBe('ab'.repeat(32));
    const period = DEFAULT_TIMING.sccHeartbeatMs;
    expect(w.status(1000 + 3 * period).replicas[0]?.health).toBe('late');
    expect(w.status(1000 + 5 * period).replicas[0]?.health).toBe('silent');
  });

  it('health: healthy up to WATCHDOG_LATE_PERIODS periods old, late up to WATCHDOG_SILENT_PERIODS, then silent; an age is never negative', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    w.step(frame('r1', 1000, hb(10, 1)));
    const late = WATCHDOG_LATE_PERIODS * DEFAULT_TIMING.sccHeartbeatMs;
    const silent = WATCHDOG_SILENT_PERIODS * DEFAULT_TIMING.sccHeartbeatMs;
    expect([late, late + 1, silent, silent + 1].map((age) => w.status(1000 + age).replicas[0]?.health)).toEqual(['healthy', 'late', 'late', 'silent']);
    expect(w.status(990).replicas[0]).toMatchObject({ lastHeartbeatAgeMs: 0, health: 'healthy' }); // a status read with an earlier clock
  });

  it('drops replayed heartbeats: (inc, counter) must increase per sender', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    w.step(frame('r1', 1000, hb(10, 5)));
    w.step(frame('r1', 2000, hb(10, 5))); // replay
    w.step(frame('r1', 2000, hb(10, 4))); // older
    w.step(frame('r1', 2000, hb(9, 99))); // older incarnation
    let s = w.status(2000);
    expect(s.replicas[0]?.lastHeartbeatAgeMs).toBe(1000);
    expect(s.replicas[0]?.replays).toBe(3);
    expect(s.drops['REPLAYED']).toBe(3);
    const restarted = w.step(frame('r1', 2000, hb(11, 1))); // restarted replica: new incarnation, counter restarts
    expect(restarted).toEqual([{ type: 'log', level: 'info', event: 'replica.restarted', fields: { replica: 'r1', inc: 11 } }]);
    expect(w.step(frame('r1', 2000, hb(11, 2)))).toEqual([]); // the same incarnation's next one: nothing to say
    s = w.status(2000);
    expect(s.replicas[0]?.lastHeartbeatAgeMs).toBe(0);
    expect(s.replicas[0]?.inc).toBe(11);
  });

  it('ignores heartbeats from non-replicas and agent-type heartbeats', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    w.step(frame('a1', 1000, hb(1, 1)));
    w.step(frame('op', 1000, hb(1, 1)));
    w.step(frame('r1', 1000, { type: 'hb', inc: 1, counter: 1, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } }));
    const s = w.status(1000);
    expect(s.replicas.every((r) => r.heartbeats === 0)).toBe(true);
    expect(s.ignored).toBe(3);
    expect(s.drops).toEqual({ NOT_A_MEMBER: 2, UNEXPECTED: 1 }); // a replica's agent-type heartbeat is not a stranger's
  });

  it('answers status queries from operators and agents only (a booting node asks, PROTOCOL §10.10)', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 7, ...keys });
    w.step(frame('r2', 1000, hb(3, 1)));
    /** A fresh challenge of the watchdog's for `from` (PROTOCOL §7). */
    const challenge = (from: string, nowMs: number) => {
      const c = sends(w.step(frame(from, nowMs, { type: 'challenge.ask', nonce: 9 })))[0];
      if (c?.type !== 'send' || c.item.type !== 'challenge') throw new Error('expected a challenge');
      return c.item.challenge;
    };
    const out = sends(w.step(frame('op', 1050, { type: 'status.query', nonce: 42, challenge: challenge('op', 1040) })));
    expect(out).toHaveLength(1);
    const reply = out[0];
    if (reply?.type !== 'send' || reply.item.type !== 'status.reply') throw new Error('expected a status.reply');
    expect(reply.to).toBe('op');
    expect(reply.item.nonce).toBe(42);
    const status = JSON.parse(reply.item.json) as WatchdogStatus;
    expect(status.id).toBe('scc');
    expect(status.inc).toBe(7);
    expect(status.replicas[1]?.lastHeartbeatAgeMs).toBe(50);
    expect(sends(w.step(frame('r1', 1100, { type: 'challenge.ask', nonce: 1 })))).toEqual([]);
    expect(sends(w.step(frame('r1', 1100, { type: 'status.query', nonce: 1, challenge: { inc: 7, serial: 0, atMs: 1040 } })))).toEqual([]);
    const toAgent = sends(w.step(frame('a1', 1100, { type: 'status.query', nonce: 2, challenge: challenge('a1', 1100) })));
    expect(toAgent.map((e) => (e.type === 'send' ? [e.to, e.item.type] : null))).toEqual([['a1', 'status.reply']]);
    expect(status.clusterResetCount).toBe(0);
  });

  it('issue 14 item 7: a replayed status query gets nothing and is counted REPLAYED; a fresh one is answered', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 7, ...keys });
    const ask = sends(w.step(frame('op', 1000, { type: 'challenge.ask', nonce: 1 })))[0];
    if (ask?.type !== 'send' || ask.item.type !== 'challenge') throw new Error('expected a challenge');
    const query: Item = { type: 'status.query', nonce: 2, challenge: ask.item.challenge };
    expect(sends(w.step(frame('op', 1010, query))).map((e) => e.type === 'send' && e.item.type)).toEqual(['status.reply']);
    expect(sends(w.step(frame('op', 1020, query)))).toEqual([]);
    expect(sends(w.step(frame('op', 60_000, query)))).toEqual([]);
    expect(w.status(60_000).drops['REPLAYED']).toBe(2);
    const fresh = sends(w.step(frame('op', 60_000, { type: 'challenge.ask', nonce: 3 })))[0];
    if (fresh?.type !== 'send' || fresh.item.type !== 'challenge') throw new Error('expected a challenge');
    expect(sends(w.step(frame('op', 60_001, { ...query, challenge: fresh.item.challenge }))).map((e) => e.type === 'send' && e.item.type)).toEqual(['status.reply']);
  });

  it('never sends on ticks, link changes or drops, and never needs a wake-up', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    const inputs: CoreInput[] = [
      { type: 'tick', nowMs: 1 },
      { type: 'transport.up', nowMs: 2, peer: 'r1' },
      { type: 'transport.down', nowMs: 3, peer: 'r1' },
      { type: 'dropped', nowMs: 4, from: 'r1', code: 'SIG_INVALID', detail: 'x' },
      frame('r1', 5, hb(1, 1), { type: 'probe', nonce: 1 }),
    ];
    for (const i of inputs) expect(sends(w.step(i))).toEqual([]);
    expect(w.nextWakeMs()).toBeNull();
    expect(w.status(5).drops['SIG_INVALID']).toBe(1);
  });

  it('replica.keys: the watchdog\'s own id or a replica\'s never becomes an added replica, however many replicas name it (PROTOCOL §10.12)', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    const added = (id: string): AddedReplica => ({ id, node: 'n5', address: '10.0.0.5', port: 7405, publicKey: new Uint8Array(32).fill(5) });
    const claim: Item = { type: 'replica.keys', replicas: [added('scc'), added('r3'), added('r5')] };
    w.step(frame('r1', 10, claim));
    const out = w.step(frame('r2', 20, claim));
    expect(out.filter((e) => e.type === 'keys')).toEqual([{ type: 'keys', keys: [{ id: 'r5', publicKey: added('r5').publicKey, replica: { node: 'n5', address: '10.0.0.5', port: 7405 } }] }]);
    expect(out).toContainEqual({ type: 'log', level: 'info', event: 'replica.learnt', fields: { replicas: ['r5'], by: ['r1', 'r2'] } });
  });

  it('a replayed heartbeat or self-diagnosis report is logged at debug as hb.replayed or diag.replayed, with its sender, incarnation and counter (PROTOCOL §10.8)', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    w.step(frame('r1', 1000, hb(10, 5)));
    expect(w.step(frame('r1', 1010, hb(10, 5)))).toEqual([{ type: 'log', level: 'debug', event: 'hb.replayed', fields: { from: 'r1', inc: 10, counter: 5 } }]);
    const report = (counter: number): Item => ({ type: 'diag.report', inc: 10, counter, view: 0, reason: 'silent', target: 'r3' });
    w.step(frame('r2', 1020, report(7)));
    expect(w.step(frame('r2', 1030, report(6)))).toEqual([{ type: 'log', level: 'debug', event: 'diag.replayed', fields: { from: 'r2', inc: 10, counter: 6 } }]);
  });

  it('an item it does not take from its sender (a probe, an op.reply from a non-replica) is ignored and counted UNEXPECTED', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    expect(w.step(frame('r1', 10, { type: 'probe', nonce: 1 }))).toEqual([]);
    expect(w.step(frame('op', 20, { type: 'op.reply', nonce: (1).toString(16).padStart(32, '0'), rsn: 1, ok: true, text: 't1' }))).toEqual([]);
    expect(w.status(20)).toMatchObject({ ignored: 2, drops: { UNEXPECTED: 2 } });
  });

  it('the status carries what its daemon says of itself, read each time a status is built; none without a daemon (issue 14 item 4)', () => {
    let restarts = 0;
    const daemon = (): DaemonReport => ({ logDrops: { ENOSPC: 1 }, records: {}, supervisor: { restarts, lastExit: null } });
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys, daemon });
    expect(w.status(0).daemon).toEqual({ logDrops: { ENOSPC: 1 }, records: {}, supervisor: { restarts: 0, lastExit: null } });
    restarts = 2;
    expect(w.status(0).daemon?.supervisor).toEqual({ restarts: 2, lastExit: null });
    expect(createWatchdog({ id: 'scc', membership, inc: 1, ...keys }).status(0)).not.toHaveProperty('daemon');
  });

  it('replica.keys: two replicas must name an added replica alike; naming it with another id, node, address, port or key, they teach it nothing (PROTOCOL §10.12)', () => {
    const r5: AddedReplica = { id: 'r5', node: 'n5', address: '10.0.0.5', port: 7405, publicKey: new Uint8Array(32).fill(5) };
    const unlike: AddedReplica[] = [
      { ...r5, id: 'r6' }, { ...r5, node: 'n6' }, { ...r5, address: '10.0.0.6' }, { ...r5, port: 7406 }, { ...r5, publicKey: new Uint8Array(32).fill(6) },
    ];
    for (const other of unlike) {
      const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
      w.step(frame('r1', 10, { type: 'replica.keys', replicas: [other] }));
      const out = w.step(frame('r2', 20, { type: 'replica.keys', replicas: [r5] }));
      expect(out.filter((e) => e.type === 'keys' || (e.type === 'log' && e.event === 'replica.learnt'))).toEqual([]);
      w.step(frame('r5', 30, hb(1, 1)));
      expect(w.status(30).drops).toEqual({ NOT_A_MEMBER: 1 }); // still a stranger
    }
  });
});

// ---- cluster resets (spec §1.6 rules 2 and 3) ----------------------------------------------

const PERIOD = DEFAULT_TIMING.sccHeartbeatMs;
/** How long a heartbeat counts as fresh: WATCHDOG_LATE_PERIODS periods. */
const FRESH = WATCHDOG_LATE_PERIODS * PERIOD;
const SILENCE = DEFAULT_TIMING.watchdogSilenceMs;
const withSpare: Membership = { ...membership, spareReplicas: ['r4'] };

/** A watchdog and a group that drives it: every sender's (inc, counter) increases per item kind. */
function setup(m: Membership = withSpare) {
  const w = createWatchdog({ id: 'scc', membership: m, inc: 1, ...keys });
  const counters = new Map<string, number>();
  const next = (key: string) => {
    const n = (counters.get(key) ?? 0) + 1;
    counters.set(key, n);
    return n;
  };
  const effects: CoreEffect[] = [];
  let lastMs = -Infinity;
  const feed = (input: CoreInput) => {
    const out = w.step(input);
    lastMs = input.nowMs;
    effects.push(...out);
    return out;
  };
  const beat = (from: string, nowMs: number, view = 0, inc = 10) => feed(frame(from, nowMs, hb(inc, next(`hb ${from} ${inc}`), 1, 'backup', view)));
  /** The watchdog running until `nowMs`: woken every period, as its nextWakeMs asks while armed
   *  (a longer gap would be a stall of its own, WATCHDOG_STALL_PERIODS). */
  const tick = (nowMs: number) => {
    const out: CoreEffect[] = [];
    for (let t = lastMs + PERIOD; t < nowMs; t += PERIOD) out.push(...feed({ type: 'tick', nowMs: t }));
    out.push(...feed({ type: 'tick', nowMs }));
    return out;
  };
  return {
    w,
    /** A frame of `items` from `from`, with the effects it gives. */
    send: (from: string, nowMs: number, ...items: Item[]) => feed(frame(from, nowMs, ...items)),
    beat,
    tick,
    /** The watchdog not running until `nowMs` (a stall of its own), then woken once. */
    stallUntil: (nowMs: number) => feed({ type: 'tick', nowMs }),
    /** When rule 2 resets the cluster unless two consistent heartbeats come first. */
    deadline: () => w.status(lastMs).silenceDeadlineMs ?? NaN,
    report: (from: string, nowMs: number, inc = 10) =>
      feed(frame(from, nowMs, { type: 'diag.report', inc, counter: next(`diag ${from} ${inc}`), view: 0, reason: 'silent', target: 'r3' })),
    /** Heartbeats from `ids` (in `view`) every period in [fromMs, toMs), each round followed by a tick. */
    run: (ids: string[], fromMs: number, toMs: number, view = 0, inc = 10) => {
      for (let t = fromMs; t < toMs; t += PERIOD) {
        for (const id of ids) beat(id, t, view, inc);
        tick(t);
      }
    },
    clusterResets: () => effects.filter((e) => e.type === 'reset.cluster'),
  };
}

describe('watchdog rule 2: consistent heartbeats from two replicas (spec §1.6)', () => {
  it('arms once two replicas report the same view while both are fresh', () => {
    const g = setup();
    g.beat('r1', 1000);
    expect(g.w.status(1000).armed).toBe(false);
    expect(g.w.nextWakeMs()).toBeNull();
    g.beat('r2', 1000 + FRESH + 1); // r1 is no longer fresh: never two fresh together
    expect(g.w.status(1000 + FRESH + 1).armed).toBe(false);
    g.beat('r3', 1200, 1); // fresh alongside r2, but in another view
    expect(g.w.status(1200).armed).toBe(false);
    g.beat('r1', 1250);
    expect(g.w.status(1250).armed).toBe(true);
    // r1 (1250) and r2 (1151) stay consistent until r2's heartbeat ages out.
    expect(g.deadline()).toBe(1000 + FRESH + 1 + FRESH + SILENCE);
  });

  it('never resets while two replicas heartbeat consistently, even with the third silent', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 1000);
    g.run(['r1', 'r2'], 1000, 20_000);
    g.tick(20_000);
    expect(g.clusterResets()).toEqual([]);
    const s = g.w.status(20_000);
    expect(s.armed).toBe(true);
    expect(s.replicas.find((r) => r.id === 'r3')?.health).toBe('silent');
    expect(s.clusterResets).toEqual([]);
  });

  it('A21: two replicas fail at once → cluster reset after watchdogSilenceMs, exactly once', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 1000); // last round at 975
    g.run(['r1'], 1050, 1500);
    const deadline = 975 + FRESH + SILENCE; // when r2 and r3's last heartbeats aged out, plus the silence
    expect(g.deadline()).toBe(deadline);
    g.run(['r1'], 1500, deadline);
    expect(g.clusterResets()).toEqual([]);
    const out = g.tick(deadline);
    expect(out.filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
    expect(out.some((e) => e.type === 'log' && e.level === 'warn' && e.event === 'cluster.reset')).toBe(true);
    g.run(['r1'], deadline, deadline + 10 * SILENCE);
    expect(g.clusterResets()).toHaveLength(1);
    // What a booting node reads to start its initial replica again (PROTOCOL §10.10).
    expect(g.w.status(deadline + 10 * SILENCE).clusterResetCount).toBe(1);
    expect(g.w.nextWakeMs()).toBeNull();
    const s = g.w.status(deadline);
    expect(s.armed).toBe(false);
    expect(s.clusterResets).toHaveLength(1);
    expect(s.clusterResets[0]).toMatchObject({ atMs: deadline, rule: 'heartbeats' });
    expect(s.clusterResets[0]?.reason).toContain('r1 (view 0)');
  });

  it('resets when the two replicas still heartbeating disagree on the view', () => {
    const g = setup();
    g.run(['r1', 'r2', 'r3'], 0, 1000);
    // r3 falls silent; r1 and r2 do not agree on the view that follows.
    for (let t = 1000; t < 1000 + 2 * SILENCE; t += PERIOD) {
      g.beat('r1', t, 1);
      g.beat('r2', t, 2);
      g.tick(t);
      // Two replicas last agreed (view 0, fresh) at 1000, just before r2 left view 0.
      if (t === 1000) expect(g.deadline()).toBe(1000 + SILENCE);
    }
    const resets = g.w.status(1000 + 2 * SILENCE).clusterResets;
    expect(resets).toHaveLength(1);
    expect(resets[0]?.atMs).toBe(1000 + 27 * PERIOD); // the first input at or after the deadline
  });

  it('a heartbeat that arrives after the deadline does not undo the silence before it', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 1000);
    const deadline = g.deadline();
    g.tick(deadline - 1); // the watchdog runs, woken every period
    const out = g.beat('r2', deadline + 5); // the frame brings the time past the deadline
    expect(out.filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
  });

  it('a stall of the watchdog itself does not reset a group whose heartbeats wait unread; a dead group is still reset after the grace', () => {
    // Loaded host: the watchdog's event loop does not run for 3 s; the heartbeats sent meanwhile
    // are read only after. They are judged, not the silence the watchdog could not observe.
    const g = setup();
    g.run(['r1', 'r2'], 0, 1000);
    const stalledAt = g.deadline() + 1000;
    const first = g.beat('r1', stalledAt);
    expect(first.some((e) => e.type === 'log' && e.event === 'watchdog.stalled')).toBe(true);
    g.beat('r2', stalledAt + 1);
    g.run(['r1', 'r2'], stalledAt + 75, stalledAt + 3000);
    expect(g.clusterResets()).toEqual([]);
    // Stalled again, and this time the group is gone: reset once the grace has passed.
    const again = g.deadline() + 1000;
    expect(g.stallUntil(again).filter((e) => e.type === 'reset.cluster')).toEqual([]);
    expect(g.tick(again + FRESH).filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
  });

  it('never resets before it is armed', () => {
    const g = setup();
    g.run(['r1'], 0, 10 * SILENCE); // one replica only
    const h = setup();
    for (let t = 0; t < 10 * SILENCE; t += PERIOD) { // two replicas that never agree on the view
      h.beat('r1', t, 0);
      h.beat('r2', t, 1);
      h.tick(t);
    }
    for (const x of [g, h]) {
      expect(x.clusterResets()).toEqual([]);
      expect(x.w.nextWakeMs()).toBeNull();
      expect(x.w.status(10 * SILENCE).armed).toBe(false);
    }
  });

  it('after a reset, only the restarted group (new incarnations) re-arms it', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    g.run(['r1', 'r2'], 3000, 4000); // the old processes, still up: they do not re-arm
    expect(g.w.status(4000).armed).toBe(false);
    g.run(['r1', 'r3'], 5000, 5200, 0, 11); // restarted: new incarnations
    expect(g.w.status(5200).armed).toBe(true);
    expect(g.deadline()).toBe(5150 + FRESH + SILENCE);
    g.tick(5150 + FRESH + SILENCE);
    expect(g.clusterResets()).toHaveLength(2);
  });

  it('accepts heartbeats from spare replicas, which count like the initial three', () => {
    const g = setup();
    g.beat('r4', 1000, 1);
    expect(g.w.status(1000).replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(setup().w.status(0).replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3']); // r4 not heard yet
    g.beat('r1', 1010, 1);
    const s = g.w.status(1010);
    expect(s.armed).toBe(true);
    expect(s.replicas[3]).toMatchObject({ id: 'r4', view: 1, health: 'healthy', heartbeats: 1 });
    g.beat('r9', 1020); // not a member, not even a spare
    expect(g.w.status(1020).drops['NOT_A_MEMBER']).toBe(1);
  });

  it('keeps the last MAX_CLUSTER_RESET_HISTORY cluster resets; clusterResetCount counts every one', () => {
    const g = setup();
    for (let k = 0; k <= MAX_CLUSTER_RESET_HISTORY; k++) {
      g.run(['r1', 'r2'], 10_000 * k, 10_000 * k + 2 * PERIOD, 0, 10 + k); // each time the restarted group
      g.tick(g.deadline());
    }
    const s = g.w.status(10_000 * (MAX_CLUSTER_RESET_HISTORY + 1));
    expect(s.clusterResetCount).toBe(MAX_CLUSTER_RESET_HISTORY + 1);
    expect(s.clusterResets).toHaveLength(MAX_CLUSTER_RESET_HISTORY);
    expect(s.clusterResets[0]?.atMs).toBe(10_000 + PERIOD + FRESH + SILENCE); // the second
  });

  it('two heartbeats exactly freshMs apart were fresh together: it arms (PROTOCOL §10.8: age ≤ 2 × sccHeartbeatMs)', () => {
    const g = setup();
    g.beat('r1', 1000);
    g.beat('r2', 1000 + FRESH);
    expect(g.w.status(1000 + FRESH).armed).toBe(true);
    expect(g.deadline()).toBe(1000 + FRESH + SILENCE);
  });

  it('armed, it asks to be woken every period, and at the silence deadline when that comes first', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500); // last round at 450
    expect(g.w.nextWakeMs()).toBe(450 + PERIOD);
    const deadline = g.deadline();
    g.tick(deadline - 10); // the group is silent; the watchdog runs on
    expect(g.w.nextWakeMs()).toBe(deadline);
  });

  it('the reset\'s reason gives the silence and the replicas still fresh, with their views', () => {
    const gone = setup();
    gone.run(['r1', 'r2'], 0, 500);
    gone.tick(gone.deadline());
    expect(gone.w.status(5000).clusterResets[0]?.reason).toBe(`no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: no replica`);
    const split = setup();
    split.run(['r1', 'r2', 'r3'], 0, 1000);
    for (let t = 1000; t < 1000 + 2 * SILENCE; t += PERIOD) { // r3 silent; r1 and r2 in views of their own
      split.beat('r1', t, 1);
      split.beat('r2', t, 2);
      split.tick(t);
    }
    const reason = split.w.status(5000).clusterResets[0]?.reason;
    expect(reason).toBe(`no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: r1 (view 1), r2 (view 2)`);
  });

  it('a stall is an input more than WATCHDOG_STALL_PERIODS periods after the last one, while armed: logged with its length, and the deadline held for two periods', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500); // armed; last input at 450
    const stalls = (out: CoreEffect[]) => out.filter((e) => e.type === 'log' && e.event === 'watchdog.stalled');
    const limit = WATCHDOG_STALL_PERIODS * PERIOD;
    expect(stalls(g.stallUntil(450 + limit))).toEqual([]);
    expect(stalls(g.stallUntil(450 + 2 * limit + 1))).toEqual([{ type: 'log', level: 'warn', event: 'watchdog.stalled', fields: { forMs: limit + 1, graceMs: FRESH } }]);
    const late = g.deadline() + 1000;
    g.stallUntil(late);
    expect(g.deadline()).toBe(late + FRESH);
    // Not armed, it asks for no wake-up, so a long gap between inputs is no stall of its own.
    const idle = setup();
    idle.beat('r1', 0);
    expect(stalls(idle.beat('r1', 10_000))).toEqual([]);
  });

  it('arming is logged (watchdog.armed) with the replica whose heartbeat armed it and the view the two agree on (PROTOCOL §10.8)', () => {
    const g = setup();
    g.beat('r1', 1000, 3);
    expect(g.beat('r2', 1010, 3)).toEqual([{ type: 'log', level: 'info', event: 'watchdog.armed', fields: { replica: 'r2', view: 3 } }]);
  });

  it('the cluster.reset log gives the rule and the reason the status records (PROTOCOL §10.8)', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    const deadline = g.deadline();
    const out = g.tick(deadline);
    const reason = `no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: no replica`;
    expect(out).toContainEqual({ type: 'log', level: 'warn', event: 'cluster.reset', fields: { rule: 'heartbeats', reason } });
    expect(g.w.status(deadline).clusterResets).toEqual([{ atMs: deadline, rule: 'heartbeats', reason }]);
  });

  it('the reset\'s reason counts a replica heard exactly freshMs before as fresh (PROTOCOL §10.8: age ≤ 2 × sccHeartbeatMs)', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500); // last round at 450
    const deadline = g.deadline();
    g.tick(deadline - FRESH);
    g.beat('r1', deadline - FRESH, 1); // alone in its view: the deadline stays
    expect(g.deadline()).toBe(deadline);
    g.tick(deadline);
    expect(g.w.status(deadline).clusterResets[0]?.reason).toBe(`no consistent heartbeats from two replicas for ${SILENCE} ms; fresh now: r1 (view 1)`);
  });

  it('a third replica heard long after the other two does not extend their consistency: the deadline counts from the last moment two were fresh together (PROTOCOL §10.8)', () => {
    const g = setup();
    g.beat('r3', 0);
    g.beat('r2', 100); // armed: r2 and r3 fresh together until 0 + FRESH
    g.tick(1000);
    g.beat('r1', 1000); // the same view, fresh with neither
    expect(g.deadline()).toBe(FRESH + SILENCE);
  });

  it('two views each held by a consistent pair: the deadline follows the pair fresh the longest, whichever view was heard first (PROTOCOL §10.8)', () => {
    for (const [again, view] of [[['r1', 'r2'], 0], [['r3', 'r4'], 1]] as const) {
      const g = setup();
      g.beat('r1', 0, 0);
      g.beat('r2', 0, 0);
      g.beat('r3', 10, 1);
      g.beat('r4', 10, 1);
      for (const r of again) g.beat(r, 100, view);
      expect(g.deadline()).toBe(100 + FRESH + SILENCE);
    }
  });
});

describe('watchdog rule 1: node resets the group commands (spec §1.6, PROTOCOL §8.4)', () => {
  const ask = (node: string, rsn: number, address = ''): Item => ({ type: 'reset.node', node, rsn, address });
  const orders = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'reset.node' ? [`${e.node}@${e.rsn}`] : []));

  it('two distinct replicas asking for the same (node, RSN) reset the node, once; one replica asking twice, or re-sent requests, do not', () => {
    const g = setup();
    expect(orders(g.send('r4', 1000, ask('n1', 5)))).toEqual([]); // a spare votes like the initial three
    expect(orders(g.send('r4', 1010, ask('n1', 5)))).toEqual([]);
    const out = g.send('r2', 1020, ask('n1', 5));
    expect(out.filter((e) => e.type === 'reset.node')).toEqual([{ type: 'reset.node', node: 'n1', rsn: 5, address: '' }]);
    expect(out).toContainEqual({ type: 'log', level: 'warn', event: 'node.reset', fields: { node: 'n1', rsn: 5, requestedBy: ['r4', 'r2'] } });
    for (const r of ['r1', 'r2', 'r3', 'r4']) expect(orders(g.send(r, 1100, ask('n1', 5)))).toEqual([]); // re-sent with each heartbeat
    g.send('a1', 1200, ask('n1', 6));
    const s = g.w.status(1200);
    expect(s.resets).toEqual([{ node: 'n1', rsn: 5, requestedBy: ['r2', 'r4'], atMs: 1020 }]);
    expect(s.drops).toEqual({ NOT_A_MEMBER: 1 });
  });

  it('a replica\'s request at another RSN replaces its pending vote for that node: one replica holds one vote per node', () => {
    const g = setup();
    g.send('r1', 1000, ask('n1', 5));
    g.send('r1', 1010, ask('n1', 6));
    expect(orders(g.send('r2', 1020, ask('n1', 5)))).toEqual([]);
    expect(orders(g.send('r2', 1030, ask('n1', 6)))).toEqual(['n1@6']);
  });

  it('after a cluster reset only the restarted group orders node resets; its RSNs start again, and the old group\'s pending votes are gone', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    expect(orders([...g.send('r1', 500, ask('n1', 4)), ...g.send('r2', 500, ask('n1', 4))])).toEqual(['n1@4']);
    g.send('r1', 500, ask('n1', 7)); // pending when the cluster is reset
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    expect(orders([...g.send('r1', 3000, ask('n1', 8)), ...g.send('r2', 3000, ask('n1', 8))])).toEqual([]); // the old processes
    expect(g.w.status(3000).drops).toEqual({ UNEXPECTED: 2 });
    g.run(['r1', 'r2'], 4000, 4100, 0, 11); // restarted
    expect(orders(g.send('r2', 4100, ask('n1', 7)))).toEqual([]); // r1's vote was the old group's
    expect(orders([...g.send('r1', 4100, ask('n1', 4)), ...g.send('r2', 4100, ask('n1', 4))])).toEqual(['n1@4']); // a new reset at an old RSN
  });

  it('remembers the last MAX_RESET_HISTORY node resets: re-sent requests for them are ignored, and the status lists them', () => {
    const g = setup();
    const order = (rsn: number) => orders([...g.send('r1', 1000, ask('n1', rsn)), ...g.send('r2', 1000, ask('n1', rsn))]);
    for (let rsn = 1; rsn <= MAX_RESET_HISTORY; rsn++) order(rsn);
    expect(order(1)).toEqual([]); // still remembered
    expect(order(MAX_RESET_HISTORY + 1)).toEqual([`n1@${MAX_RESET_HISTORY + 1}`]);
    const resets = g.w.status(1000).resets;
    expect([resets.length, resets[0]?.rsn, resets.at(-1)?.rsn]).toEqual([MAX_RESET_HISTORY, 2, MAX_RESET_HISTORY + 1]);
    expect(order(1)).toEqual(['n1@1']); // forgotten: the bound is the bound
  });

  it('one replica holds at most MAX_ADDED_NODE_VOTES votes for nodes cluster.json lacks; the others\' votes do not count against it (PROTOCOL §10.12)', () => {
    const g = setup();
    for (let i = 1; i <= MAX_ADDED_NODE_VOTES; i++) g.send('r3', 1000, ask(`x${i}`, 1, '10.1.1.1'));
    expect(g.w.status(1000).ignored).toBe(0);
    const over = `x${MAX_ADDED_NODE_VOTES + 1}`;
    g.send('r3', 1000, ask(over, 1, '10.1.1.1'));
    expect(g.w.status(1000).drops).toEqual({ UNEXPECTED: 1 });
    expect(orders(g.send('r2', 1000, ask(over, 1, '10.1.1.1')))).toEqual([]); // r3's vote was not held
    expect(orders(g.send('r1', 1000, ask(over, 1, '10.1.1.1')))).toEqual([`${over}@1`]);
    expect(orders(g.send('r2', 1000, ask(`x${MAX_ADDED_NODE_VOTES}`, 1, '10.1.1.1')))).toEqual([`x${MAX_ADDED_NODE_VOTES}@1`]); // r3's last one was
  });

  it('a replica at MAX_ADDED_NODE_VOTES may still move its vote for one of those nodes to another RSN: that holds no more votes (PROTOCOL §10.12)', () => {
    const g = setup();
    for (let i = 1; i <= MAX_ADDED_NODE_VOTES; i++) g.send('r3', 1000, ask(`x${i}`, 1, '10.1.1.1'));
    g.send('r3', 1000, ask('x1', 2, '10.1.1.1'));
    expect(g.w.status(1000).drops).toEqual({});
    expect(orders(g.send('r1', 1000, ask('x1', 1, '10.1.1.1')))).toEqual([]); // r3's vote moved to RSN 2
    expect(orders(g.send('r1', 1000, ask('x1', 2, '10.1.1.1')))).toEqual(['x1@2']);
  });
});

describe('watchdog rule 3: self-diagnosis initiations (spec §1.6, flaw 11c)', () => {
  const THRESHOLD = DEFAULT_TIMING.diagnosisThreshold;
  const TIMEOUT = DEFAULT_TIMING.diagnosisTimeoutMs;

  it('A20: repeated self-diagnosis exceeds the threshold → cluster reset, exactly once', () => {
    const g = setup();
    let resetAtMs: number | null = null;
    for (let k = 0; k < 40; k++) {
      for (const [from, t] of [['r1', 1000 + 500 * k], ['r2', 1250 + 500 * k]] as const) {
        if (g.report(from, t).some((e) => e.type === 'reset.cluster')) resetAtMs = t;
      }
    }
    // Each replica's share is capped at threshold/2 + 1: r1's (T/2 + 1)th report, with r2's T/2,
    // crosses the threshold T.
    expect(resetAtMs).toBe(1000 + 500 * (THRESHOLD / 2));
    expect(g.clusterResets()).toHaveLength(1); // the old group's further reports do not count
    const s = g.w.status(30_000);
    expect(s.clusterResets).toHaveLength(1);
    expect(s.clusterResets[0]).toMatchObject({ atMs: 1000 + 500 * (THRESHOLD / 2), rule: 'diagnosis' });
    expect(s.clusterResets[0]?.reason).toContain('from r1, r2');
    expect(s.diagnosisReports).toHaveLength(80);
    expect(s.diagnosisReports.filter((d) => d.counted)).toHaveLength(THRESHOLD + 1);
    expect(s.diagnosisInWindow).toBe(0); // cleared by the reset
    // The restarted group's initiations count again.
    for (let k = 0; k <= THRESHOLD / 2; k++) {
      g.report('r1', 40_000 + 500 * k, 11);
      g.report('r3', 40_250 + 500 * k, 11);
    }
    expect(g.clusterResets()).toHaveLength(2);
  });

  it('one replica flooding reports never resets the cluster', () => {
    const g = setup();
    for (let t = 0; t < 120_000; t += 10) g.report('r1', t);
    expect(g.clusterResets()).toEqual([]);
    const s = g.w.status(120_000);
    expect(s.replicas[0]?.diagnosisReports).toBe(12_000);
    expect(s.diagnosisInWindow).toBe(Math.floor(THRESHOLD / 2) + 1);
  });

  it('one replica alone never resets the cluster, even with a diagnosisThreshold below one (cluster.json takes any positive number)', () => {
    const g = setup({ ...withSpare, timing: { ...DEFAULT_TIMING, diagnosisThreshold: 0.5 } });
    for (let t = 0; t < 10 * TIMEOUT; t += TIMEOUT) g.report('r1', t);
    expect(g.clusterResets()).toEqual([]);
    expect(g.w.status(10 * TIMEOUT).diagnosisInWindow).toBe(1);
    g.report('r2', 10 * TIMEOUT);
    expect(g.clusterResets()).toHaveLength(1);
  });

  it('a flooding replica plus one other replica reporting once does not reset it either', () => {
    const g = setup();
    g.report('r2', 0);
    for (let t = 0; t < 30_000; t += 10) g.report('r1', t);
    expect(g.clusterResets()).toEqual([]);
  });

  it('counts one initiation per replica per diagnosisTimeoutMs', () => {
    const g = setup();
    for (const t of [0, 100, TIMEOUT - 1, TIMEOUT, TIMEOUT + 10, 2 * TIMEOUT]) g.report('r1', t);
    expect(g.w.status(1000).diagnosisReports.map((d) => [d.atMs, d.counted])).toEqual([
      [0, true], [100, false], [TIMEOUT - 1, false], [TIMEOUT, true], [TIMEOUT + 10, false], [2 * TIMEOUT, true],
    ]);
  });

  it('drops replayed reports: (inc, counter) must increase per sender', () => {
    const g = setup();
    const report = (from: string, nowMs: number, inc: number, counter: number) =>
      g.w.step(frame(from, nowMs, { type: 'diag.report', inc, counter, view: 0, reason: 'digest', target: 'r3' }));
    report('r1', 0, 10, 5);
    report('r2', 0, 10, 5);
    for (let k = 1; k <= 30; k++) {
      for (const r of ['r1', 'r2']) {
        report(r, 1000 * k, 10, 5); // the same report again
        report(r, 1000 * k, 9, 99); // an older incarnation
      }
    }
    const s = g.w.status(31_000);
    expect(g.clusterResets()).toEqual([]);
    expect(s.drops['REPLAYED']).toBe(120);
    expect(s.diagnosisReports).toHaveLength(2);
    expect(s.diagnosisReports[0]).toEqual({ atMs: 0, from: 'r1', view: 0, reason: 'digest', target: 'r3', counted: true });
  });

  it('counts only the initiations of the last diagnosisWindowMs', () => {
    const g = setup();
    // Two replicas each initiating T/2 times per window, evenly: exactly T in any window, never
    // more, for four windows.
    const every = DEFAULT_TIMING.diagnosisWindowMs / (THRESHOLD / 2);
    for (let t = 0; t < 120_000; t += every) {
      g.report('r1', t);
      g.report('r2', t + every / 2);
    }
    expect(g.clusterResets()).toEqual([]);
    expect(g.w.status(120_000 - every / 2).diagnosisInWindow).toBe(THRESHOLD); // just after r2's last report
  });

  it('keeps a bounded history, and ignores reports from non-replicas', () => {
    const g = setup();
    for (let t = 0; t < 300 * TIMEOUT; t += TIMEOUT) g.report('r4', t); // a spare, accepted
    g.report('a1', 0);
    const s = g.w.status(300 * TIMEOUT);
    expect(s.diagnosisReports).toHaveLength(256);
    expect(s.diagnosisReports[255]?.atMs).toBe(299 * TIMEOUT);
    expect(s.drops['NOT_A_MEMBER']).toBe(1);
    expect(s.replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3', 'r4']);
  });

  it('an initiation counts for diagnosisWindowMs, and no longer at the window\'s end', () => {
    const g = setup();
    g.report('r1', 0);
    expect(g.w.status(DEFAULT_TIMING.diagnosisWindowMs - 1).diagnosisInWindow).toBe(1);
    expect(g.w.status(DEFAULT_TIMING.diagnosisWindowMs).diagnosisInWindow).toBe(0);
  });

  it('after a cluster reset the restarted group\'s first initiation counts at once: the old group\'s rate limit is gone with it', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    const deadline = g.deadline();
    g.tick(deadline - PERIOD);
    g.report('r1', deadline - PERIOD);
    g.tick(deadline);
    expect(g.clusterResets()).toHaveLength(1);
    g.report('r1', deadline + 1, 11); // restarted, well within diagnosisTimeoutMs of the last
    expect(g.w.status(deadline + 1).diagnosisReports.map((d) => d.counted)).toEqual([true, true]);
    expect(g.w.status(deadline + 1).diagnosisInWindow).toBe(1);
  });

  it('each accepted report is logged diag.report with its sender, view, reason, target and whether it counted: info if it did, debug if the rate limit kept it out (PROTOCOL §10.8)', () => {
    const g = setup();
    const fields = { from: 'r1', view: 0, reason: 'silent', target: 'r3' };
    expect(g.report('r1', 0)).toEqual([{ type: 'log', level: 'info', event: 'diag.report', fields: { ...fields, counted: true } }]);
    expect(g.report('r1', 100)).toEqual([{ type: 'log', level: 'debug', event: 'diag.report', fields: { ...fields, counted: false } }]);
  });

  it('a rule-3 reset names its replicas sorted, whichever initiated first, in the status and the cluster.reset log (PROTOCOL §10.8)', () => {
    const g = setup();
    const out: CoreEffect[] = [];
    for (let k = 0; k <= THRESHOLD / 2; k++) {
      out.push(...g.report('r2', 1000 + 500 * k)); // r2 first
      out.push(...g.report('r1', 1250 + 500 * k));
    }
    const reason = `${THRESHOLD + 1} self-diagnosis initiations from r1, r2 within ${DEFAULT_TIMING.diagnosisWindowMs} ms (threshold ${THRESHOLD})`;
    expect(out).toContainEqual({ type: 'log', level: 'warn', event: 'cluster.reset', fields: { rule: 'diagnosis', reason } });
    expect(g.w.status(20_000).clusterResets.map((c) => c.reason)).toEqual([reason]);
  });
});

describe('watchdog: the operator\'s shutdown (PROTOCOL §10.11)', () => {
  const notice = (rsn: number): Item => ({ type: 'shutdown.notice', rsn });
  const acks = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'send' && e.item.type === 'shutdown.ack' ? [`${e.to}:${e.item.rsn}`] : []));

  it('taken, it resets nothing even when self-diagnosis crosses the threshold, acknowledges only notices of its RSN, and exits SCC_SHUTDOWN_LINGER_MS later', () => {
    const g = setup();
    const { diagnosisThreshold: threshold, diagnosisTimeoutMs: timeout } = DEFAULT_TIMING;
    for (let k = 0; k < threshold / 2; k++) { // exactly the threshold: not more
      g.report('r1', k * timeout);
      g.report('r2', k * timeout + 1);
    }
    const at = (threshold / 2) * timeout;
    g.send('r1', at, notice(40));
    expect(acks(g.send('r2', at, notice(40)))).toEqual(['r1:40', 'r2:40']);
    g.report('r1', at + 1); // one more initiation: over the threshold, from two replicas
    expect(g.w.status(at + 1).diagnosisInWindow).toBe(threshold + 1);
    expect(g.clusterResets()).toEqual([]);
    expect(acks(g.send('r3', at + 2, notice(41)))).toEqual([]);
    expect(g.w.nextWakeMs()).toBe(at + SCC_SHUTDOWN_LINGER_MS);
    expect(g.stallUntil(at + SCC_SHUTDOWN_LINGER_MS - 1).filter((e) => e.type === 'shutdown')).toEqual([]);
    expect(g.stallUntil(at + SCC_SHUTDOWN_LINGER_MS).filter((e) => e.type === 'shutdown')).toEqual([{ type: 'shutdown', reason: 'shutdown at RSN 40, noticed by r1, r2' }]);
  });

  it('after a cluster reset only the restarted group\'s notices count', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    g.tick(g.deadline());
    expect(acks([...g.send('r1', 3000, notice(40)), ...g.send('r2', 3000, notice(40))])).toEqual([]); // the old processes
    expect(g.w.status(3000)).toMatchObject({ shutdown: null, drops: { UNEXPECTED: 2 } });
    g.run(['r1', 'r2'], 4000, 4100, 0, 11);
    expect(acks([...g.send('r1', 4100, notice(3)), ...g.send('r2', 4100, notice(3))])).toEqual(['r1:3', 'r2:3']);
  });

  it('a notice of the old group, sent before a cluster reset, is no vote after it: one restarted replica of the same RSN is not enough', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    expect(acks(g.send('r2', 500, notice(40)))).toEqual([]); // one vote: not yet
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    g.run(['r1', 'r2'], 4000, 4100, 0, 11);
    expect(acks(g.send('r1', 4100, notice(40)))).toEqual([]);
    expect(g.w.status(4100).shutdown).toBeNull();
    expect(acks(g.send('r2', 4100, notice(40)))).toEqual(['r1:40', 'r2:40']);
  });

  it('taken, it disarms rule 2: no silence deadline, and a heartbeat that makes no fresh pair does not arm it again', () => {
    const g = setup();
    g.beat('r1', 0);
    g.beat('r2', 0);
    expect(g.w.status(0)).toMatchObject({ armed: true, silenceDeadlineMs: FRESH + SILENCE });
    g.send('r1', 50, notice(40));
    g.send('r2', 50, notice(40));
    expect(g.w.status(50)).toMatchObject({ armed: false, silenceDeadlineMs: null });
    const late = g.beat('r3', 400); // r1 and r2 were fresh together only until FRESH
    expect(late.filter((e) => e.type === 'log' && e.event === 'watchdog.armed')).toEqual([]);
    expect(g.w.status(400)).toMatchObject({ armed: false, silenceDeadlineMs: null });
  });

  it('PROTOCOL §10.11: taken, nothing arms rule 2 again: two consistent heartbeats of the group winding down leave it disarmed, with no silence deadline', () => {
    const g = setup();
    g.beat('r1', 0);
    g.beat('r2', 0);
    g.send('r1', 50, notice(40));
    g.send('r2', 50, notice(40));
    const again = [...g.beat('r1', 100), ...g.beat('r2', 100)]; // both fresh and alike again
    expect(again.filter((e) => e.type === 'log' && e.event === 'watchdog.armed')).toEqual([]);
    expect(g.w.status(100)).toMatchObject({ armed: false, silenceDeadlineMs: null });
    expect(g.w.nextWakeMs()).toBe(50 + SCC_SHUTDOWN_LINGER_MS);
  });
});

// ---- restoring tasks after a cluster reset (PROTOCOL §10.9) ------------------------------------

describe('watchdog: restoring the journalled tasks after a cluster reset (PROTOCOL §10.9)', () => {
  const opSigner = hmacSigner('op');
  const journalOf = (replica: string, tasks: [string, number][]): Uint8Array => encodeJournal({
    replica, rsn: 9, tasks: tasks.map(([task, n]) => {
      const nonce = n.toString(16).padStart(32, '0');
      const s = signCG({ csn: 0, gssnAck: 0, inc: 0, client: 'op', payload: {
        type: 'task.submit', nonce, name: task, size: 1, file: '/bin/sleep', args: ['9'], cwd: '/', env: [], mode: 'plain', taskKey: new Uint8Array(32),
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
        type: 'task.submit', nonce: nonceOf(n), name: task, size: 1, file: '/bin/sleep', args: ['9'], cwd: '/', env: [], mode: 'plain', taskKey: new Uint8Array(32),
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
