// The strict msgpack decoder of src/core/wire/msgpack-strict.ts (docs/PROTOCOL.md §2.2, step 8):
// everything Trine's canonical encoder writes decodes back to the same value; every type byte
// Trine never writes (maps, extensions, float32, 0xc1) is refused; any truncation, trailing
// byte, over-deep nesting, unsafe 64-bit integer, invalid UTF-8 or length header longer than
// the input is WIRE_MALFORMED, returned and never thrown.
import { Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import type { Result } from '../../../../src/base/result.ts';
import { encodeFrame, pack } from '../../../../src/core/wire/frame.ts';
import { decodeStrict, MAX_DEPTH } from '../../../../src/core/wire/msgpack-strict.ts';
import { CLUSTER, encodeLoose, itemsFrom, mp, signerOf, splitFrame } from './wire-samples.ts';

const code = (r: Result<unknown>): string => (r.ok ? 'ok' : r.code);
const detail = (r: Result<unknown>): string => (r.ok ? '' : r.detail);
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const bytes = (h: string): Uint8Array => Uint8Array.from(Buffer.from(h.replace(/\s+/g, ''), 'hex'));
const value = (r: Result<unknown>): unknown => {
  if (!r.ok) throw new Error(`expected ok, got ${r.code}: ${r.detail}`);
  return r.value;
};
/** Comparable form: byte arrays as hex, BigInts (msgpackr's 64-bit ints) as numbers, -0 kept. */
const normal = (v: unknown): unknown => {
  if (v instanceof Uint8Array) return { bin: hex(v) };
  if (Array.isArray(v)) return v.map(normal);
  if (typeof v === 'bigint') return Number(v);
  if (Object.is(v, -0)) return '-0';
  return v;
};

/** A run of `n` fixint zeros. */
const zeros = (n: number): number[] => Array.from({ length: n }, () => 0);

/** A frame body of every item type: the largest real input the decoder sees. */
const realBody = splitFrame(encodeFrame({ from: 'a1', to: 'r1', items: itemsFrom('a1') }, { cluster: CLUSTER, signer: signerOf('a1') })).body;

/** One value of every kind and every width msgpackr writes. */
const samples: unknown[] = [
  null, true, false,
  0, 1, 127, -1, -32, // fixint
  128, 255, 256, 65535, 65536, 2 ** 32 - 1, // uint 8/16/32
  -33, -128, -129, -32768, -32769, -(2 ** 31), // int 8/16/32
  0.5, -1.5, 2 ** 32, 2 ** 53 - 1, -(2 ** 31) - 1, -(2 ** 53 - 1), 1e308, 5e-324, Infinity, -Infinity, Number.NaN, // float64
  '', 'a', 'x'.repeat(31), 'x'.repeat(32), 'é'.repeat(16), '✓ ünï 😀', '\ufeffbom', '\u0000', 'x'.repeat(255), 'x'.repeat(256), 'y'.repeat(65535), 'z'.repeat(65536),
  new Uint8Array(0), Uint8Array.of(1, 2, 3), new Uint8Array(255).fill(7), new Uint8Array(256).fill(8), new Uint8Array(65536).fill(9),
  [], [null], zeros(15), zeros(16), zeros(65535), zeros(65536),
  [1, ['a', [Uint8Array.of(0xff), [true, [null, [-1, [2 ** 40]]]]]]],
];

const REJECTED_TYPE_BYTES = [
  ...Array.from({ length: 16 }, (_, i) => 0x80 + i), 0xde, 0xdf, // maps
  0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, // extensions
  0xca, // float32
  0xc1, // never used
].sort((a, b) => a - b);

describe('decodeStrict: what Trine writes, it reads', () => {
  it("decodes msgpackr's canonical output of every accepted type and width back to the same value", () => {
    const firstBytes = new Set<number>();
    for (const v of samples) {
      const packed = pack(v);
      firstBytes.add(packed[0] as number);
      const got = value(decodeStrict(packed));
      expect(normal(got), `value ${JSON.stringify(normal(v)).slice(0, 60)}`).toEqual(normal(v));
      // and it is what the encoder wrote: decoding loses nothing the encoding depends on
      expect(hex(pack(got))).toBe(hex(packed));
    }
    // every type byte the canonical encoder uses was exercised
    for (const b of [0x00, 0x7f, 0xe0, 0xff, 0x90, 0x91, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xcb, 0xcc, 0xcd, 0xce, 0xd0, 0xd1, 0xd2, 0xd9, 0xda, 0xdb, 0xdc, 0xdd]) {
      expect(firstBytes.has(b), `type byte 0x${b.toString(16)} not exercised`).toBe(true);
    }
  });

  it('decodes a real frame body of every item type, byte for byte', () => {
    expect(hex(pack(value(decodeStrict(realBody))))).toBe(hex(realBody));
  });

  it('reads the 64-bit integer forms msgpackr never writes, when they are safe integers', () => {
    expect(value(decodeStrict(mp.u64(0)))).toBe(0);
    expect(value(decodeStrict(mp.u64(2 ** 53 - 1)))).toBe(2 ** 53 - 1);
    expect(value(decodeStrict(mp.i64(-(2 ** 53 - 1))))).toBe(-(2 ** 53 - 1));
    expect(value(decodeStrict(mp.i64(5)))).toBe(5);
  });

  it('agrees with msgpackr on every encoding width of the same values (differential)', () => {
    const reference = new Unpackr({ useRecords: false });
    let seed = 7;
    const choose = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 16) % n;
    };
    const trees = [value(decodeStrict(realBody)), ...samples.filter((v) => !(Array.isArray(v) && v.length > 1000))];
    for (let round = 0; round < 40; round++) {
      for (const tree of trees) {
        const loose = encodeLoose(tree, choose);
        const got = value(decodeStrict(loose));
        expect(normal(got)).toEqual(normal(tree));
        expect(normal(reference.unpack(loose))).toEqual(normal(tree));
      }
    }
  });

  it('accepts a Buffer and a view into a larger buffer, and hands binary back as views of the input', () => {
    const packed = pack([Uint8Array.of(1, 2), 'x']);
    expect(normal(value(decodeStrict(Buffer.from(packed))))).toEqual(normal([Uint8Array.of(1, 2), 'x']));
    const big = new Uint8Array(packed.length + 10).fill(0xc1);
    big.set(packed, 5);
    const got = value(decodeStrict(big.subarray(5, 5 + packed.length))) as [Uint8Array, string];
    expect(hex(got[0])).toBe('0102');
    expect(got[0].buffer).toBe(big.buffer);
  });
});

describe('decodeStrict: refused input is WIRE_MALFORMED, never an exception', () => {
  it('refuses exactly the map, extension, float32 and 0xc1 type bytes, at the top and nested', () => {
    const accepted: number[] = [];
    const refused: number[] = [];
    for (let b = 0; b <= 0xff; b++) {
      // a type byte is accepted if some run of zero bytes completes a value that decodes
      let ok = false;
      for (let n = 0; n <= 32 && !ok; n++) ok = decodeStrict(Uint8Array.of(b, ...zeros(n))).ok;
      (ok ? accepted : refused).push(b);
    }
    expect(refused).toEqual(REJECTED_TYPE_BYTES);
    expect(accepted).toHaveLength(256 - REJECTED_TYPE_BYTES.length);
  });

  it('refuses well-formed maps, extensions and float32 values, whatever surrounds them', () => {
    const hostile: Array<[string, Uint8Array]> = [
      ['empty fixmap', mp.map([])],
      ['fixmap', mp.map([[mp.str('a', 'fix'), mp.fixint(1)]])],
      ['map16', mp.map([[mp.fixint(1), mp.fixint(2)]], 16)],
      ['map32', mp.map([], 32)],
      ['fixext1', bytes('d4 01 00')],
      ['fixext2', bytes('d5 01 0000')],
      ['fixext4 (msgpack timestamp)', bytes('d6 ff 00000000')],
      ['fixext8', bytes('d7 01 0000000000000000')],
      ['fixext16', bytes('d8 01 00000000000000000000000000000000')],
      ['ext8', bytes('c7 01 05 00')],
      ['ext16', bytes('c8 0001 05 00')],
      ['ext32', bytes('c9 00000001 05 00')],
      ['float32', mp.f32(1.5)],
      ['0xc1', bytes('c1')],
    ];
    for (const [name, h] of hostile) {
      for (const data of [h, mp.array([mp.fixint(1), h]), mp.array([mp.array([mp.array([h])])], 16)]) {
        const r = decodeStrict(data);
        expect(code(r), name).toBe('WIRE_MALFORMED');
        expect(detail(r), name).toMatch(/not allowed/);
      }
    }
  });

  it('refuses every truncation of a valid encoding, even with the rest of the bytes still in the buffer', () => {
    for (const whole of [realBody, ...samples.filter((v) => !(Array.isArray(v) && v.length > 1000)).map((v) => pack(v))]) {
      if (whole.length > 70_000) continue;
      const padded = new Uint8Array(whole.length + 16);
      padded.set(whole, 8);
      for (let end = 0; end < whole.length; end++) {
        // a view whose underlying buffer goes on: the decoder must stop at the view's end
        const r = decodeStrict(padded.subarray(8, 8 + end));
        // refused as short input, not as something else (e.g. reading past the view, then "trailing" bytes)
        if (r.ok || r.code !== 'WIRE_MALFORMED' || !/truncated|past end|longer than input/.test(r.detail)) {
          throw new Error(`truncation to ${end} of ${hex(whole).slice(0, 40)} gave ${code(r)} ${detail(r)}`);
        }
      }
    }
  });

  it('refuses trailing bytes after one complete value', () => {
    for (const v of [null, 0, 'x', [1, 2], Uint8Array.of(1)]) {
      for (const tail of [[0x00], [0xc0], [...pack(v)], [0xc1]]) {
        const r = decodeStrict(Uint8Array.from([...pack(v), ...tail]));
        expect(code(r)).toBe('WIRE_MALFORMED');
        expect(detail(r)).toMatch(/trailing/);
      }
    }
    expect(code(decodeStrict(new Uint8Array(0)))).toBe('WIRE_MALFORMED');
  });

  it(`allows ${MAX_DEPTH} nested arrays and refuses one more, however deep the input goes`, () => {
    const nested = (depth: number): Uint8Array => Uint8Array.from([...Array.from({ length: depth }, () => 0x91), 0x00]);
    expect(code(decodeStrict(nested(MAX_DEPTH)))).toBe('ok');
    expect(code(decodeStrict(nested(MAX_DEPTH + 1)))).toBe('WIRE_MALFORMED');
    expect(detail(decodeStrict(nested(MAX_DEPTH + 1)))).toMatch(/too deep/);
    // a million levels would overflow a recursive decoder's stack without the limit
    const r = decodeStrict(nested(1_000_000));
    expect(code(r)).toBe('WIRE_MALFORMED');
    expect(detail(r)).toMatch(/too deep/);
    // the same depth through 16- and 32-bit array headers
    const wide = (depth: number): Uint8Array => {
      let v = mp.fixint(0);
      for (let i = 0; i < depth; i++) v = mp.array([v], i % 2 === 0 ? 16 : 32);
      return v;
    };
    expect(code(decodeStrict(wide(MAX_DEPTH)))).toBe('ok');
    expect(code(decodeStrict(wide(MAX_DEPTH + 1)))).toBe('WIRE_MALFORMED');
  });

  it('refuses 64-bit integers beyond ±(2^53 − 1)', () => {
    for (const data of [mp.u64(2 ** 53), mp.u64(2n ** 64n - 1n), mp.i64(2 ** 53), mp.i64(-(2 ** 53)), mp.i64(2n ** 63n - 1n), mp.i64(-(2n ** 63n))]) {
      const r = decodeStrict(data);
      expect(code(r), hex(data)).toBe('WIRE_MALFORMED');
      expect(detail(r)).toMatch(/beyond 2\^53/);
      expect(code(decodeStrict(mp.array([mp.fixint(1), data])))).toBe('WIRE_MALFORMED');
    }
  });

  // msgpackr, which this decoder replaced for peer input, answers these bytes differently on its
  // native and JavaScript paths (a string with U+FFFD, or an error): that is why it is gone.
  it('refuses invalid UTF-8 (decoded fatally) and keeps a BOM', () => {
    const invalid = ['80', 'bf', 'c0af', 'c1bf', 'e080af', 'eda080', 'edbfbf', 'f4908080', 'f5808080', 'ff', 'fe', 'e282', 'f09f98', 'c328', '61e2', 'f8888080 80'];
    for (const h of invalid) {
      for (const width of ['fix', 8, 16, 32] as const) {
        const data = mp.strBytes(bytes(h), width);
        const r = decodeStrict(data);
        expect(code(r), h).toBe('WIRE_MALFORMED');
        expect(detail(r)).toMatch(/UTF-8/);
        expect(code(decodeStrict(mp.array([mp.str('ok', 'fix'), data])))).toBe('WIRE_MALFORMED');
      }
    }
    // valid edge cases: the largest code points of each length, a surrogate pair, a leading BOM
    for (const s of ['\u007f', '\u07ff', '\uffff', '\u{10ffff}', '😀', '\ufeff', '\ufeffx']) {
      expect(value(decodeStrict(mp.str(s, 'fix')))).toBe(s);
    }
  });

  it('refuses a length header longer than the input before allocating anything', () => {
    const cases: Array<[string, Uint8Array, RegExp]> = [
      ['array32 of 2^32 − 1', bytes('dd ffffffff 00 00'), /array longer than input/],
      ['array16 of 65535', bytes('dc ffff 00 00 00'), /array longer than input/],
      ['fixarray of 15', bytes('9f 00 00'), /array longer than input/],
      ['str32 of 2^32 − 1', bytes('db ffffffff 61 62'), /string past end/],
      ['str16', bytes('da ffff 61'), /string past end/],
      ['str8', bytes('d9 ff 61'), /string past end/],
      ['fixstr', bytes('bf 61'), /string past end/],
      ['bin32 of 2^32 − 1', bytes('c6 ffffffff 01'), /binary past end/],
      ['bin16', bytes('c5 ffff 01'), /binary past end/],
      ['bin8', bytes('c4 ff 01'), /binary past end/],
      ['nested array32', bytes('92 00 dd ffffffff 00'), /array longer than input/],
    ];
    for (const [name, data, why] of cases) {
      const r = decodeStrict(data);
      expect(code(r), name).toBe('WIRE_MALFORMED');
      // the length was refused up front, not discovered element by element at the end
      expect(detail(r), name).toMatch(why);
    }
    // an array claiming 2^32 − 1 elements over a megabyte of real elements: refused at its header
    const bomb = new Uint8Array(5 + (1 << 20));
    bomb.set(bytes('dd ffffffff'), 0);
    expect(detail(decodeStrict(bomb))).toMatch(/array longer than input/);
    // a count equal to what is left is fine: each element takes at least one byte
    expect(value(decodeStrict(bytes('93 00 00 00')))).toEqual([0, 0, 0]);
  });

  it('never throws on random bytes, and what it accepts msgpackr reads the same way', () => {
    const reference = new Unpackr({ useRecords: false });
    let s = 0x5eed;
    const next = (): number => {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      return s >>> 0;
    };
    let accepted = 0;
    // bias towards small lengths and the accepted type bytes so some inputs decode
    const pool = [0x00, 0x01, 0x7f, 0xff, 0x90, 0x91, 0x92, 0x93, 0xa0, 0xa1, 0xa2, 0xc0, 0xc2, 0xc3, 0xc4, 0xcc, 0xcd, 0xd0, 0xd9, 0xdc, 0xcb, 0x61];
    for (let i = 0; i < 20_000; i++) {
      const n = next() % 24;
      const data = Uint8Array.from({ length: n }, () => (next() % 3 === 0 ? next() & 0xff : (pool[next() % pool.length] as number)));
      let r: Result<unknown>;
      try {
        r = decodeStrict(data);
      } catch (e) {
        throw new Error(`decodeStrict threw on ${hex(data)}: ${String(e)}`);
      }
      if (!r.ok) {
        expect(r.code).toBe('WIRE_MALFORMED');
        continue;
      }
      accepted++;
      expect(normal(r.value), hex(data)).toEqual(normal(reference.unpack(data)));
    }
    expect(accepted).toBeGreaterThan(100);
  });
});
