// The DGRP tester thread's entry (docs/PROTOCOL.md §12.2): worker threads do not inherit the
// main thread's TypeScript loader, so register tsx here when the library runs from its sources,
// then load the tester itself. A compiled library has tester-worker.js beside this file.
import { existsSync } from 'node:fs';

const compiled = new URL('./tester-worker.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('./tester-worker.ts', import.meta.url).href);
}
