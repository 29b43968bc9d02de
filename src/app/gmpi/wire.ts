// The framing of G-MPI messages on the TCP stream between two task processes: the "reliable
// PTP channels ... which carry MPI traffic" that the application library opens from the mapping
// message (spec §7 item 3; G-MPI itself is spec §5). This file owns the byte layout, its named
// limits, the encoders and a total, incremental decoder; it does no I/O (mesh.ts and p2p.ts do).
//
//   frame  = header (24 bytes, big-endian) ‖ payload (length bytes)
//   header = magic u8 (0x47 'G') ‖ version u8 ‖ kind u8 ‖ flags u8
//          ‖ sender id u32 ‖ communicator id u32 ‖ tag i32 ‖ sequence u32 ‖ length u32
//   The sender id is the sender's VPID: the task-wide process id the manager assigns (spec §7
//   item 2), stable across recoveries, unlike an MPI rank, which is per communicator.
//   kind 5 = challenge: the acceptor's first frame, sent as it accepts (docs/PROTOCOL.md §9.5).
//            Payload = a fresh random nonce (HELLO_NONCE_BYTES); flags, communicator, tag and
//            sequence are 0; the sender id is the acceptor's VPID.
//   kind 1 = hello: the dialler's answer to the challenge, and the acceptor's reply. Payload =
//            MAC (HELLO_MAC_BYTES) ‖ the sender's nonce (HELLO_NONCE_BYTES) ‖ the sender's task
//            id (ASCII); flags, communicator, tag and sequence are 0. The MAC, HMAC-SHA256 under
//            the task key over both nonces (hello-auth.ts), is what attributes the connection to
//            a VPID: checked in mesh.ts, not here (this file only frames).
//   kind 2 = data:  one application MPI message. Tag >= 0.
//   kind 3 = lib:   one message of the library's own traffic (collectives). Tag < 0: negative
//            tags are reserved for it, so no application receive can match it.
//   kind 4 = bye:   the sender finalized: it sends nothing more on this connection, and the close
//            that follows is an ending, not a lost connection (no LOCAL_CONNECTION). No payload;
//            flags, communicator and tag are 0; sequence = the message frames it sent, so the
//            receiver knows it has them all.
//   Version 2 added the challenge and the hello's MAC and nonce (version 1's hello carried the
//   task id alone and was accepted from anyone who could name the task).
//   Data and lib frames share one sequence: it counts the sender's message frames on this
//   connection from 0, so a gap or a replay is detectable above TCP. Flags bit 0 (STRUCTURED)
//   says the payload is a msgpack-encoded value rather than raw bytes (payload.ts); no other
//   bit is defined.
import { MAX_ID_CHARS, MAX_TASK_PROCS } from '../../core/constants.ts';
import { assert, ok, unreachable, type Ok } from '../../base/result.ts';
import { taskId as taskIdSchema } from '../../core/wire/messages.ts';

// ---- Named limits (STYLE.md 9) -----------------------------------------------------------------

/** First byte of every frame: a cheap check that the peer speaks this protocol at all (a
 *  stray client or a desynchronised stream fails on the first byte). */
export const GMPI_MAGIC = 0x47;
/** Version of this framing; a frame of another version closes the connection. */
export const GMPI_WIRE_VERSION = 2;
/** Fixed header size: 4 single bytes and 5 four-byte fields. */
export const GMPI_HEADER_BYTES = 24;
/** Default largest MPI message payload. 64 MiB holds the largest halo or matrix block the spec's
 *  applications (§8.1) exchange in one call; an application with bigger buffers splits them, and
 *  the bound caps what one frame can make a receiver allocate. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Ceiling for a configured maxMessageBytes: the length field is a u32, and 1 GiB keeps one
 *  frame's single allocation well inside what a Node process can hold. */
export const MAX_CONFIGURABLE_MESSAGE_BYTES = 1024 * 1024 * 1024;
/** The hello's HMAC-SHA256 tag (PROTOCOL §9.5). */
export const HELLO_MAC_BYTES = 32;
/** A handshake nonce: 256 random bits, so a nonce never repeats and a recorded hello, whose MAC
 *  covers the acceptor's nonce of its own connection, verifies on no other. */
export const HELLO_NONCE_BYTES = 32;
/** A hello payload is the MAC, the nonce and a task id of at most MAX_ID_CHARS like every
 *  process id (PROTOCOL §8.2). */
export const MAX_HELLO_PAYLOAD_BYTES = HELLO_MAC_BYTES + HELLO_NONCE_BYTES + MAX_ID_CHARS;
const MIN_HELLO_PAYLOAD_BYTES = HELLO_MAC_BYTES + HELLO_NONCE_BYTES + 1;
/** Ranks index a communicator's members; a task has at most MAX_TASK_PROCS processes, so no
 *  communicator has more members. (Sender ids on the wire are VPIDs: any u32, never reused.) */
export const MAX_RANKS = MAX_TASK_PROCS;
/** Largest application tag (MPI's MPI_TAG_UB may be as low as 32767; we give the full i32). */
export const MAX_TAG = 0x7fffffff;
/** VPIDs, communicator ids and sequence numbers are u32 on the wire. */
export const MAX_U32 = 0xffffffff;
/** Lowest library tag: the whole negative half of the i32 tag space is the library's. */
export const MIN_LIB_TAG = -0x80000000;

/** Payloads this large are allocated without zero-filling (Buffer.allocUnsafeSlow: never the
 *  shared pool, so nothing else is pinned); below it the memset is cheaper than the call. */
const UNFILLED_ALLOCATION_BYTES = 64 * 1024;
const unfilled = (n: number): Uint8Array => {
  const b = Buffer.allocUnsafeSlow(n);
  return new Uint8Array(b.buffer, b.byteOffset, n);
};

export const FRAME_KIND = { hello: 1, data: 2, lib: 3, bye: 4, challenge: 5 } as const;
/** Flags bit 0: the payload is a structured (msgpack) value, not raw bytes. */
export const FLAG_STRUCTURED = 0x01;
const KNOWN_FLAGS = FLAG_STRUCTURED;
const KNOWN_KINDS: ReadonlySet<number> = new Set(Object.values(FRAME_KIND));

// ---- Frames and errors -------------------------------------------------------------------------

/** `mac` and `nonce`: PROTOCOL §9.5 (hello-auth.ts computes and checks the MAC). */
export type HelloFrame = {
  readonly type: 'hello'; readonly id: number; readonly taskId: string; readonly nonce: Uint8Array; readonly mac: Uint8Array;
};
/** The acceptor's nonce for this connection (kind 5). */
export type ChallengeFrame = { readonly type: 'challenge'; readonly id: number; readonly nonce: Uint8Array };
/** An application message ('data', tag >= 0) or a library message ('lib', tag < 0). */
export type DataFrame = {
  readonly type: 'data' | 'lib';
  readonly id: number;
  readonly comm: number;
  readonly tag: number;
  readonly seq: number;
  readonly structured: boolean;
  readonly payload: Uint8Array;
};
/** The sender finalized after `seq` message frames (kind 4). */
export type ByeFrame = { readonly type: 'bye'; readonly id: number; readonly seq: number };
export type GmpiFrame = HelloFrame | ChallengeFrame | DataFrame | ByeFrame;

/** Stable reasons a byte stream is not a G-MPI frame sequence; each closes the connection. */
export type WireCode =
  | 'BAD_MAGIC'
  | 'BAD_VERSION'
  | 'BAD_KIND'
  /** A header field outside its range: an undefined flag bit. */
  | 'BAD_HEADER'
  /** A data frame with a negative (reserved) tag, or a lib frame with a non-negative one. */
  | 'BAD_TAG'
  /** A hello with non-zero comm/tag/sequence or a payload that is not MAC ‖ nonce ‖ task id. */
  | 'BAD_HELLO'
  /** A challenge with non-zero flags/comm/tag/sequence or a payload that is not one nonce. */
  | 'BAD_CHALLENGE'
  /** A bye with non-zero flags, comm or tag, or a payload. */
  | 'BAD_BYE'
  /** A payload length above the receiver's limit, rejected from the header before buffering. */
  | 'TOO_LARGE';
export type WireErr = { readonly ok: false; readonly code: WireCode; readonly detail: string };
export type WireResult<T> = Ok<T> | WireErr;
const wireErr = (code: WireCode, detail: string): WireErr => ({ ok: false, code, detail });

type Header = { kind: number; flags: number; id: number; comm: number; tag: number; seq: number; length: number };

// ---- Encoding (our own values: a bad one is our bug, so assert, STYLE.md 8) --------------------

const isU32 = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_U32;

function writeHeader(out: Uint8Array, h: Header): void {
  assert(out.length >= GMPI_HEADER_BYTES, 'header buffer too small');
  assert(isU32(h.id), `sender id ${h.id}`);
  assert((h.flags & ~KNOWN_FLAGS) === 0, `flags ${h.flags}`);
  assert(isU32(h.comm) && isU32(h.seq) && isU32(h.length), 'u32 header field out of range');
  assert(Number.isInteger(h.tag) && h.tag >= -0x80000000 && h.tag <= MAX_TAG, `tag ${h.tag}`);
  const view = new DataView(out.buffer, out.byteOffset, GMPI_HEADER_BYTES);
  view.setUint8(0, GMPI_MAGIC);
  view.setUint8(1, GMPI_WIRE_VERSION);
  view.setUint8(2, h.kind);
  view.setUint8(3, h.flags);
  view.setUint32(4, h.id, false);
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
      const length = HELLO_MAC_BYTES + HELLO_NONCE_BYTES + id.length;
      assert(taskIdSchema.dec(frame.taskId, 'taskId').ok && length <= MAX_HELLO_PAYLOAD_BYTES, `task id ${frame.taskId}`);
      assert(frame.mac.length === HELLO_MAC_BYTES && frame.nonce.length === HELLO_NONCE_BYTES, 'hello MAC or nonce size');
      const out = new Uint8Array(GMPI_HEADER_BYTES + length);
      writeHeader(out, { kind: FRAME_KIND.hello, flags: 0, id: frame.id, comm: 0, tag: 0, seq: 0, length });
      out.set(frame.mac, GMPI_HEADER_BYTES);
      out.set(frame.nonce, GMPI_HEADER_BYTES + HELLO_MAC_BYTES);
      out.set(id, GMPI_HEADER_BYTES + HELLO_MAC_BYTES + HELLO_NONCE_BYTES);
      return out;
    }
    case 'challenge': {
      assert(frame.nonce.length === HELLO_NONCE_BYTES, 'challenge nonce size');
      const out = new Uint8Array(GMPI_HEADER_BYTES + HELLO_NONCE_BYTES);
      writeHeader(out, { kind: FRAME_KIND.challenge, flags: 0, id: frame.id, comm: 0, tag: 0, seq: 0, length: HELLO_NONCE_BYTES });
      out.set(frame.nonce, GMPI_HEADER_BYTES);
      return out;
    }
    case 'bye': {
      const out = new Uint8Array(GMPI_HEADER_BYTES);
      writeHeader(out, { kind: FRAME_KIND.bye, flags: 0, id: frame.id, comm: 0, tag: 0, seq: frame.seq, length: 0 });
      return out;
    }
    case 'data':
    case 'lib': {
      const lib = frame.type === 'lib';
      assert(lib ? frame.tag < 0 : frame.tag >= 0, `tag ${frame.tag} on a ${frame.type} frame`);
      const total = GMPI_HEADER_BYTES + frame.payload.length;
      const out = total >= UNFILLED_ALLOCATION_BYTES ? unfilled(total) : new Uint8Array(total);
      writeHeader(out, {
        kind: lib ? FRAME_KIND.lib : FRAME_KIND.data, flags: frame.structured ? FLAG_STRUCTURED : 0, id: frame.id,
        comm: frame.comm, tag: frame.tag, seq: frame.seq, length: frame.payload.length,
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
    flags: view.getUint8(3),
    id: view.getUint32(4, false),
    comm: view.getUint32(8, false),
    tag: view.getInt32(12, false),
    seq: view.getUint32(16, false),
    length: view.getUint32(20, false),
  };
  if (!KNOWN_KINDS.has(h.kind)) return wireErr('BAD_KIND', `kind ${h.kind}`);
  if ((h.flags & ~KNOWN_FLAGS) !== 0) return wireErr('BAD_HEADER', `flags 0x${h.flags.toString(16)}`);
  if (h.kind === FRAME_KIND.hello) {
    if (h.flags !== 0 || h.comm !== 0 || h.tag !== 0 || h.seq !== 0) return wireErr('BAD_HELLO', 'hello with non-zero flags, comm, tag or sequence');
    if (h.length < MIN_HELLO_PAYLOAD_BYTES || h.length > MAX_HELLO_PAYLOAD_BYTES) return wireErr('BAD_HELLO', `hello payload of ${h.length} bytes`);
    return ok(h);
  }
  if (h.kind === FRAME_KIND.challenge) {
    if (h.flags !== 0 || h.comm !== 0 || h.tag !== 0 || h.seq !== 0) return wireErr('BAD_CHALLENGE', 'challenge with non-zero flags, comm, tag or sequence');
    if (h.length !== HELLO_NONCE_BYTES) return wireErr('BAD_CHALLENGE', `challenge payload of ${h.length} bytes, not ${HELLO_NONCE_BYTES}`);
    return ok(h);
  }
  if (h.kind === FRAME_KIND.bye) {
    if (h.flags !== 0 || h.comm !== 0 || h.tag !== 0 || h.length !== 0) return wireErr('BAD_BYE', 'bye with non-zero flags, comm, tag or length');
    return ok(h);
  }
  if (h.kind === FRAME_KIND.data && h.tag < 0) return wireErr('BAD_TAG', `tag ${h.tag} is reserved for the library`);
  if (h.kind === FRAME_KIND.lib && h.tag >= 0) return wireErr('BAD_TAG', `library frame with application tag ${h.tag}`);
  if (h.length > limits.maxMessageBytes) return wireErr('TOO_LARGE', `${h.length} bytes > ${limits.maxMessageBytes}`);
  return ok(h);
}

function buildFrame(h: Header, payload: Uint8Array): WireResult<GmpiFrame> {
  if (h.kind === FRAME_KIND.bye) return ok({ type: 'bye', id: h.id, seq: h.seq });
  if (h.kind === FRAME_KIND.challenge) return ok({ type: 'challenge', id: h.id, nonce: payload });
  if (h.kind !== FRAME_KIND.hello) {
    const type = h.kind === FRAME_KIND.lib ? 'lib' : 'data';
    return ok({ type, id: h.id, comm: h.comm, tag: h.tag, seq: h.seq, structured: (h.flags & FLAG_STRUCTURED) !== 0, payload });
  }
  // Hello: MAC ‖ nonce ‖ task id (lengths checked from the header). Only printable ASCII may
  // become a string; then the task-id grammar (PROTOCOL §8.2).
  const mac = payload.slice(0, HELLO_MAC_BYTES);
  const nonce = payload.slice(HELLO_MAC_BYTES, HELLO_MAC_BYTES + HELLO_NONCE_BYTES);
  let id = '';
  for (const b of payload.subarray(HELLO_MAC_BYTES + HELLO_NONCE_BYTES)) {
    if (b < 0x21 || b > 0x7e) return wireErr('BAD_HELLO', 'task id is not printable ASCII');
    id += String.fromCharCode(b);
  }
  if (!taskIdSchema.dec(id, 'hello.taskId').ok) return wireErr('BAD_HELLO', `task id ${JSON.stringify(id)}`);
  return ok({ type: 'hello', id: h.id, taskId: id, nonce, mac });
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
      const h = parseHeader(this.peekOrTake(GMPI_HEADER_BYTES), this.limits);
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

  /** n bytes consumed for immediate parsing (a header): a view into the current chunk when it
   *  holds them all (no allocation on the per-message path), else a copy. Never retained. */
  private peekOrTake(n: number): Uint8Array {
    const chunk = this.chunks[0];
    if (chunk === undefined || chunk.length - this.head < n) return this.take(n);
    const view = chunk.subarray(this.head, this.head + n);
    this.head += n;
    this.buffered -= n;
    if (this.head === chunk.length) {
      this.chunks.shift();
      this.head = 0;
    }
    return view;
  }

  /** Copy out n buffered bytes (n <= buffered): frames never alias the socket's chunks, so a
   *  queued small message does not pin a whole 64 KiB read buffer. Large payloads skip the
   *  zero-fill of a fresh allocation, since every byte is overwritten at once. */
  private take(n: number): Uint8Array {
    assert(n <= this.buffered, 'take beyond buffered bytes');
    const out = n >= UNFILLED_ALLOCATION_BYTES ? unfilled(n) : new Uint8Array(n);
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
