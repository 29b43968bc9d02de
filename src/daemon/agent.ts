// `trine agent`: runs one node agent (DESIGN.md §1; spec §1.4) — the agent core on the shared
// daemon runtime, dialing every replica — and its process driver: the group's delivered
// `proc.*` commands go to the pure process table (src/core/agent-procs.ts), whose effects this
// file executes with the real Spawner (src/io/spawner.ts), and whose reports go back to the group
// as `proc.report` requests. It also keeps the procs file (src/io/run-records.ts), the record a
// later incarnation reads to adopt survivors and kill orphans (PROTOCOL §8.6), and heartbeats its
// keeper over the IPC channel when it has one (src/daemon/keeper.ts). On a cluster of several
// hosts it listens, and answers the operator's reads of its node's task output
// (src/daemon/logs-server.ts, PROTOCOL §7.1).
//
// Standby mode (AGENT_STANDBY_ENV=1, only under a keeper): the process loads all its code — the
// costly part of a start, TypeScript through tsx — then waits on its IPC channel for `go`. Only
// then does it become the agent: it takes its incarnation, opens its log, reads the procs file
// and dials the replicas. Before `go` it has no identity in the cluster: it does not connect,
// log as the agent or touch the run dir, so a standby that is never used leaves no trace. A
// standby whose keeper goes away (the channel closes) exits: nobody can promote it.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createAgent } from '../core/agent.ts';
import { drainOutbox } from '../core/agent-outbox.ts';
import { adoptedProcs, recoveredProcs, stepProcs } from '../core/agent-procs.ts';
import { connectApp } from '../core/agent-procs-app.ts';
import {
  createAgentProcs, procRecords, type AgentProcs, type AgentProcsEffect, type ProcOsEvent, type ProcRecord, type ProcRef,
} from '../core/agent-procs-state.ts';
import type { Timing } from '../core/constants.ts';
import type { CoreInput, LogLevel } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import type { AgentRequest, GroupCommand, Item } from '../core/wire/messages.ts';
import { keepAddedReplicas } from '../io/added-replicas.ts';
import { DEFAULT_AGENT_SLOTS, paths, replicaPool, restrictClusterDir, type ClusterConfig } from '../io/cluster-dir.ts';
import { createProcessLog } from '../io/log.ts';
import { mkdirPrivate, writeFilePrivate } from '../io/private-files.ts';
import { OWNER_ENV, ownerMark, scanMarked } from '../io/proc-scan.ts';
import { isSameProcess, procStartTime, readProcsFile, signalGroup, writeProcsFile, type ProcsFileEntry } from '../io/run-records.ts';
import { ChildProcessSpawner, type Spawner, type SpawnerEvent } from '../io/spawner.ts';
import { agentSocketName, AppSocketServer } from './app-socket.ts';
import { startGroupLearner, type GroupLearner } from './group-learner.ts';
import { createLogsServer, type LogsServer } from './logs-server.ts';
import { AGENT_STANDBY_ENV, KEEPER_HEARTBEAT_MS, type AgentToKeeper, type KeeperToAgent } from './keeper.ts';
import { EXIT_CONFIG, EXIT_SHUTDOWN, runCore, type RunHooks } from './run-core.ts';

// The procs file and start-time helpers moved to src/io/run-records.ts (the keeper, `trine
// down` and the reset driver read them too); re-exported for existing importers.
export {
  isSameProcess, listProcsFiles, procStartTime, PROCS_FILE_FORMAT, readProcsFile, removeProcsFile, writeProcsFile,
  type ProcsFileEntry,
} from '../io/run-records.ts';

// ---- the process driver -------------------------------------------------------------------------

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
        const r = connectApp(this.procs, task, vpid, endpoint);
        if (!r.ok) this.app?.disconnect(task, vpid, `${task}/${vpid} is not starting on this node`);
        this.run(r.effects);
      },
      onSignal: (task, vpid, request) => this.run(stepProcs(this.procs, { type: 'app.signal', task, vpid, request })),
      onFinalized: (task, vpid) => this.run(stepProcs(this.procs, { type: 'app.finalized', task, vpid })),
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

// ---- the keeper's channel -----------------------------------------------------------------------

/** A message to the keeper; with a callback, a channel closing mid-send is reported there instead
 *  of as an 'error' event, which would otherwise crash the agent: losing the keeper is no reason
 *  to stop. */
function tellKeeper(message: AgentToKeeper): void {
  if (process.connected) process.send?.(message, undefined, {}, () => {});
}

const isGo = (m: unknown): m is KeeperToAgent =>
  typeof m === 'object' && m !== null && (m as { type?: unknown }).type === ('go' satisfies KeeperToAgent['type']);

/** Standby mode (see the header): say that the code is loaded, then wait for the keeper's `go`.
 *  Exits if the keeper goes away first. */
function waitForGo(): Promise<void> {
  if (typeof process.send !== 'function' || !process.connected) {
    process.stderr.write(`trine: ${AGENT_STANDBY_ENV}=1 is the keeper's standby mode and needs its IPC channel: run \`trine keeper\`, or unset it\n`);
    process.exit(EXIT_CONFIG);
  }
  return new Promise((resolve) => {
    const onDisconnect = (): void => process.exit(0);
    const onMessage = (m: unknown): void => {
      if (!isGo(m)) return;
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
      // Not inherited by anything this agent starts (task processes get an explicit environment
      // anyway, src/io/spawner.ts).
      delete process.env[AGENT_STANDBY_ENV];
      resolve();
    };
    // The listener keeps the channel referenced, and so this process alive, while it waits.
    process.on('message', onMessage);
    process.once('disconnect', onDisconnect);
    tellKeeper({ type: 'standby.ready' });
  });
}

/** Under a keeper (an IPC channel exists), tell it every KEEPER_HEARTBEAT_MS that this event
 *  loop still turns. Sent from a timer, so a wedged loop stops them and the keeper acts. */
function heartbeatKeeper(): void {
  if (typeof process.send !== 'function') return;
  const beat = (): void => tellKeeper({ type: 'heartbeat' });
  beat();
  const timer = setInterval(beat, KEEPER_HEARTBEAT_MS);
  timer.unref();
  process.once('disconnect', () => clearInterval(timer));
  // The channel alone must not keep the agent alive.
  process.channel?.unref();
}

// ---- the daemon ---------------------------------------------------------------------------------

/** Starting and stopping a manager replica on this node for the group (PROTOCOL §10.6): how
 *  depends on the cluster (a local one spawns `trine manager`, cli/daemons.ts). Returns the pid,
 *  or null when there was nothing to stop. */
export type ReplicaControl = {
  start(id: ProcessId, join: { view: number; primary: ProcessId; replicas: readonly ProcessId[] }): number;
  stop(id: ProcessId): number | null;
  /** Called once the agent runs, with its log: a local cluster loads its warm standby replica
   *  then (src/daemon/replica-standby.ts). */
  attach?(log: (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void): void;
};

/** The address a node's task processes bind (ProcDriverOptions.nodeHost), if the cluster has
 *  several hosts. */
const nodeHostOf = (config: ClusterConfig, node: string | null): { nodeHost?: string } => {
  const address = node === null ? undefined : config.nodeAddresses?.[node];
  return address === undefined ? {} : { nodeHost: address };
};

export async function runAgent(
  dir: string | undefined, id: ProcessId, hooks: RunHooks = {}, replicas?: ReplicaControl,
): Promise<void> {
  if (process.env[AGENT_STANDBY_ENV] === '1') await waitForGo();
  heartbeatKeeper();
  let driver: ProcDriver | null = null;
  let feed: ((make: (nowMs: number) => CoreInput) => void) | null = null;
  /** Reports produced before the transport ran (the core takes inputs only after). */
  const backlog: AgentRequest[] = [];
  const send = (request: AgentRequest): void => {
    if (feed === null) backlog.push(request);
    else feed((nowMs) => ({ type: 'request', nowMs, request }));
  };
  let log: ReturnType<typeof createProcessLog>['logger'] | null = null;
  /** Serves the operator's `logs.read` items from this node's task output (PROTOCOL §7.1). */
  let logsServer: LogsServer | null = null;
  /** Asks the replicas for the group as it is now, on this agent's transport (PROTOCOL §10.7). */
  let learner: GroupLearner | null = null;
  let sendItem: ((to: ProcessId, item: Item) => void) | null = null;
  let exitAgent: ((code: number, why: string) => void) | null = null;
  let clusterDir: string | null = null;
  let pool: ProcessId[] = [];
  /** The group's commands about replicas on this node, carried out once each. */
  const onReplicaCommand = (command: GroupCommand): void => {
    if (command.type !== 'replica.spawn' && command.type !== 'replica.kill') return;
    try {
      if (replicas === undefined) {
        log?.warn({ event: 'replica.command.ignored', command: command.type, replica: command.id, why: 'this agent cannot start or stop replicas' });
      } else if (command.type === 'replica.spawn') {
        const pid = replicas.start(command.id, command);
        log?.warn({ event: 'replica.started', replica: command.id, replicaPid: pid, view: command.view, primary: command.primary, replicas: command.replicas });
      } else {
        const pid = replicas.stop(command.id);
        log?.warn({ event: 'replica.killed', replica: command.id, replicaPid: pid });
      }
    } catch (e) {
      log?.error({ event: 'replica.command.failed', command: command.type, replica: command.id, error: (e as Error).message });
    }
  };
  return runCore({
    dir,
    id,
    kind: 'agent',
    makeCore: ({ cluster, entry, inc, signer }) => {
      const logger = createProcessLog(cluster.dir, id).logger;
      clusterDir = cluster.dir;
      log = logger;
      replicas?.attach?.((level, event, fields) => logger[level]({ event, ...fields }));
      driver = new ProcDriver({
        dir: cluster.dir,
        id,
        timing: cluster.config.membership.timing,
        send,
        appSocketPath: agentSocketName(cluster.config.cluster, id),
        owner: ownerMark(cluster.config.cluster, id),
        ...(cluster.config.taskUser === undefined ? {} : { taskUser: cluster.config.taskUser }),
        ...nodeHostOf(cluster.config, entry.node),
        // Every line already carries the agent's own `pid`: a task process's goes as `procPid`.
        log: (level, event, { pid, ...fields }) => logger[level]({ event, ...fields, ...(pid === undefined ? {} : { procPid: pid }) }),
      });
      logsServer = createLogsServer({
        logDir: paths.taskLogs(cluster.dir),
        operators: cluster.config.membership.operators,
        log: (level, event, fields) => logger[level]({ event, ...fields }),
      });
      driver.start();
      void driver.listen().catch((e: Error) => logger.error({ event: 'app.socket.failed', error: e.message }));
      // A predecessor left processes on record: ask the group which are still ours (PROTOCOL §8.6).
      const resync = driver.procs.recovered.length > 0;
      pool = replicaPool(cluster.config.membership);
      return createAgent({ id, membership: cluster.config.membership, inc, slots: entry.slots ?? DEFAULT_AGENT_SLOTS, signer, resync });
    },
    intercept: (frame, nowMs, reply) => {
      const rest = learner === null ? frame : learner.intercept(frame);
      return rest === null || logsServer === null ? rest : logsServer.intercept(rest, nowMs, reply);
    },
    onTransport: (ctl) => {
      sendItem = ctl.send;
      exitAgent = ctl.exit;
    },
    onEffect: (effect, nowMs) => {
      // Spares of added nodes, learnt from two replicas (PROTOCOL §10.12): kept on this node's
      // disk before the command that may start one of them is carried out (the core emits the
      // keys first), so the replica started here knows them too (src/io/added-replicas.ts).
      if (effect.type === 'keys' && clusterDir !== null) {
        const learnt = effect.keys.flatMap((k) => (k.replica === undefined ? [] : [{ id: k.id, publicKey: k.publicKey, ...k.replica }]));
        try {
          if (learnt.length > 0) keepAddedReplicas(clusterDir, learnt);
        } catch (e) {
          log?.error({ event: 'added-replicas.write-failed', error: (e as Error).message });
        }
      }
      if (effect.type === 'deliver.command') {
        driver?.onCommand(effect.command);
        onReplicaCommand(effect.command);
        if (effect.command.type === 'node.shutdown' && driver !== null && clusterDir !== null) {
          const { rsn, removed } = effect.command;
          const why = removed ? 'the operator removed this node' : 'the operator shut the cluster down';
          log?.warn({ event: 'node.shutdown', rsn, removed }, `${why}: stopping this node`);
          const dir = clusterDir;
          void driver.shutdown(rsn).then((left) => {
            try {
              writeFilePrivate(paths.shutdownFile(dir, id), `${JSON.stringify({ rsn, removed, atMs: Date.now() })}\n`);
            } catch (e) {
              log?.error({ event: 'node.shutdown.record-failed', error: (e as Error).message });
            }
            exitAgent?.(EXIT_SHUTDOWN, `${why} (RSN ${rsn})${left === 0 ? '' : `; ${left} processes would not die`}`);
          });
        }
      }
      hooks.onEffect?.(effect, nowMs);
    },
    onReady: (f) => {
      feed = f;
      for (const request of backlog.splice(0)) send(request);
      // Meanwhile learn the group as it is now (PROTOCOL §10.7): this incarnation started from
      // cluster.json's, which after two replacements holds only one member.
      if (sendItem !== null) {
        learner = startGroupLearner({
          pool,
          send: sendItem,
          nonce: () => randomBytes(4).readUInt32BE(0) >>> 1,
          log: (level, event, fields) => log?.[level]({ event, ...fields }),
          onLearnt: (group) => {
            log?.info({ event: 'agent.group.learnt', ...group, added: group.added.map((x) => x.id) });
            f((nowMs) => ({ type: 'group', nowMs, view: group.view, primary: group.primary, replicas: [...group.replicas], ports: [...group.ports], added: [...group.added] }));
          },
        });
      }
      hooks.onReady?.(f);
    },
  });
}
