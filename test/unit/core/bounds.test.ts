// Bounds and hostile relays (docs/PROTOCOL.md §2.3, §5.2, §5.8; constants.ts): what a burst,
// a crashed replica or a faulty replica can make a correct agent or replica lose.
import { describe, expect, it } from 'vitest';
import { signCG } from '../../../src/core/wire/frame.ts';
import { MAX_BURST_COUNT, MAX_DELIVERED_LOG, MAX_QUEUED_WHILE_DISCONNECTED, MAX_UNACKED_PER_LANE } from '../../../src/core/constants.ts';
import { hmacSigner, makeCluster } from './harness.ts';

const echo = (count: number, fanout: 'self' | 'all', tag = 'x') => ({ type: 'echo' as const, tag, fanout, count, data: new Uint8Array([1]) });

describe('bounds never cost a correct agent a group message', () => {
  it('a burst far larger than a lane window reaches every agent in full, and the stream goes on', () => {
    const c = makeCluster(2);
    c.run(100);
    for (let i = 0; i < 9; i++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1000, 'all', `b${i}`) });
    c.run(3000);
    c.input('a2', { type: 'request', nowMs: c.now(), request: echo(1, 'self', 'after') });
    c.run(200);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(9000);
    expect(c.effects('deliver.command', 'a2')).toHaveLength(9001);
    expect(c.effects('log').filter((o) => o.effect.event === 'group.send.refused')).toHaveLength(0);
  });

  it('with one backup crashed, delivered messages awaiting their third copy do not crowd out new ones', () => {
    const c = makeCluster(1);
    c.run(100);
    c.down.add('r3');
    for (let i = 0; i < 5; i++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1000, 'self', `b${i}`) });
    c.run(3000);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self', 'after') });
    c.run(300);
    const delivered = c.effects('deliver.command', 'a1').map((o) => o.effect.command);
    expect(delivered.filter((cmd) => cmd.type === 'echo.reply')).toHaveLength(5001);
    // Meanwhile the silent backup was condemned and the agent told (PROTOCOL §10.7).
    expect(delivered.filter((cmd) => cmd.type === 'replicas')).toEqual([{ type: 'replicas', view: 1, primary: 'r1', replicas: ['r1', 'r2'], ports: [], added: [] }]);
  });

  it('a replica inventing copies far ahead of the chain exhausts only its own quota', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, _to, i) => {
      if (from !== 'r3' || i.type !== 'grp' || i.body.type !== 'gc') return i;
      const gc = i.body.gc;
      return { ...i, body: { type: 'gc', gc: { ...gc, gssn: gc.gssn + 1_000_000, prevGssn: gc.prevGssn + 1_000_000 } } };
    });
    for (let i = 0; i < 5; i++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1000, 'self', `b${i}`) });
    c.run(3000);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(5000);
    expect(c.agents[0]?.status(c.now()).pendingCopies).toBeLessThanOrEqual(4096 + 16);
  });
});

describe('what the group cannot hold for a peer is refused out loud (PROTOCOL §5.2, §10.5)', () => {
  it(`group messages for an agent that acknowledges nothing, past MAX_UNACKED_PER_LANE + MAX_QUEUED_WHILE_DISCONNECTED (${MAX_UNACKED_PER_LANE} + ${MAX_QUEUED_WHILE_DISCONNECTED}), are each logged as group.send.refused with their GSSN`, () => {
    const c = makeCluster(2);
    c.run(200);
    // a2 asks for more copies than its lane can hold, and its host then starves: it reads and
    // acknowledges nothing more.
    const held = MAX_UNACKED_PER_LANE + MAX_QUEUED_WHILE_DISCONNECTED;
    const bursts = Math.ceil(held / MAX_BURST_COUNT) + 1;
    for (let k = 0; k < bursts; k++) c.input('a2', { type: 'request', nowMs: c.now(), request: echo(MAX_BURST_COUNT, 'self', `b${k}`) });
    c.paused.add('a2');
    c.run(100);
    const refused = c.effects('log', 'r1').filter((o) => o.effect.event === 'group.send.refused').map((o) => o.effect.fields);
    expect(refused.length).toBe(bursts * MAX_BURST_COUNT - held);
    expect(new Set(refused.map((f) => `${f['dest']}:${f['why']}`))).toEqual(new Set(['a2:full']));
    const gssns = refused.map((f) => f['gssn'] as number);
    expect(gssns).toEqual(gssns.map((_, k) => (gssns[0] as number) + k));
  }, 60_000);
});

describe('the survivors of a condemned primary align from a bounded log (PROTOCOL §10.5)', () => {
  it(`the successor sends a survivor behind it at most the last MAX_DELIVERED_LOG (${MAX_DELIVERED_LOG}) entries it executed`, () => {
    const c = makeCluster(1);
    c.run(200);
    // r1 orders r3 nothing, and r2 does not relay its order (§5.8): r2 executes it alone.
    const notice = (text: string) => ({ type: 'notice' as const, text });
    c.filters.push((from, to, i) => (to === 'r3' && i.type === 'ptp' && ((from === 'r1' && i.body?.type === 'wrapper') || (from === 'r2' && i.body?.type === 'order.evidence')) ? { ...i, body: notice('withheld') } : i));
    const nonce = (n: number) => n.toString(16).padStart(32, '0');
    // In two bursts: the order confirmation takes at most MAX_ORDER_AHEAD proposals at once.
    for (const [from, to] of [[0, MAX_DELIVERED_LOG / 2], [MAX_DELIVERED_LOG / 2, MAX_DELIVERED_LOG + 8]]) {
      for (let k = from as number; k < (to as number); k++) c.operate({ type: 'task.kill', nonce: nonce(k + 1), task: 't404' }, ['r1']);
      c.run(c.membership.timing.orderConfirmMs + 200);
    }
    const [, r2, r3] = c.replicas;
    const behind = (r2?.rsn() as number) - (r3?.rsn() as number);
    expect(behind).toBeGreaterThan(MAX_DELIVERED_LOG);
    // What r2 sends r3 once r1 is condemned.
    const entries: number[] = [];
    c.filters.push((from, to, i) => {
      if (from === 'r2' && to === 'r3' && i.type === 'ptp' && i.body?.type === 'wrapper') entries.push(i.body.rsn);
      return i;
    });
    const last = r2?.rsn() as number;
    // r1 (faulty) orders each backup an RSN out of sequence: both accuse it of rsn.gap (§10.2).
    for (const r of ['r2', 'r3']) {
      const text = `gap-${r}`;
      const rsn = c.replicas.find((x) => x.id === r)?.rsn() as number;
      const signed = signCG({ csn: 1, gssnAck: 0, payload: echo(0, 'self', 'gap'), client: 'a1', inc: 1 }, hmacSigner('a1'));
      c.filters.push((f, t, i) => (f === 'r1' && t === r && i.type === 'ptp' && i.body?.type === 'notice' && i.body.text === text ? { ...i, body: { type: 'wrapper', rsn: rsn + 5, signed } } : i));
      c.input('r1', { type: 'notice', nowMs: c.now(), to: r, text });
    }
    c.run(200);
    expect(entries).toEqual(Array.from({ length: MAX_DELIVERED_LOG }, (_, k) => last - MAX_DELIVERED_LOG + 1 + k));
  }, 60_000);
});

describe('only agents make requests (PROTOCOL §2.3)', () => {
  it('a primary relaying a request it signed itself gets it executed by no backup', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, _to, i) => {
      if (from !== 'r1' || i.type !== 'ptp' || i.body === null || i.body.type !== 'wrapper') return i;
      const forged = signCG({ ...i.body.signed.cg, client: 'r1', payload: echo(1, 'all', 'forged') }, hmacSigner('r1'));
      return { ...i, body: { ...i.body, signed: forged } };
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1, 'self') });
    c.run(300);
    for (const b of ['r2', 'r3']) {
      expect(c.effects('deliver.request', b).some((o) => o.effect.client === 'r1')).toBe(false);
      expect(c.replicas.find((r) => r.id === b)?.status(c.now()).drops['NOT_A_MEMBER']).toBeGreaterThan(0);
    }
  });
});
