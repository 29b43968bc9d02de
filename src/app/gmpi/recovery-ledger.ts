// G-MPI's recovery ledger (spec §5.5): what recoverComm() needs to know about the signals
// delivered so far, as a typed record (createRecoveryLedger) and pure verbs. It numbers
// deliveries, so a flag raise can be ordered against a REP_SYNC of the recovery barrier; it
// remembers the latest such REP_SYNCs with the membership then, the last membership change,
// and whether this process's own REP_SPAWNED came. gmpi.ts records into it as signals are
// delivered and asks it which barrier to adopt and which flags recovery may clear.

/** REP_SYNCs of the recovery barrier remembered: one answers our request, a later one (a
 *  barrier completed without us after a new crash) may be adopted next; older ones are moot. */
export const MAX_SYNC_POINTS = 4;

/** A REP_SYNC of the recovery barrier as delivered: the members then (spec §5.5: the same at
 *  every process, since broadcasts are atomic) and its place in this process's deliveries. */
export type SyncPoint = { readonly epoch: number; readonly members: readonly number[]; readonly seq: number };

export type RecoveryLedger = {
  /** Deliveries (and alertRaise calls) so far: orders flag raises against a REP_SYNC. */
  seq: number;
  /** seq of the last delivery or call that raised the invalid / alert flag. */
  invalidSeq: number;
  alertSeq: number;
  /** seq of the last membership change delivered (NTF_DIED, REP_SPAWNED). */
  membershipSeq: number;
  /** The latest REP_SYNCs of the recovery barrier, oldest first. */
  syncPoints: SyncPoint[];
  /** This process's own REP_SPAWNED was delivered (a process spawned into a running task). */
  spawnedSelf: boolean;
};

export function createRecoveryLedger(): RecoveryLedger {
  return { seq: 0, invalidSeq: 0, alertSeq: 0, membershipSeq: 0, syncPoints: [], spawnedSelf: false };
}

/** The application raised the alert flag itself (alertRaise): a numbered event of its own. */
export function noteAlertCall(l: RecoveryLedger): void {
  l.alertSeq = ++l.seq;
}

/** A signal is being delivered: number it. Then the note* verbs below record what it did. */
export function noteDelivery(l: RecoveryLedger): void {
  l.seq++;
}

export function noteInvalidRaised(l: RecoveryLedger): void {
  l.invalidSeq = l.seq;
}

export function noteAlertRaised(l: RecoveryLedger): void {
  l.alertSeq = l.seq;
}

export function noteMembershipChange(l: RecoveryLedger): void {
  l.membershipSeq = l.seq;
}

/** A REP_SYNC of the recovery barrier, with the membership the broadcasts left then. */
export function recordSyncPoint(l: RecoveryLedger, epoch: number, members: readonly number[]): void {
  l.syncPoints.push({ epoch, members, seq: l.seq });
  if (l.syncPoints.length > MAX_SYNC_POINTS) l.syncPoints.shift();
}

/** The REP_SYNC that answered our request, if still remembered. */
export function syncPointAt(l: RecoveryLedger, epoch: number): SyncPoint | null {
  return l.syncPoints.find((p) => p.epoch === epoch) ?? null;
}

/** A REP_SYNC of the recovery barrier that completed without our request (the quorum is
 *  below the membership) after the current communicator (id `worldId`) was built, with no
 *  membership change since: the others built their communicator from it, so must we. */
export function adoptableSync(l: RecoveryLedger, worldId: number): SyncPoint | null {
  const p = l.syncPoints.at(-1);
  return p !== undefined && p.epoch > worldId && p.seq > l.membershipSeq ? p : null;
}

/** Which flags recovery at `point` clears: a flag raised by a delivery after REP_SYNC stays
 *  raised, since that notification concerns the new communicator. */
export function flagsClearedBy(l: RecoveryLedger, point: SyncPoint): { readonly invalid: boolean; readonly alert: boolean } {
  return { invalid: l.invalidSeq <= point.seq, alert: l.alertSeq <= point.seq };
}
