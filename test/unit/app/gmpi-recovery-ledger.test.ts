// G-MPI's recovery ledger (src/app/gmpi/recovery-ledger.ts) stepped by hand, spec §5.5: which
// REP_SYNC recoverComm adopts without a request, and which flags a recovery may clear.
import { describe, expect, it } from 'vitest';
import {
  adoptableSync, createRecoveryLedger, flagsClearedBy, MAX_SYNC_POINTS, noteAlertCall, noteAlertRaised, noteDelivery, noteInvalidRaised,
  noteMembershipChange, recordSyncPoint, syncPointAt,
} from '../../../src/app/gmpi/recovery-ledger.ts';

describe('gmpi recovery ledger', () => {
  it('a flag raised before the REP_SYNC is cleared by recovery; one raised after stays', () => {
    const l = createRecoveryLedger();
    noteDelivery(l); // NTF_DIED: invalid
    noteInvalidRaised(l);
    noteMembershipChange(l);
    noteDelivery(l); // REP_SYNC
    recordSyncPoint(l, 7, [1, 2]);
    const point = syncPointAt(l, 7);
    expect(point).toEqual({ epoch: 7, members: [1, 2], seq: 2 });
    noteAlertCall(l); // the application raises the alert after the barrier
    expect(flagsClearedBy(l, point!)).toEqual({ invalid: true, alert: false });
  });

  it('a barrier completed without our request is adoptable only if newer than the world and no membership change followed', () => {
    const l = createRecoveryLedger();
    noteDelivery(l);
    recordSyncPoint(l, 5, [1, 2, 3]);
    expect(adoptableSync(l, 0)?.epoch).toBe(5);
    expect(adoptableSync(l, 5)).toBeNull(); // already built from it
    noteDelivery(l); // NTF_DIED after it
    noteMembershipChange(l);
    noteInvalidRaised(l);
    expect(adoptableSync(l, 0)).toBeNull();
    noteDelivery(l);
    recordSyncPoint(l, 6, [1, 2]);
    expect(adoptableSync(l, 5)?.members).toEqual([1, 2]);
  });

  it('an alert raised by a delivered signal is ordered like the delivery', () => {
    const l = createRecoveryLedger();
    noteDelivery(l);
    recordSyncPoint(l, 3, [1]);
    noteDelivery(l);
    noteAlertRaised(l);
    expect(flagsClearedBy(l, syncPointAt(l, 3)!)).toEqual({ invalid: true, alert: false });
  });

  it(`remembers the latest ${MAX_SYNC_POINTS} REP_SYNCs only`, () => {
    const l = createRecoveryLedger();
    for (let e = 1; e <= MAX_SYNC_POINTS + 1; e++) {
      noteDelivery(l);
      recordSyncPoint(l, e, []);
    }
    expect(syncPointAt(l, 1)).toBeNull();
    expect(syncPointAt(l, 2)?.epoch).toBe(2);
  });
});
