// Task output read from the agent that holds it (PROTOCOL §7.1), on loopback with a real agent
// daemon (`trine agent`, which answers reads before its core sees anything, so no replica needs
// to run) and the real operator client: `logs.read` → `logs.data` chunk by chunk, the same lines
// and prefixes the local files give (cli/log-lines.ts), an agent that does not answer named once
// while the rest prints, a reader that is not an operator refused and logged, and a request for a
// path outside `logs/tasks/` dropped by the frame decoder, and a captured read replayed on the same
// connection or a new one dropped unanswered (issue 14 item 7, PROTOCOL §7). The cluster of several hosts, end to
// end with the CLI, is test/e2e/hosts-logs.test.ts.
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LOGS_CHUNK_BYTES } from '../../src/core/constants.ts';
import type { ProcView } from '../../src/core/status.ts';
import { decodeFrame, encodeFrame } from '../../src/core/wire/frame.ts';
import type { Challenge, Item } from '../../src/core/wire/messages.ts';
import {
  allocatePorts, clusterIds, generateClusterKeys, loadCluster, LOOPBACK_HOST, paths, planCluster, writeClusterConfig, type Cluster,
} from '../../src/io/cluster-dir.ts';
import { readKeyFile } from '../../src/io/keys.ts';
import { createNodeLinkAuth } from '../../src/io/link-auth-node.ts';
import { createNodeSigner, createNodeVerifier } from '../../src/io/signer-node.ts';
import { WsTransport } from '../../src/io/ws-transport.ts';
import { RemoteLogSet } from '../../cli/logs-remote.ts';
import { OperatorClient } from '../../cli/status-client.ts';
import { killAll, NODE, TRINE, WAIT } from './helpers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How long a test waits to be sure no answer comes: many agent round trips on loopback. */
const SILENCE_MS = 1_500;

let root: string;
let cluster: Cluster;
const pids = new Set<number>();
let client: OperatorClient;

/** A process of t3 placed on `node`, as the cluster view shows it. */
const proc = (vpid: number, node: string): ProcView => ({
  vpid, node, pid: 1000 + vpid, state: 'running', exitCode: null, signal: null, reason: null, endpoint: null, rank: null, progress: null, straggler: false, recommended: null,
});
const taskFile = (name: string) => join(paths.taskLogs(cluster.dir), 't3', name);

/** a1's JSON log events. */
function agentEvents(): Record<string, unknown>[] {
  let text = '';
  try {
    text = readFileSync(join(paths.logs(cluster.dir), 'a1.log'), 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A challenge no agent issued: a read on it is never answered. */
const NO_CHALLENGE: Challenge = { inc: 0, serial: 0, atMs: 0 };

type RawPeer = {
  send: (items: Item[]) => Uint8Array;
  sendBytes: (frame: Uint8Array) => void;
  /** A fresh challenge of a1's (PROTOCOL §7). */
  challenge: () => Promise<Challenge>;
  received: Item[];
  close: () => Promise<void>;
};

/** A transport of `self` (its key from the dir) that sends hand-made frames to a1 and collects
 *  every item a1 sends back. */
async function rawPeer(self: string): Promise<RawPeer> {
  const key = readKeyFile(paths.keyFile(cluster.dir, self));
  const signer = createNodeSigner(self, key.seed);
  const linkAuth = createNodeLinkAuth(self, key.seed, cluster.publicKeys, cluster.config.cluster);
  const verifier = createNodeVerifier(cluster.publicKeys);
  const received: Item[] = [];
  const a1 = cluster.config.processes.find((p) => p.id === 'a1')?.listen;
  if (a1 === null || a1 === undefined) throw new Error('a1 does not listen');
  const t = await WsTransport.start({
    self,
    dial: { a1 },
    auth: { encode: { cluster: cluster.config.cluster, signer, linkAuth }, decode: { cluster: cluster.config.cluster, self, verifier, linkAuth } },
    receive: (data) => {
      const r = decodeFrame(data, { cluster: cluster.config.cluster, self, verifier, linkAuth });
      if (r.ok) received.push(...r.value.items);
      return r.ok;
    },
  });
  await vi.waitFor(() => expect(t.isConnected('a1')).toBe(true), WAIT);
  let asks = 100;
  const send = (items: Item[]): Uint8Array => {
    const frame = encodeFrame({ from: self, to: 'a1', items }, { cluster: cluster.config.cluster, signer, linkAuth });
    t.send('a1', frame);
    return frame;
  };
  const challenge = async (): Promise<Challenge> => {
    const nonce = ++asks;
    send([{ type: 'challenge.ask', nonce }]);
    return vi.waitFor(() => {
      const c = received.find((i) => i.type === 'challenge' && i.nonce === nonce);
      if (c?.type !== 'challenge') throw new Error('no challenge yet');
      return c.challenge;
    }, WAIT);
  };
  return { send, sendBytes: (frame) => t.send('a1', frame), challenge, received, close: () => t.close() };
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-logs-remote-'));
  const dir = join(root, 'cluster');
  const ids = clusterIds(3);
  // No spares: a spare would make the agent load a warm standby replica it never needs here.
  const all = ids.all.filter((id) => !ids.spares.includes(id));
  const keys = generateClusterKeys(dir, all);
  const listeners = ids.listeners.filter((id) => !ids.spares.includes(id));
  const ports = await allocatePorts(listeners.length + ids.spares.length + ids.agents.length);
  const config = planCluster({ nodes: 3, ports: ports.slice(0, ids.listeners.length) }, new Map([...keys, ...ids.spares.map((id) => [id, keys.get('r1') as Uint8Array] as const)]));
  config.membership.spareReplicas = [];
  config.processes = config.processes.filter((p) => !ids.spares.includes(p.id));
  for (const s of ids.spares) delete config.publicKeys[s];
  // The agents listen, as on a cluster of several hosts (src/io/deploy.ts); only a1 runs.
  ids.agents.forEach((id, i) => {
    const p = config.processes.find((e) => e.id === id);
    if (p !== undefined) p.listen = { host: LOOPBACK_HOST, port: ports[ids.listeners.length + i] as number };
  });
  writeClusterConfig(dir, config);
  cluster = loadCluster(dir);

  mkdirSync(join(paths.taskLogs(dir), 't3'), { recursive: true });
  writeFileSync(taskFile('0.out'), 'alpha\nbeta\ngam');
  writeFileSync(taskFile('0.err'), 'oops\n');
  // Several chunks, with lines across every chunk boundary.
  writeFileSync(taskFile('1.out'), Array.from({ length: 40_000 }, (_, i) => `line ${i} ${'x'.repeat(i % 37)}`).join('\n') + '\n');

  const out = openSync(join(root, 'a1.out'), 'a');
  const child = spawn(NODE, [TRINE, 'agent', '--dir', dir, '--id', 'a1'], { detached: true, stdio: ['ignore', out, out] });
  if (child.pid !== undefined) pids.add(child.pid);
  child.unref();
  await vi.waitFor(() => expect(agentEvents().some((e) => e['event'] === 'listening')).toBe(true), { timeout: 60_000, interval: 50 });
  client = await OperatorClient.open(cluster);
}, 90_000);

afterAll(async () => {
  await client?.close();
  killAll(pids);
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

describe('task output from a real agent (PROTOCOL §7.1)', () => {
  it('the operator dials the agent on demand and reads a chunk: bytes at the offset, the size, and `missing` for a file not there yet', async () => {
    expect(client.isConnected('a1')).toBe(false); // nothing dials an agent until it is read from
    const [first, second, none] = await client.readLogs([
      { agent: 'a1', task: 't3', vpid: 0, stream: 'out', offset: 0, maxBytes: 8 },
      { agent: 'a1', task: 't3', vpid: 0, stream: 'out', offset: 8, maxBytes: LOGS_CHUNK_BYTES },
      { agent: 'a1', task: 't3', vpid: 7, stream: 'err', offset: 0, maxBytes: 100 },
    ], 10_000);
    expect(first).toMatchObject({ ok: true, offset: 0, size: 14, missing: false });
    expect(Buffer.from(first?.bytes ?? []).toString()).toBe('alpha\nbe');
    expect(Buffer.from(second?.bytes ?? []).toString()).toBe('ta\ngam');
    expect(none).toMatchObject({ ok: true, missing: true, size: 0 });
    expect(none?.bytes.length).toBe(0);
    expect(client.isConnected('a1')).toBe(true);
  });

  it('prints every line once, in order, with the local prefixes, across chunk boundaries; the last line without a newline too', async () => {
    const lines: string[] = [];
    const warnings: string[] = [];
    const set = new RemoteLogSet({
      client, cluster, task: 't3', streams: ['out', 'err'], onlyVpid: undefined, timeoutMs: 10_000,
      write: async (text) => {
        lines.push(...text.split('\n').slice(0, -1));
      },
      warn: (line) => warnings.push(line),
    });
    set.add([proc(1, 'n1'), proc(0, 'n1')]);
    await set.printAll();
    const big = readFileSync(taskFile('1.out'), 'utf8').split('\n').slice(0, -1).map((l) => `[t3/1] ${l}`);
    expect(lines).toEqual(['[t3/0] alpha', '[t3/0] beta', '[t3/0] gam', '[t3/0 err] oops', ...big]);
    expect(warnings).toEqual([]);
    expect(set.unreadable()).toEqual([]);
    expect(set.foundOutput).toBe(true);
  });

  it('following: only what was appended since, a partial line once complete, a replaced file from its start', async () => {
    writeFileSync(taskFile('2.out'), 'one\ntw');
    const lines: string[] = [];
    const set = new RemoteLogSet({
      client, cluster, task: 't3', streams: ['out'], onlyVpid: 2, timeoutMs: 10_000,
      write: async (text) => {
        lines.push(...text.split('\n').slice(0, -1));
      },
      warn: (line) => lines.push(`warn: ${line}`),
    });
    set.add([proc(0, 'n1'), proc(1, 'n1'), proc(2, 'n1')]);
    await set.print(false);
    expect(lines).toEqual(['[t3/2] one']);
    appendFileSync(taskFile('2.out'), 'o\nthree\n');
    await set.print(false);
    expect(lines).toEqual(['[t3/2] one', '[t3/2] two', '[t3/2] three']);
    await set.print(false);
    expect(lines).toHaveLength(3);
    truncateSync(taskFile('2.out'), 0);
    writeFileSync(taskFile('2.out'), 'new\n');
    await set.print(true);
    expect(lines).toEqual(['[t3/2] one', '[t3/2] two', '[t3/2] three', '[t3/2] new']);
  });

  it('an agent that does not answer is named once, with its processes; the rest still prints; the miss is reported', async () => {
    const lines: string[] = [];
    const warnings: string[] = [];
    const set = new RemoteLogSet({
      client, cluster, task: 't3', streams: ['out', 'err'], onlyVpid: undefined, timeoutMs: 1_000,
      write: async (text) => {
        lines.push(...text.split('\n').slice(0, -1));
      },
      warn: (line) => warnings.push(line),
    });
    // a2 (node n2) is not running: t3/5 and t3/6 ran there.
    set.add([proc(0, 'n1'), proc(5, 'n2'), proc(6, 'n2')]);
    await set.print(false);
    await set.print(true);
    expect(lines).toEqual(['[t3/0] alpha', '[t3/0] beta', '[t3/0 err] oops', '[t3/0] gam']);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^node n2 \(agent a2\) did not answer within 1000 ms: the output of t3\/5, t3\/6 cannot be read/);
    expect(set.unreadable()).toEqual(['t3/5 (n2)', 't3/6 (n2)']);
    // A process seen later on the silent node is given up on at once, named once.
    set.add([proc(7, 'n2')]);
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toContain('t3/7');
  });

  it('a reader that is not an operator gets nothing, and the agent logs the refusal', async () => {
    const peer = await rawPeer('a2'); // another agent's key: a member, but no operator
    try {
      peer.send([{ type: 'challenge.ask', nonce: 1 }, { type: 'logs.read', nonce: 1, task: 't3', vpid: 0, stream: 'out', offset: 0, maxBytes: 100, challenge: NO_CHALLENGE }]);
      await vi.waitFor(() => expect(agentEvents().some((e) => e['event'] === 'logs.read.refused' && e['from'] === 'a2')).toBe(true), WAIT);
      await sleep(SILENCE_MS);
      // Not even a challenge: a1 answers only operators.
      expect(peer.received.filter((i) => i.type === 'logs.data' || i.type === 'challenge')).toEqual([]);
      const refused = agentEvents().find((e) => e['event'] === 'logs.read.refused');
      expect(refused).toMatchObject({ from: 'a2', code: 'NOT_A_MEMBER', items: 1 });
    } finally {
      await peer.close();
    }
  });

  it("a read of '../../keys' never decodes: no answer, and the agent goes on answering", async () => {
    const peer = await rawPeer('op');
    try {
      for (const task of ['../../keys', '../../keys/op.json', 't3/../../../keys']) {
        peer.send([{ type: 'logs.read', nonce: 2, task, vpid: 0, stream: 'out', offset: 0, maxBytes: 100, challenge: await peer.challenge() }]);
      }
      peer.send([{ type: 'logs.read', nonce: 3, task: 't3', vpid: 2_000, stream: 'out', offset: 0, maxBytes: 100, challenge: await peer.challenge() }]);
      await sleep(SILENCE_MS);
      expect(peer.received.filter((i) => i.type === 'logs.data')).toEqual([]);
      peer.send([{ type: 'logs.read', nonce: 4, task: 't3', vpid: 0, stream: 'err', offset: 0, maxBytes: 100, challenge: await peer.challenge() }]);
      await vi.waitFor(() => expect(peer.received.filter((i) => i.type === 'logs.data').map((i) => i.type === 'logs.data' && i.nonce)).toEqual([4]), WAIT);
    } finally {
      await peer.close();
    }
  });

  it('issue 14 item 7: a captured read replayed on the same connection or a new one gets nothing; a fresh read is answered', async () => {
    const peer = await rawPeer('op');
    const again = await rawPeer('op');
    try {
      const datas = (p: RawPeer) => p.received.filter((i) => i.type === 'logs.data');
      const frame = peer.send([{ type: 'logs.read', nonce: 5, task: 't3', vpid: 0, stream: 'out', offset: 0, maxBytes: 100, challenge: await peer.challenge() }]);
      await vi.waitFor(() => expect(datas(peer)).toHaveLength(1), WAIT);
      peer.sendBytes(frame); // the same bytes, the same connection
      again.sendBytes(frame); // the same bytes from a stranger's connection
      await sleep(SILENCE_MS);
      expect(datas(peer)).toHaveLength(1);
      expect(datas(again)).toEqual([]);
      await vi.waitFor(() => expect(agentEvents().some((e) => e['event'] === 'logs.read.dropped' && e['code'] === 'REPLAYED')).toBe(true), WAIT);
      // A read on a challenge of a1's earlier incarnation, or one never issued, is not answered either.
      const c = await peer.challenge();
      peer.send([{ type: 'logs.read', nonce: 6, task: 't3', vpid: 0, stream: 'out', offset: 0, maxBytes: 100, challenge: { ...c, inc: c.inc + 1 } }]);
      peer.send([{ type: 'logs.read', nonce: 7, task: 't3', vpid: 0, stream: 'out', offset: 0, maxBytes: 100, challenge: { ...c, serial: c.serial + 1_000 } }]);
      peer.send([{ type: 'logs.read', nonce: 8, task: 't3', vpid: 0, stream: 'out', offset: 0, maxBytes: 100, challenge: c }]);
      await vi.waitFor(() => expect(datas(peer).map((i) => i.type === 'logs.data' && i.nonce)).toEqual([5, 8]), WAIT);
    } finally {
      await peer.close();
      await again.close();
    }
  });
});
