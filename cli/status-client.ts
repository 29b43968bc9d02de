// The operator's status client: signs `status.query` frames as the operator id, sends them over
// the WebSocket transport to every replica and the watchdog, and collects their verified
// `status.reply` items (docs/PROTOCOL.md §7). Used by `trine status` and by `trine up` to
// wait for a healthy cluster.
import { randomInt } from 'node:crypto';
import type { ProcessId } from '../src/core/ports.ts';
import type { ReplicaStatus } from '../src/core/status.ts';
import type { WatchdogStatus } from '../src/core/watchdog.ts';
import { decodeFrame, encodeFrame } from '../src/core/wire/frame.ts';
import { paths, type Cluster } from '../src/io/cluster-dir.ts';
import { readKeyFile } from '../src/io/keys.ts';
import { createNodeSigner, createNodeVerifier } from '../src/io/signer-node.ts';
import { WsTransport } from '../src/io/ws-transport.ts';
import { dialTargets } from '../src/daemon/run-core.ts';

/** Unanswered queries are resent this often: a query sent before the link was up is lost. */
export const QUERY_RESEND_MS = 100;

export type Answer<T> = { ok: true; status: T; latencyMs: number } | { ok: false; error: string };

export type StatusAnswers = {
  replicas: Map<ProcessId, Answer<ReplicaStatus>>;
  watchdog: Answer<WatchdogStatus>;
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A reply is from a verified replica, but a faulty one may still send nonsense: check shape. */
function parseReplicaStatus(json: string, from: ProcessId): ReplicaStatus | null {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (!isObject(v) || v['id'] !== from) return null;
  if (v['role'] !== 'primary' && v['role'] !== 'backup') return null;
  for (const k of ['inc', 'rsn', 'gssn', 'suspicions']) if (typeof v[k] !== 'number') return null;
  if (typeof v['primary'] !== 'string' || typeof v['digest'] !== 'string') return null;
  if (!Array.isArray(v['replicas']) || !Array.isArray(v['agents']) || !isObject(v['drops'])) return null;
  return v as ReplicaStatus;
}

function parseWatchdogStatus(json: string, from: ProcessId): WatchdogStatus | null {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (!isObject(v) || v['id'] !== from || v['role'] !== 'watchdog' || !Array.isArray(v['replicas'])) return null;
  return v as WatchdogStatus;
}

type Round = {
  nonce: number;
  startedMs: number;
  pending: Set<ProcessId>;
  replies: Map<ProcessId, { json: string; atMs: number }>;
  done: () => void;
};

export class StatusClient {
  private round: Round | null = null;
  private transport: WsTransport | null = null;

  private constructor(
    private readonly cluster: Cluster,
    readonly id: ProcessId,
    private readonly encode: (to: ProcessId, nonce: number) => Uint8Array,
    private readonly decode: (data: Uint8Array) => ReturnType<typeof decodeFrame>,
  ) {}

  static async open(cluster: Cluster): Promise<StatusClient> {
    const self = cluster.config.membership.operators[0];
    if (self === undefined) throw new Error('cluster.json lists no operator');
    const key = readKeyFile(paths.keyFile(cluster.dir, self));
    const signer = createNodeSigner(self, key.seed);
    const verifier = createNodeVerifier(cluster.publicKeys);
    const clusterId = cluster.config.cluster;
    const client = new StatusClient(
      cluster,
      self,
      (to, nonce) => encodeFrame({ from: self, to, items: [{ type: 'status.query', nonce }] }, { cluster: clusterId, signer }),
      (data) => decodeFrame(data, { cluster: clusterId, self, verifier }),
    );
    client.transport = await WsTransport.start({
      self,
      dial: dialTargets(cluster, self),
      receive: (data) => client.onFrame(data),
      onLink: (peer, up) => {
        if (up) client.resend(peer);
      },
    });
    return client;
  }

  /** Ask every replica and the watchdog; wait until all answered or `timeoutMs` passed. */
  async query(timeoutMs: number): Promise<StatusAnswers> {
    const m = this.cluster.config.membership;
    const targets = [...m.replicas, m.scc];
    const round: Round = {
      nonce: randomInt(1, 2 ** 31),
      startedMs: Date.now(),
      pending: new Set(targets),
      replies: new Map(),
      done: () => {},
    };
    this.round = round;
    await new Promise<void>((resolve) => {
      const finish = () => {
        clearInterval(resend);
        clearTimeout(timeout);
        resolve();
      };
      round.done = finish;
      const resend = setInterval(() => {
        for (const p of round.pending) this.resend(p);
      }, QUERY_RESEND_MS);
      const timeout = setTimeout(finish, timeoutMs);
      for (const p of targets) this.resend(p);
    });
    this.round = null;
    const answer = <T>(id: ProcessId, parse: (json: string, from: ProcessId) => T | null): Answer<T> => {
      const r = round.replies.get(id);
      if (r === undefined) {
        const why = this.transport?.isConnected(id) === true ? 'no answer' : 'not reachable';
        return { ok: false, error: `${why} within ${timeoutMs} ms` };
      }
      const status = parse(r.json, id);
      return status === null ? { ok: false, error: 'malformed reply' } : { ok: true, status, latencyMs: r.atMs - round.startedMs };
    };
    return {
      replicas: new Map(m.replicas.map((r) => [r, answer(r, parseReplicaStatus)])),
      watchdog: answer(m.scc, parseWatchdogStatus),
    };
  }

  async close(): Promise<void> {
    await this.transport?.close();
  }

  private resend(peer: ProcessId): void {
    const round = this.round;
    const t = this.transport;
    if (round === null || t === null || !round.pending.has(peer) || !t.isConnected(peer)) return;
    t.send(peer, this.encode(peer, round.nonce));
  }

  /** A verified frame binds the connection; only replies to the current round count. */
  private onFrame(data: Uint8Array): boolean {
    const r = this.decode(data);
    if (!r.ok) return false;
    const round = this.round;
    for (const item of r.value.items) {
      if (item.type !== 'status.reply' || round === null || item.nonce !== round.nonce || !round.pending.has(r.value.from)) continue;
      round.pending.delete(r.value.from);
      round.replies.set(r.value.from, { json: item.json, atMs: Date.now() });
      if (round.pending.size === 0) round.done();
    }
    return true;
  }
}
