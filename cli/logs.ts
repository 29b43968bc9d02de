// `trine logs TASK [--vpid V] [--out | --err] [--follow]`: prints what a task's processes wrote,
// read from `<dir>/logs/tasks/<task>/<vpid>.out` and `.err` (the spawner's files, shared by every
// node of a local cluster), each line prefixed `[t3/0] ` (stdout) or `[t3/0 err] ` (stderr).
// --follow keeps printing what is appended until the task has finished and the files are
// drained (docs/OPERATIONS.md §1.1).
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskView } from '../src/core/status.ts';
import { loadCluster, paths } from '../src/io/cluster-dir.ts';
import { processLogPaths } from '../src/io/spawner.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { readClusterView, VIEW_TIMEOUT_MS, ViewPoller } from './op-client.ts';
import { OperatorClient } from './status-client.ts';
import { parseTaskId } from './task-args.ts';
import { isFinished } from './task-report.ts';

/** Bytes read from one file per read: bounds memory whatever a process writes. */
export const LOG_READ_BYTES = 1024 * 1024;
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
};

type Stream = 'out' | 'err';

/** One output file, read from where the last read stopped; a partial last line waits for its end. */
class LogFile {
  private offset = 0;
  private partial: Buffer = Buffer.alloc(0);

  private readonly prefix: string;

  constructor(
    readonly path: string,
    readonly task: string,
    readonly vpid: number,
    readonly stream: Stream,
  ) {
    this.prefix = `[${task}/${vpid}${stream === 'err' ? ' err' : ''}] `;
  }

  /** Complete lines appended since the last call (all of them up to EOF), prefixed. */
  readLines(): string[] {
    if (!existsSync(this.path)) return [];
    const out: string[] = [];
    const fd = openSync(this.path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size < this.offset) this.offset = 0; // replaced: start over
      while (this.offset < size) {
        const chunk = Buffer.alloc(Math.min(LOG_READ_BYTES, size - this.offset));
        const n = readSync(fd, chunk, 0, chunk.length, this.offset);
        if (n === 0) break;
        this.offset += n;
        let data = Buffer.concat([this.partial, chunk.subarray(0, n)]);
        let nl = data.indexOf(0x0a);
        while (nl >= 0) {
          out.push(`${this.prefix}${data.subarray(0, nl).toString('utf8')}`);
          data = data.subarray(nl + 1);
          nl = data.indexOf(0x0a);
        }
        // A line longer than the read size is printed in pieces rather than held forever.
        if (data.length >= LOG_READ_BYTES) {
          out.push(`${this.prefix}${data.toString('utf8')}`);
          data = Buffer.alloc(0);
        }
        this.partial = data;
      }
    } finally {
      closeSync(fd);
    }
    return out;
  }

  /** A last line without a newline, once the file is complete. */
  flush(): string[] {
    if (this.partial.length === 0) return [];
    const line = `${this.prefix}${this.partial.toString('utf8')}`;
    this.partial = Buffer.alloc(0);
    return [line];
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
  ) {}

  /** Add the files of these VPIDs (those of --vpid only, if given). */
  add(vpids: Iterable<number>): void {
    for (const vpid of vpids) {
      if (this.onlyVpid !== undefined && vpid !== this.onlyVpid) continue;
      const p = processLogPaths(this.logDir, this.task, vpid);
      for (const s of this.streams) {
        const path = s === 'out' ? p.out : p.err;
        if (!this.files.has(path)) this.files.set(path, new LogFile(path, this.task, vpid, s));
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
    throw new CliError(`${task.id} has no process ${vpid}: its VPIDs are 0 to ${task.size - 1}`, EXIT_FAILED);
  }
}

export async function logs(opts: LogsOptions): Promise<number> {
  const task = parseTaskId(opts.task);
  const streams: Stream[] = opts.out === true || opts.err === true ? [...(opts.out === true ? ['out' as const] : []), ...(opts.err === true ? ['err' as const] : [])] : ['out', 'err'];
  const cluster = loadCluster(opts.dir);
  const logDir = paths.taskLogs(cluster.dir);
  const taskDir = join(logDir, task);
  const set = new LogSet(logDir, task, streams, opts.vpid);
  const timeoutMs = opts.timeoutMs ?? VIEW_TIMEOUT_MS;

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
    if (known === undefined) throw new CliError(`no task ${task}: see \`trine ps\``, EXIT_FAILED);
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
          if (t === undefined && !existsSync(taskDir)) throw new CliError(`no task ${task}: see \`trine ps\``, EXIT_FAILED);
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
