// What strangers at an agent's application socket may cost it (issue 14 item 8; PROTOCOL §9.4;
// src/daemon/app-refusals.ts): answered refusals come from a token bucket, and every
// unidentified connection's end is counted into one line per interval, the first at once.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Refusals, type RefusalsLine } from '../../../src/daemon/app-refusals.ts';

type Code = 'AUTH_REFUSED' | 'HELLO_TIMEOUT';
const sample = (code: Code, vpid = 0) => ({ code, task: 't1', vpid, reason: code === 'AUTH_REFUSED' ? 'bad token' : 'no hello' });

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Refusals (issue 14 item 8)', () => {
  it('answers a burst, then none until the bucket refills at its rate', () => {
    const r = new Refusals<Code>({ burst: 3, perSecond: 2, log: () => undefined });
    expect([r.mayAnswer(), r.mayAnswer(), r.mayAnswer(), r.mayAnswer()]).toEqual([true, true, true, false]);
    vi.advanceTimersByTime(400);
    expect(r.mayAnswer()).toBe(false); // 0.8 of a token
    vi.advanceTimersByTime(100);
    expect(r.mayAnswer()).toBe(true);
    vi.advanceTimersByTime(60_000);
    expect(Array.from({ length: 5 }, () => r.mayAnswer())).toEqual([true, true, true, false, false]); // never above the burst
  });

  it('logs the first refusal at once, then one line per interval with the counts, by code, and the first of each', () => {
    const lines: RefusalsLine<Code>[] = [];
    const r = new Refusals<Code>({ logIntervalMs: 1_000, log: (l) => lines.push(l) });
    r.count(sample('AUTH_REFUSED', 1), false);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ count: 1, codes: { AUTH_REFUSED: 1 }, unanswered: 0, first: sample('AUTH_REFUSED', 1) });
    for (let i = 0; i < 500; i++) r.count(sample(i % 5 === 0 ? 'HELLO_TIMEOUT' : 'AUTH_REFUSED', 2), i % 2 === 0);
    expect(lines).toHaveLength(1);
    vi.advanceTimersByTime(1_000);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ count: 500, codes: { AUTH_REFUSED: 400, HELLO_TIMEOUT: 100 }, unanswered: 250, first: sample('HELLO_TIMEOUT', 2) });
    // Quiet for an interval: the next one is logged at once again.
    vi.advanceTimersByTime(5_000);
    r.count(sample('AUTH_REFUSED', 3), true);
    expect(lines).toHaveLength(3);
  });

  it('close() logs what is counted and leaves no timer behind', () => {
    const lines: RefusalsLine<Code>[] = [];
    const r = new Refusals<Code>({ logIntervalMs: 1_000, log: (l) => lines.push(l) });
    r.count(sample('AUTH_REFUSED'), false);
    r.count(sample('AUTH_REFUSED'), false);
    expect(vi.getTimerCount()).toBe(1);
    r.close();
    expect(lines.map((l) => l.count)).toEqual([1, 1]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
