// The simulator's signers pass the same contract as the production ones (STYLE.md 3), and both
// keyrings' link keys (PROTOCOL §2.4) pass the LinkAuth contract (test/unit/io/link-auth-contract.ts).
import { describe, expect, it } from 'vitest';
import { createEd25519Keyring, createKeyedHashKeyring, createKeyring, type SimKeyring } from '../../src/sim/sim-signer.ts';
import { linkAuthContract, type LinkAuthRing } from '../unit/io/link-auth-contract.ts';
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

const ring = (make: typeof createKeyedHashKeyring): LinkAuthRing => {
  const k = make(['r1', 'r2', 'a1'], 'contract');
  return { linkAuthFor: (id) => k.linkAuthFor(id), otherCluster: () => createKeyring(k.crypto, ['r1', 'r2', 'a1'], 'another salt') };
};
linkAuthContract('simulator keyed SHA-512 keyring', () => ring(createKeyedHashKeyring));
linkAuthContract('simulator Ed25519 keyring (--crypto ed25519)', () => ring(createEd25519Keyring));

describe('simulator link keys', () => {
  it('are the same from a fresh keyring of the same salt, so a seed replays byte for byte', () => {
    for (const make of [createKeyedHashKeyring, createEd25519Keyring]) {
      const d = Uint8Array.of(1, 2, 3);
      expect(hex(make(['r1', 'r2'], 's').linkAuthFor('r1').tag('r2', d) as Uint8Array)).toBe(hex(make(['r1', 'r2'], 's').linkAuthFor('r1').tag('r2', d) as Uint8Array));
    }
  });

  it('are refused for a process outside the cluster', () => {
    expect(() => createKeyedHashKeyring(['r1', 'r2', 'a1'], 'contract').linkAuthFor('r9')).toThrow(/no simulated key/);
  });
});
