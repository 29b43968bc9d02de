// A daemon's Prometheus metrics (docs/OPERATIONS.md "Metrics" lists every series): one
// prom-client Registry per daemon (never the global one), with default labels naming the daemon.
// Loaded only when the cluster dir asks for metrics (src/daemon/metrics-wiring.ts), so a daemon
// without them never loads prom-client.
//
// Cost on the hot path: the core observer (observeCore) counts events into plain integers and
// Maps of small integers — an increment per heartbeat, ordered request or diagnosis event, no
// allocation per frame — and the registry turns them into counters only when scraped, through
// each metric's collect(). Gauges are computed at scrape time from the core's status (one
// MetricsSample per scrape, metrics-sample.ts). Counters only go up: each is the running total
// of a count that only grows in this process, which starts from zero with the daemon (the usual
// Prometheus counter reset on restart).
//
// The pure cores stay pure: this file observes what goes into and comes out of `Core.step`.
// prom-client itself is loaded by `DaemonMetrics.create`, by createRequire: a static import would
// have every `trine` process load it, and the CLI bundle's body may hold no import() (V8's code
// cache drops the callback import() needs in Node 20: bin/cli-bundle.js).
import { createRequire } from 'node:module';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Core, CoreEffect, CoreInput } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import type { ShellCounters } from '../core/shell.ts';
import type { AgentRequest, Frame } from '../core/wire/messages.ts';
import type { MetricsSample } from './metrics-sample.ts';
import type { ProtectorStats } from './protector.ts';

/** Requests (replica) or group messages (agent) waiting for their ordered delivery, for the
 *  latency histogram: far more than are ever in flight (an agent keeps a few unacknowledged,
 *  PROTOCOL §5); past it new arrivals are not timed, so a flood costs no memory. */
export const MAX_TIMED_MESSAGES = 4096;
/** A timed message not delivered within this long never will be here (a refused request, a
 *  copy for a view we left): it is forgotten at the next scrape. */
export const TIMED_MESSAGE_FORGET_MS = 60_000;
/** One scrape reads every gauge within a few milliseconds: the sample (a status, with a state
 *  digest) is computed once per scrape (`exposition`), and at most this long is reused by a
 *  caller that reads the registry directly. */
export const SAMPLE_REUSE_MS = 250;
/** prom-client's event-loop lag monitor samples this often. Its default, 10 ms, wakes each
 *  daemon 100 times a second: measured on an idle 4-node cluster, that cost its 12 daemons 13 to
 *  27 % more CPU with metrics on (docs/OPERATIONS.md §9 "Cost"). A sample a second still shows a
 *  stalled loop. */
export const EVENT_LOOP_RESOLUTION_MS = 1_000;
/** Latency buckets in seconds: a loopback order takes a few ms, a loaded or faulty one seconds. */
export const LATENCY_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The log events of self-diagnosis (src/core/diagnosis.ts) and the kind each is counted as. */
const DIAGNOSIS_EVENTS: ReadonlyMap<string, string> = new Map([
  ['diagnosis.initiated', 'initiated'], ['replica.accuse', 'accused'], ['replica.accusation', 'accusation'], ['replica.condemned', 'condemned'],
]);

export type DaemonLabels = { daemon: 'replica' | 'agent' | 'watchdog'; id: ProcessId; node: string | null };

/** The per-event counts, plain numbers (see the header). */
class Counts {
  readonly heartbeatsSent = new Map<ProcessId, number>();
  readonly heartbeatsReceived = new Map<ProcessId, number>();
  readonly orderedRequests = new Map<string, number>();
  readonly orderedInputs = new Map<string, number>();
  readonly commandsDelivered = new Map<string, number>();
  readonly diagnosis = new Map<string, number>();
  readonly suspicions = new Map<string, number>();
  readonly diagnosisReports = new Map<string, number>();
  readonly resets = new Map<string, number>();
  condemnations = 0;
}

/** A request as this replica times it: the agent's CSN of its incarnation, and for an operator
 *  (whose requests carry no CSN of their own) the request's nonce. */
const requestKey = (cg: { client: ProcessId; inc: number; csn: number; payload: AgentRequest }): string =>
  `${cg.client}/${cg.inc}/${cg.csn}/${'nonce' in cg.payload ? cg.payload.nonce : ''}`;

const bump = <K>(m: Map<K, number>, key: K): void => {
  m.set(key, (m.get(key) ?? 0) + 1);
};

type PromClient = typeof import('prom-client');

export class DaemonMetrics {
  readonly registry: Registry;
  private readonly counts = new Counts();
  /** Arrival time of each timed message: replica requestKey, agent `gssn`. */
  private readonly arrivals = new Map<string | number, number>();
  private readonly latency: Histogram<'stage'>;
  private shell: ShellCounters | null = null;
  private sampled: { atMs: number; sample: MetricsSample } | null = null;

  /** Loads prom-client, then builds the daemon's registry. */
  static async create(labels: DaemonLabels, sampleFn: () => MetricsSample, nowMs: () => number): Promise<DaemonMetrics> {
    return new DaemonMetrics(createRequire(import.meta.url)('prom-client') as PromClient, labels, sampleFn, nowMs);
  }

  private constructor(prom: PromClient, readonly labels: DaemonLabels, private readonly sampleFn: () => MetricsSample, private readonly nowMs: () => number) {
    const { collectDefaultMetrics, Counter, Histogram } = prom;
    this.registry = new prom.Registry();
    this.registry.setDefaultLabels({
      daemon: labels.daemon, id: labels.id, ...(labels.node === null ? {} : { node: labels.node }), ...(labels.daemon === 'replica' ? { replica: labels.id } : {}),
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'trine_', eventLoopMonitoringPrecision: EVENT_LOOP_RESOLUTION_MS });
    const c = this.counts;
    const registers = [this.registry];
    // Each daemon registers the series its core can have: an agent has no RSN, a replica no
    // node processes; an absent series says so better than a constant 0.
    const replica = labels.daemon === 'replica';
    const agent = labels.daemon === 'agent';
    const watchdog = labels.daemon === 'watchdog';
    const fromMap = (name: string, help: string, label: string, map: () => ReadonlyMap<string, number>, applies = true): void => {
      if (!applies) return;
      new Counter({ name, help, labelNames: [label], registers, collect(this: Counter<string>) {
        this.reset();
        for (const [k, v] of map()) this.inc({ [label]: k }, v);
      } });
    };
    fromMap('trine_heartbeats_sent_total', 'Heartbeats this daemon sent, by peer.', 'peer', () => c.heartbeatsSent);
    fromMap('trine_heartbeats_received_total', 'Heartbeats this daemon received (verified), by peer.', 'peer', () => c.heartbeatsReceived);
    fromMap('trine_ordered_requests_total', 'Agent and operator requests executed in RSN order, by request type.', 'kind', () => c.orderedRequests, replica);
    fromMap('trine_ordered_inputs_total', "The group's own inputs executed in RSN order (ticks, node failures, condemnations, additions), by type.", 'kind', () => c.orderedInputs, replica);
    fromMap('trine_group_commands_delivered_total', 'Group commands delivered to this agent on two matching copies, by command type.', 'kind', () => c.commandsDelivered, agent);
    fromMap('trine_diagnosis_events_total', 'Self-diagnosis events at this replica (initiated, accused, accusation, condemned).', 'kind', () => c.diagnosis, replica);
    fromMap('trine_suspicions_total', 'Self-diagnosis triggers raised by this daemon, by reason.', 'reason', () => c.suspicions, !watchdog);
    fromMap('trine_diagnosis_reports_total', "Replicas' self-diagnosis reports received by the watchdog, by reason.", 'reason', () => c.diagnosisReports, watchdog);
    fromMap('trine_resets_total', 'Resets the watchdog ordered: scope node (rule 1) or cluster (rules 2 and 3).', 'scope', () => c.resets, watchdog);
    if (replica) new Counter({ name: 'trine_condemnations_total', help: 'Replica condemnations executed in RSN order (PROTOCOL §10.3).', registers, collect(this: Counter) {
      this.reset();
      this.inc(c.condemnations);
    } });
    this.shellCounters(prom, registers);
    this.latency = new Histogram({
      name: 'trine_group_message_latency_seconds',
      help: "stage=request: an agent's or operator's request, from its first arrival at this replica to its execution in RSN order; " +
        'stage=command: a group command, from the first copy reaching this agent to its delivery on two matching copies.',
      // The watchdog times nothing: its histogram stays out of its registry.
      labelNames: ['stage'], buckets: LATENCY_BUCKETS_S, registers: watchdog ? [] : registers,
    });
    this.gauges(prom, registers, labels.daemon);
    if (agent) this.agentProcess(prom, registers);
  }

  /** The text a scrape gets: every gauge from one fresh sample. */
  exposition(): Promise<string> {
    this.sampled = null;
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Shell's own counters (frames, bytes, drops by code) are read at scrape time. */
  attachShell(counters: ShellCounters): void {
    this.shell = counters;
  }

  /** The core, observed: every input and the effects of every step. */
  observe<I extends CoreInput>(core: Core<I>): Core<I> {
    return {
      id: core.id,
      nextWakeMs: () => core.nextWakeMs(),
      step: (input) => {
        if (input.type === 'frame') this.onFrame(input.frame, input.nowMs);
        const effects = core.step(input);
        for (const e of effects) this.onEffect(e, input.nowMs);
        return effects;
      },
    };
  }

  private onFrame(frame: Frame, nowMs: number): void {
    for (const item of frame.items) {
      switch (item.type) {
        case 'hb':
          bump(this.counts.heartbeatsReceived, frame.from);
          break;
        case 'grp':
          if (item.body.type === 'cg') this.arrived(requestKey(item.body.signed.cg), nowMs);
          else this.arrived(item.body.gc.gssn, nowMs);
          break;
        case 'op.request':
          this.arrived(requestKey(item.signed.cg), nowMs);
          break;
        case 'ptp':
          if (item.body?.type === 'wrapper') this.arrived(requestKey(item.body.signed.cg), nowMs);
          break;
        case 'diag.report':
          bump(this.counts.diagnosisReports, item.reason);
          break;
        default:
          break;
      }
    }
  }

  private arrived(key: string | number, nowMs: number): void {
    // Full: forget what never completed (a scrape does too), so an unscraped daemon keeps timing.
    if (this.arrivals.size >= MAX_TIMED_MESSAGES) this.forget(nowMs);
    if (this.arrivals.size < MAX_TIMED_MESSAGES && !this.arrivals.has(key)) this.arrivals.set(key, nowMs);
  }

  private delivered(key: string | number, stage: 'request' | 'command', nowMs: number): void {
    const at = this.arrivals.get(key);
    if (at === undefined) return;
    this.arrivals.delete(key);
    this.latency.observe({ stage }, Math.max(0, nowMs - at) / 1000);
  }

  private onEffect(e: CoreEffect, nowMs: number): void {
    const c = this.counts;
    switch (e.type) {
      case 'send':
        if (e.item.type === 'hb') bump(c.heartbeatsSent, e.to);
        return;
      case 'deliver.request':
        bump(c.orderedRequests, e.request.type);
        return this.delivered(requestKey({ client: e.client, inc: e.inc, csn: e.csn, payload: e.request }), 'request', nowMs);
      case 'deliver.input':
        bump(c.orderedInputs, e.input.type);
        if (e.input.type === 'replica.condemn') c.condemnations++;
        return;
      case 'deliver.command':
        bump(c.commandsDelivered, e.command.type);
        return this.delivered(e.gssn, 'command', nowMs);
      case 'suspect':
        bump(c.suspicions, e.reason);
        return;
      case 'log': {
        const kind = DIAGNOSIS_EVENTS.get(e.event);
        if (kind !== undefined) bump(c.diagnosis, kind);
        return;
      }
      case 'reset.node':
        bump(c.resets, 'node');
        return;
      case 'reset.cluster':
        bump(c.resets, 'cluster');
        return;
      default:
        return;
    }
  }

  /** Drops the arrivals older than TIMED_MESSAGE_FORGET_MS: requests that never executed here. */
  private forget(nowMs: number): void {
    for (const [k, at] of this.arrivals) if (nowMs - at > TIMED_MESSAGE_FORGET_MS) this.arrivals.delete(k);
  }

  private sample(): MetricsSample {
    const now = this.nowMs();
    if (this.sampled === null || now - this.sampled.atMs > SAMPLE_REUSE_MS) {
      this.sampled = { atMs: now, sample: this.sampleFn() };
      this.forget(now);
    }
    return this.sampled.sample;
  }

  private shellCounters({ Counter }: PromClient, registers: Registry[]): void {
    const shell = () => this.shell;
    const total = (name: string, help: string, read: (s: ShellCounters) => number) =>
      new Counter({ name, help, registers, collect(this: Counter) {
        this.reset();
        const s = shell();
        if (s !== null) this.inc(read(s));
      } });
    total('trine_frames_received_total', 'Frames received from peers, before verification.', (s) => s.framesIn);
    total('trine_frames_sent_total', 'Frames sent to peers.', (s) => s.framesOut);
    total('trine_received_bytes_total', 'Bytes of frames received.', (s) => s.bytesIn);
    total('trine_sent_bytes_total', 'Bytes of frames sent.', (s) => s.bytesOut);
    new Counter({ name: 'trine_frames_dropped_total', help: 'Inbound frames that failed to decode or verify, by drop code.', labelNames: ['code'], registers, collect(this: Counter<'code'>) {
      this.reset();
      for (const [code, n] of Object.entries(shell()?.drops ?? {})) this.inc({ code }, n ?? 0);
    } });
  }

  private gauges({ Counter, Gauge }: PromClient, registers: Registry[], daemon: DaemonLabels['daemon']): void {
    const sample = () => this.sample();
    const scalar = (kinds: readonly DaemonLabels['daemon'][], name: string, help: string, read: (s: MetricsSample) => number | boolean | undefined): void => {
      if (!kinds.includes(daemon)) return;
      new Gauge({ name, help, registers, collect(this: Gauge) {
        this.reset();
        const v = read(sample());
        if (v !== undefined) this.set(Number(v));
      } });
    };
    // Counts by state: a replica's view of nodes, tasks and processes.
    const byLabel = (name: string, help: string, label: string, read: (s: MetricsSample) => Record<string, number> | undefined): void => {
      if (daemon !== 'replica') return;
      new Gauge({ name, help, labelNames: [label], registers, collect(this: Gauge<string>) {
        this.reset();
        for (const [k, v] of Object.entries(read(sample()) ?? {})) this.set({ [label]: k }, v);
      } });
    };
    scalar(['replica', 'agent'], 'trine_view', "The group's view as this daemon knows it (PROTOCOL §10).", (s) => s.view);
    scalar(['replica'], 'trine_rsn', 'The last RSN this replica executed.', (s) => s.rsn);
    scalar(['replica', 'agent'], 'trine_gssn', 'Replica: the last GSSN used; agent: the last GSSN delivered.', (s) => s.gssn);
    scalar(['replica'], 'trine_primary', '1 if this replica is the primary.', (s) => s.primary);
    scalar(['replica'], 'trine_members', 'Replicas in the group as this replica knows it.', (s) => s.members);
    scalar(['agent'], 'trine_node_processes', "Task processes alive on this agent's node.", (s) => s.nodeProcesses);
    scalar(['agent'], 'trine_pending_requests', "This agent's requests to the group not yet acknowledged.", (s) => s.pendingRequests);
    scalar(['watchdog'], 'trine_watchdog_armed', '1 while watchdog rule 2 is armed (two replicas heard consistently).', (s) => s.armed);
    byLabel('trine_tasks', "Tasks in this replica's view (live, then the most recent finished), by FsmTask state.", 'state', (s) => s.tasks);
    byLabel('trine_processes', "Task processes in this replica's view, by FsmProc state.", 'state', (s) => s.processes);
    byLabel('trine_nodes', 'Nodes by state (joining, up, failed, draining).', 'state', (s) => s.nodes);
    if (daemon === 'replica') new Gauge({ name: 'trine_replica_phase', help: '1 for the phase this replica is in (serving, installing, syncing, retired).', labelNames: ['phase'], registers, collect(this: Gauge<'phase'>) {
      this.reset();
      const phase = sample().phase;
      if (phase !== undefined) this.set({ phase }, 1);
    } });
    if (daemon !== 'watchdog') new Gauge({ name: 'trine_peer_connected', help: '1 if the link to the peer is established.', labelNames: ['peer'], registers, collect(this: Gauge<'peer'>) {
      this.reset();
      for (const p of sample().peers ?? []) if (p.connected !== null) this.set({ peer: p.id }, p.connected ? 1 : 0);
    } });
    if (daemon !== 'agent') new Gauge({ name: 'trine_peer_heartbeat_age_seconds', help: "Time since the peer's last heartbeat reached this daemon.", labelNames: ['peer'], registers, collect(this: Gauge<'peer'>) {
      this.reset();
      for (const p of sample().peers ?? []) if (p.heartbeatAgeMs !== null) this.set({ peer: p.id }, p.heartbeatAgeMs / 1000);
    } });
    // Totals kept by the core and the supervisor: counters, read at scrape time.
    new Counter({ name: 'trine_messages_refused_total', help: 'Messages the core refused (replays, non-members, out of place) or was told the Shell dropped: its status drops, by code.', labelNames: ['code'], registers, collect(this: Counter<'code'>) {
      this.reset();
      for (const [code, n] of Object.entries(sample().coreDrops ?? {})) this.inc({ code }, n);
    } });
    if (daemon === 'watchdog') new Counter({ name: 'trine_supervisor_restarts_total', help: 'Watchdog restarts by its supervisor.', registers, collect(this: Counter) {
      this.reset();
      this.inc(sample().supervisorRestarts ?? 0);
    } });
  }

  /** What an agent's process runs besides its core, neither with an endpoint of its own: the
   *  protector (PROTOCOL §11.4), whose series read 0 or are absent until it listens (or if it
   *  could not), and the keeper, whose restarts `go` told. All read from the sample. */
  private agentProcess({ Counter, Gauge }: PromClient, registers: Registry[]): void {
    const sample = () => this.sample();
    const protector = () => sample().protector;
    const total = (name: string, help: string, read: (p: ProtectorStats) => number): void => {
      new Counter({ name, help, registers, collect(this: Counter) {
        this.reset();
        const p = protector();
        if (p !== undefined) this.inc(read(p));
      } });
    };
    const totalBy = (name: string, help: string, label: string, read: (p: ProtectorStats) => Partial<Record<string, number>>): void => {
      new Counter({ name, help, labelNames: [label], registers, collect(this: Counter<string>) {
        this.reset();
        const p = protector();
        if (p !== undefined) for (const [k, v] of Object.entries(read(p))) this.inc({ [label]: k }, v ?? 0);
      } });
    };
    const gaugeBy = (name: string, help: string, label: string, read: (p: ProtectorStats) => Record<string, number>): void => {
      new Gauge({ name, help, labelNames: [label], registers, collect(this: Gauge<string>) {
        this.reset();
        const p = protector();
        if (p !== undefined) for (const [k, v] of Object.entries(read(p))) this.set({ [label]: k }, v);
      } });
    };
    total('trine_protector_connections_accepted_total', 'Connections the protector admitted (sent a challenge).', (p) => p.counts.accepted);
    totalBy('trine_protector_connections_closed_total', 'Connections the protector closed, by code (TOO_MANY_CONNECTIONS: refused at accept; BAD_MAC, AUTH_TIMEOUT, REPLACED, …).', 'code', (p) => p.closed);
    gaugeBy('trine_protector_connections', "The protector's connections now: authenticated (one per rank) or stranger (its hello not verified yet).", 'state',
      (p) => ({ authenticated: p.authenticated, stranger: p.strangers }));
    total('trine_protector_checkpoints_stored_total', 'New checkpoints the protector stored.', (p) => p.counts.checkpointsStored);
    total('trine_protector_log_entries_appended_total', 'New log entries the protector appended for their ranks.', (p) => p.counts.entriesAppended);
    total('trine_protector_deposits_total', "Messages deposited into a rank's log (channel memory, PROTOCOL §11.6), duplicates not counted.", (p) => p.store.deposits.stored);
    total('trine_protector_fetches_served_total', 'Fetches the protector answered whole (a replacement restoring its rank).', (p) => p.counts.fetchesServed);
    totalBy('trine_protector_store_refusals_total', "What the protector's store refused, by code: requests (LOG_FULL, STORE_FULL, GAP, …), hellos (UNKNOWN_TASK, FENCED), guards (TOO_MANY_TASKS).", 'code', (p) => p.store.refused);
    gaugeBy('trine_protector_stored_bytes', 'Bytes the protector holds now: kind=checkpoint, or kind=log (entries with their overhead).', 'kind',
      (p) => ({ checkpoint: p.store.checkpointBytes, log: p.store.logBytes }));
    new Gauge({ name: 'trine_protector_guarded_tasks', help: 'Rollback tasks the group has this protector guard now.', registers, collect(this: Gauge) {
      this.reset();
      const p = protector();
      if (p !== undefined) this.set(p.store.tasks);
    } });
    new Counter({ name: 'trine_keeper_restarts_total', help: "Agents this agent's keeper replaced, by reason: exit (it exited or was killed) or hang (its heartbeats stopped).", labelNames: ['reason'], registers, collect(this: Counter<'reason'>) {
      this.reset();
      const r = sample().keeperRestarts;
      if (r === undefined) return;
      this.inc({ reason: 'exit' }, r.exit);
      this.inc({ reason: 'hang' }, r.hang);
    } });
  }
}
