// Replica behaviours no other row pins down (issue 15, mutation testing of src/core/replica.ts):
// each row is what a peer or a user observes when a faulty peer tries something, or what the
// status reports (docs/PROTOCOL.md §5.8, §6, §7).
import { describe, expect, it } from 'vitest';
import type { Item } from '../../../src/core/wire/messages.ts';
import { encodeFrame, signCG } from '../../../src/core/wire/frame.ts';
import { hmacSigner, makeCluster } from './harness.ts';

const echo = (count: number) => ({ type: 'echo' as const, tag: 'x', fanout: 'self' as const, count, data: new Uint8Array([7]) });

describe('only the primary orders (PROTOCOL §5.8)', () => {
  it('a backup that sends the other backup a group input as if ordered gets it dropped: nothing executed, nobody suspected', () => {
    const c = makeCluster(1);
    c.run(100);
    // r3 (faulty) turns its confirmation to r2 into an order of its own for the next RSN.
    c.filters.push((from, to, i): Item => (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order'
      ? { ...i, body: { type: 'wrapper.input', rsn: i.body.rsn + 1, input: { type: 'tick' } } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    const [r1, r2] = c.replicas;
    expect(c.effects('deliver.command', 'a1')).toHaveLength(1);
    expect(c.effects('deliver.input', 'r2').filter((o) => o.effect.input.type === 'tick')).toHaveLength(0);
    expect(c.effects('suspect', 'r2')).toHaveLength(0);
    expect(r2?.status(c.now()).drops['NOT_A_MEMBER']).toBeGreaterThan(0);
    // r2 still executes exactly what r1 ordered (RSN 2 unconfirmed after orderConfirmMs: a
    // withheld confirmation only delays it, §5.8), and reaches the same state.
    c.filters.pop();
    c.run(c.membership.timing.orderConfirmMs + 200);
    expect(c.effects('deliver.input', 'r2').filter((o) => o.effect.input.type === 'tick')).toHaveLength(0);
    expect(r2?.rsn()).toBe(r1?.rsn());
    expect(r2?.digestHex()).toBe(r1?.digestHex());
  });
});

describe('evidence of an equivocation (PROTOCOL §10.2)', () => {
  it('a frame the other backup signed itself proves nothing about the primary: no accusation of a correct primary', () => {
    const c = makeCluster(1);
    c.run(100);
    // r3 (faulty) shows r2, as "the primary's frame" for each RSN, one it signed itself that
    // orders another request there.
    const other = signCG({ csn: 99, gssnAck: 0, payload: { type: 'echo', tag: 'forged', fanout: 'self', count: 1, data: new Uint8Array([1]) }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    c.filters.push((from, to, i): Item => {
      if (from !== 'r3' || to !== 'r2' || i.type !== 'ptp' || i.body?.type !== 'order') return i;
      const rsn = i.body.rsn;
      const frame = encodeFrame({ from: 'r3', to: 'r3', items: [{ type: 'ptp', srcInc: 1, destInc: 1, seq: rsn, ackSeq: 0, body: { type: 'wrapper', rsn, signed: other } }] }, { cluster: 'test', signer: hmacSigner('r3') });
      return { ...i, body: { type: 'order.evidence', rsn, frame } };
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(1);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'replica.accuse')).toHaveLength(0);
    expect(c.effects('log').filter((o) => o.effect.event === 'replica.accusation' && o.effect.fields['target'] === 'r1')).toHaveLength(0);
  });
});

describe('heartbeats and health (PROTOCOL §6, §7)', () => {
  it('a replayed heartbeat (same incarnation and counter) is dropped as REPLAYED', () => {
    const c = makeCluster(1);
    let captured: Item | null = null;
    c.filters.push((from, to, i) => {
      if (from === 'r3' && to === 'r2' && i.type === 'hb') captured = i; // the latest one
      return i;
    });
    c.run(300);
    expect(captured).not.toBeNull();
    // Replayed at once, before r3's next heartbeat (every replicaHeartbeatMs) raises the counter.
    const r2 = c.replicas[1];
    const before = r2?.status(c.now()).drops['REPLAYED'] ?? 0;
    c.sendAs('r3', 'r2', [captured as unknown as Item]);
    c.run(2);
    expect(r2?.status(c.now()).drops['REPLAYED'] ?? 0).toBe(before + 1);
  });

  it('a silent replica is reported late after one missed check, then silent (status health)', () => {
    const c = makeCluster(1);
    c.run(500);
    c.down.add('r3');
    const seen: string[] = [];
    for (let k = 0; k < 60 && seen[seen.length - 1] !== 'silent'; k++) {
      c.run(10);
      const h = c.replicas[0]?.status(c.now()).replicas.find((r) => r.id === 'r3')?.health as string;
      if (seen[seen.length - 1] !== h) seen.push(h);
    }
    // Removed from the group later (PROTOCOL §10.3): what matters is the order of the first reports.
    expect(seen).toEqual(['healthy', 'late', 'silent']);
  });
});
