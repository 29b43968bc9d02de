// The G-MPI connection handshake (docs/PROTOCOL.md §9.5, MACs in hello-auth.ts) as decisions
// P2P applies: the acceptor's challenge, the dialler's answer to it and its check of the
// acceptor's hello, the acceptor's check of the dialler's hello and of who may dial it, and
// the acceptor's reply hello. Also the strangers: accepted connections not yet authenticated,
// counted per remote address and in all (MAX_UNAUTHENTICATED_*). No sockets: mesh.ts writes
// the frames, closes connections and attributes them to peers.
import { bytesEqual } from '../../base/bytes.ts';
import { assert } from '../../base/result.ts';
import { helloMac, helloMacValid, helloNonce } from './hello-auth.ts';
import {
  type LostReason, MAX_UNATTRIBUTED_CONNECTIONS, MAX_UNAUTHENTICATED_CONNECTIONS, MAX_UNAUTHENTICATED_PER_ADDRESS,
} from './p2p-types.ts';
import type { ChallengeFrame, GmpiFrame, HelloFrame } from './wire.ts';

/** One side of a connection's handshake: the nonces drawn and received. Null until then (the
 *  acceptor's goes in its challenge at accept, the dialler's in its hello once the challenge came). */
export type HandshakeNonces = { ourNonce: Uint8Array | null; theirNonce: Uint8Array | null };
/** Who we are, under which key. */
export type HandshakeSelf = { readonly taskId: string; readonly self: number; readonly key: Uint8Array };

type Fail = { readonly kind: 'fail'; readonly reason: LostReason };
const fail = (code: LostReason['code'], detail: string): Fail => ({ kind: 'fail', reason: { code, detail } });

/** The acceptor's challenge, with a fresh nonce (drawn into `conn`). */
export function challenge(self: number, conn: HandshakeNonces): ChallengeFrame {
  conn.ourNonce = helloNonce();
  return { type: 'challenge', id: self, nonce: conn.ourNonce };
}

/** The dialler's side: the acceptor's challenge, answered with our hello ('send'); then the
 *  acceptor's hello, checked ('verified': attribute the connection to `dialled`). */
export function diallerStep(me: HandshakeSelf, conn: HandshakeNonces, dialled: number, frame: GmpiFrame): Fail | { readonly kind: 'send'; readonly frame: HelloFrame } | { readonly kind: 'verified' } {
  if (conn.theirNonce === null) {
    if (frame.type !== 'challenge') return fail('CHALLENGE_EXPECTED', `${frame.type} before the challenge`);
    if (frame.id !== dialled) return fail('WRONG_ID', `challenge from ${frame.id}, dialled ${dialled}`);
    conn.theirNonce = new Uint8Array(frame.nonce);
    conn.ourNonce = helloNonce();
    const mac = helloMac(me.key, {
      role: 'dialler', taskId: me.taskId, sender: me.self, receiver: dialled, diallerNonce: conn.ourNonce, acceptorNonce: conn.theirNonce,
    });
    return { kind: 'send', frame: { type: 'hello', id: me.self, taskId: me.taskId, nonce: conn.ourNonce, mac } };
  }
  if (frame.type === 'challenge') return fail('UNEXPECTED_CHALLENGE', 'second challenge');
  if (frame.type !== 'hello') return fail('HELLO_EXPECTED', 'message before hello');
  if (frame.taskId !== me.taskId) return fail('WRONG_TASK', `hello from task ${frame.taskId}`);
  if (frame.id !== dialled) return fail('WRONG_ID', `hello from ${frame.id}, dialled ${dialled}`);
  const ourNonce = conn.ourNonce;
  assert(ourNonce !== null, 'our nonce is drawn with the challenge');
  const transcript = { role: 'acceptor', taskId: me.taskId, sender: dialled, receiver: me.self, diallerNonce: ourNonce, acceptorNonce: conn.theirNonce } as const;
  if (!bytesEqual(frame.nonce, conn.theirNonce) || !helloMacValid(me.key, transcript, frame.mac)) {
    return fail('BAD_MAC', `hello from ${frame.id} does not verify under the task key`);
  }
  return { kind: 'verified' };
}

/** The acceptor's check of the dialler's hello: its MAC, against the nonce of our challenge on
 *  this very connection, so nothing a stranger says is acted on (the task id is checked first,
 *  by the caller, before the key may be missing). Verified: their nonce is kept in `conn`. */
export function checkHello(me: HandshakeSelf, conn: HandshakeNonces, hello: HelloFrame): Fail | { readonly kind: 'verified' } {
  const ourNonce = conn.ourNonce;
  assert(ourNonce !== null, 'an accepted connection has sent its challenge');
  const transcript = { role: 'dialler', taskId: hello.taskId, sender: hello.id, receiver: me.self, diallerNonce: hello.nonce, acceptorNonce: ourNonce } as const;
  if (!helloMacValid(me.key, transcript, hello.mac)) return fail('BAD_MAC', `hello claiming ${hello.id} does not verify under the task key`);
  conn.theirNonce = new Uint8Array(hello.nonce);
  return { kind: 'verified' };
}

/** What the acceptor knows of the VPID an authenticated hello names. */
export type HelloSender = {
  readonly id: number;
  readonly self: number;
  readonly removed: boolean;
  /** Its peer entry: undefined if unknown yet. */
  readonly peer: { readonly state: 'expected' | 'connected' | 'lost' | 'finished'; readonly hasConn: boolean } | undefined;
  readonly alreadyHeld: boolean;
  readonly heldCount: number;
};

/** Who may dial us: the higher VPID dials the lower (one connection per pair, no tie to break);
 *  a removed peer never; an unknown one, or a lost one maybe about to be revived (recovery), is
 *  held until expected; an expected one without a connection is attributed. */
export function admitHello(s: HelloSender): Fail | { readonly kind: 'hold' } | { readonly kind: 'attribute' } {
  if (s.id <= s.self) return fail('WRONG_ID', `hello from ${s.id}: only higher ids dial ${s.self}`);
  if (s.removed) return fail('WRONG_ID', `hello from removed peer ${s.id}`);
  if (s.peer === undefined || s.peer.state === 'lost') {
    if (s.alreadyHeld) return fail('DUPLICATE_PEER', `a hello from ${s.id} is already held`);
    if (s.heldCount >= MAX_UNATTRIBUTED_CONNECTIONS) return fail('TOO_MANY_CONNECTIONS', `${s.heldCount} held connections`);
    return { kind: 'hold' };
  }
  if (s.peer.state !== 'expected' || s.peer.hasConn) return fail('DUPLICATE_PEER', `${s.id} already connected or lost`);
  return { kind: 'attribute' };
}

/** The acceptor's reply hello: proves to the dialler that it reached a process of the task. */
export function acceptorHello(me: HandshakeSelf, conn: HandshakeNonces, id: number): HelloFrame {
  assert(conn.ourNonce !== null && conn.theirNonce !== null, 'attributing an unauthenticated connection');
  const mac = helloMac(me.key, {
    role: 'acceptor', taskId: me.taskId, sender: me.self, receiver: id, diallerNonce: conn.theirNonce, acceptorNonce: conn.ourNonce,
  });
  return { type: 'hello', id: me.self, taskId: me.taskId, nonce: conn.ourNonce, mac };
}

// ---- strangers ---------------------------------------------------------------------------------

/** Accepted connections whose hello is not verified yet, and their count by remote address. */
export type Strangers<C> = { readonly conns: Set<C>; readonly byAddress: Map<string, number> };

export function createStrangers<C>(): Strangers<C> {
  return { conns: new Set(), byAddress: new Map() };
}

/** Count a new accepted connection from `address`, or the refusal when a cap is reached (it is
 *  then closed before we spend a challenge on it). */
export function admitStranger<C>(s: Strangers<C>, conn: C, address: string): LostReason | null {
  const fromAddress = s.byAddress.get(address) ?? 0;
  if (s.conns.size >= MAX_UNAUTHENTICATED_CONNECTIONS || fromAddress >= MAX_UNAUTHENTICATED_PER_ADDRESS) {
    return { code: 'TOO_MANY_CONNECTIONS', detail: `${fromAddress} unauthenticated connections from ${address}, ${s.conns.size} in all` };
  }
  s.conns.add(conn);
  s.byAddress.set(address, fromAddress + 1);
  return null;
}

/** A connection is no longer a stranger (authenticated or closed); false if it was not one. */
export function leaveStrangers<C>(s: Strangers<C>, conn: C, address: string): boolean {
  if (!s.conns.delete(conn)) return false;
  const left = (s.byAddress.get(address) ?? 1) - 1;
  if (left > 0) s.byAddress.set(address, left);
  else s.byAddress.delete(address);
  return true;
}
