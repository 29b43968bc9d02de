// HyperQuickSort's pure pieces and the DGRP reference (examples/hqsort/hqsort-core.ts; spec
// 2.2.7 Algorithm 2, spec 2.6 "N−1 tolerance" and "Work absorption"): sorted output and the same
// multiset for P = 2…16 with 0, 1, P/2 and P−1 processes non-recommended, sets that change
// between rounds, empty lists, duplicates and all-equal values.
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../../examples/common/seeded-random.ts';
import {
  drawRecommended, generateInput, isGloballySorted, localSort, mergeSorted, pivotOf, sameMultiset, simulateHyperQuickSort, splitAtPivot,
  type HqsRound,
} from '../../../examples/hqsort/hqsort-core.ts';

const i32 = (...values: number[]): Int32Array => Int32Array.from(values);
const all = (size: number) => (): Set<number> => new Set(Array.from({ length: size }, (_, r) => r));
const arrays = (lists: readonly Int32Array[]): number[][] => lists.map((l) => [...l]);

/** Runs the reference and checks what spec 2.6 asks of every run; returns the rounds' traces. */
function runAndCheck(input: Int32Array[], recommendedAtRound: (round: number) => ReadonlySet<number>): { output: Int32Array[]; rounds: HqsRound[] } {
  const copy = input.map((l) => l.slice());
  const rounds: HqsRound[] = [];
  const output = simulateHyperQuickSort(input, recommendedAtRound, (r) => rounds.push(r));
  expect(output).toHaveLength(input.length);
  expect(isGloballySorted(output)).toBe(true);
  expect(sameMultiset(output, input)).toBe(true);
  expect(arrays(input)).toEqual(arrays(copy)); // the input is not modified
  expect(rounds.map((r) => r.round)).toEqual(Array.from({ length: Math.log2(input.length) }, (_, k) => k + 1));
  for (const r of rounds) {
    const set = recommendedAtRound(r.round);
    for (const h of r.holders) expect(set.has(h)).toBe(true);
    expect(r.remoteExchanges + r.localExchanges).toBe(input.length);
  }
  return { output, rounds };
}

describe('Algorithm 2 local pieces', () => {
  it('localSort sorts a copy numerically', () => {
    const list = i32(10, -3, 2, 2, 100, -50);
    expect([...localSort(list)]).toEqual([-50, -3, 2, 2, 10, 100]);
    expect([...list]).toEqual([10, -3, 2, 2, 100, -50]);
  });

  it('the pivot is the lower median of a sorted list; an empty list has none', () => {
    expect(pivotOf(i32())).toBeNull();
    expect(pivotOf(i32(7))).toBe(7);
    expect(pivotOf(i32(1, 2))).toBe(1);
    expect(pivotOf(i32(1, 2, 3))).toBe(2);
    expect(pivotOf(i32(1, 2, 3, 4))).toBe(2);
  });

  it('splitAtPivot keeps lower ≤ pivot < higher (equal values go low)', () => {
    const sorted = i32(1, 3, 3, 3, 5, 8);
    const at3 = splitAtPivot(sorted, 3);
    expect([[...at3.lower], [...at3.higher]]).toEqual([[1, 3, 3, 3], [5, 8]]);
    const below = splitAtPivot(sorted, 0);
    expect([[...below.lower], [...below.higher]]).toEqual([[], [1, 3, 3, 3, 5, 8]]);
    const above = splitAtPivot(sorted, 8);
    expect([[...above.lower], [...above.higher]]).toEqual([[1, 3, 3, 3, 5, 8], []]);
    const equal = splitAtPivot(i32(4, 4, 4), 4);
    expect([equal.lower.length, equal.higher.length]).toEqual([3, 0]);
    expect([splitAtPivot(i32(), 1).lower.length, splitAtPivot(i32(), 1).higher.length]).toEqual([0, 0]);
  });

  it('mergeSorted unites two sorted lists, keeping duplicates', () => {
    expect([...mergeSorted(i32(1, 4, 4, 9), i32(0, 4, 10))]).toEqual([0, 1, 4, 4, 4, 9, 10]);
    expect([...mergeSorted(i32(), i32(2, 3))]).toEqual([2, 3]);
    expect([...mergeSorted(i32(), i32())]).toEqual([]);
  });

  it('isGloballySorted: max of list i ≤ min of list i + 1, skipping empty lists, each list sorted', () => {
    expect(isGloballySorted([i32(1, 2), i32(), i32(2, 5), i32(7)])).toBe(true);
    expect(isGloballySorted([i32(), i32()])).toBe(true);
    expect(isGloballySorted([i32(1, 3), i32(), i32(2, 5)])).toBe(false);
    expect(isGloballySorted([i32(2, 1), i32(5)])).toBe(false);
  });

  it('sameMultiset compares values with their multiplicities, over lists or one list', () => {
    expect(sameMultiset([i32(3, 1), i32(2, 2)], i32(1, 2, 2, 3))).toBe(true);
    expect(sameMultiset([i32(3, 1), i32(2)], i32(1, 2, 2, 3))).toBe(false);
    expect(sameMultiset(i32(1, 2, 2), i32(1, 1, 2))).toBe(false);
    expect(sameMultiset([], i32())).toBe(true);
  });
});

describe('spec 2.2.7: HyperQuickSort over the recommended processes', () => {
  it('all recommended (no fault): sorted, same multiset, every exchange between two processes', () => {
    for (const size of [1, 2, 4, 8, 16]) {
      const input = generateInput(size, { lists: size, perList: 100, minValue: -1_000_000, maxValue: 1_000_000 });
      const { rounds } = runAndCheck(input, all(size));
      for (const r of rounds) expect([r.remoteExchanges, r.localExchanges]).toEqual([size, 0]);
    }
  });

  for (const size of [2, 4, 8, 16]) {
    const outCounts = [...new Set([0, 1, size / 2, size - 1])];
    it(`N−1 tolerance, P = ${size}: ${outCounts.join(', ')} non-recommended, sets changing between rounds (seeded)`, () => {
      for (const outCount of outCounts) {
        for (let seed = 1; seed <= 6; seed++) {
          const random = seededRandom(1000 * size + 10 * outCount + seed);
          const sets = new Map<number, Set<number>>();
          const recommendedAtRound = (round: number): Set<number> => {
            if (!sets.has(round)) sets.set(round, drawRecommended(random, size, outCount));
            return sets.get(round)!;
          };
          const input = generateInput(seed, { lists: size, perList: 60, minValue: -500, maxValue: 500, uneven: seed % 2 === 0 });
          const { output } = runAndCheck(input, recommendedAtRound);
          // Where the work ran changes no value: the same output as with everybody recommended.
          expect(arrays(output)).toEqual(arrays(simulateHyperQuickSort(input, all(size))));
        }
      }
    });
  }

  it('work absorption: one process left holds every virtual rank and exchanges only with itself', () => {
    const input = generateInput(3, { lists: 16, perList: 50, minValue: 0, maxValue: 99 });
    const { rounds } = runAndCheck(input, () => new Set([11]));
    for (const r of rounds) {
      expect(r.holders).toEqual(Array.from({ length: 16 }, () => 11));
      expect([r.remoteExchanges, r.localExchanges]).toEqual([0, 16]);
    }
  });

  it('p4 out in rounds 1 and 3 of 8: p5 holds virtual rank 4; p0 exchanges with p5 in round 1 (Algorithm 3), p5 with itself in round 3', () => {
    const input = generateInput(4, { lists: 8, perList: 20, minValue: 0, maxValue: 1000 });
    const withoutP4 = new Set([0, 1, 2, 3, 5, 6, 7]);
    const { rounds } = runAndCheck(input, (round) => (round === 2 ? all(8)() : withoutP4));
    expect(rounds[0]!.holders).toEqual([0, 1, 2, 3, 5, 5, 6, 7]);
    expect(rounds[0]!.holders[0 ^ 4]).toBe(5); // s = 3: v0's partner v4 is on p5
    expect([rounds[0]!.remoteExchanges, rounds[0]!.localExchanges]).toEqual([8, 0]);
    expect(rounds[1]!.holders).toEqual([0, 1, 2, 3, 4, 5, 6, 7]); // p4 back for round 2
    expect([rounds[2]!.remoteExchanges, rounds[2]!.localExchanges]).toEqual([6, 2]); // s = 1: v4 ↔ v5 inside p5
  });

  it('empty lists: all empty, most empty, and an empty root whose cluster pivots on its first non-empty list', () => {
    runAndCheck(Array.from({ length: 8 }, () => i32()), all(8));
    runAndCheck([i32(), i32(), i32(), i32(5, 1, 9, 9), i32(), i32(), i32(2), i32()], () => new Set([6]));
    const rounds: HqsRound[] = [];
    const output = simulateHyperQuickSort([i32(), i32(5, 1), i32(3), i32(9)], all(4), (r) => rounds.push(r));
    expect(rounds[0]!.pivots).toEqual([1]); // v0 empty: v1's sorted [1, 5] gives its lower median
    expect(arrays(output)).toEqual([[1], [], [3], [5, 9]]);
    expect(rounds[1]!.pivots).toEqual([1, 3]);
  });

  it('duplicates and all-equal values: sorted and the same multiset (equal values all go low)', () => {
    const dup = generateInput(9, { lists: 16, perList: 40, minValue: 0, maxValue: 3 });
    runAndCheck(dup, () => drawRecommended(seededRandom(5), 16, 8));
    const equal = Array.from({ length: 8 }, () => Int32Array.from({ length: 10 }, () => 42));
    const { output } = runAndCheck(equal, () => new Set([1, 2]));
    expect(output[0]!.length).toBe(80); // with ≤ going low, every 42 ends on virtual rank 0
  });

  it('extreme int32 values sort too', () => {
    runAndCheck([i32(2 ** 31 - 1, -(2 ** 31)), i32(0, -(2 ** 31)), i32(2 ** 31 - 1), i32(-1, 1)], all(4));
  });

  it('refuses a list count that is not a power of 2 and a round with nobody recommended', () => {
    expect(() => simulateHyperQuickSort([i32(), i32(), i32()], all(3))).toThrow(/power of 2/);
    expect(() => simulateHyperQuickSort([i32(1), i32(2)], () => new Set())).toThrow(/nobody is recommended/);
    expect(() => simulateHyperQuickSort([i32(1), i32(2)], () => new Set([2]))).toThrow(/not a rank/);
  });
});

describe('seeded inputs and recommended sets', () => {
  it('generateInput gives the same lists for the same seed and shape, within the value range', () => {
    const shape = { lists: 4, perList: 30, minValue: -5, maxValue: 5, uneven: true } as const;
    const a = generateInput(77, shape);
    expect(arrays(a)).toEqual(arrays(generateInput(77, shape)));
    expect(arrays(a)).not.toEqual(arrays(generateInput(78, shape)));
    for (const l of a) {
      expect(l.length).toBeLessThanOrEqual(60);
      for (const x of l) expect(Math.abs(x)).toBeLessThanOrEqual(5);
    }
    expect(generateInput(1, { lists: 3, perList: 7, minValue: 0, maxValue: 0 }).map((l) => l.length)).toEqual([7, 7, 7]);
  });

  it('drawRecommended keeps size − outCount distinct ranks and refuses to leave nobody', () => {
    const random = seededRandom(3);
    for (let out = 0; out < 16; out++) {
      const set = drawRecommended(random, 16, out);
      expect(set.size).toBe(16 - out);
      for (const r of set) expect(r >= 0 && r < 16).toBe(true);
    }
    expect(() => drawRecommended(random, 4, 4)).toThrow(/at least one/);
  });
});
