// G-MPI point-to-point performance (STYLE.md 17; src/app/gmpi/p2p.ts): ping-pong between two
// real processes on loopback, this one (VPID 1) and a child it spawns with
// `node --import tsx bench/gmpi.ts --child <port>` (VPID 2, which dials us: the higher VPID
// dials). The child echoes every message back unchanged. Figures: round-trip latency p50/p99 per
// message size from 8 B to 4 MiB, one-way bandwidth (size / half the p50 round trip, MiB/s),
// the same 8 B round trip for a structured (msgpack) payload through CommLayer, and a two-process
// allreduce. bench/run.ts imports benchGmpi(); run alone with `node --import tsx bench/gmpi.ts`.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { allreduce } from '../src/app/gmpi/collectives.ts';
import { CommLayer } from '../src/app/gmpi/comm.ts';
import { ANY_TAG } from '../src/app/gmpi/matching.ts';
import { P2P } from '../src/app/gmpi/p2p.ts';
import type { Figure } from './crypto.ts';
import { quantile } from './stats.ts';

export type { Figure } from './crypto.ts';

const TASK = 't1';
const PARENT = 1;
const CHILD = 2;
/** Message sizes: 8 B, then ×8 up to 256 KiB, then 1 and 4 MiB. */
const SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20] as const;
/** Round trips timed per size: enough for a stable p99 on small messages, a few seconds at most
 *  on large ones. The first tenth (at least 20) is warm-up and not recorded. */
const roundTrips = (size: number): number => (size <= 4096 ? 20_000 : size <= 262144 ? 2_000 : 200);
/** Tag that tells the child to stop echoing (any other tag is echoed). */
const STOP_TAG = 999;
/** Tag of the CommLayer (structured payload) echo. */
const STRUCTURED_TAG = 7;
const MAX_MESSAGE_BYTES = 8 << 20;
/** The task key both ends hold (PROTOCOL §9.5): what the agents would hand them. */
const BENCH_TASK_KEY = new Uint8Array(32).fill(0x42);

const here = fileURLToPath(new URL('.', import.meta.url));

function label(size: number): string {
  if (size >= 1 << 20) return `${size / (1 << 20)}MiB`;
  if (size >= 1024) return `${size / 1024}KiB`;
  return `${size}B`;
}

/** The child: echo until STOP_TAG, then echo structured values via CommLayer, then allreduce. */
async function runChild(parentPort: number): Promise<void> {
  const p2p = await P2P.open({ taskId: TASK, self: CHILD, maxMessageBytes: MAX_MESSAGE_BYTES, taskKey: BENCH_TASK_KEY });
  await p2p.connect([{ id: PARENT, host: '127.0.0.1', port: parentPort }]);
  for (;;) {
    const m = await p2p.recv(PARENT, ANY_TAG);
    if (m.tag === STOP_TAG) break;
    await p2p.send(PARENT, m.tag, m.data);
  }
  const layer = new CommLayer(p2p);
  const comm = layer.create(0, [PARENT, CHILD]);
  for (;;) {
    const m = await layer.recv(comm, 0, ANY_TAG);
    if (m.tag === STOP_TAG) break;
    await layer.send(comm, 0, m.tag, m.data);
  }
  for (;;) {
    const v = await allreduce(layer, comm, 1, 'sum');
    if (v < 0) break;
  }
  await p2p.close();
}

export async function benchGmpi(): Promise<Figure[]> {
  const p2p = await P2P.open({ taskId: TASK, self: PARENT, maxMessageBytes: MAX_MESSAGE_BYTES, taskKey: BENCH_TASK_KEY });
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', String(p2p.port)], {
    cwd: resolve(here, '..'), stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const figures: Figure[] = [];
  try {
    p2p.expect([CHILD]);
    await p2p.whenConnected([CHILD]);
    for (const size of SIZES) {
      const data = new Uint8Array(size).fill(0x5a);
      const n = roundTrips(size);
      const warm = Math.max(20, Math.floor(n / 10));
      const rtts: number[] = [];
      for (let i = 0; i < n + warm; i++) {
        const t0 = performance.now();
        const reply = p2p.recv(CHILD, 1);
        await p2p.send(CHILD, 1, data);
        const m = await reply;
        const t1 = performance.now();
        if (m.data.length !== size) throw new Error(`echo of ${size} bytes came back with ${m.data.length}`);
        if (i >= warm) rtts.push((t1 - t0) * 1000);
      }
      rtts.sort((a, b) => a - b);
      const p50 = quantile(rtts, 0.5);
      figures.push({ name: `gmpi.rtt.${label(size)}.p50`, value: p50, unit: 'µs' });
      figures.push({ name: `gmpi.rtt.${label(size)}.p99`, value: quantile(rtts, 0.99), unit: 'µs' });
      figures.push({ name: `gmpi.bandwidth.${label(size)}`, value: size / (1 << 20) / (p50 / 2 / 1e6), unit: 'MiB/s' });
    }
    await p2p.send(CHILD, STOP_TAG, new Uint8Array(0));

    const layer = new CommLayer(p2p);
    const comm = layer.create(0, [PARENT, CHILD]);
    const value = { step: 1, x: 0.5 };
    const structured: number[] = [];
    for (let i = 0; i < 11_000; i++) {
      const t0 = performance.now();
      const reply = layer.recv(comm, 1, STRUCTURED_TAG);
      await layer.send(comm, 1, STRUCTURED_TAG, value);
      await reply;
      if (i >= 1000) structured.push((performance.now() - t0) * 1000);
    }
    structured.sort((a, b) => a - b);
    figures.push({ name: 'gmpi.rtt.structured-small.p50', value: quantile(structured, 0.5), unit: 'µs' });
    figures.push({ name: 'gmpi.rtt.structured-small.p99', value: quantile(structured, 0.99), unit: 'µs' });
    await layer.send(comm, 1, STOP_TAG, null);

    const reduces: number[] = [];
    for (let i = 0; i < 5_500; i++) {
      const t0 = performance.now();
      const v = await allreduce(layer, comm, 1, 'sum');
      if (v !== 2) throw new Error(`allreduce gave ${v}`);
      if (i >= 500) reduces.push((performance.now() - t0) * 1000);
    }
    await allreduce(layer, comm, -10, 'sum');
    reduces.sort((a, b) => a - b);
    figures.push({ name: 'gmpi.allreduce.2procs.p50', value: quantile(reduces, 0.5), unit: 'µs' });
    figures.push({ name: 'gmpi.allreduce.2procs.p99', value: quantile(reduces, 0.99), unit: 'µs' });
    const code = await exited;
    if (code !== 0) throw new Error(`bench child exited with ${code}`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await p2p.close();
  }
  return figures;
}

const argv1 = process.argv[1];
const invokedDirectly = argv1 !== undefined && import.meta.url === pathToFileURL(resolve(argv1)).href;
if (invokedDirectly && process.argv[2] === '--child') {
  await runChild(Number(process.argv[3]));
} else if (invokedDirectly) {
  for (const f of await benchGmpi()) console.log(`${f.name.padEnd(36)} ${f.value.toFixed(f.value >= 100 ? 0 : 1).padStart(10)} ${f.unit}`);
  process.exit(0);
}

