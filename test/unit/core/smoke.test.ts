import { describe, expect, it } from 'vitest';
import { makeCluster } from './harness.ts';

describe('cores in a perfect network', () => {
  it('agents join, echo requests are ordered and answered on 2-of-3 copies', () => {
    const c = makeCluster(2);
    c.run(200);
    for (const r of c.replicas) expect(r.state().nodes.get('a1')?.joined).toBe(true);
    c.input('a1', { type: 'request', nowMs: c.now(), request: { type: 'echo', tag: 't', fanout: 'all', count: 5, data: new Uint8Array([1]) } });
    c.run(300);
    const got = c.effects('deliver.command', 'a2').map((o) => o.effect.gssn);
    expect(got.length).toBe(5);
    const digests = c.replicas.map((r) => r.digestHex());
    expect(new Set(digests).size).toBe(1);
    for (const a of c.agents) expect(a.status(c.now()).gssnAcked).toBe(a.status(c.now()).gssnDelivered);
    console.log(c.agents.map((a) => a.status(c.now())), c.replicas.map((r) => r.status(c.now()).rsn));
  });
});
