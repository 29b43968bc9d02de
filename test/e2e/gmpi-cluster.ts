// A real local cluster for the e2e tests of linked tasks (signals, gmpi-recover, gmpi-api): `trine
// up`, linked task submission, the processes' stdout as the agents write it, and clean-up of
// every daemon and task process. Log files are read directly (a CLI per poll is slow) and
// polled: a child's stdout offers no event to await. The group's view of a task (task()) is
// read by the operator client `trine ps` uses (cli/status-client.ts, cli/op-client.ts), kept
// open in this process: a `trine` run costs ~0.2 s of CPU, and the tests poll every 250 ms.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClusterView, TaskView } from '../../src/core/status.ts';
import { loadCluster } from '../../src/io/cluster-dir.ts';
import { readClusterView, VIEW_TIMEOUT_MS } from '../../cli/op-client.ts';
import { OperatorClient } from '../../cli/status-client.ts';
import { oneAtATime, pidsIn, trine } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** How often a wait re-reads the processes' logs. */
const POLL_MS = 25;
/** How often start() asks the manager (a CLI run each) whether the task runs yet. */
const START_POLL_MS = 500;
/** Submissions start() makes before it gives up. */
const START_TRIES = 3;
/** How long task() asks again while no two replicas answer. */
const VIEW_RETRY_MS = 20_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class GmpiCluster {
  /** The operator client task() reads the view with; opened at the first read, again after a
   *  failed one. */
  private client: OperatorClient | null = null;
  /** A client makes one exchange at a time, and tests that run concurrently share this
   *  cluster: reads queue. */
  private readonly reads = oneAtATime();
  /** down() ran: a read still under way (a test that timed out) opens no client again. */
  private closed = false;

  private constructor(readonly root: string, readonly dir: string) {}

  /** `flags`: more `trine up` options (e.g. --allow-inject). */
  static async up(prefix: string, flags: readonly string[] = []): Promise<GmpiCluster> {
    const root = mkdtempSync(join(tmpdir(), prefix));
    const c = new GmpiCluster(root, join(root, 'cluster'));
    const up = await trine(['up', '--nodes', '4', ...flags, '--dir', c.dir], 90_000);
    if (up.code !== 0) {
      await c.down(); // `trine up` stopped what it started; this removes the directory as well
      throw new Error(`trine up failed: ${up.stderr}`);
    }
    return c;
  }

  /** `trine down`, then SIGKILL whatever is left (daemons and their process groups, task
   *  processes, which the agents started in their own groups), then the directory. */
  async down(taskPids: readonly number[] = []): Promise<void> {
    this.closed = true;
    await this.client?.close();
    this.client = null;
    const ps = await trine(['ps', '--dir', this.dir, '--json']);
    const running = ps.code === 0 ? (JSON.parse(ps.stdout) as ClusterView).tasks.flatMap((t) => t.procs.flatMap((p) => (p.pid === null ? [] : [p.pid]))) : [];
    await trine(['down', '--dir', this.dir]);
    killAll([...pidsIn(this.dir), ...taskPids, ...running]);
    if (process.env.GMPI_KEEP) console.log(`kept ${this.root}`);
    else rmSync(this.root, { recursive: true, force: true });
  }

  /** Submit a linked task of `n` processes running `app` (with `args`) under tsx; returns its id.
   *  `flags`: more `trine submit` options (e.g. --dgrp). */
  async submit(app: string, n: number, env: Record<string, string> = {}, args: readonly string[] = [], flags: readonly string[] = []): Promise<string> {
    const envArgs = Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
    const s = await trine(['submit', '--dir', this.dir, '--linked', '-n', String(n), '--cwd', REPO, ...envArgs, ...flags, '--', process.execPath, '--import', 'tsx', join(REPO, app), ...args]);
    if (s.code !== 0) throw new Error(`trine submit failed: ${s.stderr}`);
    return s.stdout.trim();
  }

  /** submit(), then wait until the task runs. A task the cluster failed to start (on this
   *  loaded 2-core machine the manager may declare a node lost during the start) is
   *  submitted again, up to START_TRIES times: that is the cluster's failure detector at work,
   *  not the code under test, which only runs once the task does. */
  async start(app: string, n: number, env: Record<string, string> = {}, args: readonly string[] = [], flags: readonly string[] = []): Promise<string> {
    const failures: string[] = [];
    for (let attempt = 1; attempt <= START_TRIES; attempt++) {
      const id = await this.submit(app, n, env, args, flags);
      for (;;) {
        const t = await this.task(id);
        if (t.state === 'running') return id;
        if (t.outcome !== null) break;
        await sleep(START_POLL_MS);
      }
      failures.push(await this.describe(id));
    }
    throw new Error(`the task never started:\n${failures.join('\n')}`);
  }

  /** The task as two replicas agree on it, as `trine ps --json` shows it. A read that finds no
   *  two replicas answering (the group is replacing one, or the host is loaded past the
   *  heartbeat bounds) is made again, on a new client, for up to VIEW_RETRY_MS, as an operator
   *  would run `trine ps` again. */
  task(id: string): Promise<TaskView> {
    return this.reads(() => this.readTask(id));
  }

  private async readTask(id: string): Promise<TaskView> {
    const end = Date.now() + VIEW_RETRY_MS;
    for (;;) {
      let view: ClusterView;
      if (this.closed) throw new Error('the cluster is down');
      try {
        this.client ??= await OperatorClient.open(loadCluster(this.dir));
        view = (await readClusterView(this.client, VIEW_TIMEOUT_MS)).view;
      } catch (e) {
        // A new client binds the operator's id anew; a `trine` command of a concurrent test that
        // waits for an ordered reply then gets it when it sends again (cli/status-client.ts).
        await this.client?.close();
        this.client = null;
        if (Date.now() >= end) throw new Error(`no view of the cluster for ${VIEW_RETRY_MS} ms: ${(e as Error).message}`);
        await sleep(START_POLL_MS);
        continue;
      }
      const t = view.tasks.find((x) => x.id === id);
      if (t === undefined) throw new Error(`no task ${id}`);
      return t;
    }
  }

  /** A process's stdout (or stderr) lines so far. */
  lines(id: string, vpid: number, stream: 'out' | 'err' = 'out'): string[] {
    const f = join(this.dir, 'logs', 'tasks', id, `${vpid}.${stream}`);
    return existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter((l) => l !== '') : [];
  }

  /** The first line of `vpid` matching `re`, once there is one. */
  async line(id: string, vpid: number, re: RegExp, ms = 30_000): Promise<string> {
    const end = Date.now() + ms;
    for (;;) {
      const hit = this.lines(id, vpid).find((l) => re.test(l));
      if (hit !== undefined) return hit;
      if (Date.now() > end) throw new Error(`timed out waiting for ${re} from ${id}/${vpid}; its log:\n${this.lines(id, vpid).join('\n')}`);
      await sleep(POLL_MS);
    }
  }

  /** line() for each of `vpids`. */
  async lineFromEach(id: string, vpids: readonly number[], re: RegExp, ms = 30_000): Promise<string[]> {
    return Promise.all(vpids.map((v) => this.line(id, v, re, ms)));
  }

  /** The task as the manager sees it, for a failure's diagnosis. */
  async describe(id: string): Promise<string> {
    try {
      const t = await this.task(id);
      return `task ${id}: state=${t.state} startAttempts=${t.startAttempts} failure=${t.failure} waitReason=${t.waitReason} outcome=${t.outcome} reason=${t.reason} procs=${t.procs.map((p) => `${p.vpid}:${p.state}${p.reason === null ? '' : `(${p.reason})`}`).join(',')}`;
    } catch (e) {
      return `task ${id}: ${(e as Error).message}`;
    }
  }

  /** Every log of the task, for a failing assertion's message. */
  dump(id: string, vpids: readonly number[]): string {
    return vpids.map((v) => {
      const err = this.lines(id, v, 'err');
      return `--- ${id}/${v}\n${this.lines(id, v).join('\n')}${err.length === 0 ? '' : `\n--- ${id}/${v} stderr\n${err.join('\n')}`}`;
    }).join('\n');
  }
}
