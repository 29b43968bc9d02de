// The WebSocket transport (src/io/ws-transport.ts) passes the shared Transport contract on
// loopback: r1 listens on a free port, a1 dials it, both bound by real node:crypto proofs
// (PROTOCOL §2.5). The frames are real encoded frames, since a bound connection drops bytes
// whose sender is not its peer. Both transports are closed after every test.
import { expect, vi } from 'vitest';
import type { ProcessId } from '../../src/core/ports.ts';
import { encodeFrame } from '../../src/core/wire/frame.ts';
import { generateKeyPair } from '../../src/io/keys.ts';
import { createNodeSigner, createNodeVerifier } from '../../src/io/signer-node.ts';
import { WsTransport } from '../../src/io/ws-transport.ts';
import { transportContract, type Delivery, type TransportRig } from '../unit/io/transport-contract.ts';

const CLUSTER = 'contract-cluster';
const pairs = new Map(['r1', 'a1', 'x9'].map((id) => [id, generateKeyPair()] as const));
const verifier = createNodeVerifier(new Map([...pairs].map(([id, p]) => [id, p.publicKey])));
const signerOf = (id: ProcessId) => createNodeSigner(id, (pairs.get(id) ?? generateKeyPair()).seed);
const WAIT = { timeout: 10_000, interval: 5 };

transportContract('WebSocket on loopback', async (): Promise<TransportRig> => {
  const received: Delivery[] = [];
  const start = (id: ProcessId, extra: { listen?: { host: string; port: number }; dial?: Record<ProcessId, { host: string; port: number }> }) =>
    WsTransport.start({
      self: id, cluster: CLUSTER, ...extra,
      auth: { encode: { cluster: CLUSTER, signer: signerOf(id) }, decode: { cluster: CLUSTER, self: id, verifier } },
      receive: (bytes, from) => {
        received.push({ to: id, from, bytes: Uint8Array.from(bytes) });
      },
    });
  const r1 = await start('r1', { listen: { host: '127.0.0.1', port: 0 } });
  const a1 = await start('a1', { dial: { r1: { host: '127.0.0.1', port: r1.port ?? 0 } } });
  const transports = new Map<ProcessId, WsTransport>([['r1', r1], ['a1', a1]]);
  const until = async (done: () => boolean): Promise<void> => {
    await vi.waitFor(() => expect(done()).toBe(true), WAIT);
  };
  return {
    ids: ['r1', 'a1'],
    transport: (id) => {
      const t = transports.get(id);
      if (t === undefined) throw new Error(`no transport ${id}`);
      return t;
    },
    received,
    frame: (from, to, n) => encodeFrame({ from, to, items: [{ type: 'probe', nonce: n }] }, { cluster: CLUSTER, signer: signerOf(from) }),
    ready: () => until(() => r1.isConnected('a1') && a1.isConnected('r1')),
    until,
    settle: async () => {
      // A frame each way on the same connections is a barrier: a WebSocket keeps order, so
      // frames sent before it have arrived once it has; the barrier frames are then removed.
      const barrier = new Map<ProcessId, string>(([['a1', 'r1'], ['r1', 'a1']] as const).map(([from, to]) => {
        const bytes = encodeFrame({ from, to, items: [{ type: 'probe', nonce: 1e6 }] }, { cluster: CLUSTER, signer: signerOf(from) });
        transports.get(from)?.send(to, bytes);
        return [from, Buffer.from(bytes).toString('hex')] as const;
      }));
      const isBarrier = (d: Delivery): boolean => barrier.get(d.from) === Buffer.from(d.bytes).toString('hex');
      await until(() => received.filter(isBarrier).length === 2);
      const rest = received.filter((d) => !isBarrier(d));
      received.splice(0, received.length, ...rest);
    },
    close: async () => {
      await Promise.all([a1.close(), r1.close()]);
    },
  };
});
