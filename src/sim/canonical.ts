// Canonical keys and readable descriptions of wire values, for the invariant checker: equality
// is decided on canonical bytes (every field, including ones added later), messages print what
// a reader of a violation needs.
import { unreachable } from '../base/result.ts';
import { pack } from '../core/wire/frame.ts';
import { agentRequest, groupCommand, groupMsgGC, type AgentRequest, type GroupCommand, type GroupMsgGC } from '../core/wire/messages.ts';

/** A number naming a frame by 53 bits of the end of its authenticator (a signature or a link
 *  MAC, PROTOCOL §2.1/§2.4): it differs between frames (keyed hash, Ed25519 or HMAC over
 *  distinct bytes), and the full bytes are compared after the lookup. */
export function frameKey(frame: Uint8Array): number {
  const at = frame.length - 8;
  if (at < 0) return -1;
  const v = new DataView(frame.buffer, frame.byteOffset + at, 8);
  return v.getUint32(0) * 2097152 + (v.getUint32(4) >>> 11);
}

export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

export function commandKey(c: GroupCommand): string {
  switch (c.type) {
    case 'echo.reply':
      return `echo.reply|${c.origin}|${c.tag}|${c.rsn}|${c.index}|${hex(c.data)}`;
    default:
      return `${c.type}|${hex(pack(groupCommand.enc(c)))}`;
  }
}

/** A request in its canonical bytes (every field, including ones added later), prefixed with
 *  what a reader of a violation needs: its type and, for an echo, its tag. */
export function requestKey(r: AgentRequest): string {
  const label = r.type === 'echo' ? `echo ${r.tag}` : r.type;
  return `${label}|${hex(pack(agentRequest.enc(r)))}`;
}

/** The whole GC in its canonical bytes: what an agent compares when it votes (PROTOCOL §5.2). */
export function gcKey(gc: GroupMsgGC): string {
  return hex(pack(groupMsgGC.enc(gc)));
}

/** A GC as a violation message shows it. */
export function describeGC(gc: GroupMsgGC): string {
  return `{gssn ${gc.gssn} prev ${gc.prevGssn} csnAck ${gc.csnAck} destInc ${gc.destInc} ${commandKey(gc.payload)}}`;
}
