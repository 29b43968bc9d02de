// `trine manager`, `trine agent`, `trine scc`, `trine keeper`: the daemons, in the foreground.
// `trine up` starts them detached (agents under a keeper each); running one by hand is for
// debugging and for hosts outside a local cluster. Also how to start one as a process.
import { fileURLToPath } from 'node:url';
import { runAgent } from '../src/daemon/agent.ts';
import { runKeeper } from '../src/daemon/keeper.ts';
import { runManager } from '../src/daemon/manager.ts';
import { runWatchdog } from '../src/daemon/scc.ts';

const CLI_MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

/** The command line that runs `trine <args>` as a new process: node with the tsx loader
 *  (resolved from here, so it works whatever the caller's cwd) on cli/main.ts. */
export function trineCommand(args: readonly string[]): { file: string; args: string[] } {
  return { file: process.execPath, args: ['--import', import.meta.resolve('tsx'), CLI_MAIN, ...args] };
}

export const startManager = (opts: { dir?: string | undefined; id: string }) => runManager(opts.dir, opts.id);
export const startAgent = (opts: { dir?: string | undefined; id: string }) => runAgent(opts.dir, opts.id);
export const startWatchdog = (opts: { dir?: string | undefined }) => runWatchdog(opts.dir);
export const startKeeper = (opts: { dir?: string | undefined; id: string }) =>
  runKeeper({ dir: opts.dir, id: opts.id, agentCommand: (dir, id) => trineCommand(['agent', '--dir', dir, '--id', id]) });
