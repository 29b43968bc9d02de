// The application's view of its dynamic group of recommended processes (docs/PROTOCOL.md
// §12.4, §12.5; spec 2.2.6, 2.3): the current group and its changes, the round barrier that
// gives every member the same group for the next computing round, a communicator of that
// round's members, and the tester thread that runs the tests underneath (tester-worker.ts).
//
// The barrier goes through the manager group: each process says it arrived at round r
// (`dgrp.arrive`), the group releases r once every member has, and the release is one ordered
// view that every process receives. Whatever a process sees first with `released ≥ r` is the
// same view everywhere, so the members of round r + 1 agree without talking to each other, and
// a slow process that left is not waited for (spec 2.2.6: "as processes arrive at a barrier,
// they check the DGRP composition in order to reassess tasks").
import type { Worker } from 'node:worker_threads';
import { recommendedOf, type DgrpOptions, type DgrpView } from '../../core/wire/dgrp.ts';
import type { Link } from '../link/link.ts';
import { threads } from '../link/threads.ts';
import type { TesterStats } from './tester.ts';
import type { TesterWorkerData } from './tester-worker.ts';

/** Round communicators' ids: far above the epochs recoverComm uses for its own (PROTOCOL §9.5). */
export const DGRP_COMM_BASE = 0x40000000;
/** How long the tester thread may take to start (it registers a TypeScript loader from sources). */
export const TESTER_START_TIMEOUT_MS = 15_000;

/** The group as this process knows it: members by world rank, ascending. */
export type DgrpSnapshot = {
  readonly view: number;
  /** The last round the group released (0: none yet). */
  readonly released: number;
  readonly members: readonly number[];
  /** This process is a member. */
  readonly recommended: boolean;
  /** Per world rank of every live process, its event counter (odd: outside, spec 2.2.3). */
  readonly counters: ReadonlyMap<number, number>;
};
/** What a barrier returns: its number (barriers released so far, this one included) and the
 *  members of the round it starts, the same on every process. */
export type DgrpRound<C> = DgrpSnapshot & { readonly round: number; readonly comm: C | null };

export type DgrpGroupParts<C> = {
  link: Link;
  self: number;
  options: DgrpOptions;
  host: string;
  port: number;
  /** World rank of a VPID (−1 if not in the world). */
  rankOf: (vpid: number) => number;
  /** A communicator of these VPIDs with this id (Gmpi's, bound to its flags and errors); null
   *  where a round may have none (a rollback task's messages go through its rank channels). */
  commOf: ((id: number, vpids: readonly number[]) => C) | null;
  discardComm: (id: number) => void;
  testModule: string | null;
};

export class DgrpGroup<C> {
  private last: DgrpView | null = null;
  private readonly listeners = new Set<(s: DgrpSnapshot) => void>();
  private readonly waiting: { round: number; resolve: (v: DgrpView) => void; reject: (e: Error) => void }[] = [];
  private commId: number | null = null;
  private closed = false;

  private constructor(private readonly parts: DgrpGroupParts<C>, private readonly worker: Worker) {
    parts.link.onDgrpView((v) => this.onView(v));
  }

  /** Start the tester thread and follow the group's views. Fails if the thread cannot bind its
   *  UDP port (the G-MPI listener's number) or load its test: run untested, this process could
   *  never be told slow, nor tell. */
  static async open<C>(parts: DgrpGroupParts<C>): Promise<DgrpGroup<C>> {
    const { MessageChannel, Worker } = threads();
    const { port1, port2 } = new MessageChannel();
    parts.link.attachTester(port1);
    const data: TesterWorkerData = {
      self: parts.self, key: parts.link.taskKey, options: parts.options, host: parts.host, port: parts.port, link: port2, testModule: parts.testModule,
    };
    const worker = new Worker(new URL('./tester-boot.mjs', import.meta.url), { workerData: data, transferList: [port2] });
    worker.unref();
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the DGRP tester thread did not start within ${TESTER_START_TIMEOUT_MS} ms`)), TESTER_START_TIMEOUT_MS);
        const settle = (e: Error | null) => {
          clearTimeout(timer);
          if (e === null) resolve();
          else reject(e);
        };
        worker.once('error', (e) => settle(e));
        worker.on('message', (m: { type: string; detail?: string }) => {
          if (m.type === 'ready') settle(null);
          if (m.type === 'failed') settle(new Error(`the DGRP tester thread failed: ${m.detail ?? ''}`));
        });
      });
    } catch (e) {
      // Nothing of it may outlive the failure: a tester that starts late would test on its own.
      await worker.terminate();
      port1.close();
      throw e;
    }
    return new DgrpGroup(parts, worker);
  }

  /** The group now (the last view received). */
  get current(): DgrpSnapshot {
    return this.snapshot(this.last ?? { view: 0, released: 0, entries: [] });
  }

  /** Call `listener` at every new view; returns the function that stops it. */
  onChange(listener: (s: DgrpSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The end of a computing round (spec 2.2.6): wait until the group releases the next round,
   *  then return it with its members, the same on every process, and a communicator of them
   *  (null for a process outside the group, which should skip the round's work and call
   *  barrier() again). */
  async barrier(): Promise<DgrpRound<C>> {
    if (this.closed) throw new Error('the DGRP is closed (G-MPI finalized)');
    const round = (this.last?.released ?? 0) + 1;
    const released = new Promise<DgrpView>((resolve, reject) => this.waiting.push({ round, resolve, reject }));
    this.parts.link.sendOwn({ type: 'dgrp.arrive', round });
    const v = await released;
    const s = this.snapshot(v);
    if (this.commId !== null) this.parts.discardComm(this.commId);
    this.commId = null;
    let comm: C | null = null;
    if (s.recommended && this.parts.commOf !== null) {
      this.commId = DGRP_COMM_BASE + v.released;
      comm = this.parts.commOf(this.commId, recommendedOf(v.entries));
    }
    return { ...s, round: v.released, comm };
  }

  /** The tester's counts: tests run, failed, abstained, reports, refused datagrams. */
  testerStats(): Promise<TesterStats> {
    return new Promise((resolve) => {
      const on = (m: { type: string; stats?: TesterStats }) => {
        if (m.type !== 'stats' || m.stats === undefined) return;
        this.worker.off('message', on);
        resolve(m.stats);
      };
      this.worker.on('message', on);
      this.worker.postMessage({ type: 'stats' });
    });
  }

  /** Stop the tester (G-MPI's finalize). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.parts.link.onDgrpView(null);
    for (const w of this.waiting.splice(0)) w.reject(new Error('the DGRP is closed (G-MPI finalized)'));
    this.worker.postMessage({ type: 'stop' });
    await this.worker.terminate();
  }

  private onView(v: DgrpView): void {
    this.last = v;
    for (let i = 0; i < this.waiting.length; ) {
      const w = this.waiting[i];
      if (w !== undefined && v.released >= w.round) {
        this.waiting.splice(i, 1);
        w.resolve(v);
      } else i++;
    }
    const s = this.snapshot(v);
    for (const l of [...this.listeners]) l(s);
  }

  private snapshot(v: DgrpView): DgrpSnapshot {
    const counters = new Map<number, number>();
    for (const e of v.entries) {
      const r = this.parts.rankOf(e.vpid);
      if (r >= 0) counters.set(r, e.counter);
    }
    const vpids = recommendedOf(v.entries);
    const members = vpids.map((vpid) => this.parts.rankOf(vpid)).filter((r) => r >= 0).sort((a, b) => a - b);
    return { view: v.view, released: v.released, members, recommended: vpids.includes(this.parts.self), counters };
  }
}

/** Deal `units` pieces of work to `members` (ranks) in turn: member i of k takes units i, i+k, …
 *  The same on every member given the same round (the remapping helpers of spec 2.3 item 3;
 *  hypercube.ts has the paper's own for hypercube applications). */
export function dealWork(units: number, members: readonly number[]): Map<number, number[]> {
  const out = new Map<number, number[]>(members.map((m) => [m, []]));
  if (members.length === 0) return out;
  for (let u = 0; u < units; u++) out.get(members[u % members.length] as number)?.push(u);
  return out;
}
