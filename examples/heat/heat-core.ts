// The heat stencil's numerics and its row decomposition, shared by the parallel program
// (heat.ts), its sequential reference (heatReference) and the tests. No G-MPI here: a rank's loop
// (runHeatRank) talks to its neighbours through a small HeatComm, which heat.ts implements with
// Gmpi and the unit tests with in-memory channels.
//
// The problem: a rows × cols grid of float64 temperatures, fixed on its four edges; each step
// every interior cell becomes the mean of its four neighbours (a Jacobi sweep), and the step's
// residual is the largest change of any cell. Bit-for-bit reproducibility across
// decompositions rests on two choices:
//   - a cell's update is one expression, ((up + down) + (left + right)) * 0.25, evaluated the
//     same way whichever rank holds the cell;
//   - the residual is reduced with max, which is exact and does not depend on the order in which
//     ranks are combined (a sum would: allreduce combines over a tree).
// So a run on any number of ranks gives the same grid and residual history as the reference.

// ---- Named limits (STYLE.md 9) -------------------------------------------------------------------

/** Largest grid (cells): 32 MiB of float64. Keeps a rank's registered state, and rank 0's
 *  assembled grid, well under G-MPI's 64 MiB message limit and rollback's largest state
 *  (PROTOCOL §11.1, ROLLBACK_MAX_STATE_BYTES). */
export const MAX_HEAT_CELLS = 1 << 22;
/** Longest run: the residual history (8 bytes a step) stays part of the state. */
export const MAX_HEAT_STEPS = 1_000_000;
/** Narrowest and shortest grid: one interior cell. */
export const MIN_HEAT_SIDE = 3;

// ---- The problem -----------------------------------------------------------------------------------

export type HeatParams = { readonly rows: number; readonly cols: number; readonly steps: number };

/** Why `p` cannot run on `size` ranks, or null. Every rank owns at least one row. */
export function checkHeatParams(p: HeatParams, size: number): string | null {
  if (!Number.isSafeInteger(p.rows) || !Number.isSafeInteger(p.cols) || p.rows < MIN_HEAT_SIDE || p.cols < MIN_HEAT_SIDE) return `the grid needs at least ${MIN_HEAT_SIDE} × ${MIN_HEAT_SIDE} cells, not ${p.rows} × ${p.cols}`;
  if (p.rows * p.cols > MAX_HEAT_CELLS) return `the grid has ${p.rows * p.cols} cells, more than ${MAX_HEAT_CELLS}`;
  if (!Number.isSafeInteger(p.steps) || p.steps < 0 || p.steps > MAX_HEAT_STEPS) return `steps must be 0 to ${MAX_HEAT_STEPS}, not ${p.steps}`;
  if (!Number.isSafeInteger(size) || size < 1 || size > p.rows) return `${size} ranks cannot share ${p.rows} rows (one row each at least)`;
  return null;
}

/** The starting temperature of a cell: fixed edges (top 100, left 50, right 25, bottom 0) and a
 *  deterministic pattern inside, so the first steps move every cell. */
export function initialValue(p: HeatParams, row: number, col: number): number {
  if (row === 0) return 100;
  if (row === p.rows - 1) return 0;
  if (col === 0) return 50;
  if (col === p.cols - 1) return 25;
  return ((row * 31 + col * 17) % 97) / 97;
}

/** One Jacobi sweep of local rows [from, to) of `src` (row-major, `cols` wide) into `dst`.
 *  Columns 0 and cols − 1 are not written (fixed edges); the rows above `from` and below `to`
 *  are read. Returns the largest |new − old|. */
export function relaxRows(src: Float64Array, dst: Float64Array, cols: number, from: number, to: number): number {
  let residual = 0;
  for (let i = from; i < to; i++) {
    const row = i * cols;
    for (let k = row + 1; k < row + cols - 1; k++) {
      const v = ((src[k - cols] as number) + (src[k + cols] as number) + ((src[k - 1] as number) + (src[k + 1] as number))) * 0.25;
      const change = Math.abs(v - (src[k] as number));
      if (change > residual) residual = change;
      dst[k] = v;
    }
  }
  return residual;
}

// ---- The decomposition -----------------------------------------------------------------------------

/** What one rank holds: it owns global rows [first, end) and keeps rows [lo, hi), its own plus
 *  one halo row from each neighbour (none past the grid's edge). It updates the owned rows that
 *  are not the grid's top or bottom edge. */
export type RankLayout = {
  readonly params: HeatParams;
  readonly rank: number;
  readonly size: number;
  readonly first: number;
  readonly end: number;
  readonly lo: number;
  readonly hi: number;
};

/** Rank `rank` of `size`: rows split in blocks differing by at most one row. */
export function layoutOf(params: HeatParams, size: number, rank: number): RankLayout {
  const first = Math.floor((rank * params.rows) / size);
  const end = Math.floor(((rank + 1) * params.rows) / size);
  return { params, rank, size, first, end, lo: Math.max(first - 1, 0), hi: Math.min(end + 1, params.rows) };
}

/** The rank's rows [lo, hi) at step 0. */
export function initialRankGrid(l: RankLayout): Float64Array {
  const { cols } = l.params;
  const grid = new Float64Array((l.hi - l.lo) * cols);
  for (let i = l.lo; i < l.hi; i++) for (let j = 0; j < cols; j++) grid[(i - l.lo) * cols + j] = initialValue(l.params, i, j);
  return grid;
}

/** One sweep of the rank's rows (their halos already current); returns its residual. */
export function relaxRank(l: RankLayout, src: Float64Array, dst: Float64Array): number {
  const from = Math.max(l.first, 1) - l.lo;
  const to = Math.min(l.end, l.params.rows - 1) - l.lo;
  return from < to ? relaxRows(src, dst, l.params.cols, from, to) : 0;
}

/** A copy of the rank's owned rows (what it contributes to the assembled grid). */
export function ownedRows(l: RankLayout, grid: Float64Array): Float64Array {
  const { cols } = l.params;
  return grid.slice((l.first - l.lo) * cols, (l.end - l.lo) * cols);
}

// ---- A rank's loop ---------------------------------------------------------------------------------

/** What a rank's loop needs from the message layer: rows travel as raw bytes. */
export type HeatComm = {
  send(dest: number, tag: number, bytes: Uint8Array): Promise<void>;
  recv(source: number, tag: number): Promise<Uint8Array>;
  allreduceMax(value: number): Promise<number>;
};

/** A row travelling to rank + 1 (its halo above) is tagged DOWN; to rank − 1, UP. */
export const HEAT_TAG = { down: 11, up: 12 } as const;

/** Everything a rank's run depends on between two steps (its registered state, PROTOCOL
 *  §11.3): the next step, the rank's rows, and the residual of every step so far. */
export type HeatState = { step: number; grid: Float64Array; residuals: Float64Array };

export function initialHeatState(l: RankLayout): HeatState {
  return { step: 0, grid: initialRankGrid(l), residuals: new Float64Array(l.params.steps) };
}

/** Local row `i` as bytes of its own (the message layer may keep them after send returns). */
function rowBytes(l: RankLayout, grid: Float64Array, i: number): Uint8Array {
  const { cols } = l.params;
  return new Uint8Array(grid.slice(i * cols, (i + 1) * cols).buffer);
}

function setRow(l: RankLayout, grid: Float64Array, i: number, bytes: Uint8Array): void {
  const { cols } = l.params;
  if (bytes.byteLength !== cols * 8) throw new Error(`heat: a halo row of ${bytes.byteLength} bytes, expected ${cols * 8}`);
  new Uint8Array(grid.buffer, grid.byteOffset + i * cols * 8, cols * 8).set(bytes);
}

/** Refresh the halo rows from the neighbours. Even ranks send, then receive; odd ranks receive,
 *  then send: along the chain of ranks this cannot deadlock even if every send waited for its
 *  receive (each even rank's first send is its odd neighbour's first receive). */
export async function exchangeHalos(c: HeatComm, l: RankLayout, grid: Float64Array): Promise<void> {
  const hasUp = l.rank > 0;
  const hasDown = l.rank < l.size - 1;
  const sends = async (): Promise<void> => {
    if (hasUp) await c.send(l.rank - 1, HEAT_TAG.up, rowBytes(l, grid, l.first - l.lo));
    if (hasDown) await c.send(l.rank + 1, HEAT_TAG.down, rowBytes(l, grid, l.end - 1 - l.lo));
  };
  const receives = async (): Promise<void> => {
    if (hasUp) setRow(l, grid, 0, await c.recv(l.rank - 1, HEAT_TAG.down));
    if (hasDown) setRow(l, grid, l.hi - 1 - l.lo, await c.recv(l.rank + 1, HEAT_TAG.up));
  };
  if (l.rank % 2 === 0) {
    await sends();
    await receives();
  } else {
    await receives();
    await sends();
  }
}

/** The rank's steps from `s.step` to the end: halo exchange, sweep, allreduce of the residual,
 *  then `snapshot` (FTI's model: once per iteration, where `s` describes everything). The loop
 *  reads its position from `s` only, so a process whose state was restored carries on from it. */
export async function runHeatRank(c: HeatComm, l: RankLayout, s: HeatState, snapshot: () => Promise<void>, paceMs = 0): Promise<void> {
  let scratch: Float64Array = s.grid.slice(); // the fixed edges are in both buffers and never written
  while (s.step < l.params.steps) {
    await exchangeHalos(c, l, s.grid);
    const local = relaxRank(l, s.grid, scratch);
    [s.grid, scratch] = [scratch, s.grid];
    s.residuals[s.step] = await c.allreduceMax(local);
    s.step++;
    if (paceMs > 0) await new Promise((r) => setTimeout(r, paceMs));
    await snapshot();
  }
}

// ---- The sequential reference ----------------------------------------------------------------------

/** The whole grid and residual history after `p.steps` steps on one process: the same kernel
 *  over the same rows, so any parallel run must produce the same bits. */
export function heatReference(p: HeatParams): { grid: Float64Array; residuals: Float64Array } {
  const l = layoutOf(p, 1, 0);
  let grid: Float64Array = initialRankGrid(l);
  let next: Float64Array = grid.slice();
  const residuals = new Float64Array(p.steps);
  for (let step = 0; step < p.steps; step++) {
    residuals[step] = relaxRank(l, grid, next);
    [grid, next] = [next, grid];
  }
  return { grid, residuals };
}

/** The whole grid from every rank's owned rows, in rank order (as raw bytes from gather). */
export function assembleGrid(p: HeatParams, blocks: readonly Uint8Array[]): Float64Array {
  const bytes = new Uint8Array(p.rows * p.cols * 8);
  let at = 0;
  for (const b of blocks) {
    if (at + b.byteLength > bytes.byteLength) throw new Error('heat: the gathered rows exceed the grid');
    bytes.set(b, at);
    at += b.byteLength;
  }
  if (at !== bytes.byteLength) throw new Error(`heat: gathered ${at} bytes of a ${bytes.byteLength}-byte grid`);
  return new Float64Array(bytes.buffer);
}
