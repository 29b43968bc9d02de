// Ed25519 Signer and Verifier over node:crypto: the production signer (DESIGN.md §6,
// docs/PROTOCOL.md §2.3). Raw 32-byte keys are wrapped in their fixed DER prefixes once, at
// construction, so signing and verifying never re-parse a key.
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { PUBLIC_KEY_BYTES, SIGNATURE_BYTES } from '../core/constants.ts';
import type { ProcessId, Signer, Verifier } from '../core/ports.ts';

/** An Ed25519 private key is a 32-byte seed (RFC 8032 §5.1.5). */
export const SEED_BYTES = 32;

/** PKCS#8 PrivateKeyInfo for Ed25519 (RFC 8410 §7) up to the 32-byte seed. */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
/** SubjectPublicKeyInfo for Ed25519 (RFC 8410 §4) up to the 32-byte public key. */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** A table of public keys in either form the cluster configuration may hold. */
export type PublicKeyTable = ReadonlyMap<ProcessId, Uint8Array> | Readonly<Record<ProcessId, Uint8Array>>;

/** Our own configuration, not peer input: a wrong size is a programming or setup error. */
export function checkLength(what: string, key: Uint8Array, expected: number): void {
  if (!(key instanceof Uint8Array) || key.length !== expected) {
    const got = key instanceof Uint8Array ? `${key.length} bytes` : typeof key;
    throw new TypeError(`${what} must be ${expected} bytes, got ${got}`);
  }
}

export function privateKeyFromSeed(seed: Uint8Array): KeyObject {
  checkLength('Ed25519 seed', seed, SEED_BYTES);
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

export function publicKeyFromRaw(publicKey: Uint8Array): KeyObject {
  checkLength('Ed25519 public key', publicKey, PUBLIC_KEY_BYTES);
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' });
}

/** Entries of a key table; a Record is read through its own enumerable keys only. */
export function publicKeyEntries(table: PublicKeyTable): Array<[ProcessId, Uint8Array]> {
  return table instanceof Map ? [...table.entries()] : Object.entries(table as Readonly<Record<ProcessId, Uint8Array>>);
}

/** A plain Uint8Array view of a Buffer, so callers never depend on Buffer's extra API. */
function plain(buf: Buffer): Uint8Array {
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

export function createNodeSigner(id: ProcessId, seed: Uint8Array): Signer {
  const key = privateKeyFromSeed(seed);
  return {
    id,
    sign: (data) => plain(sign(null, data, key)),
  };
}

/** A Verifier over a key table and one library's check, with the peer-input guards both
 *  libraries need: an unknown id, a wrong-length signature or non-bytes data is a bad signature,
 *  never an exception (STYLE.md 5); so is anything the library throws on. */
export function verifierOver<K>(keys: ReadonlyMap<ProcessId, K>, check: (data: Uint8Array, signature: Uint8Array, key: K) => boolean): Verifier {
  return {
    has: (id) => keys.has(id),
    verify: (id, data, signature) => {
      const key = keys.get(id);
      if (key === undefined) return false;
      if (!(signature instanceof Uint8Array) || signature.length !== SIGNATURE_BYTES) return false;
      if (!(data instanceof Uint8Array)) return false;
      try {
        return check(data, signature, key);
      } catch {
        return false;
      }
    },
  };
}

/** A verifier that can learn keys: `add` takes the key of an id it does not know yet (a node
 *  added at run time, PROTOCOL §10.12) and never replaces one it knows. */
export type LearningVerifier = Verifier & { add(id: ProcessId, publicKey: Uint8Array): boolean };

export function createNodeVerifier(publicKeys: PublicKeyTable): LearningVerifier {
  // A Map, never an object lookup: ids such as 'constructor' must not find a prototype member.
  const keys = new Map<ProcessId, KeyObject>();
  for (const [id, raw] of publicKeyEntries(publicKeys)) keys.set(id, publicKeyFromRaw(raw));
  const add = (id: ProcessId, publicKey: Uint8Array): boolean => {
    if (keys.has(id) || !(publicKey instanceof Uint8Array) || publicKey.length !== PUBLIC_KEY_BYTES) return false;
    try {
      keys.set(id, publicKeyFromRaw(publicKey));
      return true;
    } catch {
      return false;
    }
  };
  return { ...verifierOver(keys, (data, signature, key) => verify(null, data, key, signature)), add };
}
