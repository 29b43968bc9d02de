// CRC-32 (IEEE) of a frame body: the "checksum" half of the spec's cert (spec §3.2). It turns
// away a corrupted frame before the more expensive signature check (docs/PROTOCOL.md §2.2).

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(data: Uint8Array, end = data.length): number {
  let c = 0xffffffff;
  for (let i = 0; i < end; i++) c = (TABLE[(c ^ (data[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
