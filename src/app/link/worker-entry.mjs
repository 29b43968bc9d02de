// Worker entry: a worker thread does not inherit the parent's TypeScript loader, so register
// tsx here, then load the worker (worker.ts).
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
