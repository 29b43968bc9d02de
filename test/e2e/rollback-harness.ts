// Shared by the rollback e2e tests (rollback-recovery, rollback-cm, rollback-sco): a real local
// cluster for linked tasks with `--recovery rollback` (GmpiCluster), and what those tests do with
// it: submit a task and wait until it runs, SIGKILL the process that holds a rank, wait for the
// rank's replacement and for the task's end, read the answer a process printed, and for a
// failure's message the group's view of the task with every log of it. Also the heat stencil's
// arguments and reference answer, which the tests compare a run with a crash against.
import { afterAll, beforeAll, expect } from 'vitest';
import { join } from 'node:path';
import type { ProcView, TaskView } from '../../src/core/status.ts';
import { heatReference, type HeatParams } from '../../examples/heat/heat-core.ts';
import { heatSummary } from '../../examples/heat/heat-state.ts';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { oneAtATime, trine } from './helpers.ts';

/** How often the tests ask the group where a task stands (GmpiCluster.task: the view `trine ps`
 *  shows, read by an operator client the test keeps open). */
export const POLL_MS = 250;
/** Submissions a run makes when the cluster, not the code under test, failed its start (as
 *  GmpiCluster.start does): a node declared lost or a spawn failed on this loaded machine. */
const START_TRIES = 3;
/** Time from the task's running to a kill "after the first checkpoint": the checkpoint interval
 *  below (500 ms) several times over, so each rank has passed snapshot() past its interval. */
export const AFTER_CHECKPOINT_MS = 2_500;
export const INTERVAL_MS = 500;
/** An interval longer than any run here: no rank ever checkpoints. */
export const NEVER_MS = 86_400_000;
/** VPIDs whose log files vpidsOf() looks for: more than any task here has, replacements included. */
const MAX_VPIDS = 64;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Wait until `ms` after `at` (a fault is injected that long into a run). */
export const until = (at: number, ms: number): Promise<void> => sleep(Math.max(0, at + ms - Date.now()));

/** The running process that holds `rank` now. */
const holder = (t: TaskView, rank: number): ProcView | undefined => t.procs.find((p) => p.rank === rank && p.state === 'running' && p.pid !== null);

/** How long a test file's waits may take on this loaded 2-core machine. */
export type RollbackLimits = {
  /** A run, from submit to its end. */
  runMs: number;
  /** A killed rank's replacement, until it runs. */
  replaceMs: number;
};

/** How long a run may take on this loaded 2-core machine, from submit to its end. */
export const RUN_MS = 60_000;
/** How long a killed rank's replacement may take to run. */
export const REPLACE_MS = 30_000;

/** The test file's one cluster, with `flags` more `trine up` options: up before its first test
 *  (`prefix` names its directory), down after its last. */
export function clusterForFile(prefix: string, flags: readonly string[], limits: RollbackLimits = { runMs: RUN_MS, replaceMs: REPLACE_MS }): RollbackCluster {
  const rollback = new RollbackCluster(limits);
  beforeAll(async () => {
    await rollback.up(prefix, flags);
  }, 120_000);
  afterAll(async () => {
    await rollback.down();
  }, 60_000);
  return rollback;
}

/** A cluster for rollback tasks; clusterForFile() brings it up and down. */
export class RollbackCluster {
  private gmpi: GmpiCluster | undefined;
  /** Every task submitted, for GMPI_DUMP. */
  private readonly tasks: string[] = [];
  /** Tests that run concurrently (describe.concurrent) start their tasks one at a time: a start
   *  loads every rank under tsx, ~0.5 s of CPU each, and two at once would hold both cores long
   *  enough to starve the replicas' heartbeats. */
  private readonly starts = oneAtATime();

  constructor(private readonly limits: RollbackLimits) {}

  /** `trine up` in a new directory named after `prefix`; `flags`: more `trine up` options. */
  async up(prefix: string, flags: readonly string[]): Promise<void> {
    this.gmpi = await GmpiCluster.up(prefix, flags);
  }

  /** GMPI_DUMP=1 prints every task's logs first; then every daemon and task process goes, and
   *  the directory. Nothing to do when up() failed. */
  async down(): Promise<void> {
    if (this.gmpi === undefined) return;
    if (process.env.GMPI_DUMP) for (const id of this.tasks) console.log(`${await this.gmpi.describe(id)}\n${this.dumpAll(id)}`);
    await this.gmpi.down();
  }

  get cluster(): GmpiCluster {
    if (this.gmpi === undefined) throw new Error('no cluster: RollbackCluster.up() runs in beforeAll');
    return this.gmpi;
  }

  /** Every VPID a task has had (replacements included), from its log files. */
  vpidsOf(id: string): number[] {
    const out: number[] = [];
    for (let v = 0; v < MAX_VPIDS; v++) if (this.cluster.lines(id, v).length > 0 || this.cluster.lines(id, v, 'err').length > 0) out.push(v);
    return out;
  }

  private dumpAll(id: string): string {
    return this.cluster.dump(id, this.vpidsOf(id));
  }

  /** The task as the group sees it (`trine ps ID`: its processes, ranks and the group's events)
   *  and every log of it, for a failure's message. */
  async diagnose(id: string): Promise<string> {
    const ps = await trine(['ps', id, '--dir', this.cluster.dir]);
    return `${await this.cluster.describe(id)}\n${ps.code === 0 ? ps.stdout : ps.stderr}\n${this.dumpAll(id)}`;
  }

  /** Submit `app` as a linked rollback task of `n` ranks; its id. */
  async submit(app: string, n: number, flags: readonly string[], args: readonly string[]): Promise<string> {
    const s = await trine(['submit', '--dir', this.cluster.dir, '--linked', '--recovery', 'rollback', ...flags, '-n', String(n), '--cwd', REPO, '--',
      process.execPath, '--import', 'tsx', join(REPO, app), ...args]);
    if (s.code !== 0) throw new Error(`trine submit failed: ${s.stderr}`);
    const id = s.stdout.trim();
    this.tasks.push(id);
    return id;
  }

  /** submit(), then wait until every rank runs; a start the cluster failed is submitted again.
   *  One start at a time (see `starts`). */
  start(app: string, n: number, flags: readonly string[], args: readonly string[]): Promise<{ id: string; at: number }> {
    return this.starts(() => this.startNow(app, n, flags, args));
  }

  private async startNow(app: string, n: number, flags: readonly string[], args: readonly string[]): Promise<{ id: string; at: number }> {
    const failures: string[] = [];
    for (let attempt = 1; attempt <= START_TRIES; attempt++) {
      const id = await this.submit(app, n, flags, args);
      for (;;) {
        const t = await this.cluster.task(id);
        if (t.state === 'running') return { id, at: Date.now() };
        if (t.outcome !== null) break;
        await sleep(POLL_MS);
      }
      failures.push(await this.diagnose(id));
    }
    throw new Error(`the task never started:\n${failures.join('\n')}`);
  }

  /** SIGKILL the process that holds `rank` (kill -9, as a user would); its VPID. */
  async killRank(id: string, rank: number): Promise<number> {
    const p = holder(await this.cluster.task(id), rank);
    if (p === undefined) throw new Error(`no running holder of rank ${rank}:\n${await this.diagnose(id)}`);
    process.kill(p.pid as number, 'SIGKILL');
    return p.vpid;
  }

  /** Fail `node` with `trine inject kill-node` (the cluster restarts it within seconds). */
  async killNode(node: string): Promise<void> {
    const r = await trine(['inject', 'kill-node', node, '--dir', this.cluster.dir]);
    expect(r.code, r.stderr).toBe(0);
  }

  /** Wait until `trine ps` shows a VPID other than `dead` running as `rank`'s holder: the
   *  replacement (PROTOCOL §11.2). A short run may end between two looks (a read can take
   *  seconds on this loaded machine): then the holder the ended task shows. */
  async replacementOf(id: string, rank: number, dead: number): Promise<ProcView> {
    const end = Date.now() + this.limits.replaceMs;
    for (;;) {
      const t = await this.cluster.task(id);
      const p = t.outcome === null ? holder(t, rank) : t.procs.find((q) => q.rank === rank);
      if (p !== undefined && p.vpid !== dead) return p;
      if (t.outcome !== null || Date.now() > end) throw new Error(`rank ${rank} was not replaced:\n${await this.diagnose(id)}`);
      await sleep(POLL_MS);
    }
  }

  /** Wait for the task's end. `failFast`: a stderr line of any process that ends the wait at once
   *  (the task is then still running: the caller kills it). */
  async end(id: string, failFast: RegExp | null = null): Promise<TaskView> {
    const deadline = Date.now() + this.limits.runMs;
    for (;;) {
      const t = await this.cluster.task(id);
      if (t.outcome !== null) return t;
      if (failFast !== null) {
        const hit = this.vpidsOf(id).flatMap((v) => this.cluster.lines(id, v, 'err').map((l) => `${id}/${v}: ${l}`)).find((l) => failFast.test(l));
        if (hit !== undefined) throw new Error(`a process failed: ${hit}\n${await this.diagnose(id)}`);
      }
      if (Date.now() > deadline) throw new Error(`the task did not end within ${this.limits.runMs} ms:\n${await this.diagnose(id)}`);
      await sleep(POLL_MS);
    }
  }

  /** Kill the task if it still runs (a task left running would take the next test's slots). */
  async stop(id: string): Promise<void> {
    const t = await this.cluster.task(id).catch(() => null);
    if (t !== null && t.outcome === null) await trine(['kill', id, '--dir', this.cluster.dir]);
  }

  /** The first line matching `re` that any of the task's processes printed (rank 0 prints the
   *  answer; rank 0 may be a replacement), parsed. */
  answerOf(id: string, re: RegExp): Record<string, unknown> | undefined {
    for (const v of this.vpidsOf(id)) {
      const line = this.cluster.lines(id, v).find((l) => re.test(l));
      if (line !== undefined) return JSON.parse(line) as Record<string, unknown>;
    }
    return undefined;
  }

  /** The first stderr line of `vpid` matching `re`, once there is one. */
  async errLine(id: string, vpid: number, re: RegExp, ms = this.limits.replaceMs): Promise<string> {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = this.cluster.lines(id, vpid, 'err').find((l) => re.test(l));
      if (hit !== undefined) return hit;
      if (Date.now() > deadline) throw new Error(`no ${re} on ${id}/${vpid}'s stderr:\n${await this.diagnose(id)}`);
      await sleep(POLL_MS);
    }
  }

  /** Whether rank 0's own check against the reference (heat --verify) passed, whichever VPID
   *  held rank 0 at the end. */
  heatVerified(id: string): boolean {
    return this.vpidsOf(id).some((v) => this.cluster.lines(id, v).includes('heat: verify OK'));
  }

  /** A normal end with the reference's answer, rank 0's own check (--verify) agreeing. */
  async expectHeatAnswer(id: string, t: TaskView, p: HeatParams): Promise<void> {
    const why = await this.diagnose(id);
    expect(t.outcome, why).toBe('normal');
    expect(this.answerOf(id, HEAT_LINE), why).toEqual(heatExpected(p));
    expect(this.heatVerified(id), why).toBe(true);
  }
}

/** After the end: `killed` lost its rank, `replacement` holds it and ended normally, and no
 *  other rank was rolled back (radic-hmpl A.6: only the failed processes restart). */
export function expectRankMoved(t: TaskView, rank: number, killed: number, replacement: number, ranks: number): void {
  const by = (v: number) => t.procs.find((p) => p.vpid === v);
  expect(by(killed)).toMatchObject({ state: 'terminatedAbnormally', rank: null });
  expect(by(replacement)).toMatchObject({ state: 'terminatedNormally', rank });
  for (let r = 0; r < ranks; r++) {
    const holders = t.procs.filter((p) => p.rank === r);
    expect(holders.length, `rank ${r}'s holders`).toBe(1);
  }
}

// ---- the applications ------------------------------------------------------------------------

export const HEAT: HeatParams = { rows: 24, cols: 8192, steps: 60 };
export const heatArgs = (p: HeatParams, paceMs: number): string[] =>
  ['--rows', String(p.rows), '--cols', String(p.cols), '--steps', String(p.steps), '--pace-ms', String(paceMs), '--verify'];
export const HEAT_LINE = /^\{"app":"heat"/;
/** heatReference's summary of `p`, computed once for each `p`. */
export const heatExpected = (() => {
  const memo = new Map<string, ReturnType<typeof heatSummary>>();
  return (p: HeatParams) => {
    const k = JSON.stringify(p);
    if (!memo.has(k)) {
      const ref = heatReference(p);
      memo.set(k, heatSummary(p, ref.grid, ref.residuals));
    }
    return memo.get(k) as ReturnType<typeof heatSummary>;
  };
})();

export const NQ_LINE = /^\{"app":"nqueens-rollback"/;
