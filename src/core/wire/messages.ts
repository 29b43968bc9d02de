// Every message of the CMM wire (docs/PROTOCOL.md §2–§6; spec §3.2 Fig. 4.24) as
// discriminated unions, with their canonical schemas. A frame carries one or more items,
// all from one sender to one receiver, under one signature.
import {
  MAX_ARG_CHARS, MAX_ARGS, MAX_BURST_COUNT, MAX_CG_BYTES, MAX_CLUSTER_ID_CHARS, MAX_ENV_ENTRIES, MAX_ID_CHARS,
  MAX_ITEMS_PER_FRAME, MAX_LIST_ENTRIES, MAX_PATH_CHARS, MAX_PAYLOAD_BYTES, MAX_STATUS_CHARS, MAX_SUSPECTS,
  MAX_REPORTS_PER_REQUEST, MAX_TASK_PROCS, MAX_TEXT_CHARS, SIGNATURE_BYTES, MAX_REPLICAS, MAX_ACCUSATION_BYTES,
  MAX_EVIDENCE_FRAME_BYTES, MAX_MEMBER_CG_BYTES, MAX_STATE_CHUNK_BYTES, MAX_SUBMIT_CG_BYTES, LOGS_CHUNK_BYTES, MAX_JOURNAL_ITEM_BYTES,
  TASK_KEY_BYTES, PUBLIC_KEY_BYTES, BIND_NONCE_BYTES, MAX_ADDED_NODE_SPARES,
} from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { err, ok } from '../../base/result.ts';
import { MAX_SIGNAL_ARG, MIN_SIGNAL_ARG } from '../signals.ts';
import { decodeStrict } from './msgpack-strict.ts';
import { bool, bytes, list, nullable, oneOf, struct, text, token, uint, union, type Schema } from './schema.ts';

export const processId = token(MAX_ID_CHARS, /^[a-z][a-z0-9-]*$/);
/** A TCP port a replica listens on; 0: the one cluster.json gives it. */
const listenPort: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) && t >= 0 && t <= 65_535 ? ok(t) : err('WIRE_MALFORMED', `${p}: expected a port`)),
};
/** What a replacement signs of where it listens (PROTOCOL §10.6): its id, the view it joins,
 *  and its port (0: cluster.json's). */
export const portClaim = (id: ProcessId, view: number, port: number): unknown[] => ['replica.port', id, view, port];
/** What a backup signs with each order confirmation (PROTOCOL §5.8): in view `view`, the
 *  primary's order at `rsn` has digest `digest`. Evidence of a lie (§10.2 `order.lie`). */
export const orderClaim = (id: ProcessId, view: number, rsn: number, digest: Uint8Array): unknown[] => ['order.claim', id, view, rsn, digest];

/** A replica listening on another port than cluster.json's (PROTOCOL §10.6). */
export type MovedPort = { id: ProcessId; port: number };
const movedPort: Schema<MovedPort> = struct<MovedPort>(['id', 'port'], { id: processId, port: listenPort });
/** A TCP port something listens on: 1 to 65535. */
const tcpPort: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) && t >= 1 && t <= 65_535 ? ok(t) : err('WIRE_MALFORMED', `${p}: expected a port`)),
};
const clusterId = token(MAX_CLUSTER_ID_CHARS, /^[a-z0-9-]+$/);
const reason = text(MAX_TEXT_CHARS);

// ---- Tasks and processes (PROTOCOL §8) ---------------------------------------------------------

/** Task ids are assigned by the group in order: t1, t2, … (PROTOCOL §8.2). */
export const taskId = token(MAX_ID_CHARS, /^t[1-9][0-9]*$/);
/** An operator request's nonce: 32 hex digits the operator draws at random (PROTOCOL §8.1). */
export const nonce = token(32, /^[0-9a-f]{32}$/);
const nodeName = token(MAX_ID_CHARS, /^[a-z0-9][a-z0-9-]*$/);
/** A host's network address as the hosts file gives it: an IPv4 or IPv6 address or a DNS name. */
export const hostAddress = token(64, /^[A-Za-z0-9][A-Za-z0-9.:-]*$/);
const arg = text(MAX_ARG_CHARS);
const path = text(MAX_PATH_CHARS);
/** Environment entries, sorted by name and unique (canonical; checked by the group on submit). */
export type EnvEntry = [string, string];
const envEntry: Schema<EnvEntry> = {
  enc: (v) => [v[0], v[1]],
  dec: (t, p) => {
    if (!Array.isArray(t) || t.length !== 2) return err('WIRE_MALFORMED', `${p}: expected [name, value]`);
    const k = token(MAX_ARG_CHARS, /^[A-Za-z_][A-Za-z0-9_]*$/).dec(t[0], `${p}[0]`);
    if (!k.ok) return k;
    const v = arg.dec(t[1], `${p}[1]`);
    if (!v.ok) return v;
    return ok([k.value, v.value]);
  },
};
const env = list(envEntry, MAX_ENV_ENTRIES);
/** A task's G-MPI key (PROTOCOL §9.5): exactly TASK_KEY_BYTES. */
const taskKey = bytes(TASK_KEY_BYTES, TASK_KEY_BYTES);
export type Endpoint = { vpid: number; node: string };
const endpoint: Schema<Endpoint> = struct<Endpoint>(['vpid', 'node'], { vpid: uint, node: nodeName });
/** "host:port" of a linked process's G-MPI listener, as it told its agent; empty for none. */
export const MAX_ENDPOINT_CHARS = 64;
export const endpointText = text(MAX_ENDPOINT_CHARS);
/** A member of a task in the mapping message (spec §7 item 2): VPID, node and endpoint. */
export type Member = { vpid: number; node: string; endpoint: string };
export const member: Schema<Member> = struct<Member>(['vpid', 'node', 'endpoint'], { vpid: uint, node: nodeName, endpoint: endpointText });

/** A signal address or number on the wire: u32 (signals.ts GSIG_CM, GSIG_BROADCAST). */
export const u32: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) =>
    typeof t === 'number' && Number.isInteger(t) && t >= 0 && t <= 0xffffffff ? ok(t) : err('WIRE_MALFORMED', `${p}: expected u32`),
};
/** A signal argument: a C int in the source (spec §4.1), signed 32-bit. */
export const int32: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) =>
    typeof t === 'number' && Number.isInteger(t) && t >= MIN_SIGNAL_ARG && t <= MAX_SIGNAL_ARG ? ok(t) : err('WIRE_MALFORMED', `${p}: expected int32`),
};

/** How a process talks to its agent: `plain` executables never connect, so the agent takes a
 *  successful exec as the connect and exit code 0 as the clean disconnect (PROTOCOL §8.5);
 *  `linked` processes use the application library (issue 4). */
export type ProcMode = 'plain' | 'linked';

/** What FsmAgentProc reports to FsmProc (spec §6.2 inputs), as an agent request. `pid` is 0,
 *  `exitCode` and `signal` null when they do not apply. */
export type ProcReportKind = 'spawnSucceeded' | 'spawnFailed' | 'terminatedNormally' | 'terminatedAbnormally';
export type ProcReport = {
  task: string;
  vpid: number;
  kind: ProcReportKind;
  pid: number;
  exitCode: number | null;
  signal: string | null;
  reason: string;
  /** spawnSucceeded of a linked process: its G-MPI endpoint ("host:port"); else empty. */
  endpoint: string;
};
export const procReport: Schema<ProcReport> = struct<ProcReport>(['task', 'vpid', 'kind', 'pid', 'exitCode', 'signal', 'reason', 'endpoint'], {
  task: taskId,
  vpid: uint,
  kind: oneOf(['spawnSucceeded', 'spawnFailed', 'terminatedNormally', 'terminatedAbnormally'] as const),
  pid: uint,
  exitCode: nullable(uint),
  signal: nullable(token(16, /^SIG[A-Z0-9]+$/)),
  reason: text(MAX_TEXT_CHARS),
  endpoint: endpointText,
});

// ---- Client → group requests (payload of GROUP-MSG-CG, PROTOCOL §5, §8) ------------------------
// Agents send the first four; operators the `task.*` ones (PROTOCOL §8.1). A replica refuses a
// request from the wrong kind of client (NOT_A_MEMBER).

export type Fanout = 'self' | 'all';
export type ErrorReportKind = 'replica-timeout' | 'mismatch';

export type TaskSubmit = {
  type: 'task.submit';
  nonce: string;
  /** A label for people; not unique. */
  name: string;
  size: number;
  file: string;
  args: string[];
  cwd: string;
  env: EnvEntry[];
  /** `linked`: the processes use the application library (PROTOCOL §9). */
  mode: ProcMode;
  /** The task's G-MPI key (TASK_KEY_BYTES), drawn at random by the operator: its processes, and
   *  only they, get it (PROTOCOL §9.5). Never shown in a view, a log line or an event. */
  taskKey: Uint8Array;
};
export type TaskKill = { type: 'task.kill'; nonce: string; task: string };
/** Terminate every process of a running task and start it again with the mapping's restarted
 *  flag set (FsmTask T9). */
export type TaskRestart = { type: 'task.restart'; nonce: string; task: string };
/** The watchdog's, after a cluster reset (PROTOCOL §10.9): start again a task a replica had
 *  journalled as accepted and not finished. `submit`/`submitSig`: the operator's own signed
 *  `task.submit` CG, so the watchdog can restore only what an operator really submitted; the
 *  nonce is that submit's, so one task is restored once per group. `task`: its id before. */
export type TaskRestore = { type: 'task.restore'; nonce: string; task: string; submit: Uint8Array; submitSig: Uint8Array };
/** Stop the whole cluster (PROTOCOL §10.11): every task is killed, every agent told to stop
 *  its node, the watchdog told to stand down, and the replicas exit. Nothing restarts them. */
export type ClusterShutdown = { type: 'cluster.shutdown'; nonce: string };
/** Add a node at run time (PROTOCOL §10.12): its agent `agent` on node `node`, whose host has the
 *  network address `address` and whose agent listens on `port` (for the operator's log reads);
 *  `publicKey` is the agent's Ed25519 key, drawn by `trine node add`. The group verifies the
 *  agent's frames with it from then on; the agent joins when it starts. */
export type NodeAdd = {
  type: 'node.add'; nonce: string; agent: ProcessId; node: string; address: string; port: number; publicKey: Uint8Array; spares: AddedSpare[];
};
/** A spare replica id of a node added at run time (PROTOCOL §10.12): its key, drawn by `trine
 *  node add` and held by that node's bundle alone, and the port it listens on at the node's
 *  address. The group may start it there when it replaces a replica (§10.6). */
export type AddedSpare = { id: ProcessId; port: number; publicKey: Uint8Array };
const addedSpare: Schema<AddedSpare> = struct<AddedSpare>(['id', 'port', 'publicKey'], {
  id: processId, port: tcpPort, publicKey: bytes(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES),
});
/** A replica whose key cluster.json does not hold: a spare of a node added at run time, as the
 *  group tells the agents and the watchdog once it is a member (PROTOCOL §10.12). Each believes
 *  it from two replicas that agree, as it believes any command. */
export type AddedReplica = { id: ProcessId; node: string; address: string; port: number; publicKey: Uint8Array };
export const addedReplica: Schema<AddedReplica> = struct<AddedReplica>(['id', 'node', 'address', 'port', 'publicKey'], {
  id: processId, node: nodeName, address: hostAddress, port: tcpPort, publicKey: bytes(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES),
});
/** Drain node `node` and remove it (PROTOCOL §10.12): nothing new is placed on it; once no live
 *  task has a process there (with `kill`, the tasks that have are killed) its agent is told to
 *  stop and the node leaves the cluster. */
export type NodeRemove = { type: 'node.remove'; nonce: string; node: string; kill: boolean };
/** The watchdog's, after a cluster reset (PROTOCOL §10.9, §10.12): apply again a membership
 *  change the group had made. `op`/`opSig`: the operator's own signed `node.add` or `node.remove`
 *  CG, as a replica journalled it; the nonce is that request's. */
export type NodeRestore = { type: 'node.restore'; nonce: string; op: Uint8Array; opSig: Uint8Array };
export type OperatorRequest = TaskSubmit | TaskKill | TaskRestart | TaskRestore | ClusterShutdown | NodeAdd | NodeRemove | NodeRestore;

export type AgentRequest =
  /** The agent announces its node to the group (first message after start). `resync`: it found
   *  processes on record from a predecessor incarnation and needs `procs.adopt` (PROTOCOL §8.6). */
  | { type: 'node.join'; slots: number; resync: boolean }
  /** Ask the group to answer with one group message per target (diagnostics, sim, bench). */
  | { type: 'echo'; tag: string; fanout: Fanout; count: number; data: Uint8Array }
  /** Spec §3.5 G5 / §3.7: copies of `count` GSSNs from `gssn` on timed out or did not all
   *  match (aggregated: at most one report per kind per ReplicaTimeout, PROTOCOL §5.3). */
  | { type: 'error.report'; gssn: number; count: number; kind: ErrorReportKind; suspects: ProcessId[] }
  /** FsmAgentProc → FsmProc (spec §6.2, §6.3): the reports of one moment, in the order they
   *  happened (one request, one signature and one RSN for a burst of spawns or exits). */
  | { type: 'proc.report'; reports: ProcReport[] }
  /** A Ghidrah signal from linked process `vpid` of `task` on this agent's node (spec §4,
   *  PROTOCOL §9): point-to-point, a broadcast request or a group request. */
  | { type: 'sig.request'; task: string; vpid: number; signum: number; dest: number; arg: number; epoch: number }
  | OperatorRequest;

export const agentRequest: Schema<AgentRequest> = union<AgentRequest>({
  'node.join': { code: 1, order: ['slots', 'resync'], fields: { slots: uint, resync: bool } },
  echo: {
    code: 2,
    order: ['tag', 'fanout', 'count', 'data'],
    fields: { tag: reason, fanout: oneOf(['self', 'all'] as const), count: uint, data: bytes(MAX_PAYLOAD_BYTES) },
  },
  'error.report': {
    code: 3,
    order: ['gssn', 'count', 'kind', 'suspects'],
    fields: { gssn: uint, count: uint, kind: oneOf(['replica-timeout', 'mismatch'] as const), suspects: list(processId, MAX_SUSPECTS) },
  },
  'proc.report': { code: 4, order: ['reports'], fields: { reports: list(procReport, MAX_REPORTS_PER_REQUEST) } },
  'task.submit': {
    code: 5,
    order: ['nonce', 'name', 'size', 'file', 'args', 'cwd', 'env', 'mode', 'taskKey'],
    fields: {
      nonce, name: text(MAX_ID_CHARS * 2), size: uint, file: path, args: list(arg, MAX_ARGS), cwd: path, env,
      mode: oneOf(['plain', 'linked'] as const), taskKey,
    },
  },
  'task.kill': { code: 6, order: ['nonce', 'task'], fields: { nonce, task: taskId } },
  'task.restart': { code: 7, order: ['nonce', 'task'], fields: { nonce, task: taskId } },
  'task.restore': {
    code: 9,
    order: ['nonce', 'task', 'submit', 'submitSig'],
    fields: { nonce, task: taskId, submit: bytes(MAX_SUBMIT_CG_BYTES), submitSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) },
  },
  'cluster.shutdown': { code: 10, order: ['nonce'], fields: { nonce } },
  'node.add': {
    code: 11,
    order: ['nonce', 'agent', 'node', 'address', 'port', 'publicKey', 'spares'],
    fields: {
      nonce, agent: processId, node: nodeName, address: hostAddress, port: tcpPort, publicKey: bytes(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES),
      spares: list(addedSpare, MAX_ADDED_NODE_SPARES),
    },
  },
  'node.remove': { code: 12, order: ['nonce', 'node', 'kill'], fields: { nonce, node: nodeName, kill: bool } },
  'node.restore': {
    code: 13,
    order: ['nonce', 'op', 'opSig'],
    fields: { nonce, op: bytes(MAX_MEMBER_CG_BYTES), opSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) },
  },
  'sig.request': {
    code: 8,
    order: ['task', 'vpid', 'signum', 'dest', 'arg', 'epoch'],
    fields: { task: taskId, vpid: uint, signum: u32, dest: u32, arg: int32, epoch: uint },
  },
});

// ---- Group → agent commands (payload of GROUP-MSG-GC) ---------------------------------------

/** FsmProc's Spawn command (spec §6.2) with what the mapping message needs (spec §7). */
export type ProcSpawn = {
  type: 'proc.spawn';
  task: string;
  vpid: number;
  mode: ProcMode;
  file: string;
  args: string[];
  cwd: string;
  env: EnvEntry[];
  /** Processes in the task, the restarted flag and every process's node (spec §7 item 2). */
  size: number;
  restarted: boolean;
  endpoints: Endpoint[];
  /** The task's key (TaskSubmit.taskKey): the agent hands it to a linked process over its
   *  socket (PROTOCOL §9.5), never in its environment. */
  taskKey: Uint8Array;
};
/** `linked`: the process uses the application library; it cannot reconnect to a new agent
 *  incarnation (its token died with the old one), so the new agent kills it (PROTOCOL §9.4). */
export type AdoptEntry = { task: string; vpid: number; pid: number; linked: boolean };

export type GroupCommand =
  /** The answer to an `echo`: `index` counts the copies asked for (0 ≤ index < count). */
  | { type: 'echo.reply'; origin: ProcessId; tag: string; rsn: number; index: number; data: Uint8Array }
  | ProcSpawn
  /** FsmProc's Terminate command (spec §6.2): SIGTERM first, SIGKILL when repeated. */
  | { type: 'proc.terminate'; task: string; vpid: number }
  /** To a newly joined agent incarnation: the processes the group believes run on its node
   *  (PROTOCOL §8.6). The agent adopts those still alive, reports the others dead, and kills
   *  any process it finds that is not listed. */
  | { type: 'procs.adopt'; procs: AdoptEntry[] }
  /** Deliver a Ghidrah signal to the listed processes of `task` on this node, in GSSN order
   *  (PROTOCOL §9). `node` and `data` are the new member's node and endpoint for
   *  GSIG_REP_SPAWNED (spec §4.3), else empty. */
  | ProcSignal
  /** The mapping message (spec §7 item 2) for the listed processes of `task` on this node. */
  | ProcMapping
  /** The manager group changed (PROTOCOL §10.7): from now on the agent votes on copies from
   *  `replicas` and sends its requests to `primary`. `ports`: members that listen on another
   *  port than cluster.json's, theirs being taken (§10.6). */
  | { type: 'replicas'; view: number; primary: ProcessId; replicas: ProcessId[]; ports: MovedPort[]; added: AddedReplica[] }
  /** Start manager replica `id` on this node; it joins the group of `view` (PROTOCOL §10.6).
   *  `added`, in both: the members whose keys cluster.json lacks, spares of nodes added at run
   *  time (§10.12), so the agent, and the replica it starts, can verify them. */
  | { type: 'replica.spawn'; id: ProcessId; view: number; primary: ProcessId; replicas: ProcessId[]; added: AddedReplica[] }
  /** Stop manager replica `id` on this node: it was condemned or its start was abandoned. */
  | { type: 'replica.kill'; id: ProcessId }
  /** Stop this node for good, as ordered at `rsn`: the operator shut the cluster down
   *  (PROTOCOL §10.11), or, with `removed`, removed this node (§10.12). Kill every task process on
   *  it, then exit so that nothing restarts the agent. */
  | { type: 'node.shutdown'; rsn: number; removed: boolean };

export type ProcSignal = {
  type: 'proc.signal'; task: string; vpids: number[]; signum: number; src: number; dest: number; arg: number; epoch: number;
  node: string; data: string;
};
export type ProcMapping = {
  type: 'proc.mapping'; task: string; vpids: number[]; restarted: boolean; recovered: boolean; epoch: number; quorum: number;
  members: Member[];
};

export const groupCommand: Schema<GroupCommand> = union<GroupCommand>({
  'echo.reply': {
    code: 1,
    order: ['origin', 'tag', 'rsn', 'index', 'data'],
    fields: { origin: processId, tag: reason, rsn: uint, index: uint, data: bytes(MAX_PAYLOAD_BYTES) },
  },
  'proc.spawn': {
    code: 2,
    order: ['task', 'vpid', 'mode', 'file', 'args', 'cwd', 'env', 'size', 'restarted', 'endpoints', 'taskKey'],
    fields: {
      task: taskId, vpid: uint, mode: oneOf(['plain', 'linked'] as const), file: path, args: list(arg, MAX_ARGS), cwd: path, env,
      size: uint, restarted: bool, endpoints: list(endpoint, MAX_TASK_PROCS), taskKey,
    },
  },
  'proc.terminate': { code: 3, order: ['task', 'vpid'], fields: { task: taskId, vpid: uint } },
  'procs.adopt': {
    code: 4,
    order: ['procs'],
    fields: { procs: list(struct<AdoptEntry>(['task', 'vpid', 'pid', 'linked'], { task: taskId, vpid: uint, pid: uint, linked: bool }), MAX_LIST_ENTRIES) },
  },
  'proc.signal': {
    code: 5,
    order: ['task', 'vpids', 'signum', 'src', 'dest', 'arg', 'epoch', 'node', 'data'],
    fields: {
      task: taskId, vpids: list(uint, MAX_TASK_PROCS), signum: u32, src: u32, dest: u32, arg: int32, epoch: uint,
      node: text(MAX_ID_CHARS), data: endpointText,
    },
  },
  'proc.mapping': {
    code: 6,
    order: ['task', 'vpids', 'restarted', 'recovered', 'epoch', 'quorum', 'members'],
    fields: {
      task: taskId, vpids: list(uint, MAX_TASK_PROCS), restarted: bool, recovered: bool, epoch: uint, quorum: uint,
      members: list(member, MAX_TASK_PROCS),
    },
  },
  replicas: {
    code: 7,
    order: ['view', 'primary', 'replicas', 'ports', 'added'],
    fields: {
      view: uint, primary: processId, replicas: list(processId, MAX_REPLICAS), ports: list(movedPort, MAX_REPLICAS), added: list(addedReplica, MAX_REPLICAS),
    },
  },
  'replica.spawn': {
    code: 8,
    order: ['id', 'view', 'primary', 'replicas', 'added'],
    fields: { id: processId, view: uint, primary: processId, replicas: list(processId, MAX_REPLICAS), added: list(addedReplica, MAX_REPLICAS) },
  },
  'replica.kill': { code: 9, order: ['id'], fields: { id: processId } },
  'node.shutdown': { code: 10, order: ['rsn', 'removed'], fields: { rsn: uint, removed: bool } },
});

// ---- Group messages (spec §3.2) --------------------------------------------------------------

/** GROUP-MSG-CG: agent `client` → group. `gssnAck` is the agent's complete-delivery mark;
 *  `inc` the agent's incarnation, so a restarted agent's CSNs start afresh (PROTOCOL §5.7).
 *  Carried signed by the agent itself, so a replica can relay it without being able to forge it. */
export type GroupMsgCG = { csn: number; gssnAck: number; payload: AgentRequest; client: ProcessId; inc: number };
export const groupMsgCG: Schema<GroupMsgCG> = struct<GroupMsgCG>(['csn', 'gssnAck', 'payload', 'client', 'inc'], {
  csn: uint, gssnAck: uint, payload: agentRequest, client: processId, inc: uint,
});

/** A CG as the agent signed it: the canonical bytes, the signature, and the decoded value. */
export type SignedCG = { bytes: Uint8Array; sig: Uint8Array; cg: GroupMsgCG };

/** GROUP-MSG-GC: group → agent `dest`. `prevGssn` is the GSSN of the previous group message to
 *  the same agent (0 for none): with a global GSSN it is what lets the agent detect a missing
 *  message and deliver in order (PROTOCOL §5.2, a clarification of spec §3.5 G3). `csnAck`
 *  acknowledges the CSNs of incarnation `destInc` of the agent only (PROTOCOL §5.7). */
export type GroupMsgGC = { gssn: number; prevGssn: number; csnAck: number; destInc: number; payload: GroupCommand; dest: ProcessId };
export const groupMsgGC: Schema<GroupMsgGC> = struct<GroupMsgGC>(['gssn', 'prevGssn', 'csnAck', 'destInc', 'payload', 'dest'], {
  gssn: uint, prevGssn: uint, csnAck: uint, destInc: uint, payload: groupCommand, dest: processId,
});

// ---- Self-diagnosis (PROTOCOL §10) ----------------------------------------------------------------

/** Why a replica accuses another (PROTOCOL §10.2). Each is a judgement a correct replica makes
 *  only about a faulty one, under the timing bounds of the fault model. */
export type AccuseReason =
  | 'silent' | 'rsn.gap' | 'primary.progress' | 'equivocation' | 'digest' | 'agent.reports' | 'clock.rate' | 'order.lie';
export const ACCUSE_REASONS = ['silent', 'rsn.gap', 'primary.progress', 'equivocation', 'digest', 'agent.reports', 'clock.rate', 'order.lie'] as const;
/** Replica `from` says, in view `view`, that `target` is faulty. Signed by `from` on its own
 *  (like a CG), so that two of them are evidence any replica can check (PROTOCOL §10.3). */
export type Accusation = { from: ProcessId; view: number; target: ProcessId; reason: AccuseReason };
export const accusation: Schema<Accusation> = struct<Accusation>(['from', 'view', 'target', 'reason'], {
  from: processId, view: uint, target: processId, reason: oneOf(ACCUSE_REASONS),
});
/** An accusation as its replica signed it. Decoded without checking the signature; the frame
 *  decoder checks it (src/core/wire/frame.ts). */
export type SignedAccusation = { bytes: Uint8Array; sig: Uint8Array; accusation: Accusation };
export const signedAccusation: Schema<SignedAccusation> = {
  enc: (v) => [v.bytes, v.sig],
  dec: (t, p) => {
    if (!Array.isArray(t) || t.length !== 2) return err('WIRE_MALFORMED', `${p}: expected [bytes, sig]`);
    const b = bytes(MAX_ACCUSATION_BYTES).dec(t[0], `${p}[0]`);
    if (!b.ok) return b;
    const sig = bytes(SIGNATURE_BYTES, SIGNATURE_BYTES).dec(t[1], `${p}[1]`);
    if (!sig.ok) return sig;
    const tree = decodeStrict(b.value);
    if (!tree.ok) return tree;
    const a = accusation.dec(tree.value, `${p}.accusation`);
    if (!a.ok) return a;
    return ok({ bytes: b.value, sig: sig.value, accusation: a.value });
  },
};

// ---- Point-to-point lane payloads (PROTOCOL §4) -----------------------------------------------

export type PtpPayload =
  /** WRAPPER-MSG (spec §3.6 G7): a CG with the RSN the primary gave it (0 from a backup). */
  | { type: 'wrapper'; rsn: number; signed: SignedCG }
  /** A plain point-to-point message: operator notes, diagnostics, spec §9.2 A15. */
  | { type: 'notice'; text: string }
  /** A point-to-point error report (spec §2.1 (e), the mismatch case). */
  | { type: 'error.report'; gssn: number; kind: ErrorReportKind; suspects: ProcessId[] }
  /** Backup → backup: the primary gave me the request with this SHA-256 at `rsn` in `view`,
   *  signed over orderClaim by the sender (PROTOCOL §5.8). The receiver checks the signature
   *  only in a dispute. */
  | { type: 'order'; rsn: number; digest: Uint8Array; view: number; sig: Uint8Array }
  /** Backup → primary in a dispute: the other backup's signed confirmation (PROTOCOL §10.2 `order.lie`). */
  | { type: 'order.claim'; claimant: ProcessId; view: number; rsn: number; digest: Uint8Array; sig: Uint8Array }
  /** Primary → backups: an input of the group's own at `rsn` (PROTOCOL §8.3, §8.4). */
  | { type: 'wrapper.input'; rsn: number; input: GroupInput }
  /** Backup → primary: agent `agent` (incarnation `inc`) missed two heartbeat checks and I
   *  probe it; `unreachable`: my probe went unanswered for the probe timeout (PROTOCOL §8.4). */
  | { type: 'node.suspect'; agent: ProcessId; inc: number; unreachable: boolean }
  /** Replica → replicas: a signed accusation (PROTOCOL §10.3). */
  | { type: 'accuse'; signed: SignedAccusation }
  /** Replica → the other correct replica after condemning the primary: my executed RSN in the
   *  view that is ending (PROTOCOL §10.5). */
  | { type: 'view.sync'; view: number; rsn: number }
  /** Backup → backup in a dispute: the frame, signed by the primary, that gave me `rsn`
   *  (PROTOCOL §10.2 equivocation). */
  | { type: 'order.evidence'; rsn: number; frame: Uint8Array }
  /** New replica → group members: send me the state (PROTOCOL §10.6). `port`: the port it
   *  listens on when cluster.json's was taken, else 0; `sig`: its signature over the port
   *  (portClaim), which the primary's `replica.add` carries so the backups can check it. */
  | { type: 'state.request'; view: number; port: number; sig: Uint8Array }
  /** Group member → new replica: the digest of the state at `rsn`, where it joined. */
  | { type: 'state.digest'; rsn: number; digest: Uint8Array }
  /** Group member → new replica: part `index` of `count` of the canonical state at `rsn`. */
  | { type: 'state.chunk'; rsn: number; index: number; count: number; data: Uint8Array };

/** Inputs the primary orders on the group's own behalf (PROTOCOL §8.3, §8.4, §10): a clock tick
 *  for the task timers, a node declared failed, a replica condemned on two accusations, and a
 *  new replica joining the group. */
export type GroupInput =
  | { type: 'tick' }
  | { type: 'node.failed'; agent: ProcessId; inc: number }
  | { type: 'replica.condemn'; evidence: SignedAccusation[] }
  | { type: 'replica.add'; id: ProcessId; port: number; sig: Uint8Array };
export const groupInput: Schema<GroupInput> = union<GroupInput>({
  tick: { code: 1, order: [], fields: {} },
  'node.failed': { code: 2, order: ['agent', 'inc'], fields: { agent: processId, inc: uint } },
  'replica.condemn': { code: 3, order: ['evidence'], fields: { evidence: list(signedAccusation, 2) } },
  'replica.add': { code: 4, order: ['id', 'port', 'sig'], fields: { id: processId, port: listenPort, sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
});

/** The wire form: the wrapped CG travels as the agent's own bytes and signature. */
export type PtpPayloadWire =
  | Exclude<PtpPayload, { type: 'wrapper' }>
  | { type: 'wrapper'; rsn: number; cgBytes: Uint8Array; cgSig: Uint8Array };

export const ptpPayloadWire: Schema<PtpPayloadWire> = union<PtpPayloadWire>({
  wrapper: {
    code: 1,
    order: ['rsn', 'cgBytes', 'cgSig'],
    fields: { rsn: uint, cgBytes: bytes(MAX_CG_BYTES), cgSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) },
  },
  notice: { code: 2, order: ['text'], fields: { text: reason } },
  'error.report': {
    code: 3,
    order: ['gssn', 'kind', 'suspects'],
    fields: { gssn: uint, kind: oneOf(['replica-timeout', 'mismatch'] as const), suspects: list(processId, MAX_SUSPECTS) },
  },
  order: { code: 4, order: ['rsn', 'digest', 'view', 'sig'], fields: { rsn: uint, digest: bytes(32, 32), view: uint, sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  'wrapper.input': { code: 5, order: ['rsn', 'input'], fields: { rsn: uint, input: groupInput } },
  'node.suspect': { code: 6, order: ['agent', 'inc', 'unreachable'], fields: { agent: processId, inc: uint, unreachable: bool } },
  accuse: { code: 7, order: ['signed'], fields: { signed: signedAccusation } },
  'view.sync': { code: 8, order: ['view', 'rsn'], fields: { view: uint, rsn: uint } },
  'order.evidence': { code: 9, order: ['rsn', 'frame'], fields: { rsn: uint, frame: bytes(MAX_EVIDENCE_FRAME_BYTES) } },
  'state.request': { code: 10, order: ['view', 'port', 'sig'], fields: { view: uint, port: listenPort, sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  'state.digest': { code: 11, order: ['rsn', 'digest'], fields: { rsn: uint, digest: bytes(32, 32) } },
  'order.claim': {
    code: 13,
    order: ['claimant', 'view', 'rsn', 'digest', 'sig'],
    fields: { claimant: processId, view: uint, rsn: uint, digest: bytes(32, 32), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) },
  },
  'state.chunk': {
    code: 12,
    order: ['rsn', 'index', 'count', 'data'],
    fields: { rsn: uint, index: uint, count: uint, data: bytes(MAX_STATE_CHUNK_BYTES) },
  },
});

// ---- Heartbeats (PROTOCOL §6) -----------------------------------------------------------------

export type Role = 'primary' | 'backup';
export type HeartbeatInfo =
  /** `view`: the replica's view (PROTOCOL §10.1); `digest` is of the state at `rsn`;
   *  `ckptRsn`/`ckptDigest` its latest checkpoint (PROTOCOL §10.4), 0/zeros before the first. */
  | { type: 'replica'; role: Role; rsn: number; gssn: number; digest: Uint8Array; view: number; ckptRsn: number; ckptDigest: Uint8Array }
  | { type: 'agent'; gssnDelivered: number; csnSent: number };
export const heartbeatInfo: Schema<HeartbeatInfo> = union<HeartbeatInfo>({
  replica: {
    code: 1,
    order: ['role', 'rsn', 'gssn', 'digest', 'view', 'ckptRsn', 'ckptDigest'],
    fields: {
      role: oneOf(['primary', 'backup'] as const), rsn: uint, gssn: uint, digest: bytes(32, 32), view: uint, ckptRsn: uint,
      ckptDigest: bytes(32, 32),
    },
  },
  agent: { code: 2, order: ['gssnDelivered', 'csnSent'], fields: { gssnDelivered: uint, csnSent: uint } },
});

// ---- Task output from the agents (PROTOCOL §7.1) ---------------------------------------------

/** A task process's output file: its stdout (`out`) or its stderr (`err`). */
export type LogStream = 'out' | 'err';
export const LOG_STREAMS = ['out', 'err'] as const;

/** A non-negative safe integer no larger than `max`: a larger one is WIRE_LIMIT. */
function uintUpTo(max: number): Schema<number> {
  return {
    enc: (v) => v,
    dec: (t, p) => {
      if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0) return err('WIRE_MALFORMED', `${p}: expected uint`);
      return t <= max ? ok(t) : err('WIRE_LIMIT', `${p}: ${t} > ${max}`);
    },
  };
}
/** A daemon's challenge (PROTOCOL §7): its incarnation, a serial it never issues twice in that
 *  incarnation, and its own clock when it issued it. A status query or a read of task output
 *  carries one, under the requester's signature or MAC, so a captured request is stale once the
 *  challenge is used or older than CHALLENGE_TTL_MS (src/core/freshness.ts). */
export type Challenge = { inc: number; serial: number; atMs: number };
const challenge: Schema<Challenge> = struct<Challenge>(['inc', 'serial', 'atMs'], { inc: uint, serial: uint, atMs: uint });

/** A VPID that names an output file: below MAX_TASK_PROCS, as every task's VPIDs are. With the
 *  task id's token (`t` and digits) it leaves no way out of `logs/tasks/` on the agent's disk. */
const fileVpid = uintUpTo(MAX_TASK_PROCS - 1);
/** What an operator may ask for in one read, and what one reply carries: LOGS_CHUNK_BYTES. */
const chunkSize = uintUpTo(LOGS_CHUNK_BYTES);

// ---- Frame items (PROTOCOL §3) -----------------------------------------------------------------

/** The lane-1 sequenced body: a signed CG (agent → replica) or a GC (replica → agent). */
export type GroupBody = { type: 'cg'; signed: SignedCG } | { type: 'gc'; gc: GroupMsgGC };

export type Item =
  /** Three-way handshake (PROTOCOL §3.2): my incarnation, the peer's as I know it. */
  | { type: 'hello'; inc: number; echo: number; established: boolean }
  /** Lane 0 reliable message; `body: null` is a pure cumulative ack (spec §3.4 P1). */
  | { type: 'ptp'; srcInc: number; destInc: number; seq: number; ackSeq: number; body: PtpPayload | null }
  /** Lane 1 reliable group message replica; never PTP-acked (spec §3.3). */
  | { type: 'grp'; srcInc: number; destInc: number; seq: number; body: GroupBody }
  /** Lane 1 pure group ack: `ack` is, from an agent, its complete GSSN mark and, from a replica,
   *  csn_rcvd; `seq` acknowledges the lane-1 copies received from the addressee (PROTOCOL §5.3). */
  | { type: 'gack'; srcInc: number; destInc: number; ack: number; seq: number }
  | { type: 'hb'; inc: number; counter: number; info: HeartbeatInfo }
  | { type: 'probe'; nonce: number }
  | { type: 'probe.reply'; nonce: number }
  /** Operator status query and its answer (docs/PROTOCOL.md §7): answered only with a fresh
   *  challenge of the answering daemon's, each challenge once. */
  | { type: 'status.query'; nonce: number; challenge: Challenge }
  | { type: 'status.reply'; nonce: number; json: string }
  /** Requester → a daemon that answers status or task output: give me a challenge (PROTOCOL §7). */
  | { type: 'challenge.ask'; nonce: number }
  /** The answer to `challenge.ask` `nonce`: small, so a replayed ask gains a stranger nothing. */
  | { type: 'challenge'; nonce: number; challenge: Challenge }
  /** Operator → every replica: a request signed by the operator (a CG with csn = inc = 0),
   *  ordered by the primary and answered by each replica once applied (PROTOCOL §8.1). */
  | { type: 'op.request'; signed: SignedCG }
  /** Replica → operator: the outcome of the request `nonce`, ordered at `rsn`. The operator
   *  accepts an outcome two replicas report identically. */
  | { type: 'op.reply'; nonce: string; rsn: number; ok: boolean; text: string }
  /** Replica → watchdog: power-reset `node`, declared failed at `rsn` (spec §1.6 rule 1,
   *  PROTOCOL §8.4). The watchdog acts on two matching requests. */
  | { type: 'reset.node'; node: string; rsn: number; address: string }
  /** Replica → watchdog: I initiated self-diagnosis (spec §1.6 rule 3, PROTOCOL §10.8).
   *  (`inc`, `counter`) increase per sender, so a replayed report counts once. `target` is
   *  empty when the initiation names nobody yet. */
  | { type: 'diag.report'; inc: number; counter: number; view: number; reason: AccuseReason; target: string }
  /** Operator → any daemon of a cluster started with --allow-inject: inject a fault
   *  (docs/OPERATIONS.md, `trine inject`). Handled by the daemon's driver, never by a core;
   *  a daemon started without the flag drops it (NOT_A_MEMBER). */
  | { type: 'inject'; nonce: number; mode: string; args: string[] }
  /** Daemon → operator: what the injection did, or why it was refused. */
  | { type: 'inject.reply'; nonce: number; ok: boolean; text: string }
  /** Operator → agent: at most `maxBytes` (≤ LOGS_CHUNK_BYTES) of process `vpid` of `task`'s
   *  stdout or stderr file on the agent's node, from byte `offset` (PROTOCOL §7.1). Served by the
   *  agent's driver (src/daemon/logs-server.ts), never by a core; from anyone but an operator of
   *  the membership it is dropped (NOT_A_MEMBER); with a challenge of the agent's that is not
   *  fresh, it is dropped unanswered (REPLAYED, PROTOCOL §7). */
  | { type: 'logs.read'; nonce: number; task: string; vpid: number; stream: LogStream; offset: number; maxBytes: number; challenge: Challenge }
  /** Agent → operator: the answer to read `nonce`. `bytes` were read at `offset`; `size` is the
   *  file's size as the agent read it; `missing`: there is no such file (yet). `ok: false` with
   *  `error` when the file could not be read (`bytes` empty). */
  | {
    type: 'logs.data'; nonce: number; ok: boolean; error: string; offset: number; bytes: Uint8Array; size: number; missing: boolean;
  }
  /** Replica → watchdog: its task journal (PROTOCOL §10.9), whenever the live tasks change and
   *  again every JOURNAL_RESEND_MS, so that a cluster reset of several hosts, where no disk is
   *  shared, finds every replica's journal at the watchdog. `inc`: the replica's incarnation. */
  | { type: 'tasks.journal'; inc: number; journal: Uint8Array }
  /** Replica → watchdog: the operator shut the cluster down at `rsn` (PROTOCOL §10.11). On two
   *  matching notices the watchdog stands down for good (no reset of any kind) and exits. */
  | { type: 'shutdown.notice'; rsn: number }
  /** Replica → watchdog, with each heartbeat while the group has any: the members (and the one
   *  joining) whose keys cluster.json lacks, spares of nodes added at run time (PROTOCOL
   *  §10.12). The watchdog verifies a member's frames once two replicas gave the same key. */
  | { type: 'replica.keys'; replicas: AddedReplica[] }
  /** Watchdog → replica: it took the shutdown of `rsn`; the replica may exit. */
  | { type: 'shutdown.ack'; rsn: number }
  /** The only frames an unbound connection carries (PROTOCOL §2.5), checked by the transport
   *  (src/core/wire/bind-proof.ts), never by a core. Dialer → listener: the listener's `nonce`
   *  for this connection under the dialer's signature or MAC, and a `challenge` of the dialer's
   *  own; listener → dialer: that challenge as `nonce`, and an empty `challenge`. */
  | { type: 'bind.proof'; nonce: Uint8Array; challenge: Uint8Array };

/** The wire form of a lane-1 body: the CG travels as the agent's own bytes and signature. */
type GroupBodyWire = { type: 'cg'; bytes: Uint8Array; sig: Uint8Array } | { type: 'gc'; gc: GroupMsgGC };
export const groupBodyWire: Schema<GroupBodyWire> = union<GroupBodyWire>({
  cg: { code: 1, order: ['bytes', 'sig'], fields: { bytes: bytes(MAX_CG_BYTES), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  gc: { code: 2, order: ['gc'], fields: { gc: groupMsgGC } },
});

export type ItemWire =
  | Exclude<Item, { type: 'grp' } | { type: 'ptp' } | { type: 'op.request' }>
  | { type: 'op.request'; bytes: Uint8Array; sig: Uint8Array }
  | { type: 'grp'; srcInc: number; destInc: number; seq: number; body: GroupBodyWire }
  | { type: 'ptp'; srcInc: number; destInc: number; seq: number; ackSeq: number; body: PtpPayloadWire | null };

export const itemWire: Schema<ItemWire> = union<ItemWire>({
  hello: { code: 1, order: ['inc', 'echo', 'established'], fields: { inc: uint, echo: uint, established: bool } },
  ptp: {
    code: 2,
    order: ['srcInc', 'destInc', 'seq', 'ackSeq', 'body'],
    fields: { srcInc: uint, destInc: uint, seq: uint, ackSeq: uint, body: nullable(ptpPayloadWire) },
  },
  grp: { code: 3, order: ['srcInc', 'destInc', 'seq', 'body'], fields: { srcInc: uint, destInc: uint, seq: uint, body: groupBodyWire } },
  gack: { code: 4, order: ['srcInc', 'destInc', 'ack', 'seq'], fields: { srcInc: uint, destInc: uint, ack: uint, seq: uint } },
  hb: { code: 5, order: ['inc', 'counter', 'info'], fields: { inc: uint, counter: uint, info: heartbeatInfo } },
  probe: { code: 6, order: ['nonce'], fields: { nonce: uint } },
  'probe.reply': { code: 7, order: ['nonce'], fields: { nonce: uint } },
  'status.query': { code: 8, order: ['nonce', 'challenge'], fields: { nonce: uint, challenge } },
  'status.reply': { code: 9, order: ['nonce', 'json'], fields: { nonce: uint, json: text(MAX_STATUS_CHARS) } },
  'op.request': { code: 10, order: ['bytes', 'sig'], fields: { bytes: bytes(MAX_CG_BYTES), sig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES) } },
  'op.reply': { code: 11, order: ['nonce', 'rsn', 'ok', 'text'], fields: { nonce, rsn: uint, ok: bool, text: reason } },
  'reset.node': { code: 12, order: ['node', 'rsn', 'address'], fields: { node: nodeName, rsn: uint, address: text(64) } },
  'diag.report': {
    code: 13,
    order: ['inc', 'counter', 'view', 'reason', 'target'],
    fields: { inc: uint, counter: uint, view: uint, reason: oneOf(ACCUSE_REASONS), target: text(MAX_ID_CHARS) },
  },
  inject: { code: 14, order: ['nonce', 'mode', 'args'], fields: { nonce: uint, mode: text(MAX_ID_CHARS), args: list(arg, 8) } },
  'inject.reply': { code: 15, order: ['nonce', 'ok', 'text'], fields: { nonce: uint, ok: bool, text: reason } },
  'logs.read': {
    code: 16,
    order: ['nonce', 'task', 'vpid', 'stream', 'offset', 'maxBytes', 'challenge'],
    fields: { nonce: uint, task: taskId, vpid: fileVpid, stream: oneOf(LOG_STREAMS), offset: uint, maxBytes: chunkSize, challenge },
  },
  'logs.data': {
    code: 17,
    order: ['nonce', 'ok', 'error', 'offset', 'bytes', 'size', 'missing'],
    fields: { nonce: uint, ok: bool, error: reason, offset: uint, bytes: bytes(LOGS_CHUNK_BYTES), size: uint, missing: bool },
  },
  'tasks.journal': { code: 18, order: ['inc', 'journal'], fields: { inc: uint, journal: bytes(MAX_JOURNAL_ITEM_BYTES) } },
  'shutdown.notice': { code: 19, order: ['rsn'], fields: { rsn: uint } },
  'shutdown.ack': { code: 20, order: ['rsn'], fields: { rsn: uint } },
  'challenge.ask': { code: 21, order: ['nonce'], fields: { nonce: uint } },
  challenge: { code: 22, order: ['nonce', 'challenge'], fields: { nonce: uint, challenge } },
  'replica.keys': { code: 24, order: ['replicas'], fields: { replicas: list(addedReplica, MAX_REPLICAS) } },
  'bind.proof': { code: 23, order: ['nonce', 'challenge'], fields: { nonce: bytes(BIND_NONCE_BYTES, BIND_NONCE_BYTES), challenge: bytes(BIND_NONCE_BYTES) } },
});

/** The msgpack body of a frame; version and sender travel in its fixed header (PROTOCOL §2.1). */
export type FrameBody = { cluster: string; to: ProcessId; items: ItemWire[] };
export const frameBody: Schema<FrameBody> = struct<FrameBody>(['cluster', 'to', 'items'], {
  cluster: clusterId, to: processId, items: list(itemWire, MAX_ITEMS_PER_FRAME),
});

/** Signatures, beyond the frame's own, the receiver checks for this item: an agent-signed CG,
 *  or replicas' accusations (PROTOCOL §2.2 step 13). */
export function embeddedSignatures(item: Item | ItemWire): number {
  if (item.type === 'op.request' || (item.type === 'grp' && item.body.type === 'cg')) return 1;
  if (item.type !== 'ptp' || item.body === null) return 0;
  const b = item.body;
  if (b.type === 'wrapper' || b.type === 'accuse') return 1;
  if (b.type === 'wrapper.input' && b.input.type === 'replica.condemn') return b.input.evidence.length;
  return 0;
}

/** An order of the primary (WRAPPER-MSG or its group-input twin): a backup keeps the frame that
 *  carried it and may forward it to the other backup as evidence of equivocation (PROTOCOL
 *  §10.2), so it travels only in a signed frame, never a MAC'd one (§2.4). */
export function needsFrameSignature(item: Item | ItemWire): boolean {
  return item.type === 'ptp' && item.body !== null && (item.body.type === 'wrapper' || item.body.type === 'wrapper.input');
}

/** Process ids as they appear in the frame header: ASCII, checked without parsing msgpack. */
export const PROCESS_ID_PATTERN = /^[a-z][a-z0-9-]*$/;

/** A decoded, verified frame as the core sees it. */
export type Frame = { from: ProcessId; to: ProcessId; items: Item[] };

export const MAX_LIST = MAX_LIST_ENTRIES;
export const MAX_BURST = MAX_BURST_COUNT;
