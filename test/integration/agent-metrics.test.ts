// What an agent's metrics show of the two things it runs without an endpoint of their own
// (docs/OPERATIONS.md §9; issue 19 item 2): its protector (PROTOCOL §11.4) and its keeper's
// restarts. A real protector on loopback with a real client storing a checkpoint and appending
// entries, and a stranger refused BAD_MAC; the agent's registry built from a real agent core's
// status (the in-memory cluster of the unit tests) with the sample the agent daemon builds
// (agentSample), scraped over HTTP as Prometheus would and parsed. No wall-clock thresholds.
import { afterEach, describe, expect, it } from 'vitest';
import { ProtectorClient, ProtectorError } from '../../src/app/rollback/protector-client.ts';
import { PROTECTOR_ENTRY_OVERHEAD_BYTES, TASK_KEY_BYTES } from '../../src/core/constants.ts';
import type { KeeperRestarts } from '../../src/daemon/keeper.ts';
import { DaemonMetrics } from '../../src/daemon/metrics.ts';
import { agentSample } from '../../src/daemon/metrics-sample.ts';
import { createProtector, type Protector } from '../../src/daemon/protector.ts';
import { LOOPBACK_HOST } from '../../src/io/cluster-dir.ts';
import { serveMetrics, type MetricsServer } from '../../src/io/metrics-server.ts';
import { makeCluster } from '../unit/core/harness.ts';
import { parseExposition, samples, total, type Exposition } from './prom-text.ts';

const KEY = new Uint8Array(TASK_KEY_BYTES).fill(0x51);
const OTHER_KEY = new Uint8Array(TASK_KEY_BYTES).fill(0x52);
const T = 't7';
const ENTRY_BYTES = 16;
const CHECKPOINT_BYTES = 1000;

const protectors: Protector[] = [];
const clients: ProtectorClient[] = [];
const servers: MetricsServer[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(protectors.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Agent a1's registry as `trine agent` builds it: its core's status, its protector once there
 *  is one (`set`), and what its keeper said with `go` (null: no keeper). */
async function agentMetrics(keeperRestarts: KeeperRestarts | null): Promise<{ metrics: DaemonMetrics; set: (p: Protector) => void }> {
  const c = makeCluster(2);
  const a1 = c.agents[0];
  if (a1 === undefined) throw new Error('harness has no a1');
  let protector: Protector | null = null;
  const metrics = await DaemonMetrics.create({ daemon: 'agent', id: 'a1', node: 'n1' }, () =>
    agentSample(a1.status(c.now()), 0, { protector: protector?.stats() ?? null, keeperRestarts }), c.now);
  return { metrics, set: (p) => { protector = p; } };
}

/** GET /metrics of `metrics` on a loopback port, parsed. */
async function scrape(metrics: DaemonMetrics): Promise<Exposition> {
  const server = await serveMetrics(metrics, LOOPBACK_HOST, 0);
  servers.push(server);
  const res = await fetch(`http://${LOOPBACK_HOST}:${server.port}/metrics`);
  expect(res.status).toBe(200);
  const parsed = parseExposition(await res.text());
  if (!parsed.ok) throw new Error(`exposition does not parse: ${parsed.code} line ${parsed.line}: ${parsed.detail}`);
  return parsed.value;
}

const PROTECTOR_SERIES: [string, string][] = [
  ['trine_protector_connections_accepted_total', 'counter'], ['trine_protector_connections_closed_total', 'counter'],
  ['trine_protector_connections', 'gauge'], ['trine_protector_checkpoints_stored_total', 'counter'],
  ['trine_protector_log_entries_appended_total', 'counter'], ['trine_protector_deposits_total', 'counter'],
  ['trine_protector_fetches_served_total', 'counter'], ['trine_protector_store_refusals_total', 'counter'],
  ['trine_protector_stored_bytes', 'gauge'], ['trine_protector_guarded_tasks', 'gauge'], ['trine_keeper_restarts_total', 'counter'],
];

describe("issue 19 item 2: the protector's metrics ride the agent's (PROTOCOL §11.4)", () => {
  it('before the protector listens: the series are there, unlabelled ones 0 and labelled ones absent; the scrape works', async () => {
    const { metrics } = await agentMetrics(null);
    const e = await scrape(metrics);
    for (const [name, type] of PROTECTOR_SERIES) {
      expect(e.types.get(name), name).toBe(type);
      expect(e.help.get(name)?.length ?? 0, name).toBeGreaterThan(0);
    }
    expect(total(e, 'trine_protector_connections_accepted_total')).toBe(0);
    expect(total(e, 'trine_protector_guarded_tasks')).toBe(0);
    expect(samples(e, 'trine_protector_stored_bytes')).toEqual([]);
    expect(samples(e, 'trine_protector_connections_closed_total')).toEqual([]);
    // Without a keeper (an agent run by hand) there are no keeper restarts to show.
    expect(samples(e, 'trine_keeper_restarts_total')).toEqual([]);
  });

  it('a client storing a checkpoint and appending entries, and a stranger refused BAD_MAC, as the agent endpoint shows them', async () => {
    const { metrics, set } = await agentMetrics({ exit: 0, hang: 0 });
    const p = await createProtector({ host: LOOPBACK_HOST, port: 0, log: () => {} });
    protectors.push(p);
    set(p);
    expect(p.guard(T, KEY, 1024 * 1024)).toEqual({ ok: true });
    const entry = (pos: number): Uint8Array => new Uint8Array(ENTRY_BYTES).fill(pos);
    const c = await ProtectorClient.connect({ host: LOOPBACK_HOST, port: p.port, task: T, rank: 0, incarnation: 1, taskKey: KEY });
    clients.push(c);
    await c.appendBatch(1, [1, 2, 3, 4, 5, 6].map(entry));
    await Promise.all([7, 8, 9, 10].map((pos) => c.append(pos, entry(pos))));
    // A resent entry is acknowledged again, not appended again; one past the end is refused GAP.
    await c.append(10, entry(10));
    const gap = await c.append(12, entry(12)).then(() => null, (x: unknown) => x);
    expect(gap).toBeInstanceOf(ProtectorError);
    expect((gap as ProtectorError).code).toBe('GAP');
    // At position 5: the log is collected up to it, entries 6–10 stay.
    await c.putCheckpoint(1, 5, new Uint8Array(CHECKPOINT_BYTES).fill(7));
    expect((await c.fetch()).log.map((x) => x.pos)).toEqual([6, 7, 8, 9, 10]);
    const stranger = await ProtectorClient.connect({ host: LOOPBACK_HOST, port: p.port, task: T, rank: 1, incarnation: 1, taskKey: OTHER_KEY })
      .then(() => null, (x: unknown) => x);
    expect((stranger as ProtectorError).code).toBe('BAD_MAC');

    const e = await scrape(metrics);
    for (const s of samples(e, 'trine_protector_connections_accepted_total')) expect(s.labels).toMatchObject({ daemon: 'agent', id: 'a1', node: 'n1' });
    expect(total(e, 'trine_protector_connections_accepted_total')).toBe(2);
    expect(samples(e, 'trine_protector_connections_closed_total').map((s) => [s.labels['code'], s.value])).toEqual([['BAD_MAC', 1]]);
    expect(total(e, 'trine_protector_connections', { state: 'authenticated' })).toBe(1);
    expect(total(e, 'trine_protector_connections', { state: 'stranger' })).toBe(0);
    expect(total(e, 'trine_protector_log_entries_appended_total')).toBe(10);
    expect(total(e, 'trine_protector_checkpoints_stored_total')).toBe(1);
    expect(total(e, 'trine_protector_fetches_served_total')).toBe(1);
    expect(total(e, 'trine_protector_deposits_total')).toBe(0);
    expect(samples(e, 'trine_protector_store_refusals_total').map((s) => [s.labels['code'], s.value])).toEqual([['GAP', 1]]);
    expect(total(e, 'trine_protector_stored_bytes', { kind: 'checkpoint' })).toBe(CHECKPOINT_BYTES);
    expect(total(e, 'trine_protector_stored_bytes', { kind: 'log' })).toBe(5 * (ENTRY_BYTES + PROTECTOR_ENTRY_OVERHEAD_BYTES));
    expect(total(e, 'trine_protector_guarded_tasks')).toBe(1);
    expect(samples(e, 'trine_keeper_restarts_total').map((s) => [s.labels['reason'], s.value]).sort()).toEqual([['exit', 0], ['hang', 0]]);

    // The group releases the task: what is held now drops, what happened stays counted.
    p.release(T);
    const after = await scrape(metrics);
    expect(total(after, 'trine_protector_guarded_tasks')).toBe(0);
    expect(total(after, 'trine_protector_stored_bytes')).toBe(0);
    expect(total(after, 'trine_protector_connections', { state: 'authenticated' })).toBe(0);
    expect(total(after, 'trine_protector_checkpoints_stored_total')).toBe(1);
    expect(total(after, 'trine_protector_connections_closed_total', { code: 'RELEASED' })).toBe(1);
  });
});

describe("issue 19 item 2: the keeper's restarts ride the agent's metrics (spec §1.4)", () => {
  it('the count the keeper gave with go is trine_keeper_restarts_total, by reason', async () => {
    const { metrics } = await agentMetrics({ exit: 2, hang: 1 });
    const e = await scrape(metrics);
    expect(total(e, 'trine_keeper_restarts_total', { reason: 'exit' })).toBe(2);
    expect(total(e, 'trine_keeper_restarts_total', { reason: 'hang' })).toBe(1);
    for (const s of samples(e, 'trine_keeper_restarts_total')) expect(s.labels).toMatchObject({ daemon: 'agent', id: 'a1', node: 'n1' });
  });
});
