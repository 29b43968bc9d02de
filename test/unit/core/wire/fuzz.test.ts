// Fuzzing of the wire decoders (STYLE.md 5: every decoder is total). Over 100,000 frames go
// through decodeFrame: random bytes; random bodies under a valid header and CRC but no valid
// signature, and mutations of valid frames with the CRC recomputed and the signature left stale
// (these must all stop at the header, CRC or signature: an unauthenticated body is never parsed,
// docs/PROTOCOL.md §2.1); whole-frame mutations; and the signer-cooperating path, where mutated
// bodies, mutated CGs and non-canonical re-encodings are re-signed with the real keys so they
// reach the strict msgpack decoder, the canonicality check and the schemas. MAC'd frames
// (version 2, PROTOCOL §2.4) the same way: random bodies and mutated frames under a wrong or
// stale tag stop at the header, CRC or tag, and the link-key-cooperating path re-tags mutated
// bodies with the real link keys so they reach the strict decoder, the schemas and the
// signed-order check (SIG_REQUIRED). Every decoder has link keys, as in production. Every
// schema's `dec` also gets random and near-valid trees. Nothing may throw; every failure is a
// decoder drop code. Seeded: a failure prints the seed; replay with TRINE_FUZZ_SEED=<n>.
import { concatBytes } from '../../../../src/base/bytes.ts';
import { describe, expect, it } from 'vitest';
import {
  MAC_BYTES, MAX_FRAME_BYTES, MAX_TEXT_CHARS, MIN_FRAME_BYTES, MIN_MAC_FRAME_BYTES, SIGNATURE_BYTES, WIRE_VERSION, WIRE_VERSION_MAC,
} from '../../../../src/core/constants.ts';
import type { DropCode } from '../../../../src/base/result.ts';
import { decodeFrame, encodeFrame, pack, unpack, type DecodeContext, type EncodeContext } from '../../../../src/core/wire/frame.ts';
import * as messages from '../../../../src/core/wire/messages.ts';
import type { AgentRequest, Frame, Item, ItemWire } from '../../../../src/core/wire/messages.ts';
import {
  bool, bytes, list, nullable, oneOf, struct, text, token, uint, union, type Schema,
} from '../../../../src/core/wire/schema.ts';
import {
  agentRequests, assemble, canonicalChoice, cgOf, CLUSTER, encodeLoose, groupCommands, groupMsgsGC, headerOf, heartbeatInfos,
  itemsFrom, linkAuthOf, ptpPayloads, signedCGOf, signerOf, splitFrame, toWire, verifier,
} from './wire-samples.ts';

const SEED = (Number(process.env.TRINE_FUZZ_SEED ?? 0x7121e) >>> 0) || 1;
const REPLAY = `replay with: TRINE_FUZZ_SEED=${SEED} npx vitest run test/unit/core/wire/fuzz.test.ts`;

// ---- seeded randomness ---------------------------------------------------------------------

/** mulberry32: tiny, fast, and good enough to drive a fuzzer reproducibly. */
class Rng {
  private a: number;
  constructor(seed: number) {
    this.a = seed >>> 0;
  }
  next(): number {
    this.a = (this.a + 0x6d2b79f5) >>> 0;
    let t = this.a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(bound: number): number {
    return Math.floor(this.next() * bound);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(values: readonly T[]): T {
    return values[this.int(values.length)] as T;
  }
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const v = (this.next() * 4294967296) >>> 0;
      out[i] = v & 0xff;
      if (i + 1 < n) out[i + 1] = (v >>> 8) & 0xff;
      if (i + 2 < n) out[i + 2] = (v >>> 16) & 0xff;
      if (i + 3 < n) out[i + 3] = v >>> 24;
    }
    return out;
  }
}
/** Each test draws from its own stream, so one test replays without running the others. */
const rngFor = (salt: number): Rng => new Rng((SEED ^ Math.imul(salt, 0x9e3779b1)) >>> 0);

// ---- result checking ----------------------------------------------------------------------

/** The codes decodeFrame may return; the session-level codes belong to later layers. A new
 *  DropCode must be classified here (the Record type forces it). */
const DECODER_CODES: Record<DropCode, boolean> = {
  WIRE_TOO_SHORT: true, WIRE_TOO_LARGE: true, WIRE_CHECKSUM: true, WIRE_MALFORMED: true, WIRE_VERSION: true,
  WIRE_UNKNOWN_TYPE: true, WIRE_LIMIT: true, WIRE_FOREIGN_CLUSTER: true, WIRE_MISADDRESSED: true,
  SIG_UNKNOWN_KEY: true, SIG_INVALID: true, MAC_INVALID: true, SIG_REQUIRED: true,
  REPLAYED: false, DUPLICATE: false, STALE_SESSION: false, OUT_OF_WINDOW: false, NOT_A_MEMBER: false, UNEXPECTED: false,
};
/** The checks that come before the signature (PROTOCOL §2.2 steps 1–7): all an unsigned frame
 *  may ever reach. A header WIRE_MALFORMED names the sender id; anything else is the body. */
const PRE_AUTH_CODES = new Set<string>(['WIRE_TOO_SHORT', 'WIRE_TOO_LARGE', 'WIRE_VERSION', 'WIRE_CHECKSUM', 'SIG_UNKNOWN_KEY', 'SIG_INVALID', 'MAC_INVALID']);
const preAuth = (code: string, detail: string): boolean => PRE_AUTH_CODES.has(code) || (code === 'WIRE_MALFORMED' && detail.startsWith('sender id'));
/** A schema alone can only find malformed input, a limit exceeded, or an unknown union code. */
const SCHEMA_CODES = new Set<string>(['WIRE_MALFORMED', 'WIRE_LIMIT', 'WIRE_UNKNOWN_TYPE']);

class Tally {
  readonly codes = new Map<string, number>();
  readonly details = new Map<string, number>();
  readonly failures: string[] = [];
  cases = 0;
  constructor(private readonly allowed: (code: string, detail: string) => boolean) {}

  fail(label: string, what: string): void {
    if (this.failures.length < 10) this.failures.push(`${label}: ${what}`);
  }

  /** Run one decode; record what came back; return the value when it succeeded. */
  run(label: string, decode: () => unknown): unknown {
    this.cases++;
    let r: unknown;
    try {
      r = decode();
    } catch (e) {
      this.fail(label, `threw ${(e as Error)?.stack ?? String(e)}`);
      return undefined;
    }
    if (typeof r !== 'object' || r === null || !('ok' in r)) {
      this.fail(label, `returned ${String(r)}`);
      return undefined;
    }
    if (r.ok === true && 'value' in r) {
      this.codes.set('ok', (this.codes.get('ok') ?? 0) + 1);
      return r.value;
    }
    if (r.ok === false && 'code' in r && 'detail' in r && typeof r.code === 'string' && typeof r.detail === 'string') {
      if (!this.allowed(r.code, r.detail)) this.fail(label, `unexpected ${r.code} (${r.detail})`);
      this.codes.set(r.code, (this.codes.get(r.code) ?? 0) + 1);
      if (r.detail.startsWith('msgpack: ')) {
        // the strict decoder's reasons, without their variable parts
        const reason = r.detail.replace(/0x[0-9a-f]+|\d+/g, 'N');
        this.details.set(reason, (this.details.get(reason) ?? 0) + 1);
      }
      return undefined;
    }
    this.fail(label, `malformed result ${JSON.stringify(r)}`);
    return undefined;
  }

  expectClean(minCases: number, mustReach: readonly string[], mustReachDetails: readonly string[] = []): void {
    const summary = [...this.codes.entries()].map(([c, n]) => `${c}=${n}`).join(' ');
    const reasons = [...this.details.entries()].map(([c, n]) => `${c}=${n}`).join('; ');
    expect(this.failures, `${REPLAY}\nreached: ${summary}`).toEqual([]);
    expect(this.cases).toBeGreaterThanOrEqual(minCases);
    for (const code of mustReach) expect(this.codes.get(code) ?? 0, `never reached ${code}; reached: ${summary}`).toBeGreaterThan(0);
    for (const d of mustReachDetails) expect(this.details.get(d) ?? 0, `never reached '${d}'; reached: ${reasons}`).toBeGreaterThan(0);
  }
}
/** Every tally of frames, so the file can check how many went through decodeFrame in all. */
const frameTallies: Tally[] = [];
const frameTally = (): Tally => {
  const t = new Tally((code) => DECODER_CODES[code as DropCode] === true);
  frameTallies.push(t);
  return t;
};
/** For frames without a valid signature: nothing past step 7 may be reached. */
const unauthenticatedTally = (): Tally => {
  const t = new Tally(preAuth);
  frameTallies.push(t);
  return t;
};

// ---- frames -------------------------------------------------------------------------------

type Sample = {
  data: Uint8Array; header: Uint8Array; body: Uint8Array; signed: Uint8Array; sig: Uint8Array; ctx: DecodeContext; from: string; items: Item[];
};

/** Every decoder holds link keys (as every process does since PROTOCOL §2.4). */
const ctxFor = (self: string): DecodeContext => ({ cluster: CLUSTER, self, verifier, linkAuth: linkAuthOf(self) });

function sample(from: string, to: string, items: Item[]): Sample {
  const data = encodeFrame({ from, to, items }, { cluster: CLUSTER, signer: signerOf(from) });
  return { data, ...splitFrame(data), ctx: ctxFor(to), from, items };
}

/** The same frame MAC'd with the sender's link keys (its orders, which need the signature, left out). */
function macSample(s: Sample): Sample {
  const items = s.items.filter((i) => !messages.needsFrameSignature(i));
  const data = encodeFrame({ from: s.from, to: s.ctx.self, items }, { cluster: CLUSTER, signer: signerOf(s.from), linkAuth: linkAuthOf(s.from) });
  if (data[0] !== WIRE_VERSION_MAC) throw new Error(`corpus frame ${s.from} → ${s.ctx.self} was not MAC'd`);
  return { data, ...splitFrame(data), ctx: s.ctx, from: s.from, items };
}

const grpCgs = (from: string, n: number): Item[] =>
  Array.from({ length: n }, (_, i): Item => ({
    type: 'grp', srcInc: 1, destInc: 1, seq: i + 1, body: { type: 'cg', signed: signedCGOf(from, i + 1, agentRequests[i % agentRequests.length] as AgentRequest) },
  }));

/** Valid frames of every shape; the cheap ones (few embedded CGs) also serve the re-signing fuzz. */
const corpus: Sample[] = [
  sample('a1', 'r1', itemsFrom('a1')),
  sample('a2', 'r2', grpCgs('a2', 64)),
  sample('r1', 'a1', groupMsgsGC.map((gc, i): Item => ({ type: 'grp', srcInc: 2, destInc: 3, seq: i + 1, body: { type: 'gc', gc } }))),
  sample('r1', 'r2', ptpPayloads().map((body, i): Item => ({ type: 'ptp', srcInc: 1, destInc: 2, seq: i + 1, ackSeq: 0, body }))),
  sample('r3', 'scc', heartbeatInfos.map((info, i): Item => ({ type: 'hb', inc: 1, counter: i, info }))),
  sample('op', 'r1', [{ type: 'status.query', nonce: 5, challenge: { inc: 3, serial: 4, atMs: 1_700_000_000_000 } }]),
  sample('r2', 'op', [{ type: 'status.reply', nonce: 5, json: '{"rsn":1}' }]),
  sample('r1', 'r3', []),
  ...itemsFrom('a2').map((item) => sample('a2', 'r3', [item])),
];
const cheapCorpus = corpus.filter((s) => s !== corpus[1]);
/** Mostly cheap frames: decoding the 64-CG frame costs ~50x more (and ends the same way). */
const pickSample = (rng: Rng): Sample => (rng.chance(0.01) ? (corpus[1] as Sample) : rng.pick(cheapCorpus));

/** The cheap corpus MAC'd: the frames of the MAC'd streams. */
const macCorpus: Sample[] = cheapCorpus.map(macSample);

/** With a stale signature or tag or none, the only frames that may decode are genuine ones. */
const genuine = new Set([...corpus, ...macCorpus].map((s) => Buffer.from(s.data).toString('hex')));
const isGenuine = (data: Uint8Array): boolean => genuine.has(Buffer.from(data).toString('hex'));

const trees = new Map<Sample, unknown>();
/** The decoded msgpack tree of a corpus body. */
function treeOf(s: Sample): unknown {
  if (!trees.has(s)) {
    const tree = unpack(s.body);
    if (!tree.ok) throw new Error(`corpus body does not unpack: ${tree.detail}`);
    trees.set(s, tree.value);
  }
  return trees.get(s);
}

/** A mutation of a corpus body for the key-cooperating streams (signed or MAC'd alike), by mode:
 *  0 bytes (the strict decoder and the canonicality check), 1 trees (the schemas, the cluster,
 *  the addressee, the signed-request limit), 3 the same content in other msgpack widths
 *  (accepted exactly when it is the canonical bytes). Mode 2 is each stream's own. */
function cooperatingMutation(rng: Rng, s: Sample, tree: unknown, from: readonly Sample[], mode: number): Uint8Array {
  if (mode === 0) return mutateBytes(rng, s.body, rng.pick(from).body);
  if (mode === 1) return tryPack(mutateTree(rng, tree)) ?? s.body;
  return encodeLoose(tree, (n, v) => (rng.chance(0.1) ? rng.int(n) : canonicalChoice(n, v)));
}

/** The checks on one re-authenticated mutation's verdict: a re-encoding (mode 3) is accepted
 *  exactly when canonical, and what is accepted is routed as sent and is exactly what the
 *  sender's own encoder (`ctx`) would send. True when it was accepted. */
function judgeCooperating(t: Tally, label: string, value: unknown, c: { mode: number; s: Sample; body: Uint8Array; data: Uint8Array; ctx: EncodeContext }): boolean {
  if (c.mode === 3 && (value !== undefined) !== Buffer.from(c.body).equals(Buffer.from(c.s.body))) {
    t.fail(label, `a re-encoding was ${value === undefined ? 'refused though canonical' : 'accepted though not canonical'}`);
  }
  if (value === undefined) return false;
  const f = value as Frame;
  if (f.from !== c.s.from || f.to !== c.s.ctx.self || !Array.isArray(f.items)) t.fail(label, 'accepted a frame with wrong routing');
  else if (!Buffer.from(encodeFrame(f, c.ctx)).equals(Buffer.from(c.data))) t.fail(label, 'accepted bytes that do not re-encode to themselves');
  return true;
}

/** Sender ids for hand-made headers: known keys, unknown but valid ids, and invalid ones. */
const HEADER_IDS = ['r1', 'r2', 'r3', 'a1', 'a2', 'scc', 'op', 'x9', 'a3', 'q', 'a'.repeat(32), 'A1', '1a', 'a_b', ''];

// ---- byte mutations -----------------------------------------------------------------------

/** Well-formed msgpack that Trine's strict decoder refuses, or that claims more than it holds. */
const HOSTILE = [
  [0x80], [0xde, 0x00, 0x01, 0x01, 0x02], [0xd4, 0x00, 0x00], [0xc7, 0x01, 0x05, 0x00], [0xca, 0x3f, 0xc0, 0x00, 0x00],
  [0xdd, 0xff, 0xff, 0xff, 0xff], [0xdb, 0xff, 0xff, 0xff, 0xff], [0xc6, 0x7f, 0xff, 0xff, 0xff], Array.from({ length: 40 }, () => 0x91),
  [0xa3, 0xed, 0xa0, 0x80], [0xa2, 0xc0, 0xaf], [0xcf, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], [0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0],
  [0xce, 0x00, 0x00, 0x00, 0x07], [0xd9, 0x02, 0x72, 0x31], [0xcb, 0x40, 0x1c, 0, 0, 0, 0, 0, 0],
].map((b) => Uint8Array.from(b));

const INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6,
  0xc7, 0xc9, 0xca, 0xcb, 0xcc, 0xcf, 0xd0, 0xd3, 0xd4, 0xd8, 0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff];

const concat = (...parts: Uint8Array[]): Uint8Array => concatBytes(parts);

function mutateBytes(rng: Rng, input: Uint8Array, other: Uint8Array): Uint8Array {
  let b: Uint8Array = Uint8Array.from(input);
  const rounds = 1 + (rng.chance(0.7) ? 0 : rng.int(4));
  for (let k = 0; k < rounds; k++) {
    const at = b.length === 0 ? 0 : rng.int(b.length);
    switch (rng.int(10)) {
      case 0:
      case 1: // bit flip
        if (b.length > 0) b[at] = (b[at] as number) ^ (1 << rng.int(8));
        break;
      case 2: // an interesting byte
        if (b.length > 0) b[at] = rng.pick(INTERESTING);
        break;
      case 3: // truncate
        b = b.slice(0, at);
        break;
      case 4: // extend
        b = concat(b, rng.bytes(1 + rng.int(rng.chance(0.9) ? 8 : 300)));
        break;
      case 5: // insert
        b = concat(b.subarray(0, at), rng.bytes(1 + rng.int(6)), b.subarray(at));
        break;
      case 6: // delete a range
        b = concat(b.subarray(0, at), b.subarray(at + 1 + rng.int(8)));
        break;
      case 7: // splice with another frame's body
        b = concat(b.subarray(0, at), other.subarray(other.length === 0 ? 0 : rng.int(other.length)));
        break;
      case 8: // a hostile fragment in place of a byte, or inserted
        b = concat(b.subarray(0, at), rng.pick(HOSTILE), b.subarray(at + (rng.chance(0.5) ? 1 : 0)));
        break;
      default: { // duplicate a range
        const len = 1 + rng.int(16);
        b = concat(b.subarray(0, at + len), b.subarray(at, at + len), b.subarray(at + len));
      }
    }
  }
  return b;
}

// ---- random trees -------------------------------------------------------------------------

const ID_LIKE = ['r1', 'r2', 'r3', 'a1', 'a2', 'scc', 'op', 'x9', 'R1', '', 'a'.repeat(33), CLUSTER, 'other-cluster'];

function randomString(rng: Rng): string {
  switch (rng.int(6)) {
    case 0: return rng.pick(ID_LIKE);
    case 1: return '';
    case 2: return String.fromCharCode(...Array.from({ length: rng.int(12) }, () => rng.int(0x10000)));
    case 3: return rng.chance(0.05) ? 'x'.repeat(MAX_TEXT_CHARS + 1) : 'x'.repeat(rng.int(200));
    case 4: return '\ud800';
    default: return 'abcdefghijklmnopqrstuvwxyz0123456789-'.slice(rng.int(10), 10 + rng.int(27));
  }
}

function randomLeaf(rng: Rng): unknown {
  switch (rng.int(12)) {
    case 0: return rng.int(12);
    case 1: return rng.pick([-1, -0, 0.5, 1.5, Number.NaN, Infinity, -Infinity, 2 ** 53, 2 ** 53 + 2, Number.MAX_SAFE_INTEGER, 2 ** 64, 1e308, -(2 ** 31)]);
    case 2: return (rng.next() - 0.5) * 2 ** (rng.int(70));
    case 3: return rng.pick([true, false, null, undefined]);
    case 4: return rng.pick([0n, 1n, -1n, 2n ** 64n]);
    case 5:
    case 6: return randomString(rng);
    case 7:
    case 8: return rng.bytes(rng.pick([0, 1, 31, 32, 33, 63, 64, 65, rng.int(100)]));
    case 9: return Buffer.from(rng.bytes(rng.int(40)));
    case 10: return rng.pick([{}, { length: 2, 0: 1, 1: 2 }, new Map([[1, 2]]), new Date(0), new Uint16Array(2), new ArrayBuffer(4), new Set([1])]);
    default: return rng.int(2 ** 32);
  }
}

function randomTree(rng: Rng, depth: number): unknown {
  if (depth <= 0 || rng.chance(0.35)) return randomLeaf(rng);
  const n = rng.chance(0.02) ? rng.pick([4, 33, 1025]) : rng.int(7);
  const out: unknown[] = [];
  // Unions start with a small code: bias the first entry so decoding gets past it.
  if (n > 0 && rng.chance(0.5)) out.push(rng.int(12));
  while (out.length < n) out.push(out.length > 40 ? rng.int(3) : randomTree(rng, depth - 1));
  return out;
}

/** A valid tree with one to three random edits: near-valid input that reaches deep checks. */
function mutateTree(rng: Rng, tree: unknown): unknown {
  const clone = (t: unknown): unknown => (Array.isArray(t) ? t.map(clone) : t);
  let root = clone(tree);
  const rounds = 1 + rng.int(3);
  for (let k = 0; k < rounds; k++) {
    // walk to a random node, remembering its parent
    let parent: unknown[] | null = null;
    let index = 0;
    let node = root;
    while (Array.isArray(node) && node.length > 0 && rng.chance(0.75)) {
      parent = node;
      index = rng.int(node.length);
      node = node[index];
    }
    const replace = (v: unknown): void => {
      if (parent === null) root = v;
      else parent[index] = v;
    };
    switch (rng.int(8)) {
      case 0: replace(randomLeaf(rng)); break;
      case 1: replace(randomTree(rng, 3)); break;
      case 2: if (parent !== null) parent.splice(index, 1); break;
      case 3: if (parent !== null) parent.splice(index, 0, randomLeaf(rng)); break;
      case 4: if (parent !== null) parent.splice(index, 0, clone(node)); break;
      case 5:
        if (typeof node === 'number') replace(rng.pick([node + 1, node - 1, -node, node * 2 ** 32, node + 0.5, Number.NaN]));
        else if (typeof node === 'string') replace(rng.pick([node.toUpperCase(), `${node}!`, node.repeat(200), '']));
        else if (node instanceof Uint8Array) replace(rng.chance(0.5) ? node.subarray(0, rng.int(node.length + 1)) : Uint8Array.from([...node, 0]));
        else replace(randomLeaf(rng));
        break;
      case 6: replace([node]); break;
      default: if (Array.isArray(node) && node.length === 1) replace(node[0]); else replace(null);
    }
  }
  return root;
}

/** pack() of a test-made tree; null when msgpackr cannot encode it (e.g. a 65-bit BigInt). */
function tryPack(tree: unknown): Uint8Array | null {
  try {
    return pack(tree);
  } catch {
    return null;
  }
}

/** A frame body for the unauthenticated streams: a 1 MiB bomb, random bytes, or valid msgpack of
 *  random trees, half of them shaped like a frame body to r1. */
function randomBody(rng: Rng, bomb: boolean): Uint8Array {
  return bomb
    ? concat(rng.pick(HOSTILE), new Uint8Array(MAX_FRAME_BYTES - 200).fill(rng.pick([0x80, 0x91, 0xd4])))
    : rng.chance(0.5)
      ? rng.bytes(1 + rng.int(rng.chance(0.9) ? 200 : 4000))
      : tryPack(rng.chance(0.5)
        ? randomTree(rng, 5)
        : [rng.chance(0.7) ? CLUSTER : rng.pick(ID_LIKE), rng.chance(0.7) ? 'r1' : rng.pick(ID_LIKE), rng.chance(0.5) ? [] : randomTree(rng, 5)])
      ?? rng.bytes(10);
}

/** Plain data with byte arrays as hex, for comparing decoded values. */
const normal = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) => (x instanceof Uint8Array ? `bytes:${Buffer.from(x).toString('hex')}` : x));

// ---- the fuzz -----------------------------------------------------------------------------

describe(`wire fuzz (seed ${SEED})`, () => {
  it('random bytes of random lengths, up to MAX_FRAME_BYTES + 1, some under a plausible header (44,000 frames)', () => {
    const rng = rngFor(1);
    const t = unauthenticatedTally();
    const ctx = ctxFor('r1');
    const small = [0, 1, MIN_MAC_FRAME_BYTES - 1, MIN_MAC_FRAME_BYTES, MIN_MAC_FRAME_BYTES + 1, MIN_FRAME_BYTES - 1, MIN_FRAME_BYTES, MIN_FRAME_BYTES + 1];
    const fixed = [...small, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1];
    for (let i = 0; i < 44_000; i++) {
      let length: number;
      if (i < fixed.length) length = fixed[i] as number;
      else if (i % 3000 === 0) length = 65_536 + rng.int(MAX_FRAME_BYTES - 65_536 + 2);
      else if (rng.chance(0.15)) length = rng.pick(small);
      else length = rng.int(rng.chance(0.8) ? 600 : 9000);
      const data = rng.bytes(length);
      // a third are pure noise; the others start with a valid version (signed or MAC'd), half
      // with a whole header
      const mode = i % 3;
      const version = i % 2 === 0 ? WIRE_VERSION : WIRE_VERSION_MAC;
      if (mode > 0 && data.length > 0) data[0] = version;
      if (mode === 2) data.set(headerOf(rng.pick(HEADER_IDS), version).subarray(0, data.length));
      t.run(`random #${i} (${length} bytes, mode ${mode})`, () => decodeFrame(data, ctx));
    }
    t.expectClean(44_000, ['WIRE_TOO_SHORT', 'WIRE_TOO_LARGE', 'WIRE_VERSION', 'WIRE_MALFORMED', 'WIRE_CHECKSUM']);
  });

  it('random bodies under a valid header and CRC but no valid signature are never parsed (10,000 frames)', () => {
    const rng = rngFor(2);
    const t = unauthenticatedTally();
    const ctx = ctxFor('r1');
    for (let i = 0; i < 10_000; i++) {
      const from = rng.pick(HEADER_IDS.slice(0, 11));
      const body = randomBody(rng, i % 1000 === 0);
      const signed = concat(headerOf(from), body);
      // random bytes, a genuine signature by another key, or the sender's signature of something else
      const sig = rng.chance(0.6)
        ? rng.bytes(SIGNATURE_BYTES)
        : rng.chance(0.5) ? signerOf(rng.pick(['r1', 'a2', 'x9'].filter((id) => id !== from))).sign(signed) : rng.pick(corpus).sig;
      const data = assemble(signed, sig);
      t.run(`random body #${i} from ${from}`, () => decodeFrame(data, ctx));
    }
    t.expectClean(10_000, ['SIG_UNKNOWN_KEY', 'SIG_INVALID']);
  });

  it('mutated valid frames with the CRC recomputed and the signature left stale stop at the header or the signature (16,000 frames)', () => {
    const rng = rngFor(3);
    const t = unauthenticatedTally();
    for (let i = 0; i < 16_000; i++) {
      const s = pickSample(rng);
      // a fifth of the time the mutations land in the header (version, id length, id)
      const signed = rng.chance(0.2)
        ? concat(mutateBytes(rng, s.header, rng.pick(corpus).header), s.body)
        : concat(s.header, mutateBytes(rng, s.body, pickSample(rng).body));
      const data = assemble(signed, s.sig);
      const copy = Uint8Array.from(data);
      const value = t.run(`mutation #${i}`, () => decodeFrame(data, s.ctx));
      if (value !== undefined && !isGenuine(data)) t.fail(`mutation #${i}`, 'accepted a changed frame under a stale signature');
      if (i % 16 === 0 && !Buffer.from(copy).equals(Buffer.from(data))) t.fail(`mutation #${i}`, 'decodeFrame changed its input');
    }
    t.expectClean(16_000, ['WIRE_VERSION', 'WIRE_MALFORMED', 'SIG_UNKNOWN_KEY', 'SIG_INVALID']);
  });

  it('mutated valid frames as a whole, CRC and signature included (6,000 frames)', () => {
    const rng = rngFor(4);
    const t = unauthenticatedTally();
    for (let i = 0; i < 6_000; i++) {
      const s = pickSample(rng);
      const data = mutateBytes(rng, s.data, pickSample(rng).data);
      const value = t.run(`raw mutation #${i}`, () => decodeFrame(data, s.ctx));
      if (value !== undefined && !isGenuine(data)) t.fail(`raw mutation #${i}`, 'accepted a frame that is not genuine');
    }
    t.expectClean(6_000, ['WIRE_CHECKSUM']);
  });

  it('signer-cooperating: mutated bodies, CGs and encodings re-signed with the real keys (30,000 frames)', () => {
    const rng = rngFor(5);
    const t = frameTally();
    let accepted = 0;
    let reEncoded = 0;
    for (let i = 0; i < 30_000; i++) {
      const s = rng.pick(cheapCorpus);
      const signer = signerOf(s.from);
      const tree = treeOf(s);
      let body: Uint8Array;
      const mode = i % 4;
      if (mode !== 2) {
        body = cooperatingMutation(rng, s, tree, cheapCorpus, mode);
        if (mode === 3 && !Buffer.from(body).equals(Buffer.from(s.body))) reEncoded++;
      } else {
        // a validly signed frame carrying a validly signed but malformed CG, on lane 1 or wrapped
        const client = s.from.startsWith('a') ? s.from : 'a1';
        const cg = messages.groupMsgCG.enc(cgOf(client, 1 + rng.int(5), rng.pick(agentRequests), 1 + rng.int(3)));
        const cgBytes = rng.chance(0.5)
          ? tryPack(mutateTree(rng, cg)) ?? pack(cg)
          : mutateBytes(rng, pack(cg), pack(cg));
        const cgSig = signerOf(client).sign(cgBytes);
        const item: ItemWire = s.from === client
          ? { type: 'grp', srcInc: 1, destInc: 1, seq: 1, body: { type: 'cg', bytes: cgBytes, sig: cgSig } }
          : { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: 1, cgBytes, cgSig } };
        body = pack(messages.frameBody.enc({ cluster: CLUSTER, to: s.ctx.self, items: [item] }));
      }
      const signed = concat(s.header, body);
      const data = assemble(signed, signer.sign(signed));
      const label = `re-signed mutation #${i} (mode ${mode})`;
      const value = t.run(label, () => decodeFrame(data, s.ctx));
      if (i % 64 === 0) {
        // deterministic: the same bytes give the same verdict
        const again = decodeFrame(data, s.ctx);
        if ((value === undefined) !== !again.ok) t.fail(label, 'a second decode disagrees');
      }
      if (judgeCooperating(t, label, value, { mode, s, body, data, ctx: { cluster: CLUSTER, signer } })) accepted++;
    }
    t.expectClean(
      30_000,
      ['ok', 'WIRE_MALFORMED', 'WIRE_UNKNOWN_TYPE', 'WIRE_LIMIT', 'WIRE_FOREIGN_CLUSTER', 'WIRE_MISADDRESSED', 'SIG_INVALID', 'SIG_UNKNOWN_KEY'],
      ['msgpack: not the canonical encoding', 'msgpack: truncated', 'msgpack: N trailing bytes', 'msgpack: invalid UTF-N', 'msgpack: type byte N not allowed', 'msgpack: array longer than input'],
    );
    expect(accepted).toBeGreaterThan(1000);
    expect(reEncoded).toBeGreaterThan(1000);
  });

  it("random bodies under a valid MAC'd header and CRC but a wrong tag, and MAC'd frames mutated under a stale tag, are never parsed (8,000 frames)", () => {
    const rng = rngFor(7);
    const t = unauthenticatedTally();
    const ctx = ctxFor('r1');
    for (let i = 0; i < 8_000; i++) {
      if (i % 2 === 0) {
        const from = rng.pick(HEADER_IDS.slice(0, 11));
        const body = randomBody(rng, i % 2000 === 0);
        const signed = concat(headerOf(from, WIRE_VERSION_MAC), body);
        // random bytes, a genuine tag of another link (another sender's, or the sender's to
        // another peer), or a stale tag of a real MAC'd frame
        const known = linkAuthOf('r1').has(from);
        const kind = rng.int(4);
        const tag = kind === 0 || kind === 1
          ? rng.bytes(MAC_BYTES)
          : kind === 2
            ? linkAuthOf(rng.pick(['r2', 'a1', 'scc'].filter((id) => id !== from))).tag('r1', signed) as Uint8Array
            : known && rng.chance(0.5) ? linkAuthOf(from).tag(rng.pick(['r2', 'r3', 'a2']), signed) as Uint8Array : rng.pick(macCorpus).sig;
        const data = assemble(signed, tag);
        t.run(`random MAC'd body #${i} from ${from} (tag ${kind})`, () => decodeFrame(data, ctx));
      } else {
        // a real MAC'd frame, header (version, id length, id) or body mutated, CRC recomputed
        const s = rng.pick(macCorpus);
        const signed = rng.chance(0.2)
          ? concat(mutateBytes(rng, s.header, rng.pick(macCorpus).header), s.body)
          : concat(s.header, mutateBytes(rng, s.body, rng.pick(macCorpus).body));
        const data = assemble(signed, s.sig);
        const value = t.run(`stale-tag mutation #${i}`, () => decodeFrame(data, s.ctx));
        if (value !== undefined && !isGenuine(data)) t.fail(`stale-tag mutation #${i}`, 'accepted a changed frame under a stale tag');
      }
    }
    t.expectClean(8_000, ['SIG_UNKNOWN_KEY', 'MAC_INVALID', 'WIRE_MALFORMED']);
    expect(t.codes.get('MAC_INVALID') ?? 0).toBeGreaterThan(3_000);
  });

  it('link-key-cooperating: mutated MAC\'d bodies re-tagged with the real link keys (4,000 frames)', () => {
    const rng = rngFor(8);
    const t = frameTally();
    let accepted = 0;
    let required = 0;
    let reEncoded = 0;
    for (let i = 0; i < 4_000; i++) {
      const s = rng.pick(macCorpus);
      const link = linkAuthOf(s.from);
      const tree = treeOf(s);
      let body: Uint8Array;
      const mode = i % 4;
      if (mode !== 2) {
        body = cooperatingMutation(rng, s, tree, macCorpus, mode);
        if (mode === 3 && !Buffer.from(body).equals(Buffer.from(s.body))) reEncoded++;
      } else {
        // a valid order of the primary slipped into a valid MAC'd body: it needs the signature
        const order: Item = rng.chance(0.5)
          ? { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: 1 + rng.int(9), signed: signedCGOf('a1', 1 + rng.int(3), rng.pick(agentRequests)) } }
          : { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper.input', rsn: 1 + rng.int(9), input: rng.pick([{ type: 'tick' }, { type: 'replica.add', id: 'r4', port: 0, sig: new Uint8Array(64) }] as const) } };
        const items = s.items.map(toWire);
        items.splice(rng.int(items.length + 1), 0, toWire(order));
        body = pack(messages.frameBody.enc({ cluster: CLUSTER, to: s.ctx.self, items }));
      }
      const signed = concat(s.header, body);
      const tag = link.tag(s.ctx.self, signed);
      if (tag === null) throw new Error(`no link key ${s.from} → ${s.ctx.self}`);
      const data = assemble(signed, tag);
      const label = `re-tagged mutation #${i} (mode ${mode})`;
      let code = 'ok';
      const value = t.run(label, () => {
        const r = decodeFrame(data, s.ctx);
        if (!r.ok) code = r.code;
        return r;
      });
      if (mode === 2) {
        if (code !== 'SIG_REQUIRED') t.fail(label, `an order in a MAC'd frame gave ${code}`);
        else required++;
      }
      if (value !== undefined && (value as Frame).items.some(messages.needsFrameSignature)) t.fail(label, "accepted an order in a MAC'd frame");
      if (judgeCooperating(t, label, value, { mode, s, body, data, ctx: { cluster: CLUSTER, signer: signerOf(s.from), linkAuth: link } })) accepted++;
    }
    t.expectClean(
      4_000,
      ['ok', 'SIG_REQUIRED', 'WIRE_MALFORMED', 'WIRE_UNKNOWN_TYPE', 'WIRE_LIMIT', 'WIRE_MISADDRESSED'],
      ['msgpack: not the canonical encoding', 'msgpack: truncated'],
    );
    expect(accepted).toBeGreaterThan(200);
    expect(reEncoded).toBeGreaterThan(200);
    expect(required).toBe(1_000);
  });

  it('fed over 100,000 frames to decodeFrame in all', () => {
    expect(frameTallies.reduce((n, t) => n + t.cases, 0)).toBeGreaterThanOrEqual(100_000);
  });

  it("every exported schema's dec: random and near-valid trees (3,000 per schema)", () => {
    const rng = rngFor(6);
    type U = { type: 'a'; n: number; s: string } | { type: 'b'; l: (number | null)[] };
    const validTrees = new Map<string, unknown[]>();
    const schemas: Array<[string, Schema<unknown>, unknown[]]> = [];
    const add = <T>(name: string, schema: Schema<T>, samples: T[]): void => {
      schemas.push([name, schema as Schema<unknown>, samples.map((v) => schema.enc(v))]);
    };
    // messages.ts: every export that is a schema, found by shape so a new one is fuzzed too
    const messageSamples: Record<string, unknown[]> = {
      processId: ['r1', 'scc'],
      agentRequest: agentRequests,
      groupCommand: groupCommands,
      groupMsgCG: agentRequests.map((p, i) => cgOf('a1', i, p)),
      groupMsgGC: groupMsgsGC,
      ptpPayloadWire: itemsFrom('a1').map(toWire).flatMap((x) => (x.type === 'ptp' && x.body !== null ? [x.body] : [])),
      heartbeatInfo: heartbeatInfos,
      groupBodyWire: itemsFrom('a1').map(toWire).flatMap((x) => (x.type === 'grp' ? [x.body] : [])),
      itemWire: itemsFrom('a1').map(toWire),
      frameBody: [{ cluster: CLUSTER, to: 'r1', items: itemsFrom('a1').map(toWire) }],
    };
    for (const [name, exported] of Object.entries(messages)) {
      if (typeof exported !== 'object' || exported === null || !('dec' in exported) || !('enc' in exported)) continue;
      add(name, exported as Schema<unknown>, messageSamples[name] ?? []);
    }
    expect(schemas.map(([n]) => n)).toEqual(expect.arrayContaining(Object.keys(messageSamples)));
    // schema.ts: every combinator
    add('uint', uint, [0, 7, Number.MAX_SAFE_INTEGER]);
    add('bool', bool, [true, false]);
    add('text', text(8), ['', 'abc']);
    add('token', token(8, /^[a-z][a-z0-9]*$/), ['r1']);
    add('oneOf', oneOf(['x', 'y'] as const), ['x', 'y']);
    add('bytes', bytes(40), [new Uint8Array(3)]);
    add('bytes-exact', bytes(32, 32), [new Uint8Array(32)]);
    add('nullable', nullable(uint), [null, 3]);
    add('list', list(nullable(uint), 4), [[], [1, null, 3]]);
    add('struct', struct<{ a: number; b: string }>(['a', 'b'], { a: uint, b: text(8) }), [{ a: 1, b: 'b' }]);
    add('union', union<U>({
      a: { code: 1, order: ['n', 's'], fields: { n: uint, s: text(8) } },
      b: { code: 4, order: ['l'], fields: { l: list(nullable(uint), 4) } },
    }), [{ type: 'a', n: 2, s: 'x' }, { type: 'b', l: [1, null] }]);

    let accepted = 0;
    for (const [name, schema, valid] of schemas) {
      validTrees.set(name, valid);
      const t = new Tally((code) => SCHEMA_CODES.has(code));
      for (let i = 0; i < 3_000; i++) {
        const tree = valid.length > 0 && i % 2 === 1 ? mutateTree(rng, rng.pick(valid)) : randomTree(rng, 6);
        const label = `${name}.dec #${i}`;
        const value = t.run(label, () => schema.dec(tree, name));
        if (value === undefined) continue;
        accepted++;
        // What decodes must re-encode, and decode again to the same value (through msgpack too).
        const again = t.run(`${label} re-decode`, () => schema.dec(schema.enc(value), name));
        if (again === undefined || normal(again) !== normal(value)) t.fail(label, 'decoded value does not survive enc → dec');
        t.run(`${label} through msgpack`, () => {
          const u = unpack(pack(schema.enc(value)));
          return u.ok ? schema.dec(u.value, name) : u;
        });
      }
      for (const v of valid) {
        if (!schema.dec(v, name).ok) t.fail(name, `a valid sample does not decode: ${normal(v)}`);
      }
      t.expectClean(3_000, ['WIRE_MALFORMED']);
    }
    expect(accepted).toBeGreaterThan(0);
  });
});
