// `trine logs` on a cluster of several hosts (docs/PROTOCOL.md §7.1): a task process's output is
// on the disk of the host whose agent ran it, so it is read from that agent over the network,
// a chunk at a time (`logs.read` → `logs.data`, cli/status-client.ts readLogs), into the same
// line reader the local files use (cli/log-lines.ts): same offsets, prefixes and partial lines.
// Which agent: the node the cluster view (two agreeing replicas) says the process ran on, and
// that node's agent in the membership.
//
// An agent that does not answer (its node is down or cut off) costs one timeout: a warning on
// stderr names the node and the processes whose output it holds, once, and the other processes'
// output still prints; `unreadable()` says what was missed, for the command's exit code.
import { LOGS_BYTES_PER_FRAME, LOGS_CHUNK_BYTES, MAX_LOGS_READS_PER_FRAME } from '../src/core/constants.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { ProcView } from '../src/core/status.ts';
import type { Cluster } from '../src/io/cluster-dir.ts';
import { LineReader, type Stream } from './log-lines.ts';
import { agentListeners, type LogChunk, type LogRead, type OperatorClient } from './status-client.ts';

/** One output file of one process, on its node's agent. */
type Source = {
  vpid: number;
  stream: Stream;
  node: string;
  /** The node's agent, if it listens (null: nobody to ask). */
  agent: ProcessId | null;
  reader: LineReader;
  /** Given up on: its agent did not answer, could not read it, or there is no agent to ask. */
  lost: boolean;
};

export type RemoteLogOptions = {
  client: OperatorClient;
  cluster: Cluster;
  task: string;
  streams: readonly Stream[];
  /** --vpid: that process only. */
  onlyVpid: number | undefined;
  /** How long an agent has to answer one round of reads. */
  timeoutMs: number;
  /** Prints to stdout (respecting backpressure). */
  write: (text: string) => Promise<void>;
  /** One line to stderr. */
  warn: (line: string) => void;
  /** Lines as `trine.log/1` JSON objects (--json). */
  json?: boolean | undefined;
};

export class RemoteLogSet {
  private readonly sources = new Map<string, Source>();
  /** Node → its agent, for agents that listen. */
  private readonly agentOf = new Map<string, ProcessId>();
  /** Agents that did not answer: not asked again. */
  private readonly silent = new Set<ProcessId>();
  private anyFile = false;

  constructor(private readonly opts: RemoteLogOptions) {
    const listening = agentListeners(opts.cluster);
    for (const a of opts.cluster.config.membership.agents) if (listening[a.id] !== undefined) this.agentOf.set(a.node, a.id);
  }

  /** Whether some file asked for exists (a task whose processes wrote nothing yet has none). */
  get foundOutput(): boolean {
    return this.anyFile;
  }

  /** Adds the files of these processes (those of --vpid only), each read from the agent of the
   *  node it was placed on; a process not placed yet has no output and is added later. */
  add(procs: readonly ProcView[]): void {
    for (const p of procs) {
      if (p.node === null || (this.opts.onlyVpid !== undefined && p.vpid !== this.opts.onlyVpid)) continue;
      const agent = this.agentOf.get(p.node) ?? null;
      const added: Source[] = [];
      for (const stream of this.opts.streams) {
        const key = `${p.vpid}/${stream}`;
        if (this.sources.has(key)) continue;
        const s: Source = { vpid: p.vpid, stream, node: p.node, agent, reader: new LineReader(this.opts.task, p.vpid, stream, this.opts.json === true), lost: false };
        this.sources.set(key, s);
        added.push(s);
      }
      const name = `${this.opts.task}/${p.vpid}`;
      if (agent === null) this.lose(added, `node ${p.node} has no agent that listens in cluster.json: the output of ${name} cannot be read`);
      else if (this.silent.has(agent)) this.lose(added, `node ${p.node} (agent ${agent}) did not answer: the output of ${name} cannot be read`);
    }
  }

  /** Prints every file whole, one after the other (by VPID, stdout before stderr), last lines
   *  without a newline included: what `trine logs` without --follow shows. */
  async printAll(): Promise<void> {
    for (const s of this.ordered()) await this.drain([s], true);
  }

  /** Prints what every file has now (`final`: and the last lines without a newline, the task
   *  having finished): one step of --follow. */
  async print(final: boolean): Promise<void> {
    await this.drain(this.ordered(), final);
  }

  /** The processes whose output could not be read, as `t3/1 (n2)`. */
  unreadable(): string[] {
    const out = new Set<string>();
    for (const s of this.ordered()) if (s.lost) out.add(`${this.opts.task}/${s.vpid} (${s.node})`);
    return [...out];
  }

  private ordered(): Source[] {
    const rank = (s: Source) => s.vpid * 2 + (s.stream === 'out' ? 0 : 1);
    return [...this.sources.values()].sort((a, b) => rank(a) - rank(b));
  }

  /** Reads `sources` up to the size each had at its first answer (as a local read goes up to
   *  the size it found), printing complete lines round by round. */
  private async drain(sources: readonly Source[], final: boolean): Promise<void> {
    const upTo = new Map<Source, number>();
    let open = sources.filter((s) => !s.lost);
    while (open.length > 0) {
      const batch = this.nextBatch(open);
      const answers = await this.opts.client.readLogs(batch.reads, this.opts.timeoutMs);
      const lines: string[] = [];
      const unanswered = new Map<ProcessId, Source[]>();
      const stalled = new Set<Source>();
      for (const [i, s] of batch.sources.entries()) {
        const a = answers[i] ?? null;
        if (a === null) {
          const agent = s.agent as ProcessId;
          unanswered.set(agent, [...(unanswered.get(agent) ?? []), s]);
          continue;
        }
        if (!a.ok) {
          this.lose([s], `${s.agent ?? '?'} (node ${s.node}) could not read ${this.opts.task}/${s.vpid}'s ${s.stream === 'out' ? 'stdout' : 'stderr'}: ${a.error}`);
          continue;
        }
        const before = s.reader.offset;
        lines.push(...this.take(s, a));
        if (!upTo.has(s)) upTo.set(s, a.size);
        // An answer that moves the reader nowhere (no bytes, no rewind of a replaced file) ends
        // this drain of the file: a confused agent must not keep the command asking forever.
        if (s.reader.offset === before) stalled.add(s);
      }
      for (const [agent, lostHere] of unanswered) this.silence(agent, lostHere);
      if (lines.length > 0) await this.opts.write(`${lines.join('\n')}\n`);
      open = open.filter((s) => !s.lost && !stalled.has(s) && s.reader.offset < (upTo.get(s) ?? Infinity));
    }
    if (!final) return;
    const last = sources.filter((s) => !s.lost).flatMap((s) => s.reader.flush());
    if (last.length > 0) await this.opts.write(`${last.join('\n')}\n`);
  }

  /** The next round's reads: at most MAX_LOGS_READS_PER_FRAME per agent, each agent's share of
   *  LOGS_BYTES_PER_FRAME (the rest wait for the next round). */
  private nextBatch(open: readonly Source[]): { sources: Source[]; reads: LogRead[] } {
    const perAgent = new Map<ProcessId, Source[]>();
    for (const s of open) {
      const agent = s.agent as ProcessId;
      const list = perAgent.get(agent) ?? [];
      if (list.length < MAX_LOGS_READS_PER_FRAME) perAgent.set(agent, [...list, s]);
    }
    const sources = open.filter((s) => perAgent.get(s.agent as ProcessId)?.includes(s) === true);
    const reads = sources.map((s): LogRead => {
      const share = Math.floor(LOGS_BYTES_PER_FRAME / (perAgent.get(s.agent as ProcessId)?.length ?? 1));
      return { agent: s.agent as ProcessId, task: this.opts.task, vpid: s.vpid, stream: s.stream, offset: s.reader.offset, maxBytes: Math.min(LOGS_CHUNK_BYTES, share) };
    });
    return { sources, reads };
  }

  /** An answer into the file's reader: the complete lines it ends. */
  private take(s: Source, a: LogChunk): string[] {
    if (!a.missing) this.anyFile = true;
    s.reader.resize(a.size);
    // Shrunk below what was read (replaced): the bytes are not where the reader now is.
    return a.offset === s.reader.offset ? s.reader.take(a.bytes) : [];
  }

  /** `agent` did not answer: its files are given up on, and the warning names its node and
   *  every process of the task it holds, once. */
  private silence(agent: ProcessId, sources: readonly Source[]): void {
    this.silent.add(agent);
    const all = [...this.sources.values()].filter((s) => s.agent === agent && !s.lost);
    const node = sources[0]?.node ?? '?';
    const names = [...new Set(all.map((s) => `${this.opts.task}/${s.vpid}`))].join(', ');
    this.lose(all, `node ${node} (agent ${agent}) did not answer within ${this.opts.timeoutMs} ms: the output of ${names} cannot be read; the rest goes on`);
  }

  private lose(sources: readonly Source[], why: string): void {
    for (const s of sources) s.lost = true;
    if (sources.length > 0) this.opts.warn(why);
  }
}
