// G-MPI's public types, constants and errors (spec §5), and the mapping of the layers' errors
// (P2P, link) onto G-MPI's return codes. gmpi.ts is the behaviour.
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../../core/signals.ts';
import type { Member } from '../../core/wire/app-wire.ts';
import { LinkError } from '../link/errors.ts';
import type { LinkOptions } from '../link/link-types.ts';
import { P2PError } from './p2p-types.ts';
import type { RegisteredState } from '../rollback/runtime.ts';

// ---- constants ---------------------------------------------------------------------------------

/** Return codes (spec §5: MPI_SUCCESS, MPI_RECOVERED, MPI_ERR_ALERT). */
export type InitCode = 'SUCCESS' | 'RECOVERED' | 'ERR_ALERT';
export type RecoverCode = 'SUCCESS' | 'ERR_ALERT';

/** Table 4.2 (G_MPI_SIG_*) and Table 4.3 (local signals). The local signals' numbers are ours. */
export const G_MPI_SIG = {
  ...GSIG,
  /** A broken P2P connection with rank `arg` (spec §5.4). */
  LOCAL_CONNECTION: 30,
  /** A timer expired; `arg` is the timer's argument (spec §5.4). */
  LOCAL_ALARM: 31,
  /** Pseudo-ranks for G_MPI_Signal's destination and a handler's source. */
  CLUSTER_MANAGER: GSIG_CM,
  BROADCAST: GSIG_BROADCAST,
} as const;

/** The SYNC value recoverComm agrees on: all callers must send the same arg (spec §4.5). */
export const RECOVER_SYNC_ARG = 0x474d5049; // 'GMPI'

export type GmpiErrorCode = 'ERR_ALERT' | 'BAD_RANK' | 'BAD_TAG' | 'BAD_ARGUMENT' | 'TOO_LARGE' | 'BAD_PAYLOAD' | 'CLOSED' | 'LIMIT' | 'NOT_CONNECTED' | 'PEER_FINISHED';

export class GmpiError extends Error {
  constructor(readonly code: GmpiErrorCode, message: string, override readonly cause?: unknown) {
    super(message);
    this.name = 'GmpiError';
  }
}

/** handler(signum, srcRank, destRank, arg) of spec §5.3: ranks in the current world
 *  communicator; src = CLUSTER_MANAGER for the manager; dest = BROADCAST for a broadcast;
 *  src = dest = own rank for a local signal. A dead process's rank stays valid until
 *  recoverComm(); a rank not in the communicator (a spawned process) is -1. */
export type GmpiHandler = (signum: number, srcRank: number, destRank: number, arg: number) => void;

export type GmpiOptions = LinkOptions & {
  /** A DGRP task's test (PROTOCOL §12.2): a module URL whose default export is a DgrpTest
   *  (src/app/dgrp/challenge.ts); without it, the paper's primes test. */
  readonly dgrpTest?: string;
  /** Address the P2P listener binds and advertises: TRINE_NODE_HOST on a cluster of several
   *  hosts, else the one-host default LOOPBACK_HOST (DESIGN.md §6). */
  readonly host?: string;
  /** Largest message a send may carry (and a peer may send us): larger is TOO_LARGE. */
  readonly maxMessageBytes?: number;
  /** Arrived, unreceived message bytes held per peer before reading from that peer stops
   *  (backpressure). */
  readonly maxUnexpectedBytes?: number;
  /** The application's state, for a task with rollback recovery (PROTOCOL §11.3): hooks
   *  `{ save(): Uint8Array; restore(bytes) }`, or a plain object the library encodes and
   *  restores in place. A replacement gets it restored before init returns. */
  readonly state?: RegisteredState;
};

export function mapError(e: unknown): GmpiError {
  if (e instanceof GmpiError) return e;
  if (e instanceof P2PError) {
    switch (e.code) {
      case 'ABORTED':
        return new GmpiError('ERR_ALERT', 'MPI_ERR_ALERT: the alert flag is raised or the communicator is invalid', e);
      case 'PEER_LOST':
      case 'PEER_REMOVED':
        return new GmpiError('ERR_ALERT', `MPI_ERR_ALERT: ${e.message}`, e);
      case 'BAD_RANK':
      case 'BAD_TAG':
      case 'TOO_LARGE':
      case 'BAD_PAYLOAD':
      case 'LIMIT':
      case 'CLOSED':
      case 'NOT_CONNECTED':
      case 'PEER_FINISHED':
        return new GmpiError(e.code, e.message, e);
      default:
        return new GmpiError('BAD_ARGUMENT', e.message, e);
    }
  }
  if (e instanceof LinkError) return new GmpiError('BAD_ARGUMENT', e.message, e);
  return new GmpiError('BAD_ARGUMENT', String(e), e);
}

/** A member's (or a DGRP view entry's) `host:port`, or null if it is not one. */
export const parseEndpoint = (m: Pick<Member, 'endpoint'>): { host: string; port: number } | null => {
  const i = m.endpoint.lastIndexOf(':');
  if (i <= 0) return null;
  const port = Number(m.endpoint.slice(i + 1));
  return Number.isInteger(port) && port > 0 && port <= 0xffff ? { host: m.endpoint.slice(0, i), port } : null;
};
