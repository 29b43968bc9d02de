// A new agent incarnation begins from the group as two replicas reported it when it started
// (PROTOCOL §10.7: AgentOptions.group, or the `group` input while it runs), not from cluster.json's initial three: after two
// replacements (r1 and r2 condemned, r7 and r4 in their place) only r3 of the initial three is
// a member, so an agent starting from them could never see two matching copies again. Found by
// bench/tasks.ts on namespace hosts: a node reset after the second replacement never ran a task.
import { describe, expect, it } from 'vitest';
import { createAgent } from '../../../src/core/agent.ts';
import { applyGroup, onCopy } from '../../../src/core/agent-group.ts';
import { sendRequest } from '../../../src/core/agent-requests.ts';
import { DEFAULT_TIMING, MAX_GMB_ENTRIES } from '../../../src/core/constants.ts';
import type { CoreEffect, Membership } from '../../../src/core/node.ts';
import { InvariantError } from '../../../src/base/result.ts';
import type { GroupCommand, GroupMsgGC, Item } from '../../../src/core/wire/messages.ts';
import { copyOf, freshAgent } from './agent-state-fixture.ts';
import { hmacSigner } from './harness.ts';

const membership: Membership = {
  cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: ['r4', 'r5', 'r6', 'r7'],
  agents: [{ id: 'a1', node: 'n1' }], scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
};
const sentTo = (effects: CoreEffect[]) => [...new Set(effects.flatMap((e) => (e.type === 'send' ? [e.to] : [])))].sort();

describe('an agent incarnation and the group (PROTOCOL §10.7)', () => {
  it('without a reported group it starts from cluster.json\'s initial three, view 0', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1') });
    expect(a.status(0).view).toBe(0);
    expect(sentTo(a.step({ type: 'tick', nowMs: 0 }))).toEqual(['r1', 'r2', 'r3']);
  });

  it('with the group two replicas reported it starts there: its view, its members, its primary', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1'), group: { view: 4, primary: 'r3', replicas: ['r3', 'r7', 'r4'] } });
    expect(a.status(0).view).toBe(4);
    expect(a.status(0).replicas.map((r) => r.id).sort()).toEqual(['r3', 'r4', 'r7']);
    expect(sentTo(a.step({ type: 'tick', nowMs: 0 }))).toEqual(['r3', 'r4', 'r7']);
  });

  it('a reported group whose primary is not a member is ignored', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1'), group: { view: 4, primary: 'r1', replicas: ['r3', 'r7', 'r4'] } });
    expect(a.status(0).view).toBe(0);
  });

  it('a running incarnation takes the group two replicas reported (the `group` input) like a delivered `replicas` command: a higher view only', () => {
    const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1') });
    a.step({ type: 'tick', nowMs: 0 });
    a.step({ type: 'group', nowMs: 10, view: 4, primary: 'r3', replicas: ['r3', 'r7', 'r4'], ports: [], added: [] });
    expect(a.status(10).view).toBe(4);
    expect(a.status(10).replicas.map((r) => r.id).sort()).toEqual(['r3', 'r4', 'r7']);
    a.step({ type: 'group', nowMs: 20, view: 2, primary: 'r2', replicas: ['r2', 'r3', 'r7'], ports: [], added: [] }); // older: ignored
    expect(a.status(20).view).toBe(4);
  });
});


// The agent's core stepped directly, each replica's frames written by hand: sessions open with a
// `hello`, copies of group messages arrive on lane 1 (PROTOCOL §3.2, §5).
const proc = (vpid: number): GroupCommand => ({ type: 'proc.terminate', task: 't1', vpid });
function driven(opts: { group?: { view: number; primary: string; replicas: string[] } } = {}) {
  const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1'), ...opts });
  const seq = new Map<string, number>();
  const frame = (from: string, nowMs: number, ...items: Item[]) => a.step({ type: 'frame', nowMs, frame: { from, to: 'a1', items } });
  return {
    a,
    frame,
    /** Sessions to `rs` established at `nowMs` (the replicas run incarnation 1). */
    open: (nowMs: number, rs: string[] = ['r1', 'r2', 'r3']) => {
      const out = a.step({ type: 'tick', nowMs });
      for (const r of rs) out.push(...frame(r, nowMs, { type: 'hello', inc: 1, echo: 1, established: true }));
      return out;
    },
    /** Replica `from`'s copy of GSSN `gssn`, chained from `prev`, for `dest`/`destInc`. */
    copy: (from: string, nowMs: number, gssn: number, payload: GroupCommand, o: { prev?: number; dest?: string; destInc?: number; csnAck?: number } = {}) => {
      const s = (seq.get(from) ?? 0) + 1;
      seq.set(from, s);
      const gc: GroupMsgGC = { gssn, prevGssn: o.prev ?? gssn - 1, csnAck: o.csnAck ?? 0, destInc: o.destInc ?? 1, payload, dest: o.dest ?? 'a1' };
      return frame(from, nowMs, { type: 'grp', srcInc: 1, destInc: 1, seq: s, body: { type: 'gc', gc } });
    },
    gack: (from: string, nowMs: number, ack: number) => frame(from, nowMs, { type: 'gack', srcInc: 1, destInc: 1, ack, seq: seq.get(from) ?? 0 }),
  };
}
const delivered = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'deliver.command' ? [e.gssn] : []));
const logs = (effects: CoreEffect[], event: string) => effects.flatMap((e) => (e.type === 'log' && e.event === event ? [e.fields] : []));
const hbs = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'send' && e.item.type === 'hb' ? [{ to: e.to, ...e.item }] : []));
const gacksTo = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'send' && e.item.type === 'gack' ? [{ to: e.to, ack: e.item.ack }] : []));

describe('an agent acts on two matching copies of a command, in GSSN order (PROTOCOL §5.3)', () => {
  it('one copy is not enough; the second matching copy, from another replica, delivers it', () => {
    const d = driven();
    d.open(0);
    expect(delivered(d.copy('r1', 10, 1, proc(1)))).toEqual([]);
    expect(d.a.status(10).gssnDelivered).toBe(0);
    const out = d.copy('r2', 11, 1, proc(1));
    expect(out.filter((e) => e.type === 'deliver.command')).toEqual([{ type: 'deliver.command', gssn: 1, command: proc(1) }]);
    expect(d.a.status(11).gssnDelivered).toBe(1);
    expect(delivered(d.copy('r3', 12, 1, proc(1)))).toEqual([]); // the third copy delivers nothing again
  });

  it('G2 3a: a second copy of one GSSN from the same replica is not a second vote', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    expect(delivered(d.copy('r1', 11, 1, proc(1)))).toEqual([]);
    expect(d.a.status(11).gssnDelivered).toBe(0);
    expect(delivered(d.copy('r2', 12, 1, proc(1)))).toEqual([1]);
  });

  it('copies for another agent, or for a predecessor incarnation, are not votes (PROTOCOL §5.7)', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1), { dest: 'a2' });
    d.copy('r2', 10, 1, proc(1), { dest: 'a2' });
    d.copy('r1', 11, 1, proc(1), { destInc: 2 });
    d.copy('r2', 11, 1, proc(1), { destInc: 2 });
    expect(d.a.status(11)).toMatchObject({ gssnDelivered: 0, pendingCopies: 0 });
  });

  it('two copies that differ deliver nothing; the third replica\'s copy matching one of them delivers it', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    expect(delivered(d.copy('r2', 11, 1, proc(2)))).toEqual([]);
    const out = d.copy('r3', 12, 1, proc(2));
    expect(out.filter((e) => e.type === 'deliver.command')).toEqual([{ type: 'deliver.command', gssn: 1, command: proc(2) }]);
  });

  it('a GSSN whose predecessor is not delivered waits for it; both then go out in order', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 2, proc(2));
    expect(delivered(d.copy('r2', 10, 2, proc(2)))).toEqual([]);
    d.copy('r1', 11, 1, proc(1));
    expect(delivered(d.copy('r2', 11, 1, proc(1)))).toEqual([1, 2]);
    expect(d.a.status(11).gssnDelivered).toBe(2);
  });

  it('G2 3e: three copies of which no two match terminate the agent, which then does nothing more', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(2));
    const out = d.copy('r3', 60, 1, proc(3)); // a heartbeat is due at 50: none goes out
    expect(out.filter((e) => e.type === 'terminate')).toEqual([{ type: 'terminate', reason: 'gssn 1: 3 copies, no 2 match' }]);
    expect(out.slice(out.findIndex((e) => e.type === 'terminate') + 1).filter((e) => e.type !== 'send' || e.item.type !== 'gack')).toEqual([]);
    expect(out.some((e) => e.type === 'log' && e.event === 'agent.error-report')).toBe(false);
    expect(d.a.status(60).terminated).toBe('gssn 1: 3 copies, no 2 match');
    expect(d.a.nextWakeMs()).toBeNull();
    expect(d.a.step({ type: 'tick', nowMs: 5000 })).toEqual([]);
  });

  it('flaw 1 fix: the group-ack mark advances only when every replica\'s copy arrived, and then is sent to each', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    expect(d.a.status(10)).toMatchObject({ gssnDelivered: 1, gssnAcked: 0, pendingCopies: 1 });
    expect(gacksTo(d.a.step({ type: 'tick', nowMs: 20 })).every((g) => g.ack === 0)).toBe(true);
    d.copy('r3', 30, 1, proc(1));
    expect(d.a.status(30)).toMatchObject({ gssnDelivered: 1, gssnAcked: 1, pendingCopies: 0 });
    expect(gacksTo(d.a.step({ type: 'tick', nowMs: 40 })).sort((x, y) => x.to.localeCompare(y.to))).toEqual([{ to: 'r1', ack: 1 }, { to: 'r2', ack: 1 }, { to: 'r3', ack: 1 }]);
  });

  it('flaw 1 fix: a GSSN completed before the one it follows moves no mark and owes no replica a group ack; completing that one moves the mark over both', () => {
    const d = driven();
    d.open(0);
    for (const g of [1, 2]) for (const r of ['r1', 'r2']) d.copy(r, 10, g, proc(g)); // r3 lags
    expect(d.a.status(10)).toMatchObject({ gssnDelivered: 2, gssnAcked: 0, pendingCopies: 2 });
    d.a.step({ type: 'tick', nowMs: 20 }); // the copies' lane acks go out
    d.copy('r3', 30, 2, proc(2));
    expect(d.a.status(30)).toMatchObject({ gssnAcked: 0, pendingCopies: 1 });
    // Only r3, whose copy arrived, is owed an ack; the mark it carries has not moved.
    expect(gacksTo(d.a.step({ type: 'tick', nowMs: 40 }))).toEqual([{ to: 'r3', ack: 0 }]);
    d.copy('r3', 50, 1, proc(1));
    expect(d.a.status(50)).toMatchObject({ gssnAcked: 2, pendingCopies: 0 });
    expect(gacksTo(d.a.step({ type: 'tick', nowMs: 60 })).sort((x, y) => x.to.localeCompare(y.to))).toEqual([{ to: 'r1', ack: 2 }, { to: 'r2', ack: 2 }, { to: 'r3', ack: 2 }]);
  });

  it('G2 4a: a late copy of a finished GSSN is discarded, opening no entry', () => {
    const d = driven();
    d.open(0);
    for (const r of ['r1', 'r2', 'r3']) d.copy(r, 10, 1, proc(1));
    expect(d.a.status(10).pendingCopies).toBe(0);
    d.copy('r1', 20, 1, proc(1));
    expect(d.a.status(20).pendingCopies).toBe(0);
    expect(d.a.nextWakeMs()).toBeLessThan(520); // no ReplicaTimeout armed for it
  });

  it('an undelivered GSSN the chain passed over is forgotten: it holds no entry and is never reported', () => {
    const d = driven();
    d.open(0);
    d.copy('r3', 10, 2, proc(2)); // r3 alone: never two matching
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    d.copy('r1', 20, 3, proc(3), { prev: 1 });
    expect(delivered(d.copy('r2', 20, 3, proc(3), { prev: 1 }))).toEqual([3]);
    expect(d.a.status(20)).toMatchObject({ gssnDelivered: 3, pendingCopies: 2 }); // 1 and 3 await r3's copies
    expect(logs(d.a.step({ type: 'tick', nowMs: 520 }), 'agent.error-report')).toEqual([{ gssn: 1, count: 2, kind: 'replica-timeout', suspects: ['r3'] }]);
  });

  it('PROTOCOL §5.2: a replica opens at most MAX_GMB_ENTRIES undelivered entries; copies past that are refused, not admitted', () => {
    const d = driven();
    d.open(0);
    const items: Item[] = [];
    for (let g = 2; g <= MAX_GMB_ENTRIES + 2; g++) {
      items.push({ type: 'grp', srcInc: 1, destInc: 1, seq: g - 1, body: { type: 'gc', gc: { gssn: g, prevGssn: 1, csnAck: 0, destInc: 1, payload: proc(g), dest: 'a1' } } });
    }
    d.frame('r1', 10, ...items);
    expect(d.a.status(10).pendingCopies).toBe(MAX_GMB_ENTRIES);
  });
});

describe('an agent reports what the replicas owe it (PROTOCOL §5.3, spec §3.5 G5)', () => {
  it('a copy that differs from two matching ones is reported at once as a mismatch naming its sender', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    const out = d.copy('r3', 10, 1, proc(9));
    expect(logs(out, 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'mismatch', suspects: ['r3'] }]);
    expect(d.a.status(10)).toMatchObject({ errorReports: 1, gssnAcked: 1, csnSent: 2 });
  });

  it('a silent replica: ReplicaTimeout fires every replicaTimeoutMs, reported once per period naming it; after three firings the GSSN is settled', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    expect(logs(d.a.step({ type: 'tick', nowMs: 509 }), 'agent.error-report')).toEqual([]);
    expect(d.a.nextWakeMs()).toBeLessThanOrEqual(510);
    expect(logs(d.a.step({ type: 'tick', nowMs: 510 }), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
    expect(d.a.status(510).gssnAcked).toBe(0);
    expect(logs(d.a.step({ type: 'tick', nowMs: 1010 }), 'agent.error-report')).toHaveLength(1);
    expect(d.a.status(1010).gssnAcked).toBe(0);
    expect(logs(d.a.step({ type: 'tick', nowMs: 1510 }), 'agent.error-report')).toHaveLength(1);
    expect(d.a.status(1510)).toMatchObject({ gssnAcked: 1, errorReports: 3, pendingCopies: 0 });
    expect(logs(d.a.step({ type: 'tick', nowMs: 2010 }), 'agent.error-report')).toEqual([]);
  });

  it('reports of one kind within a ReplicaTimeout go out as one, from the lowest GSSN, counting each', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    d.copy('r3', 10, 1, proc(9)); // reported at 10
    d.copy('r1', 20, 2, proc(2));
    d.copy('r2', 20, 2, proc(2));
    d.copy('r1', 30, 3, proc(3));
    d.copy('r2', 30, 3, proc(3));
    expect(logs(d.copy('r3', 50, 3, proc(8)), 'agent.error-report')).toEqual([]);
    expect(logs(d.copy('r3', 60, 2, proc(7)), 'agent.error-report')).toEqual([]);
    expect(logs(d.a.step({ type: 'tick', nowMs: 509 }), 'agent.error-report')).toEqual([]);
    d.a.step({ type: 'tick', nowMs: 500 });
    expect(d.a.nextWakeMs()).toBe(510); // woken for the report, not at the next heartbeat
    expect(logs(d.a.step({ type: 'tick', nowMs: 510 }), 'agent.error-report')).toEqual([{ gssn: 2, count: 2, kind: 'mismatch', suspects: ['r3'] }]);
  });
  it('without two matching copies nobody is named: a ReplicaTimeout on two differing copies reports no suspect', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(2));
    expect(logs(d.a.step({ type: 'tick', nowMs: 510 }), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: [] }]);
  });
});

describe('an agent and a change of the group (PROTOCOL §10.7)', () => {
  it('a new primary: the change is logged and handed to the driver, and requests not yet acknowledged go to the new primary at once', () => {
    const d = driven();
    d.open(0);
    const out = d.a.step({ type: 'group', nowMs: 10, view: 1, primary: 'r2', replicas: ['r1', 'r2', 'r3'], ports: [], added: [] });
    expect(logs(out, 'agent.group')).toEqual([{ view: 1, replicas: ['r1', 'r2', 'r3'], primary: 'r2' }]);
    expect(out.filter((e) => e.type === 'replicas')).toEqual([{ type: 'replicas', replicas: ['r1', 'r2', 'r3'], ports: [] }]);
    expect(out.flatMap((e) => (e.type === 'send' && e.item.type === 'grp' ? [e.to] : []))).toEqual(['r2']);
    expect(d.a.status(10).primary).toBe('r2');
  });

  it('the same primary: nothing is sent again', () => {
    const d = driven();
    d.open(0);
    const out = d.a.step({ type: 'group', nowMs: 10, view: 1, primary: 'r1', replicas: ['r1', 'r2', 'r3'], ports: [], added: [] });
    expect(d.a.status(10).view).toBe(1);
    expect(out.filter((e) => e.type === 'send' && e.item.type === 'grp')).toEqual([]);
  });

  it('a request that had fallen back starts over with the new primary: after four retransmission periods it falls back again', () => {
    const d = driven();
    d.open(0);
    expect(logs(d.a.step({ type: 'tick', nowMs: 160 }), 'agent.fallback')).toHaveLength(1);
    d.a.step({ type: 'group', nowMs: 200, view: 1, primary: 'r2', replicas: ['r1', 'r2', 'r3'], ports: [], added: [] });
    expect(logs(d.a.step({ type: 'tick', nowMs: 359 }), 'agent.fallback')).toEqual([]);
    expect(logs(d.a.step({ type: 'tick', nowMs: 360 }), 'agent.fallback')).toEqual([{ csn: 1, primary: 'r2' }]);
  });

  it('a replica that joins owes only the copies after the `replicas` command: GSSNs that waited only for the removed member\'s copy are settled at once', () => {
    const d = driven();
    d.open(0);
    const change: GroupCommand = { type: 'replicas', view: 1, primary: 'r1', replicas: ['r1', 'r2', 'r4'], ports: [], added: [] };
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1)); // r3 is silent
    d.copy('r1', 20, 2, change);
    expect(delivered(d.copy('r2', 20, 2, change))).toEqual([2]);
    expect(d.a.status(20)).toMatchObject({ view: 1, gssnDelivered: 2, gssnAcked: 2, pendingCopies: 0 });
    expect(logs(d.a.step({ type: 'tick', nowMs: 600 }), 'agent.error-report')).toEqual([]);
  });

  // The hosts-added-spares e2e failure once blamed on this fix was a replica bug: a backup sent a
  // re-started spare its state over the dead incarnation's session (test/unit/core/replacement.test.ts).
  it('a reported group (the `group` input) that drops the one member the last delivered GSSN waited for settles it, and the group-ack mark moves on', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1)); // r3 is silent
    expect(d.a.status(10)).toMatchObject({ gssnDelivered: 1, gssnAcked: 0, pendingCopies: 1 });
    d.a.step({ type: 'group', nowMs: 20, view: 1, primary: 'r1', replicas: ['r1', 'r2', 'r4'], ports: [], added: [] });
    expect(d.a.status(20)).toMatchObject({ view: 1, gssnDelivered: 1, gssnAcked: 1, pendingCopies: 0 });
    d.a.step({ type: 'tick', nowMs: 30 });
    d.frame('r4', 30, { type: 'hello', inc: 1, echo: 1, established: true });
    for (const r of ['r1', 'r2', 'r4']) d.copy(r, 40, 2, proc(2));
    d.a.step({ type: 'tick', nowMs: 5000 });
    expect(d.a.status(5000)).toMatchObject({ gssnDelivered: 2, gssnAcked: 2, pendingCopies: 0 });
  });

  it('a reported group whose primary is not among its members is ignored (the `group` input)', () => {
    const d = driven();
    d.open(0);
    const out = d.a.step({ type: 'group', nowMs: 10, view: 4, primary: 'r1', replicas: ['r3', 'r7', 'r4'], ports: [], added: [] });
    expect(d.a.status(10)).toMatchObject({ view: 0, primary: 'r1' });
    expect(logs(out, 'agent.group')).toEqual([]);
  });
});

describe('an agent\'s requests and heartbeats (PROTOCOL §5.6, spec §1.3, §3.6 G6)', () => {
  it('a request is acknowledged once two replicas acknowledged it; an ack beyond what was sent is ignored', () => {
    const d = driven();
    d.open(0); // node.join, CSN 1
    d.gack('r1', 10, 5);
    d.gack('r2', 10, 5);
    expect(d.a.status(10)).toMatchObject({ csnSent: 1, csnAcked: 0, pendingRequests: 1 });
    d.gack('r1', 20, 1);
    expect(d.a.status(20)).toMatchObject({ csnAcked: 0, pendingRequests: 1 });
    d.gack('r2', 30, 1);
    expect(d.a.status(30)).toMatchObject({ csnAcked: 1, pendingRequests: 0 });
  });

  it('an acknowledgement by two replicas settles the requests up to its CSN, not the ones after it', () => {
    const d = driven();
    d.open(0); // CSN 1
    d.a.step({ type: 'request', nowMs: 5, request: { type: 'node.join', slots: 4, resync: false } }); // CSN 2
    d.gack('r1', 10, 1);
    d.gack('r2', 10, 1);
    expect(d.a.status(10)).toMatchObject({ csnSent: 2, csnAcked: 1, pendingRequests: 1 });
  });

  it('the acknowledged mark never goes back: after a member with the highest acks leaves, a lower quorum mark leaves it where it was', () => {
    const d = driven();
    d.open(0); // CSN 1
    d.gack('r1', 10, 1);
    d.gack('r2', 10, 1);
    expect(d.a.status(10)).toMatchObject({ csnAcked: 1, pendingRequests: 0 });
    d.a.step({ type: 'group', nowMs: 20, view: 1, primary: 'r1', replicas: ['r1', 'r3', 'r4'], ports: [], added: [] });
    d.a.step({ type: 'request', nowMs: 20, request: { type: 'node.join', slots: 4, resync: false } }); // CSN 2
    d.gack('r1', 30, 2); // r1 alone: the second-highest ack of r1, r3, r4 is 0
    expect(d.a.status(30)).toMatchObject({ csnSent: 2, csnAcked: 1, pendingRequests: 1 });
  });

  it('unacknowledged after four retransmission periods, a request goes to both backups; then to every member, less and less often', () => {
    const d = driven();
    d.open(0);
    expect(logs(d.a.step({ type: 'tick', nowMs: 159 }), 'agent.fallback')).toEqual([]);
    const fb = d.a.step({ type: 'tick', nowMs: 160 });
    expect(logs(fb, 'agent.fallback')).toEqual([{ csn: 1, primary: 'r1' }]);
    expect(fb.flatMap((e) => (e.type === 'send' && e.item.type === 'grp' ? [e.to] : [])).sort()).toEqual(['r2', 'r3']);
    expect(d.a.nextWakeMs()).toBeLessThanOrEqual(660);
    expect(logs(d.a.step({ type: 'tick', nowMs: 659 }), 'agent.resend')).toEqual([]);
    expect(logs(d.a.step({ type: 'tick', nowMs: 660 }), 'agent.resend')).toEqual([{ csn: 1, primary: 'r1' }]);
    expect(logs(d.a.step({ type: 'tick', nowMs: 1979 }), 'agent.resend')).toEqual([]);
    expect(logs(d.a.step({ type: 'tick', nowMs: 1980 }), 'agent.resend')).toHaveLength(1);
    expect(logs(d.a.step({ type: 'tick', nowMs: 3979 }), 'agent.resend')).toEqual([]); // MAX_FALLBACK_MS caps the doubling
    expect(logs(d.a.step({ type: 'tick', nowMs: 3980 }), 'agent.resend')).toHaveLength(1);
  });

  it('heartbeats go every agentHeartbeatMs to one backup, alternating, with the agent\'s marks', () => {
    const d = driven();
    const first = hbs(d.a.step({ type: 'tick', nowMs: 0 }));
    expect(first).toEqual([{ to: 'r2', type: 'hb', inc: 1, counter: 1, info: { type: 'agent', gssnDelivered: 0, csnSent: 1 } }]);
    expect(hbs(d.a.step({ type: 'tick', nowMs: 49 }))).toEqual([]);
    expect(hbs(d.a.step({ type: 'tick', nowMs: 50 })).map((h) => [h.to, h.counter])).toEqual([['r3', 2]]);
    expect(hbs(d.a.step({ type: 'tick', nowMs: 100 })).map((h) => [h.to, h.counter])).toEqual([['r2', 3]]);
    d.open(110);
    d.copy('r1', 120, 1, proc(1));
    d.copy('r2', 120, 1, proc(1));
    expect(hbs(d.a.step({ type: 'tick', nowMs: 150 })).map((h) => h.info)).toEqual([{ type: 'agent', gssnDelivered: 1, csnSent: 1 }]);
  });

  // PROTOCOL §5.6: a request the primary has received falls back after four times the smoothed
  // time two replicas take to acknowledge a request (1/8 gain, as TCP's SRTT), within
  // [4 × retransmitMs, MAX_FALLBACK_MS]; 160 ms here until a sample exists.
  /** A frame from replica `from` acknowledging CSN `ack` and our lane-1 sends up to `laneAck`. */
  const acks = (d: ReturnType<typeof driven>, from: string, nowMs: number, ack: number, laneAck: number) =>
    d.frame(from, nowMs, { type: 'gack', srcInc: 1, destInc: 1, ack, seq: laneAck });
  const fallsBackAt = (d: ReturnType<typeof driven>, from: number, to: number): number | null => {
    for (let t = from; t <= to; t++) if (logs(d.a.step({ type: 'tick', nowMs: t }), 'agent.fallback').length > 0) return t;
    return null;
  };

  it('PROTOCOL §5.6: a request the primary received falls back after four smoothed acknowledgement times: samples of 100 and 180 ms give 110 ms, so 440 ms', () => {
    const d = driven();
    d.open(0); // CSN 1, lane seq 1, sent at 0
    acks(d, 'r1', 100, 1, 1);
    acks(d, 'r2', 100, 1, 0); // sample 100 ms
    d.a.step({ type: 'request', nowMs: 1000, request: { type: 'node.join', slots: 4, resync: false } }); // CSN 2
    acks(d, 'r1', 1180, 2, 2);
    acks(d, 'r2', 1180, 2, 0); // sample 180 ms: 100 + (180 − 100) / 8 = 110 ms
    d.a.step({ type: 'request', nowMs: 2000, request: { type: 'node.join', slots: 4, resync: false } }); // CSN 3
    acks(d, 'r1', 2005, 2, 3); // the primary has it, two replicas have not acknowledged it
    expect(fallsBackAt(d, 2006, 3000)).toBe(2440);
  });

  it('PROTOCOL §5.6, Karn\'s rule: a request that fell back gives no sample; the next one the primary received still falls back after 160 ms', () => {
    const d = driven();
    d.open(0); // CSN 1
    expect(fallsBackAt(d, 1, 200)).toBe(160);
    acks(d, 'r1', 600, 1, 1);
    acks(d, 'r2', 600, 1, 0); // acknowledged 600 ms after it was first sent, but sent twice
    expect(d.a.status(600)).toMatchObject({ csnAcked: 1, pendingRequests: 0 });
    d.a.step({ type: 'request', nowMs: 700, request: { type: 'node.join', slots: 4, resync: false } }); // CSN 2
    acks(d, 'r1', 705, 1, 2);
    expect(fallsBackAt(d, 706, 3000)).toBe(860);
  });

  it('probes are answered for members only; a dropped frame is counted by reason; the watchdog\'s restore load is no agent input (issue 16 item 5)', () => {
    const d = driven();
    d.open(0);
    const probe = (from: string) => d.frame(from, 10, { type: 'probe', nonce: 7 }).filter((e) => e.type === 'send' && e.item.type === 'probe.reply');
    expect(probe('r2')).toEqual([{ type: 'send', to: 'r2', item: { type: 'probe.reply', nonce: 7 } }]);
    expect(probe('r5')).toEqual([]);
    d.a.step({ type: 'dropped', nowMs: 20, from: 'r1', code: 'SIG_INVALID', detail: '' });
    expect(d.a.status(20).drops).toEqual({ SIG_INVALID: 1 });
    // @ts-expect-error an agent takes AgentInput only: a driver wired wrong gets an InvariantError
    expect(() => d.a.step({ type: 'restore.load', nowMs: 20, journals: [] })).toThrow(InvariantError);
  });
});

describe('the vote and the group change, stepped by hand on the state record (src/core/agent-group.ts)', () => {
  it('delivers on the second matching copy, finishes on the third, and acknowledges through it', () => {
    const s = freshAgent();
    const out: CoreEffect[] = [];
    onCopy(s, 'r1', copyOf(1, proc(1)), 0, out);
    expect(s.gssnDelivered).toBe(0);
    onCopy(s, 'r2', copyOf(1, proc(1)), 1, out);
    expect(out.filter((e) => e.type === 'deliver.command')).toEqual([{ type: 'deliver.command', gssn: 1, command: proc(1) }]);
    expect([s.gssnDelivered, s.gssnAcked]).toEqual([1, 0]);
    onCopy(s, 'r3', copyOf(1, proc(1)), 2, out);
    expect([s.gssnAcked, s.gmb.size]).toEqual([1, 0]);
  });

  it('G2 3e: three different copies of one GSSN make two matching impossible: the agent terminates', () => {
    const s = freshAgent();
    const out: CoreEffect[] = [];
    onCopy(s, 'r1', copyOf(1, proc(1)), 0, out);
    onCopy(s, 'r2', copyOf(1, proc(2)), 0, out);
    expect(s.terminated).toBeNull();
    onCopy(s, 'r3', copyOf(1, proc(3)), 0, out);
    expect(s.terminated).toBe('gssn 1: 3 copies, no 2 match');
    expect(out.filter((e) => e.type === 'terminate')).toHaveLength(1);
  });

  it('a group change of a higher view moves the sessions and the primary; a stale one changes nothing', () => {
    const s = freshAgent();
    sendRequest(s, { type: 'node.join', slots: 4, resync: false }, 0, []);
    const change = { type: 'replicas' as const, view: 1, primary: 'r2', replicas: ['r2', 'r3', 'r4'], ports: [], added: [] };
    const out: CoreEffect[] = [];
    applyGroup(s, change, 10, out);
    expect([s.view, s.primary, s.replicas]).toEqual([1, 'r2', ['r2', 'r3', 'r4']]);
    expect(s.joinedAtGssn.get('r4')).toBe(0);
    expect(s.pending.get(1)?.sentAtMs).toBe(10); // the unacknowledged request went to the new primary
    applyGroup(s, { ...change, view: 1, primary: 'r3' }, 20, []);
    expect(s.primary).toBe('r2');
  });
});
