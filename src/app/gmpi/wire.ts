// The framing of G-MPI messages on the TCP stream between two task processes: the "reliable
// PTP channels ... which carry MPI traffic" that the application library opens from the mapping
// message (spec §7 item 3; G-MPI itself is spec §5). This file owns the byte layout, its named
// limits, the encoders and a total, incremental decoder; it does no I/O (p2p.ts does).
//
//   frame  = header (24 bytes, big-endian) ‖ payload (length bytes)
//   header = magic u8 (0x47 'G') ‖ version u8 ‖ kind u8 ‖ flags u8 (0)
//          ‖ sender rank u32 ‖ communicator id u32 ‖ tag i32 ‖ sequence u32 ‖ length u32
//   kind 1 = hello: the first frame each side sends. Payload = the sender's task id (ASCII);
//            communicator, tag and sequence are 0. It attributes the connection to a rank.
//   kind 2 = data:  one MPI message. Tag >= 0 (negative tags are reserved for the library's own
//            traffic, which version 1 does not send); sequence counts the sender's data frames on
//            this connection from 0, so a gap or a replay is detectable above TCP.
import { MAX_ID_CHARS, MAX_TASK_PROCS } from '../../core/constants.ts';
import { assert, ok, unreachable, type Ok } from '../../core/result.ts';
import { taskId as taskIdSchema } from '../../core/wire/messages.ts';

// ---- Named limits (STYLE.md 9) -----------------------------------------------------------------

/** First byte of every frame: a cheap check that the peer speaks this protocol at all (a
 *  stray client or a desynchronised stream fails on the first byte). */
export const GMPI_MAGIC = 0x47;
/** Version of this framing; a frame of another version closes the connection. */
export const GMPI_WIRE_VERSION = 1;
/** Fixed header size: 4 single bytes and 5 four-byte fields. */
export const GMPI_HEADER_BYTES = 24;
/** Default largest MPI message payload. 64 MiB holds the largest halo or matrix block the spec's
 *  applications (§8.1) exchange in one call; an application with bigger buffers splits them, and
 *  the bound caps what one frame can make a receiver allocate. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Ceiling for a configured maxMessageBytes: the length field is a u32, and 1 GiB keeps one
 *  frame's single allocation well inside what a Node process can hold. */
export const MAX_CONFIGURABLE_MESSAGE_BYTES = 1024 * 1024 * 1024;
/** A hello payload is a task id, at most MAX_ID_CHARS like every process id (PROTOCOL §8.2). */
export const MAX_HELLO_PAYLOAD_BYTES = MAX_ID_CHARS;
/** Ranks are MPI_COMM_WORLD ranks of one task; a task has at most MAX_TASK_PROCS processes. */
export const MAX_RANKS = MAX_TASK_PROCS;
/** Largest application tag (MPI's MPI_TAG_UB may be as low as 32767; we give the full i32). */
export const MAX_TAG = 0x7fffffff;
/** Communicator ids and sequence numbers are u32 on the wire. */
export const MAX_U32 = 0xffffffff;

export const FRAME_KIND = { hello: 1, data: 2 } as const;

// ---- Frames and errors -------------------------------------------------------------------------

export type HelloFrame = { readonly type: 'hello'; readonly rank: number; readonly taskId: string };
export type DataFrame = {
  readonly type: 'data';
  readonly rank: number;
  readonly comm: number;
  readonly tag: number;
  readonly seq: number;
  readonly payload: Uint8Array;
};
export type GmpiFrame = HelloFrame | DataFrame;

/** Stable reasons a byte stream is not a G-MPI frame sequence; each closes the connection. */
export type WireCode =
  | 'BAD_MAGIC'
  | 'BAD_VERSION'
  | 'BAD_KIND'
  /** A header field outside its range: non-zero flags, a rank beyond MAX_RANKS. */
  | 'BAD_HEADER'
  /** A data frame with a negative (reserved) tag. */
  | 'BAD_TAG'
  /** A hello with non-zero comm/tag/sequence or a payload that is not a task id. */
  | 'BAD_HELLO'
  /** A payload length above the receiver's limit, rejected from the header before buffering. */
  | 'TOO_LARGE';
export type WireErr = { readonly ok: false; readonly code: WireCode; readonly detail: string };
export type WireResult<T> = Ok<T> | WireErr;
const wireErr = (code: WireCode, detail: string): WireErr => ({ ok: false, code, detail });

type Header = { kind: number; rank: number; comm: number; tag: number; seq: number; length: number };

// ---- Encoding (our own values: a bad one is our bug, so assert, STYLE.md 8) --------------------

const isU32 = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_U32;

function writeHeader(out: Uint8Array, h: Header): void {
  assert(out.length >= GMPI_HEADER_BYTES, 'header buffer too small');
  assert(Number.isInteger(h.rank) && h.rank >= 0 && h.rank < MAX_RANKS, `rank ${h.rank}`);
  assert(isU32(h.comm) && isU32(h.seq) && isU32(h.length), 'u32 header field out of range');
  assert(Number.isInteger(h.tag) && h.tag >= -0x80000000 && h.tag <= MAX_TAG, `tag ${h.tag}`);
  const view = new DataView(out.buffer, out.byteOffset, GMPI_HEADER_BYTES);
  view.setUint8(0, GMPI_MAGIC);
  view.setUint8(1, GMPI_WIRE_VERSION);
  view.setUint8(2, h.kind);
  view.setUint8(3, 0);
  view.setUint32(4, h.rank, false);
  view.setUint32(8, h.comm, false);
  view.setInt32(12, h.tag, false);
  view.setUint32(16, h.seq, false);
  view.setUint32(20, h.length, false);
}

/** One frame as a single fresh buffer. Data payloads are copied in, so the caller may reuse its
 *  buffer as soon as this returns (MPI send-buffer semantics) whatever the socket does later. */
export function encodeFrame(frame: GmpiFrame): Uint8Array {
  switch (frame.type) {
    case 'hello': {
      const id = new TextEncoder().encode(frame.taskId);
      assert(taskIdSchema.dec(frame.taskId, 'taskId').ok && id.length <= MAX_HELLO_PAYLOAD_BYTES, `task id ${frame.taskId}`);
      const out = new Uint8Array(GMPI_HEADER_BYTES + id.length);
      writeHeader(out, { kind: FRAME_KIND.hello, rank: frame.rank, comm: 0, tag: 0, seq: 0, length: id.length });
      out.set(id, GMPI_HEADER_BYTES);
      return out;
    }
    case 'data': {
      assert(frame.tag >= 0, `negative tag ${frame.tag} is reserved`);
      const out = new Uint8Array(GMPI_HEADER_BYTES + frame.payload.length);
      writeHeader(out, {
        kind: FRAME_KIND.data, rank: frame.rank, comm: frame.comm, tag: frame.tag, seq: frame.seq, length: frame.payload.length,
      });
      out.set(frame.payload, GMPI_HEADER_BYTES);
      return out;
    }
    default:
      return unreachable(frame);
  }
}

// ---- Decoding (peer input: total, never throws, STYLE.md 5) ------------------------------------

export type DecoderLimits = { readonly maxMessageBytes: number };

/** Check a header alone. Lengths are judged here, before a byte of the payload is buffered. */
export function parseHeader(bytes: Uint8Array, limits: DecoderLimits): WireResult<Header> {
  if (bytes.length !== GMPI_HEADER_BYTES) return wireErr('BAD_HEADER', `${bytes.length} header bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint8(0);
  if (magic !== GMPI_MAGIC) return wireErr('BAD_MAGIC', `magic 0x${magic.toString(16)}`);
  const version = view.getUint8(1);
  if (version !== GMPI_WIRE_VERSION) return wireErr('BAD_VERSION', `version ${version}`);
  const h: Header = {
    kind: view.getUint8(2),
    rank: view.getUint32(4, false),
    comm: view.getUint32(8, false),
    tag: view.getInt32(12, false),
    seq: view.getUint32(16, false),
    length: view.getUint32(20, false),
  };
  if (h.kind !== FRAME_KIND.hello && h.kind !== FRAME_KIND.data) return wireErr('BAD_KIND', `kind ${h.kind}`);
  const flags = view.getUint8(3);
  if (flags !== 0) return wireErr('BAD_HEADER', `flags 0x${flags.toString(16)}`);
  if (h.rank >= MAX_RANKS) return wireErr('BAD_HEADER', `rank ${h.rank} >= ${MAX_RANKS}`);
  if (h.kind === FRAME_KIND.hello) {
    if (h.comm !== 0 || h.tag !== 0 || h.seq !== 0) return wireErr('BAD_HELLO', 'hello with non-zero comm, tag or sequence');
    if (h.length === 0 || h.length > MAX_HELLO_PAYLOAD_BYTES) return wireErr('BAD_HELLO', `hello payload of ${h.length} bytes`);
    return ok(h);
  }
  if (h.tag < 0) return wireErr('BAD_TAG', `tag ${h.tag} is reserved`);
  if (h.length > limits.maxMessageBytes) return wireErr('TOO_LARGE', `${h.length} bytes > ${limits.maxMessageBytes}`);
  return ok(h);
}

function buildFrame(h: Header, payload: Uint8Array): WireResult<GmpiFrame> {
  if (h.kind === FRAME_KIND.data) return ok({ type: 'data', rank: h.rank, comm: h.comm, tag: h.tag, seq: h.seq, payload });
  // Hello: only printable ASCII may become a string; then the task-id grammar (PROTOCOL §8.2).
  let id = '';
  for (const b of payload) {
    if (b < 0x21 || b > 0x7e) return wireErr('BAD_HELLO', 'task id is not printable ASCII');
    id += String.fromCharCode(b);
  }
  if (!taskIdSchema.dec(id, 'hello.taskId').ok) return wireErr('BAD_HELLO', `task id ${JSON.stringify(id)}`);
  return ok({ type: 'hello', rank: h.rank, taskId: id });
}

/**
 * Incremental decoder for one connection: `feed` chunks as the socket delivers them, then call
 * `next` until it yields null (needs more bytes). An error is sticky: framing is lost for good
 * on a stream, so the caller closes the connection. It holds at most one header plus one
 * payload of buffered bytes beyond what the caller has not yet pulled, and allocates a payload
 * only once all of its bytes have arrived.
 */
export class FrameDecoder {
  private chunks: Uint8Array[] = [];
  /** Bytes of chunks[0] already consumed. */
  private head = 0;
  private buffered = 0;
  private header: Header | null = null;
  private failed: WireErr | null = null;

  constructor(private readonly limits: DecoderLimits) {}

  /** Bytes received but not yet returned as frames. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  feed(chunk: Uint8Array): void {
    if (this.failed !== null || chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
  }

  /** The next complete frame, null when more bytes are needed, or the stream's error. */
  next(): WireResult<GmpiFrame | null> {
    if (this.failed !== null) return this.failed;
    if (this.header === null) {
      if (this.buffered < GMPI_HEADER_BYTES) return ok(null);
      const h = parseHeader(this.take(GMPI_HEADER_BYTES), this.limits);
      if (!h.ok) return this.fail(h);
      this.header = h.value;
    }
    if (this.buffered < this.header.length) return ok(null);
    const frame = buildFrame(this.header, this.take(this.header.length));
    this.header = null;
    return frame.ok ? frame : this.fail(frame);
  }

  private fail(e: WireErr): WireErr {
    this.failed = e;
    this.chunks = [];
    this.buffered = 0;
    return e;
  }

  /** Copy out n buffered bytes (n <= buffered): frames never alias the socket's chunks, so a
   *  queued small message does not pin a whole 64 KiB read buffer. */
  private take(n: number): Uint8Array {
    assert(n <= this.buffered, 'take beyond buffered bytes');
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0];
      assert(chunk !== undefined, 'buffered count out of step with chunks');
      const count = Math.min(n - filled, chunk.length - this.head);
      out.set(chunk.subarray(this.head, this.head + count), filled);
      filled += count;
      this.head += count;
      if (this.head === chunk.length) {
        this.chunks.shift();
        this.head = 0;
      }
    }
    this.buffered -= n;
    return out;
  }
}
