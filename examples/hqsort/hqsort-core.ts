// HyperQuickSort's pure pieces (Algorithm 2, Wagar 1987; spec 2.2.7) and a sequential reference
// of the DGRP version: what the parallel program and its tests share. No messages here: lists are
// Int32Arrays, and simulateHyperQuickSort runs Algorithm 2 over VIRTUAL ranks 0..P−1 in one
// process, each round's virtual ranks held by the recommended processes as
// src/app/dgrp/hypercube.ts maps them ("Load absorption").
//
// Conventions:
//   - A list is sorted ascending. The pivot of a sorted list is its lower median,
//     sorted[⌊(n − 1)/2⌋], an element of the list; an empty list has none (null).
//   - splitAtPivot puts lower ≤ pivot < higher: equal values all go low. Both halves are views of
//     the input (subarray, no copy); mergeSorted builds a new list.
//   - Algorithm 2, round r = 1..dim, uses clusters of 2^s virtual ranks with s = dim − r + 1. The
//     cluster's pivot comes from its lowest virtual rank (its root). Departure: when the root's
//     list is empty, the pivot comes from the first non-empty list of the cluster in virtual-rank
//     order, so that the round still splits the cluster's data (a pivot from nowhere would send
//     everything one way); when every list of the cluster is empty the round has nothing to move
//     there. Every virtual rank v then splits at its cluster's pivot and exchanges with
//     w = v ⊕ 2^(s−1): the upper one (v > w) sends its lower list and keeps its higher one
//     (spec 2.2.7 step 4), and each merges what it kept with what it received.
//   - In round r the holder of virtual rank v is holderOf(v, dim, recommended) for that round's
//     recommended set (spec 2.2.7 Algorithm 4): the holder reads v's list (the shared storage of
//     spec 2.2.7 "State saving"), splits it, sends the half it gives away to the holder of v's
//     partner, and merges. A holder of several virtual ranks does all their work; an exchange
//     between two virtual ranks of one holder is local.
import { seededRandom } from '../common/seeded-random.ts';
import { assignments, holderOf, MAX_HYPERCUBE_DIM } from '../../src/app/dgrp/hypercube.ts';

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`hqsort: ${message}`);
}

// ---- Local pieces -----------------------------------------------------------------------------

/** Quicksort of one process's list (Algorithm 2 line 7): a sorted copy. */
export function localSort(list: Int32Array): Int32Array {
  return Int32Array.from(list).sort();
}

/** The pivot a root broadcasts: the lower median of a sorted list, null for an empty one. */
export function pivotOf(sorted: Int32Array): number | null {
  if (sorted.length === 0) return null;
  return sorted[(sorted.length - 1) >> 1]!;
}

/** Splits a sorted list at the pivot: lower ≤ pivot < higher, both views of `sorted`. */
export function splitAtPivot(sorted: Int32Array, pivot: number): { lower: Int32Array; higher: Int32Array } {
  // Upper bound: the first index whose value is > pivot.
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! <= pivot) lo = mid + 1;
    else hi = mid;
  }
  return { lower: sorted.subarray(0, lo), higher: sorted.subarray(lo) };
}

/** The union of two sorted lists, sorted (Algorithm 2 line 25 without a re-sort). */
export function mergeSorted(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = a[i]! <= b[j]! ? a[i++]! : b[j++]!;
  while (i < a.length) out[k++] = a[i++]!;
  while (j < b.length) out[k++] = b[j++]!;
  return out;
}

function isSorted(list: Int32Array): boolean {
  for (let i = 1; i < list.length; i++) if (list[i - 1]! > list[i]!) return false;
  return true;
}

/** Each list sorted, and the max of list i ≤ the min of list i + 1, skipping empty lists (spec 2.6). */
export function isGloballySorted(lists: readonly Int32Array[]): boolean {
  let previousMax: number | null = null;
  for (const list of lists) {
    if (!isSorted(list)) return false;
    if (list.length === 0) continue;
    if (previousMax !== null && previousMax > list[0]!) return false;
    previousMax = list[list.length - 1]!;
  }
  return true;
}

const flatten = (x: Int32Array | readonly Int32Array[]): Int32Array => {
  if (x instanceof Int32Array) return x;
  const out = new Int32Array(x.reduce((n, l) => n + l.length, 0));
  let at = 0;
  for (const l of x) {
    out.set(l, at);
    at += l.length;
  }
  return out;
};

/** Whether a and b (a list or lists) hold the same values with the same multiplicities (spec 2.6). */
export function sameMultiset(a: Int32Array | readonly Int32Array[], b: Int32Array | readonly Int32Array[]): boolean {
  const x = localSort(flatten(a));
  const y = localSort(flatten(b));
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

// ---- The DGRP reference -------------------------------------------------------------------------

/** What one round did, for tests and figures. */
export type HqsRound = {
  readonly round: number;
  /** The cluster size is 2^s. */
  readonly s: number;
  /** The holder of each virtual rank this round (recommended processes only). */
  readonly holders: readonly number[];
  /** The pivot of each cluster in virtual-rank order (null: the cluster held no data). */
  readonly pivots: readonly (number | null)[];
  /** Exchanges between two different holders (messages), and within one holder (local). */
  readonly remoteExchanges: number;
  readonly localExchanges: number;
};

function dimensionOf(size: number): number {
  check(Number.isInteger(size) && size >= 1 && size <= 2 ** MAX_HYPERCUBE_DIM && (size & (size - 1)) === 0, `${size} lists: not a power of 2 in [1, 2^${MAX_HYPERCUBE_DIM}]`);
  return Math.log2(size);
}

/** The pivot of the cluster of 2^s virtual ranks starting at `root` (see the header's departure). */
function clusterPivot(lists: readonly Int32Array[], root: number, s: number): number | null {
  for (let v = root; v < root + 2 ** s; v++) {
    const pivot = pivotOf(lists[v]!);
    if (pivot !== null) return pivot;
  }
  return null;
}

function checkRecommended(set: ReadonlySet<number>, size: number, round: number): void {
  check(set.size > 0, `round ${round}: nobody is recommended (DGRP tolerates N−1, not N)`);
  for (const r of set) check(Number.isInteger(r) && r >= 0 && r < size, `round ${round}: recommended ${r} is not a rank below ${size}`);
}

/** One round of Algorithm 2 over the virtual ranks, each done by its holder. */
function sortRound(lists: readonly Int32Array[], dim: number, round: number, recommended: ReadonlySet<number>): { next: Int32Array[]; trace: HqsRound } {
  const s = dim - round + 1;
  const rec = (r: number): boolean => recommended.has(r);
  const holders = lists.map((_, v) => holderOf(v, dim, rec));
  for (const h of holders) check(h !== null && recommended.has(h), `round ${round}: a virtual rank without a recommended holder`);
  const pivots: (number | null)[] = [];
  for (let root = 0; root < lists.length; root += 2 ** s) pivots.push(clusterPivot(lists, root, s));
  const kept: Int32Array[] = new Array<Int32Array>(lists.length);
  const inbox: Int32Array[] = new Array<Int32Array>(lists.length);
  let remoteExchanges = 0;
  let localExchanges = 0;
  for (const [holder, virtualRanks] of assignments(dim, rec)) {
    for (const v of virtualRanks) {
      const w = v ^ (1 << (s - 1));
      const pivot = pivots[v >> s] ?? null;
      const list = lists[v]!;
      // A cluster without a pivot holds no data: its empty lists split into empty halves.
      const { lower, higher } = pivot === null ? { lower: list, higher: list } : splitAtPivot(list, pivot);
      kept[v] = v > w ? higher : lower;
      inbox[w] = v > w ? lower : higher; // sent to w's holder
      if (holders[w] === holder) localExchanges += 1;
      else remoteExchanges += 1;
    }
  }
  const next = lists.map((_, v) => {
    const mine = kept[v];
    const received = inbox[v];
    check(mine !== undefined && received !== undefined, `round ${round}: virtual rank ${v} was not worked on`);
    return mergeSorted(mine, received);
  });
  return { next, trace: { round, s, holders: holders as number[], pivots, remoteExchanges, localExchanges } };
}

/**
 * Algorithm 2 over virtual ranks 0..P−1 (P = lists.length, a power of 2), round r's virtual ranks
 * held by the processes of recommendedAtRound(r) (r = 1..log2 P; the set may change between
 * rounds and must not be empty). Returns the final list of each virtual rank: sorted, and
 * globally sorted in virtual-rank order. The input lists are not modified.
 */
export function simulateHyperQuickSort(
  lists: readonly Int32Array[],
  recommendedAtRound: (round: number) => ReadonlySet<number>,
  observe?: (round: HqsRound) => void,
): Int32Array[] {
  const dim = dimensionOf(lists.length);
  // Line 7, done by round 1's holders (the caller's round-1 set decides who).
  let current = lists.map(localSort);
  for (let round = 1; round <= dim; round++) {
    const recommended = recommendedAtRound(round);
    checkRecommended(recommended, lists.length, round);
    const { next, trace } = sortRound(current, dim, round, recommended);
    current = next;
    observe?.(trace);
  }
  return current;
}

// ---- Seeded inputs ------------------------------------------------------------------------------

export type InputShape = {
  /** How many lists (virtual ranks). */
  readonly lists: number;
  /** Elements per list; with `uneven`, each list draws its length in [0, 2·perList]. */
  readonly perList: number;
  readonly minValue: number;
  readonly maxValue: number;
  readonly uneven?: boolean;
};

/** The input of a run, the same for the same seed and shape. */
export function generateInput(seed: number, shape: InputShape): Int32Array[] {
  check(Number.isInteger(shape.lists) && shape.lists >= 1, `input: ${shape.lists} lists`);
  check(Number.isInteger(shape.perList) && shape.perList >= 0, `input: ${shape.perList} per list`);
  check(Number.isInteger(shape.minValue) && Number.isInteger(shape.maxValue) && shape.minValue <= shape.maxValue, 'input: the value range is empty');
  check(shape.minValue >= -(2 ** 31) && shape.maxValue < 2 ** 31, 'input: values must fit an int32');
  const random = seededRandom(seed);
  const span = shape.maxValue - shape.minValue + 1;
  return Array.from({ length: shape.lists }, () => {
    const length = shape.uneven === true ? Math.floor(random() * (2 * shape.perList + 1)) : shape.perList;
    return Int32Array.from({ length }, () => shape.minValue + Math.floor(random() * span));
  });
}

/** `size − outCount` recommended ranks of 0..size−1, drawn from `random` (values in [0, 1)). */
export function drawRecommended(random: () => number, size: number, outCount: number): Set<number> {
  check(Number.isInteger(outCount) && outCount >= 0 && outCount < size, `${outCount} out of ${size}: at least one must stay`);
  const ranks = Array.from({ length: size }, (_, r) => r);
  // Fisher–Yates: the first outCount after shuffling are the non-recommended ones.
  for (let i = size - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
  }
  return new Set(ranks.slice(outCount));
}
