// Lowercase hex of bytes: digests in status output and content keys for vote matching.

export function toHex(bytes: Uint8Array): string {
  let s = '';
  for (const x of bytes) s += (x < 16 ? '0' : '') + x.toString(16);
  return s;
}
