// The records of G-MPI's TCP mesh (mesh.ts): one connection (Conn, made by createConn) with
// its handshake nonces, sequence numbers, backpressure state and waiting sends; a peer's entry
// (Peer); a posted receive (PendingRecv); the rules for a frame after the handshake
// (receiveFrame); when a refused dial is tried again (redialDelayMs);
// and the waits for peers to connect (ConnectWaits), with the verbs that settle them. No
// sockets are opened or read here.
import type { Socket } from 'node:net';
import type { Message } from './matching.ts';
import { DIAL_RETRY_FIRST_MS, DIAL_RETRY_LIMIT, DIAL_RETRY_MAX_MS, type LostReason, MAX_CONNECT_WAITERS, P2PError } from './p2p-types.ts';
import { FrameDecoder, type GmpiFrame, type HelloFrame, MAX_U32 } from './wire.ts';

export type Waiter = { resolve: () => void; reject: (e: P2PError) => void };
export type PendingRecv = { source: number; tag: number; comm: number; resolve: (m: Message) => void; reject: (e: P2PError) => void };
export type Conn = {
  socket: Socket;
  decoder: FrameDecoder;
  /** Set once the connection is attributed to a peer (hellos exchanged and verified). */
  id: number | null;
  /** The VPID we dialled (null: accepted). */
  dialledId: number | null;
  /** Dialled: where, which attempt, and whether TCP connected (only then is a close before the
   *  challenge a refusal worth retrying). */
  dial: { host: string; port: number; attempt: number; connected: boolean } | null;
  /** An accepted connection whose hello named this VPID before we expected it. */
  heldId: number | null;
  /** The remote address an accepted connection counts against (MAX_UNAUTHENTICATED_PER_ADDRESS). */
  address: string;
  /** Handshake nonces (PROTOCOL §9.5): the acceptor's goes in its challenge at accept, the
   *  dialler's in its hello once the challenge came. Null until then. */
  ourNonce: Uint8Array | null;
  theirNonce: Uint8Array | null;
  /** Accepted, not yet authenticated: closed with AUTH_TIMEOUT when this fires. */
  authTimer: NodeJS.Timeout | null;
  /** A hello that arrived before this process had its task key: checked when it comes. */
  awaitingKey: HelloFrame | null;
  nextSendSeq: number;
  expectedSeq: number;
  paused: boolean;
  dead: boolean;
  /** Sends whose bytes are queued in the socket beyond its high-water mark, awaiting 'drain'. */
  drainWaiters: Waiter[];
};
export type Peer = { readonly id: number; state: 'expected' | 'connected' | 'lost' | 'finished'; conn: Conn | null };

export function createConn(socket: Socket, maxMessageBytes: number, dialledId: number | null, dial: Conn['dial']): Conn {
  return {
    socket, decoder: new FrameDecoder({ maxMessageBytes }), id: null, dialledId, dial, heldId: null,
    address: socket.remoteAddress ?? 'unknown', ourNonce: null, theirNonce: null, authTimer: null, awaitingKey: null,
    nextSendSeq: 0, expectedSeq: 0, paused: false, dead: false, drainWaiters: [],
  };
}

/** A frame on a connection attributed to peer `id`: a message (the expected sequence advances),
 *  the peer's bye, or why the connection is no longer trusted. */
export function receiveFrame(conn: Pick<Conn, 'expectedSeq'>, id: number, frame: GmpiFrame):
  { readonly kind: 'fail'; readonly reason: LostReason } | { readonly kind: 'bye' } | { readonly kind: 'message'; readonly message: Message } {
  const fail = (code: LostReason['code'], detail: string) => ({ kind: 'fail', reason: { code, detail } }) as const;
  if (frame.type === 'hello') return fail('UNEXPECTED_HELLO', 'second hello');
  if (frame.type === 'challenge') return fail('UNEXPECTED_CHALLENGE', 'challenge after the handshake');
  if (frame.id !== id) return fail('BAD_SENDER', `sender ${frame.id} on ${id}'s connection`);
  // TCP delivers in order, so a gap or repeat means a broken or hostile sender: stop trusting
  // the stream rather than deliver out of MPI order. A bye counts what came before it.
  if (frame.seq !== conn.expectedSeq) return fail('BAD_SEQUENCE', `${frame.type} seq ${frame.seq}, expected ${conn.expectedSeq}`);
  if (frame.type === 'bye') return { kind: 'bye' };
  conn.expectedSeq = frame.seq === MAX_U32 ? 0 : frame.seq + 1;
  return { kind: 'message', message: { source: id, tag: frame.tag, comm: frame.comm, structured: frame.structured, data: frame.payload } };
}

/** A dialled connection that closed: if TCP connected but it closed before the challenge, a full
 *  acceptor refused it (MAX_UNAUTHENTICATED_*): dial again after this backoff (doubling from
 *  DIAL_RETRY_FIRST_MS up to DIAL_RETRY_MAX_MS), up to DIAL_RETRY_LIMIT attempts. Null: a failure. */
export function redialDelayMs(conn: Conn): number | null {
  const d = conn.dial;
  if (conn.dead || d === null || conn.dialledId === null || !d.connected || conn.theirNonce !== null || d.attempt >= DIAL_RETRY_LIMIT) return null;
  return Math.min(DIAL_RETRY_MAX_MS, DIAL_RETRY_FIRST_MS * 2 ** (d.attempt - 1));
}

// ---- waits for peers to connect (P2P.whenConnected) ----------------------------------------------

type ConnectWaiter = Waiter & { readonly ids: readonly number[] };
/** Pending whenConnected() calls, each naming the peers it still waits for; at most MAX_CONNECT_WAITERS. */
export type ConnectWaits = { list: ConnectWaiter[] };

export function createConnectWaits(): ConnectWaits {
  return { list: [] };
}

/** Wait for every one of `ids` to connect; LIMIT when MAX_CONNECT_WAITERS waits are pending. */
export function waitForConnected(w: ConnectWaits, ids: readonly number[]): Promise<void> {
  if (w.list.length >= MAX_CONNECT_WAITERS) return Promise.reject(new P2PError('LIMIT', `${MAX_CONNECT_WAITERS} connection waits pending`));
  return new Promise<void>((resolve, reject) => w.list.push({ ids, resolve, reject }));
}

/** Resolve the waits whose peers are all connected now. */
export function settleConnected(w: ConnectWaits, isConnected: (id: number) => boolean): void {
  w.list = w.list.filter((c) => {
    if (!c.ids.every(isConnected)) return true;
    c.resolve();
    return false;
  });
}

/** Reject the waits that name `id` (lost, finished or removed). */
export function rejectWaitsNaming(w: ConnectWaits, id: number, error: () => P2PError): void {
  w.list = w.list.filter((c) => {
    if (!c.ids.includes(id)) return true;
    c.reject(error());
    return false;
  });
}

/** Reject every wait (abort, close). */
export function rejectAllWaits(w: ConnectWaits, error: () => P2PError): void {
  for (const c of w.list.splice(0)) c.reject(error());
}
