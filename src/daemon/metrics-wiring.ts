// Starts a daemon's metrics (docs/OPERATIONS.md "Metrics") when the cluster dir asks for them:
// src/daemon/run-core.ts imports this module only then, so prom-client is never loaded by a
// daemon without metrics. The endpoint binds the daemon's own address: where it listens for
// peers, else its node's address (an agent of a cluster of several hosts), else loopback.
//
// A taken port does not stop the daemon: a cluster manager that refused to run for want of its
// monitoring would trade availability for observability. As a replacement replica does with its
// listen port (src/io/listen-port.ts), it logs the error, serves on a free port of the same host
// instead, and records the port it serves on in run/<id>.metrics-port, where the operator finds
// it. (`trine up --metrics-port` checks every port first and refuses a taken one outright.)
import type { ProcessId } from '../core/ports.ts';
import type { Cluster, ProcessEntry } from '../io/cluster-dir.ts';
import { metricsHost, MetricsError, writeMetricsPort } from '../io/metrics-ports.ts';
import { serveMetrics, type MetricsServer } from '../io/metrics-server.ts';
import { DaemonMetrics } from './metrics.ts';
import type { MetricsSample } from './metrics-sample.ts';

type Log = (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void;

export type DaemonMetricsHandle = { metrics: DaemonMetrics; server: MetricsServer; close(): Promise<void> };

export async function startDaemonMetrics(opts: {
  cluster: Cluster;
  entry: ProcessEntry & { kind: 'replica' | 'agent' | 'watchdog' };
  port: number;
  log: Log;
  sample: () => MetricsSample;
  nowMs: () => number;
}): Promise<DaemonMetricsHandle> {
  const { cluster, entry, log } = opts;
  const metrics = await DaemonMetrics.create({ daemon: entry.kind, id: entry.id, node: entry.node }, opts.sample, opts.nowMs);
  const host = metricsHost(cluster.config, entry);
  const onError = (e: Error) => log('error', 'metrics.error', { error: e.message });
  let server: MetricsServer;
  try {
    server = await serveMetrics(metrics, host, opts.port, onError);
  } catch (e) {
    if (!(e instanceof MetricsError && e.code === 'METRICS_PORT_IN_USE')) throw e;
    server = await serveMetrics(metrics, host, 0, onError);
    log('error', 'metrics.port-in-use', {
      configured: opts.port, port: server.port, hint: `metrics served on ${host}:${server.port} instead (run/${entry.id}.metrics-port); free port ${opts.port} and restart the daemon to use it`,
    });
  }
  record(cluster.dir, entry.id, server.port, log);
  log('info', 'metrics.listening', { host, port: server.port });
  return { metrics, server, close: () => server.close() };
}

function record(dir: string, id: ProcessId, port: number, log: Log): void {
  try {
    writeMetricsPort(dir, id, port);
  } catch (e) {
    log('error', 'metrics.port.unrecorded', { port, error: (e as Error).message });
  }
}
