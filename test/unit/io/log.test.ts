// src/io/log.ts: logging never stops a daemon (issue 14 item 4). A log whose destination fails —
// a full device (ENOSPC, /dev/full for real), a descriptor that cannot be written (EBADF: opened
// read-only, or closed), a file that cannot be opened — drops the line, counts it by error code,
// never throws and logs nothing about it meanwhile; it opens the file again every LOG_RETRY_MS
// and, once a line goes through, says how many were lost. stdout and stderr likewise.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createProcessLog, errorCode, LOG_RETRY_MS, LogFile, logPath, MAX_LOG_DROP_CODES, OTHER_CODE, countByCode } from '../../../src/io/log.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'trine-log-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const lines = (path: string): Record<string, unknown>[] =>
  readFileSync(path, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>);

/** A clock the test moves by hand. */
function clock(): { nowMs: () => number; advance: (ms: number) => void } {
  let t = 0;
  return { nowMs: () => t, advance: (ms) => { t += ms; } };
}

describe('issue 14 item 4: a log destination that fails never throws', () => {
  it('a full device (/dev/full, ENOSPC): every line dropped and counted, none thrown', () => {
    const file = new LogFile(() => openSync('/dev/full', 'a'));
    for (let i = 0; i < 5; i++) expect(() => file.write(`{"n":${i}}\n`)).not.toThrow();
    expect(file.dropped()).toEqual({ ENOSPC: 5 });
    file.close();
  });

  it('a descriptor opened read-only, and one closed under it (EBADF): dropped and counted', () => {
    const path = join(dir, 'ro.log');
    writeFileSync(path, '');
    const readOnly = new LogFile(() => openSync(path, 'r'));
    readOnly.write('a\n');
    expect(readOnly.dropped()).toEqual({ EBADF: 1 });
    const closed = new LogFile(() => {
      const fd = openSync(path, 'a');
      closeSync(fd);
      return fd;
    });
    closed.write('b\n');
    closed.write('c\n');
    expect(closed.dropped()).toEqual({ EBADF: 2 });
    expect(readFileSync(path, 'utf8')).toBe('');
  });

  it('an open that fails (ENOENT: no such directory): lines dropped under its code until the open succeeds', () => {
    const c = clock();
    const path = join(dir, 'gone', 'x.log');
    const file = new LogFile(() => openSync(path, 'a'), { nowMs: c.nowMs });
    file.write('a\n');
    expect(file.dropped()).toEqual({ ENOENT: 1 });
    mkdirSync(join(dir, 'gone'));
    c.advance(LOG_RETRY_MS);
    file.write('b\n');
    expect(readFileSync(path, 'utf8')).toBe('b\n');
  });

  it('resumes when the destination works again: no system call before LOG_RETRY_MS, then the file is opened again and the loss reported once', () => {
    const c = clock();
    const good = join(dir, 'good.log');
    let opens = 0;
    let full = true;
    const recovered: [number, string][] = [];
    const file = new LogFile(() => {
      opens += 1;
      return openSync(full ? '/dev/full' : good, 'a');
    }, { nowMs: c.nowMs, onRecovered: (n, code) => recovered.push([n, code]) });
    file.write('1\n');
    expect(opens).toBe(1);
    // Within the retry period lines are dropped without touching the file.
    c.advance(LOG_RETRY_MS - 1);
    file.write('2\n');
    file.write('3\n');
    expect(opens).toBe(1);
    // Still full at the retry: opened again, dropped again, the next retry a period later.
    c.advance(1);
    file.write('4\n');
    expect(opens).toBe(2);
    full = false;
    c.advance(LOG_RETRY_MS);
    file.write('5\n');
    file.write('6\n');
    expect(opens).toBe(3);
    expect(readFileSync(good, 'utf8')).toBe('5\n6\n');
    expect(file.dropped()).toEqual({ ENOSPC: 4 });
    expect(recovered).toEqual([[4, 'ENOSPC']]);
  });

  it('through pino: a process log whose file cannot be opened (a directory in its place, EISDIR) never throws, counts, and once the file can be made writes again with a log.dropped line', async () => {
    const path = logPath(dir, 'r9');
    mkdirSync(path, { recursive: true });
    const log = createProcessLog(dir, 'r9');
    const before = log.drops()['EISDIR'] ?? 0;
    expect(() => {
      log.logger.info({ event: 'one' });
      log.logger.error({ event: 'two' });
      log.flush();
    }).not.toThrow();
    expect((log.drops()['EISDIR'] ?? 0) - before).toBe(2);
    rmdirSync(path);
    await new Promise((r) => setTimeout(r, LOG_RETRY_MS + 50));
    log.logger.info({ event: 'three' });
    expect(existsSync(path)).toBe(true);
    expect(lines(path).map((e) => [e['event'], e['dropped'] ?? null, e['code'] ?? null])).toEqual([['three', null, null], ['log.dropped', 2, 'EISDIR']]);
  });

  it('a daemon whose stdout is a full device keeps running: the write error is counted, not an uncaught exception', () => {
    const LOG = fileURLToPath(new URL('../../../src/io/log.ts', import.meta.url));
    const script = `const l = await import(${JSON.stringify(LOG)}); l.createProcessLog(${JSON.stringify(dir)}, 'a9');
      process.stdout.write('x'.repeat(100) + '\\n');
      setTimeout(() => process.stderr.write(JSON.stringify(l.logDrops())), 100);`;
    const full = openSync('/dev/full', 'a');
    try {
      const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', stdio: ['ignore', full, 'pipe'] });
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stderr)).toEqual({ ENOSPC: 1 });
    } finally {
      closeSync(full);
    }
  });
});

describe('drop counts stay bounded', () => {
  it('at most MAX_LOG_DROP_CODES codes, the rest under OTHER; an error without a code is UNKNOWN', () => {
    const counts: Record<string, number> = {};
    for (let i = 0; i < MAX_LOG_DROP_CODES + 5; i++) countByCode(counts, `E${i}`);
    expect(Object.keys(counts)).toHaveLength(MAX_LOG_DROP_CODES);
    expect(counts[OTHER_CODE]).toBe(6);
    countByCode(counts, 'E0', 2);
    expect(counts['E0']).toBe(3);
    expect(errorCode(new Error('no code'))).toBe('UNKNOWN');
    expect(errorCode({ code: 'x'.repeat(100) })).toBe('UNKNOWN');
    expect(errorCode(Object.assign(new Error('full'), { code: 'ENOSPC' }))).toBe('ENOSPC');
  });
});
