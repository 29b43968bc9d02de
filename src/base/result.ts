// Result values and the stable error codes of the wire (STYLE.md 5, 7). Decoders never throw
// on peer input: they return one of these codes, which daemons log and count per peer.
// A leaf of src/base: it imports nothing of the project, so src/core and fsm/ both use it and
// neither imports the other for it (test/unit/layering.test.ts).

export type DropCode =
  | 'WIRE_TOO_SHORT'
  | 'WIRE_TOO_LARGE'
  | 'WIRE_CHECKSUM'
  | 'WIRE_MALFORMED'
  | 'WIRE_VERSION'
  | 'WIRE_UNKNOWN_TYPE'
  | 'WIRE_LIMIT'
  | 'WIRE_FOREIGN_CLUSTER'
  | 'WIRE_MISADDRESSED'
  | 'SIG_UNKNOWN_KEY'
  | 'SIG_INVALID'
  /** A MAC'd frame whose tag is not the one its link's key gives (PROTOCOL §2.4). */
  | 'MAC_INVALID'
  /** A MAC'd frame carrying what must be signed: an order a backup may forward as evidence. */
  | 'SIG_REQUIRED'
  | 'REPLAYED'
  /** A sequenced item already received in this session: a retransmission, or a replay of a
   *  captured frame (counted, harmless: it is acknowledged again, never delivered twice). */
  | 'DUPLICATE'
  | 'STALE_SESSION'
  | 'OUT_OF_WINDOW'
  | 'NOT_A_MEMBER'
  | 'UNEXPECTED';

/** Count one dropped input by its reason (the per-process counters `trine status` shows). */
export function countDrop(drops: Partial<Record<DropCode, number>>, code: DropCode): void {
  drops[code] = (drops[code] ?? 0) + 1;
}

export type Ok<T> = { readonly ok: true; readonly value: T };
export type Err = { readonly ok: false; readonly code: DropCode; readonly detail: string };
export type Result<T> = Ok<T> | Err;

export const ok = <T>(value: T): Ok<T> => ({ ok: true, value });
export const err = (code: DropCode, detail: string): Err => ({ ok: false, code, detail });

/** Thrown only for our own broken invariants, never for a value a peer controls (STYLE.md 8). */
export class InvariantError extends Error {
  readonly code = 'INVARIANT';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new InvariantError(message);
}

export function unreachable(value: never): never {
  throw new InvariantError(`unreachable: ${JSON.stringify(value)}`);
}
