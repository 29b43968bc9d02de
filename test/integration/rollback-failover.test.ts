// A rank's store outlives its protector's node (radic-hmpl A.2.7, PROTOCOL §11.4): two real
// protectors on loopback; the first one is closed (its node failed) while the rank appends, and
// the rank's data moves to the second — its last checkpoint and the log since, in order — before
// the waiting append completes. A refusal is not a failure of the node: it stays an error.
import { afterEach, describe, expect, it } from 'vitest';
import { FailoverStore } from '../../src/app/rollback/failover-store.ts';
import { ProtectorClient, ProtectorError } from '../../src/app/rollback/protector-client.ts';
import { protectorOrder } from '../../src/app/rollback/rollback-init.ts';
import { createProtector, type Protector } from '../../src/daemon/protector.ts';
import { TEST_TASK_KEY } from './gmpi-test-tools.ts';

let protectors: Protector[] = [];
afterEach(async () => {
  for (const p of protectors) await p.close();
  protectors = [];
});

async function protector(): Promise<Protector> {
  const p = await createProtector({ host: '127.0.0.1', port: 0, log: () => undefined });
  protectors.push(p);
  expect(p.guard('t7', TEST_TASK_KEY, 1 << 20)).toEqual({ ok: true });
  return p;
}

const connect = (incarnation: number) => (endpoint: string) => {
  const i = endpoint.lastIndexOf(':');
  return ProtectorClient.connect({ host: endpoint.slice(0, i), port: Number(endpoint.slice(i + 1)), task: 't7', rank: 2, incarnation, taskKey: TEST_TASK_KEY });
};
const blob = (n: number) => Uint8Array.of(n, n, n);

describe('a rank moves to the next protector when its own fails (radic-hmpl A.2.7)', () => {
  it('its last checkpoint and the log since it move, in order, and the waiting append completes', async () => {
    const [a, b] = [await protector(), await protector()];
    const moves: [string, number | null][] = [];
    const store = new FailoverStore({ endpoints: [a.endpoint, b.endpoint], connect: connect(5), onMoved: (e, c) => moves.push([e, c?.id ?? null]) });
    await store.open(false);
    for (let pos = 1; pos <= 3; pos++) await store.append(pos, blob(pos));
    await store.putCheckpoint(1, 3, Uint8Array.of(42));
    for (let pos = 4; pos <= 5; pos++) await store.append(pos, blob(pos));
    await a.close(); // the node of the rank's protector fails
    await store.append(6, blob(6));
    expect(store.endpoint).toBe(b.endpoint);
    expect(moves).toEqual([[b.endpoint, 1]]);
    const got = await store.fetch();
    expect(got.checkpoints.map((c) => [c.id, c.logPos, [...c.bytes]])).toEqual([[1, 3, [42]]]);
    expect(got.log.map((e) => e.pos)).toEqual([4, 5, 6]);
    expect(got.last).toBe(6);
    await store.close();
  });

  it('before any checkpoint the whole log moves, and the move says so (no base)', async () => {
    const [a, b] = [await protector(), await protector()];
    const moves: [string, number | null][] = [];
    const store = new FailoverStore({ endpoints: [a.endpoint, b.endpoint], connect: connect(5), onMoved: (e, c) => moves.push([e, c?.id ?? null]) });
    await store.open(false);
    await store.append(1, blob(1));
    await a.close();
    await store.append(2, blob(2));
    expect(moves).toEqual([[b.endpoint, null]]);
    expect((await store.fetch()).log.map((e) => e.pos)).toEqual([1, 2]);
    await store.close();
  });

  it('a refusal is not a node failure: a fenced incarnation stays refused and nothing moves', async () => {
    const [a, b] = [await protector(), await protector()];
    const moves: string[] = [];
    const old = new FailoverStore({ endpoints: [a.endpoint, b.endpoint], connect: connect(5), onMoved: (e) => moves.push(e) });
    await old.open(false);
    await old.append(1, blob(1));
    const newer = await connect(6)(a.endpoint); // a replacement of the rank fences the old process
    const e = await old.append(2, blob(2)).then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(ProtectorError);
    expect(moves).toEqual([]);
    await newer.close();
    await old.close();
  });

  it('with no protector left to answer, the rank fails visibly', async () => {
    const a = await protector();
    const store = new FailoverStore({ endpoints: [a.endpoint, '127.0.0.1:1'], connect: connect(5), onMoved: () => undefined });
    await store.open(false);
    await a.close();
    const e = await store.append(1, blob(1)).then(() => null, (x: unknown) => x);
    expect((e as ProtectorError).code).toBe('CONNECT_FAILED');
  });

  it('a first incarnation whose protector does not answer takes the next of the ring (nothing of it is stored yet)', async () => {
    const b = await protector();
    const store = new FailoverStore({ endpoints: ['127.0.0.1:1', b.endpoint], connect: connect(5), onMoved: () => undefined });
    await store.open(false);
    expect(store.endpoint).toBe(b.endpoint);
    await store.append(1, blob(1));
    expect((await store.fetch()).log.map((e) => e.pos)).toEqual([1]);
    await store.close();
  });

  it('a replacement whose protector failed with its node cannot be restored, and says so (radic-hmpl A.2.7: one of the two, not both)', async () => {
    const b = await protector();
    const store = new FailoverStore({ endpoints: ['127.0.0.1:1', b.endpoint], connect: connect(6), onMoved: () => undefined });
    const e = await store.open(true).then(() => null, (x: unknown) => x);
    expect((e as ProtectorError).code).toBe('CONNECT_FAILED');
    expect((e as Error).message).toMatch(/^the protector at 127\.0\.0\.1:1, which holds this rank's checkpoints and log, does not answer .*it cannot be restored$/);
  });

  it('the ring order: the rank\'s own protector first, then the others after it, wrapping', () => {
    expect(protectorOrder('h:2', ['h:3', 'h:1', '', 'h:2', 'h:3'])).toEqual(['h:2', 'h:3', 'h:1']);
  });
});
