// What a replica reports to an operator's status query (docs/PROTOCOL.md §7). The JSON form of
// `trine status --json` is built from these (docs/OPERATIONS.md documents it field by field).
import type { ProcessId } from './ports.ts';
import type { MovedPort, Role } from './wire/messages.ts';

export type PeerHealth = 'healthy' | 'late' | 'silent' | 'unknown';

export type ReplicaStatus = {
  id: ProcessId;
  role: Role;
  /** The replica's incarnation (start time in ms); changes when it restarts. */
  inc: number;
  /** Replicated state: last RSN processed, last GSSN used, primary, and SHA-256 digest (hex). */
  rsn: number;
  gssn: number;
  primary: ProcessId;
  digest: string;
  /** Other replicas as this one sees them. */
  replicas: { id: ProcessId; connected: boolean; lastHeartbeatAgeMs: number | null; health: PeerHealth }[];
  /** Agents as this one sees them. Only backups receive agent heartbeats (spec §1.3). */
  agents: {
    id: ProcessId;
    node: string;
    connected: boolean;
    joined: boolean;
    lastHeartbeatAgeMs: number | null;
    health: PeerHealth;
  }[];
  /** Self-diagnosis triggers raised so far. */
  suspicions: number;
  /** The group's view, members and self-diagnosis history as this replica saw it (PROTOCOL §10). */
  view: number;
  members: ProcessId[];
  /** Node of every member and of a replacement under way; retired ids; the replacement (its
   *  node null while no node is eligible). Replicated state (PROTOCOL §10.1). */
  memberNodes: Record<ProcessId, string>;
  retired: ProcessId[];
  replacement: { id: ProcessId; node: string | null; tried: string[] } | null;
  /** Members listening on another port than cluster.json's, theirs being taken (PROTOCOL §10.6). */
  ports: MovedPort[];
  /** Members that are spares of nodes added at run time, whose keys cluster.json lacks
   *  (PROTOCOL §10.12): a new agent learns them here. `publicKey` in hex. */
  added: { id: ProcessId; node: string; address: string; port: number; publicKey: string }[];
  /** `installing`: a replacement still waiting for the state; `retired`: condemned or abandoned. */
  phase: 'serving' | 'installing' | 'syncing' | 'retired';
  diagnosis: { atMs: number; view: number; kind: string; target: string; by: string; reason: string; detail: string }[];
  /** Inbound frames dropped, by reason. */
  drops: Record<string, number>;
  /** Nodes, tasks and processes (PROTOCOL §8). */
  cluster: ClusterView;
  /** What its daemon could not write to disk; absent from the simulator and older releases. */
  daemon?: DaemonReport;
};

/** What the daemon running a core says of itself (issue 14 item 4; docs/OPERATIONS.md §3.4): what
 *  it could not write to its disk and, for the watchdog, its restarts by its supervisor. Read
 *  from the daemon (src/daemon/run-core.ts) when a status is built: nothing a core decides
 *  depends on it. Bounded: a few error codes and records. */
export type DaemonReport = {
  /** Log lines lost because the log file (or stdout, stderr) could not be written, by error
   *  code (ENOSPC, EIO, EPERM, EBADF, …), since the daemon started. */
  logDrops: Record<string, number>;
  /** Durable records a write of which failed since the daemon started, by name: `tasks` (a
   *  replica's task journal, PROTOCOL §10.9), `inc` (its incarnation record). */
  records: Record<string, RecordWrites>;
  /** The watchdog under its supervisor; null for a daemon without one. */
  supervisor: { restarts: number; lastExit: string | null } | null;
};

export type RecordWrites = {
  /** Failed writes, by error code. */
  failures: Record<string, number>;
  /** The latest version is not on disk: it is being retried. */
  pending: boolean;
  /** The last failure's error message, or null. */
  lastError: string | null;
  /** Versions never written because a newer one replaced them before a retry succeeded. */
  superseded: number;
};

/** The manager's view of nodes, tasks and processes (replicated state), with this replica's
 *  journal of what it applied and when (not replicated): `trine ps` and `trine nodes` read it
 *  (docs/PROTOCOL.md §8, docs/OPERATIONS.md). */
export type ClusterView = {
  /** Ordered task-clock ticks applied (PROTOCOL §8.3). */
  tick: number;
  nodes: NodeView[];
  /** Live tasks, then the most recent finished ones, by task number. */
  tasks: TaskView[];
  /** Older finished tasks left out so the view fits a status reply (MAX_VIEW_TASK_CHARS). */
  omittedTasks: number;
  /** Recent events, oldest first, stamped with this replica's wall clock when it applied them. */
  events: ClusterEvent[];
};

export type NodeView = {
  agent: ProcessId;
  node: string;
  slots: number;
  /** Slots held by processes that are allocated, spawning, running or terminating. */
  used: number;
  /** `joining`: its agent has not joined yet; `failed`: declared failed (PROTOCOL §8.4) and not
   *  rejoined by a new agent incarnation since. */
  state: 'joining' | 'up' | 'failed' | 'draining';
  /** The agent incarnation the group knows (0 before the first join). */
  inc: number;
};

export type TaskView = {
  id: string;
  name: string;
  size: number;
  /** FsmTask state (fsm/fsm-task.ts FsmTaskState). */
  state: string;
  /** Executable and arguments as submitted. */
  command: string[];
  cwd: string;
  submittedRsn: number;
  /** Start attempts made so far (FsmTask Start-ctr). */
  startAttempts: number;
  restarted: boolean;
  /** Why the task is not running yet, e.g. "needs 8 slots, 3 free on 2 healthy nodes". */
  waitReason: string | null;
  /** Set once the task has finished. */
  outcome: 'normal' | 'abnormal' | null;
  reason: string | null;
  /** The last start attempt's failure, e.g. "spawn failed: ENOENT /no/such/file". */
  failure: string | null;
  /** `linked` tasks use the application library and its signals (PROTOCOL §9). */
  mode: 'plain' | 'linked';
  /** The task's signal epoch and quorum (spec §4.5–4.6), and signal counters. */
  epoch: number;
  quorum: number;
  signals: { broadcasts: number; pointToPoint: number; groupRequests: number; dropped: number };
  procs: ProcView[];
};

export type ProcView = {
  vpid: number;
  node: string | null;
  pid: number | null;
  /** FsmProc state (fsm/fsm-proc.ts FsmProcState). */
  state: string;
  exitCode: number | null;
  signal: string | null;
  reason: string | null;
  /** A linked process's G-MPI endpoint ("host:port"), once it connected. */
  endpoint: string | null;
  /** A rollback task's process: the rank it holds (a dead holder keeps it until its replacement
   *  runs), or is being spawned to take over (PROTOCOL §11.2); null otherwise (an app task, a
   *  holder already replaced). */
  rank: number | null;
  /** A task with a straggler policy: the process's latest progress report in permille (null
   *  before its first), and whether the manager flags it a straggler now (PROTOCOL §13). */
  progress: number | null;
  straggler: boolean;
  /** A DGRP task's live process: whether it is in the group of recommended processes now
   *  (PROTOCOL §12.3); null in other tasks and for a process that is not running. */
  recommended: boolean | null;
};

export type ClusterEvent = {
  atMs: number; rsn: number; task: string | null; vpid: number | null; text: string;
  /** What kind of fact it is, for a timeline of faults and recoveries (cli/timeline.ts) that
   *  need not parse `text`; absent from events that are only told, and from older releases. */
  kind?: EventKind;
  /** The replica id or node name a group or node event is about (tasks use `task`, `vpid`). */
  subject?: string;
};

/** The journal events a timeline pairs (docs/OPERATIONS.md, `trine events`): a process running,
 *  dying (ended abnormally: a fault) or ending normally; a task finishing; a node joining or
 *  lost; a replica condemned, a replacement commanded, joined or abandoned. */
export const EVENT_KINDS = [
  'proc.running', 'proc.died', 'proc.exited', 'task.finished', 'node.joined', 'node.lost',
  'replica.condemned', 'replica.starting', 'replica.joined', 'replica.abandoned',
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];
/** A journal event's kind and subject, as the code that creates it tags it. */
export type EventTag = { kind: EventKind; subject?: string };
