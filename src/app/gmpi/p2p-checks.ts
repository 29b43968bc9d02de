// The checks of what P2P's callers pass (p2p.ts): its options at open and the peer list of
// connect(), each refused with BAD_ARGUMENT (or PEER_REMOVED) naming what is wrong, before
// anything is opened or dialled; a communicator id a call names; and the error for a call that
// names a peer whose connection ended (lost or finished).
import { isTaskKey, TASK_KEY_BYTES } from './hello-auth.ts';
import { DEFAULT_MAX_UNEXPECTED_BYTES, P2PError, type P2POptions, type PeerAddress } from './p2p-types.ts';
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_CONFIGURABLE_MESSAGE_BYTES, MAX_U32 } from './wire.ts';

export const isU32 = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_U32;

/** P2P.open's options, checked; the message bounds they set. Throws P2PError BAD_ARGUMENT. */
export function checkP2POptions(opts: P2POptions): { readonly maxMessageBytes: number; readonly maxUnexpectedBytes: number } {
  if (!isU32(opts.self)) throw new P2PError('BAD_ARGUMENT', `self ${opts.self} is not a u32 VPID`);
  const maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (!Number.isInteger(maxMessageBytes) || maxMessageBytes < 0 || maxMessageBytes > MAX_CONFIGURABLE_MESSAGE_BYTES) {
    throw new P2PError('BAD_ARGUMENT', `maxMessageBytes ${maxMessageBytes} not in 0..${MAX_CONFIGURABLE_MESSAGE_BYTES}`);
  }
  const maxUnexpectedBytes = opts.maxUnexpectedBytes ?? DEFAULT_MAX_UNEXPECTED_BYTES;
  if (!Number.isInteger(maxUnexpectedBytes) || maxUnexpectedBytes < 1) throw new P2PError('BAD_ARGUMENT', `maxUnexpectedBytes ${maxUnexpectedBytes}`);
  if (opts.taskKey !== undefined && !isTaskKey(opts.taskKey)) throw new P2PError('BAD_ARGUMENT', `taskKey must be ${TASK_KEY_BYTES} bytes`);
  if (opts.authTimeoutMs !== undefined && (!Number.isSafeInteger(opts.authTimeoutMs) || opts.authTimeoutMs < 1)) {
    throw new P2PError('BAD_ARGUMENT', `authTimeoutMs ${opts.authTimeoutMs}`);
  }
  return { maxMessageBytes, maxUnexpectedBytes };
}

/** connect()'s peer list: u32 ids, each once, valid addresses, none removed. The error, else null. */
export function checkPeerList(peers: readonly PeerAddress[], removed: ReadonlySet<number>): P2PError | null {
  const seen = new Set<number>();
  for (const p of peers) {
    if (!isU32(p.id) || seen.has(p.id)) return new P2PError('BAD_ARGUMENT', `peer list: id ${p.id} not a u32 or repeated`);
    if (typeof p.host !== 'string' || !Number.isInteger(p.port) || p.port < 0 || p.port > 0xffff) return new P2PError('BAD_ARGUMENT', `peer ${p.id}: address ${String(p.host)}:${p.port}`);
    if (removed.has(p.id)) return new P2PError('PEER_REMOVED', `peer ${p.id} was removed`);
    seen.add(p.id);
  }
  return null;
}

export const finishedError = (id: number): P2PError => new P2PError('PEER_FINISHED', `peer ${id} finalized: it sends and receives nothing more`);

/** A call naming peer `id` in this state: PEER_LOST or PEER_FINISHED once its connection ended, else null. */
export function endedPeerError(state: 'expected' | 'connected' | 'lost' | 'finished' | undefined, id: number): P2PError | null {
  if (state === 'lost') return new P2PError('PEER_LOST', `connection to ${id} is lost`);
  if (state === 'finished') return finishedError(id);
  return null;
}

/** A communicator id a send or receive names: BAD_COMM if not a u32 or discarded, else null. */
export function commError(comm: number, discarded: ReadonlySet<number>): P2PError | null {
  if (!isU32(comm)) return new P2PError('BAD_COMM', `comm ${comm}`);
  if (discarded.has(comm)) return new P2PError('BAD_COMM', `communicator ${comm} was discarded`);
  return null;
}
