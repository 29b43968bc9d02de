// DGRP's remapping of a hypercube application onto the recommended processes (spec 2.2.7,
// Table 2, Algorithms 3 and 4; spec 2.5 item 9): the Hi-ADSD cluster sequence c_{i,s}, the
// partner a process exchanges with in a round, the process that takes over a non-recommended
// one's work, and the whole mapping from virtual ranks to holders. This file owns those pure
// functions; the DGRP view they read (`recommended`) is the caller's, fixed for a computing round
// at its barrier (spec 2.2.6).
//
// c_{i,s} = (i ⊕ 2^(s−1), c_{i⊕2^(s−1),1}, …, c_{i⊕2^(s−1),s−1}). Unfolded, its k-th element is
// i ⊕ 2^(s−1) ⊕ k for k = 0 … 2^(s−1) − 1, which is how clusterOf computes it (the unit test
// checks the closed form against the recursive definition and Table 2). So the sequences
// c_{q,1}, c_{q,2}, …, c_{q,dim} laid end to end are q ⊕ 1, q ⊕ 2, …, q ⊕ (2^dim − 1): every other
// process once. Hence Algorithm 4 finds a replacement whenever any process but q is recommended:
// the N−1 tolerance of spec 2.2.7 ("Load absorption").
//
// Remarks on the paper (spec 2.2.7 notes):
//   - Algorithms 3 and 4 print `while j ≤ size(nodes)` with a 0-based j, one step too far; the
//     loops here run j = 0 … size − 1.
//   - The text says that with p4 out p0 pairs with p5, "if both p5 and p6 are non-recommended,
//     then p0 does not exchange its list with any process". c_{0,3} = (4, 5, 6, 7), so Algorithm 3
//     tries p7 next: the example is incomplete (p4 out is implied, p7 forgotten). We follow the
//     algorithm: partner(0, 3) is null only when all of p4…p7 are out.
//   - Algorithm 3 agrees with Algorithm 4: for a recommended i, when partner(i, s) is not null it
//     is the holder of i's virtual partner j = i ⊕ 2^(s−1); when it is null (j's whole half of the
//     cluster is out), the holder of j is i itself (Algorithm 4 reaches j ⊕ 2^(s−1) = i first), so
//     "no exchange" means i exchanges with the virtual rank it absorbed.
import { assert } from '../../base/result.ts';

/** Largest hypercube dimension: 2^20 virtual ranks, far past any cluster we run. */
export const MAX_HYPERCUBE_DIM = 20;

function checkDim(dim: number): void {
  assert(Number.isInteger(dim) && dim >= 0 && dim <= MAX_HYPERCUBE_DIM, `hypercube: dimension ${dim} not in [0, ${MAX_HYPERCUBE_DIM}]`);
}

function checkRank(rank: number, what: string): void {
  assert(Number.isInteger(rank) && rank >= 0 && rank < 2 ** MAX_HYPERCUBE_DIM, `hypercube: ${what} ${rank} is not a rank`);
}

/** c_{i,s}: the sequence of nodes in i's s-th cluster (Hi-ADSD). */
export function clusterOf(i: number, s: number): number[] {
  checkRank(i, 'node');
  assert(Number.isInteger(s) && s >= 1 && s <= MAX_HYPERCUBE_DIM, `hypercube: cluster ${s} not in [1, ${MAX_HYPERCUBE_DIM}]`);
  const head = i ^ (1 << (s - 1));
  return Array.from({ length: 1 << (s - 1) }, (_, k) => head ^ k);
}

/** The first recommended node of a sequence, or null (Algorithms 3 and 4, 0-based loop). */
function firstRecommended(nodes: readonly number[], recommended: (r: number) => boolean): number | null {
  for (const node of nodes) if (recommended(node)) return node;
  return null;
}

/** Algorithm 3: first recommended in c_{rank,s}, or null. */
export function partner(rank: number, s: number, recommended: (r: number) => boolean): number | null {
  return firstRecommended(clusterOf(rank, s), recommended);
}

/** Algorithm 4: for s = 1..dim, first recommended in c_{q,s}; null if none. */
export function replacement(q: number, dim: number, recommended: (r: number) => boolean): number | null {
  checkDim(dim);
  checkRank(q, 'node');
  assert(q < 2 ** dim, `hypercube: node ${q} outside dimension ${dim}`);
  for (let s = 1; s <= dim; s++) {
    const found = firstRecommended(clusterOf(q, s), recommended);
    if (found !== null) return found;
  }
  return null;
}

/** Who holds virtual rank v's work: v itself when recommended, else replacement(v). */
export function holderOf(v: number, dim: number, recommended: (r: number) => boolean): number | null {
  checkDim(dim);
  checkRank(v, 'virtual rank');
  assert(v < 2 ** dim, `hypercube: virtual rank ${v} outside dimension ${dim}`);
  return recommended(v) ? v : replacement(v, dim, recommended);
}

/** For each recommended process, the virtual ranks it is responsible for (its own first). */
export function assignments(dim: number, recommended: (r: number) => boolean): Map<number, number[]> {
  checkDim(dim);
  const size = 2 ** dim;
  const out = new Map<number, number[]>();
  // Own ranks first, then the absorbed ones in increasing virtual rank.
  for (let v = 0; v < size; v++) if (recommended(v)) out.set(v, [v]);
  for (let v = 0; v < size; v++) {
    if (recommended(v)) continue;
    const holder = replacement(v, dim, recommended);
    if (holder === null) continue; // nobody is recommended: nothing to assign
    const held = out.get(holder);
    assert(held !== undefined, `hypercube: holder ${holder} of ${v} is not recommended`);
    held.push(v);
  }
  return out;
}
