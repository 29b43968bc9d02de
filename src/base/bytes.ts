// Byte strings: the one comparison the cores, the daemons, the library and the simulator use
// (issue 16 item 5). Not constant-time: where a secret is compared, use node:crypto's
// timingSafeEqual (src/sim/sim-signer.ts does).

/** Whether `a` and `b` hold the same bytes (views compare by content, not by buffer). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
