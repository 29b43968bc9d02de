// Task and process benchmarks on a real local cluster (docs/PERFORMANCE.md "Tasks and
// processes"): `trine up --nodes 4` in a temporary dir (the watchdog, three replicas, four keepers
// with their agents, each its own process over WebSockets on loopback), driven in-process by the
// operator client the CLI uses (cli/op-client.ts). Measures
//   - spawn overhead: submit → every process running as the primary records it, minus the bare
//     Node spawn of as many processes, per process, for N = 1, 4 and 16 (16 = 4 per node);
//   - crash detection: `kill -9` of a running task process → the primary records its death;
//   - node failure: SIGKILL of a node's keeper, agent(s) and task processes → the primary
//     declares the node lost (PROTOCOL §8.4).
// Manager times are the primary's journal (ClusterView `events[].atMs`, its clock: src/daemon/
// run-core.ts clockMs); agent- and backup-side steps come from their logs (wall clock, ms).
// bench/run.ts imports benchTasks(); run alone with `node --import tsx bench/tasks.ts`; with
// `--hosts` (root only) the same runs on namespace hosts built from `trine init` bundles
// (test/hosts), where a node failure is its link cut, not a kill (tasks-hosts.json).
// Everything started is stopped at the end (trine down's machinery, then a sweep of the dir).
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newNonce, OP_TIMEOUT_MS, readClusterView, requestOp, VIEW_TIMEOUT_MS } from '../cli/op-client.ts';
import { toViewAnswer } from '../cli/replies.ts';
import { OperatorClient } from '../cli/status-client.ts';
import { buildSubmit, newTaskKey } from '../cli/task-args.ts';
import { up } from '../cli/up.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { ClusterEvent, ClusterView } from '../src/core/status.ts';
import { procStartTime, readProcsFile } from '../src/daemon/agent.ts';
import { loadCluster, paths, type Cluster } from '../src/io/cluster-dir.ts';
import { HostsCluster } from '../test/hosts/cluster.ts';
import { killQuietly, logEvents, processesNaming, startKeeper, tearDown } from './cluster-tools.ts';
import type { Figure } from './crypto.ts';
import { p50, p99 } from './stats.ts';

export type { Figure } from './crypto.ts';

/** The task executable: dynamically linked coreutils `sleep`, given by absolute path so no PATH
 *  search is timed. It outlives every trial; the bench kills what it starts. */
const SLEEPER = '/bin/sleep';
const SLEEP_ARGS = ['120'];
/** Process counts of the spawn figures: 16 fills the 4 slots of each of the 4 nodes. */
const SPAWN_SIZES = [1, 4, 16] as const;
/** Quiet time before each measured action, so the last trial's traffic has settled. */
const SETTLE_MS = 300;
/** How long a node may take to come back after it was declared failed (agent start ≈ 2–5 s). */
const NODE_BACK_MS = 45_000;
/** Time allowed for the watchdog's reset driver to act before the bench restarts the keeper. */
const RESET_GRACE_MS = 4_000;
const POLL_MS = 200;
const here = fileURLToPath(new URL('.', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The replicas' clock (run-core clockMs: wall time at process start + monotonic time) as this
 *  process can reproduce it. The wall clock is slewed (≈ 50 ppm on the VM), so Node processes
 *  started minutes apart disagree by milliseconds; the bench takes the wall/monotonic offset at
 *  a Date.now() edge just before the daemons start, so its clock and theirs differ by the slew
 *  of those few seconds only. */
function clusterClock(): () => number {
  const start = Date.now();
  let wall = start;
  while (wall === start) wall = Date.now();
  const mono = performance.now();
  return () => Math.floor(wall + (performance.now() - mono));
}





/** The bare OS cost: `n` spawns with the Spawner's options (src/io/spawner.ts: detached, stdin
 *  /dev/null, stdout and stderr to append-mode files, explicit env, cwd), timed from the first
 *  spawn() call to the last 'spawn' event. The log files are opened before the clock starts. */
async function bareSpawn(n: number, scratch: string): Promise<number> {
  const fds = Array.from({ length: n }, (_, i) => [openSync(join(scratch, `${i}.out`), 'a'), openSync(join(scratch, `${i}.err`), 'a')] as const);
  const children: ChildProcess[] = [];
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
  let elapsedMs = 0;
  try {
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      let left = n;
      for (const [out, err] of fds) {
        const c = spawn(SLEEPER, SLEEP_ARGS, { cwd: scratch, env, detached: true, stdio: ['ignore', out, err] });
        children.push(c);
        c.once('error', reject);
        c.once('spawn', () => {
          if (--left === 0) resolve();
        });
      }
    });
    elapsedMs = performance.now() - t0;
  } finally {
    for (const [out, err] of fds) {
      closeSync(out);
      closeSync(err);
    }
    await Promise.all(children.map((c) => new Promise((r) => {
      if (c.exitCode !== null || c.signalCode !== null || c.pid === undefined) return r(null);
      c.once('exit', r);
      killQuietly(c.pid);
    })));
  }
  return elapsedMs;
}


type Primary = { id: ProcessId; view: ClusterView };
type Running = { vpid: number; pid: number; node: string }[];

/** A `trine up --nodes 4` cluster in a temporary dir and the operator's client to it. */
class TaskCluster {
  /** Task process pids seen (with start times), so none can outlive the bench. */
  private readonly seen = new Map<number, string | null>();

  private constructor(
    readonly root: string,
    readonly dir: string,
    readonly scratch: string,
    /** The replicas' clock (clusterClock). */
    readonly now: () => number,
    readonly cluster: Cluster,
    private client: OperatorClient | null,
    /** A cluster of namespace hosts (--hosts), or null for `trine up` on loopback. */
    readonly hosts: HostsCluster | null = null,
  ) {}

  /** The dir holding process `id`'s log: the cluster dir, or its host's bundle. */
  logDirOf(id: ProcessId): string {
    return this.hosts === null ? this.dir : this.hosts.logDirOf(id);
  }

  /** The same on namespace hosts built from `trine init` bundles (test/hosts), driven from the
   *  root namespace through a port of its own on the bed; root only. */
  static async startHosts(): Promise<TaskCluster> {
    const now = clusterClock();
    const hosts = await HostsCluster.start({ rootPort: true });
    // The tasks run as the cluster's task user (nobody): their working directory must be one it
    // may enter, outside the bed's root-only directory.
    const scratch = mkdtempSync(join(tmpdir(), 'trine-bench-scratch-'));
    chmodSync(scratch, 0o755);
    let tc: TaskCluster | null = null;
    try {
      const cluster = loadCluster(hosts.opBundle);
      tc = new TaskCluster(hosts.root, hosts.out, scratch, now, cluster, await OperatorClient.open(cluster), hosts);
      await tc.primary();
      await tc.idle('after start');
      return tc;
    } catch (e) {
      await (tc === null ? hosts.destroy() : tc.stop());
      throw e;
    }
  }

  /** Starts the cluster; on failure stops whatever was started. */
  static async start(): Promise<TaskCluster> {
    const root = mkdtempSync(join(tmpdir(), 'trine-bench-tasks-'));
    const dir = join(root, 'cluster');
    const scratch = join(root, 'scratch');
    mkdirSync(scratch);
    const now = clusterClock();
    let tc: TaskCluster | null = null;
    try {
      if ((await up({ dir, nodes: 4 })) !== 0) throw new Error('bench: trine up did not bring the cluster up');
      const cluster = loadCluster(dir);
      tc = new TaskCluster(root, dir, scratch, now, cluster, await OperatorClient.open(cluster));
      await tc.primary(); // links up before the first timed request
      await tc.idle('after start');
      return tc;
    } catch (e) {
      await (tc === null ? tearDown(root, dir, new Map()) : tc.stop());
      throw e;
    }
  }

  async stop(): Promise<void> {
    await this.client?.close().catch(() => {});
    this.client = null;
    if (this.hosts !== null) {
      await this.hosts.destroy();
      rmSync(this.scratch, { recursive: true, force: true });
    } else await tearDown(this.root, this.dir, this.seen);
  }

  private get op(): OperatorClient {
    if (this.client === null) throw new Error('bench: the cluster is stopped');
    return this.client;
  }

  agentOf(node: string): ProcessId {
    const a = this.cluster.config.membership.agents.find((x) => x.node === node);
    if (a === undefined) throw new Error(`bench: no agent on ${node}`);
    return a.id;
  }

  /** The primary's status: its view and its own journal. */
  async primary(): Promise<Primary | null> {
    const answers = await this.op.queryReplicas(VIEW_TIMEOUT_MS);
    for (const a of answers.values()) {
      if (!a.ok || a.status.role !== 'primary') continue;
      const v = toViewAnswer(a.status);
      if (v !== null) return { id: v.id, view: v.view };
    }
    return null;
  }

  /** Polls the primary (after `firstMs` of quiet, so the polling stays off the measured path)
   *  until `pick` finds what it wants. */
  async until<T>(what: string, pick: (p: Primary) => T | null, firstMs = SETTLE_MS, timeoutMs = 20_000): Promise<T> {
    await sleep(firstMs);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const p = await this.primary();
      const got = p === null ? null : pick(p);
      if (got !== null) return got;
      if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
      await sleep(POLL_MS);
    }
  }

  /** Submits `size` sleepers; the send time on the replicas' clock and on the wall clock (logs). */
  async submit(size: number): Promise<{ task: string; sentAtMs: number; sentWallMs: number }> {
    const request = buildSubmit({ command: [SLEEPER, ...SLEEP_ARGS], size, name: 'bench', env: [], cwd: this.scratch, baseCwd: this.scratch, nonce: newNonce(), taskKey: newTaskKey() });
    const sentWallMs = Date.now();
    const sentAtMs = this.now();
    const outcome = await requestOp(this.op, request, OP_TIMEOUT_MS);
    if (!outcome.ok) throw new Error(`bench: submit refused: ${outcome.text}`);
    return { task: outcome.text, sentAtMs, sentWallMs };
  }

  /** Every process of `task` running, with pid and node (noting the pids for stop()). */
  running(task: string): (p: Primary) => Running | null {
    return (p) => {
      const t = p.view.tasks.find((x) => x.id === task);
      if (t === undefined || t.state !== 'running' || !t.procs.every((x) => x.state === 'running' && x.pid !== null && x.node !== null)) return null;
      const procs = t.procs.map((x) => ({ vpid: x.vpid, pid: x.pid as number, node: x.node as string }));
      for (const x of procs) if (!this.seen.has(x.pid)) this.seen.set(x.pid, procStartTime(x.pid));
      return procs;
    };
  }

  async kill(task: string): Promise<void> {
    const r = await requestOp(this.op, { type: 'task.kill', nonce: newNonce(), task }, OP_TIMEOUT_MS);
    if (!r.ok && !r.text.includes('already finished')) throw new Error(`bench: kill ${task} refused: ${r.text}`);
  }

  /** Waits until every node is up with no slot in use, in the view two replicas agree on
   *  (what `trine nodes --json` shows). */
  async idle(what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await readClusterView(this.op, VIEW_TIMEOUT_MS).catch(() => null);
      if (v !== null && v.view.nodes.every((n) => n.state === 'up' && n.used === 0)) return;
      if (Date.now() > deadline) throw new Error(`bench: cluster not idle ${what}`);
      await sleep(POLL_MS);
    }
  }
}

const journal = (p: Primary, test: (e: ClusterEvent) => boolean): ClusterEvent | null => p.view.events.find(test) ?? null;

export type SpawnSamples = {
  size: number; bareMs: number[]; submitToRunningMs: number[]; submitToOrderedMs: number[]; orderedToRunningMs: number[];
  /** Submit → the last agent logs its spawn report (wall clock, agent logs). */
  submitToAgentsReportedMs: number[];
};
export type CrashSample = { task: string; node: string; killToRecordedMs: number; killToAgentReportMs: number | null };
export type NodeFailureSample = {
  node: string; killed: number; killToDeclaredMs: number; killToFirstSilentMs: number | null; killToUnreachableMs: number | null;
  killToRejoinedMs: number | null;
  /** Who restarted the node's keeper: the watchdog's reset driver, the bench standing in for
   *  it, or nobody in NODE_BACK_MS. */
  back: 'watchdog' | 'bench' | 'no';
};

/** 1. Spawn overhead: bare spawns, then submit → every process running at the primary. */
async function measureSpawn(tc: TaskCluster, size: number, trials: number): Promise<SpawnSamples> {
  const s: SpawnSamples = { size, bareMs: [], submitToRunningMs: [], submitToOrderedMs: [], orderedToRunningMs: [], submitToAgentsReportedMs: [] };
  await bareSpawn(size, tc.scratch); // warm-up
  for (let i = 0; i < trials; i++) s.bareMs.push(await bareSpawn(size, tc.scratch));
  // Trial -1 warms the path up and is not counted.
  for (let i = -1; i < trials; i++) {
    await sleep(SETTLE_MS);
    const { task, sentAtMs, sentWallMs } = await tc.submit(size);
    const times = await tc.until(`${task} running`, (p) => {
      if (tc.running(task)(p) === null) return null;
      const ordered = journal(p, (e) => e.task === task && e.vpid === null && e.text.startsWith(`${task} submitted`));
      const ran = p.view.events.filter((e) => e.task === task && e.vpid !== null && e.text.startsWith(`${task}/${e.vpid} running`));
      if (ordered === null || ran.length !== size) return null;
      return { ordered: ordered.atMs, allRunning: Math.max(...ran.map((e) => e.atMs)) };
    });
    if (i >= 0) {
      s.submitToRunningMs.push(times.allRunning - sentAtMs);
      s.submitToOrderedMs.push(times.ordered - sentAtMs);
      s.orderedToRunningMs.push(times.allRunning - times.ordered);
      const reported = tc.cluster.config.membership.agents.flatMap((a) =>
        logEvents(tc.logDirOf(a.id), a.id, 'proc.report', sentWallMs).filter((l) => l.line['task'] === task && l.line['kind'] === 'spawnSucceeded').map((l) => l.atMs));
      if (reported.length === size) s.submitToAgentsReportedMs.push(Math.max(...reported) - sentWallMs);
    }
    await tc.kill(task);
    await tc.idle(`after ${task}`);
  }
  return s;
}

/** 2. Crash detection: four one-process tasks land one per node (placement: most free slots,
 *  ties by name); each process is killed on its own, with the cluster quiet, and its task then
 *  ends abnormally. */
async function measureCrash(tc: TaskCluster, rounds: number): Promise<CrashSample[]> {
  const out: CrashSample[] = [];
  for (let round = 0; round < rounds; round++) {
    const tasks: string[] = [];
    for (let i = 0; i < 4; i++) tasks.push((await tc.submit(1)).task);
    for (const task of tasks) {
      const [proc] = await tc.until(`${task} running`, tc.running(task));
      if (proc === undefined) throw new Error(`bench: ${task} has no process`);
      await sleep(SETTLE_MS);
      const wallAtMs = Date.now();
      const killedAtMs = tc.now();
      process.kill(proc.pid, 'SIGKILL');
      const recordedAtMs = await tc.until(`${task} recorded dead`, (p) =>
        journal(p, (e) => e.task === task && e.vpid === proc.vpid && e.text.startsWith(`${task}/${proc.vpid} terminated abnormally`))?.atMs ?? null);
      const report = logEvents(tc.logDirOf(tc.agentOf(proc.node)), tc.agentOf(proc.node), 'proc.report', wallAtMs).find((l) => l.line['task'] === task && l.line['kind'] === 'terminatedAbnormally');
      out.push({ task, node: proc.node, killToRecordedMs: recordedAtMs - killedAtMs, killToAgentReportMs: report === undefined ? null : report.atMs - wallAtMs });
    }
    await tc.idle(`after crash round ${round + 1}`);
  }
  return out;
}

/** 3. Node failure: a task of one process per node; one node's keeper, agent, standby agent and
 *  task processes SIGKILLed together; the primary's "node lost"; the node back up. */
async function measureNodeFailure(tc: TaskCluster, trials: number, notes: string[]): Promise<NodeFailureSample[]> {
  const out: NodeFailureSample[] = [];
  const { dir } = tc;
  const { agents, replicas, scc } = tc.cluster.config.membership;
  for (let trial = 0; trial < trials; trial++) {
    const node = agents[trial % agents.length]?.node as string;
    const agent = tc.agentOf(node);
    const { task } = await tc.submit(4);
    const procs = await tc.until(`${task} running`, tc.running(task));
    const before = (await tc.until('node inc', (p) => p.view.nodes.find((n) => n.node === node) ?? null, 0)).inc;
    await sleep(SETTLE_MS);
    const daemons = tc.hosts === null ? processesNaming(dir, agent) : [];
    const taskPids = new Set(procs.filter((x) => x.node === node).map((x) => x.pid));
    if (tc.hosts === null) for (const r of readProcsFile(paths.procsFile(dir, agent)).procs) taskPids.add(r.pid);
    const wallAtMs = Date.now();
    const killedAtMs = tc.now();
    // On namespace hosts the node is lost the way a real one is: its link goes down.
    if (tc.hosts !== null) await tc.hosts.bed.cut(node);
    else for (const pid of [...daemons, ...taskPids]) killQuietly(pid);
    const declaredAtMs = await tc.until(`node ${node} declared lost`, (p) =>
      journal(p, (e) => e.atMs >= killedAtMs && e.text.startsWith(`node ${node} lost`))?.atMs ?? null, 1_000);
    const primaryId = (await tc.primary())?.id ?? replicas[0];
    const firstOf = (event: string) => {
      const at = replicas.filter((r) => r !== primaryId).flatMap((id) => logEvents(tc.logDirOf(id), id, event, wallAtMs).filter((l) => l.line['agent'] === agent).map((l) => l.atMs));
      return at.length === 0 ? null : Math.min(...at) - wallAtMs;
    };
    // The node comes back when a new incarnation of its agent joins: the watchdog's reset
    // driver restarts the keeper (PROTOCOL §8.4 step 5); if it has not in RESET_GRACE_MS, the
    // bench does what it would, and says so.
    const resetBy = Date.now() + RESET_GRACE_MS;
    let back: NodeFailureSample['back'] = 'watchdog';
    // The command driver (namespace hosts) logs `reset.done` once the power controller booted it.
    const resetEvent = tc.hosts === null ? 'reset.keeper-started' : 'reset.done';
    while (logEvents(tc.logDirOf(scc), scc, resetEvent, wallAtMs).every((l) => l.line['node'] !== node)) {
      if (tc.hosts !== null && Date.now() > resetBy) {
        back = 'no';
        break;
      }
      if (Date.now() > resetBy) {
        back = 'bench';
        startKeeper(dir, agent);
        break;
      }
      await sleep(POLL_MS);
    }
    if (tc.hosts !== null) await tc.hosts.bed.restore(node);
    const rejoinedAtMs = await tc.until(`node ${node} back`, (p) =>
      p.view.nodes.some((n) => n.node === node && n.state === 'up' && n.inc !== before)
        ? (journal(p, (e) => e.atMs > declaredAtMs && e.text.startsWith(`node ${node} joined`))?.atMs ?? null)
        : null, 0, NODE_BACK_MS).catch(() => null);
    if (rejoinedAtMs === null) back = 'no';
    out.push({
      node, killed: daemons.length + taskPids.size, killToDeclaredMs: declaredAtMs - killedAtMs,
      killToFirstSilentMs: firstOf('agent.silent'), killToUnreachableMs: firstOf('node.unreachable'),
      killToRejoinedMs: rejoinedAtMs === null ? null : rejoinedAtMs - killedAtMs, back,
    });
    await tc.kill(task);
    if (back === 'no') {
      notes.push(`node ${node} did not come back within ${NODE_BACK_MS / 1000} s: node failure measured ${trial + 1} times, declaration only`);
      break;
    }
    await tc.idle(`after node ${node} came back`, NODE_BACK_MS);
  }
  return out;
}

export type TaskSamples = {
  /** Wall clock minus the bench's replica clock at the end (slew during the run). */
  clockSlewMs: number;
  /** Load average as each part started (the bench's own cluster included). */
  loadavg: Record<string, number[]>;
  spawn: SpawnSamples[];
  crash: CrashSample[];
  nodeFailure: NodeFailureSample[];
  notes: string[];
};

const values = <T>(xs: readonly T[], f: (x: T) => number | null): number[] => xs.flatMap((x) => { const v = f(x); return v === null ? [] : [v]; });

function figuresOf(samples: TaskSamples): Figure[] {
  const figures: Figure[] = [];
  for (const s of samples.spawn) {
    const bare = p50(s.bareMs);
    const managed = p50(s.submitToRunningMs);
    figures.push(
      { name: `bare spawn of ${s.size} (spawn() → last 'spawn' event) p50`, value: bare, unit: 'ms' },
      { name: `submit → all ${s.size} running at the primary p50`, value: managed, unit: 'ms' },
      { name: `submit → all ${s.size} running at the primary p99`, value: p99(s.submitToRunningMs), unit: 'ms' },
      { name: `  of which submit → primary applies the submit p50 (N=${s.size})`, value: p50(s.submitToOrderedMs), unit: 'ms' },
      { name: `  of which submit applied → all running p50 (N=${s.size})`, value: p50(s.orderedToRunningMs), unit: 'ms' },
      { name: `  submit → last agent reports its spawn p50 (N=${s.size}; agent logs, 1 ms resolution)`, value: p50(s.submitToAgentsReportedMs), unit: 'ms' },
      { name: `manager overhead per process, N=${s.size} ((submit → all running − bare spawn) / N)`, value: (managed - bare) / s.size, unit: 'ms/process' },
    );
  }
  const crash = samples.crash.map((x) => x.killToRecordedMs);
  figures.push(
    { name: 'crash detection p50 (kill -9 → primary records the death)', value: p50(crash), unit: 'ms' },
    { name: 'crash detection p99', value: p99(crash), unit: 'ms' },
    { name: '  of which kill -9 → agent reports it p50 (agent log, 1 ms resolution)', value: p50(values(samples.crash, (x) => x.killToAgentReportMs)), unit: 'ms' },
    { name: 'crash detection samples', value: crash.length, unit: 'kills' },
  );
  const nodes = samples.nodeFailure;
  const declared = nodes.map((x) => x.killToDeclaredMs);
  figures.push(
    { name: 'node failure declared p50 (loopback: SIGKILL of keeper, agent, tasks; hosts: its link cut → primary records "node lost")', value: p50(declared), unit: 'ms' },
    { name: 'node failure declared p99', value: p99(declared), unit: 'ms' },
    { name: '  of which kill → first backup finds the agent silent (2 missed checks) p50', value: p50(values(nodes, (x) => x.killToFirstSilentMs)), unit: 'ms' },
    { name: '  of which kill → first backup finds it unreachable (probe timed out) p50', value: p50(values(nodes, (x) => x.killToUnreachableMs)), unit: 'ms' },
    { name: 'node failure → node up again p50 (watchdog reset, keeper and agent start, join)', value: p50(values(nodes, (x) => x.killToRejoinedMs)), unit: 'ms' },
    { name: 'node failure samples', value: declared.length, unit: 'trials' },
    { name: 'nodes brought back by the watchdog (the rest: keeper restarted by the bench)', value: nodes.filter((x) => x.back === 'watchdog').length, unit: 'trials' },
  );
  return figures;
}

export type BenchTasksOptions = {
  spawnTrials?: number; crashRounds?: number; nodeTrials?: number;
  /** Run on namespace hosts (test/hosts) instead of `trine up` on loopback; needs root. */
  hosts?: boolean;
};

/** Runs the three measurements on one cluster, writes bench/results/tasks.json (figures and
 *  every sample) and returns the figures. */
export async function benchTasks(opts: BenchTasksOptions = {}): Promise<Figure[]> {
  const spawnTrials = opts.spawnTrials ?? Number(process.env['TRINE_BENCH_SPAWN_TRIALS'] ?? 10);
  const crashRounds = opts.crashRounds ?? Number(process.env['TRINE_BENCH_CRASH_ROUNDS'] ?? 10);
  const nodeTrials = opts.nodeTrials ?? Number(process.env['TRINE_BENCH_NODE_TRIALS'] ?? 10);
  const samples: TaskSamples = { clockSlewMs: 0, loadavg: {}, spawn: [], crash: [], nodeFailure: [], notes: [] };
  const tc = await (opts.hosts === true ? TaskCluster.startHosts() : TaskCluster.start());
  // Interrupted: stop the cluster first (its daemons are detached and would outlive us).
  const onSignal = () => void tc.stop().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    samples.loadavg['spawn'] = loadavg();
    for (const size of SPAWN_SIZES) samples.spawn.push(await measureSpawn(tc, size, spawnTrials));
    samples.loadavg['crash'] = loadavg();
    samples.crash = await measureCrash(tc, crashRounds);
    samples.loadavg['nodeFailure'] = loadavg();
    samples.nodeFailure = await measureNodeFailure(tc, nodeTrials, samples.notes);
    samples.clockSlewMs = Date.now() - tc.now();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await tc.stop();
  }
  const figures = figuresOf(samples);
  for (const n of samples.notes) console.error(`bench: ${n}`);
  mkdirSync(join(here, 'results'), { recursive: true });
  writeFileSync(join(here, 'results', opts.hosts === true ? 'tasks-hosts.json' : 'tasks.json'), JSON.stringify({
    mode: opts.hosts === true ? 'namespace hosts' : 'loopback',
    at: new Date().toISOString(), node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model ?? '?',
    executable: [SLEEPER, ...SLEEP_ARGS], benchRssBytes: process.memoryUsage().rss, figures, samples,
  }, null, 2));
  return figures;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(`trine bench tasks: node ${process.version}, ${cpus().length} cpus, load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const hosts = process.argv.includes('--hosts');
  const figures = await benchTasks({ hosts });
  for (const f of figures) console.log(`${f.name}: ${Number.isInteger(f.value) ? f.value : f.value.toFixed(3)} ${f.unit}`);
  console.log(`written ${join(here, 'results', hosts ? 'tasks-hosts.json' : 'tasks.json')}`);
  process.exit(0);
}
