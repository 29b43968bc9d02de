// The frame codec of src/core/wire/frame.ts (docs/PROTOCOL.md §2): round trips of every item
// type under real Ed25519 signatures; every drop code the decoder can return, in the order of
// §2.2, including forged or misrouted CGs inside otherwise valid frames; and the protections of
// the header-first layout: an unauthenticated body is never parsed (msgpack bombs), a signed
// body must be the canonical encoding and valid UTF-8, one frame carries at most 64 signed
// requests, and peekSender reads only the header. MAC'd frames (version 2, §2.4): round trips
// under real link keys, when a frame stays signed, every MAC drop code, reflection and
// redirection, and the same never-parse guarantee under a wrong tag.
import { describe, expect, it, vi } from 'vitest';
import {
  MAC_BYTES, MAX_FRAME_BYTES, MAX_ID_CHARS, MAX_ITEMS_PER_FRAME, MAX_SIGNED_ITEMS_PER_FRAME, MIN_FRAME_BYTES, MIN_MAC_FRAME_BYTES,
  SIGNATURE_BYTES, WIRE_VERSION, WIRE_VERSION_MAC,
} from '../../../../src/core/constants.ts';
import type { LinkAuth, Signer, Verifier } from '../../../../src/core/ports.ts';
import type { Result } from '../../../../src/base/result.ts';
import { crc32 } from '../../../../src/core/wire/crc32.ts';
import { decodeFrame, encodeFrame, openCG, pack, peekSender, signCG } from '../../../../src/core/wire/frame.ts';
import {
  frameBody, groupMsgCG, needsFrameSignature, type AgentRequest, type Frame, type GroupInput, type Item, type ItemWire, type SignedCG,
} from '../../../../src/core/wire/messages.ts';
import { publicKeyFromSeed } from '../../../../src/io/keys.ts';
import { createNodeVerifier } from '../../../../src/io/signer-node.ts';
import {
  agentRequests, assemble, canonicalChoice, cgOf, CLUSTER, encodeLoose, headerOf, IDS, itemsFrom, linkAuthOf, mp, sealBody,
  sealMacBody, seedOf, signedCGOf, signerOf, splitFrame, tagOf, toWire, verifier,
} from './wire-samples.ts';

// Count the strict decoder's calls (behaviour unchanged) to prove what was never parsed.
const strictCalls = vi.hoisted(() => ({ n: 0 }));
vi.mock('../../../../src/core/wire/msgpack-strict.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../../../src/core/wire/msgpack-strict.ts')>();
  return {
    ...real,
    decodeStrict: (data: Uint8Array) => {
      strictCalls.n++;
      return real.decodeStrict(data);
    },
  };
});

const ctxFor = (self: string, v: Verifier = verifier) => ({ cluster: CLUSTER, self, verifier: v });
/** A decoder with link keys, as every process has since PROTOCOL §2.4. */
const macCtx = (self: string, v: Verifier = verifier, link: LinkAuth = linkAuthOf(self)) => ({ ...ctxFor(self, v), linkAuth: link });
const enc = (from: string, to: string, items: Item[], cluster = CLUSTER): Uint8Array =>
  encodeFrame({ from, to, items }, { cluster, signer: signerOf(from) });
/** encodeFrame with the sender's link keys: MAC'd when the link and the items allow it. */
const encMac = (from: string, to: string, items: Item[], link: LinkAuth = linkAuthOf(from)): Uint8Array =>
  encodeFrame({ from, to, items }, { cluster: CLUSTER, signer: signerOf(from), linkAuth: link });
const codeOf = (r: Result<unknown>): string => (r.ok ? 'ok' : r.code);
const detailOf = (r: Result<unknown>): string => (r.ok ? '' : r.detail);
const frameOf = (r: Result<Frame>): Frame => {
  if (!r.ok) throw new Error(`expected a frame, got ${r.code}: ${r.detail}`);
  return r.value;
};
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const flip = (data: Uint8Array, at: number, mask = 0x01): Uint8Array => {
  const out = Uint8Array.from(data);
  out[at] = (out[at] as number) ^ mask;
  return out;
};

/** A frame around a msgpack tree, signed by `signer` (header sender: the signer's id). */
const sealTree = (tree: unknown, signer: Signer): Uint8Array => sealBody(pack(tree), signer);
const bodyTree = (to: string, items: ItemWire[], cluster = CLUSTER): unknown => frameBody.enc({ cluster, to, items });

/** A verifier that counts its work. */
function countingVerifier(): Verifier & { verifies: number; bytesVerified: number } {
  const v = {
    verifies: 0,
    bytesVerified: 0,
    has: (id: string) => verifier.has(id),
    verify: (id: string, data: Uint8Array, sig: Uint8Array) => {
      v.verifies++;
      v.bytesVerified += data.length;
      return verifier.verify(id, data, sig);
    },
  };
  return v;
}

/** Link keys that count their MAC checks. */
function countingLinkAuth(inner: LinkAuth): LinkAuth & { checks: number } {
  const l = {
    id: inner.id,
    checks: 0,
    has: (peer: string) => inner.has(peer),
    tag: (to: string, data: Uint8Array) => inner.tag(to, data),
    check: (from: string, data: Uint8Array, tag: Uint8Array) => {
      l.checks++;
      return inner.check(from, data, tag);
    },
  };
  return l;
}

/** Plain copies of byte arrays so deep equality compares bytes, not classes. */
function normal(v: unknown): unknown {
  if (v instanceof Uint8Array) return { bytes: hex(v) };
  if (Array.isArray(v)) return v.map(normal);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normal(x)]));
  return v;
}

/** Nodes of a tree in pre-order (arrays and leaves). */
function nodeCount(tree: unknown): number {
  return Array.isArray(tree) ? 1 + tree.reduce((n: number, t) => n + nodeCount(t), 0) : 1;
}

/** Replace the one occurrence of `placeholder` in `data` with `replacement` (same length). */
function substitute(data: Uint8Array, placeholder: string, replacement: Uint8Array): Uint8Array {
  const at = Buffer.from(data).indexOf(placeholder, 0, 'latin1');
  if (at < 0 || Buffer.from(data).indexOf(placeholder, at + 1, 'latin1') >= 0 || replacement.length !== placeholder.length) {
    throw new Error(`placeholder ${placeholder} not found exactly once`);
  }
  const out = Uint8Array.from(data);
  out.set(replacement, at);
  return out;
}

const wrapWire = (cgBytes: Uint8Array, cgSig: Uint8Array, seq = 1): ItemWire =>
  ({ type: 'ptp', srcInc: 1, destInc: 1, seq, ackSeq: 0, body: { type: 'wrapper', rsn: 1, cgBytes, cgSig } });
const grpWire = (bytes: Uint8Array, sig: Uint8Array, seq = 1): ItemWire =>
  ({ type: 'grp', srcInc: 1, destInc: 1, seq, body: { type: 'cg', bytes, sig } });
const wrapItem = (signed: SignedCG, seq = 1): Item => ({ type: 'ptp', srcInc: 1, destInc: 1, seq, ackSeq: 0, body: { type: 'wrapper', rsn: 2, signed } });
const grpItem = (signed: SignedCG, seq = 1): Item => ({ type: 'grp', srcInc: 1, destInc: 1, seq, body: { type: 'cg', signed } });
const inputItem = (input: GroupInput, seq = 1): Item => ({ type: 'ptp', srcInc: 1, destInc: 1, seq, ackSeq: 0, body: { type: 'wrapper.input', rsn: 3, input } });

describe('frame round trips', () => {
  it('carries every item type from an agent to a replica', () => {
    const items = itemsFrom('a1');
    const frame = frameOf(decodeFrame(enc('a1', 'r1', items), ctxFor('r1')));
    expect(frame.from).toBe('a1');
    expect(frame.to).toBe('r1');
    expect(normal(frame.items)).toEqual(normal(items));
  });

  it('carries each item alone, from replicas, agents, the watchdog and an operator', () => {
    for (const from of ['r2', 'a2', 'scc', 'op']) {
      for (const item of itemsFrom(from)) {
        const frame = frameOf(decodeFrame(enc(from, 'r3', [item]), ctxFor('r3')));
        expect(normal(frame.items)).toEqual(normal([item]));
      }
    }
  });

  it('carries an empty frame and the largest item count', () => {
    expect(frameOf(decodeFrame(enc('r1', 'r2', []), ctxFor('r2'))).items).toEqual([]);
    const many: Item[] = Array.from({ length: MAX_ITEMS_PER_FRAME }, (_, i) => ({ type: 'probe', nonce: i }));
    expect(frameOf(decodeFrame(enc('r1', 'r2', many), ctxFor('r2'))).items).toHaveLength(MAX_ITEMS_PER_FRAME);
  });

  it('lays out header ‖ body ‖ crc32(header ‖ body) ‖ signature over header ‖ body', () => {
    const items: Item[] = [{ type: 'probe', nonce: 1 }];
    const data = enc('scc', 'r1', items);
    expect([...data.subarray(0, 5)]).toEqual([WIRE_VERSION, 3, ...Buffer.from('scc')]);
    const { header, body, signed, sig } = splitFrame(data);
    expect(hex(header)).toBe(hex(headerOf('scc')));
    // the body holds neither the version nor the sender: they travel in the header only
    expect(hex(body)).toBe(hex(pack([CLUSTER, 'r1', [[6, 1]]])));
    expect(new DataView(data.buffer).getUint32(signed.length, false)).toBe(crc32(signed));
    expect(sig).toHaveLength(SIGNATURE_BYTES);
    expect(verifier.verify('scc', signed, sig)).toBe(true);
    expect(verifier.verify('scc', body, sig)).toBe(false);
  });

  it('encodes equal frames to equal bytes (Ed25519 is deterministic)', () => {
    const items = itemsFrom('a2');
    expect(hex(enc('a2', 'r1', items))).toBe(hex(enc('a2', 'r1', itemsFrom('a2'))));
  });

  it('decodes a Buffer and a view at a non-zero offset into a larger buffer', () => {
    const data = enc('a1', 'r1', itemsFrom('a1'));
    expect(codeOf(decodeFrame(Buffer.from(data), ctxFor('r1')))).toBe('ok');
    const big = new Uint8Array(data.length + 13);
    big.set(data, 5);
    expect(normal(frameOf(decodeFrame(big.subarray(5, 5 + data.length), ctxFor('r1'))).items)).toEqual(normal(itemsFrom('a1')));
  });

  it('hands the core copies: reusing the receive buffer does not change a decoded frame', () => {
    const data = enc('a1', 'r1', itemsFrom('a1'));
    const frame = frameOf(decodeFrame(data, ctxFor('r1')));
    const before = normal(frame.items);
    data.fill(0);
    expect(normal(frame.items)).toEqual(before);
  });

  it('relays an agent CG wrapped by a replica, still verified with the agent key', () => {
    const signed = signedCGOf('a2', 9, agentRequests[2] as AgentRequest);
    const frame = frameOf(decodeFrame(enc('r1', 'r2', [wrapItem(signed)]), ctxFor('r2')));
    const item = frame.items[0];
    expect(item?.type === 'ptp' && item.body?.type === 'wrapper' ? item.body.signed.cg.client : null).toBe('a2');
    expect(openCG(signed.bytes, signed.sig, verifier).ok).toBe(true);
  });

  it("carries a CG's incarnation and a GC's destination incarnation (PROTOCOL §5.7)", () => {
    const signed = signCG(cgOf('a1', 2, { type: 'node.join', slots: 1, resync: false }, 1_700_000_000_123), signerOf('a1'));
    const frame = frameOf(decodeFrame(enc('a1', 'r1', [grpItem(signed)]), ctxFor('r1')));
    const item = frame.items[0];
    expect(item?.type === 'grp' && item.body.type === 'cg' ? item.body.signed.cg.inc : null).toBe(1_700_000_000_123);
    const gcFrame = frameOf(decodeFrame(enc('r1', 'a2', itemsFrom('r1').filter((i) => i.type === 'grp' && i.body.type === 'gc')), ctxFor('a2')));
    expect(gcFrame.items.map((i) => (i.type === 'grp' && i.body.type === 'gc' ? i.body.gc.destInc : null))).toEqual([1_700_000_000_000, 1_700_000_000_001]);
  });
});

describe('decodeFrame drop codes (PROTOCOL §2.2, in order)', () => {
  const good = (): Uint8Array => enc('a1', 'r1', [{ type: 'probe', nonce: 7 }]);

  it('WIRE_MALFORMED for something that is not bytes', () => {
    expect(codeOf(decodeFrame('frame' as unknown as Uint8Array, ctxFor('r1')))).toBe('WIRE_MALFORMED');
    expect(codeOf(decodeFrame(null as unknown as Uint8Array, ctxFor('r1')))).toBe('WIRE_MALFORMED');
  });

  it('WIRE_TOO_SHORT below the minimal frame of its version; a frame of exactly MIN_FRAME_BYTES (signed) or MIN_MAC_FRAME_BYTES (MAC\'d) gets through every check before the body', () => {
    const sized = (n: number, version: number): Uint8Array => {
      const out = new Uint8Array(n);
      if (n > 0) out[0] = version;
      return out;
    };
    // below the MAC'd minimum, whatever the version byte
    for (const n of [0, 1, 4 + MAC_BYTES, MIN_MAC_FRAME_BYTES - 1]) {
      for (const version of [0, WIRE_VERSION, WIRE_VERSION_MAC, 0xff]) {
        expect(codeOf(decodeFrame(sized(n, version), ctxFor('r1'))), `${n} bytes, version ${version}`).toBe('WIRE_TOO_SHORT');
      }
    }
    // from there to the signed minimum, only a signed frame is too short; the others reach the
    // version check (0) or the header (2: a zero-length sender id)
    for (const n of [MIN_MAC_FRAME_BYTES, 4 + SIGNATURE_BYTES, MIN_FRAME_BYTES - 1]) {
      expect(codeOf(decodeFrame(sized(n, WIRE_VERSION), ctxFor('r1'))), `${n} bytes`).toBe('WIRE_TOO_SHORT');
      expect(codeOf(decodeFrame(sized(n, 0), ctxFor('r1'))), `${n} bytes`).toBe('WIRE_VERSION');
      const r = decodeFrame(sized(n, WIRE_VERSION_MAC), macCtx('r1'));
      expect(`${codeOf(r)} ${detailOf(r)}`, `${n} bytes`).toMatch(/^WIRE_MALFORMED sender id/);
    }
    // version ‖ 1 ‖ 'q' ‖ a one-byte body ‖ crc ‖ signature: 72 bytes, from a known one-letter sender
    const q = signerOf('q');
    const withQ = createNodeVerifier(new Map([['q', publicKeyFromSeed(seedOf('q'))]]));
    const minimal = sealBody(mp.nil(), q);
    expect(minimal).toHaveLength(MIN_FRAME_BYTES);
    expect(codeOf(decodeFrame(minimal.subarray(0, MIN_FRAME_BYTES - 1), ctxFor('r1', withQ)))).toBe('WIRE_TOO_SHORT');
    const r = decodeFrame(minimal, ctxFor('r1', withQ));
    expect(codeOf(r)).toBe('WIRE_MALFORMED'); // nil is not a frame body: the body was reached
    expect(detailOf(r)).toMatch(/expected struct/);
    // version ‖ 1 ‖ 'q' ‖ a one-byte body ‖ crc ‖ tag: 40 bytes, q and r1 holding link keys for each other
    const minimalMac = sealMacBody(mp.nil(), 'q', 'r1', { link: linkAuthOf('q', ['q', 'r1']) });
    expect(minimalMac).toHaveLength(MIN_MAC_FRAME_BYTES);
    expect(minimalMac[0]).toBe(WIRE_VERSION_MAC);
    const qCtx = macCtx('r1', withQ, linkAuthOf('r1', [...IDS, 'q']));
    expect(codeOf(decodeFrame(minimalMac.subarray(0, MIN_MAC_FRAME_BYTES - 1), qCtx))).toBe('WIRE_TOO_SHORT');
    const rm = decodeFrame(minimalMac, qCtx);
    expect(codeOf(rm)).toBe('WIRE_MALFORMED'); // the tag checked, the body reached
    expect(detailOf(rm)).toMatch(/expected struct/);
  });

  it('WIRE_TOO_LARGE above MAX_FRAME_BYTES, checked before anything else', () => {
    const big = new Uint8Array(MAX_FRAME_BYTES + 1);
    big.set(headerOf('a1'));
    expect(codeOf(decodeFrame(big, ctxFor('r1')))).toBe('WIRE_TOO_LARGE');
    expect(codeOf(decodeFrame(new Uint8Array(MAX_FRAME_BYTES + 1), ctxFor('r1')))).toBe('WIRE_TOO_LARGE');
    expect(codeOf(decodeFrame(big.subarray(0, MAX_FRAME_BYTES), ctxFor('r1')))).toBe('WIRE_CHECKSUM');
  });

  it('WIRE_VERSION for another version byte, before the CRC and told apart from garbage', () => {
    const data = good();
    for (const version of [0, WIRE_VERSION_MAC + 1, 0x7f, 0xff]) {
      const other = Uint8Array.from(data);
      other[0] = version;
      expect(codeOf(decodeFrame(other, ctxFor('r1')))).toBe('WIRE_VERSION');
      // a newer peer's frame, correctly checksummed and signed by a known key
      expect(codeOf(decodeFrame(sealBody(splitFrame(data).body, signerOf('a1'), { version }), ctxFor('r1')))).toBe('WIRE_VERSION');
    }
    // the version byte is checked before the rest of the header and before the CRC
    const garbage = new Uint8Array(200).fill(0xee);
    garbage[0] = WIRE_VERSION_MAC + 1;
    expect(codeOf(decodeFrame(garbage, ctxFor('r1')))).toBe('WIRE_VERSION');
    // both known versions pass the version check: the same garbage is refused by the header
    for (const version of [WIRE_VERSION, WIRE_VERSION_MAC]) {
      garbage[0] = version;
      const r = decodeFrame(garbage, macCtx('r1'));
      expect(`${codeOf(r)} ${detailOf(r)}`).toMatch(/^WIRE_MALFORMED sender id/);
    }
    // a signed frame relabelled as MAC'd is read with the MAC'd layout: its CRC is not where it looks
    const relabelled = Uint8Array.from(data);
    relabelled[0] = WIRE_VERSION_MAC;
    expect(codeOf(decodeFrame(relabelled, macCtx('r1')))).toBe('WIRE_CHECKSUM');
  });

  it('WIRE_MALFORMED for a header whose sender id is empty, too long, overruns the frame or has bad characters', () => {
    const body = splitFrame(good()).body;
    const headers: Uint8Array[] = [
      Uint8Array.of(WIRE_VERSION, 0),
      Uint8Array.of(WIRE_VERSION, MAX_ID_CHARS + 1, ...Buffer.from('a'.repeat(MAX_ID_CHARS + 1))),
      Uint8Array.of(WIRE_VERSION, 0xff, ...Buffer.from('a'.repeat(0xff))),
      ...['A1', '1a', '-a', 'a_1', 'a 1', 'a1\n', 'r\u00e9'].map((id) => Uint8Array.from([WIRE_VERSION, Buffer.byteLength(id, 'latin1'), ...Buffer.from(id, 'latin1')])),
    ];
    for (const header of headers) {
      // checksummed and "signed", so only the header check can refuse them
      const signed = Buffer.concat([header, body]);
      const r = decodeFrame(assemble(signed, signerOf('a1').sign(signed)), ctxFor('r1'));
      expect(codeOf(r), hex(header.subarray(0, 8))).toBe('WIRE_MALFORMED');
      expect(detailOf(r)).toMatch(/sender id/);
    }
    // an id length that runs into (or past) the CRC and signature, with nothing left for a body
    const short = new Uint8Array(MIN_FRAME_BYTES);
    short.set([WIRE_VERSION, 2, 0x61, 0x61]);
    expect(codeOf(decodeFrame(short, ctxFor('r1')))).toBe('WIRE_MALFORMED');
    const longest = sealBody(mp.nil(), signerOf('a'.repeat(MAX_ID_CHARS)));
    expect(codeOf(decodeFrame(longest, ctxFor('r1')))).toBe('SIG_UNKNOWN_KEY');
  });

  it('WIRE_CHECKSUM for a flipped bit in the header, the body or the CRC', () => {
    const data = good();
    const { signed } = splitFrame(data);
    // header: 'a1' → 'a3' is still a valid id, so only the CRC (which covers the header) can tell
    expect(codeOf(decodeFrame(flip(data, 3, 0x02), ctxFor('r1')))).toBe('WIRE_CHECKSUM');
    for (const at of [4, 10, signed.length - 1, signed.length, signed.length + 3]) {
      expect(codeOf(decodeFrame(flip(data, at, 0x10), ctxFor('r1')))).toBe('WIRE_CHECKSUM');
    }
    // the CRC is checked before the key is looked up
    expect(codeOf(decodeFrame(flip(enc('x9', 'r1', []), 5), ctxFor('r1')))).toBe('WIRE_CHECKSUM');
  });

  it('SIG_UNKNOWN_KEY for a sender outside the key table, without a signature check', () => {
    const v = countingVerifier();
    expect(codeOf(decodeFrame(enc('x9', 'r1', [{ type: 'probe', nonce: 1 }]), ctxFor('r1', v)))).toBe('SIG_UNKNOWN_KEY');
    expect(codeOf(decodeFrame(enc('constructor', 'r1', []), ctxFor('r1', v)))).toBe('SIG_UNKNOWN_KEY');
    expect(v.verifies).toBe(0);
  });

  it('SIG_INVALID for a flipped signature bit, a forged sender, or a header rewritten to another sender', () => {
    const data = good();
    for (const at of [data.length - SIGNATURE_BYTES, data.length - 1, data.length - 30]) {
      expect(codeOf(decodeFrame(flip(data, at), ctxFor('r1')))).toBe('SIG_INVALID');
    }
    // r2 claims to be a1: a valid Ed25519 signature, by the wrong key
    const forged: Signer = { id: 'a1', sign: (d) => signerOf('r2').sign(d) };
    expect(codeOf(decodeFrame(encodeFrame({ from: 'a1', to: 'r1', items: [] }, { cluster: CLUSTER, signer: forged }), ctxFor('r1')))).toBe('SIG_INVALID');
    // a1's genuine frame with its header rewritten to a2 and the CRC fixed: the signature covers the header
    const { signed, sig } = splitFrame(data);
    const relabelled = Uint8Array.from(signed);
    relabelled.set(Buffer.from('a2'), 2);
    expect(codeOf(decodeFrame(assemble(relabelled, sig), ctxFor('r1')))).toBe('SIG_INVALID');
  });

  it('WIRE_MALFORMED for signed bodies that are not strict msgpack or not a frame body', () => {
    const s = signerOf('a1');
    const tree = bodyTree('r1', [{ type: 'probe', nonce: 1 }]) as unknown[];
    const cases: Uint8Array[] = [
      sealBody(Uint8Array.of(0xc1), s), // a byte msgpack never uses
      sealBody(Uint8Array.of(0x92, 0x01), s), // truncated array
      sealBody(Uint8Array.from([...pack(tree), 0x00]), s), // trailing byte after a valid body
      sealBody(pack({ cluster: CLUSTER, to: 'r1', items: [] }), s), // a map
      sealTree('frame', s),
      sealTree(tree.slice(0, 2), s),
      sealTree([...tree, 0], s),
      sealTree([tree[0], tree[1], [[6]]], s), // probe without its nonce
      sealTree([tree[0], tree[1], [[6, -1]]], s),
      sealTree([tree[0], 'A1', tree[2]], s),
      sealTree([tree[0], tree[1], 'items'], s),
      sealTree([WIRE_VERSION, tree[0], 'a1', tree[1], tree[2]], s), // the old layout, version and sender in the body
    ];
    for (const data of cases) expect(codeOf(decodeFrame(data, ctxFor('r1')))).toBe('WIRE_MALFORMED');
  });

  it('WIRE_UNKNOWN_TYPE for an item or payload code this version does not know', () => {
    const s = signerOf('a1');
    const withItems = (items: unknown[]): Uint8Array => sealTree([CLUSTER, 'r1', items], s);
    expect(codeOf(decodeFrame(withItems([[99, 1]]), ctxFor('r1')))).toBe('WIRE_UNKNOWN_TYPE');
    expect(codeOf(decodeFrame(withItems([[6, 1], [0]]), ctxFor('r1')))).toBe('WIRE_UNKNOWN_TYPE');
    expect(codeOf(decodeFrame(withItems([[2, 1, 1, 1, 0, [42, 'x']]]), ctxFor('r1')))).toBe('WIRE_UNKNOWN_TYPE');
    expect(codeOf(decodeFrame(withItems([[5, 1, 1, [3]]]), ctxFor('r1')))).toBe('WIRE_UNKNOWN_TYPE');
  });

  it('WIRE_LIMIT for too many items or an over-long string', () => {
    const many: Item[] = Array.from({ length: MAX_ITEMS_PER_FRAME + 1 }, (_, i) => ({ type: 'probe', nonce: i }));
    expect(codeOf(decodeFrame(enc('a1', 'r1', many), ctxFor('r1')))).toBe('WIRE_LIMIT');
    const longNotice: Item = { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'notice', text: 'n'.repeat(4097) } };
    expect(codeOf(decodeFrame(enc('a1', 'r1', [longNotice]), ctxFor('r1')))).toBe('WIRE_LIMIT');
  });

  it('WIRE_FOREIGN_CLUSTER for a frame of another cluster', () => {
    expect(codeOf(decodeFrame(enc('a1', 'r1', [], 'another-cluster'), ctxFor('r1')))).toBe('WIRE_FOREIGN_CLUSTER');
    expect(codeOf(decodeFrame(good(), { ...ctxFor('r1'), cluster: 'another-cluster' }))).toBe('WIRE_FOREIGN_CLUSTER');
  });

  it('WIRE_MISADDRESSED for a frame to someone else', () => {
    expect(codeOf(decodeFrame(good(), ctxFor('r2')))).toBe('WIRE_MISADDRESSED');
  });

  it('SIG_INVALID for a relayed CG whose agent signature was tampered, inside a validly signed wrapper', () => {
    const signed = signedCGOf('a2', 4, agentRequests[0] as AgentRequest);
    const tamperedSig = flip(signed.sig, 10, 0x80);
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrapItem(signed)]), ctxFor('r2')))).toBe('ok');
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrapItem({ ...signed, sig: tamperedSig })]), ctxFor('r2')))).toBe('SIG_INVALID');
    // a replica that rewrites the CG content (here: its CSN) cannot re-sign it as the agent
    const rewritten = signCG({ ...signed.cg, csn: 5 }, signerOf('r1'));
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrapItem({ ...rewritten, sig: signed.sig })]), ctxFor('r2')))).toBe('SIG_INVALID');
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrapItem({ ...signed, bytes: rewritten.bytes })]), ctxFor('r2')))).toBe('SIG_INVALID');
    // nor move it to another incarnation of the agent
    const reincarnated = signCG({ ...signed.cg, inc: signed.cg.inc + 1 }, signerOf('r1'));
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrapItem({ ...signed, bytes: reincarnated.bytes })]), ctxFor('r2')))).toBe('SIG_INVALID');
  });

  it('SIG_UNKNOWN_KEY and WIRE_MALFORMED for a wrapped CG of an unknown agent or of garbage bytes', () => {
    const stranger = signCG(cgOf('a9', 1, { type: 'node.join', slots: 1, resync: false }), signerOf('a9'));
    const s = signerOf('r1');
    expect(codeOf(decodeFrame(sealTree(bodyTree('r2', [wrapWire(stranger.bytes, stranger.sig)]), s), ctxFor('r2')))).toBe('SIG_UNKNOWN_KEY');
    expect(codeOf(decodeFrame(sealTree(bodyTree('r2', [wrapWire(Uint8Array.of(0xc1), stranger.sig)]), s), ctxFor('r2')))).toBe('WIRE_MALFORMED');
    expect(codeOf(decodeFrame(sealTree(bodyTree('r2', [wrapWire(pack([1, 2]), stranger.sig)]), s), ctxFor('r2')))).toBe('WIRE_MALFORMED');
    // a CG of the layout before `inc`, genuinely signed by its agent
    const old = groupMsgCG.enc(cgOf('a2', 1, { type: 'node.join', slots: 1, resync: false })) as unknown[];
    const oldBytes = pack(old.slice(0, 4));
    expect(codeOf(decodeFrame(sealTree(bodyTree('r2', [wrapWire(oldBytes, signerOf('a2').sign(oldBytes))]), s), ctxFor('r2')))).toBe('WIRE_MALFORMED');
  });

  it("SIG_INVALID for a lane-1 grp CG whose client is not the frame's sender", () => {
    // a2's genuine CG, sent on lane 1 by r1 instead of being wrapped: relays must travel wrapped
    const signed = signedCGOf('a2', 3, agentRequests[0] as AgentRequest);
    expect(codeOf(decodeFrame(enc('r1', 'a1', [grpItem(signed)]), ctxFor('a1')))).toBe('SIG_INVALID');
    expect(codeOf(decodeFrame(enc('a2', 'r1', [grpItem(signed)]), ctxFor('r1')))).toBe('ok');
    // one bad item spoils the whole frame, whatever its position
    expect(codeOf(decodeFrame(enc('r1', 'a1', [{ type: 'probe', nonce: 1 }, grpItem(signed)]), ctxFor('a1')))).toBe('SIG_INVALID');
  });
});

/** A frame of exactly MAX_FRAME_BYTES from `from`, whose body is `fill` after `prefix`: signed
 *  (version 1) or MAC'd (version 2), `sign` giving the authenticator of header ‖ body. */
function bombFrame(from: string, prefix: number[], fill: readonly number[], sign: (signed: Uint8Array) => Uint8Array, version = WIRE_VERSION): Uint8Array {
  const header = headerOf(from, version);
  const body = new Uint8Array(MAX_FRAME_BYTES - header.length - 4 - (version === WIRE_VERSION_MAC ? MAC_BYTES : SIGNATURE_BYTES));
  body.set(prefix);
  for (let i = prefix.length; i + fill.length <= body.length; i += fill.length) body.set(fill, i);
  const signed = Buffer.concat([header, body]);
  return assemble(signed, sign(signed));
}
const count32 = (n: number): number[] => [0xdd, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
/** Body bytes of a signed bomb frame from a two-character sender id (a MAC'd one has 32 more,
 *  which the strict decoder never reaches: it stops at the first element). */
const bodyBytes = MAX_FRAME_BYTES - headerOf('a1').length - 4 - SIGNATURE_BYTES;
const bombs: Array<[string, number[], number[], RegExp]> = [
  ['an array of a million empty maps', count32(bodyBytes - 5), [0x80], /0x80 not allowed/],
  ['an array of 0xd4 extensions', count32(Math.floor((bodyBytes - 5) / 3)), [0xd4, 0x00, 0x00], /0xd4 not allowed/],
  ['an array header claiming 2^32 − 1 elements', count32(0xffffffff), [0x00], /array longer than input/],
  ['a million nested arrays', [], [0x91], /too deep/],
  ['a string header claiming 4 GiB', [0xdb, 0xff, 0xff, 0xff, 0xff], [0x61], /string past end/],
];

describe('an unauthenticated body is never parsed (PROTOCOL §2.1)', () => {
  for (const [name, prefix, fill, whenParsed] of bombs) {
    it(`refuses a 1 MiB frame holding ${name} as a signature failure, parsing nothing`, () => {
      const v = countingVerifier();
      const results: Array<[string, Result<Frame>]> = [];
      strictCalls.n = 0;
      // an unknown sender (signing with its own key), a known sender signed with another's key,
      // and a known sender with a signature of random-looking bytes
      results.push(['unknown sender', decodeFrame(bombFrame('x9', prefix, fill, (d) => signerOf('x9').sign(d)), ctxFor('r1', v))]);
      const verifiesBefore = v.verifies;
      results.push(['wrong key', decodeFrame(bombFrame('a1', prefix, fill, (d) => signerOf('r2').sign(d)), ctxFor('r1', v))]);
      results.push(['garbage signature', decodeFrame(bombFrame('a1', prefix, fill, () => new Uint8Array(SIGNATURE_BYTES).fill(0x5a)), ctxFor('r1', v))]);
      expect(results.map(([label, r]) => `${label}: ${codeOf(r)}`)).toEqual([
        'unknown sender: SIG_UNKNOWN_KEY', 'wrong key: SIG_INVALID', 'garbage signature: SIG_INVALID',
      ]);
      // the receiver's whole cost: a CRC and at most one signature check per frame, no parse
      expect(verifiesBefore).toBe(0);
      expect(v.verifies).toBe(2);
      expect(strictCalls.n).toBe(0);
      // the same body under a valid signature is parsed (once) and refused by the strict decoder
      const signed = decodeFrame(bombFrame('a1', prefix, fill, (d) => signerOf('a1').sign(d)), ctxFor('r1', v));
      expect(codeOf(signed)).toBe('WIRE_MALFORMED');
      expect(detailOf(signed)).toMatch(whenParsed);
      expect(strictCalls.n).toBe(1);
    });
  }
});

describe("MAC'd frames (PROTOCOL §2.4)", () => {
  const probe: Item = { type: 'probe', nonce: 7 };
  /** Items `from` may send in a MAC'd frame: all of its samples but the primary's orders. */
  const macItems = (from: string): Item[] => itemsFrom(from).filter((i) => !needsFrameSignature(i));
  const wrapper = (): Item => wrapItem(signedCGOf('a1', 1, agentRequests[0] as AgentRequest));
  const cat = (...parts: Uint8Array[]): Uint8Array => Uint8Array.from(Buffer.concat(parts));

  it('round trip between every kind of process with real link keys: version 2, 32 bytes shorter than signed, same body', () => {
    const pairs = [['a1', 'r1'], ['r1', 'a1'], ['r1', 'r2'], ['r3', 'scc'], ['scc', 'r2'], ['op', 'r3'], ['r2', 'op'], ['a2', 'r3']] as const;
    for (const [from, to] of pairs) {
      const items = macItems(from);
      expect(items.length).toBeGreaterThan(10);
      const data = encMac(from, to, items);
      const signedFrame = enc(from, to, items);
      expect(data[0], `${from} → ${to}`).toBe(WIRE_VERSION_MAC);
      expect(signedFrame[0]).toBe(WIRE_VERSION);
      expect(data.length).toBe(signedFrame.length - 32);
      expect(SIGNATURE_BYTES - MAC_BYTES).toBe(32);
      const m = splitFrame(data);
      const s = splitFrame(signedFrame);
      expect(hex(m.header)).toBe(hex(headerOf(from, WIRE_VERSION_MAC)));
      expect(hex(m.body)).toBe(hex(s.body));
      expect(new DataView(data.buffer).getUint32(m.signed.length, false)).toBe(crc32(m.signed));
      expect(m.sig).toHaveLength(MAC_BYTES);
      // the tag is the link's, over header ‖ body, checked at the receiving end
      expect(hex(m.sig)).toBe(hex(tagOf(from, to, m.signed)));
      expect(linkAuthOf(to).check(from, m.signed, m.sig)).toBe(true);
      const frame = frameOf(decodeFrame(data, macCtx(to)));
      expect(frame.from).toBe(from);
      expect(frame.to).toBe(to);
      expect(normal(frame.items)).toEqual(normal(items));
      // deterministic, and decodable from a view at an offset into a larger buffer
      expect(hex(encMac(from, to, macItems(from)))).toBe(hex(data));
      const big = new Uint8Array(data.length + 11);
      big.set(data, 7);
      expect(normal(frameOf(decodeFrame(big.subarray(7, 7 + data.length), macCtx(to))).items)).toEqual(normal(items));
    }
    // an empty frame and a pure ack are MAC'd too
    expect(encMac('r1', 'r2', [])[0]).toBe(WIRE_VERSION_MAC);
    expect(frameOf(decodeFrame(encMac('r1', 'r2', []), macCtx('r2'))).items).toEqual([]);
    const ack: Item = { type: 'ptp', srcInc: 1, destInc: 1, seq: 0, ackSeq: 4, body: null };
    expect(encMac('a1', 'r2', [ack])[0]).toBe(WIRE_VERSION_MAC);
  });

  it('signs a frame to a peer the link keys do not cover, or when the link keys are not the signer\'s', () => {
    const items = [probe];
    // x9 is outside a1's key table: the very bytes of the signed encoding
    const toStranger = encMac('a1', 'x9', items);
    expect(toStranger[0]).toBe(WIRE_VERSION);
    expect(hex(toStranger)).toBe(hex(enc('a1', 'x9', items)));
    expect(codeOf(decodeFrame(toStranger, ctxFor('x9')))).toBe('ok');
    // a key table without r1 (as when r1's key maps to no usable X25519 point)
    const narrow = linkAuthOf('a1', ['a1', 'r2']);
    expect(narrow.has('r1')).toBe(false);
    expect(encMac('a1', 'r1', items, narrow)[0]).toBe(WIRE_VERSION);
    expect(encMac('a1', 'r2', items, narrow)[0]).toBe(WIRE_VERSION_MAC);
    // link keys of another process than the signer are never used
    const foreign = encodeFrame({ from: 'a1', to: 'r1', items }, { cluster: CLUSTER, signer: signerOf('a1'), linkAuth: linkAuthOf('r2') });
    expect(foreign[0]).toBe(WIRE_VERSION);
    expect(codeOf(decodeFrame(foreign, macCtx('r1')))).toBe('ok');
  });

  it('signs a frame carrying a wrapper or wrapper.input (the primary\'s orders, forwarded as evidence), even with link keys', () => {
    const input = inputItem({ type: 'tick' });
    const failed = inputItem({ type: 'node.failed', agent: 'a2', inc: 4 }, 2);
    const notice: Item = { type: 'ptp', srcInc: 1, destInc: 1, seq: 5, ackSeq: 0, body: { type: 'notice', text: 'n' } };
    for (const items of [[wrapper()], [input], [probe, wrapper()], [notice, failed, probe], [wrapper(), input]]) {
      const data = encMac('r1', 'r2', items);
      expect(data[0]).toBe(WIRE_VERSION);
      expect(hex(data)).toBe(hex(enc('r1', 'r2', items)));
      expect(verifier.verify('r1', splitFrame(data).signed, splitFrame(data).sig)).toBe(true);
      expect(normal(frameOf(decodeFrame(data, macCtx('r2'))).items)).toEqual(normal(items));
    }
    // the same link without an order is MAC'd: other ptp payloads do not need the signature
    expect(encMac('r1', 'r2', [probe, notice])[0]).toBe(WIRE_VERSION_MAC);
  });

  it('still accepts a signed frame at a decoder with link keys, and still checks its signature', () => {
    const link = countingLinkAuth(linkAuthOf('r1'));
    const items = itemsFrom('a1');
    expect(normal(frameOf(decodeFrame(enc('a1', 'r1', items), macCtx('r1', verifier, link))).items)).toEqual(normal(items));
    const data = enc('a1', 'r1', [probe]);
    expect(codeOf(decodeFrame(flip(data, data.length - 1), macCtx('r1', verifier, link)))).toBe('SIG_INVALID');
    expect(codeOf(decodeFrame(enc('x9', 'r1', [probe]), macCtx('r1', verifier, link)))).toBe('SIG_UNKNOWN_KEY');
    expect(link.checks).toBe(0);
  });

  it('SIG_UNKNOWN_KEY for a MAC\'d frame at a decoder without link keys, or from a sender they do not cover, with no MAC or signature check', () => {
    const v = countingVerifier();
    const data = encMac('a1', 'r1', [probe]);
    expect(data[0]).toBe(WIRE_VERSION_MAC);
    expect(codeOf(decodeFrame(data, ctxFor('r1', v)))).toBe('SIG_UNKNOWN_KEY');
    // r1's key table without a1
    const narrow = countingLinkAuth(linkAuthOf('r1', ['r1', 'r2']));
    expect(codeOf(decodeFrame(data, macCtx('r1', v, narrow)))).toBe('SIG_UNKNOWN_KEY');
    // an outsider holding r1's public key: it can derive a key, r1 has none for it
    const stranger = encMac('x9', 'r1', [probe], linkAuthOf('x9', ['x9', 'r1']));
    expect(stranger[0]).toBe(WIRE_VERSION_MAC);
    const link = countingLinkAuth(linkAuthOf('r1'));
    expect(codeOf(decodeFrame(stranger, macCtx('r1', v, link)))).toBe('SIG_UNKNOWN_KEY');
    expect(codeOf(decodeFrame(encMac('constructor', 'r1', [], linkAuthOf('constructor', ['constructor', 'r1'])), macCtx('r1', v, link)))).toBe('SIG_UNKNOWN_KEY');
    expect(v.verifies + narrow.checks + link.checks).toBe(0);
    // the CRC still comes first
    expect(codeOf(decodeFrame(flip(stranger, 6), macCtx('r1', v, link)))).toBe('WIRE_CHECKSUM');
  });

  it('MAC_INVALID for a flipped tag bit, a tag by the wrong link key or cluster, or a header rewritten to another sender', () => {
    const data = encMac('a1', 'r1', [probe]);
    expect(codeOf(decodeFrame(data, macCtx('r1')))).toBe('ok');
    for (const at of [data.length - MAC_BYTES, data.length - 17, data.length - 1]) {
      for (const mask of [0x01, 0x80]) expect(codeOf(decodeFrame(flip(data, at, mask), macCtx('r1')))).toBe('MAC_INVALID');
    }
    const { signed, body } = splitFrame(data);
    const wrongTags: Array<[string, Uint8Array]> = [
      ['zeros', new Uint8Array(MAC_BYTES)],
      ['a1 → r2', tagOf('a1', 'r2', signed)],
      ['r1 → a1 (the other direction)', tagOf('r1', 'a1', signed)],
      ['r2 → r1', tagOf('r2', 'r1', signed)],
      ['a1 → a1', tagOf('a1', 'a1', signed)],
      ['a1 → r1 of another cluster', tagOf('a1', 'r1', signed, linkAuthOf('a1', IDS, 'another-cluster'))],
      ['a signature cut to 32 bytes', signerOf('a1').sign(signed).subarray(0, MAC_BYTES)],
    ];
    for (const [name, tag] of wrongTags) expect(`${name}: ${codeOf(decodeFrame(assemble(signed, tag), macCtx('r1')))}`).toBe(`${name}: MAC_INVALID`);
    // a1's genuine frame with its header rewritten to a2 and the CRC fixed: the tag covers the header
    const relabelled = assemble(cat(headerOf('a2', WIRE_VERSION_MAC), body), splitFrame(data).sig);
    expect(codeOf(decodeFrame(relabelled, macCtx('r1')))).toBe('MAC_INVALID');
    // a decoder whose keys are of another cluster refuses the genuine frame
    expect(codeOf(decodeFrame(data, macCtx('r1', verifier, linkAuthOf('r1', IDS, 'another-cluster'))))).toBe('MAC_INVALID');
    // body or CRC changed: the CRC refuses it before any MAC check
    const link = countingLinkAuth(linkAuthOf('r1'));
    // (header: 'a1' → 'a3' is still a valid id)
    for (const [at, mask] of [[3, 0x02], [10, 0x10], [signed.length - 1, 0x10], [signed.length + 2, 0x10]] as const) {
      expect(codeOf(decodeFrame(flip(data, at, mask), macCtx('r1', verifier, link)))).toBe('WIRE_CHECKSUM');
    }
    expect(link.checks).toBe(0);
  });

  it('binds the version: a MAC\'d frame passed off as signed, or a signed one as MAC\'d, is refused', () => {
    const m = splitFrame(encMac('a1', 'r1', [probe]));
    // version 1, the tag padded to a signature's length, CRC fixed
    const asSigned = assemble(cat(headerOf('a1', WIRE_VERSION), m.body), cat(m.sig, new Uint8Array(SIGNATURE_BYTES - MAC_BYTES)));
    expect(codeOf(decodeFrame(asSigned, macCtx('r1')))).toBe('SIG_INVALID');
    // version 2, the first 32 bytes of a genuine signature as the tag
    const s = splitFrame(enc('a1', 'r1', [probe]));
    const asMac = assemble(cat(headerOf('a1', WIRE_VERSION_MAC), s.body), s.sig.subarray(0, MAC_BYTES));
    expect(codeOf(decodeFrame(asMac, macCtx('r1')))).toBe('MAC_INVALID');
    // the tag covers the version byte: a genuine tag over the version-1 header does not pass
    const overV1 = assemble(cat(headerOf('a1', WIRE_VERSION_MAC), m.body), tagOf('a1', 'r1', cat(headerOf('a1', WIRE_VERSION), m.body)));
    expect(codeOf(decodeFrame(overV1, macCtx('r1')))).toBe('MAC_INVALID');
  });

  it('never accepts a MAC\'d frame reflected to its sender or redirected to another peer', () => {
    const items = [probe];
    const wire = items.map(toWire);
    const data = encMac('a1', 'r1', items);
    const { body, sig: tag } = splitFrame(data);
    const refused = ['MAC_INVALID', 'WIRE_MISADDRESSED'];
    // reflection: a1's frame fed back to a1, as it is or as if r1 had sent it (header rewritten, CRC fixed)
    expect(refused).toContain(codeOf(decodeFrame(data, macCtx('a1'))));
    expect(refused).toContain(codeOf(decodeFrame(assemble(cat(headerOf('r1', WIRE_VERSION_MAC), body), tag), macCtx('a1'))));
    // redirection: a1's frame to r2 delivered to r1, and to r3
    const toR2 = encMac('a1', 'r2', items);
    expect(refused).toContain(codeOf(decodeFrame(toR2, macCtx('r1'))));
    expect(refused).toContain(codeOf(decodeFrame(toR2, macCtx('r3'))));
    expect(codeOf(decodeFrame(toR2, macCtx('r2')))).toBe('ok');
    // the keys are per direction: even a body addressed to a1 under an r1 header does not pass
    // with a1 → r1's tag, only with r1 → a1's
    const signedAsR1 = cat(headerOf('r1', WIRE_VERSION_MAC), pack(bodyTree('a1', wire)));
    expect(codeOf(decodeFrame(assemble(signedAsR1, tagOf('a1', 'r1', signedAsR1)), macCtx('a1')))).toBe('MAC_INVALID');
    expect(codeOf(decodeFrame(assemble(signedAsR1, tagOf('r1', 'a1', signedAsR1)), macCtx('a1')))).toBe('ok');
    // and per peer: a body addressed to r1 tagged with a1 → r2's key does not pass at r1
    const signedToR1 = cat(headerOf('a1', WIRE_VERSION_MAC), pack(bodyTree('r1', wire)));
    expect(codeOf(decodeFrame(assemble(signedToR1, tagOf('a1', 'r2', signedToR1)), macCtx('r1')))).toBe('MAC_INVALID');
    expect(codeOf(decodeFrame(assemble(signedToR1, tagOf('a1', 'r1', signedToR1)), macCtx('r1')))).toBe('ok');
  });

  it('SIG_REQUIRED for a validly tagged frame carrying a wrapper or wrapper.input, before any CG signature is checked; a backup\'s order confirmation, signed on its own, travels MAC\'d (PROTOCOL §2.4, §10.2 order.lie)', () => {
    const v = countingVerifier();
    const genuine = toWire(wrapper());
    const signed = signedCGOf('a2', 2, agentRequests[1] as AgentRequest);
    const forged = wrapWire(signed.bytes, flip(signed.sig, 0));
    const input = toWire(inputItem({ type: 'tick' }));
    const ack: ItemWire = { type: 'ptp', srcInc: 1, destInc: 1, seq: 0, ackSeq: 4, body: null };
    const confirmation = {
      type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'order', rsn: 3, digest: new Uint8Array(32).fill(7), view: 0, sig: new Uint8Array(64).fill(9) },
    } as ItemWire;
    const bodies: ItemWire[][] = [[genuine], [input], [{ type: 'probe', nonce: 1 }, genuine], [forged], [ack, input], [genuine, input]];
    for (const items of bodies) {
      const body = pack(bodyTree('r2', items));
      const r = decodeFrame(sealMacBody(body, 'r1', 'r2'), macCtx('r2', v));
      expect(codeOf(r)).toBe('SIG_REQUIRED');
      expect(detailOf(r)).toMatch(/r1/);
    }
    expect(v.verifies).toBe(0);
    // the same bodies signed are accepted (but the forged CG)
    expect(codeOf(decodeFrame(sealBody(pack(bodyTree('r2', [genuine, input])), signerOf('r1')), macCtx('r2')))).toBe('ok');
    expect(codeOf(decodeFrame(sealMacBody(pack(bodyTree('r2', [ack, confirmation])), 'r1', 'r2'), macCtx('r2')))).toBe('ok');
    expect(codeOf(decodeFrame(sealBody(pack(bodyTree('r2', [forged])), signerOf('r1')), macCtx('r2')))).toBe('SIG_INVALID');
    // the rest of the frame checks still come first: another addressee is WIRE_MISADDRESSED
    expect(codeOf(decodeFrame(sealMacBody(pack(bodyTree('r3', [genuine])), 'r1', 'r2'), macCtx('r2')))).toBe('WIRE_MISADDRESSED');
  });

  for (const [name, prefix, fill, whenParsed] of bombs) {
    it(`refuses a 1 MiB MAC'd frame holding ${name} under a wrong tag as MAC_INVALID, parsing nothing`, () => {
      const v = countingVerifier();
      const link = countingLinkAuth(linkAuthOf('r1'));
      const ctx = macCtx('r1', v, link);
      const bomb = (from: string, tag: (signed: Uint8Array) => Uint8Array): Uint8Array => bombFrame(from, prefix, fill, tag, WIRE_VERSION_MAC);
      strictCalls.n = 0;
      const results: Array<[string, Result<Frame>]> = [
        ['no link keys', decodeFrame(bomb('a1', (d) => tagOf('a1', 'r1', d)), ctxFor('r1', v))],
        ['unknown sender', decodeFrame(bomb('x9', (d) => tagOf('x9', 'r1', d, linkAuthOf('x9', ['x9', 'r1']))), ctx)],
        ['wrong link', decodeFrame(bomb('a1', (d) => tagOf('a1', 'r2', d)), ctx)],
        ['garbage tag', decodeFrame(bomb('a1', () => new Uint8Array(MAC_BYTES).fill(0x5a)), ctx)],
      ];
      expect(results.map(([label, r]) => `${label}: ${codeOf(r)}`)).toEqual([
        'no link keys: SIG_UNKNOWN_KEY', 'unknown sender: SIG_UNKNOWN_KEY', 'wrong link: MAC_INVALID', 'garbage tag: MAC_INVALID',
      ]);
      // the receiver's whole cost: a CRC and at most one MAC check per frame, no parse
      expect(link.checks).toBe(2);
      expect(v.verifies).toBe(0);
      expect(strictCalls.n).toBe(0);
      // the same body under the right tag is parsed (once) and refused by the strict decoder
      const tagged = decodeFrame(bomb('a1', (d) => tagOf('a1', 'r1', d)), ctx);
      expect(codeOf(tagged)).toBe('WIRE_MALFORMED');
      expect(detailOf(tagged)).toMatch(whenParsed);
      expect(strictCalls.n).toBe(1);
    });
  }
});

describe('a signed body must be the canonical encoding (PROTOCOL §2.2 step 9)', () => {
  const probeItems: ItemWire[] = [{ type: 'probe', nonce: 7 }];
  const s = signerOf('a1');

  it('refuses a probe frame whose integers, strings or arrays use a wider form than needed', () => {
    const write = (parts: { cluster?: Uint8Array; to?: Uint8Array; code?: Uint8Array; nonce?: Uint8Array; items?: 'fix' | 16 | 32; item?: 'fix' | 16 | 32; body?: 'fix' | 16 | 32 }): Uint8Array =>
      mp.array([
        parts.cluster ?? mp.str(CLUSTER, 8),
        parts.to ?? mp.str('r1', 'fix'),
        mp.array([mp.array([parts.code ?? mp.fixint(6), parts.nonce ?? mp.fixint(7)], parts.item)], parts.items),
      ], parts.body);
    // the hand-written canonical form is what encodeFrame sends, and it is accepted
    expect(hex(write({}))).toBe(hex(pack(bodyTree('r1', probeItems))));
    expect(codeOf(decodeFrame(sealBody(write({}), s), ctxFor('r1')))).toBe('ok');
    const variants: Array<[string, Uint8Array]> = [
      ['nonce as uint32 where a fixint suffices', write({ nonce: mp.u32(7) })],
      ['nonce as uint8', write({ nonce: mp.u8(7) })],
      ['nonce as uint16', write({ nonce: mp.u16(7) })],
      ['nonce as uint64', write({ nonce: mp.u64(7) })],
      ['nonce as int8', write({ nonce: mp.i8(7) })],
      ['nonce as int64', write({ nonce: mp.i64(7) })],
      ['nonce as float64', write({ nonce: mp.f64(7) })],
      ['item code as uint16', write({ code: mp.u16(6) })],
      ["'r1' with a str8 header", write({ to: mp.str('r1', 8) })],
      ["'r1' with a str32 header", write({ to: mp.str('r1', 32) })],
      ['cluster with a str16 header', write({ cluster: mp.str(CLUSTER, 16) })],
      ['items as array16', write({ items: 16 })],
      ['an item as array32', write({ item: 32 })],
      ['the body as array16', write({ body: 16 })],
    ];
    for (const [name, body] of variants) {
      const r = decodeFrame(sealBody(body, s), ctxFor('r1'));
      expect(`${name}: ${codeOf(r)} ${detailOf(r)}`).toBe(`${name}: WIRE_MALFORMED msgpack: not the canonical encoding`);
    }
  });

  it('refuses every other encoding of every node of a frame body of every item type', () => {
    const tree = frameBody.enc({ cluster: CLUSTER, to: 'r1', items: itemsFrom('a1').map(toWire) });
    expect(hex(encodeLoose(tree, canonicalChoice))).toBe(hex(pack(tree)));
    const bodies: Uint8Array[] = [];
    for (let node = 0; node < nodeCount(tree); node++) {
      // canonical everywhere except at one node (in pre-order), where every other form is tried
      for (let alt = 1; ; alt++) {
        let at = -1;
        let options = 0;
        const body = encodeLoose(tree, (n, value) => {
          at++;
          const canonical = canonicalChoice(n, value);
          if (at !== node) return canonical;
          options = n;
          return (canonical + alt) % n;
        });
        if (alt >= options) break;
        bodies.push(body);
      }
    }
    expect(bodies.length).toBeGreaterThan(500);
    for (const body of bodies) {
      const r = decodeFrame(sealBody(body, s), ctxFor('r1'));
      if (r.ok || detailOf(r) !== 'msgpack: not the canonical encoding') throw new Error(`accepted or misjudged ${hex(body)}: ${codeOf(r)} ${detailOf(r)}`);
    }
  });

  it("refuses a CG whose own bytes are not canonical, though its agent signed them", () => {
    const cg = groupMsgCG.enc(cgOf('a1', 3, agentRequests[2] as AgentRequest));
    let tried = 0;
    for (let node = 0; node < nodeCount(cg); node++) {
      let at = -1;
      const bytes = encodeLoose(cg, (n, value) => {
        at++;
        const canonical = canonicalChoice(n, value);
        return at === node && n > 1 ? (canonical + 1) % n : canonical;
      });
      if (hex(bytes) === hex(pack(cg))) continue;
      tried++;
      const sig = signerOf('a1').sign(bytes);
      const frames = [
        [sealTree(bodyTree('r1', [grpWire(bytes, sig)]), s), 'r1'],
        [sealTree(bodyTree('r2', [wrapWire(bytes, sig)]), signerOf('r1')), 'r2'],
      ] as const;
      for (const [data, self] of frames) {
        const r = decodeFrame(data, ctxFor(self));
        expect(`${codeOf(r)} ${detailOf(r)}`).toBe('WIRE_MALFORMED msgpack: not the canonical encoding');
      }
    }
    expect(tried).toBeGreaterThan(10);
  });
});

describe('invalid UTF-8 is refused the same way every time (PROTOCOL §2.2 step 8)', () => {
  const INVALID = ['c0af', 'eda080', 'f4908080', 'ff61', 'e282'].map((h) => Uint8Array.from(Buffer.from(h, 'hex')));
  const placeholder = (n: number): string => 'QZ#%&'.slice(0, n);

  it('in a string of a validly signed frame', () => {
    for (const bad of INVALID) {
      const p = placeholder(bad.length);
      const notice: ItemWire = { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'notice', text: `note ${p}` } };
      const body = substitute(pack(bodyTree('r1', [notice])), p, bad);
      const data = sealBody(body, signerOf('a1'));
      const outcomes = new Set<string>();
      for (let i = 0; i < 20; i++) {
        const r = decodeFrame(data, ctxFor('r1'));
        outcomes.add(`${codeOf(r)} ${detailOf(r)}`);
      }
      expect([...outcomes]).toEqual(['WIRE_MALFORMED msgpack: invalid UTF-8']);
      // the control: the same frame with the placeholder left in is accepted
      expect(codeOf(decodeFrame(sealBody(pack(bodyTree('r1', [notice])), signerOf('a1')), ctxFor('r1')))).toBe('ok');
    }
  });

  it("in a CG's own bytes, signed by its agent, on lane 1 and relayed in a wrapper", () => {
    for (const bad of INVALID) {
      const p = placeholder(bad.length);
      const cg = cgOf('a1', 4, { type: 'echo', tag: `t${p}`, fanout: 'all', count: 1, data: new Uint8Array(0) });
      const bytes = substitute(pack(groupMsgCG.enc(cg)), p, bad);
      const sig = signerOf('a1').sign(bytes);
      const frames = [
        [sealTree(bodyTree('r1', [grpWire(bytes, sig)]), signerOf('a1')), 'r1'],
        [sealTree(bodyTree('r2', [wrapWire(bytes, sig)]), signerOf('r1')), 'r2'],
      ] as const;
      for (const [data, self] of frames) {
        const outcomes = new Set<string>();
        for (let i = 0; i < 20; i++) {
          const r = decodeFrame(data, ctxFor(self));
          outcomes.add(`${codeOf(r)} ${detailOf(r)}`);
        }
        expect([...outcomes]).toEqual(['WIRE_MALFORMED msgpack: invalid UTF-8']);
      }
      expect(`${codeOf(openCG(bytes, sig, verifier))}`).toBe('WIRE_MALFORMED');
    }
  });
});

describe(`at most ${MAX_SIGNED_ITEMS_PER_FRAME} items carrying a signed request per frame (PROTOCOL §2.2 step 13)`, () => {
  const cgsOf = (client: string, n: number, from = 1): SignedCG[] =>
    Array.from({ length: n }, (_, i) => signedCGOf(client, from + i, agentRequests[i % agentRequests.length] as AgentRequest));

  it(`accepts ${MAX_SIGNED_ITEMS_PER_FRAME} lane-1 CGs and refuses ${MAX_SIGNED_ITEMS_PER_FRAME + 1} with WIRE_LIMIT`, () => {
    const cgs = cgsOf('a2', MAX_SIGNED_ITEMS_PER_FRAME + 1);
    const at = (n: number): Item[] => cgs.slice(0, n).map((c, i) => grpItem(c, i + 1));
    expect(frameOf(decodeFrame(enc('a2', 'r1', at(MAX_SIGNED_ITEMS_PER_FRAME)), ctxFor('r1'))).items).toHaveLength(MAX_SIGNED_ITEMS_PER_FRAME);
    const r = decodeFrame(enc('a2', 'r1', at(MAX_SIGNED_ITEMS_PER_FRAME + 1)), ctxFor('r1'));
    expect(codeOf(r)).toBe('WIRE_LIMIT');
    expect(detailOf(r)).toMatch(/signed/);
  });

  it('counts wrappers and lane-1 CGs together, and not the other items', () => {
    const own = cgsOf('a1', 40);
    const relayed = cgsOf('a2', 40);
    const probes = (n: number): Item[] => Array.from({ length: n }, (_, i) => ({ type: 'probe', nonce: i }));
    const mix = (grp: number, wrapped: number, extra: number): Item[] => [
      ...own.slice(0, grp).map((c, i) => grpItem(c, i + 1)),
      ...probes(extra),
      ...relayed.slice(0, wrapped).map((c, i) => wrapItem(c, i + 1)),
    ];
    expect(codeOf(decodeFrame(enc('a1', 'r1', mix(32, 32, 900)), ctxFor('r1')))).toBe('ok');
    expect(codeOf(decodeFrame(enc('a1', 'r1', mix(33, 32, 0)), ctxFor('r1')))).toBe('WIRE_LIMIT');
    expect(codeOf(decodeFrame(enc('a1', 'r1', mix(25, 40, 0)), ctxFor('r1')))).toBe('WIRE_LIMIT');
    expect(codeOf(decodeFrame(enc('r1', 'r2', mix(0, 40, 0).concat(cgsOf('a1', 25, 100).map((c, i) => wrapItem(c, 50 + i)))), ctxFor('r2')))).toBe('WIRE_LIMIT');
    // a pure ack (ptp with no body) and GCs carry no agent signature
    const acks: Item[] = Array.from({ length: 100 }, (_, i) => ({ type: 'ptp', srcInc: 1, destInc: 1, seq: i, ackSeq: i, body: null }));
    expect(codeOf(decodeFrame(enc('a1', 'r1', [...mix(32, 32, 0), ...acks]), ctxFor('r1')))).toBe('ok');
  });

  it('refuses the 65th before checking any CG signature: one signature check for the whole frame', () => {
    const forged = cgsOf('a2', MAX_SIGNED_ITEMS_PER_FRAME + 1).map((c) => ({ ...c, sig: flip(c.sig, 0) }));
    const v = countingVerifier();
    expect(codeOf(decodeFrame(enc('r1', 'r2', forged.map((c, i) => wrapItem(c, i + 1))), ctxFor('r2', v)))).toBe('WIRE_LIMIT');
    expect(v.verifies).toBe(1);
    // at the limit, every CG is checked: the frame's signature and one per CG
    const genuine = cgsOf('a2', MAX_SIGNED_ITEMS_PER_FRAME);
    expect(codeOf(decodeFrame(enc('r1', 'r2', genuine.map((c, i) => wrapItem(c, i + 1))), ctxFor('r2', v)))).toBe('ok');
    expect(v.verifies).toBe(1 + 1 + MAX_SIGNED_ITEMS_PER_FRAME);
  });
});

describe('peekSender reads the header only', () => {
  it('returns the claimed sender of any frame with a well-formed header, without parsing or verifying the body', () => {
    strictCalls.n = 0;
    const data = enc('a1', 'r1', itemsFrom('a1'));
    expect(peekSender(data)).toBe('a1');
    expect(peekSender(flip(data, data.length - 1))).toBe('a1'); // signature broken
    expect(peekSender(flip(data, 10))).toBe('a1'); // body and CRC broken
    expect(peekSender(enc('x9', 'r1', []))).toBe('x9'); // unknown key: routing is not trust
    const macd = encMac('a2', 'r1', itemsFrom('a2').filter((i) => !needsFrameSignature(i)));
    expect(macd[0]).toBe(WIRE_VERSION_MAC);
    expect(peekSender(macd)).toBe('a2'); // a MAC'd frame
    expect(peekSender(flip(macd, macd.length - 1))).toBe('a2'); // its tag broken
    expect(peekSender(sealBody(Uint8Array.of(0xc1, 0x80, 0xd4), signerOf('scc')))).toBe('scc'); // garbage body
    const header = headerOf('r3');
    const bomb = new Uint8Array(MAX_FRAME_BYTES);
    bomb.set(header);
    bomb.fill(0x91, header.length);
    expect(peekSender(bomb)).toBe('r3');
    expect(strictCalls.n).toBe(0);
  });

  it('returns null for garbage, for another version and for a malformed header', () => {
    const data = enc('a1', 'r1', [{ type: 'probe', nonce: 1 }]);
    const withHeader = (header: number[]): Uint8Array => {
      const out = Uint8Array.from(data);
      out.set(header);
      return out;
    };
    const garbage: Uint8Array[] = [
      new Uint8Array(0),
      new Uint8Array(10),
      data.subarray(0, MIN_FRAME_BYTES - 1), // a signed frame cut below the signed minimum
      data.subarray(0, MIN_MAC_FRAME_BYTES - 1),
      encMac('a1', 'r1', [{ type: 'probe', nonce: 1 }]).subarray(0, MIN_MAC_FRAME_BYTES - 1),
      new Uint8Array(MAX_FRAME_BYTES + 1).fill(1),
      new Uint8Array(200),
      new Uint8Array(200).fill(0xff),
      Uint8Array.from({ length: 300 }, (_, i) => (i * 97 + 13) & 0xff),
      withHeader([WIRE_VERSION_MAC + 1]),
      withHeader([0]),
      withHeader([0xff]),
      withHeader([WIRE_VERSION_MAC, 0]),
      withHeader([WIRE_VERSION_MAC, 2, 0x41, 0x31]), // 'A1'
      withHeader([WIRE_VERSION, 0]),
      withHeader([WIRE_VERSION, MAX_ID_CHARS + 1]),
      withHeader([WIRE_VERSION, 2, 0x41, 0x31]), // 'A1'
      withHeader([WIRE_VERSION, 2, 0x31, 0x61]), // '1a'
      withHeader([WIRE_VERSION, 2, 0xe9, 0x61]),
      withHeader([WIRE_VERSION, 1, 0x2d]), // '-'
      (() => {
        const out = new Uint8Array(MIN_FRAME_BYTES);
        out.set([WIRE_VERSION, 3, 0x61, 0x62, 0x63]); // id runs into the CRC
        return out;
      })(),
      (() => {
        const out = new Uint8Array(MIN_MAC_FRAME_BYTES);
        out.set([WIRE_VERSION_MAC, 2, 0x61, 0x62]); // MAC'd layout: no byte left for a body
        return out;
      })(),
    ];
    for (const g of garbage) expect(peekSender(g), hex(g.subarray(0, 6))).toBe(null);
    expect(peekSender(withHeader([WIRE_VERSION, 2, 0x61, 0x39]))).toBe('a9');
    expect(peekSender(withHeader([WIRE_VERSION_MAC, 2, 0x61, 0x39]))).toBe('a9');
    // the smallest MAC'd layout with room for a one-byte body
    const smallest = new Uint8Array(MIN_MAC_FRAME_BYTES);
    smallest.set([WIRE_VERSION_MAC, 1, 0x62]);
    expect(peekSender(smallest)).toBe('b');
  });
});
