// The agent's side of `trine logs` on a cluster of several hosts (docs/PROTOCOL.md §7.1): a task
// process's output lives in the bundle of the host whose agent ran it (`logs/tasks/<task>/
// <vpid>.out|.err`, src/io/spawner.ts), so the operator asks that agent for it, a chunk at a time:
// `logs.read {nonce, task, vpid, stream, offset, maxBytes}` → `logs.data {nonce, ok, error, offset,
// bytes, size, missing}`.
//
// Why here, in the driver, and not in the agent core: the core (src/core/agent.ts) is pure and
// reading a file is I/O. Serving it through the core would take a new core effect (which every
// driver and the simulator must handle) and a way back into the core for the answer, for an
// exchange that touches no protocol state. So, the way src/daemon/inject.ts takes `inject` items,
// the daemon looks at every verified frame before the core does (the Shell's intercept, wired by
// src/daemon/run-core.ts) and takes the operators' `logs.read` items out; the file is read at
// once (at most LOGS_CHUNK_BYTES per read, LOGS_BYTES_PER_FRAME per frame, so the event loop
// stalls for well under a millisecond) and each answer goes back on the same transport in a frame
// of its own, authenticated like every frame. A `logs.read` from anyone else is logged here and
// left in the frame: the core drops it and counts it against its sender like any item it does not
// expect (STYLE.md 6). Nothing a peer sends can make this throw: a file that cannot be read is
// an answer with `ok: false`.
//
// Reads are answered on a fresh challenge only (PROTOCOL §7, src/core/freshness.ts): the operator
// first sends `challenge.ask`, answered here, then its reads carrying that challenge, all in one
// frame. A captured frame of reads replayed later (on any connection) finds its challenge used
// or stale and is dropped unanswered (REPLAYED, logged at most once a second per sender), so a
// stranger cannot have a task's output sent again. The challenges' incarnation is an epoch this
// server draws at random when it starts: a new agent process never takes an old challenge.
//
// No path can leave `logs/tasks/`: the schema admits only task ids `t<digits>` and VPIDs below
// MAX_TASK_PROCS (src/core/wire/messages.ts), so a request for `../../keys` never decodes; the
// file is opened without following a symbolic link, and must be a regular file.
import { randomInt } from 'node:crypto';
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from 'node:fs';
import { relative } from 'node:path';
import { LOGS_BYTES_PER_FRAME, LOGS_CHUNK_BYTES, MAX_LOGS_READS_PER_FRAME, MAX_TEXT_CHARS } from '../core/constants.ts';
import { clipText } from '../core/wire/schema.ts';
import { admitChallenge, createFreshness, issueChallenge, type FreshVerdict } from '../core/freshness.ts';
import type { LogLevel } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import type { Frame, Item } from '../core/wire/messages.ts';
import { processLogPaths } from '../io/spawner.ts';

/** A refused reader is logged at most once this often (with the count since): a faulty peer
 *  that floods `logs.read`, or a stranger replaying captured reads, must not flood the agent's
 *  log too. */
export const LOGS_REFUSED_LOG_MS = 1_000;
/** The epoch of a server's challenges is drawn below this: node:crypto's randomInt takes at
 *  most 2^48 − 1, well inside a safe integer. */
const MAX_EPOCH = 2 ** 48 - 1;

export type LogsRead = Extract<Item, { type: 'logs.read' }>;
export type LogsData = Extract<Item, { type: 'logs.data' }>;

export type LogsServerOptions = {
  /** The node's task output directory (src/io/cluster-dir.ts `paths.taskLogs`). */
  logDir: string;
  /** The epoch of this server's challenges; default: drawn at random (tests fix it). */
  epoch?: number;
  /** Who may read: the membership's operators. */
  operators: readonly ProcessId[];
  log: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
};

/** Sends one item to `to`, in a frame of its own. */
export type Reply = (to: ProcessId, item: Item) => void;

export type LogsServer = {
  /** Takes the operators' `logs.read` and `challenge.ask` items out of a verified frame and answers
   *  them; returns what the core gets (the frame, or a copy without them), or null for nothing. */
  intercept: (frame: Frame, nowMs: number, reply: Reply) => Frame | null;
};

const empty = new Uint8Array(0);
const clip = (text: string) => clipText(text, MAX_TEXT_CHARS);

/** Reads what `read` asks for, at most `budgetBytes` (the frame's budget left), from `logDir`.
 *  Never throws: whatever goes wrong with the file is the answer's `error`. */
export function readLogChunk(logDir: string, read: LogsRead, budgetBytes: number): LogsData {
  const base = { type: 'logs.data', nonce: read.nonce, offset: read.offset } as const;
  const path = processLogPaths(logDir, read.task, read.vpid)[read.stream];
  const shown = relative(logDir, path);
  // The schema's job (task id token, bounded VPID); checked again because a path is at stake.
  if (shown.startsWith('..') || shown.includes('\0')) {
    return { ...base, ok: false, error: `${read.task}/${read.vpid} names no output file`, bytes: empty, size: 0, missing: false };
  }
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
    if (code === 'ENOENT') return { ...base, ok: true, error: '', bytes: empty, size: 0, missing: true };
    return { ...base, ok: false, error: clip(`cannot open tasks/${shown}: ${code}`), bytes: empty, size: 0, missing: false };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { ...base, ok: false, error: `tasks/${shown} is not a regular file`, bytes: empty, size: 0, missing: false };
    const size = stat.size;
    const want = Math.max(0, Math.min(read.maxBytes, LOGS_CHUNK_BYTES, budgetBytes, size - read.offset));
    if (want === 0) return { ...base, ok: true, error: '', bytes: empty, size, missing: false };
    const buffer = Buffer.alloc(want);
    const n = readSync(fd, buffer, 0, want, read.offset);
    return { ...base, ok: true, error: '', bytes: new Uint8Array(buffer.buffer, buffer.byteOffset, n), size, missing: false };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
    return { ...base, ok: false, error: clip(`cannot read tasks/${shown}: ${code}`), bytes: empty, size: 0, missing: false };
  } finally {
    closeSync(fd);
  }
}

export function createLogsServer(opts: LogsServerOptions): LogsServer {
  const operators = new Set(opts.operators);
  /** Per refused sender: when it was last logged, and how many refusals since. Senders are
   *  verified members (the frame was authenticated), so this holds at most the cluster's ids. */
  const refused = new Map<ProcessId, { loggedAtMs: number; since: number }>();

  const freshness = createFreshness(opts.epoch ?? randomInt(MAX_EPOCH));
  /** Per sender with reads not served: when it was last logged, and how many since. */
  const stale = new Map<ProcessId, { loggedAtMs: number; since: number }>();

  const countAndLog = (
    table: Map<ProcessId, { loggedAtMs: number; since: number }>, from: ProcessId, count: number, nowMs: number,
    line: (items: number) => [event: string, fields: Record<string, unknown>],
  ): void => {
    const r = table.get(from) ?? { loggedAtMs: -Infinity, since: 0 };
    r.since += count;
    table.set(from, r);
    if (nowMs - r.loggedAtMs < LOGS_REFUSED_LOG_MS) return;
    const [event, fields] = line(r.since);
    opts.log('warn', event, { from, ...fields });
    r.loggedAtMs = nowMs;
    r.since = 0;
  };
  const refuse = (from: ProcessId, count: number, nowMs: number): void =>
    countAndLog(refused, from, count, nowMs, (items) => ['logs.read.refused', { code: 'NOT_A_MEMBER', why: 'only an operator may read task output', items }]);
  const dropStale = (from: ProcessId, code: Exclude<FreshVerdict, 'fresh'>, count: number, nowMs: number): void =>
    countAndLog(stale, from, count, nowMs, (items) => ['logs.read.dropped', { code, why: 'no fresh challenge of this agent (PROTOCOL §7)', items }]);

  /** The reads of one frame whose challenge is fresh; each challenge is taken once per frame. */
  const freshReads = (from: ProcessId, reads: LogsRead[], nowMs: number): LogsRead[] => {
    const verdicts = new Map<string, FreshVerdict>();
    const out: LogsRead[] = [];
    for (const read of reads) {
      const c = read.challenge;
      const key = `${c.inc}/${c.serial}/${c.atMs}`;
      let verdict = verdicts.get(key);
      if (verdict === undefined) verdicts.set(key, (verdict = admitChallenge(freshness, from, c, nowMs)));
      if (verdict === 'fresh') out.push(read);
      else dropStale(from, verdict, 1, nowMs);
    }
    return out;
  };

  const serve = (from: ProcessId, reads: LogsRead[], reply: Reply): void => {
    let budget = LOGS_BYTES_PER_FRAME;
    let sent = 0;
    for (const [i, read] of reads.entries()) {
      if (i >= MAX_LOGS_READS_PER_FRAME) {
        reply(from, {
          type: 'logs.data', nonce: read.nonce, ok: false, offset: read.offset, bytes: empty, size: 0, missing: false,
          error: `more than ${MAX_LOGS_READS_PER_FRAME} reads in one frame: ask for this one again`,
        });
        continue;
      }
      const data = readLogChunk(opts.logDir, read, budget);
      budget -= data.bytes.length;
      sent += data.bytes.length;
      reply(from, data);
    }
    opts.log('debug', 'logs.read', { from, reads: reads.length, bytes: sent });
  };

  const intercept = (frame: Frame, nowMs: number, reply: Reply): Frame | null => {
    let reads: LogsRead[] | null = null;
    let asks = false;
    for (const item of frame.items) {
      if (item.type === 'logs.read') (reads ??= []).push(item);
      else if (item.type === 'challenge.ask') asks = true;
    }
    if (reads === null && !asks) return frame;
    if (!operators.has(frame.from)) {
      if (reads !== null) refuse(frame.from, reads.length, nowMs);
      return frame; // the core's to drop and count
    }
    // One challenge per frame is all an operator needs (its reads share it).
    const ask = frame.items.find((i) => i.type === 'challenge.ask');
    if (ask !== undefined) reply(frame.from, { type: 'challenge', nonce: ask.nonce, challenge: issueChallenge(freshness, nowMs) });
    const fresh = reads === null ? [] : freshReads(frame.from, reads, nowMs);
    if (fresh.length > 0) serve(frame.from, fresh, reply);
    const rest = frame.items.filter((i) => i.type !== 'logs.read' && i.type !== 'challenge.ask');
    return rest.length === 0 ? null : { ...frame, items: rest };
  };

  return { intercept };
}
