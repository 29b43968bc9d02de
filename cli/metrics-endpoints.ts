// Where a cluster's daemons serve their Prometheus metrics (docs/OPERATIONS.md §9), for `trine
// status` (its document's `metrics`, one line of its table) and the dashboard's snapshot.
import { assert } from '../src/base/result.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { ClusterConfig } from '../src/io/cluster-dir.ts';
import { metricsHost, readMetricsPort, readMetricsPorts } from '../src/io/metrics-ports.ts';

export type MetricsEndpoint = { id: ProcessId; port: number; url: string };

/** The endpoints metrics.json in `dir` gives, in cluster.json's order, spares included (a spare
 *  serves once started); null with metrics off. The port a daemon recorded it serves on
 *  (run/<id>.metrics-port, when it runs on this host: another one if its own was taken) wins over
 *  the file's. A file that cannot be read goes to `warnings`. */
export function metricsEndpoints(config: ClusterConfig, dir: string, warnings: string[]): MetricsEndpoint[] | null {
  const read = readMetricsPorts(dir);
  if (!read.ok) {
    warnings.push(`${dir}/metrics.json is not usable (${read.detail}): the metrics endpoints cannot be listed, and a daemon that starts with this file serves none; fix or remove it (OPERATIONS §9)`);
    return null;
  }
  const ports = read.ports;
  if (ports === null) return null;
  return config.processes.flatMap((p) => {
    const port = readMetricsPort(dir, p.id) ?? ports.get(p.id);
    if (port === undefined) return [];
    const host = metricsHost(config, p);
    return [{ id: p.id, port, url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics` }];
  });
}

/** One line however many endpoints: how many, the port range and the first; --json lists each. */
export function metricsLine(endpoints: readonly MetricsEndpoint[]): string {
  const first = endpoints[0];
  assert(first !== undefined, 'metricsLine: no endpoint');
  const ports = endpoints.map((e) => e.port);
  const [lo, hi] = [Math.min(...ports), Math.max(...ports)];
  const range = lo === hi ? `port ${lo}` : `ports ${lo}-${hi}`;
  const n = endpoints.length;
  return `metrics: ${n} endpoint${n === 1 ? '' : 's'} on ${range} (${first.id}: ${first.url}${n > 1 ? '; --json lists each' : ''}; spares serve once started)`;
}
