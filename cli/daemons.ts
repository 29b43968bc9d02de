// `trine manager`, `trine agent`, `trine scc`: the daemons, in the foreground. `trine up` starts
// them detached; running one by hand is for debugging and for hosts outside a local cluster.
import { runAgent } from '../src/daemon/agent.ts';
import { runManager } from '../src/daemon/manager.ts';
import { runWatchdog } from '../src/daemon/scc.ts';

export const startManager = (opts: { dir?: string | undefined; id: string }) => runManager(opts.dir, opts.id);
export const startAgent = (opts: { dir?: string | undefined; id: string }) => runAgent(opts.dir, opts.id);
export const startWatchdog = (opts: { dir?: string | undefined }) => runWatchdog(opts.dir);
