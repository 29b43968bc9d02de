// Ed25519 Signer and Verifier over tweetnacl: the pure-JavaScript fallback and the
// interoperability oracle of the node:crypto signer (DESIGN.md §6). Signatures are
// byte-identical to signer-node.ts, and verification accepts exactly the same signatures: like
// OpenSSL, it rejects a non-canonical S ≥ L, which tweetnacl alone would accept (RFC 8032
// §5.1.7), so replicas using different signers never disagree about a peer's frame.
import nacl from 'tweetnacl';
import { PUBLIC_KEY_BYTES } from '../core/constants.ts';
import type { ProcessId, Signer, Verifier } from '../core/ports.ts';
import { checkLength, publicKeyEntries, SEED_BYTES, verifierOver, type PublicKeyTable } from './signer-node.ts';

/** The group order L = 2^252 + 27742317777372353535851937790883648493, little-endian. */
const GROUP_ORDER = Uint8Array.from([
  0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
]);

/** True when the scalar S (second half of the signature) is below L. */
export function hasCanonicalScalar(signature: Uint8Array): boolean {
  for (let i = 31; i >= 0; i--) {
    const s = signature[32 + i] as number;
    const l = GROUP_ORDER[i] as number;
    if (s !== l) return s < l;
  }
  return false; // S = L
}


export function createNaclSigner(id: ProcessId, seed: Uint8Array): Signer {
  checkLength('Ed25519 seed', seed, SEED_BYTES);
  const secretKey = nacl.sign.keyPair.fromSeed(Uint8Array.from(seed)).secretKey;
  return { id, sign: (data) => nacl.sign.detached(data, secretKey) };
}

export function createNaclVerifier(publicKeys: PublicKeyTable): Verifier {
  const keys = new Map<ProcessId, Uint8Array>();
  for (const [id, raw] of publicKeyEntries(publicKeys)) {
    checkLength('Ed25519 public key', raw, PUBLIC_KEY_BYTES);
    keys.set(id, Uint8Array.from(raw));
  }
  return verifierOver(keys, (data, signature, key) => hasCanonicalScalar(signature) && nacl.sign.detached.verify(data, signature, key));
}
