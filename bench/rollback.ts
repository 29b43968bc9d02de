// Rollback recovery on a real local cluster (issue 17; docs/PERFORMANCE.md "Rollback recovery";
// PROTOCOL §11): `trine up --nodes 4` in a temporary dir, then the two applications with no
// recovery code, one rank per node, submitted in-process with the operator client the CLI uses:
//   1. Failure-free overhead. The heat stencil with 64 KiB rows (communication-bound: a halo
//      exchange and an allreduce per step) and N-Queens without its recovery code
//      (computation-bound), each in app mode (no logging), in rollback mode with RBML
//      (receiver-based pessimistic logging) and with HMPL (hybrid logging), both with no
//      checkpoint so the logging's cost shows alone, and with RBML and a checkpoint every
//      500 ms for the checkpoints' cost, and with channel memories (cm, no checkpoint); beside
//      N-Queens, the app-specific N-Queens (examples/nqueens/nqueens.ts, Ghidrah's Tables
//      5.5-5.7) in app mode. Runs alternate (A, B, C, D, A, B, …) and each round's
//      ratio to its own app-mode run is kept, so a machine that gets busier between rounds moves
//      both; the figures are medians with the rounds' spread. Time to solution is the
//      application's own line (rank 0: from init's return to the answer), the same in every
//      mode. The heat stencil again with 2.5× the sweep per step (60 rows), app mode against
//      RBML and HMPL: the same messages with more computation between them.
//   2. Recovery. The heat stencil with checkpoints every 500 ms, under RBML and HMPL in turn,
//      rank 2 (an interior rank: both its neighbours wait for it) killed with SIGKILL mid-run;
//      from the kill to the replacement back in step, split into detection, restart, restore
//      and replay (see `CrashSample`); then the node holding rank 2 failed instead
//      (`trine inject kill-node`, on a fresh cluster each time), split the same way.
//   3. Sizes. Checkpoint bytes per rank, log bytes and entries per step, as the library sent
//      them to its protector, beside what the messages alone amount to.
//   Beside them, the floor: the protector's own append latency and checkpoint transfer on
//   loopback (bench/protector.ts, in one process, no cluster), measured in the same run; and, in
//   the heat rounds, the machine's floor for logging: app mode with every received message also
//   sent raw to a bare logger process per rank (bench/floor-sink.ts, bench/floor-probe.ts; no
//   protocol, no authentication), the receive returning at once (as HMPL's) or at the logger's
//   acknowledgement (floor-sync).
// Inside the application processes, bench/rollback-probe.ts (preloaded in every mode) records
// the library-side times; manager times come from the primary's events (its clock: wall time
// at its start plus monotonic time, within a few ms of this process's Date.now()), agent times
// from their logs (Date.now(), ms). Raw samples go to bench/results/rollback.json.
// bench/run.ts imports benchRollback(); run alone with `node --import tsx bench/rollback.ts`.
// TRINE_BENCH_ROLLBACK_ROUNDS (4) alternated rounds, TRINE_BENCH_ROLLBACK_CRASHES (2) crashes
// and TRINE_BENCH_ROLLBACK_NODE_CRASHES (1) node failures per logging mode,
// TRINE_BENCH_ROLLBACK_ONLY (the parts to run, comma-separated; all by default).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { newNonce, OP_TIMEOUT_MS, readClusterView, requestOp, VIEW_TIMEOUT_MS } from '../cli/op-client.ts';
import { OperatorClient } from '../cli/status-client.ts';
import { buildSubmit, newTaskKey, type RecoveryInput } from '../cli/task-args.ts';
import { up } from '../cli/up.ts';
import type { ClusterView } from '../src/core/status.ts';
import { ROLLBACK_MAX_INTERVAL_MS } from '../src/core/constants.ts';
import { procStartTime } from '../src/daemon/agent.ts';
import { loadCluster, type Cluster as ClusterConfig } from '../src/io/cluster-dir.ts';
import { logEvents, tearDown } from './cluster-tools.ts';
import type { Figure } from './crypto.ts';
import { benchProtector } from './protector.ts';
import { quantile } from './stats.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const REPO = resolve(here, '..');
const PROBE = join(here, 'rollback-probe.ts');
const FLOOR_PROBE = join(here, 'floor-probe.ts');
const FLOOR_SINK = join(here, 'floor-sink.ts');
/** The probe's line (bench/rollback-probe.ts; not imported: importing it would patch this
 *  process's library too). */
const PROBE_TAG = 'TRINE_BENCH_PROBE';
const ROUNDS = Number(process.env['TRINE_BENCH_ROLLBACK_ROUNDS'] ?? 4);
/** Crashes per logging mode. */
const CRASHES = Number(process.env['TRINE_BENCH_ROLLBACK_CRASHES'] ?? 2);
/** Node failures per logging mode, each on a fresh cluster (the failed node stays down). */
const NODE_CRASHES = Number(process.env['TRINE_BENCH_ROLLBACK_NODE_CRASHES'] ?? 1);
/** The parts to run (comma-separated; all by default): overhead-heat, overhead-heat-compute,
 *  overhead-nqueens, crash, node-crash. */
const PARTS = new Set((process.env['TRINE_BENCH_ROLLBACK_ONLY'] ?? 'overhead-heat,overhead-heat-compute,overhead-nqueens,crash,node-crash').split(','));
const RANKS = 4;
/** Heat: 24 rows of 8192 columns, 64 KiB a row; each rank owns 6 rows and exchanges one each
 *  way with each neighbour per step. */
const HEAT = { rows: 24, cols: 8192, steps: 300 };
const HEAT_ROW_BYTES = HEAT.cols * 8;
/** The same messages with 2.5× the sweep per step (15 rows a rank): the halo exchange weighs
 *  less, a step nearer the papers' stencils (RADIC's heat exchanged rows every 20 iterations).
 *  No more rows: the final gather sends a rank's rows as one message, and rollback mode cannot
 *  log a message above PROTECTOR_MAX_ENTRY_BYTES (1 MiB − 4 KiB) yet (PROTOCOL §11.4: the
 *  library is to split it); 48 rows a rank fail at the gather, rank 0 dying at each replay. */
const HEAT_COMPUTE = { ...HEAT, rows: 60 };
/** N-Queens: n = 15 in units of the first two rows' queens, handed out by rank 0. */
const NQ = { n: 15 };
/** Longest a run may take before the bench gives up on it. */
const RUN_LIMIT_MS = 120_000;
const POLL_MS = 100;
/** Quiet time between runs, so the last one's processes have exited and its sockets closed. */
const SETTLE_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type App = 'heat' | 'heat-compute' | 'nqueens';
/** `program`: another program than the app's own (the app-specific N-Queens beside the one with
 *  no recovery code). */
type Mode = { key: string; label: string; recovery: RecoveryInput; program?: 'nqueens-app-specific'; floor?: 'async' | 'sync' };
const MODES: Mode[] = [
  { key: 'app', label: 'app mode (no logging)', recovery: {} },
  { key: 'rbml', label: 'rollback rbml/nco, no checkpoint', recovery: { recovery: 'rollback', checkpointInterval: String(ROLLBACK_MAX_INTERVAL_MS) } },
  { key: 'hmpl', label: 'rollback hmpl/nco, no checkpoint', recovery: { recovery: 'rollback', logging: 'hmpl', checkpointInterval: String(ROLLBACK_MAX_INTERVAL_MS) } },
  { key: 'rbml-500ms', label: 'rollback rbml/nco, checkpoint every 500 ms', recovery: { recovery: 'rollback', checkpointInterval: '500' } },
  { key: 'cm', label: 'rollback cm/nco (channel memories), no checkpoint', recovery: { recovery: 'rollback', logging: 'cm', checkpointInterval: String(ROLLBACK_MAX_INTERVAL_MS) } },
];
/** Ghidrah's Tables 5.5–5.7 set the application's own fault tolerance beside stock runs: here
 *  examples/nqueens/nqueens.ts (app-specific detection, and the manager's counts checkpointed
 *  in rank 1's memory after every result) beside nqueens-rollback.ts with no recovery code, in
 *  app mode (stock) and in rollback mode. */
const APP_SPECIFIC: Mode = { key: 'app-specific', label: 'app-specific recovery (examples/nqueens/nqueens.ts), app mode', recovery: {}, program: 'nqueens-app-specific' };
/** The machine's floor for logging (heat only): app mode, each received message also sent raw to
 *  a bare logger process, the receive not waiting (as HMPL's) or waiting (floor-sync) for it. */
const FLOOR_MODES: Mode[] = [
  { key: 'floor', label: 'floor: app mode + every received message to a bare logger, not awaited', recovery: {}, floor: 'async' },
  { key: 'floor-sync', label: 'floor: app mode + every received message to a bare logger, awaited', recovery: {}, floor: 'sync' },
];
/** The crashes run with checkpoints every 500 ms, under each logging mode in turn. */
const CRASH_MODES: Mode[] = [
  MODES[3] as Mode,
  { key: 'hmpl-500ms', label: 'rollback hmpl/nco, checkpoint every 500 ms', recovery: { recovery: 'rollback', logging: 'hmpl', checkpointInterval: '500' } },
];

/** What bench/rollback-probe.ts writes at a process's exit. */
export type Probe = {
  vpid: number; rank: number; restored: boolean; startMs: number; initCalledMs: number; initDoneMs: number;
  recoverStartMs: number; fetchDoneMs: number; recoverDoneMs: number; replayed: number; restoredFrom: number;
  snaps: number[]; checkpoints: [number, number, number][]; appends: number; appendBytes: number; appendMs: number[];
};
/** `load`: the 1-minute load average when the run ended. */
export type RunSample = { app: App; mode: string; task: string; round: number; seconds: number; load: number; probes: Probe[] };

const heatArgs = (p: typeof HEAT): string[] => ['examples/heat/heat.ts', '--rows', String(p.rows), '--cols', String(p.cols), '--steps', String(p.steps)];
const args = (app: App, mode: Mode): string[] =>
  mode.program === 'nqueens-app-specific' ? ['examples/nqueens/nqueens.ts', '--n', String(NQ.n)]
    : app === 'heat' ? heatArgs(HEAT) : app === 'heat-compute' ? heatArgs(HEAT_COMPUTE) : ['examples/nqueens/nqueens-rollback.ts', '--n', String(NQ.n)];

class Cluster {
  readonly seen = new Map<number, string | null>();
  /** The bare loggers' ports, one per rank (startFloor), for the floor modes. */
  private floorPorts: number[] = [];
  private readonly sinks: ChildProcess[] = [];
  private constructor(readonly root: string, readonly dir: string, readonly config: ClusterConfig, readonly op: OperatorClient) {}

  static async start(allowInject = false): Promise<Cluster> {
    const root = mkdtempSync(join(tmpdir(), 'trine-bench-rollback-'));
    const dir = join(root, 'cluster');
    try {
      if ((await up({ dir, nodes: 4, allowInject })) !== 0) throw new Error('bench: trine up did not bring the cluster up');
      const config = loadCluster(dir);
      return new Cluster(root, dir, config, await OperatorClient.open(config));
    } catch (e) {
      await tearDown(root, dir, new Map());
      throw e;
    }
  }

  /** Start one bare logger per rank (bench/floor-sink.ts) and learn their ports. */
  async startFloor(): Promise<void> {
    for (let r = 0; r < RANKS; r++) {
      const sink = spawn(process.execPath, ['--import', 'tsx', FLOOR_SINK], { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] });
      this.sinks.push(sink);
      const port = await new Promise<number>((resolvePort, reject) => {
        sink.stdout!.once('data', (b: Buffer) => {
          const m = /^port (\d+)/.exec(b.toString());
          if (m === null) reject(new Error(`bench: floor-sink said ${JSON.stringify(b.toString())}`));
          else resolvePort(Number(m[1]));
        });
        sink.once('exit', () => reject(new Error('bench: floor-sink exited')));
      });
      this.floorPorts.push(port);
    }
  }

  async stop(): Promise<void> {
    for (const s of this.sinks) s.kill('SIGKILL');
    await this.op.close().catch(() => {});
    await tearDown(this.root, this.dir, this.seen);
  }

  async view(): Promise<ClusterView | null> {
    return (await readClusterView(this.op, VIEW_TIMEOUT_MS).catch(() => null))?.view ?? null;
  }

  async submit(app: App, mode: Mode): Promise<string> {
    const request = buildSubmit({
      command: [process.execPath, '--import', 'tsx', '--import', PROBE, ...(mode.floor === undefined ? [] : ['--import', FLOOR_PROBE]), ...args(app, mode)],
      size: RANKS, name: `${app}-${mode.key}`,
      env: mode.floor === undefined ? [] : [`TRINE_BENCH_FLOOR_SINKS=${this.floorPorts.join(',')}`, ...(mode.floor === 'sync' ? ['TRINE_BENCH_FLOOR_SYNC=1'] : [])],
      cwd: REPO, baseCwd: REPO, nonce: newNonce(), taskKey: newTaskKey(), linked: true, recovery: mode.recovery,
    });
    const r = await requestOp(this.op, request, OP_TIMEOUT_MS);
    if (!r.ok) throw new Error(`bench: submit refused: ${r.text}`);
    return r.text;
  }

  /** Polls the view until `pick` finds what it wants, noting every task pid seen. */
  async until<T>(what: string, pick: (v: ClusterView) => T | null, limitMs = RUN_LIMIT_MS): Promise<T> {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const v = await this.view();
      if (v !== null) {
        for (const t of v.tasks) for (const p of t.procs) if (p.pid !== null && !this.seen.has(p.pid)) this.seen.set(p.pid, procStartTime(p.pid));
        const got = pick(v);
        if (got !== null) return got;
      }
      if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
      await sleep(POLL_MS * 3);
    }
  }

  taskFile(task: string, vpid: number, ext: 'out' | 'err'): string {
    try {
      return readFileSync(join(this.dir, 'logs', 'tasks', task, `${vpid}.${ext}`), 'utf8');
    } catch {
      return '';
    }
  }

  /** Waits for the task to end normally; its time to solution (rank 0's line) and probes. */
  async finish(task: string, vpids: number[]): Promise<{ seconds: number; probes: Probe[] }> {
    const deadline = Date.now() + RUN_LIMIT_MS;
    const ended = (v: ClusterView): string | null => {
      const t = v.tasks.find((x) => x.id === task);
      return t !== undefined && !['waiting', 'starting', 'running', 'spawning'].includes(t.state) ? t.state : null;
    };
    const failed = (state: string) => new Error(`bench: ${task} ended ${state}: ${this.taskFile(task, 0, 'err').slice(-500)}`);
    let seconds = NaN;
    for (let i = 1; Number.isNaN(seconds); i++) {
      // nqueens-rollback.ts and heat: "… on 4 ranks in 1.23 s"; the app-specific nqueens.ts:
      // "RESULT n=15 solutions=… (… units, 1.2 s)".
      const m = /on \d+ ranks in ([0-9.]+) s|RESULT n=\d+ solutions=\d+ \(\d+ units, ([0-9.]+) s\)/.exec(this.taskFile(task, 0, 'out'));
      if (m !== null) seconds = Number(m[1] ?? m[2]);
      else if (Date.now() > deadline) throw new Error(`bench: ${task} printed no time in ${RUN_LIMIT_MS} ms`);
      else if (i % 20 === 0) {
        const v = await this.view(); // a task that failed prints no time: stop waiting for it
        const state = v === null ? null : ended(v);
        if (state !== null && !/on \d+ ranks in|RESULT n=/.test(this.taskFile(task, 0, 'out'))) throw failed(state);
      } else await sleep(POLL_MS);
    }
    const state = await this.until(`${task} finished`, ended);
    if (state !== 'terminatedNormally') throw failed(state);
    const probes: Probe[] = [];
    for (const vpid of vpids) {
      const line = this.taskFile(task, vpid, 'err').split('\n').find((l) => l.startsWith(PROBE_TAG));
      if (line !== undefined) probes.push(JSON.parse(line.slice(PROBE_TAG.length + 1)) as Probe);
    }
    return { seconds, probes };
  }
}

// ---- 1. Failure-free overhead --------------------------------------------------------------------

async function overhead(c: Cluster, app: App, out: RunSample[], modes = MODES): Promise<void> {
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of modes) {
      await sleep(SETTLE_MS);
      const task = await c.submit(app, mode);
      const { seconds, probes } = await c.finish(task, [0, 1, 2, 3]);
      out.push({ app, mode: mode.key, task, round, seconds, load: loadavg()[0] ?? NaN, probes });
      console.error(`bench rollback: ${app} ${mode.key} round ${round}: ${seconds} s (load ${loadavg()[0]?.toFixed(1)})`);
    }
  }
}

// ---- 2. Recovery after a crash -------------------------------------------------------------------

/** One crash, all times in ms after the kill (wall clock):
 *  - agentReport: the agent reports the death (its log, `proc.report`);
 *  - recorded: the primary records it, broadcasts NTF_DIED and orders the replacement (one step);
 *  - exec: the replacement's process exists (its performance.timeOrigin);
 *  - initCalled: Node, tsx, trine/app and the application's module loaded: it calls Gmpi.init;
 *  - running: the primary records it running (it connected to its agent);
 *  - recoverStart: its mapping came, its protector connection is up, it starts recovering;
 *  - fetched: checkpoints and log fetched from the protector;
 *  - restored: state restored, log re-injected (RollbackRuntime.recover returned);
 *  - initDone: init returned (its peers reconnected);
 *  - firstStep: its first step done (first snapshot() call);
 *  - caughtUp: it finished the step the survivors had reached at the kill (replay done);
 *  - resumed: the last survivor's first step after its pause. */
export type CrashSample = {
  /** A process killed (SIGKILL of rank 2), or its node failed (`trine inject kill-node`: keeper,
   *  agent, standby, replica and task processes). */
  kind: 'process' | 'node';
  mode: string; task: string; seconds: number; steps: { atKill: number; restoredAt: number; reexecuted: number }; replayedEntries: number;
  ms: Record<'agentReport' | 'recorded' | 'exec' | 'initCalled' | 'running' | 'recoverStart' | 'fetched' | 'restored' | 'initDone' | 'firstStep' | 'caughtUp' | 'resumed', number>;
  /** Each survivor's longest gap between two steps, ms. */
  survivorPauseMs: number;
  /** The survivors' pace (median of theirs, steps per second) before the kill and after they
   *  resumed: whether the run goes on as fast once recovered. */
  stepsPerSecond: { before: number; after: number };
  load: number;
  probes: Probe[];
  /** The replacement's own line, `trine: rollback recovery {…}` (fetch, restore and replay ms,
   *  src/app/rollback/rollback-init.ts), to set beside the probe's; null if it printed none. */
  library: Record<string, number> | null;
};

const eventAt = (v: ClusterView, task: string, test: (text: string) => boolean): number | null =>
  v.events.find((e) => e.task === task && test(e.text))?.atMs ?? null;

const LIBRARY_REPORT = 'trine: rollback recovery {';
function libraryReport(stderr: string): Record<string, number> | null {
  const line = stderr.split('\n').find((l) => l.startsWith(LIBRARY_REPORT));
  try {
    return line === undefined ? null : (JSON.parse(line.slice(LIBRARY_REPORT.length - 1)) as Record<string, number>);
  } catch {
    return null;
  }
}

/** Steps per second between snapshot calls `from` and `to` of a process; NaN if none. */
function pace(p: Probe, from: number, to: number): number {
  const t0 = p.snaps[from];
  const t1 = p.snaps[to];
  return from < 0 || t0 === undefined || t1 === undefined || to <= from ? NaN : ((to - from) * 1000) / (t1 - t0);
}

async function crash(c: Cluster, mode: Mode, killAfterMs: number, kind: CrashSample['kind'] = 'process'): Promise<CrashSample> {
  const task = await c.submit('heat', mode);
  const procs = await c.until(`${task} running`, (v) => {
    const t = v.tasks.find((x) => x.id === task);
    return t?.state === 'running' && t.procs.every((p) => p.state === 'running' && p.pid !== null) ? t.procs : null;
  });
  const victim = procs.find((p) => p.vpid === 2);
  if (victim?.pid === null || victim === undefined) throw new Error('bench: no rank 2');
  await sleep(killAfterMs);
  const killMs = Date.now();
  if (kind === 'node') execFileSync(process.execPath, [join(REPO, 'bin', 'trine.js'), 'inject', 'kill-node', victim.node ?? 'n3', '--dir', c.dir]);
  else process.kill(victim.pid, 'SIGKILL');
  const repl = await c.until(`${task} rank 2 replaced`, (v) => {
    const m = v.events.find((e) => e.task === task && /replacing rank 2 .* with VPID (\d+)/.test(e.text));
    const vpid = m === undefined ? null : Number(/with VPID (\d+)/.exec(m.text)?.[1]);
    if (vpid === null) return null;
    const running = eventAt(v, task, (t) => t.startsWith(`${task}/${vpid} running`));
    // A process's death is recorded on its agent's report; a node's, when the group declares
    // the node lost (its event names no task).
    const recorded = kind === 'node'
      ? v.events.find((e) => e.text.startsWith(`node ${victim.node} lost`))?.atMs ?? null
      : eventAt(v, task, (t) => t.startsWith(`${task}/2 terminated abnormally`));
    return running === null || recorded === null ? null : { vpid, running, recorded };
  });
  const { seconds, probes } = await c.finish(task, [0, 1, 3, repl.vpid]);
  const r = probes.find((p) => p.vpid === repl.vpid);
  const survivors = probes.filter((p) => p.vpid !== repl.vpid);
  if (r === undefined || survivors.length !== 3) throw new Error(`bench: ${task}: probes missing (${probes.map((p) => p.vpid).join(', ')})`);
  const agent = c.config.config.membership.agents.find((a) => a.node === victim.node)?.id ?? 'a3';
  // A failed node's agent reports nothing: its processes' deaths come from the node's loss.
  const report = kind === 'node' ? undefined : logEvents(c.dir, agent, 'proc.report', killMs - 5).find((l) => l.line['task'] === task && l.line['vpid'] === 2);
  // Steps: every rank calls snapshot() once per step. The survivors' count at the kill is the
  // step reached; the replacement's own count tells where its checkpoint was.
  const atKill = Math.max(...survivors.map((p) => p.snaps.filter((s) => p.initDoneMs + s < killMs).length));
  const restoredAt = HEAT.steps - r.snaps.length;
  const reexecuted = Math.max(0, atKill - restoredAt);
  const abs = (p: Probe, i: number) => p.initDoneMs + (p.snaps[i] ?? NaN);
  const gaps = survivors.map((p) => {
    let best = { gap: 0, end: NaN };
    for (let i = 1; i < p.snaps.length; i++) {
      const gap = (p.snaps[i] as number) - (p.snaps[i - 1] as number);
      if (abs(p, i) > killMs && gap > best.gap) best = { gap, end: abs(p, i) };
    }
    return best;
  });
  const after = (t: number) => t - killMs;
  return {
    kind, mode: mode.key, task, seconds, steps: { atKill, restoredAt, reexecuted }, replayedEntries: r.replayed,
    ms: {
      agentReport: report === undefined ? NaN : after(report.atMs), recorded: after(repl.recorded), exec: after(r.startMs),
      initCalled: after(r.initCalledMs), running: after(repl.running), recoverStart: after(r.recoverStartMs), fetched: after(r.fetchDoneMs),
      restored: after(r.recoverDoneMs), initDone: after(r.initDoneMs), firstStep: after(abs(r, 0)),
      caughtUp: after(reexecuted > 0 ? abs(r, reexecuted - 1) : abs(r, 0)), resumed: after(Math.max(...gaps.map((g) => g.end))),
    },
    survivorPauseMs: Math.max(...gaps.map((g) => g.gap)),
    stepsPerSecond: {
      before: median(survivors.map((p) => pace(p, 0, p.snaps.filter((t) => p.initDoneMs + t < killMs).length - 1))),
      after: median(survivors.map((p, i) => pace(p, p.snaps.findIndex((t) => p.initDoneMs + t >= (gaps[i]?.end ?? Infinity)), p.snaps.length - 1))),
    },
    load: loadavg()[0] ?? NaN, probes, library: libraryReport(c.taskFile(task, repl.vpid, 'err')),
  };
}

// ---- Figures -------------------------------------------------------------------------------------

const median = (xs: readonly number[]): number => quantile(xs, 0.5);
const MODE_NAMES: Record<string, string> = Object.fromEntries([...MODES, APP_SPECIFIC, ...FLOOR_MODES].map((m) => [m.key, m.label]));

function overheadFigures(app: App, runs: RunSample[]): Figure[] {
  const out: Figure[] = [];
  const of = (mode: string) => runs.filter((r) => r.app === app && r.mode === mode);
  const base = new Map(of('app').map((r) => [r.round, r.seconds]));
  for (const m of [...MODES, APP_SPECIFIC, ...FLOOR_MODES]) {
    const rs = of(m.key);
    if (rs.length === 0) continue;
    const secs = rs.map((r) => r.seconds);
    out.push({ name: `${app}: ${m.label}: time to solution, median of ${rs.length}`, value: median(secs), unit: 's' });
    out.push({ name: `${app}: ${m.label}: time to solution, min`, value: Math.min(...secs), unit: 's' });
    out.push({ name: `${app}: ${m.label}: time to solution, max`, value: Math.max(...secs), unit: 's' });
    if (m.key === 'app') continue;
    const ratios = rs.flatMap((r) => (base.has(r.round) ? [r.seconds / (base.get(r.round) as number)] : []));
    out.push({ name: `${app}: ${m.label} / app mode, median of the rounds' ratios`, value: median(ratios), unit: '×' });
    out.push({ name: `${app}: ${m.label} / app mode, lowest round`, value: Math.min(...ratios), unit: '×' });
    out.push({ name: `${app}: ${m.label} / app mode, highest round`, value: Math.max(...ratios), unit: '×' });
    const cks = rs.flatMap((r) => r.probes.flatMap((p) => p.checkpoints));
    if (cks.length > 0) {
      out.push({ name: `${app}: ${m.label}: checkpoints per rank per run, mean`, value: cks.length / (rs.length * RANKS), unit: 'checkpoints' });
      out.push({ name: `${app}: ${m.label}: one checkpoint (save, encode, put, acknowledged), p50`, value: median(cks.map((k) => k[1])), unit: 'ms' });
      out.push({ name: `${app}: ${m.label}: one checkpoint, max`, value: Math.max(...cks.map((k) => k[1])), unit: 'ms' });
    }
  }
  // Each logging mode against the machine's floor for it, round by round: HMPL against the bare
  // logger not awaited, RBML against it awaited.
  for (const [key, floor] of [['hmpl', 'floor'], ['rbml', 'floor-sync']] as const) {
    const fl = new Map(of(floor).map((r) => [r.round, r.seconds]));
    const ratios = of(key).flatMap((r) => (fl.has(r.round) ? [r.seconds / (fl.get(r.round) as number)] : []));
    if (ratios.length === 0) continue;
    out.push({ name: `${app}: ${MODE_NAMES[key]} / ${floor}, median of the rounds' ratios`, value: median(ratios), unit: '×' });
    out.push({ name: `${app}: ${MODE_NAMES[key]} / ${floor}, lowest round`, value: Math.min(...ratios), unit: '×' });
    out.push({ name: `${app}: ${MODE_NAMES[key]} / ${floor}, highest round`, value: Math.max(...ratios), unit: '×' });
  }
  // Sizes and the in-cluster append latency, from the logging-only runs.
  const logged = of('rbml').flatMap((r) => r.probes);
  const units = app === 'nqueens' ? null : HEAT.steps;
  for (const rank of [0, 1]) {
    const ps = logged.filter((p) => p.rank === rank);
    if (ps.length === 0) continue;
    const per = units ?? median(ps.map((p) => p.snaps.length));
    const what = app === 'nqueens' ? 'unit (snapshot call)' : 'step';
    out.push({ name: `${app}: rank ${rank}: log entries per ${what}`, value: median(ps.map((p) => p.appends)) / per, unit: 'entries' });
    out.push({ name: `${app}: rank ${rank}: log bytes per ${what}`, value: median(ps.map((p) => p.appendBytes)) / per, unit: 'B' });
  }
  const lat = logged.flatMap((p) => p.appendMs);
  if (lat.length > 0) {
    out.push({ name: `${app}: log append → protector's acknowledgement, in the cluster, p50`, value: quantile(lat, 0.5) * 1000, unit: 'µs' });
    out.push({ name: `${app}: log append → protector's acknowledgement, in the cluster, p99`, value: quantile(lat, 0.99) * 1000, unit: 'µs' });
  }
  const ck = of('rbml-500ms').flatMap((r) => r.probes);
  for (const rank of [0, 1]) {
    const sizes = ck.filter((p) => p.rank === rank).flatMap((p) => p.checkpoints.map((k) => k[2]));
    if (sizes.length > 0) out.push({ name: `${app}: rank ${rank}: checkpoint size`, value: median(sizes), unit: 'B' });
  }
  return out;
}

function crashFigures(what: string, cs: CrashSample[]): Figure[] {
  const out: Figure[] = [];
  if (cs.length === 0) return out;

  const keys = Object.keys(cs[0]?.ms ?? {}) as (keyof CrashSample['ms'])[];
  for (const k of keys) {
    const xs = cs.map((c) => c.ms[k]);
    out.push({ name: `${what}: kill → ${k}, median of ${cs.length}`, value: median(xs), unit: 'ms' });
    out.push({ name: `${what}: kill → ${k}, max`, value: Math.max(...xs), unit: 'ms' });
  }
  out.push({ name: `${what}: steps re-executed by the replacement, median`, value: median(cs.map((c) => c.steps.reexecuted)), unit: 'steps' });
  out.push({ name: `${what}: log entries re-injected by the replacement, median`, value: median(cs.map((c) => c.replayedEntries)), unit: 'entries' });
  out.push({ name: `${what}: longest pause of a survivor, median`, value: median(cs.map((c) => c.survivorPauseMs)), unit: 'ms' });
  out.push({ name: `${what}: time to solution with one crash, median`, value: median(cs.map((c) => c.seconds)), unit: 's' });
  out.push({ name: `${what}: survivors' pace before the kill, median`, value: median(cs.map((c) => c.stepsPerSecond.before)), unit: 'steps/s' });
  out.push({ name: `${what}: survivors' pace after they resumed, median`, value: median(cs.map((c) => c.stepsPerSecond.after)), unit: 'steps/s' });
  return out;
}

export async function benchRollback(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const loadAtStart = loadavg();
  for (const f of await benchProtector()) figures.push({ ...f, name: `floor: protector on loopback, in one process: ${f.name}` });
  const c = await Cluster.start();
  const runs: RunSample[] = [];
  const crashes: CrashSample[] = [];
  try {
    // One run of each kind first, not counted: the cluster's first tasks pay its warm-up.
    for (const m of [MODES[0], MODES[MODES.length - 1]] as Mode[]) await c.finish(await c.submit('heat', m), []);
    if (PARTS.has('overhead-heat')) {
      await c.startFloor();
      await overhead(c, 'heat', runs, [...MODES, ...FLOOR_MODES]);
    }
    if (PARTS.has('overhead-heat-compute')) await overhead(c, 'heat-compute', runs, MODES.slice(0, 3));
    if (PARTS.has('overhead-nqueens')) await overhead(c, 'nqueens', runs, [...MODES, APP_SPECIFIC]);
    // Kill a little before the middle of a failure-free run with checkpoints every 500 ms,
    // counted from the moment all four run (init takes a few hundred ms more).
    // The failure-free time of the same logging (HMPL's with no checkpoint: its 500 ms runs are
    // the crashes'), or 5 s if this run measured none (TRINE_BENCH_ROLLBACK_ROUNDS=0).
    const ff = (m: Mode): number => {
      const key = m.key === 'rbml-500ms' ? m.key : 'hmpl';
      const xs = runs.filter((r) => r.app === 'heat' && r.mode === key).map((r) => r.seconds * 1000);
      return xs.length === 0 ? 5_000 : median(xs);
    };
    for (let i = 0; i < (PARTS.has('crash') ? CRASHES : 0); i++) {
      for (const mode of CRASH_MODES) {
        await sleep(SETTLE_MS);
        try {
          const s = await crash(c, mode, 300 + 0.4 * ff(mode));
          crashes.push(s);
          console.error(`bench rollback: crash ${i + 1}, ${mode.key}: ${JSON.stringify(s.ms)}`);
        } catch (e) {
          // Rank 2 already gone (the run finished before the kill) or a run that failed: said,
          // not counted; the next trial goes on once this task has ended.
          console.error(`bench rollback: crash ${i + 1}, ${mode.key}: not counted: ${(e as Error).message}`);
          await sleep(5_000);
        }
      }
    }
    // Node failures last: each on a cluster of its own, with fault injection allowed.
    for (let i = 0; i < (PARTS.has('node-crash') ? NODE_CRASHES : 0); i++) {
      for (const mode of CRASH_MODES) {
        const n = await Cluster.start(true);
        try {
          const s = await crash(n, mode, 300 + 0.4 * ff(mode), 'node');
          crashes.push(s);
          console.error(`bench rollback: node failure ${i + 1}, ${mode.key}: ${JSON.stringify(s.ms)}`);
        } catch (e) {
          console.error(`bench rollback: node failure ${i + 1}, ${mode.key}: not counted: ${(e as Error).message}`);
        } finally {
          await n.stop();
        }
      }
    }
    figures.push({ name: 'heat: row (one halo message)', value: HEAT_ROW_BYTES, unit: 'B' });
    figures.push(...overheadFigures('heat', runs), ...overheadFigures('heat-compute', runs), ...overheadFigures('nqueens', runs));
    const appSteps = runs.filter((r) => r.app === 'heat' && r.mode === 'app').map((r) => (r.seconds * 1000) / HEAT.steps);
    figures.push({ name: 'heat: app mode, one step (halo exchange, sweep, allreduce), median', value: median(appSteps), unit: 'ms' });
    for (const m of CRASH_MODES) {
      figures.push(...crashFigures(`crash (${m.key})`, crashes.filter((x) => x.mode === m.key && x.kind === 'process')));
      figures.push(...crashFigures(`node failure (${m.key})`, crashes.filter((x) => x.mode === m.key && x.kind === 'node')));
    }
    figures.push({ name: 'load average (1 min) at the start / end', value: loadAtStart[0] ?? NaN, unit: `/ ${loadavg()[0]?.toFixed(2)}` });
  } finally {
    await c.stop();
    // Written whatever happened, so a run that failed late keeps what it measured.
    const dir = join(here, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'rollback.json'), JSON.stringify({ at: new Date().toISOString(), heat: HEAT, heatCompute: HEAT_COMPUTE, nqueens: NQ, modes: MODE_NAMES, runs, crashes }, null, 1));
  }
  return figures;
}

const argv1 = process.argv[1];
if (argv1 !== undefined && import.meta.url === pathToFileURL(resolve(argv1)).href) {
  for (const f of await benchRollback()) console.log(`${f.name}: ${Math.abs(f.value) >= 100 ? f.value.toFixed(0) : f.value.toFixed(3)} ${f.unit}`);
  process.exit(0);
}
