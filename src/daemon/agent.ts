// `trine agent`: runs one node agent (DESIGN.md §1) — the agent core on the shared daemon
// runtime, dialing every replica. Application process control arrives in a later issue.
import { createAgent } from '../core/agent.ts';
import type { ProcessId } from '../core/ports.ts';
import { DEFAULT_AGENT_SLOTS } from '../io/cluster-dir.ts';
import { runCore, type RunHooks } from './run-core.ts';

export function runAgent(dir: string | undefined, id: ProcessId, hooks: RunHooks = {}): Promise<void> {
  return runCore({
    ...hooks,
    dir,
    id,
    kind: 'agent',
    makeCore: ({ cluster, entry, inc, signer }) =>
      createAgent({ id, membership: cluster.config.membership, inc, slots: entry.slots ?? DEFAULT_AGENT_SLOTS, signer }),
  });
}
