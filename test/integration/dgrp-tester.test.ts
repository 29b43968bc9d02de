// DGRP tester threads for real (docs/PROTOCOL.md §12.2): src/app/dgrp/tester-boot.mjs started as
// worker threads exactly as G-MPI starts them, each with a UDP socket on loopback, fed a view
// through the port the link's worker would use, testing each other with real datagrams; what
// they send the group is read from that port, decoded with the agent's own schema.
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import type { TesterStats } from '../../src/app/dgrp/tester.ts';
import type { TesterWorkerData } from '../../src/app/dgrp/tester-worker.ts';
import { agentToProc, encodeAppFrame, procToAgent, type ProcToAgent } from '../../src/core/wire/app-wire.ts';
import { unpack } from '../../src/core/wire/frame.ts';
import type { DgrpOptions } from '../../src/core/wire/dgrp.ts';

const KEY = new Uint8Array(32).fill(9);
/** A wide margin: these tests assert silence among prompt peers on a machine other tests load. */
const OPTIONS: DgrpOptions = { intervalMs: 50, zeta: 3, factorPercent: 250, marginMs: 60, initialThresholdMs: 8000 };
const BOOT = new URL('../../src/app/dgrp/tester-boot.mjs', import.meta.url);
const REVERSE = new URL('../fixtures/dgrp/reverse-test.ts', import.meta.url).href;

/** A free UDP port on loopback (the worker binds it again at once). */
async function freePort(): Promise<number> {
  const s = createSocket('udp4');
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  const port = s.address().port;
  s.close();
  return port;
}

type Tester = { worker: Worker; port: number; link: MessagePort; sent: ProcToAgent[] };
const started: Tester[] = [];
afterEach(async () => {
  for (const t of started.splice(0)) {
    t.link.close();
    await t.worker.terminate();
  }
});

async function startTester(self: number, testModule: string | null): Promise<Tester> {
  const port = await freePort();
  const { port1, port2 } = new MessageChannel();
  const data: TesterWorkerData = { self, key: KEY, options: OPTIONS, host: '127.0.0.1', port, link: port2, testModule };
  const worker = new Worker(BOOT, { workerData: data, transferList: [port2] });
  const t: Tester = { worker, port, link: port1, sent: [] };
  started.push(t);
  // What the tester asks the link's worker to send: length-prefixed frames of procToAgent.
  port1.on('message', (m: { type: string; bytes: Uint8Array }) => {
    const tree = unpack(m.bytes.subarray(4));
    const msg = tree.ok ? procToAgent.dec(tree.value, 'test') : tree;
    if (msg.ok) t.sent.push(msg.value);
  });
  const [first] = (await once(worker, 'message')) as [{ type: string; detail?: string }];
  if (first.type !== 'ready') throw new Error(first.detail ?? first.type);
  return t;
}

/** The view every tester gets, as the link's worker relays it: a frame body of agentToProc. */
function sendView(testers: readonly Tester[], counters: readonly number[]): void {
  const entries = testers.map((t, vpid) => ({ vpid, counter: counters[vpid] ?? 0, endpoint: `127.0.0.1:${t.port}` }));
  const frame = encodeAppFrame(agentToProc, { type: 'dgrp', view: 1, released: 0, entries });
  for (const t of testers) t.link.postMessage({ type: 'frame', body: frame.subarray(4) });
}

const stats = async (t: Tester): Promise<TesterStats> => {
  t.worker.postMessage({ type: 'stats' });
  for (;;) {
    const [m] = (await once(t.worker, 'message')) as [{ type: string; stats: TesterStats }];
    if (m.type === 'stats') return m.stats;
  }
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('PROTOCOL §12.2: tester threads over real UDP', () => {
  it('three testers answer each other\'s primes challenges; with everyone prompt, nothing is reported', async () => {
    const ts = await Promise.all([0, 1, 2].map((v) => startTester(v, null)));
    sendView(ts, [0, 0, 0]);
    await sleep(1200);
    for (const t of ts) {
      const s = await stats(t);
      expect(s.tests).toBeGreaterThan(20);
      expect(Object.keys(s.thresholds).sort()).toEqual(['0', '1', '2'].filter((v) => v !== String(ts.indexOf(t))));
    }
    expect(ts.flatMap((t) => t.sent)).toEqual([]);
  }, 30_000);

  it('a process outside the group is tested and counted pass by pass in the reports (its rejoin votes)', async () => {
    const ts = await Promise.all([0, 1].map((v) => startTester(v, null)));
    sendView(ts, [0, 1]);
    await sleep(800);
    const reports = ts[0]?.sent.filter((m) => m.type === 'dgrp.report') ?? [];
    const passes = reports.flatMap((r) => (r.type === 'dgrp.report' ? r.verdicts.filter((v) => v.vpid === 1).map((v) => v.passes) : []));
    expect(passes.slice(0, 3)).toEqual([1, 2, 3]);
    // The non-member itself does not test (spec 2.2.3).
    expect(ts[1]?.sent).toEqual([]);
  }, 30_000);

  it('the test is pluggable: a module\'s DgrpTest is used; a module without one fails the start with a reason', async () => {
    const ts = await Promise.all([0, 1].map((v) => startTester(v, REVERSE)));
    sendView(ts, [0, 0]);
    await sleep(600);
    expect((await stats(ts[0] as Tester)).tests).toBeGreaterThan(5);
    expect(ts.flatMap((t) => t.sent)).toEqual([]);
    await expect(startTester(2, new URL('../fixtures/dgrp/nothing-here.ts', import.meta.url).href)).rejects.toThrow(/nothing-here/);
  }, 30_000);

  it('datagrams from outside the task (another key, garbage) are refused and counted, and change nothing', async () => {
    const ts = await Promise.all([0, 1].map((v) => startTester(v, null)));
    sendView(ts, [0, 0]);
    const s = createSocket('udp4');
    for (let i = 0; i < 20; i++) s.send(Buffer.from(`garbage ${i}`), ts[1]?.port ?? 0, '127.0.0.1');
    await sleep(400);
    s.close();
    const refused = (await stats(ts[1] as Tester)).refused;
    expect(Object.values(refused).reduce((a, b) => a + (b ?? 0), 0)).toBeGreaterThanOrEqual(20);
    expect(ts.flatMap((t) => t.sent)).toEqual([]);
  }, 30_000);
});
