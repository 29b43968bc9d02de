// The local channel between a linked task process and its node's agent (spec §7 items 1–7;
// docs/PROTOCOL.md §9.4): a Unix stream socket at TRINE_AGENT_SOCKET, replacing the source's two
// named pipes and SIGINT. Each message is a frame = length u32 (big-endian) ‖ canonical msgpack
// of the union below. Decoding is total; the agent drops a process's connection on the first
// malformed frame (it then counts as a crash if the process did not finalize first).
//
// Process → agent: `hello` first (the agent gave the process its task, VPID and a secret token
// in its environment at spawn; a connection that cannot show them is refused), then `signal`
// requests, then `finalize` before a clean exit (Process-disconnect, spec §6.3).
// Agent → process: `welcome` or `refused` answers the hello — the welcome carries the task key
// the processes of one task authenticate their G-MPI hellos with (PROTOCOL §9.5): handed over
// here, on a socket only the authenticated process reads, never in the environment or the
// command line, which other users' processes can read in /proc; `mapping` (spec §7 item 2) comes
// once every member of the task has connected, or at once for a process spawned into a running
// task (`recovered`); then `signal`s in the order the manager sent them.
//
// The handover (PROTOCOL §9.4.1): the library's main thread dials and says hello itself, so a
// spawned process is connected without waiting for its worker thread to boot (~30 ms of CPU);
// the worker then dials a second connection and sends `attach` (the same task, VPID and token).
// The agent stops writing to the first connection and answers on the second with `attached
// {replayed}`, followed by the `replayed` frames it had sent on the first since the welcome,
// then everything after. The first connection's requests are still executed until the process
// ends it; the second's are read only once it has ended, so both directions keep their order.
import { MAX_ID_CHARS, MAX_TASK_PROCS, MAX_TEXT_CHARS, TASK_KEY_BYTES } from '../constants.ts';
import { err, ok, type Result } from '../../base/result.ts';
import { pack, unpack } from './frame.ts';
import { endpointText, int32, member, taskId, u32, type Member } from './messages.ts';
import { MARK_ORDER, markFields, rollbackMapping, type RollbackMapping, type RollbackMark } from './recovery.ts';
import { bool, bytes, list, struct, text, token, uint, union, type Schema } from './schema.ts';
import { dgrpOption, DGRP_REPORT_ORDER, dgrpReportFields, DGRP_VIEW_ORDER, dgrpViewFields, type DgrpOptions, type DgrpReport, type DgrpView } from './dgrp.ts';
import { stragglerOption, type StragglerOptions } from './straggler.ts';

export { int32, MAX_ENDPOINT_CHARS, type Member } from './messages.ts';
export type { RollbackMapping } from './recovery.ts';

/** Largest frame either side sends: a mapping of MAX_TASK_PROCS members fits well inside. */
export const MAX_APP_FRAME_BYTES = 256 * 1024;
/** Length prefix. */
export const APP_FRAME_HEADER_BYTES = 4;
const secret = token(32, /^[0-9a-f]{32}$/);

/** Spec §7 item 2, plus what the library needs to attach epochs and count a quorum. */
export type Mapping = {
  task: string;
  vpid: number;
  /** Members now (spec: "the total number of processes"). */
  size: number;
  restarted: boolean;
  /** This process was spawned into a running task (G-MPI init reports RECOVERED, spec §5.5). */
  recovered: boolean;
  epoch: number;
  quorum: number;
  members: Member[];
  /** A rollback task's (PROTOCOL §11.2): this process's rank, the rank table (rank r is held by
   *  VPID ranks[r]) and the task's options; null for other tasks. A replacement (`recovered`)
   *  gets the rank it took over. */
  rollback: RollbackMapping | null;
  /** A DGRP task's options (PROTOCOL §12.1): its views follow as `dgrp` messages; null otherwise. */
  dgrp: DgrpOptions | null;
  /** A task's straggler policy (PROTOCOL §13.1): the library sends progress reports only then. */
  straggler: StragglerOptions | null;
};
const MAPPING_FIELDS = ['task', 'vpid', 'size', 'restarted', 'recovered', 'epoch', 'quorum', 'members', 'rollback', 'dgrp', 'straggler'] as const;
const mappingFields = {
  task: taskId, vpid: uint, size: uint, restarted: bool, recovered: bool, epoch: uint, quorum: uint,
  members: list(member, MAX_TASK_PROCS), rollback: rollbackMapping, dgrp: dgrpOption, straggler: stragglerOption,
};
export const mapping: Schema<Mapping> = struct<Mapping>(MAPPING_FIELDS, mappingFields);

export type ProcToAgent =
  | { type: 'hello'; task: string; vpid: number; token: string; endpoint: string }
  | { type: 'signal'; signum: number; dest: number; arg: number; epoch: number }
  | { type: 'finalize' }
  /** A rollback task's process stored a checkpoint at its protector (PROTOCOL §11.4). */
  | ({ type: 'mark' } & RollbackMark)
  /** A DGRP task's tester reports a testing interval (PROTOCOL §12.2), from its tester thread. */
  | ({ type: 'dgrp.report' } & DgrpReport)
  /** The process reached the barrier that ends computing round `round` (§12.4). */
  | { type: 'dgrp.arrive'; round: number }
  /** The process has done `permille` ‰ of its work (PROTOCOL §13.2); the library throttles it. */
  | { type: 'progress'; permille: number }
  /** The worker thread's second connection (the handover above): after hello, never first. */
  | { type: 'attach'; task: string; vpid: number; token: string };

export type AgentToProc =
  | { type: 'welcome'; taskKey: Uint8Array }
  | { type: 'refused'; reason: string }
  | ({ type: 'mapping' } & Omit<Mapping, never>)
  /** `data`: the new member's "host:port" for GSIG_REP_SPAWNED (spec §4.3: the reply carries
   *  the new process's VPID and node address), else empty. */
  | { type: 'signal'; signum: number; src: number; dest: number; arg: number; epoch: number; node: string; data: string }
  /** A DGRP task's view (PROTOCOL §12.4). */
  | ({ type: 'dgrp' } & DgrpView)
  /** The handover: the first frame on the second connection; the next `replayed` frames are
   *  those sent on the first since its welcome, again. */
  | { type: 'attached'; replayed: number };

export const procToAgent: Schema<ProcToAgent> = union<ProcToAgent>({
  hello: { code: 1, order: ['task', 'vpid', 'token', 'endpoint'], fields: { task: taskId, vpid: uint, token: secret, endpoint: endpointText } },
  signal: { code: 2, order: ['signum', 'dest', 'arg', 'epoch'], fields: { signum: u32, dest: u32, arg: int32, epoch: uint } },
  finalize: { code: 3, order: [], fields: {} },
  mark: { code: 4, order: MARK_ORDER, fields: markFields },
  'dgrp.report': { code: 5, order: DGRP_REPORT_ORDER, fields: dgrpReportFields },
  'dgrp.arrive': { code: 6, order: ['round'], fields: { round: uint } },
  progress: { code: 7, order: ['permille'], fields: { permille: uint } },
  attach: { code: 8, order: ['task', 'vpid', 'token'], fields: { task: taskId, vpid: uint, token: secret } },
});

export const agentToProc: Schema<AgentToProc> = union<AgentToProc>({
  welcome: { code: 1, order: ['taskKey'], fields: { taskKey: bytes(TASK_KEY_BYTES, TASK_KEY_BYTES) } },
  refused: { code: 2, order: ['reason'], fields: { reason: text(MAX_TEXT_CHARS) } },
  mapping: { code: 3, order: MAPPING_FIELDS, fields: mappingFields },
  signal: {
    code: 4,
    order: ['signum', 'src', 'dest', 'arg', 'epoch', 'node', 'data'],
    fields: { signum: u32, src: u32, dest: u32, arg: int32, epoch: uint, node: text(MAX_ID_CHARS), data: endpointText },
  },
  dgrp: { code: 5, order: DGRP_VIEW_ORDER, fields: dgrpViewFields },
  attached: { code: 6, order: ['replayed'], fields: { replayed: uint } },
});

/** One frame: length prefix and canonical body. */
export function encodeAppFrame<T>(schema: Schema<T>, msg: T): Uint8Array {
  const body = pack(schema.enc(msg));
  const out = new Uint8Array(APP_FRAME_HEADER_BYTES + body.length);
  new DataView(out.buffer).setUint32(0, body.length);
  out.set(body, APP_FRAME_HEADER_BYTES);
  return out;
}

/** An incremental, total decoder of a byte stream of frames. After the first error it stays
 *  failed: the stream has lost its framing and the connection must be closed. Chunks are kept
 *  as they come and joined once per frame, so a stream costs linear time whatever its chunking
 *  (a 1 MiB protector frame arriving in 64 KiB reads, or thousands of small frames in one). */
export class AppFrameDecoder<T> {
  /** Received, not yet decoded; `chunks[0]` starts at a frame's beginning or inside it. */
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private failed: Result<never> | null = null;
  constructor(private readonly schema: Schema<T>, private readonly maxFrameBytes: number = MAX_APP_FRAME_BYTES) {}

  feed(chunk: Uint8Array): void {
    if (this.failed !== null || chunk.length === 0) return;
    // A copy, as a plain Uint8Array (a Buffer's slice would stay a Buffer, and so would every
    // byte string decoded from it): the caller may also reuse its buffer.
    const copy = new Uint8Array(chunk.length);
    copy.set(chunk);
    this.chunks.push(copy);
    this.buffered += chunk.length;
  }

  /** The next complete message, null when more bytes are needed, or the error. */
  next(): Result<T | null> {
    if (this.failed !== null) return this.failed;
    if (this.buffered < APP_FRAME_HEADER_BYTES) return ok(null);
    const head = this.front(APP_FRAME_HEADER_BYTES);
    const len = new DataView(head.buffer, head.byteOffset, head.byteLength).getUint32(0);
    if (len > this.maxFrameBytes) return this.fail(err('WIRE_LIMIT', `frame of ${len} bytes > ${this.maxFrameBytes}`));
    if (this.buffered < APP_FRAME_HEADER_BYTES + len) return ok(null);
    const body = this.front(APP_FRAME_HEADER_BYTES + len).subarray(APP_FRAME_HEADER_BYTES);
    this.drop(APP_FRAME_HEADER_BYTES + len);
    const tree = unpack(body);
    if (!tree.ok) return this.fail(tree);
    const msg = this.schema.dec(tree.value, 'app');
    if (!msg.ok) return this.fail(msg);
    return ok(msg.value);
  }

  /** The first `n` buffered bytes (n ≤ buffered), as one array: the first chunks are joined
   *  into one when `n` spans them. */
  private front(n: number): Uint8Array {
    const first = this.chunks[0] as Uint8Array;
    if (first.length >= n) return first.subarray(0, n);
    let take = 0;
    let size = 0;
    while (size < n) size += (this.chunks[take++] as Uint8Array).length;
    const joined = new Uint8Array(size);
    let at = 0;
    for (const c of this.chunks.splice(0, take, joined)) {
      joined.set(c, at);
      at += c.length;
    }
    return joined.subarray(0, n);
  }

  /** Forget the first `n` buffered bytes, which front(n) has joined into the first chunk. */
  private drop(n: number): void {
    const first = this.chunks[0] as Uint8Array;
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
  }

  private fail(e: Result<never>): Result<never> {
    this.failed = e;
    this.chunks = [];
    this.buffered = 0;
    return e;
  }
}
