// The simulator's signers pass the same contract as the production ones (STYLE.md 3), and both
// keyrings' link keys (PROTOCOL §2.4) pass the LinkAuth contract.
import { describe, expect, it } from 'vitest';
import { MAC_BYTES } from '../../src/core/constants.ts';
import { createEd25519Keyring, createKeyedHashKeyring, createKeyring, type SimKeyring } from '../../src/sim/sim-signer.ts';
import { signerContract, type SignerSet } from '../unit/io/signer-contract.ts';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const asSet = (k: SimKeyring, ids: string[]): SignerSet => ({ signers: new Map(ids.map((id) => [id, k.signerFor(id)])), verifier: k.verifier });

signerContract('simulator keyed SHA-512 keyring', (ids) => asSet(createKeyedHashKeyring(ids, 'contract'), ids));
signerContract('simulator Ed25519 keyring (--crypto ed25519)', (ids) => asSet(createEd25519Keyring(ids, 'contract'), ids));

describe('simulator keyrings', () => {
  it('derive the same keys from the same salt, so a seed replays byte for byte', () => {
    const data = new Uint8Array([1, 2, 3]);
    for (const make of [createKeyedHashKeyring, createEd25519Keyring]) {
      expect(make(['r1'], 's1').signerFor('r1').sign(data)).toEqual(make(['r1'], 's1').signerFor('r1').sign(data));
      expect(make(['r1'], 's1').signerFor('r1').sign(data)).not.toEqual(make(['r1'], 's2').signerFor('r1').sign(data));
    }
  });

  it('refuse to make a signer for a process outside the cluster', () => {
    expect(() => createKeyedHashKeyring(['r1']).signerFor('r9')).toThrow(/no simulated key/);
  });
});

/** The LinkAuth contract (src/core/ports.ts) both keyrings' link keys meet: what one end tags the
 *  other end checks, one key per direction and per pair, 32-byte tags, nothing for a stranger. */
function linkAuthContract(name: string, make: (ids: string[]) => SimKeyring): void {
  describe(`LinkAuth contract: ${name}`, () => {
    const k = make(['r1', 'r2', 'a1']);
    const data = [new Uint8Array(0), Uint8Array.of(1, 2, 3), Uint8Array.from({ length: 100_000 }, (_, i) => (i * 7) & 0xff)];

    it('gives each process link keys carrying its id, with every process of the cluster', () => {
      for (const id of ['r1', 'r2', 'a1']) {
        const l = k.linkAuthFor(id);
        expect(l.id).toBe(id);
        for (const peer of ['r1', 'r2', 'a1'].filter((p) => p !== id)) expect(l.has(peer), `${id} → ${peer}`).toBe(true);
      }
    });

    it(`tags with exactly ${MAC_BYTES} bytes; what one end tags the other checks, in both directions`, () => {
      for (const [a, b] of [['r1', 'r2'], ['a1', 'r1'], ['r2', 'a1']] as const) {
        for (const d of data) {
          const ab = k.linkAuthFor(a).tag(b, d);
          const ba = k.linkAuthFor(b).tag(a, d);
          expect(ab).toHaveLength(MAC_BYTES);
          expect(ba).toHaveLength(MAC_BYTES);
          expect(k.linkAuthFor(b).check(a, d, ab as Uint8Array), `${a} → ${b}`).toBe(true);
          expect(k.linkAuthFor(a).check(b, d, ba as Uint8Array), `${b} → ${a}`).toBe(true);
          // deterministic, also through a fresh keyring of the same salt (seeds replay)
          expect(hex(make(['r1', 'r2', 'a1']).linkAuthFor(a).tag(b, d) as Uint8Array)).toBe(hex(ab as Uint8Array));
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
      const changed = Uint8Array.of(9, 8, 7, 7);
      expect(r2.check('r1', changed, r1r2)).toBe(false);
      const flipped = Uint8Array.from(r1r2);
      flipped[31] = (flipped[31] as number) ^ 1;
      expect(r2.check('r1', d, flipped)).toBe(false);
      expect(r2.check('r1', d, r1r2.subarray(0, 31))).toBe(false);
      expect(r2.check('r1', d, new Uint8Array(64))).toBe(false);
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

    it('keeps keyrings of different salts (clusters, seeds) apart', () => {
      const d = Uint8Array.of(1);
      const t = k.linkAuthFor('r1').tag('r2', d) as Uint8Array;
      const other = createKeyring(k.crypto, ['r1', 'r2', 'a1'], 'another salt');
      expect(hex(other.linkAuthFor('r1').tag('r2', d) as Uint8Array)).not.toBe(hex(t));
      expect(other.linkAuthFor('r2').check('r1', d, t)).toBe(false);
    });

    it('refuses to make link keys for a process outside the cluster', () => {
      expect(() => k.linkAuthFor('r9')).toThrow(/no simulated key/);
    });
  });
}

linkAuthContract('simulator keyed SHA-512 keyring', (ids) => createKeyedHashKeyring(ids, 'contract'));
linkAuthContract('simulator Ed25519 keyring (--crypto ed25519)', (ids) => createEd25519Keyring(ids, 'contract'));
