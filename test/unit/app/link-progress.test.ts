// The library's progress reports (src/app/link/progress.ts; docs/PROTOCOL.md §13.2): a fraction
// becomes permille, at most one report per PROGRESS_MIN_INTERVAL_MS and only when it changed, the
// latest one sent at the interval's end; nothing after the link is gone. Stepped with fake timers
// and a stand-in link that records what it was asked to send.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LinkError } from '../../../src/app/link/errors.ts';
import { PROGRESS_MIN_INTERVAL_MS } from '../../../src/app/link/limits.ts';
import type { Link } from '../../../src/app/link/link.ts';
import { ProgressReporter, toPermille } from '../../../src/app/link/progress.ts';

function fakeLink(straggler: { factorHundredths: number; afterPermille: number } | null = { factorHundredths: 150, afterPermille: 500 }) {
  const sent: number[] = [];
  const link = {
    state: 'ready',
    mapping: { straggler },
    sendOwn(m: { type: string; permille: number }) {
      if (link.state !== 'ready') throw new LinkError('FINALIZED', `the link is ${link.state}`);
      sent.push(m.permille);
    },
  };
  return { link, sent, reporter: new ProgressReporter(link as unknown as Link, () => Date.now()) };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('progress reports (PROTOCOL §13.2)', () => {
  it('a fraction 0 … 1 becomes permille, rounded down; anything else is BAD_ARG', () => {
    expect([0, 0.3105, 0.5, 0.9999, 1].map(toPermille)).toEqual([0, 310, 500, 999, 1000]);
    for (const bad of [-0.01, 1.01, Number.NaN, Infinity, '0.5' as unknown as number]) {
      expect(() => toPermille(bad)).toThrow(expect.objectContaining({ code: 'BAD_ARG' }));
    }
  });

  it('the first report leaves at once; an unchanged permille never leaves', () => {
    const f = fakeLink();
    f.reporter.report(0.1);
    f.reporter.report(0.1004);
    vi.advanceTimersByTime(5 * PROGRESS_MIN_INTERVAL_MS);
    f.reporter.report(0.1);
    expect(f.sent).toEqual([100]);
  });

  it(`at most one report per ${PROGRESS_MIN_INTERVAL_MS} ms: those in between are folded into the latest, sent at the interval's end`, () => {
    const f = fakeLink();
    f.reporter.report(0.1);
    for (let i = 11; i <= 19; i++) {
      vi.advanceTimersByTime(10);
      f.reporter.report(i / 100);
    }
    expect(f.sent).toEqual([100]);
    vi.advanceTimersByTime(PROGRESS_MIN_INTERVAL_MS);
    expect(f.sent).toEqual([100, 190]);
    // A loop reporting every millisecond for a second sends about ten.
    for (let ms = 0; ms < 1000; ms++) {
      f.reporter.report(0.2 + ms / 2000);
      vi.advanceTimersByTime(1);
    }
    vi.advanceTimersByTime(PROGRESS_MIN_INTERVAL_MS);
    expect(f.sent.length - 2).toBeGreaterThanOrEqual(10);
    expect(f.sent.length - 2).toBeLessThanOrEqual(11);
    expect(f.sent.at(-1)).toBe(699);
  });

  it('a task without a straggler policy (its mapping says none) sends nothing, but a bad fraction still throws', () => {
    const f = fakeLink(null);
    f.reporter.report(0.5);
    vi.advanceTimersByTime(PROGRESS_MIN_INTERVAL_MS);
    f.reporter.report(0.7);
    expect(f.sent).toEqual([]);
    expect(() => f.reporter.report(2)).toThrow(expect.objectContaining({ code: 'BAD_ARG' }));
  });

  it('a report waiting when the link goes is dropped, not thrown from a timer; a new report on a closed link throws', () => {
    const f = fakeLink();
    f.reporter.report(0.1);
    f.reporter.report(0.2);
    f.link.state = 'finalized';
    vi.advanceTimersByTime(PROGRESS_MIN_INTERVAL_MS);
    expect(f.sent).toEqual([100]);
    expect(() => f.reporter.report(0.3)).toThrow(expect.objectContaining({ code: 'FINALIZED' }));
    const g = fakeLink();
    g.reporter.report(0.1);
    g.reporter.report(0.2);
    g.reporter.close();
    vi.advanceTimersByTime(PROGRESS_MIN_INTERVAL_MS);
    expect(g.sent).toEqual([100]);
  });
});
