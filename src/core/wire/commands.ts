// Group → agent commands, the payload of GROUP-MSG-GC (docs/PROTOCOL.md §5, §8), and the two
// group messages themselves (spec §3.2). Part of the schemas that messages.ts gathers.
import { MAX_ARGS, MAX_ID_CHARS, MAX_LIST_ENTRIES, MAX_PAYLOAD_BYTES, MAX_TASK_PROCS, MAX_REPLICAS } from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { bool, bytes, list, oneOf, struct, text, token, uint, union, type Schema } from './schema.ts';
import {
  arg, endpoint, endpointText, env, int32, member, movedPort, path, processId, reason, taskId, taskKey, u32,
  type Endpoint, type EnvEntry, type Member, type MovedPort, type ProcMode,
} from './basics.ts';
import { rollbackTable, type RollbackTable } from './recovery.ts';
import { dgrpOption, DGRP_VIEW_ORDER, dgrpViewFields, type DgrpOptions, type DgrpView } from './dgrp.ts';
import { stragglerOption, type StragglerOptions } from './straggler.ts';
import { addedReplica, agentRequest, type AddedReplica, type AgentRequest, type TaskSubmit } from './requests.ts';

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
  /** Processes in the task and the rank this one takes (TRINE_SIZE, TRINE_RANK: cluster-signals.ts
   *  spawnPlace), the restarted flag and every process's node (spec §7 item 2). */
  size: number;
  rank: number;
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
  /** A DGRP task's view (PROTOCOL §12.4) for the listed processes of `task` on this node. */
  | ProcDgrp
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
  | { type: 'node.shutdown'; rsn: number; removed: boolean }
  /** Keep the logs and checkpoints of rollback task `task`'s ranks (PROTOCOL §11.4): its key
   *  authenticates their processes, `maxStateBytes` bounds a checkpoint. */
  | { type: 'rollback.guard'; task: string; taskKey: Uint8Array; maxStateBytes: number }
  /** The task ended: forget what this node's protector keeps of it. */
  | { type: 'rollback.release'; task: string };

export type ProcSignal = {
  type: 'proc.signal'; task: string; vpids: number[]; signum: number; src: number; dest: number; arg: number; epoch: number;
  node: string; data: string;
};
export type ProcMapping = {
  type: 'proc.mapping'; task: string; vpids: number[]; restarted: boolean; recovered: boolean; epoch: number; quorum: number;
  members: Member[];
  /** A rollback task's rank table and options (PROTOCOL §11.2); null for other tasks. */
  rollback: RollbackTable | null;
  /** A DGRP task's options (PROTOCOL §12.1); its views follow in `proc.dgrp`. Null otherwise. */
  dgrp: DgrpOptions | null;
  /** A task's straggler policy (PROTOCOL §13.1): its processes report their progress. Null otherwise. */
  straggler: StragglerOptions | null;
};
export type ProcDgrp = { type: 'proc.dgrp'; task: string; vpids: number[] } & DgrpView;

export const groupCommand: Schema<GroupCommand> = union<GroupCommand>({
  'echo.reply': {
    code: 1,
    order: ['origin', 'tag', 'rsn', 'index', 'data'],
    fields: { origin: processId, tag: reason, rsn: uint, index: uint, data: bytes(MAX_PAYLOAD_BYTES) },
  },
  'proc.spawn': {
    code: 2,
    order: ['task', 'vpid', 'mode', 'file', 'args', 'cwd', 'env', 'size', 'rank', 'restarted', 'endpoints', 'taskKey'],
    fields: {
      task: taskId, vpid: uint, mode: oneOf(['plain', 'linked'] as const), file: path, args: list(arg, MAX_ARGS), cwd: path, env,
      size: uint, rank: uint, restarted: bool, endpoints: list(endpoint, MAX_TASK_PROCS), taskKey,
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
    order: ['task', 'vpids', 'restarted', 'recovered', 'epoch', 'quorum', 'members', 'rollback', 'dgrp', 'straggler'],
    fields: {
      task: taskId, vpids: list(uint, MAX_TASK_PROCS), restarted: bool, recovered: bool, epoch: uint, quorum: uint,
      members: list(member, MAX_TASK_PROCS), rollback: rollbackTable, dgrp: dgrpOption, straggler: stragglerOption,
    },
  },
  'proc.dgrp': { code: 13, order: ['task', 'vpids', ...DGRP_VIEW_ORDER], fields: { task: taskId, vpids: list(uint, MAX_TASK_PROCS), ...dgrpViewFields } },
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
  'rollback.guard': { code: 11, order: ['task', 'taskKey', 'maxStateBytes'], fields: { task: taskId, taskKey, maxStateBytes: uint } },
  'rollback.release': { code: 12, order: ['task'], fields: { task: taskId } },
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
