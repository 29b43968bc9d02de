// Frame items (docs/PROTOCOL.md §3): what one frame carries from one sender to one receiver, on
// the wire and decoded, and the signatures embedded in them. Part of the schemas that
// messages.ts gathers.
import {
  MAX_BURST_COUNT, MAX_CG_BYTES, MAX_ID_CHARS, MAX_ITEMS_PER_FRAME, MAX_LIST_ENTRIES, MAX_STATUS_CHARS,
  SIGNATURE_BYTES, MAX_REPLICAS, LOGS_CHUNK_BYTES, MAX_JOURNAL_ITEM_BYTES, BIND_NONCE_BYTES,
} from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { ok } from '../../base/result.ts';
import { bool, bytes, list, nullable, oneOf, struct, text, uint, union, type Schema } from './schema.ts';
import { arg, clusterId, member, nodeName, nonce, processId, reason, taskId } from './basics.ts';
import { addedReplica, type AddedReplica } from './requests.ts';
import { groupMsgGC, type GroupMsgGC, type SignedCG } from './commands.ts';
import {
  ACCUSE_REASONS, LOG_STREAMS, challenge, chunkSize, fileVpid, heartbeatInfo, ptpPayloadWire,
  type AccuseReason, type Challenge, type HeartbeatInfo, type LogStream, type PtpPayload,
  type PtpPayloadWire,
} from './lanes.ts';

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
  /** Operator status query and its answer (docs/PROTOCOL.md §7): answered only with a fresh
   *  challenge of the answering daemon's, each challenge once. */
  | { type: 'status.query'; nonce: number; challenge: Challenge }
  | { type: 'status.reply'; nonce: number; json: string }
  /** Requester → a daemon that answers status or task output: give me a challenge (PROTOCOL §7). */
  | { type: 'challenge.ask'; nonce: number }
  /** The answer to `challenge.ask` `nonce`: small, so a replayed ask gains a stranger nothing. */
  | { type: 'challenge'; nonce: number; challenge: Challenge }
  /** Operator → every replica: a request signed by the operator (a CG with csn = inc = 0),
   *  ordered by the primary and answered by each replica once applied (PROTOCOL §8.1). */
  | { type: 'op.request'; signed: SignedCG }
  /** Replica → operator: the outcome of the request `nonce`, ordered at `rsn`. The operator
   *  accepts an outcome two replicas report identically. */
  | { type: 'op.reply'; nonce: string; rsn: number; ok: boolean; text: string }
  /** Replica → watchdog: power-reset `node`, declared failed at `rsn` (spec §1.6 rule 1,
   *  PROTOCOL §8.4). The watchdog acts on two matching requests. */
  | { type: 'reset.node'; node: string; rsn: number; address: string }
  /** Replica → watchdog: I initiated self-diagnosis (spec §1.6 rule 3, PROTOCOL §10.8).
   *  (`inc`, `counter`) increase per sender, so a replayed report counts once. `target` is
   *  empty when the initiation names nobody yet. */
  | { type: 'diag.report'; inc: number; counter: number; view: number; reason: AccuseReason; target: string }
  /** Operator → any daemon of a cluster started with --allow-inject: inject a fault
   *  (docs/OPERATIONS.md, `trine inject`). Handled by the daemon's driver, never by a core;
   *  a daemon started without the flag drops it (NOT_A_MEMBER). */
  | { type: 'inject'; nonce: number; mode: string; args: string[] }
  /** Daemon → operator: what the injection did, or why it was refused. */
  | { type: 'inject.reply'; nonce: number; ok: boolean; text: string }
  /** Operator → agent: at most `maxBytes` (≤ LOGS_CHUNK_BYTES) of process `vpid` of `task`'s
   *  stdout or stderr file on the agent's node, from byte `offset` (PROTOCOL §7.1). Served by the
   *  agent's driver (src/daemon/logs-server.ts), never by a core; from anyone but an operator of
   *  the membership it is dropped (NOT_A_MEMBER); with a challenge of the agent's that is not
   *  fresh, it is dropped unanswered (REPLAYED, PROTOCOL §7). */
  | { type: 'logs.read'; nonce: number; task: string; vpid: number; stream: LogStream; offset: number; maxBytes: number; challenge: Challenge }
  /** Agent → operator: the answer to read `nonce`. `bytes` were read at `offset`; `size` is the
   *  file's size as the agent read it; `missing`: there is no such file (yet). `ok: false` with
   *  `error` when the file could not be read (`bytes` empty). */
  | {
    type: 'logs.data'; nonce: number; ok: boolean; error: string; offset: number; bytes: Uint8Array; size: number; missing: boolean;
  }
  /** Replica → watchdog: its task journal (PROTOCOL §10.9), whenever the live tasks change and
   *  again every JOURNAL_RESEND_MS, so that a cluster reset of several hosts, where no disk is
   *  shared, finds every replica's journal at the watchdog. `inc`: the replica's incarnation. */
  | { type: 'tasks.journal'; inc: number; journal: Uint8Array }
  /** Replica → watchdog: the operator shut the cluster down at `rsn` (PROTOCOL §10.11). On two
   *  matching notices the watchdog stands down for good (no reset of any kind) and exits. */
  | { type: 'shutdown.notice'; rsn: number }
  /** Replica → watchdog, with each heartbeat while the group has any: the members (and the one
   *  joining) whose keys cluster.json lacks, spares of nodes added at run time (PROTOCOL
   *  §10.12). The watchdog verifies a member's frames once two replicas gave the same key. */
  | { type: 'replica.keys'; replicas: AddedReplica[] }
  /** Watchdog → replica: it took the shutdown of `rsn`; the replica may exit. */
  | { type: 'shutdown.ack'; rsn: number }
  /** The only frames an unbound connection carries (PROTOCOL §2.5), checked by the transport
   *  (src/core/wire/bind-proof.ts), never by a core. Dialer → listener: the listener's `nonce`
   *  for this connection under the dialer's signature or MAC, and a `challenge` of the dialer's
   *  own; listener → dialer: that challenge as `nonce`, and an empty `challenge`. */
  | { type: 'bind.proof'; nonce: Uint8Array; challenge: Uint8Array };

/** The wire form of a lane-1 body: the CG travels as the agent's own bytes and signature. */
type GroupBodyWire = { type: 'cg'; bytes: Uint8Array; sig: Uint8Array } | { type: 'gc'; gc: GroupMsgGC };
export const groupBodyWire: Schema<GroupBodyWire> = union<GroupBodyWire>({
  cg: { code: 1, order: ['bytes', 'sig'], fields: { bytes: bytes(MAX_CG_BYTES), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  gc: { code: 2, order: ['gc'], fields: { gc: groupMsgGC } },
});

export type ItemWire =
  | Exclude<Item, { type: 'grp' } | { type: 'ptp' } | { type: 'op.request' }>
  | { type: 'op.request'; bytes: Uint8Array; sig: Uint8Array }
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
  'status.query': { code: 8, order: ['nonce', 'challenge'], fields: { nonce: uint, challenge } },
  'status.reply': { code: 9, order: ['nonce', 'json'], fields: { nonce: uint, json: text(MAX_STATUS_CHARS) } },
  'op.request': { code: 10, order: ['bytes', 'sig'], fields: { bytes: bytes(MAX_CG_BYTES), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  'op.reply': { code: 11, order: ['nonce', 'rsn', 'ok', 'text'], fields: { nonce, rsn: uint, ok: bool, text: reason } },
  'reset.node': { code: 12, order: ['node', 'rsn', 'address'], fields: { node: nodeName, rsn: uint, address: text(64) } },
  'diag.report': {
    code: 13,
    order: ['inc', 'counter', 'view', 'reason', 'target'],
    fields: { inc: uint, counter: uint, view: uint, reason: oneOf(ACCUSE_REASONS), target: text(MAX_ID_CHARS) },
  },
  inject: { code: 14, order: ['nonce', 'mode', 'args'], fields: { nonce: uint, mode: text(MAX_ID_CHARS), args: list(arg, 8) } },
  'inject.reply': { code: 15, order: ['nonce', 'ok', 'text'], fields: { nonce: uint, ok: bool, text: reason } },
  'logs.read': {
    code: 16,
    order: ['nonce', 'task', 'vpid', 'stream', 'offset', 'maxBytes', 'challenge'],
    fields: { nonce: uint, task: taskId, vpid: fileVpid, stream: oneOf(LOG_STREAMS), offset: uint, maxBytes: chunkSize, challenge },
  },
  'logs.data': {
    code: 17,
    order: ['nonce', 'ok', 'error', 'offset', 'bytes', 'size', 'missing'],
    fields: { nonce: uint, ok: bool, error: reason, offset: uint, bytes: bytes(LOGS_CHUNK_BYTES), size: uint, missing: bool },
  },
  'tasks.journal': { code: 18, order: ['inc', 'journal'], fields: { inc: uint, journal: bytes(MAX_JOURNAL_ITEM_BYTES) } },
  'shutdown.notice': { code: 19, order: ['rsn'], fields: { rsn: uint } },
  'shutdown.ack': { code: 20, order: ['rsn'], fields: { rsn: uint } },
  'challenge.ask': { code: 21, order: ['nonce'], fields: { nonce: uint } },
  challenge: { code: 22, order: ['nonce', 'challenge'], fields: { nonce: uint, challenge } },
  'replica.keys': { code: 24, order: ['replicas'], fields: { replicas: list(addedReplica, MAX_REPLICAS) } },
  'bind.proof': { code: 23, order: ['nonce', 'challenge'], fields: { nonce: bytes(BIND_NONCE_BYTES, BIND_NONCE_BYTES), challenge: bytes(BIND_NONCE_BYTES) } },
});

/** The msgpack body of a frame; version and sender travel in its fixed header (PROTOCOL §2.1). */
export type FrameBody = { cluster: string; to: ProcessId; items: ItemWire[] };
export const frameBody: Schema<FrameBody> = struct<FrameBody>(['cluster', 'to', 'items'], {
  cluster: clusterId, to: processId, items: list(itemWire, MAX_ITEMS_PER_FRAME),
});

/** Signatures, beyond the frame's own, the receiver checks for this item: an agent-signed CG,
 *  or replicas' accusations (PROTOCOL §2.2 step 13). */
export function embeddedSignatures(item: Item | ItemWire): number {
  if (item.type === 'op.request' || (item.type === 'grp' && item.body.type === 'cg')) return 1;
  if (item.type !== 'ptp' || item.body === null) return 0;
  const b = item.body;
  if (b.type === 'wrapper' || b.type === 'accuse') return 1;
  if (b.type === 'wrapper.input' && b.input.type === 'replica.condemn') return b.input.evidence.length;
  return 0;
}

/** An order of the primary (WRAPPER-MSG or its group-input twin): a backup keeps the frame that
 *  carried it and may forward it to the other backup as evidence of equivocation (PROTOCOL
 *  §10.2), so it travels only in a signed frame, never a MAC'd one (§2.4). */
export function needsFrameSignature(item: Item | ItemWire): boolean {
  return item.type === 'ptp' && item.body !== null && (item.body.type === 'wrapper' || item.body.type === 'wrapper.input');
}

/** Process ids as they appear in the frame header: ASCII, checked without parsing msgpack. */
export const PROCESS_ID_PATTERN = /^[a-z][a-z0-9-]*$/;

/** A decoded, verified frame as the core sees it. */
export type Frame = { from: ProcessId; to: ProcessId; items: Item[] };

export const MAX_LIST = MAX_LIST_ENTRIES;
export const MAX_BURST = MAX_BURST_COUNT;
