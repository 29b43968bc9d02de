// A stranger's connection flood against a real local cluster (issue 14 items 1 and 2): while the
// test floods replica r3's port with idle TCP connections (closed by the listener as they come or
// at the handshake deadline, src/io/ws-transport.ts) and with WebSocket upgrades that never send a
// frame (each evicting the oldest), the operator is still served (`trine status` answers, healthy),
// an agent killed meanwhile comes back through its keeper and rejoins, and afterwards no correct
// replica was condemned: the group is the one it began as, in view 0, and no node was declared
// failed. The flood's size and the status latency during it are printed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';
import type { ClusterView } from '../../src/core/status.ts';
import { flood } from '../fixtures/flood.ts';
import { downCluster, trine, upCluster, waitFor } from './helpers.ts';

/** How long the flood lasts, and its two parts' rates. */
const FLOOD_MS = 8_000;
const IDLE_PER_WAVE = 300;
const WAVE_MS = 250;
/** Upgraded connections kept open at once (each a stranger's: it never sends a frame): more than
 *  the 256 inbound connections a listener holds, so without separate capacity for members the
 *  operator and a restarted agent would be locked out. */
const UPGRADED = 300;

let root = '';
let dir = '';

async function status(): Promise<{ code: number; doc: StatusDocument; ms: number }> {
  const t0 = performance.now();
  const r = await trine(['status', '--json', '--dir', dir]);
  return { code: r.code, doc: JSON.parse(r.stdout) as StatusDocument, ms: performance.now() - t0 };
}

function listenPort(id: string): number {
  const config = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as { processes: { id: string; listen: { port: number } | null }[] };
  const port = config.processes.find((p) => p.id === id)?.listen?.port;
  if (port === undefined) throw new Error(`no listen port for ${id}`);
  return port;
}

describe('a connection flood against a replica (issue 14 items 1, 2)', () => {
  beforeAll(async () => {
    ({ root, dir } = await upCluster('trine-flood-'));
    await waitFor('a healthy cluster', 30_000, async () => ((await status()).doc.healthy ? true : undefined));
  }, 120_000);
  afterAll(async () => {
    await downCluster(root, dir);
  }, 60_000);

  it('no correct replica is condemned, the operator is served throughout, and an agent restarted during the flood rejoins', async () => {
    const before = await status();
    const view0 = before.doc.group;
    const f = flood(listenPort('r3'), { idlePerWave: IDLE_PER_WAVE, waveMs: WAVE_MS, upgraded: UPGRADED });
    const latencies: number[] = [];
    try {
      const endAt = Date.now() + FLOOD_MS;
      // An agent restarted meanwhile: its keeper starts a new incarnation, which must reconnect.
      const agentPid = Number(readFileSync(join(dir, 'run', 'a4.agent-pid'), 'utf8').trim());
      process.kill(agentPid, 'SIGKILL');
      while (Date.now() < endAt) {
        const s = await status();
        latencies.push(s.ms);
        expect(s.code, s.doc.problems.join('; ')).toBeLessThanOrEqual(1);
        await new Promise((r) => setTimeout(r, 250));
      }
      // While the flood goes on: the group answers and is healthy, the restarted agent's node up.
      const during = await waitFor('a healthy status during the flood', 15_000, async () => {
        const s = await status();
        latencies.push(s.ms);
        return s.doc.healthy ? s : undefined;
      });
      expect(during.doc.nodes.map((n) => [n.id, n.joined])).toEqual([['n1', true], ['n2', true], ['n3', true], ['n4', true]]);
    } finally {
      f.stop();
    }
    const after = await status();
    expect(after.doc.healthy, after.doc.problems.join('; ')).toBe(true);
    expect([after.doc.group.view, after.doc.group.members]).toEqual([view0.view, view0.members]);
    expect(after.doc.retired).toEqual([]);
    expect(after.doc.condemnations).toEqual([]);
    const ps = await trine(['ps', '--json', '--dir', dir]);
    const events = (JSON.parse(ps.stdout) as ClusterView).events.map((e) => e.text);
    expect(events.filter((t) => /failed/.test(t)), 'no node declared failed').toEqual([]);
    expect(f.counts.closedByListener, 'the listener closed the idle connections').toBeGreaterThan(f.counts.idle / 2);
    const sorted = [...latencies].sort((a, b) => a - b);
    console.log(`flood on r3: ${f.counts.idle} idle TCP connections and ${f.counts.upgraded} upgrades in ${FLOOD_MS / 1000} s; ` +
      `trine status ${sorted.length} times, median ${Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0)} ms, max ${Math.round(sorted.at(-1) ?? 0)} ms`);
  }, 120_000);
});
