// Binding a connection to the peer at its other end (PROTOCOL §2.5). A listener sends a fresh
// random nonce on every connection it accepts; the dialer answers with a frame holding only a
// `bind.proof` of that nonce, under its signature or link MAC (§2.2, §2.4). Only that binds the
// connection to the dialer. A frame captured on another connection, replayed here, proves
// nothing: its nonce is another connection's, and no other frame is read before the proof. So
// a stranger's connection never carries a member's replies, and never counts as the member's.
import { BIND_NONCE_BYTES } from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { err, ok, type Result } from '../result.ts';
import { decodeFrame, encodeFrame, type DecodeContext, type EncodeContext } from './frame.ts';

/** The proof `ctx.signer` sends `listener` for the connection whose nonce is `nonce`. */
export function bindProof(ctx: EncodeContext, listener: ProcessId, nonce: Uint8Array): Uint8Array {
  return encodeFrame({ from: ctx.signer.id, to: listener, items: [{ type: 'bind.proof', nonce }] }, ctx);
}

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** The dialer that `data` proves to be, for the connection whose nonce is `nonce`; total. A
 *  valid frame that is not a lone proof is UNEXPECTED; a proof of another nonce is REPLAYED. */
export function openBindProof(data: Uint8Array, nonce: Uint8Array, ctx: DecodeContext): Result<ProcessId> {
  const frame = decodeFrame(data, ctx);
  if (!frame.ok) return frame;
  const [item, ...rest] = frame.value.items;
  if (item?.type !== 'bind.proof' || rest.length > 0) return err('UNEXPECTED', `${frame.value.from}: a frame before its bind.proof`);
  if (item.nonce.length !== BIND_NONCE_BYTES || !sameBytes(item.nonce, nonce)) return err('REPLAYED', `${frame.value.from}: the proof of another connection`);
  return ok(frame.value.from);
}
