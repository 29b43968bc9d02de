// src/daemon/keeper.ts: the keeper's `go`, as its standby agent reads it (spec §1.4; issue 19
// item 2). It carries the keeper's restarts of the agent, by reason, which the agent's metrics
// show as trine_keeper_restarts_total (docs/OPERATIONS.md §9): the reading is total, so a count
// it cannot read is 0 and never stops a promotion, and anything but `go` is not one.
import { describe, expect, it } from 'vitest';
import { readGo, type KeeperToAgent } from '../../../src/daemon/keeper.ts';
import { agentSample } from '../../../src/daemon/metrics-sample.ts';
import { makeCluster } from '../core/harness.ts';

describe("the keeper's go carries its restarts of the agent", () => {
  it('a go as the keeper sends it reads back whole', () => {
    const go: KeeperToAgent = { type: 'go', restarts: { exit: 3, hang: 1 } };
    // What the IPC channel delivers is the message's JSON.
    expect(readGo(JSON.parse(JSON.stringify(go)))).toEqual(go);
  });

  it('anything but go is null; a count it cannot read is 0', () => {
    for (const m of [null, undefined, 'go', 7, [], { type: 'heartbeat' }, { type: 'standby.ready' }, { restarts: { exit: 1, hang: 0 } }]) {
      expect(readGo(m), JSON.stringify(m)).toBeNull();
    }
    const zero = { type: 'go', restarts: { exit: 0, hang: 0 } };
    expect(readGo({ type: 'go' })).toEqual(zero);
    expect(readGo({ type: 'go', restarts: 'many' })).toEqual(zero);
    expect(readGo({ type: 'go', restarts: { exit: -1, hang: 1.5 } })).toEqual(zero);
    expect(readGo({ type: 'go', restarts: { exit: '2', hang: 2 ** 60 } })).toEqual(zero);
    expect(readGo({ type: 'go', restarts: { exit: 2 } })).toEqual({ type: 'go', restarts: { exit: 2, hang: 0 } });
  });

  it("the count reaches the agent's metrics sample; without a keeper, or before the protector listens, the sample has none", () => {
    const c = makeCluster(1);
    const a1 = c.agents[0];
    if (a1 === undefined) throw new Error('harness has no a1');
    const status = a1.status(c.now());
    expect(agentSample(status, 0, { keeperRestarts: { exit: 1, hang: 0 } }).keeperRestarts).toEqual({ exit: 1, hang: 0 });
    const bare = agentSample(status, 0, { keeperRestarts: null, protector: null });
    expect('keeperRestarts' in bare || 'protector' in bare).toBe(false);
    expect('keeperRestarts' in agentSample(status, 0)).toBe(false);
  });
});
