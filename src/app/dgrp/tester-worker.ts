// The DGRP tester thread of one process (docs/PROTOCOL.md §12.2): a UDP socket on the port number
// of the process's G-MPI listener, the testing interval's timer, a probe of its own event loop
// (a tester held up must not judge, tester.ts), the views its link's worker copies to it and
// the reports it sends back through that worker. Off the main thread, so an application that
// computes for seconds without yielding still answers its tests and still tests its peers; a
// process that is slow as a whole (stopped, throttled, starved of CPU) is slow here too, which
// is what the tests are for.
import { createSocket, type Socket } from 'node:dgram';
import { randomInt } from 'node:crypto';
import { isIP } from 'node:net';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { unpack } from '../../core/wire/frame.ts';
import { agentToProc, encodeAppFrame, procToAgent } from '../../core/wire/app-wire.ts';
import type { DgrpOptions } from '../../core/wire/dgrp.ts';
import { parseEndpoint } from '../gmpi/gmpi-api.ts';
import { PRIMES_TEST, type DgrpTest } from './challenge.ts';
import { DgrpTester } from './tester.ts';

export type TesterWorkerData = {
  self: number;
  key: Uint8Array;
  options: DgrpOptions;
  /** The G-MPI listener's host and port: the UDP socket binds the same. */
  host: string;
  port: number;
  /** To the link's worker (worker.cjs `attach`). */
  link: MessagePort;
  /** A module whose default export is a DgrpTest (challenge.ts); null: the paper's primes test. */
  testModule: string | null;
};

/** The event-loop probe's period, and the jump past which this thread counts as held up: a
 *  stopped or starved process misses many periods; a busy node delays a timer by a few ms. */
export const LAG_PROBE_MS = 10;
export const LAG_TOLERANCE_MS = 25;

const data = workerData as TesterWorkerData;
const parent = parentPort;
if (parent === null) throw new Error('tester-worker.ts runs as a worker thread');

async function loadTest(): Promise<DgrpTest> {
  if (data.testModule === null) return PRIMES_TEST;
  const m = (await import(data.testModule)) as { default?: DgrpTest };
  const t = m.default;
  if (t === undefined || typeof t.challenge !== 'function' || typeof t.answer !== 'function' || typeof t.check !== 'function') {
    throw new Error(`${data.testModule}: its default export is not a DgrpTest (challenge, answer, check)`);
  }
  return t;
}

async function main(): Promise<void> {
  const test = await loadTest();
  const socket: Socket = createSocket({ type: isIP(data.host) === 6 ? 'udp6' : 'udp4' });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(data.port, data.host, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  let last = performance.now();
  const tester = new DgrpTester(data.self, data.key, data.options, test, {
    now: () => performance.now(),
    heldUp: () => performance.now() - last > LAG_PROBE_MS + LAG_TOLERANCE_MS,
    ...(process.env.TRINE_DGRP_TRACE === '1' ? { trace: (line: string) => process.stderr.write(`${line}\n`) } : {}),
    random: () => randomInt(0, 2 ** 32 - 1),
    later: (ms, fn) => void setTimeout(fn, ms),
    send: (endpoint, datagram) => {
      const to = parseEndpoint({ endpoint });
      if (to !== null) socket.send(datagram, to.port, to.host);
    },
    report: (r) => data.link.postMessage({ type: 'send', bytes: encodeAppFrame(procToAgent, { type: 'dgrp.report', ...r }) }),
  });
  socket.on('message', (msg) => tester.onDatagram(new Uint8Array(msg.buffer, msg.byteOffset, msg.length)));
  socket.on('error', () => {}); // an ICMP unreachable from a peer that left: its tests miss, as they should
  data.link.on('message', (m: { type: string; body?: Uint8Array }) => {
    if (m.type !== 'frame' || m.body === undefined) return;
    const tree = unpack(m.body);
    const msg = tree.ok ? agentToProc.dec(tree.value, 'dgrp') : tree;
    if (msg.ok && msg.value.type === 'dgrp') tester.onView(msg.value);
  });
  const interval = setInterval(() => tester.tick(), data.options.intervalMs);
  const probe = setInterval(() => {
    const now = performance.now();
    if (now - last > LAG_PROBE_MS + LAG_TOLERANCE_MS) tester.noteLag();
    last = now;
  }, LAG_PROBE_MS);
  parent?.on('message', (m: { type: string }) => {
    if (m.type === 'stats') parent.postMessage({ type: 'stats', stats: tester.stats });
    if (m.type !== 'stop') return;
    clearInterval(interval);
    clearInterval(probe);
    socket.close();
    data.link.close();
    parent.postMessage({ type: 'stopped', stats: tester.stats });
  });
  parent?.postMessage({ type: 'ready' });
}

main().catch((e: unknown) => parent?.postMessage({ type: 'failed', detail: e instanceof Error ? e.message : String(e) }));
