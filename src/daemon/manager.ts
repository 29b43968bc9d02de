// `trine manager`: runs one manager replica (DESIGN.md §1) — the replica core on the shared
// daemon runtime, listening for agents, the other replicas and operators.
import { createReplica } from '../core/replica.ts';
import type { ProcessId } from '../core/ports.ts';
import { runCore } from './run-core.ts';

export function runManager(dir: string | undefined, id: ProcessId): Promise<void> {
  return runCore({
    dir,
    id,
    kind: 'replica',
    makeCore: ({ cluster, inc, hash }) => createReplica({ id, membership: cluster.config.membership, hash, inc }),
  });
}
