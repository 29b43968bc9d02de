// The frame codec of src/core/wire/frame.ts (docs/PROTOCOL.md §2): round trips of every item
// type under real Ed25519 signatures, and every drop code the decoder can return, including
// forged or misrouted CGs inside otherwise valid frames.
import { describe, expect, it } from 'vitest';
import { MAX_FRAME_BYTES, MAX_ITEMS_PER_FRAME, MIN_FRAME_BYTES, SIGNATURE_BYTES, WIRE_VERSION } from '../../../../src/core/constants.ts';
import type { Signer } from '../../../../src/core/ports.ts';
import type { Result } from '../../../../src/core/result.ts';
import { crc32 } from '../../../../src/core/wire/crc32.ts';
import { decodeFrame, encodeFrame, openCG, pack, peekSender, signCG } from '../../../../src/core/wire/frame.ts';
import { frameBody, type AgentRequest, type Frame, type Item, type ItemWire } from '../../../../src/core/wire/messages.ts';
import { agentRequests, cgOf, CLUSTER, itemsFrom, signedCGOf, signerOf, verifier } from './wire-samples.ts';

const ctxFor = (self: string) => ({ cluster: CLUSTER, self, verifier });
const enc = (from: string, to: string, items: Item[], cluster = CLUSTER): Uint8Array =>
  encodeFrame({ from, to, items }, { cluster, signer: signerOf(from) });
const codeOf = (r: Result<unknown>): string => (r.ok ? 'ok' : r.code);
const frameOf = (r: Result<Frame>): Frame => {
  if (!r.ok) throw new Error(`expected a frame, got ${r.code}: ${r.detail}`);
  return r.value;
};

/** body ‖ crc32(body) ‖ signature, as encodeFrame lays it out, for hand-made bodies. */
function seal(body: Uint8Array, signer: Signer): Uint8Array {
  const out = new Uint8Array(body.length + 4 + SIGNATURE_BYTES);
  out.set(body, 0);
  new DataView(out.buffer).setUint32(body.length, crc32(body), false);
  out.set(signer.sign(body), body.length + 4);
  return out;
}
const sealTree = (tree: unknown, signer: Signer): Uint8Array => seal(pack(tree), signer);
const bodyTree = (from: string, to: string, items: ItemWire[], version = WIRE_VERSION, cluster = CLUSTER): unknown =>
  frameBody.enc({ version, cluster, from, to, items });

/** Plain copies of byte arrays so deep equality compares bytes, not classes. */
function normal(v: unknown): unknown {
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('hex') };
  if (Array.isArray(v)) return v.map(normal);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normal(x)]));
  return v;
}

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

  it('lays out body ‖ crc32 ‖ signature, signed by the sender', () => {
    const data = enc('a1', 'r1', [{ type: 'probe', nonce: 1 }]);
    const bodyEnd = data.length - 4 - SIGNATURE_BYTES;
    const body = data.subarray(0, bodyEnd);
    expect(new DataView(data.buffer).getUint32(bodyEnd, false)).toBe(crc32(body));
    expect(verifier.verify('a1', body, data.subarray(bodyEnd + 4))).toBe(true);
  });

  it('encodes equal frames to equal bytes (Ed25519 is deterministic)', () => {
    const items = itemsFrom('a2');
    expect(Buffer.from(enc('a2', 'r1', items)).equals(Buffer.from(enc('a2', 'r1', itemsFrom('a2'))))).toBe(true);
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
    const frame = frameOf(decodeFrame(enc('r1', 'r2', [{ type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: 3, signed } }]), ctxFor('r2')));
    const item = frame.items[0];
    expect(item?.type === 'ptp' && item.body?.type === 'wrapper' ? item.body.signed.cg.client : null).toBe('a2');
    expect(openCG(signed.bytes, signed.sig, verifier).ok).toBe(true);
  });

  it('peekSender reads the claimed sender without verifying', () => {
    const data = enc('a1', 'r1', []);
    expect(peekSender(data)).toBe('a1');
    data[data.length - 1] = (data[data.length - 1] as number) ^ 1;
    expect(peekSender(data)).toBe('a1');
    expect(peekSender(new Uint8Array(10))).toBe(null);
    expect(peekSender(sealTree([1, 2, 3], signerOf('a1')))).toBe(null);
  });
});

describe('decodeFrame drop codes', () => {
  const good = (): Uint8Array => enc('a1', 'r1', [{ type: 'probe', nonce: 7 }]);

  it('WIRE_MALFORMED for something that is not bytes', () => {
    expect(codeOf(decodeFrame('frame' as unknown as Uint8Array, ctxFor('r1')))).toBe('WIRE_MALFORMED');
    expect(codeOf(decodeFrame(null as unknown as Uint8Array, ctxFor('r1')))).toBe('WIRE_MALFORMED');
  });

  it('WIRE_TOO_SHORT below the minimal frame', () => {
    for (const n of [0, 1, 4 + SIGNATURE_BYTES, MIN_FRAME_BYTES - 1]) {
      expect(codeOf(decodeFrame(new Uint8Array(n), ctxFor('r1')))).toBe('WIRE_TOO_SHORT');
    }
    expect(codeOf(decodeFrame(new Uint8Array(MIN_FRAME_BYTES), ctxFor('r1')))).toBe('WIRE_CHECKSUM');
  });

  it('WIRE_TOO_LARGE above MAX_FRAME_BYTES, checked before any work', () => {
    expect(codeOf(decodeFrame(new Uint8Array(MAX_FRAME_BYTES + 1), ctxFor('r1')))).toBe('WIRE_TOO_LARGE');
    expect(codeOf(decodeFrame(new Uint8Array(MAX_FRAME_BYTES), ctxFor('r1')))).toBe('WIRE_CHECKSUM');
  });

  it('WIRE_CHECKSUM for a flipped bit in the body or in the CRC', () => {
    const data = good();
    const bodyEnd = data.length - 4 - SIGNATURE_BYTES;
    for (const at of [0, 5, bodyEnd - 1, bodyEnd, bodyEnd + 3]) {
      const bad = Uint8Array.from(data);
      bad[at] = (bad[at] as number) ^ 0x10;
      expect(codeOf(decodeFrame(bad, ctxFor('r1')))).toBe('WIRE_CHECKSUM');
    }
  });

  it('WIRE_MALFORMED for bodies that are not msgpack or not a frame body (CRC valid)', () => {
    const s = signerOf('a1');
    const tree = bodyTree('a1', 'r1', [{ type: 'probe', nonce: 1 }]) as unknown[];
    const cases: Uint8Array[] = [
      seal(Uint8Array.of(0xc1), s), // a byte msgpack never uses
      seal(Uint8Array.of(0x92, 0x01), s), // truncated array
      seal(Uint8Array.from([...pack(tree), 0x00]), s), // trailing byte after a valid body
      sealTree({ version: 1 }, s),
      sealTree('frame', s),
      sealTree(tree.slice(0, 4), s),
      sealTree([...tree, 0], s),
      sealTree([tree[0], tree[1], tree[2], tree[3], [[6]]], s), // probe without its nonce
      sealTree([tree[0], tree[1], tree[2], tree[3], [[6, -1]]], s),
      sealTree([tree[0], tree[1], 'A1', tree[3], tree[4]], s),
      sealTree([tree[0], tree[1], tree[2], tree[3], 'items'], s),
    ];
    for (const data of cases) expect(codeOf(decodeFrame(data, ctxFor('r1')))).toBe('WIRE_MALFORMED');
  });

  it('WIRE_VERSION for another wire version, told apart from garbage', () => {
    for (const version of [0, WIRE_VERSION + 1, 2 ** 31]) {
      const data = sealTree(bodyTree('a1', 'r1', [], version), signerOf('a1'));
      expect(codeOf(decodeFrame(data, ctxFor('r1')))).toBe('WIRE_VERSION');
    }
  });

  it('WIRE_UNKNOWN_TYPE for an item or payload code this version does not know', () => {
    const s = signerOf('a1');
    const tree = bodyTree('a1', 'r1', []) as unknown[];
    const withItems = (items: unknown[]): Uint8Array => sealTree([tree[0], tree[1], tree[2], tree[3], items], s);
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

  it('SIG_UNKNOWN_KEY for a sender outside the key table', () => {
    expect(codeOf(decodeFrame(enc('x9', 'r1', [{ type: 'probe', nonce: 1 }]), ctxFor('r1')))).toBe('SIG_UNKNOWN_KEY');
  });

  it('SIG_INVALID for a flipped signature bit (the CRC covers the body only) or a forged sender', () => {
    const data = good();
    for (const at of [data.length - SIGNATURE_BYTES, data.length - 1, data.length - 30]) {
      const bad = Uint8Array.from(data);
      bad[at] = (bad[at] as number) ^ 0x01;
      expect(codeOf(decodeFrame(bad, ctxFor('r1')))).toBe('SIG_INVALID');
    }
    // r2 claims to be a1: a valid Ed25519 signature, by the wrong key
    const forged: Signer = { id: 'a1', sign: (d) => signerOf('r2').sign(d) };
    expect(codeOf(decodeFrame(encodeFrame({ from: 'a1', to: 'r1', items: [] }, { cluster: CLUSTER, signer: forged }), ctxFor('r1')))).toBe('SIG_INVALID');
  });

  it('SIG_INVALID for a relayed CG whose agent signature was tampered, inside a validly signed wrapper', () => {
    const signed = signedCGOf('a2', 4, agentRequests[0] as AgentRequest);
    const tamperedSig = Uint8Array.from(signed.sig);
    tamperedSig[10] = (tamperedSig[10] as number) ^ 0x80;
    const wrap = (s: typeof signed): Item => ({ type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: 2, signed: s } });
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrap(signed)]), ctxFor('r2')))).toBe('ok');
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrap({ ...signed, sig: tamperedSig })]), ctxFor('r2')))).toBe('SIG_INVALID');
    // a replica that rewrites the CG content (here: its CSN) cannot re-sign it as the agent
    const rewritten = signCG({ ...signed.cg, csn: 5 }, signerOf('r1'));
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrap({ ...rewritten, sig: signed.sig })]), ctxFor('r2')))).toBe('SIG_INVALID');
    expect(codeOf(decodeFrame(enc('r1', 'r2', [wrap({ ...signed, cg: signed.cg, bytes: rewritten.bytes })]), ctxFor('r2')))).toBe('SIG_INVALID');
  });

  it('SIG_UNKNOWN_KEY and WIRE_MALFORMED for a wrapped CG of an unknown agent or of garbage bytes', () => {
    const stranger = signCG(cgOf('a9', 1, { type: 'node.join', slots: 1 }), signerOf('a9'));
    const wrap = (bytes: Uint8Array, sig: Uint8Array): ItemWire => ({ type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: 1, cgBytes: bytes, cgSig: sig } });
    const s = signerOf('r1');
    expect(codeOf(decodeFrame(sealTree(bodyTree('r1', 'r2', [wrap(stranger.bytes, stranger.sig)]), s), ctxFor('r2')))).toBe('SIG_UNKNOWN_KEY');
    expect(codeOf(decodeFrame(sealTree(bodyTree('r1', 'r2', [wrap(Uint8Array.of(0xc1), stranger.sig)]), s), ctxFor('r2')))).toBe('WIRE_MALFORMED');
    expect(codeOf(decodeFrame(sealTree(bodyTree('r1', 'r2', [wrap(pack([1, 2]), stranger.sig)]), s), ctxFor('r2')))).toBe('WIRE_MALFORMED');
  });

  it("SIG_INVALID for a lane-1 grp CG whose client is not the frame's sender", () => {
    // a2's genuine CG, sent on lane 1 by r1 instead of being wrapped: relays must travel wrapped
    const signed = signedCGOf('a2', 3, agentRequests[0] as AgentRequest);
    const grp: Item = { type: 'grp', srcInc: 1, destInc: 1, seq: 1, body: { type: 'cg', signed } };
    expect(codeOf(decodeFrame(enc('r1', 'a1', [grp]), ctxFor('a1')))).toBe('SIG_INVALID');
    expect(codeOf(decodeFrame(enc('a2', 'r1', [grp]), ctxFor('r1')))).toBe('ok');
    // one bad item spoils the whole frame, whatever its position
    expect(codeOf(decodeFrame(enc('r1', 'a1', [{ type: 'probe', nonce: 1 }, grp]), ctxFor('a1')))).toBe('SIG_INVALID');
  });
});
