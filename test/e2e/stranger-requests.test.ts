// What a stranger gets by replaying what it captured, or by guessing tokens, from a real local
// cluster (issue 14 items 7 and 8):
//   - item 7: the status queries `trine status` sends (captured from the operator client's own
//     transport as the CLI runs it) replayed to a replica and to the watchdog get nothing back:
//     on the operator's connection the query's challenge is stale (counted REPLAYED, PROTOCOL
//     §7); on a stranger's new connection, where the listener's nonce is all that comes back,
//     neither the captured frame nor the operator's captured bind proof binds it, so the
//     frame is never read (§2.5, issue 14 item 2); a fresh `trine status` still works;
//   - item 8: 2,000 wrong tokens against an agent's application socket cost it a handful of
//     aggregate log lines, its node stays healthy, and a linked task started during the flood
//     connects and finishes (PROTOCOL §9.4).
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { encodeAppFrame, procToAgent } from '../../src/core/wire/app-wire.ts';
import { decodeFrame } from '../../src/core/wire/frame.ts';
import type { ClusterView } from '../../src/core/status.ts';
import type { Frame } from '../../src/core/wire/messages.ts';
import { agentSocketName, socketAddress } from '../../src/daemon/app-socket.ts';
import { loadCluster, paths, type Cluster } from '../../src/io/cluster-dir.ts';
import { readKeyFile } from '../../src/io/keys.ts';
import { readKeeperChildPid } from '../../src/io/run-records.ts';
import { createNodeLinkAuth } from '../../src/io/link-auth-node.ts';
import { createNodeVerifier } from '../../src/io/signer-node.ts';
import { WsTransport, type WsTransportOptions } from '../../src/io/ws-transport.ts';
import { OperatorClient } from '../../cli/status-client.ts';
import type { StatusDocument } from '../../cli/status-report.ts';
import { GmpiCluster, REPO } from './gmpi-cluster.ts';
import { logEvents, trine, type Run } from './helpers.ts';

/** How long a replay is given to draw an answer: hundreds of round trips on loopback. */
const SILENCE_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let c: GmpiCluster | null = null;
let dir = '';
let cluster: Cluster;

beforeAll(async () => {
  c = await GmpiCluster.up('trine-strangers-');
  dir = c.dir;
  cluster = loadCluster(dir);
}, 120_000);

afterAll(async () => {
  await c?.down();
}, 60_000);

/** A frame decoded as `self` would decode it (its keys from the cluster dir); null if not. */
function decodeAs(self: string, data: Uint8Array): Frame | null {
  const key = readKeyFile(paths.keyFile(dir, self));
  const linkAuth = createNodeLinkAuth(self, key.seed, cluster.publicKeys, cluster.config.cluster);
  const r = decodeFrame(data, { cluster: cluster.config.cluster, self, verifier: createNodeVerifier(cluster.publicKeys), linkAuth });
  return r.ok ? r.value : null;
}

/** Sends each of `frames` to `target`'s listener on a new WebSocket connection of its own (a
 *  stranger's), the last one twice, and returns what came back within SILENCE_MS: the
 *  listener's nonce (text) and any frame (binary). */
async function replayAsStranger(target: string, frames: readonly Uint8Array[]): Promise<{ texts: number; frames: Uint8Array[] }> {
  const at = cluster.config.processes.find((p) => p.id === target)?.listen;
  if (at === null || at === undefined) throw new Error(`${target} does not listen`);
  const ws = new WebSocket(`ws://${at.host}:${at.port}/trine/${cluster.config.cluster}`);
  const back = { texts: 0, frames: [] as Uint8Array[] };
  ws.on('message', (data: Buffer, isBinary: boolean) => (isBinary ? back.frames.push(new Uint8Array(data)) : back.texts++));
  ws.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  for (const f of frames) ws.send(f);
  await sleep(200);
  ws.send(frames[frames.length - 1] as Uint8Array); // the same bytes again on the same (stranger's) connection
  await sleep(SILENCE_MS);
  ws.terminate();
  return back;
}

describe('replayed status queries (issue 14 item 7, PROTOCOL §7)', () => {
  it('issue 14 item 7: a captured status query replayed on the same or a new connection gets nothing from a replica or the watchdog; a fresh trine status still works', { timeout: 120_000 }, async () => {
    // The operator client exactly as `trine status` runs it, its frames captured on their way
    // to the transport and everything that comes back recorded.
    const sent: { to: string; frame: Uint8Array }[] = [];
    const inbound: Uint8Array[] = [];
    let transport: WsTransport | null = null;
    const start = WsTransport.start.bind(WsTransport);
    const startSpy = vi.spyOn(WsTransport, 'start').mockImplementation(async (opts: WsTransportOptions) => {
      transport = await start({ ...opts, receive: (data, claimed) => (inbound.push(data), opts.receive(data, claimed)) });
      return transport;
    });
    const send = WsTransport.prototype.send;
    const sendSpy = vi.spyOn(WsTransport.prototype, 'send').mockImplementation(function (this: WsTransport, to, frame) {
      sent.push({ to, frame });
      send.call(this, to, frame);
    });
    // Its bind proofs (PROTOCOL §2.5) go straight to the socket.
    const proofs: { to: string; frame: Uint8Array }[] = [];
    const wsSend = WebSocket.prototype.send;
    const wsSpy = vi.spyOn(WebSocket.prototype, 'send').mockImplementation(function (this: WebSocket, data: unknown, ...rest: unknown[]) {
      if (data instanceof Uint8Array) {
        for (const to of ['r1', cluster.config.membership.scc]) if (decodeAs(to, data)?.items[0]?.type === 'bind.proof') proofs.push({ to, frame: data });
      }
      return (wsSend as (...a: unknown[]) => void).call(this, data, ...rest);
    });
    const client = await OperatorClient.open(cluster);
    try {
      const answers = await client.query(20_000);
      expect([...answers.replicas.values()].every((a) => a.ok)).toBe(true);
      expect(answers.watchdog.ok).toBe(true);
      const replyBytes = inbound.filter((d) => decodeAs('op', d)?.items.some((i) => i.type === 'status.reply')).map((d) => d.length);
      // The client resends a query until answered: let late answers to its own queries arrive
      // first, so that what comes after a replay below can only be an answer to the replay.
      await sleep(SILENCE_MS);

      for (const target of ['r1', cluster.config.membership.scc]) {
        const query = sent.find((s) => s.to === target && decodeAs(target, s.frame)?.items.some((i) => i.type === 'status.query'));
        if (query === undefined) throw new Error(`no status query to ${target} captured`);
        // The same bytes on the operator's own connection, which is still open: nothing back.
        const before = inbound.length;
        send.call(transport as unknown as WsTransport, target, query.frame);
        await sleep(SILENCE_MS);
        const later = inbound.slice(before).map((d) => decodeAs('op', d)).filter((f) => f !== null && f.from === target);
        expect(later.flatMap((f) => f?.items ?? []).filter((i) => i.type === 'status.reply')).toEqual([]);
        // The same bytes on a stranger's new connection, twice, and after the operator's own
        // bind proof (of its connection's nonce): the nonce comes back, and no frame.
        const back = await replayAsStranger(target, [query.frame]);
        expect(back).toEqual({ texts: 1, frames: [] });
        const proof = proofs.find((p) => p.to === target);
        if (proof === undefined) throw new Error(`no bind proof to ${target} captured`);
        expect(await replayAsStranger(target, [proof.frame, query.frame])).toEqual({ texts: 1, frames: [] });
        console.log(`${target}: a status query of ${query.frame.length} bytes replayed 5 times, 4 of them on strangers' connections (2 after the operator's bind proof), drew no frame (a fresh one draws a reply of ${Math.max(...replyBytes)} bytes at most)`);
      }
    } finally {
      startSpy.mockRestore();
      sendSpy.mockRestore();
      wsSpy.mockRestore();
      await client.close();
    }

    // A fresh `trine status` works, and shows the replays counted against the sender.
    const fresh = await trine(['status', '--json', '--dir', dir]);
    expect(fresh.code, fresh.stderr).toBe(0);
    const doc = JSON.parse(fresh.stdout) as StatusDocument;
    expect(doc.healthy).toBe(true);
    expect(doc.replicas.find((r) => r.id === 'r1')?.drops['REPLAYED']).toBeGreaterThanOrEqual(1);
    expect(doc.watchdog.drops['REPLAYED']).toBeGreaterThanOrEqual(1);
  });
});

describe('wrong tokens on an agent\'s application socket (issue 14 item 8, PROTOCOL §9.4)', () => {
  /** One stranger's attempt at a1's socket: connect, a hello with a random token, wait for the close. */
  const guess = (path: string, i: number): Promise<void> =>
    new Promise((resolve) => {
      const s = connect(path);
      const token = Buffer.from(Array.from({ length: 16 }, () => Math.floor(Math.random() * 256))).toString('hex');
      s.on('connect', () => s.write(encodeAppFrame(procToAgent, { type: 'hello', task: 't1', vpid: i % 4, token, endpoint: '' })));
      s.on('data', () => undefined);
      s.on('error', () => undefined);
      s.on('close', () => resolve());
      s.setTimeout(10_000, () => s.destroy());
    });
  /** Clock ticks (user + system) a process has used so far. */
  const cpuTicks = (pid: number): number => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };

  it('issue 14 item 8: 2,000 wrong tokens cost the agent a handful of log lines; its node stays healthy and a linked task started during the flood connects and finishes', { timeout: 180_000 }, async () => {
    const path = socketAddress(agentSocketName(cluster.config.cluster, 'a1'));
    // The agent itself, not its keeper (run/a1.pid).
    const a1Pid = readKeeperChildPid(dir, 'a1', 'agent');
    if (a1Pid === null) throw new Error('no pid recorded for a1');
    // a1's own load while idle, over a second, to tell the flood's cost from it.
    const idleBefore = cpuTicks(a1Pid);
    await sleep(1_000);
    const idlePerSecond = cpuTicks(a1Pid) - idleBefore;
    const ticksBefore = cpuTicks(a1Pid);
    const attempts = 2_000;
    const concurrency = 100;
    const startedMs = Date.now();
    let task: Promise<Run> | null = null;
    for (let done = 0; done < attempts; done += concurrency) {
      // A linked task starts while the flood goes on: one process per node, a1's among them.
      if (done === 300) {
        task = trine(['submit', '--dir', dir, '--linked', '-n', '4', '--cwd', REPO, '--wait', '--',
          process.execPath, '--import', 'tsx', join(REPO, 'test/fixtures/apps/link-once-app.ts')], 120_000);
      }
      await Promise.all(Array.from({ length: concurrency }, (_, i) => guess(path, done + i)));
    }
    const floodMs = Date.now() - startedMs;
    const ticks = cpuTicks(a1Pid) - ticksBefore;
    console.log(`${attempts} wrong tokens in ${floodMs} ms (${Math.round(attempts / (floodMs / 1000))}/s) while a linked task started; ` +
      `a1 used ${ticks * 10} ms of CPU meanwhile (${idlePerSecond * 10} ms a second when idle)`);

    if (task === null) throw new Error('the task was never submitted');
    const run = await task;
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const id = run.stdout.trim().split('\n')[0]?.trim() ?? '';
    expect(id).toMatch(/^t[0-9]+$/);
    const ps = await trine(['ps', '--json', '--dir', dir]);
    expect(ps.code, ps.stderr).toBe(0);
    const t = (JSON.parse(ps.stdout) as ClusterView).tasks.find((x) => x.id === id);
    expect(t?.procs.map((p) => p.node)).toContain('n1');
    expect(t?.procs.every((p) => p.exitCode === 0)).toBe(true);

    // Every attempt counted, in one line at once and then at most one per interval (5 s).
    const refusals = () => logEvents(dir, 'a1').filter((e) => e['event'] === 'app.app.refusals');
    await vi.waitFor(() => expect(refusals().reduce((n, e) => n + Number(e['count']), 0)).toBeGreaterThanOrEqual(attempts), { timeout: 20_000, interval: 200 });
    const lines = refusals();
    console.log(`a1 logged ${lines.length} refusal lines for ${attempts} attempts: ${lines.map((e) => JSON.stringify({ count: e['count'], unanswered: e['unanswered'], codes: e['codes'] })).join(', ')}`);
    expect(lines.length).toBeLessThanOrEqual(Math.ceil(floodMs / 5_000) + 2);
    expect(logEvents(dir, 'a1').filter((e) => e['event'] === 'app.app.closed' && e['task'] === null)).toEqual([]);

    // The node was never declared failed: healthy now, and the watchdog reset nothing.
    const status = await trine(['status', '--json', '--dir', dir]);
    expect(status.code, status.stderr).toBe(0);
    const doc = JSON.parse(status.stdout) as StatusDocument;
    expect(doc.healthy).toBe(true);
    expect(doc.nodes.find((n) => n.id === 'n1')?.health).toBe('healthy');
    expect(doc.watchdog.resets).toEqual([]);
  });
});
