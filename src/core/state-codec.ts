// The inverse of `encodeState` (replicated-state.ts): the canonical bytes of the replicated state
// back to the in-memory ReplicatedState, for state transfer to a replacement replica
// (docs/PROTOCOL.md §5.4, §10.6). The receiver checks the bytes' SHA-256 against two replicas'
// digests before it decodes them; this decoder is still total (STYLE.md 5): any input gives a
// state or a WIRE_* error, never a throw. It is also exact: the decoded state must encode to the
// very bytes it came from, so a field the decoder missed, a repeated or unsorted map key or a
// stray field is refused instead of being silently normalised.
//
// Readers below throw `Malformed` (private to this module) with the path that failed;
// `decodeState` turns it into a Result, which keeps each reader a one-liner.
// `timers` and `pool` are configuration (cluster.json), not state: the caller supplies them, and
// the pool grows by the added nodes' spares the bytes name (poolWithAdded).
import type { Service } from '../../fsm/fsm-task-types.ts';
import { decodeData, type MachineData } from '../../fsm/plain-data.ts';
import { rankTable } from './cluster-rollback.ts';
import type { AllocationRequest, ClusterState, NodeRecord, ServiceTurn, SignedSubmit, TaskRecord, TaskTimers } from './cluster-state.ts';
import { bytesEqual } from '../base/bytes.ts';
import {
  MAX_ARGS, MAX_ENV_ENTRIES, MAX_FINISHED_TASKS, MAX_LIVE_TASKS, MAX_OPERATOR_OUTCOMES, MAX_REPLICAS, MAX_STATE_CHUNK_BYTES,
  MAX_ADDED_NODE_SPARES, MAX_MEMBER_CHANGES, MAX_STATE_CHUNKS, PUBLIC_KEY_BYTES, TASK_KEY_BYTES,
} from './constants.ts';
import type { GroupView, Recovery } from './group-view.ts';
import type { ProcessId } from './ports.ts';
import { encodeState, poolWithAdded, type AddedNode, type MemberChange, type OperatorOutcome, type ReplicatedState } from './replicated-state.ts';
import { err, ok, type Result } from '../base/result.ts';
import type { PendingGroup, TaskSignals } from './task-signals.ts';
import { unpack } from './wire/frame.ts';
import { dgrpOption, recovery as recoveryOption, type AddedSpare, type EnvEntry, type ProcMode } from './wire/messages.ts';
import { dgrpState } from './dgrp.ts';
import { stragglerPart } from './straggler.ts';
import type { Schema } from './wire/schema.ts';

/** What the caller knows without the bytes: configuration, the same on every replica. */
export type StateConfig = { timers: TaskTimers; pool: readonly ProcessId[]; spareNodes?: ReadonlyMap<ProcessId, string> };

/** The most a transfer can carry: MAX_STATE_CHUNKS chunks of MAX_STATE_CHUNK_BYTES. */
export const MAX_STATE_BYTES = MAX_STATE_CHUNK_BYTES * MAX_STATE_CHUNKS;

// ---- readers ---------------------------------------------------------------------------------

class Malformed {
  constructor(readonly detail: string) {}
}

const fail = (path: string, what: string): never => {
  throw new Malformed(`${path}: ${what}`);
};

type Reader<T> = (t: unknown, path: string) => T;

const uint: Reader<number> = (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) && t >= 0 ? t : fail(p, 'expected uint'));
/** A group request's `arg` is an int32 on the wire (messages.ts sig.request). */
const int: Reader<number> = (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) ? t : fail(p, 'expected integer'));
const str: Reader<string> = (t, p) => (typeof t === 'string' ? t : fail(p, 'expected string'));
const bool: Reader<boolean> = (t, p) => (typeof t === 'boolean' ? t : fail(p, 'expected bool'));

/** Enumerations are stored as their strings (encodeCluster), not as indexes. */
function oneOf<const V extends string>(values: readonly V[]): Reader<V> {
  return (t, p) => (values.includes(t as V) ? (t as V) : fail(p, `expected one of ${values.join('|')}`));
}

function nullable<T>(read: Reader<T>): Reader<T | null> {
  return (t, p) => (t === null ? null : read(t, p));
}

function tuple(t: unknown, n: number, p: string): unknown[] {
  return Array.isArray(t) && t.length === n ? t : fail(p, `expected ${n} fields`);
}

function list<T>(read: Reader<T>, max = Number.MAX_SAFE_INTEGER): Reader<T[]> {
  return (t, p) => {
    if (!Array.isArray(t)) return fail(p, 'expected list');
    if (t.length > max) return fail(p, `${t.length} entries > ${max}`);
    return t.map((x, i) => read(x, `${p}[${i}]`));
  };
}

/** A list without repeats (a set kept in order). */
function distinct<T>(read: Reader<T[]>): Reader<T[]> {
  return (t, p) => {
    const out = read(t, p);
    return new Set(out).size === out.length ? out : fail(p, 'repeated entry');
  };
}

/** A Map encoded as [key, value] pairs; the encoders sort the keys, so they must ascend strictly
 *  (which also rules out a repeated key that a Map would silently merge). */
function entries<K extends string | number, V>(key: Reader<K>, value: Reader<V>): Reader<Map<K, V>> {
  return (t, p) => {
    const out = new Map<K, V>();
    let previous: K | null = null;
    list((e, q) => {
      const [k, v] = tuple(e, 2, q);
      const kk = key(k, `${q}[0]`);
      if (previous !== null && !(previous < kk)) fail(q, `key ${kk} out of order`);
      out.set(kk, value(v, `${q}[1]`));
      previous = kk;
    })(t, p);
    return out;
  };
}

const machineData: Reader<MachineData> = (t, p) => {
  const r = decodeData(t, p);
  if (!r.ok) throw new Malformed(r.detail); // the detail names the path already
  return r.value;
};

const ids = list(str);

/** A field encoded with a wire schema (a task's recovery option and rank table). */
function bySchema<T>(schema: Schema<T>): Reader<T> {
  return (t, p) => {
    const r = schema.dec(t, p);
    if (!r.ok) throw new Malformed(r.detail);
    return r.value;
  };
}

// ---- the replicated state (field order of encodeState) --------------------------------------

function readState(t: unknown, config: StateConfig): ReplicatedState {
  const f = tuple(t, 14, 'state');
  const replicas = distinct(list(str, MAX_REPLICAS))(f[2], 'replicas');
  const primary = str(f[3], 'primary');
  if (!replicas.includes(primary)) fail('primary', `${primary} is not a replica`);
  const { outcomes, outcomeOrder } = readOutcomes(f[9], 'outcomes');
  const added = readAdded(f[12], 'added');
  return {
    rsn: uint(f[0], 'rsn'),
    gssn: uint(f[1], 'gssn'),
    replicas,
    primary,
    clientInc: entries(str, uint)(f[4], 'clientInc'),
    csnReceived: entries(str, uint)(f[5], 'csnReceived'),
    lastGssnTo: entries(str, uint)(f[6], 'lastGssnTo'),
    nodes: readNodes(f[7], 'nodes'),
    cluster: readCluster(f[8], 'cluster'),
    outcomes,
    outcomeOrder,
    group: readGroup(f[10], 'group'),
    shutdownAt: f[11] === null ? null : uint(f[11], 'shutdownAt'),
    added,
    members: list(readMember, MAX_MEMBER_CHANGES)(f[13], 'members'),
    timers: { ...config.timers },
    ...poolWithAdded({ pool: config.pool, spareNodes: config.spareNodes ?? new Map() }, added),
  };
}

/** Node records are encoded flat: [agent, node, joined, slots, failed, inc, draining, protector],
 *  by agent. */
function readNodes(t: unknown, p: string): Map<ProcessId, NodeRecord> {
  const out = new Map<ProcessId, NodeRecord>();
  let previous: string | null = null;
  list((e, q) => {
    const [agent, node, joined, slots, failed, inc, draining, protector] = tuple(e, 8, q);
    const id = str(agent, `${q}.agent`);
    if (previous !== null && !(previous < id)) fail(q, `agent ${id} out of order`);
    out.set(id, {
      node: str(node, `${q}.node`), joined: bool(joined, `${q}.joined`), slots: uint(slots, `${q}.slots`), failed: bool(failed, `${q}.failed`), inc: uint(inc, `${q}.inc`),
      draining: bool(draining, `${q}.draining`), protector: str(protector, `${q}.protector`),
    });
    previous = id;
  })(t, p);
  return out;
}

/** Nodes added at run time (PROTOCOL §10.12), by agent: [agent, node, address, port, publicKey,
 *  spares], each spare [id, port, publicKey]. */
function readAdded(t: unknown, p: string): Map<ProcessId, AddedNode> {
  const out = new Map<ProcessId, AddedNode>();
  let previous: string | null = null;
  const key = (k: unknown, q: string): Uint8Array =>
    new Uint8Array(k instanceof Uint8Array && k.length === PUBLIC_KEY_BYTES ? k : fail(q, `expected ${PUBLIC_KEY_BYTES} bytes`));
  const spare: Reader<AddedSpare> = (e, q) => {
    const [id, port, publicKey] = tuple(e, 3, q);
    return { id: str(id, `${q}.id`), port: uint(port, `${q}.port`), publicKey: key(publicKey, `${q}.publicKey`) };
  };
  list((e, q) => {
    const [agent, node, address, port, publicKey, spares] = tuple(e, 6, q);
    const id = str(agent, `${q}.agent`);
    if (previous !== null && !(previous < id)) fail(q, `agent ${id} out of order`);
    out.set(id, {
      node: str(node, `${q}.node`), address: str(address, `${q}.address`), port: uint(port, `${q}.port`), publicKey: key(publicKey, `${q}.publicKey`),
      spares: list(spare, MAX_ADDED_NODE_SPARES)(spares, `${q}.spares`),
    });
    previous = id;
  })(t, p);
  return out;
}

/** Membership changes (PROTOCOL §10.12), in the order applied: [nonce, kind, agent, node, op, opSig]. */
const readMember: Reader<MemberChange> = (e, q) => {
  const [nonce, kind, agent, node, op, opSig] = tuple(e, 6, q);
  return {
    nonce: str(nonce, `${q}.nonce`), kind: oneOf(['add', 'remove'] as const)(kind, `${q}.kind`), agent: str(agent, `${q}.agent`), node: str(node, `${q}.node`),
    op: new Uint8Array(bin(op, `${q}.op`)), opSig: new Uint8Array(bin(opSig, `${q}.opSig`)),
  };
};

/** Outcomes are encoded once, oldest first; the Map by nonce is rebuilt from them. */
function readOutcomes(t: unknown, p: string): { outcomes: Map<string, OperatorOutcome>; outcomeOrder: string[] } {
  const outcomes = new Map<string, OperatorOutcome>();
  const outcomeOrder: string[] = [];
  list((e, q) => {
    const [nonce, rsn, success, text] = tuple(e, 4, q);
    const o: OperatorOutcome = { nonce: str(nonce, `${q}.nonce`), rsn: uint(rsn, `${q}.rsn`), ok: bool(success, `${q}.ok`), text: str(text, `${q}.text`) };
    // The order list would keep a repeat the Map merges, and still re-encode the same bytes.
    if (outcomes.has(o.nonce)) fail(q, `nonce ${o.nonce} repeated`);
    outcomes.set(o.nonce, o);
    outcomeOrder.push(o.nonce);
  }, MAX_OPERATOR_OUTCOMES)(t, p);
  return { outcomes, outcomeOrder };
}

// ---- tasks (field order of encodeCluster) ----------------------------------------------------

const SERVICES = ['start', 'terminate'] as const satisfies readonly Service[];
const MODES = ['plain', 'linked'] as const satisfies readonly ProcMode[];
const OUTCOMES = ['normal', 'abnormal'] as const;
/** The id is `t` and the task's number (submitTask); the number itself is not encoded. */
const TASK_ID = /^t[1-9][0-9]*$/;

const serviceTurn: Reader<ServiceTurn> = (t, p) => {
  const [task, service] = tuple(t, 2, p);
  return { task: str(task, `${p}.task`), service: oneOf(SERVICES)(service, `${p}.service`) };
};

const allocation: Reader<AllocationRequest> = (t, p) => {
  const [task, vpids] = tuple(t, 2, p);
  return { task: str(task, `${p}.task`), vpids: list(uint)(vpids, `${p}.vpids`) };
};

function readCluster(t: unknown, p: string): ClusterState {
  const [tick, next, tasksTree, finishedTree, allocations, serviceQueue, serviceActive] = tuple(t, 7, p);
  const nextTask = uint(next, `${p}.nextTask`);
  if (nextTask < 1) fail(`${p}.nextTask`, 'task numbers start at 1');
  const tasks = new Map<string, TaskRecord>();
  let previous = 0;
  list((e, q) => {
    const rec = readTask(e, q);
    // Sorted by number, which is also the Map's insertion (submission) order the code iterates in.
    if (rec.number <= previous || rec.number >= nextTask) fail(`${q}.id`, `task ${rec.id} out of order or beyond nextTask ${nextTask}`);
    tasks.set(rec.id, rec);
    previous = rec.number;
  })(tasksTree, `${p}.tasks`);
  const finished = distinct(list(str, MAX_FINISHED_TASKS))(finishedTree, `${p}.finished`);
  // The finished list is exactly the tasks with an outcome (finishTask): submitTask counts live
  // tasks as their difference, and forgetting the oldest finished task relies on it.
  const isFinished = new Set(finished);
  for (const id of finished) if (!tasks.has(id)) fail(`${p}.finished`, `unknown task ${id}`);
  for (const rec of tasks.values()) if ((rec.outcome !== null) !== isFinished.has(rec.id)) fail(`${p}.finished`, `${rec.id} and its outcome disagree`);
  if (tasks.size - finished.length > MAX_LIVE_TASKS) fail(`${p}.tasks`, `more than ${MAX_LIVE_TASKS} live tasks`);
  return {
    tick: uint(tick, `${p}.tick`),
    nextTask,
    tasks,
    finished,
    allocations: list(allocation)(allocations, `${p}.allocations`),
    serviceQueue: list(serviceTurn)(serviceQueue, `${p}.serviceQueue`),
    serviceActive: nullable(serviceTurn)(serviceActive, `${p}.serviceActive`),
  };
}

const envEntry: Reader<EnvEntry> = (t, p) => {
  const [name, value] = tuple(t, 2, p);
  return [str(name, `${p}[0]`), str(value, `${p}[1]`)];
};
const bin: Reader<Uint8Array> = (t, p) => (t instanceof Uint8Array ? t : fail(p, 'expected bytes'));
const signedSubmit: Reader<SignedSubmit> = (t, p) => {
  const [nonce, bytes, sig] = tuple(t, 3, p);
  return { nonce: str(nonce, `${p}.nonce`), bytes: bin(bytes, `${p}.bytes`), sig: bin(sig, `${p}.sig`) };
};

/** A task key (PROTOCOL §9.5): TASK_KEY_BYTES in lowercase hex, as encodeCluster writes it. */
const taskKey: Reader<Uint8Array> = (t, p) => {
  const text = str(t, p);
  if (text.length !== 2 * TASK_KEY_BYTES || !/^[0-9a-f]*$/.test(text)) fail(p, `expected ${TASK_KEY_BYTES} bytes in lowercase hex`);
  return Uint8Array.from({ length: TASK_KEY_BYTES }, (_, i) => parseInt(text.slice(2 * i, 2 * i + 2), 16));
};

function readTask(t: unknown, p: string): TaskRecord {
  const f = tuple(t, 27, p);
  const id = str(f[0], `${p}.id`);
  const number = Number(id.slice(1));
  if (!TASK_ID.test(id) || String(number) !== id.slice(1)) fail(`${p}.id`, `${id} is not a task id`);
  // Same keys in the same order as submitTask creates them.
  const rec: TaskRecord = {
    id,
    submit: nullable(signedSubmit)(f[18], `${p}.submit`),
    number,
    name: str(f[1], `${p}.name`),
    size: uint(f[2], `${p}.size`),
    file: str(f[3], `${p}.file`),
    args: list(str, MAX_ARGS)(f[4], `${p}.args`),
    cwd: str(f[5], `${p}.cwd`),
    env: list(envEntry, MAX_ENV_ENTRIES)(f[6], `${p}.env`),
    submittedRsn: uint(f[7], `${p}.submittedRsn`),
    fsm: machineData(f[8], `${p}.fsm`),
    procs: entries(uint, machineData)(f[9], `${p}.procs`),
    reserved: entries(uint, str)(f[10], `${p}.reserved`),
    waitReason: nullable(str)(f[11], `${p}.waitReason`),
    outcome: nullable(oneOf(OUTCOMES))(f[12], `${p}.outcome`),
    reason: nullable(str)(f[13], `${p}.reason`),
    mode: oneOf(MODES)(f[14], `${p}.mode`),
    signals: readSignals(f[15], `${p}.signals`),
    endpoints: entries(uint, str)(f[16], `${p}.endpoints`),
    spawnTicks: entries(uint, uint)(f[26], `${p}.spawnTicks`),
    sigStats: readSigStats(f[17], `${p}.sigStats`),
    taskKey: taskKey(f[19], `${p}.taskKey`),
    recovery: bySchema(recoveryOption)(f[20], `${p}.recovery`),
    rollback: bySchema(rankTable)(f[21], `${p}.rollback`),
    dgrp: bySchema(dgrpOption)(f[22], `${p}.dgrp`),
    dgrpState: bySchema(dgrpState)(f[23], `${p}.dgrpState`),
    ...bySchema(stragglerPart)(f[24], `${p}.straggler`),
    maxSpawns: uint(f[25], `${p}.maxSpawns`),
  };
  // A rollback task, and only one, has ranks (PROTOCOL §11.2).
  if ((rec.recovery.kind === 'rollback') !== (rec.rollback !== null)) fail(`${p}.rollback`, `a ${rec.recovery.kind} task with${rec.rollback === null ? 'out' : ''} ranks`);
  if ((rec.dgrp === null) !== (rec.dgrpState === null)) fail(`${p}.dgrpState`, 'a DGRP option without its group, or the reverse');
  return rec;
}

const pendingGroup: Reader<PendingGroup> = (t, p) => {
  const [firstTick, entriesTree] = tuple(t, 2, p);
  return {
    firstTick: uint(firstTick, `${p}.firstTick`),
    entries: list((e, q) => {
      const [vpid, signum, arg] = tuple(e, 3, q);
      return { vpid: uint(vpid, `${q}.vpid`), signum: uint(signum, `${q}.signum`), arg: int(arg, `${q}.arg`) };
    })(entriesTree, `${p}.entries`),
  };
};

function readSignals(t: unknown, p: string): TaskSignals {
  const [epoch, quorum, pending] = tuple(t, 3, p);
  return { epoch: uint(epoch, `${p}.epoch`), quorum: uint(quorum, `${p}.quorum`), pending: nullable(pendingGroup)(pending, `${p}.pending`) };
}

function readSigStats(t: unknown, p: string): TaskRecord['sigStats'] {
  const [broadcasts, pointToPoint, groupRequests, dropped] = tuple(t, 4, p);
  return {
    broadcasts: uint(broadcasts, `${p}.broadcasts`), pointToPoint: uint(pointToPoint, `${p}.pointToPoint`),
    groupRequests: uint(groupRequests, `${p}.groupRequests`), dropped: uint(dropped, `${p}.dropped`),
  };
}

// ---- the group view (field order of encodeGroupView) -----------------------------------------

const recovery: Reader<Recovery> = (t, p) => {
  const [id, node, sinceTick, tried] = tuple(t, 4, p);
  return { id: str(id, `${p}.id`), node: nullable(str)(node, `${p}.node`), sinceTick: uint(sinceTick, `${p}.sinceTick`), tried: ids(tried, `${p}.tried`) };
};

/** [mismatch reports, timeout reports] of one agent against one replica. */
const reportCounts: Reader<[number, number]> = (t, p) => {
  const [mismatch, timeout] = tuple(t, 2, p);
  return [uint(mismatch, `${p}[0]`), uint(timeout, `${p}[1]`)];
};

/** A moved listen port (GroupView.ports). */
const port: Reader<number> = (t, p) => {
  const n = uint(t, p);
  if (n < 1 || n > 65_535) fail(p, `port ${n}`);
  return n;
};

function readGroup(t: unknown, p: string): GroupView {
  const [view, replicaNodes, retired, recoveryTree, reports, ports] = tuple(t, 6, p);
  return {
    view: uint(view, `${p}.view`),
    replicaNodes: entries(str, str)(replicaNodes, `${p}.replicaNodes`),
    retired: distinct(ids)(retired, `${p}.retired`),
    recovery: nullable(recovery)(recoveryTree, `${p}.recovery`),
    reports: entries(str, entries(str, reportCounts))(reports, `${p}.reports`),
    ports: entries(str, port)(ports, `${p}.ports`),
  };
}

// ---- entry point -----------------------------------------------------------------------------

/** Decode a replicated state from its canonical bytes (`encodeState`); never throws. */
export function decodeState(bytes: Uint8Array, config: StateConfig): Result<ReplicatedState> {
  if (!(bytes instanceof Uint8Array)) return err('WIRE_MALFORMED', 'state: not bytes');
  if (bytes.length > MAX_STATE_BYTES) return err('WIRE_TOO_LARGE', `state: ${bytes.length} bytes > ${MAX_STATE_BYTES}`);
  const tree = unpack(bytes);
  if (!tree.ok) return tree;
  let state: ReplicatedState;
  let again: Uint8Array;
  try {
    state = readState(tree.value, config);
    again = encodeState(state);
  } catch (e) {
    if (e instanceof Malformed) return err('WIRE_MALFORMED', e.detail);
    // Not reachable from any input the tests found; the contract is still never to throw.
    return err('WIRE_MALFORMED', `state: decoder fault: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!bytesEqual(again, bytes)) return err('WIRE_MALFORMED', 'state: decoded state does not re-encode to the same bytes');
  return ok(state);
}
