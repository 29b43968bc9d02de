// The library's epoch and outstanding-request state (src/app/link/requests.ts; spec §4.4, §4.6):
// epochs follow delivered broadcasts (rule 4) and ride on every request; at most one request is
// outstanding; each class of the following broadcast; an own-ack stays pending until its reply
// (Fig. 4.7) and blocks new group requests; the DISAGREE rule (A8, §9.1 item 76).
import { describe, expect, it } from 'vitest';
import { RequestTracker } from '../../../src/app/link/requests.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM, type Signal } from '../../../src/core/signals.ts';

const SELF = 2;
const cm = (signum: number, arg: number, epoch: number): Signal => ({ signum, src: GSIG_CM, dest: GSIG_BROADCAST, arg, epoch });
const app = (src: number, signum: number, arg: number, epoch: number): Signal => ({ signum, src, dest: GSIG_BROADCAST, arg, epoch });

describe('RequestTracker', () => {
  it('attaches the mapping epoch, then the epoch of each delivered broadcast (spec §4.6 rule 4)', () => {
    const t = new RequestTracker(SELF, 7);
    expect(t.send(100, 1, 0).epoch).toBe(7);
    t.onBroadcast(app(1, 100, 0, 8));
    expect(t.epoch).toBe(8);
    expect(t.send(GSIG.REQ_SYNC, GSIG_CM, 3)).toEqual({ signum: GSIG.REQ_SYNC, dest: GSIG_CM, arg: 3, epoch: 8 });
  });

  it('point-to-point signals are not requests; a second broadcast or group request is refused', () => {
    const t = new RequestTracker(SELF, 0);
    t.send(100, 1, 0);
    expect(t.busy).toBe(false);
    t.send(100, GSIG_BROADCAST, 1);
    expect(t.refusal(GSIG_BROADCAST)).toBe('REQUEST_OUTSTANDING');
    expect(t.refusal(GSIG_CM)).toBe('REQUEST_OUTSTANDING');
    expect(t.refusal(1)).toBeNull();
  });

  const cases: [string, number, number, Signal, string][] = [
    ['own broadcast', 100, GSIG_BROADCAST, app(SELF, 100, 5, 1), 'own-broadcast'],
    ['another process wins the epoch', 100, GSIG_BROADCAST, app(1, 100, 5, 1), 'dropped'],
    ['own reply', GSIG.REQ_SYNC, GSIG_CM, cm(GSIG.REP_SYNC, 5, 1), 'own-reply'],
    ['spawn reply with another arg', GSIG.REQ_SPAWN, GSIG_CM, cm(GSIG.REP_SPAWNED, 9, 1), 'own-reply'],
    ['own ack', GSIG.REQ_KILL, GSIG_CM, cm(GSIG.REP_ACK_KILL, 5, 1), 'own-ack'],
    ['reply to a request we were not part of', GSIG.REQ_SYNC, GSIG_CM, cm(GSIG.REP_SYNC, 6, 1), 'other-reply'],
    ['ack to a request we were not part of', GSIG.REQ_SYNC, GSIG_CM, cm(GSIG.REP_ACK_SPAWN, 0, 1), 'other-ack'],
    ['no quorum', GSIG.REQ_SYNC, GSIG_CM, cm(GSIG.ERR_DISAGREE, 5, 1), 'disagree'],
    ['a crash notification', GSIG.REQ_SYNC, GSIG_CM, cm(GSIG.NTF_DIED, 3, 1), 'dropped'],
  ];
  for (const [name, signum, dest, b, cls] of cases) {
    it(`classifies the next broadcast: ${name} → ${cls}`, () => {
      const t = new RequestTracker(SELF, 0);
      const req = t.send(signum, dest, 5);
      const effect = t.onBroadcast(b);
      expect(effect.outcomes).toEqual([{ class: cls, request: req, signal: b }]);
      expect(t.outstanding).toBeNull();
    });
  }

  it('after an own-ack no group request until the reply; notifications in between do not complete it', () => {
    const t = new RequestTracker(SELF, 0);
    const kill = t.send(GSIG.REQ_KILL, GSIG_CM, 3);
    t.onBroadcast(cm(GSIG.REP_ACK_KILL, 3, 1));
    expect(t.acked).toEqual(kill);
    expect(t.refusal(GSIG_CM)).toBe('ACK_PENDING');
    expect(t.refusal(GSIG_BROADCAST)).toBeNull();
    expect(t.onBroadcast(cm(GSIG.NTF_DIED, 1, 2)).outcomes).toEqual([]);
    expect(t.acked).toEqual(kill);
    const done = t.onBroadcast(cm(GSIG.NTF_DIED, 3, 3));
    expect(done.outcomes.map((o) => o.class)).toEqual(['own-reply']);
    expect(t.acked).toBeNull();
    expect(t.refusal(GSIG_CM)).toBeNull();
  });

  it('a SPAWN that was acked and then failed: NTF_DIED of the new VPID completes it (own-failed)', () => {
    const t = new RequestTracker(SELF, 0);
    t.send(GSIG.REQ_SPAWN, GSIG_CM, 0);
    expect(t.onBroadcast(cm(GSIG.REP_ACK_SPAWN, 9, 1)).outcomes.map((o) => o.class)).toEqual(['own-ack']);
    expect(t.refusal(GSIG_CM)).toBe('ACK_PENDING');
    // Another process's death does not complete it; the new process's does.
    expect(t.onBroadcast(cm(GSIG.NTF_DIED, 1, 2)).outcomes).toEqual([]);
    expect(t.onBroadcast(cm(GSIG.NTF_DIED, 9, 3)).outcomes.map((o) => o.class)).toEqual(['own-failed']);
    expect(t.refusal(GSIG_CM)).toBeNull();
    expect(t.busy).toBe(false);
  });

  it('A8: DISAGREE with no pending group request asks for self-diagnosis; with one it is its class', () => {
    const idle = new RequestTracker(SELF, 0);
    expect(idle.onBroadcast(cm(GSIG.ERR_DISAGREE, 0, 1)).selfDiagnosis).toBe(true);
    const broadcasting = new RequestTracker(SELF, 0);
    broadcasting.send(100, GSIG_BROADCAST, 1);
    const e1 = broadcasting.onBroadcast(cm(GSIG.ERR_DISAGREE, 0, 1));
    expect(e1.selfDiagnosis).toBe(true);
    expect(e1.outcomes.map((o) => o.class)).toEqual(['dropped']);
    const requesting = new RequestTracker(SELF, 0);
    requesting.send(GSIG.REQ_SYNC, GSIG_CM, 1);
    const e2 = requesting.onBroadcast(cm(GSIG.ERR_DISAGREE, 1, 1));
    expect(e2.selfDiagnosis).toBe(false);
    expect(e2.outcomes.map((o) => o.class)).toEqual(['disagree']);
    const acked = new RequestTracker(SELF, 0);
    acked.send(GSIG.REQ_SPAWN, GSIG_CM, 0);
    acked.onBroadcast(cm(GSIG.REP_ACK_SPAWN, 0, 1));
    expect(acked.onBroadcast(cm(GSIG.ERR_DISAGREE, 0, 2)).selfDiagnosis).toBe(false);
  });

  it('a broadcast request sent while acked is classified on its own; the reply completes the ack', () => {
    const t = new RequestTracker(SELF, 0);
    t.send(GSIG.REQ_SPAWN, GSIG_CM, 0);
    t.onBroadcast(cm(GSIG.REP_ACK_SPAWN, 0, 1));
    t.send(100, GSIG_BROADCAST, 4);
    const e = t.onBroadcast(cm(GSIG.REP_SPAWNED, 7, 2));
    expect(e.outcomes.map((o) => [o.request.signum, o.class])).toEqual([[GSIG.REQ_SPAWN, 'own-reply'], [100, 'dropped']]);
    expect(t.busy).toBe(false);
  });
});
