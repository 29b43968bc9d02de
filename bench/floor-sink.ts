// The floor of logging on this machine (docs/PERFORMANCE.md §9, "the machine's floor"): a bare
// logger with no protocol. It listens on loopback, takes length-prefixed frames (u32 BE length,
// then the bytes), keeps each in memory as a protector keeps a log entry, and acknowledges it
// with 4 bytes (the frame's number). No authentication, no chain, no decoding: what moving each
// received message to a third process and back costs on two cores, nothing more. bench/rollback.ts
// starts one per rank and bench/floor-probe.ts feeds it. Prints `port N` on stdout once
// listening; runs until killed. Memory is bounded: past FLOOR_KEEP_BYTES the oldest entries go.
import { createServer, type Socket } from 'node:net';

/** As a protector's log between two checkpoints: the newest entries, up to this many bytes. */
const FLOOR_KEEP_BYTES = 256 * 1024 * 1024;

const kept: Uint8Array[] = [];
let keptBytes = 0;

function serve(sock: Socket): void {
  sock.setNoDelay(true);
  let buf: Buffer = Buffer.alloc(0);
  let n = 0;
  sock.on('data', (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    while (buf.length >= 4) {
      const len = buf.readUInt32BE(0);
      if (buf.length < 4 + len) break;
      const entry = Uint8Array.prototype.slice.call(buf, 4, 4 + len);
      buf = buf.subarray(4 + len);
      kept.push(entry);
      keptBytes += entry.length;
      while (keptBytes > FLOOR_KEEP_BYTES) keptBytes -= kept.shift()!.length;
      const ack = Buffer.alloc(4);
      ack.writeUInt32BE(++n >>> 0, 0);
      sock.write(ack);
    }
  });
  sock.on('error', () => sock.destroy());
}

const server = createServer(serve);
server.listen(0, '127.0.0.1', () => {
  const a = server.address();
  process.stdout.write(`port ${typeof a === 'object' && a !== null ? a.port : 0}\n`);
});
