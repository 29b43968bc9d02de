// Link keys over node:crypto (src/io/link-auth-node.ts, docs/PROTOCOL.md §2.4): both ends of a
// link derive the same HMAC key, one per direction, bound to the cluster; the Ed25519 → X25519
// conversion agrees with node:crypto, with tweetnacl (the oracle, DESIGN.md §6) and with
// libsodium's published vector; an unknown peer or a peer whose key is no usable point has no
// link key (frames with it stay signed) rather than an exception; check() never throws.
import { createHmac, createPublicKey, randomBytes } from 'node:crypto';
import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import { MAC_BYTES } from '../../../src/core/constants.ts';
import type { LinkAuth } from '../../../src/core/ports.ts';
import { linkAuthContract } from './link-auth-contract.ts';
import { publicKeyFromSeed } from '../../../src/io/keys.ts';
import {
  createNodeLinkAuth, directionKey, x25519PrivateKey, x25519PublicFromEd25519, x25519PublicKey, x25519SecretFromEd25519Seed,
} from '../../../src/io/link-auth-node.ts';

const CLUSTER = '00112233445566778899aabbccddeeff';
const P = (1n << 255n) - 19n;
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const fromHex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));
/** A field element as 32 little-endian bytes. */
const le = (n: bigint): Uint8Array => {
  const out = new Uint8Array(32);
  let v = n;
  for (let i = 0; i < 32; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
};
const modPow = (b: bigint, e: bigint): bigint => {
  let r = 1n;
  let x = ((b % P) + P) % P;
  for (let k = e; k > 0n; k >>= 1n) {
    if (k & 1n) r = (r * x) % P;
    x = (x * x) % P;
  }
  return r;
};
const inv = (x: bigint): bigint => modPow(x, P - 2n);

type Proc = { id: string; seed: Uint8Array; publicKey: Uint8Array };
const proc = (id: string, seed: Uint8Array = new Uint8Array(randomBytes(32))): Proc => ({ id, seed, publicKey: publicKeyFromSeed(seed) });
const table = (...ps: Proc[]): Map<string, Uint8Array> => new Map(ps.map((p) => [p.id, p.publicKey] as const));
/** The link keys of `me` with every process of `peers` (itself included, as a cluster's table is). */
const linkOf = (me: Proc, peers: Proc[], cluster = CLUSTER): LinkAuth => createNodeLinkAuth(me.id, me.seed, table(me, ...peers), cluster);

linkAuthContract('node:crypto link keys (X25519, HKDF-SHA256, HMAC-SHA256)', () => {
  const procs = ['r1', 'r2', 'a1'].map((id) => proc(id));
  const cluster = (c: string) => ({ linkAuthFor: (id: string) => {
    const me = procs.find((p) => p.id === id);
    if (me === undefined) throw new Error(`no process ${id}`);
    return linkOf(me, procs, c);
  } });
  return { ...cluster(CLUSTER), otherCluster: () => cluster('ffeeddccbbaa99887766554433221100') };
});

const messages = [new Uint8Array(0), Uint8Array.of(7), new Uint8Array(randomBytes(1000)), new Uint8Array(70_000).fill(0xa5)];

describe('createNodeLinkAuth: the two ends of a link', () => {
  it('derive the same key: what a tags for b checks at b, in both directions, for random key pairs', () => {
    for (let k = 0; k < 12; k++) {
      const a = proc('a1');
      const b = proc('r1');
      const la = linkOf(a, [b]);
      const lb = linkOf(b, [a]);
      expect(la.id).toBe('a1');
      expect(la.has('r1') && lb.has('a1')).toBe(true);
      for (const m of messages) {
        const ab = la.tag('r1', m);
        const ba = lb.tag('a1', m);
        expect(ab).toBeInstanceOf(Uint8Array);
        expect(ab).toHaveLength(MAC_BYTES);
        expect(ba).toHaveLength(MAC_BYTES);
        expect(lb.check('a1', m, ab as Uint8Array)).toBe(true);
        expect(la.check('r1', m, ba as Uint8Array)).toBe(true);
        // deterministic
        expect(hex(la.tag('r1', m) as Uint8Array)).toBe(hex(ab as Uint8Array));
      }
    }
  });

  it('are independent of the other entries of the key table and of its form (Map or Record)', () => {
    const a = proc('a1');
    const b = proc('r1');
    const m = messages[2] as Uint8Array;
    const small = linkOf(a, [b]).tag('r1', m) as Uint8Array;
    const big = linkOf(a, [proc('r2'), b, proc('scc')]).tag('r1', m) as Uint8Array;
    const record = createNodeLinkAuth('a1', a.seed, { a1: a.publicKey, r1: b.publicKey }, CLUSTER).tag('r1', m) as Uint8Array;
    expect(hex(big)).toBe(hex(small));
    expect(hex(record)).toBe(hex(small));
  });

  it('keep the directions apart: a → b tag does not check as b → a, nor at a third process', () => {
    const a = proc('a1');
    const b = proc('r1');
    const c = proc('r2');
    const la = linkOf(a, [b, c]);
    const lb = linkOf(b, [a, c]);
    const lc = linkOf(c, [a, b]);
    for (const m of messages) {
      const ab = la.tag('r1', m) as Uint8Array;
      const ba = lb.tag('a1', m) as Uint8Array;
      expect(hex(ab)).not.toBe(hex(ba));
      // a's own tag reflected back to a as if b had sent it
      expect(la.check('r1', m, ab)).toBe(false);
      // b's tag for a, shown to b as if a had sent it
      expect(lb.check('a1', m, ba)).toBe(false);
      // a → b shown to c as from a, and a → c shown to b
      expect(lc.check('a1', m, ab)).toBe(false);
      expect(lb.check('a1', m, la.tag('r2', m) as Uint8Array)).toBe(false);
      expect(hex(la.tag('r2', m) as Uint8Array)).not.toBe(hex(ab));
    }
    // a tag covers every byte
    const m = messages[2] as Uint8Array;
    const ab = la.tag('r1', m) as Uint8Array;
    for (const at of [0, 500, 999]) {
      const changed = Uint8Array.from(m);
      changed[at] = (changed[at] as number) ^ 1;
      expect(lb.check('a1', changed, ab)).toBe(false);
    }
    for (const at of [0, 16, 31]) {
      const t = Uint8Array.from(ab);
      t[at] = (t[at] as number) ^ 0x80;
      expect(lb.check('a1', m, t)).toBe(false);
    }
  });

  it('keep clusters apart: the same keys in another cluster give other tags that do not check', () => {
    const a = proc('a1');
    const b = proc('r1');
    const m = messages[1] as Uint8Array;
    const here = linkOf(a, [b]).tag('r1', m) as Uint8Array;
    const there = linkOf(a, [b], 'ffeeddccbbaa99887766554433221100').tag('r1', m) as Uint8Array;
    expect(hex(there)).not.toBe(hex(here));
    expect(linkOf(b, [a], 'ffeeddccbbaa99887766554433221100').check('a1', m, here)).toBe(false);
    expect(linkOf(b, [a]).check('a1', m, there)).toBe(false);
    expect(linkOf(b, [a]).check('a1', m, here)).toBe(true);
  });

  it('bind the ids: the same key pair under other names gives other keys', () => {
    const a = proc('a1');
    const b = proc('r1');
    const m = messages[1] as Uint8Array;
    const renamed = createNodeLinkAuth('a2', a.seed, new Map([['a2', a.publicKey], ['r1', b.publicKey]]), CLUSTER);
    const t = renamed.tag('r1', m) as Uint8Array;
    expect(hex(t)).not.toBe(hex(linkOf(a, [b]).tag('r1', m) as Uint8Array));
    expect(linkOf(b, [a]).check('a1', m, t)).toBe(false);
  });

  it('compute tags an independent implementation agrees with: tweetnacl X25519, HKDF-SHA256, HMAC-SHA256', () => {
    for (let k = 0; k < 5; k++) {
      const a = proc('a1');
      const b = proc('r1');
      const u = x25519PublicFromEd25519(b.publicKey) as Uint8Array;
      const shared = nacl.scalarMult(x25519SecretFromEd25519Seed(a.seed), u);
      const m = messages[2] as Uint8Array;
      const expected = createHmac('sha256', directionKey(shared, CLUSTER, 'a1', 'r1')).update(m).digest();
      expect(hex(linkOf(a, [b]).tag('r1', m) as Uint8Array)).toBe(hex(expected));
      expect(directionKey(shared, CLUSTER, 'a1', 'r1')).toHaveLength(32);
      expect(hex(directionKey(shared, CLUSTER, 'a1', 'r1'))).not.toBe(hex(directionKey(shared, CLUSTER, 'r1', 'a1')));
    }
  });
});

describe('Ed25519 → X25519 conversion', () => {
  it("agrees with node:crypto's X25519 public key of the converted scalar and with tweetnacl, for 24 random seeds", () => {
    for (let k = 0; k < 24; k++) {
      const seed = new Uint8Array(randomBytes(32));
      const scalar = x25519SecretFromEd25519Seed(seed);
      const viaEdwards = x25519PublicFromEd25519(publicKeyFromSeed(seed));
      expect(viaEdwards).not.toBeNull();
      const viaNode = new Uint8Array(createPublicKey(x25519PrivateKey(scalar)).export({ format: 'der', type: 'spki' }).subarray(12));
      const viaNacl = nacl.scalarMult.base(scalar);
      expect(hex(viaEdwards as Uint8Array), hex(seed)).toBe(hex(viaNode));
      expect(hex(viaNacl)).toBe(hex(viaNode));
      // the scalar is the clamped first half of SHA-512(seed) (RFC 8032 §5.1.5)
      const h = nacl.hash(seed).slice(0, 32);
      h[0] = (h[0] as number) & 248;
      h[31] = ((h[31] as number) & 127) | 64;
      expect(hex(scalar)).toBe(hex(h));
      // the SPKI wrapper round-trips the u-coordinate
      expect(hex(new Uint8Array(x25519PublicKey(viaNode).export({ format: 'der', type: 'spki' }).subarray(12)))).toBe(hex(viaNode));
    }
  });

  it("matches libsodium's crypto_sign_ed25519_{pk,sk}_to_curve25519 vector (test/default/ed25519_convert)", () => {
    const seed = fromHex('421151a459faeade3d247115f94aedae42318124095afabe4d1451a559faedee');
    expect(hex(publicKeyFromSeed(seed))).toBe('b5076a8474a832daee4dd5b4040983b6623b5f344aca57d4d6ee4baf3f259e6e');
    expect(hex(x25519PublicFromEd25519(publicKeyFromSeed(seed)) as Uint8Array)).toBe('f1814f0e8ff1043d8a44d25babff3cedcae6c22c3edaa48f857ae70de2baae50');
    expect(hex(x25519SecretFromEd25519Seed(seed))).toBe('8052030376d47112be7f73ed7a019293dd12ad910b654455798b4667d73de166');
  });

  it('maps no point for y = 1 or y ≥ p, and nothing for input of the wrong size or type', () => {
    for (const y of [1n, P, P + 1n, (1n << 255n) - 1n]) expect(x25519PublicFromEd25519(le(y)), `y = ${y}`).toBeNull();
    const withSign = le(1n);
    withSign[31] = 0x80;
    expect(x25519PublicFromEd25519(withSign)).toBeNull();
    expect(x25519PublicFromEd25519(new Uint8Array(31))).toBeNull();
    expect(x25519PublicFromEd25519(new Uint8Array(33))).toBeNull();
    expect(x25519PublicFromEd25519('x'.repeat(32) as unknown as Uint8Array)).toBeNull();
    // u = (1 + y)/(1 − y) is always reduced below p
    const u = x25519PublicFromEd25519(le(P - 2n)) as Uint8Array;
    expect((u[31] as number) & 0x80).toBe(0);
  });
});

describe('peers without a link key', () => {
  const a = proc('a1');
  const b = proc('r1');
  const m = Uint8Array.of(1, 2, 3);

  it('an unknown peer: has() false, tag() null, check() false', () => {
    const la = linkOf(a, [b]);
    for (const peer of ['r9', '', 'constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(la.has(peer), peer).toBe(false);
      expect(la.tag(peer, m), peer).toBeNull();
      expect(la.check(peer, m, new Uint8Array(MAC_BYTES)), peer).toBe(false);
    }
    // the same through a Record key table: no prototype member is taken for a key
    const rec = createNodeLinkAuth('a1', a.seed, { a1: a.publicKey, r1: b.publicKey }, CLUSTER);
    for (const peer of ['constructor', '__proto__', 'toString']) {
      expect(rec.has(peer), peer).toBe(false);
      expect(rec.tag(peer, m), peer).toBeNull();
    }
    expect(rec.has('r1')).toBe(true);
  });

  it('check() returns false, never throws, on a tag of the wrong length or type, or data that is not bytes', () => {
    const la = linkOf(a, [b]);
    const lb = linkOf(b, [a]);
    const good = la.tag('r1', m) as Uint8Array;
    const empty = new Uint8Array(0);
    // the empty message has a tag of its own
    expect(lb.check('a1', empty, la.tag('r1', empty) as Uint8Array)).toBe(true);
    expect(lb.check('a1', empty, good)).toBe(false);
    const badTags: unknown[] = [
      new Uint8Array(0), good.subarray(0, 31), Uint8Array.from([...good, 0]), new Uint8Array(64), Buffer.from(good).toString('hex'),
      Buffer.from(good).toString('latin1'), [...good], null, undefined, 42, {}, new Uint16Array(16), good.buffer,
    ];
    for (const t of badTags) {
      for (const data of [m, empty]) {
        let r: unknown;
        expect(() => {
          r = lb.check('a1', data, t as Uint8Array);
        }, String(t)).not.toThrow();
        expect(r, String(t)).toBe(false);
      }
    }
    for (const data of [null, undefined, 'abc', [1, 2, 3], 7, {}]) {
      let r: unknown;
      expect(() => {
        r = lb.check('a1', data as unknown as Uint8Array, good);
      }).not.toThrow();
      expect(r).toBe(false);
    }
    // a Buffer is bytes: the genuine tag as a Buffer, over a Buffer, checks
    expect(lb.check('a1', Buffer.from(m), Buffer.from(good))).toBe(true);
  });

  it('a peer whose public key is a low-order or invalid point has no link key (has() false), never an exception', () => {
    // Edwards y of the order-8 points, from their Montgomery u (y = (u − 1)/(u + 1))
    const order8u = [
      325606250916557431795983626356110631294008115727848805560023387167927233504n,
      39382357235489614581723060781553021112529911719440698176882885853963445705823n,
    ];
    const yOf = (u: bigint): bigint => ((u - 1n + P) * inv(u + 1n)) % P;
    const bad: Array<[string, Uint8Array]> = [
      ['y = 1 (the neutral point, no u)', le(1n)],
      ['all zero (y = 0, u = 1, order 4)', new Uint8Array(32)],
      ['y = −1 (u = 0, order 2)', le(P - 1n)],
      ['y = p', le(P)],
      ['y = 2^255 − 1', le((1n << 255n) - 1n)],
      ...order8u.map((u): [string, Uint8Array] => [`an order-8 point (u = ${String(u).slice(0, 8)}…)`, le(yOf(u))]),
      ['31 bytes', new Uint8Array(31).fill(9)],
      ['not bytes', 'k'.repeat(32) as unknown as Uint8Array],
    ];
    const good = proc('r1');
    for (const [name, key] of bad) {
      let la: LinkAuth | undefined;
      expect(() => {
        la = createNodeLinkAuth('a1', a.seed, new Map([['a1', a.publicKey], ['r1', good.publicKey], ['x', key]]), CLUSTER);
      }, name).not.toThrow();
      const l = la as LinkAuth;
      expect(() => l.has('x'), name).not.toThrow();
      expect(l.has('x'), name).toBe(false);
      expect(l.tag('x', m), name).toBeNull();
      expect(l.check('x', m, new Uint8Array(MAC_BYTES)), name).toBe(false);
      // asked again (the verdict is kept), and the healthy peer is unaffected
      expect(l.has('x'), name).toBe(false);
      expect(l.has('r1')).toBe(true);
      expect(linkOf(good, [a]).check('a1', m, l.tag('r1', m) as Uint8Array)).toBe(true);
    }
    // the order-8 ys really are what the test says: they map to the low-order u values
    for (const u of order8u) expect(hex(x25519PublicFromEd25519(le(yOf(u))) as Uint8Array)).toBe(hex(le(u)));
  });
});
