// The public surface of G-MPI's point-to-point layer (p2p.ts): its named limits, each with its
// reason (STYLE.md 9), its error codes, the reasons a connection closes, and its option, address
// and statistics types. No behaviour lives here.
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_RANKS, type WireCode } from './wire.ts';
// ---- Named limits (STYLE.md 9) -----------------------------------------------------------------

/** Default bound on unexpected (arrived, not yet received) message bytes from one peer. Two
 *  default-size messages: one large message can always be queued while another is being
 *  received. The bound is per peer so that one peer's flood, which the application will
 *  receive later, cannot stop the messages of others that a posted receive is waiting for
 *  (MPI's progress rule); memory is bounded by peers × (this + one message). */
export const DEFAULT_MAX_UNEXPECTED_BYTES = 2 * DEFAULT_MAX_MESSAGE_BYTES;
/** Receives one process may have posted and unmatched at once. The application controls this,
 *  but each is a closure held until a message or an abort: beyond this it is a bug (a loop
 *  posting receives), refused with LIMIT rather than growing without bound. */
export const MAX_PENDING_RECVS = 4096;
/** Authenticated accepted sockets whose VPID is not (yet) expected, held until expect(). One per
 *  VPID, and only task peers (at most MAX_RANKS) dial us; more than that are refused. */
export const MAX_UNATTRIBUTED_CONNECTIONS = MAX_RANKS;
/** How long an accepted connection has to authenticate (its hello's MAC checked, PROTOCOL §9.5).
 *  A genuine peer answers the challenge within a round trip; 5 s covers a loaded host, and a
 *  process whose own task key is still on its way from its agent. A silent or forging socket
 *  holds a slot no longer (before issue 13, idle sockets held theirs for ever). */
export const UNAUTHENTICATED_TIMEOUT_MS = 5000;
/** Accepted, unauthenticated connections kept per remote address. A node's processes dial us in
 *  one burst and each authenticates within a round trip, so 16 pending at once is already a
 *  busy node; those beyond wait and retry (DIAL_RETRY_*). One host — maybe not a task's — cannot
 *  take every slot. */
export const MAX_UNAUTHENTICATED_PER_ADDRESS = 16;
/** The same over every address: eight addresses' worth. Bounds the sockets and buffers that
 *  strangers can make a task process hold (each costs an fd and a timer). */
export const MAX_UNAUTHENTICATED_CONNECTIONS = 128;
/** Dial attempts to one peer whose connection closed before its challenge arrived: the
 *  acceptor was full of unauthenticated connections from our address (above), which clear
 *  within a round trip each. Backoff doubles from DIAL_RETRY_FIRST_MS to DIAL_RETRY_MAX_MS: 8
 *  attempts span about 3.6 s, then the peer is lost (LOCAL_CONNECTION) like any failed
 *  connection. A refused dial (nobody listens: the peer is gone) is not retried. */
export const DIAL_RETRY_LIMIT = 8;
export const DIAL_RETRY_FIRST_MS = 25;
export const DIAL_RETRY_MAX_MS = 1000;
/** connect()/whenConnected() calls pending at once. Init and each recovery wait once; beyond
 *  this it is a loop bug, refused with LIMIT. */
export const MAX_CONNECT_WAITERS = 64;
/** How long close() leaves a connection half-closed after its bye for the peer to close its
 *  side, before destroying it: a hung or paused peer must not hold finalisation longer. */
export const BYE_LINGER_MS = 200;

/** The highest library tag: library traffic uses [MIN_LIB_TAG, MAX_LIB_TAG]; -1 is ANY_TAG. */
export const MAX_LIB_TAG = -2;
/** The default communicator id of send/recv: MPI_COMM_WORLD's until recovery replaces it. */
export const COMM_WORLD = 0;

// ---- Errors ------------------------------------------------------------------------------------

export type P2PErrorCode =
  /** abort(reason) was called: the alert flag / MPI_ERR_ALERT path (spec §5.2). */
  | 'ABORTED'
  /** The connection to that peer is broken (spec §5.4 G_MPI_SIG_LOCAL_CONNECTION). */
  | 'PEER_LOST'
  /** removePeer() took that VPID out of the task (spec §5.5 GSIG_NTF_DIED). */
  | 'PEER_REMOVED'
  /** That peer finalized (its bye arrived): it sends nothing more and receives nothing. */
  | 'PEER_FINISHED'
  /** A VPID this process neither knows nor expects (or not a u32). */
  | 'UNKNOWN_PEER'
  | 'CLOSED'
  /** send to a known peer whose connection is not yet established. */
  | 'NOT_CONNECTED'
  | 'TOO_LARGE'
  /** A rank outside the communicator (comm.ts, collectives.ts). */
  | 'BAD_RANK'
  | 'BAD_TAG'
  /** A communicator id that is not a u32, not created, or discarded. */
  | 'BAD_COMM'
  | 'BAD_ARGUMENT'
  /** A structured payload from a peer that does not decode (payload.ts). */
  | 'BAD_PAYLOAD'
  /** A reduction operator failed or met values it cannot combine (collectives.ts). */
  | 'OP_FAILED'
  | 'LIMIT';

export class P2PError extends Error {
  constructor(readonly code: P2PErrorCode, message: string, readonly reason?: unknown) {
    super(message);
    this.name = 'P2PError';
  }
}

/** Why a connection was closed: a wire decode error or a protocol rule above the framing. */
export type LostCode =
  | WireCode
  | 'HELLO_EXPECTED'
  | 'UNEXPECTED_HELLO'
  /** The dialler's first frame from the acceptor was not its challenge. */
  | 'CHALLENGE_EXPECTED'
  /** A challenge where none belongs: to an acceptor, or a second one. */
  | 'UNEXPECTED_CHALLENGE'
  /** A hello whose MAC does not verify under the task key for this connection's nonces: a
   *  forger, a replay from another connection, or another task's process (PROTOCOL §9.5). */
  | 'BAD_MAC'
  /** No authenticated hello within UNAUTHENTICATED_TIMEOUT_MS of the accept. */
  | 'AUTH_TIMEOUT'
  | 'WRONG_TASK'
  /** A hello from a VPID that may not use this connection: not the one dialled, not higher
   *  than ours on an accepted one, or removed. */
  | 'WRONG_ID'
  | 'DUPLICATE_PEER'
  | 'BAD_SENDER'
  | 'BAD_SEQUENCE'
  /** Over MAX_UNAUTHENTICATED_* (closed before its challenge) or MAX_UNATTRIBUTED_CONNECTIONS. */
  | 'TOO_MANY_CONNECTIONS'
  | 'SOCKET_CLOSED'
  | 'SOCKET_ERROR'
  /** removePeer() closed it (logged, never reported as a loss). */
  | 'REMOVED'
  /** The peer finalized and said so (a bye frame): an ending, never reported as a loss. */
  | 'FINISHED';
export type LostReason = { readonly code: LostCode; readonly detail: string };
export type P2PLogEvent = { readonly type: 'connection.closed'; readonly id: number | null; readonly reason: LostReason };

export type PeerAddress = { readonly id: number; readonly host: string; readonly port: number };

export type P2POptions = {
  readonly taskId: string;
  /** This process's VPID. */
  readonly self: number;
  /** The task key (TASK_KEY_BYTES, PROTOCOL §9.5). Gmpi sets it after open (setTaskKey), once
   *  the agent has handed it over; connect() needs it. */
  readonly taskKey?: Uint8Array;
  /** UNAUTHENTICATED_TIMEOUT_MS unless given (tests). */
  readonly authTimeoutMs?: number;
  readonly listenHost?: string;
  readonly maxMessageBytes?: number;
  /** Per peer (DEFAULT_MAX_UNEXPECTED_BYTES). */
  readonly maxUnexpectedBytes?: number;
  /** Raised once per peer when its connection breaks (spec §5.4 LOCAL_CONNECTION). */
  readonly onConnectionLost?: (id: number, reason: LostReason) => void;
  readonly log?: (event: P2PLogEvent) => void;
};

export type P2PStats = {
  readonly unexpectedMessages: number;
  readonly unexpectedBytes: number;
  readonly pendingRecvs: number;
  /** Connections paused because their peer's share of the unexpected queue is full
   *  (backpressure). */
  readonly pausedConnections: number;
  /** Accepted connections whose hello names a VPID not yet expected. */
  readonly heldConnections: number;
  /** Accepted connections not authenticated yet (PROTOCOL §9.5). */
  readonly unauthenticatedConnections: number;
  /** Messages dropped because their communicator was discarded or their sender removed. */
  readonly discardedMessages: number;
};
