// The operator's client: the one place that signs frames as the operator id, sends them over
// the WebSocket transport to the replicas and the watchdog, verifies what comes back and
// resends until the answers are in. Two exchanges run on it: `status.query` → `status.reply`
// (docs/PROTOCOL.md §7; `trine status`, `trine up`'s health wait, and the cluster view of
// `trine ps` / `trine nodes`) and `op.request` → `op.reply` (PROTOCOL §8.1; `trine submit`,
// `trine kill`). Which answers to believe is decided by the callers (cli/op-client.ts).
import { isOperatorRequest } from '../src/core/replicated-state.ts';
import { randomInt } from 'node:crypto';
import type { ProcessId, Signer } from '../src/core/ports.ts';
import type { ReplicaStatus } from '../src/core/status.ts';
import type { WatchdogStatus } from '../src/core/watchdog.ts';
import { decodeFrame, encodeFrame } from '../src/core/wire/frame.ts';
import type { Item, SignedCG } from '../src/core/wire/messages.ts';
import { paths, type Cluster } from '../src/io/cluster-dir.ts';
import { readKeyFile } from '../src/io/keys.ts';
import { createNodeSigner, createNodeVerifier } from '../src/io/signer-node.ts';
import { WsTransport } from '../src/io/ws-transport.ts';
import { dialTargets } from '../src/daemon/run-core.ts';

/** Unanswered queries are resent this often: a query sent before the link was up is lost. */
export const QUERY_RESEND_MS = 100;
/** Unanswered operator requests are resent this often (the same signed bytes: replicas
 *  deduplicate by nonce, PROTOCOL §8.1). Slower than queries: each resend costs every replica
 *  a signature check and a lookup. */
export const OP_RESEND_MS = 200;

export type Answer<T> = { ok: true; status: T; latencyMs: number } | { ok: false; error: string };

export type StatusAnswers = {
  replicas: Map<ProcessId, Answer<ReplicaStatus>>;
  watchdog: Answer<WatchdogStatus>;
};

/** One replica's `op.reply`: the outcome of a request ordered at `rsn`. */
export type OpReply = { rsn: number; ok: boolean; text: string };

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

/** One exchange: the frames to send, who still owes an answer, and when to stop early. */
type Round = {
  frames: Map<ProcessId, Uint8Array>;
  pending: Set<ProcessId>;
  /** Take a verified item from `from`; true when it is `from`'s answer to this round. */
  accept: (from: ProcessId, item: Item) => boolean;
  /** The caller has what it needs before every target answered. */
  settled: () => boolean;
  done: () => void;
};

type Exchange = {
  targets: readonly ProcessId[];
  items: Item[];
  resendMs: number;
  timeoutMs: number;
  accept: (from: ProcessId, item: Item) => boolean;
  settled?: () => boolean;
};

export class OperatorClient {
  private round: Round | null = null;
  private transport: WsTransport | null = null;

  private constructor(
    private readonly cluster: Cluster,
    readonly id: ProcessId,
    /** Signs the operator's requests (CGs); frames are signed with it too. */
    readonly signer: Signer,
    private readonly encode: (to: ProcessId, items: Item[]) => Uint8Array,
    private readonly decode: (data: Uint8Array) => ReturnType<typeof decodeFrame>,
  ) {}

  static async open(cluster: Cluster): Promise<OperatorClient> {
    const self = cluster.config.membership.operators[0];
    if (self === undefined) throw new Error('cluster.json lists no operator');
    const key = readKeyFile(paths.keyFile(cluster.dir, self));
    const signer = createNodeSigner(self, key.seed);
    const verifier = createNodeVerifier(cluster.publicKeys);
    const clusterId = cluster.config.cluster;
    const client = new OperatorClient(
      cluster,
      self,
      signer,
      (to, items) => encodeFrame({ from: self, to, items }, { cluster: clusterId, signer }),
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

  get replicas(): readonly ProcessId[] {
    return this.cluster.config.membership.replicas;
  }

  /** Ask every replica and the watchdog; wait until all answered or `timeoutMs` passed. */
  async query(timeoutMs: number): Promise<StatusAnswers> {
    const m = this.cluster.config.membership;
    const r = await this.collectStatus([...m.replicas, m.scc], timeoutMs, () => false);
    return {
      replicas: new Map(m.replicas.map((id) => [id, r.answer(id, parseReplicaStatus)])),
      watchdog: r.answer(m.scc, parseWatchdogStatus),
    };
  }

  /** Ask the replicas only; stop early once `settled` says the answers so far are enough. */
  async queryReplicas(
    timeoutMs: number,
    settled: (answered: ReadonlyMap<ProcessId, ReplicaStatus>, pending: number) => boolean = () => false,
  ): Promise<Map<ProcessId, Answer<ReplicaStatus>>> {
    const replicas = this.replicas;
    const parsed = new Map<ProcessId, ReplicaStatus>();
    const r = await this.collectStatus(replicas, timeoutMs, (from, json, pending) => {
      const s = parseReplicaStatus(json, from);
      if (s !== null) parsed.set(from, s);
      return settled(parsed, pending);
    });
    return new Map(replicas.map((id) => [id, r.answer(id, parseReplicaStatus)]));
  }

  /** Send an operator-signed request to every replica, resending until `settled` says the
   *  replies are enough, every replica answered, or `timeoutMs` passed. Returns the first
   *  reply of each replica that answered. */
  async request(
    signed: SignedCG,
    timeoutMs: number,
    settled: (replies: ReadonlyMap<ProcessId, OpReply>) => boolean,
  ): Promise<Map<ProcessId, OpReply>> {
    const payload = signed.cg.payload;
    if (!isOperatorRequest(payload)) throw new TypeError(`not an operator request: ${payload.type}`);
    const replies = new Map<ProcessId, OpReply>();
    await this.exchange({
      targets: this.replicas,
      items: [{ type: 'op.request', signed }],
      resendMs: OP_RESEND_MS,
      timeoutMs,
      accept: (from, item) => {
        if (item.type !== 'op.reply' || item.nonce !== payload.nonce) return false;
        replies.set(from, { rsn: item.rsn, ok: item.ok, text: item.text });
        return true;
      },
      settled: () => settled(replies),
    });
    return replies;
  }

  /** Whether the transport has a verified link to `peer` (for "not reachable" messages). */
  isConnected(peer: ProcessId): boolean {
    return this.transport?.isConnected(peer) === true;
  }

  async close(): Promise<void> {
    await this.transport?.close();
  }

  /** A `status.query` round to `targets`; `settled` sees each reply as it arrives. */
  private async collectStatus(
    targets: readonly ProcessId[],
    timeoutMs: number,
    onReply: (from: ProcessId, json: string, pending: number) => boolean,
  ): Promise<{ answer: <T>(id: ProcessId, parse: (json: string, from: ProcessId) => T | null) => Answer<T> }> {
    const nonce = randomInt(1, 2 ** 31);
    const startedMs = Date.now();
    const replies = new Map<ProcessId, { json: string; atMs: number }>();
    let stop = false;
    await this.exchange({
      targets,
      items: [{ type: 'status.query', nonce }],
      resendMs: QUERY_RESEND_MS,
      timeoutMs,
      accept: (from, item) => {
        if (item.type !== 'status.reply' || item.nonce !== nonce) return false;
        replies.set(from, { json: item.json, atMs: Date.now() });
        stop = onReply(from, item.json, targets.length - replies.size);
        return true;
      },
      settled: () => stop,
    });
    const answer = <T>(id: ProcessId, parse: (json: string, from: ProcessId) => T | null): Answer<T> => {
      const r = replies.get(id);
      if (r === undefined) {
        const why = this.isConnected(id) ? 'no answer' : 'not reachable';
        return { ok: false, error: `${why} within ${timeoutMs} ms` };
      }
      const status = parse(r.json, id);
      return status === null ? { ok: false, error: 'malformed reply' } : { ok: true, status, latencyMs: r.atMs - startedMs };
    };
    return { answer };
  }

  /** Run one exchange to completion. One at a time: the CLI's commands are sequential. */
  private async exchange(x: Exchange): Promise<void> {
    if (this.round !== null) throw new Error('OperatorClient: one exchange at a time');
    const round: Round = {
      frames: new Map(x.targets.map((p) => [p, this.encode(p, x.items)])),
      pending: new Set(x.targets),
      accept: x.accept,
      settled: x.settled ?? (() => false),
      done: () => {},
    };
    this.round = round;
    try {
      await new Promise<void>((resolve) => {
        const finish = () => {
          clearInterval(resend);
          clearTimeout(timeout);
          resolve();
        };
        round.done = finish;
        const resend = setInterval(() => {
          for (const p of round.pending) this.resend(p);
        }, x.resendMs);
        const timeout = setTimeout(finish, x.timeoutMs);
        for (const p of x.targets) this.resend(p);
      });
    } finally {
      this.round = null;
    }
  }

  private resend(peer: ProcessId): void {
    const round = this.round;
    const t = this.transport;
    const frame = round?.frames.get(peer);
    if (round === null || t === null || frame === undefined || !round.pending.has(peer) || !t.isConnected(peer)) return;
    t.send(peer, frame);
  }

  /** A verified frame binds the connection; only the first answer of each target counts. */
  private onFrame(data: Uint8Array): boolean {
    const r = this.decode(data);
    if (!r.ok) return false;
    const round = this.round;
    const from = r.value.from;
    for (const item of r.value.items) {
      if (round === null || !round.pending.has(from) || !round.accept(from, item)) continue;
      round.pending.delete(from);
      if (round.pending.size === 0 || round.settled()) round.done();
    }
    return true;
  }
}

/** The name `trine status` and `trine up` know it by. */
export { OperatorClient as StatusClient };
