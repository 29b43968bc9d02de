// The protector on loopback (docs/PROTOCOL.md §11.4; src/daemon/protector.ts and
// src/app/rollback/protector-client.ts): what an RBML receive pays to have its log entry stored
// on another node (radic-hmpl A.2.5: the sender waits for that acknowledgement), and how fast
// checkpoints travel. Client and protector run in this one process (one event loop for both), so
// the figures are a floor of the software cost, not of a network. Not part of `npm test`.
// Run: node --import tsx bench/protector.ts
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ProtectorClient } from '../src/app/rollback/protector-client.ts';
import { TASK_KEY_BYTES } from '../src/core/constants.ts';
import { createProtector } from '../src/daemon/protector.ts';
import type { Figure } from './crypto.ts';
import { p50, p99 } from './stats.ts';

const MiB = 1024 * 1024;
const KEY = new Uint8Array(TASK_KEY_BYTES).fill(7);

export async function benchProtector(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const protector = await createProtector({ host: '127.0.0.1', port: 0, log: () => {} });
  let rank = 0;
  const fresh = async (): Promise<ProtectorClient> => {
    const task = `t${++rank}`;
    protector.guard(task, KEY, 64 * MiB);
    return ProtectorClient.connect({ host: '127.0.0.1', port: protector.port, task, rank: 0, incarnation: 1, taskKey: KEY });
  };
  try {
    // One append at a time, each awaited: RBML's per-receive latency.
    for (const size of [64, 64 * 1024]) {
      const c = await fresh();
      const blob = new Uint8Array(size).fill(1);
      const samples: number[] = [];
      for (let pos = 1; pos <= 2000; pos++) {
        const t0 = performance.now();
        await c.append(pos, blob);
        samples.push((performance.now() - t0) * 1000);
      }
      figures.push({ name: `append latency, ${size} B entries, p50`, value: p50(samples.slice(200)), unit: 'µs' });
      figures.push({ name: `append latency, ${size} B entries, p99`, value: p99(samples.slice(200)), unit: 'µs' });
      await c.close();
    }
    // Pipelined: the acknowledgement carries upTo, so appends do not wait for each other.
    for (const [size, count] of [[64, 50_000], [64 * 1024, 1500]] as const) {
      const c = await fresh();
      const blob = new Uint8Array(size).fill(2);
      const t0 = performance.now();
      await Promise.all(Array.from({ length: count }, (_, i) => c.append(i + 1, blob)));
      const s = (performance.now() - t0) / 1000;
      figures.push({ name: `pipelined appends, ${size} B entries`, value: count / s, unit: 'entries/s' });
      figures.push({ name: `pipelined appends, ${size} B entries, throughput`, value: (count * size) / MiB / s, unit: 'MiB/s' });
      await c.close();
    }
    // A 16 MiB checkpoint stored, then fetched back.
    {
      const c = await fresh();
      const state = new Uint8Array(16 * MiB).fill(3);
      let t0 = performance.now();
      await c.putCheckpoint(1, 0, state);
      figures.push({ name: 'put 16 MiB checkpoint', value: performance.now() - t0, unit: 'ms' });
      t0 = performance.now();
      await c.fetch();
      figures.push({ name: 'fetch 16 MiB checkpoint', value: performance.now() - t0, unit: 'ms' });
      await c.close();
    }
  } finally {
    await protector.close();
  }
  return figures;
}

const argv1 = process.argv[1];
if (argv1 !== undefined && import.meta.url === pathToFileURL(resolve(argv1)).href) {
  for (const f of await benchProtector()) console.log(`${f.name}: ${Math.abs(f.value) >= 100 ? f.value.toFixed(0) : f.value.toFixed(3)} ${f.unit}`);
  process.exit(0);
}
