// The G-MPI handshake's authentication (docs/PROTOCOL.md §9.5): who may attach a TCP connection
// to a VPID of a task. Every process of a task holds the task key, which the operator drew at
// submit and the agent handed to the process over its socket (never in the environment or on a
// command line, which other users may read through /proc). A hello proves that its sender holds
// the key by an HMAC-SHA256 under it over the transcript below; nothing else in the hello is
// secret.
//
//   transcript = "trine-gmpi-hello-v2" ‖ 0x00 ‖ role u8 (1 dialler, 2 acceptor)
//              ‖ task id length u8 ‖ task id (ASCII) ‖ sender VPID u32 ‖ receiver VPID u32
//              ‖ dialler nonce (32 bytes) ‖ acceptor nonce (32 bytes)
//
// Replay: the acceptor's nonce is fresh for every connection (its challenge), and the
// dialler's for every attempt, so a hello recorded on one connection verifies on no other, in
// either direction. The role byte keeps the acceptor's reply from being reflected back as a
// dialler's hello; the VPIDs keep a hello for one pair from serving another. The key is never
// sent, and the comparison is constant-time.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { TASK_KEY_BYTES } from '../../core/constants.ts';
import { assert } from '../../base/result.ts';
import { HELLO_MAC_BYTES, HELLO_NONCE_BYTES } from './wire.ts';

/** A task key: 256 bits, drawn by the operator's `trine submit` (PROTOCOL §8.1). */
export { TASK_KEY_BYTES };

const LABEL = new TextEncoder().encode('trine-gmpi-hello-v2\0');
const ROLE = { dialler: 1, acceptor: 2 } as const;
export type HelloRole = keyof typeof ROLE;

export type HelloTranscript = {
  readonly role: HelloRole;
  readonly taskId: string;
  readonly sender: number;
  readonly receiver: number;
  readonly diallerNonce: Uint8Array;
  readonly acceptorNonce: Uint8Array;
};

/** A fresh handshake nonce. */
export function helloNonce(): Uint8Array {
  return new Uint8Array(randomBytes(HELLO_NONCE_BYTES));
}

export function isTaskKey(key: unknown): key is Uint8Array {
  return key instanceof Uint8Array && key.length === TASK_KEY_BYTES;
}

/** The MAC a hello carries. Our own inputs only: a bad one is our bug (STYLE.md 8). */
export function helloMac(key: Uint8Array, t: HelloTranscript): Uint8Array {
  assert(t.diallerNonce.length === HELLO_NONCE_BYTES && t.acceptorNonce.length === HELLO_NONCE_BYTES, 'nonce size');
  const task = new TextEncoder().encode(t.taskId);
  assert(task.length <= 0xff, 'task id length');
  const ids = new Uint8Array(8);
  const view = new DataView(ids.buffer);
  view.setUint32(0, t.sender, false);
  view.setUint32(4, t.receiver, false);
  return transcriptMac(key, LABEL, [Uint8Array.of(ROLE[t.role], task.length), task, ids, t.diallerNonce, t.acceptorNonce]);
}

/** Whether `mac` is the hello MAC of this transcript under `key` (constant-time). */
export function helloMacValid(key: Uint8Array, t: HelloTranscript, mac: Uint8Array): boolean {
  if (mac.length !== HELLO_MAC_BYTES) return false;
  return timingSafeEqual(helloMac(key, t), mac);
}

/** HMAC-SHA256 under a task key over `label` ‖ `fields`, one after the other: the MAC of any
 *  hello that proves its sender holds the task key (this file's G-MPI hello; the protector's,
 *  src/app/rollback/protector-auth.ts, under its own label so neither verifies as the other). */
export function transcriptMac(key: Uint8Array, label: Uint8Array, fields: readonly Uint8Array[]): Uint8Array {
  assert(isTaskKey(key), 'task key size');
  const h = createHmac('sha256', key).update(label);
  for (const f of fields) h.update(f);
  const mac = h.digest();
  return new Uint8Array(mac.buffer, mac.byteOffset, HELLO_MAC_BYTES);
}

/** Whether `mac` is transcriptMac(key, label, fields) (constant-time). */
export function transcriptMacValid(key: Uint8Array, label: Uint8Array, fields: readonly Uint8Array[], mac: Uint8Array): boolean {
  if (mac.length !== HELLO_MAC_BYTES) return false;
  return timingSafeEqual(transcriptMac(key, label, fields), mac);
}
