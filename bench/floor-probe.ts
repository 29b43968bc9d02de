// Preloaded into the application processes of bench/rollback.ts's floor modes (app mode, no
// rollback: `node --import tsx --import bench/floor-probe.ts APP …`): every message the
// application receives (Gmpi.recv) is also sent to this rank's bare logger (bench/floor-sink.ts,
// its port in TRINE_BENCH_FLOOR_SINKS, one per rank), as HMPL sends the receiver's log to its
// protector. `TRINE_BENCH_FLOOR_SYNC=1`: the receive returns only at the logger's acknowledgement
// (the receiver-side wait of pessimistic logging); otherwise it returns at once and the
// acknowledgements come back meanwhile (HMPL's asynchronous log). The collectives' own messages
// are not forwarded (8 bytes each against the halos' 64 KiB).
import { connect, type Socket } from 'node:net';
import { Gmpi } from 'trine/app';

const ports = (process.env.TRINE_BENCH_FLOOR_SINKS ?? '').split(',').map(Number);
const sync = process.env.TRINE_BENCH_FLOOR_SYNC === '1';
let sock: Socket | null = null;
let sent = 0;
let acked = 0;
const waiters = new Map<number, () => void>();
let pending: Buffer = Buffer.alloc(0);

function open(rank: number): Socket {
  const port = ports[rank];
  if (port === undefined || !Number.isInteger(port) || port <= 0) throw new Error(`floor-probe: no logger port for rank ${rank} in TRINE_BENCH_FLOOR_SINKS`);
  const s = connect({ host: '127.0.0.1', port });
  s.setNoDelay(true);
  s.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      acked = pending.readUInt32BE(0);
      pending = pending.subarray(4);
      waiters.get(acked)?.();
      waiters.delete(acked);
    }
  });
  s.on('error', (e) => {
    process.stderr.write(`floor-probe: logger connection failed: ${e.message}\n`);
    process.exit(1);
  });
  return s;
}

const origInit = Gmpi.init.bind(Gmpi);
Gmpi.init = (async (...args: Parameters<typeof Gmpi.init>) => {
  const g = await origInit(...args);
  sock = open(g.rank());
  return g;
}) as typeof Gmpi.init;

const origRecv = Gmpi.prototype.recv;
Gmpi.prototype.recv = async function recv(this: Gmpi, ...args: Parameters<typeof origRecv>) {
  const m = await origRecv.apply(this, args);
  const data = m.data instanceof Uint8Array ? m.data : new TextEncoder().encode(JSON.stringify(m.data));
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length, 0);
  sock!.write(head);
  sock!.write(data);
  const n = ++sent;
  if (sync && acked < n) await new Promise<void>((r) => waiters.set(n, r));
  return m;
} as typeof origRecv;
