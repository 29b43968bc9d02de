// N-Queens with no recovery code: the program rollback mode (issue 17, PROTOCOL §11) keeps
// running through crashes, beside nqueens.ts, which recovers in its own code (Ghidrah's way).
// It runs as is, with no failure, in ordinary (app) mode.
//
//   trine submit --linked -n 4 -- node --import tsx examples/nqueens/nqueens-rollback.ts --n 12
//
// The board is split into the same work units as nqueens.ts (the queens of the first --depth
// rows, nqueens-core.ts). Two schedules:
//   - dynamic (the default, as nqueens.ts): rank 0 hands out units and collects counts; a worker
//     receives its next unit from rank 0 with any tag, and rank 0 receives results from any
//     source — the receives rollback mode logs as determinants (PROTOCOL §11.3);
//   - static: rank r counts units r, r + size, …; no wildcard receive at all.
// Either way the counts are combined with reduce (sum) at rank 0, which prints one JSON line and
// checks it against the known count: a wrong answer exits 3.
//
// The FTI-style loop: one plain object holds every loop variable (the library serializes it and
// restores it in place); each loop reads its position from it and calls snapshot() once per work
// unit. Nothing else is needed to survive a crash in rollback mode.
//
// Parameters: --n (NQ_N, 12), --depth (NQ_DEPTH, 2), --schedule dynamic|static (NQ_SCHEDULE),
// --pace-ms (NQ_PACE_MS, 0: a pause per unit, to stretch a run).
import { ANY_SOURCE, ANY_TAG, Gmpi } from 'trine/app';
import { choiceOption, intOption, refuse } from '../common/options.ts';
import { countCompletions, KNOWN_SOLUTIONS, MAX_QUEENS, workUnits } from './nqueens-core.ts';

const PROGRAM = 'nqueens-rollback';
/** Longest pause per unit: a run is stretched, never parked. */
const MAX_PACE_MS = 10_000;
const N = intOption(PROGRAM, 'n', 'NQ_N', 12, MAX_QUEENS);
const DEPTH = intOption(PROGRAM, 'depth', 'NQ_DEPTH', 2, MAX_QUEENS);
const SCHEDULE = choiceOption(PROGRAM, 'schedule', 'NQ_SCHEDULE', ['dynamic', 'static'] as const);
const PACE_MS = intOption(PROGRAM, 'pace-ms', 'NQ_PACE_MS', 0, MAX_PACE_MS);
if (DEPTH < 1 || DEPTH > N) refuse(PROGRAM, `--depth must be 1 to n (${N}), not ${DEPTH}`);
const UNITS = workUnits(N, DEPTH);

const TAG = { work: 1, result: 2, stop: 3 } as const;
type Result = { unit: number; count: number };

/** Every loop variable of every role (rank 0 uses the first four in the dynamic schedule). */
const state = {
  /** Workers told their first unit (or to stop). */
  primed: 0,
  /** Units handed out. */
  handed: 0,
  /** Results received. */
  received: 0,
  /** Solutions in the results received. */
  collected: 0,
  /** Units this rank counted. */
  done: 0,
  /** Solutions this rank found. */
  solutions: 0,
};

const pace = (): Promise<void> => new Promise((r) => setTimeout(r, PACE_MS));

function countUnit(unit: number): number {
  const prefix = UNITS[unit];
  if (prefix === undefined) throw new Error(`${PROGRAM}: no unit ${unit} of ${UNITS.length}`);
  return countCompletions(N, prefix);
}

/** Rank 0 of the dynamic schedule: one unit to each worker, then a new unit (or stop) for each
 *  result, until every unit handed out came back. */
async function manage(g: Gmpi): Promise<void> {
  const handOut = async (worker: number): Promise<void> => {
    if (state.handed < UNITS.length) {
      await g.send(worker, TAG.work, state.handed);
      state.handed++;
    } else {
      await g.send(worker, TAG.stop, 0);
    }
  };
  while (state.primed < g.size() - 1) {
    await handOut(state.primed + 1);
    state.primed++;
    await g.snapshot();
  }
  while (state.received < state.handed) {
    const m = await g.recv<Result>(ANY_SOURCE, TAG.result);
    state.collected += m.data.count;
    state.received++;
    await handOut(m.source);
    await g.snapshot();
  }
}

/** A worker of the dynamic schedule: count each unit rank 0 sends, until it says stop. */
async function work(g: Gmpi): Promise<void> {
  for (;;) {
    const m = await g.recv<number>(0, ANY_TAG);
    if (m.tag === TAG.stop) return;
    const count = countUnit(m.data);
    if (PACE_MS > 0) await pace();
    state.solutions += count;
    state.done++;
    await g.send(0, TAG.result, { unit: m.data, count } satisfies Result);
    await g.snapshot();
  }
}

/** The static schedule: units rank, rank + size, … */
async function countShare(g: Gmpi): Promise<void> {
  for (let unit = g.rank() + state.done * g.size(); unit < UNITS.length; unit = g.rank() + state.done * g.size()) {
    state.solutions += countUnit(unit);
    state.done++;
    if (PACE_MS > 0) await pace();
    await g.snapshot();
  }
}

const g = await Gmpi.init({ state });
const t0 = Date.now();
const dynamic = SCHEDULE === 'dynamic' && g.size() > 1;
if (!dynamic) await countShare(g);
else if (g.rank() === 0) await manage(g);
else await work(g);

const total = await g.reduce(0, state.solutions, 'sum');
let exitCode = 0;
if (total !== undefined) {
  const expected = KNOWN_SOLUTIONS[N] ?? null;
  // In the dynamic schedule rank 0 also tallied the results it received: the two must agree.
  const consistent = !dynamic || total === state.collected;
  const correct = consistent && (expected === null || total === expected);
  const answer = { app: 'nqueens-rollback', n: N, depth: DEPTH, schedule: dynamic ? 'dynamic' : 'static', ranks: g.size(), units: UNITS.length, solutions: total, expected, correct };
  process.stdout.write(`${JSON.stringify(answer)}\n`);
  if (!consistent) process.stdout.write(`${PROGRAM}: the workers found ${total} solutions, rank 0 received ${state.collected}\n`);
  process.stdout.write(`${PROGRAM}: n=${N} on ${g.size()} ranks in ${((Date.now() - t0) / 1000).toFixed(2)} s\n`);
  if (!correct) exitCode = 3;
}
// No rank says goodbye before every rank is past init and done: today's G-MPI fails an init
// still connecting to a peer that has already finalized (PEER_FINISHED).
await g.barrier();
await g.finalize();
process.exit(exitCode);
