// Group-layer behaviour of the replica and agent cores (docs/PROTOCOL.md §5, spec §3.5–3.6),
// observed as an agent or replica would: deliveries, acks, suspicions, termination.
import { describe, expect, it } from 'vitest';
import type { Item } from '../../../src/core/wire/messages.ts';
import { makeCluster } from './harness.ts';

const echo = (count: number, fanout: 'self' | 'all' = 'all') =>
  ({ type: 'echo' as const, tag: 'x', fanout, count, data: new Uint8Array([7]) });

const isGc = (i: Item, gssn?: number): i is Extract<Item, { type: 'grp' }> =>
  i.type === 'grp' && i.body.type === 'gc' && (gssn === undefined || i.body.gc.gssn === gssn);

function tamper(i: Extract<Item, { type: 'grp' }>, tag: string): Item {
  if (i.body.type !== 'gc') return i;
  const gc = i.body.gc;
  if (gc.payload.type !== 'echo.reply') return i;
  return { ...i, body: { type: 'gc', gc: { ...gc, payload: { ...gc.payload, tag } } } };
}

describe('group messages manager → agent (spec §3.5)', () => {
  it('every agent delivers the same commands in GSSN order; all replicas end with equal digests', () => {
    const c = makeCluster(3);
    c.run(100);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(20) });
    c.input('a2', { type: 'request', nowMs: c.now(), request: echo(5, 'self') });
    c.run(500);
    const seqOf = (a: string) => c.effects('deliver.command', a).map((o) => o.effect.gssn);
    for (const a of ['a1', 'a2', 'a3']) {
      const s = seqOf(a);
      expect([...s].sort((x, y) => x - y)).toEqual(s);
      expect(new Set(s).size).toBe(s.length);
    }
    expect(seqOf('a1')).toHaveLength(20);
    expect(seqOf('a2')).toHaveLength(25);
    expect(new Set(c.replicas.map((r) => r.digestHex())).size).toBe(1);
    expect(new Set(c.replicas.map((r) => r.rsn())).size).toBe(1);
  });

  it('delivers on 2 matching copies but withholds the group ack until the 3rd arrives (flaw 1 fix, A14)', () => {
    const c = makeCluster(1);
    c.run(100);
    let dropOnce = true;
    const acks: number[] = [];
    c.filters.push((from, to, i) => {
      if (from === 'r3' && to === 'a1' && isGc(i) && dropOnce) { dropOnce = false; return null; }
      if (from === 'a1' && i.type === 'gack') acks.push(i.ack);
      return i;
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(10);
    const delivered = c.effects('deliver.command', 'a1');
    expect(delivered).toHaveLength(1);
    const g = delivered[0]?.effect.gssn as number;
    expect(acks.filter((a) => a >= g)).toHaveLength(0); // delivered, not acknowledged
    c.run(200); // r3 retransmits its copy
    expect(acks.some((a) => a >= g)).toBe(true);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(50);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(2); // r3's stream continues
    expect(c.agents[0]?.status(c.now()).pendingCopies).toBe(0);
  });

  it('one replica with different content: delivered on the 2 matching, then an error report reaches every replica (A16)', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, to, i) => (from === 'r2' && to === 'a1' && isGc(i) ? tamper(i, 'lie') : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(100);
    const d = c.effects('deliver.command', 'a1');
    expect(d).toHaveLength(1);
    expect(d[0]?.effect.command).toMatchObject({ type: 'echo.reply', tag: 'x' });
    for (const r of ['r1', 'r2', 'r3']) {
      const s = c.effects('suspect', r).filter((o) => o.effect.reason === 'error.report');
      expect(s.length).toBeGreaterThan(0);
      expect(s[0]?.effect.target).toBe('r2');
    }
  });

  it('three mutually different copies: the agent terminates itself and acts on none (A17)', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, to, i) => (to === 'a1' && isGc(i) && from !== 'r1' ? tamper(i, `lie-${from}`) : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(100);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(0);
    expect(c.effects('terminate', 'a1')).toHaveLength(1);
  });

  it('a copy that arrives only from one replica is never delivered and times out with three error reports (G5)', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, to, i) => (to === 'a1' && isGc(i) && from !== 'r1' ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(5 * c.membership.timing.replicaTimeoutMs);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(0);
    const reports = c.effects('log', 'a1').filter((o) => o.effect.event === 'agent.error-report');
    expect(reports).toHaveLength(3); // fires three times, then stops
    // With no content two replicas agree on, the agent cannot tell who is wrong: it names
    // nobody (a lone copy may be the faulty one, PROTOCOL §10.2).
    expect(reports.map((o) => o.effect.fields['suspects'])).toEqual([[], [], []]);
  });

  it('error reports are aggregated: a replica that is late for many GSSNs costs one report per period', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, to, i) => (to === 'a1' && i.type === 'grp' && from === 'r3' ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(200, 'self') });
    c.run(c.membership.timing.replicaTimeoutMs + 50);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(200);
    const reports = c.effects('log', 'a1').filter((o) => o.effect.event === 'agent.error-report');
    expect(reports).toHaveLength(1);
    expect(reports[0]?.effect.fields).toMatchObject({ count: 200, kind: 'replica-timeout', suspects: ['r3'] });
  });
});

describe('group messages agent → manager (spec §3.6)', () => {
  it('the primary silently drops an agent request: after 3 retransmissions the agent goes to both backups, which forward and raise primary.progress (A18)', () => {
    const c = makeCluster(1);
    c.run(100);
    // r1 (primary) never orders anything from a1 again: it swallows a1's CGs and forwarded wrappers.
    c.filters.push((from, to, i) => (to === 'r1' && ((from === 'a1' && i.type === 'grp') || (from !== 'a1' && i.type === 'ptp' && i.body?.type === 'wrapper')) ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(160 + c.membership.timing.primaryProgressMs + 100);
    expect(c.effects('log', 'a1').some((o) => o.effect.event === 'agent.fallback')).toBe(true);
    for (const b of ['r2', 'r3']) {
      expect(c.effects('log', b).some((o) => o.effect.event === 'agent.fallback')).toBe(true);
      expect(c.effects('suspect', b).some((o) => o.effect.reason === 'primary.progress' && o.effect.target === 'r1')).toBe(true);
    }
  });

  it('a primary that skips an RSN is caught by the backups (A19)', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, _to, i) => (from === 'r1' && i.type === 'ptp' && i.body?.type === 'wrapper' ? { ...i, body: { ...i.body, rsn: i.body.rsn + 1 } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(100);
    for (const b of ['r2', 'r3']) expect(c.effects('suspect', b).some((o) => o.effect.reason === 'rsn.gap' && o.effect.target === 'r1')).toBe(true);
  });

  it('a request is released by the agent only after f+1 replicas acknowledged its CSN', () => {
    const c = makeCluster(1);
    c.run(100);
    const before = c.agents[0]?.status(c.now()).csnAcked as number;
    c.filters.push((from, to, i) => (to === 'a1' && from !== 'r1' && (i.type === 'gack' || isGc(i)) ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(100);
    expect(c.agents[0]?.status(c.now()).csnAcked).toBe(before); // only r1's ack: not enough
    expect(c.agents[0]?.status(c.now()).pendingRequests).toBe(1);
    c.filters.pop(); // r2 and r3 are heard again: their next ack makes f+1
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(100);
    expect(c.agents[0]?.status(c.now()).csnAcked).toBe(before + 2);
    expect(c.agents[0]?.status(c.now()).pendingRequests).toBe(0);
  });
});

describe('agent incarnations (PROTOCOL §5.7)', () => {
  it('a restarted agent starts a fresh CSN and GSSN chain: its requests are ordered and its commands delivered', () => {
    const c = makeCluster(2);
    c.run(100);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(3, 'self') });
    c.run(200);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(3);
    const fresh = c.restartAgent('a1', 2);
    c.run(300); // handshake with the new incarnation, node.join ordered
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(2, 'self') });
    c.run(300);
    const after = c.observed.filter((o) => o.proc === 'a1' && o.effect.type === 'deliver.command' && o.at > 100 + 200);
    expect(after).toHaveLength(2);
    expect(fresh.status(c.now()).csnAcked).toBe(2); // node.join + echo, acknowledged by f+1
    for (const r of c.replicas) expect(r.state().clientInc.get('a1')).toBe(2);
    expect(new Set(c.replicas.map((r) => r.digestHex())).size).toBe(1);
    // The other agent was never disturbed.
    c.input('a2', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(100);
    expect(c.effects('deliver.command', 'a2')).toHaveLength(1);
  });
});

describe('late joiners (PROTOCOL §5.7)', () => {
  it('an agent whose join is ordered after a broadcast still delivers every later broadcast', () => {
    const c = makeCluster(2);
    // a2's join reaches the group only after a1's first broadcast.
    let holdA2 = true;
    c.filters.push((from, _to, i) => (from === 'a2' && i.type === 'grp' && holdA2 ? null : i));
    c.run(100);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(100);
    holdA2 = false;
    c.run(300);
    for (let k = 0; k < 3; k++) {
      c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
      c.run(100);
    }
    expect(c.effects('deliver.command', 'a1')).toHaveLength(4);
    expect(c.effects('deliver.command', 'a2')).toHaveLength(3);
  });
});

describe('heartbeats and status (PROTOCOL §6–§7)', () => {
  it('a replica that stops heartbeating is suspected by the others within two check periods', () => {
    const c = makeCluster(1);
    c.run(500);
    expect(c.effects('suspect').length).toBe(0);
    c.down.add('r3');
    const t0 = c.now();
    c.run(400);
    const s = c.effects('suspect', 'r1').filter((o) => o.effect.reason === 'heartbeat.missed' && o.effect.target === 'r3');
    expect(s.length).toBeGreaterThan(0);
    // The last heartbeat may land just after a check, so the first empty check comes ≤ 2 periods later.
    expect((s[0]?.at as number) - t0).toBeLessThanOrEqual(2 * c.membership.timing.replicaCheckMs);
  });

  it('backups see every agent heartbeat-healthy; the primary does not receive agent heartbeats', () => {
    const c = makeCluster(2);
    c.run(1000);
    const [r1, r2] = c.replicas;
    expect(r2?.status(c.now()).agents.every((a) => a.health === 'healthy' && (a.lastHeartbeatAgeMs ?? 1e9) <= 150)).toBe(true);
    expect(r1?.status(c.now()).agents.every((a) => a.lastHeartbeatAgeMs === null)).toBe(true);
    expect(r1?.status(c.now()).role).toBe('primary');
  });
});
