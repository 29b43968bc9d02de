// `trine init`, `trine node run --bundle DIR` and `trine scc run --bundle DIR`: a cluster of
// several hosts (docs/OPERATIONS.md §9). `init` turns a hosts file into one bundle per host;
// `node run` starts, in the foreground, what one host runs from its bundle alone — its agent
// under its keeper, and its initial replica if it hosts one (the agent starts spares when the
// group commands it) — and stops all of it, task processes included, on SIGTERM; systemd's
// `trine-node.service` runs it. `scc run` runs the watchdog from the watchdog host's bundle.
import { existsSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { ProcessId } from '../src/core/ports.ts';
import { isAlive, paths, processEntry, runningProcesses } from '../src/io/cluster-dir.ts';
import { BundleError, loadBundle, NODE_UNIT, SCC_UNIT, writeDeployment } from '../src/io/deploy.ts';
import { readHostsFile } from '../src/io/hosts-file.ts';
import { spawnDaemon, startWatchdog } from './daemons.ts';
import { stopCluster } from './down.ts';
import { CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './errors.ts';

/** How often `node run` checks that its keeper still runs. */
export const NODE_WATCH_MS = 500;

export function init(opts: { hosts: string; out: string }): number {
  const file = readHostsFile(opts.hosts);
  const plan = writeDeployment(file, opts.out);
  const out = resolve(opts.out);
  const lines = plan.bundles.map((b) => {
    const unit = b.roles.includes('watchdog') ? SCC_UNIT : b.roles.includes('agent') ? NODE_UNIT : 'no unit';
    const shown = relative(process.cwd(), join(out, b.host));
    return `  ${shown.startsWith('..') ? join(out, b.host) : shown}/  ${b.host} ${b.address}  ${b.roles.join(',')}  keys: ${b.ids.join(' ')}  (${unit})`;
  });
  process.stdout.write(
    `cluster ${plan.config.cluster}: ${plan.bundles.length} bundles in ${out}\n${lines.join('\n')}\n` +
      `copy each host's bundle to ${file.install.dir} on that host (docs/OPERATIONS.md §9); every bundle holds that host's keys only\n`,
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
  const started: { id: ProcessId; pid: number }[] = [];
  if (replica !== undefined) started.push({ id: replica, pid: spawnDaemon(dir, processEntry(cluster, replica)) });
  const keeper = { id: agent.id, pid: spawnDaemon(dir, processEntry(cluster, agent.id)) };
  started.push(keeper);
  process.stdout.write(`node ${bundle.host} (${bundle.address}) of cluster ${cluster.config.cluster}: ${started.map((s) => `${s.id} pid ${s.pid}`).join(', ')}; logs in ${paths.logs(dir)}\n`);

  return new Promise<number>((resolveRun) => {
    let stopping = false;
    const stop = (code: number, why: string) => {
      if (stopping) return;
      stopping = true;
      clearInterval(watch);
      process.stdout.write(`node ${bundle.host}: ${why}; stopping its processes\n`);
      void stopCluster(dir, []).then(() => resolveRun(code), () => resolveRun(EXIT_FAILED));
    };
    const watch = setInterval(() => {
      if (!isAlive(keeper.pid)) stop(EXIT_FAILED, `keeper of ${agent.id} (pid ${keeper.pid}) exited`);
    }, NODE_WATCH_MS);
    process.once('SIGTERM', () => stop(EXIT_OK, 'SIGTERM'));
    process.once('SIGINT', () => stop(EXIT_OK, 'SIGINT'));
  });
}

/** Runs the watchdog from the watchdog host's bundle, in the foreground. */
export async function sccRun(opts: { bundle: string }): Promise<null> {
  const { cluster } = bundleFor(opts.bundle, 'watchdog');
  if (!existsSync(paths.keyFile(cluster.dir, cluster.config.membership.scc))) {
    throw new CliError(`the bundle in ${cluster.dir} has no watchdog key: copy it again from \`trine init\`'s output`, EXIT_USAGE);
  }
  await startWatchdog({ dir: cluster.dir });
  return null;
}
