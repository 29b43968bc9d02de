// p2p-conn.ts stepped by hand: the frame rules after the handshake, when a refused dial is
// tried again, and the waits for peers to connect (settled as peers connect, are lost, or
// everything aborts).
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  createConn, createConnectWaits, receiveFrame, redialDelayMs, rejectAllWaits, rejectWaitsNaming, settleConnected, waitForConnected,
} from '../../../src/app/gmpi/p2p-conn.ts';
import { DIAL_RETRY_FIRST_MS, DIAL_RETRY_LIMIT, DIAL_RETRY_MAX_MS, MAX_CONNECT_WAITERS, P2PError } from '../../../src/app/gmpi/p2p-types.ts';
import { MAX_U32 } from '../../../src/app/gmpi/wire.ts';

const socket = { remoteAddress: '127.0.0.1' } as unknown as Socket;
const dialled = (attempt: number, connected = true) => createConn(socket, 1024, 3, { host: 'h', port: 1, attempt, connected });

describe('receiveFrame', () => {
  const data = (seq: number, id = 3) => ({ type: 'data', id, comm: 0, tag: 5, seq, structured: false, payload: new Uint8Array([1]) }) as const;
  it('delivers frames in sequence, wrapping after MAX_U32, then the bye', () => {
    const conn = { expectedSeq: 0 };
    expect(receiveFrame(conn, 3, data(0))).toMatchObject({ kind: 'message', message: { source: 3, tag: 5, comm: 0 } });
    expect(conn.expectedSeq).toBe(1);
    conn.expectedSeq = MAX_U32;
    expect(receiveFrame(conn, 3, data(MAX_U32)).kind).toBe('message');
    expect(conn.expectedSeq).toBe(0);
    expect(receiveFrame(conn, 3, { type: 'bye', id: 3, seq: 0 })).toEqual({ kind: 'bye' });
  });
  it('stops trusting a gap, a repeat, another sender or a second handshake frame', () => {
    const conn = { expectedSeq: 2 };
    expect(receiveFrame(conn, 3, data(3))).toMatchObject({ reason: { code: 'BAD_SEQUENCE' } });
    expect(receiveFrame(conn, 3, data(1))).toMatchObject({ reason: { code: 'BAD_SEQUENCE' } });
    expect(receiveFrame(conn, 3, data(2, 4))).toMatchObject({ reason: { code: 'BAD_SENDER' } });
    expect(receiveFrame(conn, 3, { type: 'challenge', id: 3, nonce: new Uint8Array(16) })).toMatchObject({ reason: { code: 'UNEXPECTED_CHALLENGE' } });
    expect(receiveFrame(conn, 3, { type: 'hello', id: 3, taskId: 't', nonce: new Uint8Array(16), mac: new Uint8Array(32) })).toMatchObject({ reason: { code: 'UNEXPECTED_HELLO' } });
    expect(conn.expectedSeq).toBe(2);
  });
});

describe('redialDelayMs', () => {
  it('doubles from DIAL_RETRY_FIRST_MS, capped at DIAL_RETRY_MAX_MS, for a dial refused before its challenge', () => {
    expect(redialDelayMs(dialled(1))).toBe(DIAL_RETRY_FIRST_MS);
    expect(redialDelayMs(dialled(2))).toBe(Math.min(DIAL_RETRY_MAX_MS, 2 * DIAL_RETRY_FIRST_MS));
    expect(redialDelayMs(dialled(DIAL_RETRY_LIMIT - 1))).toBeLessThanOrEqual(DIAL_RETRY_MAX_MS);
  });
  it('is null (a failure) past the limit, before TCP connected, after the challenge, or for an accepted connection', () => {
    expect(redialDelayMs(dialled(DIAL_RETRY_LIMIT))).toBeNull();
    expect(redialDelayMs(dialled(1, false))).toBeNull();
    const challenged = dialled(1);
    challenged.theirNonce = new Uint8Array(16);
    expect(redialDelayMs(challenged)).toBeNull();
    expect(redialDelayMs(createConn(socket, 1024, null, null))).toBeNull();
  });
});

describe('connect waits', () => {
  it('resolve once every named peer is connected; reject when one of them is lost', async () => {
    const w = createConnectWaits();
    const both = waitForConnected(w, [2, 3]);
    const three = waitForConnected(w, [3]);
    const connected = new Set([2]);
    settleConnected(w, (id) => connected.has(id));
    expect(w.list).toHaveLength(2);
    rejectWaitsNaming(w, 3, () => new P2PError('PEER_LOST', 'lost 3'));
    await expect(both).rejects.toMatchObject({ code: 'PEER_LOST' });
    await expect(three).rejects.toMatchObject({ code: 'PEER_LOST' });
    const two = waitForConnected(w, [2]);
    settleConnected(w, (id) => connected.has(id));
    await expect(two).resolves.toBeUndefined();
    expect(w.list).toHaveLength(0);
  });
  it('are bounded by MAX_CONNECT_WAITERS and all rejected on abort', async () => {
    const w = createConnectWaits();
    const all = Array.from({ length: MAX_CONNECT_WAITERS }, () => waitForConnected(w, [5]));
    await expect(waitForConnected(w, [5])).rejects.toMatchObject({ code: 'LIMIT' });
    rejectAllWaits(w, () => new P2PError('ABORTED', 'alert'));
    for (const p of all) await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    expect(w.list).toHaveLength(0);
  });
});
