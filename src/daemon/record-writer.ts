// A durable record a daemon writes again and again — a replica's task journal (PROTOCOL §10.9),
// a daemon's incarnation record — written so that a failure is never silent and never final
// (issue 14 item 4). A write that fails (ENOSPC, EIO, EMFILE at the descriptor limit, …) is
// retried with back-off until it goes through or a newer version replaces the unwritten one,
// which is then the one retried: each version replaces the whole record, so only the latest
// matters. Failures are counted by error code and logged — the first of a run at error, each
// retry's at warn (at most one line per RECORD_RETRY_MAX_MS), the write that ends the run at
// info — and report() is what `trine status` shows (src/core/status.ts RecordWrites). Also the
// two records every daemon start makes (the incarnation) and reports (its DaemonReport).
import type { ProcessId } from '../core/ports.ts';
import type { DaemonReport, RecordWrites } from '../core/status.ts';
import { nextIncarnation, paths } from '../io/cluster-dir.ts';
import { countByCode, errorCode, type ProcessLog } from '../io/log.ts';
import { mkdirPrivate, writeFilePrivate } from '../io/private-files.ts';
import { createBackoff, nextDelay, resetBackoff } from './supervisor.ts';

/** First retry of a failed write, and the cap the delay doubles up to: a full disk an operator
 *  frees is used within seconds, and a disk that stays full costs one failed write per 5 s. */
export const RECORD_RETRY_MIN_MS = 100;
export const RECORD_RETRY_MAX_MS = 5_000;
/** Characters of an error message kept for status. */
const MAX_ERROR_CHARS = 200;

export type RecordLog = (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void;

export type RecordWriterOptions<T> = {
  /** Names its log events, `<name>.write-failed` and `<name>.written`: `tasks.journal`. */
  name: string;
  /** Where the record goes, for the log. */
  path: string;
  /** Writes one version whole; throws if it could not. */
  write: (data: T) => void;
  log: RecordLog;
};

export class RecordWriter<T> {
  /** The latest version while it is not on disk. */
  private pending: { data: T } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly backoff = createBackoff(RECORD_RETRY_MIN_MS, RECORD_RETRY_MAX_MS);
  private readonly failures: Record<string, number> = {};
  private lastError: string | null = null;
  /** Failed attempts since the last write that went through. */
  private failedInRun = 0;
  private superseded = 0;
  private closed = false;

  constructor(private readonly opts: RecordWriterOptions<T>) {}

  /** Writes `data` now, or — while a failed write waits for its retry — at that retry. */
  put(data: T): void {
    if (this.closed) return;
    if (this.pending !== null) this.superseded += 1;
    this.pending = { data };
    if (this.timer === null) this.attempt();
  }

  /** For status: null while no write of this record ever failed. */
  report(): RecordWrites | null {
    if (Object.keys(this.failures).length === 0) return null;
    return { failures: { ...this.failures }, pending: this.pending !== null, lastError: this.lastError, superseded: this.superseded };
  }

  /** Stops retrying (the daemon exits). */
  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private attempt(): void {
    this.timer = null;
    const p = this.pending;
    if (p === null || this.closed) return;
    try {
      this.opts.write(p.data);
    } catch (e) {
      return this.retryLater(e);
    }
    this.pending = null;
    if (this.failedInRun > 0) {
      this.opts.log('info', `${this.opts.name}.written`, { path: this.opts.path, afterFailures: this.failedInRun, superseded: this.superseded });
    }
    this.failedInRun = 0;
    resetBackoff(this.backoff);
  }

  private retryLater(e: unknown): void {
    const code = errorCode(e);
    countByCode(this.failures, code);
    this.lastError = (e instanceof Error ? e.message : String(e)).slice(0, MAX_ERROR_CHARS);
    this.failedInRun += 1;
    const retryInMs = Math.max(RECORD_RETRY_MIN_MS, nextDelay(this.backoff));
    this.opts.log(this.failedInRun === 1 ? 'error' : 'warn', `${this.opts.name}.write-failed`, {
      path: this.opts.path, code, error: this.lastError, attempt: this.failedInRun, retryInMs,
    });
    this.timer = setTimeout(() => this.attempt(), retryInMs);
    // A retry must not keep a daemon that is exiting alive.
    this.timer.unref();
  }
}

// ---- a daemon's records ------------------------------------------------------------------------

/** This start's incarnation (run/<id>.inc, PROTOCOL §3.1). A record that cannot be written
 *  does not stop the daemon: the start time is the incarnation (what the record would say, short
 *  of a clock stepped back), and the record is retried so the next start counts on from it. */
export function startIncarnation(dir: string, id: ProcessId, log: RecordLog): { inc: number; writer: RecordWriter<number> | null } {
  try {
    return { inc: nextIncarnation(dir, id, Date.now()), writer: null };
  } catch {
    const inc = Date.now();
    const writer = new RecordWriter<number>({
      name: 'inc', path: paths.incFile(dir, id), log, write: (n) => {
        mkdirPrivate(paths.run(dir));
        writeFilePrivate(paths.incFile(dir, id), `${n}\n`);
      },
    });
    writer.put(inc);
    return { inc, writer };
  }
}

/** The DaemonReport of this process: its log's drops, the records whose writes failed. */
export function daemonReport(log: ProcessLog, writers: Record<string, { report(): RecordWrites | null } | null>, supervisor: DaemonReport['supervisor']): DaemonReport {
  const records: Record<string, RecordWrites> = {};
  for (const [name, w] of Object.entries(writers)) {
    const r = w?.report() ?? null;
    if (r !== null) records[name] = r;
  }
  return { logDrops: log.drops(), records, supervisor };
}
