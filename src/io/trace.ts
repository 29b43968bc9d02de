// A per-process timeline for latency work: with TRINE_TRACE_DIR=D in its environment, a daemon
// appends `<CLOCK_MONOTONIC ms> <event>` lines to D/<id>.<pid>.trace (one synchronous write
// each), so the hops of one message can be lined up across processes, which share the clock
// (docs/PERFORMANCE.md §5 has one such timeline). Without it, trace() returns at once.
import { openSync, writeSync } from 'node:fs';

const dir = process.env['TRINE_TRACE_DIR'];
let fd: number | null = null;

/** Names this process's trace file; call once, at start. A no-op when tracing is off. */
export function startTrace(id: string): void {
  if (dir === undefined || dir === '' || fd !== null) return;
  fd = openSync(`${dir}/${id}.${process.pid}.trace`, 'a');
}

export function tracing(): boolean {
  return fd !== null;
}

export function trace(event: string): void {
  if (fd === null) return;
  writeSync(fd, `${(Number(process.hrtime.bigint()) / 1e6).toFixed(3)} ${event}\n`);
}
