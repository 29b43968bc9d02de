// The LinkAuth contract (src/core/ports.ts, docs/PROTOCOL.md §2.4) every implementation meets:
// what one end tags the other end checks, one key per direction and per pair, MAC_BYTES-byte tags
// that cover every byte, nothing for a stranger, and two clusters (or seeds) kept apart. Run on
// the node:crypto link keys (test/unit/io/link-auth-node.test.ts) and on the simulator's two
// keyrings (test/sim/sim-signer.test.ts).
import { describe, expect, it } from 'vitest';
import { MAC_BYTES } from '../../../src/core/constants.ts';
import type { LinkAuth } from '../../../src/core/ports.ts';

/** One cluster's link keys for the processes r1, r2 and a1, and another cluster's for the same. */
export type LinkAuthRing = { linkAuthFor(id: string): LinkAuth; otherCluster(): { linkAuthFor(id: string): LinkAuth } };

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const IDS = ['r1', 'r2', 'a1'] as const;

export function linkAuthContract(name: string, make: () => LinkAuthRing): void {
  describe(`LinkAuth contract: ${name}`, () => {
    const k = make();
    const data = [new Uint8Array(0), Uint8Array.of(1, 2, 3), Uint8Array.from({ length: 100_000 }, (_, i) => (i * 7) & 0xff)];

    it('gives each process link keys carrying its id, with every process of the cluster', () => {
      for (const id of IDS) {
        const l = k.linkAuthFor(id);
        expect(l.id).toBe(id);
        for (const peer of IDS.filter((p) => p !== id)) expect(l.has(peer), `${id} → ${peer}`).toBe(true);
      }
    });

    it(`tags with exactly ${MAC_BYTES} bytes; what one end tags the other checks, in both directions, the same each time`, () => {
      for (const [a, b] of [['r1', 'r2'], ['a1', 'r1'], ['r2', 'a1']] as const) {
        for (const d of data) {
          const ab = k.linkAuthFor(a).tag(b, d);
          const ba = k.linkAuthFor(b).tag(a, d);
          expect(ab).toHaveLength(MAC_BYTES);
          expect(ba).toHaveLength(MAC_BYTES);
          expect(k.linkAuthFor(b).check(a, d, ab as Uint8Array), `${a} → ${b}`).toBe(true);
          expect(k.linkAuthFor(a).check(b, d, ba as Uint8Array), `${b} → ${a}`).toBe(true);
          expect(hex(k.linkAuthFor(a).tag(b, d) as Uint8Array)).toBe(hex(ab as Uint8Array));
        }
      }
    });

    it('keeps directions and pairs apart, and a tag covers every byte', () => {
      const d = Uint8Array.of(9, 8, 7, 6);
      const r1 = k.linkAuthFor('r1');
      const r2 = k.linkAuthFor('r2');
      const a1 = k.linkAuthFor('a1');
      const r1r2 = r1.tag('r2', d) as Uint8Array;
      expect(hex(r1r2)).not.toBe(hex(r2.tag('r1', d) as Uint8Array));
      expect(r1.check('r2', d, r1r2)).toBe(false); // reflected back to its sender
      expect(a1.check('r1', d, r1r2)).toBe(false); // shown to a third process
      expect(r2.check('a1', d, r1r2)).toBe(false); // passed off as another sender's
      expect(r2.check('r1', d, r1.tag('a1', d) as Uint8Array)).toBe(false); // r1's tag for a1, shown to r2
      expect(r2.check('r1', Uint8Array.of(9, 8, 7, 7), r1r2)).toBe(false);
      const flipped = Uint8Array.from(r1r2);
      flipped[MAC_BYTES - 1] = (flipped[MAC_BYTES - 1] as number) ^ 1;
      expect(r2.check('r1', d, flipped)).toBe(false);
      expect(r2.check('r1', d, r1r2.subarray(0, MAC_BYTES - 1))).toBe(false);
      expect(r2.check('r1', d, new Uint8Array(2 * MAC_BYTES))).toBe(false);
      expect(r2.check('r1', d, new Uint8Array(0))).toBe(false);
    });

    it('has no key for a process outside the cluster: has() false, tag() null, check() false', () => {
      const r1 = k.linkAuthFor('r1');
      for (const stranger of ['r9', 'constructor', '']) {
        expect(r1.has(stranger)).toBe(false);
        expect(r1.tag(stranger, Uint8Array.of(1))).toBeNull();
        expect(r1.check(stranger, Uint8Array.of(1), new Uint8Array(MAC_BYTES))).toBe(false);
      }
    });

    it('keeps two clusters with the same processes apart', () => {
      const d = Uint8Array.of(1);
      const t = k.linkAuthFor('r1').tag('r2', d) as Uint8Array;
      const other = k.otherCluster();
      expect(hex(other.linkAuthFor('r1').tag('r2', d) as Uint8Array)).not.toBe(hex(t));
      expect(other.linkAuthFor('r2').check('r1', d, t)).toBe(false);
    });
  });
}
