// `trine/app`: the library a task's processes link (spec §4, §7). Start with Link.init().
export { Link } from './link/link.ts';
export type { DeliveredSignal, LinkOptions, LinkStats, SignalHandler } from './link/link-types.ts';
export type { LinkState } from './link/lifecycle.ts';
export { LinkError, type LinkErrorCode } from './link/errors.ts';
export { FLAG } from './link/flags.ts';
export { ProgressReporter } from './link/progress.ts';
export { ENV_VARS } from './link/env.ts';
export type { RequestOutcome } from './link/requests.ts';
export {
  GSIG, GSIG_BROADCAST, GSIG_CM, MAX_SIGNAL, MAX_SIGNAL_ARG, MIN_APP_SIGNAL, MIN_SIGNAL_ARG,
  type ReplyClass, type Signal, type SignalRequest,
} from '../core/signals.ts';
export type { Mapping, Member } from '../core/wire/app-wire.ts';
export { Gmpi } from './gmpi/gmpi.ts';
export {
  G_MPI_SIG, GmpiError, RECOVER_SYNC_ARG, type GmpiErrorCode, type GmpiHandler, type GmpiOptions, type InitCode, type RecoverCode,
} from './gmpi/gmpi-api.ts';
export { ANY_SOURCE, ANY_TAG } from './gmpi/matching.ts';
export type { TimerHandle } from './gmpi/timers.ts';
export type { Comm, CommMessage } from './gmpi/comm.ts';
export type { ReduceOp } from './gmpi/collectives.ts';
// The dynamic group of recommended processes (PROTOCOL §12; spec mpichv-dgrp part 2).
export { CommOps } from './gmpi/comm-ops.ts';
export { DgrpGroup, dealWork, type DgrpRound, type DgrpSnapshot } from './dgrp/group.ts';
export { PRIMES_TEST, type DgrpTest } from './dgrp/challenge.ts';
export { assignments, clusterOf, holderOf, partner, replacement } from './dgrp/hypercube.ts';
export type { TesterStats } from './dgrp/tester.ts';
