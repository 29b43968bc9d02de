// The protector's store (docs/PROTOCOL.md §11.4; radic-hmpl A.1, A.2.5, A.2.7, B.1; mpichv-dgrp
// 1.2.2–1.2.4): what one agent keeps for the ranks it protects. Per (task, rank): the last two
// checkpoints `{id, logPos, bytes}` and the log entries (opaque blobs numbered by position from 1,
// contiguous) since the OLDER checkpoint's position, so a replacement that refuses the newer
// checkpoint (its digest does not match the group's mark) can still fall back to the older one
// and replay from there. A new checkpoint drops the older one and garbage-collects the log below
// the one that becomes older (RADIC A.2.5; MPICH-V's End Checkpoint frees the past events).
//
// Which tasks may be stored is the group's to say (`rollback.guard` / `rollback.release`, the
// agent calls guard/release). Clone exclusion (mpichv-dgrp 1.2.4): a rank's store remembers the
// highest incarnation (the holder's VPID, PROTOCOL §11.2) that has spoken for it; a higher one
// fences every lower one, whose appends and puts are refused FENCED from then on.
//
// Pure: no I/O, no clock. Every verb returns a typed outcome; every bound is named
// (src/core/constants.ts) and past one the input is refused with its reason, never dropped
// silently and never stored beyond the bound.
import {
  MAX_TASK_PROCS, PROTECTOR_ENTRY_OVERHEAD_BYTES, PROTECTOR_MAX_CHECKPOINT_BYTES, PROTECTOR_MAX_LOG_BYTES, PROTECTOR_MAX_TASKS,
  PROTECTOR_MAX_TOTAL_BYTES,
} from './constants.ts';
import { bytesEqual } from '../base/bytes.ts';
import { assert } from '../base/result.ts';

export type ProtectorCheckpoint = { readonly id: number; readonly logPos: number; readonly bytes: Uint8Array };

/** Why the store refused (stable codes: the wire carries them, PROTOCOL §11.4). */
export type StoreRefusal =
  /** The task is not guarded here (the group never said so, or released it). */
  | 'UNKNOWN_TASK'
  /** A higher incarnation of the rank has spoken (mpichv-dgrp 1.2.4 clone exclusion). */
  | 'FENCED'
  /** Not a rank of a task (≥ MAX_TASK_PROCS). */
  | 'BAD_RANK'
  /** An append beyond the next position. */
  | 'GAP'
  /** A repeat of a stored position with other bytes. */
  | 'CONFLICT'
  /** An append at a position already garbage-collected. */
  | 'STALE'
  /** A checkpoint whose id does not increase, or whose position the log does not reach. */
  | 'BAD_CHECKPOINT'
  /** A deposit whose ssn skips one (channel-memory.ts), or whose entry names another source or ssn. */
  | 'BAD_DEPOSIT'
  /** A checkpoint larger than the task's maxStateBytes. */
  | 'STATE_TOO_LARGE'
  /** The rank's log is at PROTECTOR_MAX_LOG_BYTES: it must checkpoint (radic-hmpl B.1). */
  | 'LOG_FULL'
  /** The protector holds PROTECTOR_MAX_TOTAL_BYTES (or its caller's lower bound). */
  | 'STORE_FULL'
  /** PROTECTOR_MAX_TASKS are guarded already. */
  | 'TOO_MANY_TASKS';

export type Refused = { readonly ok: false; readonly code: StoreRefusal; readonly detail: string };
export const refuse = (code: StoreRefusal, detail: string): Refused => ({ ok: false, code, detail });

export type RankStore = {
  /** The highest incarnation seen; lower ones are fenced. */
  incarnation: number;
  /** Oldest first; at most two. */
  checkpoints: ProtectorCheckpoint[];
  /** Position of the entry before `entries[0]`: the older checkpoint's logPos, or 0. */
  base: number;
  /** Positions base + 1 … base + entries.length. */
  entries: Uint8Array[];
  /** The entries' cost (bytes + PROTECTOR_ENTRY_OVERHEAD_BYTES each). */
  logBytes: number;
  checkpointBytes: number;
  /** Channel memory (channel-memory.ts, mpichv-dgrp 1.2.1): per source rank, the highest ssn
   *  deposited into this rank's log. Kept across the log's garbage collection. */
  deposited?: Map<number, number>;
  /** Channel memory: per source rank, the fragments of its next message held until its last. */
  assembling?: Map<number, Uint8Array[]>;
  /** Their cost (in the store's total, not in logBytes). */
  assemblingBytes?: number;
};

export type TaskStore = { readonly maxStateBytes: number; readonly ranks: Map<number, RankStore> };

export type ProtectorStore = {
  /** Bound on every byte held (PROTECTOR_MAX_TOTAL_BYTES unless the caller set a lower one). */
  readonly maxTotalBytes: number;
  readonly tasks: Map<string, TaskStore>;
  totalBytes: number;
  /** Refusals by reason, for stats. */
  readonly refused: Partial<Record<StoreRefusal, number>>;
  /** Channel-memory deposits (channel-memory.ts): stored, and answered as duplicates. */
  readonly deposits: { stored: number; duplicates: number };
};

export function createProtectorStore(maxTotalBytes: number = PROTECTOR_MAX_TOTAL_BYTES): ProtectorStore {
  assert(Number.isSafeInteger(maxTotalBytes) && maxTotalBytes > 0 && maxTotalBytes <= PROTECTOR_MAX_TOTAL_BYTES, 'protector total bound');
  return { maxTotalBytes, tasks: new Map(), totalBytes: 0, refused: {}, deposits: { stored: 0, duplicates: 0 } };
}

export const count = (s: ProtectorStore, r: Refused): Refused => {
  s.refused[r.code] = (s.refused[r.code] ?? 0) + 1;
  return r;
};

export const entryCost = (blob: Uint8Array): number => blob.length + PROTECTOR_ENTRY_OVERHEAD_BYTES;
export const lastPos = (r: RankStore): number => r.base + r.entries.length;

/** Allow `task` to be stored, its checkpoints up to `maxStateBytes` each (the task's option,
 *  PROTOCOL §11.1). Guarding a guarded task again keeps its store (the group's command may be
 *  delivered again after an agent restart). */
export function guard(s: ProtectorStore, task: string, maxStateBytes: number): { ok: true } | Refused {
  assert(Number.isSafeInteger(maxStateBytes) && maxStateBytes >= 1 && maxStateBytes <= PROTECTOR_MAX_CHECKPOINT_BYTES, 'maxStateBytes in range');
  if (s.tasks.has(task)) return { ok: true };
  if (s.tasks.size >= PROTECTOR_MAX_TASKS) return count(s, refuse('TOO_MANY_TASKS', `${s.tasks.size} tasks guarded already`));
  s.tasks.set(task, { maxStateBytes, ranks: new Map() });
  return { ok: true };
}

/** Forget `task` and all it stored; false if it was not guarded. */
export function release(s: ProtectorStore, task: string): boolean {
  const t = s.tasks.get(task);
  if (t === undefined) return false;
  for (const r of t.ranks.values()) s.totalBytes -= r.logBytes + r.checkpointBytes + (r.assemblingBytes ?? 0);
  s.tasks.delete(task);
  assert(s.totalBytes >= 0, 'store bytes never negative');
  return true;
}

/** The rank's store as `incarnation` may use it: created empty on first use, fenced for a lower
 *  incarnation than the highest seen; a higher one becomes the highest (fencing the rest). */
export function admit(s: ProtectorStore, task: string, rank: number, incarnation: number): RankStore | Refused {
  const t = s.tasks.get(task);
  if (t === undefined) return count(s, refuse('UNKNOWN_TASK', `task ${task} is not guarded here`));
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= MAX_TASK_PROCS) return count(s, refuse('BAD_RANK', `rank ${rank} of task ${task}`));
  let r = t.ranks.get(rank);
  if (r === undefined) {
    r = { incarnation, checkpoints: [], base: 0, entries: [], logBytes: 0, checkpointBytes: 0 };
    t.ranks.set(rank, r);
  }
  if (incarnation < r.incarnation) {
    return count(s, refuse('FENCED', `incarnation ${incarnation} of ${task} rank ${rank} is fenced by ${r.incarnation}`));
  }
  r.incarnation = incarnation;
  return r;
}

/** A process of `incarnation` speaks for (task, rank): from now on every lower incarnation is
 *  fenced (mpichv-dgrp 1.2.4). Returns the rank's last log position. */
export function fence(s: ProtectorStore, task: string, rank: number, incarnation: number): { ok: true; last: number } | Refused {
  const r = admit(s, task, rank, incarnation);
  return 'ok' in r ? r : { ok: true, last: lastPos(r) };
}

export type Appended = { readonly ok: true; readonly upTo: number; readonly repeat: boolean };

/** Store log entry `pos` of (task, rank). `pos` must be the next position; a repeat of a stored
 *  entry with the same bytes is acknowledged again (a client resending after a reconnect), with
 *  other bytes it is a CONFLICT. `upTo`: the last position stored. */
export function append(s: ProtectorStore, task: string, rank: number, incarnation: number, pos: number, blob: Uint8Array): Appended | Refused {
  const r = admit(s, task, rank, incarnation);
  if ('ok' in r) return r;
  const last = lastPos(r);
  if (!Number.isSafeInteger(pos) || pos < 1) return count(s, refuse('GAP', `position ${pos}`));
  if (pos <= r.base) return count(s, refuse('STALE', `position ${pos} is at or below the kept log (from ${r.base + 1})`));
  if (pos <= last) {
    const kept = r.entries[pos - r.base - 1];
    assert(kept !== undefined, 'a kept position has its entry');
    if (!bytesEqual(kept, blob)) return count(s, refuse('CONFLICT', `position ${pos} is stored with other bytes`));
    return { ok: true, upTo: last, repeat: true };
  }
  if (pos !== last + 1) return count(s, refuse('GAP', `position ${pos} after ${last}`));
  const cost = entryCost(blob);
  if (r.logBytes + cost > PROTECTOR_MAX_LOG_BYTES) {
    return count(s, refuse('LOG_FULL', `the log of ${task} rank ${rank} holds ${r.logBytes} bytes: checkpoint first`));
  }
  if (s.totalBytes + cost > s.maxTotalBytes) return count(s, refuse('STORE_FULL', `the protector holds ${s.totalBytes} bytes`));
  r.entries.push(blob);
  r.logBytes += cost;
  s.totalBytes += cost;
  return { ok: true, upTo: pos, repeat: false };
}

export type Stored = { readonly ok: true; readonly repeat: boolean };

/** Whether checkpoint (id, logPos) of `size` bytes would be stored now, without storing it: a
 *  driver asks before it assembles a large checkpoint from chunks. */
export function checkPut(
  s: ProtectorStore, task: string, rank: number, incarnation: number, id: number, logPos: number, size: number,
): { ok: true } | Refused {
  const r = admit(s, task, rank, incarnation);
  if ('ok' in r) return r;
  const t = s.tasks.get(task);
  assert(t !== undefined, 'an admitted rank has its task');
  if (size > t.maxStateBytes) return count(s, refuse('STATE_TOO_LARGE', `checkpoint of ${size} bytes > the task's ${t.maxStateBytes}`));
  const newest = r.checkpoints[r.checkpoints.length - 1];
  if (newest !== undefined && id === newest.id && logPos === newest.logPos && size === newest.bytes.length) return { ok: true };
  if (!Number.isSafeInteger(id) || (newest !== undefined && id <= newest.id)) {
    return count(s, refuse('BAD_CHECKPOINT', `checkpoint id ${id} after ${newest?.id ?? 'none'}`));
  }
  // A rank moving in (its protector's node failed, RADIC A.2.7) starts an empty store with its
  // last checkpoint, wherever its log had reached; its entries after it follow.
  const movingIn = r.checkpoints.length === 0 && r.entries.length === 0 && r.base === 0;
  if (!Number.isSafeInteger(logPos) || logPos < (newest?.logPos ?? 0) || (logPos > lastPos(r) && !movingIn)) {
    return count(s, refuse('BAD_CHECKPOINT', `checkpoint at position ${logPos}: the log holds ${r.base + 1}…${lastPos(r)}, the last checkpoint is at ${newest?.logPos ?? 0}`));
  }
  if (s.totalBytes - freedBy(r, logPos) + size > s.maxTotalBytes) return count(s, refuse('STORE_FULL', `the protector holds ${s.totalBytes} bytes`));
  return { ok: true };
}

/** Bytes a new checkpoint at `logPos` frees: the older checkpoint when two are kept, and the log
 *  up to the position of the one that becomes the older (the new one itself when it is the
 *  first; with one kept, the log is collected up to it already). */
function freedBy(r: RankStore, logPos: number): number {
  if (r.checkpoints.length === 0) return logCostBelow(r, logPos);
  if (r.checkpoints.length === 1) return 0;
  const [older, newer] = r.checkpoints as [ProtectorCheckpoint, ProtectorCheckpoint];
  return older.bytes.length + logCostBelow(r, newer.logPos);
}

function logCostBelow(r: RankStore, pos: number): number {
  let cost = 0;
  for (let i = 0; i < pos - r.base && i < r.entries.length; i++) cost += entryCost(r.entries[i]!);
  return cost;
}

/** Store checkpoint `id` of (task, rank), taken at log position `logPos`. Ids increase; the
 *  store keeps the last two and garbage-collects the log up to the older one's position (RADIC
 *  A.2.5). A repeat of the newest checkpoint with the same bytes is acknowledged again. */
export function putCheckpoint(
  s: ProtectorStore, task: string, rank: number, incarnation: number, id: number, logPos: number, bytes: Uint8Array,
): Stored | Refused {
  const check = checkPut(s, task, rank, incarnation, id, logPos, bytes.length);
  if (!check.ok) return check;
  const r = s.tasks.get(task)?.ranks.get(rank);
  assert(r !== undefined, 'an admitted rank is stored');
  const newest = r.checkpoints[r.checkpoints.length - 1];
  if (newest !== undefined && id === newest.id) {
    if (!bytesEqual(newest.bytes, bytes)) return count(s, refuse('BAD_CHECKPOINT', `checkpoint ${id} is stored with other bytes`));
    return { ok: true, repeat: true };
  }
  if (r.checkpoints.length === 2) {
    const dropped = r.checkpoints.shift()!;
    r.checkpointBytes -= dropped.bytes.length;
    s.totalBytes -= dropped.bytes.length;
  }
  if (r.checkpoints.length === 0 && r.entries.length === 0 && r.base === 0) r.base = logPos; // moving in
  r.checkpoints.push({ id, logPos, bytes });
  r.checkpointBytes += bytes.length;
  s.totalBytes += bytes.length;
  collectLog(s, r, r.checkpoints[0]!.logPos);
  assert(s.totalBytes <= s.maxTotalBytes && r.checkpoints.length <= 2, 'store within its bounds');
  return { ok: true, repeat: false };
}

/** Drop the entries at positions ≤ `upTo`. */
function collectLog(s: ProtectorStore, r: RankStore, upTo: number): void {
  const drop = Math.min(Math.max(0, upTo - r.base), r.entries.length);
  const cost = logCostBelow(r, r.base + drop);
  r.entries.splice(0, drop);
  r.base += drop;
  r.logBytes -= cost;
  s.totalBytes -= cost;
  assert(r.logBytes >= 0 && r.base <= upTo, 'log collected up to the older checkpoint');
}

export type Fetched = {
  readonly ok: true;
  /** Oldest first. */
  readonly checkpoints: readonly ProtectorCheckpoint[];
  /** Entries after the older checkpoint's position, in order. */
  readonly log: readonly { readonly pos: number; readonly blob: Uint8Array }[];
  readonly last: number;
};

/** Everything kept for (task, rank): a replacement restores from it (RADIC A.2.7). A rank never
 *  stored is empty. */
export function fetch(s: ProtectorStore, task: string, rank: number): Fetched | Refused {
  const t = s.tasks.get(task);
  if (t === undefined) return count(s, refuse('UNKNOWN_TASK', `task ${task} is not guarded here`));
  const r = t.ranks.get(rank);
  if (r === undefined) return { ok: true, checkpoints: [], log: [], last: 0 };
  return { ok: true, checkpoints: [...r.checkpoints], log: r.entries.map((blob, i) => ({ pos: r.base + 1 + i, blob })), last: lastPos(r) };
}

/** Whether `task` is guarded, and its checkpoint bound. */
export function guardedState(s: ProtectorStore, task: string): { maxStateBytes: number } | null {
  const t = s.tasks.get(task);
  return t === undefined ? null : { maxStateBytes: t.maxStateBytes };
}

/** The highest incarnation seen for (task, rank), or null. */
export function currentIncarnation(s: ProtectorStore, task: string, rank: number): number | null {
  return s.tasks.get(task)?.ranks.get(rank)?.incarnation ?? null;
}

export type StoreStats = {
  tasks: number;
  ranks: number;
  totalBytes: number;
  logBytes: number;
  checkpointBytes: number;
  refused: Partial<Record<StoreRefusal, number>>;
  deposits: { stored: number; duplicates: number };
};

export function storeStats(s: ProtectorStore): StoreStats {
  let ranks = 0;
  let logBytes = 0;
  let checkpointBytes = 0;
  for (const t of s.tasks.values()) {
    for (const r of t.ranks.values()) {
      ranks++;
      logBytes += r.logBytes + (r.assemblingBytes ?? 0);
      checkpointBytes += r.checkpointBytes;
    }
  }
  assert(logBytes + checkpointBytes === s.totalBytes, 'total bytes are the ranks\' bytes');
  return { tasks: s.tasks.size, ranks, totalBytes: s.totalBytes, logBytes, checkpointBytes, refused: { ...s.refused }, deposits: { ...s.deposits } };
}
