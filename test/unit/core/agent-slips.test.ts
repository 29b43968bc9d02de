// Agent behaviours no other row pins down (issue 15, mutation testing of src/core/agent.ts outside
// lines 176-216, which test/unit/core/agent-group.test.ts covers): each row is what a replica or
// the driver observes (items sent, commands delivered, logs, status, drop counts, nextWakeMs),
// and each fails on at least one slip planted by hand in agent.ts, nearly all of which every
// other row let pass
// (docs/PROTOCOL.md §5.2, §5.3, §5.6, §10.7, §10.12; spec §1.3, §3.5 G2/G5, §3.6 G6).
import { describe, expect, it } from 'vitest';
import { createAgent } from '../../../src/core/agent.ts';
import { DEFAULT_TIMING, MAX_GMB_ENTRIES, MAX_QUEUED_WHILE_DISCONNECTED } from '../../../src/core/constants.ts';
import type { CoreEffect, Membership } from '../../../src/core/node.ts';
import type { AddedReplica, GroupCommand, GroupMsgGC, Item } from '../../../src/core/wire/messages.ts';
import { hmacSigner } from './harness.ts';

const membership: Membership = {
  cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: ['r4', 'r5', 'r6', 'r7'],
  agents: [{ id: 'a1', node: 'n1' }], scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
};

// The agent's core stepped directly, each replica's frames written by hand (as in
// agent-group.test.ts): sessions open with a `hello`, copies arrive on lane 1 (PROTOCOL §3.2, §5).
const proc = (vpid: number): GroupCommand => ({ type: 'proc.terminate', task: 't1', vpid });
const join = { type: 'node.join' as const, slots: 4, resync: false };
function driven(opts: { group?: { view: number; primary: string; replicas: string[] }; resync?: boolean } = {}) {
  const a = createAgent({ id: 'a1', membership, inc: 1, slots: 4, signer: hmacSigner('a1'), ...opts });
  const seq = new Map<string, number>();
  const frame = (from: string, nowMs: number, ...items: Item[]) => a.step({ type: 'frame', nowMs, frame: { from, to: 'a1', items } });
  const gcItem = (from: string, gssn: number, payload: GroupCommand, o: { prev?: number; dest?: string; destInc?: number; csnAck?: number; seq?: number } = {}): Item => {
    const s = o.seq ?? (seq.get(from) ?? 0) + 1;
    seq.set(from, s);
    const gc: GroupMsgGC = { gssn, prevGssn: o.prev ?? gssn - 1, csnAck: o.csnAck ?? 0, destInc: o.destInc ?? 1, payload, dest: o.dest ?? 'a1' };
    return { type: 'grp', srcInc: 1, destInc: 1, seq: s, body: { type: 'gc', gc } };
  };
  return {
    a,
    frame,
    gcItem,
    tick: (nowMs: number) => a.step({ type: 'tick', nowMs }),
    /** Sessions to `rs` established at `nowMs` (the replicas run incarnation 1). */
    open: (nowMs: number, rs: string[] = ['r1', 'r2', 'r3']) => {
      const out = a.step({ type: 'tick', nowMs });
      for (const r of rs) out.push(...frame(r, nowMs, { type: 'hello', inc: 1, echo: 1, established: true }));
      return out;
    },
    /** Replica `from`'s copy of GSSN `gssn`, chained from `prev`, for `dest`/`destInc`. */
    copy: (from: string, nowMs: number, gssn: number, payload: GroupCommand, o: { prev?: number; dest?: string; destInc?: number; csnAck?: number } = {}) =>
      frame(from, nowMs, gcItem(from, gssn, payload, o)),
    /** A gack from `from`: CSN mark `ack`, our lane-1 sends received through `laneAck`. */
    acks: (from: string, nowMs: number, ack: number, laneAck: number) => frame(from, nowMs, { type: 'gack', srcInc: 1, destInc: 1, ack, seq: laneAck }),
    request: (nowMs: number) => a.step({ type: 'request', nowMs, request: join }),
    group: (nowMs: number, view: number, primary: string, replicas: string[], o: { ports?: { id: string; port: number }[]; added?: AddedReplica[] } = {}) =>
      a.step({ type: 'group', nowMs, view, primary, replicas, ports: o.ports ?? [], added: o.added ?? [] }),
  };
}
type Driven = ReturnType<typeof driven>;
/** Sessions open at 0 and node.join (CSN 1) acknowledged by r1 and r2 at 5: no request pending. */
function joined(): Driven {
  const d = driven();
  d.open(0);
  d.acks('r1', 5, 1, 1);
  d.acks('r2', 5, 1, 0);
  return d;
}
const delivered = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'deliver.command' ? [e.gssn] : []));
const logs = (effects: CoreEffect[], event: string) => effects.flatMap((e) => (e.type === 'log' && e.event === event ? [e.fields] : []));
/** Signed requests sent (lane 1 `cg` bodies): to whom, with which CSN. */
const cgs = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'send' && e.item.type === 'grp' && e.item.body.type === 'cg' ? [{ to: e.to, seq: e.item.seq, csn: e.item.body.signed.cg.csn, cg: e.item.body.signed.cg }] : []));
const gackSeqTo = (effects: CoreEffect[], to: string) => effects.flatMap((e) => (e.type === 'send' && e.to === to && e.item.type === 'gack' ? [e.item.seq] : []));
/** The first tick in [from, to] at which `event` is logged, or null. */
const firstAt = (d: Driven, event: string, from: number, to: number): number | null => {
  for (let t = from; t <= to; t++) if (logs(d.tick(t), event).length > 0) return t;
  return null;
};
const added = (id: string): AddedReplica => ({ id, node: 'n9', address: '10.0.0.9', port: 7009, publicKey: new Uint8Array(32).fill(9) });

describe('PROTOCOL §5.6: when a request falls back to the backups', () => {
  it('a request the primary received, with a smoothed ack time of 5 ms, still waits the floor of 4 × retransmitMs (160 ms)', () => {
    const d = driven();
    d.open(0); // CSN 1 (node.join) went out on establishment: lane seq 1
    d.acks('r1', 5, 1, 1);
    d.acks('r2', 5, 1, 0); // a sample of 5 ms: 4 × 5 = 20 < 160
    d.request(1000); // CSN 2, lane seq 2
    d.acks('r1', 1001, 1, 2); // the primary has it
    expect(firstAt(d, 'agent.fallback', 1002, 1300)).toBe(1160);
  });

  it('a request the primary received, with a smoothed ack time above 500 ms, falls back after MAX_FALLBACK_MS (2 s)', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 150, 1, 1);
    d.acks('r2', 150, 1, 0); // a sample of 150 ms
    let ack = 150;
    let at = 1000;
    for (let csn = 2; ack <= 520; csn++, at += 10_000) {
      const ms = Math.floor(Math.min(2000, 4 * ack)) - 1; // just before its fallback
      d.request(at);
      d.acks('r1', at + 1, csn - 1, csn); // received by the primary
      d.acks('r1', at + ms, csn, csn);
      expect(logs(d.acks('r2', at + ms, csn, 0), 'agent.fallback')).toEqual([]);
      expect(d.a.status(at + ms).pendingRequests).toBe(0);
      ack += (ms - ack) / 8;
    }
    const csn = d.a.status(at).csnSent + 1;
    d.request(at);
    d.acks('r1', at + 1, csn - 1, csn);
    expect(firstAt(d, 'agent.fallback', at + 2, at + 2100)).toBe(at + 2000);
  });

  it('a request the primary has not received falls back after 160 ms whatever the smoothed ack time (its session was down: queued, never sent)', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 150, 1, 1);
    d.acks('r2', 150, 1, 0); // smoothed ack time 150 ms: 600 ms for a received request
    d.frame('r1', 1100, { type: 'hello', inc: 2, echo: 0, established: false }); // r1 restarted: session reset, not established
    expect(d.a.status(1100).replicas.find((r) => r.id === 'r1')).toMatchObject({ connected: false, queued: 0 });
    d.request(1200); // CSN 2: queued for r1
    expect(d.a.status(1200).replicas.find((r) => r.id === 'r1')).toMatchObject({ connected: false, queued: 1 });
    expect(firstAt(d, 'agent.fallback', 1201, 4000)).toBe(1360);
  });

  it('a request the primary\'s lane has not acknowledged is not received: 160 ms, not four smoothed ack times', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 150, 1, 1);
    d.acks('r2', 150, 1, 0); // smoothed ack time 150 ms
    d.request(2000); // CSN 2, lane seq 2: r1 acknowledges nothing more
    expect(firstAt(d, 'agent.fallback', 2001, 5000)).toBe(2160);
  });

  it('after a fallback, the resend goes to every member, the primary too', () => {
    const d = driven();
    d.open(0);
    d.tick(160);
    const out = d.tick(660);
    expect(logs(out, 'agent.resend')).toEqual([{ csn: 1, primary: 'r1' }]);
    // A new lane-1 item to each (seq 2), beside lane retransmissions of the earlier ones (seq 1).
    expect([...new Set(cgs(out).filter((c) => c.seq === 2).map((c) => c.to))].sort()).toEqual(['r1', 'r2', 'r3']);
  });

  it('the resends after a fallback double the time since the request was sent: sent at 1000, resent at 1660 and 2980', () => {
    const d = joined();
    d.request(1000); // CSN 2, never acknowledged
    expect(firstAt(d, 'agent.fallback', 1001, 1200)).toBe(1160);
    expect(firstAt(d, 'agent.resend', 1161, 1700)).toBe(1660);
    expect(firstAt(d, 'agent.resend', 1661, 4000)).toBe(2980); // 1660 + 2 × 660
  });

  it('a sample that lowers the smoothed ack time brings forward the fallback of a request already waiting: 3804, not the 3821 computed before it', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 150, 1, 1);
    d.acks('r2', 150, 1, 0); // a sample of 150 ms
    d.request(1000); // CSN 2, lane seq 2
    d.acks('r1', 1001, 1, 2);
    d.acks('r1', 1590, 2, 2);
    d.acks('r2', 1590, 2, 0); // a sample of 590 ms: 205 ms smoothed, 820 ms for a received request
    d.request(3000); // CSN 3, lane seq 3
    d.request(3001); // CSN 4, lane seq 4
    d.acks('r1', 3002, 2, 4); // the primary has both
    expect(logs(d.tick(3160), 'agent.fallback')).toEqual([]); // both deadlines known: 3820, 3821
    d.acks('r1', 3170, 3, 4);
    d.acks('r2', 3170, 3, 0); // CSN 3 acknowledged by f+1: a sample of 170 ms, 200.6 ms smoothed
    expect(firstAt(d, 'agent.fallback', 3171, 4000)).toBe(3804); // 3001 + 4 × 200.6
  });
});

describe('PROTOCOL §5.6: the backlog to an unreachable primary is bounded', () => {
  it(`a request beyond MAX_QUEUED_WHILE_DISCONNECTED (${MAX_QUEUED_WHILE_DISCONNECTED}) queued for the primary is refused with request.refused and spends no CSN`, () => {
    const d = driven();
    d.tick(0); // node.join: CSN 1, queued (no session yet)
    for (let k = 1; k < MAX_QUEUED_WHILE_DISCONNECTED; k++) expect(logs(d.request(1), 'request.refused')).toEqual([]);
    expect(d.a.status(1)).toMatchObject({ csnSent: MAX_QUEUED_WHILE_DISCONNECTED, pendingRequests: MAX_QUEUED_WHILE_DISCONNECTED });
    expect(logs(d.request(2), 'request.refused')).toEqual([{ request: 'node.join', why: 'backlog to the primary is full' }]);
    expect(d.a.status(2)).toMatchObject({ csnSent: MAX_QUEUED_WHILE_DISCONNECTED, pendingRequests: MAX_QUEUED_WHILE_DISCONNECTED });
  }, 60_000);
});

describe('PROTOCOL §5.5: what a request carries', () => {
  it('node.join first, CSN 1, with the slots and resync flag; each CG carries the complete mark gssnAck, not the delivered one', () => {
    const d = driven({ resync: true });
    const first = d.open(0);
    expect(cgs(first).map((c) => c.cg)).toEqual([{ csn: 1, gssnAck: 0, payload: { type: 'node.join', slots: 4, resync: true }, client: 'a1', inc: 1 }]);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1)); // delivered, not complete
    expect(cgs(d.request(20)).filter((c) => c.csn === 2).map((c) => c.cg.gssnAck)[0]).toBe(0);
    d.copy('r3', 30, 1, proc(1)); // complete
    expect(cgs(d.request(40)).filter((c) => c.csn === 3).map((c) => c.cg.gssnAck)[0]).toBe(1);
  });
});

describe('PROTOCOL §5.3: error reports', () => {
  it(`an entry missing only the copy of a replica the agent has no session with waits for the end of the start grace (${DEFAULT_TIMING.startGraceMs} ms), then names it: it may have been booting`, () => {
    const grace = DEFAULT_TIMING.startGraceMs;
    const d = driven();
    d.open(0, ['r1', 'r2']); // r3 not up yet
    d.copy('r1', 10, 1, proc(1));
    expect(delivered(d.copy('r2', 10, 1, proc(1)))).toEqual([1]);
    expect(firstAt(d, 'agent.error-report', 11, grace - 1)).toBeNull();
    expect(logs(d.tick(grace + 5), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
  });

  it('the start grace runs from the agent\'s own start: an agent that starts at 10 s waits until 15 s', () => {
    const d = driven();
    d.open(10_000, ['r1', 'r2']); // a node that rebooted: its agent's first step
    d.copy('r1', 10_010, 1, proc(1));
    d.copy('r2', 10_010, 1, proc(1));
    expect(firstAt(d, 'agent.error-report', 10_011, 14_999)).toBeNull();
    expect(logs(d.tick(15_005), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
  });

  it('a replica that comes up within the start grace and sends its copy is never reported', () => {
    const d = driven();
    d.open(0, ['r1', 'r2']);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    d.open(2500, ['r3']);
    d.copy('r3', 2500, 1, proc(1));
    expect(firstAt(d, 'agent.error-report', 2501, DEFAULT_TIMING.startGraceMs + 2000)).toBeNull();
    expect(d.a.status(2501)).toMatchObject({ gssnAcked: 1, pendingCopies: 0, errorReports: 0 });
  });

  it('within the start grace, a replica the agent has a session with is named as before', () => {
    const d = driven();
    d.open(0); // r3 up, its copy missing
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1));
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
  });

  it('a replica that joined at GSSN g is not named for g: after r3 leaves for r4, GSSN 1 (copies of r1 and r3) names only r2', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r3', 10, 1, proc(1)); // delivered; r2's copy missing
    d.group(20, 1, 'r1', ['r1', 'r2', 'r4']);
    expect(d.a.status(20)).toMatchObject({ gssnDelivered: 1, gssnAcked: 0, pendingCopies: 1 });
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r2'] }]);
  });

  it('a complete, undelivered GSSN already reported as a mismatch is not reported again when the group changes', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 2, proc(2));
    d.copy('r2', 10, 2, proc(2));
    expect(logs(d.copy('r3', 10, 2, proc(9)), 'agent.error-report')).toEqual([{ gssn: 2, count: 1, kind: 'mismatch', suspects: ['r3'] }]);
    d.group(20, 1, 'r1', ['r1', 'r2', 'r3']);
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([]);
    expect(d.a.status(510).errorReports).toBe(1);
  });

  it('a group change leaves an entry that still lacks a remaining member\'s copy waiting: its ReplicaTimeout fires', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1)); // delivered, r3 silent
    d.copy('r1', 20, 2, proc(2)); // r1 alone
    d.group(30, 1, 'r1', ['r1', 'r2', 'r4']);
    expect(d.a.status(30).pendingCopies).toBe(1);
    expect(logs(d.tick(520), 'agent.error-report')).toEqual([{ gssn: 2, count: 1, kind: 'replica-timeout', suspects: [] }]);
  });

  it('an undelivered GSSN whose ReplicaTimeout fired three times stays admitted: a second matching copy still delivers it', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    for (const t of [510, 1010, 1510]) d.tick(t);
    expect(d.a.status(1510)).toMatchObject({ errorReports: 3, pendingCopies: 1 });
    expect(logs(d.tick(2010), 'agent.error-report')).toEqual([]);
    expect(delivered(d.copy('r2', 2100, 1, proc(1)))).toEqual([1]);
  });
});

describe('PROTOCOL §5.2: voting on copies', () => {
  it('a differing copy after two matching ones is not a vote for its own prevGssn: GSSN 2 still waits for GSSN 1', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 2, proc(2));
    d.copy('r2', 10, 2, proc(2)); // prevGssn 1, not delivered
    expect(delivered(d.copy('r3', 10, 2, proc(2), { prev: 0 }))).toEqual([]);
    expect(d.a.status(10).gssnDelivered).toBe(0);
    d.copy('r1', 20, 1, proc(1));
    expect(delivered(d.copy('r2', 20, 1, proc(1)))).toEqual([1, 2]);
  });

  it('the third copy terminating the agent ends the frame: a probe after it in the same frame is not answered', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(2));
    const out = d.frame('r3', 20, d.gcItem('r3', 1, proc(3)), { type: 'probe', nonce: 5 });
    expect(out.some((e) => e.type === 'terminate')).toBe(true);
    expect(out.filter((e) => e.type === 'send' && e.item.type === 'probe.reply')).toEqual([]);
  });
});

describe('nextWakeMs is the earliest timer, no earlier, no later (PROTOCOL §5.3, §5.6, §6: a driver sleeping past it misses a deadline)', () => {
  it('just after the sessions open, the lane retransmission at 40 ms (no error report pending: the report clock does not count)', () => {
    const d = driven();
    d.open(0); // hellos retried at 50, the heartbeat at 50, node.join retransmitted at 40, its fallback at 160
    expect(d.a.nextWakeMs()).toBe(40);
  });

  it('with only the heartbeat before it, the fallback deadline; after the fallback, the next heartbeat, not the passed deadline', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 5, 0, 1); // the primary has node.join (its lane acknowledged); two replicas have not acknowledged it
    d.tick(150);
    expect(d.a.nextWakeMs()).toBe(160);
    expect(logs(d.tick(160), 'agent.fallback')).toHaveLength(1);
    expect(d.a.nextWakeMs()).toBe(200); // the heartbeat and the backups' lane retransmissions; the resend at 660
  });

  it('a ReplicaTimeout before the next heartbeat', () => {
    const d = joined();
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1)); // r3 silent: ReplicaTimeout at 510
    d.tick(500);
    expect(d.a.nextWakeMs()).toBe(510);
  });
});

describe('PROTOCOL §10.12: keys of added replicas go to the driver once, before what needs them', () => {
  it('a delivered `replica.spawn` hands the driver the added keys before the command; a later `replicas` naming the same id does not again', () => {
    const d = driven();
    d.open(0);
    const spawn: GroupCommand = { type: 'replica.spawn', id: 'r4', view: 1, primary: 'r1', replicas: ['r1', 'r2', 'r4'], added: [added('r4')] };
    d.copy('r1', 10, 1, spawn);
    const out = d.copy('r2', 10, 1, spawn);
    const kinds = out.filter((e) => e.type === 'keys' || e.type === 'deliver.command').map((e) => e.type);
    expect(kinds).toEqual(['keys', 'deliver.command']);
    expect(out.find((e) => e.type === 'keys')).toEqual({ type: 'keys', keys: [{ id: 'r4', publicKey: added('r4').publicKey, replica: { node: 'n9', address: '10.0.0.9', port: 7009 } }] });
    const change: GroupCommand = { type: 'replicas', view: 1, primary: 'r1', replicas: ['r1', 'r2', 'r4'], ports: [], added: [added('r4')] };
    d.copy('r1', 20, 2, change);
    const again = d.copy('r2', 20, 2, change);
    expect(delivered(again)).toEqual([2]);
    expect(again.filter((e) => e.type === 'keys')).toEqual([]);
  });

  it('a `replicas` command adding nobody new hands the driver no keys; the `group` input hands over the keys it names', () => {
    const d = driven();
    d.open(0);
    const change: GroupCommand = { type: 'replicas', view: 1, primary: 'r2', replicas: ['r1', 'r2', 'r3'], ports: [], added: [] };
    d.copy('r1', 10, 1, change);
    const out = d.copy('r2', 10, 1, change);
    expect(delivered(out)).toEqual([1]);
    expect(out.filter((e) => e.type === 'keys')).toEqual([]);
    const g = d.group(20, 2, 'r2', ['r2', 'r3', 'r5'], { added: [added('r5')] });
    expect(g.filter((e) => e.type === 'keys').map((e) => (e.type === 'keys' ? e.keys.map((k) => k.id) : []))).toEqual([['r5']]);
  });
});

describe('what the agent does with each item of a frame (PROTOCOL §2, §4, §6)', () => {
  it('heartbeats, probe replies, status traffic and challenges from a member are neither answered nor counted as drops', () => {
    const d = driven();
    d.open(0);
    const challenge = { inc: 1, serial: 1, atMs: 0 };
    const out = d.frame('r1', 10,
      { type: 'hb', inc: 1, counter: 1, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } },
      { type: 'probe.reply', nonce: 1 },
      { type: 'status.query', nonce: 2, challenge },
      { type: 'status.reply', nonce: 3, json: '{}' },
      { type: 'challenge', nonce: 4, challenge },
    );
    expect(d.a.status(10).drops).toEqual({});
    expect(out.filter((e) => e.type === 'send' && e.to === 'r1' && e.item.type !== 'gack')).toEqual([]);
  });

  it('an item the agent has no use for is counted UNEXPECTED; one from a stranger NOT_A_MEMBER', () => {
    const d = driven();
    d.open(0);
    d.frame('r1', 10, { type: 'challenge.ask', nonce: 1 });
    d.frame('r5', 10, { type: 'gack', srcInc: 1, destInc: 1, ack: 0, seq: 0 });
    expect(d.a.status(10).drops).toEqual({ UNEXPECTED: 1, NOT_A_MEMBER: 1 });
  });

  it('a notice from a replica goes to the driver; a notice from the driver goes to the replica on lane 0', () => {
    const d = driven();
    d.open(0);
    const got = d.frame('r2', 10, { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'notice', text: 'hi' } });
    expect(got.filter((e) => e.type === 'deliver.notice')).toEqual([{ type: 'deliver.notice', from: 'r2', text: 'hi' }]);
    const sent = d.a.step({ type: 'notice', nowMs: 20, to: 'r3', text: 'yo' });
    expect(sent.flatMap((e) => (e.type === 'send' && e.item.type === 'ptp' && e.item.body !== null ? [[e.to, e.item.body]] : []))).toEqual([['r3', { type: 'notice', text: 'yo' }]]);
  });

  it('another lane-0 payload from a replica is not a notice', () => {
    const d = driven();
    d.open(0);
    const got = d.frame('r2', 10, { type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'error.report', gssn: 1, kind: 'mismatch', suspects: [] } });
    expect(got.filter((e) => e.type === 'deliver.notice')).toEqual([]);
  });
});

describe('PROTOCOL §10.7: a change of the group at the agent', () => {
  it('a group of the same view is ignored, whatever it says', () => {
    const d = driven();
    d.open(0);
    d.group(10, 2, 'r1', ['r1', 'r2', 'r3']);
    const out = d.group(20, 2, 'r2', ['r2', 'r3', 'r4']);
    expect(logs(out, 'agent.group')).toEqual([]);
    expect(d.a.status(20)).toMatchObject({ view: 2, primary: 'r1' });
    expect(d.a.status(20).replicas.map((r) => r.id)).toEqual(['r1', 'r2', 'r3']);
  });

  it('a removed member\'s session goes: its items are dropped NOT_A_MEMBER and it gets no more hellos; the driver gets only members\' ports', () => {
    const d = driven();
    d.open(0);
    const out = d.group(10, 1, 'r1', ['r1', 'r2', 'r4'], { ports: [{ id: 'r3', port: 7003 }, { id: 'r4', port: 7004 }] });
    expect(out.filter((e) => e.type === 'replicas')).toEqual([{ type: 'replicas', replicas: ['r1', 'r2', 'r4'], ports: [{ id: 'r4', port: 7004 }] }]);
    expect(out.flatMap((e) => (e.type === 'send' && e.item.type === 'hello' ? [e.to] : []))).toEqual(['r4']);
    d.frame('r3', 20, { type: 'hello', inc: 1, echo: 1, established: true });
    expect(d.a.status(20).drops).toEqual({ NOT_A_MEMBER: 1 });
    const later = [...d.tick(100), ...d.tick(200), ...d.tick(400)];
    expect(later.filter((e) => e.type === 'send' && e.to === 'r3')).toEqual([]);
  });

  it('a removed member\'s CSN acks go with it: a spare id started again (§10.6) counts only what it acknowledges in its new life', () => {
    const d = driven();
    d.open(0);
    d.group(10, 1, 'r1', ['r1', 'r2', 'r4']);
    d.frame('r4', 20, { type: 'hello', inc: 1, echo: 1, established: true });
    d.acks('r4', 30, 1, 0); // r4 acknowledged CSN 1
    d.group(40, 2, 'r1', ['r1', 'r2', 'r5']); // r4 retired
    d.group(50, 3, 'r1', ['r1', 'r2', 'r4']); // r4 started again, a new incarnation
    d.acks('r1', 60, 1, 1);
    expect(d.a.status(60)).toMatchObject({ csnAcked: 0, pendingRequests: 1 });
    d.acks('r2', 70, 1, 0);
    expect(d.a.status(70)).toMatchObject({ csnAcked: 1, pendingRequests: 0 });
  });
});

describe('status (PROTOCOL §7)', () => {
  it('each member\'s session: connected, lane items unacknowledged and queued', () => {
    const d = driven();
    d.tick(0); // node.join queued for r1
    expect(d.a.status(0).replicas).toEqual([
      { id: 'r1', connected: false, unacked: 0, queued: 1 },
      { id: 'r2', connected: false, unacked: 0, queued: 0 },
      { id: 'r3', connected: false, unacked: 0, queued: 0 },
    ]);
    d.frame('r1', 1, { type: 'hello', inc: 1, echo: 1, established: true });
    expect(d.a.status(1).replicas[0]).toEqual({ id: 'r1', connected: true, unacked: 1, queued: 0 });
    expect(d.a.status(1)).toMatchObject({ id: 'a1', inc: 1, primary: 'r1', csnSent: 1, pendingRequests: 1, terminated: null });
  });
});

describe('PROTOCOL §5.3, §10.7: more of what a group change settles', () => {
  it('aggregated suspects are named in the group\'s order, not in the order they were found', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(1)); // r3 missing
    d.copy('r1', 10, 2, proc(2));
    d.copy('r3', 10, 2, proc(2)); // r2 missing
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([{ gssn: 1, count: 2, kind: 'replica-timeout', suspects: ['r2', 'r3'] }]);
  });

  it('a member that joined at the agent\'s GSSN g owes g + 1: two copies of g + 1 without its own do not settle it', () => {
    const d = driven();
    d.open(0);
    for (const r of ['r1', 'r2', 'r3']) d.copy(r, 10, 1, proc(1));
    d.group(20, 1, 'r1', ['r1', 'r2', 'r4']); // r4 joins at GSSN 1
    d.frame('r4', 20, { type: 'hello', inc: 1, echo: 1, established: true }); // and is up
    d.copy('r1', 30, 2, proc(2));
    d.copy('r2', 30, 2, proc(2));
    expect(d.a.status(30)).toMatchObject({ gssnDelivered: 2, gssnAcked: 1, pendingCopies: 1 });
    expect(logs(d.tick(530), 'agent.error-report')).toEqual([{ gssn: 2, count: 1, kind: 'replica-timeout', suspects: ['r4'] }]);
  });

  it('a group shrunk to two members: an undelivered GSSN holding both their copies is settled, not forgotten, and never timed out; the chain then delivers it', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 2, proc(2));
    d.copy('r2', 10, 2, proc(2)); // waits for GSSN 1; r3 silent
    d.group(20, 1, 'r1', ['r1', 'r2']);
    expect(d.a.status(20).pendingCopies).toBe(1);
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([]);
    d.copy('r1', 600, 1, proc(1));
    expect(delivered(d.copy('r2', 600, 1, proc(1)))).toEqual([1, 2]);
    expect(d.a.status(600)).toMatchObject({ gssnDelivered: 2, gssnAcked: 2, pendingCopies: 0 });
  });

  it('a group change that completes a GSSN whose remaining copies differ reports the mismatch at once (naming nobody: no two match)', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1));
    d.copy('r2', 10, 1, proc(2)); // r3 silent
    const out = d.group(20, 1, 'r1', ['r1', 'r2']);
    expect(logs(out, 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'mismatch', suspects: [] }]);
  });

  it('requests resent to a new primary that received them fall back after four smoothed ack times, not 160 ms', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 150, 1, 1);
    d.acks('r2', 150, 1, 0); // smoothed ack time 150 ms: 600 ms for a received request
    d.request(1000); // CSN 2 to r1 (lane seq 2), which never acknowledges it
    d.group(1010, 1, 'r2', ['r1', 'r2', 'r3']); // resent to r2: its lane seq 1
    d.acks('r2', 1011, 1, 1); // r2 has it
    expect(firstAt(d, 'agent.fallback', 1012, 3000)).toBe(1610);
  });
});

describe('PROTOCOL §5.5, §5.2: what else arrives on lane 1', () => {
  it('the CSN acks a copy carries acknowledge requests like gacks do', () => {
    const d = driven();
    d.open(0);
    d.copy('r1', 10, 1, proc(1), { csnAck: 1 });
    d.copy('r2', 10, 1, proc(1), { csnAck: 1 });
    expect(d.a.status(10)).toMatchObject({ csnAcked: 1, pendingRequests: 0 });
  });

  it('a CSN ack below the replica\'s last one (only a faulty replica sends one) lowers nothing: the next replica to reach CSN 3 makes it acknowledged', () => {
    const d = driven();
    d.open(0); // CSN 1
    d.request(10); // CSN 2
    d.request(20); // CSN 3
    d.acks('r1', 30, 3, 0);
    d.acks('r1', 40, 1, 0); // behind its own ack of 3
    expect(d.a.status(40)).toMatchObject({ csnAcked: 0, pendingRequests: 3 });
    d.acks('r2', 50, 3, 0);
    expect(d.a.status(50)).toMatchObject({ csnAcked: 3, pendingRequests: 0 });
  });

  it('a lane-1 body that is not a copy (a faulty replica sending a request back) is received and ignored', () => {
    const d = driven();
    const sent = d.open(0).flatMap((e) => (e.type === 'send' && e.item.type === 'grp' ? [e.item.body] : []));
    const body = sent[0];
    if (body === undefined || body.type !== 'cg') throw new Error('node.join was not sent');
    d.frame('r2', 10, { type: 'grp', srcInc: 1, destInc: 1, seq: 1, body });
    expect(gackSeqTo(d.tick(20), 'r2')).toEqual([1]); // received
    expect(d.a.status(20)).toMatchObject({ drops: {}, pendingCopies: 0, terminated: null });
  });
});

// PROTOCOL §5.2 flow control: a replica may open at most MAX_GMB_ENTRIES undelivered entries;
// a copy past that is not received (no lane-1 receipt covers it) and is retransmitted later.
/** r1's copies of GSSNs `from`..`from + n - 1`, each chained from the one before (`prev` for the
 *  first), in one frame. */
const burst = (d: Driven, nowMs: number, from: number, n: number, prev = from - 1) => {
  const items: Item[] = [];
  for (let g = from; g < from + n; g++) items.push(d.gcItem('r1', g, proc(g), { prev: g === from ? prev : g - 1 }));
  return d.frame('r1', nowMs, ...items);
};
/** The lane-1 receipt from r1 the agent reports once its delayed ack is due. */
const receiptFromR1 = (d: Driven, nowMs: number) => gackSeqTo(d.tick(nowMs + 5), 'r1');

describe('PROTOCOL §5.2: each replica\'s quota of undelivered entries', () => {
  it('a replica at its quota still gets copies received that open no entry: for another agent, another incarnation, a delivered GSSN, an entry another replica opened', () => {
    const d = driven();
    d.open(0);
    for (const r of ['r1', 'r2', 'r3']) d.copy(r, 1, 1, proc(1)); // GSSN 1 delivered and settled
    burst(d, 2, 3, MAX_GMB_ENTRIES, 2); // r1 opens 3..4098 (GSSN 2 never came): its quota is spent
    d.copy('r2', 3, MAX_GMB_ENTRIES + 3, proc(0), { prev: 2 }); // r2 opens 4099
    expect(receiptFromR1(d, 4)).toEqual([MAX_GMB_ENTRIES + 1]);
    const s = MAX_GMB_ENTRIES + 2;
    d.frame('r1', 20, d.gcItem('r1', MAX_GMB_ENTRIES + 10, proc(0), { seq: s })); // would open one more: refused
    expect(receiptFromR1(d, 20)).toEqual([]);
    expect(d.a.status(30).pendingCopies).toBe(MAX_GMB_ENTRIES + 1);
    d.frame('r1', 40, d.gcItem('r1', MAX_GMB_ENTRIES + 10, proc(0), { seq: s, dest: 'a2' }));
    expect(receiptFromR1(d, 40)).toEqual([s]);
    d.frame('r1', 50, d.gcItem('r1', MAX_GMB_ENTRIES + 11, proc(0), { seq: s + 1, destInc: 2 }));
    expect(receiptFromR1(d, 50)).toEqual([s + 1]);
    d.frame('r1', 60, d.gcItem('r1', 1, proc(1), { seq: s + 2, prev: 0 })); // a late copy of the delivered GSSN 1
    expect(receiptFromR1(d, 60)).toEqual([s + 2]);
    d.frame('r1', 70, d.gcItem('r1', MAX_GMB_ENTRIES + 3, proc(0), { seq: s + 3, prev: 2 })); // r2's entry
    expect(receiptFromR1(d, 70)).toEqual([s + 3]);
    expect(d.a.status(80).pendingCopies).toBe(MAX_GMB_ENTRIES + 1);
  });

  it('an entry delivered gives its opener one entry back, once: settling it later gives nothing more', () => {
    const d = driven();
    d.open(0);
    burst(d, 1, 1, MAX_GMB_ENTRIES); // r1 opens 1..4096: its quota is spent
    expect(receiptFromR1(d, 2)).toEqual([MAX_GMB_ENTRIES]);
    const s = MAX_GMB_ENTRIES + 1;
    d.frame('r1', 10, d.gcItem('r1', s, proc(s), { seq: s }));
    expect(receiptFromR1(d, 10)).toEqual([]); // refused
    expect(delivered(d.copy('r2', 20, 1, proc(1)))).toEqual([1]);
    d.frame('r1', 30, d.gcItem('r1', s, proc(s), { seq: s }));
    expect(receiptFromR1(d, 30)).toEqual([s]); // the delivered entry's place
    d.copy('r3', 40, 1, proc(1)); // GSSN 1 settled and forgotten
    expect(d.a.status(40)).toMatchObject({ gssnAcked: 1, pendingCopies: MAX_GMB_ENTRIES });
    // The gack GSSN 1's settling owes r1 goes out with this frame's output: read both.
    const out = d.frame('r1', 50, d.gcItem('r1', s + 1, proc(s + 1), { seq: s + 1 }));
    expect([...gackSeqTo(out, 'r1'), ...receiptFromR1(d, 50)]).toEqual([s]); // s + 1 refused: still 4096 undelivered entries of r1's
    expect(d.a.status(60).pendingCopies).toBe(MAX_GMB_ENTRIES);
  });

  it('entries the chain passed give their opener its quota back', () => {
    const d = driven();
    d.open(0);
    burst(d, 1, 2, MAX_GMB_ENTRIES, 1); // r1 opens 2..4097, chained from a GSSN 1 nobody sends
    const g = MAX_GMB_ENTRIES + 2;
    d.copy('r2', 10, g, proc(g), { prev: 0 });
    expect(delivered(d.copy('r3', 10, g, proc(g), { prev: 0 }))).toEqual([g]); // the chain passes 2..4097
    expect(d.a.status(10).pendingCopies).toBe(1);
    d.frame('r1', 20, d.gcItem('r1', g + 1, proc(g + 1), { prev: g }));
    expect(receiptFromR1(d, 20)).toEqual([MAX_GMB_ENTRIES + 1]);
    expect(d.a.status(30).pendingCopies).toBe(2);
  });

  it('a member removed and started again (a retired spare id, PROTOCOL §10.6) gets back only the places its old entries free: never more than MAX_GMB_ENTRIES', () => {
    const d = driven();
    d.open(0);
    burst(d, 1, 2, MAX_GMB_ENTRIES, 1); // r1 opens 2..4097, chained from a GSSN 1 nobody sends
    d.a.step({ type: 'group', nowMs: 10, view: 1, primary: 'r2', replicas: ['r2', 'r3', 'r4'], ports: [], added: [] });
    const g = MAX_GMB_ENTRIES + 2;
    d.copy('r2', 20, g, proc(g), { prev: 0 });
    expect(delivered(d.copy('r3', 20, g, proc(g), { prev: 0 }))).toEqual([g]); // the chain passes r1's entries
    d.a.step({ type: 'group', nowMs: 30, view: 2, primary: 'r2', replicas: ['r2', 'r3', 'r1'], ports: [], added: [] });
    d.frame('r1', 30, { type: 'hello', inc: 1, echo: 1, established: true }); // a new session with r1
    const items: Item[] = [];
    for (let k = 0; k <= MAX_GMB_ENTRIES; k++) items.push(d.gcItem('r1', g + 2 + k, proc(k), { prev: g + 1 + k, seq: k + 1 }));
    d.frame('r1', 40, ...items);
    expect(receiptFromR1(d, 40)).toEqual([MAX_GMB_ENTRIES]); // the last one refused
  });

  it('a complete entry still waiting for the chain is not yet settled: it keeps its opener\'s place', () => {
    const d = driven();
    d.open(0);
    burst(d, 1, 2, MAX_GMB_ENTRIES, 1); // r1 opens 2..4097: its quota is spent
    d.copy('r2', 10, 2, proc(2));
    d.copy('r3', 10, 2, proc(2)); // GSSN 2 complete, undelivered (GSSN 1 missing)
    const s = MAX_GMB_ENTRIES + 1;
    d.frame('r1', 20, d.gcItem('r1', s + 1, proc(s + 1), { seq: s }));
    expect(receiptFromR1(d, 20)).toEqual([]); // refused
  });
});

// Deadlines kept per entry and per request: one falling due must not fire the later ones
// (PROTOCOL §5.3 ReplicaTimeout, §5.6 fallbacks and resends; spec §3.5 G5, §3.6 G6).
/** joined(), then GSSNs 1 and 2 opened at `first` and `second` with r1's and r2's copies only: r3 silent, ReplicaTimeouts 500 ms after each. */
function twoMissingR3(first: number, second: number): Driven {
  const d = joined();
  for (const [gssn, at] of [[1, first], [2, second]] as const) for (const r of ['r1', 'r2']) d.copy(r, at, gssn, proc(gssn));
  return d;
}

describe('each deadline fires at its own time, not at the earliest one\'s', () => {
  it('two GSSNs opened 290 ms apart, each missing r3\'s copy: the first ReplicaTimeout (510) reports GSSN 1 alone; GSSN 2\'s, due at 800, goes out with the report clock at 1010', () => {
    const d = twoMissingR3(10, 300);
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
    d.copy('r3', 520, 1, proc(1)); // GSSN 1 completes after its first timeout
    expect(logs(d.tick(1010), 'agent.error-report')).toEqual([{ gssn: 2, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
  });

  it('two requests sent 100 ms apart: the second one\'s fallback (1260) does not resend the first before its own time (1660)', () => {
    const d = joined();
    d.request(1000); // CSN 2, never acknowledged
    d.request(1100); // CSN 3, never acknowledged
    const seen: { t: number; event: string; csn: unknown }[] = [];
    for (let t = 1001; t <= 1700; t++) {
      const out = d.tick(t);
      for (const event of ['agent.fallback', 'agent.resend']) for (const f of logs(out, event)) seen.push({ t, event, csn: f.csn });
    }
    expect(seen).toEqual([
      { t: 1160, event: 'agent.fallback', csn: 2 },
      { t: 1260, event: 'agent.fallback', csn: 3 },
      { t: 1660, event: 'agent.resend', csn: 2 },
    ]);
  });

  it('a request resent to a new primary whose session is down counts as not received: it falls back after 160 ms, not four smoothed ack times', () => {
    const d = driven();
    d.open(0);
    d.acks('r1', 150, 1, 1);
    d.acks('r2', 150, 1, 0); // smoothed ack time 150 ms: 600 ms for a received request
    d.frame('r2', 900, { type: 'hello', inc: 2, echo: 0, established: false }); // r2 restarted: no session
    d.request(1000); // CSN 2 to r1, which never acknowledges it
    d.group(1010, 1, 'r2', ['r1', 'r2', 'r3']); // resent to r2: queued, not sent
    expect(firstAt(d, 'agent.fallback', 1011, 3000)).toBe(1170);
  });
});

describe('nextWakeMs and the error-report clock (PROTOCOL §5.3: at most one report per kind per ReplicaTimeout)', () => {
  it('a report held by the clock wakes the driver at its time (1010), between heartbeats; the heartbeats before it still wake it', () => {
    const d = twoMissingR3(10, 20); // ReplicaTimeouts at 510 and 520
    d.tick(500); // a heartbeat: the next ones at 550, 600, … 1000, 1050
    expect(logs(d.tick(510), 'agent.error-report')).toEqual([{ gssn: 1, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
    d.acks('r1', 515, 2, 2);
    d.acks('r2', 515, 2, 0); // the report (CSN 2) acknowledged: the lanes are quiet
    d.copy('r3', 515, 1, proc(1)); // GSSN 1 complete: its timer stops
    expect(logs(d.tick(520), 'agent.error-report')).toEqual([]); // GSSN 2's report waits for the clock: 510 + 500
    d.copy('r3', 525, 2, proc(2)); // GSSN 2 complete too: no timer left
    expect(d.a.nextWakeMs()).toBeLessThanOrEqual(550); // the next heartbeat, not the report's 1010
    for (let t = d.a.nextWakeMs() as number; t < 1000; t = d.a.nextWakeMs() as number) d.tick(t);
    d.tick(1000);
    expect(d.a.nextWakeMs()).toBe(1010);
    expect(logs(d.tick(1010), 'agent.error-report')).toEqual([{ gssn: 2, count: 1, kind: 'replica-timeout', suspects: ['r3'] }]);
  });
});

describe('PROTOCOL §10.12: an agent that did not start the spare learns its key from the `replicas` command', () => {
  it('a delivered `replicas` adding r4, with no `replica.spawn` before it here, hands the driver r4\'s key before the command', () => {
    const d = driven();
    d.open(0);
    const change: GroupCommand = { type: 'replicas', view: 1, primary: 'r1', replicas: ['r1', 'r2', 'r4'], ports: [], added: [added('r4')] };
    d.copy('r1', 10, 1, change);
    const out = d.copy('r2', 10, 1, change);
    expect(out.filter((e) => e.type === 'keys' || e.type === 'deliver.command').map((e) => e.type)).toEqual(['keys', 'deliver.command']);
    expect(out.flatMap((e) => (e.type === 'keys' ? e.keys.map((k) => k.id) : []))).toEqual(['r4']);
  });
});
