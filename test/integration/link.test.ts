// The application library (src/app/link/; spec §4, §5.2, §5.4, §7) in real child processes
// (test/fixtures/link/child.ts) linked to a real AppSocketServer standing in for the agent:
// init and the mapping, handler order, critical sections (A27), the alert flag seen inside a
// loop that never yields, request rules and every reply class, the DISAGREE rule (A8), clean
// finalize versus exit without it, and the errors outside Trine; one link also runs in the test
// process itself (membership, quorum and the invalid flag following broadcasts).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLAG, GSIG, GSIG_BROADCAST, GSIG_CM, Link } from '../../src/app/index.ts';
import { FLAG_WORDS } from '../../src/app/link/limits.ts';
import { FakeAgent, waitUntil, type Child, type ChildEvent } from '../fixtures/link/harness.ts';

let agent: FakeAgent;
let nextTask = 1;

beforeAll(async () => {
  agent = await FakeAgent.start();
});
afterAll(async () => {
  await agent.stop();
});

/** Spawn linked children for VPIDs 0..n-1 of a fresh task and send each the mapping, which
 *  also lists VPIDs 7 and 8 (members with no process here). */
async function task(n: number, mappingExtra: { epoch?: number; recovered?: boolean } = {}): Promise<{ id: string; kids: Child[] }> {
  const id = `t${nextTask++}`;
  const vpids = Array.from({ length: n }, (_, v) => v);
  const kids = vpids.map((v) => agent.spawn(id, v));
  await Promise.all(vpids.map((v) => agent.connected(id, v)));
  for (const v of vpids) agent.sendMapping(id, v, [...vpids, 7, 8], mappingExtra);
  await Promise.all(kids.map((k) => k.waitEv('ready')));
  return { id, kids };
}

/** Run a command and wait for its first reply line of `ev`. */
async function cmd(child: Child, c: Record<string, unknown>, ev: string): Promise<ChildEvent> {
  const from = child.lines.length;
  child.send(c);
  return child.waitLine((e) => e.ev === ev || e.ev === 'error', `${ev} after ${JSON.stringify(c)}`, from);
}

const after = (child: Child, from: number) => child.lines.slice(from);

describe('init', () => {
  it('resolves with the mapping once sent; the hello carries the endpoint; a recovered process sees it', async () => {
    const { id, kids } = await task(1, { epoch: 12, recovered: true });
    const ready = kids[0]?.lines.find((e) => e.ev === 'ready');
    expect(ready).toMatchObject({ vpid: 0, size: 3, epoch: 12, recovered: true, members: [0, 7, 8] });
    expect(agent.events.find((e) => e.type === 'connected' && e.task === id)).toMatchObject({ endpoint: '127.0.0.1:1' });
  });

  it('outside Trine init fails with NOT_IN_TRINE naming the variable; a refused hello fails with REFUSED', async () => {
    const env = agent.envFor('t900', 0);
    const { TRINE_TOKEN: _token, ...missing } = env;
    const outside = agent.spawnChild(missing);
    const refused = agent.spawnChild({ ...env, TRINE_TOKEN: '0'.repeat(32) });
    const e1 = await outside.waitEv('init-error');
    expect(e1).toMatchObject({ code: 'NOT_IN_TRINE' });
    expect(e1.message).toContain('TRINE_TOKEN is not set');
    const e2 = await refused.waitEv('init-error');
    expect(e2).toMatchObject({ code: 'REFUSED', message: expect.stringContaining('bad token') });
    expect((await outside.waitExit()).code).toBe(3);
    expect((await refused.waitExit()).code).toBe(3);
  });
});

describe('delivery', () => {
  it('handlers run one at a time in delivery order; a local signal raised inside one runs after it; a throw is reported and deliveries go on', async () => {
    const { id, kids } = await task(1);
    const k = kids[0] as Child;
    await cmd(k, { op: 'on', signums: [100, 101], throwOn: 5, raiseLocal: { signum: 150, arg: -1 } }, 'ok');
    await cmd(k, { op: 'on', signums: [150] }, 'ok');
    const from = k.lines.length;
    for (let i = 0; i < 12; i++) agent.sendSignal(id, 0, { signum: 100 + (i % 2), src: 7, dest: 0, arg: i, epoch: 0 });
    await k.waitLine((e) => e.ev === 'sig-end' && e.signum === 150 && after(k, from).filter((x) => x.ev === 'sig-end').length === 24, 'all deliveries', from);
    const lines = after(k, from);
    const starts = lines.filter((e) => e.ev === 'sig');
    expect(starts.map((e) => [e.signum, e.arg])).toEqual(
      Array.from({ length: 12 }, (_, i) => [[100 + (i % 2), i], [150, -1]]).flat(),
    );
    expect(starts.every((e) => e.concurrent === 1)).toBe(true);
    // Every start is followed by its own end before the next start.
    const kinds = lines.filter((e) => e.ev === 'sig' || e.ev === 'sig-end').map((e) => e.ev);
    expect(kinds).toEqual(Array.from({ length: 24 }, () => ['sig', 'sig-end']).flat());
    expect(lines.filter((e) => e.ev === 'handler-error')).toEqual([{ ev: 'handler-error', signum: 101, arg: 5, message: 'Error: handler throws on 5' }]);
    // A local signal outside a handler is delivered before raiseLocal returns.
    const f2 = k.lines.length;
    k.send({ op: 'local', signum: 150, arg: 42 });
    await k.waitEv('ok', f2);
    expect(after(k, f2).map((e) => e.ev)).toEqual(['sig', 'sig-end', 'ok']);
    // waitSignal resolves at the next delivery.
    const f3 = k.lines.length;
    k.send({ op: 'wait' });
    await new Promise((r) => setTimeout(r, 50));
    agent.sendSignal(id, 0, { signum: 160, src: 7, dest: 0, arg: 3, epoch: 0 });
    expect(await k.waitEv('waited', f3)).toMatchObject({ signum: 160, arg: 3 });
  });

  it('A27: signals arriving inside a critical section are delivered before exitCs returns', async () => {
    const { id, kids } = await task(1);
    const k = kids[0] as Child;
    await cmd(k, { op: 'on', signums: [100] }, 'ok');
    const from = k.lines.length;
    k.send({ op: 'cs', holdMs: 600 });
    await k.waitEv('cs-entered', from);
    for (let i = 0; i < 3; i++) agent.sendSignal(id, 0, { signum: 100, src: 7, dest: 0, arg: i, epoch: 0 });
    await k.waitEv('cs-exit-done', from);
    const seq = after(k, from).map((e) => (e.ev === 'sig' ? `sig${String(e.arg)}${e.inCs === true ? '!' : ''}` : e.ev));
    expect(seq).toEqual(['cs-entered', 'cs-exit-begin', 'sig0', 'sig-end', 'sig1', 'sig-end', 'sig2', 'sig-end', 'cs-exit-done']);
  });

  it('the alert flag is seen inside a loop that never yields, raised by the worker on arrival', async () => {
    const { id, kids } = await task(1);
    const k = kids[0] as Child;
    const rounds = 30;
    const from = k.lines.length;
    k.send({ op: 'alert', signums: [200], rounds });
    const latenciesMs: number[] = [];
    let delivered: unknown = null;
    for (let i = 0; i < rounds; i++) {
      await k.waitLine((e) => e.ev === 'spin' && e.i === i, `spin ${i}`, from);
      await new Promise((r) => setTimeout(r, 2));
      const t0 = process.hrtime.bigint();
      agent.sendSignal(id, 0, { signum: 200, src: 7, dest: 0, arg: i, epoch: 0 });
      const seen = await k.waitLine((e) => e.ev === 'seen' && e.i === i, `seen ${i}`, from);
      expect(seen.ok).toBe(true);
      latenciesMs.push(Number(BigInt(seen.t as string) - t0) / 1e6);
      // No handler ran during the loop: the worker raised the flag, not a delivery.
      if (i === 0) delivered = seen.delivered;
      expect(seen.delivered).toBe(delivered);
    }
    latenciesMs.sort((a, b) => a - b);
    const p50 = latenciesMs[Math.floor(rounds / 2)] as number;
    const max = latenciesMs[rounds - 1] as number;
    console.log(`alert flag latency (agent send → seen in a synchronous loop), ${rounds} rounds: p50 ${p50.toFixed(3)} ms, max ${max.toFixed(3)} ms`);
    expect(max).toBeLessThan(1000);
  });
});

describe('the handover to the worker thread (PROTOCOL §9.4.1)', () => {
  /** Between the process and the agent: the second connection (the worker's attach) is held back
   *  ATTACH_DELAY_MS, so what the agent sends meanwhile goes on the first connection only, which a
   *  spinning main thread does not read. */
  const ATTACH_DELAY_MS = 300;
  async function withSlowAttach(run: (proxyPath: string, connections: () => number) => Promise<void>): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'trine-handover-'));
    const proxyPath = join(dir, 'proxy.sock');
    const sockets: Socket[] = [];
    let seen = 0;
    const proxy = createServer((s) => {
      sockets.push(s);
      const pipeUp = () => {
        const up = connect(agent.path);
        sockets.push(up);
        s.pipe(up).pipe(s);
        s.on('error', () => up.destroy());
        up.on('error', () => s.destroy());
      };
      if (++seen === 1) pipeUp();
      else setTimeout(pipeUp, ATTACH_DELAY_MS);
    });
    await new Promise<void>((resolve) => proxy.listen(proxyPath, resolve));
    try {
      await run(proxyPath, () => seen);
    } finally {
      for (const x of sockets) x.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('a signal that came on the first connection while the main thread spins raises the alert flag once the worker attaches (the replay), and is delivered once', async () => {
    await withSlowAttach(async (proxyPath, connections) => {
      const id = `t${nextTask++}`;
      const k = agent.spawnChild({ ...agent.envFor(id, 0), TRINE_AGENT_SOCKET: proxyPath, CHILD_SPIN_AT_READY: '200' });
      await agent.connected(id, 0);
      agent.sendMapping(id, 0, [0, 7]);
      await k.waitEv('spinning');
      const t0 = process.hrtime.bigint();
      agent.sendSignal(id, 0, { signum: 200, src: 7, dest: 0, arg: 1, epoch: 0 });
      const seenAt = await k.waitEv('seen-at-ready');
      const waitedMs = Number(process.hrtime.bigint() - t0) / 1e6;
      expect(seenAt).toMatchObject({ ok: true, delivered: 0 });
      expect(connections()).toBe(2);
      // Raised by the worker from the replay, after the held-back attach: not by a delivery.
      expect(waitedMs).toBeGreaterThanOrEqual(ATTACH_DELAY_MS / 2);
      // Delivered once, not twice (the replay's copy of what the main thread took is skipped).
      await cmd(k, { op: 'on', signums: [201] }, 'ok');
      agent.sendSignal(id, 0, { signum: 201, src: 7, dest: 0, arg: 2, epoch: 0 });
      await k.waitLine((e) => e.ev === 'sig' && e.signum === 201, 'the next signal');
      expect(k.lines.filter((e) => e.ev === 'sig' && e.signum === 200)).toHaveLength(1);
      expect(agent.logs.some((e) => e.type === 'app.attached' && e.task === id)).toBe(true);
    });
  });

  it('a signal the main thread took before the switch does not raise its flag again when the replay brings it to the worker', async () => {
    await withSlowAttach(async (proxyPath) => {
      const id = `t${nextTask++}`;
      const k = agent.spawnChild({ ...agent.envFor(id, 0), TRINE_AGENT_SOCKET: proxyPath, CHILD_REPLAY_CHECK: '200' });
      await agent.connected(id, 0);
      agent.sendMapping(id, 0, [0, 7]);
      await k.waitEv('armed');
      // Taken by the main thread's pump (its rule raised the flag), handled, the flag cleared;
      // the handler spins past the held-back attach, so the replay reaches the worker meanwhile.
      agent.sendSignal(id, 0, { signum: 200, src: 7, dest: 0, arg: 1, epoch: 0 });
      expect(await k.waitLine((e) => e.ev === 'after-spin' && e.arg === 1, 'the first spin')).toMatchObject({ raised: false });
      expect(k.lines.find((e) => e.ev === 'sig' && e.arg === 1)).toMatchObject({ raised: true });
      await waitUntil(() => agent.logs.some((e) => e.type === 'app.attached' && e.task === id), 'the attach');
      // A new signal, by the worker: raised at arrival, delivered once.
      agent.sendSignal(id, 0, { signum: 200, src: 7, dest: 0, arg: 2, epoch: 0 });
      expect(await k.waitLine((e) => e.ev === 'sig' && e.arg === 2, 'the second signal')).toMatchObject({ raised: true });
      await k.waitLine((e) => e.ev === 'after-spin' && e.arg === 2, 'the second spin');
      expect(k.lines.filter((e) => e.ev === 'sig')).toHaveLength(2);
    });
  });

  it('a request sent before the worker has attached, from a loop that never yields, reaches the agent at once (the main thread writes it on its own connection)', async () => {
    await withSlowAttach(async (proxyPath) => {
      const id = `t${nextTask++}`;
      const k = agent.spawnChild({ ...agent.envFor(id, 0), TRINE_AGENT_SOCKET: proxyPath });
      await agent.connected(id, 0);
      agent.sendMapping(id, 0, [0, 7]);
      await k.waitEv('ready');
      k.send({ op: 'signal-then-spin', signum: 102, dest: 7, arg: 5, spinMs: 3000 });
      await k.waitEv('spin-begin');
      await waitUntil(() => agent.signalsFrom(id, 0).some((e) => e.req.arg === 5), 'the request at the agent while the child spins', 2500);
      expect(k.lines.some((e) => e.ev === 'spin-end')).toBe(false);
    });
  });

  /** A proxy that counts what the process writes on each of its connections (1: the main
   *  thread's, 2: the worker's), can cut one, and can hold back what the agent sends on one
   *  (hold(n): what has been held back so far, and the release). */
  type Held = { chunks: () => number; release: () => void };
  async function withCountingProxy(
    run: (proxyPath: string, up: number[], cut: (n: number) => void, hold: (n: number) => Held) => Promise<void>, target = agent.path,
  ): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'trine-handover-'));
    const proxyPath = join(dir, 'proxy.sock');
    const pairs: Socket[][] = [];
    const up: number[] = [0, 0, 0];
    /** Per held connection, what the agent sent meanwhile (null: its end). */
    const held = new Map<number, (Buffer | null)[]>();
    const toProcess = (s: Socket, d: Buffer | null) => (d === null ? s.end() : s.write(d));
    const proxy = createServer((s) => {
      const n = pairs.length + 1;
      const a = connect(target);
      pairs.push([s, a]);
      s.on('data', (d: Buffer) => {
        up[n] = (up[n] ?? 0) + d.length;
      });
      s.pipe(a);
      for (const [event, d] of [['data', undefined], ['end', null]] as const) {
        a.on(event, (chunk?: Buffer) => {
          const queue = held.get(n);
          if (queue !== undefined) queue.push(d === null ? null : (chunk as Buffer));
          else toProcess(s, d === null ? null : (chunk as Buffer));
        });
      }
      s.on('error', () => a.destroy());
      a.on('error', () => s.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(proxyPath, resolve));
    try {
      await run(proxyPath, up, (n) => {
        for (const x of pairs[n - 1] ?? []) x.destroy();
      }, (n) => {
        held.set(n, []);
        return {
          chunks: () => held.get(n)?.length ?? 0,
          release: () => {
            const queue = held.get(n) ?? [];
            held.delete(n);
            const s = pairs[n - 1]?.[0];
            if (s !== undefined) for (const d of queue) toProcess(s, d);
          },
        };
      });
    } finally {
      for (const x of pairs.flat()) x.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /** A child linked through `proxyPath`, ready, its worker attached. */
  async function attachedChild(proxyPath: string): Promise<{ id: string; k: Child }> {
    const id = `t${nextTask++}`;
    const k = agent.spawnChild({ ...agent.envFor(id, 0), TRINE_AGENT_SOCKET: proxyPath });
    await agent.connected(id, 0);
    agent.sendMapping(id, 0, [0, 7]);
    await k.waitEv('ready');
    await waitUntil(() => agent.logs.some((e) => e.type === 'app.attached' && e.task === id), "the worker's attach");
    return { id, k };
  }

  it('after the worker has attached, a request and the finalize still go on the main thread\'s connection, in order, and the process ends cleanly', async () => {
    await withCountingProxy(async (proxyPath, up) => {
      const { id, k } = await attachedChild(proxyPath);
      const before = [...up];
      k.send({ op: 'signal', signum: 102, dest: 7, arg: 31 });
      await waitUntil(() => agent.signalsFrom(id, 0).some((e) => e.req.arg === 31), 'the request at the agent');
      expect(up[1]).toBeGreaterThan(before[1] ?? 0);
      expect(up[2]).toBe(before[2]);
      k.send({ op: 'finalize' });
      expect(await k.waitEv('finalized')).toMatchObject({ state: 'finalized' });
      await waitUntil(() => agent.events.some((e) => e.type === 'closed' && e.task === id), 'the close');
      expect(agent.events.filter((e) => e.type === 'finalized' && e.task === id)).toHaveLength(1);
      expect(agent.events.find((e) => e.type === 'closed' && e.task === id)).toMatchObject({ clean: true });
      expect(up[2]).toBe(before[2]);
    });
  });

  /** Cut the main thread's connection (1) of `k`, wait until the agent and then the process
   *  have seen it end (a request written before the process read the end is lost with the
   *  connection, PROTOCOL §9.4.1 step 5), and check that a request then goes by the worker's (2). */
  async function cutFirstThenRequest(k: Child, id: string, up: number[], cut: (n: number) => void, arg: number): Promise<void> {
    cut(1);
    await waitUntil(() => agent.logs.some((e) => e.type === 'app.closed' && e.task === id && /moved/.test(String((e as { detail?: string }).detail))), 'the first connection closed at the agent');
    const turn = k.lines.length;
    k.send({ op: 'on', signums: [] });
    await k.waitEv('ok', turn);
    const before = up[2] ?? 0;
    k.send({ op: 'signal', signum: 102, dest: 7, arg });
    await waitUntil(() => agent.signalsFrom(id, 0).some((e) => e.req.arg === arg), 'the request at the agent, by the worker');
    expect(up[2]).toBeGreaterThan(before);
  }

  /** Finalize `k`: finalized, the link never lost, a clean close at the agent. */
  async function finalizeClean(k: Child, id: string): Promise<void> {
    k.send({ op: 'finalize' });
    expect(await k.waitEv('finalized')).toMatchObject({ state: 'finalized' });
    expect(k.lines.some((e) => e.ev === 'lost')).toBe(false);
    await waitUntil(() => agent.events.some((e) => e.type === 'closed' && e.task === id), 'the close');
    expect(agent.events.find((e) => e.type === 'closed' && e.task === id)).toMatchObject({ clean: true });
  }

  it('if the main thread\'s connection ends after the switch, the link stays up: later requests and the finalize go by the worker', async () => {
    await withCountingProxy(async (proxyPath, up, cut) => {
      const { id, k } = await attachedChild(proxyPath);
      await cutFirstThenRequest(k, id, up, cut, 32);
      await finalizeClean(k, id);
    });
  });

  it('if the main thread\'s connection ends while the worker attaches (the agent has switched, the process not yet), the link stays up and the attach carries it on', async () => {
    await withCountingProxy(async (proxyPath, up, cut, hold) => {
      // The agent's `attached` and its replay are held back: the process is still attaching.
      const held = hold(2);
      const { id, k } = await attachedChild(proxyPath);
      await cutFirstThenRequest(k, id, up, cut, 33);
      held.release();
      await finalizeClean(k, id);
    });
  });

  it('before the switch, two signals that arrive in one read each reach an `await link.waitSignal()` loop (promise jobs run between two, as between two port messages)', async () => {
    await withCountingProxy(async (proxyPath, _up, _cut, hold) => {
      const held = hold(2); // the worker never attaches: everything comes on the first connection
      const id = `t${nextTask++}`;
      const k = agent.spawnChild({ ...agent.envFor(id, 0), TRINE_AGENT_SOCKET: proxyPath });
      await agent.connected(id, 0);
      agent.sendMapping(id, 0, [0, 7]);
      await k.waitEv('ready');
      k.send({ op: 'wait-n', n: 2 });
      await k.waitEv('waiting');
      // Both written in one turn of the agent's loop: the process reads them together.
      for (const arg of [1, 2]) agent.sendSignal(id, 0, { signum: 100, src: 7, dest: 0, arg, epoch: 0 });
      await waitUntil(() => k.lines.filter((e) => e.ev === 'waited').length === 2, 'both signals waited for');
      expect(k.lines.filter((e) => e.ev === 'waited').map((e) => e.arg)).toEqual([1, 2]);
      held.release();
      k.send({ op: 'finalize' });
      expect(await k.waitEv('finalized')).toMatchObject({ state: 'finalized' });
    });
  });

  it('an attach the agent refuses loses the link with the reason; a finalize asked for meanwhile still ends the process cleanly', async () => {
    // An agent that takes each token once (the hello) and sends the mapping with its welcome:
    // the worker's attach that follows is refused.
    const used = new Set<string>();
    const once: FakeAgent = await FakeAgent.start({
      authenticate: (task, vpid, token) => {
        const key = `${task}/${vpid}`;
        if (used.has(key)) return 'this token was used already';
        used.add(key);
        return once.tokens.get(key) === token ? null : 'bad token';
      },
      onConnected: (task, vpid, endpoint) => {
        once.events.push({ type: 'connected', task, vpid, endpoint });
        once.sendMapping(task, vpid, [vpid]);
      },
    });
    try {
      const k = once.spawnChild(once.envFor('t1', 0));
      const lost = await k.waitLine((e) => e.ev === 'lost' || e.ev === 'init-error', 'the link lost');
      expect(String(lost.message)).toMatch(/refused the worker's connection: this token was used already/);
      // The main thread's connection ends while the worker attaches: the refusal that follows
      // loses the link, and says so.
      await withCountingProxy(async (proxyPath, _up, cut, hold) => {
        const held = hold(2);
        const k3 = once.spawnChild({ ...once.envFor('t3', 0), TRINE_AGENT_SOCKET: proxyPath });
        await k3.waitEv('ready');
        await waitUntil(() => held.chunks() > 0, "the agent's refusal of the attach, held back");
        cut(1);
        const turn = k3.lines.length;
        k3.send({ op: 'on', signums: [] });
        await k3.waitEv('ok', turn);
        held.release();
        const lost3 = await k3.waitLine((e) => e.ev === 'lost', 'the link lost');
        expect(String(lost3.message)).toMatch(/refused the worker's connection: this token was used already \(the main thread's connection had ended first: /);
      }, once.path);
      const k2 = once.spawnChild({ ...once.envFor('t2', 0), CHILD_FINALIZE_AT_INIT: '1' });
      expect(await k2.waitEv('finalized')).toMatchObject({ state: 'finalized' });
      await waitUntil(() => once.events.find((e) => e.type === 'closed' && e.task === 't2'), 'the close');
      expect(once.events.find((e) => e.type === 'closed' && e.task === 't2')).toMatchObject({ clean: true });
      expect(once.events.filter((e) => e.type === 'finalized' && e.task === 't2')).toHaveLength(1);
    } finally {
      await once.stop();
    }
  });
});

describe('requests', () => {
  it('misuse is a typed error and sends nothing: a second outstanding request, bad signals, non-members, bad args', async () => {
    const { id, kids } = await task(1);
    const k = kids[0] as Child;
    expect(await cmd(k, { op: 'signal', signum: 100, dest: GSIG_BROADCAST, arg: 1 }, 'sent')).toMatchObject({ ev: 'sent', epoch: 0 });
    const errors: [Record<string, unknown>, string][] = [
      [{ signum: 101, dest: GSIG_BROADCAST, arg: 2 }, 'REQUEST_OUTSTANDING'],
      [{ signum: GSIG.REQ_SYNC, dest: GSIG_CM, arg: 2 }, 'REQUEST_OUTSTANDING'],
      [{ signum: 100, dest: GSIG_CM, arg: 2 }, 'BAD_SIGNAL'],
      [{ signum: GSIG.REQ_SYNC, dest: 7, arg: 2 }, 'BAD_SIGNAL'],
      [{ signum: 0x10000, dest: 7, arg: 2 }, 'BAD_SIGNAL'],
      [{ signum: 100, dest: 9, arg: 2 }, 'NOT_A_MEMBER'],
      [{ signum: 100, dest: 7, arg: 2 ** 31 }, 'BAD_ARG'],
      [{ signum: 100, dest: 7, arg: 1.5 }, 'BAD_ARG'],
    ];
    for (const [c, code] of errors) expect(await cmd(k, { op: 'signal', ...c }, 'sent')).toMatchObject({ ev: 'error', code });
    // Point-to-point signals are not requests: allowed while one is outstanding.
    expect(await cmd(k, { op: 'signal', signum: 102, dest: 7, arg: 3 }, 'sent')).toMatchObject({ ev: 'sent' });
    await waitUntil(() => agent.signalsFrom(id, 0).length === 2, 'two signals');
    await new Promise((r) => setTimeout(r, 50));
    expect(agent.signalsFrom(id, 0).map((e) => e.req)).toEqual([
      { signum: 100, dest: GSIG_BROADCAST, arg: 1, epoch: 0 },
      { signum: 102, dest: 7, arg: 3, epoch: 0 },
    ]);
  });

  it('each reply class, epochs carried, and an acked group request completed by its reply', async () => {
    const { id, kids } = await task(1);
    const k = kids[0] as Child;
    let epoch = 0;
    const step = async (signum: number, dest: number, arg: number, answer: { signum: number; src: number; arg: number }): Promise<ChildEvent> => {
      const n = agent.signalsFrom(id, 0).length;
      const sent = await cmd(k, { op: 'signal', signum, dest, arg }, 'sent');
      expect(sent).toMatchObject({ ev: 'sent', epoch });
      await waitUntil(() => agent.signalsFrom(id, 0).length > n, 'request at the agent');
      epoch++;
      agent.sendSignal(id, 0, { ...answer, dest: GSIG_BROADCAST, epoch });
      return cmd(k, { op: 'outcome' }, 'outcome');
    };
    expect(await step(100, GSIG_BROADCAST, 1, { signum: 100, src: 0, arg: 1 })).toMatchObject({ class: 'own-broadcast' });
    expect(await step(100, GSIG_BROADCAST, 2, { signum: 100, src: 7, arg: 2 })).toMatchObject({ class: 'dropped' });
    expect(await step(GSIG.REQ_SYNC, GSIG_CM, 7, { signum: GSIG.REP_SYNC, src: GSIG_CM, arg: 7 })).toMatchObject({ class: 'own-reply' });
    expect(await step(GSIG.REQ_SYNC, GSIG_CM, 8, { signum: GSIG.REP_SYNC, src: GSIG_CM, arg: 9 })).toMatchObject({ class: 'other-reply' });
    expect(await step(GSIG.REQ_SYNC, GSIG_CM, 8, { signum: GSIG.REP_ACK_SPAWN, src: GSIG_CM, arg: 0 })).toMatchObject({ class: 'other-ack' });
    expect(await step(GSIG.REQ_SYNC, GSIG_CM, 8, { signum: GSIG.ERR_DISAGREE, src: GSIG_CM, arg: 8 })).toMatchObject({ class: 'disagree' });
    expect(await step(GSIG.REQ_KILL, GSIG_CM, 7, { signum: GSIG.REP_ACK_KILL, src: GSIG_CM, arg: 7 })).toMatchObject({ class: 'own-ack', acked: true });
    expect(await cmd(k, { op: 'signal', signum: GSIG.REQ_SYNC, dest: GSIG_CM, arg: 1 }, 'sent')).toMatchObject({ ev: 'error', code: 'ACK_PENDING' });
    // Error notifications may precede the reply; they do not complete the acked request.
    const from = k.lines.length;
    k.send({ op: 'outcome' });
    agent.sendSignal(id, 0, { signum: GSIG.NTF_DIED, src: GSIG_CM, dest: GSIG_BROADCAST, arg: 8, epoch: ++epoch });
    agent.sendSignal(id, 0, { signum: GSIG.NTF_DIED, src: GSIG_CM, dest: GSIG_BROADCAST, arg: 7, epoch: ++epoch });
    const done = await k.waitEv('outcome', from);
    expect(done).toMatchObject({ class: 'own-reply', signum: GSIG.NTF_DIED, arg: 7, req: { signum: GSIG.REQ_KILL, arg: 7 }, acked: false });
    // The two NTF_DIED removed VPIDs 8 and 7 from the members.
    expect(await cmd(k, { op: 'signal', signum: 100, dest: 7, arg: 0 }, 'sent')).toMatchObject({ ev: 'error', code: 'NOT_A_MEMBER' });
    expect(await cmd(k, { op: 'signal', signum: 100, dest: 8, arg: 0 }, 'sent')).toMatchObject({ ev: 'error', code: 'NOT_A_MEMBER' });
    expect(await cmd(k, { op: 'signal', signum: GSIG.REQ_SYNC, dest: GSIG_CM, arg: 1 }, 'sent')).toMatchObject({ ev: 'sent', epoch });
    expect(k.lines.some((e) => e.ev === 'self-diagnosis')).toBe(false);
  });

  it('A8: ERR_DISAGREE with no pending group request runs the self-diagnosis hook; with one it is classified disagree', async () => {
    const { id, kids } = await task(1);
    const k = kids[0] as Child;
    agent.sendSignal(id, 0, { signum: GSIG.ERR_DISAGREE, src: GSIG_CM, dest: GSIG_BROADCAST, arg: 4, epoch: 1 });
    expect(await k.waitEv('self-diagnosis')).toMatchObject({ signum: GSIG.ERR_DISAGREE, arg: 4 });
    await cmd(k, { op: 'signal', signum: GSIG.REQ_SYNC, dest: GSIG_CM, arg: 5 }, 'sent');
    await waitUntil(() => agent.signalsFrom(id, 0).length === 1, 'request');
    agent.sendSignal(id, 0, { signum: GSIG.ERR_DISAGREE, src: GSIG_CM, dest: GSIG_BROADCAST, arg: 5, epoch: 2 });
    expect(await cmd(k, { op: 'outcome' }, 'outcome')).toMatchObject({ class: 'disagree' });
    expect(k.lines.filter((e) => e.ev === 'self-diagnosis')).toHaveLength(1);
  });
});

describe('disconnects', () => {
  it('finalize is a clean disconnect; exit without finalize is a crash; an agent disconnect is reported as lost', async () => {
    const { id, kids } = await task(3);
    const [fin, quit, dropped] = kids as [Child, Child, Child];
    fin.send({ op: 'finalize' });
    quit.send({ op: 'exit', code: 0 });
    agent.server.disconnect(id, 2, 'task killed');
    expect(await fin.waitEv('finalized')).toMatchObject({ state: 'finalized' });
    expect(await agent.closed(id, 0)).toMatchObject({ clean: true });
    expect(await agent.closed(id, 1)).toMatchObject({ clean: false });
    expect(await dropped.waitEv('lost')).toMatchObject({ code: 'REFUSED', message: expect.stringContaining('task killed') });
    expect(await agent.closed(id, 2)).toMatchObject({ clean: false });
    expect((await fin.waitExit()).code).toBe(0);
    expect((await quit.waitExit()).code).toBe(0);
    expect(await cmd(dropped, { op: 'signal', signum: 100, dest: 0, arg: 0 }, 'sent')).toMatchObject({ ev: 'error', code: 'LINK_LOST' });
  });
});

describe('in the test process', () => {
  it('membership, quorum and flag rules follow the broadcasts; misuse of the local API is typed; finalize rejects waiters', async () => {
    const env = agent.envFor('t950', 0);
    const pending = Link.init({ env });
    await agent.connected('t950', 0);
    agent.sendMapping('t950', 0, [0, 7, 8], { epoch: 3 });
    const link = await pending;
    try {
      expect([link.task, link.vpid, link.epoch, link.quorum]).toEqual(['t950', 0, 3, 3]);
      link.flagOn(FLAG.INVALID, [GSIG.NTF_DIED]);
      expect(() => link.flagOn(FLAG_WORDS, [1])).toThrow(expect.objectContaining({ code: 'BAD_FLAG' }));
      expect(() => link.alertOn([0])).toThrow(expect.objectContaining({ code: 'BAD_SIGNAL' }));
      expect(() => link.exitCs()).toThrow(expect.objectContaining({ code: 'NOT_IN_CS' }));
      expect(() => link.requestOutcome()).toThrow(expect.objectContaining({ code: 'NO_REQUEST' }));
      const send = (signum: number, arg: number, node = '', data = '') =>
        agent.sendSignal('t950', 0, { signum, src: GSIG_CM, dest: GSIG_BROADCAST, arg, epoch: link.epoch + 1, node, data });
      send(GSIG.REP_SPAWNED, 9, 'n2', '127.0.0.1:4009');
      await link.waitSignal();
      expect(link.memberList.map((m) => [m.vpid, m.node, m.endpoint])).toEqual([
        [0, 'n1', '127.0.0.1:4000'], [7, 'n1', '127.0.0.1:4007'], [8, 'n1', '127.0.0.1:4008'], [9, 'n2', '127.0.0.1:4009'],
      ]);
      expect(link.flagCheck(FLAG.INVALID)).toBe(false);
      const died = link.waitSignal();
      send(GSIG.NTF_DIED, 7);
      await waitUntil(() => link.flagCheck(FLAG.INVALID), 'invalid flag raised by the worker');
      await died;
      expect(link.isMember(7)).toBe(false);
      send(GSIG.REP_QUORUMSET, 2);
      await link.waitSignal();
      expect([link.quorum, link.epoch]).toEqual([2, 6]);
      const waiting = link.waitSignal().catch((e: unknown) => e);
      await link.finalize();
      expect(await waiting).toMatchObject({ code: 'FINALIZED' });
      expect(() => link.signal(100, GSIG_BROADCAST, 0)).toThrow(expect.objectContaining({ code: 'FINALIZED' }));
      expect(await agent.closed('t950', 0)).toMatchObject({ clean: true });
    } finally {
      await link.finalize();
    }
  });
});
