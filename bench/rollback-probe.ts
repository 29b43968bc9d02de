// Preloaded into the application processes that bench/rollback.ts submits
// (`node --import tsx --import bench/rollback-probe.ts APP …`), in app and rollback mode alike, so
// both carry the same few wrappers. It changes nothing the application or the library does: it
// wraps, from outside, the calls whose times the bench needs, and keeps the times in memory
// until the process exits, when it writes one line to stderr (the task's `<vpid>.err`):
//   TRINE_BENCH_PROBE {"vpid":…,"rank":…,"restored":…,"startMs":…, …}
// Times are this process's wall clock in ms with sub-ms precision (performance.timeOrigin +
// performance.now()), the clock the daemons' logs use (Date.now()). What it records:
//   - init entered / returned (Gmpi.init), and in a replacement its recovery inside init: the
//     store's fetch from the protector (checkpoints and log) and RollbackRuntime.recover, with
//     how many log entries it re-injected (runtime.stats.replayed);
//   - every snapshot() call (the application calls it once per step or unit);
//   - every checkpoint: when, how long (save + encode + put, acknowledged), its bytes;
//   - every log append to the protector: bytes and latency to its acknowledgement.
// The library exposes none of this yet (no timing lines, its stats are private), so the probe
// patches prototypes and reads `runtime.stats`; a rename in src/app/rollback breaks it loudly
// (the bench then reports the figures as missing), never silently.
import { writeSync } from 'node:fs';
import { Gmpi } from 'trine/app';
import { ProtectorClient } from '../src/app/rollback/protector-client.ts';
import { RollbackRuntime } from '../src/app/rollback/runtime.ts';

/** bench/rollback.ts looks for this tag (it does not import this module: that would patch its
 *  own library too). */
const PROBE_TAG = 'TRINE_BENCH_PROBE';
const now = (): number => performance.timeOrigin + performance.now();
const round = (ms: number): number => Math.round(ms * 100) / 100;

const rec = {
  vpid: Number(process.env.TRINE_VPID ?? -1),
  rank: -1,
  restored: false,
  startMs: round(performance.timeOrigin),
  initCalledMs: 0,
  initDoneMs: 0,
  recoverStartMs: 0,
  fetchDoneMs: 0,
  recoverDoneMs: 0,
  replayed: 0,
  restoredFrom: 0,
  /** snapshot() calls, ms after initDoneMs. */
  snaps: [] as number[],
  /** [ms after initDoneMs, duration ms, bytes] per checkpoint. */
  checkpoints: [] as [number, number, number][],
  appends: 0,
  appendBytes: 0,
  /** Latency of each append to its acknowledgement, ms (the first 20,000). */
  appendMs: [] as number[],
};
const since = (): number => round(now() - rec.initDoneMs);

type Any = (...args: never[]) => Promise<unknown>;
function wrap<T extends object>(owner: T, name: string, around: (orig: Any, self: unknown, args: never[]) => Promise<unknown>): void {
  const o = owner as Record<string, unknown>;
  const orig = o[name];
  if (typeof orig !== 'function') throw new Error(`${PROBE_TAG}: ${name} is not a function any more: update bench/rollback-probe.ts`);
  o[name] = function (this: unknown, ...args: never[]) {
    return around(orig as Any, this, args);
  };
}

wrap(Gmpi, 'init', async (orig, self, args) => {
  rec.initCalledMs = round(now());
  const g = (await orig.apply(self, args)) as Gmpi;
  rec.initDoneMs = round(now());
  rec.rank = g.rank();
  rec.restored = g.restored;
  return g;
});
wrap(Gmpi.prototype, 'snapshot', (orig, self, args) => {
  rec.snaps.push(since());
  return orig.apply(self, args);
});
wrap(RollbackRuntime.prototype, 'recover', async (orig, self, args) => {
  rec.recoverStartMs = round(now());
  await orig.apply(self, args);
  rec.recoverDoneMs = round(now());
  const stats = (self as RollbackRuntime).stats;
  rec.replayed = stats.replayed;
  rec.restoredFrom = stats.restoredFrom;
});
wrap(ProtectorClient.prototype, 'fetch', async (orig, self, args) => {
  const got = await orig.apply(self, args);
  rec.fetchDoneMs = round(now());
  return got;
});
wrap(RollbackRuntime.prototype, 'checkpoint', async (orig, self, args) => {
  const t0 = now();
  await orig.apply(self, args);
  rec.checkpoints.push([round(t0 - rec.initDoneMs), round(now() - t0), (self as RollbackRuntime).stats.checkpointBytes]);
});
wrap(ProtectorClient.prototype, 'append', async (orig, self, args) => {
  const t0 = now();
  const blob = (args as unknown as [number, Uint8Array])[1];
  rec.appends++;
  rec.appendBytes += blob.byteLength;
  const r = await orig.apply(self, args);
  if (rec.appendMs.length < 20_000) rec.appendMs.push(round(now() - t0));
  return r;
});

process.on('exit', () => {
  try {
    writeSync(2, `${PROBE_TAG} ${JSON.stringify(rec)}\n`);
  } catch {
    // stderr gone: the bench reports the figures as missing
  }
});
