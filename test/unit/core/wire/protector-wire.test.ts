// The protector's wire (src/core/wire/protector-wire.ts; docs/PROTOCOL.md §11.4): every message
// round-trips whole and fed byte by byte; malformed, oversized and out-of-range input is a typed
// error and the decoder stays failed (STYLE.md 5); a seeded fuzz of mutated streams never throws;
// batches and checkpoint chunks always fit a frame.
import { describe, expect, it } from 'vitest';
import { concatBytes } from '../../../../src/base/bytes.ts';
import {
  MAX_TASK_PROCS, PROTECTOR_CHUNK_BYTES, PROTECTOR_MAX_BATCH_ENTRIES, PROTECTOR_MAX_CHECKPOINT_BYTES, PROTECTOR_MAX_ENTRY_BYTES,
  PROTECTOR_MAX_FRAME_BYTES,
} from '../../../../src/core/constants.ts';
import { pack } from '../../../../src/core/wire/frame.ts';
import {
  batchAppends, checkpointChunks, clientDecoder, encodeToClient, encodeToProtector, protectorDecoder, PROTECTOR_NONCE_BYTES, wireFailure,
  type ToClient, type ToProtector,
} from '../../../../src/core/wire/protector-wire.ts';

const filled = (n: number, v: number): Uint8Array => new Uint8Array(n).fill(v);
const TO_PROTECTOR: ToProtector[] = [
  { type: 'hello', task: 't12', rank: 3, incarnation: 40, nonce: filled(PROTECTOR_NONCE_BYTES, 1), mac: filled(32, 2) },
  { type: 'append', pos: 1, blob: filled(10, 3) },
  { type: 'append', pos: 2 ** 40, blob: new Uint8Array(0) },
  { type: 'appendBatch', first: 7, blobs: [filled(1, 1), new Uint8Array(0), filled(300, 9)] },
  { type: 'put', id: 4, logPos: 9, size: 100, offset: 0, chunk: filled(100, 5) },
  { type: 'fetch' },
  { type: 'deposit', dest: 2, ssn: 7, blob: filled(20, 4) },
  { type: 'subscribe', from: 0 },
  { type: 'subscribe', from: 2 ** 40 },
];
const TO_CLIENT: ToClient[] = [
  { type: 'challenge', nonce: filled(PROTECTOR_NONCE_BYTES, 7) },
  { type: 'welcome', last: 12, mac: filled(32, 8) },
  { type: 'refused', code: 'FENCED', reason: 'incarnation 9 holds rank 3' },
  { type: 'appended', upTo: 99 },
  { type: 'stored', id: 4 },
  { type: 'checkpoint', id: 4, logPos: 9, size: 3, offset: 0, chunk: filled(3, 1) },
  { type: 'entries', first: 10, blobs: [filled(2, 2)] },
  { type: 'fetched', last: 11 },
  { type: 'error', op: 'append', ref: 12, code: 'LOG_FULL', reason: 'checkpoint first' },
  { type: 'deposited', dest: 2, ssn: 7 },
  { type: 'pushed', first: 3, blobs: [filled(5, 1), filled(0, 0)] },
  { type: 'error', op: 'deposit', ref: 9, code: 'BAD_DEPOSIT', reason: 'the entry names rank 1' },
];

function decodeAll<T>(decoder: { feed(c: Uint8Array): void; next(): { ok: true; value: T | null } | { ok: false; code: string } }, bytes: Uint8Array, chunk: number) {
  const out: T[] = [];
  for (let i = 0; i < bytes.length; i += chunk) {
    decoder.feed(bytes.subarray(i, i + chunk));
    for (;;) {
      const r = decoder.next();
      if (!r.ok) return { out, error: r.code };
      if (r.value === null) break;
      out.push(r.value);
    }
  }
  return { out, error: null };
}

/** A frame of any tree, bypassing the schemas (what a hostile peer can send). */
const rawFrame = (tree: unknown): Uint8Array => {
  const body = pack(tree);
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, body.length);
  out.set(body, 4);
  return out;
};

describe('PROTOCOL §11.4 protector wire: round trips', () => {
  it('every message to the protector decodes to itself, whole and byte by byte', () => {
    const bytes = concatBytes(TO_PROTECTOR.map(encodeToProtector));
    for (const chunk of [bytes.length, 1, 7]) expect(decodeAll(protectorDecoder(), bytes, chunk)).toEqual({ out: TO_PROTECTOR, error: null });
  });

  it('every message to a client decodes to itself', () => {
    const bytes = concatBytes(TO_CLIENT.map(encodeToClient));
    for (const chunk of [bytes.length, 3]) expect(decodeAll(clientDecoder(), bytes, chunk)).toEqual({ out: TO_CLIENT, error: null });
  });
});

describe('PROTOCOL §11.4 protector wire: malformed and oversized input is a typed error', () => {
  const fails = (tree: unknown): string | null => decodeAll(protectorDecoder(), rawFrame(tree), 1 << 20).error;

  it('a frame over PROTECTOR_MAX_FRAME_BYTES is refused from its length alone, TOO_LARGE', () => {
    const header = new Uint8Array(4);
    new DataView(header.buffer).setUint32(0, PROTECTOR_MAX_FRAME_BYTES + 1);
    const r = decodeAll(protectorDecoder(), header, 4);
    expect(r.error).toBe('WIRE_LIMIT');
    expect(wireFailure(r.error!)).toBe('TOO_LARGE');
  });

  it('bad msgpack, an unknown type, wrong field counts and wrong types are MALFORMED', () => {
    expect(decodeAll(protectorDecoder(), Uint8Array.from([0, 0, 0, 1, 0xc1]), 5).error).toBe('WIRE_MALFORMED');
    expect(fails([99])).toBe('WIRE_UNKNOWN_TYPE');
    expect(fails([2, 1])).toBe('WIRE_MALFORMED');
    expect(fails([2, -1, new Uint8Array(1)])).toBe('WIRE_MALFORMED');
    expect(fails([2, 1, 'text'])).toBe('WIRE_MALFORMED');
    expect(fails([1, 'T1', 0, 1, filled(32, 0), filled(32, 0)])).toBe('WIRE_MALFORMED');
    expect(wireFailure('WIRE_MALFORMED')).toBe('MALFORMED');
  });

  it('a hello with a short nonce or MAC, a rank past MAX_TASK_PROCS, an incarnation past a u32 is refused', () => {
    const hello = (rank: number, inc: number, nonce = 32, mac = 32) => [1, 't1', rank, inc, filled(nonce, 0), filled(mac, 0)];
    expect(fails(hello(0, 1))).toBeNull();
    expect(fails(hello(0, 1, 31))).toBe('WIRE_MALFORMED');
    expect(fails(hello(0, 1, 32, 31))).toBe('WIRE_MALFORMED');
    expect(fails(hello(MAX_TASK_PROCS, 1))).toBe('WIRE_LIMIT');
    expect(fails(hello(0, 2 ** 32))).toBe('WIRE_MALFORMED');
  });

  it('an entry past PROTECTOR_MAX_ENTRY_BYTES, a batch past PROTECTOR_MAX_BATCH_ENTRIES, a chunk or size past its limit are WIRE_LIMIT', () => {
    expect(fails([2, 1, new Uint8Array(PROTECTOR_MAX_ENTRY_BYTES + 1)])).toBe('WIRE_LIMIT');
    expect(fails([3, 1, Array.from({ length: PROTECTOR_MAX_BATCH_ENTRIES + 1 }, () => new Uint8Array(0))])).toBe('WIRE_LIMIT');
    expect(fails([4, 1, 0, 10, 0, new Uint8Array(PROTECTOR_CHUNK_BYTES + 1)])).toBe('WIRE_LIMIT');
    expect(fails([4, 1, 0, PROTECTOR_MAX_CHECKPOINT_BYTES + 1, 0, new Uint8Array(1)])).toBe('WIRE_LIMIT');
  });

  it('after an error the decoder stays failed: the stream has lost its framing', () => {
    const d = protectorDecoder();
    d.feed(Uint8Array.from([0, 0, 0, 1, 0xc1]));
    expect(d.next()).toMatchObject({ ok: false });
    d.feed(encodeToProtector({ type: 'fetch' }));
    expect(d.next()).toMatchObject({ ok: false });
  });

  it('seeded fuzz: mutated streams never throw', () => {
    let seed = Number(process.env.TRINE_FUZZ_SEED ?? 17);
    const rnd = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const valid = concatBytes(TO_PROTECTOR.map(encodeToProtector));
    for (let round = 0; round < 500; round++) {
      const bytes = valid.slice();
      for (let k = 0; k < 1 + rnd(4); k++) bytes[rnd(bytes.length)] = rnd(256);
      expect(() => decodeAll(protectorDecoder(), bytes.subarray(0, 1 + rnd(bytes.length)), 1 + rnd(64))).not.toThrow();
      expect(() => decodeAll(clientDecoder(), bytes, 1 + rnd(64))).not.toThrow();
    }
  });
});

describe('PROTOCOL §11.6 channel-memory wire (mpichv-dgrp 1.2.1): forged and oversized frames', () => {
  const fails = (tree: unknown): string | null => decodeAll(protectorDecoder(), rawFrame(tree), 1 << 20).error;
  const clientFails = (tree: unknown): string | null => decodeAll(clientDecoder(), rawFrame(tree), 1 << 20).error;

  it('a deposit to a rank past MAX_TASK_PROCS, an ssn past a u32, an entry past PROTECTOR_MAX_ENTRY_BYTES is refused', () => {
    expect(fails([6, 1, 1, new Uint8Array(9)])).toBeNull();
    expect(fails([6, MAX_TASK_PROCS, 1, new Uint8Array(9)])).toBe('WIRE_LIMIT');
    expect(fails([6, 1, 2 ** 32, new Uint8Array(9)])).toBe('WIRE_MALFORMED');
    expect(fails([6, 1, 1, new Uint8Array(PROTECTOR_MAX_ENTRY_BYTES + 1)])).toBe('WIRE_LIMIT');
    expect(fails([6, 1, 1])).toBe('WIRE_MALFORMED');
    expect(fails([6, -1, 1, new Uint8Array(1)])).toBe('WIRE_MALFORMED');
    expect(fails([7, 'x'])).toBe('WIRE_MALFORMED');
    expect(fails([7, -3])).toBe('WIRE_MALFORMED');
  });

  it('a pushed batch past PROTECTOR_MAX_BATCH_ENTRIES, a deposited answer with a bad rank, are refused at the client', () => {
    expect(clientFails([11, 1, [new Uint8Array(1)]])).toBeNull();
    expect(clientFails([11, 1, Array.from({ length: PROTECTOR_MAX_BATCH_ENTRIES + 1 }, () => new Uint8Array(0))])).toBe('WIRE_LIMIT');
    expect(clientFails([11, 1, [new Uint8Array(PROTECTOR_MAX_ENTRY_BYTES + 1)]])).toBe('WIRE_LIMIT');
    expect(clientFails([10, MAX_TASK_PROCS, 1])).toBe('WIRE_LIMIT');
    expect(clientFails([9, 'deposit', 1, 'NO_SUCH_CODE', 'x'])).toBe('WIRE_MALFORMED');
  });
});

describe('PROTOCOL §11.4 protector wire: batches and chunks fit a frame', () => {
  it('batchAppends splits by frame bytes and entry count, keeping positions contiguous', () => {
    const big = Array.from({ length: 5 }, () => new Uint8Array(PROTECTOR_MAX_ENTRY_BYTES));
    const many = Array.from({ length: PROTECTOR_MAX_BATCH_ENTRIES * 2 + 1 }, () => new Uint8Array(1));
    for (const [first, blobs] of [[1, big], [50, many]] as const) {
      const batches = batchAppends(first, blobs);
      let next = first;
      for (const b of batches) {
        expect(b.first).toBe(next);
        next += b.blobs.length;
        expect(encodeToProtector(b).length - 4).toBeLessThanOrEqual(PROTECTOR_MAX_FRAME_BYTES);
        expect(b.blobs.length).toBeLessThanOrEqual(PROTECTOR_MAX_BATCH_ENTRIES);
      }
      expect(next).toBe(first + blobs.length);
    }
    expect(batchAppends(1, big)).toHaveLength(5);
    expect(batchAppends(1, many)).toHaveLength(3);
  });

  it('checkpointChunks covers the bytes in order in chunks of PROTECTOR_CHUNK_BYTES, and an empty state is one empty chunk', () => {
    const state = new Uint8Array(2 * PROTECTOR_CHUNK_BYTES + 5).map((_, i) => i & 0xff);
    const chunks = checkpointChunks(state);
    expect(chunks.map((c) => [c.offset, c.chunk.length])).toEqual([[0, PROTECTOR_CHUNK_BYTES], [PROTECTOR_CHUNK_BYTES, PROTECTOR_CHUNK_BYTES], [2 * PROTECTOR_CHUNK_BYTES, 5]]);
    expect(Buffer.compare(concatBytes(chunks.map((c) => c.chunk)), state)).toBe(0);
    expect(checkpointChunks(new Uint8Array(0))).toEqual([{ offset: 0, chunk: new Uint8Array(0) }]);
    const frame = encodeToProtector({ type: 'put', id: 2 ** 40, logPos: 2 ** 40, size: PROTECTOR_MAX_CHECKPOINT_BYTES, offset: PROTECTOR_MAX_CHECKPOINT_BYTES - PROTECTOR_CHUNK_BYTES, chunk: chunks[0]!.chunk });
    expect(frame.length - 4).toBeLessThanOrEqual(PROTECTOR_MAX_FRAME_BYTES);
  });
});
