// The operator's client: the one place that signs frames as the operator id, sends them over
// the WebSocket transport to the replicas and the watchdog, verifies what comes back and
// resends until the answers are in. Two exchanges run on it: `status.query` → `status.reply`
// (docs/PROTOCOL.md §7; `trine status`, `trine up`'s health wait, and the cluster view of
// `trine ps` / `trine nodes`), `op.request` → `op.reply` (PROTOCOL §8.1; `trine submit`,
// `trine kill`), `inject` → `inject.reply` to one daemon (`trine inject`, docs/OPERATIONS.md §7)
// and, on a cluster of several hosts, `logs.read` → `logs.data` to the agents that hold a task's
// output (PROTOCOL §7.1; `trine logs`), which it dials only then. Which answers to believe is
// decided by the callers (cli/op-client.ts).
// Status and task output are asked for with a fresh challenge of the daemon's (PROTOCOL §7): each
// attempt sends `challenge.ask`, and the daemon's `challenge` is answered at once with the query
// or the reads carrying it. A captured query replayed by someone else gets nothing.
// The replicas asked are not a fixed three: the group replaces a condemned replica with a spare
// id (PROTOCOL §10.6), so every pool id whose daemon runs in the cluster dir is asked.
import { isOperatorRequest } from '../src/core/replicated-state.ts';
import { parseMovedPorts } from '../src/core/group-view.ts';
import { randomInt } from 'node:crypto';
import { LOGS_CHUNK_BYTES, MAX_LOGS_READS_PER_FRAME } from '../src/core/constants.ts';
import type { ProcessId, Signer } from '../src/core/ports.ts';
import type { ReplicaStatus } from '../src/core/status.ts';
import type { WatchdogStatus } from '../src/core/watchdog-state.ts';
import { decodeFrame, encodeFrame } from '../src/core/wire/frame.ts';
import type { Challenge, Item, LogStream, SignedCG } from '../src/core/wire/messages.ts';
import { isClusterProcess, paths, readPidFiles, replicaPool, type Cluster } from '../src/io/cluster-dir.ts';
import { readKeyFile } from '../src/io/keys.ts';
import { createNodeLinkAuth } from '../src/io/link-auth-node.ts';
import { createNodeSigner, createNodeVerifier } from '../src/io/signer-node.ts';
import { WsTransport, type Endpoint } from '../src/io/ws-transport.ts';
import { dialTargets } from '../src/io/dial-targets.ts';
import { PortPlacement, statusSettled } from './replica-group.ts';
import { AGREEING_REPLIES, type OpReply } from './replies.ts';
import { CliError, EXIT_USAGE } from './errors.ts';

/** Unanswered queries are resent this often: a query sent before the link was up is lost. A
 *  resend of a status query or of reads asks for a new challenge first (PROTOCOL §7). */
export const QUERY_RESEND_MS = 100;
/** Unanswered operator requests are resent this often (the same signed bytes: replicas
 *  deduplicate by nonce, PROTOCOL §8.1). Slower than queries: each resend costs every replica
 *  a signature check and a lookup. */
export const OP_RESEND_MS = 200;
/** How long an operator request waits to learn where spare ids listen before it is sent. */
export const PLACEMENT_QUERY_MS = 2_000;

export type Answer<T> = { ok: true; status: T; latencyMs: number } | { ok: false; error: string };

export type StatusAnswers = {
  /** Every replica asked: the initial three and the pool ids running in the cluster dir. */
  replicas: Map<ProcessId, Answer<ReplicaStatus>>;
  watchdog: Answer<WatchdogStatus>;
  /** Pool ids whose daemon was running in the cluster dir when asked (pid file and /proc);
   *  absent: not known. */
  running?: ProcessId[];
};

/** Unanswered injections are resent this often (the same nonce: the daemon answers a resend
 *  from its record, never injecting twice). */
export const INJECT_RESEND_MS = 250;
/** Unanswered reads of task output are resent this often. An agent answers in a millisecond
 *  or two once connected (the first send also waits for the dial), and each resend costs it
 *  another read of up to LOGS_BYTES_PER_FRAME, so resends are rare. */
export const LOGS_RESEND_MS = 500;

/** One read of a task process's output from the agent that holds it (PROTOCOL §7.1). */
export type LogRead = { agent: ProcessId; task: string; vpid: number; stream: LogStream; offset: number; maxBytes: number };
/** An agent's answer to a LogRead (the `logs.data` item without its type and nonce). */
export type LogChunk = { ok: boolean; error: string; offset: number; bytes: Uint8Array; size: number; missing: boolean };

/** The agents of a cluster of several hosts, where they listen (src/io/deploy.ts). None on a
 *  one-host cluster: its agents do not listen, and the operator reads task output from disk. */
export function agentListeners(cluster: Cluster): Record<ProcessId, Endpoint> {
  const out: Record<ProcessId, Endpoint> = {};
  for (const p of cluster.config.processes) if (p.kind === 'agent' && p.listen !== null) out[p.id] = p.listen;
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const PHASES: readonly unknown[] = ['serving', 'installing', 'syncing', 'retired'] satisfies ReplicaStatus['phase'][];
const isDiagnosisEntry = (d: unknown): boolean =>
  isObject(d) && typeof d['atMs'] === 'number' && typeof d['view'] === 'number' &&
  ['kind', 'target', 'by', 'reason', 'detail'].every((k) => typeof d[k] === 'string');

/** A reply is from a verified replica, but a faulty one may still send nonsense: check shape. */
export function parseReplicaStatus(json: string, from: ProcessId): ReplicaStatus | null {
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
  // The group as it sees it (PROTOCOL §10.1): the CLI follows the group by these.
  const view = v['view'];
  if (typeof view !== 'number' || !Number.isSafeInteger(view) || view < 0 || !PHASES.includes(v['phase'])) return null;
  const members = v['members'];
  if (!Array.isArray(members) || !members.every((m) => typeof m === 'string')) return null;
  if (!Array.isArray(v['diagnosis']) || !v['diagnosis'].every(isDiagnosisEntry)) return null;
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
  /** What each attempt sends: the request, or for a fresh exchange the `challenge.ask`. */
  frames: Map<ProcessId, Uint8Array>;
  /** A fresh exchange: the ask's nonce, and the request a target's challenge is answered with. */
  fresh: { nonce: number; request: (target: ProcessId, challenge: Challenge) => Uint8Array } | null;
  pending: Set<ProcessId>;
  /** Take a verified item from `from`; true when it is `from`'s answer to this round. */
  accept: (from: ProcessId, item: Item) => boolean;
  /** The caller has what it needs before every target answered. */
  settled: () => boolean;
  done: () => void;
};

type Exchange = {
  targets: readonly ProcessId[];
  /** The same items for every target, or each target's own; `fresh`: answered only on a fresh
   *  challenge of the target's (PROTOCOL §7), so each attempt asks for one and the items are
   *  built with it. */
  items: Item[] | ((target: ProcessId) => Item[]) | { fresh: (target: ProcessId, challenge: Challenge) => Item[] };
  resendMs: number;
  timeoutMs: number;
  accept: (from: ProcessId, item: Item) => boolean;
  settled?: () => boolean;
};

export class OperatorClient {
  private round: Round | null = null;
  private transport: WsTransport | null = null;
  /** Agents dialed only when a frame is sent to them (agentListeners). */
  private onDemand = new Set<ProcessId>();
  /** Where the replies agree the members listen (PROTOCOL §10.6). */
  private readonly placement = new PortPlacement();

  private constructor(
    private readonly cluster: Cluster,
    readonly id: ProcessId,
    /** Signs the operator's requests (CGs); frames are signed with it too. */
    readonly signer: Signer,
    private readonly encode: (to: ProcessId, items: Item[]) => Uint8Array,
    private readonly decode: (data: Uint8Array) => ReturnType<typeof decodeFrame>,
  ) {}

  /** `as`: another identity whose key the cluster dir holds, an agent's, that asks the watchdog
   *  only (a booting node, cli/node-run.ts). Never the replicas: a replica routes a peer's frames
   *  to the connection it bound last, so a second connection under a running agent's id would
   *  take that agent's copies (src/daemon/group-learner.ts). Default: the operator, who asks both. */
  static async open(cluster: Cluster, as?: ProcessId): Promise<OperatorClient> {
    const self = as ?? cluster.config.membership.operators[0];
    if (self === undefined) throw new Error('cluster.json lists no operator');
    const scc = cluster.config.membership.scc;
    const sccListen = cluster.config.processes.find((p) => p.id === scc)?.listen ?? null;
    const dial = as === undefined || sccListen === null ? dialTargets(cluster, self) : { [scc]: sccListen };
    const key = readKeyFile(paths.keyFile(cluster.dir, self));
    const signer = createNodeSigner(self, key.seed);
    const verifier = createNodeVerifier(cluster.publicKeys);
    const clusterId = cluster.config.cluster;
    const linkAuth = createNodeLinkAuth(self, key.seed, cluster.publicKeys, clusterId);
    const auth = { encode: { cluster: clusterId, signer, linkAuth }, decode: { cluster: clusterId, self, verifier, linkAuth } };
    const client = new OperatorClient(
      cluster,
      self,
      signer,
      (to, items) => encodeFrame({ from: self, to, items }, auth.encode),
      (data) => decodeFrame(data, auth.decode),
    );
    // The operator dials agents only while it reads task output from them (PROTOCOL §7.1).
    const agents = as === undefined ? agentListeners(cluster) : {};
    client.onDemand = new Set(Object.keys(agents));
    client.transport = await WsTransport.start({
      self,
      cluster: cluster.config.cluster,
      dial,
      dialOnDemand: agents,
      auth,
      receive: (data) => client.onFrame(data),
      onLink: (peer, up) => {
        if (up) client.resend(peer);
      },
    });
    return client;
  }

  /** Pool ids (initial replicas and spares) by their pid files, in pool order: `running`, a
   *  live process behind `run/<id>.pid` whose command line names this dir and id; `dead`, a pid
   *  file whose process is gone (killed, crashed). An id without a pid file is in neither: its
   *  daemon may run elsewhere, unknown to this dir. */
  replicaProcesses(): { running: ProcessId[]; dead: ProcessId[] } {
    const files = new Map(readPidFiles(this.cluster.dir).map((p) => [p.id, p.pid]));
    const running: ProcessId[] = [];
    const dead: ProcessId[] = [];
    for (const id of replicaPool(this.cluster.config.membership)) {
      if (!files.has(id)) continue;
      const pid = files.get(id) ?? null;
      (pid !== null && isClusterProcess(pid, this.cluster.dir, id) ? running : dead).push(id);
    }
    return { running, dead };
  }

  runningReplicas(): ProcessId[] {
    return this.replicaProcesses().running;
  }

  /** The replicas operator requests and view queries go to: every running pool id, whatever
   *  the group is now (a retired one stays silent; a spare the group started answers). With no
   *  pid file to go by (a cluster of several hosts, or daemons not started by `trine up`), the
   *  whole pool: whichever ids the group runs now answer, the others are not reachable, and the
   *  callers settle on two matching answers of the group's current members. Read afresh for
   *  each exchange: `submit --wait` and `logs --follow` may outlive a replacement. */
  replicaTargets(): ProcessId[] {
    const running = this.runningReplicas();
    return running.length > 0 ? running : replicaPool(this.cluster.config.membership);
  }

  /** Ask the replicas and the watchdog; wait until every one answered, the answers settle the
   *  group (statusSettled: only replicas known to be dead, or not running and not members, are
   *  missing), or `timeoutMs` passed. Asked: the initial three (so that one of them still a
   *  member but dead shows as not answering) and every running pool id. */
  async query(timeoutMs: number): Promise<StatusAnswers> {
    const m = this.cluster.config.membership;
    const processes = this.replicaProcesses();
    const running = new Set(processes.running);
    const dead = new Set(processes.dead);
    // No pid file at all: the daemons run on other hosts, so ask the whole pool (see replicaTargets).
    const remote = running.size === 0 && dead.size === 0;
    const asked = replicaPool(m).filter((id) => remote || m.replicas.includes(id) || running.has(id));
    const parsed = new Map<ProcessId, ReplicaStatus>();
    let watchdogAnswered = false;
    const r = await this.collectStatus([...asked, m.scc], timeoutMs, (from, json, pending) => {
      if (from === m.scc) watchdogAnswered = true;
      else {
        const s = parseReplicaStatus(json, from);
        if (s !== null) parsed.set(from, s);
        if (s !== null) this.learnPorts(from, s);
      }
      return watchdogAnswered && statusSettled(m, parsed, pending, running, dead);
    });
    // A dead daemon was not waited for: say so rather than "no answer within N ms".
    const answer = (id: ProcessId): Answer<ReplicaStatus> => {
      const a = r.answer(id, parseReplicaStatus);
      return !a.ok && dead.has(id) && !this.isConnected(id) ? { ok: false, error: `not running (no live process in run/${id}.pid)` } : a;
    };
    return {
      replicas: new Map(asked.map((id) => [id, answer(id)])),
      watchdog: r.answer(m.scc, parseWatchdogStatus),
      running: [...running],
    };
  }

  /** Where the members `from`'s status names listen: a moved port (PROTOCOL §10.6), or
   *  cluster.json's. Taken once two replies agree on it, as agents take the group
   *  (group-learner.ts): one faulty replica can neither move a member nor keep one from moving.
   *  The host stays cluster.json's. */
  private learnPorts(from: ProcessId, s: ReplicaStatus): void {
    const ports = parseMovedPorts((s as { ports?: unknown }).ports ?? []);
    if (ports === null || !Array.isArray(s.members)) return;
    for (const { id, port } of this.placement.vote(from, s.members, ports)) {
      const configured = this.cluster.config.processes.find((p) => p.id === id)?.listen;
      if (configured !== null && configured !== undefined) this.transport?.setEndpoint(id, port === 0 ? configured : { host: configured.host, port });
    }
  }

  /** Ask the watchdog alone. */
  async queryWatchdog(timeoutMs: number): Promise<Answer<WatchdogStatus>> {
    const scc = this.cluster.config.membership.scc;
    const r = await this.collectStatus([scc], timeoutMs, () => true);
    return r.answer(scc, parseWatchdogStatus);
  }

  /** Ask the replicas (replicaTargets) only; stop early once `settled` says the answers so far
   *  are enough. */
  async queryReplicas(
    timeoutMs: number,
    settled: (answered: ReadonlyMap<ProcessId, ReplicaStatus>, pending: number) => boolean = () => false,
  ): Promise<Map<ProcessId, Answer<ReplicaStatus>>> {
    const replicas = this.replicaTargets();
    const parsed = new Map<ProcessId, ReplicaStatus>();
    const r = await this.collectStatus(replicas, timeoutMs, (from, json, pending) => {
      const s = parseReplicaStatus(json, from);
      if (s !== null) parsed.set(from, s);
      if (s !== null) this.learnPorts(from, s);
      // Only an id some answer names as a member can still change the picture: a spare id the
      // group never started (asked when the pool is all there is to go by) will not answer.
      const members = new Set([...parsed.values()].flatMap((p) => p.members));
      return settled(parsed, pending.filter((id) => members.has(id)).length);
    });
    return new Map(replicas.map((id) => [id, r.answer(id, parseReplicaStatus)]));
  }

  /** Send an operator-signed request to every replica (replicaTargets), resending until
   *  `settled` says the replies are enough, every replica answered, or `timeoutMs` passed.
   *  Returns the replicas asked and the first reply of each that answered. */
  async request(
    signed: SignedCG,
    timeoutMs: number,
    settled: (replies: ReadonlyMap<ProcessId, OpReply>) => boolean,
  ): Promise<{ asked: ProcessId[]; replies: Map<ProcessId, OpReply> }> {
    const payload = signed.cg.payload;
    if (!isOperatorRequest(payload)) throw new TypeError(`not an operator request: ${payload.type}`);
    const replies = new Map<ProcessId, OpReply>();
    // A spare id may listen elsewhere than cluster.json says, its port being taken by someone
    // who would then relay (and read) the request, task keys included: a spare gets it only at
    // the address two replies agree on (learnPorts), asked for first if not known yet.
    const initial = this.cluster.config.membership.replicas;
    const targets = this.replicaTargets();
    const spares = targets.filter((id) => !initial.includes(id));
    // Done when each is placed, or two replies are in and none names it a member.
    const known = (answered: ReadonlyMap<ProcessId, ReplicaStatus>) =>
      spares.every((id) => this.placement.has(id) || (answered.size >= AGREEING_REPLIES && ![...answered.values()].some((s) => s.members.includes(id))));
    if (spares.some((id) => !this.placement.has(id))) await this.queryReplicas(Math.min(timeoutMs, PLACEMENT_QUERY_MS), known);
    const asked = targets.filter((id) => initial.includes(id) || this.placement.has(id));
    await this.exchange({
      targets: asked,
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
    return { asked, replies };
  }

  /** Ask daemon `target` (a replica or the watchdog) to inject `mode` with `args`; its answer,
   *  or null if none came within `timeoutMs`. */
  async inject(target: ProcessId, mode: string, args: readonly string[], timeoutMs: number): Promise<{ ok: boolean; text: string } | null> {
    const nonce = randomInt(1, 2 ** 31);
    let answer: { ok: boolean; text: string } | null = null;
    await this.exchange({
      targets: [target],
      items: [{ type: 'inject', nonce, mode, args: [...args] }],
      resendMs: INJECT_RESEND_MS,
      timeoutMs,
      accept: (_from, item) => {
        if (item.type !== 'inject.reply' || item.nonce !== nonce) return false;
        answer = { ok: item.ok, text: item.text };
        return true;
      },
    });
    return answer;
  }

  /** Reads task output from the agents that hold it (PROTOCOL §7.1), all at once: one frame per
   *  agent with its reads, resent until it answered every one of them or `timeoutMs` passed.
   *  Returns the answers in the order of `reads`; null for a read its agent did not answer. At
   *  most MAX_LOGS_READS_PER_FRAME reads per agent, each of at most LOGS_CHUNK_BYTES. */
  async readLogs(reads: readonly LogRead[], timeoutMs: number): Promise<(LogChunk | null)[]> {
    const answers: (LogChunk | null)[] = reads.map(() => null);
    /** By agent: its reads (a `logs.read` without its type and challenge), and those still
     *  unanswered by nonce (→ index into `reads`). */
    type Read = Omit<Extract<Item, { type: 'logs.read' }>, 'type' | 'challenge'>;
    const byAgent = new Map<ProcessId, { reads: Read[]; open: Map<number, number> }>();
    const used = new Set<number>();
    for (const [i, r] of reads.entries()) {
      if (r.maxBytes > LOGS_CHUNK_BYTES || r.maxBytes < 0) throw new RangeError(`a read of ${r.maxBytes} bytes (at most ${LOGS_CHUNK_BYTES})`);
      let a = byAgent.get(r.agent);
      if (a === undefined) byAgent.set(r.agent, (a = { reads: [], open: new Map() }));
      if (a.reads.length >= MAX_LOGS_READS_PER_FRAME) throw new RangeError(`more than ${MAX_LOGS_READS_PER_FRAME} reads for ${r.agent} at once`);
      let nonce = randomInt(1, 2 ** 31);
      while (used.has(nonce)) nonce = randomInt(1, 2 ** 31);
      used.add(nonce);
      a.reads.push({ nonce, task: r.task, vpid: r.vpid, stream: r.stream, offset: r.offset, maxBytes: r.maxBytes });
      a.open.set(nonce, i);
    }
    if (byAgent.size === 0) return answers;
    await this.exchange({
      targets: [...byAgent.keys()],
      // All of an agent's reads in one frame, on one challenge of that agent's.
      items: { fresh: (target, challenge) => (byAgent.get(target)?.reads ?? []).map((read) => ({ type: 'logs.read', ...read, challenge })) },
      resendMs: LOGS_RESEND_MS,
      timeoutMs,
      accept: (from, item) => {
        const a = byAgent.get(from);
        if (item.type !== 'logs.data' || a === undefined) return false;
        const i = a.open.get(item.nonce);
        // Only the agent asked answers for its reads, and only at the offset asked for.
        if (i === undefined || reads[i]?.offset !== item.offset) return false;
        a.open.delete(item.nonce);
        answers[i] = { ok: item.ok, error: item.error, offset: item.offset, bytes: item.bytes, size: item.size, missing: item.missing };
        return a.open.size === 0;
      },
    });
    return answers;
  }

  /** Whether the transport has a verified link to `peer` (for "not reachable" messages). */
  isConnected(peer: ProcessId): boolean {
    return this.transport?.isConnected(peer) === true;
  }

  async close(): Promise<void> {
    await this.transport?.close();
  }

  /** A `status.query` round to `targets`; `onReply` sees each reply as it arrives, with the
   *  targets still pending, and says whether to stop. */
  private async collectStatus(
    targets: readonly ProcessId[],
    timeoutMs: number,
    onReply: (from: ProcessId, json: string, pending: readonly ProcessId[]) => boolean,
  ): Promise<{ answer: <T>(id: ProcessId, parse: (json: string, from: ProcessId) => T | null) => Answer<T> }> {
    const nonce = randomInt(1, 2 ** 31);
    const startedMs = Date.now();
    const replies = new Map<ProcessId, { json: string; atMs: number }>();
    let stop = false;
    await this.exchange({
      targets,
      items: { fresh: (_target, challenge) => [{ type: 'status.query', nonce, challenge }] },
      resendMs: QUERY_RESEND_MS,
      timeoutMs,
      accept: (from, item) => {
        if (item.type !== 'status.reply' || item.nonce !== nonce) return false;
        replies.set(from, { json: item.json, atMs: Date.now() });
        stop = onReply(from, item.json, targets.filter((t) => !replies.has(t)));
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
    const itemsFor = x.items;
    const fresh = Array.isArray(itemsFor) || typeof itemsFor === 'function' ? null : itemsFor.fresh;
    const ask = randomInt(1, 2 ** 31);
    /** What each attempt sends: the request, or the ask for a challenge. */
    const first = (p: ProcessId): Item[] =>
      Array.isArray(itemsFor) ? itemsFor : typeof itemsFor === 'function' ? itemsFor(p) : [{ type: 'challenge.ask', nonce: ask }];
    const round: Round = {
      frames: new Map(x.targets.map((p) => [p, this.encode(p, first(p))])),
      fresh: fresh === null ? null : { nonce: ask, request: (p, challenge) => this.encode(p, fresh(p, challenge)) },
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
          // Those still owed refused us as another cluster's, or are not reachable at all (spare
          // ids not running): no answer will come.
          const t = this.transport;
          const pending = [...round.pending];
          if (t !== null && pending.some((p) => t.foreignCluster(p) !== null) && pending.every((p) => t.foreignCluster(p) !== null || !t.isConnected(p))) {
            return finish();
          }
          for (const p of round.pending) this.resend(p);
        }, x.resendMs);
        const timeout = setTimeout(finish, x.timeoutMs);
        for (const p of x.targets) this.resend(p);
      });
      if (round.pending.size === x.targets.length) this.refuseForeign(x.targets);
    } finally {
      this.round = null;
    }
  }

  /** Nobody answered and the daemons we reached said they belong to another cluster: the
   *  operator passed another cluster's bundle (or this one's addresses now run another). */
  private refuseForeign(targets: readonly ProcessId[]): void {
    const seen = targets.flatMap((p) => {
      const other = this.transport?.foreignCluster(p) ?? null;
      return other === null ? [] : [{ p, other }];
    });
    if (seen.length === 0) return;
    const first = seen[0] as { p: ProcessId; other: string };
    const at = this.cluster.config.processes.find((e) => e.id === first.p)?.listen;
    const where = at === null || at === undefined ? first.p : `${first.p} at ${at.host}:${at.port}`;
    throw new CliError(
      `${where} belongs to cluster ${first.other}, but ${this.cluster.dir} is the bundle of cluster ${this.cluster.config.cluster}: ` +
        'pass the operator bundle of the cluster you mean (--dir)',
      EXIT_USAGE,
    );
  }

  private resend(peer: ProcessId): void {
    const round = this.round;
    const t = this.transport;
    const frame = round?.frames.get(peer);
    if (round === null || t === null || frame === undefined || !round.pending.has(peer)) return;
    // A peer dialed on demand is dialed by the send itself (the frame is lost; it goes again
    // once the link is up, onLink); any other is dialed all along.
    if (!t.isConnected(peer) && !this.onDemand.has(peer)) return;
    t.send(peer, frame);
  }

  /** A verified frame binds the connection; only the first answer of each target counts. */
  private onFrame(data: Uint8Array): boolean {
    const r = this.decode(data);
    if (!r.ok) return false;
    const round = this.round;
    const from = r.value.from;
    for (const item of r.value.items) {
      if (round === null || !round.pending.has(from)) continue;
      // A target's challenge for this round: send the request on it at once (PROTOCOL §7).
      if (item.type === 'challenge' && round.fresh !== null && item.nonce === round.fresh.nonce) {
        this.transport?.send(from, round.fresh.request(from, item.challenge));
        continue;
      }
      if (!round.accept(from, item)) continue;
      round.pending.delete(from);
      if (round.pending.size === 0 || round.settled()) round.done();
    }
    return true;
  }
}

/** The name `trine status` and `trine up` know it by. */
export { OperatorClient as StatusClient };
