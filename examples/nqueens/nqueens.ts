// N-Queens, manager/worker, with the application-level fault tolerance of the source's example
// (spec §5.6, §8.1): written as an application programmer would write it with trine/app.
//
//   trine submit --linked -n 4 -- node --import tsx examples/nqueens/nqueens.ts --n 12
//
// Rank 0 is the manager: it hands out work units (the queens of the first two rows), checks
// every solution a worker returns, and counts. The other ranks are workers.
//
// Detection (spec §5.6):
//   - crash: the manager's GSIG_NTF_DIED invalidates the communicator; every blocked call
//     returns ERR_ALERT;
//   - hang: every outstanding unit has a deadline of 10 × the observed time per unit (the
//     paper's 10 × the measured interval between communications); workers give the manager
//     10 × the observed interval between work messages. On expiry the detector broadcasts
//     APP_SIG_HANG, which raises everyone's alert flag;
//   - wrong result: the manager checks every solution; a worker that returns a wrong one is
//     reported with APP_SIG_FAULTY(rank) and replaced like a hung one.
// Recovery (spec §5.6 Fig. 4.15): every process runs diagnose → kill → spawn → recoverComm:
//   - a hang is diagnosed by pinging every rank over G-MPI: the ranks that never answer are
//     hung (a quorum of the others agrees, since they all see the same silence);
//   - each hung or faulty process is killed (GSIG_REQ_KILL) and each dead one replaced
//     (GSIG_REQ_SPAWN), then G_MPI_Recover_comm builds the new world;
//   - the manager's state is a checkpoint kept in its memory and in rank 1's, updated after
//     every result; if the manager dies, rank 1 becomes rank 0 with the checkpoint. Units that
//     were out when the failure struck are handed out again.
import { ANY_SOURCE, ANY_TAG, FLAG, G_MPI_SIG, Gmpi, GmpiError } from 'trine/app';

// ---- arguments -----------------------------------------------------------------------------------

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) {
    process.stderr.write(`nqueens: --${name} needs a non-negative integer\n`);
    process.exit(2);
  }
  return v;
}
const N = option('n', 12);
/** Rows fixed by a work unit: 2 gives 110 units for n = 12, 3 gives 980 smaller ones. */
const DEPTH = Math.min(Math.max(option('depth', 2), 1), N);
/** Extra compute time per work unit (ms): stretches a run so faults land mid-computation. */
const PACE_MS = option('pace-ms', 0);
/** A first hang timeout, before any interval has been observed. */
const FIRST_TIMEOUT_MS = option('first-timeout-ms', 5000);
const MIN_TIMEOUT_MS = 300;
/** How long the hang diagnosis waits for every rank's answer (spec §8.1 uses 4 s for slow vs
 *  hung; our processes answer in microseconds when they run at all). */
const PING_TIMEOUT_MS = option('ping-timeout-ms', 500);

// ---- application signals and tags ----------------------------------------------------------------

const APP_SIG_HANG = 100;
const APP_SIG_FAULTY = 101;
const TAG = { work: 1, result: 2, checkpoint: 3, ping: 4, pong: 5, stop: 6 } as const;

type Unit = { id: number; prefix: number[] };
type Result = { unit: number; solutions: number[][] };
type Checkpoint = { counts: [number, number][] };

// ---- the puzzle ----------------------------------------------------------------------------------

const UNITS: Unit[] = [];
const safe = (cols: readonly number[], col: number): boolean => cols.every((c, r) => c !== col && Math.abs(c - col) !== cols.length - r);
const prefixes = (cols: number[]): void => {
  if (cols.length === DEPTH) {
    UNITS.push({ id: UNITS.length, prefix: [...cols] });
    return;
  }
  for (let col = 0; col < N; col++) if (safe(cols, col)) prefixes([...cols, col]);
};
prefixes([]);

/** Every solution extending `prefix` (one queen per row; cols[r] = column of row r). */
function solve(prefix: readonly number[], onStep: () => boolean): number[][] | null {
  const out: number[][] = [];
  const cols = [...prefix];
  let steps = 0;
  const ok = (row: number, col: number) => cols.slice(0, row).every((c, r) => c !== col && Math.abs(c - col) !== row - r);
  if (!prefix.every((c, r) => ok(r, c))) return out;
  const place = (row: number): boolean => {
    if ((++steps & 0xff) === 0 && !onStep()) return false;
    if (row === N) {
      out.push([...cols]);
      return true;
    }
    for (let col = 0; col < N; col++) {
      if (!ok(row, col)) continue;
      cols[row] = col;
      if (!place(row + 1)) return false;
    }
    cols.length = row;
    return true;
  };
  return place(prefix.length) ? out : null;
}

/** The manager checks every solution: N queens, none attacking another, on the unit's prefix. */
function validSolution(s: unknown, unit: Unit): boolean {
  if (!Array.isArray(s) || s.length !== N || unit.prefix.some((c, r) => s[r] !== c)) return false;
  for (let r = 0; r < N; r++) {
    const c = s[r];
    if (!Number.isInteger(c) || c < 0 || c >= N) return false;
    for (let q = 0; q < r; q++) if (s[q] === c || Math.abs((s[q] as number) - c) === r - q) return false;
  }
  return true;
}

// ---- the process ---------------------------------------------------------------------------------

const g = await Gmpi.init();
const t0 = Date.now();
const say = (text: string): void => {
  process.stdout.write(`${Date.now()} vpid=${g.link.vpid} rank=${safeRank()} ${text}\n`);
};
function safeRank(): number {
  try {
    return g.rank();
  } catch {
    return -1;
  }
}
say(`started: ${g.initCode}, ${g.size()} ranks, n=${N}, ${UNITS.length} units`);

// Asynchronous part (spec §5.6): handlers set globals and raise the alert flag.
type Cause = 'none' | 'crash' | 'hang' | 'faulty';
let cause: Cause = 'none';
const dead = new Set<number>(); // VPIDs announced dead and not yet replaced
const suspects = new Set<number>(); // VPIDs reported faulty by the manager
g.alertOn([APP_SIG_HANG, APP_SIG_FAULTY]);
g.onSignal(G_MPI_SIG.NTF_DIED, (_s, _src, _dest, rank) => {
  const vpid = rank >= 0 ? g.vpidOf(rank) : -1;
  if (vpid >= 0) dead.add(vpid);
  cause = 'crash';
  say(`GSIG_NTF_DIED: rank ${rank} (vpid ${vpid}) is dead: alert (crash)`);
});
g.onSignal(APP_SIG_HANG, (_s, src, _d, arg) => {
  if (cause === 'none') cause = 'hang';
  say(`APP_SIG_HANG from rank ${src} (suspect rank ${arg}): alert (hang)`);
});
g.onSignal(APP_SIG_FAULTY, (_s, src, _d, rank) => {
  if (rank >= 0 && rank < g.size()) suspects.add(g.vpidOf(rank));
  if (cause === 'none') cause = 'faulty';
  say(`APP_SIG_FAULTY from rank ${src}: rank ${rank} returned a wrong solution: alert`);
});
g.onSignal(G_MPI_SIG.LOCAL_ALARM, (_s, _src, _d, rank) => {
  if (cause !== 'none') return; // recovering already
  say(`timeout waiting for rank ${rank}: broadcasting APP_SIG_HANG`);
  try {
    g.signal(APP_SIG_HANG, G_MPI_SIG.BROADCAST, rank);
  } catch {
    // a request is already outstanding: the alert it will bring does the same
  }
});
g.link.onSelfDiagnosis(() => {
  say('GSIG_ERR_DISAGREE without a request of ours: entering diagnosis');
  g.alertRaise();
});

function fail(why: string): never {
  say(`FAILED: ${why}`);
  process.exit(3);
}

/** A group request, sent again while it is dropped (the epoch moved under it) until its own
 *  reply comes: true. False when the others asked something else (ERR_DISAGREE, or another
 *  reply): our diagnosis differs from the quorum's, so diagnose again. */
async function groupRequest(signum: number, arg: number, what: string): Promise<boolean> {
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      g.signal(signum, G_MPI_SIG.CLUSTER_MANAGER, arg);
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'REQUEST_OUTSTANDING' || code === 'ACK_PENDING') {
        await g.requestOutcome().catch(() => null);
        continue;
      }
      throw e;
    }
    let o = await g.requestOutcome();
    while (o.class === 'own-ack') o = await g.requestOutcome(); // errors announced, reply to follow
    if (o.class === 'own-reply') return true;
    if (o.class === 'own-failed') continue; // the spawn was started but failed: ask again
    if (o.class === 'disagree' || o.class === 'other-reply' || o.class === 'other-ack') {
      say(`${what}: the others asked otherwise (${o.class})`);
      return false;
    }
    await new Promise((r) => setTimeout(r, 2 + Math.random() * 10)); // dropped: ask again
  }
  fail(`${what}: no quorum after 50 attempts`);
}

// ---- the manager's state and its checkpoint --------------------------------------------------------

const counts = new Map<number, number>(); // unit → solutions (the checkpoint)
let total = 0;
const recount = () => {
  total = [...counts.values()].reduce((a, b) => a + b, 0);
};

// ---- hang diagnosis: ping every rank ---------------------------------------------------------------

/** Ranks that do not answer a ping within PING_TIMEOUT_MS, as VPIDs. Every process answers
 *  pings from the moment it starts diagnosing until recoverComm() replaces the communicator (a
 *  responder left running), so a slower diagnoser still hears from a faster one. */
async function diagnoseHung(): Promise<number[]> {
  const me = g.rank();
  const others = Array.from({ length: g.size() }, (_, r) => r).filter((r) => r !== me);
  const answered = new Set<number>();
  void (async () => {
    for (;;) {
      const m = await g.recv(ANY_SOURCE, TAG.ping);
      await g.send(m.source, TAG.pong, 0);
    }
  })().catch(() => {}); // ends when the flag rises or recoverComm discards the communicator
  for (const r of others) await g.send(r, TAG.ping, 0).catch((e: unknown) => say(`diagnosis: ping to rank ${r} failed: ${(e as Error).message}`));
  const deadline = new Promise<'late'>((r) => setTimeout(() => r('late'), PING_TIMEOUT_MS));
  try {
    while (answered.size < others.length) {
      const m = await Promise.race([g.recv(ANY_SOURCE, TAG.pong), deadline]);
      if (m === 'late') break;
      answered.add(m.source);
    }
  } catch {
    // the flag rose again: a crash takes over
  }
  return others.filter((r) => !answered.has(r)).map((r) => g.vpidOf(r));
}

// ---- recovery (spec §5.6 Fig. 4.15) --------------------------------------------------------------

async function diagnoseRecoverReconfigure(): Promise<void> {
  let rounds = 0;
  for (;;) {
    if (++rounds > 20) fail('recovery did not converge');
    // Let the signal that raised the flag reach its handler first: the link's worker raises
    // the flag before the main thread runs handlers.
    await new Promise((r) => setTimeout(r, 5));
    say(`recovery: cause ${cause}, ${dead.size} dead`);
    if (cause === 'hang' || cause === 'faulty') {
      g.alertClear();
      const hung = cause === 'hang' ? await diagnoseHung() : [];
      const kill = [...new Set([...hung, ...suspects])].filter((v) => !dead.has(v));
      say(kill.length === 0 ? 'diagnosis: every rank answers' : `diagnosis: kill vpid ${kill.join(', ')}`);
      let agreed = true;
      if (!g.invalid) {
        for (const v of kill) {
          const rank = g.world.members.indexOf(v);
          if (rank < 0) continue;
          agreed = await groupRequest(G_MPI_SIG.REQ_KILL, rank, `kill rank ${rank}`);
          if (!agreed) break;
          say(`killed vpid ${v}`);
        }
      }
      if (!agreed) continue; // diagnose again, with the others
      suspects.clear();
      if (kill.length === 0 && dead.size === 0 && !(await groupRequest(G_MPI_SIG.REQ_SYNC, 1, 'vote to continue'))) continue;
    }
    let spawned = true;
    for (const v of [...dead]) {
      spawned = await groupRequest(G_MPI_SIG.REQ_SPAWN, 0, 'spawn');
      if (!spawned) break;
      dead.delete(v);
      say(`spawned a replacement for vpid ${v}`);
    }
    if (!spawned) continue;
    cause = 'none';
    const rc = await g.recoverComm();
    say(`recoverComm: ${rc}${rc === 'SUCCESS' ? `, ${g.size()} ranks` : ''}`);
    if (rc === 'SUCCESS' && !g.alertCheck() && dead.size === 0 && cause === 'none') return;
  }
}

// ---- the manager ---------------------------------------------------------------------------------

async function manage(): Promise<boolean> {
  const pending = UNITS.filter((u) => !counts.has(u.id));
  const out = new Map<number, { unit: Unit; at: number }>(); // rank → unit
  let perUnit: number[] = [];
  const deadline = () => {
    const avg = perUnit.length < 3 ? FIRST_TIMEOUT_MS / 10 : perUnit.reduce((a, b) => a + b, 0) / perUnit.length;
    return Math.max(MIN_TIMEOUT_MS, 10 * avg);
  };
  // Rank 1 gets the whole checkpoint (it may be new).
  if (g.size() > 1) await g.send(1, TAG.checkpoint, { counts: [...counts] } satisfies Checkpoint);
  const give = async (rank: number) => {
    const unit = pending.shift();
    if (unit === undefined) return;
    out.set(rank, { unit, at: Date.now() });
    await g.send(rank, TAG.work, unit);
  };
  for (let r = 1; r < g.size(); r++) await give(r);
  if (g.size() === 1) fail('no workers');
  while (counts.size < UNITS.length) {
    // A timer for the unit that is due first (10 × the time per unit).
    const first = [...out].sort((a, b) => a[1].at - b[1].at)[0];
    const timer = first === undefined ? null : g.setWallTimer(Math.max(1, first[1].at + deadline() - Date.now()) * 1000, first[0]);
    let m;
    try {
      m = await g.recv<Result>(ANY_SOURCE, TAG.result);
    } finally {
      if (timer !== null) g.dismissTimer(timer);
    }
    const job = out.get(m.source);
    out.delete(m.source);
    const unit = job?.unit;
    if (unit === undefined || unit.id !== m.data.unit || !Array.isArray(m.data.solutions) || !m.data.solutions.every((s) => validSolution(s, unit))) {
      say(`rank ${m.source} returned a wrong result for unit ${m.data?.unit}: reporting it`);
      g.signal(APP_SIG_FAULTY, G_MPI_SIG.BROADCAST, m.source);
      await g.signalWait();
      throw new GmpiError('ERR_ALERT', 'faulty worker');
    }
    if (job !== undefined) perUnit = [...perUnit.slice(-9), Date.now() - job.at];
    counts.set(unit.id, m.data.solutions.length);
    recount();
    if (g.size() > 1) await g.send(1, TAG.checkpoint, { counts: [[unit.id, m.data.solutions.length]] } satisfies Checkpoint);
    await give(m.source);
  }
  say(`RESULT n=${N} solutions=${total} (${counts.size} units, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  for (let r = 1; r < g.size(); r++) await g.send(r, TAG.stop, 0);
  return true;
}

// ---- a worker -------------------------------------------------------------------------------------

async function work(): Promise<boolean> {
  let interval: number[] = [];
  let last = Date.now();
  for (;;) {
    const avg = interval.length < 3 ? FIRST_TIMEOUT_MS / 10 : interval.reduce((a, b) => a + b, 0) / interval.length;
    const timer = g.setWallTimer(Math.max(MIN_TIMEOUT_MS, 10 * avg) * 1000, 0);
    let m;
    try {
      m = await g.recv<Unit | Checkpoint | number>(0, ANY_TAG);
    } finally {
      g.dismissTimer(timer);
    }
    if (m.tag === TAG.stop) return true;
    if (m.tag === TAG.checkpoint) {
      for (const [u, c] of (m.data as Checkpoint).counts) counts.set(u, c);
      recount();
      continue;
    }
    if (m.tag === TAG.ping) {
      await g.send(m.source, TAG.pong, 0);
      continue;
    }
    if (m.tag !== TAG.work) continue;
    interval = [...interval.slice(-9), Date.now() - last];
    last = Date.now();
    const unit = m.data as Unit;
    // The compute loop is synchronous: it polls the alert flag, which the link's worker thread
    // raises in shared memory the moment an alerting signal arrives (spec §5.6 "polling").
    const until = Date.now() + PACE_MS;
    const solutions = solve(unit.prefix, () => !g.alertCheck() && !g.invalid);
    // --pace-ms: more (simulated) work per unit, without burning a CPU: block on the alert
    // flag's shared word, in slices, still never yielding to the event loop.
    for (let left = until - Date.now(); solutions !== null && left > 0 && !g.alertCheck() && !g.invalid; left = until - Date.now()) {
      Atomics.wait(g.link.flagWords, FLAG.ALERT, 0, Math.min(5, left));
    }
    if (solutions === null || g.alertCheck() || g.invalid) throw new GmpiError('ERR_ALERT', 'alert during computation');
    await g.send(0, TAG.result, { unit: unit.id, solutions } satisfies Result);
  }
}

// ---- main (spec §5.6 Fig. 4.18) -------------------------------------------------------------------

if (g.initCode === 'RECOVERED') say('spawned into the running task: RECOVERED');
if (g.initCode === 'ERR_ALERT') await diagnoseRecoverReconfigure();
// Tolerate one faulty process: n − 1 matching requests are a quorum (spec §4.5).
if (g.initCode === 'SUCCESS' && !g.link.mapping.restarted) {
  await groupRequest(G_MPI_SIG.REQ_SETQUORUM, Math.max(1, g.size() - 1), 'set quorum');
  say(`quorum ${Math.max(1, g.size() - 1)}`);
}
for (;;) {
  try {
    const done = g.rank() === 0 ? await manage() : await work();
    if (done) break;
  } catch (e) {
    if (!(e instanceof GmpiError) || e.code !== 'ERR_ALERT') throw e;
    await diagnoseRecoverReconfigure();
  }
}
await g.finalize();
process.exit(0);
