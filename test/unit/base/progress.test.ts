// The progress lines of the campaigns and `npm run sim` (src/base/progress.ts, issue 19 item 5).
import { describe, expect, it } from 'vitest';
import { duration, Progress, progressLine } from '../../../src/base/progress.ts';

describe('progressLine', () => {
  it('runs done/total, failures, elapsed and the ETA from the mean time per run', () => {
    expect(progressLine({ label: 'campaign', unit: 'runs', done: 3, total: 10, failures: 1, elapsedMs: 62_000 }))
      .toBe('campaign: 3/10 runs, 1 failed, 1 min 02 s elapsed, ETA 2 min 25 s');
  });
  it('no ETA before the first step, "done" after the last', () => {
    expect(progressLine({ label: 'sim', unit: 'seeds', done: 0, total: 5, failures: 0, elapsedMs: 10 })).toMatch(/ETA unknown$/);
    expect(progressLine({ label: 'sim', unit: 'seeds', done: 5, total: 5, failures: 2, elapsedMs: 4_000 })).toBe('sim: 5/5 seeds, 2 failed, 4 s elapsed, done');
  });
  it('durations: seconds, minutes, hours', () => {
    expect([duration(0), duration(59_400), duration(60_000), duration(3_725_000), duration(-5)]).toEqual(['0 s', '59 s', '1 min 00 s', '1 h 02 min', '0 s']);
  });
});

describe('Progress', () => {
  it('at most one line per interval, and always the last step\'s', () => {
    let t = 1_000;
    const lines: string[] = [];
    const p = new Progress('sim', 'seeds', 4, (l) => lines.push(l), 5_000, () => t);
    t += 100;
    p.step(1, 0); // the first step: a line
    t += 1_000;
    p.step(2, 0); // 1 s later: within the interval, none
    t += 5_000;
    p.step(3, 1); // past it: a line
    t += 10;
    p.step(4, 1); // the last: a line, however soon
    expect(lines).toEqual([
      'sim: 1/4 seeds, 0 failed, 0 s elapsed, ETA 0 s\n',
      'sim: 3/4 seeds, 1 failed, 6 s elapsed, ETA 2 s\n',
      'sim: 4/4 seeds, 1 failed, 6 s elapsed, done\n',
    ]);
  });
  it('every step with an interval of 0', () => {
    const lines: string[] = [];
    const p = new Progress('campaign', 'runs', 2, (l) => lines.push(l), 0, () => 0);
    p.step(1, 1);
    p.step(2, 1);
    expect(lines).toHaveLength(2);
  });
});
