// `trine up`: creates a local cluster (keys, cluster.json, ports) and starts every daemon
// detached — the watchdog under its supervisor, which restarts it if it dies (its pid file is the
// supervisor's, src/daemon/supervisor.ts), replicas r1..r3 on nodes n1..n3, and on every node a
// keeper that runs the node's agent and restarts it (spec §1.4 Agent-Keeper; its pid file is the
// keeper's), each with cli/daemons.ts spawnDaemon, as the watchdog's reset driver restarts a
// keeper — then waits until the cluster is healthy (one primary, two backups, every agent joined
// with a fresh heartbeat, equal digests at equal RSN, the watchdog hearing all replicas) and says
// so in one line (with --json, a `trine.up/1` object, cli/json-out.ts). If it is not healthy in
// time, it prints what is missing and stops what it started.
import { mkdirSync, readFileSync } from 'node:fs';
import type { ProcessId } from '../src/core/ports.ts';
import {
  allocatePorts, clusterIds, LOOPBACK_HOST, ClusterDirError, DEFAULT_NODES, generateClusterKeys, isAlive, isForeignDir, loadCluster, MAX_NODES, MIN_NODES,
  isUserName, paths, planCluster, readPidFiles, removePidFile, resolveClusterDir, runningProcesses, writeClusterConfig,
  type ClusterConfig,
} from '../src/io/cluster-dir.ts';
import { logPath } from '../src/io/log.ts';
import {
  checkMetricsPorts, metricsDaemons, MetricsError, planMetricsPorts, removeMetricsPorts, writeMetricsPorts,
} from '../src/io/metrics-ports.ts';
import { CliError, emitJsonError, EXIT_FAILED, EXIT_OK, EXIT_USAGE, quoted } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';
import { spawnDaemon } from './daemons.ts';
import { stopCluster } from './down.ts';
import { StatusClient } from './status-client.ts';
import { buildStatusDocument, type StatusDocument } from './status-report.ts';

/** How long `trine up` waits for a healthy cluster. Starting 8 TypeScript processes costs a
 *  few CPU-seconds; on 2 busy cores that can take 10 s, so 30 s leaves room without hanging. */
export const UP_TIMEOUT_MS = 30_000;
/** Each health poll waits this long for answers before looking again. */
export const UP_QUERY_TIMEOUT_MS = 500;
/** Pause between health polls. */
export const UP_POLL_MS = 100;
/** Lines of a dead daemon's output shown when `up` fails because of it. */
const TAIL_LINES = 3;

function tail(dir: string, id: ProcessId): string {
  for (const file of [paths.output(dir, id), logPath(dir, id)]) {
    try {
      const lines = readFileSync(file, 'utf8').trim().split('\n').filter((l) => l.length > 0);
      if (lines.length > 0) return lines.slice(-TAIL_LINES).join(' | ');
    } catch {
      // try the next file
    }
  }
  return 'no output';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type UpOptions = {
  dir?: string | undefined;
  nodes?: number | undefined;
  basePort?: number | undefined;
  timeoutMs?: number | undefined;
  /** Record `allowInject: true` in cluster.json: the daemons install their fault-injection
   *  hooks and `trine inject` may act on the cluster (docs/OPERATIONS.md §7). */
  allowInject?: boolean | undefined;
  /** Print a `trine.up/1` object instead of the line. */
  json?: boolean | undefined;
  /** Serve Prometheus metrics: daemon i of cluster.json on port metricsPort + i (metrics.json,
   *  docs/OPERATIONS.md "Metrics"). */
  metricsPort?: number | undefined;
};

/** `--metrics-port BASE`: a port per daemon (`daemons` in cluster.json's order), each checked
 *  free, before anything is written; null without the option. */
async function planMetrics(daemons: readonly ProcessId[], ports: readonly number[], base: number | undefined): Promise<Map<ProcessId, number> | null> {
  if (base === undefined) return null;
  try {
    const planned = planMetricsPorts(daemons, base);
    await checkMetricsPorts(planned, LOOPBACK_HOST, ports);
    return planned;
  } catch (e) {
    if (e instanceof MetricsError) throw new CliError(e.message, EXIT_USAGE);
    throw e;
  }
}

/** The `up` line's word on metrics: the ports they are served on, or nothing. */
function metricsNote(metrics: ReadonlyMap<ProcessId, number> | null): string {
  if (metrics === null) return '';
  const ports = [...metrics.values()];
  return `; metrics on ports ${Math.min(...ports)}-${Math.max(...ports)} (metrics.json)`;
}

export async function up(opts: UpOptions): Promise<number> {
  const started = performance.now();
  const dir = resolveClusterDir(opts.dir);
  const nodes = opts.nodes ?? DEFAULT_NODES;
  if (isForeignDir(dir)) {
    throw new ClusterDirError('FOREIGN_DIR', `${dir} exists and is not a trine cluster dir: pass another --dir (trine up will not write into it)`);
  }
  const running = runningProcesses(dir);
  if (running.length > 0) {
    throw new ClusterDirError('CLUSTER_RUNNING', `a cluster is already running in ${dir} (${running.map((r) => r.id).join(', ')}): run \`trine down --dir ${dir}\` first, or pass another --dir`);
  }
  if (!Number.isInteger(nodes) || nodes < MIN_NODES || nodes > MAX_NODES) {
    throw new ClusterDirError('BAD_ARGUMENT', `--nodes must be an integer from ${MIN_NODES} to ${MAX_NODES}, got ${nodes}`);
  }
  const ids = clusterIds(nodes);
  const ports = await allocatePorts(ids.listeners.length, opts.basePort);
  // planCluster lists the listeners, then the agents (then the operator): metrics.json's order.
  const metrics = await planMetrics([...ids.listeners, ...ids.agents], ports, opts.metricsPort);

  mkdirSync(dir, { recursive: true });
  // What an earlier cluster in this dir left running (an agent whose keeper died, task
  // processes) belongs to no one once new keys are made: stop it and forget its records.
  await stopCluster(dir, []);
  for (const { id } of readPidFiles(dir)) removePidFile(dir, id);
  // TRINE_TASK_USER: tasks run as that user (the daemons must then run as root); by default a
  // one-host cluster runs them as the daemons' own user (FAULT-MODEL "Tasks and Trine's secrets").
  const taskUser = process.env['TRINE_TASK_USER'];
  if (taskUser !== undefined && taskUser !== '' && !isUserName(taskUser)) {
    throw new ClusterDirError('BAD_ARGUMENT', `TRINE_TASK_USER=${quoted(taskUser)} is not a user name: unset it, or name the user tasks should run as`);
  }
  const keys = generateClusterKeys(dir, ids.all);
  const config: ClusterConfig = planCluster({
    nodes, ports, allowInject: opts.allowInject === true, ...(taskUser === undefined || taskUser === '' ? {} : { taskUser }),
  }, keys);
  const daemons = metricsDaemons(config.processes);
  if (metrics !== null && [...metrics.keys()].join() !== daemons.join()) throw new Error('metrics ports planned in another order than cluster.json');
  // Without --metrics-port, an earlier cluster's metrics.json in this dir goes too.
  removeMetricsPorts(dir, config.processes.map((p) => p.id));
  if (metrics !== null) writeMetricsPorts(dir, metrics);
  writeClusterConfig(dir, config);
  const cluster = loadCluster(dir);

  const started_: { id: ProcessId; pid: number }[] = [];
  let stopping = false;
  const stopAll = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await stopCluster(dir, started_);
  };
  const onSignal = () => {
    process.stderr.write('trine: interrupted: stopping what was started\n');
    void stopAll().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let client: StatusClient | null = null;
  try {
    // Listeners first so dialers find them; the order only saves a few reconnects.
    // Spare replicas start only when the group commands it (PROTOCOL §10.6).
    const initial = config.processes.filter((p) => p.kind === 'replica' && config.membership.replicas.includes(p.id));
    const order = [...config.processes.filter((p) => p.kind === 'watchdog'), ...initial, ...config.processes.filter((p) => p.kind === 'agent')];
    for (const p of order) started_.push({ id: p.id, pid: spawnDaemon(dir, p) });

    client = await StatusClient.open(cluster);
    const deadline = Date.now() + (opts.timeoutMs ?? UP_TIMEOUT_MS);
    let last: StatusDocument | null = null;
    while (Date.now() < deadline) {
      const dead = started_.filter((s) => !isAlive(s.pid));
      if (dead.length > 0) {
        const why = dead.map((d) => `${d.id} exited (${tail(dir, d.id)})`).join('; ');
        await client.close();
        client = null;
        await stopAll();
        throw new CliError(`cluster did not start: ${why}; stopped the rest (logs in ${paths.logs(dir)})`, EXIT_FAILED, 'START_FAILED');
      }
      const answers = await client.query(Math.min(UP_QUERY_TIMEOUT_MS, Math.max(1, deadline - Date.now())));
      last = buildStatusDocument(cluster.config, dir, answers, new Date());
      if (last.healthy && last.converged) {
        const seconds = ((performance.now() - started) / 1000).toFixed(1);
        if (opts.json === true) {
          emitJson(SCHEMAS.up, {
            dir, cluster: config.cluster, elapsedMs: Math.round(performance.now() - started), primary: last.primary, view: last.group.view,
            replicas: config.membership.replicas, agents: config.membership.agents.map((a) => ({ id: a.id, node: a.node })), watchdog: config.membership.scc,
            allowInject: config.allowInject === true, metricsPorts: metrics === null ? null : Object.fromEntries(metrics),
          });
          return EXIT_OK;
        }
        process.stdout.write(
          `cluster up and healthy in ${seconds} s: ${config.membership.replicas.length} replicas (primary ${last.primary ?? '?'}), ` +
            `${config.membership.agents.length} agents, watchdog ${config.membership.scc}${config.allowInject === true ? '; fault injection allowed' : ''}` +
            `${metricsNote(metrics)}; dir ${dir}\n`,
        );
        return EXIT_OK;
      }
      await sleep(UP_POLL_MS);
    }
    await client.close();
    client = null;
    const missing = last === null ? ['no status answer yet'] : last.problems.length > 0 ? last.problems : ['replicas have not converged to one RSN and digest'];
    process.stderr.write(`trine: cluster not healthy after ${((opts.timeoutMs ?? UP_TIMEOUT_MS) / 1000).toFixed(0)} s; missing:\n${missing.map((m) => `  - ${m}`).join('\n')}\n`);
    await stopAll();
    process.stderr.write(`trine: stopped what was started (logs in ${paths.logs(dir)})\n`);
    emitJsonError('NOT_HEALTHY', `cluster not healthy after ${((opts.timeoutMs ?? UP_TIMEOUT_MS) / 1000).toFixed(0)} s; missing: ${missing.join('; ')}; ` +
      `stopped what was started (logs in ${paths.logs(dir)})`, EXIT_FAILED);
    return EXIT_FAILED;
  } catch (e) {
    await client?.close();
    await stopAll();
    throw e;
  } finally {
    await client?.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
