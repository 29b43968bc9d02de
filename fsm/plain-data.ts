// Plain-data storage and the pure step for the fsm/ machines (DESIGN.md §3, STYLE.md 1 and 4).
// The manager keeps each FsmTask / FsmProc snapshot inside its replicated state as plain JSON-able
// data `{ value, context }`, never as an xstate object, so that every replica hashes, serialises and
// replays exactly the same bytes. `step()` rebuilds the snapshot from that data, advances it with
// xstate's pure `transition()` and hands back the new data plus the named actions for the caller
// to execute. Nothing here performs an effect.

import { initialTransition, transition } from 'xstate';
import type { AnyStateMachine, EventFromLogic, InputFrom, SnapshotFrom } from 'xstate';
import { assert, err, ok, type Result } from '../src/base/result.ts';

/** A machine snapshot as stored in replicated state: only the state value and the context. */
export type MachineData = { value: unknown; context: unknown };

/** A named action a machine asked for, as returned by `transition()`; the caller executes it. */
export type MachineAction = { type: string; params: unknown };

export type StepResult = { data: MachineData; actions: MachineAction[] };

/**
 * Deep-copies `x`, asserting it is plain JSON-able data: null, booleans, finite numbers, strings,
 * arrays and objects whose prototype is Object.prototype or null. A Map, class instance,
 * function, undefined, NaN or bigint is a bug in a machine (our own invariant, STYLE.md 8).
 */
function copyPlain(x: unknown, path: string): unknown {
  if (x === null || typeof x === 'boolean' || typeof x === 'string') return x;
  if (typeof x === 'number') {
    assert(Number.isFinite(x), `plain-data: non-finite number at ${path}`);
    return x;
  }
  if (Array.isArray(x)) return x.map((item, i) => copyPlain(item, `${path}[${i}]`));
  if (typeof x === 'object') {
    const proto: unknown = Object.getPrototypeOf(x);
    assert(proto === Object.prototype || proto === null, `plain-data: non-plain object at ${path}`);
    const out: Record<string, unknown> = {};
    // Sorted keys: the stored form does not depend on the order assign() wrote the fields in.
    for (const key of Object.keys(x).sort()) {
      out[key] = copyPlain((x as Record<string, unknown>)[key], `${path}.${key}`);
    }
    return out;
  }
  return assert(false, `plain-data: ${typeof x} at ${path}`);
}

/** A machine that threw (in its context factory, a guard or an action) has a bug; xstate
 *  would store the error in the snapshot, which must never reach replicated state. */
function assertHealthy(snapshot: { status: string; error?: unknown }): void {
  if (snapshot.status !== 'error') return;
  if (snapshot.error instanceof Error) throw snapshot.error;
  assert(false, `plain-data: machine error ${String(snapshot.error)}`);
}

/** The storable form of a snapshot: `{ value, context }`, deep-copied and checked to be plain. */
export function toData(snapshot: { value: unknown; context: unknown }): MachineData {
  return {
    value: copyPlain(snapshot.value, 'value'),
    context: copyPlain(snapshot.context, 'context'),
  };
}

/**
 * Rebuilds a snapshot of `machine` from stored data. A final state value resolves to status
 * 'done' (xstate's `resolveState`), so a finished machine stays finished across a restore.
 */
export function fromData<M extends AnyStateMachine>(machine: M, data: MachineData): SnapshotFrom<M> {
  const copy = toData(data);
  return machine.resolveState({
    value: copy.value as never,
    context: copy.context as never,
  }) as SnapshotFrom<M>;
}

function plainActions(actions: ReadonlyArray<{ type: string; params?: unknown }>): MachineAction[] {
  return actions.map((a) => ({
    type: a.type,
    params: a.params === undefined ? null : copyPlain(a.params, `action ${a.type}`),
  }));
}

/** Starts `machine` with `input`: the initial data plus any entry actions of the initial state. */
export function initialStep<M extends AnyStateMachine>(machine: M, input: InputFrom<M>): StepResult {
  const [snapshot, actions] = initialTransition(machine, input as never);
  assertHealthy(snapshot);
  return { data: toData(snapshot), actions: plainActions(actions) };
}

/**
 * Advances stored data by one event with xstate's pure `transition()`. An event the current
 * state does not accept yields the same data and no actions (xstate ignores it; it never throws).
 */
export function step<M extends AnyStateMachine>(
  machine: M,
  data: MachineData,
  event: EventFromLogic<M>,
): StepResult {
  const [next, actions] = transition(machine, fromData(machine, data), event);
  assertHealthy(next);
  return { data: toData(next), actions: plainActions(actions) };
}

// ---- the canonical tree (replicated-state digest and state transfer) ------------------------

// The wire has arrays only (docs/PROTOCOL.md §2.2 and §5.4: the strict decoder refuses msgpack
// maps), so an array and an object are told apart by a leading tag.
const ARRAY_TAG = 0;
const OBJECT_TAG = 1;

function encodePlain(x: unknown): unknown {
  if (Array.isArray(x)) return [ARRAY_TAG, ...x.map(encodePlain)];
  if (x !== null && typeof x === 'object') {
    const o = x as Record<string, unknown>;
    return [OBJECT_TAG, ...Object.keys(o).sort().flatMap((key) => [key, encodePlain(o[key])])];
  }
  return x;
}

/** Canonical tree of stored data: `[value, context]`, with every array as `[0, ...items]` and
 *  every object as `[1, key, value, ...]` in ascending key order. */
export function encodeData(d: MachineData): unknown {
  return [encodePlain(d.value), encodePlain(d.context)];
}

const malformed = (path: string, what: string) => err('WIRE_MALFORMED', `${path}: ${what}`);

/** Total inverse of `encodePlain` on a tree from the strict decoder (whose depth limit bounds the
 *  recursion). Keys must ascend strictly, so every object has one encoding. */
function decodePlain(t: unknown, path: string): Result<unknown> {
  if (t === null || typeof t === 'boolean' || typeof t === 'string') return ok(t);
  if (typeof t === 'number') return Number.isFinite(t) ? ok(t) : malformed(path, 'non-finite number');
  if (!Array.isArray(t)) return malformed(path, 'not plain data');
  const items: unknown[] = t;
  if (items[0] === ARRAY_TAG) {
    const out: unknown[] = [];
    for (let i = 1; i < items.length; i++) {
      const r = decodePlain(items[i], `${path}[${i - 1}]`);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return ok(out);
  }
  if (items[0] !== OBJECT_TAG) return malformed(path, 'unknown plain-data tag');
  if (items.length % 2 !== 1) return malformed(path, 'object with a key but no value');
  const out: Record<string, unknown> = {};
  let previous: string | null = null;
  for (let i = 1; i < items.length; i += 2) {
    const key = items[i];
    // __proto__ would set the prototype, not a field; no machine has such a field.
    if (typeof key !== 'string' || key === '__proto__') return malformed(path, 'bad key');
    if (previous !== null && !(previous < key)) return malformed(path, `key ${key} out of order`);
    const r = decodePlain(items[i + 1], `${path}.${key}`);
    if (!r.ok) return r;
    out[key] = r.value;
    previous = key;
  }
  return ok(out);
}

/** Total inverse of `encodeData`. */
export function decodeData(t: unknown, path: string): Result<MachineData> {
  if (!Array.isArray(t) || t.length !== 2) return malformed(path, 'expected [value, context]');
  const value = decodePlain(t[0], `${path}.value`);
  if (!value.ok) return value;
  const context = decodePlain(t[1], `${path}.context`);
  if (!context.ok) return context;
  return ok({ value: value.value, context: context.value });
}
