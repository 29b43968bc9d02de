// G-MPI signals on delivery (spec §5.2, §5.3): the application's handlers by signal number, the
// one link handler per number that feeds them, and what a delivery does before the handler
// runs: raise again the flags it raised on arrival (the application may have cleared them
// since), note it in the recovery ledger (recovery-ledger.ts), expect a spawned member's hello,
// bring P2P in step with the flags; then the translation VPID → rank for the handler. Sending
// (rank → VPID) stays with Gmpi.signal, which owns the world communicator.
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../../core/signals.ts';
import { FLAG } from '../link/flags.ts';
import type { Link } from '../link/link.ts';
import type { DeliveredSignal } from '../link/link-types.ts';
import { G_MPI_SIG, RECOVER_SYNC_ARG, type GmpiHandler } from './gmpi-api.ts';
import type { P2P } from './p2p.ts';
import {
  noteAlertRaised, noteDelivery, noteInvalidRaised, noteMembershipChange, recordSyncPoint, type RecoveryLedger,
} from './recovery-ledger.ts';

const ALERT_SIGNUMS_WITH_RANK_ARG: readonly number[] = [GSIG.NTF_DIED, GSIG.REP_ACK_KILL];

/** What delivery needs of the Gmpi that owns it. */
export type SignalContext = {
  readonly link: Link;
  readonly p2p: P2P;
  readonly ledger: RecoveryLedger;
  /** The rank of a VPID in the world communicator now, -1 if it has none. */
  readonly rankOf: (vpid: number) => number;
  readonly isFinalized: () => boolean;
  /** Whether a spawned member's hello is still taken: until finalize starts, and in a rollback
   *  task until its finalize has closed the rank channels (a replacement may join meanwhile). */
  readonly acceptsPeers: () => boolean;
  /** P2P follows the flags: aborted while either is raised, working when both are clear. */
  readonly syncFlags: () => void;
  /** A rollback task (PROTOCOL §11): a death pauses the dead rank's channels until its
   *  replacement arrives; nothing is invalid and no flag is raised. Null otherwise. */
  readonly onDeath: ((vpid: number) => void) | null;
  /** A rollback task: GSIG_NTF_FINISHED, a rank's holder ended normally (§11.3). Null otherwise. */
  readonly onFinished: ((vpid: number) => void) | null;
};

export type GmpiSignals = {
  readonly ctx: SignalContext;
  readonly handlers: Map<number, GmpiHandler>;
  /** Signal numbers with a link handler installed (one each, never removed). */
  readonly hooked: Set<number>;
  /** Signal numbers that raise the alert flag (alertOn). */
  readonly alertSignums: Set<number>;
};

export function createGmpiSignals(ctx: SignalContext): GmpiSignals {
  return { ctx, handlers: new Map(), hooked: new Set(), alertSignums: new Set() };
}

/** The signals G-MPI itself acts on, whether or not the application handles them. */
export function installInternalHandlers(s: GmpiSignals): void {
  // The communicator is invalid from the moment a crash notification arrives (spec §5.2).
  if (s.ctx.onDeath === null) s.ctx.link.flagOn(FLAG.INVALID, [GSIG.NTF_DIED]);
  for (const signum of [GSIG.NTF_DIED, GSIG.NTF_FINISHED, GSIG.REP_SPAWNED, GSIG.REP_SYNC, G_MPI_SIG.LOCAL_CONNECTION, G_MPI_SIG.LOCAL_ALARM]) hookSignal(s, signum);
}

/** G_MPI_Signal_handler; null removes it. */
export function setSignalHandler(s: GmpiSignals, signum: number, handler: GmpiHandler | null): void {
  if (handler === null) s.handlers.delete(signum);
  else s.handlers.set(signum, handler);
  hookSignal(s, signum);
}

/** Raise the alert flag the moment any of these signals arrives (the link's worker does), and
 *  again when each is delivered. */
export function alertOnSignals(s: GmpiSignals, signums: readonly number[]): void {
  s.ctx.link.alertOn(signums);
  for (const signum of signums) {
    s.alertSignums.add(signum);
    hookSignal(s, signum);
  }
}

/** Manager notifications about a process carry its rank; REP_SPAWNED's is undefined until
 *  recoverComm gives the new process one (spec §5.3): -1. A local signal's is its own. */
export function handlerArg(signum: number, src: number, arg: number, isLocal: boolean, rankOf: (vpid: number) => number): number {
  if (isLocal) return arg;
  if (ALERT_SIGNUMS_WITH_RANK_ARG.includes(signum) && src === GSIG_CM) return rankOf(arg);
  return signum === GSIG.REP_SPAWNED ? -1 : arg;
}

/** One link handler per signal number: it keeps P2P in step with the flags, then calls the
 *  application's handler with ranks. */
function hookSignal(s: GmpiSignals, signum: number): void {
  if (s.hooked.has(signum)) return;
  s.hooked.add(signum);
  s.ctx.link.on(signum, (_s, src, dest, arg, sig) => deliver(s, signum, src, dest, arg, sig));
}

function deliver(s: GmpiSignals, signum: number, src: number, dest: number, arg: number, sig: DeliveredSignal): void {
  const { link, p2p, ledger } = s.ctx;
  noteDelivery(ledger);
  const fromCm = src === GSIG_CM && sig.dest === GSIG_BROADCAST;
  // The link's worker raised the flags when the signal arrived, but the application may
  // have cleared them since (alertClear, recoverComm): delivery raises them again, as the
  // source's handler calling G_MPI_Alert_raise would (spec §5.2, §5.3).
  if (signum === GSIG.NTF_FINISHED && fromCm) s.ctx.onFinished?.(arg);
  if (signum === GSIG.NTF_DIED && fromCm && s.ctx.onDeath !== null) s.ctx.onDeath(arg);
  else if (signum === GSIG.NTF_DIED && fromCm) {
    noteInvalidRaised(ledger);
    link.flagRaise(FLAG.INVALID);
  }
  if (s.alertSignums.has(signum)) {
    noteAlertRaised(ledger);
    link.alertRaise();
  }
  if (fromCm && (signum === GSIG.NTF_DIED || signum === GSIG.REP_SPAWNED)) noteMembershipChange(ledger);
  if (fromCm && signum === GSIG.REP_SPAWNED) {
    if (arg === p2p.self) ledger.spawnedSelf = true;
    else if (arg > p2p.self && s.ctx.acceptsPeers()) p2p.expect([arg]);
  }
  if (fromCm && signum === GSIG.REP_SYNC && arg === RECOVER_SYNC_ARG) {
    recordSyncPoint(ledger, sig.epoch, link.memberList.map((m) => m.vpid));
  }
  if (!s.ctx.isFinalized()) s.ctx.syncFlags();
  const h = s.handlers.get(signum);
  if (h === undefined) return;
  const isLocal = src === p2p.self && dest === p2p.self && sig.dest !== GSIG_BROADCAST;
  const srcRank = src === GSIG_CM ? GSIG_CM : s.ctx.rankOf(src);
  const destRank = dest === GSIG_BROADCAST ? GSIG_BROADCAST : s.ctx.rankOf(dest);
  h(signum, srcRank, destRank, handlerArg(signum, src, arg, isLocal, s.ctx.rankOf));
}

/** P2P lost the connection to `vpid`: G_MPI_SIG_LOCAL_CONNECTION with its rank (spec §5.4
 *  Table 4.3); nothing for a VPID outside the world communicator or once the link is gone. */
export function raiseConnectionLost(s: GmpiSignals, vpid: number): void {
  const rank = s.ctx.rankOf(vpid);
  if (rank < 0 || s.ctx.onDeath !== null || s.ctx.isFinalized() || s.ctx.link.state !== 'ready') return;
  s.ctx.link.raiseLocal(G_MPI_SIG.LOCAL_CONNECTION, rank);
}

/** A timer's LOCAL_ALARM; dropped once the link is gone (a timer callback must not throw). */
export function raiseAlarm(s: GmpiSignals, arg: number): void {
  if (!s.ctx.isFinalized() && s.ctx.link.state === 'ready') s.ctx.link.raiseLocal(G_MPI_SIG.LOCAL_ALARM, arg);
}
