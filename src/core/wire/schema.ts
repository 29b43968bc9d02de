// Schema combinators for the canonical wire encoding (docs/PROTOCOL.md §2).
// A schema both encodes a value to a msgpack-ready array tree in a fixed field order and
// decodes an untrusted tree back, checking every type and every length against a named limit.
// Decoding is total: it returns a Result and never throws on peer input (STYLE.md 5).
import { err, InvariantError, ok, type Result } from '../../base/result.ts';

export interface Schema<T> {
  /** Value → plain tree (arrays, numbers, strings, booleans, Uint8Array, null). */
  enc(value: T): unknown;
  /** Untrusted tree → value, or a WIRE_* error naming the path that failed. */
  dec(tree: unknown, path: string): Result<T>;
}

const bad = (path: string, what: string) => err('WIRE_MALFORMED', `${path}: ${what}`);

/** Non-negative safe integer: sequence numbers, counters, sizes. */
export const uint: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) && t >= 0 ? ok(t) : bad(p, 'expected uint')),
};

export const bool: Schema<boolean> = {
  enc: (v) => v,
  dec: (t, p) => (typeof t === 'boolean' ? ok(t) : bad(p, 'expected bool')),
};

/** A lone UTF-16 surrogate has no UTF-8 encoding: msgpackr would write invalid UTF-8 (which
 *  every receiver refuses) or silently substitute U+FFFD. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function text(maxChars: number): Schema<string> {
  return {
    enc: (v) => {
      // Our own callers must hand us well-formed text; input boundaries (CLI) check it.
      if (LONE_SURROGATE.test(v)) throw new InvariantError('text with a lone UTF-16 surrogate cannot be encoded');
      return v;
    },
    dec: (t, p) => {
      if (typeof t !== 'string') return bad(p, 'expected string');
      if (t.length > maxChars) return err('WIRE_LIMIT', `${p}: string of ${t.length} chars > ${maxChars}`);
      if (LONE_SURROGATE.test(t)) return bad(p, 'lone surrogate');
      return ok(t);
    },
  };
}

/** `s` cut to fit a text(maxChars) field, ending in an ellipsis: never between the two halves
 *  of a surrogate pair, whose lone half the encoder refuses (a reason that embeds an operator's
 *  path with an emoji at the cut would otherwise never be sent). */
export function clipText(s: string, maxChars: number): string {
  if (s.length <= maxChars) return s;
  const end = maxChars - 1;
  const cut = /[\uD800-\uDBFF]/.test(s.charAt(end - 1)) ? end - 1 : end;
  return `${s.slice(0, cut)}…`;
}

/** A string drawn from a pattern, e.g. process ids. */
export function token(maxChars: number, pattern: RegExp): Schema<string> {
  const base = text(maxChars);
  return {
    enc: base.enc,
    dec: (t, p) => {
      const r = base.dec(t, p);
      if (!r.ok) return r;
      return pattern.test(r.value) ? r : bad(p, 'bad token');
    },
  };
}

export function oneOf<const V extends string>(values: readonly V[]): Schema<V> {
  return {
    enc: (v) => values.indexOf(v),
    dec: (t, p) => {
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t >= values.length) return bad(p, 'bad enum');
      return ok(values[t] as V);
    },
  };
}

export function bytes(maxBytes: number, exactBytes?: number): Schema<Uint8Array> {
  return {
    enc: (v) => v,
    dec: (t, p) => {
      if (!(t instanceof Uint8Array)) return bad(p, 'expected bytes');
      if (t.length > maxBytes) return err('WIRE_LIMIT', `${p}: ${t.length} bytes > ${maxBytes}`);
      if (exactBytes !== undefined && t.length !== exactBytes) return bad(p, `expected ${exactBytes} bytes`);
      // Copy out of the receive buffer so a retained value never pins or aliases it.
      return ok(Uint8Array.prototype.slice.call(t));
    },
  };
}

export function nullable<T>(inner: Schema<T>): Schema<T | null> {
  return {
    enc: (v) => (v === null ? null : inner.enc(v)),
    dec: (t, p) => (t === null || t === undefined ? ok(null) : inner.dec(t, p)),
  };
}

export function list<T>(inner: Schema<T>, maxEntries: number): Schema<T[]> {
  return {
    enc: (v) => v.map((x) => inner.enc(x)),
    dec: (t, p) => {
      if (!Array.isArray(t)) return bad(p, 'expected list');
      if (t.length > maxEntries) return err('WIRE_LIMIT', `${p}: ${t.length} entries > ${maxEntries}`);
      const out: T[] = [];
      for (let i = 0; i < t.length; i++) {
        const r = inner.dec(t[i], `${p}[${i}]`);
        if (!r.ok) return r;
        out.push(r.value);
      }
      return ok(out);
    },
  };
}

type Fields<T> = { [K in keyof T]: Schema<T[K]> };

/** An object encoded as an array in the fixed order of `order` (canonical: no map keys). */
export function struct<T extends object>(order: readonly (keyof T & string)[], fields: Fields<T>): Schema<T> {
  return {
    enc: (v) => order.map((k) => fields[k].enc(v[k])),
    dec: (t, p) => {
      if (!Array.isArray(t)) return bad(p, 'expected struct');
      if (t.length !== order.length) return bad(p, `expected ${order.length} fields, got ${t.length}`);
      const out: Record<string, unknown> = {};
      for (let i = 0; i < order.length; i++) {
        const k = order[i] as keyof T & string;
        const r = fields[k].dec(t[i], `${p}.${k}`);
        if (!r.ok) return r;
        out[k] = r.value;
      }
      return ok(out as T);
    },
  };
}

type Tagged = { type: string };
type Variant<T extends Tagged, K extends T['type']> = Omit<Extract<T, { type: K }>, 'type'>;
export type UnionSpec<T extends Tagged> = {
  [K in T['type']]: { code: number; order: readonly (keyof Variant<T, K> & string)[]; fields: Fields<Variant<T, K>> };
};

/** A discriminated union on `type`, encoded as [code, ...fields]. Unknown codes are typed
 *  WIRE_UNKNOWN_TYPE so a newer peer's message is told apart from garbage. */
export function union<T extends Tagged>(spec: UnionSpec<T>): Schema<T> {
  const byCode = new Map<number, { type: string; schema: Schema<object> }>();
  const byType = new Map<string, { code: number; schema: Schema<object> }>();
  for (const type of Object.keys(spec) as T['type'][]) {
    const v = spec[type];
    const schema = struct(v.order as never, v.fields as never) as Schema<object>;
    if (byCode.has(v.code)) throw new Error(`duplicate union code ${v.code}`);
    byCode.set(v.code, { type, schema });
    byType.set(type, { code: v.code, schema });
  }
  return {
    enc: (v) => {
      const entry = byType.get(v.type);
      if (entry === undefined) throw new Error(`no codec for type ${v.type}`);
      const body = entry.schema.enc(v) as unknown[];
      return [entry.code, ...body];
    },
    dec: (t, p) => {
      if (!Array.isArray(t) || t.length === 0) return bad(p, 'expected tagged union');
      const code = t[0];
      if (typeof code !== 'number') return bad(p, 'expected union code');
      const entry = byCode.get(code);
      if (entry === undefined) return err('WIRE_UNKNOWN_TYPE', `${p}: unknown type code ${code}`);
      const r = entry.schema.dec(t.slice(1), `${p}<${entry.type}>`);
      if (!r.ok) return r;
      return ok({ type: entry.type, ...r.value } as T);
    },
  };
}
