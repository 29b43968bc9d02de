// N-Queens as work units, for the rollback version (nqueens-rollback.ts) and its tests: the
// units (the queens of the first `depth` rows, as nqueens.ts splits the board), a bit-mask
// solver counting each unit's completions, and the known counts to check an answer against.
// Pure: no G-MPI, no I/O.

// ---- Named limits (STYLE.md 9) -------------------------------------------------------------------

/** Largest board: the masks are 32-bit integers, and the known counts stop here. */
export const MAX_QUEENS = 18;

/** Solutions of the n-queens puzzle, n = 0 … MAX_QUEENS (OEIS A000170). */
export const KNOWN_SOLUTIONS: readonly number[] = [
  1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512, 95815104, 666090624,
];

/** A work unit: the columns of the queens on rows 0 … depth − 1 (prefix[r] = column on row r). */
export type NQueensUnit = readonly number[];

/** Every placement of `depth` non-attacking queens on the first rows, in lexicographic order
 *  (for n = 12 and depth 2, the 110 units of nqueens.ts). */
export function workUnits(n: number, depth: number): NQueensUnit[] {
  const units: NQueensUnit[] = [];
  const cols: number[] = [];
  const extend = (): void => {
    if (cols.length === depth) {
      units.push([...cols]);
      return;
    }
    for (let col = 0; col < n; col++) {
      if (attacked(cols, col)) continue;
      cols.push(col);
      extend();
      cols.pop();
    }
  };
  extend();
  return units;
}

/** Whether a queen on the row after `cols` at column `col` is attacked by one of them. */
function attacked(cols: readonly number[], col: number): boolean {
  const row = cols.length;
  return cols.some((c, r) => c === col || Math.abs(c - col) === row - r);
}

/** The solutions of the n-queens puzzle that extend `prefix` (0 if the prefix itself attacks). */
export function countCompletions(n: number, prefix: NQueensUnit): number {
  const full = (1 << n) - 1;
  let columns = 0;
  let left = 0; // diagonals going down-left, as seen from the next row
  let right = 0; // diagonals going down-right
  for (const col of prefix) {
    const bit = 1 << col;
    if (((columns | left | right) & bit) !== 0) return 0;
    columns |= bit;
    left = ((left | bit) << 1) & full;
    right = (right | bit) >> 1;
  }
  const place = (cs: number, ls: number, rs: number): number => {
    if (cs === full) return 1;
    let count = 0;
    for (let free = full & ~(cs | ls | rs); free !== 0; free &= free - 1) {
      const bit = free & -free;
      count += place(cs | bit, ((ls | bit) << 1) & full, (rs | bit) >> 1);
    }
    return count;
  };
  return place(columns, left, right);
}
