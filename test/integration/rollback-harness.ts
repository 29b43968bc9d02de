// Shared by the rollback integration tests (rollback-channels, rollback-cm, rollback-sco): the
// ranks' state and the program they run with no recovery code, a rank's store in memory as its
// protector keeps it, and the P2P meshes the runs open, closed after each test without a bye.
// Each test file assembles its ranks itself (rank channels, channel memories, checkpoint groups).
import { createHash } from 'node:crypto';
import type { CommLayer } from '../../src/app/gmpi/comm.ts';
import * as coll from '../../src/app/gmpi/collectives.ts';
import { ANY_SOURCE } from '../../src/app/gmpi/matching.ts';
import { P2P } from '../../src/app/gmpi/p2p.ts';
import type { Mark, RecoverableStore, RollbackRuntime, StoreContents, StoredCheckpoint } from '../../src/app/rollback/runtime.ts';
import { TEST_TASK_KEY } from './gmpi-test-tools.ts';

/** How a test crashes a rank: its program throws this at the hook's phase. */
export class Crash extends Error {}

export type State = { step: number; x: number[]; hist: number[]; order: number[] };

export const STEPS = 12;

export function initialState(rank: number, length: number): State {
  return { step: 0, x: Array.from({ length }, (_, i) => (rank + 1) * 0.25 + i / length), hist: [], order: [] };
}

export const hashOf = (xs: number[]): string => createHash('sha256').update(JSON.stringify(xs)).digest('hex').slice(0, 16);

/** The group's record of each rank's checkpoints (PROTOCOL §11.4), as the marks reach it. */
export type Marks = Map<number, Mark[]>;

/** A rank's store as the protector keeps it: the last two checkpoints and the log since the
 *  older one (PROTOCOL §11.4). */
export class MemStore implements RecoverableStore {
  log = new Map<number, Uint8Array>();
  checkpoints: StoredCheckpoint[] = [];
  appends = 0;
  async append(pos: number, blob: Uint8Array): Promise<void> {
    await Promise.resolve();
    this.log.set(pos, blob.slice());
    this.appends++;
  }
  async putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    await Promise.resolve();
    this.checkpoints = [...this.checkpoints, { id, logPos, bytes: bytes.slice() }].slice(-2);
    const keepFrom = this.checkpoints[0]!.logPos;
    for (const pos of [...this.log.keys()]) if (pos <= keepFrom) this.log.delete(pos);
  }
  async fetch(): Promise<StoreContents> {
    await Promise.resolve();
    const log = [...this.log].map(([pos, blob]) => ({ pos, blob }));
    return { checkpoints: [...this.checkpoints], log, last: Math.max(0, ...log.map((e) => e.pos), ...this.checkpoints.map((c) => c.logPos)) };
  }
}

/** Every P2P mesh opened since the last closeMeshes(). */
const meshes: P2P[] = [];

/** A P2P mesh of task t1 for `vpid`, closed by the next closeMeshes(). */
export async function openMesh(vpid: number): Promise<P2P> {
  const p2p = await P2P.open({ taskId: 't1', self: vpid, taskKey: TEST_TASK_KEY });
  meshes.push(p2p);
  return p2p;
}

/** Close every mesh opened so far without a bye, as a crash would: between two runs of a test,
 *  and after each test. */
export async function closeMeshes(): Promise<void> {
  for (const p of meshes.splice(0)) await p.close({ bye: false });
}

/** Where each rank of `all` but `r`'s own listens, for r's connect. */
export const peersOf = (r: { rank: number }, all: readonly { rank: number; vpid: number; p2p: P2P }[]) =>
  all.filter((o) => o.rank !== r.rank).map((o) => ({ id: o.vpid, host: '127.0.0.1', port: o.p2p.port }));

/** What program() needs of a rank, whichever channels carry its messages. */
export type ProgramRank = {
  rank: number;
  state: State;
  layer: CommLayer;
  rt: RollbackRuntime;
  /** Order hashes rank 0 sent, as this rank received them, by step. */
  seen: string[];
  /** Tells the group how far the rank's log reaches, after each snapshot (rollback-init's timer
   *  does it in a task). */
  report?: () => void;
};

/** The program, with no recovery code: a ring exchange, an allreduce, and at rank 0 a
 *  wildcard gather whose arrival order it folds and sends on (so a replay that took another
 *  order would show in every other rank's `seen`). `hook` may crash the rank at a phase. */
export async function program<R extends ProgramRank>(r: R, size: number, hook: (r: R, phase: string) => void): Promise<State> {
  const s = r.state;
  const world = { id: 0, members: Array.from({ length: size }, (_, i) => i) };
  const right = (r.rank + 1) % size;
  const left = (r.rank + size - 1) % size;
  while (s.step < STEPS) {
    hook(r, 'before-send');
    await r.layer.send(world, right, 1, s.x);
    hook(r, 'after-send');
    const m = await r.layer.recv<number[]>(world, left, 1);
    s.x = s.x.map((v, i) => v * 0.5 + m.data[i]! * 0.25 + 0.125);
    hook(r, 'before-allreduce');
    const sum = await coll.allreduce(r.layer, world, s.x.reduce((a, b) => a + b, 0), (a: number, b: number) => a + b);
    s.hist.push(sum);
    if (r.rank === 0) {
      for (let k = 1; k < size; k++) s.order.push((await r.layer.recv(world, ANY_SOURCE, 2)).source);
      hook(r, 'after-wildcard');
      for (let k = 1; k < size; k++) await r.layer.send(world, k, 3, hashOf(s.order));
    } else {
      await r.layer.send(world, 0, 2, s.step);
      r.seen[s.step] = (await r.layer.recv<string>(world, 0, 3)).data;
    }
    s.step++;
    hook(r, 'before-snapshot');
    await r.rt.snapshot();
    r.report?.();
  }
  return s;
}
