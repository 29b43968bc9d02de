// Process logging: one pino file per process in the cluster dir, `<dir>/logs/<id>.log`
// (issue 2 item 9). Writes are synchronous, so the last lines before a crash, a `terminate`
// effect or a signal are on disk when the process exits; log volume at the default level is
// a few lines a second, far below what synchronous appends cost.
//
// Logging never stops a daemon (issue 14 item 4): a line the file does not take (a full disk,
// ENOSPC; a failing one, EIO; a file that is no longer ours, EPERM or EBADF) is dropped and
// counted by its error code, and nothing is logged about it while it happens (that line would
// fail too). The file is opened again and tried every LOG_RETRY_MS, since a disk that was full
// may have room later; once a line goes through, a `log.dropped` line says how many were lost.
// The counts are per process and reach `trine status` (src/core/status.ts DaemonReport). The
// same holds for the daemon's stdout and stderr (its `logs/<id>.out`): a write error there is
// counted, not thrown.
import { closeSync, fstatSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { DestinationStream, Logger, pino as Pino } from 'pino';
import type { ProcessId } from '../core/ports.ts';
import { mkdirPrivate, openPrivate } from './private-files.ts';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

/** Default level; `TRINE_LOG_LEVEL` overrides it (debug shows every delivery). */
export const DEFAULT_LOG_LEVEL: LogLevelName = 'info';

/** A log file that failed is opened and tried again this often: one failed open and write a
 *  second costs nothing, and a disk an operator freed is used again within a second. Lines in
 *  between are dropped without a system call. */
export const LOG_RETRY_MS = 1_000;
/** Error codes counted apart in the drop counts; further ones count as OTHER_CODE, so a status
 *  reply stays small whatever the kernel says. Errno codes that can fail a write are fewer. */
export const MAX_LOG_DROP_CODES = 16;
export const OTHER_CODE = 'OTHER';

export function logDir(clusterDir: string): string {
  return join(clusterDir, 'logs');
}

export function logPath(clusterDir: string, id: ProcessId): string {
  return join(logDir(clusterDir), `${id}.log`);
}

function levelFromEnv(): LogLevelName {
  const v = process.env['TRINE_LOG_LEVEL'];
  return (LOG_LEVELS as readonly string[]).includes(v ?? '') ? (v as LogLevelName) : DEFAULT_LOG_LEVEL;
}

/** Lines dropped, by the error code that stopped them (ENOSPC, EIO, EPERM, EBADF, …). */
export type LogDrops = Record<string, number>;

/** The error code of a failed system call, for counting. */
export function errorCode(e: unknown): string {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,31}$/.test(code) ? code : 'UNKNOWN';
}

/** Adds `n` under `code`, within MAX_LOG_DROP_CODES codes. */
export function countByCode(counts: Record<string, number>, code: string, n = 1): void {
  const key = code in counts || Object.keys(counts).length < MAX_LOG_DROP_CODES - 1 ? code : OTHER_CODE;
  counts[key] = (counts[key] ?? 0) + n;
}

/** What every log of this process dropped, stdout and stderr included. */
const processDrops: LogDrops = {};

/** A copy of this process's drop counts. */
export function logDrops(): LogDrops {
  return { ...processDrops };
}

export type LogFileOptions = {
  /** Monotonic milliseconds (tests pass their own). */
  nowMs?: () => number;
  /** Called after the first line that went through once lines were dropped: `dropped` lines
   *  were lost meanwhile, the first of them to `code`. Whatever it logs goes through this file
   *  again (and is dropped and counted if that fails: it is never called from inside a drop). */
  onRecovered?: (dropped: number, code: string) => void;
};

/** A pino destination that appends to the file `open` gives and never throws (see the header).
 *  `open` returns a file descriptor this destination owns and closes. */
export class LogFile implements DestinationStream {
  private fd: number | null = null;
  /** The file `fd` was opened on (device and inode): a descriptor closed under us may have been
   *  reused for another file by now, which must not be closed as ours. */
  private opened: string | null = null;
  /** The error code that stops writes, while they are stopped. */
  private failing: string | null = null;
  private retryAtMs = 0;
  private droppedSinceFailure = 0;
  /** A write stopped mid-line: the next line starts on a line of its own. */
  private torn = false;
  private readonly counts: LogDrops = {};
  private readonly nowMs: () => number;

  constructor(private readonly open: () => number, private readonly opts: LogFileOptions = {}) {
    this.nowMs = opts.nowMs ?? (() => performance.now());
    this.reopen();
  }

  write(line: string): void {
    if (this.failing !== null && this.nowMs() < this.retryAtMs) return this.drop(this.failing);
    if (this.failing !== null) this.reopen();
    if (this.fd === null) return this.fail(this.failing ?? 'EBADF');
    const bytes = Buffer.from(this.torn ? `\n${line}` : line);
    let done = 0;
    try {
      while (done < bytes.length) done += writeSync(this.fd, bytes, done, bytes.length - done);
    } catch (e) {
      // With a newline put first, writing only that newline leaves nothing torn.
      this.torn = this.torn ? done !== 1 : done > 0;
      return this.fail(errorCode(e));
    }
    this.torn = false;
    if (this.failing === null) return;
    const { droppedSinceFailure: dropped, failing: code } = this;
    this.failing = null;
    this.droppedSinceFailure = 0;
    this.opts.onRecovered?.(dropped, code);
  }

  /** Lines this destination dropped, by error code. */
  dropped(): LogDrops {
    return { ...this.counts };
  }

  /** Writes are synchronous: nothing is ever buffered here. */
  flushSync(): void {}

  close(): void {
    if (this.fd === null) return;
    try {
      if (this.opened !== null && fileOf(this.fd) === this.opened) closeSync(this.fd);
    } catch {
      // A descriptor that was closed under us: nothing to release.
    }
    this.fd = null;
    this.opened = null;
  }

  private reopen(): void {
    this.close();
    try {
      this.fd = this.open();
      this.opened = fileOf(this.fd);
    } catch (e) {
      this.failing = this.failing ?? errorCode(e);
      this.retryAtMs = this.nowMs() + LOG_RETRY_MS;
    }
  }

  private fail(code: string): void {
    this.failing = this.failing ?? code;
    this.retryAtMs = this.nowMs() + LOG_RETRY_MS;
    this.drop(code);
  }

  private drop(code: string): void {
    this.droppedSinceFailure += 1;
    countByCode(this.counts, code);
    countByCode(processDrops, code);
  }
}

/** Device and inode of the file `fd` is open on; throws EBADF for a closed descriptor. */
function fileOf(fd: number): string {
  const st = fstatSync(fd);
  return `${st.dev}:${st.ino}`;
}

let stdioGuarded = false;
/** A daemon's stdout and stderr are files too (`logs/<id>.out`): a write error there is
 *  emitted as an 'error' event, which nothing would handle and so would end the process. */
function guardStdio(): void {
  if (stdioGuarded) return;
  stdioGuarded = true;
  for (const stream of [process.stdout, process.stderr]) stream.on('error', (e) => countByCode(processDrops, errorCode(e)));
}

export type ProcessLog = {
  logger: Logger;
  path: string;
  flush(): void;
  /** Lines every log of this process dropped (logDrops). */
  drops(): LogDrops;
};

/** A logger that appends to `<dir>/logs/<id>.log`, every line tagged with the process id. */
export function createProcessLog(clusterDir: string, id: ProcessId, level: LogLevelName = levelFromEnv()): ProcessLog {
  guardStdio();
  const path = logPath(clusterDir, id);
  let logger: Logger | null = null;
  const destination = new LogFile(() => {
    // Made again if it was removed: the retry that finds room finds the directory too.
    mkdirPrivate(logDir(clusterDir));
    return openPrivate(path, 'a');
  }, {
    onRecovered: (dropped, code) => logger?.warn({ event: 'log.dropped', dropped, code, total: logDrops() }, `${dropped} log lines lost (${code})`),
  });
  // Loaded here, not with this module: a `trine` command that logs nothing (ps, status) would
  // spend ~20 ms of CPU loading it at every start.
  const pino = createRequire(import.meta.url)('pino') as typeof Pino;
  logger = pino({ level, base: { id, pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
  return { logger, path, flush: () => destination.flushSync(), drops: logDrops };
}
