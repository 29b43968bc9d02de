// The node:crypto and tweetnacl signers: the shared contract, byte-for-byte interoperability
// (DESIGN.md §6: tweetnacl is the oracle), and the key files of src/io/keys.ts.
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, describe, expect, it } from 'vitest';
import type { Signer } from '../../../src/core/ports.ts';
import {
  generateKeyPair, KeyFileError, publicKeyFromSeed, readKeyFile, readPublicKeys, writeKeyFile, writePublicKeys,
} from '../../../src/io/keys.ts';
import { createNaclSigner, createNaclVerifier } from '../../../src/io/signer-nacl.ts';
import { createNodeSigner, createNodeVerifier } from '../../../src/io/signer-node.ts';
import { signerContract } from './signer-contract.ts';

/** A fixed seed per id, so a failure replays with the same keys. */
const seedOf = (id: string): Uint8Array => new Uint8Array(createHash('sha256').update(`trine-test-seed:${id}`).digest());
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const fromHex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));

signerContract('node:crypto', (ids) => {
  const signers = new Map(ids.map((id) => [id, createNodeSigner(id, seedOf(id))] as const));
  const verifier = createNodeVerifier(new Map(ids.map((id) => [id, publicKeyFromSeed(seedOf(id))] as const)));
  return { signers, verifier };
});

signerContract('tweetnacl', (ids) => {
  const signers = new Map(ids.map((id) => [id, createNaclSigner(id, seedOf(id))] as const));
  const table: Record<string, Uint8Array> = {};
  for (const id of ids) table[id] = nacl.sign.keyPair.fromSeed(seedOf(id)).publicKey;
  return { signers, verifier: createNaclVerifier(table) };
});

describe('node:crypto ↔ tweetnacl interoperability', () => {
  const seeds = [
    new Uint8Array(32),
    new Uint8Array(32).fill(0xff),
    Uint8Array.from({ length: 32 }, (_, i) => i),
    seedOf('r1'),
    seedOf('a17'),
    generateKeyPair().seed,
  ];
  const messages = [
    new Uint8Array(0),
    Uint8Array.of(0x72),
    new Uint8Array(200).fill(0xab),
    new Uint8Array(createHash('sha512').update('x').digest()),
    Uint8Array.from({ length: 70_000 }, (_, i) => (i * 7919) & 0xff),
  ];

  it('derives the same public key from a seed', () => {
    for (const seed of seeds) expect(hex(publicKeyFromSeed(seed))).toBe(hex(nacl.sign.keyPair.fromSeed(seed).publicKey));
  });

  it('produces byte-identical signatures, and each verifier accepts the other signer', () => {
    for (const [n, seed] of seeds.entries()) {
      const id = `p${n}`;
      const table = { [id]: publicKeyFromSeed(seed) };
      const node = createNodeSigner(id, seed);
      const tweet = createNaclSigner(id, seed);
      const nodeVerifier = createNodeVerifier(table);
      const naclVerifier = createNaclVerifier(table);
      for (const m of messages) {
        const a = node.sign(m);
        const b = tweet.sign(m);
        expect(hex(a)).toBe(hex(b));
        expect(nodeVerifier.verify(id, m, b)).toBe(true);
        expect(naclVerifier.verify(id, m, a)).toBe(true);
      }
    }
  });

  it('matches RFC 8032 §7.1 test vectors 1 and 2', () => {
    const vectors = [
      {
        seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
        pub: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
        msg: '',
        sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
      },
      {
        seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
        pub: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
        msg: '72',
        sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
      },
    ];
    for (const v of vectors) {
      expect(hex(publicKeyFromSeed(fromHex(v.seed)))).toBe(v.pub);
      expect(hex(createNodeSigner('x', fromHex(v.seed)).sign(fromHex(v.msg)))).toBe(v.sig);
      expect(hex(createNaclSigner('x', fromHex(v.seed)).sign(fromHex(v.msg)))).toBe(v.sig);
    }
  });

  it('both reject a malleated signature (S + L), so replicas with different signers agree', () => {
    const L = fromHex('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010');
    const seed = seedOf('r2');
    const table = { r2: publicKeyFromSeed(seed) };
    const m = new Uint8Array(200).fill(3);
    const sig = createNodeSigner('r2', seed).sign(m);
    const malleated = Uint8Array.from(sig);
    let carry = 0;
    for (let i = 0; i < 32; i++) {
      const s = (sig[32 + i] as number) + (L[i] as number) + carry;
      malleated[32 + i] = s & 0xff;
      carry = s >> 8;
    }
    expect(carry).toBe(0); // S + L still fits in 32 bytes: the attack is possible on this signature
    // Bare tweetnacl accepts it: this is why the wrapper checks S < L.
    expect(nacl.sign.detached.verify(m, malleated, table.r2)).toBe(true);
    expect(createNodeVerifier(table).verify('r2', m, malleated)).toBe(false);
    expect(createNaclVerifier(table).verify('r2', m, malleated)).toBe(false);
  });

  it('agree on random signatures (all rejected)', () => {
    const table = { r1: publicKeyFromSeed(seedOf('r1')) };
    const nodeVerifier = createNodeVerifier(table);
    const naclVerifier = createNaclVerifier(table);
    const m = new Uint8Array(32).fill(9);
    for (let i = 0; i < 20; i++) {
      const sig = new Uint8Array(createHash('sha512').update(`sig${i}`).digest());
      if (i % 2 === 0) sig[63] = (sig[63] as number) & 0x0f; // half of them with a canonical S
      expect(nodeVerifier.verify('r1', m, sig)).toBe(false);
      expect(naclVerifier.verify('r1', m, sig)).toBe(false);
    }
  });

  it('refuses keys of the wrong size at construction (our configuration, not peer input)', () => {
    expect(() => createNodeSigner('r1', new Uint8Array(31))).toThrow(/32 bytes/);
    expect(() => createNaclSigner('r1', new Uint8Array(64))).toThrow(/32 bytes/);
    expect(() => createNodeVerifier({ r1: new Uint8Array(33) })).toThrow(/32 bytes/);
    expect(() => createNaclVerifier({ r1: new Uint8Array(0) })).toThrow(/32 bytes/);
  });
});

describe('key generation', () => {
  it('makes a 32-byte seed and the public key that belongs to it', () => {
    const pair = generateKeyPair();
    expect(pair.seed.length).toBe(32);
    expect(pair.publicKey.length).toBe(32);
    expect(hex(publicKeyFromSeed(pair.seed))).toBe(hex(pair.publicKey));
    const signer: Signer = createNodeSigner('r1', pair.seed);
    const m = Uint8Array.of(1, 2, 3);
    expect(createNaclVerifier({ r1: pair.publicKey }).verify('r1', m, signer.sign(m))).toBe(true);
  });

  it('makes a different pair each time', () => {
    const seen = new Set(Array.from({ length: 8 }, () => hex(generateKeyPair().seed)));
    expect(seen.size).toBe(8);
  });
});

describe('key files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'trine-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;
  const fresh = (): string => join(dir, `k${n++}.json`);

  const expectKeyFileError = (f: () => unknown, code: string, message: RegExp): void => {
    let caught: unknown;
    try {
      f();
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(KeyFileError);
    expect((caught as KeyFileError).code).toBe(code);
    expect((caught as KeyFileError).message).toMatch(message);
  };

  it('round-trips a key file, and the keys it holds sign and verify', () => {
    const path = fresh();
    const pair = generateKeyPair();
    writeKeyFile(path, 'a3', pair);
    const back = readKeyFile(path);
    expect(back.id).toBe('a3');
    expect(hex(back.seed)).toBe(hex(pair.seed));
    expect(hex(back.publicKey)).toBe(hex(pair.publicKey));
    const json = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    expect(Object.keys(json).sort()).toEqual(['id', 'publicKey', 'seed']);
    expect(json.seed).toBe(Buffer.from(pair.seed).toString('base64'));
    const m = Uint8Array.of(42);
    expect(createNodeVerifier({ a3: back.publicKey }).verify('a3', m, createNodeSigner(back.id, back.seed).sign(m))).toBe(true);
  });

  it('writes the key file with mode 0600, even over a world-readable file', () => {
    const path = fresh();
    writeKeyFile(path, 'r1', generateKeyPair());
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const other = fresh();
    writeFileSync(other, 'old', { mode: 0o644 });
    chmodSync(other, 0o644);
    writeKeyFile(other, 'r2', generateKeyPair());
    expect(statSync(other).mode & 0o777).toBe(0o600);
    expect(readKeyFile(other).id).toBe('r2');
  });

  it('reports a missing key file as KEY_FILE_MISSING and says to run trine keygen', () => {
    expectKeyFileError(() => readKeyFile(join(dir, 'absent.json')), 'KEY_FILE_MISSING', /trine keygen/);
    expectKeyFileError(() => readPublicKeys(join(dir, 'absent', 'keys.json')), 'KEY_FILE_MISSING', /trine keygen/);
  });

  it('reports a corrupt key file as KEY_FILE_INVALID, naming the file', () => {
    const pair = generateKeyPair();
    const good = { id: 'r1', publicKey: Buffer.from(pair.publicKey).toString('base64'), seed: Buffer.from(pair.seed).toString('base64') };
    const cases: Array<[string, RegExp]> = [
      ['', /not valid JSON/],
      ['{"id": "r1", ', /not valid JSON/],
      ['[]', /JSON object/],
      ['null', /JSON object/],
      [JSON.stringify({ ...good, id: 'R1' }), /"id"/],
      [JSON.stringify({ ...good, id: 7 }), /"id"/],
      [JSON.stringify({ publicKey: good.publicKey, seed: good.seed }), /"id"/],
      [JSON.stringify({ ...good, seed: good.seed.slice(0, -4) }), /"seed"/],
      [JSON.stringify({ ...good, seed: `${good.seed.slice(0, 10)}!${good.seed.slice(11)}` }), /"seed"/],
      [JSON.stringify({ ...good, seed: Buffer.from(new Uint8Array(64)).toString('base64') }), /"seed"/],
      [JSON.stringify({ ...good, publicKey: 12 }), /"publicKey"/],
    ];
    for (const [text, message] of cases) {
      const path = fresh();
      writeFileSync(path, text);
      expectKeyFileError(() => readKeyFile(path), 'KEY_FILE_INVALID', message);
      expectKeyFileError(() => readKeyFile(path), 'KEY_FILE_INVALID', new RegExp(path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    }
  });

  it('rejects a key file whose public key does not belong to its seed', () => {
    const path = fresh();
    const a = generateKeyPair();
    const b = generateKeyPair();
    writeKeyFile(path, 'r1', { seed: a.seed, publicKey: b.publicKey });
    expectKeyFileError(() => readKeyFile(path), 'KEY_FILE_INVALID', /does not belong/);
  });

  it('refuses to write a bad id or key sizes', () => {
    expect(() => writeKeyFile(fresh(), 'Bad Id', generateKeyPair())).toThrow(/process id/);
    expect(() => writeKeyFile(fresh(), 'r1', { seed: new Uint8Array(31), publicKey: new Uint8Array(32) })).toThrow(/32-byte/);
  });

  it('round-trips the cluster public-key table into a verifier', () => {
    const path = fresh();
    const pairs = new Map(['r1', 'r2', 'r3', 'a1', 'scc'].map((id) => [id, generateKeyPair()] as const));
    const table: Record<string, Uint8Array> = {};
    for (const [id, p] of pairs) table[id] = p.publicKey;
    writePublicKeys(path, table);
    const back = readPublicKeys(path);
    expect([...back.keys()].sort()).toEqual(['a1', 'r1', 'r2', 'r3', 'scc']);
    for (const [id, p] of pairs) expect(hex(back.get(id) ?? new Uint8Array())).toBe(hex(p.publicKey));
    const verifier = createNodeVerifier(back);
    const m = Uint8Array.of(5);
    for (const [id, p] of pairs) expect(verifier.verify(id, m, createNodeSigner(id, p.seed).sign(m))).toBe(true);
    // equal tables, equal files, whatever the insertion order
    const reversed = fresh();
    writePublicKeys(reversed, new Map([...Object.entries(table)].reverse()));
    expect(readFileSync(reversed, 'utf8')).toBe(readFileSync(path, 'utf8'));
  });

  it('reports a corrupt public-key table as KEY_FILE_INVALID', () => {
    const k1 = Buffer.from(generateKeyPair().publicKey).toString('base64');
    const k2 = Buffer.from(generateKeyPair().publicKey).toString('base64');
    const cases: Array<[string, RegExp]> = [
      ['not json', /not valid JSON/],
      ['["r1"]', /JSON object/],
      ['{}', /no keys/],
      [JSON.stringify({ r1: k1, r2: 'AAAA' }), /key of r2/],
      [JSON.stringify({ r1: k1, __proto__x: k2 }), /not a process id/],
      ['{"__proto__": "' + k2 + '"}', /not a process id/],
      [JSON.stringify({ r1: k1, r2: k1 }), /same public key/],
      [JSON.stringify({ r1: k1, r2: null }), /key of r2/],
    ];
    for (const [text, message] of cases) {
      const path = fresh();
      writeFileSync(path, text);
      expectKeyFileError(() => readPublicKeys(path), 'KEY_FILE_INVALID', message);
    }
    const valid = fresh();
    writeFileSync(valid, JSON.stringify({ r1: k1, r2: k2 }));
    expect(readPublicKeys(valid).size).toBe(2);
  });
});
