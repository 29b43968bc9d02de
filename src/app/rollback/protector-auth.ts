// The protector's hello (docs/PROTOCOL.md §11.4, authenticated as G-MPI's §9.5 with its own
// label): a task process proves to its rank's protector that it holds the task key, and the
// protector proves the same back in its welcome, so neither a stranger without the key nor a
// process of another task can append to, put into or fetch a rank's store.
//
//   transcript = "trine-protector-hello-v1" ‖ 0x00 ‖ role u8 (1 process, 2 protector)
//              ‖ task id length u8 ‖ task id (ASCII) ‖ rank u32 ‖ incarnation u32
//              ‖ process nonce (32 bytes) ‖ protector nonce (32 bytes)
//
// The protector's nonce is its challenge, fresh per connection, so a hello recorded on one
// connection verifies on no other; the role byte keeps a welcome from being reflected as a hello;
// the rank and incarnation keep one process's hello from speaking for another rank, or for a
// later holder of its rank (which would fence the real one, mpichv-dgrp 1.2.4). The label keeps a
// G-MPI hello from ever verifying as a protector hello, and back. Constant-time comparison.
import { randomBytes } from 'node:crypto';
import { assert } from '../../base/result.ts';
import { PROTECTOR_NONCE_BYTES } from '../../core/wire/protector-wire.ts';
import { transcriptMac, transcriptMacValid } from '../gmpi/hello-auth.ts';

const LABEL = new TextEncoder().encode('trine-protector-hello-v1\0');
const ROLE = { process: 1, protector: 2 } as const;
export type ProtectorRole = keyof typeof ROLE;

export type ProtectorTranscript = {
  readonly role: ProtectorRole;
  readonly task: string;
  readonly rank: number;
  readonly incarnation: number;
  readonly processNonce: Uint8Array;
  readonly protectorNonce: Uint8Array;
};

/** A fresh nonce for a challenge or a hello. */
export function protectorNonce(): Uint8Array {
  return new Uint8Array(randomBytes(PROTECTOR_NONCE_BYTES));
}

function fields(t: ProtectorTranscript): Uint8Array[] {
  assert(t.processNonce.length === PROTECTOR_NONCE_BYTES && t.protectorNonce.length === PROTECTOR_NONCE_BYTES, 'nonce size');
  const task = new TextEncoder().encode(t.task);
  assert(task.length <= 0xff, 'task id length');
  assert(Number.isInteger(t.rank) && t.rank >= 0 && t.rank <= 0xffffffff, 'rank is a u32');
  assert(Number.isInteger(t.incarnation) && t.incarnation >= 0 && t.incarnation <= 0xffffffff, 'incarnation is a u32');
  const ids = new Uint8Array(8);
  const view = new DataView(ids.buffer);
  view.setUint32(0, t.rank, false);
  view.setUint32(4, t.incarnation, false);
  return [Uint8Array.of(ROLE[t.role], task.length), task, ids, t.processNonce, t.protectorNonce];
}

/** The MAC of a protector hello (role process) or welcome (role protector). */
export function protectorMac(key: Uint8Array, t: ProtectorTranscript): Uint8Array {
  return transcriptMac(key, LABEL, fields(t));
}

/** Whether `mac` is that MAC (constant-time). A peer's incarnation beyond a u32 never verifies. */
export function protectorMacValid(key: Uint8Array, t: ProtectorTranscript, mac: Uint8Array): boolean {
  if (t.incarnation > 0xffffffff || t.processNonce.length !== PROTECTOR_NONCE_BYTES || t.protectorNonce.length !== PROTECTOR_NONCE_BYTES) return false;
  return transcriptMacValid(key, LABEL, fields(t), mac);
}
