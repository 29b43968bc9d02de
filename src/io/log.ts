// Process logging: one pino file per process in the cluster dir, `<dir>/logs/<id>.log`
// (issue 2 item 9). Writes are synchronous, so the last lines before a crash, a `terminate`
// effect or a signal are on disk when the process exits; log volume at the default level is
// a few lines a second, far below what synchronous appends cost.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import type { ProcessId } from '../core/ports.ts';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

/** Default level; `TRINE_LOG_LEVEL` overrides it (debug shows every delivery). */
export const DEFAULT_LOG_LEVEL: LogLevelName = 'info';

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

export type ProcessLog = { logger: Logger; path: string; flush(): void };

/** A logger that appends to `<dir>/logs/<id>.log`, every line tagged with the process id. */
export function createProcessLog(clusterDir: string, id: ProcessId, level: LogLevelName = levelFromEnv()): ProcessLog {
  mkdirSync(logDir(clusterDir), { recursive: true });
  const path = logPath(clusterDir, id);
  const destination = pino.destination({ dest: path, sync: true, append: true });
  const logger = pino({ level, base: { id, pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
  return {
    logger,
    path,
    flush: () => {
      try {
        destination.flushSync();
      } catch {
        // Nothing buffered (sync mode) or the file is gone: nothing left to save.
      }
    },
  };
}
