// One benchmarked cluster process: a real manager or agent daemon (the same runtime, ws transport
// and node:crypto signatures as `trine up`), with hooks that timestamp its deliveries on the
// shared wall clock (µs resolution) and take orders from the benchmark over IPC.
// Run only by bench/group.ts: `node --import tsx bench/node-proc.ts <dir> <id> <replica|agent>`.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { runAgent } from '../src/daemon/agent.ts';
import { runManager } from '../src/daemon/manager.ts';
import type { CoreEffect, CoreInput } from '../src/core/node.ts';

export type ToProc =
  | { cmd: 'echo'; tag: string; fanout: 'self' | 'all'; count: number }
  /** Issue `requests` echo requests, keeping `window` outstanding (a request is done when its
   *  last reply reaches this agent). */
  | { cmd: 'flood'; prefix: string; requests: number; count: number; fanout: 'self' | 'all'; window: number }
  | { cmd: 'counts' }
  /** Latency run without IPC on the critical path: this agent issues `samples` single
   *  broadcasts, each `gapMs` after its own delivery of the previous one; every process keeps
   *  its timestamps in memory until asked for them with `trace`. */
  | { cmd: 'latency'; samples: number; gapMs: number }
  | { cmd: 'trace' };

export type FromProc =
  | { ev: 'ready'; id: string }
  | { ev: 'request'; id: string; tag: string; atMs: number }
  | { ev: 'ordered'; id: string; client: string; csn: number; rsn: number; tag: string; atMs: number }
  | { ev: 'delivered'; id: string; tag: string; index: number; atMs: number }
  | { ev: 'flood.done'; id: string; atMs: number }
  | { ev: 'counts'; id: string; deliveries: number; firstAtMs: number; lastAtMs: number; loopDelayP50Ms: number; loopDelayP99Ms: number }
  | { ev: 'latency.done'; id: string }
  /** Timestamps kept during a latency run: tag → ms (requested here / ordered here / delivered here). */
  | { ev: 'trace'; id: string; requested: Record<string, number>; ordered: Record<string, number>; delivered: Record<string, number> };

const [dir, id, kind] = process.argv.slice(2) as [string, string, string];
const nowMs = () => performance.timeOrigin + performance.now();
/** How long this process's event loop keeps a ready callback waiting (a hop's floor). */
const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();
const send = (m: FromProc) => process.send?.(m);

/** Tags whose every event is reported (latency samples); floods are only counted. */
const traced = (tag: string) => tag.startsWith('lat-');
let deliveries = 0;
/** In-memory timestamps of `lat-*` tags (no IPC while measuring). */
const requested: Record<string, number> = {};
const ordered: Record<string, number> = {};
const delivered: Record<string, number> = {};
let latencyRun: { left: number; gapMs: number } | null = null;

function nextLatencySample(): void {
  if (latencyRun === null) return;
  if (latencyRun.left === 0) {
    latencyRun = null;
    send({ ev: 'latency.done', id });
    return;
  }
  const tag = `lat-${latencyRun.left--}`;
  requested[tag] = nowMs();
  issue(tag, 'all', 1);
}
let firstAtMs = 0;
let lastAtMs = 0;
let feed: ((make: (nowMs: number) => CoreInput) => void) | null = null;
/** A running flood; `next` is the window of outstanding requests. */
let flood: { prefix: string; left: number; outstanding: number; count: number; fanout: 'self' | 'all'; next: number } | null = null;

function issue(tag: string, fanout: 'self' | 'all', count: number): void {
  feed?.((now) => ({ type: 'request', nowMs: now, request: { type: 'echo', tag, fanout, count, data: new Uint8Array(16) } }));
}

function pump(): void {
  if (flood === null) return;
  while (flood.left > 0 && flood.outstanding < flood.next) {
    flood.left--;
    flood.outstanding++;
    issue(`${flood.prefix}-${flood.left}`, flood.fanout, flood.count);
  }
}

function onEffect(e: Exclude<CoreEffect, { type: 'send' }>): void {
  const at = nowMs();
  if (e.type === 'deliver.request' && e.request.type === 'echo' && traced(e.request.tag)) {
    // Measured samples ('lat-<n>') stay in memory; warm-up tags go to the bench at once.
    if (/^lat-\d+$/.test(e.request.tag)) ordered[e.request.tag] = at;
    else send({ ev: 'ordered', id, client: e.client, csn: e.csn, rsn: e.rsn, tag: e.request.tag, atMs: at });
  }
  if (e.type !== 'deliver.command' || e.command.type !== 'echo.reply') return;
  deliveries++;
  if (firstAtMs === 0) firstAtMs = at;
  lastAtMs = at;
  const c = e.command;
  if (traced(c.tag)) {
    if (/^lat-\d+$/.test(c.tag)) {
      delivered[c.tag] = at;
      if (latencyRun !== null && c.origin === id) setTimeout(nextLatencySample, latencyRun.gapMs);
    } else {
      send({ ev: 'delivered', id, tag: c.tag, index: c.index, atMs: at });
    }
  }
  if (flood !== null && c.origin === id && c.tag.startsWith(`${flood.prefix}-`) && c.index === flood.count - 1) {
    flood.outstanding--;
    if (flood.left === 0 && flood.outstanding === 0) {
      send({ ev: 'flood.done', id, atMs: at });
      flood = null;
    } else {
      pump();
    }
  }
}

// The benchmark owns this process: if it dies (killed, timed out), so does this one.
process.on('disconnect', () => process.exit(0));

process.on('message', (m: ToProc) => {
  switch (m.cmd) {
    case 'echo':
      send({ ev: 'request', id, tag: m.tag, atMs: nowMs() });
      issue(m.tag, m.fanout, m.count);
      break;
    case 'flood':
      flood = { prefix: m.prefix, left: m.requests, outstanding: 0, count: m.count, fanout: m.fanout, next: m.window };
      pump();
      break;
    case 'latency':
      latencyRun = { left: m.samples, gapMs: m.gapMs };
      nextLatencySample();
      break;
    case 'trace':
      send({ ev: 'trace', id, requested, ordered, delivered });
      break;
    case 'counts':
      send({ ev: 'counts', id, deliveries, firstAtMs, lastAtMs, loopDelayP50Ms: loopDelay.percentile(50) / 1e6, loopDelayP99Ms: loopDelay.percentile(99) / 1e6 });
      break;
  }
});

const hooks = {
  onEffect,
  onReady: (f: (make: (nowMs: number) => CoreInput) => void) => {
    feed = f;
    send({ ev: 'ready', id });
  },
};
if (kind === 'replica') void runManager(dir, id, hooks);
else void runAgent(dir, id, hooks);
