// The agent's end of the process↔agent channel (src/daemon/app-socket.ts; spec §7 items 1–7)
// over a real Unix socket in a temporary directory: the hello handshake (welcome, refusals for a
// bad token, an unknown VPID and a duplicate), the hello timeout, frames before hello, malformed
// and oversized frames, clean finalize versus a crash (a linked child killed with SIGKILL), the
// bound on a slow reader's queue, the bound on unidentified connections, the socket file's
// life (stale file replaced, live server and foreign file refused, unlinked on close), the
// agent's abstract socket and the task key its welcome hands over (PROTOCOL §9.5), and a flood
// of wrong tokens: refusals rate-limited and logged in aggregate, the right process still in,
// and a process whose connection is dropped unanswered reconnecting (issue 14 item 8).
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstatSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GSIG_BROADCAST } from '../../src/core/signals.ts';
import {
  agentToProc, AppFrameDecoder, encodeAppFrame, procToAgent, type AgentToProc, type ProcToAgent,
} from '../../src/core/wire/app-wire.ts';
import {
  agentSocketName, AppSocketError, AppSocketServer, MAX_REPLAY_BYTES, socketAddress, type AppSocketLogEvent, type AppSocketServerOptions,
} from '../../src/daemon/app-socket.ts';
import { FakeAgent, waitUntil } from '../fixtures/link/harness.ts';

const TASK = 't1';
const TOKEN = randomBytes(16).toString('hex');
/** The task key the welcome hands over (PROTOCOL §9.5). */
const KEY = new Uint8Array(randomBytes(32));
const dirs: string[] = [];
const servers: AppSocketServer[] = [];
const sockets: Socket[] = [];
const agents: FakeAgent[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(agents.splice(0).map((a) => a.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmpPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'trine-appsock-'));
  dirs.push(dir);
  return join(dir, 'agent.sock');
}

type Recorded = {
  server: AppSocketServer;
  path: string;
  connected: { task: string; vpid: number; endpoint: string }[];
  signals: { vpid: number; signum: number; arg: number }[];
  finalized: number[];
  closed: { vpid: number; clean: boolean }[];
  logs: AppSocketLogEvent[];
};

/** A server that knows VPIDs 0..3 of t1, all with TOKEN. */
async function listen(extra: Partial<AppSocketServerOptions> = {}): Promise<Recorded> {
  const path = tmpPath();
  const r: Omit<Recorded, 'server'> = { path, connected: [], signals: [], finalized: [], closed: [], logs: [] };
  const server = await AppSocketServer.listen(path, {
    authenticate: (task, vpid, token) => {
      if (task !== TASK || vpid > 3) return `unknown process ${task}/${vpid}`;
      return token === TOKEN ? null : 'bad token';
    },
    taskKey: () => KEY,
    onConnected: (task, vpid, endpoint) => r.connected.push({ task, vpid, endpoint }),
    onSignal: (_task, vpid, req) => r.signals.push({ vpid, signum: req.signum, arg: req.arg }),
    onFinalized: (_task, vpid) => r.finalized.push(vpid),
    onClosed: (_task, vpid, clean) => r.closed.push({ vpid, clean }),
    log: (e) => r.logs.push(e),
    ...extra,
  });
  servers.push(server);
  return { ...r, server };
}

type Client = { socket: Socket; frames: AgentToProc[]; closed: boolean; wireError: string | null; write(m: ProcToAgent): void };

async function client(path: string): Promise<Client> {
  const socket = connect(path);
  sockets.push(socket);
  const decoder = new AppFrameDecoder(agentToProc);
  const c: Client = {
    socket, frames: [], closed: false, wireError: null,
    write: (m) => socket.write(encodeAppFrame(procToAgent, m)),
  };
  socket.on('data', (chunk: Buffer) => {
    decoder.feed(chunk);
    for (;;) {
      const r = decoder.next();
      if (!r.ok) {
        c.wireError = r.code;
        return;
      }
      if (r.value === null) return;
      c.frames.push(r.value);
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => {
    c.closed = true;
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return c;
}

const hello = (vpid: number, token = TOKEN): ProcToAgent => ({ type: 'hello', task: TASK, vpid, token, endpoint: `127.0.0.1:${5000 + vpid}` });

/** A close logged with `code`: on its own for a connected process, else in an `app.refusals` line. */
const closedLog = (r: Recorded, code: string) =>
  waitUntil(() => r.logs.find((e) => (e.type === 'app.closed' && e.code === code) ||
    (e.type === 'app.refusals' && (e.codes[code as keyof typeof e.codes] ?? 0) > 0)), `a close logged as ${code}`);
const refusals = (r: Recorded) => r.logs.flatMap((e) => (e.type === 'app.refusals' ? [e] : []));

describe('hello', () => {
  it('a hello with the right token is welcomed and reported with its endpoint', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(2));
    await waitUntil(() => c.frames.length > 0, 'welcome');
    expect(c.frames[0]).toEqual({ type: 'welcome', taskKey: KEY });
    expect(r.connected).toEqual([{ task: TASK, vpid: 2, endpoint: '127.0.0.1:5002' }]);
    expect(r.server.isConnected(TASK, 2)).toBe(true);
    expect(r.server.send(TASK, 2, { type: 'signal', signum: 100, src: 1, dest: 2, arg: -5, epoch: 3, node: '', data: '' })).toBe(true);
    await waitUntil(() => c.frames.length > 1, 'signal');
    expect(c.frames[1]).toMatchObject({ type: 'signal', signum: 100, arg: -5 });
  });

  it('a bad token is refused with the reason and the connection is closed', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(1, 'f'.repeat(32)));
    await waitUntil(() => c.closed, 'close');
    expect(c.frames).toEqual([{ type: 'refused', reason: 'bad token' }]);
    expect(r.connected).toEqual([]);
    expect(r.closed).toEqual([]);
    const line = await waitUntil(() => refusals(r)[0], 'the refusal logged');
    expect(line).toMatchObject({ count: 1, codes: { AUTH_REFUSED: 1 }, unanswered: 0, first: { code: 'AUTH_REFUSED', task: TASK, vpid: 1, reason: 'bad token' } });
  });

  it('an unknown VPID is refused', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(9));
    await waitUntil(() => c.closed, 'close');
    expect(c.frames).toEqual([{ type: 'refused', reason: `unknown process ${TASK}/9` }]);
  });

  it('a second hello for a connected (task, VPID) is refused as a duplicate; the first stays', async () => {
    const r = await listen();
    const first = await client(r.path);
    first.write(hello(0));
    await waitUntil(() => first.frames.length > 0, 'welcome');
    const second = await client(r.path);
    second.write(hello(0));
    await waitUntil(() => second.closed, 'duplicate closed');
    expect(second.frames[0]).toMatchObject({ type: 'refused' });
    expect(await waitUntil(() => refusals(r)[0], 'the refusal logged')).toMatchObject({ first: { code: 'DUPLICATE', vpid: 0 } });
    expect(first.closed).toBe(false);
    expect(r.server.send(TASK, 0, { type: 'welcome', taskKey: KEY })).toBe(true);
    expect(r.connected).toHaveLength(1);
  });

  it('a second hello on one connection closes it (UNEXPECTED_HELLO)', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(0));
    c.write(hello(0));
    await closedLog(r, 'UNEXPECTED_HELLO');
    await waitUntil(() => r.closed.length > 0, 'onClosed');
    expect(r.closed).toEqual([{ vpid: 0, clean: false }]);
  });

  it('a connection that never says hello is closed after the hello timeout', async () => {
    const r = await listen({ helloTimeoutMs: 100 });
    const c = await client(r.path);
    await waitUntil(() => c.closed, 'timeout close');
    await closedLog(r, 'HELLO_TIMEOUT');
    expect(r.closed).toEqual([]);
  });

  it('a frame other than hello first closes the connection (HELLO_EXPECTED)', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write({ type: 'finalize' });
    await waitUntil(() => c.closed, 'close');
    await closedLog(r, 'HELLO_EXPECTED');
  });

  it('beyond the bound on unidentified connections the oldest is closed, not the newcomer (issue 14 item 8)', async () => {
    const r = await listen({ maxUnidentified: 2 });
    const a = await client(r.path);
    const b = await client(r.path);
    const c = await client(r.path);
    await waitUntil(() => a.closed, 'the oldest closed');
    await closedLog(r, 'TOO_MANY_UNIDENTIFIED');
    expect(b.closed || c.closed).toBe(false);
    c.write(hello(0));
    await waitUntil(() => c.frames.length > 0, 'welcome');
    expect(c.frames[0]).toMatchObject({ type: 'welcome' });
  });
});

describe('bad frames', () => {
  it('a malformed frame closes that connection with a typed reason; the server serves on', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(1));
    await waitUntil(() => c.frames.length > 0, 'welcome');
    const junk = new Uint8Array([0, 0, 0, 3, 0xc1, 0xc1, 0xc1]);
    c.socket.write(junk);
    await waitUntil(() => c.closed, 'close');
    const log = await waitUntil(() => r.logs.find((e) => e.type === 'app.closed'), 'close log');
    expect(log).toMatchObject({ task: TASK, vpid: 1, clean: false });
    expect((log as { code: string }).code).toMatch(/^WIRE_/);
    expect(r.closed).toEqual([{ vpid: 1, clean: false }]);
    const again = await client(r.path);
    again.write(hello(1));
    await waitUntil(() => again.frames.length > 0, 'welcome after reconnect');
    expect(again.frames[0]).toEqual({ type: 'welcome', taskKey: KEY });
  });

  it('an oversized frame is refused from its length prefix alone (WIRE_LIMIT)', async () => {
    const r = await listen({ maxFrameBytes: 1024 });
    const c = await client(r.path);
    c.socket.write(new Uint8Array([0, 1, 0, 0]));
    await waitUntil(() => c.closed, 'close');
    await closedLog(r, 'WIRE_LIMIT');
  });

  it('a signal after finalize closes the connection (AFTER_FINALIZE) but the disconnect stays clean', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(0));
    c.write({ type: 'signal', signum: 100, dest: GSIG_BROADCAST, arg: 1, epoch: 0 });
    c.write({ type: 'finalize' });
    c.write({ type: 'signal', signum: 100, dest: GSIG_BROADCAST, arg: 2, epoch: 0 });
    await closedLog(r, 'AFTER_FINALIZE');
    await waitUntil(() => r.closed.length > 0, 'onClosed');
    expect(r.signals).toEqual([{ vpid: 0, signum: 100, arg: 1 }]);
    expect(r.finalized).toEqual([0]);
    expect(r.closed).toEqual([{ vpid: 0, clean: true }]);
  });
});

describe('disconnects', () => {
  it('signals are forwarded in order; finalize then close is a clean disconnect', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(3));
    for (let i = 0; i < 50; i++) c.write({ type: 'signal', signum: 100 + (i % 3), dest: 0, arg: i, epoch: 0 });
    c.write({ type: 'finalize' });
    c.socket.end();
    await waitUntil(() => r.closed.length > 0, 'onClosed');
    expect(r.signals.map((s) => s.arg)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(r.finalized).toEqual([3]);
    expect(r.closed).toEqual([{ vpid: 3, clean: true }]);
    expect(r.server.isConnected(TASK, 3)).toBe(false);
    expect(r.server.send(TASK, 3, { type: 'welcome', taskKey: KEY })).toBe(false);
  });

  it('a linked child killed with SIGKILL is a crash (clean = false); one that finalizes is clean', async () => {
    const agent = await FakeAgent.start();
    agents.push(agent);
    const killed = agent.spawn('t2', 0);
    const finalizing = agent.spawn('t2', 1);
    await Promise.all([agent.connected('t2', 0), agent.connected('t2', 1)]);
    agent.sendMapping('t2', 0, [0, 1]);
    agent.sendMapping('t2', 1, [0, 1]);
    await Promise.all([killed.waitEv('ready'), finalizing.waitEv('ready')]);
    killed.proc.kill('SIGKILL');
    finalizing.send({ op: 'finalize' });
    expect(await agent.closed('t2', 0)).toMatchObject({ clean: false });
    expect(await agent.closed('t2', 1)).toMatchObject({ clean: true });
    expect(agent.events.filter((e) => e.type === 'finalized').map((e) => e.vpid)).toEqual([1]);
    expect((await finalizing.waitExit()).code).toBe(0);
  });

  it('disconnect() tells the process why and reports the close', async () => {
    const r = await listen();
    const c = await client(r.path);
    c.write(hello(2));
    await waitUntil(() => r.connected.length > 0, 'connected');
    r.server.disconnect(TASK, 2, 'task killed');
    await waitUntil(() => c.closed, 'close');
    expect(c.frames).toEqual([{ type: 'welcome', taskKey: KEY }, { type: 'refused', reason: 'task killed' }]);
    await waitUntil(() => r.closed.length > 0, 'onClosed');
    expect(r.closed).toEqual([{ vpid: 2, clean: false }]);
    await closedLog(r, 'DISCONNECTED');
  });

  it('a process that stops reading is disconnected once its queue passes the bound', async () => {
    const bound = 64 * 1024;
    const r = await listen({ maxOutgoingQueueBytes: bound });
    const c = await client(r.path);
    c.write(hello(1));
    await waitUntil(() => r.connected.length > 0, 'connected');
    c.socket.pause();
    const members = Array.from({ length: 1000 }, (_, v) => ({ vpid: v, node: 'n1', endpoint: '127.0.0.1:65535' }));
    const big: AgentToProc = { type: 'mapping', task: TASK, vpid: 1, size: 1000, restarted: false, recovered: false, epoch: 0, quorum: 1000, members, rollback: null, dgrp: null, straggler: null };
    let sent = 0;
    // The kernel's socket buffers absorb the first frames; the queue then grows in the agent.
    for (; sent < 10_000; sent++) {
      if (!r.server.send(TASK, 1, big)) break;
      if (sent % 8 === 7) await new Promise((res) => setImmediate(res));
    }
    expect(sent).toBeLessThan(10_000);
    expect(r.server.send(TASK, 1, { type: 'welcome', taskKey: KEY })).toBe(false);
    await closedLog(r, 'SLOW_READER');
    await waitUntil(() => r.closed.length > 0, 'onClosed');
    expect(r.closed).toEqual([{ vpid: 1, clean: false }]);
  });
});

describe('socket file', () => {
  it('is created owner-only and removed on close', async () => {
    const r = await listen();
    expect(lstatSync(r.path).isSocket()).toBe(true);
    expect(lstatSync(r.path).mode & 0o777).toBe(0o600);
    await r.server.close();
    servers.splice(servers.indexOf(r.server), 1);
    expect(existsSync(r.path)).toBe(false);
  });

  it('a stale socket file (nobody listening) is replaced', async () => {
    const path = tmpPath();
    // A crashed agent: a process listening at the path dies by SIGKILL and leaves the file.
    const script = `require('net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`;
    const res = spawnSync(process.execPath, ['-e', script], { stdio: 'ignore' });
    expect(res.signal).toBe('SIGKILL');
    expect(lstatSync(path).isSocket()).toBe(true);
    const server = await AppSocketServer.listen(path, { authenticate: () => null, taskKey: () => KEY });
    servers.push(server);
    const c = await client(path);
    c.write(hello(0));
    await waitUntil(() => c.frames.length > 0, 'welcome');
  });

  it('refuses a path where a server is live, or that is not a socket', async () => {
    const r = await listen();
    await expect(AppSocketServer.listen(r.path, { authenticate: () => null, taskKey: () => KEY })).rejects.toMatchObject({ code: 'ALREADY_LISTENING' });
    const file = join(dirs[0] as string, 'not-a-socket');
    writeFileSync(file, 'data');
    const e = await AppSocketServer.listen(file, { authenticate: () => null, taskKey: () => KEY }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AppSocketError);
    expect(e).toMatchObject({ code: 'PATH_IN_USE' });
    expect(existsSync(file)).toBe(true);
  });
});

describe('the agent\'s abstract socket and the task key (issue 13 item 6, PROTOCOL §9.5)', () => {
  it('listens on @trine/<cluster>/<agent> with no file: reachable by name, a second agent refused, the name free again after close', async () => {
    const name = agentSocketName(`test-${randomBytes(6).toString('hex')}`, 'a1');
    expect(name).toMatch(/^@trine\/test-[0-9a-f]{12}\/a1$/);
    const server = await AppSocketServer.listen(name, { authenticate: (task, _vpid, token) => (task === TASK && token === TOKEN ? null : 'no'), taskKey: () => KEY });
    servers.push(server);
    await expect(AppSocketServer.listen(name, { authenticate: () => null, taskKey: () => KEY })).rejects.toMatchObject({ code: 'ALREADY_LISTENING' });
    const c = await client(socketAddress(name));
    c.write(hello(1));
    await waitUntil(() => c.frames.length > 0, 'welcome');
    expect(c.frames[0]).toEqual({ type: 'welcome', taskKey: KEY });
    await server.close();
    servers.splice(servers.indexOf(server), 1);
    const again = await AppSocketServer.listen(name, { authenticate: () => null, taskKey: () => KEY });
    servers.push(again);
  });

  it('the welcome carries the task key of that process; no key known refuses the hello', async () => {
    const keys = new Map([[1, new Uint8Array(32).fill(1)], [2, new Uint8Array(32).fill(2)]]);
    const r = await listen({ taskKey: (_task, vpid) => keys.get(vpid) ?? null });
    for (const vpid of [1, 2]) {
      const c = await client(r.path);
      c.write(hello(vpid));
      await waitUntil(() => c.frames.length > 0, 'welcome');
      expect(c.frames[0]).toEqual({ type: 'welcome', taskKey: keys.get(vpid) });
    }
    const keyless = await client(r.path);
    keyless.write(hello(3));
    await waitUntil(() => keyless.closed, 'refused');
    expect(keyless.frames).toEqual([{ type: 'refused', reason: `no task key for ${TASK}/3 on this node` }]);
    expect(r.connected.map((x) => x.vpid)).toEqual([1, 2]);
  });
});

describe('strangers guessing tokens (issue 14 item 8, PROTOCOL §9.4)', () => {
  /** One stranger's attempt: connect, send a hello with a wrong token, wait for the close.
   *  Resolves with whether a `refused` frame came back. */
  const guess = (path: string, i: number): Promise<boolean> =>
    new Promise((resolve) => {
      const s = connect(path);
      sockets.push(s);
      let answered = false;
      s.on('connect', () => s.write(encodeAppFrame(procToAgent, hello(i % 4, randomBytes(16).toString('hex')))));
      s.on('data', () => {
        answered = true;
      });
      s.on('error', () => undefined);
      s.on('close', () => resolve(answered));
    });

  it('issue 14 item 8: a flood of wrong tokens gets answers only within the burst, is logged as one line per interval, and the right token still gets in during it', async () => {
    const intervalMs = 400;
    const r = await listen({ refusalBurst: 3, refusalsPerSecond: 1, refusalLogIntervalMs: intervalMs });
    const attempts = 600;
    const startedMs = Date.now();
    let answered = 0;
    let welcomed: Client | null = null;
    for (let done = 0; done < attempts; done += 50) {
      // Halfway through, the process with the right token connects among the strangers.
      if (done === 300) {
        const c = await client(r.path);
        c.write(hello(0));
        welcomed = c;
      }
      const batch = await Promise.all(Array.from({ length: 50 }, (_, i) => guess(r.path, done + i)));
      answered += batch.filter(Boolean).length;
    }
    const floodMs = Date.now() - startedMs;
    const right = welcomed as Client | null;
    if (right === null) throw new Error('the right process never connected');
    await waitUntil(() => right.frames.length > 0, 'the welcome during the flood');
    expect(right.frames[0]).toEqual({ type: 'welcome', taskKey: KEY });
    expect(r.connected.map((x) => x.vpid)).toEqual([0]);
    // The burst, plus one a second of refill.
    expect(answered).toBeLessThanOrEqual(3 + Math.ceil(floodMs / 1000) + 1);
    // Every attempt is counted, in few lines: the first at once, then one per interval.
    await waitUntil(() => refusals(r).reduce((n, e) => n + e.count, 0) === attempts, `all ${attempts} refusals logged`, floodMs + 5 * intervalMs);
    const lines = refusals(r);
    expect(lines.length).toBeLessThanOrEqual(Math.ceil((Date.now() - startedMs) / intervalMs) + 1);
    expect(lines.reduce((n, e) => n + (e.codes.AUTH_REFUSED ?? 0), 0)).toBe(attempts);
    expect(lines.reduce((n, e) => n + e.unanswered, 0)).toBe(attempts - answered);
    expect(lines[0]?.first).toMatchObject({ code: 'AUTH_REFUSED', task: TASK, reason: 'bad token' });
    expect(r.logs.filter((e) => e.type === 'app.closed')).toEqual([]);
  });

  it('issue 14 item 8: a linked process whose connection the agent drops before answering dials again and is welcomed', async () => {
    const agent = await FakeAgent.start();
    agents.push(agent);
    // Between the process and the agent: the first two connections are dropped unanswered, as
    // the agent drops the oldest unidentified connections under a flood; later ones pass.
    const proxyPath = tmpPath();
    let seen = 0;
    const proxy = createServer((s) => {
      if (++seen <= 2) {
        s.destroy();
        return;
      }
      const up = connect(agent.path);
      sockets.push(s, up);
      s.pipe(up).pipe(s);
      s.on('error', () => up.destroy());
      up.on('error', () => s.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(proxyPath, resolve));
    try {
      const child = agent.spawnChild({ ...agent.envFor(TASK, 0), TRINE_AGENT_SOCKET: proxyPath });
      await agent.connected(TASK, 0);
      agent.sendMapping(TASK, 0, [0]);
      await child.waitEv('ready');
      // The third dial is the hello; the fourth, the worker thread's attach (PROTOCOL §9.4.1),
      // which boots from the welcome on and may dial after the mapping: none after it.
      await waitUntil(() => agent.logs.some((e) => e.type === 'app.attached' && e.task === TASK), "the worker's attach");
      await new Promise((res) => setTimeout(res, 100));
      expect(seen).toBe(4);
    } finally {
      for (const x of sockets.splice(0)) x.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
});

describe('the handover to the worker thread (PROTOCOL §9.4.1)', () => {
  const attach = (vpid: number, token = TOKEN): ProcToAgent => ({ type: 'attach', task: TASK, vpid, token });

  const sig = (arg: number, data = ''): AgentToProc => ({ type: 'signal', signum: 100, src: 1, dest: 0, arg, epoch: 1, node: 'n1', data });

  /** A process connected on `first` (`before` sent to it after the welcome), then `second`
   *  attached. */
  async function handedOver(r: Recorded, vpid = 0, before: AgentToProc[] = []): Promise<{ first: Client; second: Client }> {
    const first = await client(r.path);
    first.write(hello(vpid));
    await waitUntil(() => first.frames[0]?.type === 'welcome', 'welcome');
    for (const m of before) expect(r.server.send(TASK, vpid, m)).toBe(true);
    const second = await client(r.path);
    second.write(attach(vpid));
    await waitUntil(() => second.frames.length >= 1 + before.length, 'attached and the replay');
    return { first, second };
  }

  it('attach with the hello\'s token: attached {replayed} and the frames sent since the welcome come first on the second connection; then send() writes there only', async () => {
    const r = await listen();
    const { first, second } = await handedOver(r, 0, [sig(1), sig(2)]);
    expect(r.server.send(TASK, 0, sig(3))).toBe(true);
    await waitUntil(() => second.frames.length === 4, 'the signal on the second connection');
    expect(second.frames).toEqual([{ type: 'attached', replayed: 2 }, sig(1), sig(2), sig(3)]);
    await new Promise((res) => setTimeout(res, 30));
    expect(first.frames).toEqual([expect.objectContaining({ type: 'welcome' }), sig(1), sig(2)]);
    expect(r.connected).toHaveLength(1);
    expect(r.logs.some((e) => e.type === 'app.attached' && e.vpid === 0)).toBe(true);
  });

  it('an attach after more than MAX_REPLAY_BYTES were sent since the welcome is refused', async () => {
    const r = await listen({ maxOutgoingQueueBytes: 64 * 1024 * 1024 });
    const big = sig(0, 'x'.repeat(60));
    const n = Math.ceil(MAX_REPLAY_BYTES / encodeAppFrame(agentToProc, big).length) + 1;
    const first = await client(r.path);
    first.write(hello(2));
    await waitUntil(() => first.frames[0]?.type === 'welcome', 'welcome');
    for (let i = 0; i < n; i++) r.server.send(TASK, 2, big);
    const second = await client(r.path);
    second.write(attach(2));
    await waitUntil(() => second.closed, 'refused');
    expect(second.frames[0]).toMatchObject({ type: 'refused', reason: expect.stringMatching(/bytes were sent to process t1\/2 before its attach/) });
  });

  it('requests on the second connection are executed at once, while the first is still open; the first one\'s end is not the process\'s', async () => {
    const r = await listen();
    const { first, second } = await handedOver(r);
    second.write({ type: 'signal', signum: 102, dest: 1, arg: 2, epoch: 0 });
    await waitUntil(() => r.signals.length === 1, 'the second connection\'s request');
    expect(r.signals.map((s) => s.arg)).toEqual([2]);
    first.socket.end();
    await waitUntil(() => first.closed, 'the first connection ended');
    await new Promise((res) => setTimeout(res, 30));
    expect(r.closed).toEqual([]);
    second.write({ type: 'finalize' });
    second.socket.end();
    await waitUntil(() => r.closed.length === 1, 'the close');
    expect(r.closed).toEqual([{ vpid: 0, clean: true }]);
  });

  it('a finalize on the first connection counts once: the second\'s close, with the first still open, is clean', async () => {
    const r = await listen();
    const { first, second } = await handedOver(r, 2);
    first.write({ type: 'finalize' });
    second.write({ type: 'finalize' });
    await waitUntil(() => r.finalized.includes(2), 'finalized');
    await new Promise((res) => setTimeout(res, 30));
    expect(r.finalized).toEqual([2]);
    second.socket.end();
    await waitUntil(() => r.closed.length === 1, 'the close');
    expect(r.closed).toEqual([{ vpid: 2, clean: true }]);
    await waitUntil(() => first.closed, 'the first connection closed with the second');
  });

  it('after a finalize on the first connection, what still comes on the second (a DGRP tester\'s late report) is dropped without a word: no AFTER_FINALIZE, a clean close', async () => {
    const dgrp: number[] = [];
    const r = await listen({ onDgrp: (_task, vpid) => dgrp.push(vpid) });
    const { first, second } = await handedOver(r, 3);
    second.write({ type: 'dgrp.arrive', round: 1 });
    await waitUntil(() => dgrp.length === 1, 'an arrival before the finalize');
    first.write({ type: 'finalize' });
    await waitUntil(() => r.finalized.includes(3), 'finalized');
    second.write({ type: 'dgrp.arrive', round: 2 });
    second.write({ type: 'signal', signum: 102, dest: 1, arg: 9, epoch: 0 });
    await new Promise((res) => setTimeout(res, 50));
    expect(dgrp).toEqual([3]);
    expect(r.signals).toEqual([]);
    expect(second.closed).toBe(false);
    first.socket.end();
    await waitUntil(() => first.closed, 'the first connection ended');
    second.socket.end();
    await waitUntil(() => r.closed.length === 1, 'the close');
    expect(r.closed).toEqual([{ vpid: 3, clean: true }]);
    expect(r.logs.some((e) => e.type === 'app.closed' && /AFTER_FINALIZE/.test(JSON.stringify(e)))).toBe(false);
  });

  it('a finalize sent on the first connection before it ended counts: the second\'s close is clean', async () => {
    const r = await listen();
    const { first, second } = await handedOver(r, 1);
    first.socket.end(encodeAppFrame(procToAgent, { type: 'finalize' }));
    await waitUntil(() => r.finalized.includes(1), 'finalized');
    second.socket.end();
    await waitUntil(() => r.closed.length === 1, 'the close');
    expect(r.closed).toEqual([{ vpid: 1, clean: true }]);
  });

  it('either connection ending abnormally ends the other and is the process\'s crash', async () => {
    const r = await listen();
    // The second one closes while the first is open (the worker died): the first is cut.
    const a = await handedOver(r, 0);
    a.second.socket.destroy();
    await waitUntil(() => a.first.closed, 'the first connection cut');
    await waitUntil(() => r.closed.length === 1, 'the close');
    expect(r.closed).toEqual([{ vpid: 0, clean: false }]);
    // A malformed frame on the first after the handover: the second is cut, and that is a crash.
    const b = await handedOver(r, 1);
    b.first.socket.write(Buffer.from([0, 0, 0, 2, 0xc1, 0xc1]));
    await waitUntil(() => b.second.closed, 'the second connection cut');
    await waitUntil(() => r.closed.length === 2, 'the second close');
    expect(r.closed[1]).toEqual({ vpid: 1, clean: false });
  });

  it('an attach is refused with a reason for a wrong token, a process not connected, one that finalized, and a second attach', async () => {
    const r = await listen();
    const refusedWith = async (c: Client) => {
      await waitUntil(() => c.closed, 'the refused connection closed');
      const f = c.frames[0];
      return f?.type === 'refused' ? f.reason : `no refusal: ${JSON.stringify(f)}`;
    };
    const wrong = await client(r.path);
    wrong.write(attach(2, randomBytes(16).toString('hex')));
    expect(await refusedWith(wrong)).toMatch(/bad token/);
    const lonely = await client(r.path);
    lonely.write(attach(2));
    expect(await refusedWith(lonely)).toMatch(/not connected/);
    const done = await client(r.path);
    done.write(hello(3));
    done.write({ type: 'finalize' });
    await waitUntil(() => r.finalized.includes(3), 'finalized');
    const late = await client(r.path);
    late.write(attach(3));
    expect(await refusedWith(late)).toMatch(/has finalized/);
    await handedOver(r, 0);
    const again = await client(r.path);
    again.write(attach(0));
    expect(await refusedWith(again)).toMatch(/already attached/);
    // An attach on a connection that said hello closes it.
    const twice = await client(r.path);
    twice.write(hello(1));
    twice.write(attach(1));
    await waitUntil(() => twice.closed, 'closed');
    await closedLog(r, 'UNEXPECTED_HELLO');
  });
});
