// The messages between a task process and a protector (docs/PROTOCOL.md §11.4): a TCP stream of
// frames = length u32 (big-endian) ‖ canonical msgpack of the unions below, framed as on the
// agent's local socket (app-wire.ts), with every frame at most PROTECTOR_MAX_FRAME_BYTES.
// Decoding is total: a malformed or oversized frame is a typed error and the connection closes.
//
//   protector → client   challenge {nonce}                         at accept
//   client → protector   hello {task, rank, incarnation, nonce, mac} (MAC: protector-auth.ts)
//   protector → client   welcome {last, mac} | refused {code, reason} (then it closes)
//   client → protector   append {pos, blob} | appendBatch {first, blobs}  → appended {upTo}
//                        put {id, logPos, size, offset, chunk} …    → stored {id} at the last chunk
//                        fetch                                      → checkpoint chunks, log
//                                                                     entries, then fetched {last}
//                        deposit {dest, ssn, blob}                 → deposited {dest, ssn}
//                        subscribe {from}                           → pushed {first, blobs} …
//                                                                     (as the log grows)
//   either refusal of one request: error {op, ref, code, reason}; the connection stays.
//
// `deposit` and `subscribe` are the channel-memory role (channel-memory.ts, PROTOCOL §11.6):
// a sender logs its message to `dest` at dest's home CM; the rank subscribed there receives its
// log's entries in the CM's order, as they are appended.
//
// `appended.upTo` acknowledges every position up to it (the acknowledgement RBML's receiver
// waits for before it acknowledges the sender, PROTOCOL §11.3), so appends are pipelined.
import {
  MAC_BYTES, MAX_TASK_PROCS, MAX_TEXT_CHARS, PROTECTOR_CHUNK_BYTES, PROTECTOR_MAX_BATCH_ENTRIES, PROTECTOR_MAX_CHECKPOINT_BYTES,
  PROTECTOR_MAX_ENTRY_BYTES, PROTECTOR_MAX_FRAME_BYTES,
} from '../constants.ts';
import { err } from '../../base/result.ts';
import type { StoreRefusal } from '../protector-store.ts';
import { AppFrameDecoder, encodeAppFrame } from './app-wire.ts';
import { taskId, u32 } from './basics.ts';
import { bytes, list, oneOf, text, uint, union, type Schema } from './schema.ts';

/** The nonces of the hello (PROTOCOL §11.4, as §9.5): 256 fresh random bits per connection. */
export const PROTECTOR_NONCE_BYTES = 32;

/** Every reason a protector refuses a request or closes a connection. */
export type ProtectorCode =
  | StoreRefusal
  /** The hello's MAC does not verify under the task key (or the welcome's, at the client). */
  | 'BAD_MAC'
  | 'MALFORMED'
  /** A frame over PROTECTOR_MAX_FRAME_BYTES. */
  | 'TOO_LARGE'
  /** A message out of order (before the hello, a second hello, a chunk out of place). */
  | 'UNEXPECTED'
  /** No valid hello within the timeout (PROTOCOL §9.5 Strangers). */
  | 'AUTH_TIMEOUT'
  | 'TOO_MANY_CONNECTIONS'
  /** A newer connection of the same rank took this one's place. */
  | 'REPLACED'
  /** The group released the task (`rollback.release`). */
  | 'RELEASED'
  /** The protector is stopping. */
  | 'SHUTDOWN'
  /** The client left more than PROTECTOR_MAX_UNREAD_BYTES of answers unread. */
  | 'SLOW_CLIENT';

const CODES = [
  'UNKNOWN_TASK', 'FENCED', 'BAD_RANK', 'GAP', 'CONFLICT', 'STALE', 'BAD_CHECKPOINT', 'STATE_TOO_LARGE', 'LOG_FULL', 'STORE_FULL',
  'TOO_MANY_TASKS', 'BAD_MAC', 'MALFORMED', 'TOO_LARGE', 'UNEXPECTED', 'AUTH_TIMEOUT', 'TOO_MANY_CONNECTIONS', 'REPLACED', 'RELEASED',
  'SHUTDOWN', 'SLOW_CLIENT', 'BAD_DEPOSIT',
] as const satisfies readonly ProtectorCode[];
// Every code has a wire value: a missing one is a type error here.
const _everyCode: Exclude<ProtectorCode, (typeof CODES)[number]> extends never ? true : never = true;
void _everyCode;
const code: Schema<ProtectorCode> = oneOf(CODES);

export type ProtectorOp = 'append' | 'put' | 'fetch' | 'deposit' | 'subscribe';
const op: Schema<ProtectorOp> = oneOf(['append', 'put', 'fetch', 'deposit', 'subscribe'] as const);

/** A bounded non-negative integer: ranks below MAX_TASK_PROCS, sizes within their limit. */
function below(limit: number, what: string): Schema<number> {
  return {
    enc: (v) => v,
    dec: (t, p) => {
      const r = uint.dec(t, p);
      if (!r.ok) return r;
      return r.value < limit ? r : err('WIRE_LIMIT', `${p}: ${what} ${r.value} ≥ ${limit}`);
    },
  };
}
const rank = below(MAX_TASK_PROCS, 'rank');
const size = below(PROTECTOR_MAX_CHECKPOINT_BYTES + 1, 'checkpoint size');
const nonce = bytes(PROTECTOR_NONCE_BYTES, PROTECTOR_NONCE_BYTES);
const mac = bytes(MAC_BYTES, MAC_BYTES);
const blob = bytes(PROTECTOR_MAX_ENTRY_BYTES);
const chunk = bytes(PROTECTOR_CHUNK_BYTES);
const blobs = list(blob, PROTECTOR_MAX_BATCH_ENTRIES);

export type ToProtector =
  | { type: 'hello'; task: string; rank: number; incarnation: number; nonce: Uint8Array; mac: Uint8Array }
  | { type: 'append'; pos: number; blob: Uint8Array }
  /** Entries at positions first, first + 1, … */
  | { type: 'appendBatch'; first: number; blobs: Uint8Array[] }
  /** One chunk of checkpoint `id` (`size` bytes in all), at `offset`; chunks come in order. */
  | { type: 'put'; id: number; logPos: number; size: number; offset: number; chunk: Uint8Array }
  | { type: 'fetch' }
  /** Log message `ssn` of this rank to `dest` at dest's home CM; `blob` is the log entry. */
  | { type: 'deposit'; dest: number; ssn: number; blob: Uint8Array }
  /** Push this rank's log entries after position `from`, and every one appended from now on. */
  | { type: 'subscribe'; from: number };

export type ToClient =
  | { type: 'challenge'; nonce: Uint8Array }
  /** `last`: the rank's last stored position; `mac` proves the protector holds the task key. */
  | { type: 'welcome'; last: number; mac: Uint8Array }
  /** The connection is refused or closed, for this reason. */
  | { type: 'refused'; code: ProtectorCode; reason: string }
  | { type: 'appended'; upTo: number }
  | { type: 'stored'; id: number }
  | { type: 'checkpoint'; id: number; logPos: number; size: number; offset: number; chunk: Uint8Array }
  | { type: 'entries'; first: number; blobs: Uint8Array[] }
  /** The end of a fetch. */
  | { type: 'fetched'; last: number }
  /** The CM holds message `ssn` to `dest` (stored now or before). */
  | { type: 'deposited'; dest: number; ssn: number }
  /** Subscribed entries at positions first, first + 1, … */
  | { type: 'pushed'; first: number; blobs: Uint8Array[] }
  /** One request refused: `ref` is the append's position, the checkpoint's id, the deposit's ssn
   *  or the subscription's `from` (0 for fetch). */
  | { type: 'error'; op: ProtectorOp; ref: number; code: ProtectorCode; reason: string };

export const toProtector: Schema<ToProtector> = union<ToProtector>({
  hello: { code: 1, order: ['task', 'rank', 'incarnation', 'nonce', 'mac'], fields: { task: taskId, rank, incarnation: u32, nonce, mac } },
  append: { code: 2, order: ['pos', 'blob'], fields: { pos: uint, blob } },
  appendBatch: { code: 3, order: ['first', 'blobs'], fields: { first: uint, blobs } },
  put: { code: 4, order: ['id', 'logPos', 'size', 'offset', 'chunk'], fields: { id: uint, logPos: uint, size, offset: size, chunk } },
  fetch: { code: 5, order: [], fields: {} },
  deposit: { code: 6, order: ['dest', 'ssn', 'blob'], fields: { dest: rank, ssn: u32, blob } },
  subscribe: { code: 7, order: ['from'], fields: { from: uint } },
});

export const toClient: Schema<ToClient> = union<ToClient>({
  challenge: { code: 1, order: ['nonce'], fields: { nonce } },
  welcome: { code: 2, order: ['last', 'mac'], fields: { last: uint, mac } },
  refused: { code: 3, order: ['code', 'reason'], fields: { code, reason: text(MAX_TEXT_CHARS) } },
  appended: { code: 4, order: ['upTo'], fields: { upTo: uint } },
  stored: { code: 5, order: ['id'], fields: { id: uint } },
  checkpoint: { code: 6, order: ['id', 'logPos', 'size', 'offset', 'chunk'], fields: { id: uint, logPos: uint, size, offset: size, chunk } },
  entries: { code: 7, order: ['first', 'blobs'], fields: { first: uint, blobs } },
  fetched: { code: 8, order: ['last'], fields: { last: uint } },
  error: { code: 9, order: ['op', 'ref', 'code', 'reason'], fields: { op, ref: uint, code, reason: text(MAX_TEXT_CHARS) } },
  deposited: { code: 10, order: ['dest', 'ssn'], fields: { dest: rank, ssn: u32 } },
  pushed: { code: 11, order: ['first', 'blobs'], fields: { first: uint, blobs } },
});

/** Room a frame's header and fields take beside a chunk or a batch's blobs: msgpack's array and
 *  bin headers and a few integers (a batch's blobs cost 5 bytes of header each). */
export const PROTECTOR_FRAME_FIELDS_BYTES = 64;
/** What one blob costs in a batch frame beyond its bytes (its bin header). */
export const PROTECTOR_BATCH_BLOB_OVERHEAD_BYTES = 5;

export const encodeToProtector = (msg: ToProtector): Uint8Array => encodeAppFrame(toProtector, msg);
export const encodeToClient = (msg: ToClient): Uint8Array => encodeAppFrame(toClient, msg);
/** The protector's incremental decoder of a client's stream (total; fails for good on the first
 *  bad frame). */
export const protectorDecoder = (): AppFrameDecoder<ToProtector> => new AppFrameDecoder(toProtector, PROTECTOR_MAX_FRAME_BYTES);
export const clientDecoder = (): AppFrameDecoder<ToClient> => new AppFrameDecoder(toClient, PROTECTOR_MAX_FRAME_BYTES);

/** The protector's reason for a decoder's error: an oversized frame, or anything else malformed. */
export const wireFailure = (c: string): ProtectorCode => (c === 'WIRE_LIMIT' ? 'TOO_LARGE' : 'MALFORMED');

/** Split `blobs` (positions first, first + 1, …) into appendBatch messages that each fit a frame
 *  and PROTECTOR_MAX_BATCH_ENTRIES. A blob over PROTECTOR_MAX_ENTRY_BYTES is the caller's bug. */
export function batchAppends(first: number, all: readonly Uint8Array[]): Extract<ToProtector, { type: 'appendBatch' }>[] {
  const out: Extract<ToProtector, { type: 'appendBatch' }>[] = [];
  let cur: Uint8Array[] = [];
  let curBytes = PROTECTOR_FRAME_FIELDS_BYTES;
  let start = first;
  for (const b of all) {
    const cost = b.length + PROTECTOR_BATCH_BLOB_OVERHEAD_BYTES;
    if (cur.length > 0 && (curBytes + cost > PROTECTOR_MAX_FRAME_BYTES || cur.length >= PROTECTOR_MAX_BATCH_ENTRIES)) {
      out.push({ type: 'appendBatch', first: start, blobs: cur });
      start += cur.length;
      cur = [];
      curBytes = PROTECTOR_FRAME_FIELDS_BYTES;
    }
    cur.push(b);
    curBytes += cost;
  }
  if (cur.length > 0) out.push({ type: 'appendBatch', first: start, blobs: cur });
  return out;
}

/** The chunks of a checkpoint's bytes (one empty chunk for empty bytes, so a put always ends). */
export function checkpointChunks(bytesOf: Uint8Array): { offset: number; chunk: Uint8Array }[] {
  const out: { offset: number; chunk: Uint8Array }[] = [];
  for (let offset = 0; offset < bytesOf.length || out.length === 0; offset += PROTECTOR_CHUNK_BYTES) {
    out.push({ offset, chunk: bytesOf.subarray(offset, Math.min(bytesOf.length, offset + PROTECTOR_CHUNK_BYTES)) });
  }
  return out;
}

/** Whether a log entry's bytes fit one frame. */
export const entryFits = (b: Uint8Array): boolean => b.length <= PROTECTOR_MAX_ENTRY_BYTES;
