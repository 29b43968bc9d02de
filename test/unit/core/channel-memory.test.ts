// The channel-memory role of the protector's store stepped by hand (src/core/channel-memory.ts;
// docs/PROTOCOL.md §11.6; mpichv-dgrp 1.1 Channel Memory, 1.2.1 deposits, 1.2.2 End Checkpoint,
// 1.2.4 silent re-execution and clone exclusion): the CM assigns log positions, keeps per
// (receiver, sender) the highest ssn deposited across garbage collection, acknowledges a
// duplicate without storing it, refuses a gap, a forged entry and a fenced sender.
import { describe, expect, it } from 'vitest';
import { MAX_TASK_PROCS, PROTECTOR_ENTRY_OVERHEAD_BYTES, PROTECTOR_MAX_LOG_BYTES } from '../../../src/core/constants.ts';
import { deposit, depositedCount, entriesAfter, entryHeader } from '../../../src/core/channel-memory.ts';
import { createProtectorStore, fence, fetch, guard, putCheckpoint, release, storeStats, type ProtectorStore } from '../../../src/core/protector-store.ts';
import { encodeLogEntry, encodeMessageEntries } from '../../../src/app/rollback/codec.ts';
import { LOG_FRAGMENT_BYTES } from '../../../src/app/rollback/channels.ts';

const T = 't1';
const msg = (source: number, ssn: number, bytes = 3): Uint8Array =>
  encodeLogEntry({ kind: 'message', source, env: { ssn, epoch: 0, comm: 0, tag: 1, structured: false, data: new Uint8Array(bytes).fill(ssn & 0xff) } });

function guarded(maxTotalBytes?: number): ProtectorStore {
  const s = createProtectorStore(maxTotalBytes);
  expect(guard(s, T, 1024)).toEqual({ ok: true });
  return s;
}

const positions = (s: ProtectorStore, rank: number): [number, number, number][] => {
  const f = fetch(s, T, rank);
  if (!f.ok) return [];
  return f.log.map((e) => {
    const h = entryHeader(e.blob)!;
    return [e.pos, h.source, h.ssn];
  });
};

describe('PROTOCOL §11.6 channel memory: deposits (mpichv-dgrp 1.2.1)', () => {
  it('the CM assigns the receiver\'s log positions in deposit order, across senders', () => {
    const s = guarded();
    expect(deposit(s, T, 1, 11, 0, 1, msg(1, 1))).toEqual({ ok: true, duplicate: false, pos: 1, last: true });
    expect(deposit(s, T, 2, 12, 0, 1, msg(2, 1))).toEqual({ ok: true, duplicate: false, pos: 2, last: true });
    expect(deposit(s, T, 1, 11, 0, 2, msg(1, 2))).toEqual({ ok: true, duplicate: false, pos: 3, last: true });
    expect(deposit(s, T, 0, 10, 0, 1, msg(0, 1))).toEqual({ ok: true, duplicate: false, pos: 4, last: true }); // to oneself too
    expect(positions(s, 0)).toEqual([[1, 1, 1], [2, 2, 1], [3, 1, 2], [4, 0, 1]]);
    expect([depositedCount(s, T, 0, 1), depositedCount(s, T, 0, 2), depositedCount(s, T, 1, 0)]).toEqual([2, 1, 0]);
    // The receiver's welcome tells its last position.
    expect(fence(s, T, 0, 10)).toEqual({ ok: true, last: 4 });
  });

  it('a deposit at or below the count is a duplicate: acknowledged, not stored (1.2.4 silent re-execution)', () => {
    const s = guarded();
    deposit(s, T, 1, 11, 0, 1, msg(1, 1));
    deposit(s, T, 1, 11, 0, 2, msg(1, 2));
    const before = storeStats(s).totalBytes;
    expect(deposit(s, T, 1, 11, 0, 1, msg(1, 1))).toEqual({ ok: true, duplicate: true, pos: 0, last: true });
    // Its replacement re-executes the same sends: duplicates too, never delivered twice.
    expect(deposit(s, T, 1, 21, 0, 2, msg(1, 2))).toEqual({ ok: true, duplicate: true, pos: 0, last: true });
    expect(storeStats(s).totalBytes).toBe(before);
    expect(positions(s, 0)).toHaveLength(2);
    expect(storeStats(s).deposits).toEqual({ stored: 2, duplicates: 2 });
  });

  it('a gap in a sender\'s ssn is refused GAP, a zero ssn or an entry naming another source or ssn BAD_DEPOSIT', () => {
    const s = guarded();
    expect(deposit(s, T, 1, 11, 0, 2, msg(1, 2))).toMatchObject({ ok: false, code: 'GAP' });
    expect(deposit(s, T, 1, 11, 0, 0, msg(1, 0))).toMatchObject({ ok: false, code: 'BAD_DEPOSIT' });
    expect(deposit(s, T, 1, 11, 0, 1, msg(2, 1))).toMatchObject({ ok: false, code: 'BAD_DEPOSIT' });
    expect(deposit(s, T, 1, 11, 0, 1, msg(1, 5))).toMatchObject({ ok: false, code: 'BAD_DEPOSIT' });
    expect(deposit(s, T, 1, 11, 0, 1, Uint8Array.of(2, 0, 0, 0, 1, 0, 0, 0, 1))).toMatchObject({ ok: false, code: 'BAD_DEPOSIT' });
    expect(deposit(s, T, 1, 11, 0, 1, Uint8Array.of(1, 0))).toMatchObject({ ok: false, code: 'BAD_DEPOSIT' });
    expect(deposit(s, T, 1, 11, MAX_TASK_PROCS, 1, msg(1, 1))).toMatchObject({ ok: false, code: 'BAD_RANK' });
    expect(deposit(s, 'other', 1, 11, 0, 1, msg(1, 1))).toMatchObject({ ok: false, code: 'UNKNOWN_TASK' });
    expect(positions(s, 0)).toEqual([]);
    expect(storeStats(s).refused).toMatchObject({ GAP: 1, BAD_DEPOSIT: 5, BAD_RANK: 1, UNKNOWN_TASK: 1 });
  });

  it('a fenced sender\'s deposits are refused FENCED (1.2.4 clone exclusion)', () => {
    const s = guarded();
    expect(deposit(s, T, 1, 11, 0, 1, msg(1, 1))).toMatchObject({ ok: true });
    expect(fence(s, T, 1, 21)).toMatchObject({ ok: true });
    expect(deposit(s, T, 1, 11, 0, 2, msg(1, 2))).toMatchObject({ ok: false, code: 'FENCED' });
    expect(deposit(s, T, 1, 21, 0, 2, msg(1, 2))).toEqual({ ok: true, duplicate: false, pos: 2, last: true });
    // A receiver's store created by a deposit does not fence its own process.
    expect(fence(s, T, 0, 3)).toEqual({ ok: true, last: 2 });
  });
});

describe('PROTOCOL §11.6 channel memory: checkpoints and bounds (mpichv-dgrp 1.2.2 End Checkpoint)', () => {
  it('the counts per sender survive the log\'s garbage collection: a re-sent message below a checkpoint is still a duplicate', () => {
    const s = guarded();
    for (let ssn = 1; ssn <= 4; ssn++) deposit(s, T, 1, 11, 0, ssn, msg(1, ssn));
    expect(putCheckpoint(s, T, 0, 10, 1, 3, Uint8Array.of(9))).toMatchObject({ ok: true });
    expect(putCheckpoint(s, T, 0, 10, 2, 4, Uint8Array.of(9))).toMatchObject({ ok: true });
    expect(positions(s, 0)).toEqual([[4, 1, 4]]); // collected up to the older checkpoint's position
    expect(deposit(s, T, 1, 11, 0, 1, msg(1, 1))).toEqual({ ok: true, duplicate: true, pos: 0, last: true });
    expect(deposit(s, T, 1, 11, 0, 5, msg(1, 5))).toEqual({ ok: true, duplicate: false, pos: 5, last: true });
    expect(depositedCount(s, T, 0, 1)).toBe(5);
  });

  it('entriesAfter serves a subscription from a position, bounded per call; below the kept log it is STALE', () => {
    const s = guarded();
    for (let ssn = 1; ssn <= 5; ssn++) deposit(s, T, 1, 11, 0, ssn, msg(1, ssn));
    expect(entriesAfter(s, T, 0, 1, 2)).toMatchObject({ ok: true, first: 2, blobs: [msg(1, 2), msg(1, 3)] });
    expect(entriesAfter(s, T, 0, 5, 10)).toMatchObject({ ok: true, first: 6, blobs: [] });
    expect(entriesAfter(s, T, 7, 0, 10)).toMatchObject({ ok: true, first: 1, blobs: [] });
    putCheckpoint(s, T, 0, 10, 1, 3, Uint8Array.of(1));
    putCheckpoint(s, T, 0, 10, 2, 4, Uint8Array.of(1));
    expect(entriesAfter(s, T, 0, 2, 10)).toMatchObject({ ok: false, code: 'STALE' });
    expect(entriesAfter(s, T, 0, 3, 10)).toMatchObject({ ok: true, first: 4, blobs: [msg(1, 4), msg(1, 5)] });
  });

  it('undelivered entries count in the receiver\'s log bound (LOG_FULL) and the store\'s total (STORE_FULL)', () => {
    const s = guarded();
    const big = 1000 * 1024;
    const per = big + 18 + PROTECTOR_ENTRY_OVERHEAD_BYTES;
    const fits = Math.floor(PROTECTOR_MAX_LOG_BYTES / per);
    for (let ssn = 1; ssn <= fits; ssn++) expect(deposit(s, T, 1, 11, 0, ssn, msg(1, ssn, big))).toMatchObject({ ok: true });
    expect(deposit(s, T, 1, 11, 0, fits + 1, msg(1, fits + 1, big))).toMatchObject({ ok: false, code: 'LOG_FULL' });
    const small = guarded(100);
    expect(deposit(small, T, 1, 11, 0, 1, msg(1, 1, 100))).toMatchObject({ ok: false, code: 'STORE_FULL' });
    expect(depositedCount(small, T, 0, 1)).toBe(0);
  });
});

describe('PROTOCOL §11.6 channel memory: a message in fragments is appended whole (mpichv-dgrp 1.2.1)', () => {
  const big = (source: number, ssn: number, parts: number): Uint8Array[] =>
    encodeMessageEntries(source, { ssn, epoch: 0, comm: 0, tag: 1, structured: false, data: new Uint8Array((parts - 1) * LOG_FRAGMENT_BYTES + 10).fill(ssn) });

  it('fragments are held aside and appended together at the last, contiguous, between other senders\' messages', () => {
    const s = guarded();
    const frags = big(1, 1, 3);
    expect(deposit(s, T, 1, 11, 0, 1, frags[0]!)).toEqual({ ok: true, duplicate: false, pos: 0, last: false });
    expect(deposit(s, T, 2, 12, 0, 1, msg(2, 1))).toEqual({ ok: true, duplicate: false, pos: 1, last: true });
    expect(deposit(s, T, 1, 11, 0, 1, frags[1]!)).toEqual({ ok: true, duplicate: false, pos: 0, last: false });
    expect(positions(s, 0)).toEqual([[1, 2, 1]]);
    expect(storeStats(s).totalBytes).toBeGreaterThan(2 * LOG_FRAGMENT_BYTES); // held bytes count in the total
    expect(deposit(s, T, 1, 11, 0, 1, frags[2]!)).toEqual({ ok: true, duplicate: false, pos: 4, last: true });
    expect(positions(s, 0)).toEqual([[1, 2, 1], [2, 1, 1], [3, 1, 1], [4, 1, 1]]);
    expect(depositedCount(s, T, 0, 1)).toBe(1);
    // Re-sent whole by a replacement: duplicates, answered at the last fragment only.
    expect(frags.map((f) => deposit(s, T, 1, 21, 0, 1, f))).toEqual([false, false, true].map((last) => ({ ok: true, duplicate: true, pos: 0, last })));
  });

  it('a fragment out of order is GAP; a fragment 0 again restarts the message (a replacement re-sending it); release frees held bytes', () => {
    const s = guarded();
    const frags = big(1, 1, 3);
    expect(deposit(s, T, 1, 11, 0, 1, frags[1]!)).toMatchObject({ ok: false, code: 'GAP' });
    deposit(s, T, 1, 11, 0, 1, frags[0]!);
    expect(deposit(s, T, 1, 11, 0, 1, frags[2]!)).toMatchObject({ ok: false, code: 'GAP' });
    const held = storeStats(s).totalBytes;
    deposit(s, T, 1, 21, 0, 1, frags[0]!); // the sender died after fragment 0; its replacement starts over
    expect(storeStats(s).totalBytes).toBe(held);
    deposit(s, T, 1, 21, 0, 1, frags[1]!);
    expect(deposit(s, T, 1, 21, 0, 1, frags[2]!)).toMatchObject({ ok: true, pos: 3, last: true });
    deposit(s, T, 2, 12, 0, 1, big(2, 1, 2)[0]!);
    expect(storeStats(s).totalBytes).toBeGreaterThan(0);
    release(s, T);
    expect(storeStats(s).totalBytes).toBe(0);
  });
});
