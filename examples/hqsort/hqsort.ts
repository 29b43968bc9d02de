// HyperQuickSort on the DGRP (issue 18 item 3; spec mpichv-dgrp 2.2.6–2.2.7, 2.6): Algorithm 2
// over virtual ranks 0..P−1 of a linked task of P = 2^d processes, each round's virtual ranks
// held by that round's DGRP members as Algorithm 4 remaps them, so a process the group told slow
// is not waited for: its lists move to the process that replaces it.
//
//   trine submit --linked --dgrp -n 4 -- node --import tsx examples/hqsort/hqsort.ts --count 2000000
//
// Rounds are the group's barriers (every process calls barrier(); a non-member skips the round's
// work and calls it again):
//   round 1 … d   sorting: the holders take their lists (round 1: each regenerates its virtual
//                 ranks' shares from the seed and sorts them), learn every cluster's pivot (an
//                 allgather over the round's members), split, exchange halves with the holders of
//                 v ⊕ 2^(s−1), merge; each list is kept, and copied to the holder's backup;
//   round d + 1   the holder of virtual rank 0 gathers every list the same way, checks it against
//                 the regenerated input (spec 2.6: sorted, same multiset), prints one line and
//                 tells every process to end.
// Where a list comes from when its holder changes, and why: hqsort-plan.ts. The lists a process
// held or backs up stay available to a later holder through its responder (hqsort-lists.ts).
// --no-dgrp runs the same rounds on every process without the group's barriers: the baseline
// that waits for the slowest.
import { Gmpi } from 'trine/app';
import { isGloballySorted, localSort, mergeSorted, pivotOf, sameMultiset, splitAtPivot } from './hqsort-core.ts';
import { HQSORT_USAGE, parseHqsortArgs } from './hqsort-options.ts';
import { backupOf, backupsFor, clusterPivots, dimensionOf, generateShare, heldBy, holderIn, sourceOf, tagOf } from './hqsort-plan.ts';
import { ListStore, listOf } from './hqsort-lists.ts';

const PROGRAM = 'hqsort';
function refuse(message: string): never {
  process.stderr.write(`${PROGRAM}: ${message}\n`);
  process.exit(2);
}

const parsed = parseHqsortArgs(process.argv.slice(2));
if (parsed.type === 'help') {
  process.stdout.write(`${HQSORT_USAGE}\n`);
  process.exit(0);
}
if (parsed.type === 'error') refuse(parsed.message);
const { seed, count, noDgrp, trace } = parsed.options;
// The size is the task's, known before init (outside Trine init says NOT_IN_TRINE).
if (process.env.TRINE_SIZE !== undefined) {
  const d = dimensionOf(Number(process.env.TRINE_SIZE));
  if (typeof d === 'string') refuse(d);
}

const g = await Gmpi.init();
const size = g.size();
const self = g.rank();
const dimOrWhy = dimensionOf(size);
if (typeof dimOrWhy === 'string') refuse(dimOrWhy);
const dim = dimOrWhy;
const dgrp = noDgrp ? null : g.dgrp;
if (!noDgrp && dgrp === null) refuse('not a DGRP task: submit with --linked --dgrp (or run the baseline with --no-dgrp)');
const everyone = Array.from({ length: size }, (_, r) => r);
const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};
const store = new ListStore(g, log);
const responding = store.respond();

// ---- The group's memberships, round by round, as this process saw them released ---------------

/** Members of each released round (the view that released it: the same on every process). */
const history = new Map<number, readonly number[]>();
const changes = { removals: 0, rejoins: 0 };
if (dgrp !== null) {
  let recorded = dgrp.current.released; // earlier releases: unknown here, asked of the others
  let members: readonly number[] = everyone; // the group starts with every process
  const tally = (s: { members: readonly number[] }): void => {
    changes.removals += members.filter((r) => !s.members.includes(r)).length;
    changes.rejoins += s.members.filter((r) => !members.includes(r)).length;
    members = s.members;
  };
  if (dgrp.current.view > 0) tally(dgrp.current);
  dgrp.onChange((s) => {
    for (; recorded < s.released; recorded++) history.set(recorded + 1, s.members);
    tally(s);
  });
}

type Collective = { allgather<T>(value: T): Promise<T[]> };
type Round = { readonly round: number; readonly members: readonly number[]; readonly comm: Collective | null };

let nextPlain = 1;
async function nextRound(): Promise<Round> {
  if (dgrp === null) return { round: nextPlain++, members: everyone, comm: g };
  const r = await dgrp.barrier();
  return { round: r.round, members: r.members, comm: r.comm };
}

/** Round k's members, for a member of a later round: its own record, else another member's
 *  (a process that was outside the group while rounds were released may have missed them). */
async function membersOf(k: number, comm: Collective): Promise<readonly number[]> {
  if (dgrp === null) return everyone;
  const known = (await comm.allgather(history.get(k) ?? null)).find((m) => m !== null);
  if (known === undefined) throw new Error(`hqsort: no member of round ${k + 1} knows round ${k}'s members`);
  return known;
}

/** Virtual rank v's list as round k left it (k = 0: the input share, sorted), for this process,
 *  which holds it in a round whose members are `after`. */
function acquire(v: number, k: number, before: readonly number[], after: readonly number[]): Promise<Int32Array> {
  if (k === 0) return Promise.resolve(localSort(generateShare(seed, count, size, v)));
  const source = sourceOf(v, dim, before, after, self, dgrp !== null);
  switch (source.type) {
    case 'held':
      return store.heldList(k, v);
    case 'backup':
      return store.backup(k, v, source.from);
    case 'ask':
      return store.ask(source.who, { round: k, v, from: source.from });
    default: {
      const never: never = source;
      throw new Error(`hqsort: source ${JSON.stringify(never)}`);
    }
  }
}

// ---- A sorting round ---------------------------------------------------------------------------

async function sortRound(r: Round, comm: Collective): Promise<void> {
  const k = r.round;
  const s = dim - k + 1;
  const bit = 1 << (s - 1);
  const mine = heldBy(self, dim, r.members);
  const before = k === 1 ? [] : await membersOf(k - 1, comm);
  // This round's backup copies to this process: receive them as they come.
  if (dgrp !== null) for (const b of backupsFor(self, dim, r.members)) void store.backup(k, b.v, b.from);
  const lists = new Map<number, Int32Array>();
  await Promise.all(mine.map(async (v) => lists.set(v, await acquire(v, k - 1, before, r.members))));
  const pivots: (number | null)[] = new Array<number | null>(size).fill(null);
  for (const pairs of await comm.allgather(mine.map((v) => [v, pivotOf(lists.get(v)!)] as const))) for (const [v, p] of pairs) pivots[v] = p;
  const clusters = clusterPivots(pivots, s);
  const kept = new Map<number, Int32Array>();
  const inbox = new Map<number, Int32Array>();
  for (const v of mine) {
    const w = v ^ bit;
    const pivot = clusters[v >> s] ?? null;
    const list = lists.get(v)!;
    const { lower, higher } = pivot === null ? { lower: list, higher: list } : splitAtPivot(list, pivot);
    kept.set(v, v > w ? higher : lower);
    const give = v > w ? lower : higher;
    const to = holderIn(w, dim, r.members);
    if (to === self) inbox.set(w, give);
    else store.post(to, tagOf('exchange', k, w), give);
  }
  const backup = dgrp === null ? null : backupOf(self, dim, r.members);
  for (const v of mine) {
    const received = inbox.get(v) ?? listOf((await g.recv(holderIn(v ^ bit, dim, r.members), tagOf('exchange', k, v))).data, `round ${k}'s half for ${v}`);
    const merged = mergeSorted(kept.get(v)!, received);
    store.keep(k, v, merged);
    if (backup !== null) store.post(backup, tagOf('backup', k, v), merged);
  }
}

// ---- The end -----------------------------------------------------------------------------------

/** The holder of virtual rank 0 gathers, checks and prints; every other process waits for it. */
async function finish(r: Round, startedAt: number): Promise<number> {
  const collector = holderIn(0, dim, r.members);
  const before = r.comm === null || dim === 0 ? [] : await membersOf(dim, r.comm);
  if (self !== collector) {
    await g.recv(collector, tagOf('done', 0, 0));
    return 0;
  }
  const lists = await Promise.all(everyone.map((v) => acquire(v, dim, before, r.members)));
  const ms = Date.now() - startedAt;
  const input = everyone.map((v) => generateShare(seed, count, size, v));
  const why = !isGloballySorted(lists) ? 'not globally sorted' : !sameMultiset(lists, input) ? 'not the input\'s numbers' : null;
  const mode = dgrp === null ? ' (--no-dgrp)' : '';
  process.stdout.write(`hqsort: sorted ${count} numbers in ${ms} ms on ${size} processes${mode}, members at the end [${r.members.join(',')}], removals ${changes.removals}, rejoins ${changes.rejoins}: ${why === null ? 'correct' : `WRONG: ${why}`}\n`);
  await Promise.all(everyone.filter((p) => p !== self).map((p) => g.send(p, tagOf('done', 0, 0), null).catch(() => undefined)));
  return why === null ? 0 : 1;
}

let startedAt: number | null = null;
let code = 1;
for (;;) {
  const t = Date.now();
  const r = await nextRound();
  startedAt ??= Date.now();
  if (r.round > dim + 1) throw new Error(`hqsort: round ${r.round} released, past the last (${dim + 1})`);
  if (r.round === dim + 1) {
    code = await finish(r, startedAt);
    break;
  }
  if (trace) process.stdout.write(`${JSON.stringify({ hqsort: 'start', at: Date.now(), round: r.round, members: r.members })}\n`);
  if (r.comm !== null) await sortRound(r, r.comm);
  if (trace) process.stdout.write(`${JSON.stringify({ hqsort: 'round', at: Date.now(), round: r.round, members: r.members, held: r.comm === null ? [] : heldBy(self, dim, r.members), ms: Date.now() - t, answered: store.answered })}\n`);
}
store.close();
await g.finalize();
await responding.catch(() => undefined);
process.exit(code);
