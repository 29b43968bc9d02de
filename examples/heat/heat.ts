// A heat stencil with no recovery code: the program rollback mode (issue 17, PROTOCOL §11) keeps
// running through crashes, and that runs as is, with no failure, in ordinary (app) mode.
//
//   trine submit --linked -n 4 -- node --import tsx examples/heat/heat.ts --rows 64 --cols 8192 --steps 100
//
// A rows × cols grid is split by rows across the ranks (heat-core.ts). Each step a rank
// exchanges its edge rows with the ranks above and below (one row each way: 64 KiB at 8192
// columns), sweeps its rows, and joins an allreduce (max) of the step's residual. At the end
// rank 0 gathers the rows and prints one JSON line: the grid's SHA-256 and the residual
// history's, equal bit for bit to the sequential reference's (heatReference) on any number of
// ranks. `--verify` makes rank 0 compute the reference too and exit 3 if they differ.
//
// The FTI-style loop: the state (step, rows, residuals) is registered once at init with its own
// save/restore, the loop reads its position from it, and calls snapshot() once per step. That is
// all rollback mode asks of a program.
//
// Parameters: --rows (HEAT_ROWS, 64), --cols (HEAT_COLS, 8192), --steps (HEAT_STEPS, 100),
// --pace-ms (HEAT_PACE_MS, 0: a pause per step, to stretch a run), --verify (HEAT_VERIFY=1).
// Rows travel between ranks as the host's float64 bytes: the cluster's hosts share a byte order.
import { Gmpi } from 'trine/app';
import { intOption, flagOption, refuse } from '../common/options.ts';
import {
  assembleGrid, checkHeatParams, heatReference, initialRankGrid, layoutOf, MAX_HEAT_CELLS, MAX_HEAT_STEPS, ownedRows, runHeatRank,
  type HeatComm, type HeatParams, type HeatState,
} from './heat-core.ts';
import { decodeHeatState, encodeHeatState, heatSummary } from './heat-state.ts';

const PROGRAM = 'heat';
/** Longest pause per step: a run is stretched, never parked. */
const MAX_PACE_MS = 10_000;

const params: HeatParams = {
  rows: intOption(PROGRAM, 'rows', 'HEAT_ROWS', 64, MAX_HEAT_CELLS),
  cols: intOption(PROGRAM, 'cols', 'HEAT_COLS', 8192, MAX_HEAT_CELLS),
  steps: intOption(PROGRAM, 'steps', 'HEAT_STEPS', 100, MAX_HEAT_STEPS),
};
const paceMs = intOption(PROGRAM, 'pace-ms', 'HEAT_PACE_MS', 0, MAX_PACE_MS);
const verify = flagOption('verify', 'HEAT_VERIFY');

// The size is the task's (it never changes, PROTOCOL §11.2), so the parameters are checked
// before init. The rank is G-MPI's: a replacement in rollback mode is a fresh VPID holding an
// old rank, and gets its state restored inside init, before it could ask. So the state starts
// empty and restore() takes whatever rows were saved; after init a process that restored
// nothing fills in its rows, and one that did checks they are its rank's.
// (Outside Trine there is no TRINE_SIZE: init says NOT_IN_TRINE.)
const sizeAtStart = process.env.TRINE_SIZE === undefined ? null : Number(process.env.TRINE_SIZE);
const problem = checkHeatParams(params, sizeAtStart ?? 1);
if (problem !== null) refuse(PROGRAM, problem);
const state: HeatState = { step: 0, grid: new Float64Array(0), residuals: new Float64Array(params.steps) };
let restored = false;

const g = await Gmpi.init({ state: {
  save: () => encodeHeatState(state),
  restore: (bytes) => {
    const got = decodeHeatState(bytes, params);
    if (!got.ok) throw new Error(`heat: cannot restore: ${got.detail}`);
    Object.assign(state, got.value);
    restored = true;
  },
} });
const sizeProblem = checkHeatParams(params, g.size());
if (sizeProblem !== null) refuse(PROGRAM, sizeProblem);
const layout = layoutOf(params, g.size(), g.rank());
const rowsHeld = (layout.hi - layout.lo) * params.cols;
if (!restored) state.grid = initialRankGrid(layout);
else if (state.grid.length !== rowsHeld) refuse(PROGRAM, `rank ${g.rank()} restored ${state.grid.length} cells, it holds ${rowsHeld}`);
const t0 = Date.now();

const comm: HeatComm = {
  send: (dest, tag, bytes) => g.send(dest, tag, bytes),
  recv: async (source, tag) => {
    const m = await g.recv(source, tag);
    if (!(m.data instanceof Uint8Array)) throw new Error(`heat: rank ${source} sent a structured message with tag ${tag}`);
    return m.data;
  },
  allreduceMax: (value) => g.allreduce(value, 'max'),
};
await runHeatRank(comm, layout, state, () => g.snapshot(), paceMs);

const owned = ownedRows(layout, state.grid);
const blocks = await g.gather(0, new Uint8Array(owned.buffer, owned.byteOffset, owned.byteLength));
let exitCode = 0;
if (blocks !== undefined) {
  const summary = heatSummary(params, assembleGrid(params, blocks), state.residuals);
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  if (verify) {
    const ref = heatReference(params);
    const expected = heatSummary(params, ref.grid, ref.residuals);
    const same = expected.checksum === summary.checksum && expected.residualDigest === summary.residualDigest;
    process.stdout.write(`heat: verify ${same ? 'OK' : `FAILED: the reference's checksum is ${expected.checksum}`}\n`);
    if (!same) exitCode = 3;
  }
  process.stdout.write(`heat: ${params.steps} steps of ${params.rows} × ${params.cols} on ${g.size()} ranks in ${((Date.now() - t0) / 1000).toFixed(2)} s\n`);
}
// No rank says goodbye before every rank is past init and done: today's G-MPI fails an init
// still connecting to a peer that has already finalized (PEER_FINISHED).
await g.barrier();
await g.finalize();
process.exit(exitCode);
