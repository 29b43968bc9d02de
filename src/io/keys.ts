// Ed25519 key generation and the on-disk key files (docs/PROTOCOL.md §2.3): one private key file
// per process, `{ "id", "publicKey", "seed" }` in base64, mode 0600, and one cluster-wide table
// of public keys `{ "<id>": "<base64>" }`. Readers check everything and fail with a KeyFileError
// whose message says what was wrong and what to do (STYLE.md 7).
import { createPublicKey, randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { bytesEqual } from '../base/bytes.ts';
import { PUBLIC_KEY_BYTES } from '../core/constants.ts';
import type { ProcessId } from '../core/ports.ts';
import { quoted } from '../core/quoted.ts';
import { processId } from '../core/wire/messages.ts';
import { PRIVATE_FILE_MODE, writeFileAtomic } from './private-files.ts';
import { privateKeyFromSeed, publicKeyEntries, SEED_BYTES, type PublicKeyTable } from './signer-node.ts';

export type KeyPair = { seed: Uint8Array; publicKey: Uint8Array };
export type KeyFile = { id: ProcessId; seed: Uint8Array; publicKey: Uint8Array };

export type KeyFileErrorCode = 'KEY_FILE_MISSING' | 'KEY_FILE_INVALID';

export class KeyFileError extends Error {
  override readonly name = 'KeyFileError';
  constructor(readonly code: KeyFileErrorCode, readonly path: string, message: string) {
    super(message);
  }
}

const KEYGEN_HINT = 'run `trine keygen` to create the cluster keys';
/** A key file holds three short fields; anything much larger is not one. */
const MAX_KEY_FILE_BYTES = 64 * 1024;
/** The public-key table is public: every host's bundle holds it, and anyone may verify. */
const PUBLIC_FILE_MODE = 0o644;
/** A public-key table lists every process of a cluster (MAX_LIST_ENTRIES at most). */
const MAX_PUBLIC_KEYS_FILE_BYTES = 1024 * 1024;

function fromBase64Url(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'base64url'));
}

/** An Ed25519 private key is 32 random bytes, its seed (RFC 8032 §5.1.5). Not through
 *  generateKeyPairSync: Node 20 can deadlock when a garbage collection during a key's JWK
 *  export destroys the key-generation job that made it (both take the key's lock: a CI run
 *  hung there), and a key built from a seed involves no such job. */
export function generateKeyPair(): KeyPair {
  const seed = new Uint8Array(randomBytes(SEED_BYTES));
  return { seed, publicKey: publicKeyFromSeed(seed) };
}

export function publicKeyFromSeed(seed: Uint8Array): Uint8Array {
  const x = createPublicKey(privateKeyFromSeed(seed)).export({ format: 'jwk' }).x;
  if (x === undefined) throw new Error('node:crypto exported an Ed25519 JWK without x');
  return fromBase64Url(x);
}

// ---- base64 -----------------------------------------------------------------------------------

const toBase64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');

/** Strict base64 of exactly `size` bytes: Buffer.from alone silently skips bad characters. */
function decodeKey(value: unknown, size: number): Uint8Array | null {
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) return null;
  const b = Buffer.from(value, 'base64');
  if (b.length !== size || b.toString('base64') !== value) return null;
  return new Uint8Array(b);
}

// ---- files ------------------------------------------------------------------------------------

function readJson(path: string, what: string, maxBytes: number): unknown {
  let text: string;
  try {
    // Check the size before reading, so a wrong path to a huge file fails fast.
    if (statSync(path).size > maxBytes) {
      throw new KeyFileError('KEY_FILE_INVALID', path, `${what} ${path} is larger than ${maxBytes} bytes, not a key file: ${KEYGEN_HINT}`);
    }
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (e instanceof KeyFileError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new KeyFileError('KEY_FILE_MISSING', path, `${what} ${path} does not exist: ${KEYGEN_HINT}, or pass the right path`);
    }
    throw new KeyFileError('KEY_FILE_INVALID', path, `${what} ${path} cannot be read (${(e as Error).message}): check its path and permissions`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new KeyFileError('KEY_FILE_INVALID', path, `${what} ${path} is not valid JSON (${(e as Error).message}): restore it or ${KEYGEN_HINT}`);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isProcessId = (v: unknown): v is ProcessId => processId.dec(v, 'id').ok;

/** Write a process's private key file, readable by its owner only (mode 0600). */
export function writeKeyFile(path: string, id: ProcessId, pair: KeyPair): void {
  if (!isProcessId(id)) throw new TypeError(`bad process id ${quoted(id)}: lower-case letters, digits and '-'`);
  if (pair.seed.length !== SEED_BYTES || pair.publicKey.length !== PUBLIC_KEY_BYTES) {
    throw new TypeError(`a key pair is a ${SEED_BYTES}-byte seed and a ${PUBLIC_KEY_BYTES}-byte public key`);
  }
  const json = { id, publicKey: toBase64(pair.publicKey), seed: toBase64(pair.seed) };
  // Through a temporary file and a rename: a reader never sees half a key file, and an existing
  // file's looser mode is never kept.
  writeFileAtomic(path, `${JSON.stringify(json, null, 2)}\n`, { mode: PRIVATE_FILE_MODE });
}

/** Read and check a private key file, including that its public key belongs to its seed. */
export function readKeyFile(path: string): KeyFile {
  const json = readJson(path, 'key file', MAX_KEY_FILE_BYTES);
  const invalid = (what: string) =>
    new KeyFileError('KEY_FILE_INVALID', path, `key file ${path}: ${what}; restore it from a backup or ${KEYGEN_HINT}`);
  if (!isObject(json)) throw invalid('expected a JSON object { "id", "publicKey", "seed" }');
  if (!isProcessId(json.id)) throw invalid(`"id" must be a process id such as "r1" (lower-case letters, digits, '-')`);
  const seed = decodeKey(json.seed, SEED_BYTES);
  if (seed === null) throw invalid(`"seed" must be ${SEED_BYTES} bytes in base64`);
  const publicKey = decodeKey(json.publicKey, PUBLIC_KEY_BYTES);
  if (publicKey === null) throw invalid(`"publicKey" must be ${PUBLIC_KEY_BYTES} bytes in base64`);
  const derived = publicKeyFromSeed(seed);
  if (!bytesEqual(derived, publicKey)) {
    throw invalid(`"publicKey" does not belong to "seed" (the file was edited or mixed up)`);
  }
  return { id: json.id, seed, publicKey };
}

/** Write the cluster's public-key table; ids in sorted order so equal tables are equal files. */
export function writePublicKeys(path: string, keys: PublicKeyTable): void {
  const entries = publicKeyEntries(keys).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const json: Record<string, string> = {};
  for (const [id, key] of entries) {
    if (!isProcessId(id)) throw new TypeError(`bad process id ${quoted(id)}: lower-case letters, digits and '-'`);
    if (key.length !== PUBLIC_KEY_BYTES) throw new TypeError(`public key of ${id} must be ${PUBLIC_KEY_BYTES} bytes`);
    json[id] = toBase64(key);
  }
  writeFileAtomic(path, `${JSON.stringify(json, null, 2)}\n`, { mode: PUBLIC_FILE_MODE });
}

/** Read the cluster's public-key table. Two ids sharing a key are refused: either could then
 *  sign as the other, which defeats the point of per-process keys. */
export function readPublicKeys(path: string): Map<ProcessId, Uint8Array> {
  const json = readJson(path, 'public-key file', MAX_PUBLIC_KEYS_FILE_BYTES);
  const invalid = (what: string) =>
    new KeyFileError('KEY_FILE_INVALID', path, `public-key file ${path}: ${what}; restore it or ${KEYGEN_HINT}`);
  if (!isObject(json)) throw invalid('expected a JSON object { "<id>": "<base64 public key>" }');
  const out = new Map<ProcessId, Uint8Array>();
  const owner = new Map<string, ProcessId>();
  for (const [id, value] of Object.entries(json)) {
    if (!isProcessId(id)) throw invalid(`${quoted(id)} is not a process id (lower-case letters, digits, '-')`);
    const key = decodeKey(value, PUBLIC_KEY_BYTES);
    if (key === null) throw invalid(`the key of ${id} must be ${PUBLIC_KEY_BYTES} bytes in base64`);
    const other = owner.get(value as string);
    if (other !== undefined) throw invalid(`${other} and ${id} have the same public key`);
    owner.set(value as string, id);
    out.set(id, key);
  }
  if (out.size === 0) throw invalid('it lists no keys');
  return out;
}
