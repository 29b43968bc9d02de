// node:worker_threads, loaded when the link's worker starts (at the welcome) or a DGRP tester
// does, not as trine/app loads: ~0.5 ms of CPU that would sit on every spawned process's path
// (docs/PERFORMANCE.md §5). Types come from `import type`, which loads nothing.
import { createRequire } from 'node:module';

type Threads = typeof import('node:worker_threads');

let loaded: Threads | null = null;

export function threads(): Threads {
  loaded ??= createRequire(import.meta.url)('node:worker_threads') as Threads;
  return loaded;
}
