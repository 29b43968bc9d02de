// The payload of a G-MPI message (spec §5): raw bytes as given, or a structured application
// value encoded with msgpack. This file owns that choice and both directions of it. Structured
// payloads are application data, not protocol messages, so they use msgpackr's general decoder
// (not core's strict one), made total here: a payload a peer malformed becomes BAD_PAYLOAD for
// the receiving caller, never a throw out of an event handler (STYLE.md 5). The wire says which
// kind a payload is (wire.ts flag STRUCTURED), so raw bytes never pay for encoding.
import { C1, Packr } from 'msgpackr';
import type { Ok } from '../../base/result.ts';

export type EncodedPayload = { readonly bytes: Uint8Array; readonly structured: boolean };
export type PayloadErr = { readonly ok: false; readonly code: 'BAD_PAYLOAD' | 'BAD_ARGUMENT'; readonly detail: string };
export type PayloadResult<T> = Ok<T> | PayloadErr;

/** Plain msgpack maps (no shared record structures between processes: each message stands
 *  alone); `moreTypes` so typed arrays keep their type (msgpackr 1.12 without it writes wrong
 *  bytes for a Float64Array). Maps decode as objects with string keys. */
const packr = new Packr({ useRecords: false, moreTypes: true });

export const EMPTY_PAYLOAD: EncodedPayload = Object.freeze({ bytes: new Uint8Array(0), structured: false });

/** A Uint8Array (Buffer included) travels as-is; anything else is msgpack-encoded. A value
 *  msgpack cannot represent (a symbol, say) is the caller's BAD_ARGUMENT. */
export function encodePayload(value: unknown): PayloadResult<EncodedPayload> {
  if (value instanceof Uint8Array) return { ok: true, value: { bytes: value, structured: false } };
  try {
    return { ok: true, value: { bytes: packr.pack(value), structured: true } };
  } catch (e) {
    return { ok: false, code: 'BAD_ARGUMENT', detail: `value cannot be encoded: ${(e as Error).message}` };
  }
}

/** Raw payloads are returned as their bytes; structured ones decoded, or BAD_PAYLOAD. One
 *  message is one value: trailing bytes, truncation and msgpack's never-used byte 0xc1 at the
 *  top level are errors. (msgpackr reads a nested 0xc1 as an opaque marker value; it cannot
 *  hurt the receiver, so it is not searched for.) */
export function decodePayload(payload: EncodedPayload): PayloadResult<unknown> {
  if (!payload.structured) return { ok: true, value: payload.bytes };
  try {
    const value: unknown = packr.unpack(payload.bytes);
    if (value === C1) return { ok: false, code: 'BAD_PAYLOAD', detail: 'payload is the reserved byte 0xc1' };
    return { ok: true, value };
  } catch (e) {
    return { ok: false, code: 'BAD_PAYLOAD', detail: `structured payload does not decode: ${(e as Error).message}` };
  }
}
