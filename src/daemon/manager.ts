// `trine manager`: runs one manager replica (DESIGN.md §1) — the replica core on the shared
// daemon runtime, listening for agents, the other replicas and operators.
import { createReplica, type ReplicaCore } from '../core/replica.ts';
import type { ProcessId } from '../core/ports.ts';
import { replicaSample } from './metrics-sample.ts';
import { waitForReplicaGo } from './replica-standby.ts';
import { runCore, type RunHooks } from './run-core.ts';

/** `joining`: a replacement started by an agent on the group's command (PROTOCOL §10.6). */
export function runManager(
  dir: string | undefined, id: ProcessId, hooks: RunHooks = {}, joining?: { view: number; primary: ProcessId; replicas: readonly ProcessId[] },
): Promise<void> {
  let replica: ReplicaCore | null = null;
  return runCore({
    ...hooks,
    dir,
    id,
    kind: 'replica',
    ...(joining === undefined ? {} : { join: joining.replicas }),
    makeCore: ({ cluster, entry, inc, hash, signer, verifier, daemon, listen }) => {
      // Listening elsewhere, its own port being taken: the members learn where (PROTOCOL §10.6).
      const port = listen !== null && entry.listen !== null && listen.port !== entry.listen.port ? listen.port : 0;
      replica = createReplica({ id, membership: cluster.config.membership, hash, inc, signer, verifier, daemon, ...(joining === undefined ? {} : { joining: { ...joining, port } }) });
      return replica;
    },
    sample: (nowMs) => (replica === null ? {} : replicaSample(replica.status(nowMs))),
  });
}

/** `trine manager --standby r4 r5 …`: a warm standby for its agent (src/daemon/replica-standby.ts):
 *  everything is loaded by now; it becomes the replica the agent names. */
export async function runManagerStandby(dir: string | undefined, spares: readonly ProcessId[]): Promise<void> {
  const { id, join } = await waitForReplicaGo(spares);
  return runManager(dir, id, {}, join);
}
