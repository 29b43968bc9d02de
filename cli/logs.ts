// `trine logs TASK [--vpid V] [--out | --err] [--follow]`: prints what a task's processes wrote,
// each line prefixed `[t3/0] ` (stdout) or `[t3/0 err] ` (stderr). On a one-host cluster it reads
// `<dir>/logs/tasks/<task>/<vpid>.out` and `.err` (the spawner's files, shared by every node). On a
// cluster of several hosts (cluster.json's agents listen, src/io/deploy.ts) each process's output
// is on the host that ran it, and is read from that node's agent (PROTOCOL §7.1,
// cli/logs-remote.ts). Both sources feed the same line reader (cli/log-lines.ts). --follow keeps
// printing what is appended until the task has finished and the files are drained
// (docs/OPERATIONS.md §1.1). With --json every line is a `trine.log/1` object (cli/log-lines.ts).
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskView } from '../src/core/status.ts';
import { loadCluster, paths, type Cluster } from '../src/io/cluster-dir.ts';
import { processLogPaths } from '../src/io/spawner.ts';
import { CliError, emitJsonError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { LineReader, LOG_READ_BYTES, type Stream } from './log-lines.ts';
import { RemoteLogSet } from './logs-remote.ts';
import { readClusterView, VIEW_TIMEOUT_MS, ViewPoller } from './op-client.ts';
import { agentListeners, OperatorClient } from './status-client.ts';
import { parseTaskId } from './task-args.ts';
import { isFinished } from './task-report.ts';

export { LOG_READ_BYTES };

/** --follow looks for appended output this often. */
export const FOLLOW_POLL_MS = 100;
/** --follow asks the replicas whether the task has finished this often. */
export const FOLLOW_VIEW_POLL_MS = 500;

export type LogsOptions = {
  dir?: string | undefined;
  task: string;
  vpid?: number | undefined;
  out?: boolean | undefined;
  err?: boolean | undefined;
  follow?: boolean | undefined;
  timeoutMs?: number | undefined;
  /** One `trine.log/1` JSON object per line instead of prefixed text. */
  json?: boolean | undefined;
};

/** One output file on this host's disk, read from where the last read stopped. */
class LogFile {
  private readonly reader: LineReader;

  constructor(
    readonly path: string,
    readonly task: string,
    readonly vpid: number,
    readonly stream: Stream,
    json: boolean,
  ) {
    this.reader = new LineReader(task, vpid, stream, json);
  }

  /** Complete lines appended since the last call (all of them up to EOF), prefixed. */
  readLines(): string[] {
    if (!existsSync(this.path)) return [];
    const out: string[] = [];
    const fd = openSync(this.path, 'r');
    try {
      const size = fstatSync(fd).size;
      this.reader.resize(size);
      while (this.reader.offset < size) {
        const chunk = Buffer.alloc(Math.min(LOG_READ_BYTES, size - this.reader.offset));
        const n = readSync(fd, chunk, 0, chunk.length, this.reader.offset);
        if (n === 0) break;
        out.push(...this.reader.take(chunk.subarray(0, n)));
      }
    } finally {
      closeSync(fd);
    }
    return out;
  }

  /** A last line without a newline, once the file is complete. */
  flush(): string[] {
    return this.reader.flush();
  }
}

/** Write respecting backpressure, so a large log does not pile up in memory. */
function write(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once('drain', () => resolve());
  });
}

/** VPIDs with an output file in the task's log dir. */
function vpidsOnDisk(taskDir: string): number[] {
  if (!existsSync(taskDir)) return [];
  const vpids = new Set<number>();
  for (const f of readdirSync(taskDir)) {
    const m = /^(0|[1-9][0-9]*)\.(out|err)$/.exec(f);
    if (m !== null) vpids.add(Number(m[1]));
  }
  return [...vpids];
}

/** The files to print, in order: by VPID, stdout before stderr. */
class LogSet {
  private readonly files = new Map<string, LogFile>();

  constructor(
    private readonly logDir: string,
    private readonly task: string,
    private readonly streams: readonly Stream[],
    private readonly onlyVpid: number | undefined,
    private readonly json: boolean,
  ) {}

  /** Add the files of these VPIDs (those of --vpid only, if given). */
  add(vpids: Iterable<number>): void {
    for (const vpid of vpids) {
      if (this.onlyVpid !== undefined && vpid !== this.onlyVpid) continue;
      const p = processLogPaths(this.logDir, this.task, vpid);
      for (const s of this.streams) {
        const path = s === 'out' ? p.out : p.err;
        if (!this.files.has(path)) this.files.set(path, new LogFile(path, this.task, vpid, s, this.json));
      }
    }
  }

  private ordered(): LogFile[] {
    const rank = (f: LogFile) => f.vpid * 2 + (f.stream === 'out' ? 0 : 1);
    return [...this.files.values()].sort((a, b) => rank(a) - rank(b));
  }

  async print(final: boolean): Promise<void> {
    for (const f of this.ordered()) {
      const lines = [...f.readLines(), ...(final ? f.flush() : [])];
      if (lines.length > 0) await write(`${lines.join('\n')}\n`);
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function checkVpid(task: TaskView, vpid: number | undefined): void {
  if (vpid !== undefined && (vpid >= task.size || !Number.isInteger(vpid))) {
    throw new CliError(`${task.id} has no process ${vpid}: its VPIDs are 0 to ${task.size - 1}`, EXIT_FAILED, 'NO_PROCESS');
  }
}

export async function logs(opts: LogsOptions): Promise<number> {
  const task = parseTaskId(opts.task);
  const streams: Stream[] = opts.out === true || opts.err === true ? [...(opts.out === true ? ['out' as const] : []), ...(opts.err === true ? ['err' as const] : [])] : ['out', 'err'];
  const cluster = loadCluster(opts.dir);
  const timeoutMs = opts.timeoutMs ?? VIEW_TIMEOUT_MS;
  // Several hosts: this dir holds at most the output of the processes of its own host (an
  // operator host may run an agent too), so every process's output comes from its agent.
  if (Object.keys(agentListeners(cluster)).length > 0) return logsFromAgents(opts, cluster, task, streams, timeoutMs);
  const logDir = paths.taskLogs(cluster.dir);
  const taskDir = join(logDir, task);
  const set = new LogSet(logDir, task, streams, opts.vpid, opts.json === true);

  if (opts.follow !== true) {
    const onDisk = vpidsOnDisk(taskDir).filter((v) => opts.vpid === undefined || v === opts.vpid);
    if (onDisk.length > 0) {
      set.add(onDisk);
      await set.print(true);
      return EXIT_OK;
    }
    // Nothing written: a task that has not started yet, or no such task? Ask the replicas.
    const client = await OperatorClient.open(cluster);
    let known: TaskView | undefined;
    try {
      const pick = await readClusterView(client, timeoutMs).catch((e: unknown) => {
        if (!(e instanceof CliError)) throw e;
        throw new CliError(`no output of ${task} in ${taskDir}, and the replicas could not say whether it exists (${e.message})`, EXIT_FAILED);
      });
      known = pick.view.tasks.find((t) => t.id === task);
    } finally {
      await client.close();
    }
    if (known === undefined) throw new CliError(`no task ${task}: see \`trine ps\``, EXIT_FAILED, 'NO_TASK');
    checkVpid(known, opts.vpid);
    process.stderr.write(`trine: ${task}${opts.vpid === undefined ? '' : `/${opts.vpid}`} has no output yet (${known.state})\n`);
    return EXIT_OK;
  }

  const client = await OperatorClient.open(cluster);
  try {
    const poller = new ViewPoller(client, timeoutMs, (w) => process.stderr.write(`trine: ${w}\n`), task);
    let nextViewMs = 0;
    for (;;) {
      set.add(vpidsOnDisk(taskDir));
      if (Date.now() >= nextViewMs) {
        nextViewMs = Date.now() + FOLLOW_VIEW_POLL_MS;
        const pick = await poller.next();
        if (pick !== null) {
          const t = pick.view.tasks.find((x) => x.id === task);
          if (t === undefined && !existsSync(taskDir)) throw new CliError(`no task ${task}: see \`trine ps\``, EXIT_FAILED, 'NO_TASK');
          if (t !== undefined) {
            checkVpid(t, opts.vpid);
            set.add(t.procs.map((p) => p.vpid));
          }
          // Finished (or forgotten after finishing): its processes are gone, so what is in the
          // files now is all there will be.
          if (t === undefined || isFinished(t)) {
            set.add(vpidsOnDisk(taskDir));
            await set.print(true);
            return EXIT_OK;
          }
        }
      }
      await set.print(false);
      await sleep(FOLLOW_POLL_MS);
    }
  } finally {
    await client.close();
  }
}

/** A cluster of several hosts: each process's output from the agent of the node the cluster view
 *  says it ran on (PROTOCOL §7.1), printed as the local files are. Exits non-zero, saying what to
 *  do, when some of it could not be read. */
async function logsFromAgents(opts: LogsOptions, cluster: Cluster, task: string, streams: Stream[], timeoutMs: number): Promise<number> {
  const client = await OperatorClient.open(cluster);
  try {
    const set = new RemoteLogSet({
      client, cluster, task, streams, onlyVpid: opts.vpid, timeoutMs, write, warn: (line) => process.stderr.write(`trine: ${line}\n`), json: opts.json === true,
    });
    if (opts.follow !== true) {
      const pick = await readClusterView(client, timeoutMs).catch((e: unknown) => {
        if (!(e instanceof CliError)) throw e;
        throw new CliError(`the replicas could not say where the processes of ${task} ran, so its output cannot be read (${e.message})`, EXIT_FAILED);
      });
      const known = pick.view.tasks.find((t) => t.id === task);
      if (known === undefined) throw new CliError(`no task ${task}: see \`trine ps\``, EXIT_FAILED, 'NO_TASK');
      checkVpid(known, opts.vpid);
      set.add(known.procs);
      await set.printAll();
      if (!set.foundOutput && set.unreadable().length === 0) {
        process.stderr.write(`trine: ${task}${opts.vpid === undefined ? '' : `/${opts.vpid}`} has no output yet (${known.state})\n`);
      }
      return remoteOutcome(set, task, opts.vpid);
    }
    const poller = new ViewPoller(client, timeoutMs, (w) => process.stderr.write(`trine: ${w}\n`), task);
    let nextViewMs = 0;
    let seen = false;
    for (;;) {
      if (Date.now() >= nextViewMs) {
        nextViewMs = Date.now() + FOLLOW_VIEW_POLL_MS;
        const pick = await poller.next();
        if (pick !== null) {
          const t = pick.view.tasks.find((x) => x.id === task);
          if (t === undefined && !seen) throw new CliError(`no task ${task}: see \`trine ps\``, EXIT_FAILED, 'NO_TASK');
          if (t !== undefined) {
            seen = true;
            checkVpid(t, opts.vpid);
            set.add(t.procs);
          }
          // Finished (or forgotten after finishing): what the agents hold now is all there will be.
          if (t === undefined || isFinished(t)) {
            await set.print(true);
            return remoteOutcome(set, task, opts.vpid);
          }
        }
      }
      await set.print(false);
      await sleep(FOLLOW_POLL_MS);
    }
  } finally {
    await client.close();
  }
}

/** EXIT_OK, or EXIT_FAILED with what could not be read and what to do. */
function remoteOutcome(set: RemoteLogSet, task: string, vpid: number | undefined): number {
  const missed = set.unreadable();
  if (missed.length === 0) return EXIT_OK;
  const message = `the output of ${missed.join(', ')} could not be read: check the nodes (\`trine nodes\`), and once they answer run ` +
    `\`trine logs ${task}${vpid === undefined ? '' : ` --vpid ${vpid}`}\` again`;
  process.stderr.write(`trine: ${message}\n`);
  emitJsonError('LOGS_UNREADABLE', message, EXIT_FAILED);
  return EXIT_FAILED;
}
