// src/daemon/record-writer.ts: a journal write that fails is retried and reported, never silently
// lost (issue 14 item 4; the replica's task journal, PROTOCOL §10.9). Retries back off from
// RECORD_RETRY_MIN_MS to RECORD_RETRY_MAX_MS; a newer version replaces the unwritten one and is
// the one retried; the report counts failures by error code and says whether the latest version
// is still not on disk. The write is the seam: here a function that fails on demand.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RECORD_RETRY_MAX_MS, RECORD_RETRY_MIN_MS, RecordWriter } from '../../../src/daemon/record-writer.ts';

const failure = (code: string) => Object.assign(new Error(`${code}: it failed`), { code });

function writer() {
  const written: string[] = [];
  const logs: [string, string, Record<string, unknown>][] = [];
  let failWith: string | null = null;
  let attempts = 0;
  const w = new RecordWriter<string>({
    name: 'tasks.journal', path: '/x/run/r1.tasks',
    write: (data) => {
      attempts += 1;
      if (failWith !== null) throw failure(failWith);
      written.push(data);
    },
    log: (level, event, fields) => logs.push([level, event, fields]),
  });
  return {
    w, written, logs, attempts: () => attempts,
    fail: (code: string | null) => {
      failWith = code;
    },
  };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('issue 14 item 4: a record write that fails is retried and reported', () => {
  it('a write that goes through reports nothing', () => {
    const t = writer();
    t.w.put('v1');
    expect(t.written).toEqual(['v1']);
    expect(t.w.report()).toBeNull();
    expect(t.logs).toEqual([]);
  });

  it('a failed write is retried with back-off (100 ms doubling, capped at 5 s) until it goes through, and the report says so', () => {
    const t = writer();
    t.fail('ENOSPC');
    t.w.put('v1');
    expect(t.w.report()).toEqual({ failures: { ENOSPC: 1 }, pending: true, lastError: 'ENOSPC: it failed', superseded: 0 });
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      const before = t.attempts();
      const next = vi.getTimerCount() === 1 ? (t.logs.at(-1)?.[2]['retryInMs'] as number) : -1;
      delays.push(next);
      vi.advanceTimersByTime(next - 1);
      expect(t.attempts()).toBe(before);
      vi.advanceTimersByTime(1);
      expect(t.attempts()).toBe(before + 1);
    }
    expect(delays).toEqual([RECORD_RETRY_MIN_MS, 100, 200, 400, 800, 1600, 3200, RECORD_RETRY_MAX_MS]);
    expect(t.logs[0]?.slice(0, 2)).toEqual(['error', 'tasks.journal.write-failed']);
    expect(t.logs.slice(1).every(([level]) => level === 'warn')).toBe(true);
    t.fail(null);
    vi.advanceTimersByTime(RECORD_RETRY_MAX_MS);
    expect(t.written).toEqual(['v1']);
    expect(t.w.report()).toEqual({ failures: { ENOSPC: 9 }, pending: false, lastError: 'ENOSPC: it failed', superseded: 0 });
    expect(t.logs.at(-1)).toEqual(['info', 'tasks.journal.written', { path: '/x/run/r1.tasks', afterFailures: 9, superseded: 0 }]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a newer version supersedes the unwritten one: it waits for the retry, and only it is written', () => {
    const t = writer();
    t.fail('EIO');
    t.w.put('v1');
    t.w.put('v2');
    t.w.put('v3');
    // No attempt before the retry is due: the disk that just failed is not hammered.
    expect(t.attempts()).toBe(1);
    t.fail(null);
    vi.advanceTimersByTime(RECORD_RETRY_MIN_MS);
    expect(t.written).toEqual(['v3']);
    expect(t.w.report()).toMatchObject({ failures: { EIO: 1 }, pending: false, superseded: 2 });
  });

  it('after a success the back-off starts over; failures by code add up', () => {
    const t = writer();
    t.fail('EMFILE');
    t.w.put('v1');
    vi.advanceTimersByTime(RECORD_RETRY_MIN_MS);
    t.fail(null);
    vi.advanceTimersByTime(RECORD_RETRY_MIN_MS);
    t.fail('ENOSPC');
    t.w.put('v2');
    expect(t.logs.at(-1)?.[2]['retryInMs']).toBe(RECORD_RETRY_MIN_MS);
    expect(t.w.report()?.failures).toEqual({ EMFILE: 2, ENOSPC: 1 });
  });

  it('close stops the retries (the daemon exits)', () => {
    const t = writer();
    t.fail('EIO');
    t.w.put('v1');
    t.w.close();
    vi.advanceTimersByTime(RECORD_RETRY_MAX_MS * 2);
    expect(t.attempts()).toBe(1);
    t.w.put('v2');
    expect(t.attempts()).toBe(1);
  });
});
