// The protector over real TCP on loopback (src/daemon/protector.ts, src/app/rollback/
// protector-client.ts; docs/PROTOCOL.md §11.4): a rank's log and checkpoints round trip, the log
// is garbage-collected at checkpoints (radic-hmpl A.2.5), a replacement fences the older
// incarnation (mpichv-dgrp 1.2.4), a 16 MiB checkpoint travels in chunks, a stranger without the
// task key is refused (PROTOCOL §9.5's hello, own label), and a flood of garbage connections does
// not keep a real client out. No wall-clock thresholds: waits are event-driven.
import { connect as dial, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { protectorMac, protectorNonce } from '../../src/app/rollback/protector-auth.ts';
import { ProtectorClient, ProtectorError, type ProtectorConnectOptions } from '../../src/app/rollback/protector-client.ts';
import { CmClient } from '../../src/app/rollback/cm-client.ts';
import { encodeLogEntry } from '../../src/app/rollback/codec.ts';
import { entryHeader } from '../../src/core/channel-memory.ts';
import { TASK_KEY_BYTES } from '../../src/core/constants.ts';
import { clientDecoder, encodeToClient, encodeToProtector, type ToClient } from '../../src/core/wire/protector-wire.ts';
import { createProtector, type Protector } from '../../src/daemon/protector.ts';
import { until } from './gmpi-test-tools.ts';

const KEY = new Uint8Array(TASK_KEY_BYTES).fill(0x3c);
const OTHER_KEY = new Uint8Array(TASK_KEY_BYTES).fill(0x3d);
const T = 't4';
const MiB = 1024 * 1024;

const protectors: Protector[] = [];
const servers: Server[] = [];
const clients: ProtectorClient[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(protectors.splice(0).map((p) => p.close()));
  for (const s of servers.splice(0)) s.close();
});

/** A fake protector: `onSocket` speaks for it. */
async function fakeProtector(onSocket: (s: Socket) => void): Promise<number> {
  const server = createServer((s) => {
    sockets.push(s);
    s.on('error', () => {});
    onSocket(s);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

type Logged = { level: string; event: string; fields: Record<string, unknown> };
async function startProtector(extra: { authTimeoutMs?: number; maxStateBytes?: number } = {}): Promise<{ p: Protector; logs: Logged[] }> {
  const logs: Logged[] = [];
  const p = await createProtector({
    host: '127.0.0.1', port: 0, log: (level, event, fields) => logs.push({ level, event, fields }),
    ...(extra.authTimeoutMs === undefined ? {} : { authTimeoutMs: extra.authTimeoutMs }),
  });
  protectors.push(p);
  expect(p.guard(T, KEY, extra.maxStateBytes ?? 64 * MiB)).toEqual({ ok: true });
  return { p, logs };
}

async function client(p: Protector, rank: number, incarnation: number, extra: Partial<ProtectorConnectOptions> = {}): Promise<ProtectorClient> {
  const c = await ProtectorClient.connect({ host: '127.0.0.1', port: p.port, task: T, rank, incarnation, taskKey: KEY, ...extra });
  clients.push(c);
  return c;
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(ProtectorError);
  return (e as ProtectorError).code;
}

/** Poll `cond` every 10 ms (for what waits on the protector's auth timer), up to 20 s. */
async function eventually(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never happened: ${what}`);
}

const entry = (pos: number, size = 16): Uint8Array => new Uint8Array(size).fill(pos & 0xff);

/** A raw connection that records what the protector says, and whether it closed. */
function raw(port: number, localAddress = '127.0.0.1'): { socket: Socket; got: ToClient[]; closed: () => boolean } {
  const socket = dial({ host: '127.0.0.1', port, localAddress });
  sockets.push(socket);
  const got: ToClient[] = [];
  const decoder = clientDecoder();
  let closed = false;
  socket.on('data', (c: Buffer) => {
    decoder.feed(c);
    for (let r = decoder.next(); r.ok && r.value !== null; r = decoder.next()) got.push(r.value);
  });
  socket.on('error', () => {});
  socket.on('close', () => { closed = true; });
  return { socket, got, closed: () => closed };
}

/** A raw connection through the hello, for frames a real client never sends. */
async function authedRaw(port: number, rank: number, incarnation: number): Promise<ReturnType<typeof raw>> {
  const conn = raw(port);
  await until(() => conn.got.length === 1, 'challenge');
  const nonce = protectorNonce();
  const challenge = (conn.got[0] as { nonce: Uint8Array }).nonce;
  const mac = protectorMac(KEY, { role: 'process', task: T, rank, incarnation, processNonce: nonce, protectorNonce: challenge });
  conn.socket.write(encodeToProtector({ type: 'hello', task: T, rank, incarnation, nonce, mac }));
  await until(() => conn.got.length === 2, 'welcome');
  expect(conn.got[1]?.type).toBe('welcome');
  return conn;
}

describe('PROTOCOL §11.4 protector: the store over TCP (radic-hmpl A.2.5, A.2.7)', () => {
  it('pipelined appends, a checkpoint and a fetch round trip', async () => {
    const { p } = await startProtector();
    const c = await client(p, 2, 7);
    expect(c.last).toBe(0);
    await Promise.all(Array.from({ length: 200 }, (_, i) => c.append(i + 1, entry(i + 1))));
    await c.appendBatch(201, [entry(201), entry(202), new Uint8Array(0)]);
    await c.putCheckpoint(1, 150, new Uint8Array([1, 2, 3]));
    const f = await c.fetch();
    expect(f.checkpoints).toEqual([{ id: 1, logPos: 150, bytes: new Uint8Array([1, 2, 3]) }]);
    expect(f.log.map((e) => e.pos)).toEqual(Array.from({ length: 53 }, (_, i) => 151 + i));
    expect(f.log[0]?.blob).toEqual(entry(151));
    expect(f.last).toBe(203);
    // A repeat after a reconnect is acknowledged again; the welcome says where the log ends.
    await c.close();
    const again = await client(p, 2, 7);
    expect(again.last).toBe(203);
    await again.append(203, new Uint8Array(0));
    expect(await refusal(again.append(203, entry(1)))).toBe('CONFLICT');
    expect(await refusal(again.append(205, entry(205)))).toBe('GAP');
    await again.append(204, entry(204));
  });

  it('garbage collection: two checkpoints kept, the log since the older one', async () => {
    const { p } = await startProtector();
    const c = await client(p, 0, 1);
    for (let id = 1; id <= 3; id++) {
      await Promise.all(Array.from({ length: 10 }, (_, i) => c.append((id - 1) * 10 + i + 1, entry(i))));
      await c.putCheckpoint(id, id * 10, new Uint8Array([id]));
    }
    const f = await c.fetch();
    expect(f.checkpoints.map((k) => [k.id, k.logPos])).toEqual([[2, 20], [3, 30]]);
    expect(f.log.map((e) => e.pos)).toEqual(Array.from({ length: 10 }, (_, i) => 21 + i));
    expect(p.stats().store).toMatchObject({ ranks: 1, checkpointBytes: 2 });
  });

  it('a replacement fences the older incarnation (mpichv-dgrp 1.2.4): its appends fail FENCED, it cannot come back', async () => {
    const { p } = await startProtector();
    const old = await client(p, 3, 5);
    await old.append(1, entry(1));
    const replacement = await client(p, 3, 9);
    expect(replacement.last).toBe(1);
    expect(await refusal(old.append(2, entry(2)))).toBe('FENCED');
    expect(await refusal(client(p, 3, 5))).toBe('FENCED');
    const f = await replacement.fetch();
    expect(f.log.map((e) => e.pos)).toEqual([1]);
    await replacement.append(2, entry(2));
    expect(p.stats().closed.FENCED).toBeGreaterThanOrEqual(2);
  });

  it('a 16 MiB checkpoint travels in chunks and comes back whole', async () => {
    const { p } = await startProtector();
    const c = await client(p, 1, 4);
    const state = new Uint8Array(16 * MiB);
    for (let i = 0; i < state.length; i += 4096) state[i] = (i / 4096) & 0xff;
    state[state.length - 1] = 0xee;
    await c.putCheckpoint(1, 0, state);
    const f = await c.fetch();
    expect(f.checkpoints).toHaveLength(1);
    expect(Buffer.compare(f.checkpoints[0]!.bytes, state)).toBe(0);
    expect(p.stats().assemblingBytes).toBe(0);
  });

  it('a checkpoint over the task\'s maxStateBytes is refused STATE_TOO_LARGE and the connection goes on', async () => {
    const { p } = await startProtector({ maxStateBytes: MiB });
    const c = await client(p, 0, 1);
    expect(await refusal(c.putCheckpoint(1, 0, new Uint8Array(2 * MiB)))).toBe('STATE_TOO_LARGE');
    await c.append(1, entry(1));
    await c.putCheckpoint(1, 1, new Uint8Array(MiB));
    expect((await c.fetch()).checkpoints.map((k) => k.id)).toEqual([1]);
  });

  it('a checkpoint chunk out of place, or a second hello, closes the connection UNEXPECTED', async () => {
    const { p } = await startProtector();
    const skip = await authedRaw(p.port, 0, 1);
    skip.socket.write(encodeToProtector({ type: 'put', id: 1, logPos: 0, size: 10, offset: 0, chunk: new Uint8Array(4) }));
    skip.socket.write(encodeToProtector({ type: 'put', id: 1, logPos: 0, size: 10, offset: 5, chunk: new Uint8Array(5) }));
    await until(() => skip.closed(), 'closed');
    expect(skip.got.at(-1)).toMatchObject({ type: 'refused', code: 'UNEXPECTED' });
    const twice = await authedRaw(p.port, 1, 1);
    twice.socket.write(encodeToProtector({ type: 'hello', task: T, rank: 1, incarnation: 1, nonce: new Uint8Array(32), mac: new Uint8Array(32) }));
    await until(() => twice.closed(), 'closed');
    expect(twice.got.at(-1)).toMatchObject({ type: 'refused', code: 'UNEXPECTED' });
    expect(p.stats().assemblingBytes).toBe(0);
    // A newer connection of the same incarnation takes the older's place (REPLACED).
    const first = await authedRaw(p.port, 2, 1);
    await authedRaw(p.port, 2, 1);
    await until(() => first.closed(), 'replaced');
    expect(first.got.at(-1)).toMatchObject({ type: 'refused', code: 'REPLACED' });
    expect(p.stats().authenticated).toBe(1);
  });

  it('release closes the task\'s connections and forgets its store', async () => {
    const { p } = await startProtector();
    const c = await client(p, 0, 1);
    await c.append(1, entry(1));
    expect(p.release(T)).toBe(true);
    expect(await refusal(c.append(2, entry(2)))).toBe('RELEASED');
    expect(await refusal(client(p, 0, 1))).toBe('UNKNOWN_TASK');
    expect(p.stats().store.totalBytes).toBe(0);
    expect(p.guard(T, new Uint8Array(3), MiB)).toMatchObject({ ok: false, code: 'BAD_ARGUMENT' });
    expect(p.guard(T, KEY, 64 * MiB + 1)).toMatchObject({ ok: false, code: 'BAD_ARGUMENT' });
  });
});

describe('PROTOCOL §11.4 protector: strangers (the hello of §9.5, its own label)', () => {
  it('a process without the task key is refused BAD_MAC; an unguarded task UNKNOWN_TASK', async () => {
    const { p } = await startProtector();
    expect(await refusal(client(p, 0, 1, { taskKey: OTHER_KEY }))).toBe('BAD_MAC');
    expect(await refusal(client(p, 0, 1, { task: 't99' }))).toBe('UNKNOWN_TASK');
    expect(p.stats().closed).toMatchObject({ BAD_MAC: 1, UNKNOWN_TASK: 1 });
    expect(p.stats().store.ranks).toBe(0);
  });

  it('a hello recorded on one connection does not verify on another (replay)', async () => {
    const { p } = await startProtector();
    const first = raw(p.port);
    await until(() => first.got.length === 1, 'challenge');
    const challenge = first.got[0];
    expect(challenge?.type).toBe('challenge');
    const nonce = protectorNonce();
    const mac = protectorMac(KEY, { role: 'process', task: T, rank: 0, incarnation: 1, processNonce: nonce, protectorNonce: (challenge as { nonce: Uint8Array }).nonce });
    const hello = encodeToProtector({ type: 'hello', task: T, rank: 0, incarnation: 1, nonce, mac });
    first.socket.write(hello);
    await until(() => first.got.length === 2, 'welcome');
    expect(first.got[1]?.type).toBe('welcome');
    const replay = raw(p.port);
    await until(() => replay.got.length === 1, 'challenge');
    replay.socket.write(hello);
    await until(() => replay.closed(), 'replayed hello closed');
    expect(replay.got[1]).toMatchObject({ type: 'refused', code: 'BAD_MAC' });
  });

  it('malformed and oversized frames close the connection with a typed reason, counted', async () => {
    const { p } = await startProtector();
    const garbage = raw(p.port);
    garbage.socket.write(Uint8Array.from([0, 0, 0, 3, 0xc1, 0xc1, 0xc1]));
    const huge = raw(p.port);
    huge.socket.write(Uint8Array.from([0x7f, 0xff, 0xff, 0xff]));
    const early = raw(p.port);
    early.socket.write(encodeToProtector({ type: 'fetch' }));
    await until(() => garbage.closed() && huge.closed() && early.closed(), 'all closed');
    expect(garbage.got.at(-1)).toMatchObject({ type: 'refused', code: 'MALFORMED' });
    expect(huge.got.at(-1)).toMatchObject({ type: 'refused', code: 'TOO_LARGE' });
    expect(early.got.at(-1)).toMatchObject({ type: 'refused', code: 'UNEXPECTED' });
    expect(p.stats().closed).toMatchObject({ MALFORMED: 1, TOO_LARGE: 1, UNEXPECTED: 1 });
  });

  it('a stranger may not make the protector buffer a large frame before its hello verifies', async () => {
    const { p } = await startProtector();
    const big = raw(p.port);
    const frame = new Uint8Array(4 + 4000);
    new DataView(frame.buffer).setUint32(0, 100_000);
    big.socket.write(frame);
    await until(() => big.closed(), 'closed');
    expect(big.got.at(-1)).toMatchObject({ type: 'refused', code: 'TOO_LARGE' });
  });

  it('an authenticated client that never reads its answers is closed SLOW_CLIENT, not buffered for', async () => {
    const { p } = await startProtector();
    const conn = await authedRaw(p.port, 0, 1);
    conn.socket.pause();
    // Appends at a gap: each is refused with an answer the client does not read.
    const gap = encodeToProtector({ type: 'append', pos: 5, blob: new Uint8Array(0) });
    const flood = new Uint8Array(gap.length * 400_000);
    for (let i = 0; i < 400_000; i++) flood.set(gap, i * gap.length);
    conn.socket.write(flood);
    await eventually(() => p.stats().closed.SLOW_CLIENT === 1, 'closed SLOW_CLIENT');
  });

  it('a welcome that does not verify is refused by the client (not our protector)', async () => {
    const { p } = await startProtector();
    // The protector holds another key for the task than the process: each refuses the other.
    const stray = await createProtector({ host: '127.0.0.1', port: 0, log: () => {} });
    protectors.push(stray);
    stray.guard(T, OTHER_KEY, MiB);
    expect(await refusal(ProtectorClient.connect({ host: '127.0.0.1', port: stray.port, task: T, rank: 0, incarnation: 1, taskKey: KEY }))).toBe('BAD_MAC');
    expect(p.stats().closed).toEqual({});
  });

  it('the client: nobody listening is CONNECT_FAILED, a silent protector TIMEOUT, garbage PROTOCOL', async () => {
    const opts = { host: '127.0.0.1', task: T, rank: 0, incarnation: 1, taskKey: KEY };
    const closedPort = await fakeProtector(() => {});
    servers.pop()?.close();
    await new Promise((r) => setTimeout(r, 10));
    expect(await refusal(ProtectorClient.connect({ ...opts, port: closedPort }))).toBe('CONNECT_FAILED');
    const silent = await fakeProtector(() => {});
    expect(await refusal(ProtectorClient.connect({ ...opts, port: silent, timeoutMs: 200 }))).toBe('TIMEOUT');
    const garbage = await fakeProtector((s) => s.write(Uint8Array.from([0, 0, 0, 1, 0xc1])));
    expect(await refusal(ProtectorClient.connect({ ...opts, port: garbage }))).toBe('PROTOCOL');
    // A welcome before any hello was asked for is out of place.
    const early = await fakeProtector((s) => s.write(encodeToClient({ type: 'welcome', last: 0, mac: new Uint8Array(32) })));
    expect(await refusal(ProtectorClient.connect({ ...opts, port: early }))).toBe('PROTOCOL');
    for (const bad of [{ task: 'x'.repeat(300) }, { rank: 1024 }, { incarnation: 2 ** 32 }, { taskKey: new Uint8Array(5) }]) {
      expect(await refusal(ProtectorClient.connect({ ...opts, port: early, ...bad }))).toBe('BAD_ARGUMENT');
    }
  });

  it('a flood of garbage and silent connections does not keep a real client out', async () => {
    const { p } = await startProtector({ authTimeoutMs: 300 });
    const flood = Array.from({ length: 300 }, (_, i) => raw(p.port, i % 2 === 0 ? '127.0.0.2' : '127.0.0.3'));
    for (const [i, f] of flood.entries()) if (i % 3 !== 0) f.socket.write(Uint8Array.from([0, 0, 0, 2, 0x92, 0xc1]));
    const c = await client(p, 0, 1);
    await c.append(1, entry(1));
    await eventually(() => flood.every((f) => f.closed()), 'every stranger closed');
    const closedBy = p.stats().closed;
    expect(closedBy.TOO_MANY_CONNECTIONS).toBeGreaterThan(0);
    expect((closedBy.MALFORMED ?? 0) + (closedBy.AUTH_TIMEOUT ?? 0) + (closedBy.TOO_MANY_CONNECTIONS ?? 0)).toBe(300);
    expect(p.stats().strangers).toBe(0);
    // The real client is still served.
    await c.append(2, entry(2));
    expect((await c.fetch()).last).toBe(2);
  });
});

describe('PROTOCOL §11.6 the protector as a channel memory over TCP (mpichv-dgrp 1.2.1)', () => {
  const message = (source: number, ssn: number, bytes: number): Uint8Array =>
    encodeLogEntry({ kind: 'message', source, env: { ssn, epoch: 0, comm: 0, tag: 1, structured: false, data: new Uint8Array(bytes).fill(ssn & 0xff) } });

  it('a subscriber that does not read is paced (PROTECTOR_PUSH_BUFFER_BYTES), not closed, and gets every entry in order once it reads', async () => {
    const { p } = await startProtector();
    const sub = await authedRaw(p.port, 0, 1);
    sub.socket.write(encodeToProtector({ type: 'subscribe', from: 0 }));
    sub.socket.pause();
    const sender = await CmClient.connect(p.endpoint, { host: '127.0.0.1', port: p.port, task: T, rank: 1, incarnation: 2, taskKey: KEY });
    const COUNT = 40;
    const SIZE = 500 * 1024;
    // 20 MiB deposited, five times PROTECTOR_MAX_UNREAD_BYTES: the sends complete (the CM holds
    // them), the subscriber's pushes wait in the store.
    await Promise.all(Array.from({ length: COUNT }, (_, i) => sender.deposit(0, i + 1, message(1, i + 1, SIZE))));
    await new Promise((r) => setTimeout(r, 100));
    expect(sub.closed()).toBe(false);
    expect(p.stats().closed.SLOW_CLIENT ?? 0).toBe(0);
    sub.socket.resume();
    const entries = (): Uint8Array[] => sub.got.flatMap((m) => (m.type === 'pushed' ? m.blobs : []));
    await eventually(() => entries().length === COUNT || sub.closed(), 'every entry pushed');
    expect(sub.closed()).toBe(false);
    expect(sub.got.find((m) => m.type === 'pushed')).toMatchObject({ first: 1 });
    entries().forEach((b, i) => expect(entryHeader(b)).toEqual({ source: 1, ssn: i + 1, index: 0, total: 1 }));
    await sender.close();
  });

  it('a deposit by a fenced incarnation is refused FENCED, and a second subscription UNEXPECTED', async () => {
    const { p } = await startProtector();
    const sub = await authedRaw(p.port, 0, 1);
    sub.socket.write(encodeToProtector({ type: 'subscribe', from: 0 }));
    sub.socket.write(encodeToProtector({ type: 'subscribe', from: 0 }));
    await until(() => sub.got.some((m) => m.type === 'error'), 'error');
    expect(sub.got.find((m) => m.type === 'error')).toMatchObject({ op: 'subscribe', code: 'UNEXPECTED' });
    const old = await authedRaw(p.port, 1, 2);
    await client(p, 1, 3); // the replacement speaks: the old connection is closed FENCED
    await until(() => old.closed(), 'old closed');
    expect(old.got.some((m) => m.type === 'refused' && m.code === 'FENCED')).toBe(true);
    const stale = await refusal(CmClient.connect(p.endpoint, { host: '127.0.0.1', port: p.port, task: T, rank: 1, incarnation: 2, taskKey: KEY }));
    expect(stale).toBe('FENCED');
  });
});
