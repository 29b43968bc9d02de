// Ghidrah signal latencies on a real local cluster (spec §8.5 Tables 5.3 and 5.4; PROTOCOL §9):
// `trine up --nodes 4` in a temporary dir and one linked task of four
// test/fixtures/apps/bench-app.mjs processes (one per node): plain JavaScript run by plain `node`
// against the compiled library, as an installed application runs (the bench builds dist/ first,
// tools/build-lib.mjs). Every figure comes from the
// processes' own stdout lines (logs/tasks/<task>/<vpid>.out), stamped with CLOCK_MONOTONIC,
// which every process on the machine shares:
//   - crash: `kill -9` of one process → NTF_DIED handled at the last survivor;
//   - node failure: SIGKILL of a node's keeper, agent, standby and task processes → NTF_DIED
//     handled at the last survivor (the node's replica, if any, keeps running: Table 5.3 row 2);
//   - broadcast: the sender's link.signal() → the last process's handler;
//   - SYNC / KILL / SPAWN: the quorum's last link.signal() → the reply handled at every process
//     (for SPAWN the new process included). KILL's OS part is the agent's SIGTERM → exit report
//     (its log); SPAWN's is a bare spawn of the same command, spawn() → first line, taken just
//     before each sample so both see the same load.
// Breakdowns come from the primary's and the agents' pino logs (Date.now(), 1 ms resolution),
// converted to the monotonic clock with an offset taken at each sample. Each phase also records
// the load average and CPU use (the whole machine's and this bench's): the VM is shared.
// Processes are driven through a control file the bench rewrites (bench-app.mjs says how); a
// killed or crashed process is replaced by a SPAWN of the survivors, itself a SPAWN sample.
// bench/run.ts imports benchSignals(); run alone with `node --import tsx bench/signals.ts`
// (sample counts: TRINE_BENCH_BROADCASTS, _SYNCS, _KILLS, _CRASHES, _NODE_FAILURES, _BARE_KILLS;
// TRINE_BENCH_KEEP keeps the cluster dir). Raw samples go to bench/results/signals.json.
// `--hosts` runs the same on a cluster of network-namespace hosts built from `trine init`
// bundles (test/hosts; root only), where a node failure is its link cut, not a kill, and writes
// signals-hosts.json; `--side-by-side` runs both, one after the other, and prints the headline
// figures beside each other (docs/PERFORMANCE.md §6).
// Everything started is stopped at the end (trine down's machinery, then a sweep of the dir).
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { newNonce, OP_TIMEOUT_MS, readClusterView, requestOp, VIEW_TIMEOUT_MS } from '../cli/op-client.ts';
import { OperatorClient } from '../cli/status-client.ts';
import { buildSubmit, newTaskKey } from '../cli/task-args.ts';
import { up } from '../cli/up.ts';
import type { ProcessId } from '../src/core/ports.ts';
import { GSIG } from '../src/core/signals.ts';
import { loadCluster, type Cluster } from '../src/io/cluster-dir.ts';
import { procStartTime } from '../src/io/run-records.ts';
import { HostsCluster } from '../test/hosts/cluster.ts';
import { killQuietly, logEvents, processesNaming, startKeeper, tearDown } from './cluster-tools.ts';
import type { Figure } from './crypto.ts';
import { p50, p99 } from './stats.ts';

export type { Figure } from './crypto.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const REPO = fileURLToPath(new URL('..', import.meta.url));
const APP = join(REPO, 'test/fixtures/apps/bench-app.mjs');
const APP_COMMAND = [process.execPath, APP];
/** The compiled library bench-app.mjs and the bare kill's target import. */
const LIB = join(REPO, 'dist/app/index.js');
const SIZE = 4;
/** The application signal the broadcasts use (bench-app.mjs). */
const APP_SIGNAL = 100;
/** Quiet time before each measured action, so the previous sample's traffic has settled. */
const SETTLE_MS = 150;
/** Pause before the bench first reads the logs after an action (keeps its reads off the path). */
const FIRST_LOOK_MS = { fast: 60, kill: 150, spawn: 900, node: 500 } as const;
const POLL_MS = 20;
/** How long a sample may take before it counts as failed. */
const SAMPLE_TIMEOUT_MS = { fast: 3_000, kill: 5_000, spawn: 20_000, node: 10_000 } as const;
/** Time the watchdog's reset driver gets before the bench restarts a failed node's keeper. */
const RESET_GRACE_MS = 4_000;
const NODE_BACK_MS = 45_000;
/** How long the task's four processes may take to link up (the task's own start retries
 *  included), and how many submits the bench tries. */
const START_TIMEOUT_MS = 60_000;
const MAX_SUBMITS = 3;
/** Failed samples in a row after which a phase is abandoned. */
const MAX_FAILURES_IN_A_ROW = 3;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** CLOCK_MONOTONIC in ms, as bench-app.mjs stamps its lines. */
const monoNow = (): number => Number(process.hrtime.bigint()) / 1e6;

const maxOf = (xs: readonly number[]) => (xs.length === 0 ? NaN : Math.max(...xs));

/** Wall clock (Date.now(), what pino logs) minus the monotonic clock, at a Date.now() edge. */
function wallMinusMono(): number {
  const a = Date.now();
  let b = a;
  while (b === a) b = Date.now();
  return b - monoNow();
}




/** One line of bench-app.mjs: `kind k=v … mono=T`. */
type AppLine = { kind: string; f: Record<string, string>; mono: number };

/** The task's stdout files, read incrementally. */
class AppLogs {
  private readonly offsets = new Map<number, number>();
  private readonly lines = new Map<number, AppLine[]>();
  /** The dir whose logs/tasks holds each VPID's file, once found. */
  private readonly dirOf = new Map<number, string>();
  /** `dirs`: the cluster dir, or every host's bundle on a cluster of several hosts (a process's
   *  output is on the host that ran it). */
  constructor(private readonly dirs: readonly string[], private readonly task: string) {}

  private refresh(vpid: number): AppLine[] {
    const have = this.lines.get(vpid) ?? [];
    this.lines.set(vpid, have);
    let text: string | null = null;
    for (const dir of this.dirOf.has(vpid) ? [this.dirOf.get(vpid) as string] : this.dirs) {
      try {
        text = readFileSync(join(dir, 'logs', 'tasks', this.task, `${vpid}.out`), 'utf8');
        this.dirOf.set(vpid, dir);
        break;
      } catch {
        // not on this host
      }
    }
    if (text === null) return have;
    const from = this.offsets.get(vpid) ?? 0;
    const end = text.lastIndexOf('\n') + 1;
    if (end <= from) return have;
    for (const raw of text.slice(from, end).split('\n')) {
      const [kind, ...rest] = raw.split(' ');
      if (kind === undefined || kind === '') continue;
      const f: Record<string, string> = {};
      for (const kv of rest) {
        const eq = kv.indexOf('=');
        if (eq > 0) f[kv.slice(0, eq)] = kv.slice(eq + 1);
      }
      have.push({ kind, f, mono: Number(f['mono']) });
    }
    this.offsets.set(vpid, end);
    return have;
  }

  find(vpid: number, kind: string, match: Record<string, number | string> = {}): AppLine | null {
    return this.refresh(vpid).find((l) => l.kind === kind && Object.entries(match).every(([k, v]) => l.f[k] === String(v))) ?? null;
  }

  /** The mono time of `signum(arg)` handled at each of `vpids`, or null until all have it. */
  received(vpids: readonly number[], signum: number, arg: number): number[] | null {
    const at: number[] = [];
    for (const v of vpids) {
      const l = this.find(v, 'recv', { signum, arg });
      if (l === null) return null;
      at.push(l.mono);
    }
    return at;
  }
}

type Member = { pid: number; node: string };

export type SignalSamples = {
  loadavg: Record<string, number[]>;
  broadcast: { from: number; sendToLastMs: number; sendToFirstMs: number }[];
  sync: { lastRequestToLastMs: number; lastRequestToAcceptedMs: number | null; firstToLastRequestMs: number }[];
  kill: {
    vpid: number; lastRequestToLastMs: number; lastRequestToAcceptedMs: number | null; acceptedToSigtermMs: number | null;
    /** Agent: SIGTERM sent → the exit reported (proc.kill → proc.report, 1 ms resolution). */
    osSigtermToExitMs: number | null; exitToNotifiedMs: number | null; notifiedToLastMs: number | null;
  }[];
  spawn: {
    vpid: number; after: 'kill' | 'crash' | 'node'; lastRequestToLastMs: number; lastRequestToAcceptedMs: number | null;
    /** Last request → the new process's first line (its node+tsx start included). */
    lastRequestToStartMs: number | null;
    /** A bare spawn of the same command just before this sample, spawn() → first line. */
    bareToStartMs: number;
    startToLoadedMs: number | null;
    /** trine/app loaded → the agent reports the process connected (Link.init(), the hello). */
    loadedToConnectedMs: number | null;
    /** Connected → Link.init() resolved (report to the group, the mapping back). */
    connectedToReadyMs: number | null;
    readyToLastMs: number | null;
  }[];
  crash: {
    vpid: number; killToLastMs: number; killToFirstMs: number;
    /** kill -9 → the agent sees the process's socket close (the kernel closes its files early in exit). */
    killToSocketClosedMs: number | null;
    /** kill -9 → the agent reports the exit (SIGCHLD, after the kernel has torn the process down). */
    killToAgentReportMs: number | null; killToRecordedMs: number | null; notifiedToLastMs: number | null;
  }[];
  node: {
    node: string; vpids: number[]; killToLastMs: number; killToSilentMs: number | null; killToUnreachableMs: number | null;
    killToDeclaredMs: number | null; notifiedToLastMs: number | null; back: 'watchdog' | 'bench' | 'no';
  }[];
  /** CPU use per phase: the whole machine (/proc/stat) and the processes of this bench (its
   *  cluster, its task processes and itself; a process that ended within the phase is missed,
   *  so the bench's share is a lower bound). The rest is other users of this shared VM. */
  cpu: Record<string, { machineBusyPercent: number; benchPercent: number; seconds: number }>;
  /** `kill` (SIGTERM / SIGKILL) of a bare bench-app process → its exit as the parent sees it. */
  bareKill: { signal: 'SIGTERM' | 'SIGKILL'; toExitMs: number }[];
  notes: string[];
};

/** A `trine up --nodes 4` cluster in a temporary dir with one linked bench-app task. */
class SignalCluster {
  readonly members = new Map<number, Member>();
  /** Task process pids seen (with start times), so none outlives the bench. */
  private readonly seen = new Map<number, string | null>();
  private seq = 0;
  task = '';
  logs: AppLogs | null = null;
  primaryId: ProcessId = 'r1';
  /** The largest VPID adopted so far: a SPAWN's new VPID is larger. */
  highestVpid = -1;

  private constructor(
    readonly root: string, readonly dir: string, readonly ctl: string, readonly cluster: Cluster, private client: OperatorClient | null,
    /** A cluster of namespace hosts (--hosts), or null for `trine up` on loopback. */
    readonly hosts: HostsCluster | null = null,
  ) {}

  /** The dir holding process `id`'s log: the cluster dir, or its host's bundle. */
  logDirOf(id: ProcessId): string {
    return this.hosts === null ? this.dir : this.hosts.logDirOf(id);
  }

  get appLogDirs(): string[] {
    return this.hosts === null ? [this.dir] : this.hosts.nodes.map((n) => (this.hosts as HostsCluster).bundle(n));
  }

  /** The same task on a cluster of namespace hosts built from `trine init` bundles (test/hosts),
   *  driven from the root namespace through a port of its own on the bed. */
  static async startHosts(notes: string[]): Promise<SignalCluster> {
    const hosts = await HostsCluster.start({ rootPort: true });
    // The task processes run as the cluster's task user (nobody): the control file goes where
    // they can read it, outside the bed's root-only directory.
    const ctl = mkdtempSync(join(tmpdir(), 'trine-bench-ctl-'));
    chmodSync(ctl, 0o755);
    let sc: SignalCluster | null = null;
    try {
      const cluster = loadCluster(hosts.opBundle);
      sc = new SignalCluster(hosts.root, hosts.out, ctl, cluster, await OperatorClient.open(cluster), hosts);
      await sc.findPrimary();
      await sc.submit(notes);
      return sc;
    } catch (e) {
      await (sc === null ? hosts.destroy() : sc.stop());
      throw e;
    }
  }

  static async start(notes: string[]): Promise<SignalCluster> {
    const root = mkdtempSync(join(tmpdir(), 'trine-bench-signals-'));
    const dir = join(root, 'cluster');
    const ctl = join(root, 'ctl');
    mkdirSync(ctl);
    let sc: SignalCluster | null = null;
    try {
      if ((await up({ dir, nodes: SIZE })) !== 0) throw new Error('bench: trine up did not bring the cluster up');
      const cluster = loadCluster(dir);
      sc = new SignalCluster(root, dir, ctl, cluster, await OperatorClient.open(cluster));
      await sc.findPrimary();
      await sc.submit(notes);
      return sc;
    } catch (e) {
      await (sc === null ? tearDown(root, dir, new Map()) : sc.stop());
      throw e;
    }
  }

  private get op(): OperatorClient {
    if (this.client === null) throw new Error('bench: the cluster is stopped');
    return this.client;
  }

  get appLogs(): AppLogs {
    if (this.logs === null) throw new Error('bench: no task');
    return this.logs;
  }

  async findPrimary(): Promise<void> {
    const answers = await this.op.queryReplicas(VIEW_TIMEOUT_MS);
    for (const a of answers.values()) if (a.ok && a.status.role === 'primary') this.primaryId = a.status.id;
  }

  agentOf(node: string): ProcessId {
    const a = this.cluster.config.membership.agents.find((x) => x.node === node);
    if (a === undefined) throw new Error(`bench: no agent on ${node}`);
    return a.id;
  }

  /** Submits the task and waits for its four processes; a start that fails (on a loaded
   *  machine a process can miss its connect timeout) is killed and submitted again. */
  private async submit(notes: string[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const request = buildSubmit({ command: APP_COMMAND, size: SIZE, name: 'bench-app', env: [`BENCH_CTL=${this.ctl}`], cwd: REPO, baseCwd: REPO, nonce: newNonce(), taskKey: newTaskKey(), linked: true });
      const outcome = await requestOp(this.op, request, OP_TIMEOUT_MS);
      if (!outcome.ok) throw new Error(`bench: submit refused: ${outcome.text}`);
      this.task = outcome.text;
      this.logs = new AppLogs(this.appLogDirs, this.task);
      try {
        for (let v = 0; v < SIZE; v++) await this.adopt(v, START_TIMEOUT_MS);
        return;
      } catch (e) {
        if (attempt >= MAX_SUBMITS) throw e;
        notes.push(`${this.task} did not start (${(e as Error).message}): submitted again`);
        this.members.clear();
        await requestOp(this.op, { type: 'task.kill', nonce: newNonce(), task: this.task }, OP_TIMEOUT_MS).catch(() => null);
      }
    }
  }

  /** Waits for `vpid`'s ready line and records it as a member. */
  async adopt(vpid: number, timeoutMs: number): Promise<Member> {
    const m = await until(`${this.task}/${vpid} ready`, () => {
      const start = this.appLogs.find(vpid, 'start');
      const ready = this.appLogs.find(vpid, 'ready');
      return start === null || ready === null ? null : { pid: Number(start.f['pid']), node: ready.f['node'] ?? '?' };
    }, 0, timeoutMs);
    this.members.set(vpid, m);
    this.highestVpid = Math.max(this.highestVpid, vpid);
    if (!this.seen.has(m.pid)) this.seen.set(m.pid, procStartTime(m.pid));
    return m;
  }

  get live(): number[] {
    return [...this.members.keys()].sort((a, b) => a - b);
  }

  /** The seq of the next command (SYNC's arg, so every reply is unique). */
  get nextSeq(): number {
    return this.seq + 1;
  }

  /** Writes the next command (write + rename, so a reader sees all of it or none); its seq. */
  command(cmd: Record<string, unknown>): number {
    const seq = ++this.seq;
    const tmp = join(this.ctl, 'cmd.tmp');
    writeFileSync(tmp, JSON.stringify({ seq, ...cmd }));
    renameSync(tmp, join(this.ctl, 'cmd.json'));
    return seq;
  }

  /** The send times of `seq` at `vpids` (mono), or null until all have sent. */
  sends(vpids: readonly number[], seq: number): number[] | null {
    const at: number[] = [];
    for (const v of vpids) {
      const l = this.appLogs.find(v, 'send', { seq });
      if (l === null) return null;
      at.push(l.mono);
    }
    return at;
  }

  /** The primary's journal line (task.event) whose text starts with `prefix`, as mono time. */
  journal(prefix: string, afterWallMs: number, offMs: number): number | null {
    const hit = logEvents(this.logDirOf(this.primaryId), this.primaryId, 'task.event', afterWallMs).find((l) => String(l.line['text']).startsWith(prefix));
    return hit === undefined ? null : hit.atMs - offMs;
  }

  /** An agent's log event about this task's `vpid`, as mono time. */
  agentEvent(node: string, event: string, vpid: number, afterWallMs: number, offMs: number, match: Record<string, string> = {}): number | null {
    const hit = logEvents(this.logDirOf(this.agentOf(node)), this.agentOf(node), event, afterWallMs)
      .find((l) => l.line['task'] === this.task && l.line['vpid'] === vpid && Object.entries(match).every(([k, v]) => l.line[k] === v));
    return hit === undefined ? null : hit.atMs - offMs;
  }

  /** Every node up (after a node failure), in the view two replicas agree on. */
  async nodesUp(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await readClusterView(this.op, VIEW_TIMEOUT_MS).catch(() => null);
      if (v !== null && v.view.nodes.every((n) => n.state === 'up')) return true;
      if (Date.now() > deadline) return false;
      await sleep(200);
    }
  }

  /** This bench's processes now: its daemons, its task processes, itself. */
  ourPids(): number[] {
    return [...processesNaming(this.hosts === null ? this.dir : this.hosts.root), ...[...this.members.values()].map((m) => m.pid), process.pid];
  }

  async stop(): Promise<void> {
    await this.client?.close().catch(() => {});
    this.client = null;
    if (this.hosts !== null) {
      await this.hosts.destroy();
      rmSync(this.ctl, { recursive: true, force: true });
    } else await tearDown(this.root, this.dir, this.seen);
  }
}

/** Polls `pick` every POLL_MS (after `firstMs`) until it returns non-null. */
async function until<T>(what: string, pick: () => T | null, firstMs: number, timeoutMs: number): Promise<T> {
  await sleep(firstMs);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = pick();
    if (got !== null) return got;
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await sleep(POLL_MS);
  }
}



// ---- The measurements ------------------------------------------------------------------------

async function measureBroadcast(sc: SignalCluster, i: number): Promise<SignalSamples['broadcast'][number]> {
  const live = sc.live;
  const from = live[i % live.length] as number;
  await sleep(SETTLE_MS);
  const seq = sc.command({ op: 'broadcast', from });
  const at = await until(`broadcast ${seq}`, () => sc.appLogs.received(live, APP_SIGNAL, seq), FIRST_LOOK_MS.fast, SAMPLE_TIMEOUT_MS.fast);
  const sent = sc.sends([from], seq)?.[0] ?? NaN;
  return { from, sendToLastMs: maxOf(at) - sent, sendToFirstMs: Math.min(...at) - sent };
}

async function measureSync(sc: SignalCluster): Promise<SignalSamples['sync'][number]> {
  const live = sc.live;
  await sleep(SETTLE_MS);
  const off = wallMinusMono();
  const wall = Date.now();
  const seq = sc.command({ op: 'group', signum: GSIG.REQ_SYNC, arg: sc.nextSeq, who: live });
  const at = await until(`REP_SYNC ${seq}`, () => sc.appLogs.received(live, GSIG.REP_SYNC, seq), FIRST_LOOK_MS.fast, SAMPLE_TIMEOUT_MS.fast);
  const sends = sc.sends(live, seq) ?? [];
  const last = maxOf(sends);
  const accepted = sc.journal(`${sc.task} group request GSIG_REQ_SYNC(${seq})`, wall, off);
  return { lastRequestToLastMs: maxOf(at) - last, lastRequestToAcceptedMs: accepted === null ? null : accepted - last, firstToLastRequestMs: last - Math.min(...sends) };
}

/** The victim of sample `i`: the members in turn, so every node takes its share. */
const victimOf = (sc: SignalCluster, i: number): number => sc.live[i % sc.live.length] as number;

async function measureKill(sc: SignalCluster, i: number): Promise<SignalSamples['kill'][number]> {
  const live = sc.live;
  const vpid = victimOf(sc, i);
  const node = sc.members.get(vpid)?.node as string;
  const survivors = live.filter((v) => v !== vpid);
  await sleep(SETTLE_MS);
  const off = wallMinusMono();
  const wall = Date.now();
  const seq = sc.command({ op: 'group', signum: GSIG.REQ_KILL, arg: vpid, who: live });
  const at = await until(`NTF_DIED(${vpid})`, () => sc.appLogs.received(survivors, GSIG.NTF_DIED, vpid), FIRST_LOOK_MS.kill, SAMPLE_TIMEOUT_MS.kill);
  sc.members.delete(vpid);
  const last = maxOf(sc.sends(live, seq) ?? []);
  const accepted = sc.journal(`${sc.task} group request GSIG_REQ_KILL(${vpid}) accepted`, wall, off);
  const notified = sc.journal(`${sc.task} GSIG_NTF_DIED(${vpid})`, wall, off);
  const sigterm = sc.agentEvent(node, 'proc.kill', vpid, wall, off, { signal: 'SIGTERM' });
  const exited = sc.agentEvent(node, 'proc.report', vpid, wall, off);
  const d = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);
  return {
    vpid, lastRequestToLastMs: maxOf(at) - last, lastRequestToAcceptedMs: d(last, accepted), acceptedToSigtermMs: d(accepted, sigterm),
    osSigtermToExitMs: d(sigterm, exited), exitToNotifiedMs: d(exited, notified), notifiedToLastMs: d(notified, maxOf(at)),
  };
}

async function measureCrash(sc: SignalCluster, i: number): Promise<SignalSamples['crash'][number]> {
  const vpid = victimOf(sc, i);
  const victim = sc.members.get(vpid) as Member;
  const survivors = sc.live.filter((v) => v !== vpid);
  await sleep(SETTLE_MS);
  const off = wallMinusMono();
  const wall = Date.now();
  const killedAt = monoNow();
  process.kill(victim.pid, 'SIGKILL');
  const at = await until(`NTF_DIED(${vpid}) after kill -9`, () => sc.appLogs.received(survivors, GSIG.NTF_DIED, vpid), FIRST_LOOK_MS.kill, SAMPLE_TIMEOUT_MS.kill);
  sc.members.delete(vpid);
  const reported = sc.agentEvent(victim.node, 'proc.report', vpid, wall, off);
  const closed = sc.agentEvent(victim.node, 'app.connection.lost', vpid, wall, off);
  const recorded = sc.journal(`${sc.task}/${vpid} terminated abnormally`, wall, off);
  const notified = sc.journal(`${sc.task} GSIG_NTF_DIED(${vpid})`, wall, off);
  return {
    vpid, killToLastMs: maxOf(at) - killedAt, killToFirstMs: Math.min(...at) - killedAt,
    killToSocketClosedMs: closed === null ? null : closed - killedAt, killToAgentReportMs: reported === null ? null : reported - killedAt, killToRecordedMs: recorded === null ? null : recorded - killedAt,
    notifiedToLastMs: notified === null ? null : maxOf(at) - notified,
  };
}

/** SPAWN by every live member; the sample, with the new member adopted. */
async function measureSpawn(sc: SignalCluster, after: SignalSamples['spawn'][number]['after']): Promise<SignalSamples['spawn'][number]> {
  const live = sc.live;
  const known = sc.highestVpid;
  // The OS's share, measured at the same load: the same command spawned bare, just before.
  const bare = await bareSpawn();
  await sleep(SETTLE_MS);
  const off = wallMinusMono();
  const wall = Date.now();
  const seq = sc.command({ op: 'group', signum: GSIG.REQ_SPAWN, arg: 0, who: live });
  // The new VPID: REP_SPAWNED's arg at the first live member, larger than any known.
  const vpid = await until(`REP_SPAWNED after request ${seq}`, () => findSpawned(sc, live[0] as number, known), FIRST_LOOK_MS.spawn, SAMPLE_TIMEOUT_MS.spawn);
  const at = await until(`REP_SPAWNED(${vpid}) everywhere`, () => sc.appLogs.received([...live, vpid], GSIG.REP_SPAWNED, vpid), 0, SAMPLE_TIMEOUT_MS.spawn);
  await sc.adopt(vpid, SAMPLE_TIMEOUT_MS.spawn);
  const last = maxOf(sc.sends(live, seq) ?? []);
  const accepted = sc.journal(`${sc.task} group request GSIG_REQ_SPAWN(0) accepted`, wall, off);
  const start = sc.appLogs.find(vpid, 'start')?.mono ?? null;
  const loaded = sc.appLogs.find(vpid, 'loaded')?.mono ?? null;
  const ready = sc.appLogs.find(vpid, 'ready')?.mono ?? null;
  const node = sc.members.get(vpid)?.node ?? '?';
  const connected = sc.agentEvent(node, 'proc.report', vpid, wall, off, { kind: 'spawnSucceeded' });
  const d = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);
  return {
    vpid, after, lastRequestToLastMs: maxOf(at) - last, lastRequestToAcceptedMs: d(last, accepted),
    lastRequestToStartMs: d(last, start), bareToStartMs: bare.toStartMs, startToLoadedMs: d(start, loaded),
    loadedToConnectedMs: d(loaded, connected), connectedToReadyMs: d(connected, ready), readyToLastMs: d(ready, maxOf(at)),
  };
}

/** The first REP_SPAWNED at `vpid` for a VPID above `known`. */
function findSpawned(sc: SignalCluster, vpid: number, known: number): number | null {
  for (let v = known + 1; v < known + 2 * SIZE; v++) if (sc.appLogs.find(vpid, 'recv', { signum: GSIG.REP_SPAWNED, arg: v }) !== null) return v;
  return null;
}

async function measureNode(sc: SignalCluster, i: number, notes: string[]): Promise<SignalSamples['node'][number]> {
  const node = sc.members.get(victimOf(sc, i))?.node as string;
  const agent = sc.agentOf(node);
  const vpids = sc.live.filter((v) => sc.members.get(v)?.node === node);
  const survivors = sc.live.filter((v) => !vpids.includes(v));
  await sleep(SETTLE_MS);
  const daemons = sc.hosts === null ? processesNaming(sc.dir, agent) : [];
  const pids = vpids.map((v) => sc.members.get(v)?.pid as number);
  const off = wallMinusMono();
  const wall = Date.now();
  const killedAt = monoNow();
  // On namespace hosts the node is lost the way a real one is: its link goes down.
  if (sc.hosts !== null) await sc.hosts.bed.cut(node);
  else for (const pid of [...daemons, ...pids]) killQuietly(pid);
  const at = await until(`node ${node}: NTF_DIED(${vpids.join(',')})`, () => {
    const all: number[] = [];
    for (const v of vpids) {
      const got = sc.appLogs.received(survivors, GSIG.NTF_DIED, v);
      if (got === null) return null;
      all.push(...got);
    }
    return all;
  }, FIRST_LOOK_MS.node, SAMPLE_TIMEOUT_MS.node);
  for (const v of vpids) sc.members.delete(v);
  const firstBackup = (event: string): number | null => {
    const times = sc.cluster.config.membership.replicas.filter((r) => r !== sc.primaryId)
      .flatMap((r) => logEvents(sc.logDirOf(r), r, event, wall).filter((l) => l.line['agent'] === agent).map((l) => l.atMs - off));
    return times.length === 0 ? null : Math.min(...times) - killedAt;
  };
  const declared = sc.journal(`node ${node} lost`, wall, off);
  const notified = vpids.map((v) => sc.journal(`${sc.task} GSIG_NTF_DIED(${v})`, wall, off));
  // Back up: the watchdog's reset driver restarts the keeper (PROTOCOL §8.4 step 5); if it has
  // not in RESET_GRACE_MS, the bench does what it would.
  let back: SignalSamples['node'][number]['back'] = 'watchdog';
  const resetBy = Date.now() + RESET_GRACE_MS;
  const scc = sc.cluster.config.membership.scc;
  // The command driver (namespace hosts) logs `reset.done` once the power controller booted it.
  const resetEvent = sc.hosts === null ? 'reset.keeper-started' : 'reset.done';
  while (logEvents(sc.logDirOf(scc), scc, resetEvent, wall).every((l) => l.line['node'] !== node)) {
    if (sc.hosts !== null && Date.now() > resetBy) {
      back = 'no';
      notes.push(`node ${node}: the watchdog did not reset it within ${RESET_GRACE_MS} ms`);
      break;
    }
    if (Date.now() > resetBy) {
      back = 'bench';
      startKeeper(sc.dir, agent);
      break;
    }
    await sleep(200);
  }
  if (sc.hosts !== null) await sc.hosts.bed.restore(node);
  if (!(await sc.nodesUp(NODE_BACK_MS))) {
    back = 'no';
    notes.push(`node ${node} did not come back within ${NODE_BACK_MS / 1000} s`);
  }
  return {
    node, vpids, killToLastMs: maxOf(at) - killedAt, killToSilentMs: firstBackup('agent.silent'), killToUnreachableMs: firstBackup('node.unreachable'),
    killToDeclaredMs: declared === null ? null : declared - killedAt,
    notifiedToLastMs: notified.some((x) => x === null) ? null : maxOf(at) - maxOf(notified as number[]), back,
  };
}

const BARE_ENV = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };

/** The OS's part of a SPAWN: `node bench-app.mjs` spawned outside Trine, spawn() →
 *  its first line (fork, exec, Node's start; the file cache is warm from the cluster's
 *  own spawns). It then loads trine/app, finds no TRINE_* and exits; the bench waits for that. */
async function bareSpawn(): Promise<{ toStartMs: number; toLoadedMs: number }> {
  const t0 = monoNow();
  const child = spawn(APP_COMMAND[0] as string, APP_COMMAND.slice(1), { cwd: REPO, env: BARE_ENV, stdio: ['ignore', 'pipe', 'ignore'] });
  let text = '';
  child.stdout?.on('data', (b: Buffer) => {
    text += b.toString();
  });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', () => resolve());
  });
  const at = (kind: string) => Number(new RegExp(`^${kind} .*mono=([0-9.]+)$`, 'm').exec(text)?.[1]);
  return { toStartMs: at('start') - t0, toLoadedMs: at('loaded') - t0 };
}

/** The OS's part of a KILL, for comparison with the agent's log: SIGTERM / SIGKILL of an idle
 *  Node process that loaded trine/app → its 'exit' in the parent. */
async function measureBareKill(samples: SignalSamples, trials: number): Promise<void> {
  for (let i = 0; i < trials; i++) {
    const signal = i % 2 === 0 ? 'SIGTERM' : 'SIGKILL';
    const child = spawn(process.execPath, ['--input-type=module', '-e', KILL_TARGET], { cwd: REPO, env: BARE_ENV, stdio: ['ignore', 'pipe', 'ignore'] });
    await new Promise<void>((resolve) => child.stdout?.once('data', () => resolve()));
    await sleep(SETTLE_MS);
    const t0 = monoNow();
    const exited = new Promise<number>((resolve) => child.once('exit', () => resolve(monoNow())));
    child.kill(signal);
    samples.bareKill.push({ signal, toExitMs: (await exited) - t0 });
  }
}

/** The bare kill's target: a Node process with trine/app loaded, idle. */
const KILL_TARGET = `await import(${JSON.stringify(pathToFileURL(LIB).href)}); console.log('ready'); setInterval(() => {}, 1000);`;

// ---- CPU use ---------------------------------------------------------------------------------

type CpuMark = { atMs: number; busyTicks: number; totalTicks: number; perPid: Map<number, number> };

/** /proc/stat's busy and total ticks, and utime + stime of each of `pids`. */
function cpuMark(pids: Iterable<number>): CpuMark {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  const perPid = new Map<number, number>();
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      perPid.set(pid, Number(rest[11]) + Number(rest[12]));
    } catch {
      // gone
    }
  }
  return { atMs: Date.now(), busyTicks: total - idle, totalTicks: total, perPid };
}

function cpuBetween(a: CpuMark, b: CpuMark): { machineBusyPercent: number; benchPercent: number; seconds: number } {
  let ours = 0;
  // A process born within the phase counts whole; one that ended within it is missed.
  for (const [pid, t] of b.perPid) ours += t - (a.perPid.get(pid) ?? 0);
  const total = b.totalTicks - a.totalTicks;
  // A phase that ran no samples took no clock ticks: no figure rather than 0/0.
  if (total <= 0) return { machineBusyPercent: NaN, benchPercent: NaN, seconds: 0 };
  return { machineBusyPercent: (100 * (b.busyTicks - a.busyTicks)) / total, benchPercent: (100 * ours) / total, seconds: (b.atMs - a.atMs) / 1000 };
}

// ---- Tables ----------------------------------------------------------------------------------

const values = <T>(xs: readonly T[], f: (x: T) => number | null): number[] => xs.flatMap((x) => {
  const v = f(x);
  return v === null || Number.isNaN(v) ? [] : [v];
});
const ms = (xs: readonly number[]) => (xs.length === 0 ? '—' : `${p50(xs).toFixed(1)} (${p99(xs).toFixed(1)})`);
const killMinusOs = (s: SignalSamples) => values(s.kill, (x) => (x.osSigtermToExitMs === null ? null : x.lastRequestToLastMs - x.osSigtermToExitMs));
const spawnMinusBare = (s: SignalSamples) => s.spawn.map((x) => x.lastRequestToLastMs - x.bareToStartMs);

function figuresOf(s: SignalSamples): Figure[] {
  const f: Figure[] = [];
  const add = (name: string, xs: readonly number[], unit = 'ms') => {
    f.push({ name: `${name} p50`, value: p50(xs), unit }, { name: `${name} p99`, value: p99(xs), unit });
  };
  add('crash: kill -9 → NTF_DIED handled at the last survivor', s.crash.map((x) => x.killToLastMs));
  add('  crash: kill -9 → agent sees the process socket close (agent log)', values(s.crash, (x) => x.killToSocketClosedMs));
  add('  crash: kill -9 → agent reports the exit (agent log)', values(s.crash, (x) => x.killToAgentReportMs));
  add('  crash: kill -9 → primary records the death (its log)', values(s.crash, (x) => x.killToRecordedMs));
  add('  crash: primary orders NTF_DIED → last survivor handles it', values(s.crash, (x) => x.notifiedToLastMs));
  f.push({ name: 'crash samples', value: s.crash.length, unit: 'kills' });
  add('node failure (loopback: SIGKILL of its processes; hosts: its link cut) → NTF_DIED handled at the last survivor', s.node.map((x) => x.killToLastMs));
  add('  node failure: kill → first backup finds the agent silent', values(s.node, (x) => x.killToSilentMs));
  add('  node failure: kill → primary declares the node lost', values(s.node, (x) => x.killToDeclaredMs));
  add('  node failure: primary orders NTF_DIED → last survivor handles it', values(s.node, (x) => x.notifiedToLastMs));
  f.push({ name: 'node failure samples', value: s.node.length, unit: 'trials' });
  add('broadcast: send → handled at the last process', s.broadcast.map((x) => x.sendToLastMs));
  add('  broadcast: send → handled at the first process', s.broadcast.map((x) => x.sendToFirstMs));
  f.push({ name: 'broadcast samples', value: s.broadcast.length, unit: 'broadcasts' });
  add('SYNC: last request → REP_SYNC handled at every process', s.sync.map((x) => x.lastRequestToLastMs));
  add('  SYNC: last request sent → primary accepts the quorum', values(s.sync, (x) => x.lastRequestToAcceptedMs));
  f.push({ name: 'SYNC samples', value: s.sync.length, unit: 'requests' });
  add('KILL: last request → NTF_DIED handled at every survivor', s.kill.map((x) => x.lastRequestToLastMs));
  add('  KILL: last request sent → primary accepts the quorum', values(s.kill, (x) => x.lastRequestToAcceptedMs));
  add('  KILL: accepted → agent sends SIGTERM', values(s.kill, (x) => x.acceptedToSigtermMs));
  add('  KILL: OS part, agent sends SIGTERM → agent reports the exit (agent log)', values(s.kill, (x) => x.osSigtermToExitMs));
  add('  KILL: exit reported → primary orders NTF_DIED', values(s.kill, (x) => x.exitToNotifiedMs));
  add('  KILL: NTF_DIED ordered → handled at every survivor', values(s.kill, (x) => x.notifiedToLastMs));
  add('  KILL: total minus OS part', killMinusOs(s));
  f.push({ name: 'KILL samples', value: s.kill.length, unit: 'requests' });
  add('SPAWN: last request → REP_SPAWNED handled at every process (new one included)', s.spawn.map((x) => x.lastRequestToLastMs));
  add('  SPAWN: bare spawn of the same command → its first line (paired, just before)', s.spawn.map((x) => x.bareToStartMs));
  add('  SPAWN: minus the paired bare spawn', spawnMinusBare(s));
  add('  SPAWN: last request sent → primary accepts the quorum', values(s.spawn, (x) => x.lastRequestToAcceptedMs));
  add('  SPAWN: last request → the new process prints its first line', values(s.spawn, (x) => x.lastRequestToStartMs));
  add('  SPAWN: first line → trine/app loaded', values(s.spawn, (x) => x.startToLoadedMs));
  add('  SPAWN: trine/app loaded → agent reports it connected (Link.init(), hello)', values(s.spawn, (x) => x.loadedToConnectedMs));
  add('  SPAWN: connected → Link.init() resolved (mapping)', values(s.spawn, (x) => x.connectedToReadyMs));
  add('  SPAWN: Link.init() resolved → REP_SPAWNED handled at every process', values(s.spawn, (x) => x.readyToLastMs));
  f.push({ name: 'SPAWN samples', value: s.spawn.length, unit: 'requests' });
  add('bare kill of an idle Node process, SIGTERM → exit seen by the parent', s.bareKill.filter((x) => x.signal === 'SIGTERM').map((x) => x.toExitMs));
  add('bare kill of an idle Node process, SIGKILL → exit seen by the parent', s.bareKill.filter((x) => x.signal === 'SIGKILL').map((x) => x.toExitMs));
  for (const [phase, c] of Object.entries(s.cpu)) {
    if (c.seconds === 0) continue;
    f.push({ name: `CPU during ${phase}: whole machine busy`, value: c.machineBusyPercent, unit: '% of all vCPUs' });
    f.push({ name: `CPU during ${phase}: this bench (cluster, tasks, itself)`, value: c.benchPercent, unit: '% of all vCPUs' });
  }
  return f;
}

/** The paper's Tables 5.3 and 5.4 with our figures beside them (p50, p99 in parentheses). */
export function signalTables(s: SignalSamples): string {
  const { crash, node } = s;
  return [
    'Table 5.3 — detecting and notifying applications of crashes (ms; ours p50 (p99), paper mean (sd))',
    '| fault | # | detection: fault → primary records it | detection → broadcast | broadcast → delivery (last process) | total | paper |',
    '|---|---|---|---|---|---|---|',
    `| crash of an application process (kill -9) | ${crash.length} | ${ms(values(crash, (x) => x.killToRecordedMs))} | 0 (same step) | ${ms(values(crash, (x) => x.notifiedToLastMs))} | **${ms(crash.map((x) => x.killToLastMs))}** | 68 (24) + 9 (0) + 10 (19) = 87 |`,
    `| node failure (its replica, if any, kept running) | ${node.length} | ${ms(values(node, (x) => x.killToDeclaredMs))} | 0 (same step) | ${ms(values(node, (x) => x.notifiedToLastMs))} | **${ms(node.map((x) => x.killToLastMs))}** | 869 (105) + negl. + 10 (17) = 879 |`,
    '',
    'Table 5.4 — response times, from the last request of the quorum to the response handled at every process (ms; p50 (p99))',
    '| request | # | Trine | paper | target |',
    '|---|---|---|---|---|',
    `| application broadcast (sender's send → last delivery) | ${s.broadcast.length} | **${ms(s.broadcast.map((x) => x.sendToLastMs))}** | 18 | ≤ 2 |`,
    `| SYNC | ${s.sync.length} | **${ms(s.sync.map((x) => x.lastRequestToLastMs))}** | 19 | ≤ 2 |`,
    `| KILL | ${s.kill.length} | **${ms(s.kill.map((x) => x.lastRequestToLastMs))}** | 42 | ≤ 5 + OS |`,
    `|   OS part: SIGTERM → exit reported (agent log, 1 ms) | | ${ms(values(s.kill, (x) => x.osSigtermToExitMs))} | — | — |`,
    `|   KILL minus OS part | | ${ms(killMinusOs(s))} | — | ≤ 5 |`,
    `| SPAWN (node bench-app.mjs; paper: 12-MB LAMMPS) | ${s.spawn.length} | **${ms(s.spawn.map((x) => x.lastRequestToLastMs))}** | 112 | OS + ≤ 2 |`,
    `|   OS part: bare spawn of the same command → first line (paired) | | ${ms(s.spawn.map((x) => x.bareToStartMs))} | — | — |`,
    `|   SPAWN minus OS part (per pair) | | ${ms(spawnMinusBare(s))} | — | ≤ 2 |`,
  ].join('\n');
}

export type BenchSignalsOptions = {
  broadcasts?: number; syncs?: number; kills?: number; crashes?: number; nodeFailures?: number; bareKills?: number;
  /** Print the paper-shaped tables to stdout (default true). */
  printTables?: boolean;
  /** Run on namespace hosts (test/hosts) instead of `trine up` on loopback; needs root. */
  hosts?: boolean;
  /** Samples are also handed back here (benchSignalsSideBySide). */
  samples?: (s: SignalSamples) => void;
};

/** Runs a phase of `n` samples, tolerating up to MAX_FAILURES_IN_A_ROW failures in a row, and
 *  notes the load and CPU use while it ran. */
async function phase(s: SignalSamples, sc: SignalCluster, name: string, n: number, sample: (i: number) => Promise<void>): Promise<void> {
  s.loadavg[name] = loadavg();
  const before = cpuMark(sc.ourPids());
  let failures = 0;
  for (let i = 0; i < n; i++) {
    try {
      await sample(i);
      failures = 0;
    } catch (e) {
      s.notes.push(`${name} sample ${i}: ${(e as Error).message}`);
      if (++failures >= MAX_FAILURES_IN_A_ROW) {
        s.notes.push(`${name}: abandoned after ${failures} failures in a row`);
        break;
      }
    }
  }
  s.cpu[name] = cpuBetween(before, cpuMark(new Set([...before.perPid.keys(), ...sc.ourPids()])));
}

/** Runs every measurement on one cluster, writes bench/results/signals.json (figures, tables and
 *  every sample) and returns the figures. */
export async function benchSignals(opts: BenchSignalsOptions = {}): Promise<Figure[]> {
  const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
  const n = {
    broadcasts: opts.broadcasts ?? env('TRINE_BENCH_BROADCASTS', 30),
    syncs: opts.syncs ?? env('TRINE_BENCH_SYNCS', 30),
    kills: opts.kills ?? env('TRINE_BENCH_KILLS', 20),
    crashes: opts.crashes ?? env('TRINE_BENCH_CRASHES', 20),
    nodeFailures: opts.nodeFailures ?? env('TRINE_BENCH_NODE_FAILURES', 5),
    bareKills: opts.bareKills ?? env('TRINE_BENCH_BARE_KILLS', 10),
  };
  const s: SignalSamples = { loadavg: {}, cpu: {}, broadcast: [], sync: [], kill: [], spawn: [], crash: [], node: [], bareKill: [], notes: [] };
  const startedAt = Date.now();
  // The processes run the compiled library: build it from the sources as they are now.
  execFileSync(process.execPath, [join(REPO, 'tools/build-lib.mjs')], { stdio: 'inherit' });
  const sc = await (opts.hosts === true ? SignalCluster.startHosts(s.notes) : SignalCluster.start(s.notes));
  const onSignal = () => void sc.stop().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  /** Replaces every member lost: SPAWN by the survivors, each a sample. */
  const recover = async (after: SignalSamples['spawn'][number]['after']) => {
    while (sc.live.length < SIZE) s.spawn.push(await measureSpawn(sc, after));
  };
  try {
    // Warm-up, not counted: the JIT of every path the samples take.
    for (let i = 0; i < 5; i++) {
      await measureBroadcast(sc, i);
      await measureSync(sc);
    }
    await measureKill(sc, 0);
    while (sc.live.length < SIZE) await measureSpawn(sc, 'kill');
    await phase(s, sc, 'broadcast', n.broadcasts, async (i) => void s.broadcast.push(await measureBroadcast(sc, i)));
    await phase(s, sc, 'sync', n.syncs, async () => void s.sync.push(await measureSync(sc)));
    await phase(s, sc, 'kill+spawn', n.kills, async (i) => {
      s.kill.push(await measureKill(sc, i + 1));
      await recover('kill');
    });
    await phase(s, sc, 'crash+spawn', n.crashes, async (i) => {
      s.crash.push(await measureCrash(sc, i));
      await recover('crash');
    });
    await phase(s, sc, 'node failure+spawn', n.nodeFailures, async (i) => {
      s.node.push(await measureNode(sc, i, s.notes));
      await recover('node');
    });
    await phase(s, sc, 'bare kill', 1, () => measureBareKill(s, n.bareKills));
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await sc.stop();
  }
  const figures = figuresOf(s);
  const tables = signalTables(s);
  for (const note of s.notes) console.error(`bench: ${note}`);
  if (opts.printTables ?? true) console.log(`\n${tables}\n`);
  opts.samples?.(s);
  mkdirSync(join(here, 'results'), { recursive: true });
  writeFileSync(join(here, 'results', opts.hosts === true ? 'signals-hosts.json' : 'signals.json'), JSON.stringify({
    mode: opts.hosts === true ? 'namespace hosts' : 'loopback',
    at: new Date().toISOString(), runSeconds: (Date.now() - startedAt) / 1000, node: process.version, cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? '?', command: APP_COMMAND, figures, tables, samples: s,
  }, null, 2));
  return figures;
}

/** The headline figures on loopback and on namespace hosts, from one run, one after the other
 *  (docs/PERFORMANCE.md §6). Returns the figures of both, the namespace ones prefixed `hosts:`. */
export async function benchSignalsSideBySide(opts: Omit<BenchSignalsOptions, 'hosts' | 'samples'> = {}): Promise<Figure[]> {
  let loop: SignalSamples | null = null;
  let ns: SignalSamples | null = null;
  const a = await benchSignals({ ...opts, printTables: false, samples: (x) => (loop = x) });
  const b = await benchSignals({ ...opts, printTables: false, hosts: true, samples: (x) => (ns = x) });
  const l = loop as unknown as SignalSamples;
  const h = ns as unknown as SignalSamples;
  const row = (what: string, f: (x: SignalSamples) => number[]) => `| ${what} | ${ms(f(l))} (${f(l).length}) | ${ms(f(h))} (${f(h).length}) |`;
  console.log([
    '',
    'Loopback (`trine up`, one host) and namespace hosts (`trine init` bundles, a bridge), one run; ms p50 (p99) (samples)',
    '| figure | loopback | namespace hosts |',
    '|---|---|---|',
    row('crash: kill -9 → NTF_DIED handled at the last survivor', (x) => x.crash.map((y) => y.killToLastMs)),
    row('broadcast: send → handled at the last process', (x) => x.broadcast.map((y) => y.sendToLastMs)),
    row('SYNC: last request → REP_SYNC handled at every process', (x) => x.sync.map((y) => y.lastRequestToLastMs)),
    row('node failure → NTF_DIED at the last survivor (loopback: SIGKILL of the node; hosts: its link cut)', (x) => x.node.map((y) => y.killToLastMs)),
    row('  of which: fault → primary declares the node lost', (x) => values(x.node, (y) => y.killToDeclaredMs)),
    row('KILL: last request → NTF_DIED handled at every survivor', (x) => x.kill.map((y) => y.lastRequestToLastMs)),
    '',
  ].join('\n'));
  return [...a, ...b.map((f) => ({ ...f, name: `hosts: ${f.name}` }))];
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--side-by-side')) {
    const figures = await benchSignalsSideBySide();
    console.log(`${figures.length} figures; raw samples in ${join(here, 'results', 'signals.json')} and signals-hosts.json`);
    process.exit(0);
  }
  console.log(`trine bench signals: node ${process.version}, ${cpus().length} cpus, load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const t0 = Date.now();
  const figures = await benchSignals({ hosts: process.argv.includes('--hosts') });
  for (const f of figures) console.log(`${f.name}: ${Number.isInteger(f.value) ? f.value : f.value.toFixed(3)} ${f.unit}`);
  console.log(`written ${join(here, 'results', process.argv.includes('--hosts') ? 'signals-hosts.json' : 'signals.json')} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  process.exit(0);
}
