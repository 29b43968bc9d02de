// Where the distributed HyperQuickSort keeps lists between rounds (examples/hqsort/hqsort.ts):
// the lists this process held at the end of each round, the backup copies it received
// (hqsort-plan.ts says who backs up whom), and the responder that hands either to a later holder
// that asks. A request may come before the list is ready (its holder was told slow mid-round
// and is still finishing it): the answer then waits for it, so it is late, never wrong.
//
// Lists travel as the host's int32 bytes (a Trine cluster's hosts share a byte order). Every
// backup receive is posted once (memoised), whoever needs it first: the round's start, the
// responder or the new holder. HQSORT_DEBUG=1 logs every request, ask and answer on stderr.
import { ANY_SOURCE } from 'trine/app';
import { tagOf } from './hqsort-plan.ts';

/** The world's point to point, by world rank (Gmpi's send and recv). */
export type Wire = {
  send(dest: number, tag: number, data: unknown): Promise<void>;
  recv<T = unknown>(source: number, tag: number): Promise<{ readonly source: number; readonly data: T }>;
};

/** A request for virtual rank v's list as `round` left it: the responder's own (`from` null) or
 *  the backup copy it received from `from`. */
export type ListRequest = { readonly round: number; readonly v: number; readonly from: number | null };

type Deferred<T> = { promise: Promise<T>; resolve: (value: T) => void };
function deferred<T>(): Deferred<T> {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export const bytesOf = (list: Int32Array): Uint8Array => new Uint8Array(list.buffer, list.byteOffset, list.byteLength);

/** A received list: a view when aligned, else a copy. Refuses bytes that are not int32s. */
export function listOf(data: unknown, what: string): Int32Array {
  if (!(data instanceof Uint8Array)) throw new Error(`hqsort: ${what} is not raw bytes`);
  if (data.byteLength % 4 !== 0) throw new Error(`hqsort: ${what} has ${data.byteLength} bytes, not a whole number of int32`);
  if (data.byteOffset % 4 === 0) return new Int32Array(data.buffer, data.byteOffset, data.byteLength / 4);
  return new Int32Array(data.slice().buffer);
}

function decodeRequest(data: unknown): ListRequest | null {
  if (typeof data !== 'object' || data === null) return null;
  const { round, v, from } = data as Record<string, unknown>;
  const nat = (x: unknown): x is number => Number.isSafeInteger(x) && (x as number) >= 0;
  if (!nat(round) || !nat(v) || !(from === null || nat(from))) return null;
  return { round, v, from };
}

const key = (round: number, v: number): string => `${round}:${v}`;
const DEBUG = process.env.HQSORT_DEBUG === '1';

export class ListStore {
  private readonly held = new Map<string, Deferred<Int32Array>>();
  private readonly backups = new Map<string, Promise<Int32Array>>();
  private closing = false;
  /** Requests answered, for the trace. */
  answered = 0;

  constructor(private readonly wire: Wire, private readonly log: (line: string) => void) {}

  /** This process's list of v at the end of `round`: now, or once keep() stores it. */
  heldList(round: number, v: number): Promise<Int32Array> {
    return this.heldSlot(round, v).promise;
  }

  keep(round: number, v: number, list: Int32Array): void {
    this.heldSlot(round, v).resolve(list);
  }

  /** The backup copy of v's list at the end of `round` that holder `from` sends this process. */
  backup(round: number, v: number, from: number): Promise<Int32Array> {
    const k = key(round, v);
    let p = this.backups.get(k);
    if (p === undefined) {
      p = this.wire.recv(from, tagOf('backup', round, v)).then((m) => listOf(m.data, `the backup of list ${v} from ${from}`));
      p.catch(() => undefined); // a receive cut short by finalize is nobody's concern
      this.backups.set(k, p);
    }
    return p;
  }

  /** Send, without waiting for a slow receiver; a failure is logged (the receiver's holder asks
   *  again elsewhere only by the rules, so a lost message shows as a hang, named here). */
  post(dest: number, tag: number, list: Int32Array): void {
    this.wire.send(dest, tag, bytesOf(list)).catch((e: unknown) => {
      if (!this.closing) this.log(`hqsort: send to ${dest} (tag ${tag}) failed: ${(e as Error).message}`);
    });
  }

  /** Ask `who` for v's list as `round` left it and wait for the answer. */
  async ask(who: number, request: ListRequest): Promise<Int32Array> {
    if (DEBUG) this.log(`ask ${who} ${JSON.stringify(request)}`);
    await this.wire.send(who, tagOf('request', 0, 0), request);
    const m = await this.wire.recv(who, tagOf('reply', request.round, request.v));
    return listOf(m.data, `list ${request.v} from ${who}`);
  }

  /** Answer requests until close(): each in its own turn, so one that waits for its list does
   *  not hold up the others. */
  async respond(): Promise<void> {
    while (!this.closing) {
      let m: { source: number; data: unknown };
      try {
        m = await this.wire.recv(ANY_SOURCE, tagOf('request', 0, 0));
      } catch (e) {
        if (this.closing) return;
        throw e;
      }
      const request = decodeRequest(m.data);
      if (DEBUG) this.log(`request from ${m.source} ${JSON.stringify(m.data)}`);
      if (request === null) {
        this.log(`hqsort: a malformed list request from ${m.source}, dropped`);
        continue;
      }
      void this.answer(m.source, request);
    }
  }

  private async answer(to: number, r: ListRequest): Promise<void> {
    const list = r.from === null ? await this.heldList(r.round, r.v) : await this.backup(r.round, r.v, r.from);
    if (DEBUG) this.log(`answer ${to} ${JSON.stringify(r)} ${list.length}`);
    this.post(to, tagOf('reply', r.round, r.v), list);
    this.answered += 1;
  }

  /** Before finalize: failures from here on are the end's, not errors. */
  close(): void {
    this.closing = true;
  }

  private heldSlot(round: number, v: number): Deferred<Int32Array> {
    const k = key(round, v);
    let d = this.held.get(k);
    if (d === undefined) {
      d = deferred<Int32Array>();
      this.held.set(k, d);
    }
    return d;
  }
}
