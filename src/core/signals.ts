// Ghidrah signals (spec §4; docs/PROTOCOL.md §9): the numbers, addresses and reply rules that
// the manager, the agents and the application library share. Pure constants and functions.
//
// A signal is (signum, src, dest, arg, epoch). src and dest are VPIDs, or the two pseudo
// addresses GSIG_CM (the cluster manager) and GSIG_BROADCAST (every process of the task). On the
// wire they are u32s; the pseudo addresses are the two largest, far above any VPID.

/** The cluster manager as source (its notifications and replies) or destination (a group request). */
export const GSIG_CM = 0xffffffff;
/** Every process of the task, the sender included (spec §4.1). */
export const GSIG_BROADCAST = 0xfffffffe;

/** Table 4.1, numbered by us (the source gives no numbers). App-restart and App-terminate are
 *  the FsmTask legend's task-level group requests (spec §4.3, §9.1 item 98); their names are ours. */
export const GSIG = {
  REQ_SETQUORUM: 1,
  REQ_KILL: 2,
  REQ_SPAWN: 3,
  REQ_SYNC: 4,
  REQ_RESTART: 5,
  REQ_TERMINATE: 6,
  NTF_DIED: 20,
  REP_QUORUMSET: 21,
  REP_ACK_KILL: 22,
  REP_ACK_SPAWN: 23,
  REP_SPAWNED: 24,
  REP_SYNC: 25,
  ERR_DISAGREE: 26,
  /** Ours (PROTOCOL §11.3): a rollback rank's holder ended normally (arg: its VPID). */
  NTF_FINISHED: 27,
  /** Ours (PROTOCOL §13.3): the manager flagged a straggler (arg: its VPID) or unflagged one
   *  (arg: −1 − its VPID, so VPID 0 has a negative form too). Never followed by a kill. */
  NTF_STRAGGLER: 28,
} as const;
export type GsigName = keyof typeof GSIG;

/** Signal numbers below this are Trine's; applications number theirs from here (the spec's
 *  example uses APP_SIG_HANG = 100). */
export const MIN_APP_SIGNAL = 100;
/** Largest application signal number. */
export const MAX_SIGNAL = 0xffff;
/** Signal arguments are C ints in the source: signed 32-bit. */
export const MIN_SIGNAL_ARG = -0x80000000;
export const MAX_SIGNAL_ARG = 0x7fffffff;

export const GROUP_REQUESTS: readonly number[] = [
  GSIG.REQ_SETQUORUM, GSIG.REQ_KILL, GSIG.REQ_SPAWN, GSIG.REQ_SYNC, GSIG.REQ_RESTART, GSIG.REQ_TERMINATE,
];
export const isGroupRequest = (signum: number): boolean => GROUP_REQUESTS.includes(signum);
export const isAppSignal = (signum: number): boolean =>
  Number.isInteger(signum) && signum >= MIN_APP_SIGNAL && signum <= MAX_SIGNAL;
export const isSignalArg = (arg: number): boolean =>
  Number.isInteger(arg) && arg >= MIN_SIGNAL_ARG && arg <= MAX_SIGNAL_ARG;

/** The reply that completes each group request (spec §4.3). Restart and terminate have none:
 *  the task's processes are terminated. */
export const REPLY_OF: Readonly<Record<number, number>> = {
  [GSIG.REQ_SETQUORUM]: GSIG.REP_QUORUMSET,
  [GSIG.REQ_KILL]: GSIG.NTF_DIED,
  [GSIG.REQ_SPAWN]: GSIG.REP_SPAWNED,
  [GSIG.REQ_SYNC]: GSIG.REP_SYNC,
};
export const ACK_OF: Readonly<Record<number, number>> = {
  [GSIG.REQ_KILL]: GSIG.REP_ACK_KILL,
  [GSIG.REQ_SPAWN]: GSIG.REP_ACK_SPAWN,
};

export type Signal = { signum: number; src: number; dest: number; arg: number; epoch: number };
/** What a process asks (dest: a VPID, GSIG_BROADCAST or GSIG_CM); src is the agent's word. */
export type SignalRequest = { signum: number; dest: number; arg: number; epoch: number };

/** How the library reads the first broadcast after its request (spec §4.4, §4.6, §9.1 item 75). */
export type ReplyClass =
  /** A broadcast request of ours, performed: our own broadcast came back. */
  | 'own-broadcast'
  /** Our group request was accepted and performed. */
  | 'own-reply'
  /** Our group request was initiated; error notifications, then the reply, follow. */
  | 'own-ack'
  /** Our acked SPAWN failed: GSIG_NTF_DIED of the process it had started answers it (the new
   *  process never ran; PROTOCOL §9.2 item 9). Only ever the completion of an 'own-ack'. */
  | 'own-failed'
  /** A reply or ack to a group request we were not part of. */
  | 'other-reply'
  | 'other-ack'
  | 'disagree'
  /** Anything else: our request was dropped. */
  | 'dropped';

const REPLIES: readonly number[] = [GSIG.REP_QUORUMSET, GSIG.NTF_DIED, GSIG.REP_SPAWNED, GSIG.REP_SYNC];
const ACKS: readonly number[] = [GSIG.REP_ACK_KILL, GSIG.REP_ACK_SPAWN];

/** Classify broadcast `b` against the process's outstanding request `req` sent by `self`. */
export function classifyReply(req: SignalRequest, self: number, b: Signal): ReplyClass {
  if (req.dest === GSIG_BROADCAST) {
    return b.src === self && b.signum === req.signum && b.arg === req.arg ? 'own-broadcast' : 'dropped';
  }
  if (req.dest !== GSIG_CM) return 'dropped';
  if (b.src !== GSIG_CM) return 'dropped';
  if (b.signum === GSIG.ERR_DISAGREE) return 'disagree';
  const reply = REPLY_OF[req.signum];
  const ack = ACK_OF[req.signum];
  // REP_SPAWNED answers REQ_SPAWN whatever its arg (spec §4.4's exception); the others echo arg.
  if (reply !== undefined && b.signum === reply && (b.signum === GSIG.REP_SPAWNED || b.arg === req.arg)) return 'own-reply';
  if (ack !== undefined && b.signum === ack && (b.signum === GSIG.REP_ACK_SPAWN || b.arg === req.arg)) return 'own-ack';
  if (ACKS.includes(b.signum)) return 'other-ack';
  // NTF_DIED is both a crash notification and the kill reply: only a kill request can own it.
  if (REPLIES.includes(b.signum) && b.signum !== GSIG.NTF_DIED) return 'other-reply';
  return 'dropped';
}
