// Binding a connection to the processes at its two ends (PROTOCOL §2.5). A listener sends a
// fresh random nonce on every connection it accepts; the dialer answers with a frame holding only
// a `bind.proof` of that nonce, under its signature or link MAC (§2.2, §2.4), and a challenge of
// its own; the listener answers that challenge the same way. Only the dialer's proof binds the
// connection at the listener, and only the listener's makes it usable at the dialer. A frame
// captured on another connection, replayed here, proves nothing: its nonce is another
// connection's, and no other frame is read before the proof. So a stranger's connection never
// carries a member's replies, and a stranger listening on a member's port (a squatted one,
// §10.6) never gets a frame meant for the member.
import { BIND_NONCE_BYTES } from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { err, ok, type Result } from '../../base/result.ts';
import { bytesEqual } from '../../base/bytes.ts';
import { decodeFrame, encodeFrame, type DecodeContext, type EncodeContext } from './frame.ts';

/** The proof `ctx.signer` sends `to` for the connection whose nonce (from `to`) is `nonce`,
 *  with `challenge` for `to` to answer (empty in a listener's answer). */
export function bindProof(ctx: EncodeContext, to: ProcessId, nonce: Uint8Array, challenge: Uint8Array): Uint8Array {
  return encodeFrame({ from: ctx.signer.id, to, items: [{ type: 'bind.proof', nonce, challenge }] }, ctx);
}

/** Who `data` proves to be, for the connection whose nonce is `nonce`, and the challenge it
 *  asks to have answered; total. A valid frame that is not a lone proof is UNEXPECTED; a proof
 *  of another nonce is REPLAYED; a challenge neither empty nor BIND_NONCE_BYTES is malformed. */
export function openBindProof(data: Uint8Array, nonce: Uint8Array, ctx: DecodeContext): Result<{ from: ProcessId; challenge: Uint8Array }> {
  const frame = decodeFrame(data, ctx);
  if (!frame.ok) return frame;
  const [item, ...rest] = frame.value.items;
  if (item?.type !== 'bind.proof' || rest.length > 0) return err('UNEXPECTED', `${frame.value.from}: a frame before its bind.proof`);
  if (item.nonce.length !== BIND_NONCE_BYTES || !bytesEqual(item.nonce, nonce)) return err('REPLAYED', `${frame.value.from}: the proof of another connection`);
  if (item.challenge.length !== 0 && item.challenge.length !== BIND_NONCE_BYTES) return err('WIRE_MALFORMED', `${frame.value.from}: a challenge of ${item.challenge.length} bytes`);
  return ok({ from: frame.value.from, challenge: item.challenge });
}
