// Client → group requests, the payload of GROUP-MSG-CG (docs/PROTOCOL.md §5, §8): the agents'
// reports and signals, the operators' task and node requests. Part of the schemas that
// messages.ts gathers.
import {
  MAX_ARGS, MAX_ID_CHARS, MAX_PAYLOAD_BYTES, MAX_SUSPECTS, MAX_REPORTS_PER_REQUEST, SIGNATURE_BYTES,
  MAX_MEMBER_CG_BYTES, MAX_SUBMIT_CG_BYTES, TASK_KEY_BYTES, PUBLIC_KEY_BYTES, MAX_ADDED_NODE_SPARES,
} from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { bool, bytes, list, oneOf, struct, text, uint, union, type Schema } from './schema.ts';
import {
  arg, endpointText, env, hostAddress, int32, member, nodeName, nonce, path, procReport, processId, reason, taskId,
  taskKey, tcpPort, u32, type EnvEntry, type ProcMode, type ProcReport,
} from './basics.ts';
import { MARK_ORDER, markFields, recovery, type Recovery, type RollbackMark } from './recovery.ts';
import { dgrpOption, DGRP_REPORT_ORDER, dgrpReportFields, type DgrpOptions, type DgrpReport } from './dgrp.ts';
import { stragglerOption, type StragglerOptions } from './straggler.ts';

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
  /** App-specific recovery (the default) or rollback (PROTOCOL §11.1); the group refuses a
   *  rollback task that is not linked or whose bounds are out of range. */
  recovery: Recovery;
  /** The dynamic group of recommended processes (PROTOCOL §12.1), or null; the group refuses
   *  one for a task that is not linked or whose numbers are out of range. */
  dgrp: DgrpOptions | null;
  /** The straggler policy (PROTOCOL §13.1), or null; the group refuses one for a task that is
   *  not linked or whose numbers are out of range. */
  straggler: StragglerOptions | null;
  /** Processes the application may SPAWN (GSIG_REQ_SPAWN) beyond the task's first ones, per
   *  start or restart: past it the task is killed with the reason (issue 19; PROTOCOL §9.2). */
  maxSpawns: number;
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
  /** The agent's protector listens at `endpoint` (`host:port`, PROTOCOL §11.4): sent once it
   *  does, after node.join, by every incarnation. */
  | { type: 'node.protector'; endpoint: string }
  /** Linked process `vpid` of rollback task `task` on this node stored a checkpoint (§11.4). */
  | ({ type: 'rollback.mark'; task: string; vpid: number } & RollbackMark)
  /** Linked process `vpid` of DGRP task `task` on this node, a tester, reports one testing
   *  interval (PROTOCOL §12.2): its agent speaks for it, as for its signals. */
  | ({ type: 'dgrp.report'; task: string; vpid: number } & DgrpReport)
  /** … reached the barrier that ends computing round `round` (§12.4). */
  | { type: 'dgrp.arrive'; task: string; vpid: number; round: number }
  /** Linked process `vpid` of `task` on this node has done `permille` ‰ of its work (§13.2). */
  | { type: 'proc.progress'; task: string; vpid: number; permille: number }
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
  'node.protector': { code: 14, order: ['endpoint'], fields: { endpoint: endpointText } },
  'rollback.mark': {
    code: 15,
    order: ['task', 'vpid', ...MARK_ORDER],
    fields: { task: taskId, vpid: uint, ...markFields },
  },
  'dgrp.report': { code: 16, order: ['task', 'vpid', ...DGRP_REPORT_ORDER], fields: { task: taskId, vpid: uint, ...dgrpReportFields } },
  'dgrp.arrive': { code: 17, order: ['task', 'vpid', 'round'], fields: { task: taskId, vpid: uint, round: uint } },
  'proc.progress': { code: 18, order: ['task', 'vpid', 'permille'], fields: { task: taskId, vpid: uint, permille: uint } },
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
    order: ['nonce', 'name', 'size', 'file', 'args', 'cwd', 'env', 'mode', 'recovery', 'dgrp', 'straggler', 'maxSpawns', 'taskKey'],
    fields: {
      nonce, name: text(MAX_ID_CHARS * 2), size: uint, file: path, args: list(arg, MAX_ARGS), cwd: path, env,
      mode: oneOf(['plain', 'linked'] as const), recovery, dgrp: dgrpOption, straggler: stragglerOption, maxSpawns: uint, taskKey,
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
