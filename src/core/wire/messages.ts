// Every message of the CMM wire (docs/PROTOCOL.md §2–§6; spec §3.2 Fig. 4.24) as
// discriminated unions, with their canonical schemas. A frame carries one or more items,
// all from one sender to one receiver, under one signature.
import {
  MAX_BURST_COUNT, MAX_CG_BYTES, MAX_CLUSTER_ID_CHARS, MAX_ID_CHARS, MAX_ITEMS_PER_FRAME, MAX_LIST_ENTRIES,
  MAX_PAYLOAD_BYTES, MAX_STATUS_CHARS, MAX_SUSPECTS, MAX_TEXT_CHARS, SIGNATURE_BYTES,
} from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { bool, bytes, list, nullable, oneOf, struct, text, token, uint, union, type Schema } from './schema.ts';

export const processId = token(MAX_ID_CHARS, /^[a-z][a-z0-9-]*$/);
const clusterId = token(MAX_CLUSTER_ID_CHARS, /^[a-z0-9-]+$/);
const reason = text(MAX_TEXT_CHARS);

// ---- Agent → group requests (payload of GROUP-MSG-CG, PROTOCOL §5) -------------------------

export type Fanout = 'self' | 'all';
export type ErrorReportKind = 'replica-timeout' | 'mismatch';

export type AgentRequest =
  /** The agent announces its node to the group (first message after start). */
  | { type: 'node.join'; slots: number }
  /** Ask the group to answer with one group message per target (diagnostics, sim, bench). */
  | { type: 'echo'; tag: string; fanout: Fanout; count: number; data: Uint8Array }
  /** Spec §3.5 G5 / §3.7: copies of `count` GSSNs from `gssn` on timed out or did not all
   *  match (aggregated: at most one report per kind per ReplicaTimeout, PROTOCOL §5.3). */
  | { type: 'error.report'; gssn: number; count: number; kind: ErrorReportKind; suspects: ProcessId[] };

export const agentRequest: Schema<AgentRequest> = union<AgentRequest>({
  'node.join': { code: 1, order: ['slots'], fields: { slots: uint } },
  echo: {
    code: 2,
    order: ['tag', 'fanout', 'count', 'data'],
    fields: { tag: reason, fanout: oneOf(['self', 'all'] as const), count: uint, data: bytes(MAX_PAYLOAD_BYTES) },
  },
  'error.report': {
    code: 3,
    order: ['gssn', 'count', 'kind', 'suspects'],
    fields: { gssn: uint, count: uint, kind: oneOf(['replica-timeout', 'mismatch'] as const), suspects: list(processId, MAX_SUSPECTS) },
  },
});

// ---- Group → agent commands (payload of GROUP-MSG-GC) ---------------------------------------

export type GroupCommand =
  /** The answer to an `echo`: `index` counts the copies asked for (0 ≤ index < count). */
  { type: 'echo.reply'; origin: ProcessId; tag: string; rsn: number; index: number; data: Uint8Array };

export const groupCommand: Schema<GroupCommand> = union<GroupCommand>({
  'echo.reply': {
    code: 1,
    order: ['origin', 'tag', 'rsn', 'index', 'data'],
    fields: { origin: processId, tag: reason, rsn: uint, index: uint, data: bytes(MAX_PAYLOAD_BYTES) },
  },
});

// ---- Group messages (spec §3.2) --------------------------------------------------------------

/** GROUP-MSG-CG: agent `client` → group. `gssnAck` is the agent's complete-delivery mark;
 *  `inc` the agent's incarnation, so a restarted agent's CSNs start afresh (PROTOCOL §5.7).
 *  Carried signed by the agent itself, so a replica can relay it without being able to forge it. */
export type GroupMsgCG = { csn: number; gssnAck: number; payload: AgentRequest; client: ProcessId; inc: number };
export const groupMsgCG: Schema<GroupMsgCG> = struct<GroupMsgCG>(['csn', 'gssnAck', 'payload', 'client', 'inc'], {
  csn: uint, gssnAck: uint, payload: agentRequest, client: processId, inc: uint,
});

/** A CG as the agent signed it: the canonical bytes, the signature, and the decoded value. */
export type SignedCG = { bytes: Uint8Array; sig: Uint8Array; cg: GroupMsgCG };

/** GROUP-MSG-GC: group → agent `dest`. `prevGssn` is the GSSN of the previous group message to
 *  the same agent (0 for none): with a global GSSN it is what lets the agent detect a missing
 *  message and deliver in order (PROTOCOL §5.2, a clarification of spec §3.5 G3). `csnAck`
 *  acknowledges the CSNs of incarnation `destInc` of the agent only (PROTOCOL §5.7). */
export type GroupMsgGC = { gssn: number; prevGssn: number; csnAck: number; destInc: number; payload: GroupCommand; dest: ProcessId };
export const groupMsgGC: Schema<GroupMsgGC> = struct<GroupMsgGC>(['gssn', 'prevGssn', 'csnAck', 'destInc', 'payload', 'dest'], {
  gssn: uint, prevGssn: uint, csnAck: uint, destInc: uint, payload: groupCommand, dest: processId,
});

// ---- Point-to-point lane payloads (PROTOCOL §4) -----------------------------------------------

export type PtpPayload =
  /** WRAPPER-MSG (spec §3.6 G7): a CG with the RSN the primary gave it (0 from a backup). */
  | { type: 'wrapper'; rsn: number; signed: SignedCG }
  /** A plain point-to-point message: operator notes, diagnostics, spec §9.2 A15. */
  | { type: 'notice'; text: string }
  /** A point-to-point error report (spec §2.1 (e), the mismatch case). */
  | { type: 'error.report'; gssn: number; kind: ErrorReportKind; suspects: ProcessId[] }
  /** Backup → backup: the primary gave me the request with this SHA-256 at `rsn` (PROTOCOL §5.8). */
  | { type: 'order'; rsn: number; digest: Uint8Array };

/** The wire form: the wrapped CG travels as the agent's own bytes and signature. */
export type PtpPayloadWire =
  | Exclude<PtpPayload, { type: 'wrapper' }>
  | { type: 'wrapper'; rsn: number; cgBytes: Uint8Array; cgSig: Uint8Array };

export const ptpPayloadWire: Schema<PtpPayloadWire> = union<PtpPayloadWire>({
  wrapper: {
    code: 1,
    order: ['rsn', 'cgBytes', 'cgSig'],
    fields: { rsn: uint, cgBytes: bytes(MAX_CG_BYTES), cgSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) },
  },
  notice: { code: 2, order: ['text'], fields: { text: reason } },
  'error.report': {
    code: 3,
    order: ['gssn', 'kind', 'suspects'],
    fields: { gssn: uint, kind: oneOf(['replica-timeout', 'mismatch'] as const), suspects: list(processId, MAX_SUSPECTS) },
  },
  order: { code: 4, order: ['rsn', 'digest'], fields: { rsn: uint, digest: bytes(32, 32) } },
});

// ---- Heartbeats (PROTOCOL §6) -----------------------------------------------------------------

export type Role = 'primary' | 'backup';
export type HeartbeatInfo =
  | { type: 'replica'; role: Role; rsn: number; gssn: number; digest: Uint8Array }
  | { type: 'agent'; gssnDelivered: number; csnSent: number };
export const heartbeatInfo: Schema<HeartbeatInfo> = union<HeartbeatInfo>({
  replica: {
    code: 1,
    order: ['role', 'rsn', 'gssn', 'digest'],
    fields: { role: oneOf(['primary', 'backup'] as const), rsn: uint, gssn: uint, digest: bytes(32, 32) },
  },
  agent: { code: 2, order: ['gssnDelivered', 'csnSent'], fields: { gssnDelivered: uint, csnSent: uint } },
});

// ---- Frame items (PROTOCOL §3) -----------------------------------------------------------------

/** The lane-1 sequenced body: a signed CG (agent → replica) or a GC (replica → agent). */
export type GroupBody = { type: 'cg'; signed: SignedCG } | { type: 'gc'; gc: GroupMsgGC };

export type Item =
  /** Three-way handshake (PROTOCOL §3.2): my incarnation, the peer's as I know it. */
  | { type: 'hello'; inc: number; echo: number; established: boolean }
  /** Lane 0 reliable message; `body: null` is a pure cumulative ack (spec §3.4 P1). */
  | { type: 'ptp'; srcInc: number; destInc: number; seq: number; ackSeq: number; body: PtpPayload | null }
  /** Lane 1 reliable group message replica; never PTP-acked (spec §3.3). */
  | { type: 'grp'; srcInc: number; destInc: number; seq: number; body: GroupBody }
  /** Lane 1 pure group ack: `ack` is, from an agent, its complete GSSN mark and, from a replica,
   *  csn_rcvd; `seq` acknowledges the lane-1 copies received from the addressee (PROTOCOL §5.3). */
  | { type: 'gack'; srcInc: number; destInc: number; ack: number; seq: number }
  | { type: 'hb'; inc: number; counter: number; info: HeartbeatInfo }
  | { type: 'probe'; nonce: number }
  | { type: 'probe.reply'; nonce: number }
  /** Operator status query and its answer (docs/PROTOCOL.md §7). */
  | { type: 'status.query'; nonce: number }
  | { type: 'status.reply'; nonce: number; json: string };

/** The wire form of a lane-1 body: the CG travels as the agent's own bytes and signature. */
type GroupBodyWire = { type: 'cg'; bytes: Uint8Array; sig: Uint8Array } | { type: 'gc'; gc: GroupMsgGC };
export const groupBodyWire: Schema<GroupBodyWire> = union<GroupBodyWire>({
  cg: { code: 1, order: ['bytes', 'sig'], fields: { bytes: bytes(MAX_CG_BYTES), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  gc: { code: 2, order: ['gc'], fields: { gc: groupMsgGC } },
});

export type ItemWire =
  | Exclude<Item, { type: 'grp' } | { type: 'ptp' }>
  | { type: 'grp'; srcInc: number; destInc: number; seq: number; body: GroupBodyWire }
  | { type: 'ptp'; srcInc: number; destInc: number; seq: number; ackSeq: number; body: PtpPayloadWire | null };

export const itemWire: Schema<ItemWire> = union<ItemWire>({
  hello: { code: 1, order: ['inc', 'echo', 'established'], fields: { inc: uint, echo: uint, established: bool } },
  ptp: {
    code: 2,
    order: ['srcInc', 'destInc', 'seq', 'ackSeq', 'body'],
    fields: { srcInc: uint, destInc: uint, seq: uint, ackSeq: uint, body: nullable(ptpPayloadWire) },
  },
  grp: { code: 3, order: ['srcInc', 'destInc', 'seq', 'body'], fields: { srcInc: uint, destInc: uint, seq: uint, body: groupBodyWire } },
  gack: { code: 4, order: ['srcInc', 'destInc', 'ack', 'seq'], fields: { srcInc: uint, destInc: uint, ack: uint, seq: uint } },
  hb: { code: 5, order: ['inc', 'counter', 'info'], fields: { inc: uint, counter: uint, info: heartbeatInfo } },
  probe: { code: 6, order: ['nonce'], fields: { nonce: uint } },
  'probe.reply': { code: 7, order: ['nonce'], fields: { nonce: uint } },
  'status.query': { code: 8, order: ['nonce'], fields: { nonce: uint } },
  'status.reply': { code: 9, order: ['nonce', 'json'], fields: { nonce: uint, json: text(MAX_STATUS_CHARS) } },
});

/** The msgpack body of a frame; version and sender travel in its fixed header (PROTOCOL §2.1). */
export type FrameBody = { cluster: string; to: ProcessId; items: ItemWire[] };
export const frameBody: Schema<FrameBody> = struct<FrameBody>(['cluster', 'to', 'items'], {
  cluster: clusterId, to: processId, items: list(itemWire, MAX_ITEMS_PER_FRAME),
});

/** Does this item carry an agent-signed CG (a signature check for the receiver)? */
export const carriesSignedCG = (item: Item | ItemWire): boolean =>
  (item.type === 'grp' && item.body.type === 'cg') || (item.type === 'ptp' && item.body !== null && item.body.type === 'wrapper');

/** Process ids as they appear in the frame header: ASCII, checked without parsing msgpack. */
export const PROCESS_ID_PATTERN = /^[a-z][a-z0-9-]*$/;

/** A decoded, verified frame as the core sees it. */
export type Frame = { from: ProcessId; to: ProcessId; items: Item[] };

export const MAX_LIST = MAX_LIST_ENTRIES;
export const MAX_BURST = MAX_BURST_COUNT;
