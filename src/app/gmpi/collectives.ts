// G-MPI collective operations over a communicator (spec §5; MPI's barrier, bcast, reduce,
// allreduce, gather, scatter, allgather). This file owns the algorithms and the reduction
// operators; messaging, tags and sequence numbers come from comm.ts (beginCollective), so each
// collective uses one library tag (negative, never matched by application receives) that no
// other collective on the communicator uses, and consecutive collectives never mix.
//
// Algorithms: a dissemination barrier (ceil(log2 n) rounds); a binomial-tree bcast that forwards
// the root's encoded bytes without re-encoding; a binomial-tree reduce to rank 0 that combines in
// rank order (v0 op v1 op … op vn-1, so an associative but non-commutative op is fine) and then
// hands the result to the root; allreduce = reduce to 0 + bcast from 0 (every rank gets the same
// bits); linear gather and scatter; a ring allgather forwarding encoded bytes.
//
// Every collective is a sequence of the P2P layer's sends and receives, so abort() (spec §5.2)
// settles one blocked anywhere with ABORTED at once. A collective interrupted by abort leaves
// its communicator's collective state unspecified (ranks may have consumed different sequence
// numbers, and its messages may sit queued): after an abort, point-to-point on that
// communicator still works, but collectives belong on the new communicator recovery creates
// (spec §5.5), the old one discarded. As in MPI, every rank must call the same collectives in
// the same order with the same root; a rank whose call is refused (BAD_RANK, BAD_ARGUMENT)
// before any message leaves it leaves the others blocked until abort.
import { type Comm, type CommLayer, type CollectiveContext } from './comm.ts';
import { P2PError } from './p2p-types.ts';
import { decodePayload, EMPTY_PAYLOAD, encodePayload, type EncodedPayload } from './payload.ts';

/** A reduction operator: a built-in for numbers, bigints and arrays (number[] or typed arrays,
 *  element-wise, equal lengths), or a function, which must be associative. */
export type ReduceOp<T> = 'sum' | 'prod' | 'min' | 'max' | ((a: T, b: T) => T);
export const BUILTIN_OPS = ['sum', 'prod', 'min', 'max'] as const;
type BuiltinOp = (typeof BUILTIN_OPS)[number];

// ---- payload helpers ---------------------------------------------------------------------------

function encode(value: unknown): EncodedPayload {
  const p = encodePayload(value);
  if (!p.ok) throw new P2PError(p.code, p.detail);
  return p.value;
}

function decode<T>(payload: EncodedPayload, from: number): T {
  const d = decodePayload(payload);
  if (!d.ok) throw new P2PError(d.code, `from rank ${from}: ${d.detail}`);
  return d.value as T;
}

// ---- reduction operators -----------------------------------------------------------------------

type Scalar = number | bigint;
const scalarOps: Record<BuiltinOp, (a: Scalar, b: Scalar) => Scalar> = {
  sum: (a, b) => (a as number) + (b as number),
  prod: (a, b) => (a as number) * (b as number),
  min: (a, b) => (b < a ? b : a),
  max: (a, b) => (b > a ? b : a),
};

type NumericArray = number[] | Exclude<ArrayBufferView, DataView>;
const isNumericArray = (x: unknown): x is NumericArray =>
  (ArrayBuffer.isView(x) && !(x instanceof DataView)) || (Array.isArray(x) && x.every((e) => typeof e === 'number'));

function applyBuiltin(op: BuiltinOp, a: unknown, b: unknown): unknown {
  const f = scalarOps[op];
  if ((typeof a === 'number' && typeof b === 'number') || (typeof a === 'bigint' && typeof b === 'bigint')) return f(a, b);
  if (isNumericArray(a) && isNumericArray(b)) {
    const [x, y] = [a as ArrayLike<Scalar>, b as ArrayLike<Scalar>];
    if (x.length !== y.length) throw new P2PError('OP_FAILED', `${op}: arrays of ${x.length} and ${y.length} elements`);
    if (Array.isArray(a)) return Array.from({ length: x.length }, (_, i) => f(x[i] as Scalar, y[i] as Scalar));
    if (Array.isArray(b) || a.constructor !== b.constructor) throw new P2PError('OP_FAILED', `${op}: arrays of different types`);
    const out = new (a.constructor as new (n: number) => { [i: number]: Scalar })(x.length);
    for (let i = 0; i < x.length; i++) out[i] = f(x[i] as Scalar, y[i] as Scalar);
    return out;
  }
  throw new P2PError('OP_FAILED', `${op} combines two numbers, two bigints or two numeric arrays, not ${typeName(a)} and ${typeName(b)}`);
}

const typeName = (x: unknown): string => (x === null ? 'null' : Array.isArray(x) ? 'an array' : ArrayBuffer.isView(x) ? x.constructor.name : typeof x);

function checkOp<T>(op: ReduceOp<T>): void {
  if (typeof op !== 'function' && !(BUILTIN_OPS as readonly unknown[]).includes(op)) {
    throw new P2PError('BAD_ARGUMENT', `reduce op ${String(op)} is not one of ${BUILTIN_OPS.join(', ')} nor a function`);
  }
}

function combine<T>(op: ReduceOp<T>, a: T, b: T): T {
  if (typeof op !== 'function') return applyBuiltin(op, a, b) as T;
  try {
    return op(a, b);
  } catch (e) {
    throw new P2PError('OP_FAILED', `reduce op threw: ${(e as Error)?.message ?? String(e)}`, e);
  }
}

// ---- collectives -------------------------------------------------------------------------------

/** MPI_Barrier: returns once every rank of `comm` has entered it (dissemination algorithm). */
export async function barrier(layer: CommLayer, comm: Comm): Promise<void> {
  const c = layer.beginCollective(comm);
  for (let distance = 1; distance < c.size; distance *= 2) {
    await Promise.all([c.send((c.rank + distance) % c.size, EMPTY_PAYLOAD), c.recv((c.rank - distance + c.size) % c.size)]);
  }
}

/** Binomial-tree broadcast of encoded bytes from `root` (MPICH's algorithm, on ranks relative
 *  to the root); returns what this rank received (the root's own payload at the root). */
async function bcastPayload(c: CollectiveContext, root: number, payload: EncodedPayload | null): Promise<EncodedPayload> {
  const relative = (c.rank - root + c.size) % c.size;
  let got = payload;
  let mask = 1;
  while (mask < c.size) {
    if ((relative & mask) !== 0) {
      got = await c.recv((relative - mask + root) % c.size);
      break;
    }
    mask *= 2;
  }
  if (got === null) throw new P2PError('BAD_ARGUMENT', 'broadcast root without a payload'); // root always has one
  const forward = got;
  const sends: Promise<void>[] = [];
  for (mask = Math.floor(mask / 2); mask > 0; mask = Math.floor(mask / 2)) {
    if (relative + mask < c.size) sends.push(c.send((relative + mask + root) % c.size, forward));
  }
  await Promise.all(sends);
  return forward;
}

/** MPI_Bcast: every rank returns the root's `value` (the root its own value, as given; the
 *  others a decoded copy). Non-root ranks pass nothing. */
export async function bcast<T>(layer: CommLayer, comm: Comm, root: number, value?: T): Promise<T> {
  const isRoot = layer.rank(comm) === root;
  const payload = isRoot ? encode(value) : null;
  const c = layer.beginCollective(comm, root);
  const got = await bcastPayload(c, root, payload);
  return isRoot ? (value as T) : decode<T>(got, root);
}

/** Reduce to rank 0 over a binomial tree, combining in rank order; then move the result to
 *  `root`. Returns the result at `root`, undefined elsewhere. */
async function reduceIn<T>(c: CollectiveContext, root: number, value: T, op: ReduceOp<T>): Promise<T | undefined> {
  let acc = value;
  for (let mask = 1; mask < c.size; mask *= 2) {
    if ((c.rank & mask) !== 0) {
      await c.send(c.rank - mask, encode(acc));
      break;
    }
    const child = c.rank + mask;
    if (child < c.size) acc = combine(op, acc, decode<T>(await c.recv(child), child));
  }
  if (root === 0) return c.rank === 0 ? acc : undefined;
  if (c.rank === 0) {
    await c.send(root, encode(acc));
    return undefined;
  }
  return c.rank === root ? decode<T>(await c.recv(0), 0) : undefined;
}

/** MPI_Reduce: the root gets v0 op v1 op … op v(n-1); the other ranks get undefined. */
export async function reduce<T>(layer: CommLayer, comm: Comm, root: number, value: T, op: ReduceOp<T>): Promise<T | undefined> {
  checkOp(op);
  const c = layer.beginCollective(comm, root);
  return reduceIn(c, root, value, op);
}

/** MPI_Allreduce: every rank gets the same v0 op v1 op … op v(n-1) (computed once, at rank 0,
 *  and broadcast, so a floating-point sum is bit-identical everywhere). */
export async function allreduce<T>(layer: CommLayer, comm: Comm, value: T, op: ReduceOp<T>): Promise<T> {
  checkOp(op);
  const reduced = layer.beginCollective(comm);
  const broadcast = layer.beginCollective(comm);
  const result = await reduceIn(reduced, 0, value, op);
  const got = await bcastPayload(broadcast, 0, reduced.rank === 0 ? encode(result) : null);
  return reduced.rank === 0 ? (result as T) : decode<T>(got, 0);
}

/** MPI_Gather (linear): the root gets every rank's value in rank order (its own as given);
 *  the other ranks get undefined. */
export async function gather<T>(layer: CommLayer, comm: Comm, root: number, value: T): Promise<T[] | undefined> {
  const payload = layer.rank(comm) === root ? null : encode(value);
  const c = layer.beginCollective(comm, root);
  if (payload !== null) {
    await c.send(root, payload);
    return undefined;
  }
  return Promise.all(Array.from({ length: c.size }, async (_, r) => (r === root ? value : decode<T>(await c.recv(r), r))));
}

/** MPI_Scatter (linear): rank r gets `values[r]` of the root, which passes one value per rank;
 *  the other ranks pass nothing. */
export async function scatter<T>(layer: CommLayer, comm: Comm, root: number, values?: readonly T[]): Promise<T> {
  const size = layer.size(comm);
  const isRoot = layer.rank(comm) === root;
  let payloads: EncodedPayload[] = [];
  if (isRoot) {
    if (!Array.isArray(values) || values.length !== size) throw new P2PError('BAD_ARGUMENT', `scatter root needs ${size} values`);
    payloads = values.map(encode);
  }
  const c = layer.beginCollective(comm, root);
  if (!isRoot) return decode<T>(await c.recv(root), root);
  await Promise.all(payloads.map((p, r) => (r === root ? undefined : c.send(r, p))));
  return values?.[root] as T;
}

/** MPI_Allgather (ring): every rank gets every rank's value in rank order (its own as given). */
export async function allgather<T>(layer: CommLayer, comm: Comm, value: T): Promise<T[]> {
  const own = encode(value);
  const c = layer.beginCollective(comm);
  const blocks: EncodedPayload[] = Array.from({ length: c.size }, () => EMPTY_PAYLOAD);
  blocks[c.rank] = own;
  const right = (c.rank + 1) % c.size;
  const left = (c.rank - 1 + c.size) % c.size;
  for (let step = 0; step < c.size - 1; step++) {
    const sendIndex = (c.rank - step + c.size) % c.size;
    const recvIndex = (c.rank - step - 1 + c.size) % c.size;
    const [, got] = await Promise.all([c.send(right, blocks[sendIndex] ?? EMPTY_PAYLOAD), c.recv(left)]);
    blocks[recvIndex] = got;
  }
  return blocks.map((b, r) => (r === c.rank ? value : decode<T>(b, r)));
}
