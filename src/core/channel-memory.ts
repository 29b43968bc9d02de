// The channel-memory role of the protector's store (docs/PROTOCOL.md §11.6; mpichv-dgrp 1.1,
// 1.2.1, 1.2.4): under `--logging cm` a rank's home channel memory (CM) is its protector, and
// every message sent to the rank is deposited there by its sender before the receiver can get
// it. The CM appends the message to the receiver's log at the next position, which IT assigns
// (unlike `append`, where the rank names the position), so the log's order is the order the
// receiver takes its messages in, and the one a replacement replays in.
//
// Per receiver d, the CM keeps per source s the highest ssn deposited (`RankStore.deposited`,
// kept across the log's garbage collection, so it survives checkpoints): a deposit at or below
// it is a duplicate (a re-executing sender, mpichv-dgrp 1.2.4 silent re-execution), acknowledged
// and not stored; above it, the ssn must be the next one (a skipped ssn is refused GAP).
//
// Byzantine care: the sender is the authenticated rank of the connection, fenced by incarnation
// as every append is (clone exclusion, 1.2.4); the entry's own header must name that source and
// that ssn (a sender cannot log a message as another's). The entry is the library's log entry
// (src/app/rollback/codec.ts): kind u8 = 1 (message) ‖ source u32 ‖ ssn u32 ‖ … , or a fragment
// of a larger message: kind u8 = 3 ‖ source u32 ‖ ssn u32 ‖ comm, tag, structured (9 bytes) ‖
// index u32 ‖ total u32 ‖ … (big-endian); only these headers are read here. A message's
// fragments are deposited in order under its one ssn; the CM holds them aside (bounded by the
// store's total) and appends them together, contiguous, when the last arrives, so the receiver's
// log never holds part of a message.
//
// Pure: no I/O, no clock. The bounds are the store's (PROTECTOR_MAX_LOG_BYTES per rank, counting
// the entries not yet delivered; the store's total).
import { MAX_TASK_PROCS, PROTECTOR_MAX_LOG_BYTES } from './constants.ts';
import { admit, count, entryCost, lastPos, refuse, type ProtectorStore, type RankStore, type Refused } from './protector-store.ts';

/** The log entry's header the CM checks: kind, source, ssn. */
export const CM_ENTRY_HEADER_BYTES = 9;
/** A fragment's header up to its index and total. */
export const CM_FRAGMENT_HEADER_BYTES = 26;
/** The entry kinds (codec.ts): a whole message, a fragment of one. */
export const CM_MESSAGE_KIND = 1;
export const CM_FRAGMENT_KIND = 3;
/** Fragments of one message at most: a message of up to PROTECTOR_MAX_CHECKPOINT_BYTES (64 MiB)
 *  in fragments of 512 KiB (codec.ts LOG_FRAGMENT_BYTES) is 128; beyond it a deposit is refused. */
export const CM_MAX_FRAGMENTS = 128;

/** `last`: the deposit was a whole message or its last fragment (the sender's send completes at
 *  its answer; earlier fragments are not answered). */
export type Deposited =
  /** Stored, its last entry at `pos` of the receiver's log (0: a fragment held aside). */
  | { readonly ok: true; readonly duplicate: false; readonly pos: number; readonly last: boolean }
  /** Held already (ssn ≤ the count): acknowledged, not stored. */
  | { readonly ok: true; readonly duplicate: true; readonly pos: 0; readonly last: boolean };

/** The receiver's rank store, created empty (incarnation 0: any process of the rank may speak). */
function receiverStore(s: ProtectorStore, task: string, dest: number): RankStore | Refused {
  const t = s.tasks.get(task);
  if (t === undefined) return count(s, refuse('UNKNOWN_TASK', `task ${task} is not guarded here`));
  if (!Number.isSafeInteger(dest) || dest < 0 || dest >= MAX_TASK_PROCS) return count(s, refuse('BAD_RANK', `rank ${dest} of task ${task}`));
  let r = t.ranks.get(dest);
  if (r === undefined) {
    r = { incarnation: 0, checkpoints: [], base: 0, entries: [], logBytes: 0, checkpointBytes: 0 };
    t.ranks.set(dest, r);
  }
  return r;
}

/** What an entry's header names: its source and ssn, and for a fragment its index and total
 *  (a whole message is fragment 0 of 1); null if it is neither. */
export function entryHeader(blob: Uint8Array): { source: number; ssn: number; index: number; total: number } | null {
  if (blob.length < CM_ENTRY_HEADER_BYTES) return null;
  const v = new DataView(blob.buffer, blob.byteOffset, blob.length);
  const base = { source: v.getUint32(1), ssn: v.getUint32(5) };
  if (blob[0] === CM_MESSAGE_KIND) return { ...base, index: 0, total: 1 };
  if (blob[0] !== CM_FRAGMENT_KIND || blob.length < CM_FRAGMENT_HEADER_BYTES) return null;
  const index = v.getUint32(18);
  const total = v.getUint32(22);
  return total >= 2 && total <= CM_MAX_FRAGMENTS && index < total ? { ...base, index, total } : null;
}

/** Source rank `source` (process `incarnation`) deposits its message `ssn` to `dest` (mpichv-dgrp
 *  1.2.1: "the sender sends the message to the receiver's channel memory"). */
export function deposit(
  s: ProtectorStore, task: string, source: number, incarnation: number, dest: number, ssn: number, blob: Uint8Array,
): Deposited | Refused {
  const sender = admit(s, task, source, incarnation);
  if ('ok' in sender) return sender;
  const r = receiverStore(s, task, dest);
  if ('ok' in r) return r;
  if (!Number.isSafeInteger(ssn) || ssn < 1) return count(s, refuse('BAD_DEPOSIT', `ssn ${ssn}`));
  const deposited = (r.deposited ??= new Map());
  const count0 = deposited.get(source) ?? 0;
  const h = entryHeader(blob);
  if (h === null || h.source !== source || h.ssn !== ssn) {
    return count(s, refuse('BAD_DEPOSIT', `the entry names ${h === null ? 'no message' : `rank ${h.source} ssn ${h.ssn}`}, the deposit rank ${source} ssn ${ssn}`));
  }
  if (ssn <= count0) {
    s.deposits.duplicates++;
    return { ok: true, duplicate: true, pos: 0, last: h.index === h.total - 1 };
  }
  if (ssn !== count0 + 1) return count(s, refuse('GAP', `ssn ${ssn} from rank ${source} to rank ${dest} after ${count0}`));
  const parts = (r.assembling ??= new Map());
  // A sender's fragments come in order; a fragment 0 starts the message again (its sender died
  // and its replacement re-sends it).
  const held = parts.get(source) ?? [];
  const kept = h.index === 0 ? [] : held;
  if (kept.length !== h.index || (kept[0] !== undefined && entryHeader(kept[0])!.total !== h.total)) {
    return count(s, refuse('GAP', `fragment ${h.index} of ${h.total} of ssn ${ssn} from rank ${source} after ${kept.length}`));
  }
  const all = [...kept, blob];
  const cost = all.reduce((n, b) => n + entryCost(b), 0);
  const before = held.reduce((n, b) => n + entryCost(b), 0);
  if (r.logBytes + cost > PROTECTOR_MAX_LOG_BYTES) {
    return count(s, refuse('LOG_FULL', `the log of ${task} rank ${dest} holds ${r.logBytes} bytes: its receiver must checkpoint`));
  }
  if (s.totalBytes - before + cost > s.maxTotalBytes) return count(s, refuse('STORE_FULL', `the protector holds ${s.totalBytes} bytes`));
  // Held fragments count in the store's total (and in the rank's log bound once appended).
  s.totalBytes += cost - before;
  r.assemblingBytes = (r.assemblingBytes ?? 0) - before;
  if (h.index < h.total - 1) {
    parts.set(source, all);
    r.assemblingBytes += cost;
    return { ok: true, duplicate: false, pos: 0, last: false };
  }
  parts.delete(source);
  r.entries.push(...all);
  r.logBytes += cost;
  deposited.set(source, ssn);
  s.deposits.stored++;
  return { ok: true, duplicate: false, pos: lastPos(r), last: true };
}

/** The highest ssn from `source` the CM holds for `dest` (MPICH-V's received[W'] count). */
export function depositedCount(s: ProtectorStore, task: string, dest: number, source: number): number {
  return s.tasks.get(task)?.ranks.get(dest)?.deposited?.get(source) ?? 0;
}

/** Entries of (task, rank) after position `from`, at most `maxEntries`, for its subscription
 *  (mpichv-dgrp 1.2.1: the receiver gets its messages from its CM, in the CM's order). A `from`
 *  below the kept log is STALE (the rank consumed those before a checkpoint it no longer has). */
export function entriesAfter(
  s: ProtectorStore, task: string, rank: number, from: number, maxEntries: number,
): { ok: true; first: number; blobs: Uint8Array[] } | Refused {
  const r = s.tasks.get(task)?.ranks.get(rank);
  if (r === undefined) return { ok: true, first: from + 1, blobs: [] };
  if (!Number.isSafeInteger(from) || from < r.base) return count(s, refuse('STALE', `position ${from + 1} is below the kept log (from ${r.base + 1})`));
  const start = from - r.base;
  return { ok: true, first: from + 1, blobs: r.entries.slice(start, start + maxEntries) };
}
