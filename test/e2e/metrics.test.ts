// Prometheus metrics on a real cluster (issue 19 item 2; docs/OPERATIONS.md "Metrics"): ONE
// 4-node cluster started with `trine up --metrics-port`, every daemon scraped over HTTP as
// Prometheus would, the exposition parsed (test/integration/prom-text.ts). What an operator's
// dashboard would see: heartbeats counting up, a submit ordered by every replica, the task's
// processes running, a `kill -9` of one of them in the replicas' process gauges and counters,
// and a replica killed in the survivors' condemnation counters.
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterView } from '../../src/core/status.ts';
import { LOOPBACK_HOST } from '../../src/io/cluster-dir.ts';
import { decodeMetricsPorts, readMetricsPort } from '../../src/io/metrics-ports.ts';
import { parseExposition, samples, total, type Exposition } from '../integration/prom-text.ts';
import { downCluster, livePid, trine, waitFor } from './helpers.ts';

/** How long a condition of the running cluster may take: a heartbeat period is 100 ms, an order
 *  a few ms, a condemnation under a second; this bounds a loaded 2-core machine. */
const SETTLE_MS = 15_000;
/** `up` refuses a BASE whose range holds a port in use (another test's connection): try another. */
const UP_ATTEMPTS = 3;
const REPLICAS = ['r1', 'r2', 'r3'];
const AGENTS = ['a1', 'a2', 'a3', 'a4'];

let root = '';
let dir = '';
let base = 0;

/** A BASE with 14 free loopback ports above it (the kernel picks a free one; the range is checked by `up`). */
async function freeBase(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen({ host: LOOPBACK_HOST, port: 0 }, () => {
      const a = s.address();
      const port = a !== null && typeof a === 'object' ? a.port : 0;
      s.close(() => resolve(port > 60_000 ? 20_000 + (port % 20_000) : port));
    });
  });
}

/** GET /metrics of daemon `id` at the port it recorded, parsed. */
async function scrape(id: string): Promise<Exposition> {
  const port = readMetricsPort(dir, id);
  if (port === null) throw new Error(`${id} recorded no metrics port`);
  const res = await fetch(`http://${LOOPBACK_HOST}:${port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const parsed = parseExposition(await res.text());
  if (!parsed.ok) throw new Error(`${id}: exposition does not parse: ${parsed.code} line ${parsed.line}: ${parsed.detail}`);
  return parsed.value;
}

const scrapeAll = async (ids: readonly string[]): Promise<Map<string, Exposition>> =>
  new Map(await Promise.all(ids.map(async (id) => [id, await scrape(id)] as const)));

/** Waits until `test` holds on a fresh scrape of each of `ids`; returns those scrapes. */
function until(what: string, ids: readonly string[], test: (e: Exposition, id: string) => boolean): Promise<Map<string, Exposition>> {
  return waitFor(what, SETTLE_MS, async () => {
    const all = await scrapeAll(ids);
    return [...all].every(([id, e]) => test(e, id)) ? all : undefined;
  }, 100);
}

const psView = async (): Promise<ClusterView> => {
  const r = await trine(['ps', '--json', '--dir', dir]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ClusterView;
};

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-metrics-'));
  dir = join(root, 'cluster');
  for (let attempt = 1; ; attempt++) {
    base = await freeBase();
    const up = await trine(['up', '--nodes', '4', '--dir', dir, '--metrics-port', String(base)], 90_000);
    if (up.code === 0) {
      expect(up.stdout).toContain(`metrics on ports ${base}-${base + 13}`);
      break;
    }
    if (attempt === UP_ATTEMPTS || !up.stderr.includes('is in use')) throw new Error(`trine up failed: ${up.stderr}`);
  }
}, 120_000);

afterAll(async () => {
  await downCluster(root, dir);
}, 60_000);

describe('metrics on a 4-node cluster', () => {
  it('metrics.json gives every daemon a port, and every daemon serves its own, with its labels', async () => {
    const file = decodeMetricsPorts(readFileSync(join(dir, 'metrics.json'), 'utf8'));
    expect(file.ok).toBe(true);
    const ports = file.ok ? file.ports : null;
    expect(ports?.get('r1')).toBe(base);
    for (const id of [...REPLICAS, ...AGENTS, 'scc']) expect(readMetricsPort(dir, id)).toBe(ports?.get(id));
    const all = await scrapeAll([...REPLICAS, ...AGENTS, 'scc']);
    for (const [id, e] of all) {
      const kind = id === 'scc' ? 'watchdog' : id.startsWith('r') ? 'replica' : 'agent';
      const own = samples(e, 'trine_heartbeats_sent_total').concat(samples(e, 'trine_heartbeats_received_total'));
      expect(own.length, id).toBeGreaterThan(0);
      for (const s of own) expect(s.labels, id).toMatchObject({ daemon: kind, id, ...(kind === 'replica' ? { replica: id } : {}) });
    }
    const port = readMetricsPort(dir, 'r1') as number;
    expect((await fetch(`http://${LOOPBACK_HOST}:${port}/`)).status).toBe(404);
  });

  it('trine status lists every daemon\'s metrics endpoint (--json) and says where they are; the running ones answer', async () => {
    const file = decodeMetricsPorts(readFileSync(join(dir, 'metrics.json'), 'utf8'));
    const configured = file.ok && file.ports !== null ? [...file.ports.keys()] : [];
    expect(configured.length).toBe(14); // spares r4-r9 too: a scrape config lists them before they start
    const json = await trine(['status', '--json', '--dir', dir]);
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as { metrics: { id: string; port: number; url: string }[] | null };
    // In cluster.json's order: the listeners (r1-r3, the watchdog, the spares), then the agents.
    expect(doc.metrics?.map((m) => m.id)).toEqual(['r1', 'r2', 'r3', 'scc', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9', ...AGENTS]);
    expect(doc.metrics?.map((m) => m.id).sort()).toEqual([...configured].sort());
    for (const m of doc.metrics ?? []) {
      const port = readMetricsPort(dir, m.id) ?? (file.ok ? file.ports?.get(m.id) : undefined);
      expect(m.port, m.id).toBe(port);
      expect(m.url, m.id).toBe(`http://${LOOPBACK_HOST}:${String(port)}/metrics`);
      if ([...REPLICAS, 'scc', ...AGENTS].includes(m.id)) expect((await fetch(m.url)).status, m.id).toBe(200);
    }
    const text = await trine(['status', '--dir', dir]);
    expect(text.stdout).toContain(`metrics: 14 endpoints on ports ${base}-${base + 13} (r1: http://${LOOPBACK_HOST}:${base}/metrics; --json lists each; spares serve once started)`);
  });

  it("each replica's heartbeat counters rise between two scrapes; the watchdog hears all three", async () => {
    const first = await scrapeAll(REPLICAS);
    await until('heartbeats counted up at every replica', REPLICAS, (e, id) => {
      const before = first.get(id) as Exposition;
      return total(e, 'trine_heartbeats_sent_total') > total(before, 'trine_heartbeats_sent_total') &&
        total(e, 'trine_heartbeats_received_total') > total(before, 'trine_heartbeats_received_total');
    });
    const scc = await scrape('scc');
    for (const r of REPLICAS) expect(total(scc, 'trine_heartbeats_received_total', { peer: r }), r).toBeGreaterThan(0);
  });

  it('a submit is ordered by every replica, its processes run, and kill -9 of one shows in the gauges and counters', async () => {
    const before = await scrapeAll(REPLICAS);
    const s = await trine(['submit', '--dir', dir, '-n', '2', '--', 'sleep', '600']);
    expect(s.code).toBe(0);
    const running = await until('the task ordered and its two processes running at every replica', REPLICAS, (e, id) =>
      total(e, 'trine_ordered_requests_total', { kind: 'task.submit' }) === total(before.get(id) as Exposition, 'trine_ordered_requests_total', { kind: 'task.submit' }) + 1 &&
      total(e, 'trine_processes', { state: 'running' }) === 2 && total(e, 'trine_tasks', { state: 'running' }) === 1);
    for (const [id, e] of running) expect(total(e, 'trine_group_message_latency_seconds_count', { stage: 'request' }), id).toBeGreaterThan(0);

    const task = (await psView()).tasks.find((t) => t.id === s.stdout.trim());
    const victim = task?.procs[0];
    expect(victim?.pid).toBeGreaterThan(1);
    const agent = AGENTS[Number(victim?.node?.slice(1)) - 1] as string;
    const agentBefore = await until(`${agent} counting its process`, [agent], (e) => total(e, 'trine_node_processes') === 1);
    expect(total(agentBefore.get(agent) as Exposition, 'trine_group_commands_delivered_total', { kind: 'proc.spawn' })).toBeGreaterThan(0);
    process.kill(victim?.pid as number, 'SIGKILL');

    await until('the killed process out of the running ones at every replica, reported in order', REPLICAS, (e, id) =>
      total(e, 'trine_processes', { state: 'running' }) < 2 &&
      total(e, 'trine_processes') - total(e, 'trine_processes', { state: 'running' }) >= 1 &&
      total(e, 'trine_ordered_requests_total', { kind: 'proc.report' }) > total(running.get(id) as Exposition, 'trine_ordered_requests_total', { kind: 'proc.report' }));
    await until(`${agent} no longer counting it`, [agent], (e) => total(e, 'trine_node_processes') === 0);
  });

  it("a replica killed: the survivors' condemnation and diagnosis counters, and the view", async () => {
    const victim = 'r3';
    const survivors = REPLICAS.filter((r) => r !== victim);
    const before = await scrapeAll(survivors);
    process.kill(livePid(dir, victim), 'SIGKILL');
    const after = await until(`${victim} condemned at every survivor`, survivors, (e, id) =>
      total(e, 'trine_condemnations_total') === total(before.get(id) as Exposition, 'trine_condemnations_total') + 1);
    for (const [id, e] of after) {
      expect(total(e, 'trine_view'), id).toBeGreaterThan(total(before.get(id) as Exposition, 'trine_view'));
      expect(total(e, 'trine_diagnosis_events_total'), id).toBeGreaterThan(total(before.get(id) as Exposition, 'trine_diagnosis_events_total'));
      expect(total(e, 'trine_ordered_inputs_total', { kind: 'replica.condemn' }), id).toBe(1);
    }
    const scc = await scrape('scc');
    expect(total(scc, 'trine_diagnosis_reports_total')).toBeGreaterThan(0);
  });
});
