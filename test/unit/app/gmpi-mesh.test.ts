// mesh.ts stepped by hand with stand-in sockets: the shared record createMesh makes, the
// errors a call gets from it (gate, unknown), a held hello attributed once its peer is
// expected (addExpected), a deliberate close of a held connection (close1), and a message
// delivered to a posted receive or queued (deliver).
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { postRecv } from '../../../src/app/gmpi/matching.ts';
import { abortError, addExpected, close1, conns, createMesh, deliver, gate, unknown } from '../../../src/app/gmpi/mesh.ts';
import { createConn, waitForConnected } from '../../../src/app/gmpi/p2p-conn.ts';
import { helloNonce, TASK_KEY_BYTES } from '../../../src/app/gmpi/hello-auth.ts';
import { P2PError } from '../../../src/app/gmpi/p2p-types.ts';

type FakeSocket = { remoteAddress: string; written: unknown[]; paused: boolean; destroyed: boolean };
const fakeSocket = (): FakeSocket & Socket => {
  const s = {
    remoteAddress: '127.0.0.1', written: [] as unknown[], paused: false, destroyed: false,
    write(b: unknown) { s.written.push(b); return true; },
    pause() { s.paused = true; }, resume() { s.paused = false; }, destroy() { s.destroyed = true; }, end() {},
  };
  return s as unknown as FakeSocket & Socket;
};
const mesh = () => {
  const m = createMesh({ taskId: 't1', self: 2 }, 1024, 4096);
  m.taskKey = new Uint8Array(TASK_KEY_BYTES).fill(7);
  return m;
};
/** An accepted connection whose hello from `id` verified while `id` was not expected yet. */
const heldConn = (m: ReturnType<typeof mesh>, id: number) => {
  const conn = createConn(fakeSocket(), m.maxMessageBytes, null, null);
  conn.ourNonce = helloNonce();
  conn.theirNonce = helloNonce();
  conn.heldId = id;
  m.held.set(id, conn);
  return conn;
};

describe('createMesh, gate, unknown', () => {
  it('starts open, empty and unalerted; the alert flag then closing set what calls fail with', () => {
    const m = mesh();
    expect(m.authTimeoutMs).toBeGreaterThan(0);
    expect(conns(m)).toEqual([]);
    expect(gate(m)).toBeNull();
    m.alert = { reason: 'why' };
    expect(gate(m)).toMatchObject({ code: 'ABORTED' });
    expect(abortError(m).message).toContain('why');
    m.closed = true;
    expect(gate(m)).toMatchObject({ code: 'CLOSED' });
  });
  it('names a removed VPID as removed and any other stranger as unknown', () => {
    const m = mesh();
    m.removed.add(5);
    expect(unknown(m, 5).code).toBe('PEER_REMOVED');
    expect(unknown(m, 6).code).toBe('UNKNOWN_PEER');
  });
});

describe('held hellos', () => {
  it('addExpected attributes a held connection: the peer connects, our hello goes out, waits settle', async () => {
    const m = mesh();
    const conn = heldConn(m, 4);
    const connected = waitForConnected(m.connectWaits, [4]);
    addExpected(m, 4);
    await expect(connected).resolves.toBeUndefined();
    expect(m.held.size).toBe(0);
    expect(m.peers.get(4)).toMatchObject({ state: 'connected', conn });
    expect(conn).toMatchObject({ id: 4, heldId: null });
    expect((conn.socket as unknown as FakeSocket).written).toHaveLength(1);
    expect(conns(m)).toEqual([conn]);
  });
  it('close1 of a held connection forgets it and rejects its waiting sends', async () => {
    const m = mesh();
    const conn = heldConn(m, 4);
    const send = new Promise<void>((resolve, reject) => conn.drainWaiters.push({ resolve, reject }));
    close1(m, conn, { code: 'REMOVED', detail: 'peer 4 removed' }, () => new P2PError('PEER_REMOVED', 'gone'));
    await expect(send).rejects.toMatchObject({ code: 'PEER_REMOVED' });
    expect(conn.dead).toBe(true);
    expect((conn.socket as unknown as FakeSocket).destroyed).toBe(true);
    expect(m.held.size).toBe(0);
  });
});

describe('deliver', () => {
  it('hands a message to the matching posted receive, else queues it', async () => {
    const m = mesh();
    const got = new Promise((resolve, reject) => postRecv(m.matching, { source: 3, tag: 1, comm: 0, resolve, reject }));
    const message = { source: 3, tag: 1, comm: 0, structured: false, data: new Uint8Array([9]) };
    deliver(m, message);
    await expect(got).resolves.toBe(message);
    deliver(m, { ...message, tag: 2 });
    expect(m.matching.unexpected).toHaveLength(1);
  });
});
