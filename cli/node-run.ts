// `trine init`, `trine node run --bundle DIR` and `trine scc run --bundle DIR`: a cluster of
// several hosts (docs/OPERATIONS.md §8). `init` turns a hosts file into one bundle per host;
// `node run` starts, in the foreground, what one host runs from its bundle alone — its agent
// under its keeper, and its initial replica if it hosts one and the group has not gone on
// without it (decideReplica; the agent starts spares when the group commands it) — and stops
// all of it, task processes included, on SIGTERM; systemd's `trine-node.service` runs it. `scc run` runs the watchdog from the watchdog host's bundle,
// under its supervisor, which restarts it if it dies (src/daemon/supervisor.ts).
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { writeFilePrivate } from '../src/io/private-files.ts';
import { join, relative, resolve } from 'node:path';
import { EXIT_SHUTDOWN, SHUTDOWN_LINGER_MAX_MS } from '../src/core/constants.ts';
import type { ProcessId } from '../src/core/ports.ts';
import { isAlive, paths, processEntry, runningProcesses, type Cluster } from '../src/io/cluster-dir.ts';
import { StatusClient } from './status-client.ts';
import { BundleError, loadBundle, NODE_UNIT, SCC_UNIT, writeDeployment } from '../src/io/deploy.ts';
import { readHostsFile } from '../src/io/hosts-file.ts';
import { spawnDaemon } from './daemons.ts';
import { stopCluster } from './down.ts';
import { CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';

/** How often `node run` checks that its keeper still runs. */
export const NODE_WATCH_MS = 500;
/** After a shutdown (PROTOCOL §10.11) `node run` lets its replicas finish on their own (they
 *  wait for the watchdog and the agents, at most SHUTDOWN_LINGER_MAX_MS) before it stops what
 *  is left. */
export const NODE_SHUTDOWN_WAIT_MS = SHUTDOWN_LINGER_MAX_MS + 2_000;

/** A bundle's systemd unit: the watchdog's, a node's, or none (the operator's alone). */
const unitOf = (roles: readonly string[]) => (roles.includes('watchdog') ? SCC_UNIT : roles.includes('agent') ? NODE_UNIT : null);

export function init(opts: { hosts: string; out: string; json?: boolean | undefined }): number {
  const file = readHostsFile(opts.hosts);
  const plan = writeDeployment(file, opts.out);
  const out = resolve(opts.out);
  if (opts.json === true) {
    emitJson(SCHEMAS.init, {
      cluster: plan.config.cluster, out, installDir: file.install.dir,
      bundles: plan.bundles.map((b) => ({ host: b.host, address: b.address, roles: b.roles, ids: b.ids, unit: unitOf(b.roles), path: join(out, b.host) })),
    });
    return EXIT_OK;
  }
  const lines = plan.bundles.map((b) => {
    const unit = unitOf(b.roles) ?? 'no unit';
    const shown = relative(process.cwd(), join(out, b.host));
    return `  ${shown.startsWith('..') ? join(out, b.host) : shown}/  ${b.host} ${b.address}  ${b.roles.join(',')}  keys: ${b.ids.join(' ')}  (${unit})`;
  });
  process.stdout.write(
    `cluster ${plan.config.cluster}: ${plan.bundles.length} bundles in ${out}\n${lines.join('\n')}\n` +
      `copy each host's bundle to ${file.install.dir} on that host (docs/OPERATIONS.md §8); every bundle holds that host's keys only\n`,
  );
  return EXIT_OK;
}

function bundleFor(dir: string, role: 'agent' | 'watchdog') {
  let loaded;
  try {
    loaded = loadBundle(dir);
  } catch (e) {
    if (e instanceof BundleError) throw new CliError(e.message, EXIT_USAGE);
    throw e;
  }
  if (!loaded.bundle.roles.includes(role)) {
    const other = role === 'agent' ? '`trine scc run`' : '`trine node run`';
    throw new CliError(`the bundle in ${resolve(dir)} is host ${loaded.bundle.host}'s (${loaded.bundle.roles.join(', ')}), which runs no ${role === 'agent' ? 'node' : 'watchdog'}: use ${other}, or pass the right --bundle`, EXIT_USAGE);
  }
  return loaded;
}

/** Runs a host's daemons until SIGTERM or SIGINT (then stops them all) or until its keeper
 *  dies (then stops the rest and exits non-zero, for systemd to start the node again). */
export async function nodeRun(opts: { bundle: string }): Promise<number> {
  const { bundle, cluster } = bundleFor(opts.bundle, 'agent');
  const dir = cluster.dir;
  const running = runningProcesses(dir);
  if (running.length > 0) {
    throw new CliError(`host ${bundle.host} is already running from ${dir} (${running.map((r) => r.id).join(', ')}): stop it first (systemctl stop ${NODE_UNIT}, or SIGTERM its \`trine node run\`)`, EXIT_FAILED);
  }
  await stopCluster(dir, []); // what a power-off left on record: stale pid files, orphans
  const m = cluster.config.membership;
  const replica = m.replicas.find((r) => bundle.ids.includes(r));
  const agent = m.agents.find((a) => bundle.ids.includes(a.id));
  if (agent === undefined) throw new CliError(`the bundle of ${bundle.host} holds no agent key: copy it again from \`trine init\`'s output`, EXIT_USAGE);
  // A shutdown that ended the last run is over: this run starts the node again.
  rmSync(paths.shutdownFile(dir, agent.id), { force: true });
  const keeper = { id: agent.id, pid: spawnDaemon(dir, processEntry(cluster, agent.id)) };
  process.stdout.write(`node ${bundle.host} (${bundle.address}) of cluster ${cluster.config.cluster}: ${agent.id} keeper pid ${keeper.pid}; logs in ${paths.logs(dir)}\n`);

  return new Promise<number>((resolveRun) => {
    let stopping = false;
    if (replica !== undefined) {
      void decideReplica(cluster, agent.id, replica, () => stopping).then((d) => {
        if (stopping) return;
        if (d.start) {
          const pid = spawnDaemon(dir, processEntry(cluster, replica));
          if (d.record !== null) writeBootRecord(dir, replica, d.record);
          process.stdout.write(`node ${bundle.host}: ${replica} pid ${pid} (${d.why})\n`);
        } else {
          process.stdout.write(`node ${bundle.host}: ${replica} not started: ${d.why}\n`);
        }
      }, (e: Error) => process.stdout.write(`node ${bundle.host}: ${replica} not started: ${e.message}\n`));
    }
    const stop = (code: number, why: string) => {
      if (stopping) return;
      stopping = true;
      clearInterval(watch);
      process.stdout.write(`node ${bundle.host}: ${why}; stopping its processes\n`);
      void stopCluster(dir, []).then(() => resolveRun(code), () => resolveRun(EXIT_FAILED));
    };
    /** The agent's record says whether the node was removed or the cluster shut down. */
    const removedFromCluster = (): boolean => {
      try {
        return (JSON.parse(readFileSync(paths.shutdownFile(dir, agent.id), 'utf8')) as { removed?: unknown }).removed === true;
      } catch {
        return false;
      }
    };
    const shutDown = async (): Promise<void> => {
      stopping = true;
      clearInterval(watch);
      const removed = removedFromCluster();
      process.stdout.write(`node ${bundle.host}: ${removed ? 'the operator removed this node' : 'the operator shut the cluster down'}; waiting for its replicas to finish\n`);
      const until = Date.now() + NODE_SHUTDOWN_WAIT_MS;
      while (runningProcesses(dir).length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, NODE_WATCH_MS));
      await stopCluster(dir, []);
      process.stdout.write(`node ${bundle.host}: stopped for the ${removed ? 'removal' : 'shutdown'} (exit ${EXIT_SHUTDOWN}: systemd does not restart it)\n`);
      resolveRun(EXIT_SHUTDOWN);
    };
    const watch = setInterval(() => {
      if (isAlive(keeper.pid)) return;
      if (existsSync(paths.shutdownFile(dir, agent.id))) void shutDown().catch(() => resolveRun(EXIT_FAILED));
      else stop(EXIT_FAILED, `keeper of ${agent.id} (pid ${keeper.pid}) exited`);
    }, NODE_WATCH_MS);
    process.once('SIGTERM', () => stop(EXIT_OK, 'SIGTERM'));
    process.once('SIGINT', () => stop(EXIT_OK, 'SIGINT'));
  });
}

/** How long a node's first boot waits for the watchdog before it starts its replica anyway (a
 *  new cluster: the watchdog may come up after the nodes). */
export const FIRST_BOOT_QUERY_MS = 3_000;
/** A later boot asks the watchdog this often until it answers: starting the replica without
 *  knowing whether the group went on without it could put a second, stale primary on the net. */
export const BOOT_QUERY_RETRY_MS = 1_000;

/** What the watchdog said when this node last started its initial replica. */
type BootRecord = { watchdogInc: number; clusterResetCount: number };

const bootRecordPath = (dir: string, replica: ProcessId) => join(paths.run(dir), `${replica}.boot.json`);

function readBootRecord(dir: string, replica: ProcessId): BootRecord | null {
  try {
    const v = JSON.parse(readFileSync(bootRecordPath(dir, replica), 'utf8')) as Partial<BootRecord>;
    return Number.isSafeInteger(v.watchdogInc) && Number.isSafeInteger(v.clusterResetCount) ? (v as BootRecord) : null;
  } catch {
    return null;
  }
}

function writeBootRecord(dir: string, replica: ProcessId, r: BootRecord): void {
  writeFilePrivate(bootRecordPath(dir, replica), `${JSON.stringify(r)}\n`);
}

/** Whether a booting node starts its initial replica (PROTOCOL §10.10). A replica starts from
 *  the initial state, so it may start only where no group went on without it: on a new
 *  cluster, and after a cluster reset (every replica starts afresh). After a reset of this node
 *  alone the group has condemned its replica and replaces it with a spare; a fresh copy of the
 *  old id would be a second primary at view 0. The watchdog tells which: its cluster-reset count
 *  against the one recorded at the last start, and whether it hears two replicas (armed). */
async function decideReplica(
  cluster: Cluster, agent: ProcessId, replica: ProcessId, stopping: () => boolean,
): Promise<{ start: boolean; why: string; record: BootRecord | null }> {
  const record = readBootRecord(cluster.dir, replica);
  const client = await StatusClient.open(cluster, agent);
  try {
    const firstDeadline = Date.now() + FIRST_BOOT_QUERY_MS;
    for (;;) {
      if (stopping()) return { start: false, why: 'stopping', record: null };
      const a = await client.queryWatchdog(BOOT_QUERY_RETRY_MS);
      if (a.ok) {
        const now: BootRecord = { watchdogInc: a.status.inc, clusterResetCount: a.status.clusterResetCount ?? 0 };
        if (record !== null && record.watchdogInc === now.watchdogInc && now.clusterResetCount > record.clusterResetCount) {
          return { start: true, why: `the watchdog reset the cluster since it last ran (resets ${record.clusterResetCount} → ${now.clusterResetCount})`, record: now };
        }
        if (a.status.armed) return { start: false, why: 'the watchdog hears a group of two or more replicas without it: the group replaces it with a spare', record: null };
        return { start: true, why: record === null ? 'first start' : 'the watchdog hears no group', record: now };
      }
      if (record === null && Date.now() >= firstDeadline) return { start: true, why: 'first start; the watchdog does not answer yet', record: null };
    }
  } finally {
    await client.close();
  }
}

/** Runs the watchdog from the watchdog host's bundle, in the foreground, under its supervisor:
 *  this process is the supervisor (src/daemon/main.ts startWatchdog), which exits 4 once the watchdog
 *  stood down for a shutdown, so systemd's RestartPreventExitStatus=4 holds. */
export async function sccRun(opts: { bundle: string }): Promise<null> {
  const { cluster } = bundleFor(opts.bundle, 'watchdog');
  if (!existsSync(paths.keyFile(cluster.dir, cluster.config.membership.scc))) {
    throw new CliError(`the bundle in ${cluster.dir} has no watchdog key: copy it again from \`trine init\`'s output`, EXIT_USAGE);
  }
  const { startWatchdog } = await import('../src/daemon/main.ts');
  await startWatchdog({ dir: cluster.dir });
  return null;
}
