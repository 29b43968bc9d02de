// Group-message benchmarks on a real local cluster (docs/PERFORMANCE.md §1): three manager
// replicas and four agents, each its own process, over WebSockets on loopback, with node:crypto
// Ed25519 on every frame. Measures
//   - latency: primary orders a request → each agent delivers the command (p50/p99), and the
//     agent's request → the last agent's delivery (the whole round trip);
//   - throughput: signed group messages delivered per second to 4 agents, under a pipelined flood;
//   - ordering throughput: agent requests ordered per second.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allocatePorts, clusterIds, generateClusterKeys, paths, planCluster, writeClusterConfig } from '../src/io/cluster-dir.ts';
import { trineCommand } from '../cli/daemons.ts';
import { processesNaming } from './cluster-tools.ts';
import type { Figure } from './crypto.ts';
import type { FromProc, ToProc } from './node-proc.ts';
import { quantile } from './stats.ts';

export type { Figure } from './crypto.ts';

/** Nodes of the benchmarked cluster (an agent each; replicas on the first three). */
const NODES = Number(process.env['TRINE_BENCH_NODES'] ?? 4);
/** After the origin's flood is done, how long the other agents get to deliver the rest. */
const FLOOD_SETTLE_MS = 10_000;
const here = fileURLToPath(new URL('.', import.meta.url));

type Proc = { id: string; child: ChildProcess };

export async function benchGroup(opts: { latencySamples?: number; floodRequests?: number } = {}): Promise<Figure[]> {
  const samples = opts.latencySamples ?? 300;
  const floodRequests = opts.floodRequests ?? 60;
  const dir = mkdtempSync(join(tmpdir(), 'trine-bench-'));
  const ids = clusterIds(NODES);
  const ports = await allocatePorts(ids.listeners.length);
  const keys = generateClusterKeys(dir, ids.all);
  // TRINE_BENCH_DIGEST_EVERY: checkpoint digests every N RSNs (PROTOCOL §10.4); a huge N turns
  // them off, to measure what they cost.
  const digestEvery = process.env['TRINE_BENCH_DIGEST_EVERY'];
  const config = planCluster({ nodes: NODES, ports, ...(digestEvery === undefined ? {} : { timing: { digestEveryRsn: Number(digestEvery) } }) }, keys);
  writeClusterConfig(dir, config);
  // The processes here are the bench's own children, not `trine up`'s: the watchdog must not
  // "reset" a node or the cluster by starting keepers and replicas of its own in this dir (a
  // protocol benchmark under load can see a replica condemned or a node declared failed).
  const configPath = paths.config(dir);
  writeFileSync(configPath, `${JSON.stringify({ ...JSON.parse(readFileSync(configPath, 'utf8')), resetDriver: 'log' }, null, 2)}\n`);
  const replicas = config.membership.replicas;
  const agents = config.membership.agents.map((a) => a.id);

  const listeners = new Set<(m: FromProc) => void>();
  const procs: Proc[] = [];
  const sccCommand = trineCommand(['scc', '--dir', dir]);
  const scc = spawn(sccCommand.file, sccCommand.args, { stdio: 'ignore' });
  const ready = new Set<string>();
  for (const id of [...replicas, ...agents]) {
    const child = fork(join(here, 'node-proc.ts'), [dir, id, replicas.includes(id) ? 'replica' : 'agent'], {
      execArgv: process.env['TRINE_BENCH_PROFILE'] === id ? ['--import', 'tsx', '--cpu-prof', '--cpu-prof-dir=/tmp/prof'] : ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child.on('message', (m: FromProc) => {
      if (m.ev === "ready") ready.add(m.id);
      if (process.env["TRINE_BENCH_TRACE"] !== undefined) console.error(JSON.stringify(m));
      for (const l of listeners) l(m);
    });
    procs.push({ id, child });
  }
  const to = (id: string, m: ToProc) => procs.find((p) => p.id === id)?.child.send(m);
  const waitFor = <T extends FromProc>(pred: (m: FromProc) => m is T, timeoutMs = 30_000): Promise<T> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => { listeners.delete(l); reject(new Error('bench: timed out waiting for the cluster')); }, timeoutMs);
      const l = (m: FromProc) => { if (pred(m)) { clearTimeout(timer); listeners.delete(l); resolve(m); } };
      listeners.add(l);
    });

  try {
    while (ready.size < procs.length) await new Promise((r) => setTimeout(r, 20));
    const origin = agents[0] as string;

    /** One echo to every agent; resolves with the primary's ordering time and each delivery. */
    const roundTrip = async (tag: string, timeoutMs = 10_000) => {
      const delivered = new Map<string, number>();
      let orderedAt = 0;
      let requestedAt = 0;
      const done = new Promise<void>((resolve) => {
        const l = (m: FromProc) => {
          if (m.ev === 'request' && m.tag === tag) requestedAt = m.atMs;
          if (m.ev === 'ordered' && m.tag === tag && m.id === replicas[0]) orderedAt = m.atMs;
          if (m.ev === 'delivered' && m.tag === tag) delivered.set(m.id, m.atMs);
          if (delivered.size === agents.length && orderedAt > 0) { listeners.delete(l); resolve(); }
        };
        listeners.add(l);
      });
      to(origin, { cmd: 'echo', tag, fanout: 'all', count: 1 });
      await Promise.race([done, new Promise((_, rej) => setTimeout(() => rej(new Error(`bench: ${tag} not delivered`)), timeoutMs))]);
      return { requestedAt, orderedAt, delivered: [...delivered.values()] };
    };

    // Wait until every agent has joined (only joined agents receive broadcasts), then warm up.
    for (let i = 0; ; i++) {
      try {
        await roundTrip(`lat-join-${i}`, 1_000);
        break;
      } catch (e) {
        if (i >= 30) throw e;
      }
    }
    for (let i = 0; i < 30; i++) await roundTrip(`lat-warm-${i}`);
    // Measured run: a1 drives the samples itself and every process keeps its timestamps in
    // memory, so no IPC message (and no wake-up of this process) sits on the critical path.
    const latencyDone = waitFor((m): m is Extract<FromProc, { ev: 'latency.done' }> => m.ev === 'latency.done', 120_000);
    to(origin, { cmd: 'latency', samples, gapMs: Number(process.env['TRINE_BENCH_GAP_MS'] ?? 20) });
    await latencyDone;
    await new Promise((r) => setTimeout(r, 200)); // the other agents' last deliveries
    const traces = await Promise.all([...replicas, ...agents].map((id) => {
      const p = waitFor((m): m is Extract<FromProc, { ev: 'trace' }> => m.ev === 'trace' && m.id === id);
      to(id, { cmd: 'trace' });
      return p;
    }));
    const primaryTrace = traces.find((t) => t.id === replicas[0]);
    const originTrace = traces.find((t) => t.id === origin);
    const oneWay: number[] = [];
    const whole: number[] = [];
    const rtt: number[] = [];
    for (const [tag, requestedAt] of Object.entries(originTrace?.requested ?? {})) {
      const orderedAt = primaryTrace?.ordered[tag];
      const at = traces.filter((t) => agents.includes(t.id)).map((t) => t.delivered[tag]);
      if (orderedAt === undefined || at.some((x) => x === undefined)) continue;
      for (const d of at as number[]) oneWay.push(d - orderedAt);
      whole.push(Math.max(...(at as number[])) - requestedAt);
      rtt.push((originTrace?.delivered[tag] ?? NaN) - requestedAt);
    }
    oneWay.sort((a, b) => a - b);
    whole.sort((a, b) => a - b);
    rtt.sort((a, b) => a - b);

    // Throughput: the origin keeps 8 requests of 50 broadcasts in flight; all agents count.
    const COUNT = 50;
    const baseline = await Promise.all(agents.map((a) => {
      const p = waitFor((m): m is Extract<FromProc, { ev: 'counts' }> => m.ev === 'counts' && m.id === a);
      to(a, { cmd: 'counts' });
      return p;
    }));
    const t0 = performance.timeOrigin + performance.now();
    const floodDone = waitFor((m): m is Extract<FromProc, { ev: 'flood.done' }> => m.ev === 'flood.done', 120_000);
    to(origin, { cmd: 'flood', prefix: 'tp', requests: floodRequests, count: COUNT, fanout: 'all', window: 8 });
    await floodDone;
    // The other agents may still be delivering what is in flight: count until every delivery is
    // in, or FLOOD_SETTLE_MS passes (a fixed wait undercounted on a loaded machine).
    const expected = floodRequests * COUNT * agents.length;
    const countAll = () => Promise.all(agents.map((a) => {
      const p = waitFor((m): m is Extract<FromProc, { ev: 'counts' }> => m.ev === 'counts' && m.id === a);
      to(a, { cmd: 'counts' });
      return p;
    }));
    const delivered = (after: Awaited<ReturnType<typeof countAll>>): number =>
      after.reduce((sum, c, i) => sum + c.deliveries - (baseline[i]?.deliveries ?? 0), 0);
    const settleBy = performance.now() + FLOOD_SETTLE_MS;
    let after = await countAll();
    while (delivered(after) < expected && performance.now() < settleBy) {
      await new Promise((r) => setTimeout(r, 100));
      after = await countAll();
    }
    if (process.env['TRINE_BENCH_TRACE'] !== undefined) for (const b of baseline) console.error(`${b.id} event-loop delay p50 ${b.loopDelayP50Ms.toFixed(3)} ms p99 ${b.loopDelayP99Ms.toFixed(3)} ms`);
    const total = delivered(after);
    let lastAt = t0;
    for (const c of after) lastAt = Math.max(lastAt, c.lastAtMs);
    const seconds = (lastAt - t0) / 1000;

    // Ordering throughput: requests with one reply each, 32 in flight.
    const REQS = 2000;
    const t1 = performance.timeOrigin + performance.now();
    const reqDone = waitFor((m): m is Extract<FromProc, { ev: 'flood.done' }> => m.ev === 'flood.done', 120_000);
    to(origin, { cmd: 'flood', prefix: 'rq', requests: REQS, count: 1, fanout: 'self', window: 32 });
    const endReq = await reqDone;

    return [
      { name: 'group latency p50 (primary orders → agent delivers)', value: quantile(oneWay, 0.5), unit: 'ms' },
      { name: 'group latency p99 (primary orders → agent delivers)', value: quantile(oneWay, 0.99), unit: 'ms' },
      { name: 'round trip p50 (agent request → last of 4 agents delivers)', value: quantile(whole, 0.5), unit: 'ms' },
      { name: 'round trip p99 (agent request → last of 4 agents delivers)', value: quantile(whole, 0.99), unit: 'ms' },
      { name: 'round trip p50 on one clock (agent request → its own delivery)', value: quantile(rtt, 0.5), unit: 'ms' },
      { name: 'latency samples', value: whole.length, unit: 'requests' },
      { name: 'signed group messages delivered (3 replicas, 4 agents)', value: total / seconds, unit: 'messages/s' },
      { name: 'broadcasts delivered to all 4 agents', value: total / agents.length / seconds, unit: 'broadcasts/s' },
      { name: 'flood completeness (delivered / expected)', value: total / expected, unit: 'ratio' },
      { name: 'agent requests ordered and answered', value: REQS / ((endReq.atMs - t1) / 1000), unit: 'requests/s' },
    ];
  } finally {
    // SIGTERM first (daemons exit cleanly, and a --cpu-prof profile gets written), then SIGKILL.
    const all = [...procs.map((p) => p.child), scc];
    for (const c of all) c.kill('SIGTERM');
    await Promise.race([
      Promise.all(all.map((c) => (c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r))))),
      new Promise((r) => setTimeout(r, 3000)),
    ]);
    for (const c of all) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    // Anything else naming the dir (a replacement replica an agent started, say) goes too.
    for (const pid of processesNaming(dir)) process.kill(pid, 'SIGKILL');
    if (process.env["TRINE_BENCH_KEEP"] === undefined) rmSync(dir, { recursive: true, force: true });
    else console.error(`bench: cluster dir kept at ${dir}`);
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const figures = await benchGroup();
  for (const f of figures) console.log(`${f.name}: ${Number.isInteger(f.value) ? f.value : f.value.toFixed(3)} ${f.unit}`);
  process.exit(0);
}
