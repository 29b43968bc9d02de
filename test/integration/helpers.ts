// What the real-process integration tests share: the CLI entry, their wait budget, and the
// cleanup that kills every process group they learned of.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const NODE = process.execPath;
export const TRINE = fileURLToPath(new URL('../../bin/trine.js', import.meta.url));
/** vi.waitFor budget: generous, for a loaded 2-core host. */
export const WAIT = { timeout: 30_000, interval: 20 };

/** SIGKILL each pid's process group and the pid itself; a Set is emptied afterwards. */
export function killAll(pids: Iterable<number>): void {
  for (const pid of pids) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  if (pids instanceof Set) pids.clear();
}

/** A sleeping process with `args` on its command line (so it passes for a cluster process of a
 *  dir it names), leading its own process group like every daemon and task process; its pid is
 *  added to `pids` for killAll. */
export function standIn(pids: Set<number>, ...args: string[]): number {
  const child = spawn(NODE, ['-e', 'setInterval(() => {}, 1 << 30)', ...args], { detached: true, stdio: 'ignore' });
  if (child.pid === undefined) throw new Error('stand-in process did not start');
  child.unref();
  pids.add(child.pid);
  return child.pid;
}
