// Replica recovery on a real local cluster (issue 5; docs/PERFORMANCE.md §6): `trine up --nodes 4
// --allow-inject` in a temporary dir, then, one fault at a time, the time from the injection to
//   - the condemnation (the first surviving member's `replica.condemned` log line),
//   - the new group (its `group.view` without the victim),
//   - a healthy three-replica group (the replacement's `state.installed`: it serves from there).
// Faults: a backup killed, the primary killed (SIGKILL of the replica daemon), and, through
// `trine inject`, a corrupted backup and a Byzantine primary in each mode the daemons offer.
// Trials start when the fault takes effect: at the SIGKILL, or at the victim's own log line for
// an injection (`inject.corrupted`, `inject.byzantine`), not when the `trine inject` CLI starts
// (its start-up is about a second). Traffic comes from an in-process operator client, as the CLI
// would send it, so it too is on the wire within milliseconds of the injection.
// Every trial uses one spare id (r4–r9), so a cluster serves SPARES trials; the bench starts
// another cluster when they run out. Times are the daemons' log clocks (wall clock, ms).
// bench/run.ts imports benchRecovery(); run alone with `node --import tsx bench/recovery.ts`.
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newNonce, requestOp } from '../cli/op-client.ts';
import { OperatorClient } from '../cli/status-client.ts';
import { up } from '../cli/up.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { TaskSubmit } from '../src/core/wire/messages.ts';
import { loadCluster, readPidFiles, replicaPool, SPARE_REPLICA_COUNT } from '../src/io/cluster-dir.ts';
import { logEvents, processesNaming, tearDown } from './cluster-tools.ts';
import type { Figure } from './crypto.ts';
import { quantile } from './stats.ts';

/** Trials per fault kind. */
const TRIALS = Number(process.env['TRINE_BENCH_RECOVERY_TRIALS'] ?? 3);
/** How long one recovery may take before the trial counts as failed. */
const RECOVERY_LIMIT_MS = 30_000;
/** Quiet time between trials, so the last replacement's start-up has settled. */
const SETTLE_MS = 1_500;
const POLL_MS = 50;
const here = fileURLToPath(new URL('.', import.meta.url));
const TRINE = join(here, '..', 'bin', 'trine.js');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `traffic`: the misbehaviour shows only when the group orders something (an equivocation
 *  needs requests from two agents, a primary that stops ordering needs a request to sit on), so
 *  the trial submits a 4-process task right after the injection; its spawn reports come from
 *  the four agents. The submission itself may fail while the group changes: that is fine. */
type Fault = {
  name: string; victim: 'backup' | 'primary'; inject: (dir: string, victim: ProcessId) => Promise<void>;
  /** Submits sent at once right after the injection (none: no traffic). */
  traffic?: number;
  /** The victim's log event that marks the fault taking effect; none: the moment inject returns. */
  effect?: string;
};

const trine = (args: string[]): Promise<void> =>
  new Promise((resolve, reject) => execFile(process.execPath, [TRINE, ...args], (e, _out, err) => (e === null ? resolve() : reject(new Error(`trine ${args.join(' ')}: ${err}`)))));

const kill = async (dir: string, victim: ProcessId): Promise<void> => {
  const pid = readPidFiles(dir).find((p) => p.id === victim)?.pid;
  if (pid === null || pid === undefined) throw new Error(`no pid for ${victim}`);
  process.kill(pid, 'SIGKILL');
};

const FAULTS: Fault[] = [
  { name: 'killed backup', victim: 'backup', inject: kill },
  { name: 'killed primary', victim: 'primary', inject: kill },
  { name: 'corrupted backup', victim: 'backup', effect: 'inject.corrupted', inject: (dir, r) => trine(['inject', 'corrupt-replica', r, '--dir', dir]) },
  {
    // The equivocation (rsn.swap) gives one backup the next two orders swapped. The bench's one
    // operator request has no partner (the next RSN is a task-clock tick), so the primary only
    // withholds it from that backup, and the backups' progress timeout (500 ms) condemns it.
    name: 'equivocating primary', victim: 'primary', traffic: 1, effect: 'inject.byzantine',
    inject: (dir, r) => trine(['inject', 'byzantine-replica', r, 'equivocate', '--dir', dir]),
  },
  {
    name: 'silent-heartbeating primary', victim: 'primary', traffic: 1, effect: 'inject.byzantine',
    inject: (dir, r) => trine(['inject', 'byzantine-replica', r, 'silent-heartbeating', '--dir', dir]),
  },
];

type Group = { view: number; replicas: ProcessId[]; primary: ProcessId };

/** The newest `group.view` any running replica logged. */
function currentGroup(dir: string, pool: readonly ProcessId[]): Group | null {
  let best: Group | null = null;
  for (const r of pool) {
    for (const e of logEvents(dir, r, 'group.view', 0)) {
      const g = e.line as unknown as Group;
      if (best === null || g.view > best.view) best = { view: g.view, replicas: g.replicas, primary: g.primary };
    }
  }
  return best;
}

/** `spawnedMs`: an agent carried out the replica.spawn (its `replica.started`); `startedMs`: the
 *  replacement daemon's first log line; `warm`: it was a promoted standby. */
type Sample = { condemnedMs: number; viewMs: number; healthyMs: number; spawnedMs: number; startedMs: number; warm: boolean };

/** Waits until an agent has a warm standby replica loaded and not yet promoted
 *  (src/daemon/replica-standby.ts; only agents whose node runs no replica keep one, and that is
 *  where the group puts a replacement): the steady state a fault meets on a cluster that has
 *  been up a few seconds. Without one the replacement starts cold (≈ 1 s more), which the bench
 *  reports separately rather than mixing in. */
async function standbysReady(dir: string, agents: readonly ProcessId[]): Promise<boolean> {
  const deadline = Date.now() + RECOVERY_LIMIT_MS;
  while (Date.now() < deadline) {
    const ready = agents.some((a) => logEvents(dir, a, 'replica.standby.ready', 0).length > logEvents(dir, a, 'replica.standby.promoted', 0).length);
    if (ready) return true;
    await sleep(POLL_MS * 4);
  }
  return false;
}

async function trial(dir: string, pool: readonly ProcessId[], fault: Fault, group: Group, op: OperatorClient): Promise<Sample> {
  const victim = fault.victim === 'primary' ? group.primary : (group.replicas.find((r) => r !== group.primary) as ProcessId);
  const survivors = group.replicas.filter((r) => r !== victim);
  const before = Date.now();
  await fault.inject(dir, victim);
  const effect = fault.effect === undefined ? [] : logEvents(dir, victim, fault.effect, before);
  if (fault.effect !== undefined && effect.length === 0) throw new Error(`${fault.name}: ${victim} did not log ${fault.effect}`);
  const at = effect.length === 0 ? Date.now() : Math.min(...effect.map((e) => e.atMs));
  for (let i = 0; i < (fault.traffic ?? 0); i++) {
    const submit: TaskSubmit = {
      type: 'task.submit', nonce: newNonce(), name: 'bench', size: 4, file: '/bin/true', args: [], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32),
    };
    void requestOp(op, submit, 20_000).catch(() => null);
  }
  const deadline = at + RECOVERY_LIMIT_MS;
  let condemned: number | null = null;
  let reason = '';
  let view: number | null = null;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`${fault.name}: no healthy group ${RECOVERY_LIMIT_MS} ms after injecting into ${victim}`);
    if (condemned === null) {
      const c = survivors.flatMap((r) => logEvents(dir, r, 'replica.condemned', at)).filter((e) => e.line['target'] === victim);
      if (c.length > 0) {
        condemned = Math.min(...c.map((e) => e.atMs));
        reason = String(c[0]?.line['reason'] ?? '');
      }
    }
    if (view === null) {
      const v = survivors.flatMap((r) => logEvents(dir, r, 'group.view', at)).filter((e) => !(e.line['replicas'] as string[]).includes(victim));
      if (v.length > 0) view = Math.min(...v.map((e) => e.atMs));
    }
    const installed = pool.filter((r) => !group.replicas.includes(r)).flatMap((r) => logEvents(dir, r, 'state.installed', at));
    if (condemned !== null && view !== null && installed.length > 0) {
      const first = installed.reduce((a, b) => (b.atMs < a.atMs ? b : a));
      const id = String(first.line['id']);
      const agents = readPidFiles(dir).map((p) => p.id).filter((x) => x.startsWith('a'));
      const spawned = agents.flatMap((a) => logEvents(dir, a, 'replica.started', at)).filter((e) => e.line['replica'] === id);
      const warm = agents.some((a) => logEvents(dir, a, 'replica.standby.promoted', at).some((e) => e.line['replica'] === id));
      const started = logEvents(dir, id, 'start', at);
      const sample = {
        condemnedMs: condemned - at, viewMs: view - at, healthyMs: first.atMs - at,
        spawnedMs: (spawned[0]?.atMs ?? NaN) - at, startedMs: (started[0]?.atMs ?? NaN) - at, warm,
      };
      console.error(`bench recovery: ${fault.name} (${victim} → ${id}, condemned for ${reason}): ${JSON.stringify(sample)}`);
      return sample;
    }
    await sleep(POLL_MS);
  }
}

export async function benchRecovery(): Promise<Figure[]> {
  const samples = new Map<string, Sample[]>(FAULTS.map((f) => [f.name, []]));
  const failures: string[] = [];
  // TRINE_BENCH_RECOVERY_FAULTS=killed (a substring) runs only the faults whose name has it.
  const only = process.env['TRINE_BENCH_RECOVERY_FAULTS'];
  const plan = FAULTS.filter((f) => only === undefined || f.name.includes(only)).flatMap((f) => Array.from({ length: TRIALS }, () => f));
  while (plan.length > 0) {
    const root = mkdtempSync(join(tmpdir(), 'trine-bench-recovery-'));
    const dir = join(root, '.trine');
    let op: OperatorClient | null = null;
    try {
      await up({ dir, nodes: 4, allowInject: true });
      const cluster = loadCluster(dir);
      const pool = replicaPool(cluster.config.membership);
      op = await OperatorClient.open(cluster);
      for (let used = 0; used < SPARE_REPLICA_COUNT && plan.length > 0; used++) {
        const fault = plan.shift() as Fault;
        await sleep(SETTLE_MS);
        if (!(await standbysReady(dir, cluster.config.membership.agents.map((a) => a.id)))) failures.push('no warm standby replica became ready');
        const group = currentGroup(dir, pool) ?? { view: 0, replicas: [...cluster.config.membership.replicas], primary: cluster.config.membership.replicas[0] as ProcessId };
        try {
          (samples.get(fault.name) as Sample[]).push(await trial(dir, pool, fault, group, op));
        } catch (e) {
          failures.push((e as Error).message);
          break; // the cluster is in an unknown state: start a fresh one
        }
      }
    } finally {
      await op?.close();
      await tearDown(root, dir, new Map());
      for (const pid of processesNaming(dir)) process.kill(pid, 'SIGKILL');
    }
  }
  const out: Figure[] = [];
  for (const [name, xs] of samples) {
    if (xs.length === 0) continue;
    const key = name.replace(/ /g, '-');
    out.push({ name: `${key} → condemned p50`, value: quantile(xs.map((x) => x.condemnedMs), 0.5), unit: 'ms' });
    out.push({ name: `${key} → new group p50`, value: quantile(xs.map((x) => x.viewMs), 0.5), unit: 'ms' });
    out.push({ name: `${key} → replacement commanded at an agent p50`, value: quantile(xs.map((x) => x.spawnedMs), 0.5), unit: 'ms' });
    out.push({ name: `${key} → replacement daemon running p50`, value: quantile(xs.map((x) => x.startedMs), 0.5), unit: 'ms' });
    out.push({ name: `${key} → three replicas p50`, value: quantile(xs.map((x) => x.healthyMs), 0.5), unit: 'ms' });
    out.push({ name: `${key} replacements from a warm standby`, value: xs.filter((x) => x.warm).length, unit: 'count' });
    out.push({ name: `${key} → three replicas max`, value: Math.max(...xs.map((x) => x.healthyMs)), unit: 'ms' });
    out.push({ name: `${key} trials`, value: xs.length, unit: 'count' });
  }
  for (const f of failures) console.error(`bench recovery: ${f}`);
  out.push({ name: 'failed trials', value: failures.length, unit: 'count' });
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const f of await benchRecovery()) console.log(`${f.name}: ${f.value.toFixed(0)} ${f.unit}`);
  process.exit(0);
}
