// A stranger's connection flood against a local cluster (issue 14; docs/PERFORMANCE.md): `trine
// up --nodes 4`, then the same measurements quiet and while test/fixtures/flood.ts floods replica
// r3's port (waves of idle TCP connections and upgrades that never send a frame):
//   - heartbeat lag: the age of r3's last heartbeat as the watchdog reports it, sampled every
//     `trine status` (the heartbeat period to the watchdog, 75 ms, is the floor: a sample is up to one period old);
//   - `trine status` latency, the whole CLI run (process start included), quiet and flooded.
// bench/run.ts imports benchFlood(); run alone with `node --import tsx bench/flood.ts`.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { up } from '../cli/up.ts';
import type { StatusDocument } from '../cli/status-report.ts';
import { DEFAULT_TIMING } from '../src/core/constants.ts';
import { flood } from '../test/fixtures/flood.ts';
import { tearDown } from './cluster-tools.ts';
import type { Figure } from './crypto.ts';

const TRINE = fileURLToPath(new URL('../bin/trine.js', import.meta.url));
/** Each phase lasts this long. */
const PHASE_MS = 10_000;
/** The flood: 1,200 idle connections a second, and 200 upgrades held open. */
const FLOOD = { idlePerWave: 300, waveMs: 250, upgraded: 200 };

function status(dir: string): Promise<{ ms: number; doc: StatusDocument | null }> {
  const t0 = performance.now();
  return new Promise((resolve) => execFile(process.execPath, [TRINE, 'status', '--json', '--dir', dir], (_e, out) => {
    let doc: StatusDocument | null = null;
    try {
      doc = JSON.parse(out) as StatusDocument;
    } catch {
      // counted as a failed sample
    }
    resolve({ ms: performance.now() - t0, doc });
  }));
}

/** `trine status` in a loop for PHASE_MS: latencies, r3's heartbeat ages, failed samples. */
async function phase(dir: string): Promise<{ latency: number[]; age: number[]; failed: number; unhealthy: number }> {
  const out = { latency: [] as number[], age: [] as number[], failed: 0, unhealthy: 0 };
  const end = performance.now() + PHASE_MS;
  while (performance.now() < end) {
    const s = await status(dir);
    if (s.doc === null) {
      out.failed++;
      continue;
    }
    out.latency.push(s.ms);
    if (!s.doc.healthy) out.unhealthy++;
    const age = s.doc.watchdog.replicas.find((r) => r.id === 'r3')?.lastHeartbeatAgeMs;
    if (typeof age === 'number') out.age.push(age);
  }
  return out;
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

export async function benchFlood(): Promise<Figure[]> {
  const root = mkdtempSync(join(tmpdir(), 'trine-bench-flood-'));
  const dir = join(root, 'cluster');
  try {
    await up({ dir, nodes: 4 });
    await new Promise((r) => setTimeout(r, 3_000));
    const quiet = await phase(dir);
    const config = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as { processes: { id: string; listen: { port: number } | null }[] };
    const port = config.processes.find((p) => p.id === 'r3')?.listen?.port;
    if (port === undefined) throw new Error('no port for r3');
    const f = flood(port, FLOOD);
    let flooded: Awaited<ReturnType<typeof phase>>;
    try {
      flooded = await phase(dir);
    } finally {
      f.stop();
    }
    const after = await status(dir);
    return [
      { name: 'flood: idle TCP connections opened', value: f.counts.idle, unit: 'connections' },
      { name: 'flood: of them closed by the listener during the flood', value: f.counts.closedByListener, unit: 'connections' },
      { name: 'flood: WebSocket upgrades that never sent a frame', value: f.counts.upgraded, unit: 'connections' },
      { name: 'heartbeat period to the watchdog (the floor of the age below)', value: DEFAULT_TIMING.sccHeartbeatMs, unit: 'ms' },
      { name: 'quiet: r3 heartbeat age at the watchdog, p50', value: pct(quiet.age, 50), unit: 'ms' },
      { name: 'quiet: r3 heartbeat age at the watchdog, max', value: Math.max(...quiet.age), unit: 'ms' },
      { name: 'flood: r3 heartbeat age at the watchdog, p50', value: pct(flooded.age, 50), unit: 'ms' },
      { name: 'flood: r3 heartbeat age at the watchdog, max', value: Math.max(...flooded.age), unit: 'ms' },
      { name: 'quiet: trine status, p50', value: pct(quiet.latency, 50), unit: 'ms' },
      { name: 'quiet: trine status, max', value: Math.max(...quiet.latency), unit: 'ms' },
      { name: 'flood: trine status, p50', value: pct(flooded.latency, 50), unit: 'ms' },
      { name: 'flood: trine status, max', value: Math.max(...flooded.latency), unit: 'ms' },
      { name: 'flood: status samples unhealthy or unanswered', value: flooded.unhealthy + flooded.failed, unit: 'samples' },
      { name: 'after the flood: group view (0 = no replica condemned)', value: after.doc?.group.view ?? NaN, unit: 'view' },
    ];
  } finally {
    await tearDown(root, dir, new Map());
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const f of await benchFlood()) console.log(`${f.name}: ${f.value.toFixed(f.value >= 100 ? 0 : 1)} ${f.unit}`);
  process.exit(0);
}
