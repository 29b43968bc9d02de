// gmpi-signals.ts: the argument a G-MPI handler sees (spec §5.3), translated by hand.
import { describe, expect, it } from 'vitest';
import { GSIG, GSIG_CM } from '../../../src/core/signals.ts';
import { handlerArg } from '../../../src/app/gmpi/gmpi-signals.ts';

const rankOf = (vpid: number): number => (vpid === 7 ? 2 : -1);

describe('handlerArg', () => {
  it("gives a manager notification's process as its rank, -1 outside the communicator", () => {
    expect(handlerArg(GSIG.NTF_DIED, GSIG_CM, 7, false, rankOf)).toBe(2);
    expect(handlerArg(GSIG.REP_ACK_KILL, GSIG_CM, 9, false, rankOf)).toBe(-1);
  });
  it("gives REP_SPAWNED's new process -1: it has no rank until recoverComm", () => {
    expect(handlerArg(GSIG.REP_SPAWNED, GSIG_CM, 7, false, rankOf)).toBe(-1);
  });
  it('passes a local signal and a peer signal argument through', () => {
    expect(handlerArg(GSIG.NTF_DIED, 3, 7, true, rankOf)).toBe(7);
    expect(handlerArg(GSIG.NTF_DIED, 3, 7, false, rankOf)).toBe(7);
  });
});
