// A process's epoch and its one outstanding request (spec §4.4, §4.6): pure state, no I/O.
// The library attaches the current epoch to every request; each delivered broadcast sets the
// epoch (rule 4) and classifies the outstanding request with classifyReply: the manager always
// shows its answer in the very next broadcast. An 'own-ack' leaves the group request "acked"
// until its reply arrives (Fig. 4.7): error notifications may come first, and no new group
// request may be sent meanwhile. A process with no pending group request that receives
// GSIG_ERR_DISAGREE must enter self-diagnosis (spec §4.6, §9.1 item 76).
import {
  classifyReply, GSIG, GSIG_BROADCAST, GSIG_CM, type ReplyClass, type Signal, type SignalRequest,
} from '../../core/signals.ts';

export type RequestOutcome = {
  readonly class: ReplyClass;
  /** The request this classifies (with the epoch it carried). */
  readonly request: SignalRequest;
  /** The broadcast that classified it. */
  readonly signal: Signal;
};

/** Why a new request may not be sent now, or null. */
export type SendRefusal = 'REQUEST_OUTSTANDING' | 'ACK_PENDING' | null;

export type BroadcastEffect = {
  /** In order: the acked request's reply first, then the outstanding request's class. */
  readonly outcomes: readonly RequestOutcome[];
  /** The DISAGREE rule: no pending group request, yet GSIG_ERR_DISAGREE arrived. */
  readonly selfDiagnosis: boolean;
};

export const isRequestDest = (dest: number): boolean => dest === GSIG_BROADCAST || dest === GSIG_CM;

export class RequestTracker {
  private epochNow: number;
  /** Sent, not yet classified. */
  private pending: SignalRequest | null = null;
  /** A group request whose ACK came; waiting for its reply. */
  private ackedRequest: SignalRequest | null = null;
  /** The ACK's arg: the VPID the acked KILL or SPAWN is about. */
  private ackedArg = -1;

  constructor(private readonly self: number, epoch: number) {
    this.epochNow = epoch;
  }

  get epoch(): number {
    return this.epochNow;
  }

  get outstanding(): SignalRequest | null {
    return this.pending;
  }

  get acked(): SignalRequest | null {
    return this.ackedRequest;
  }

  /** A request whose outcome or reply is still to come. */
  get busy(): boolean {
    return this.pending !== null || this.ackedRequest !== null;
  }

  /** May a request to `dest` be sent now? Point-to-point signals always may. */
  refusal(dest: number): SendRefusal {
    if (!isRequestDest(dest)) return null;
    if (this.pending !== null) return 'REQUEST_OUTSTANDING';
    if (dest === GSIG_CM && this.ackedRequest !== null) return 'ACK_PENDING';
    return null;
  }

  /** The request to send for (signum, dest, arg), carrying the current epoch; records it as
   *  outstanding when it is a broadcast or group request. The caller checked refusal(). */
  send(signum: number, dest: number, arg: number): SignalRequest {
    const req: SignalRequest = { signum, dest, arg, epoch: this.epochNow };
    if (isRequestDest(dest)) this.pending = req;
    return req;
  }

  /** A delivered broadcast (dest = GSIG_BROADCAST). */
  onBroadcast(b: Signal): BroadcastEffect {
    this.epochNow = b.epoch;
    const hadGroupRequest = this.pending?.dest === GSIG_CM || this.ackedRequest !== null;
    const outcomes: RequestOutcome[] = [];
    const acked = this.ackedRequest;
    if (acked !== null && classifyReply(acked, this.self, b) === 'own-reply') {
      this.ackedRequest = null;
      outcomes.push({ class: 'own-reply', request: acked, signal: b });
    } else if (acked !== null && acked.signum === GSIG.REQ_SPAWN && b.src === GSIG_CM && b.signum === GSIG.NTF_DIED && b.arg === this.ackedArg) {
      // The spawn it acknowledged failed: NTF_DIED of the new process completes it.
      this.ackedRequest = null;
      outcomes.push({ class: 'own-failed', request: acked, signal: b });
    }
    const pending = this.pending;
    if (pending !== null) {
      const cls = classifyReply(pending, this.self, b);
      this.pending = null;
      if (cls === 'own-ack') {
        this.ackedRequest = pending;
        this.ackedArg = b.arg;
      }
      outcomes.push({ class: cls, request: pending, signal: b });
    }
    const selfDiagnosis = b.src === GSIG_CM && b.signum === GSIG.ERR_DISAGREE && !hadGroupRequest;
    return { outcomes, selfDiagnosis };
  }
}
