// How to start a daemon as a process, detached, the way `trine up` does: the command line that
// runs `trine <args>`, and the arguments of each kind of daemon. Used by `trine up`, `trine node
// run`, and the daemons themselves (src/daemon/main.ts: an agent starting a replica, the
// watchdog's reset drivers starting keepers and replicas again). Running a daemon in the
// foreground (`trine manager`, `trine agent`, `trine scc`, `trine keeper`) is src/daemon/main.ts,
// which cli/main.ts loads only for those commands.
import { closeSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { paths, writePidFile, type ProcessEntry } from '../src/io/cluster-dir.ts';
import { openPrivate } from '../src/io/private-files.ts';
import { CliError, EXIT_FAILED } from './errors.ts';

/** bin/trine.js, which names itself in TRINE_BIN before it loads the CLI (from the bundle or
 *  the sources); a caller that imported this module directly (a test, a bench) finds it beside. */
const TRINE_BIN: string =
  (globalThis as { TRINE_BIN?: string }).TRINE_BIN ?? fileURLToPath(new URL('../bin/trine.js', import.meta.url));

/** The command line that runs `trine <args>` as a new process, the way an operator would.
 *  TRINE_CPU_PROF_DIR=D (inherited by every daemon) has each write a V8 CPU profile into D when
 *  it exits: node refuses --cpu-prof in NODE_OPTIONS. */
export function trineCommand(args: readonly string[]): { file: string; args: string[] } {
  const prof = process.env['TRINE_CPU_PROF_DIR'];
  const nodeArgs = prof === undefined || prof === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${prof}`];
  return { file: process.execPath, args: [...nodeArgs, TRINE_BIN, ...args] };
}

/** The `trine` arguments that run a cluster process as a daemon (none for the operator). */
export function daemonArgs(p: ProcessEntry, dir: string): string[] {
  switch (p.kind) {
    case 'replica':
      return ['manager', '--dir', dir, '--id', p.id];
    case 'agent':
      // The keeper starts the agent and keeps it running; `trine down` stops it through it.
      return ['keeper', '--dir', dir, '--id', p.id];
    case 'watchdog':
      return ['scc', '--dir', dir];
    case 'operator':
      return [];
  }
}

/** Starts cluster process `p` detached (its own process group, surviving its starter), output
 *  appended to `logs/<id>.out`, and records its pid in `run/<id>.pid`. Returns the pid. */
export function spawnDaemon(dir: string, p: ProcessEntry, extra: readonly string[] = []): number {
  const out = openPrivate(paths.output(dir, p.id), 'a');
  try {
    const command = trineCommand([...daemonArgs(p, dir), ...extra]);
    const child = spawn(command.file, command.args, {
      detached: true,
      stdio: ['ignore', out, out],
    });
    child.on('error', () => {
      // Reported below: a child without a pid failed to spawn.
    });
    if (child.pid === undefined) throw new CliError(`could not start ${p.id} (${process.execPath}): check that node can run`, EXIT_FAILED);
    child.unref();
    writePidFile(dir, p.id, child.pid);
    return child.pid;
  } finally {
    closeSync(out);
  }
}
