// Shared by the G-MPI integration tests (gmpi-p2p, gmpi-comm, gmpi-collectives): waiting on
// I/O by event-loop turns (never by wall time), tracking a promise's settlement, checking a
// P2PError's code, the tests' task key, and raw peers that speak the authenticated handshake.
import { createServer, connect as dial, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'vitest';
import { helloMac, helloNonce, TASK_KEY_BYTES } from '../../src/app/gmpi/hello-auth.ts';
import { P2PError } from '../../src/app/gmpi/p2p-types.ts';
import { encodeFrame, FrameDecoder, type ChallengeFrame, type GmpiFrame } from '../../src/app/gmpi/wire.ts';

/** Let I/O run until `cond` holds: a bounded count of event-loop turns, not a time limit. */
export async function until(cond: () => boolean, what: string): Promise<void> {
  for (let turn = 0; turn < 200_000; turn++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`never happened: ${what}`);
}

export async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** Track a promise's settlement without awaiting it. */
export function track<T>(p: Promise<T>): { settled: () => boolean; promise: Promise<T> } {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  return { settled: () => done, promise: p };
}

export async function expectCode(p: Promise<unknown>, code: string): Promise<P2PError> {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(P2PError);
  expect((e as P2PError).code).toBe(code);
  return e as P2PError;
}

// ---- raw peers that speak the authenticated handshake (PROTOCOL §9.5) ---------------------------

/** The key of the tests' task: what the agent would hand each of its processes. */
export const TEST_TASK_KEY = new Uint8Array(TASK_KEY_BYTES).fill(0x5a);

/** A hand-driven TCP peer: decodes what it receives, and can answer a challenge with a hello
 *  whose MAC it computes (or forges), as a real dialler would. */
export class RawPeer {
  readonly frames: GmpiFrame[] = [];
  /** Every byte received, in order. */
  readonly received: Buffer[] = [];
  closed = false;
  error: string | null = null;
  private readonly decoder = new FrameDecoder({ maxMessageBytes: 1 << 20 });

  constructor(readonly socket: Socket) {
    socket.on('data', (b: Buffer) => {
      this.received.push(b);
      this.decoder.feed(b);
      for (;;) {
        const r = this.decoder.next();
        if (!r.ok) {
          this.error = r.code;
          return;
        }
        if (r.value === null) return;
        this.frames.push(r.value);
      }
    });
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => {});
  }

  static dial(port: number, localAddress?: string): RawPeer {
    return new RawPeer(dial({ host: '127.0.0.1', port, ...(localAddress === undefined ? {} : { localAddress }) }));
  }

  async challenge(): Promise<ChallengeFrame> {
    await until(() => this.frames.some((f) => f.type === 'challenge') || this.closed, 'a challenge');
    const c = this.frames.find((f): f is ChallengeFrame => f.type === 'challenge');
    if (c === undefined) throw new Error('closed before a challenge');
    return c;
  }

  /** Wait for the challenge and answer it with a hello from `id` under `key` (the test key
   *  unless given), as a dialler. Returns the hello's bytes. */
  async hello(id: number, opts: { taskId: string; key?: Uint8Array; mac?: Uint8Array }): Promise<Uint8Array> {
    const c = await this.challenge();
    const nonce = helloNonce();
    const mac = opts.mac ?? helloMac(opts.key ?? TEST_TASK_KEY, {
      role: 'dialler', taskId: opts.taskId, sender: id, receiver: c.id, diallerNonce: nonce, acceptorNonce: c.nonce,
    });
    const bytes = encodeFrame({ type: 'hello', id, taskId: opts.taskId, nonce, mac });
    this.socket.write(bytes);
    return bytes;
  }

  write(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }
}

/** A raw acceptor for a P2P that dials it as VPID-lower `self`: challenges each connection and
 *  answers a verified hello with its own, as a real acceptor would. */
export async function rawAcceptor(self: number, taskId: string): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    sockets.push(s);
    const ours = helloNonce();
    s.write(encodeFrame({ type: 'challenge', id: self, nonce: ours }));
    const decoder = new FrameDecoder({ maxMessageBytes: 1 << 20 });
    s.on('error', () => {});
    s.on('data', (b: Buffer) => {
      decoder.feed(b);
      for (let r = decoder.next(); r.ok && r.value !== null; r = decoder.next()) {
        const f = r.value;
        if (f.type !== 'hello') continue;
        const mac = helloMac(TEST_TASK_KEY, { role: 'acceptor', taskId, sender: self, receiver: f.id, diallerNonce: f.nonce, acceptorNonce: ours });
        s.write(encodeFrame({ type: 'hello', id: self, taskId, nonce: ours, mac }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, sockets };
}
