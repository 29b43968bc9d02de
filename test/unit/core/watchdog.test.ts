// The watchdog core (spec §1.6, docs/PROTOCOL.md §6–§7): it records replica heartbeats, drops
// replays and heartbeats from anyone else, answers operators' status queries, and never sends
// anything on the routine path.
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, CoreInput, Membership } from '../../../src/core/node.ts';
import { createWatchdog, type WatchdogStatus } from '../../../src/core/watchdog.ts';
import type { Item } from '../../../src/core/wire/messages.ts';

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

const hb = (inc: number, counter: number, rsn = 1, role: 'primary' | 'backup' = 'backup'): Item => ({
  type: 'hb', inc, counter, info: { type: 'replica', role, rsn, gssn: 2, digest: new Uint8Array(32).fill(0xab), view: 0, ckptRsn: 0, ckptDigest: new Uint8Array(32) },
});
const frame = (from: string, nowMs: number, ...items: Item[]): CoreInput => ({ type: 'frame', nowMs, frame: { from, to: 'scc', items } });
const sends = (effects: CoreEffect[]) => effects.filter((e) => e.type === 'send');

describe('watchdog core', () => {
  it('records replica heartbeats and reports their age, role, RSN and GSSN', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1 });
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

  it('drops replayed heartbeats: (inc, counter) must increase per sender', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1 });
    w.step(frame('r1', 1000, hb(10, 5)));
    w.step(frame('r1', 2000, hb(10, 5))); // replay
    w.step(frame('r1', 2000, hb(10, 4))); // older
    w.step(frame('r1', 2000, hb(9, 99))); // older incarnation
    let s = w.status(2000);
    expect(s.replicas[0]?.lastHeartbeatAgeMs).toBe(1000);
    expect(s.replicas[0]?.replays).toBe(3);
    expect(s.drops['REPLAYED']).toBe(3);
    w.step(frame('r1', 2000, hb(11, 1))); // restarted replica: new incarnation, counter restarts
    s = w.status(2000);
    expect(s.replicas[0]?.lastHeartbeatAgeMs).toBe(0);
    expect(s.replicas[0]?.inc).toBe(11);
  });

  it('ignores heartbeats from non-replicas and agent-type heartbeats', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1 });
    w.step(frame('a1', 1000, hb(1, 1)));
    w.step(frame('op', 1000, hb(1, 1)));
    w.step(frame('r1', 1000, { type: 'hb', inc: 1, counter: 1, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } }));
    const s = w.status(1000);
    expect(s.replicas.every((r) => r.heartbeats === 0)).toBe(true);
    expect(s.ignored).toBe(3);
  });

  it('answers status queries from operators only', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 7 });
    w.step(frame('r2', 1000, hb(3, 1)));
    const out = sends(w.step(frame('op', 1050, { type: 'status.query', nonce: 42 })));
    expect(out).toHaveLength(1);
    const reply = out[0];
    if (reply?.type !== 'send' || reply.item.type !== 'status.reply') throw new Error('expected a status.reply');
    expect(reply.to).toBe('op');
    expect(reply.item.nonce).toBe(42);
    const status = JSON.parse(reply.item.json) as WatchdogStatus;
    expect(status.id).toBe('scc');
    expect(status.inc).toBe(7);
    expect(status.replicas[1]?.lastHeartbeatAgeMs).toBe(50);
    expect(sends(w.step(frame('r1', 1100, { type: 'status.query', nonce: 1 })))).toEqual([]);
    expect(sends(w.step(frame('a1', 1100, { type: 'status.query', nonce: 1 })))).toEqual([]);
  });

  it('never sends on ticks, link changes or drops, and never needs a wake-up', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1 });
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
});
