// DGRP's hypercube remapping (src/app/dgrp/hypercube.ts, spec 2.2.7): Table 2 cell by cell, the
// spec's examples of Algorithms 3 and 4, and the N−1 tolerance of "Load absorption" over many
// recommended sets.
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../../../examples/common/seeded-random.ts';
import { assignments, clusterOf, holderOf, partner, replacement } from '../../../../src/app/dgrp/hypercube.ts';

const without = (...out: number[]) => (r: number): boolean => !out.includes(r);
const only = (set: ReadonlySet<number>) => (r: number): boolean => set.has(r);

/** The spec's recursive definition, verbatim: c_{i,s} = (i ⊕ 2^(s−1), c_{j,1}, …, c_{j,s−1}). */
function clusterByDefinition(i: number, s: number): number[] {
  const j = i ^ (2 ** (s - 1));
  const out = [j];
  for (let t = 1; t <= s - 1; t++) out.push(...clusterByDefinition(j, t));
  return out;
}

/** `count` non-empty recommended sets over 2^dim processes, from a seeded generator. */
function randomSets(seed: number, dim: number, count: number): Set<number>[] {
  const random = seededRandom(seed);
  const sets: Set<number>[] = [];
  while (sets.length < count) {
    const keep = random(); // from almost nobody to almost everybody recommended
    const set = new Set<number>();
    for (let r = 0; r < 2 ** dim; r++) if (random() < keep) set.add(r);
    if (set.size > 0) sets.push(set);
  }
  return sets;
}

describe('spec 2.2.7 Table 2: c_{i,s} for 8 processes', () => {
  const TABLE_2: Record<number, readonly (readonly number[])[]> = {
    1: [[1], [0], [3], [2], [5], [4], [7], [6]],
    2: [[2, 3], [3, 2], [0, 1], [1, 0], [6, 7], [7, 6], [4, 5], [5, 4]],
    3: [[4, 5, 6, 7], [5, 4, 7, 6], [6, 7, 4, 5], [7, 6, 5, 4], [0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]],
  };
  for (const s of [1, 2, 3]) {
    for (let i = 0; i < 8; i++) {
      it(`C${i},${s} = ${TABLE_2[s]![i]!.join(' ')}`, () => {
        expect(clusterOf(i, s)).toEqual(TABLE_2[s]![i]);
      });
    }
  }

  it('the closed form i ⊕ 2^(s−1) ⊕ k equals the recursive definition up to dimension 7', () => {
    for (let s = 1; s <= 7; s++) for (let i = 0; i < 2 ** 7; i++) expect(clusterOf(i, s)).toEqual(clusterByDefinition(i, s));
  });

  it('c_{q,1} … c_{q,dim} laid end to end visit every other process once, in order q ⊕ 1, q ⊕ 2, …', () => {
    for (const q of [0, 5, 13]) {
      const all = [1, 2, 3, 4].flatMap((s) => clusterOf(q, s));
      expect(all).toEqual(Array.from({ length: 15 }, (_, k) => q ^ (k + 1)));
    }
  });
});

describe('spec 2.2.7 Algorithm 3 (partner) and Algorithm 4 (replacement): the spec\'s examples', () => {
  it('round 1 (s = 3): p0 pairs with p4; with p4 out, with p5', () => {
    expect(partner(0, 3, () => true)).toBe(4);
    expect(partner(0, 3, without(4))).toBe(5);
  });

  it('with p4, p5 and p6 out p0 still pairs with p7 (the text\'s example left p7 out); with p4…p7 out, no partner', () => {
    expect(partner(0, 3, without(4, 5))).toBe(6);
    expect(partner(0, 3, without(4, 5, 6))).toBe(7);
    expect(partner(0, 3, without(4, 5, 6, 7))).toBeNull();
  });

  it('p4 out → p5 takes over (c_{4,1} = 5); p4 and p5 out → p6 (first recommended in c_{4,2})', () => {
    expect(replacement(4, 3, without(4))).toBe(5);
    expect(replacement(4, 3, without(4, 5))).toBe(6);
    expect(replacement(4, 3, without(4, 5, 6))).toBe(7);
    expect(replacement(4, 3, without(4, 5, 6, 7))).toBe(0);
    expect(holderOf(4, 3, without(4))).toBe(5);
    expect(holderOf(4, 3, () => true)).toBe(4);
  });

  it('p2 out in round 1: p6 pairs with p3, which holds p2 (first in c_{2,1}) and also pairs with p7 itself', () => {
    const rec = without(2);
    expect(partner(6, 3, rec)).toBe(3);
    expect(replacement(2, 3, rec)).toBe(3);
    expect(partner(3, 3, rec)).toBe(7);
    expect(assignments(3, rec).get(3)).toEqual([3, 2]);
  });

  it('nobody recommended: no partner, no replacement, no holder, no assignment', () => {
    const none = (): boolean => false;
    expect(partner(0, 3, none)).toBeNull();
    expect(replacement(0, 3, none)).toBeNull();
    expect(holderOf(0, 3, none)).toBeNull();
    expect(assignments(3, none).size).toBe(0);
  });

  it('refuses a dimension, rank or cluster out of range (our own calls, invariants)', () => {
    expect(() => clusterOf(0, 0)).toThrow(/cluster/);
    expect(() => clusterOf(-1, 1)).toThrow(/not a rank/);
    expect(() => replacement(8, 3, () => true)).toThrow(/outside dimension/);
    expect(() => holderOf(0, 21, () => true)).toThrow(/dimension/);
    expect(() => assignments(1.5, () => true)).toThrow(/dimension/);
  });
});

describe('spec 2.2.7 "Load absorption": N−1 tolerance', () => {
  /** Every virtual rank has exactly one holder, recommended, agreeing with holderOf; own first. */
  function expectOneHolderEach(dim: number, set: ReadonlySet<number>): void {
    const rec = only(set);
    const map = assignments(dim, rec);
    expect([...map.keys()].sort((a, b) => a - b)).toEqual([...set].sort((a, b) => a - b));
    const held = [...map.values()].flat().sort((a, b) => a - b);
    expect(held).toEqual(Array.from({ length: 2 ** dim }, (_, v) => v));
    for (const [holder, ranks] of map) {
      expect(ranks[0]).toBe(holder);
      for (const v of ranks) expect(holderOf(v, dim, rec)).toBe(holder);
    }
  }

  it('dimension 4: in 400 seeded non-empty recommended sets every virtual rank has exactly one recommended holder', () => {
    const sets = randomSets(2026, 4, 400);
    expect(sets.some((s) => s.size === 1)).toBe(true); // N−1 out
    expect(sets.some((s) => s.size === 16)).toBe(true); // nobody out
    for (const set of sets) expectOneHolderEach(4, set);
  });

  it('dimension 3: every one of the 255 non-empty recommended sets', () => {
    for (let mask = 1; mask < 256; mask++) expectOneHolderEach(3, new Set(Array.from({ length: 8 }, (_, r) => r).filter((r) => (mask >> r) & 1)));
  });

  it('one process left holds every virtual rank, its own first', () => {
    for (let last = 0; last < 16; last++) {
      const map = assignments(4, only(new Set([last])));
      expect(map.size).toBe(1);
      expect(map.get(last)).toEqual([last, ...Array.from({ length: 16 }, (_, v) => v).filter((v) => v !== last)]);
    }
  });

  it('Algorithm 3 agrees with Algorithm 4: a recommended process\'s partner is its virtual partner\'s holder, or itself when none', () => {
    for (const set of randomSets(7, 4, 300)) {
      const rec = only(set);
      for (const i of set) {
        for (let s = 1; s <= 4; s++) {
          const virtualPartner = i ^ (1 << (s - 1));
          expect(holderOf(virtualPartner, 4, rec)).toBe(partner(i, s, rec) ?? i);
        }
      }
    }
  });
});
