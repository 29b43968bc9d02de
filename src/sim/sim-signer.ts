// Signers for simulation: a cheap deterministic keyed hash (SHA-512 of secret ‖ data, 64-byte
// tags shaped like Ed25519 signatures) so thousands of seeds run per minute, and a keyring of the same
// shape over the production Ed25519 signer (src/io/signer-node.ts) for `--crypto ed25519`. Both implement the Signer/Verifier ports of
// src/core/ports.ts and pass the shared signer contract (test/sim/sim-signer.test.ts).
//
// The keyed-hash signer is a simulation stand-in, not a signature scheme: any holder of the keyring
// can sign as anyone. Inside the simulator only each process's own shell signs as it.
import * as nodeCrypto from 'node:crypto';
import { SIGNATURE_BYTES } from '../core/constants.ts';
import { MAC_BYTES } from '../core/constants.ts';
import type { LinkAuth, ProcessId, Signer, Verifier } from '../core/ports.ts';
import { publicKeyFromSeed } from '../io/keys.ts';
import { createNodeLinkAuth } from '../io/link-auth-node.ts';
import { createNodeSigner, createNodeVerifier } from '../io/signer-node.ts';

export type SimCrypto = 'keyed' | 'ed25519';

/** The keys of one simulated cluster: a signer and link keys per process, and one verifier that
 *  knows all. */
export interface SimKeyring {
  readonly crypto: SimCrypto;
  signerFor(id: ProcessId): Signer;
  linkAuthFor(id: ProcessId): LinkAuth;
  readonly verifier: Verifier;
}

/** 32 secret bytes for a process, derived from the keyring salt: deterministic per seed. */
function secretFor(salt: string, id: ProcessId): Buffer {
  return nodeCrypto.createHash('sha256').update(`trine-sim/${salt}/${id}`).digest();
}

/** A MAC compared in constant time (its length is no secret). */
const sameMac = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && nodeCrypto.timingSafeEqual(a, b);

/** Frames larger than this are hashed through a fresh buffer instead of the shared one. */
const SCRATCH_BYTES = 64 * 1024;

/** Keyed SHA-512 with a per-process secret, SHA-512(secret ‖ data): 64-byte tags shaped like
 *  Ed25519 signatures at about 2 µs each (an HMAC object costs twice that, and the simulator
 *  signs and verifies every frame). Length extension does not matter here: nobody forges. */
export function createKeyedHashKeyring(ids: readonly ProcessId[], salt = 'default'): SimKeyring {
  const secrets = new Map<ProcessId, Buffer>();
  for (const id of ids) secrets.set(id, secretFor(salt, id));
  const scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  const tag = (secret: Buffer, data: Uint8Array): Uint8Array => {
    const n = secret.length + data.length;
    const input = n <= SCRATCH_BYTES ? scratch.subarray(0, n) : Buffer.allocUnsafe(n);
    input.set(secret, 0);
    input.set(data, secret.length);
    const out = sha512(input);
    return new Uint8Array(out.buffer, out.byteOffset, SIGNATURE_BYTES);
  };
  const verifier: Verifier = {
    has: (id) => secrets.has(id),
    verify: (id, data, signature) => {
      const secret = secrets.get(id);
      if (secret === undefined || signature.length !== SIGNATURE_BYTES) return false;
      return sameMac(tag(secret, data), signature);
    },
  };
  // Link keys the same way: a secret per ordered pair, the tag the first MAC_BYTES of the hash.
  const linkSecrets = new Map<string, Buffer>();
  const linkSecret = (from: ProcessId, to: ProcessId): Buffer | null => {
    if (!secrets.has(from) || !secrets.has(to)) return null;
    const k = `${from} ${to}`;
    let s = linkSecrets.get(k);
    if (s === undefined) linkSecrets.set(k, (s = secretFor(salt, `link ${k}`)));
    return s;
  };
  return {
    crypto: 'keyed',
    verifier,
    signerFor(id) {
      const secret = secrets.get(id);
      if (secret === undefined) throw new RangeError(`no simulated key for ${id}`);
      return { id, sign: (data) => tag(secret, data) };
    },
    linkAuthFor(id) {
      if (!secrets.has(id)) throw new RangeError(`no simulated key for ${id}`);
      return {
        id,
        has: (peer) => secrets.has(peer),
        tag: (to, data) => {
          const s = linkSecret(id, to);
          return s === null ? null : tag(s, data).slice(0, MAC_BYTES);
        },
        check: (from, data, t) => {
          if (!(t instanceof Uint8Array) || !(data instanceof Uint8Array)) return false;
          const s = linkSecret(from, id);
          return s !== null && t.length === MAC_BYTES && sameMac(tag(s, data).subarray(0, MAC_BYTES), t);
        },
      };
    },
  };
}

/** One-shot SHA-512 (crypto.hash, Node ≥ 20.12) with a createHash fallback. */
const sha512: (data: Uint8Array) => Buffer = typeof nodeCrypto.hash === 'function'
  ? (data) => nodeCrypto.hash('sha512', data, 'buffer')
  : (data) => nodeCrypto.createHash('sha512').update(data).digest();

/** The production Ed25519 signer (src/io/signer-node.ts) with seeds derived from the salt,
 *  so a seed still replays byte for byte. */
export function createEd25519Keyring(ids: readonly ProcessId[], salt = 'default'): SimKeyring {
  const seeds = new Map<ProcessId, Uint8Array>();
  const publicKeys = new Map<ProcessId, Uint8Array>();
  for (const id of ids) {
    const seed = new Uint8Array(secretFor(salt, id));
    seeds.set(id, seed);
    publicKeys.set(id, publicKeyFromSeed(seed));
  }
  return {
    crypto: 'ed25519',
    verifier: createNodeVerifier(publicKeys),
    signerFor(id) {
      const seed = seeds.get(id);
      if (seed === undefined) throw new RangeError(`no simulated key for ${id}`);
      return createNodeSigner(id, seed);
    },
    linkAuthFor(id) {
      const seed = seeds.get(id);
      if (seed === undefined) throw new RangeError(`no simulated key for ${id}`);
      return createNodeLinkAuth(id, seed, publicKeys, salt);
    },
  };
}

export function createKeyring(crypto: SimCrypto, ids: readonly ProcessId[], salt = 'default'): SimKeyring {
  return crypto === 'keyed' ? createKeyedHashKeyring(ids, salt) : createEd25519Keyring(ids, salt);
}
