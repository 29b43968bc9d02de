// The G-MPI framing (src/app/gmpi/wire.ts; spec §7 item 3's PTP channels): frames round-trip
// whole and fed byte by byte (challenge and hello with its MAC and nonce, PROTOCOL §9.5;
// application data with tags >= 0, library frames with
// tags < 0, raw and structured payloads, any u32 VPID as sender), every WireCode is produced by
// the input that should produce it (length limits judged from the header alone), errors are
// sticky, and a seeded fuzz of random and mutated streams never throws (STYLE.md 5). Replay a fuzz failure with
// TRINE_FUZZ_SEED=<n> npx vitest run test/unit/app/gmpi-wire.test.ts
import { concatBytes } from '../../../src/base/bytes.ts';
import { describe, expect, it } from 'vitest';
import {
  encodeFrame, FLAG_STRUCTURED, FrameDecoder, GMPI_HEADER_BYTES, GMPI_WIRE_VERSION, HELLO_MAC_BYTES, HELLO_NONCE_BYTES,
  MAX_HELLO_PAYLOAD_BYTES, MAX_TAG, MAX_U32, MIN_LIB_TAG, type DataFrame, type GmpiFrame, type WireCode, type WireResult,
} from '../../../src/app/gmpi/wire.ts';

const LIMIT = 1024;

function decodeAll(bytes: Uint8Array, chunk = bytes.length, maxMessageBytes = LIMIT): { frames: GmpiFrame[]; error: WireResult<never> | null } {
  const d = new FrameDecoder({ maxMessageBytes });
  const frames: GmpiFrame[] = [];
  for (let i = 0; i < bytes.length; i += Math.max(1, chunk)) {
    d.feed(bytes.subarray(i, i + Math.max(1, chunk)));
    for (;;) {
      const r = d.next();
      if (!r.ok) return { frames, error: r };
      if (r.value === null) break;
      frames.push(r.value);
    }
  }
  return { frames, error: null };
}

const concat = concatBytes;

const data = (over: Partial<DataFrame> = {}): DataFrame => ({
  type: 'data', id: 3, comm: 7, tag: 42, seq: 9, structured: false, payload: new Uint8Array([1, 2, 3, 250]), ...over,
});
const filled = (n: number, v: number): Uint8Array => new Uint8Array(n).fill(v);
const hello: GmpiFrame = { type: 'hello', id: 2, taskId: 't17', nonce: filled(HELLO_NONCE_BYTES, 0x11), mac: filled(HELLO_MAC_BYTES, 0x22) };
const challenge: GmpiFrame = { type: 'challenge', id: 2, nonce: filled(HELLO_NONCE_BYTES, 0x33) };
/** Where the task id starts in a hello frame. */
const HELLO_ID_OFFSET = GMPI_HEADER_BYTES + HELLO_MAC_BYTES + HELLO_NONCE_BYTES;

/** A data frame's bytes with one header byte overwritten. */
function patched(offset: number, value: number, frame: DataFrame = data()): Uint8Array {
  const b = encodeFrame(frame);
  b[offset] = value;
  return b;
}
function withU32(offset: number, value: number, frame: GmpiFrame = data()): Uint8Array {
  const b = encodeFrame(frame);
  new DataView(b.buffer).setUint32(offset, value >>> 0, false);
  return b;
}

const codeOf = (bytes: Uint8Array, maxMessageBytes = LIMIT): WireCode | null => {
  const r = decodeAll(bytes, bytes.length, maxMessageBytes).error;
  return r === null || r.ok ? null : r.code;
};

describe('G-MPI framing round trips', () => {
  const samples: GmpiFrame[] = [
    hello,
    {
      type: 'hello', id: MAX_U32, taskId: `t${'9'.repeat(MAX_HELLO_PAYLOAD_BYTES - HELLO_MAC_BYTES - HELLO_NONCE_BYTES - 1)}`,
      nonce: filled(HELLO_NONCE_BYTES, 0xff), mac: filled(HELLO_MAC_BYTES, 0),
    },
    challenge,
    { type: 'challenge', id: MAX_U32, nonce: filled(HELLO_NONCE_BYTES, 0) },
    data(),
    data({ payload: new Uint8Array(0), tag: 0, comm: 0, seq: 0, id: 0 }),
    data({ payload: new Uint8Array(LIMIT).fill(0xab), tag: MAX_TAG, comm: MAX_U32, seq: MAX_U32, id: MAX_U32 }),
    data({ structured: true }),
    data({ type: 'lib', tag: -2 }),
    data({ type: 'lib', tag: MIN_LIB_TAG, structured: true, id: 70000 }),
    { type: 'bye', id: 8, seq: 0 },
    { type: 'bye', id: MAX_U32, seq: MAX_U32 },
  ];

  it('decodes each frame to what was encoded, whole and byte by byte', () => {
    for (const f of samples) {
      for (const chunk of [Number.MAX_SAFE_INTEGER, 1, 5, GMPI_HEADER_BYTES]) {
        const out = decodeAll(encodeFrame(f), chunk);
        expect(out.error).toBeNull();
        expect(out.frames).toEqual([f]);
      }
    }
  });

  it('decodes a stream of back-to-back frames in order, across arbitrary chunk boundaries', () => {
    const stream = concat(samples.map(encodeFrame));
    for (const chunk of [1, 2, 3, 7, 23, 24, 25, 1000, stream.length]) {
      const out = decodeAll(stream, chunk);
      expect(out.error).toBeNull();
      expect(out.frames).toEqual(samples);
    }
  });

  it('needs the whole header and payload before yielding, and owns its payload bytes', () => {
    const bytes = encodeFrame(data());
    const d = new FrameDecoder({ maxMessageBytes: LIMIT });
    d.feed(bytes.subarray(0, bytes.length - 1));
    expect(d.next()).toEqual({ ok: true, value: null });
    d.feed(bytes.subarray(bytes.length - 1));
    const r = d.next();
    expect(r.ok && r.value?.type === 'data').toBe(true);
    bytes.fill(0); // the socket reusing its buffer must not change a decoded message
    expect(r.ok && r.value).toEqual(data());
    expect(d.bufferedBytes).toBe(0);
  });

  it('encodeFrame copies the payload, so the sender may reuse its buffer at once', () => {
    const payload = new Uint8Array([5, 6, 7]);
    const bytes = encodeFrame(data({ payload }));
    payload.fill(0);
    expect(decodeAll(bytes).frames).toEqual([data({ payload: new Uint8Array([5, 6, 7]) })]);
  });
});

describe('G-MPI framing errors (every WireCode)', () => {
  it('BAD_MAGIC: a first byte that is not G', () => {
    expect(codeOf(patched(0, 0x48))).toBe('BAD_MAGIC');
    expect(codeOf(new TextEncoder().encode('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.replace('G', 'P')))).toBe('BAD_MAGIC');
  });
  it('BAD_VERSION: another framing version', () => {
    expect(codeOf(patched(1, GMPI_WIRE_VERSION + 1))).toBe('BAD_VERSION');
    expect(codeOf(patched(1, 0))).toBe('BAD_VERSION');
    // Version 1's hello (the task id alone, no MAC) is not spoken any more (PROTOCOL §9.5).
    expect(codeOf(patched(1, 1))).toBe('BAD_VERSION');
  });
  it('BAD_KIND: kinds other than hello (1), data (2), lib (3), bye (4) and challenge (5)', () => {
    for (const k of [0, 6, 255]) expect(codeOf(patched(2, k))).toBe('BAD_KIND');
  });
  it('BAD_CHALLENGE: flags, a communicator, a tag, a sequence, or a payload that is not one nonce', () => {
    expect(codeOf(encodeFrame(challenge))).toBeNull();
    const flagged = encodeFrame(challenge);
    flagged[3] = FLAG_STRUCTURED;
    expect(codeOf(flagged)).toBe('BAD_CHALLENGE');
    for (const offset of [8, 12, 16]) expect(codeOf(withU32(offset, 1, challenge))).toBe('BAD_CHALLENGE');
    for (const length of [0, HELLO_NONCE_BYTES - 1, HELLO_NONCE_BYTES + 1]) expect(codeOf(withU32(20, length, challenge))).toBe('BAD_CHALLENGE');
  });
  it('BAD_BYE: a bye with flags, a communicator, a tag or a payload', () => {
    const bye = encodeFrame({ type: 'bye', id: 8, seq: 3 });
    expect(bye.length).toBe(24);
    expect(codeOf(bye)).toBeNull();
    const flagged = encodeFrame({ type: 'bye', id: 8, seq: 3 });
    flagged[3] = FLAG_STRUCTURED;
    expect(codeOf(flagged)).toBe('BAD_BYE');
    expect(codeOf(withU32(8, 1, { type: 'bye', id: 8, seq: 3 }))).toBe('BAD_BYE');
    expect(codeOf(withU32(12, 1, { type: 'bye', id: 8, seq: 3 }))).toBe('BAD_BYE');
    expect(codeOf(withU32(20, 1, { type: 'bye', id: 8, seq: 3 }))).toBe('BAD_BYE');
    // a data frame relabelled as a bye carries a tag and a payload
    expect(codeOf(patched(2, 4))).toBe('BAD_BYE');
  });
  it('BAD_HEADER: a flag bit other than STRUCTURED', () => {
    for (const f of [0x02, 0x80, 0xff]) expect(codeOf(patched(3, f))).toBe('BAD_HEADER');
    expect(codeOf(patched(3, FLAG_STRUCTURED))).toBeNull();
  });
  it('BAD_TAG: negative tags are the library\'s, non-negative ones the application\'s', () => {
    expect(codeOf(withU32(12, -1))).toBe('BAD_TAG');
    expect(codeOf(withU32(12, -0x80000000))).toBe('BAD_TAG');
    const lib = data({ type: 'lib', tag: -5 });
    expect(codeOf(encodeFrame(lib))).toBeNull();
    expect(codeOf(withU32(12, 0, lib))).toBe('BAD_TAG');
    expect(codeOf(withU32(12, MAX_TAG, lib))).toBe('BAD_TAG');
  });
  it('BAD_HELLO: non-zero flags/comm/tag/seq, a payload too short for MAC ‖ nonce ‖ id or oversized, not a task id', () => {
    const flagged = encodeFrame(hello);
    flagged[3] = FLAG_STRUCTURED;
    expect(codeOf(flagged)).toBe('BAD_HELLO');
    expect(codeOf(withU32(8, 1, hello))).toBe('BAD_HELLO');
    expect(codeOf(withU32(12, 1, hello))).toBe('BAD_HELLO');
    expect(codeOf(withU32(16, 1, hello))).toBe('BAD_HELLO');
    expect(codeOf(withU32(20, 0, hello))).toBe('BAD_HELLO');
    expect(codeOf(withU32(20, HELLO_MAC_BYTES + HELLO_NONCE_BYTES, hello))).toBe('BAD_HELLO'); // no task id
    expect(codeOf(withU32(20, MAX_HELLO_PAYLOAD_BYTES + 1, hello))).toBe('BAD_HELLO');
    const notId = encodeFrame(hello);
    notId[HELLO_ID_OFFSET] = 0x00; // "\0" + "17": not printable
    expect(codeOf(notId)).toBe('BAD_HELLO');
    notId[HELLO_ID_OFFSET] = 'x'.charCodeAt(0); // "x17": printable, not the t<n> grammar
    expect(codeOf(notId)).toBe('BAD_HELLO');
  });
  it('TOO_LARGE: judged from the header alone, before any payload byte is buffered', () => {
    const d = new FrameDecoder({ maxMessageBytes: LIMIT });
    d.feed(withU32(20, LIMIT + 1).subarray(0, GMPI_HEADER_BYTES));
    const r = d.next();
    expect(r.ok ? null : r.code).toBe('TOO_LARGE');
    expect(codeOf(withU32(20, MAX_U32))).toBe('TOO_LARGE');
    // Exactly at the limit is fine; one over is not, whatever the configured limit.
    expect(codeOf(encodeFrame(data({ payload: new Uint8Array(10) })), 10)).toBeNull();
    expect(codeOf(encodeFrame(data({ payload: new Uint8Array(11) })), 10)).toBe('TOO_LARGE');
    expect(codeOf(encodeFrame(data({ payload: new Uint8Array(1) })), 0)).toBe('TOO_LARGE');
  });
  it('an error is sticky: later input yields the same error and is not buffered', () => {
    const d = new FrameDecoder({ maxMessageBytes: LIMIT });
    d.feed(patched(0, 0));
    const first = d.next();
    expect(first.ok).toBe(false);
    d.feed(encodeFrame(data()));
    expect(d.next()).toEqual(first);
    expect(d.bufferedBytes).toBe(0);
  });
  it('frames before a bad one are still yielded', () => {
    const out = decodeAll(concat([encodeFrame(hello), encodeFrame(data()), patched(1, 9)]), 3);
    expect(out.frames).toEqual([hello, data()]);
    expect(out.error !== null && !out.error.ok && out.error.code).toBe('BAD_VERSION');
  });
});

// ---- fuzz ----------------------------------------------------------------------------------------

const SEED = (Number(process.env.TRINE_FUZZ_SEED ?? 0x6d1) >>> 0) || 1;
const REPLAY = `replay with: TRINE_FUZZ_SEED=${SEED} npx vitest run test/unit/app/gmpi-wire.test.ts`;

/** mulberry32, as in the core wire fuzzer: reproducible from SEED. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('G-MPI framing fuzz (never throws, STYLE.md 5)', () => {
  it('random bytes, random headers and mutated valid streams, fed in random chunks', () => {
    const random = rng(SEED);
    const int = (n: number) => Math.floor(random() * n);
    const bytesOf = (n: number) => Uint8Array.from({ length: n }, () => int(256));
    const validFrame = (): GmpiFrame =>
      int(4) === 0
        ? { type: 'hello', id: int(2 ** 32), taskId: `t${1 + int(100000)}`, nonce: bytesOf(HELLO_NONCE_BYTES), mac: bytesOf(HELLO_MAC_BYTES) }
        : int(8) === 0
          ? { type: 'challenge', id: int(2 ** 32), nonce: bytesOf(HELLO_NONCE_BYTES) }
        : int(8) === 0
          ? { type: 'bye', id: int(2 ** 32), seq: int(1000) }
        : int(3) === 0
          ? data({ type: 'lib', id: int(2 ** 32), comm: int(4), tag: -2 - int(100), seq: int(1000), structured: int(2) === 0, payload: bytesOf(int(64)) })
          : data({ id: int(2 ** 32), comm: int(4), tag: int(100), seq: int(1000), structured: int(2) === 0, payload: bytesOf(int(64)) });
    const allCodes = new Set<WireCode | 'none'>();
    const CASES = 4000;
    for (let i = 0; i < CASES; i++) {
      let stream: Uint8Array;
      switch (i % 4) {
        case 0: // pure noise
          stream = bytesOf(int(200));
          break;
        case 1: { // a valid magic and version, the rest random: reaches the field checks
          stream = bytesOf(GMPI_HEADER_BYTES + int(64));
          stream[0] = 0x47;
          stream[1] = GMPI_WIRE_VERSION;
          stream[2] = 1 + int(5);
          if (int(2) === 0) stream[3] = 0;
          break;
        }
        case 2: { // valid streams with a few bytes flipped
          stream = concat(Array.from({ length: 1 + int(4) }, () => encodeFrame(validFrame())));
          for (let k = 1 + int(4); k > 0; k--) stream[int(stream.length)] = int(256);
          break;
        }
        default: // valid streams truncated or extended with noise
          stream = concat([...Array.from({ length: 1 + int(3) }, () => encodeFrame(validFrame())), bytesOf(int(40))]);
          stream = stream.subarray(0, int(stream.length + 1));
      }
      let out: ReturnType<typeof decodeAll>;
      try {
        out = decodeAll(stream, 1 + int(32), int(2) === 0 ? LIMIT : int(64));
      } catch (e) {
        throw new Error(`case ${i} threw ${String(e)}; ${REPLAY}`);
      }
      allCodes.add(out.error === null || out.error.ok ? 'none' : out.error.code);
      for (const f of out.frames) {
        // Whatever decodes is a well-formed frame that re-encodes to a decodable one.
        expect(decodeAll(encodeFrame(f), 1 << 30, 1 << 20).frames, REPLAY).toEqual([f]);
      }
    }
    expect([...allCodes].sort(), REPLAY).toEqual(
      ['BAD_BYE', 'BAD_CHALLENGE', 'BAD_HEADER', 'BAD_HELLO', 'BAD_KIND', 'BAD_MAGIC', 'BAD_TAG', 'BAD_VERSION', 'TOO_LARGE', 'none'].sort(),
    );
  });
});
