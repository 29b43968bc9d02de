// The distributed HyperQuickSort's pure decisions (examples/hqsort/hqsort.ts; spec 2.2.7
// Algorithm 2 with the DGRP remapping of Algorithms 3–4, "State saving", "Load absorption"):
// its options, its message tags, each process's share of the seeded input, where a virtual
// rank's list is backed up at the end of a round, and where its next holder takes it from.
// No messages and no clock here: every process computes the same answers from the same
// memberships, which is what lets them agree without talking.
//
// State continuity across a change of the group (spec 2.2.7: "the replacement picks up the
// removed process's data from shared storage"; Trine nodes share no storage): at the end of
// round k the holder h of a virtual rank's list sends a copy to its backup, the process that
// would take its work if h alone left: replacement(h) among round k's other members. In round
// k + 1 the list's new holder takes it, in this order of preference, from
//   1. itself, if it held it in round k;
//   2. its own backup copy, if it is h's backup;
//   3. h, if h is still a member (a member is fast: it was not told slow);
//   4. h's backup, if that one is a member;
//   5. h all the same (a slow process: correct, only later).
import { holderOf, replacement } from '../../src/app/dgrp/hypercube.ts';
import { seededRandom } from '../common/seeded-random.ts';

// ---- Limits (STYLE.md 9) ----------------------------------------------------------------------

/** Largest hypercube the tags can name: virtual ranks below 2^TAG_RANK_BITS. */
export const TAG_RANK_BITS = 20;
/** Rounds the tags can name: dim + 1 rounds (sorting rounds and the gather) below this. */
export const TAG_ROUNDS = 64;
/** Most numbers in a run: 2^28 int32 are 1 GiB, far past what a test or the demo sorts. */
export const MAX_COUNT = 2 ** 28;
/** Seeds are u32 (mulberry32's state). */
export const MAX_SEED = 0xffffffff;

// ---- Tags ---------------------------------------------------------------------------------------

/** What a message carries; each kind has its own tag range, and (round, virtual rank) inside it,
 *  so rounds never mix: a message of round k can only match a receive of round k. */
export const KIND = { exchange: 1, backup: 2, reply: 3, request: 4, done: 5 } as const;
export type Kind = keyof typeof KIND;

/** The tag of a `kind` message about virtual rank `v`'s list in `round` (u31: G-MPI tags). */
export function tagOf(kind: Kind, round: number, v: number): number {
  if (!Number.isInteger(round) || round < 0 || round >= TAG_ROUNDS) throw new Error(`hqsort: round ${round} has no tag`);
  if (!Number.isInteger(v) || v < 0 || v >= 2 ** TAG_RANK_BITS) throw new Error(`hqsort: virtual rank ${v} has no tag`);
  return KIND[kind] * TAG_ROUNDS * 2 ** TAG_RANK_BITS + round * 2 ** TAG_RANK_BITS + v;
}

// ---- Input --------------------------------------------------------------------------------------

/** murmur3's finaliser: spreads nearby seeds so that list v's stream is unrelated to list v+1's. */
function mix32(x: number): number {
  let h = x | 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

/** How many of `count` numbers virtual rank v starts with: an even split, the first
 *  `count mod size` lists one more. */
export function shareLength(count: number, size: number, v: number): number {
  return Math.floor(count / size) + (v < count % size ? 1 : 0);
}

/** Virtual rank v's initial list: int32 values drawn from its own stream of `seed`. Any process
 *  can regenerate any list, so the holder of v in the first round makes it where it is needed. */
export function generateShare(seed: number, count: number, size: number, v: number): Int32Array {
  const random = seededRandom(mix32(seed ^ mix32(v + 1)));
  const out = new Int32Array(shareLength(count, size, v));
  for (let i = 0; i < out.length; i++) out[i] = (random() * 4294967296) | 0;
  return out;
}

// ---- Placement ----------------------------------------------------------------------------------

const memberOf = (members: readonly number[]) => (r: number): boolean => members.includes(r);

/** Who holds virtual rank v among `members` (spec 2.2.7 Algorithm 4). */
export function holderIn(v: number, dim: number, members: readonly number[]): number {
  const h = holderOf(v, dim, memberOf(members));
  if (h === null) throw new Error(`hqsort: no member holds virtual rank ${v} (members [${members.join(',')}])`);
  return h;
}

/** The virtual ranks `self` holds among `members`, ascending. */
export function heldBy(self: number, dim: number, members: readonly number[]): number[] {
  return Array.from({ length: 2 ** dim }, (_, v) => v).filter((v) => holderIn(v, dim, members) === self);
}

/** Where holder h's lists are copied at the end of a round: replacement(h) among the round's
 *  other members; null when h is the only one. */
export function backupOf(h: number, dim: number, members: readonly number[]): number | null {
  return replacement(h, dim, (r) => r !== h && members.includes(r));
}

/** The backup copies `self` receives at the end of a round of `members`: from each member whose
 *  backup it is, one per virtual rank that member holds. */
export function backupsFor(self: number, dim: number, members: readonly number[]): { from: number; v: number }[] {
  return members.filter((h) => h !== self && backupOf(h, dim, members) === self).flatMap((h) => heldBy(h, dim, members).map((v) => ({ from: h, v })));
}

/** Where the new holder of a list takes it (see the header): `held`, its own copy from round k;
 *  `backup`, the copy it got as `from`'s backup; `ask`, a request to `who` for its own list
 *  (`from` null) or for the backup copy it got from `from`. */
export type Source =
  | { readonly type: 'held' }
  | { readonly type: 'backup'; readonly from: number }
  | { readonly type: 'ask'; readonly who: number; readonly from: number | null };

/** The source of virtual rank v's list (as round k left it, with `before` its members) for `self`,
 *  which needs it in the next round, whose members are `after`. Without `backups` (a run that
 *  made none: --no-dgrp), the holder. */
export function sourceOf(v: number, dim: number, before: readonly number[], after: readonly number[], self: number, backups = true): Source {
  const holder = holderIn(v, dim, before);
  const backup = backups ? backupOf(holder, dim, before) : null;
  if (holder === self) return { type: 'held' };
  if (backup === self) return { type: 'backup', from: holder };
  if (after.includes(holder) || backup === null || !after.includes(backup)) return { type: 'ask', who: holder, from: null };
  return { type: 'ask', who: backup, from: holder };
}

/** Each cluster's pivot in a round of clusters of 2^s virtual ranks, from every virtual rank's
 *  list pivot (null: empty): the root's, else the first non-empty list's in virtual-rank order,
 *  null when the whole cluster is empty (hqsort-core.ts's departure rule). */
export function clusterPivots(pivots: readonly (number | null)[], s: number): (number | null)[] {
  const out: (number | null)[] = [];
  for (let root = 0; root < pivots.length; root += 2 ** s) {
    let found: number | null = null;
    for (let v = root; v < root + 2 ** s && found === null; v++) found = pivots[v] ?? null;
    out.push(found);
  }
  return out;
}

/** log2 of a task size, or a sentence saying why it cannot run HyperQuickSort. */
export function dimensionOf(size: number): number | string {
  if (!Number.isInteger(size) || size < 1 || (size & (size - 1)) !== 0) return `${size} processes: HyperQuickSort runs on a power of 2 (submit with -n 1, 2, 4, 8, …)`;
  const dim = Math.log2(size);
  if (dim > TAG_RANK_BITS || dim + 2 > TAG_ROUNDS) return `${size} processes: at most 2^${TAG_RANK_BITS}`;
  return dim;
}
