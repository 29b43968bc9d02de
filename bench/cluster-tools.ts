// Shared by the benchmarks that run a real local cluster (bench/tasks.ts, bench/signals.ts):
// reading the daemons' JSON logs, finding and killing a cluster's processes, restarting a
// node's keeper, and tearing a cluster down whatever state it is in.
import { spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { trineCommand } from '../cli/daemons.ts';
import { stopCluster } from '../cli/down.ts';
import type { ProcessId } from '../src/core/ports.ts';
import { isSameProcess } from '../src/daemon/agent.ts';
import { isAlive, paths, runningProcesses, writePidFile } from '../src/io/cluster-dir.ts';
import { logPath } from '../src/io/log.ts';

/** Pino log lines of `id` (ISO times: Date.now(), ms) that are `event`, after `afterMs`. */
export function logEvents(dir: string, id: ProcessId, event: string, afterMs: number): { atMs: number; line: Record<string, unknown> }[] {
  let text: string;
  try {
    text = readFileSync(logPath(dir, id), 'utf8');
  } catch {
    return [];
  }
  const out: { atMs: number; line: Record<string, unknown> }[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.includes(`"${event}"`)) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      continue;
    }
    const atMs = Date.parse(String(line['time']));
    if (line['event'] === event && atMs >= afterMs) out.push({ atMs, line });
  }
  return out;
}

/** Pids of live processes whose command line names the cluster dir and, if given, `id` (a
 *  keeper, its agent, a standby agent: whatever runs for that agent id). */
export function processesNaming(dir: string, id?: ProcessId): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const inDir = args.some((x) => x === dir || x.startsWith(`${dir}/`));
      if (inDir && (id === undefined || args.includes(id)) && isAlive(Number(name))) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** What a local reset driver does after killing a node: start its keeper again, as `trine up`
 *  does (detached, output to logs/<id>.out, pid file so `trine down` stops it). */
export function startKeeper(dir: string, agent: ProcessId): void {
  const out = openSync(paths.output(dir, agent), 'a');
  try {
    const command = trineCommand(['keeper', '--dir', dir, '--id', agent]);
    const keeper = spawn(command.file, command.args, { detached: true, stdio: ['ignore', out, out] });
    keeper.on('error', () => {}); // a keeper that cannot start shows as a node that never comes back
    if (keeper.pid !== undefined) writePidFile(dir, agent, keeper.pid);
    keeper.unref();
  } finally {
    closeSync(out);
  }
}

/** Everything down: `trine down`'s machinery, then anything left whose command line names the
 *  dir, then every task process seen that is still the same process; then the files. */
export async function tearDown(root: string, dir: string, seen: ReadonlyMap<number, string | null>): Promise<void> {
  await stopCluster(dir, runningProcesses(dir)).catch(() => null);
  for (const pid of processesNaming(dir)) killQuietly(pid);
  for (const [pid, start] of seen) if (isSameProcess(pid, start)) killQuietly(pid);
  if (process.env['TRINE_BENCH_KEEP'] === undefined) rmSync(root, { recursive: true, force: true });
  else console.error(`bench: cluster dir kept at ${dir}`);
}
