// The distributed HyperQuickSort's pure decisions (examples/hqsort/hqsort-plan.ts,
// hqsort-options.ts; spec 2.2.7 "State saving", "Load absorption"): tags that never mix rounds,
// shares any process can regenerate, backups and sources that agree on every process, and a
// whole run replayed here round by round with the group changing between rounds (a removal, a
// rejoin, N−1 out) ends sorted with the input's numbers.
import { describe, expect, it } from 'vitest';
import { isGloballySorted, localSort, mergeSorted, pivotOf, sameMultiset, splitAtPivot } from '../../../examples/hqsort/hqsort-core.ts';
import { parseHqsortArgs, HQSORT_DEFAULTS } from '../../../examples/hqsort/hqsort-options.ts';
import {
  backupOf, backupsFor, clusterPivots, dimensionOf, generateShare, heldBy, holderIn, KIND, shareLength, sourceOf, tagOf, TAG_ROUNDS, type Source,
} from '../../../examples/hqsort/hqsort-plan.ts';

describe('tags', () => {
  it('are distinct across kinds, rounds and virtual ranks, and fit a G-MPI tag', () => {
    const seen = new Set<number>();
    for (const kind of Object.keys(KIND) as (keyof typeof KIND)[]) {
      for (const round of [0, 1, 2, TAG_ROUNDS - 1]) {
        for (const v of [0, 1, 7, 2 ** 20 - 1]) {
          const t = tagOf(kind, round, v);
          expect(t).toBeGreaterThanOrEqual(0);
          expect(t).toBeLessThanOrEqual(0x7fffffff);
          expect(seen.has(t)).toBe(false);
          seen.add(t);
        }
      }
    }
    expect(() => tagOf('exchange', TAG_ROUNDS, 0)).toThrow(/round/);
    expect(() => tagOf('exchange', 1, 2 ** 20)).toThrow(/virtual rank/);
  });
});

describe('input shares', () => {
  it('split the count evenly, the first lists one more, and regenerate identically', () => {
    expect([0, 1, 2, 3].map((v) => shareLength(10, 4, v))).toEqual([3, 3, 2, 2]);
    const a = generateShare(7, 1000, 4, 2);
    expect(a).toHaveLength(250);
    expect([...generateShare(7, 1000, 4, 2)]).toEqual([...a]);
    expect([...generateShare(7, 1000, 4, 3)]).not.toEqual([...a]);
    expect([...generateShare(8, 1000, 4, 2)]).not.toEqual([...a]);
    expect(a.some((x) => x < 0) && a.some((x) => x > 0)).toBe(true);
  });
});

describe('dimension', () => {
  it('accepts powers of 2 and names the fix otherwise', () => {
    expect(dimensionOf(1)).toBe(0);
    expect(dimensionOf(8)).toBe(3);
    expect(dimensionOf(6)).toMatch(/power of 2.*-n 1, 2, 4, 8/);
    expect(dimensionOf(0)).toMatch(/power of 2/);
  });
});

describe('backups and sources (the header\'s order of preference)', () => {
  it('a holder\'s backup is its replacement among the other members; none when alone', () => {
    expect(backupOf(0, 2, [0, 1, 2, 3])).toBe(1);
    expect(backupOf(3, 2, [0, 1, 2, 3])).toBe(2);
    expect(backupOf(3, 2, [0, 1, 3])).toBe(1);
    expect(backupOf(2, 2, [2])).toBeNull();
    // 2 holds 2 and 3 when 3 is out: 0 (its backup) gets a copy of both.
    expect(backupsFor(0, 2, [0, 1, 2])).toEqual([{ from: 1, v: 1 }, { from: 2, v: 2 }, { from: 2, v: 3 }]);
  });

  it('picks itself, its backup copy, a member holder, a member backup, else the slow holder', () => {
    const all = [0, 1, 2, 3];
    expect(sourceOf(1, 2, all, all, 1)).toEqual<Source>({ type: 'held' });
    // 3 is removed: its replacement 2 is its backup and has the copy.
    expect(sourceOf(3, 2, all, [0, 1, 2], 2)).toEqual<Source>({ type: 'backup', from: 3 });
    // 3 rejoins: it asks the holder of its list, 2, a member.
    expect(sourceOf(3, 2, [0, 1, 2], all, 3)).toEqual<Source>({ type: 'ask', who: 2, from: null });
    // 2 (holding 2 and 3) is removed: 3's new holder is 1, but 2's backup is 0: ask 0 for its copy.
    expect(sourceOf(3, 2, [0, 1, 2], [0, 1], 1)).toEqual<Source>({ type: 'ask', who: 0, from: 2 });
    // 2 and its backup 0 both removed at once: only the slow holder has it.
    expect(sourceOf(3, 2, [0, 1, 2], [1], 1)).toEqual<Source>({ type: 'ask', who: 2, from: null });
    // A run without backups (--no-dgrp) always takes a list from its holder.
    expect(sourceOf(1, 2, all, all, 0, false)).toEqual<Source>({ type: 'ask', who: 1, from: null });
    expect(sourceOf(1, 2, all, all, 0)).toEqual<Source>({ type: 'backup', from: 1 });
  });
});

describe('clusterPivots', () => {
  it('takes the root\'s pivot, else the first non-empty list\'s, else none', () => {
    expect(clusterPivots([5, 9, null, 4], 2)).toEqual([5]);
    expect(clusterPivots([null, 9, null, null], 1)).toEqual([9, null]);
    expect(clusterPivots([null, 9, 3, 4], 1)).toEqual([9, 3]);
  });
});

describe('options', () => {
  it('parses, helps, and refuses with the fix named', () => {
    expect(parseHqsortArgs([])).toEqual({ type: 'run', options: HQSORT_DEFAULTS });
    expect(parseHqsortArgs(['--seed', '3', '--count', '10', '--no-dgrp', '--trace'])).toEqual({ type: 'run', options: { seed: 3, count: 10, noDgrp: true, trace: true } });
    expect(parseHqsortArgs(['--count', '5', '--help'])).toEqual({ type: 'help' });
    expect(parseHqsortArgs(['--count'])).toMatchObject({ type: 'error', message: expect.stringMatching(/--count needs a value/) });
    expect(parseHqsortArgs(['--count', '-1'])).toMatchObject({ type: 'error', message: expect.stringMatching(/--count needs an integer from 0/) });
    expect(parseHqsortArgs(['--count', '1e3x'])).toMatchObject({ type: 'error' });
    expect(parseHqsortArgs(['--fast'])).toMatchObject({ type: 'error', message: expect.stringMatching(/unknown option "--fast": see --help/) });
  });
});

/** The distributed program's rounds, replayed in one place: each round's members take their
 *  lists by sourceOf from where the previous round left them (holders and backups), exchange
 *  and merge as hqsort.ts does; the holder of 0 gathers at the end. */
function replay(size: number, count: number, membersAt: (round: number) => number[]): Int32Array[] {
  const dim = Math.log2(size);
  // (round, v) → list, for each process: what it held, and what it holds as a backup.
  const held = new Map<string, Int32Array>();
  const copies = new Map<string, Int32Array>();
  const at = (p: number, k: number, v: number) => `${p}/${k}/${v}`;
  const take = (self: number, v: number, k: number, before: number[], after: number[]): Int32Array => {
    if (k === 0) return localSort(generateShare(1, count, size, v));
    const s = sourceOf(v, dim, before, after, self);
    const got = s.type === 'held' ? held.get(at(self, k, v)) : s.type === 'backup' ? copies.get(at(self, k, v)) : s.from === null ? held.get(at(s.who, k, v)) : copies.get(at(s.who, k, v));
    if (got === undefined) throw new Error(`round ${k + 1}: ${self} found no list ${v} (${JSON.stringify(s)})`);
    return got;
  };
  let before: number[] = [];
  for (let k = 1; k <= dim; k++) {
    const members = membersAt(k);
    const s = dim - k + 1;
    const lists = new Map<number, Int32Array>();
    for (const p of members) for (const v of heldBy(p, dim, members)) lists.set(v, take(p, v, k - 1, before, members));
    const pivots = clusterPivots(Array.from({ length: size }, (_, v) => pivotOf(lists.get(v)!)), s);
    const next = new Map<number, Int32Array>();
    for (let v = 0; v < size; v++) {
      const w = v ^ (1 << (s - 1));
      const cut = (x: number) => {
        const p = pivots[x >> s] ?? null;
        const l = lists.get(x)!;
        return p === null ? { lower: l, higher: l } : splitAtPivot(l, p);
      };
      next.set(v, mergeSorted(v > w ? cut(v).higher : cut(v).lower, v > w ? cut(w).higher : cut(w).lower));
    }
    for (const p of members) {
      const backup = backupOf(p, dim, members);
      for (const v of heldBy(p, dim, members)) {
        held.set(at(p, k, v), next.get(v)!);
        if (backup !== null) copies.set(at(backup, k, v), next.get(v)!);
      }
    }
    before = members;
  }
  const last = membersAt(dim + 1);
  const collector = holderIn(0, dim, last);
  return Array.from({ length: size }, (_, v) => take(collector, v, dim, before, last));
}

describe('a whole run with the group changing between rounds', () => {
  const check = (size: number, membersAt: (round: number) => number[]) => {
    const out = replay(size, 997, membersAt);
    expect(isGloballySorted(out)).toBe(true);
    expect(sameMultiset(out, Array.from({ length: size }, (_, v) => generateShare(1, 997, size, v)))).toBe(true);
  };
  const all = (size: number) => Array.from({ length: size }, (_, r) => r);

  it('no change, P = 1 … 16', () => {
    for (const size of [1, 2, 4, 8, 16]) check(size, () => all(size));
  });

  it('a removal, a rejoin, N−1 out, and a different group every round', () => {
    check(8, (k) => (k === 1 ? all(8) : [0, 1, 2, 4, 5, 6, 7]));
    check(8, (k) => (k <= 2 ? [0, 1, 2, 4, 5, 6, 7] : all(8)));
    check(8, (k) => (k === 1 ? all(8) : [5]));
    check(8, (k) => [[0, 1, 2, 3, 4, 5, 6, 7], [1, 2, 3], [0, 6], [7], [2, 3]][k - 1] ?? []);
    check(4, (k) => [[3], [0, 1, 2], [1]][k - 1] ?? []);
  });
});
