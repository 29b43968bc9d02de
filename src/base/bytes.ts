// Byte strings: the one comparison the cores, the daemons, the library and the simulator use
// (issue 16 item 5), and the concatenation a core uses (no Buffer in src/core, STYLE.md 1). Not constant-time: where a secret is compared, use node:crypto's
// timingSafeEqual (src/sim/sim-signer.ts does).

/** Whether `a` and `b` hold the same bytes (views compare by content, not by buffer). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `parts` one after the other, in a new array. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
