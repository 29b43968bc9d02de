// The extent of a rank's log, recorded by digest through the group (docs/PROTOCOL.md §11.4; issue
// 17 "Byzantine care": "each checkpoint and the extent of each log are recorded by digest through
// the manager group"). The protector that keeps the log is another node's agent and may be
// faulty: it could drop, reorder or rewrite entries. So the rank chains its entries as it
// appends them,
//
//   c_0 = 32 zero bytes,   c_p = SHA-256("trine-log-chain-v1" ‖ c_{p-1} ‖ u32 p ‖ blob_p),
//
// and its marks carry the chain at the checkpoint's position (`base`) and at the last position
// its protector acknowledged (`extent`, `chain`). A replacement recomputes the chain from the
// checkpoint it restores over the entries it fetched, and refuses the log unless it meets every
// recorded extent at or after that checkpoint (verifyLogChain). Entries after the last recorded
// extent are checked for order and form only: the window is one extent report
// (LOG_EXTENT_REPORT_MS) or one checkpoint, whichever came last.
//
// ChainedStore wraps the rank's store: it chains each entry as the channels append it (positions
// are assigned and appended in order, rank-channels.ts) and follows the contiguous prefix its
// protector acknowledged.
import { createHash } from 'node:crypto';
import { assert } from '../../base/result.ts';
import type { Mark, RecoverableStore, StoreContents } from './runtime.ts';

/** The chain before the first entry. */
export const CHAIN_ZERO: Uint8Array = new Uint8Array(32);
/** How often a rank tells the group how far its protector holds its log, when it has grown. */
export const LOG_EXTENT_REPORT_MS = 1000;
/** The chains of the last positions kept, for a checkpoint whose position lags the log's end
 *  (under channel memories, a message's fragments arrive before it is consumed). */
const RECENT_CHAINS = 1024;
const DOMAIN = Buffer.from('trine-log-chain-v1');

export function chainNext(prev: Uint8Array, pos: number, blob: Uint8Array): Uint8Array {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(pos);
  return new Uint8Array(createHash('sha256').update(DOMAIN).update(prev).update(p).update(blob).digest());
}

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Why a fetched log is refused, or null when it meets the group's record. `from` is the
 *  restored checkpoint's position and `base` the chain there (the matching mark's); every mark
 *  whose extent lies after `from` must be met exactly. Returns the chain at the last entry too,
 *  from which the replacement's own appends go on. */
export function verifyLogChain(
  contents: StoreContents, from: number, base: Uint8Array, marks: readonly Mark[],
): { ok: true; head: { pos: number; chain: Uint8Array } } | { ok: false; reason: string } {
  const wanted = new Map<number, Uint8Array>();
  for (const m of marks) if (m.extent > from) wanted.set(m.extent, m.chain);
  const entries = contents.log.filter((e) => e.pos > from).sort((a, b) => a.pos - b.pos);
  let chain = base;
  let pos = from;
  for (const e of entries) {
    if (e.pos !== pos + 1) return { ok: false, reason: `the log skips from position ${pos} to ${e.pos}` };
    pos = e.pos;
    chain = chainNext(chain, pos, e.blob);
    const want = wanted.get(pos);
    if (want !== undefined && !sameBytes(want, chain)) return { ok: false, reason: `the log up to position ${pos} does not match the group's record of its digest` };
    wanted.delete(pos);
  }
  const missing = [...wanted.keys()].sort((a, b) => a - b)[0];
  if (missing !== undefined) return { ok: false, reason: `the group recorded the log up to position ${missing}, and the protector holds it only up to ${pos}` };
  return { ok: true, head: { pos, chain } };
}

/** The rank's store, chaining what passes through it. */
export class ChainedStore implements RecoverableStore {
  private head = { pos: 0, chain: CHAIN_ZERO };
  /** Chains of positions appended and not yet acknowledged contiguously. */
  private readonly pending = new Map<number, Uint8Array>();
  private readonly ackedAhead = new Set<number>();
  private acked = { pos: 0, chain: CHAIN_ZERO };
  private readonly recent = new Map<number, Uint8Array>();

  constructor(private readonly inner: RecoverableStore & { close?(): Promise<void> }) {}

  /** A replacement goes on from the last entry it fetched (verifyLogChain's head), all of which
   *  its protector holds. */
  reset(head: { pos: number; chain: Uint8Array }): void {
    assert(this.pending.size === 0, 'reset before any append');
    this.head = head;
    this.acked = head;
    this.recent.clear();
    this.recent.set(head.pos, head.chain);
  }

  /** The chain at a recent position (the last one appended, or one of the RECENT_CHAINS before
   *  it): a checkpoint's `base` at its position. */
  chainAt(pos: number): Uint8Array {
    if (pos === this.head.pos) return this.head.chain;
    const c = this.recent.get(pos);
    assert(c !== undefined, `the chain is asked at ${pos}, the head is at ${this.head.pos}`);
    return c;
  }

  /** Under channel memories the CM writes the log: the rank chains each entry as the CM pushes
   *  it, and the CM holds everything it pushed. */
  observe(pos: number, blob: Uint8Array): void {
    this.advance(pos, blob);
    this.acked = this.head;
  }

  private advance(pos: number, blob: Uint8Array): void {
    assert(pos === this.head.pos + 1, `log positions are chained in order (${pos} after ${this.head.pos})`);
    this.head = { pos, chain: chainNext(this.head.chain, pos, blob) };
    this.recent.set(pos, this.head.chain);
    this.recent.delete(pos - RECENT_CHAINS);
  }

  /** The last position the protector acknowledged with everything before it, and its chain. */
  extent(): { pos: number; chain: Uint8Array } {
    return this.acked;
  }

  append(pos: number, blob: Uint8Array): Promise<void> {
    this.advance(pos, blob);
    this.pending.set(pos, this.head.chain);
    return this.inner.append(pos, blob).then(() => this.onAcked(pos));
  }

  putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    return this.inner.putCheckpoint(id, logPos, bytes);
  }

  fetch(): Promise<StoreContents> {
    return this.inner.fetch();
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }

  private onAcked(pos: number): void {
    this.ackedAhead.add(pos);
    let p = this.acked.pos;
    while (this.ackedAhead.delete(p + 1)) p++;
    if (p === this.acked.pos) return;
    this.acked = { pos: p, chain: this.pending.get(p)! };
    for (const k of this.pending.keys()) if (k <= p) this.pending.delete(k);
  }
}
