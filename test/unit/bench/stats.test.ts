// The one quantile every benchmark figure uses (bench/stats.ts; issue 16 item 6).
import { describe, expect, it } from 'vitest';
import { p50, p99, quantile } from '../../../bench/stats.ts';

describe('bench quantiles', () => {
  it('nearest rank from below, over unsorted samples, which stay as they were', () => {
    const xs = [5, 1, 4, 2, 3];
    expect(quantile(xs, 0)).toBe(1);
    expect(p50(xs)).toBe(3);
    expect(quantile(xs, 0.99)).toBe(5);
    expect(quantile(xs, 1)).toBe(5);
    expect(xs).toEqual([5, 1, 4, 2, 3]);
    expect(p50([1, 2, 3, 4])).toBe(3);
    expect(p99(Array.from({ length: 200 }, (_, i) => 200 - i))).toBe(199);
  });

  it('no samples: NaN, not a throw', () => {
    expect(quantile([], 0.5)).toBeNaN();
  });
});
