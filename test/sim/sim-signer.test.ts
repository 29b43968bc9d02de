// The simulator's signers pass the same contract as the production ones (STYLE.md 3).
import { describe, expect, it } from 'vitest';
import { createEd25519Keyring, createKeyedHashKeyring, type SimKeyring } from '../../src/sim/sim-signer.ts';
import { signerContract, type SignerSet } from '../unit/io/signer-contract.ts';

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
