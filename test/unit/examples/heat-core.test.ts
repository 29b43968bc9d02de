// The heat stencil's kernel, decomposition and registered state (examples/heat; issue 17 item 4,
// PROTOCOL §11.3): the sequential reference is stable, and the parallel rank loop the program
// runs (runHeatRank), stepped here over k in-memory ranks whose sends wait for their receives,
// gives the reference's bytes for every k, never deadlocks, and carries on from a restored state.
import { describe, expect, it } from 'vitest';
import {
  assembleGrid, checkHeatParams, exchangeHalos, heatReference, initialHeatState, layoutOf, MAX_HEAT_CELLS, ownedRows, relaxRows, runHeatRank,
  type HeatComm, type HeatParams, type HeatState,
} from '../../../examples/heat/heat-core.ts';
import { decodeHeatState, encodeHeatState, float64LE, heatSummary } from '../../../examples/heat/heat-state.ts';

/** How long a simulated run may stay blocked before it counts as a deadlock. */
const DEADLOCK_MS = 5_000;

/** k ranks in memory. A send completes only when its receive takes the message (as a
 *  synchronous MPI send), or at once with `buffered`; the allreduce waits for every rank. */
function memoryComms(k: number, buffered = false): HeatComm[] {
  type Waiter = { bytes: Uint8Array; taken: () => void };
  const mail = new Map<string, Waiter[]>();
  const wanted = new Map<string, ((w: Waiter) => void)[]>();
  const key = (s: number, d: number, t: number) => `${s}>${d}#${t}`;
  let round: { values: number[]; resolve: ((v: number) => void)[] } = { values: [], resolve: [] };
  return Array.from({ length: k }, (_, rank) => ({
    send: (dest, tag, bytes) => new Promise<void>((done) => {
      const w = { bytes: bytes.slice(), taken: buffered ? () => {} : done };
      const r = wanted.get(key(rank, dest, tag))?.shift();
      if (r !== undefined) r(w);
      else mail.set(key(rank, dest, tag), [...(mail.get(key(rank, dest, tag)) ?? []), w]);
      if (buffered) done();
    }),
    recv: (source, tag) => new Promise<Uint8Array>((got) => {
      const take = (w: Waiter) => {
        w.taken();
        got(w.bytes);
      };
      const w = mail.get(key(source, rank, tag))?.shift();
      if (w !== undefined) take(w);
      else wanted.set(key(source, rank, tag), [...(wanted.get(key(source, rank, tag)) ?? []), take]);
    }),
    allreduceMax: (value) => new Promise<number>((resolve) => {
      round.values.push(value);
      round.resolve.push(resolve);
      if (round.values.length < k) return;
      const done = round;
      round = { values: [], resolve: [] };
      const max = done.values.reduce((a, b) => (b > a ? b : a));
      done.resolve.forEach((r) => r(max));
    }),
  }));
}

/** runHeatRank on k in-memory ranks from the given states; fails on a deadlock. */
async function runRanks(p: HeatParams, k: number, states: HeatState[], opts: { buffered?: boolean; snapshot?: (rank: number, s: HeatState) => Promise<void> } = {}): Promise<HeatState[]> {
  const comms = memoryComms(k, opts.buffered);
  let timer: NodeJS.Timeout | undefined;
  const deadlock = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`deadlock: ${k} ranks blocked for ${DEADLOCK_MS} ms`)), DEADLOCK_MS);
  });
  try {
    await Promise.race([
      Promise.all(states.map((s, r) => runHeatRank(comms[r] as HeatComm, layoutOf(p, k, r), s, () => opts.snapshot?.(r, s) ?? Promise.resolve()))),
      deadlock,
    ]);
  } finally {
    clearTimeout(timer);
  }
  return states;
}

/** The grid assembled from the ranks' owned rows, as rank 0 does after its gather. */
function assembled(p: HeatParams, states: readonly HeatState[]): Float64Array {
  return assembleGrid(p, states.map((s, r) => {
    const rows = ownedRows(layoutOf(p, states.length, r), s.grid);
    return new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength);
  }));
}

const P: HeatParams = { rows: 13, cols: 11, steps: 40 };

describe('heat stencil kernel (examples/heat, issue 17 item 4)', () => {
  it('a cell becomes ((up + down) + (left + right)) / 4; edges stay; the residual is the largest change', () => {
    const src = new Float64Array([0, 8, 0, 1, 0, 3, 0, 2, 0]);
    const dst = src.slice();
    expect(relaxRows(src, dst, 3, 1, 2)).toBe(3.5);
    expect([...dst]).toEqual([0, 8, 0, 1, 3.5, 3, 0, 2, 0]);
  });

  it('the reference is stable: its checksums for a 13 × 11 grid over 40 steps are pinned', () => {
    const ref = heatReference(P);
    const s = heatSummary(P, ref.grid, ref.residuals);
    expect(s.checksum).toBe('db0c6f738a8534b0ea063e913a969ac287926d7caeb059f054826259ce4e776c');
    expect(s.residualDigest).toBe('1bed08236f64b441766b227e4cb14589d5656543d5ec5cc0f724c246d072a654');
    expect(s.finalResidual).toBe(0.5489517588997757);
    // The residual never grows under a Jacobi sweep of this problem.
    for (let i = 1; i < P.steps; i++) expect(ref.residuals[i]).toBeLessThanOrEqual(ref.residuals[i - 1] as number);
  });

  it('zero steps leave the initial grid, with its fixed edges', () => {
    const ref = heatReference({ ...P, steps: 0 });
    expect(ref.grid[0]).toBe(100);
    expect(ref.grid[P.cols]).toBe(50);
    expect(ref.grid[2 * P.cols - 1]).toBe(25);
    expect(ref.grid[(P.rows - 1) * P.cols + 3]).toBe(0);
    expect(heatSummary({ ...P, steps: 0 }, ref.grid, ref.residuals).finalResidual).toBe(0);
  });

  it('the row blocks cover the grid once, differ by at most one row, and hold one halo row per neighbour', () => {
    for (let k = 1; k <= P.rows; k++) {
      let next = 0;
      for (let r = 0; r < k; r++) {
        const l = layoutOf(P, k, r);
        expect(l.first).toBe(next);
        expect(l.end - l.first).toBeGreaterThanOrEqual(Math.floor(P.rows / k));
        expect(l.end - l.first).toBeLessThanOrEqual(Math.ceil(P.rows / k));
        expect(l.lo).toBe(r === 0 ? 0 : l.first - 1);
        expect(l.hi).toBe(r === k - 1 ? P.rows : l.end + 1);
        next = l.end;
      }
      expect(next).toBe(P.rows);
    }
  });

  it('parameters: too small, too large, or more ranks than rows are refused with the reason', () => {
    expect(checkHeatParams(P, 4)).toBeNull();
    expect(checkHeatParams({ ...P, rows: 2 }, 1)).toMatch(/at least 3 × 3/);
    expect(checkHeatParams({ ...P, cols: MAX_HEAT_CELLS }, 1)).toMatch(/more than/);
    expect(checkHeatParams({ ...P, steps: -1 }, 1)).toMatch(/steps/);
    expect(checkHeatParams(P, P.rows + 1)).toMatch(/cannot share/);
  });
});

describe('heat stencil: the parallel loop equals the reference bit for bit (issue 17 item 4)', () => {
  const ref = heatReference(P);
  for (const k of [1, 2, 3, 4, 5, 7, 13]) {
    it(`${k} ranks, sends that wait for their receives: same grid and residuals, no deadlock`, async () => {
      const states = await runRanks(P, k, Array.from({ length: k }, (_, r) => initialHeatState(layoutOf(P, k, r))));
      expect(float64LE(assembled(P, states))).toEqual(float64LE(ref.grid));
      for (const s of states) expect(float64LE(s.residuals)).toEqual(float64LE(ref.residuals));
    });
  }

  it('the in-memory ranks do catch a deadlock: two ranks that both send first never finish', async () => {
    const [a, b] = memoryComms(2) as [HeatComm, HeatComm];
    const both = Promise.all([a.send(1, 1, new Uint8Array(1)).then(() => a.recv(1, 1)), b.send(0, 1, new Uint8Array(1)).then(() => b.recv(0, 1))]);
    const late = new Promise<'blocked'>((r) => setTimeout(() => r('blocked'), 50));
    expect(await Promise.race([both, late])).toBe('blocked');
  });

  it('buffered sends give the same bytes (4 ranks)', async () => {
    const states = await runRanks(P, 4, Array.from({ length: 4 }, (_, r) => initialHeatState(layoutOf(P, 4, r))), { buffered: true });
    expect(float64LE(assembled(P, states))).toEqual(float64LE(ref.grid));
  });

  it('a halo exchange moves each edge row to the neighbour\'s halo (3 ranks)', async () => {
    const p: HeatParams = { rows: 6, cols: 3, steps: 0 };
    const comms = memoryComms(3);
    const grids = [0, 1, 2].map((r) => {
      const l = layoutOf(p, 3, r);
      return Float64Array.from({ length: (l.hi - l.lo) * p.cols }, (_, i) => 100 * (l.lo + Math.floor(i / p.cols)) + r);
    });
    await Promise.all(grids.map((grid, r) => exchangeHalos(comms[r] as HeatComm, layoutOf(p, 3, r), grid)));
    // Global row i holds 100·i + its owner: every halo now carries its owner's number.
    expect([...(grids[1] as Float64Array)].filter((_, i) => i % 3 === 0)).toEqual([100, 201, 301, 402]);
    expect([...(grids[0] as Float64Array)].filter((_, i) => i % 3 === 0)).toEqual([0, 100, 201]);
    expect([...(grids[2] as Float64Array)].filter((_, i) => i % 3 === 0)).toEqual([301, 402, 502]);
  });
});

describe('heat stencil: the registered state (PROTOCOL §11.3: save/restore at snapshot())', () => {
  it('restored at a snapshot, every rank carries on to the reference\'s bytes', async () => {
    const k = 3;
    const at = 17;
    const saved: Uint8Array[] = [];
    const crash = new Error('crash');
    const states = Array.from({ length: k }, (_, r) => initialHeatState(layoutOf(P, k, r)));
    await expect(runRanks(P, k, states, {
      snapshot: async (r, s) => {
        if (s.step !== at) return;
        saved[r] = encodeHeatState(s);
        throw crash; // every rank stops at the same snapshot, as after a rollback
      },
    })).rejects.toBe(crash);
    const restored = saved.map((bytes) => {
      const got = decodeHeatState(bytes, P);
      if (!got.ok) throw new Error(got.detail);
      return got.value;
    });
    expect(restored.map((s) => s.step)).toEqual([at, at, at]);
    await runRanks(P, k, restored);
    const ref = heatReference(P);
    expect(float64LE(assembled(P, restored))).toEqual(float64LE(ref.grid));
    expect(float64LE(restored[0]?.residuals as Float64Array)).toEqual(float64LE(ref.residuals));
  });

  it('encode then decode gives the same state, as its own copy', () => {
    const s = initialHeatState(layoutOf(P, 2, 1));
    s.step = 5;
    s.residuals[4] = 0.125;
    const bytes = encodeHeatState(s);
    const got = decodeHeatState(bytes, P);
    expect(got.ok && got.value.step).toBe(5);
    expect(got.ok && float64LE(got.value.grid)).toEqual(float64LE(s.grid));
    expect(got.ok && got.value.residuals[4]).toBe(0.125);
    s.grid[0] = -1;
    expect(got.ok && got.value.grid[0]).not.toBe(-1);
    // Unaligned bytes (a Buffer slice, as a library may hand over) decode the same.
    const shifted = new Uint8Array(bytes.byteLength + 3);
    shifted.set(bytes, 3);
    expect(decodeHeatState(shifted.subarray(3), P).ok).toBe(true);
  });

  it('malformed bytes are refused with a reason, never guessed at', () => {
    const s = initialHeatState(layoutOf(P, 2, 0));
    const good = encodeHeatState(s);
    const withHeader = (step: number, cells: number) => {
      const b = good.slice();
      new DataView(b.buffer).setFloat64(0, step, true);
      new DataView(b.buffer).setFloat64(8, cells, true);
      return b;
    };
    expect(decodeHeatState(new Uint8Array(0), P)).toMatchObject({ ok: false });
    expect(decodeHeatState(good.subarray(0, good.byteLength - 8), P)).toMatchObject({ ok: false, detail: expect.stringMatching(/expected/) });
    expect(decodeHeatState(good.subarray(0, good.byteLength - 1), P)).toMatchObject({ ok: false });
    expect(decodeHeatState(withHeader(P.steps + 1, s.grid.length), P)).toMatchObject({ ok: false, detail: expect.stringMatching(/step/) });
    expect(decodeHeatState(withHeader(0.5, s.grid.length), P)).toMatchObject({ ok: false });
    expect(decodeHeatState(withHeader(0, s.grid.length + 1), P)).toMatchObject({ ok: false, detail: expect.stringMatching(/whole rows/) });
    expect(decodeHeatState(withHeader(0, Number.NaN), P)).toMatchObject({ ok: false });
  });

  it('assembling refuses blocks that do not make the grid', () => {
    expect(() => assembleGrid(P, [new Uint8Array(8)])).toThrow(/gathered 8 bytes/);
    expect(() => assembleGrid(P, [new Uint8Array(P.rows * P.cols * 8 + 8)])).toThrow(/exceed/);
  });
});
