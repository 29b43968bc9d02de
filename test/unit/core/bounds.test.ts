// Bounds and hostile relays (docs/PROTOCOL.md §2.3, §5.2, §5.8; constants.ts): what a burst,
// a crashed replica or a faulty replica can make a correct agent or replica lose.
import { describe, expect, it } from 'vitest';
import { signCG } from '../../../src/core/wire/frame.ts';
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
