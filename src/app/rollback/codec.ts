// Bytes of rollback recovery (docs/PROTOCOL.md §11.3): the channel frames between two ranks, the
// receive-side log entries a protector stores, and checkpoints. Encoders for our own values and
// total decoders for what comes back from a peer or a protector (STYLE.md 5): a malformed,
// truncated or oversized input is a typed error, never a throw.
//
//   channel frame (the payload of one P2P library message on ROLLBACK_COMM):
//     kind u8 = 1 data ‖ ssn u32 ‖ epoch u32 ‖ comm u32 ‖ tag i32 ‖ structured u8 ‖ data
//     kind u8 = 2 ack  ‖ upTo u32                        (every ssn ≤ upTo is logged)
//     kind u8 = 3 have ‖ rank u32 ‖ have u32             (this incarnation holds rank's ≤ have)
//   and, between the ranks of one checkpoint group (PROTOCOL §11.7):
//     kind u8 = 4 epoch   ‖ stored u32 ‖ floor u32       (my epoch; the highest id my store holds)
//     kind u8 = 5 prepare ‖ round u32                    (BSCO: the leader asks for a checkpoint)
//     kind u8 = 6 ready   ‖ round u32 ‖ calls u32        (my snapshot() calls so far)
//     kind u8 = 7 commit  ‖ round u32 ‖ id u32 ‖ at u32  (take checkpoint id at snapshot() call at)
//   log entry (an opaque blob to the protector):
//     kind u8 = 1 message     ‖ source u32 ‖ ssn u32 ‖ epoch u32 ‖ comm u32 ‖ tag i32 ‖ structured u8 ‖ data
//     kind u8 = 2 determinant ‖ index u32 ‖ source u32 ‖ ssn u32
//     kind u8 = 3 fragment    ‖ source u32 ‖ ssn u32 ‖ comm u32 ‖ tag i32 ‖ structured u8
//                             ‖ index u32 ‖ total u32 ‖ the index-th LOG_FRAGMENT_BYTES of the data
//     (a message larger than LOG_FRAGMENT_BYTES takes `total` consecutive fragment entries)
//   checkpoint: msgpack of { v: 1, id, logPos, app, channels } (CheckpointBody below).
import { Packr } from 'msgpackr';
import { err, ok, type Result } from '../../base/result.ts';
import { MAX_RANKS } from '../gmpi/wire.ts';
import { fragmentsOf, LOG_FRAGMENT_BYTES, type Arrived, type Determinant, type Envelope } from './channels.ts';

const U32 = 0xffffffff;
const isU32 = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= U32;

const malformed = (detail: string) => err('WIRE_MALFORMED', detail);

// ---- channel frames ----------------------------------------------------------------------------

export type ChannelFrame =
  | { readonly kind: 'data'; readonly env: Envelope }
  | { readonly kind: 'ack'; readonly upTo: number }
  | { readonly kind: 'have'; readonly rank: number; readonly have: number }
  | GroupFrame;
/** The frames of a checkpoint group's coordination (group-checkpoint.ts, PROTOCOL §11.7). */
export type GroupFrame =
  | { readonly kind: 'epoch'; readonly stored: number; readonly floor: number }
  | { readonly kind: 'prepare'; readonly round: number }
  | { readonly kind: 'ready'; readonly round: number; readonly calls: number }
  | { readonly kind: 'commit'; readonly round: number; readonly id: number; readonly at: number };

const DATA_HEADER = 1 + 4 + 4 + 4 + 4 + 1;
/** The fixed frames: kind code and their u32 fields, in order. */
const FIXED = {
  ack: [2, ['upTo']], have: [3, ['rank', 'have']], epoch: [4, ['stored', 'floor']], prepare: [5, ['round']],
  ready: [6, ['round', 'calls']], commit: [7, ['round', 'id', 'at']],
} as const;
type FixedKind = keyof typeof FIXED;
const KIND_OF_CODE = new Map<number, FixedKind>(Object.entries(FIXED).map(([k, [code]]) => [code, k as FixedKind]));

export function encodeChannelFrame(f: ChannelFrame): Uint8Array {
  if (f.kind === 'data') {
    const out = new Uint8Array(DATA_HEADER + f.env.data.length);
    const v = new DataView(out.buffer);
    out[0] = 1;
    v.setUint32(1, f.env.ssn);
    v.setUint32(5, f.env.epoch);
    v.setUint32(9, f.env.comm);
    v.setInt32(13, f.env.tag);
    out[17] = f.env.structured ? 1 : 0;
    out.set(f.env.data, DATA_HEADER);
    return out;
  }
  const [code, fields] = FIXED[f.kind];
  const out = new Uint8Array(1 + 4 * fields.length);
  const v = new DataView(out.buffer);
  out[0] = code;
  fields.forEach((name, i) => v.setUint32(1 + 4 * i, (f as unknown as Record<string, number>)[name]!));
  return out;
}

export function decodeChannelFrame(b: Uint8Array): Result<ChannelFrame> {
  if (b.length < 1) return malformed('empty frame');
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  if (b[0] === 1) {
    if (b.length < DATA_HEADER) return malformed('short data frame');
    const flag = b[17];
    if (flag !== 0 && flag !== 1) return malformed('bad structured flag');
    const ssn = v.getUint32(1);
    if (ssn === 0) return malformed('ssn 0');
    return ok({ kind: 'data', env: { ssn, epoch: v.getUint32(5), comm: v.getUint32(9), tag: v.getInt32(13), structured: flag === 1, data: b.slice(DATA_HEADER) } });
  }
  const kind = KIND_OF_CODE.get(b[0]!);
  if (kind === undefined) return malformed(`unknown frame kind ${b[0]}`);
  const fields = FIXED[kind][1];
  if (b.length !== 1 + 4 * fields.length) return malformed(`${kind} frame size`);
  const f: Record<string, unknown> = { kind };
  fields.forEach((name, i) => (f[name] = v.getUint32(1 + 4 * i)));
  if (kind === 'have' && (f.rank as number) >= MAX_RANKS) return malformed('rank out of range');
  if (kind === 'commit' && f.id === 0) return malformed('checkpoint id 0');
  return ok(f as ChannelFrame);
}

// ---- log entries ---------------------------------------------------------------------------------

export type LogEntry =
  | { readonly kind: 'message'; readonly source: number; readonly env: Envelope }
  | { readonly kind: 'fragment'; readonly source: number; readonly env: Envelope; readonly index: number; readonly total: number }
  | { readonly kind: 'determinant'; readonly index: number; readonly det: Determinant };

/** The entries message `env` from `source` is logged as: one, or its fragments in order. */
export function encodeMessageEntries(source: number, env: Envelope): Uint8Array[] {
  const total = fragmentsOf(env.data.length);
  if (total === 1) return [encodeLogEntry({ kind: 'message', source, env })];
  return Array.from({ length: total }, (_, index) => encodeLogEntry({
    kind: 'fragment', source, index, total, env: { ...env, data: env.data.subarray(index * LOG_FRAGMENT_BYTES, (index + 1) * LOG_FRAGMENT_BYTES) },
  }));
}

const FRAGMENT_HEADER = 1 + 4 + 4 + 4 + 4 + 1 + 4 + 4;

export function encodeLogEntry(e: LogEntry): Uint8Array {
  if (e.kind === 'fragment') {
    const out = new Uint8Array(FRAGMENT_HEADER + e.env.data.length);
    const v = new DataView(out.buffer);
    out[0] = 3;
    v.setUint32(1, e.source);
    v.setUint32(5, e.env.ssn);
    v.setUint32(9, e.env.comm);
    v.setInt32(13, e.env.tag);
    out[17] = e.env.structured ? 1 : 0;
    v.setUint32(18, e.index);
    v.setUint32(22, e.total);
    out.set(e.env.data, FRAGMENT_HEADER);
    return out;
  }
  if (e.kind === 'message') {
    const frame = encodeChannelFrame({ kind: 'data', env: e.env });
    const out = new Uint8Array(frame.length + 4);
    out[0] = 1;
    new DataView(out.buffer).setUint32(1, e.source);
    out.set(frame.subarray(1), 5);
    return out;
  }
  const out = new Uint8Array(13);
  const v = new DataView(out.buffer);
  out[0] = 2;
  v.setUint32(1, e.index);
  v.setUint32(5, e.det.source);
  v.setUint32(9, e.det.ssn);
  return out;
}

export function decodeLogEntry(b: Uint8Array, size: number): Result<LogEntry> {
  if (b.length < 1) return malformed('empty log entry');
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  if (b[0] === 2) {
    if (b.length !== 13) return malformed('determinant size');
    const source = v.getUint32(5);
    if (source >= size) return malformed('determinant source out of range');
    return ok({ kind: 'determinant', index: v.getUint32(1), det: { source, ssn: v.getUint32(9) } });
  }
  if (b[0] === 3) {
    if (b.length < FRAGMENT_HEADER) return malformed('short fragment');
    const source = v.getUint32(1);
    const [ssn, index, total, flag] = [v.getUint32(5), v.getUint32(18), v.getUint32(22), b[17]];
    if (source >= size || ssn === 0 || (flag !== 0 && flag !== 1) || total < 2 || index >= total) return malformed('fragment fields');
    // A fragment does not carry its sender's epoch: replay never needs it.
    const env = { ssn, epoch: 0, comm: v.getUint32(9), tag: v.getInt32(13), structured: flag === 1, data: b.slice(FRAGMENT_HEADER) };
    return ok({ kind: 'fragment', source, env, index, total });
  }
  if (b[0] !== 1 || b.length < 5) return malformed('unknown log entry');
  const source = v.getUint32(1);
  if (source >= size) return malformed('message source out of range');
  const inner = new Uint8Array(b.length - 4);
  inner[0] = 1;
  inner.set(b.subarray(5), 1);
  const f = decodeChannelFrame(inner);
  if (!f.ok) return f;
  if (f.value.kind !== 'data') return malformed('message entry without data');
  return ok({ kind: 'message', source, env: f.value.env });
}

// ---- checkpoints -----------------------------------------------------------------------------------

/** What a checkpoint holds besides the application's bytes: enough to go on from it. */
export type ChannelSnapshot = {
  nextSsn: number[];
  lastIn: number[];
  loggedIn: number[];
  recvIndex: number;
  queue: Arrived[];
};
/** `collectives`: how many collectives the world communicator had begun (their tags follow). */
/** `origin`: a checkpoint group's checkpoint 1, put at init: the start, nothing to restore (§11.7). */
export type CheckpointBody = { id: number; logPos: number; app: Uint8Array; channels: ChannelSnapshot; collectives: number; origin?: boolean };

const packr = new Packr({ useRecords: false, moreTypes: true });

export function encodeCheckpoint(c: CheckpointBody): Uint8Array {
  return packr.pack({ v: 1, ...c });
}

const u32List = (x: unknown, n: number): x is number[] => Array.isArray(x) && x.length === n && x.every(isU32);

function checkArrived(x: unknown, size: number): Arrived | null {
  if (typeof x !== 'object' || x === null) return null;
  const m = x as Record<string, unknown>;
  const fields = [m.ssn, m.epoch, m.comm, m.source, m.pos];
  if (!fields.every(isU32) || (m.source as number) >= size) return null;
  if (typeof m.tag !== 'number' || !Number.isInteger(m.tag) || typeof m.structured !== 'boolean' || !(m.data instanceof Uint8Array)) return null;
  return {
    ssn: m.ssn as number, epoch: m.epoch as number, comm: m.comm as number, tag: m.tag, structured: m.structured, data: m.data,
    source: m.source as number, pos: m.pos as number, logged: true,
  };
}

/** Decode a checkpoint of a task of `size` ranks, at most `maxBytes` long. */
export function decodeCheckpoint(b: Uint8Array, size: number, maxBytes: number): Result<CheckpointBody> {
  if (b.length > maxBytes) return malformed(`checkpoint of ${b.length} bytes exceeds ${maxBytes}`);
  let x: unknown;
  try {
    x = packr.unpack(b);
  } catch (e) {
    return malformed(`checkpoint does not decode: ${(e as Error).message}`);
  }
  if (typeof x !== 'object' || x === null) return malformed('checkpoint is not a map');
  const c = x as Record<string, unknown>;
  if (c.v !== 1 || !isU32(c.id) || !isU32(c.logPos) || !isU32(c.collectives) || !(c.app instanceof Uint8Array)) return malformed('checkpoint header');
  if (c.origin !== undefined && c.origin !== true) return malformed('checkpoint origin flag');
  const ch = c.channels as Record<string, unknown> | undefined;
  if (typeof ch !== 'object' || ch === null) return malformed('checkpoint channels');
  if (!u32List(ch.nextSsn, size) || !u32List(ch.lastIn, size) || !u32List(ch.loggedIn, size) || !isU32(ch.recvIndex)) {
    return malformed('checkpoint channel counters');
  }
  if (!Array.isArray(ch.queue)) return malformed('checkpoint queue');
  const queue: Arrived[] = [];
  for (const q of ch.queue) {
    const m = checkArrived(q, size);
    if (m === null) return malformed('checkpoint queue entry');
    queue.push(m);
  }
  return ok({
    id: c.id, logPos: c.logPos, app: c.app, collectives: c.collectives, ...(c.origin === true ? { origin: true } : {}),
    channels: { nextSsn: ch.nextSsn, lastIn: ch.lastIn, loggedIn: ch.loggedIn, recvIndex: ch.recvIndex, queue },
  });
}
