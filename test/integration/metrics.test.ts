// A daemon's metrics (docs/OPERATIONS.md "Metrics"): the exposition of one replica's and one
// agent's registry while their real cores run in the in-memory cluster of the unit tests (real
// Shells, frames and signatures), parsed as a scraper would; the HTTP endpoint on loopback; and
// the total decoder of metrics.json.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CoreEffect, CoreInput } from '../../src/core/node.ts';
import { DaemonMetrics } from '../../src/daemon/metrics.ts';
import { agentSample, replicaSample, type MetricsSample } from '../../src/daemon/metrics-sample.ts';
import { LOOPBACK_HOST, type ProcessEntry } from '../../src/io/cluster-dir.ts';
import { loadBundle, writeDeployment } from '../../src/io/deploy.ts';
import { HostsFileError, parseHostsFile } from '../../src/io/hosts-file.ts';
import { decodeMetricsPorts, encodeMetricsPorts, extendMetricsPorts, metricsDaemons, metricsForAddedHost, metricsHost, MetricsError, planMetricsPorts, readMetricsPorts } from '../../src/io/metrics-ports.ts';
import { serveMetrics, type MetricsServer } from '../../src/io/metrics-server.ts';
import { makeCluster } from '../unit/core/harness.ts';
// @ts-expect-error: a plain JavaScript module without declarations
import { cliBundle } from '../../bin/cli-bundle.js';
import { expectOneErrorLine, runTrine } from './helpers.ts';
import { parseExposition, samples, total, type Exposition } from './prom-text.ts';

/** Simulated time the cluster runs before the first scrape: some heartbeat periods, the agents' joins. */
const WARMUP_MS = 3_000;
/** And after the operator's submit: the order, the spawn commands, the processes' reports. */
const AFTER_SUBMIT_MS = 3_000;

type Observable = { id: string; step: (input: CoreInput) => CoreEffect[]; nextWakeMs: () => number | null };

/** Puts `metrics` between the harness's Shell and the core it drives, as run-core does. */
function observe(core: Observable, metrics: DaemonMetrics): void {
  const inner = { id: core.id, step: core.step.bind(core), nextWakeMs: core.nextWakeMs.bind(core) };
  core.step = metrics.observe(inner).step;
}

async function scrape(m: DaemonMetrics): Promise<Exposition> {
  const parsed = parseExposition(await m.exposition());
  if (!parsed.ok) throw new Error(`exposition does not parse: ${parsed.code} line ${parsed.line}: ${parsed.detail}`);
  return parsed.value;
}

async function cluster() {
  const c = makeCluster(2);
  const r1 = c.replicas[0];
  const r2 = c.replicas[1];
  const a1 = c.agents[0];
  if (r1 === undefined || r2 === undefined || a1 === undefined) throw new Error('harness has no r1, r2 or a1');
  const replica = await DaemonMetrics.create({ daemon: 'replica', id: 'r1', node: 'n1' }, (): MetricsSample => replicaSample(r1.status(c.now())), c.now);
  const agent = await DaemonMetrics.create({ daemon: 'agent', id: 'a1', node: 'n1' }, (): MetricsSample => agentSample(a1.status(c.now()), 0), c.now);
  const backup = await DaemonMetrics.create({ daemon: 'replica', id: 'r2', node: 'n2' }, (): MetricsSample => replicaSample(r2.status(c.now())), c.now);
  observe(r1 as unknown as Observable, replica);
  observe(r2 as unknown as Observable, backup);
  observe(a1 as unknown as Observable, agent);
  const shell = c.shells.get('r1');
  if (shell !== undefined) replica.attachShell(shell.counters);
  return { c, replica, backup, agent };
}

describe('a daemon registry', () => {
  it('exposes every series with HELP and TYPE, the daemon labels, and counts from real cores', async () => {
    const { c, replica, backup, agent } = await cluster();
    c.run(WARMUP_MS);
    const before = await scrape(replica);
    const backupBefore = await scrape(backup);
    const expected: [string, string][] = [
      ['trine_heartbeats_sent_total', 'counter'], ['trine_heartbeats_received_total', 'counter'], ['trine_frames_dropped_total', 'counter'],
      ['trine_ordered_requests_total', 'counter'], ['trine_condemnations_total', 'counter'], ['trine_diagnosis_events_total', 'counter'],
      ['trine_group_message_latency_seconds', 'histogram'], ['trine_tasks', 'gauge'], ['trine_processes', 'gauge'], ['trine_view', 'gauge'],
      ['trine_rsn', 'gauge'], ['trine_frames_received_total', 'counter'], ['trine_process_cpu_seconds_total', 'counter'],
    ];
    for (const [name, type] of expected) {
      expect(before.types.get(name), name).toBe(type);
      expect(before.help.get(name)?.length ?? 0, name).toBeGreaterThan(0);
    }
    // Series a replica cannot have are absent, not 0.
    expect(before.types.has('trine_node_processes')).toBe(false);
    for (const s of before.samples) expect(s.labels).toMatchObject({ daemon: 'replica', id: 'r1', node: 'n1', replica: 'r1' });

    const sent = samples(before, 'trine_heartbeats_sent_total').map((s) => s.labels['peer']).sort();
    expect(sent).toEqual(['r2', 'r3', 'scc']);
    expect(total(before, 'trine_heartbeats_received_total', { peer: 'r2' })).toBeGreaterThan(0);
    expect(total(before, 'trine_ordered_requests_total', { kind: 'node.join' })).toBe(2);
    expect(total(before, 'trine_rsn')).toBeGreaterThanOrEqual(2);
    expect(total(before, 'trine_primary')).toBe(1);
    expect(total(before, 'trine_frames_received_total')).toBeGreaterThan(0);

    // Two operator requests in flight at once (an operator's carry no CSN): each is timed.
    for (const n of [1, 2]) {
      c.operate({ type: 'task.submit', nonce: String(n).padStart(32, '0'), name: `job${n}`, size: 1, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(n) });
    }
    c.run(AFTER_SUBMIT_MS);
    const after = await scrape(replica);
    expect(total(after, 'trine_ordered_requests_total', { kind: 'task.submit' })).toBe(2);
    expect(total(after, 'trine_heartbeats_sent_total')).toBeGreaterThan(total(before, 'trine_heartbeats_sent_total'));
    // The harness's agents spawn nothing: the two tasks' processes stay short of running.
    expect(total(after, 'trine_tasks')).toBe(2);
    expect(total(after, 'trine_processes')).toBe(2);
    const count = samples(after, 'trine_group_message_latency_seconds_count', { stage: 'request' });
    const timed = (e: Exposition) => total(e, 'trine_group_message_latency_seconds_count', { stage: 'request' });
    const ordered = (e: Exposition) => total(e, 'trine_ordered_requests_total');
    // Every request ordered since the first scrape was timed, the two submits included — at the
    // backup too, where both wait for the primary's order at once.
    expect(timed(after) - timed(before)).toBe(ordered(after) - ordered(before));
    const backupAfter = await scrape(backup);
    expect(total(backupAfter, 'trine_ordered_requests_total', { kind: 'task.submit' })).toBe(2);
    expect(timed(backupAfter) - timed(backupBefore)).toBe(ordered(backupAfter) - ordered(backupBefore));
    const inf = samples(after, 'trine_group_message_latency_seconds_bucket', { stage: 'request', le: '+Inf' });
    expect(inf[0]?.value).toBe(count[0]?.value);

    const a = await scrape(agent);
    expect(a.types.has('trine_rsn')).toBe(false);
    for (const s of a.samples) expect(s.labels).toMatchObject({ daemon: 'agent', id: 'a1', node: 'n1' });
    expect(a.samples.some((s) => 'replica' in s.labels)).toBe(false);
    expect(total(a, 'trine_heartbeats_sent_total')).toBeGreaterThan(0);
    expect(total(a, 'trine_view')).toBe(0);
  });

  it('counts frames that fail verification by their drop code', async () => {
    const { c, replica } = await cluster();
    c.run(WARMUP_MS);
    c.shells.get('r1')?.receive(new Uint8Array([1, 2, 3, 4]), c.now(), 'a1');
    const e = await scrape(replica);
    const drops = samples(e, 'trine_frames_dropped_total');
    expect(drops.length).toBe(1);
    expect(drops[0]?.labels['code']).toMatch(/^[A-Z_]+$/);
    expect(drops[0]?.value).toBe(1);
  });
});

describe('the metrics endpoint', () => {
  const servers: MetricsServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('answers GET /metrics with the registry, 404 elsewhere, 405 to other methods', async () => {
    const { c, replica } = await cluster();
    c.run(WARMUP_MS);
    const s = await serveMetrics(replica, LOOPBACK_HOST, 0);
    servers.push(s);
    const url = `http://${LOOPBACK_HOST}:${s.port}`;
    const ok = await fetch(`${url}/metrics`);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toBe(replica.registry.contentType);
    const parsed = parseExposition(await ok.text());
    expect(parsed.ok && total(parsed.value, 'trine_heartbeats_sent_total') > 0).toBe(true);
    expect((await fetch(`${url}/`)).status).toBe(404);
    expect((await fetch(`${url}/metrics/x`)).status).toBe(404);
    expect((await fetch(`${url}/metrics`, { method: 'POST', body: 'x' })).status).toBe(405);
  });

  it('refuses a port in use with METRICS_PORT_IN_USE', async () => {
    const { replica } = await cluster();
    const s = await serveMetrics(replica, LOOPBACK_HOST, 0);
    servers.push(s);
    const err = await serveMetrics(replica, LOOPBACK_HOST, s.port).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(MetricsError);
    expect((err as MetricsError).code).toBe('METRICS_PORT_IN_USE');
    expect((err as MetricsError).message).toContain(String(s.port));
  });
});

describe('metrics.json', () => {
  const daemons: ProcessEntry[] = [
    { id: 'r1', kind: 'replica', node: 'n1', listen: { host: LOOPBACK_HOST, port: 7400 }, slots: null },
    { id: 'scc', kind: 'watchdog', node: null, listen: { host: LOOPBACK_HOST, port: 7401 }, slots: null },
    { id: 'a1', kind: 'agent', node: 'n1', listen: null, slots: 4 },
    { id: 'op', kind: 'operator', node: null, listen: null, slots: null },
  ];

  it('gives each daemon BASE + its index, and round-trips', () => {
    const ports = planMetricsPorts(metricsDaemons(daemons), 9100);
    expect([...ports]).toEqual([['r1', 9100], ['scc', 9101], ['a1', 9102]]);
    const back = decodeMetricsPorts(encodeMetricsPorts(ports));
    expect(back.ok && [...(back.ports ?? [])]).toEqual([...ports]);
  });

  it('refuses a BASE whose range leaves 1024-65535', () => {
    expect(() => planMetricsPorts(metricsDaemons(daemons), 65534)).toThrow(/--metrics-port must be an integer from 1024 to 65533/);
    expect(() => planMetricsPorts(metricsDaemons(daemons), 80)).toThrow(MetricsError);
  });

  it('refuses malformed, forged and oversized files with a reason', () => {
    const cases = [
      'not json', '[]', '{"format":"trine-metrics/2","ports":{}}', '{"format":"trine-metrics/1"}',
      '{"format":"trine-metrics/1","ports":{"R1":9100}}', '{"format":"trine-metrics/1","ports":{"r1":0}}',
      '{"format":"trine-metrics/1","ports":{"r1":9100.5}}', '{"format":"trine-metrics/1","ports":{"r1":"9100"}}',
      '{"format":"trine-metrics/1","ports":{"r1":65536}}', ' '.repeat(70_000),
    ];
    for (const text of cases) {
      const r = decodeMetricsPorts(text);
      expect(r.ok, text.slice(0, 60)).toBe(false);
      if (!r.ok) expect(r.detail.length).toBeGreaterThan(0);
    }
  });
});

describe('hosts file metrics-port', () => {
  const EXAMPLE = readFileSync(new URL('../../examples/hosts.yaml', import.meta.url), 'utf8');

  it('puts one metrics.json in every bundle: each daemon its listen port shifted, on its host address', () => {
    const file = parseHostsFile(`metrics-port: 9400\n${EXAMPLE}`, 'hosts.yaml');
    expect(file.metricsPort).toBe(9400);
    const root = mkdtempSync(join(tmpdir(), 'trine-metrics-hosts-'));
    try {
      const plan = writeDeployment(file, join(root, 'out'));
      for (const b of plan.bundles) {
        const { cluster } = loadBundle(join(root, 'out', b.host));
        const read = readMetricsPorts(cluster.dir);
        expect(read.ok).toBe(true);
        const ports = read.ok ? read.ports : null;
        for (const p of cluster.config.processes.filter((e) => e.kind !== 'operator')) {
          expect(ports?.get(p.id), p.id).toBe(9400 + (p.listen?.port ?? 0) - file.basePort);
          if (b.ids.includes(p.id)) expect(metricsHost(cluster.config, p), p.id).toBe(b.address);
        }
      }
      // Without the setting no bundle has a metrics.json: metrics off.
      const off = writeDeployment(parseHostsFile(EXAMPLE, 'hosts.yaml'), join(root, 'off'));
      for (const b of off.bundles) expect(readMetricsPorts(join(root, 'off', b.host))).toEqual({ ok: true, ports: null });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('a host added at run time (trine node add) gets its daemons\' ports by the same rule; a file that follows no one rule, or ports that would clash, are told, not guessed', () => {
    const file = parseHostsFile(`metrics-port: 9400\n${EXAMPLE}`, 'hosts.yaml');
    const root = mkdtempSync(join(tmpdir(), 'trine-metrics-added-'));
    try {
      writeDeployment(file, join(root, 'out'));
      const { cluster } = loadBundle(join(root, 'out', 'ops'));
      const read = readMetricsPorts(cluster.dir);
      if (!read.ok || read.ports === null) throw new Error('the operator bundle has metrics.json');
      const agentPort = file.basePort + 20;
      const added = [{ id: 'a9', port: agentPort }, { id: 'r9', port: agentPort - 1 }];
      const extended = extendMetricsPorts(read.ports, cluster.config, added);
      expect(extended).toEqual({ ok: true, ports: new Map([...read.ports, ['a9', 9400 + 20], ['r9', 9400 + 19]]) });
      // Hand-edited: two offsets. Or nothing to learn the offset from. Or a port out of range.
      const edited = new Map(read.ports);
      const [first] = read.ports.keys();
      edited.set(first as string, 1234);
      expect(extendMetricsPorts(edited, cluster.config, added)).toMatchObject({ ok: false, reason: expect.stringMatching(/2 different offsets/) });
      expect(extendMetricsPorts(new Map(), cluster.config, added)).toMatchObject({ ok: false, reason: expect.stringMatching(/names no daemon that listens/) });
      expect(extendMetricsPorts(read.ports, cluster.config, [{ id: 'a9', port: 65535 }])).toMatchObject({ ok: false, reason: expect.stringMatching(/a9 would serve metrics on port \d+, outside 1024-65535/) });
      // More spares than `trine init` gave a host can reach the metrics range: a clash is told.
      const offset = 9400 - file.basePort;
      const reach = [{ id: 'a9', port: agentPort }, { id: 'r10', port: agentPort + offset }];
      expect(extendMetricsPorts(read.ports, cluster.config, reach)).toMatchObject({ ok: false, reason: expect.stringMatching(/^a9 would serve metrics on port \d+, which r10 listens on$/) });
      // What `node add` does with the operator bundle's file: the ports, or a warning and none.
      expect(metricsForAddedHost(cluster.dir, cluster.config, added)).toEqual({ ports: extended.ok ? extended.ports : null, warning: null });
      const offDir = join(root, 'off');
      mkdirSync(offDir);
      expect(metricsForAddedHost(offDir, cluster.config, added)).toEqual({ ports: null, warning: null });
      writeFileSync(join(offDir, 'metrics.json'), 'not json');
      expect(metricsForAddedHost(offDir, cluster.config, added)).toMatchObject({ ports: null, warning: expect.stringMatching(/metrics\.json is not usable \(not JSON .*\): the new host serves no metrics; fix the file and add its ids by hand/) });
      expect(metricsForAddedHost(cluster.dir, cluster.config, reach)).toMatchObject({ ports: null, warning: expect.stringMatching(/^the new host serves no metrics: a9 would serve metrics on port \d+, which r10 listens on; add its ids to metrics.json on the host by hand/) });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('refuses a metrics-port out of range or overlapping the listen ports', () => {
    for (const [value, pattern] of [['80', /must be an integer from 1024/], ['"x"', /must be an integer/], ['7402', /overlaps the ports the daemons listen on \(7400 to 7403\)/]] as const) {
      expect(() => parseHostsFile(`metrics-port: ${value}\n${EXAMPLE}`, 'hosts.yaml')).toThrow(HostsFileError);
      expect(() => parseHostsFile(`metrics-port: ${value}\n${EXAMPLE}`, 'hosts.yaml')).toThrow(pattern);
    }
  });
});

describe('trine up --metrics-port', () => {
  it('refuses a taken port, or one the cluster listens on, before it creates anything (exit 2)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'trine-metrics-up-'));
    const held = createServer();
    try {
      // Below the kernel's ephemeral range (32768 up): once `held` is closed, no other test's
      // outgoing connection can take the ports `up --base-port` wants next (a port 0 listener's
      // neighbours are ephemeral ports, which the parallel tests' connections reuse).
      const port = await listenBelowEphemeral(held);
      const dir = join(root, 'cluster');
      // The held port is the 3rd daemon's (r3): the range is refused naming it.
      expectOneErrorLine(await runTrine(['up', '--dir', dir, '--metrics-port', String(port - 2)]), 2, `metrics port ${port} on ${LOOPBACK_HOST} is in use`, 'pick another --metrics-port');
      expect(existsSync(dir)).toBe(false);
      held.close();
      expectOneErrorLine(await runTrine(['up', '--dir', dir, '--base-port', String(port), '--metrics-port', String(port - 5)]), 2, 'which the cluster itself listens on');
      expect(existsSync(dir)).toBe(false);
    } finally {
      held.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

/** Listen on a free loopback port from 20000 to 32000 (not the ephemeral range); its port. */
async function listenBelowEphemeral(server: ReturnType<typeof createServer>): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const ok = await new Promise<boolean>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' && attempt < 50 ? resolve(false) : reject(e));
      server.once('error', onError);
      server.listen({ host: LOOPBACK_HOST, port }, () => {
        server.off('error', onError);
        resolve(true);
      });
    });
    if (ok) return port;
  }
}

describe('metrics off', () => {
  it('no trine process loads prom-client unless it serves metrics: the CLI bundle loads it only when a daemon creates its metrics', () => {
    const bundle = (cliBundle as () => string | null)();
    expect(bundle).not.toBeNull();
    const text = readFileSync(bundle as string, 'utf8');
    expect(text).toMatch(/\(0, import_node_module\d*\.createRequire\)\(__trineCliUrl\)\("prom-client"\)/);
    expect(text.match(/"prom-client"/g)).toHaveLength(1); // only there
  });
});
