// bytesEqual compares by content whatever the views' offsets (src/base/bytes.ts): byte by byte
// below WORD_COMPARE_FROM, by 4-byte words past it, over aligned and misaligned views alike.
import { describe, expect, it } from 'vitest';
import { bytesEqual } from '../../../src/base/bytes.ts';

/** `n` bytes at `offset` into a buffer of their own, a pattern that differs at every byte. */
const view = (n: number, offset: number, seed = 0): Uint8Array => {
  const v = new Uint8Array(new ArrayBuffer(n + offset + 8), offset, n);
  for (let i = 0; i < n; i++) v[i] = (i * 31 + seed) & 0xff;
  return v;
};

describe('bytesEqual', () => {
  for (const n of [0, 1, 63, 64, 65, 1000, 65_536 + 3]) {
    it(`${n} bytes: equal at every pair of offsets (aligned and not), and a difference at the first, a middle or the last byte is seen`, () => {
      for (const [oa, ob] of [[0, 0], [1, 5], [0, 2], [3, 1], [2, 2]] as const) {
        const a = view(n, oa);
        const b = view(n, ob);
        expect(bytesEqual(a, b)).toBe(true);
        for (const at of n === 0 ? [] : [0, n >> 1, n - 1]) {
          const c = view(n, ob);
          c[at] = c[at]! ^ 1;
          expect(bytesEqual(a, c), `offsets ${oa}/${ob}, byte ${at}`).toBe(false);
        }
      }
    });
  }

  it('different lengths differ; a Buffer and a Uint8Array with the same bytes are equal', () => {
    expect(bytesEqual(view(64, 0), view(65, 0))).toBe(false);
    const v = view(4096, 3);
    expect(bytesEqual(Buffer.from(v), v)).toBe(true);
  });
});
