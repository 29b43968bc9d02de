// What replicas tell each other and the watchdog (docs/PROTOCOL.md §4, §6, §7, §10): accusations,
// the lane-0 payloads and the group's own inputs, heartbeats, status challenges and task output.
// Part of the schemas that messages.ts gathers.
import {
  MAX_CG_BYTES, MAX_SUSPECTS, MAX_TASK_PROCS, SIGNATURE_BYTES, MAX_ACCUSATION_BYTES,
  MAX_EVIDENCE_FRAME_BYTES, MAX_STATE_CHUNK_BYTES, LOGS_CHUNK_BYTES,
} from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { err, ok } from '../../base/result.ts';
import { decodeStrict } from './msgpack-strict.ts';
import { bool, bytes, list, oneOf, struct, text, token, uint, union, type Schema } from './schema.ts';
import { listenPort, member, orderClaim, portClaim, processId, reason } from './basics.ts';
import { type ErrorReportKind } from './requests.ts';
import { type SignedCG } from './commands.ts';

// ---- Self-diagnosis (PROTOCOL §10) ----------------------------------------------------------------

/** Why a replica accuses another (PROTOCOL §10.2). Each is a judgement a correct replica makes
 *  only about a faulty one, under the timing bounds of the fault model. */
export type AccuseReason =
  | 'silent' | 'rsn.gap' | 'primary.progress' | 'equivocation' | 'digest' | 'agent.reports' | 'clock.rate' | 'order.lie';
export const ACCUSE_REASONS = ['silent', 'rsn.gap', 'primary.progress', 'equivocation', 'digest', 'agent.reports', 'clock.rate', 'order.lie'] as const;
/** Replica `from` says, in view `view`, that `target` is faulty. Signed by `from` on its own
 *  (like a CG), so that two of them are evidence any replica can check (PROTOCOL §10.3). */
export type Accusation = { from: ProcessId; view: number; target: ProcessId; reason: AccuseReason };
export const accusation: Schema<Accusation> = struct<Accusation>(['from', 'view', 'target', 'reason'], {
  from: processId, view: uint, target: processId, reason: oneOf(ACCUSE_REASONS),
});
/** An accusation as its replica signed it. Decoded without checking the signature; the frame
 *  decoder checks it (src/core/wire/frame.ts). */
export type SignedAccusation = { bytes: Uint8Array; sig: Uint8Array; accusation: Accusation };
export const signedAccusation: Schema<SignedAccusation> = {
  enc: (v) => [v.bytes, v.sig],
  dec: (t, p) => {
    if (!Array.isArray(t) || t.length !== 2) return err('WIRE_MALFORMED', `${p}: expected [bytes, sig]`);
    const b = bytes(MAX_ACCUSATION_BYTES).dec(t[0], `${p}[0]`);
    if (!b.ok) return b;
    const sig = bytes(SIGNATURE_BYTES, SIGNATURE_BYTES).dec(t[1], `${p}[1]`);
    if (!sig.ok) return sig;
    const tree = decodeStrict(b.value);
    if (!tree.ok) return tree;
    const a = accusation.dec(tree.value, `${p}.accusation`);
    if (!a.ok) return a;
    return ok({ bytes: b.value, sig: sig.value, accusation: a.value });
  },
};

// ---- Point-to-point lane payloads (PROTOCOL §4) -----------------------------------------------

export type PtpPayload =
  /** WRAPPER-MSG (spec §3.6 G7): a CG with the RSN the primary gave it (0 from a backup). */
  | { type: 'wrapper'; rsn: number; signed: SignedCG }
  /** A plain point-to-point message: operator notes, diagnostics, spec §9.2 A15. */
  | { type: 'notice'; text: string }
  /** A point-to-point error report (spec §2.1 (e), the mismatch case). */
  | { type: 'error.report'; gssn: number; kind: ErrorReportKind; suspects: ProcessId[] }
  /** Backup → backup: the primary gave me the request with this SHA-256 at `rsn` in `view`,
   *  signed over orderClaim by the sender (PROTOCOL §5.8). The receiver checks the signature
   *  only in a dispute. */
  | { type: 'order'; rsn: number; digest: Uint8Array; view: number; sig: Uint8Array }
  /** Backup → primary in a dispute: the other backup's signed confirmation (PROTOCOL §10.2 `order.lie`). */
  | { type: 'order.claim'; claimant: ProcessId; view: number; rsn: number; digest: Uint8Array; sig: Uint8Array }
  /** Primary → backups: an input of the group's own at `rsn` (PROTOCOL §8.3, §8.4). */
  | { type: 'wrapper.input'; rsn: number; input: GroupInput }
  /** Backup → primary: agent `agent` (incarnation `inc`) missed two heartbeat checks and I
   *  probe it; `unreachable`: my probe went unanswered for the probe timeout (PROTOCOL §8.4). */
  | { type: 'node.suspect'; agent: ProcessId; inc: number; unreachable: boolean }
  /** Replica → replicas: a signed accusation (PROTOCOL §10.3). */
  | { type: 'accuse'; signed: SignedAccusation }
  /** Replica → the other correct replica after condemning the primary: my executed RSN in the
   *  view that is ending (PROTOCOL §10.5). */
  | { type: 'view.sync'; view: number; rsn: number }
  /** Backup → backup in a dispute: the frame, signed by the primary, that gave me `rsn`
   *  (PROTOCOL §10.2 equivocation). */
  | { type: 'order.evidence'; rsn: number; frame: Uint8Array }
  /** New replica → group members: send me the state (PROTOCOL §10.6). `port`: the port it
   *  listens on when cluster.json's was taken, else 0; `sig`: its signature over the port
   *  (portClaim), which the primary's `replica.add` carries so the backups can check it. */
  | { type: 'state.request'; view: number; port: number; sig: Uint8Array }
  /** Group member → new replica: the digest of the state at `rsn`, where it joined. */
  | { type: 'state.digest'; rsn: number; digest: Uint8Array }
  /** Group member → new replica: part `index` of `count` of the canonical state at `rsn`. */
  | { type: 'state.chunk'; rsn: number; index: number; count: number; data: Uint8Array };

/** Inputs the primary orders on the group's own behalf (PROTOCOL §8.3, §8.4, §10): a clock tick
 *  for the task timers, a node declared failed, a replica condemned on two accusations, and a
 *  new replica joining the group. */
export type GroupInput =
  | { type: 'tick' }
  | { type: 'node.failed'; agent: ProcessId; inc: number }
  | { type: 'replica.condemn'; evidence: SignedAccusation[] }
  | { type: 'replica.add'; id: ProcessId; port: number; sig: Uint8Array };
export const groupInput: Schema<GroupInput> = union<GroupInput>({
  tick: { code: 1, order: [], fields: {} },
  'node.failed': { code: 2, order: ['agent', 'inc'], fields: { agent: processId, inc: uint } },
  'replica.condemn': { code: 3, order: ['evidence'], fields: { evidence: list(signedAccusation, 2) } },
  'replica.add': { code: 4, order: ['id', 'port', 'sig'], fields: { id: processId, port: listenPort, sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
});

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
  order: { code: 4, order: ['rsn', 'digest', 'view', 'sig'], fields: { rsn: uint, digest: bytes(32, 32), view: uint, sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  'wrapper.input': { code: 5, order: ['rsn', 'input'], fields: { rsn: uint, input: groupInput } },
  'node.suspect': { code: 6, order: ['agent', 'inc', 'unreachable'], fields: { agent: processId, inc: uint, unreachable: bool } },
  accuse: { code: 7, order: ['signed'], fields: { signed: signedAccusation } },
  'view.sync': { code: 8, order: ['view', 'rsn'], fields: { view: uint, rsn: uint } },
  'order.evidence': { code: 9, order: ['rsn', 'frame'], fields: { rsn: uint, frame: bytes(MAX_EVIDENCE_FRAME_BYTES) } },
  'state.request': { code: 10, order: ['view', 'port', 'sig'], fields: { view: uint, port: listenPort, sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  'state.digest': { code: 11, order: ['rsn', 'digest'], fields: { rsn: uint, digest: bytes(32, 32) } },
  'order.claim': {
    code: 13,
    order: ['claimant', 'view', 'rsn', 'digest', 'sig'],
    fields: { claimant: processId, view: uint, rsn: uint, digest: bytes(32, 32), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) },
  },
  'state.chunk': {
    code: 12,
    order: ['rsn', 'index', 'count', 'data'],
    fields: { rsn: uint, index: uint, count: uint, data: bytes(MAX_STATE_CHUNK_BYTES) },
  },
});

// ---- Heartbeats (PROTOCOL §6) -----------------------------------------------------------------

export type Role = 'primary' | 'backup';
export type HeartbeatInfo =
  /** `view`: the replica's view (PROTOCOL §10.1); `digest` is of the state at `rsn`;
   *  `ckptRsn`/`ckptDigest` its latest checkpoint (PROTOCOL §10.4), 0/zeros before the first. */
  | { type: 'replica'; role: Role; rsn: number; gssn: number; digest: Uint8Array; view: number; ckptRsn: number; ckptDigest: Uint8Array }
  | { type: 'agent'; gssnDelivered: number; csnSent: number };
export const heartbeatInfo: Schema<HeartbeatInfo> = union<HeartbeatInfo>({
  replica: {
    code: 1,
    order: ['role', 'rsn', 'gssn', 'digest', 'view', 'ckptRsn', 'ckptDigest'],
    fields: {
      role: oneOf(['primary', 'backup'] as const), rsn: uint, gssn: uint, digest: bytes(32, 32), view: uint, ckptRsn: uint,
      ckptDigest: bytes(32, 32),
    },
  },
  agent: { code: 2, order: ['gssnDelivered', 'csnSent'], fields: { gssnDelivered: uint, csnSent: uint } },
});

// ---- Task output from the agents (PROTOCOL §7.1) ---------------------------------------------

/** A task process's output file: its stdout (`out`) or its stderr (`err`). */
export type LogStream = 'out' | 'err';
export const LOG_STREAMS = ['out', 'err'] as const;

/** A non-negative safe integer no larger than `max`: a larger one is WIRE_LIMIT. */
function uintUpTo(max: number): Schema<number> {
  return {
    enc: (v) => v,
    dec: (t, p) => {
      if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0) return err('WIRE_MALFORMED', `${p}: expected uint`);
      return t <= max ? ok(t) : err('WIRE_LIMIT', `${p}: ${t} > ${max}`);
    },
  };
}
/** A daemon's challenge (PROTOCOL §7): its incarnation, a serial it never issues twice in that
 *  incarnation, and its own clock when it issued it. A status query or a read of task output
 *  carries one, under the requester's signature or MAC, so a captured request is stale once the
 *  challenge is used or older than CHALLENGE_TTL_MS (src/core/freshness.ts). */
export type Challenge = { inc: number; serial: number; atMs: number };
export const challenge: Schema<Challenge> = struct<Challenge>(['inc', 'serial', 'atMs'], { inc: uint, serial: uint, atMs: uint });

/** A VPID that names an output file: below MAX_TASK_PROCS, as every task's VPIDs are. With the
 *  task id's token (`t` and digits) it leaves no way out of `logs/tasks/` on the agent's disk. */
export const fileVpid = uintUpTo(MAX_TASK_PROCS - 1);
/** What an operator may ask for in one read, and what one reply carries: LOGS_CHUNK_BYTES. */
export const chunkSize = uintUpTo(LOGS_CHUNK_BYTES);
