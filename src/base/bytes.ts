// Byte strings: the one comparison the cores, the daemons, the library and the simulator use
// (issue 16 item 5), and the concatenation a core uses (no Buffer in src/core, STYLE.md 1). Not constant-time: where a secret is compared, use node:crypto's
// timingSafeEqual (src/sim/sim-signer.ts does).

/** Below this many bytes, byte by byte is as fast as setting up word views. */
const WORD_COMPARE_FROM = 64;

/** Whether `a` and `b` hold the same bytes (views compare by content, not by buffer). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  const n = a.length;
  if (n !== b.length) return false;
  let i = 0;
  // Four bytes a step past WORD_COMPARE_FROM: a frame's canonical check compares a protector's
  // 64 KiB entries (frame.ts unpack), 4× faster so than byte by byte.
  if (n >= WORD_COMPARE_FROM) {
    if ((a.byteOffset & 3) === (b.byteOffset & 3)) {
      for (; ((a.byteOffset + i) & 3) !== 0; i++) if (a[i] !== b[i]) return false;
      const words = (n - i) >>> 2;
      const wa = new Uint32Array(a.buffer, a.byteOffset + i, words);
      const wb = new Uint32Array(b.buffer, b.byteOffset + i, words);
      for (let k = 0; k < words; k++) if (wa[k] !== wb[k]) return false;
      i += words * 4;
    } else {
      const da = new DataView(a.buffer, a.byteOffset, n);
      const db = new DataView(b.buffer, b.byteOffset, n);
      for (; i + 4 <= n; i += 4) if (da.getUint32(i) !== db.getUint32(i)) return false;
    }
  }
  for (; i < n; i++) if (a[i] !== b[i]) return false;
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
