// The DGRP's test datagrams (docs/PROTOCOL.md §12.2): a tester's challenge and the tested
// process's reply, over UDP between the tester threads of one task, each on the port number of
// its process's G-MPI listener. Every datagram carries a MAC under the task key (PROTOCOL §9.5),
// so no process outside the task can answer for a slow one, and the reply's MAC covers the
// challenge's sequence, tester and tested, so a reply recorded earlier or for another pair is
// refused. Decoding is total: any bytes give a probe or a typed reason.
//
//   datagram = magic 'TD' ‖ version 1 ‖ kind (1 challenge, 2 reply) ‖ tester u32 ‖ tested u32
//            ‖ seq u32 ‖ length u16 ‖ body[length] ‖ MAC[16]
//   MAC      = HMAC-SHA256(task key, "trine-dgrp-probe-v1" ‖ 0x00 ‖ everything before it)[0..16)
import { createHmac, timingSafeEqual } from 'node:crypto';

export const PROBE_HEADER_BYTES = 18;
export const PROBE_MAC_BYTES = 16;
/** The largest body: a challenge or an answer of the pluggable test (challenge.ts DgrpTest). */
export const MAX_PROBE_BODY_BYTES = 256;
const MAGIC_0 = 0x54; // 'T'
const MAGIC_1 = 0x44; // 'D'
const VERSION = 1;
const CONTEXT = Buffer.from('trine-dgrp-probe-v1\0');

export type ProbeKind = 'challenge' | 'reply';
export type Probe = { kind: ProbeKind; tester: number; tested: number; seq: number; body: Uint8Array };
export type ProbeRefusal = 'SHORT' | 'BAD_MAGIC' | 'BAD_KIND' | 'BAD_LENGTH' | 'BAD_MAC';

function mac(key: Uint8Array, signed: Uint8Array): Buffer {
  return createHmac('sha256', key).update(CONTEXT).update(signed).digest().subarray(0, PROBE_MAC_BYTES);
}

export function encodeProbe(key: Uint8Array, p: Probe): Uint8Array {
  if (p.body.length > MAX_PROBE_BODY_BYTES) throw new RangeError(`a probe body of ${p.body.length} bytes > ${MAX_PROBE_BODY_BYTES}`);
  const out = Buffer.alloc(PROBE_HEADER_BYTES + p.body.length + PROBE_MAC_BYTES);
  out[0] = MAGIC_0;
  out[1] = MAGIC_1;
  out[2] = VERSION;
  out[3] = p.kind === 'challenge' ? 1 : 2;
  out.writeUInt32BE(p.tester, 4);
  out.writeUInt32BE(p.tested, 8);
  out.writeUInt32BE(p.seq, 12);
  out.writeUInt16BE(p.body.length, 16);
  out.set(p.body, PROBE_HEADER_BYTES);
  const signedEnd = PROBE_HEADER_BYTES + p.body.length;
  out.set(mac(key, out.subarray(0, signedEnd)), signedEnd);
  return out;
}

export function decodeProbe(key: Uint8Array, bytes: Uint8Array): { ok: true; probe: Probe } | { ok: false; reason: ProbeRefusal } {
  if (bytes.length < PROBE_HEADER_BYTES + PROBE_MAC_BYTES) return { ok: false, reason: 'SHORT' };
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  if (b[0] !== MAGIC_0 || b[1] !== MAGIC_1 || b[2] !== VERSION) return { ok: false, reason: 'BAD_MAGIC' };
  if (b[3] !== 1 && b[3] !== 2) return { ok: false, reason: 'BAD_KIND' };
  const length = b.readUInt16BE(16);
  if (length > MAX_PROBE_BODY_BYTES || b.length !== PROBE_HEADER_BYTES + length + PROBE_MAC_BYTES) return { ok: false, reason: 'BAD_LENGTH' };
  const signedEnd = PROBE_HEADER_BYTES + length;
  if (!timingSafeEqual(mac(key, b.subarray(0, signedEnd)), b.subarray(signedEnd))) return { ok: false, reason: 'BAD_MAC' };
  return {
    ok: true,
    probe: {
      kind: b[3] === 1 ? 'challenge' : 'reply', tester: b.readUInt32BE(4), tested: b.readUInt32BE(8), seq: b.readUInt32BE(12),
      body: new Uint8Array(b.subarray(PROBE_HEADER_BYTES, signedEnd)),
    },
  };
}
