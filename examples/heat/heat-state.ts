// The heat stencil's bytes: a rank's registered state as bytes (its save/restore, PROTOCOL
// §11.3) and the run's summary, the one line that two runs compare bit for bit. Both write
// float64s little-endian whatever the host, so a checkpoint or a checksum means the same thing
// on every node.
import { createHash } from 'node:crypto';
import type { HeatParams, HeatState } from './heat-core.ts';

const LITTLE_ENDIAN_HOST = new Uint8Array(new Float64Array([1]).buffer)[7] === 0x3f;

/** The float64s as little-endian bytes (a view on a little-endian host, else a copy). */
export function float64LE(values: Float64Array): Uint8Array {
  if (LITTLE_ENDIAN_HOST) return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const out = new Uint8Array(values.byteLength);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setFloat64(i * 8, v, true));
  return out;
}

/** [step, grid length, grid…, residuals…], float64 little-endian. The grid's length is in the
 *  bytes because a replacement restores its state before it knows its rank (PROTOCOL §11.2: a
 *  replacement is a fresh VPID), so before it knows how many rows it holds. */
export function encodeHeatState(s: HeatState): Uint8Array {
  const all = new Float64Array(2 + s.grid.length + s.residuals.length);
  all[0] = s.step;
  all[1] = s.grid.length;
  all.set(s.grid, 2);
  all.set(s.residuals, 2 + s.grid.length);
  return new Uint8Array(float64LE(all)); // a copy: the state moves on after save returns
}

export type HeatStateDecode = { readonly ok: true; readonly value: HeatState } | { readonly ok: false; readonly detail: string };

/** The state encodeHeatState saved in a run of `p`: whole rows of `p.cols` cells, at most the
 *  grid, and a residual per step. A wrong length or a step out of range is refused, never
 *  guessed at; whether the rows are this rank's is the caller's check, once it knows its rank. */
export function decodeHeatState(bytes: Uint8Array, p: HeatParams): HeatStateDecode {
  if (bytes.byteLength < 16 || bytes.byteLength % 8 !== 0) return { ok: false, detail: `a heat state of ${bytes.byteLength} bytes` };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const step = view.getFloat64(0, true);
  const gridLength = view.getFloat64(8, true);
  if (!Number.isInteger(step) || step < 0 || step > p.steps) return { ok: false, detail: `a heat state at step ${step}, not 0 to ${p.steps}` };
  if (!Number.isInteger(gridLength) || gridLength < p.cols || gridLength > p.rows * p.cols || gridLength % p.cols !== 0) {
    return { ok: false, detail: `a heat state of ${gridLength} cells, not whole rows of ${p.cols} within the grid` };
  }
  const expected = (2 + gridLength + p.steps) * 8;
  if (bytes.byteLength !== expected) return { ok: false, detail: `a heat state of ${bytes.byteLength} bytes, expected ${expected}` };
  const read = (from: number, n: number): Float64Array => {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = view.getFloat64((from + i) * 8, true);
    return out;
  };
  return { ok: true, value: { step, grid: read(2, gridLength), residuals: read(2 + gridLength, p.steps) } };
}

/** The run's answer: what rank 0 prints as one JSON line. */
export type HeatSummary = {
  readonly app: 'heat';
  readonly rows: number;
  readonly cols: number;
  readonly steps: number;
  /** SHA-256 of the final grid, float64 little-endian, row by row. */
  readonly checksum: string;
  /** SHA-256 of the residual of every step, the same way. */
  readonly residualDigest: string;
  readonly finalResidual: number;
};

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

export function heatSummary(p: HeatParams, grid: Float64Array, residuals: Float64Array): HeatSummary {
  return {
    app: 'heat',
    rows: p.rows,
    cols: p.cols,
    steps: p.steps,
    checksum: sha256(float64LE(grid)),
    residualDigest: sha256(float64LE(residuals)),
    finalResidual: residuals.length === 0 ? 0 : (residuals[residuals.length - 1] as number),
  };
}
