// `trine scc`: runs the watchdog (the paper's spacecraft control computer, spec §1.6) — the
// watchdog core on the shared daemon runtime, listening for replica heartbeats.
import { createWatchdog } from '../core/watchdog.ts';
import { runCore } from './run-core.ts';

export function runWatchdog(dir: string | undefined): Promise<void> {
  return runCore({
    dir,
    id: (cluster) => cluster.config.membership.scc,
    kind: 'watchdog',
    makeCore: ({ cluster, entry, inc }) => createWatchdog({ id: entry.id, membership: cluster.config.membership, inc }),
  });
}
