// The log's chain digest (src/app/rollback/log-chain.ts; PROTOCOL §11.4): what a rank reports as
// its log's extent, and what a replacement accepts from a protector that may be faulty.
import { describe, expect, it } from 'vitest';
import { ChainedStore, CHAIN_ZERO, chainNext, verifyLogChain } from '../../../../src/app/rollback/log-chain.ts';
import type { Mark, StoreContents } from '../../../../src/app/rollback/runtime.ts';

const blobs = [1, 2, 3, 4, 5].map((i) => Uint8Array.of(i, i * 2, i * 3));
/** c_1 … c_5 over `blobs`. */
const chains = blobs.reduce<Uint8Array[]>((acc, b, i) => [...acc, chainNext(acc[i - 1] ?? CHAIN_ZERO, i + 1, b)], []);
const mark = (logPos: number, extent: number): Mark => ({
  id: 1, logPos, digest: new Uint8Array(32), protector: 'p', base: logPos === 0 ? CHAIN_ZERO : chains[logPos - 1]!, extent, chain: chains[extent - 1]!,
});
const contents = (log: { pos: number; blob: Uint8Array }[]): StoreContents => ({ checkpoints: [], log, last: Math.max(0, ...log.map((e) => e.pos)) });
const all = blobs.map((blob, i) => ({ pos: i + 1, blob }));

describe('the log chain (PROTOCOL §11.4: the extent of each log recorded by digest through the group)', () => {
  it('the honest log meets every recorded extent, from the start or from a checkpoint', () => {
    expect(verifyLogChain(contents(all), 0, CHAIN_ZERO, [mark(0, 3), mark(2, 5)])).toEqual({ ok: true, head: { pos: 5, chain: chains[4] } });
    expect(verifyLogChain(contents(all.slice(2)), 2, chains[1]!, [mark(2, 4)])).toEqual({ ok: true, head: { pos: 5, chain: chains[4] } });
    // Entries past the last recorded extent are taken (the window of one report).
    expect(verifyLogChain(contents(all), 0, CHAIN_ZERO, [mark(0, 2)]).ok).toBe(true);
  });

  it('a rewritten, reordered, missing or truncated entry is refused', () => {
    const rewritten = all.map((e) => (e.pos === 2 ? { pos: 2, blob: Uint8Array.of(9) } : e));
    expect(verifyLogChain(contents(rewritten), 0, CHAIN_ZERO, [mark(0, 3)])).toMatchObject({ ok: false, reason: expect.stringMatching(/up to position 3 does not match/) });
    const swapped = all.map((e) => (e.pos === 2 ? { pos: 2, blob: blobs[2]! } : e.pos === 3 ? { pos: 3, blob: blobs[1]! } : e));
    expect(verifyLogChain(contents(swapped), 0, CHAIN_ZERO, [mark(0, 4)]).ok).toBe(false);
    expect(verifyLogChain(contents(all.filter((e) => e.pos !== 3)), 0, CHAIN_ZERO, [mark(0, 5)])).toMatchObject({ ok: false, reason: expect.stringMatching(/skips from position 2 to 4/) });
    expect(verifyLogChain(contents(all.slice(0, 3)), 0, CHAIN_ZERO, [mark(0, 5)])).toMatchObject({ ok: false, reason: expect.stringMatching(/up to position 5, and the protector holds it only up to 3/) });
    // A wrong base (a checkpoint's chain that is not the group's) fails at the first extent.
    expect(verifyLogChain(contents(all.slice(2)), 2, CHAIN_ZERO, [mark(2, 4)]).ok).toBe(false);
  });

  it('ChainedStore reports the contiguous prefix its store acknowledged, whatever the order of the acknowledgements', async () => {
    const gates = new Map<number, () => void>();
    const inner = {
      append: (pos: number) => new Promise<void>((r) => gates.set(pos, r)),
      putCheckpoint: async () => undefined,
      fetch: async () => contents([]),
    };
    const s = new ChainedStore(inner);
    const done = blobs.map((b, i) => s.append(i + 1, b));
    expect(s.chainAt(5)).toEqual(chains[4]);
    expect(s.extent()).toEqual({ pos: 0, chain: CHAIN_ZERO });
    gates.get(2)!();
    gates.get(3)!();
    await Promise.all([done[1], done[2]]);
    expect(s.extent().pos).toBe(0); // 1 is not acknowledged yet
    gates.get(1)!();
    await done[0];
    expect(s.extent()).toEqual({ pos: 3, chain: chains[2] });
    expect(() => s.append(7, Uint8Array.of(0))).toThrow(/in order/);
    expect(s.chainAt(3)).toEqual(chains[2]);
  });
});
