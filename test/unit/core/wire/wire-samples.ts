// Shared fixtures of the wire tests: fixed keys for a small cluster (signing keys and the link
// keys derived from them), a representative value of every payload and item type of
// src/core/wire/messages.ts, frames assembled by hand (docs/PROTOCOL.md §2.1, MAC'd ones §2.4)
// and msgpack written by hand in any width, canonical or not. Not a test file itself.
import { createHash } from 'node:crypto';
import { LOGS_CHUNK_BYTES, MAC_BYTES, SIGNATURE_BYTES, WIRE_VERSION, WIRE_VERSION_MAC } from '../../../../src/core/constants.ts';
import type { LinkAuth, Signer, Verifier } from '../../../../src/core/ports.ts';
import { crc32 } from '../../../../src/core/wire/crc32.ts';
import { itemToWire, pack, signCG } from '../../../../src/core/wire/frame.ts';
import type {
  AgentRequest, GroupBody, GroupCommand, GroupMsgCG, GroupMsgGC, HeartbeatInfo, Item, ItemWire, PtpPayload,
  PtpPayloadWire, SignedCG,
} from '../../../../src/core/wire/messages.ts';
import { publicKeyFromSeed } from '../../../../src/io/keys.ts';
import { createNodeLinkAuth } from '../../../../src/io/link-auth-node.ts';
import { createNodeSigner, createNodeVerifier } from '../../../../src/io/signer-node.ts';

export const CLUSTER = '0f1e2d3c4b5a69788796a5b4c3d2e1f0';
export const IDS = ['r1', 'r2', 'r3', 'a1', 'a2', 'scc', 'op'] as const;

export const seedOf = (id: string): Uint8Array =>
  new Uint8Array(createHash('sha256').update(`trine-wire-test:${id}`).digest());

const signerCache = new Map<string, Signer>();
/** A real node:crypto signer with a fixed seed (also for ids the verifier does not know). */
export function signerOf(id: string): Signer {
  let s = signerCache.get(id);
  if (s === undefined) {
    s = createNodeSigner(id, seedOf(id));
    signerCache.set(id, s);
  }
  return s;
}

export const verifier: Verifier = createNodeVerifier(new Map(IDS.map((id) => [id, publicKeyFromSeed(seedOf(id))] as const)));

const linkCache = new Map<string, LinkAuth>();
/** Real link keys (createNodeLinkAuth, PROTOCOL §2.4) of `id`, derived from the same seed as
 *  signerOf(id), with every process of `peers` (default: the cluster's IDS; any id works, a
 *  peer's public key comes from seedOf too), for `cluster` (the HKDF salt). */
export function linkAuthOf(id: string, peers: readonly string[] = IDS, cluster = CLUSTER): LinkAuth {
  const key = `${id}|${peers.join(',')}|${cluster}`;
  let l = linkCache.get(key);
  if (l === undefined) {
    l = createNodeLinkAuth(id, seedOf(id), new Map(peers.map((p) => [p, publicKeyFromSeed(seedOf(p))] as const)), cluster);
    linkCache.set(key, l);
  }
  return l;
}

/** The tag `link` (default: linkAuthOf(from)) gives bytes `from` sends to `to`; throws when it
 *  has no key for `to` (a bug in the test). */
export function tagOf(from: string, to: string, data: Uint8Array, link: LinkAuth = linkAuthOf(from)): Uint8Array {
  const t = link.tag(to, data);
  if (t === null) throw new Error(`no link key ${from} → ${to}`);
  return t;
}

const bytesOf = (n: number, salt = 0): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 131 + salt) & 0xff);

export const agentRequests: AgentRequest[] = [
  { type: 'node.join', slots: 8, resync: false },
  { type: 'echo', tag: 'ping-1', fanout: 'self', count: 1, data: bytesOf(0) },
  { type: 'echo', tag: 'ünïcödé ✓', fanout: 'all', count: 1000, data: bytesOf(300, 1) },
  { type: 'error.report', gssn: 2 ** 40, count: 3, kind: 'replica-timeout', suspects: ['r2'] },
  { type: 'error.report', gssn: 0, count: 1, kind: 'mismatch', suspects: [] },
];

export const groupCommands: GroupCommand[] = [
  { type: 'echo.reply', origin: 'a1', tag: 't', rsn: 17, index: 0, data: bytesOf(5, 2) },
  { type: 'echo.reply', origin: 'a2', tag: '', rsn: Number.MAX_SAFE_INTEGER, index: 999, data: bytesOf(0) },
];

export function cgOf(client: string, csn: number, payload: AgentRequest, inc = 1): GroupMsgCG {
  return { csn, gssnAck: csn * 3, payload, client, inc };
}

export const groupMsgsGC: GroupMsgGC[] = groupCommands.map((payload, i) => ({
  gssn: 100 + i, prevGssn: i === 0 ? 0 : 99, csnAck: 4 + i, destInc: 1_700_000_000_000 + i, payload, dest: i === 0 ? 'a1' : 'a2',
}));

export const heartbeatInfos: HeartbeatInfo[] = [
  { type: 'replica', role: 'primary', rsn: 12, gssn: 34, digest: bytesOf(32, 3), view: 2, ckptRsn: 0, ckptDigest: new Uint8Array(32) },
  { type: 'replica', role: 'backup', rsn: 0, gssn: 0, digest: new Uint8Array(32), view: 0, ckptRsn: 16, ckptDigest: bytesOf(32, 5) },
  { type: 'agent', gssnDelivered: 9, csnSent: 2 ** 33 },
];

/** A CG signed by its client agent. */
export function signedCGOf(client: string, csn: number, payload: AgentRequest): SignedCG {
  return signCG(cgOf(client, csn, payload), signerOf(client));
}

export function ptpPayloads(): PtpPayload[] {
  return [
    { type: 'wrapper', rsn: 5, signed: signedCGOf('a1', 3, agentRequests[1] as AgentRequest) },
    { type: 'wrapper', rsn: 0, signed: signedCGOf('a2', 1, agentRequests[0] as AgentRequest) },
    { type: 'notice', text: 'operator note: draining node 3' },
    { type: 'notice', text: '' },
    { type: 'error.report', gssn: 7, kind: 'mismatch', suspects: ['r1', 'r3'] },
  ];
}

/** Every item type (and every body variant) that process `from` may send. A `grp` CG is always
 *  the sender's own (relays travel wrapped in `ptp`). */
export function itemsFrom(from: string): Item[] {
  const groupBodies: GroupBody[] = [
    { type: 'cg', signed: signedCGOf(from, 1, agentRequests[0] as AgentRequest) },
    { type: 'cg', signed: signedCGOf(from, 2, agentRequests[3] as AgentRequest) },
    ...groupMsgsGC.map((gc): GroupBody => ({ type: 'gc', gc })),
  ];
  return [
    { type: 'hello', inc: 1, echo: 0, established: false },
    { type: 'hello', inc: 1_700_000_000_000, echo: 1_700_000_000_001, established: true },
    { type: 'ptp', srcInc: 1, destInc: 2, seq: 10, ackSeq: 9, body: null },
    ...ptpPayloads().map((body, i): Item => ({ type: 'ptp', srcInc: 1, destInc: 2, seq: 11 + i, ackSeq: 9, body })),
    ...groupBodies.map((body, i): Item => ({ type: 'grp', srcInc: 3, destInc: 4, seq: 1 + i, body })),
    { type: 'gack', srcInc: 3, destInc: 4, ack: 77, seq: 6 },
    ...heartbeatInfos.map((info, i): Item => ({ type: 'hb', inc: 5, counter: i, info })),
    { type: 'probe', nonce: 0xdeadbeef },
    { type: 'probe.reply', nonce: 0xdeadbeef },
    { type: 'challenge.ask', nonce: 1 },
    { type: 'challenge', nonce: 1, challenge: { inc: 1_700_000_000_000, serial: 0, atMs: 1_700_000_000_123 } },
    { type: 'status.query', nonce: 1, challenge: { inc: 1_700_000_000_000, serial: 0, atMs: 1_700_000_000_123 } },
    { type: 'status.reply', nonce: 1, json: JSON.stringify({ role: 'primary', rsn: 12, nodes: ['n1', 'n2'] }) },
    { type: 'bind.proof', nonce: Uint8Array.from({ length: 16 }, (_, i) => i * 17), challenge: Uint8Array.from({ length: 16 }, (_, i) => 255 - i) },
    { type: 'bind.proof', nonce: Uint8Array.from({ length: 16 }, (_, i) => i), challenge: new Uint8Array() },
    ...logsItems,
  ];
}

/** Reads of task output and their answers (PROTOCOL §7.1), at and inside their limits. */
export const logsItems: Item[] = [
  { type: 'logs.read', nonce: 7, task: 't3', vpid: 2, stream: 'err', offset: 2 ** 40, maxBytes: LOGS_CHUNK_BYTES, challenge: { inc: 2 ** 48 - 1, serial: 9, atMs: 5 } },
  { type: 'logs.read', nonce: 0, task: 't1024', vpid: 1023, stream: 'out', offset: 0, maxBytes: 0, challenge: { inc: 0, serial: 0, atMs: 0 } },
  { type: 'logs.data', nonce: 7, ok: true, error: '', offset: 0, bytes: bytesOf(300, 6), size: 300, missing: false },
  { type: 'logs.data', nonce: 8, ok: true, error: '', offset: 0, bytes: bytesOf(0), size: 0, missing: true },
  { type: 'logs.data', nonce: 9, ok: false, error: 'cannot open tasks/t3/2.err: EACCES', offset: 5, bytes: bytesOf(0), size: 0, missing: false },
];

/** The wire form of an item, as the frame codec sends it. */
export const toWire = (item: Item): ItemWire => itemToWire(item);

/** The same value with every plain object's keys in reverse insertion order. */
export function reverseKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v: unknown) => reverseKeys(v)) as T;
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return value;
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)])) as T;
}

// ---- frames by hand (docs/PROTOCOL.md §2.1) -------------------------------------------------

/** The fixed header: version ‖ length of the sender id ‖ sender id (ASCII). */
export function headerOf(from: string, version = WIRE_VERSION): Uint8Array {
  return Uint8Array.from([version, from.length, ...Buffer.from(from, 'latin1')]);
}

/** signed ‖ crc32(signed) ‖ sig: the frame layout, with a CRC that is right whatever `signed` is. */
export function assemble(signed: Uint8Array, sig: Uint8Array): Uint8Array {
  const out = new Uint8Array(signed.length + 4 + sig.length);
  out.set(signed, 0);
  new DataView(out.buffer).setUint32(signed.length, crc32(signed), false);
  out.set(sig, signed.length + 4);
  return out;
}

/** A frame around a hand-made body, signed by `signer` over header ‖ body as encodeFrame does.
 *  `from` (default: the signer's id) and `version` go into the header. */
export function sealBody(body: Uint8Array, signer: Signer, header: { from?: string; version?: number } = {}): Uint8Array {
  const signed = Buffer.concat([headerOf(header.from ?? signer.id, header.version), body]);
  return assemble(signed, signer.sign(signed));
}

/** A MAC'd frame (version 2, PROTOCOL §2.4) around a hand-made body: header ‖ body ‖ crc ‖ the
 *  tag of header ‖ body with the link key `from` → `to` (of `link`, default linkAuthOf(from)).
 *  `header` (default: `from`) is the sender id written into the header. */
export function sealMacBody(body: Uint8Array, from: string, to: string, opts: { header?: string; link?: LinkAuth } = {}): Uint8Array {
  const signed = Buffer.concat([headerOf(opts.header ?? from, WIRE_VERSION_MAC), body]);
  return assemble(signed, tagOf(from, to, signed, opts.link));
}

/** The parts of a frame as encodeFrame lays it out (no checks: our own frames only). `sig` is
 *  the authenticator: the signature of a version-1 frame, the tag of a version-2 one. */
export function splitFrame(data: Uint8Array): { header: Uint8Array; body: Uint8Array; signed: Uint8Array; sig: Uint8Array } {
  const bodyStart = 2 + (data[1] as number);
  const signedEnd = data.length - 4 - (data[0] === WIRE_VERSION_MAC ? MAC_BYTES : SIGNATURE_BYTES);
  return {
    header: data.slice(0, bodyStart),
    body: data.slice(bodyStart, signedEnd),
    signed: data.slice(0, signedEnd),
    sig: data.slice(signedEnd + 4),
  };
}

// ---- msgpack by hand, every width explicit ---------------------------------------------------

const be = (n: number | bigint, bytes: 1 | 2 | 4 | 8, signed = false): number[] => {
  const b = new Uint8Array(bytes);
  const v = new DataView(b.buffer);
  if (bytes === 1) (signed ? v.setInt8(0, Number(n)) : v.setUint8(0, Number(n)));
  else if (bytes === 2) (signed ? v.setInt16(0, Number(n)) : v.setUint16(0, Number(n)));
  else if (bytes === 4) (signed ? v.setInt32(0, Number(n)) : v.setUint32(0, Number(n)));
  else (signed ? v.setBigInt64(0, BigInt(n)) : v.setBigUint64(0, BigInt(n)));
  return [...b];
};
const cat = (parts: readonly Uint8Array[]): Uint8Array => Uint8Array.from(Buffer.concat(parts));
type Width = 'fix' | 8 | 16 | 32;
/** The header of a string, binary, array or map of `n` entries in the width asked for; a width
 *  that cannot hold `n` is a bug in the test. */
function lengthHeader(n: number, width: Width, codes: { fix?: number; fixMax?: number; w8?: number; w16: number; w32: number }): Uint8Array {
  const fits = width === 'fix' ? codes.fix !== undefined && n <= (codes.fixMax as number) : width === 8 ? codes.w8 !== undefined && n <= 0xff : width === 16 ? n <= 0xffff : n <= 0xffffffff;
  if (!fits) throw new Error(`msgpack width ${width} cannot hold ${n}`);
  if (width === 'fix') return Uint8Array.of((codes.fix as number) | n);
  if (width === 8) return Uint8Array.of(codes.w8 as number, n);
  if (width === 16) return Uint8Array.of(codes.w16, ...be(n, 2));
  return Uint8Array.of(codes.w32, ...be(n, 4));
}
const STR = { fix: 0xa0, fixMax: 31, w8: 0xd9, w16: 0xda, w32: 0xdb };
const BIN = { w8: 0xc4, w16: 0xc5, w32: 0xc6 };
const ARRAY = { fix: 0x90, fixMax: 15, w16: 0xdc, w32: 0xdd };
const MAP = { fix: 0x80, fixMax: 15, w16: 0xde, w32: 0xdf };

/** Hand-written msgpack values: any width the format allows, canonical or not, and the type
 *  bytes Trine refuses (maps, extensions, float32). */
export const mp = {
  nil: (): Uint8Array => Uint8Array.of(0xc0),
  bool: (v: boolean): Uint8Array => Uint8Array.of(v ? 0xc3 : 0xc2),
  /** Positive (0..127) or negative (-32..-1) fixint. */
  fixint: (n: number): Uint8Array => Uint8Array.of(n & 0xff),
  u8: (n: number): Uint8Array => Uint8Array.of(0xcc, ...be(n, 1)),
  u16: (n: number): Uint8Array => Uint8Array.of(0xcd, ...be(n, 2)),
  u32: (n: number): Uint8Array => Uint8Array.of(0xce, ...be(n, 4)),
  u64: (n: number | bigint): Uint8Array => Uint8Array.of(0xcf, ...be(n, 8)),
  i8: (n: number): Uint8Array => Uint8Array.of(0xd0, ...be(n, 1, true)),
  i16: (n: number): Uint8Array => Uint8Array.of(0xd1, ...be(n, 2, true)),
  i32: (n: number): Uint8Array => Uint8Array.of(0xd2, ...be(n, 4, true)),
  i64: (n: number | bigint): Uint8Array => Uint8Array.of(0xd3, ...be(n, 8, true)),
  f32: (n: number): Uint8Array => {
    const b = new Uint8Array(5);
    b[0] = 0xca;
    new DataView(b.buffer).setFloat32(1, n);
    return b;
  },
  f64: (n: number): Uint8Array => {
    const b = new Uint8Array(9);
    b[0] = 0xcb;
    new DataView(b.buffer).setFloat64(1, n);
    return b;
  },
  /** A string from its raw bytes (which need not be UTF-8). */
  strBytes: (bytes: Uint8Array, width: Width): Uint8Array => cat([lengthHeader(bytes.length, width, STR), bytes]),
  str: (s: string, width: Width): Uint8Array => mp.strBytes(new TextEncoder().encode(s), width),
  bin: (bytes: Uint8Array, width: Exclude<Width, 'fix'>): Uint8Array => cat([lengthHeader(bytes.length, width, BIN), bytes]),
  array: (items: readonly Uint8Array[], width: Exclude<Width, 8> = 'fix'): Uint8Array => cat([lengthHeader(items.length, width, ARRAY), ...items]),
  /** Maps are refused by Trine's decoder; written here to prove it. */
  map: (entries: readonly (readonly [Uint8Array, Uint8Array])[], width: Exclude<Width, 8> = 'fix'): Uint8Array =>
    cat([lengthHeader(entries.length, width, MAP), ...entries.flat()]),
};

/** Every msgpack encoding the format allows for one value, canonical or not. */
function encodingsOf(value: unknown): Array<(inner: (v: unknown) => Uint8Array) => Uint8Array> {
  if (value === null || value === undefined) return [() => mp.nil()];
  if (typeof value === 'boolean') return [() => mp.bool(value)];
  if (typeof value === 'number') {
    const out: Array<() => Uint8Array> = [() => mp.f64(value)];
    if (!Number.isSafeInteger(value) || Object.is(value, -0)) return out;
    const v = value;
    if (v >= -32 && v <= 127) out.push(() => mp.fixint(v));
    if (v >= 0) {
      if (v <= 0xff) out.push(() => mp.u8(v));
      if (v <= 0xffff) out.push(() => mp.u16(v));
      if (v <= 0xffffffff) out.push(() => mp.u32(v));
      out.push(() => mp.u64(v));
    }
    if (v >= -128 && v <= 127) out.push(() => mp.i8(v));
    if (v >= -32768 && v <= 32767) out.push(() => mp.i16(v));
    if (v >= -(2 ** 31) && v < 2 ** 31) out.push(() => mp.i32(v));
    out.push(() => mp.i64(v));
    return out;
  }
  if (typeof value === 'string') {
    const bytes = new TextEncoder().encode(value);
    const widths: Width[] = [...(bytes.length <= 31 ? ['fix' as const] : []), ...(bytes.length <= 0xff ? [8 as const] : []), ...(bytes.length <= 0xffff ? [16 as const] : []), 32];
    return widths.map((w) => () => mp.strBytes(bytes, w));
  }
  if (value instanceof Uint8Array) {
    const widths: Array<8 | 16 | 32> = [...(value.length <= 0xff ? [8 as const] : []), ...(value.length <= 0xffff ? [16 as const] : []), 32];
    return widths.map((w) => () => mp.bin(value, w));
  }
  if (Array.isArray(value)) {
    const widths: Array<'fix' | 16 | 32> = [...(value.length <= 15 ? ['fix' as const] : []), ...(value.length <= 0xffff ? [16 as const] : []), 32];
    return widths.map((w) => (inner) => mp.array(value.map(inner), w));
  }
  throw new Error(`no msgpack encoding for ${typeof value}`);
}

/** Encode a tree of nil, booleans, numbers, strings, bytes and arrays choosing, at every node
 *  (in pre-order), one of the encodings msgpack allows: `choose(n, value)` picks an index below
 *  n. With `canonicalChoice` it writes exactly what pack() writes. */
export function encodeLoose(tree: unknown, choose: (n: number, value: unknown) => number): Uint8Array {
  const inner = (v: unknown): Uint8Array => {
    const options = encodingsOf(v);
    const pick = options[choose(options.length, v)];
    if (pick === undefined) throw new Error('choose() picked no encoding');
    return pick(inner);
  };
  return inner(tree);
}

/** The choice that makes encodeLoose write msgpackr's canonical bytes: the shortest header of
 *  an array, the very bytes pack() writes for a scalar (for numbers beyond 2^32 that is float64,
 *  not the shortest). */
export function canonicalChoice(_n: number, value: unknown): number {
  if (Array.isArray(value)) return 0;
  const want = Buffer.from(pack(value));
  const i = encodingsOf(value).findIndex((write) => want.equals(write(() => new Uint8Array(0))));
  if (i < 0) throw new Error(`no canonical encoding among the options for ${String(value)}`);
  return i;
}
