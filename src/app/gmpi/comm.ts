// G-MPI communicators over the VPID-keyed P2P layer (spec §5.1, §5.5). This file owns the
// communicators a process has created, their rank ↔ VPID translation (rank = index in the
// member list), rank-addressed send/recv with payload encoding (payload.ts), discarding a
// communicator that recovery replaced (its queued and later messages are dropped), and each
// communicator's collective sequence number, from which collectives.ts derives library tags so
// consecutive collectives never mix.
//
// A communicator is identified by its id: ids are fresh (G_MPI_Recover_comm creates a new one
// and destroys the rest, spec §5.5), so create() refuses an id in use or discarded.
import { MAX_RANKS, MAX_U32 } from './wire.ts';
import { ANY_SOURCE } from './matching.ts';
import type { Message } from './matching.ts';
import { MAX_LIB_TAG, P2PError } from './p2p-types.ts';
import { decodePayload, encodePayload, type EncodedPayload } from './payload.ts';

// ---- Named limits (STYLE.md 9) -----------------------------------------------------------------

/** Collective tags cycle through this many values below MAX_LIB_TAG: two collectives on one
 *  communicator share a tag only 2^30 collectives apart, far beyond any message still queued.
 *  The rest of the library tag space stays free for other library traffic. */
export const COLLECTIVE_TAG_SPACE = 2 ** 30;

export type Comm = {
  readonly id: number;
  /** Member VPIDs; a member's rank is its index. */
  readonly members: readonly number[];
};
/** A received message: `source` is the sender's rank in the communicator. `data` is a
 *  Uint8Array if raw bytes were sent, else the decoded structured value. */
export type CommMessage<T = unknown> = { readonly source: number; readonly tag: number; readonly data: T };

/** One collective's view of its communicator (collectives.ts): this process's rank, the size,
 *  the tag reserved for this collective, and rank-addressed library send/recv of raw payloads. */
export type CollectiveContext = {
  readonly rank: number;
  readonly size: number;
  readonly tag: number;
  send(dest: number, payload: EncodedPayload): Promise<void>;
  recv(source: number): Promise<EncodedPayload>;
};

/** What communicators are built on: P2P (VPID-addressed, p2p.ts), or a rollback task's rank
 *  channels (src/app/rollback/rank-channels.ts), where the ids are ranks. */
export type MessageLayer = {
  readonly self: number;
  send(dest: number, tag: number, data: Uint8Array, comm: number, structured: boolean): Promise<void>;
  recv(source: number, tag: number, comm: number): Promise<Message>;
  sendLib(dest: number, tag: number, data: Uint8Array, comm: number, structured: boolean): Promise<void>;
  recvLib(source: number, tag: number, comm: number): Promise<Message>;
  discardComm(comm: number): void;
  isDiscarded(comm: number): boolean;
  callError(): P2PError | null;
};

type CommState = { readonly comm: Comm; readonly rank: number; readonly rankOf: ReadonlyMap<number, number>; collectiveSeq: number };

const isU32 = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_U32;

export class CommLayer {
  private readonly comms = new Map<number, CommState>();
  private foreignMessages = 0;

  constructor(readonly p2p: MessageLayer) {}

  /** Register communicator `id` with `members` (VPIDs, rank order), which must include this
   *  process. Throws BAD_COMM for an id in use or discarded, BAD_ARGUMENT for bad members. */
  create(id: number, members: readonly number[]): Comm {
    if (!isU32(id)) throw new P2PError('BAD_COMM', `communicator id ${id} is not a u32`);
    if (this.comms.has(id) || this.p2p.isDiscarded(id)) throw new P2PError('BAD_COMM', `communicator id ${id} already used`);
    if (!Array.isArray(members) || members.length < 1 || members.length > MAX_RANKS) {
      throw new P2PError('BAD_ARGUMENT', `a communicator has 1..${MAX_RANKS} members`);
    }
    const rankOf = new Map<number, number>();
    members.forEach((vpid, rank) => {
      if (!isU32(vpid) || rankOf.has(vpid)) throw new P2PError('BAD_ARGUMENT', `member ${vpid} is not a u32 VPID or is repeated`);
      rankOf.set(vpid, rank);
    });
    const rank = rankOf.get(this.p2p.self);
    if (rank === undefined) throw new P2PError('BAD_ARGUMENT', `this process (${this.p2p.self}) is not a member`);
    const comm: Comm = Object.freeze({ id, members: Object.freeze([...members]) });
    this.comms.set(id, { comm, rank, rankOf, collectiveSeq: 0 });
    return comm;
  }

  /** This process's rank in `comm`. */
  rank(comm: Comm): number {
    return this.state(comm).rank;
  }

  size(comm: Comm): number {
    return this.state(comm).comm.members.length;
  }

  /** The rank of `vpid` in `comm`, or -1 if it is not a member. */
  rankOf(comm: Comm, vpid: number): number {
    return this.state(comm).rankOf.get(vpid) ?? -1;
  }

  /** The VPID of `rank` in `comm`; BAD_RANK if there is no such rank. */
  vpidOf(comm: Comm, rank: number): number {
    const vpid = this.state(comm).comm.members[rank];
    if (!Number.isInteger(rank) || vpid === undefined) throw new P2PError('BAD_RANK', `rank ${rank} not in 0..${this.size(comm) - 1}`);
    return vpid;
  }

  /** MPI send to rank `dest` of `comm`: a Uint8Array as-is, any other value msgpack-encoded.
   *  TOO_LARGE if the encoded message exceeds the limit (refused whole, never truncated). */
  async send(comm: Comm, dest: number, tag: number, data: unknown): Promise<void> {
    const vpid = this.vpidOf(comm, dest);
    const p = encodePayload(data);
    if (!p.ok) throw new P2PError(p.code, p.detail);
    return this.p2p.send(vpid, tag, p.value.bytes, comm.id, p.value.structured);
  }

  /** MPI receive on `comm` from rank `source` (or ANY_SOURCE) with `tag` (or ANY_TAG). A
   *  structured payload that does not decode consumes the message and rejects with BAD_PAYLOAD. */
  async recv<T = unknown>(comm: Comm, source: number, tag: number): Promise<CommMessage<T>> {
    const st = this.state(comm);
    const from = source === ANY_SOURCE ? ANY_SOURCE : this.vpidOf(comm, source);
    for (;;) {
      const m = await this.p2p.recv(from, tag, comm.id);
      const rank = st.rankOf.get(m.source);
      if (rank === undefined) {
        // A peer that is not a member used this communicator's id: not ours to deliver.
        this.foreignMessages++;
        continue;
      }
      const d = decodePayload({ bytes: m.data, structured: m.structured });
      if (!d.ok) throw new P2PError(d.code, `from rank ${rank}: ${d.detail}`);
      return { source: rank, tag: m.tag, data: d.value as T };
    }
  }

  /** Destroy communicator `id` (spec §5.5: recovery replaces every communicator): drop its
   *  queued messages, reject receives posted on it, discard its later arrivals. */
  discardComm(id: number): void {
    this.p2p.discardComm(id);
    this.comms.delete(id);
  }

  stats(): { communicators: number; foreignMessages: number } {
    return { communicators: this.comms.size, foreignMessages: this.foreignMessages };
  }

  /** How many collectives `comm` has begun: part of a rollback checkpoint, since the tags of
   *  the next collectives derive from it (src/app/rollback/runtime.ts). */
  collectivesBegun(comm: Comm): number {
    return this.state(comm).collectiveSeq;
  }

  /** A replacement restoring a rollback checkpoint goes on from the count it held. */
  restoreCollectivesBegun(comm: Comm, n: number): void {
    this.state(comm).collectiveSeq = n;
  }

  /** Start one collective on `comm` (collectives.ts). Checks, in order, that calls are not
   *  aborted, that `comm` exists and that `root` (if given) is a rank; only then consumes the
   *  communicator's next collective sequence number, so a call refused here has no effect. */
  beginCollective(comm: Comm, root?: number): CollectiveContext {
    const refused = this.p2p.callError();
    if (refused !== null) throw refused;
    const st = this.state(comm);
    const size = st.comm.members.length;
    if (root !== undefined && (!Number.isInteger(root) || root < 0 || root >= size)) {
      throw new P2PError('BAD_RANK', `root ${root} not in 0..${size - 1}`);
    }
    const tag = MAX_LIB_TAG - (st.collectiveSeq % COLLECTIVE_TAG_SPACE);
    st.collectiveSeq++;
    const vpid = (rank: number): number => {
      const v = st.comm.members[rank];
      if (v === undefined) throw new P2PError('BAD_RANK', `rank ${rank}`);
      return v;
    };
    return {
      rank: st.rank,
      size,
      tag,
      send: (dest, payload) => this.p2p.sendLib(vpid(dest), tag, payload.bytes, comm.id, payload.structured),
      recv: async (source) => {
        const m = await this.p2p.recvLib(vpid(source), tag, comm.id);
        return { bytes: m.data, structured: m.structured };
      },
    };
  }

  private state(comm: Comm): CommState {
    const st = typeof comm === 'object' && comm !== null ? this.comms.get(comm.id) : undefined;
    if (st === undefined) {
      const id = (comm as Comm | null)?.id;
      throw new P2PError('BAD_COMM', this.p2p.isDiscarded(id ?? -1) ? `communicator ${id} was discarded` : `no communicator ${id}`);
    }
    return st;
  }
}
