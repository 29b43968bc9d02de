// The agent's process driver (spec §1.4, §6.3, §7; issue 3 item 2): the group's delivered
// `proc.*` commands go to the pure process table (src/core/agent-procs.ts), whose effects this
// file executes with the real Spawner (src/io/spawner.ts); what the OS says goes back to the
// table, and what the table's outbox holds (reports, linked processes' signals,
// src/core/agent-outbox.ts) goes to the agent core as requests on a later event-loop turn. It
// keeps the procs file (src/io/run-records.ts), the record a later incarnation reads to adopt
// survivors and kill orphans (PROTOCOL §8.6), and the linked processes' socket (PROTOCOL §9.4,
// src/daemon/app-socket.ts). Run by `trine agent` (src/daemon/agent.ts).
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { drainOutbox } from '../core/agent-outbox.ts';
import { adoptedProcs, recoveredProcs, stepProcs } from '../core/agent-procs.ts';
import { connectApp } from '../core/agent-procs-app.ts';
import {
  createAgentProcs, procRecords, type AgentProcs, type AgentProcsEffect, type ProcOsEvent, type ProcRecord, type ProcRef,
} from '../core/agent-procs-state.ts';
import type { Timing } from '../core/constants.ts';
import type { LogLevel } from '../core/node.ts';
import type { ProcessId, Spawner, SpawnerEvent } from '../core/ports.ts';
import type { AgentRequest, GroupCommand } from '../core/wire/messages.ts';
import { paths, restrictClusterDir } from '../io/cluster-dir.ts';
import { mkdirPrivate } from '../io/private-files.ts';
import { OWNER_ENV, scanMarked } from '../io/proc-scan.ts';
import { isSameProcess, procStartTime, readProcsFile, signalGroup, writeProcsFile, type ProcsFileEntry } from '../io/run-records.ts';
import { ChildProcessSpawner } from '../io/spawner.ts';
import { trace, tracing } from '../io/trace.ts';
import { AppSocketServer } from './app-socket.ts';

/** How long a node stopping for a shutdown gives its task processes after SIGTERM before it
 *  SIGKILLs them (PROTOCOL §10.11): the `trine kill` grace. */
export const NODE_SHUTDOWN_GRACE_MS = 2_000;
const NODE_SHUTDOWN_POLL_MS = 50;

export type ProcDriverOptions = {
  dir: string;
  id: ProcessId;
  timing: Pick<Timing, 'taskTickMs' | 'connectTimeoutMs'>;
  spawner?: Spawner;
  /** The Unix socket linked processes connect to (PROTOCOL §9.4); none: linked spawns cannot
   *  connect and fail their connect timeout. `@name` is an abstract socket (app-socket.ts). */
  appSocketPath?: string;
  /** cluster.json `taskUser`: every task runs as this user (src/io/spawner.ts). Absent: as the
   *  agent's own user. Ignored when `spawner` is given. */
  taskUser?: string;
  /** The node's network address on a cluster of several hosts (cluster.json `nodeAddresses`):
   *  handed to linked processes as TRINE_NODE_HOST, the address G-MPI binds and advertises.
   *  None on a one-host cluster, where G-MPI binds loopback. */
  nodeHost?: string;
  /** The mark every task process gets in its environment (src/io/proc-scan.ts ownerMark), by
   *  which a lost record is rebuilt from the OS; none: no mark, no scan (tests' drivers). */
  owner?: string;
  /** Hands a report to the agent core as a request; called from a fresh event-loop turn, never
   *  while the core is mid-step. */
  send: (request: AgentRequest) => void;
  log: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
};

/** Token comparison in constant time (issue 14 item 8): how long a refusal takes says nothing
 *  about how much of a guess was right. */
function sameToken(want: string, got: string): boolean {
  const a = Buffer.from(want);
  const b = Buffer.from(got);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Executes the process table's effects against the OS and feeds it what the OS says. */
export class ProcDriver {
  readonly procs: AgentProcs;
  private readonly spawner: Spawner;
  private readonly file: string;
  /** Start times by `task/vpid/pid`: keyed by the record, not the pid alone, so a recovered
   *  record and a new child that reused its pid never share one. */
  private readonly startTimes = new Map<string, string | null>();
  /** The procs file's next content, written once at the end of the turn. */
  private pendingRecords: ProcRecord[] | null = null;
  /** Children forked but not yet reported `os.spawned` to the table, by task/vpid: recorded at
   *  once, so an agent that dies in between leaves them to its successor to adopt, not to leak. */
  private readonly forked = new Map<string, ProcRecord>();
  private flushScheduled = false;
  /** Per linked process (task/vpid): the secret it must show on the socket. */
  private readonly tokens = new Map<string, string>();
  /** Per linked process (task/vpid): its task's key, handed over in the welcome (PROTOCOL §9.5). */
  private readonly taskKeys = new Map<string, Uint8Array>();
  private app: AppSocketServer | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly opts: ProcDriverOptions) {
    this.spawner = opts.spawner ?? new ChildProcessSpawner(opts.taskUser === undefined ? {} : { taskUser: opts.taskUser });
    this.file = paths.procsFile(opts.dir, opts.id);
    mkdirPrivate(paths.run(opts.dir));
    // Tasks run as another user: none of the cluster dir may be open to it (a dir made before
    // this rule, or copied without its modes).
    if (opts.taskUser !== undefined) {
      for (const path of restrictClusterDir(opts.dir)) opts.log('warn', 'cluster.dir.restricted', { path, mode: '0700' });
    }
    const read = readProcsFile(this.file);
    if (read.problem !== null) opts.log('warn', 'procs.file.unreadable', { problem: read.problem });
    const recovered = [...read.procs, ...this.unrecorded(read.procs)];
    for (const p of recovered) this.startTimes.set(recordKey(p), p.startTime);
    this.procs = createAgentProcs({
      connectTimeoutTicks: Math.max(1, Math.ceil(opts.timing.connectTimeoutMs / opts.timing.taskTickMs)),
      recovered: recovered.map(({ task, vpid, pid }) => ({ task, vpid, pid })),
    });
    if (recovered.length > 0) opts.log('info', 'procs.recovered', { count: recovered.length, fromOs: recovered.length - read.procs.length });
  }

  /** Task processes of this agent that run with no record (the procs file lost or corrupted,
   *  issue 14 item 6), found by their mark: each that leads its process group (a task process)
   *  and names a task and VPID not recorded is taken as recovered, so the group's resync adopts
   *  it or has it killed (PROTOCOL §8.6); any other marked process outside a recorded group (a
   *  second one for a recorded VPID, one without a mapping, one that left its group) is killed
   *  now. No process outlives the cluster's knowledge of it. */
  private unrecorded(recorded: readonly ProcsFileEntry[]): ProcsFileEntry[] {
    const owner = this.opts.owner;
    if (owner === undefined) return [];
    const marked = scanMarked((o) => o === owner);
    const groups = new Set(recorded.filter((p) => isSameProcess(p.pid, p.startTime)).map((p) => p.pid));
    const known = new Set(recorded.map((p) => `${p.task}/${p.vpid}`));
    const found: ProcsFileEntry[] = [];
    for (const m of marked) {
      if (groups.has(m.pgid) && m.pid !== m.pgid) continue; // inside a recorded task's group
      if (groups.has(m.pid)) continue;
      if (m.pid === m.pgid && m.task !== null && m.vpid !== null && !known.has(`${m.task}/${m.vpid}`)) {
        known.add(`${m.task}/${m.vpid}`);
        groups.add(m.pid);
        found.push({ task: m.task, vpid: m.vpid, pid: m.pid, startTime: m.startTime });
        continue;
      }
      if (groups.has(m.pgid)) continue;
      signalGroup(m.pid, 'SIGKILL');
      this.opts.log('warn', 'procs.unrecorded-killed', { pid: m.pid, task: m.task, vpid: m.vpid });
    }
    if (found.length > 0) this.opts.log('warn', 'procs.rebuilt', { count: found.length, procs: found.map((p) => `${p.task}/${p.vpid}`) });
    return found;
  }

  /** Opens the linked processes' socket (PROTOCOL §9.4). */
  async listen(): Promise<void> {
    const path = this.opts.appSocketPath;
    if (path === undefined || this.app !== null) return;
    this.app = await AppSocketServer.listen(path, {
      authenticate: (task, vpid, token) => {
        const want = this.tokens.get(`${task}/${vpid}`);
        return want !== undefined && sameToken(want, token) ? null : `no linked process ${task}/${vpid} with that token on this node`;
      },
      // Set with the token at spawn, so present whenever authenticate accepted.
      taskKey: (task, vpid) => this.taskKeys.get(`${task}/${vpid}`) ?? null,
      onConnected: (task, vpid, endpoint) => {
        if (tracing()) trace(`agent.connected ${task}/${vpid}`);
        const r = connectApp(this.procs, task, vpid, endpoint);
        if (!r.ok) this.app?.disconnect(task, vpid, `${task}/${vpid} is not starting on this node`);
        this.run(r.effects);
      },
      onSignal: (task, vpid, request) => this.run(stepProcs(this.procs, { type: 'app.signal', task, vpid, request })),
      onFinalized: (task, vpid) => this.run(stepProcs(this.procs, { type: 'app.finalized', task, vpid })),
      onMark: (task, vpid, mark) => this.run(stepProcs(this.procs, { type: 'app.mark', task, vpid, mark })),
      onDgrp: (task, vpid, message) => this.run(stepProcs(this.procs, { type: 'app.dgrp', task, vpid, message })),
      onProgress: (task, vpid, permille) => this.run(stepProcs(this.procs, { type: 'app.progress', task, vpid, permille })),
      onClosed: (task, vpid, clean) => this.run(stepProcs(this.procs, { type: 'app.closed', task, vpid, clean })),
      log: (event) => this.opts.log('info', `app.${event.type}`, { ...event }),
    });
  }

  /** Starts the task tick (taskTickMs); unref'd, so it never keeps the agent alive alone. */
  start(): void {
    if (this.timer !== null || this.stopped) return;
    this.timer = setInterval(() => this.tick(), this.opts.timing.taskTickMs);
    this.timer.unref();
  }

  /** Stops acting (ticks, events, reports); the processes keep running (a later incarnation
   *  adopts them). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    void this.app?.close();
    this.app = null;
  }

  /** PROTOCOL §10.11, after the table took `node.shutdown` (SIGTERM to every process): waits up
   *  to NODE_SHUTDOWN_GRACE_MS for them to end, SIGKILLs what is left (and any predecessor's
   *  process still on record), then stops acting. Resolves with how many are still alive. */
  async shutdown(rsn: number): Promise<number> {
    const alive = (): ProcRecord[] => procRecords(this.procs).filter((r) => isSameProcess(r.pid, this.startTimes.get(recordKey(r)) ?? null));
    const until = Date.now() + NODE_SHUTDOWN_GRACE_MS;
    while (alive().length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, NODE_SHUTDOWN_POLL_MS));
    if (alive().length > 0) {
      this.run(stepProcs(this.procs, { type: 'command', command: { type: 'node.shutdown', rsn, removed: false } }));
      for (const r of alive()) this.spawner.killProcess(r.pid, 'SIGKILL');
      const killUntil = Date.now() + NODE_SHUTDOWN_POLL_MS * 10;
      while (alive().length > 0 && Date.now() < killUntil) await new Promise((r) => setTimeout(r, NODE_SHUTDOWN_POLL_MS));
    }
    const left = alive().length;
    this.writeRecords(procRecords(this.procs).filter((r) => isSameProcess(r.pid, this.startTimes.get(recordKey(r)) ?? null)));
    this.stop();
    return left;
  }

  /** Every task process of this node alive now, with its start time: those the table records
   *  (its children, adopted and recovered ones) whose pid still names the process recorded. For
   *  fault injection (`trine inject slow`, src/daemon/inject-slow.ts). */
  liveProcesses(): { task: string; vpid: number; pid: number; startTime: string }[] {
    const out: { task: string; vpid: number; pid: number; startTime: string }[] = [];
    for (const r of procRecords(this.procs)) {
      const startTime = this.startTimes.get(recordKey(r)) ?? null;
      if (startTime !== null && isSameProcess(r.pid, startTime)) out.push({ task: r.task, vpid: r.vpid, pid: r.pid, startTime });
    }
    return out;
  }

  onCommand(command: GroupCommand): void {
    if (this.stopped) return;
    if (command.type === 'procs.adopt') {
      const local = recoveredProcs(this.procs).map((r) => ({ ...r, alive: isSameProcess(r.pid, this.startTimes.get(recordKey(r)) ?? null) }));
      this.run(stepProcs(this.procs, { type: 'command', command, local }));
      return;
    }
    this.run(stepProcs(this.procs, { type: 'command', command }));
  }

  /** One task tick: connect timeouts, and the liveness of adopted processes (not our children,
   *  so no exit event will ever come for them). */
  tick(): void {
    if (this.stopped) return;
    this.run(stepProcs(this.procs, { type: 'tick' }));
    for (const { ref, pid } of adoptedProcs(this.procs)) {
      if (!isSameProcess(pid, this.startTimes.get(recordKey({ ...ref, pid })) ?? null)) {
        this.run(stepProcs(this.procs, { type: 'os', ref, event: { type: 'os.exited', code: null, signal: null } }));
      }
    }
  }

  private onSpawner(ref: ProcRef, event: SpawnerEvent): void {
    if (this.stopped) return;
    // The table knows the process from here on (or that it never ran).
    this.forked.delete(`${ref.task}/${ref.vpid}`);
    if (event.type === 'os.spawned') this.startTimes.set(recordKey({ ...ref, pid: event.pid }), procStartTime(event.pid));
    this.run(stepProcs(this.procs, { type: 'os', ref, event: event satisfies ProcOsEvent }));
  }

  private run(effects: AgentProcsEffect[]): void {
    let forked = false;
    for (const e of effects) {
      switch (e.type) {
        case 'spawn': {
          const spec = { ...e.spec, logDir: paths.taskLogs(this.opts.dir) };
          if (e.linked) {
            const token = randomBytes(16).toString('hex');
            this.tokens.set(`${e.ref.task}/${e.ref.vpid}`, token);
            this.taskKeys.set(`${e.ref.task}/${e.ref.vpid}`, e.taskKey);
            spec.env = {
              ...spec.env, TRINE_AGENT_SOCKET: this.opts.appSocketPath ?? '', TRINE_TOKEN: token,
              ...(this.opts.nodeHost === undefined ? {} : { TRINE_NODE_HOST: this.opts.nodeHost }),
            };
          }
          if (this.opts.owner !== undefined) spec.env = { ...spec.env, [OWNER_ENV]: this.opts.owner };
          const pid = this.spawner.spawnProcess(spec, (event) => this.onSpawner(e.ref, event));
          if (pid !== null) {
            const record = { task: e.ref.task, vpid: e.ref.vpid, pid };
            this.forked.set(`${record.task}/${record.vpid}`, record);
            this.startTimes.set(recordKey(record), procStartTime(pid));
            forked = true;
          }
          break;
        }
        case 'kill':
          this.kill(e);
          break;
        case 'report':
          // Queued in the table's outbox: only logged here, and a process that ended loses its
          // socket credentials.
          this.opts.log(e.report.kind === 'terminatedAbnormally' || e.report.kind === 'spawnFailed' ? 'warn' : 'info', 'proc.report', { ...e.report });
          if (e.report.kind !== 'spawnSucceeded') {
            this.tokens.delete(`${e.report.task}/${e.report.vpid}`);
            this.taskKeys.delete(`${e.report.task}/${e.report.vpid}`);
          }
          break;
        case 'flush':
          this.scheduleFlush();
          break;
        case 'deliver':
          if (this.app?.send(e.task, e.vpid, e.message) !== true) {
            this.opts.log('debug', 'app.deliver.unconnected', { task: e.task, vpid: e.vpid, message: e.message.type });
          }
          break;
        case 'records':
          this.pendingRecords = e.procs;
          this.scheduleFlush();
          break;
        case 'log':
          this.opts.log(e.level, e.event, e.fields);
          break;
        default: {
          const never: never = e;
          this.opts.log('error', 'procs.effect.unknown', { effect: String(never) });
        }
      }
    }
    // Forks are on record before this turn ends (one write for the batch of spawns).
    if (forked) {
      this.writeRecords(this.pendingRecords ?? procRecords(this.procs));
      this.pendingRecords = null;
    }
  }

  private kill(e: Extract<AgentProcsEffect, { type: 'kill' }>): void {
    // Not our child: its pid may have been reused since it was recorded (see the effect's doc).
    if (!e.child && !isSameProcess(e.pid, this.startTimes.get(recordKey(e)) ?? null)) {
      this.opts.log('info', 'proc.kill.gone', { task: e.task, vpid: e.vpid, pid: e.pid, signal: e.signal });
      return;
    }
    this.opts.log('info', 'proc.kill', { task: e.task, vpid: e.vpid, pid: e.pid, signal: e.signal });
    this.spawner.killProcess(e.pid, e.signal);
  }

  private writeRecords(known: ProcRecord[]): void {
    const listed = new Set(known.map((p) => `${p.task}/${p.vpid}`));
    const procs = [...known, ...[...this.forked.values()].filter((p) => !listed.has(`${p.task}/${p.vpid}`))];
    const entries = procs.map((p) => ({ ...p, startTime: this.startTimes.get(recordKey(p)) ?? null }));
    // Forget start times of records that are gone, so the map stays as small as the file.
    const keep = new Set(procs.map(recordKey));
    for (const k of this.startTimes.keys()) if (!keep.has(k)) this.startTimes.delete(k);
    try {
      writeProcsFile(this.file, this.opts.id, entries);
    } catch (e) {
      // The processes run on regardless; a later incarnation would miss what this write lost.
      this.opts.log('error', 'procs.file.write-failed', { path: this.file, error: (e as Error).message });
    }
  }

  /** The table's outbox is drained on a later event-loop turn: the table runs inside the core's
   *  effect dispatch, and feeding the core from there would re-enter it. Everything of one turn
   *  goes together: the procs file is written once (before the requests: measured, a 16-process
   *  task cost 16 file writes, bench/tasks.ts), then what the outbox gives, in its order
   *  (src/core/agent-outbox.ts). */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      if (tracing()) trace('agent.flush');
      this.flushScheduled = false;
      if (this.stopped) return;
      if (this.pendingRecords !== null) {
        this.writeRecords(this.pendingRecords);
        this.pendingRecords = null;
      }
      for (const request of drainOutbox(this.procs.outbox)) this.opts.send(request);
    });
  }
}

function recordKey(r: { task: string; vpid: number; pid: number }): string {
  return `${r.task}/${r.vpid}/${r.pid}`;
}
