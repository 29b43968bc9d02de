// The protector's store stepped by hand (src/core/protector-store.ts; docs/PROTOCOL.md §11.4):
// the last two checkpoints and the log since the older one (radic-hmpl A.2.5 garbage collection,
// A.2.7 restart from the protector), clone exclusion by incarnation (mpichv-dgrp 1.2.4), and every
// bound refusing with its reason.
import { describe, expect, it } from 'vitest';
import { MAX_TASK_PROCS, PROTECTOR_ENTRY_OVERHEAD_BYTES, PROTECTOR_MAX_LOG_BYTES, PROTECTOR_MAX_TASKS } from '../../../src/core/constants.ts';
import {
  append, checkPut, createProtectorStore, currentIncarnation, fence, fetch, guard, putCheckpoint, release, storeStats, type ProtectorStore,
} from '../../../src/core/protector-store.ts';

const T = 't1';
const b = (...xs: number[]): Uint8Array => Uint8Array.from(xs);
const entry = (pos: number): Uint8Array => b(pos & 0xff, 7);

function guarded(maxStateBytes = 1024, maxTotalBytes?: number): ProtectorStore {
  const s = createProtectorStore(maxTotalBytes);
  expect(guard(s, T, maxStateBytes)).toEqual({ ok: true });
  return s;
}

function appendUpTo(s: ProtectorStore, rank: number, inc: number, from: number, to: number): void {
  for (let pos = from; pos <= to; pos++) expect(append(s, T, rank, inc, pos, entry(pos))).toEqual({ ok: true, upTo: pos, repeat: false });
}

const positions = (s: ProtectorStore, rank: number): number[] => {
  const f = fetch(s, T, rank);
  return f.ok ? f.log.map((e) => e.pos) : [];
};

describe('PROTOCOL §11.4 protector store: log and checkpoints (radic-hmpl A.2.5)', () => {
  it('stores entries from position 1, contiguous, and fetch returns them with the last position', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 3);
    expect(fetch(s, T, 0)).toEqual({ ok: true, checkpoints: [], log: [1, 2, 3].map((pos) => ({ pos, blob: entry(pos) })), last: 3 });
    expect(fetch(s, T, 1)).toEqual({ ok: true, checkpoints: [], log: [], last: 0 });
  });

  it('a gap is refused GAP and nothing is stored', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 2);
    expect(append(s, T, 0, 5, 4, entry(4))).toMatchObject({ ok: false, code: 'GAP' });
    expect(append(s, T, 0, 5, 0, entry(0))).toMatchObject({ ok: false, code: 'GAP' });
    expect(positions(s, 0)).toEqual([1, 2]);
  });

  it('a repeat with the same bytes is acknowledged again (idempotent); with other bytes it is a CONFLICT', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 3);
    expect(append(s, T, 0, 5, 3, entry(3))).toEqual({ ok: true, upTo: 3, repeat: true });
    expect(append(s, T, 0, 5, 2, entry(2))).toEqual({ ok: true, upTo: 3, repeat: true });
    expect(append(s, T, 0, 5, 3, b(9, 9))).toMatchObject({ ok: false, code: 'CONFLICT' });
    expect(storeStats(s).logBytes).toBe(3 * (2 + PROTECTOR_ENTRY_OVERHEAD_BYTES));
  });

  it('the first checkpoint garbage-collects the log up to its position', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 4);
    expect(putCheckpoint(s, T, 0, 5, 1, 3, b(1, 1))).toEqual({ ok: true, repeat: false });
    expect(positions(s, 0)).toEqual([4]);
    expect(append(s, T, 0, 5, 2, entry(2))).toMatchObject({ ok: false, code: 'STALE' });
  });

  it('keeps the last two checkpoints and the log since the OLDER one: the fallback data survives', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 4);
    putCheckpoint(s, T, 0, 5, 1, 2, b(1));
    appendUpTo(s, 0, 5, 5, 6);
    putCheckpoint(s, T, 0, 5, 2, 5, b(2));
    // Checkpoint 2 may be refused by the replacement (digest): checkpoint 1 and entries 3… replay.
    let f = fetch(s, T, 0);
    expect(f.ok && f.checkpoints.map((c) => [c.id, c.logPos])).toEqual([[1, 2], [2, 5]]);
    expect(positions(s, 0)).toEqual([3, 4, 5, 6]);
    appendUpTo(s, 0, 5, 7, 7);
    putCheckpoint(s, T, 0, 5, 3, 7, b(3, 3));
    f = fetch(s, T, 0);
    expect(f.ok && f.checkpoints.map((c) => [c.id, c.logPos])).toEqual([[2, 5], [3, 7]]);
    expect(positions(s, 0)).toEqual([6, 7]);
    expect(f.ok && f.last).toBe(7);
    const st = storeStats(s);
    expect(st.checkpointBytes).toBe(3);
    expect(st.logBytes).toBe(2 * (2 + PROTECTOR_ENTRY_OVERHEAD_BYTES));
  });

  it('checkpoint ids increase, and a checkpoint lies between the last one\'s position and the log\'s end', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 4);
    expect(putCheckpoint(s, T, 0, 5, 2, 3, b(1))).toMatchObject({ ok: true });
    expect(putCheckpoint(s, T, 0, 5, 2, 4, b(1))).toMatchObject({ ok: false, code: 'BAD_CHECKPOINT' });
    expect(putCheckpoint(s, T, 0, 5, 1, 4, b(1))).toMatchObject({ ok: false, code: 'BAD_CHECKPOINT' });
    expect(putCheckpoint(s, T, 0, 5, 3, 5, b(1))).toMatchObject({ ok: false, code: 'BAD_CHECKPOINT' });
    expect(putCheckpoint(s, T, 0, 5, 3, 2, b(1))).toMatchObject({ ok: false, code: 'BAD_CHECKPOINT' });
    expect(putCheckpoint(s, T, 0, 5, 3, 3, b(1))).toMatchObject({ ok: true, repeat: false });
  });

  it('a repeat of the newest checkpoint with the same bytes is acknowledged again; with other bytes refused', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 2);
    putCheckpoint(s, T, 0, 5, 1, 2, b(4, 4));
    expect(putCheckpoint(s, T, 0, 5, 1, 2, b(4, 4))).toEqual({ ok: true, repeat: true });
    expect(putCheckpoint(s, T, 0, 5, 1, 2, b(4, 5))).toMatchObject({ ok: false, code: 'BAD_CHECKPOINT' });
    expect(storeStats(s).checkpointBytes).toBe(2);
  });
});

describe('PROTOCOL §11.4 protector store: fencing (mpichv-dgrp 1.2.4 clone exclusion)', () => {
  it('a higher incarnation fences every lower one: its appends and puts are refused FENCED', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 2);
    expect(fence(s, T, 0, 9)).toEqual({ ok: true, last: 2 });
    expect(currentIncarnation(s, T, 0)).toBe(9);
    expect(append(s, T, 0, 5, 3, entry(3))).toMatchObject({ ok: false, code: 'FENCED' });
    expect(putCheckpoint(s, T, 0, 5, 1, 2, b(1))).toMatchObject({ ok: false, code: 'FENCED' });
    expect(fence(s, T, 0, 5)).toMatchObject({ ok: false, code: 'FENCED' });
    // The replacement continues the same log.
    appendUpTo(s, 0, 9, 3, 3);
    // An append from a yet higher incarnation fences 9 too.
    appendUpTo(s, 0, 12, 4, 4);
    expect(append(s, T, 0, 9, 5, entry(5))).toMatchObject({ ok: false, code: 'FENCED' });
    // Fencing is per rank.
    appendUpTo(s, 1, 5, 1, 1);
    expect(storeStats(s).refused.FENCED).toBe(4);
  });
});

describe('PROTOCOL §11.4 protector store: bounds refuse with a reason', () => {
  it('an unguarded or released task is refused UNKNOWN_TASK, and release frees its bytes', () => {
    const s = guarded();
    expect(append(s, 't2', 0, 1, 1, entry(1))).toMatchObject({ ok: false, code: 'UNKNOWN_TASK' });
    expect(fetch(s, 't2', 0)).toMatchObject({ ok: false, code: 'UNKNOWN_TASK' });
    appendUpTo(s, 0, 5, 1, 3);
    expect(release(s, T)).toBe(true);
    expect(release(s, T)).toBe(false);
    expect(storeStats(s)).toMatchObject({ tasks: 0, ranks: 0, totalBytes: 0 });
    expect(append(s, T, 0, 5, 4, entry(4))).toMatchObject({ ok: false, code: 'UNKNOWN_TASK' });
  });

  it('a guard again keeps the store; more than PROTECTOR_MAX_TASKS tasks are refused', () => {
    const s = guarded();
    appendUpTo(s, 0, 5, 1, 1);
    expect(guard(s, T, 1024)).toEqual({ ok: true });
    expect(positions(s, 0)).toEqual([1]);
    for (let i = 2; i <= PROTECTOR_MAX_TASKS; i++) expect(guard(s, `t${i}`, 1)).toEqual({ ok: true });
    expect(guard(s, 'tx', 1)).toMatchObject({ ok: false, code: 'TOO_MANY_TASKS' });
  });

  it('a rank beyond MAX_TASK_PROCS is refused BAD_RANK', () => {
    const s = guarded();
    expect(fence(s, T, MAX_TASK_PROCS, 1)).toMatchObject({ ok: false, code: 'BAD_RANK' });
    expect(fence(s, T, MAX_TASK_PROCS - 1, 1)).toMatchObject({ ok: true });
  });

  it('a checkpoint larger than the task\'s maxStateBytes is refused STATE_TOO_LARGE', () => {
    const s = guarded(4);
    expect(checkPut(s, T, 0, 1, 1, 0, 5)).toMatchObject({ ok: false, code: 'STATE_TOO_LARGE' });
    expect(putCheckpoint(s, T, 0, 1, 1, 0, new Uint8Array(5))).toMatchObject({ ok: false, code: 'STATE_TOO_LARGE' });
    expect(putCheckpoint(s, T, 0, 1, 1, 0, new Uint8Array(4))).toMatchObject({ ok: true });
  });

  it('a rank\'s log at PROTECTOR_MAX_LOG_BYTES is refused LOG_FULL until a checkpoint collects it', () => {
    const s = guarded(1024, 1024 * 1024 * 1024);
    const big = new Uint8Array(1024 * 1024 - PROTECTOR_ENTRY_OVERHEAD_BYTES);
    const fit = PROTECTOR_MAX_LOG_BYTES / (1024 * 1024);
    for (let pos = 1; pos <= fit; pos++) expect(append(s, T, 0, 1, pos, big)).toMatchObject({ ok: true });
    expect(append(s, T, 0, 1, fit + 1, b())).toMatchObject({ ok: false, code: 'LOG_FULL' });
    expect(putCheckpoint(s, T, 0, 1, 1, fit, b(1))).toMatchObject({ ok: true });
    expect(append(s, T, 0, 1, fit + 1, b())).toMatchObject({ ok: true, upTo: fit + 1 });
    expect(storeStats(s).refused.LOG_FULL).toBe(1);
  });

  it('the protector\'s total bound refuses appends and checkpoints STORE_FULL, counting what a checkpoint frees', () => {
    const cost = 10 + PROTECTOR_ENTRY_OVERHEAD_BYTES;
    const s = guarded(1024, 3 * cost + 5);
    for (let pos = 1; pos <= 3; pos++) expect(append(s, T, 0, 1, pos, new Uint8Array(10))).toMatchObject({ ok: true });
    expect(append(s, T, 1, 1, 1, new Uint8Array(10))).toMatchObject({ ok: false, code: 'STORE_FULL' });
    // A checkpoint at 2 frees entries 1 and 2 (2 × cost): 6 bytes fit where 5 were free.
    expect(putCheckpoint(s, T, 0, 1, 1, 2, new Uint8Array(2 * cost + 6))).toMatchObject({ ok: false, code: 'STORE_FULL' });
    expect(putCheckpoint(s, T, 0, 1, 1, 2, new Uint8Array(2 * cost + 5))).toMatchObject({ ok: true });
    expect(storeStats(s).totalBytes).toBe(3 * cost + 5);
    expect(storeStats(s).refused.STORE_FULL).toBe(2);
  });
});
