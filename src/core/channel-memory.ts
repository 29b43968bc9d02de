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
// (src/app/rollback/codec.ts): kind u8 = 1 (message) ‖ source u32 ‖ ssn u32 ‖ … (big-endian);
// only those first 9 bytes are read here.
//
// Pure: no I/O, no clock. The bounds are the store's (PROTECTOR_MAX_LOG_BYTES per rank, counting
// the entries not yet delivered; the store's total).
import { MAX_TASK_PROCS, PROTECTOR_MAX_LOG_BYTES } from './constants.ts';
import { admit, count, entryCost, lastPos, refuse, type ProtectorStore, type RankStore, type Refused } from './protector-store.ts';

/** The log entry's header the CM checks: kind, source, ssn. */
export const CM_ENTRY_HEADER_BYTES = 9;
/** The entry kind of a whole message (codec.ts `message`). */
export const CM_MESSAGE_KIND = 1;

export type Deposited =
  /** Stored at `pos` of the receiver's log. */
  | { readonly ok: true; readonly duplicate: false; readonly pos: number }
  /** Held already (ssn ≤ the count): acknowledged, not stored. */
  | { readonly ok: true; readonly duplicate: true; readonly pos: 0 };

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

/** The source and ssn an entry's header names, or null if it is no whole message. */
export function entryHeader(blob: Uint8Array): { source: number; ssn: number } | null {
  if (blob.length < CM_ENTRY_HEADER_BYTES || blob[0] !== CM_MESSAGE_KIND) return null;
  const v = new DataView(blob.buffer, blob.byteOffset, blob.length);
  return { source: v.getUint32(1), ssn: v.getUint32(5) };
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
  const held = deposited.get(source) ?? 0;
  if (ssn <= held) {
    s.deposits.duplicates++;
    return { ok: true, duplicate: true, pos: 0 };
  }
  if (ssn !== held + 1) return count(s, refuse('GAP', `ssn ${ssn} from rank ${source} to rank ${dest} after ${held}`));
  const h = entryHeader(blob);
  if (h === null || h.source !== source || h.ssn !== ssn) {
    return count(s, refuse('BAD_DEPOSIT', `the entry names ${h === null ? 'no message' : `rank ${h.source} ssn ${h.ssn}`}, the deposit rank ${source} ssn ${ssn}`));
  }
  const cost = entryCost(blob);
  if (r.logBytes + cost > PROTECTOR_MAX_LOG_BYTES) {
    return count(s, refuse('LOG_FULL', `the log of ${task} rank ${dest} holds ${r.logBytes} bytes: its receiver must checkpoint`));
  }
  if (s.totalBytes + cost > s.maxTotalBytes) return count(s, refuse('STORE_FULL', `the protector holds ${s.totalBytes} bytes`));
  r.entries.push(blob);
  r.logBytes += cost;
  s.totalBytes += cost;
  deposited.set(source, ssn);
  s.deposits.stored++;
  return { ok: true, duplicate: false, pos: lastPos(r) };
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
