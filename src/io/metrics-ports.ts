// Where each daemon serves its Prometheus metrics (docs/OPERATIONS.md "Metrics"): the cluster
// dir's `metrics.json`, written by `trine up --metrics-port BASE` and by `trine init` for a hosts
// file with `metrics-port:`, read by every daemon when it starts (src/daemon/run-core.ts). No
// file, no metrics: a daemon then never even loads prom-client. A separate file rather than a
// field of cluster.json, so that metrics can be turned on or off on a host (delete or copy the
// file, restart the daemons) without touching the signed-off cluster document.
//
// Ports: BASE + the process's index among cluster.json's daemons (its `processes` in order, the
// operator left out), so replicas, spares, the watchdog and agents each get their own, also when
// several of them share a host. A daemon records the port it actually serves on in
// `run/<id>.metrics-port` (another one, if its own was taken: see src/daemon/metrics-wiring.ts).
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { ProcessId } from '../core/ports.ts';
import { processId } from '../core/wire/messages.ts';
import { LOOPBACK_HOST, paths, type ClusterConfig, type ProcessEntry } from './cluster-dir.ts';
import { writeFileAtomic } from './private-files.ts';
import { readPortRecord, writePortRecord } from './run-records.ts';

export const METRICS_FILE_FORMAT = 'trine-metrics/1';
/** A metrics.json lists one short entry per daemon (at most a few hundred); a larger file is not one. */
export const MAX_METRICS_FILE_BYTES = 64 * 1024;
/** The lowest BASE: ports below need privileges, and the kernel's well-known range is not ours. */
export const MIN_METRICS_PORT = 1024;

export type MetricsPorts = ReadonlyMap<ProcessId, number>;

export type MetricsErrorCode = 'METRICS_PORT_IN_USE' | 'METRICS_FILE_INVALID' | 'BAD_ARGUMENT';

export class MetricsError extends Error {
  override readonly name = 'MetricsError';
  constructor(readonly code: MetricsErrorCode, message: string) {
    super(message);
  }
}

export const metricsFile = (dir: string): string => join(dir, 'metrics.json');
export const metricsPortFile = (dir: string, id: ProcessId): string => join(paths.run(dir), `${id}.metrics-port`);

/** The address a daemon's metrics endpoint binds: its listen host, else its node's address (a
 *  hosts cluster's agents), else loopback (`trine up`). */
export function metricsHost(config: Pick<ClusterConfig, 'nodeAddresses'>, entry: ProcessEntry): string {
  if (entry.listen !== null) return entry.listen.host;
  const node = entry.node === null ? undefined : config.nodeAddresses?.[entry.node];
  return node ?? LOOPBACK_HOST;
}

/** The daemons of cluster.json that serve metrics, in its order: every process but the operator. */
export const metricsDaemons = (processes: readonly ProcessEntry[]): ProcessId[] => processes.filter((p) => p.kind !== 'operator').map((p) => p.id);

/** BASE + index for every daemon of `list` (metricsDaemons order); a BASE whose range leaves
 *  1024–65535 is a BAD_ARGUMENT naming the option. */
export function planMetricsPorts(list: readonly ProcessId[], base: number, option = '--metrics-port'): Map<ProcessId, number> {
  if (!Number.isInteger(base) || base < MIN_METRICS_PORT || base + list.length - 1 > 65535) {
    throw new MetricsError('BAD_ARGUMENT', `${option} must be an integer from ${MIN_METRICS_PORT} to ${65536 - list.length} (the cluster's ${list.length} daemons use a port each from it), got ${base}`);
  }
  return new Map(list.map((id, i) => [id, base + i]));
}

export function encodeMetricsPorts(ports: MetricsPorts): string {
  return `${JSON.stringify({ format: METRICS_FILE_FORMAT, ports: Object.fromEntries(ports) }, null, 2)}\n`;
}

export function writeMetricsPorts(dir: string, ports: MetricsPorts): void {
  writeFileAtomic(metricsFile(dir), encodeMetricsPorts(ports));
}

/** Metrics off for the cluster in `dir`: its metrics.json and the ports its daemons recorded go
 *  (`trine up` without --metrics-port over an earlier cluster's dir). */
export function removeMetricsPorts(dir: string, ids: readonly ProcessId[]): void {
  rmSync(metricsFile(dir), { force: true });
  for (const id of ids) rmSync(metricsPortFile(dir, id), { force: true });
}

/** `trine up`: every planned port is free on `host` and none is one of the cluster's own
 *  `listening` ports; else METRICS_PORT_IN_USE or BAD_ARGUMENT naming the port and the fix. */
export async function checkMetricsPorts(ports: MetricsPorts, host: string, listening: readonly number[], option = '--metrics-port'): Promise<void> {
  const clash = [...ports.values()].find((p) => listening.includes(p));
  if (clash !== undefined) {
    throw new MetricsError('BAD_ARGUMENT', `${option} gives port ${clash} to metrics, which the cluster itself listens on: pick a ${option} whose ${ports.size} ports miss the cluster's (${listening.join(', ')})`);
  }
  for (const port of ports.values()) {
    if (!(await portFree(host, port))) {
      throw new MetricsError('METRICS_PORT_IN_USE', `metrics port ${port} on ${host} is in use: pick another ${option} (the cluster needs ${ports.size} ports from it), or stop what holds the port`);
    }
  }
}

function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' || e.code === 'EACCES' ? resolve(false) : reject(e)));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

export type MetricsPortsRead = { ok: true; ports: MetricsPorts | null } | { ok: false; code: 'METRICS_FILE_INVALID'; detail: string };

/** The cluster's metrics ports: null when there is no metrics.json (metrics off). Total: any
 *  other problem (unreadable, oversized, not JSON, a wrong field) comes back as a reason. */
export function readMetricsPorts(dir: string): MetricsPortsRead {
  let text: string;
  try {
    text = readFileSync(metricsFile(dir), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { ok: true, ports: null };
    return bad(`cannot read it (${(e as Error).message})`);
  }
  return decodeMetricsPorts(text);
}

export function decodeMetricsPorts(text: string): MetricsPortsRead {
  if (text.length > MAX_METRICS_FILE_BYTES) return bad(`${text.length} bytes, over ${MAX_METRICS_FILE_BYTES}`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return bad(`not JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return bad('not an object');
  const { format, ports } = json as Record<string, unknown>;
  if (format !== METRICS_FILE_FORMAT) return bad(`"format" is not ${METRICS_FILE_FORMAT}`);
  if (typeof ports !== 'object' || ports === null || Array.isArray(ports)) return bad('"ports" must map process ids to ports');
  // Ports may repeat: on a cluster of several hosts, each host's daemons use the same ones.
  const out = new Map<ProcessId, number>();
  for (const [id, port] of Object.entries(ports)) {
    if (!processId.dec(id, 'id').ok) return bad(`${JSON.stringify(id.slice(0, 40))} is not a process id`);
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) return bad(`ports.${id} must be a port number`);
    out.set(id, port);
  }
  return { ok: true, ports: out };
}

const bad = (detail: string): MetricsPortsRead => ({ ok: false, code: 'METRICS_FILE_INVALID', detail });

/** A host added at run time (`trine node add`): its daemons' ports by the rule `trine init`
 *  used, `metrics-port` + (listen port − `port`), whose one offset the existing file shows (every
 *  listed daemon with a listen port in `config` has the same port − listen port). The existing
 *  entries and the new ones; or why not (no daemon to learn the offset from, or two offsets: a
 *  file edited by hand), for the operator to do it by hand. */
export function extendMetricsPorts(
  ports: MetricsPorts, config: { processes: readonly ProcessEntry[] }, added: readonly { id: ProcessId; port: number }[],
): { ok: true; ports: Map<ProcessId, number> } | { ok: false; reason: string } {
  const offsets = new Set<number>();
  for (const p of config.processes) {
    const m = ports.get(p.id);
    if (m !== undefined && p.listen !== null) offsets.add(m - p.listen.port);
  }
  const [offset] = offsets;
  if (offset === undefined) return { ok: false, reason: 'metrics.json names no daemon that listens, so the offset from listen ports is unknown' };
  if (offsets.size > 1) return { ok: false, reason: `metrics.json's ports follow ${offsets.size} different offsets from the listen ports (edited by hand?)` };
  const out = new Map(ports);
  for (const a of added) {
    const port = a.port + offset;
    if (port < MIN_METRICS_PORT || port > 65535) return { ok: false, reason: `${a.id} would serve metrics on port ${port}, outside ${MIN_METRICS_PORT}-65535` };
    // `trine init` kept the two ranges apart; more spares on the new host can reach across.
    const clash = added.find((b) => b.port === port);
    if (clash !== undefined) return { ok: false, reason: `${a.id} would serve metrics on port ${port}, which ${clash.id} listens on` };
    out.set(a.id, port);
  }
  return { ok: true, ports: out };
}

/** `trine node add`: the cluster's metrics ports with the new host's daemons added (null with
 *  metrics off: no metrics.json in the operator's `dir`), or a warning saying why the new host
 *  gets none and what to do. */
export function metricsForAddedHost(
  dir: string, config: { processes: readonly ProcessEntry[] }, added: readonly { id: ProcessId; port: number }[],
): { ports: Map<ProcessId, number> | null; warning: string | null } {
  const read = readMetricsPorts(dir);
  if (!read.ok) return { ports: null, warning: `${metricsFile(dir)} is not usable (${read.detail}): the new host serves no metrics; fix the file and add its ids by hand (docs/OPERATIONS.md §9)` };
  if (read.ports === null) return { ports: null, warning: null };
  const extended = extendMetricsPorts(read.ports, config, added);
  if (!extended.ok) return { ports: null, warning: `the new host serves no metrics: ${extended.reason}; add its ids to metrics.json on the host by hand (docs/OPERATIONS.md §9)` };
  return { ports: extended.ports, warning: null };
}

/** Records the port a daemon serves metrics on, for the operator (and tests) to find. */
export function writeMetricsPort(dir: string, id: ProcessId, port: number): void {
  writePortRecord(dir, metricsPortFile(dir, id), port);
}

/** The port `id` recorded it serves metrics on, or null (none, or not a port). */
export function readMetricsPort(dir: string, id: ProcessId): number | null {
  return readPortRecord(metricsPortFile(dir, id));
}
