// The floor under every latency of the cluster benches: how long a small message takes through
// a chain of k bare, idle Node processes on this machine, each forwarding it over loopback TCP
// (bench/hop-relay.mjs) and doing nothing else. A Trine broadcast crosses about nine such
// process hops in sequence (PERFORMANCE §5), each also doing real work, so this chain bounds
// from below what any design with that many hops can reach here. One message every SETTLE_MS,
// so every process sleeps before it, as cluster processes do between events; also back to back
// (20 ms) for comparison. bench/run.ts imports benchHops(); run alone with
//   node --import tsx bench/hops.ts
// (TRINE_BENCH_HOP_SAMPLES: messages per chain, 100 by default).
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Figure } from './crypto.ts';
import { quantile } from './stats.ts';

const RELAY = fileURLToPath(new URL('./hop-relay.mjs', import.meta.url));
const SAMPLES = Number(process.env.TRINE_BENCH_HOP_SAMPLES ?? 100);
const SETTLE_MS = 150;
const MESSAGE = Buffer.alloc(100, 0x78);

/** Round trips through `relays` processes (relays + 1 hops), one every `gapMs`: sorted ms. */
async function chain(relays: number, gapMs: number, samples: number): Promise<number[]> {
  const latencies: number[] = [];
  let sentAt = 0n;
  const sink = createServer((s) => s.on('data', () => latencies.push(Number(process.hrtime.bigint() - sentAt) / 1e6)));
  sink.listen(0, '127.0.0.1');
  await once(sink, 'listening');
  let port = (sink.address() as AddressInfo).port;
  const kids: ChildProcess[] = [];
  try {
    for (let i = 0; i < relays; i++) {
      const kid = fork(RELAY, [], { env: { ...process.env, NEXT: String(port) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      kids.push(kid);
      [port] = (await once(kid, 'message')) as [number];
    }
    const first = connect(port, '127.0.0.1');
    first.setNoDelay(true);
    await once(first, 'connect');
    await sleep(500);
    for (let i = 0; i < samples; i++) {
      await sleep(gapMs);
      const before = latencies.length;
      sentAt = process.hrtime.bigint();
      first.write(MESSAGE);
      while (latencies.length === before) await sleep(1);
    }
    first.destroy();
  } finally {
    for (const k of kids) k.kill('SIGKILL');
    sink.close();
  }
  return latencies.sort((a, b) => a - b);
}

export async function benchHops(samples = SAMPLES): Promise<Figure[]> {
  const figures: Figure[] = [];
  for (const relays of [1, 4, 8]) {
    for (const gap of [SETTLE_MS, 20]) {
      const l = await chain(relays, gap, samples);
      const hops = relays + 1;
      const label = `hops.${hops}.${gap === SETTLE_MS ? 'idle' : 'busy'}`;
      figures.push({ name: `${label} p50`, value: quantile(l, 0.5), unit: 'ms' });
      figures.push({ name: `${label} p90`, value: quantile(l, 0.9), unit: 'ms' });
      figures.push({ name: `${label} min`, value: l[0] ?? NaN, unit: 'ms' });
      figures.push({ name: `${label} p50 per hop`, value: quantile(l, 0.5) / hops, unit: 'ms' });
    }
  }
  return figures;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) {
  for (const f of await benchHops()) console.log(`${f.name}: ${f.value.toFixed(3)} ${f.unit}`);
  process.exit(0);
}
