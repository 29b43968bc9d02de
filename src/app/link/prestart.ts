// The link's worker thread, started the moment trine/app is loaded in a process Trine started as
// a linked task: a worker is a whole Node environment and takes ~25 ms of CPU to boot
// (docs/PERFORMANCE.md §5), which then overlaps the rest of the library's loading, the
// application's own start and the first connection's hello and mapping (the handover, PROTOCOL
// §9.4.1): it is needed only once the welcome has come. index.ts imports this module first.
// The worker waits for its start message (worker.cjs), so nothing about the connection is decided
// here; AgentConnection.open() takes this worker, or starts one if there is none (a second init,
// a process not started by Trine, an environment passed as LinkOptions.env).
import { Worker } from 'node:worker_threads';

const WORKER_URL = new URL('./worker.cjs', import.meta.url);

let early: Worker | null = null;

/** A new, idle link worker. It never keeps the process alive by itself. */
export function startLinkWorker(): Worker {
  const worker = new Worker(WORKER_URL, { execArgv: [] });
  worker.unref();
  return worker;
}

if (process.env.TRINE_AGENT_SOCKET && process.env.TRINE_TOKEN) {
  const w = startLinkWorker();
  early = w;
  // Until a connection takes it, a failed start only means it is not used.
  w.once('error', () => {
    if (early === w) early = null;
  });
}

/** The worker started at load, once; null if there is none (or it failed). */
export function takeLinkWorker(): Worker | null {
  const w = early;
  early = null;
  return w;
}
