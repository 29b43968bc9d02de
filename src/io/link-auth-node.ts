// Link keys over node:crypto (docs/PROTOCOL.md §2.4). Two processes derive a shared secret by
// X25519 from the Ed25519 keys the cluster already holds: the seed's SHA-512 half is the X25519
// scalar and the Edwards public key maps to its Montgomery u-coordinate, u = (1 + y)/(1 − y)
// (RFC 7748 §4.1; libsodium's crypto_sign_ed25519_pk_to_curve25519). HKDF-SHA256 turns the
// secret into one HMAC-SHA256 key per direction, bound to the cluster and both ids. No key file,
// configuration or handshake changes; a peer's keys are derived on first use (one X25519).
import {
  createHash, createHmac, createPrivateKey, createPublicKey, createSecretKey, diffieHellman, hkdfSync, timingSafeEqual, type KeyObject,
} from 'node:crypto';
import { MAC_BYTES, PUBLIC_KEY_BYTES } from '../core/constants.ts';
import type { LinkAuth, ProcessId } from '../core/ports.ts';
import { checkLength, publicKeyEntries, SEED_BYTES, type PublicKeyTable } from './signer-node.ts';

/** PKCS#8 PrivateKeyInfo for X25519 (RFC 8410 §7) up to the 32-byte scalar. */
const X25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
/** SubjectPublicKeyInfo for X25519 (RFC 8410 §4) up to the 32-byte u-coordinate. */
const X25519_SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');
/** The field prime of both curves, 2^255 − 19. */
const P = (1n << 255n) - 19n;

function modPow(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = base % P;
  for (let e = exp; e > 0n; e >>= 1n) {
    if ((e & 1n) === 1n) result = (result * b) % P;
    b = (b * b) % P;
  }
  return result;
}

/** The X25519 public key (u-coordinate, little-endian) of an Ed25519 public key, or null when
 *  the encoding is not a field element or maps to no point (y = 1). Peer configuration only. */
export function x25519PublicFromEd25519(publicKey: Uint8Array): Uint8Array | null {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== PUBLIC_KEY_BYTES) return null;
  let y = 0n;
  for (let i = PUBLIC_KEY_BYTES - 1; i >= 0; i--) y = (y << 8n) | BigInt(i === PUBLIC_KEY_BYTES - 1 ? (publicKey[i] as number) & 0x7f : (publicKey[i] as number));
  if (y >= P) return null;
  const den = (1n - y + P) % P;
  if (den === 0n) return null;
  let u = ((1n + y) * modPow(den, P - 2n)) % P;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) {
    out[i] = Number(u & 0xffn);
    u >>= 8n;
  }
  return out;
}

/** The X25519 scalar of an Ed25519 seed: the first half of SHA-512(seed), clamped (RFC 8032
 *  §5.1.5 uses the same bytes as the signing scalar). */
export function x25519SecretFromEd25519Seed(seed: Uint8Array): Uint8Array {
  checkLength('Ed25519 seed', seed, SEED_BYTES);
  const a = new Uint8Array(createHash('sha512').update(seed).digest().subarray(0, 32));
  a[0] = (a[0] as number) & 248;
  a[31] = ((a[31] as number) & 127) | 64;
  return a;
}

export function x25519PrivateKey(scalar: Uint8Array): KeyObject {
  return createPrivateKey({ key: Buffer.concat([X25519_PKCS8_PREFIX, scalar]), format: 'der', type: 'pkcs8' });
}

export function x25519PublicKey(u: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.concat([X25519_SPKI_PREFIX, u]), format: 'der', type: 'spki' });
}

/** The HMAC key for frames `from` sends to `to`, from the pair's X25519 secret. */
export function directionKey(shared: Uint8Array, cluster: string, from: ProcessId, to: ProcessId): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', shared, Buffer.from(cluster, 'utf8'), Buffer.from(`trine link ${from} ${to}`, 'utf8'), 32));
}

type PairKeys = { send: KeyObject; receive: KeyObject };

/** This process's link keys with every process of the key table. A peer whose public key maps to
 *  no usable X25519 key (a low-order or invalid point: the exchange fails or yields zeros) has
 *  none, so frames with it stay signed. */
/** Link keys that can learn a peer: `add` takes the key of an id it does not know yet (a node
 *  added at run time, PROTOCOL §10.12) and never replaces one it knows. */
export type LearningLinkAuth = LinkAuth & { add(peer: ProcessId, publicKey: Uint8Array): boolean };

export function createNodeLinkAuth(id: ProcessId, seed: Uint8Array, publicKeys: PublicKeyTable, cluster: string): LearningLinkAuth {
  const mine = x25519PrivateKey(x25519SecretFromEd25519Seed(seed));
  const peers = new Map<ProcessId, Uint8Array>(publicKeyEntries(publicKeys));
  const keys = new Map<ProcessId, PairKeys | null>();
  const keysFor = (peer: ProcessId): PairKeys | null => {
    const known = keys.get(peer);
    if (known !== undefined) return known;
    const raw = peers.get(peer);
    if (raw === undefined) return null;
    let pair: PairKeys | null = null;
    const u = x25519PublicFromEd25519(raw);
    if (u !== null) {
      try {
        const shared = diffieHellman({ privateKey: mine, publicKey: x25519PublicKey(u) });
        if (shared.some((b) => b !== 0)) {
          pair = {
            send: createSecretKey(directionKey(shared, cluster, id, peer)),
            receive: createSecretKey(directionKey(shared, cluster, peer, id)),
          };
        }
      } catch {
        pair = null;
      }
    }
    keys.set(peer, pair);
    return pair;
  };
  const mac = (key: KeyObject, data: Uint8Array): Buffer => createHmac('sha256', key).update(data).digest();
  return {
    id,
    add: (peer, publicKey) => {
      if (peers.has(peer) || !(publicKey instanceof Uint8Array) || publicKey.length !== PUBLIC_KEY_BYTES) return false;
      peers.set(peer, new Uint8Array(publicKey));
      keys.delete(peer);
      return true;
    },
    has: (peer) => keysFor(peer) !== null,
    tag: (to, data) => {
      const k = keysFor(to);
      if (k === null) return null;
      const t = mac(k.send, data);
      return new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
    },
    check: (from, data, tag) => {
      const k = keysFor(from);
      if (k === null || !(tag instanceof Uint8Array) || tag.length !== MAC_BYTES || !(data instanceof Uint8Array)) return false;
      return timingSafeEqual(mac(k.receive, data), tag);
    },
  };
}
