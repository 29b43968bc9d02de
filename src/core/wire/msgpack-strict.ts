// A strict msgpack decoder for peer input (docs/PROTOCOL.md §2.2). It accepts only what Trine's
// canonical encoding produces: nil, booleans, integers, float64, UTF-8 strings, binary and
// arrays, with a depth limit, no maps and no extension types. UTF-8 is decoded fatally, so every
// machine accepts or rejects the same bytes the same way (msgpackr's optional native addon and
// its JS path disagree on invalid UTF-8). Every length is checked against the remaining input
// before anything is allocated, so a header claiming 2^32 elements costs nothing.
import { err, ok, type Result } from '../../base/result.ts';

/** Deepest nesting any Trine message has is 6 (frame → items → item → body → payload → list). */
export const MAX_DEPTH = 12;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

class Reader {
  pos = 0;
  readonly view: DataView;
  constructor(readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  need(n: number): boolean {
    return this.pos + n <= this.buf.length;
  }
}

type Tree = null | boolean | number | string | Uint8Array | Tree[];

const fail = (detail: string) => err('WIRE_MALFORMED', `msgpack: ${detail}`);

function readValue(r: Reader, depth: number): Result<Tree> {
  if (!r.need(1)) return fail('truncated');
  const b = r.buf[r.pos++] as number;
  if (b <= 0x7f) return ok(b);
  if (b >= 0xe0) return ok(b - 0x100);
  if ((b & 0xe0) === 0xa0) return readStr(r, b & 0x1f);
  if ((b & 0xf0) === 0x90) return readArray(r, b & 0x0f, depth);
  const v = r.view;
  switch (b) {
    case 0xc0: return ok(null);
    case 0xc2: return ok(false);
    case 0xc3: return ok(true);
    case 0xcc: if (!r.need(1)) return fail('truncated'); r.pos += 1; return ok(v.getUint8(r.pos - 1));
    case 0xcd: if (!r.need(2)) return fail('truncated'); r.pos += 2; return ok(v.getUint16(r.pos - 2));
    case 0xce: if (!r.need(4)) return fail('truncated'); r.pos += 4; return ok(v.getUint32(r.pos - 4));
    case 0xcf: {
      if (!r.need(8)) return fail('truncated');
      const n = v.getBigUint64(r.pos);
      r.pos += 8;
      if (n > BigInt(Number.MAX_SAFE_INTEGER)) return fail('uint64 beyond 2^53');
      return ok(Number(n));
    }
    case 0xd0: if (!r.need(1)) return fail('truncated'); r.pos += 1; return ok(v.getInt8(r.pos - 1));
    case 0xd1: if (!r.need(2)) return fail('truncated'); r.pos += 2; return ok(v.getInt16(r.pos - 2));
    case 0xd2: if (!r.need(4)) return fail('truncated'); r.pos += 4; return ok(v.getInt32(r.pos - 4));
    case 0xd3: {
      if (!r.need(8)) return fail('truncated');
      const n = v.getBigInt64(r.pos);
      r.pos += 8;
      if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER)) return fail('int64 beyond 2^53');
      return ok(Number(n));
    }
    case 0xcb: if (!r.need(8)) return fail('truncated'); r.pos += 8; return ok(v.getFloat64(r.pos - 8));
    case 0xd9: if (!r.need(1)) return fail('truncated'); r.pos += 1; return readStr(r, v.getUint8(r.pos - 1));
    case 0xda: if (!r.need(2)) return fail('truncated'); r.pos += 2; return readStr(r, v.getUint16(r.pos - 2));
    case 0xdb: if (!r.need(4)) return fail('truncated'); r.pos += 4; return readStr(r, v.getUint32(r.pos - 4));
    case 0xc4: if (!r.need(1)) return fail('truncated'); r.pos += 1; return readBin(r, v.getUint8(r.pos - 1));
    case 0xc5: if (!r.need(2)) return fail('truncated'); r.pos += 2; return readBin(r, v.getUint16(r.pos - 2));
    case 0xc6: if (!r.need(4)) return fail('truncated'); r.pos += 4; return readBin(r, v.getUint32(r.pos - 4));
    case 0xdc: if (!r.need(2)) return fail('truncated'); r.pos += 2; return readArray(r, v.getUint16(r.pos - 2), depth);
    case 0xdd: if (!r.need(4)) return fail('truncated'); r.pos += 4; return readArray(r, v.getUint32(r.pos - 4), depth);
    default:
      // maps (0x8x, 0xde, 0xdf), extensions (0xc7–0xc9, 0xd4–0xd8), float32 (0xca), 0xc1
      return fail(`type byte 0x${b.toString(16)} not allowed`);
  }
}

function readStr(r: Reader, n: number): Result<Tree> {
  if (!r.need(n)) return fail('string past end');
  try {
    const s = utf8.decode(r.buf.subarray(r.pos, r.pos + n));
    r.pos += n;
    return ok(s);
  } catch {
    return fail('invalid UTF-8');
  }
}

function readBin(r: Reader, n: number): Result<Tree> {
  if (!r.need(n)) return fail('binary past end');
  const out = r.buf.subarray(r.pos, r.pos + n);
  r.pos += n;
  return ok(out);
}

function readArray(r: Reader, n: number, depth: number): Result<Tree> {
  if (depth >= MAX_DEPTH) return fail('nested too deep');
  // Every element takes at least one byte: a count beyond the input is a lie, not a size.
  if (!r.need(n)) return fail('array longer than input');
  const out: Tree[] = [];
  for (let i = 0; i < n; i++) {
    const e = readValue(r, depth + 1);
    if (!e.ok) return e;
    out.push(e.value);
  }
  return ok(out);
}

/** Decode exactly one value filling all of `data`. Binary values are views into `data`. */
export function decodeStrict(data: Uint8Array): Result<unknown> {
  const r = new Reader(data);
  const v = readValue(r, 0);
  if (!v.ok) return v;
  if (r.pos !== data.length) return fail(`${data.length - r.pos} trailing bytes`);
  return v;
}
