// The watchdog core as its drivers see it (spec §1.6, §2.3; docs/PROTOCOL.md §6–§7, §10.8): it
// records replica heartbeats, drops replays and heartbeats from anyone else, answers operators'
// status queries, and never sends anything on the routine path. Its rules are tested with their
// modules: watchdog-liveness.test.ts (rules 2 and 3), watchdog-resets.test.ts (rule 1, shutdown),
// watchdog-restore.test.ts (restores).
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { WatchdogInput } from '../../../src/core/node.ts';
import type { DaemonReport } from '../../../src/core/status.ts';
import { createWatchdog } from '../../../src/core/watchdog.ts';
import { WATCHDOG_LATE_PERIODS, WATCHDOG_SILENT_PERIODS, type WatchdogStatus } from '../../../src/core/watchdog-state.ts';
import type { AddedReplica, Item } from '../../../src/core/wire/messages.ts';
import { frame, hb, keys, membership, sends } from './watchdog-harness.ts';

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
    const inputs: WatchdogInput[] = [
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
