// The daemon runtime shared by `trine manager`, `trine agent` and `trine scc`: it loads the
// cluster config and the process's key, builds the signer and verifier, the core, the Shell and
// the WebSocket transport, and drives the core with the system clock through a single timer.
// Non-send effects go to the process log. SIGTERM/SIGINT stop it cleanly; a `terminate` effect
// or a broken invariant stops it with a non-zero exit code after logging (fail-stop). A broken
// disk never does (issue 14 item 4): the log drops and counts what it cannot write
// (src/io/log.ts), and the records the daemon writes — the replica's task journal, the
// incarnation record — are retried until they are on disk (src/daemon/record-writer.ts); both
// reach the core's status as its DaemonReport (src/core/status.ts).
// For a cluster started with --allow-inject (cluster.json `allowInject`) it also loads the fault
// injection hooks (src/daemon/inject.ts) and puts them between the Shell, the core and the
// transport; otherwise that code is not even loaded. An agent of a one-host cluster, which
// listens nowhere, then listens on a free loopback port, recorded in run/<id>.inject-port, so
// that the operator can ask it to inject (`trine inject slow`, docs/OPERATIONS.md §7).
// Likewise for metrics: only a cluster dir with a metrics.json entry for this process
// (src/io/metrics-ports.ts) has it load prom-client, observe its core and serve `GET /metrics`
// (src/daemon/metrics-wiring.ts, docs/OPERATIONS.md "Metrics").
import { createHash } from 'node:crypto';
import { bytesEqual } from '../base/bytes.ts';
import { EXIT_SHUTDOWN } from '../core/constants.ts';
import type { Core, CoreEffect, CoreInput } from '../core/node.ts';
import type { Hash, LinkAuth, ProcessId, Signer, Transport, Verifier } from '../core/ports.ts';
import { Shell } from '../core/shell.ts';
import type { DaemonReport } from '../core/status.ts';
import { encodeFrame } from '../core/wire/frame.ts';
import type { Frame, Item } from '../core/wire/messages.ts';
import { loadCluster, LOOPBACK_HOST, paths, processEntry, replicaPool, type Cluster, type ProcessEntry, type ProcessKind } from '../io/cluster-dir.ts';
import { readAddedReplicas, withAddedReplicas } from '../io/added-replicas.ts';
import { readKeyFile } from '../io/keys.ts';
import { writeInjectPort, writeTaskJournal } from '../io/run-records.ts';
import { dialTargets, splitSpares } from '../io/dial-targets.ts';
import { createProcessLog, type ProcessLog } from '../io/log.ts';
import { createNodeLinkAuth, type LearningLinkAuth } from '../io/link-auth-node.ts';
import { createNodeSigner, createNodeVerifier } from '../io/signer-node.ts';
import { TransportError, WsTransport, type Endpoint } from '../io/ws-transport.ts';
import { startTrace, trace, tracing } from '../io/trace.ts';
import { listenableEndpoint } from '../io/listen-port.ts';
import { readMetricsPorts } from '../io/metrics-ports.ts';
import { daemonReport, RecordWriter, startIncarnation, type RecordLog } from './record-writer.ts';
import type { TaskProcesses } from './inject.ts';
import type { MetricsSample } from './metrics-sample.ts';
import type { DaemonMetricsHandle } from './metrics-wiring.ts';

/** Tick at least this often even when the core asks for a later wake-up: a guard against a
 *  core that under-reports `nextWakeMs`. The cores report exact deadlines, so the timer is
 *  otherwise armed for the deadline itself; ticking every few ms instead cost an idle 8-process
 *  cluster ~10% more of a core. */
export const IDLE_TICK_MS = 100;
/** Counters are logged this often: enough to follow a run, a line per 10 s per process. */
export const STATS_LOG_INTERVAL_MS = 10_000;
/** Time given to close sockets on SIGTERM before exiting anyway. */
export const SHUTDOWN_GRACE_MS = 1_000;

/** Exit codes (docs/OPERATIONS.md §1). */
export const EXIT_CONFIG = 2;
export const EXIT_TERMINATED = 3;
export const EXIT_CRASH = 70;
/** PROTOCOL §10.11: see src/core/constants.ts. */
export { EXIT_SHUTDOWN };
/** A daemon shutting down exits this long after its last step: the frames of that step (the
 *  watchdog's acknowledgements) leave first. */
export const SHUTDOWN_FLUSH_MS = 100;

/** SHA-256 for state digests, given to the core as its Hash port. */
export const sha256: Hash = (data) => new Uint8Array(createHash('sha256').update(data).digest());

export type CoreFactoryContext = {
  cluster: Cluster;
  entry: ProcessEntry;
  inc: number;
  signer: Signer;
  verifier: Verifier;
  hash: Hash;
  /** The process's log (one per process, so its drop counts are the process's). */
  log: ProcessLog;
  /** What the daemon says of itself in its core's status (src/core/status.ts DaemonReport). */
  daemon: () => DaemonReport;
  /** Where it listens: cluster.json's address, or with RunCoreOptions.join and that port taken,
   *  another port of the same host (PROTOCOL §10.6); null if it does not listen. */
  listen: Endpoint | null;
};

/** Optional observers for benchmarks and traces; daemons started by `trine up` use none. */
export type RunHooks = {
  /** Every non-send effect, with the time it was produced (after it is logged). */
  onEffect?: (effect: Exclude<CoreEffect, { type: 'send' }>, nowMs: number) => void;
  /** Once the transport runs: a way to feed the core an input at the current time. */
  onReady?: (feed: (make: (nowMs: number) => CoreInput) => void) => void;
};

export type RunCoreOptions = RunHooks & {
  dir: string | undefined;
  /** The process to run, or how to find it in the cluster (the watchdog has one id per cluster). */
  id: ProcessId | ((cluster: Cluster) => ProcessId);
  kind: Exclude<ProcessKind, 'operator'>;
  makeCore: (ctx: CoreFactoryContext) => Core;
  /** The daemon's own look at every verified frame before the core (and before fault
   *  injection's): returns what goes on (the frame, or a copy with items taken out), or null.
   *  `reply` sends one item straight back, in a frame of its own authenticated like every frame.
   *  The agent serves the operator's `logs.read` here (src/daemon/logs-server.ts). It must not
   *  throw. */
  intercept?: (frame: Frame, nowMs: number, reply: (to: ProcessId, item: Item) => void) => Frame | null;
  /** Once the transport runs (before onReady): the daemon's way to send an item of its own, the
   *  way `reply` does (the agent asks the replicas for the group with it, group-learner.ts), and
   *  to exit (the agent, once it has stopped its node for a shutdown, PROTOCOL §10.11). */
  onTransport?: (ctl: { send: (to: ProcessId, item: Item) => void; exit: (code: number, why: string) => void }) => void;
  /** The watchdog's supervisor, as it told its child (src/daemon/supervisor.ts), for status. */
  supervisor?: DaemonReport['supervisor'];
  /** A replacement replica joining these members (PROTOCOL §10.6): it dials them itself, and
   *  listens on a free port if cluster.json's is taken (src/io/listen-port.ts). */
  join?: readonly ProcessId[];
  /** An agent's task processes, for the fault injections that act on them (`slow`). */
  tasks?: TaskProcesses;
  /** What the daemon's gauges show at scrape time, from its core's status (metrics-sample.ts);
   *  called only when metrics are on. */
  sample?: (nowMs: number) => MetricsSample;
};

/** Monotonic milliseconds on the Date scale: the wall clock may step, the core's must not. */
export const clockMs = (): number => Math.floor(performance.timeOrigin + performance.now());

/** One-line error for a daemon that cannot start, then exit 2. */
function startupFailure(message: string): never {
  process.stderr.write(`trine: ${message}\n`);
  process.exit(EXIT_CONFIG);
}

export async function runCore(opts: RunCoreOptions): Promise<void> {
  let cluster: Cluster;
  let entry: ProcessEntry;
  let signer: Signer;
  let linkAuth: LearningLinkAuth;
  let id: ProcessId;
  /** Why this node's learnt replicas could not be read (logged once the log is open). */
  let addedError: string | null = null;
  try {
    cluster = loadCluster(opts.dir);
    // A node's agent and replicas also know the replicas its agent learnt (PROTOCOL §10.12).
    if (opts.kind === 'agent' || opts.kind === 'replica') {
      const added = readAddedReplicas(cluster.dir);
      addedError = added.error;
      cluster = withAddedReplicas(cluster, added.replicas);
    }
    id = typeof opts.id === 'function' ? opts.id(cluster) : opts.id;
    entry = processEntry(cluster, id);
    if (entry.kind !== opts.kind) throw new Error(`${id} is a ${entry.kind}, not a ${opts.kind}: start it with \`trine ${entry.kind === 'replica' ? 'manager' : entry.kind}\``);
    const key = readKeyFile(paths.keyFile(cluster.dir, id));
    const expected = cluster.publicKeys.get(id);
    if (key.id !== id || expected === undefined || !bytesEqual(expected, key.publicKey)) {
      throw new Error(`${paths.keyFile(cluster.dir, id)} does not hold ${id}'s key in cluster.json: recreate the cluster with \`trine up\``);
    }
    signer = createNodeSigner(id, key.seed);
    linkAuth = createNodeLinkAuth(id, key.seed, cluster.publicKeys, cluster.config.cluster);
  } catch (e) {
    return startupFailure((e as Error).message);
  }
  const log = createProcessLog(cluster.dir, id);
  const logger = log.logger;
  const recordLog: RecordLog = (level, event, fields) => logger[level]({ event, ...fields });
  if (addedError !== null) logger.warn({ event: 'added-replicas.unreadable', error: addedError }, 'learnt replicas not read: learning them from the group again');
  const { inc, writer: incRecord } = startIncarnation(cluster.dir, id, recordLog);
  /** The replica's task journal (PROTOCOL §10.9): the other daemons never write one. */
  const journal = new RecordWriter<Uint8Array>({
    name: 'tasks.journal', path: paths.taskJournal(cluster.dir, id), write: (data) => writeTaskJournal(cluster.dir, id, data), log: recordLog,
  });
  const daemon = (): DaemonReport => daemonReport(log, { inc: incRecord, tasks: journal }, opts.supervisor ?? null);
  const verifier = createNodeVerifier(cluster.publicKeys);
  let listen = entry.listen;
  if (listen !== null && opts.join !== undefined) {
    const got = await listenableEndpoint(listen).catch(() => ({ endpoint: listen as Endpoint, moved: false }));
    if (got.moved) logger.warn({ event: 'listen.moved', configured: listen, port: got.endpoint.port }, 'port taken: listening on another');
    listen = got.endpoint;
  }
  const built = opts.makeCore({ cluster, entry, inc, signer, verifier, hash: sha256, log, daemon, listen });
  logger.info({ event: 'start', kind: opts.kind, inc, cluster: cluster.config.cluster, listen }, 'starting');

  let exiting = false;
  let transport: WsTransport | null = null;
  let timer: NodeJS.Timeout | null = null;
  let armedAtMs = Infinity;
  let statsTimer: NodeJS.Timeout | null = null;

  startTrace(id);
  /** Straight to the transport, bypassing injected link faults. */
  const sendRaw = (to: ProcessId, frame: Uint8Array): void => {
    if (transport !== null) transport.send(to, frame);
  };
  // Fault injection (docs/OPERATIONS.md §7): only for a cluster started with --allow-inject.
  const injection = cluster.config.allowInject === true
    ? (await import('./inject-handlers.ts')).installInjection({
      self: id,
      kind: opts.kind,
      cluster,
      core: built,
      reply: (to, item) => sendRaw(to, encodeFrame({ from: id, to, items: [item] }, { cluster: cluster.config.cluster, signer })),
      log: (level, event, fields) => logger[level]({ event, ...fields }),
      ...(opts.tasks === undefined ? {} : { tasks: opts.tasks }),
    })
    : null;
  // An agent that listens nowhere is reachable for injections on loopback (see the header).
  const injectListen: Endpoint | null = injection !== null && opts.kind === 'agent' && listen === null ? { host: LOOPBACK_HOST, port: 0 } : null;
  if (injection !== null) logger.warn({ event: 'inject.allowed' }, 'fault injection allowed (cluster.json allowInject)');
  const metrics = await startMetrics(cluster, entry, opts, log);
  const core = metrics === null ? injection?.core ?? built : metrics.metrics.observe(injection?.core ?? built);

  const exit = (code: number, why: string, fields: Record<string, unknown> = {}): void => {
    if (exiting) return;
    exiting = true;
    injection?.close();
    void metrics?.close();
    journal.close();
    incRecord?.close();
    if (timer !== null) clearTimeout(timer);
    if (statsTimer !== null) clearInterval(statsTimer);
    (code === 0 ? logger.info.bind(logger) : logger.error.bind(logger))({ event: 'exit', code, why, ...fields }, why);
    log.flush();
    const done = () => {
      log.flush();
      process.exit(code);
    };
    if (transport === null) return done();
    setTimeout(done, SHUTDOWN_GRACE_MS).unref();
    transport.close().then(done, done);
  };

  const observe = opts.onEffect;
  const onEffect = (e: Exclude<CoreEffect, { type: 'send' }>): void => {
    logEffect(log, e, exit);
    // Processes added at run time (PROTOCOL §10.12): their frames verify from now on, and a
    // spare of an added node is dialed, on demand until it is a member, like cluster.json's.
    if (e.type === 'keys') {
      for (const k of e.keys) {
        if (verifier.add(k.id, k.publicKey) && linkAuth.add(k.id, k.publicKey)) logger.info({ event: 'key.added', id: k.id, ...k.replica });
        if (k.replica === undefined) continue;
        cluster = withAddedReplicas(cluster, [{ id: k.id, publicKey: k.publicKey, ...k.replica }]);
        const ep = processEntry(cluster, k.id).listen;
        if (ep !== null && k.id !== id) transport?.dialOnDemand(k.id, ep);
      }
    }
    if (e.type === 'persist.tasks') journal.put(e.journal);
    // Keep the group's replicas dialed, the rest of the pool (retired, spare) only on demand;
    // a member whose port was taken is dialed where it listens (PROTOCOL §10.6).
    if (e.type === 'replicas') {
      for (const r of replicaPool(cluster.config.membership)) {
        const configured = processEntry(cluster, r).listen;
        const moved = e.ports.find((p) => p.id === r);
        if (configured !== null && r !== id) transport?.setEndpoint(r, moved === undefined ? configured : { host: configured.host, port: moved.port });
        transport?.setOnDemand(r, !e.replicas.includes(r));
      }
    }
    observe?.(e, clockMs());
  };

  const link: Transport = { send: injection === null ? sendRaw : (to, frame) => injection.links.send(to, frame, sendRaw) };
  // The daemon's own answers to what it intercepts: one item per frame, signed or MAC'd as the
  // Shell would, straight to the transport.
  const replyCtx = { cluster: cluster.config.cluster, signer, linkAuth };
  const reply = (to: ProcessId, item: Item): void => sendRaw(to, encodeFrame({ from: id, to, items: [item] }, replyCtx));
  const own = opts.intercept;
  const intercept = composeIntercepts(own === undefined ? null : (frame, nowMs) => own(frame, nowMs, reply), injection?.intercept ?? null);
  const shell = new Shell({
    core, cluster: cluster.config.cluster, signer, verifier, linkAuth, transport: link, onEffect,
    ...(tracing() ? {
      onFrameOut: (to: ProcessId, frame: Uint8Array, items: readonly Item[]) => trace(`tx ${to} ${frame.length} ${items.map(itemLabel).join(',')}`),
      onFrameIn: (from: ProcessId, items: readonly Item[]) => trace(`rx.items ${from} ${items.map(itemLabel).join(',')}`),
    } : {}),
    ...(intercept === null ? {} : { intercept }),
  });
  metrics?.metrics.attachShell(shell.counters);

  /** A core that throws has broken its own invariants: stop rather than act on bad state. */
  const guarded = <T>(what: string, fn: () => T, fallback: T): T => {
    if (exiting) return fallback;
    try {
      return fn();
    } catch (e) {
      exit(EXIT_CRASH, `core failed in ${what}`, { error: String(e), stack: (e as Error).stack ?? null });
      return fallback;
    }
  };

  // ---- the single timer -------------------------------------------------------------------
  const arm = (): void => {
    if (exiting) return;
    const now = clockMs();
    const wake = shell.nextWakeMs();
    const due = wake === null ? now + IDLE_TICK_MS : Math.min(wake, now + IDLE_TICK_MS);
    if (timer !== null && due >= armedAtMs) return;
    if (timer !== null) clearTimeout(timer);
    armedAtMs = due;
    timer = setTimeout(onTimer, Math.max(0, due - now));
  };
  const onTimer = (): void => {
    if (tracing()) trace('timer');
    timer = null;
    armedAtMs = Infinity;
    guarded('tick', () => shell.tick(clockMs()), undefined);
    arm();
  };

  const receive = (data: Uint8Array, from: ProcessId): void => {
    if (tracing()) trace(`rx ${from} ${data.length}`);
    guarded('receive', () => shell.receive(data, clockMs(), from), undefined);
    if (tracing()) trace('rx.done');
    arm();
  };

  const targets = splitSpares(cluster, dialTargets(cluster, id));
  // A replacement dials the members it joins: they may not reach it where cluster.json says.
  for (const m of opts.join ?? []) {
    const ep = m === id ? null : processEntry(cluster, m).listen;
    if (ep === null) continue;
    delete targets.dialOnDemand[m];
    targets.dial[m] = ep;
  }
  try {
    transport = await WsTransport.start({
      self: id,
      cluster: cluster.config.cluster,
      listen: listen ?? injectListen ?? undefined,
      dial: targets.dial,
      dialOnDemand: targets.dialOnDemand,
      auth: { encode: replyCtx, decode: { cluster: cluster.config.cluster, self: id, verifier, linkAuth } },
      // An injected fault on frames from a bound peer takes them here: dropped, or received
      // later (the connection is bound already, so what verification says then changes nothing).
      receive: injection === null ? receive : (data, from) => {
        if (!injection.links.receive(from, data, () => receive(data, from))) receive(data, from);
      },
      onLink: (peer, up) => {
        guarded('link', () => shell.input({ type: up ? 'transport.up' : 'transport.down', nowMs: clockMs(), peer }), undefined);
        arm();
      },
      onEvent: (level, event, fields) => logger[level]({ event, ...fields }),
    });
  } catch (e) {
    if (e instanceof TransportError && e.code === 'ADDR_IN_USE') {
      logger.error({ event: 'exit', code: EXIT_CONFIG, error: e.message });
      log.flush();
      return startupFailure(`${id}: ${e.message}: stop what holds it, or recreate the cluster with \`trine up --base-port P\``);
    }
    throw e;
  }
  logger.info({ event: 'listening', port: transport.port, dials: Object.keys(targets.dial), dialsOnDemand: Object.keys(targets.dialOnDemand) }, 'running');
  if (injectListen !== null && transport.port !== null) {
    try {
      writeInjectPort(cluster.dir, id, transport.port);
    } catch (e) {
      logger.error({ event: 'inject.port.unrecorded', port: transport.port, error: (e as Error).message }, 'trine inject slow cannot reach this agent');
    }
  }
  guarded('start', () => shell.tick(clockMs()), undefined);
  arm();
  opts.onTransport?.({ send: reply, exit: (code, why) => exit(code, why) });
  opts.onReady?.((make) => {
    guarded('input', () => shell.input(make(clockMs())), undefined);
    arm();
  });

  statsTimer = setInterval(() => {
    if (transport === null) return;
    logger.info({ event: 'stats', shell: shell.counters, transport: transport.counters, links: transport.connectedPeers() });
  }, STATS_LOG_INTERVAL_MS);
  statsTimer.unref();

  const onSignal = (signal: NodeJS.Signals): void => {
    if (exiting) process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
    exit(0, `received ${signal}`);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('uncaughtException', (e) => exit(EXIT_CRASH, 'uncaught exception', { error: String(e), stack: e.stack ?? null }));
  process.on('unhandledRejection', (e) => exit(EXIT_CRASH, 'unhandled rejection', { error: String(e) }));
}

/** The daemon's metrics, if the cluster dir's metrics.json gives this process a port (see the
 *  header); a metrics.json that does not decode is logged and leaves metrics off. */
async function startMetrics(cluster: Cluster, entry: ProcessEntry, opts: RunCoreOptions, log: ProcessLog): Promise<DaemonMetricsHandle | null> {
  const logger = log.logger;
  const read = readMetricsPorts(cluster.dir);
  if (!read.ok) {
    logger.error({ event: 'metrics.file.invalid', detail: read.detail }, 'metrics.json not used: fix or remove it, then restart the daemon');
    return null;
  }
  const port = read.ports?.get(entry.id);
  if (port === undefined || entry.kind === 'operator') return null;
  const { startDaemonMetrics } = await import('./metrics-wiring.ts');
  try {
    return await startDaemonMetrics({
      cluster, entry: { ...entry, kind: entry.kind }, port, nowMs: clockMs,
      sample: () => opts.sample?.(clockMs()) ?? {},
      log: (level, event, fields) => logger[level]({ event, ...fields }),
    });
  } catch (e) {
    logger.error({ event: 'metrics.failed', port, error: (e as Error).message }, 'metrics not served');
    return null;
  }
}

type Intercept = (frame: Frame, nowMs: number) => Frame | null;
/** The daemon's own intercept, then fault injection's; null when there is neither. */
function composeIntercepts(first: Intercept | null, second: Intercept | null): Intercept | null {
  if (first === null || second === null) return first ?? second;
  return (frame, nowMs) => {
    const rest = first(frame, nowMs);
    return rest === null ? null : second(rest, nowMs);
  };
}

function logEffect(log: ProcessLog, e: Exclude<CoreEffect, { type: 'send' }>, exit: (code: number, why: string, fields?: Record<string, unknown>) => void): void {
  const logger = log.logger;
  switch (e.type) {
    case 'log':
      logger[e.level]({ event: e.event, ...e.fields });
      break;
    case 'deliver.command':
      logger.debug({ event: 'deliver.command', gssn: e.gssn, command: e.command.type });
      break;
    case 'deliver.request':
      logger.debug({ event: 'deliver.request', rsn: e.rsn, client: e.client, csn: e.csn, request: e.request.type });
      break;
    case 'deliver.input':
      (e.input.type === 'tick' ? logger.debug.bind(logger) : logger.warn.bind(logger))({ event: 'deliver.input', rsn: e.rsn, ...e.input });
      break;
    case 'deliver.notice':
      logger.info({ event: 'deliver.notice', from: e.from, text: e.text });
      break;
    case 'suspect':
      logger.warn({ event: 'suspect', target: e.target, reason: e.reason, detail: e.detail });
      break;
    case 'terminate':
      exit(EXIT_TERMINATED, `core terminated: ${e.reason}`);
      break;
    case 'keys':
      // Taken by onEffect (it holds the verifier and the link keys).
      break;
    case 'shutdown':
      // After the effects of this step went out (their sends are queued already).
      setTimeout(() => exit(EXIT_SHUTDOWN, e.reason), SHUTDOWN_FLUSH_MS).unref();
      break;
    case 'reset.node':
      logger.warn({ event: 'reset.node', node: e.node, rsn: e.rsn });
      break;
    case 'reset.cluster':
      // The watchdog daemon logs it (at error) together with what it did (src/daemon/scc.ts).
      break;
    case 'persist.tasks':
      // Written by onEffect's journal writer, which retries a failed write and logs it.
      break;
    case 'replicas':
      // Applied to the transport by onEffect; the core logged the view it came with.
      break;
    default: {
      const never: never = e;
      logger.error({ event: 'effect.unknown', effect: String(never) });
    }
  }
}

/** An item as the trace names it: its type, with a ptp or grp body's own type, and a group
 *  message's payload type (`grp:gc:proc.spawn`, `grp:cg:proc.report`). */
function itemLabel(item: Item): string {
  if (item.type === 'grp') return item.body.type === 'gc' ? `grp:gc:${item.body.gc.payload.type}` : `grp:cg:${item.body.signed.cg.payload.type}`;
  if (item.type === 'ptp' && item.body !== null) return `ptp:${item.body.type}`;
  return item.type;
}
