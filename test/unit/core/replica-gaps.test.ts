// Replica behaviours no other row pins down (issue 15, mutation testing of src/core/replica.ts):
// each row is what a peer or a user observes when a faulty peer tries something, or what the
// status reports (docs/PROTOCOL.md §2.3, §5.8, §6, §7, §8.1, §8.3, §8.4, §10.2).
import { describe, expect, it } from 'vitest';
import type { AgentRequest, GroupInput, Item, PtpPayload, SignedCG } from '../../../src/core/wire/messages.ts';
import { orderClaim, portClaim } from '../../../src/core/wire/messages.ts';
import { encodeFrame, pack, peekSender, signCG } from '../../../src/core/wire/frame.ts';
import type { ProcessId } from '../../../src/core/ports.ts';
import type { ReplicatedState } from '../../../src/core/replicated-state.ts';
import { MAX_EVIDENCE_FRAME_BYTES, MAX_JOURNAL_EVENTS, MAX_ORDER_AHEAD, MAX_PAYLOAD_BYTES } from '../../../src/core/constants.ts';
import { corruptState } from '../../../src/faults/byzantine.ts';
import { hmacSigner, makeCluster } from './harness.ts';

const echo = (count: number) => ({ type: 'echo' as const, tag: 'x', fanout: 'self' as const, count, data: new Uint8Array([7]) });

type Cluster = ReturnType<typeof makeCluster>;

/** `from` (faulty) sends `to` on lane 0 whatever `body` it likes: a notice, rewritten before its
 *  link signs it, so it travels in sequence like any lane-0 payload of `from`'s. */
let injected = 0;
function inject(c: Cluster, from: ProcessId, to: ProcessId, body: PtpPayload): void {
  const text = `inject-${++injected}`;
  c.filters.push((f, t, i): Item => (f === from && t === to && i.type === 'ptp' && i.body?.type === 'notice' && i.body.text === text ? { ...i, body } : i));
  c.input(from, { type: 'notice', nowMs: c.now(), to, text });
}

/** Run `c` a millisecond at a time until `done`, at most `ms`. */
function until(c: Cluster, done: () => boolean, ms: number): void {
  const end = c.now() + ms;
  while (!done() && c.now() < end) c.run(1);
}

const tagOf = (s: SignedCG): string => (s.cg.payload.type === 'echo' ? s.cg.payload.tag : '');

/** Lane-0 bodies leaving a process, as `pick` names them (null: not recorded), from now on. */
const sentBodies = (c: Cluster, pick: (from: ProcessId, to: ProcessId, body: NonNullable<Extract<Item, { type: 'ptp' }>['body']>) => string | null): string[] =>
  c.sent((from, to, i) => (i.type === 'ptp' && i.body !== null ? pick(from, to, i.body) : null));
/** The health replica `k` gives `agent` in its status (PROTOCOL §7). */
const agentHealth = (c: Cluster, k: number, agent: ProcessId) => c.replicas[k]?.status(c.now()).agents.find((a) => a.id === agent)?.health;
const drops = (c: Cluster, k: number, code: string): number => (c.replicas[k]?.status(c.now()).drops as Record<string, number>)[code] ?? 0;
const accusations = (c: Cluster, by: ProcessId) => c.effects('log', by).filter((o) => o.effect.event === 'replica.accuse');

describe('only the primary orders (PROTOCOL §5.8)', () => {
  it('a backup that sends the other backup a group input as if ordered gets it dropped: nothing executed, nobody suspected', () => {
    const c = makeCluster(1);
    c.run(100);
    // r3 (faulty) turns its confirmation to r2 into an order of its own for the next RSN.
    c.filters.push((from, to, i): Item => (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order'
      ? { ...i, body: { type: 'wrapper.input', rsn: i.body.rsn + 1, input: { type: 'tick' } } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    const [r1, r2] = c.replicas;
    expect(c.effects('deliver.command', 'a1')).toHaveLength(1);
    expect(c.effects('deliver.input', 'r2').filter((o) => o.effect.input.type === 'tick')).toHaveLength(0);
    expect(c.effects('suspect', 'r2')).toHaveLength(0);
    expect(r2?.status(c.now()).drops['NOT_A_MEMBER']).toBeGreaterThan(0);
    // r2 still executes exactly what r1 ordered (RSN 2 unconfirmed after orderConfirmMs: a
    // withheld confirmation only delays it, §5.8), and reaches the same state.
    c.filters.pop();
    c.run(c.membership.timing.orderConfirmMs + 200);
    expect(c.effects('deliver.input', 'r2').filter((o) => o.effect.input.type === 'tick')).toHaveLength(0);
    expect(r2?.rsn()).toBe(r1?.rsn());
    expect(r2?.digestHex()).toBe(r1?.digestHex());
  });
});

/** What each replica reports to the watchdog (spec §1.6 rule 3: every diagnosis it initiates),
 *  from now on, as `by:reason:target`. */
const watchdogReports = (c: Cluster): string[] =>
  c.sent((from, to, i) => (to === 'scc' && i.type === 'diag.report' ? `${from}:${i.reason}:${i.target}` : null));

describe('only the primary orders requests (PROTOCOL §5.8)', () => {
  it('§5.8: a backup that sends the other backup a request as if ordered at the next RSN gets nothing executed: the primary\'s order is what runs', () => {
    const c = makeCluster(1);
    c.run(100);
    const forged = signCG({ csn: 77, gssnAck: 0, payload: { type: 'echo', tag: 'forged', fanout: 'self', count: 1, data: new Uint8Array([1]) }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    // r3 (faulty) turns its confirmation to r2 into an order of its own for the next RSN.
    c.filters.push((from, to, i): Item => (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order'
      ? { ...i, body: { type: 'wrapper', rsn: i.body.rsn + 1, signed: forged } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    c.filters.pop();
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(c.membership.timing.orderConfirmMs + 300);
    const [r1, r2] = c.replicas;
    expect(c.effects('deliver.request', 'r2').filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'forged')).toEqual([]);
    expect(c.effects('suspect', 'r2').filter((o) => o.effect.target === 'r1')).toEqual([]);
    expect(r2?.rsn()).toBe(r1?.rsn());
    expect(r2?.digestHex()).toBe(r1?.digestHex());
  });
});

describe('evidence of an equivocation (PROTOCOL §10.2)', () => {
  it('§10.2, spec §1.6 rule 3: a primary that orders two backups different requests at one RSN is reported to the watchdog as an equivocation by the backups that see it', () => {
    const c = makeCluster(1);
    c.run(100);
    const reports = watchdogReports(c);
    // r1 (faulty) signs r3 another request than r2's at the next RSN.
    const other = signCG({ csn: 99, gssnAck: 0, payload: { type: 'echo', tag: 'forged', fanout: 'self', count: 1, data: new Uint8Array([1]) }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    let forged = false;
    c.filters.push((from, to, i): Item => {
      if (forged || from !== 'r1' || to !== 'r3' || i.type !== 'ptp' || i.body?.type !== 'wrapper') return i;
      forged = true;
      return { ...i, body: { ...i.body, signed: other } };
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(c.membership.timing.orderConfirmMs + 300);
    expect(forged).toBe(true);
    // Each backup reports twice: when its confirmation disagrees (a diagnosis it initiates), and
    // with its accusation once the other's evidence shows the primary's two signed orders. (r1's
    // own core never sent the forgery, so it takes r3 for the liar: not what this row is about.)
    expect(reports.filter((r) => !r.startsWith('r1:')).sort()).toEqual(['r2:equivocation:r1', 'r2:equivocation:r1', 'r3:equivocation:r1', 'r3:equivocation:r1']);
    // The operator sees the suspicion in r2's log and counted in its status (`trine status`).
    const suspected = c.effects('suspect', 'r2');
    expect(suspected.map((o) => `${o.effect.reason}:${o.effect.target}`)).toContain('digest.mismatch:r1');
    expect(c.replicas[1]?.status(c.now()).suspicions).toBe(suspected.length);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'replica.suspect').map((o) => o.effect.fields)).toContainEqual(
      expect.objectContaining({ target: 'r1', reason: 'digest.mismatch', detail: expect.stringMatching(/^r3 was given another request at rsn \d+$/), rsn: expect.any(Number) }),
    );
  });

  it('§5.8, §10.2: a backup that executed an RSN unconfirmed still checks the other backup\'s late confirmation of it: another digest there is the primary\'s equivocation, and the other backup has the primary\'s frame as evidence, once (not one a faulty agent sent with that RSN)', () => {
    const c = makeCluster(1);
    c.run(100);
    const evidence = c.sent((from, to, i) => (from === 'r2' && to === 'r3' && i.type === 'ptp' && i.body?.type === 'order.evidence' ? `${i.body.rsn} ${peekSender(i.body.frame)}` : null));
    // r1 (faulty) signs r3 another request than r2's at the next RSN. The backups' confirmations
    // and evidence do not reach each other (notices in their place keep the lanes' sequence),
    // so each executes its own unconfirmed; r3's confirmation reaches r2 only later.
    const csn = (c.replicas[0]?.state().csnReceived.get('a1') ?? 0) + 1;
    const other = signCG({ csn, gssnAck: 0, payload: { ...echo(1), tag: 'forged' }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    let forged = 0;
    let late: PtpPayload | null = null;
    c.filters.push((from, to, i): Item => {
      if (forged === 0 && from === 'r1' && to === 'r3' && i.type === 'ptp' && i.body?.type === 'wrapper') {
        forged = i.body.rsn;
        return { ...i, body: { ...i.body, signed: other } };
      }
      const between = (from === 'r2' && to === 'r3') || (from === 'r3' && to === 'r2');
      if (!between || i.type !== 'ptp' || (i.body?.type !== 'order' && i.body?.type !== 'order.evidence')) return i;
      if (from === 'r3' && i.body.type === 'order' && i.body.rsn === forged) late = i.body;
      return { ...i, body: { type: 'notice', text: 'lost' } };
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    until(c, () => forged > 0, 50);
    c.run(2);
    // a1 (faulty too) sends r2 a frame of its own with a wrapper at that RSN: it is nobody's order.
    c.sendAs('a1', 'r2', [{ type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body: { type: 'wrapper', rsn: forged, signed: other } }]);
    const rsn = () => forged;
    until(c, () => c.effects('log', 'r2').some((o) => o.effect.event === 'order.unconfirmed' && o.effect.fields['rsn'] === rsn()), c.membership.timing.orderConfirmMs + 100);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'order.unconfirmed').map((o) => o.effect.fields['rsn'])).toEqual([rsn()]);
    expect(late).not.toBeNull();
    const suspectedBefore = c.effects('suspect', 'r2').length;
    inject(c, 'r3', 'r2', late as unknown as PtpPayload);
    c.run(5);
    expect(c.effects('suspect', 'r2').slice(suspectedBefore).map((o) => [o.effect.target, o.effect.reason, o.effect.detail])).toEqual([['r1', 'digest.mismatch', `r3 was given another request at executed rsn ${rsn()}`]]);
    // r3 has r2's frame for that RSN as evidence, sent once (when r2 executed it unconfirmed).
    expect(evidence).toEqual([`${rsn()} r1`]);
  });

  it('§5.8, §10.2: a primary that orders the two backups different group inputs at one RSN is disputed before either executes it, and convicted by its own frames', () => {
    const c = makeCluster(1);
    c.run(100);
    // r1 (faulty) orders, where it orders a1's request, a tick for r2 and a node failure for r3.
    const rewrite = (to: ProcessId): GroupInput => (to === 'r2' ? { type: 'tick' } : { type: 'node.failed', agent: 'a1', inc: 1 });
    c.filters.push((from, to, i): Item => (from === 'r1' && (to === 'r2' || to === 'r3') && i.type === 'ptp' && i.body?.type === 'wrapper' && tagOf(i.body.signed) === 'split'
      ? { ...i, body: { type: 'wrapper.input', rsn: i.body.rsn, input: rewrite(to) } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'split' } });
    c.run(20);
    for (const b of ['r2', 'r3']) {
      expect(c.effects('suspect', b).map((o) => [o.effect.target, o.effect.reason])).toEqual([['r1', 'digest.mismatch']]);
      // Neither input runs (the group then condemns r1: its replica.condemn is the only input).
      expect(c.effects('deliver.input', b).map((o) => o.effect.input.type).filter((t) => t !== 'replica.condemn')).toEqual([]);
    }
    // Each backup shows the other the primary's frame: r1 is convicted by its own two signed
    // orders, and neither backup accuses the other.
    c.run(300);
    for (const b of ['r2', 'r3']) {
      expect(accusations(c, b).map((o) => [o.effect.fields['target'], o.effect.fields['reason']])).toEqual([['r1', 'equivocation']]);
    }
  });

  it('a frame the other backup signed itself proves nothing about the primary: no accusation of a correct primary', () => {
    const c = makeCluster(1);
    c.run(100);
    // r3 (faulty) shows r2, as "the primary's frame" for each RSN, one it signed itself that
    // orders another request there.
    const other = signCG({ csn: 99, gssnAck: 0, payload: { type: 'echo', tag: 'forged', fanout: 'self', count: 1, data: new Uint8Array([1]) }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    c.filters.push((from, to, i): Item => {
      if (from !== 'r3' || to !== 'r2' || i.type !== 'ptp' || i.body?.type !== 'order') return i;
      const rsn = i.body.rsn;
      const frame = encodeFrame({ from: 'r3', to: 'r3', items: [{ type: 'ptp', srcInc: 1, destInc: 1, seq: rsn, ackSeq: 0, body: { type: 'wrapper', rsn, signed: other } }] }, { cluster: 'test', signer: hmacSigner('r3') });
      return { ...i, body: { type: 'order.evidence', rsn, frame } };
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    expect(c.effects('deliver.command', 'a1')).toHaveLength(1);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'replica.accuse')).toHaveLength(0);
    expect(c.effects('log').filter((o) => o.effect.event === 'replica.accusation' && o.effect.fields['target'] === 'r1')).toHaveLength(0);
  });
});

describe('heartbeats and health (PROTOCOL §6, §7)', () => {
  it('a replayed heartbeat (same incarnation and counter) is dropped as REPLAYED', () => {
    const c = makeCluster(1);
    let captured: Item | null = null;
    c.filters.push((from, to, i) => {
      if (from === 'r3' && to === 'r2' && i.type === 'hb') captured = i; // the latest one
      return i;
    });
    c.run(300);
    expect(captured).not.toBeNull();
    // Replayed at once, before r3's next heartbeat (every replicaHeartbeatMs) raises the counter.
    const r2 = c.replicas[1];
    const before = r2?.status(c.now()).drops['REPLAYED'] ?? 0;
    c.sendAs('r3', 'r2', [captured as unknown as Item]);
    c.run(2);
    expect(r2?.status(c.now()).drops['REPLAYED'] ?? 0).toBe(before + 1);
  });

  it('a heartbeat from a process the replica keeps no record of, of an earlier incarnation (whatever its counter), or of the other kind than its sender is dropped as REPLAYED, and leaves a silent agent silent', () => {
    const c = makeCluster(1);
    c.run(300);
    // a1 still runs and answers probes, but r2 hears no heartbeat of it any more.
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r2' && i.type === 'hb' ? null : i));
    const healthOfA1 = () => agentHealth(c, 1, 'a1');
    until(c, () => healthOfA1() === 'silent', 1_000);
    expect(healthOfA1()).toBe('silent');
    const agentHb = (inc: number): Item => ({ type: 'hb', inc, counter: 1e6, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } });
    const replicaHb: Item = { type: 'hb', inc: 1, counter: 1e6, info: { type: 'replica', role: 'backup', rsn: 0, gssn: 0, digest: new Uint8Array(32), view: 0, ckptRsn: 0, ckptDigest: new Uint8Array(32) } };
    const before = drops(c, 1, 'REPLAYED');
    c.sendAs('scc', 'r2', [agentHb(1)]); // the watchdog heartbeats no replica: r2 keeps no record of it
    c.sendAs('a1', 'r2', [agentHb(0)]); // a1's incarnation before the one the group knows
    c.sendAs('a1', 'r2', [replicaHb]); // an agent posing as a replica
    c.sendAs('r3', 'r2', [agentHb(1)]); // a replica posing as an agent
    c.run(2);
    expect(drops(c, 1, 'REPLAYED')).toBe(before + 4);
    expect(healthOfA1()).toBe('silent');
  });

  it('§8.4: a backup probes an agent at its second missed check, and the agent heard again ends that probe: its lost probe reply does not make the node unreachable', () => {
    const c = makeCluster(1);
    c.run(300);
    // r2 stops hearing a1's heartbeats, and never gets a1's reply to its probe.
    let hbLost = true;
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r2' && (i.type === 'probe.reply' || (i.type === 'hb' && hbLost)) ? null : i));
    // spec §1.3: the probe goes out at the second check that missed a heartbeat, when status
    // first calls the agent silent.
    until(c, () => agentHealth(c, 1, 'a1') === 'silent', 1_000);
    const probes = c.effects('log', 'r2').filter((o) => o.effect.event === 'node.probe').map((o) => o.at);
    expect(probes).toHaveLength(1);
    expect(c.now() - (probes[0] ?? 0)).toBeLessThan(c.membership.timing.agentCheckMs / 2); // that same check, not the next
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'agent.silent').map((o) => o.effect.fields)).toEqual([{ agent: 'a1', missedChecks: 2 }]);
    // a1's next heartbeat to r2 comes within 2 × agentHeartbeatMs, before the probe's deadline.
    hbLost = false;
    c.run(3 * c.membership.timing.probeTimeoutMs);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'node.unreachable')).toEqual([]);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toEqual([]);
  });

  it('status lists the other members with the age of their last heartbeat: within a period while they heartbeat, growing once one falls silent', () => {
    const c = makeCluster(1);
    c.run(500);
    const hb = c.membership.timing.replicaHeartbeatMs;
    const ages = () => Object.fromEntries(c.replicas[0]?.status(c.now()).replicas.map((r) => [r.id, r.lastHeartbeatAgeMs]) ?? []);
    expect(Object.keys(ages())).toEqual(['r2', 'r3']);
    for (const age of Object.values(ages())) {
      expect(age).toBeGreaterThanOrEqual(0);
      expect(age).toBeLessThanOrEqual(hb + 2);
    }
    c.down.add('r3');
    c.run(100);
    expect(ages()['r3']).toBeGreaterThanOrEqual(100);
    expect(ages()['r2']).toBeLessThanOrEqual(hb + 2);
  });

  it('spec §1.3: agent checks are paused while self-diagnosis runs, and resume from nothing heard: an agent that died meanwhile is probed at the second check after the view change', () => {
    const c = makeCluster(2);
    c.run(500);
    // r3 dies: r2's silence diagnosis of it pauses r2's agent checks until the group has
    // removed r3. The agent a2 dies once that diagnosis runs.
    c.down.add('r3');
    until(c, () => c.effects('log', 'r2').some((o) => o.effect.event === 'diagnosis.initiated'), 1_000);
    c.down.add('a2');
    const viewAt = () => c.effects('log', 'r2').find((o) => o.effect.event === 'group.view')?.at;
    until(c, () => viewAt() !== undefined, 3_000);
    const changed = viewAt() ?? NaN;
    until(c, () => c.effects('log', 'r2').some((o) => o.effect.event === 'node.probe'), 1_000);
    const probedAt = c.effects('log', 'r2').find((o) => o.effect.event === 'node.probe')?.at ?? NaN;
    // Heartbeats a2 sent while the checks were paused count for nothing after: the first check
    // after the view change misses one, the second starts the probe.
    expect(probedAt - changed).toBeGreaterThan(c.membership.timing.agentCheckMs);
    expect(probedAt - changed).toBeLessThanOrEqual(2 * c.membership.timing.agentCheckMs);
  });

  it('a silent replica is reported late after one missed check, then silent (status health)', () => {
    const c = makeCluster(1);
    c.run(500);
    c.down.add('r3');
    const seen: string[] = [];
    for (let k = 0; k < 60 && seen[seen.length - 1] !== 'silent'; k++) {
      c.run(10);
      const h = c.replicas[0]?.status(c.now()).replicas.find((r) => r.id === 'r3')?.health as string;
      if (seen[seen.length - 1] !== h) seen.push(h);
    }
    // Removed from the group later (PROTOCOL §10.3): what matters is the order of the first reports.
    expect(seen).toEqual(['healthy', 'late', 'silent']);
  });

  it('a silent replica is suspected of heartbeat.missed once per silence, not at every check it misses', () => {
    const c = makeCluster(1);
    c.run(500);
    c.down.add('r3');
    const check = c.membership.timing.replicaCheckMs;
    for (let k = 0; k < 60 && c.replicas[0]?.status(c.now()).replicas.find((r) => r.id === 'r3')?.health !== 'silent'; k++) c.run(10);
    c.run(2 * check); // more missed checks, whether or not the group has removed r3 meanwhile
    for (const r of ['r1', 'r2']) {
      expect(c.effects('suspect', r).filter((o) => o.effect.reason === 'heartbeat.missed').map((o) => o.effect.target)).toEqual(['r3']);
    }
  });

  it('a missed heartbeat is suspected and diagnosed with how long the replica has been silent: more than a heartbeat period, at most two checks', () => {
    const c = makeCluster(1);
    c.run(500);
    c.down.add('r3');
    c.run(2 * c.membership.timing.replicaCheckMs);
    const { replicaHeartbeatMs: hb, replicaCheckMs: check } = c.membership.timing;
    for (const [k, r] of ['r1', 'r2'].entries()) {
      const detail = c.effects('suspect', r).find((o) => o.effect.reason === 'heartbeat.missed')?.effect.detail ?? '';
      const silentMs = Number(/^no heartbeat from r3 for (\d+) ms$/.exec(detail)?.[1]);
      expect(silentMs).toBeGreaterThan(hb - 1);
      expect(silentMs).toBeLessThanOrEqual(2 * check); // heard just after one check, missed at the next but one
      // The self-diagnosis it starts (spec §1.3) records the same silence.
      const initiated = c.replicas[k]?.status(c.now()).diagnosis.find((d) => d.kind === 'initiated' && d.target === 'r3');
      expect(initiated?.detail).toBe(`no heartbeat for ${silentMs} ms`);
    }
  });

  it('§6: a backup that never heard an agent does not probe it: the agent may still be starting', () => {
    const c = makeCluster(1);
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r2' && i.type === 'hb' ? null : i));
    c.run(1_500);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.agent === 'a1')?.state).toBe('up'); // it joined
    expect(agentHealth(c, 1, 'a1')).toBe('unknown');
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'agent.silent' || o.effect.event === 'node.probe')).toEqual([]);
  });

  it('§8.4: a backup whose probe of a silent agent runs, or just expired, tells the primary nothing more until that probe is stale', () => {
    const c = makeCluster(1);
    c.run(300);
    // r2 hears nothing more from a1 (heartbeats and probe replies alike); r3 and the primary do.
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r2' ? null : i));
    const { agentCheckMs: check, probeTimeoutMs: probe } = c.membership.timing;
    const suspicions = sentBodies(c, (from, to, b) => (from === 'r2' && to === 'r1' && b.type === 'node.suspect' ? `${b.unreachable}` : null));
    until(c, () => c.effects('log', 'r2').some((o) => o.effect.event === 'agent.silent'), 1_000);
    const first = c.now();
    // The probe runs probeTimeoutMs and is stale probeTimeoutMs after that: the checks in
    // between, silent all, ask for nothing new.
    c.run(2 * probe - 5);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'agent.silent').map((o) => o.at)).toEqual([first - 1]);
    expect(suspicions).toEqual(['false', 'true']);
    expect(Math.floor((2 * probe - 5) / check)).toBeGreaterThan(1); // at least two such checks
  });
});

describe('a replica whose state is corrupted in memory (PROTOCOL §10.4, `trine inject corrupt-replica`)', () => {
  it('§10.4: in an idle cluster (no RSN to move on to), the corrupted replica\'s next heartbeat digest differs from the others\' at the same RSN: both accuse it and the group removes it', () => {
    const c = makeCluster(1);
    c.run(300);
    const r3 = c.replicas[2];
    const rsn = r3?.rsn();
    // As the injection does (src/daemon/inject-replica.ts): change the state in place, then
    // drop the digest the replica cached for this RSN.
    expect(corruptState(r3?.state() as ReplicatedState, 'slots')).not.toBeNull();
    r3?.forgetDigest();
    c.run(1_000);
    expect(c.replicas[0]?.rsn()).toBeGreaterThan(rsn ?? Infinity); // the removal is ordered
    for (const k of [0, 1]) {
      expect(accusations(c, c.replicas[k]?.id ?? '').map((o) => o.effect.fields['target'])).toContain('r3');
      expect(c.replicas[k]?.status(c.now()).members).toEqual(['r1', 'r2']);
    }
  });
});

describe('a replica\'s own pause is not its peers\' silence (PROTOCOL §6.1)', () => {
  type C = ReturnType<typeof makeCluster>;
  const heartbeatSuspicions = (c: C, r: ProcessId, sinceMs: number) =>
    c.effects('suspect', r).filter((o) => o.at >= sinceMs && o.effect.reason === 'heartbeat.missed').map((o) => o.effect.target);
  /** Whom `r` (every replica if absent) accused since `sinceMs`. */
  const accusations = (c: C, sinceMs: number, r?: ProcessId) =>
    c.effects('log', r).filter((o) => o.at >= sinceMs && o.effect.event === 'replica.accuse').map((o) => o.effect.fields['target']);
  const everyonesMembers = (c: C) => c.replicas.map((r) => r.status(c.now()).members);
  const INITIAL = [['r1', 'r2', 'r3'], ['r1', 'r2', 'r3'], ['r1', 'r2', 'r3']];

  it('a backup that did not run for 300 ms, its peers\' heartbeats waiting unread, suspects nobody and logs the pause', () => {
    const c = makeCluster(1);
    c.run(500);
    const check = c.membership.timing.replicaCheckMs;
    c.paused.add('r2');
    const pausedAt = c.now();
    c.run(300);
    c.resume('r2');
    c.run(3 * check);
    expect(heartbeatSuspicions(c, 'r2', pausedAt)).toEqual([]);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'replica.paused').map((o) => o.effect.fields['pausedMs'])).toEqual([expect.any(Number)]);
    expect(c.effects('log', 'r2').find((o) => o.effect.event === 'replica.paused')?.effect.fields['pausedMs']).toBeGreaterThanOrEqual(300);
    // The peers saw r2 silent, and heard it again before their diagnosis ran out: no accusation.
    expect(heartbeatSuspicions(c, 'r1', pausedAt)).toEqual(['r2']);
    expect(everyonesMembers(c)).toEqual(INITIAL);
  });

  it('a silence diagnosis that ran out while the replica was paused waits for the reply held in its socket: no accusation', () => {
    const c = makeCluster(1);
    c.run(500);
    const t0 = c.now();
    c.paused.add('r3'); // r3 starves: r1 and r2 suspect it and probe it
    c.run(320);
    expect(heartbeatSuspicions(c, 'r2', t0)).toEqual(['r3']);
    const suspectedAt = c.effects('suspect', 'r2').filter((o) => o.at >= t0)[0]?.at as number;
    c.paused.add('r2'); // then r2 starves too, past the 400 ms of its diagnosis of r3
    c.run(80);
    c.resume('r3'); // r3 answers the probes and heartbeats again; r2's copies wait for it
    c.runUntil(suspectedAt + c.membership.timing.diagnosisTimeoutMs + 20);
    c.resume('r2'); // short of what its peers would accuse it for
    c.run(500);
    expect(accusations(c, t0, 'r2')).toEqual([]);
    expect(accusations(c, t0, 'r1')).toEqual([]);
    expect(everyonesMembers(c)).toEqual(INITIAL);
  });

  it('a pause puts off only the diagnoses it overran: one with time left keeps its own deadline', () => {
    const c = makeCluster(1);
    c.run(500);
    const t0 = c.now();
    c.paused.add('r3');
    c.run(320);
    const suspectedAt = c.effects('suspect', 'r2').filter((o) => o.at >= t0)[0]?.at as number;
    expect(suspectedAt).toBeDefined();
    c.paused.add('r2'); // a short pause, inside r2's 400 ms diagnosis of r3
    c.run(100);
    c.resume('r2');
    c.run(10);
    expect(c.now()).toBeLessThan(suspectedAt + c.membership.timing.diagnosisTimeoutMs - 50);
    c.resume('r3'); // r3 answers within the diagnosis' own time
    c.run(500);
    expect(accusations(c, t0)).toEqual([]);
  });

  it('a node probe whose deadline a backup\'s pause overran waits for the reply held in its socket: the node is not called unreachable', () => {
    const c = makeCluster(2);
    c.run(500);
    const t0 = c.now();
    const unreachable = sentBodies(c, (from, _to, b) => (b.type === 'node.suspect' && b.unreachable ? `${from}: ${b.agent}` : null));
    c.paused.add('a1'); // a1 starves: the backups miss its heartbeats and probe it
    const probed = () => c.effects('log', 'r2').find((o) => o.at >= t0 && o.effect.event === 'node.probe');
    for (let k = 0; k < 100 && probed() === undefined; k++) c.run(5);
    const probedAt = probed()?.at as number;
    expect(probedAt).toBeDefined();
    c.paused.add('r2'); // r2 starves too, past its probe's 120 ms
    c.run(20);
    c.resume('a1'); // a1 answers every probe; r2's reply waits for it
    c.runUntil(probedAt + c.membership.timing.probeTimeoutMs + 20);
    c.resume('r2');
    c.run(400);
    expect(c.effects('log', 'r2').filter((o) => o.at >= t0 && o.effect.event === 'node.unreachable')).toEqual([]);
    expect(unreachable).toEqual([]);
    expect(c.replicas[0]?.status(c.now()).agents.find((a) => a.id === 'a1')).toMatchObject({ joined: true });
    expect(accusations(c, t0)).toEqual([]);
  });

  it('a PrimaryProgressTimeout that a backup\'s pause overran waits for the primary\'s order held in its socket: no primary.progress', () => {
    const c = makeCluster(1);
    c.run(500);
    const t0 = c.now();
    const forwarded = sentBodies(c, (from, to, b) => (from === 'r2' && to === 'r1' && b.type === 'wrapper' && b.rsn === 0 ? b.signed.cg.payload.type : null));
    c.operate({ type: 'task.kill', nonce: `${'0'.repeat(31)}1`, task: 't9' }); // to every replica: the backups forward it
    c.run(1);
    expect(forwarded).toEqual(['task.kill']);
    c.paused.add('r2'); // the primary orders it at once; r2 starves past its 500 ms watch
    c.run(c.membership.timing.primaryProgressMs + 20);
    c.resume('r2');
    c.run(300);
    expect(c.effects('suspect', 'r2').filter((o) => o.at >= t0 && o.effect.reason === 'primary.progress')).toEqual([]);
    expect(everyonesMembers(c)).toEqual(INITIAL);
  });

  it('after its pause a replica still suspects a peer that is really silent, at its next check', () => {
    const c = makeCluster(1);
    c.run(500);
    const check = c.membership.timing.replicaCheckMs;
    c.paused.add('r2');
    c.down.add('r3');
    c.run(300);
    c.resume('r2');
    const resumedAt = c.now();
    c.run(2 * check);
    const s = c.effects('suspect', 'r2').filter((o) => o.at >= resumedAt && o.effect.reason === 'heartbeat.missed');
    expect(s.map((o) => o.effect.target)).toEqual(['r3']);
    expect((s[0]?.at ?? Infinity) - resumedAt).toBeLessThanOrEqual(2 * check);
  });
});

describe('node failure needs a backup\'s word about the incarnation the group knows (PROTOCOL §8.4)', () => {
  it('an agent that tells the primary another node is unreachable is dropped as NOT_A_MEMBER: no probe, no node.failed', () => {
    const c = makeCluster(2);
    c.run(300);
    const probes: ProcessId[] = [];
    c.filters.push((from, to, i) => {
      if (from === 'r1' && i.type === 'probe') probes.push(to);
      return from === 'a2' && to === 'r1' && i.type === 'probe.reply' ? null : i; // a probe of r1's would go unanswered
    });
    const before = drops(c, 0, 'NOT_A_MEMBER');
    inject(c, 'a1', 'r1', { type: 'node.suspect', agent: 'a2', inc: 1, unreachable: true });
    c.run(500);
    expect(drops(c, 0, 'NOT_A_MEMBER')).toBe(before + 1);
    expect(probes).toEqual([]);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toHaveLength(0);
  });

  it('a backup that tells the other backup a node is unreachable is dropped as NOT_A_MEMBER: only the primary acts on it, and the other backup does not probe', () => {
    const c = makeCluster(2);
    c.run(300);
    const probes: ProcessId[] = [];
    c.filters.push((from, to, i) => {
      if (i.type === 'probe') probes.push(`${from}>${to}`);
      return i;
    });
    const before = drops(c, 2, 'NOT_A_MEMBER');
    inject(c, 'r2', 'r3', { type: 'node.suspect', agent: 'a2', inc: 1, unreachable: true });
    c.run(500);
    expect(drops(c, 2, 'NOT_A_MEMBER')).toBe(before + 1);
    expect(probes).toEqual([]);
  });

  it('a backup\'s suspicion of a process that is no agent is dropped as NOT_A_MEMBER', () => {
    const c = makeCluster(1);
    c.run(300);
    const before = drops(c, 0, 'NOT_A_MEMBER');
    inject(c, 'r2', 'r1', { type: 'node.suspect', agent: 'r3', inc: 1, unreachable: true });
    c.run(300);
    expect(drops(c, 0, 'NOT_A_MEMBER')).toBe(before + 1);
  });

  it('a backup\'s suspicion of another incarnation than the group knows is ignored: the primary does not probe, nothing is declared', () => {
    const c = makeCluster(2);
    c.run(300);
    const probes: ProcessId[] = [];
    c.filters.push((from, to, i) => {
      if (from === 'r1' && i.type === 'probe') probes.push(to);
      return from === 'a2' && to === 'r1' && i.type === 'probe.reply' ? null : i;
    });
    inject(c, 'r2', 'r1', { type: 'node.suspect', agent: 'a2', inc: 2, unreachable: true }); // a2 is incarnation 1
    c.run(500);
    expect(probes).toEqual([]);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toHaveLength(0);
    expect(c.effects('suspect').filter((o) => o.effect.target === 'r2')).toHaveLength(0);
  });

  it('a probe reply with the nonce of no current probe does not end the primary\'s probe: the dead node is declared failed on its first probe', () => {
    const c = makeCluster(2);
    c.run(300);
    const probes: number[] = [];
    c.filters.push((from, to, i) => {
      if (from === 'r1' && to === 'a2' && i.type === 'probe') probes.push(i.nonce);
      return i;
    });
    c.down.add('a2');
    for (let k = 0; k < 200 && probes.length === 0; k++) c.run(5);
    expect(probes).toHaveLength(1);
    const probedAt = c.now();
    // An answer to an earlier probe, arriving late (or replayed), while the current one runs.
    c.sendAs('a2', 'r1', [{ type: 'probe.reply', nonce: (probes[0] as number) - 1 }]);
    c.run(1000);
    const failed = c.effects('deliver.input', 'r1').filter((o) => o.effect.input.type === 'node.failed');
    expect(failed.map((o) => o.effect.input)).toEqual([{ type: 'node.failed', agent: 'a2', inc: 1 }]);
    expect(failed[0]?.at).toBeLessThanOrEqual(probedAt + c.membership.timing.probeTimeoutMs + 10);
    expect(probes).toHaveLength(1);
  });
});

describe('a backup\'s signed confirmation shown to the primary (PROTOCOL §5.8, §10.2 order.lie)', () => {
  /** A cluster whose replicas all executed `rsn` (a1's request), and a digest of no order the
   *  primary gave there. */
  function ordered() {
    const c = makeCluster(1);
    c.run(100);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(200);
    const rsn = c.replicas[0]?.rsn() as number;
    expect(c.replicas.map((r) => r.rsn())).toEqual([rsn, rsn, rsn]);
    return { c, rsn, view: c.replicas[0]?.status(c.now()).view as number, bogus: new Uint8Array(32).fill(9) };
  }
  /** r3's true confirmations, by RSN, as it sends them to r2 from now on. */
  function r3Confirms(c: Cluster): Map<number, Uint8Array> {
    const confirmed = new Map<number, Uint8Array>();
    c.filters.push((from, to, i) => {
      if (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order') confirmed.set(i.body.rsn, i.body.digest);
      return i;
    });
    return confirmed;
  }
  const claim = (claimant: ProcessId, view: number, rsn: number, digest: Uint8Array): PtpPayload =>
    ({ type: 'order.claim', claimant, view, rsn, digest, sig: hmacSigner(claimant).sign(pack(orderClaim(claimant, view, rsn, digest))) });

  it('a backup that shows its own claim accuses nobody: the primary acts only on the other backup\'s word', () => {
    const { c, rsn, view, bogus } = ordered();
    inject(c, 'r2', 'r1', claim('r2', view, rsn, bogus));
    c.run(300);
    expect(accusations(c, 'r1')).toHaveLength(0);
  });

  it('a claim signed in another view is not held against the other backup: no order.lie accusation', () => {
    const { c, rsn, view, bogus } = ordered();
    inject(c, 'r2', 'r1', claim('r3', view + 1, rsn, bogus));
    c.run(300);
    expect(accusations(c, 'r1')).toHaveLength(0);
    // The same claim in this view is the lie §10.2 describes: the primary accuses r3.
    inject(c, 'r2', 'r1', claim('r3', view, rsn, bogus));
    c.run(300);
    expect(accusations(c, 'r1').map((o) => [o.effect.fields['target'], o.effect.fields['reason']])).toEqual([['r3', 'order.lie']]);
  });

  it(`§10.2: the primary keeps the digests of its last MAX_ORDER_AHEAD (${MAX_ORDER_AHEAD}) orders to judge claims by: a claim about an older RSN is not judged, one within them is`, () => {
    const { c, rsn: first, view, bogus } = ordered();
    for (let k = 0; k < MAX_ORDER_AHEAD + 8; k += 200) {
      for (let j = 0; j < 200; j++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
      c.run(4);
    }
    c.run(100);
    const last = c.replicas[0]?.rsn() as number;
    expect(last - first).toBeGreaterThanOrEqual(MAX_ORDER_AHEAD);
    inject(c, 'r2', 'r1', claim('r3', view, first, bogus));
    c.run(300);
    expect(accusations(c, 'r1')).toHaveLength(0);
    inject(c, 'r2', 'r1', claim('r3', view, last - MAX_ORDER_AHEAD + 1, bogus));
    c.run(300);
    expect(accusations(c, 'r1').map((o) => [o.effect.fields['target'], o.effect.fields['reason']])).toEqual([['r3', 'order.lie']]);
  }, 60_000);

  it('§10.2: a claim that matches what the primary ordered accuses nobody, and one its claimant did not sign is dropped as SIG_INVALID', () => {
    const c = makeCluster(1);
    c.run(100);
    const confirmed = r3Confirms(c);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(200);
    const rsn = c.replicas[0]?.rsn() as number;
    const view = c.replicas[0]?.status(c.now()).view as number;
    const digest = confirmed.get(rsn) as Uint8Array;
    expect(digest).toBeDefined();
    inject(c, 'r2', 'r1', claim('r3', view, rsn, digest));
    c.run(100);
    expect(accusations(c, 'r1')).toHaveLength(0);
    const before = drops(c, 0, 'SIG_INVALID');
    inject(c, 'r2', 'r1', { type: 'order.claim', claimant: 'r3', view, rsn, digest: new Uint8Array(32).fill(9), sig: new Uint8Array(64) });
    c.run(100);
    expect(accusations(c, 'r1')).toHaveLength(0);
    expect(drops(c, 0, 'SIG_INVALID')).toBe(before + 1);
  });

  it('§10.2: a claim on a group input the primary ordered is judged by that input: one that matches accuses nobody', () => {
    const c = makeCluster(1);
    c.run(200);
    const confirmed = r3Confirms(c);
    // a1's node goes silent to two probes: r1 orders node.failed, a group input.
    c.filters.push((from, to, i) => (from === 'a1' && i.type === 'probe.reply' ? null : i));
    const inc = c.replicas[0]?.state().nodes.get('a1')?.inc as number;
    inject(c, 'r2', 'r1', { type: 'node.suspect', agent: 'a1', inc, unreachable: true });
    c.run(c.membership.timing.probeTimeoutMs + 50);
    const failed = c.effects('deliver.input', 'r1').find((o) => o.effect.input.type === 'node.failed');
    expect(failed).toBeDefined();
    const rsn = failed?.effect.rsn as number;
    const digest = confirmed.get(rsn) as Uint8Array;
    expect(digest).toBeDefined();
    inject(c, 'r2', 'r1', claim('r3', c.replicas[0]?.status(c.now()).view as number, rsn, digest));
    c.run(100);
    expect(accusations(c, 'r1')).toHaveLength(0);
  });

  it('§10.2: a backup shown the other backup\'s signed claim judges nothing: the primary may have given the other that order, and only the primary knows what it ordered', () => {
    const { c, rsn, view, bogus } = ordered();
    // r1 (faulty) shows r2 a claim r3 signed for another order at an RSN r2 executed: what an
    // equivocating primary would hold. r2 leaves it to the primary, which would accuse r3.
    inject(c, 'r1', 'r2', claim('r3', view, rsn, bogus));
    c.run(300);
    expect(accusations(c, 'r2')).toHaveLength(0);
    expect(c.replicas.map((r) => r.state().replicas)).toEqual([['r1', 'r2', 'r3'], ['r1', 'r2', 'r3'], ['r1', 'r2', 'r3']]);
  });
});

describe('requests relayed between replicas (PROTOCOL §2.3)', () => {
  it('a wrapper relayed by an agent, not a member, is dropped as NOT_A_MEMBER and never ordered, even with a request its client signed', () => {
    const c = makeCluster(1);
    c.run(200);
    const r1 = c.replicas[0];
    const csn = (r1?.state().csnReceived.get('a1') ?? 0) + 1;
    const signed = signCG({ csn, gssnAck: 0, payload: { ...echo(1), tag: 'relayed' }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    const before = drops(c, 0, 'NOT_A_MEMBER');
    const rsn = r1?.rsn();
    inject(c, 'a1', 'r1', { type: 'wrapper', rsn: 0, signed });
    c.run(300);
    expect(drops(c, 0, 'NOT_A_MEMBER')).toBe(before + 1);
    expect(c.effects('deliver.request').filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'relayed')).toHaveLength(0);
    expect(c.replicas.map((r) => r.rsn())).toEqual([rsn, rsn, rsn]);
  });
});

describe('confirmations ahead of the order are bounded (PROTOCOL §5.8)', () => {
  it('the other backup\'s confirmation up to MAX_ORDER_AHEAD RSNs ahead of the executed one is kept and checked when reached; one further ahead is ignored', () => {
    const c = makeCluster(1);
    c.run(100);
    const r2 = c.replicas[1];
    const base = r2?.rsn() as number;
    const view = r2?.status(c.now()).view as number;
    // r3 (faulty) confirms, unsigned, digests of no order for two RSNs far ahead: the first is
    // within the bound, the second one past it.
    for (const rsn of [base + MAX_ORDER_AHEAD, base + MAX_ORDER_AHEAD + 1]) {
      inject(c, 'r3', 'r2', { type: 'order', rsn, digest: new Uint8Array(32).fill(rsn & 0xff), view, sig: new Uint8Array(64) });
    }
    c.run(5);
    expect(r2?.rsn()).toBe(base);
    const before = drops(c, 1, 'SIG_INVALID');
    for (let k = 0; k < MAX_ORDER_AHEAD + 8; k += 200) {
      for (let j = 0; j < 200; j++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
      c.run(4);
    }
    c.run(100);
    expect(r2?.rsn()).toBeGreaterThan(base + MAX_ORDER_AHEAD + 1);
    // The kept one disputed its RSN when it came, and counted as none (its sender did not sign
    // it): one SIG_INVALID. The other was never kept.
    expect(drops(c, 1, 'SIG_INVALID')).toBe(before + 1);
    expect(c.replicas.map((r) => r.rsn())).toEqual(c.replicas.map(() => r2?.rsn()));
    expect(new Set(c.replicas.map((r) => r.digestHex())).size).toBe(1);
    expect(c.effects('suspect')).toHaveLength(0);
  }, 60_000);
});

describe('the task clock\'s rate is the primary\'s word, checked by the backups (PROTOCOL §8.3)', () => {
  it('ticks up to twice the nominal rate plus 10 in a second (50) pass; the 51st raises clock.rate, once per window at each backup', () => {
    const c = makeCluster(1);
    c.run(100);
    // r1 (faulty) orders a tick wherever it orders a1's request: a burst of ticks, in RSN order.
    // (Its own state then differs from the backups', and they condemn it at the next digest
    // exchange: everything below happens within a heartbeat period.)
    c.filters.push((from, to, i): Item => (from === 'r1' && to !== 'a1' && i.type === 'ptp' && i.body?.type === 'wrapper' && i.body.signed.cg.payload.type === 'echo'
      ? { ...i, body: { type: 'wrapper.input', rsn: i.body.rsn, input: { type: 'tick' } } } : i));
    const rate = () => c.effects('suspect').filter((o) => o.effect.reason === 'clock.rate');
    const limit = 2 * Math.ceil(1000 / c.membership.timing.taskTickMs) + 10;
    expect(limit).toBe(50);
    for (let k = 0; k < limit; k++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
    c.run(10);
    expect(c.effects('deliver.input', 'r2').filter((o) => o.effect.input.type === 'tick')).toHaveLength(limit);
    expect(rate()).toHaveLength(0);
    for (let k = 0; k < 10; k++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
    c.run(5);
    expect(rate().map((o) => [o.proc, o.effect.target])).toEqual([['r2', 'r1'], ['r3', 'r1']]);
    expect(rate()[0]?.effect.detail).toMatch(/^51 ticks in 1000 ms/);
  });
});

describe('operator requests carry no CSN and no incarnation (PROTOCOL §8.1)', () => {
  it('an operator request signed with a CSN or an incarnation is dropped as NOT_A_MEMBER by every replica and never answered', () => {
    const c = makeCluster(1);
    c.run(200);
    const before = [0, 1, 2].map((k) => drops(c, k, 'NOT_A_MEMBER'));
    const send = (nonce: string, csn: number, inc: number) => {
      const signed = signCG({ csn, gssnAck: 0, payload: { type: 'task.kill', nonce, task: 't1' }, client: 'op', inc }, hmacSigner('op'));
      for (const r of c.membership.replicas) c.sendAs('op', r, [{ type: 'op.request', signed }]);
    };
    send('a'.repeat(32), 1, 0);
    send('b'.repeat(32), 0, 1);
    c.run(300);
    expect(c.opReplies).toEqual([]);
    expect([0, 1, 2].map((k) => drops(c, k, 'NOT_A_MEMBER'))).toEqual(before.map((n) => n + 2));
    // The same request as an operator signs it is answered by every replica.
    send('c'.repeat(32), 0, 0);
    c.run(300);
    expect(c.opReplies.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
  });
});

describe('a backup watches each request it forwards (PROTOCOL §5.6, spec §3.6 G8)', () => {
  it('§5.6: each forwarded request of an agent has its own PrimaryProgressTimeout: the primary ordering one of a1\'s requests does not excuse another it never ordered', () => {
    const c = makeCluster(1);
    c.run(200);
    // r1 never hears a1 directly, so a1 falls back to the backups (G7); of what they forward,
    // r1 takes 'kept' and loses 'lost'.
    c.filters.push((from, to, i) => {
      if (to !== 'r1') return i;
      if (from === 'a1' && i.type === 'grp') return null;
      return i.type === 'ptp' && i.body?.type === 'wrapper' && tagOf(i.body.signed) === 'lost' ? null : i;
    });
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'kept' } });
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'lost' } });
    c.run(2000);
    expect(c.effects('deliver.request', 'r1').map((o) => o.effect.request).filter((r) => r.type === 'echo').map((r) => (r.type === 'echo' ? r.tag : ''))).toEqual(['kept']);
    for (const b of ['r2', 'r3']) {
      const progress = c.effects('suspect', b).filter((o) => o.effect.reason === 'primary.progress');
      expect(progress.map((o) => [o.effect.target, o.effect.detail])).toEqual([['r1', `echo csn ${base + 2} of a1 not ordered by r1`]]);
      // Watched from its first forward: suspected one PrimaryProgressTimeout later, not after
      // the agent's next fallback.
      const forwardedAt = c.effects('log', b).find((o) => o.effect.event === 'agent.fallback' && o.effect.fields['csn'] === base + 2)?.at as number;
      expect(progress[0]?.at).toBe(forwardedAt + c.membership.timing.primaryProgressMs);
    }
  });
});

describe('a node is declared failed on two fresh probes (PROTOCOL §8.4)', () => {
  it('§8.4: a node silent to the primary\'s probe and, up to probeTimeoutMs after its expiry, to a backup\'s is declared failed at once: both probes are fresh, no third one is sent', () => {
    const c = makeCluster(1);
    c.run(200);
    const inc = c.replicas[0]?.state().nodes.get('a1')?.inc as number;
    const probeTimeout = c.membership.timing.probeTimeoutMs;
    c.filters.push((from, to, i) => (from === 'a1' && i.type === 'probe.reply' ? null : i));
    inject(c, 'r2', 'r1', { type: 'node.suspect', agent: 'a1', inc, unreachable: false });
    c.run(5);
    // r3's word reaches the primary probeTimeoutMs after its probe expired: the last moment it
    // is still fresh.
    const probedAt = c.effects('log', 'r1').find((o) => o.effect.event === 'node.probe')?.at as number;
    while (c.now() + 1 < probedAt + 2 * probeTimeout) c.run(1);
    const at = c.now();
    expect(at + 1).toBe(probedAt + 2 * probeTimeout);
    inject(c, 'r3', 'r1', { type: 'node.suspect', agent: 'a1', inc, unreachable: true });
    c.run(probeTimeout + 50);
    expect(c.effects('log', 'r1').filter((o) => o.effect.event === 'node.probe')).toHaveLength(1);
    const declared = c.effects('deliver.input', 'r1').filter((o) => o.effect.input.type === 'node.failed');
    expect(declared.map((o) => o.effect.input)).toEqual([{ type: 'node.failed', agent: 'a1', inc }]);
    // The backup's word takes one hop to reach the primary, which orders the failure on it.
    expect(declared[0]?.at).toBe(at + 1);
  });

  it('§8.4: a backup whose probe of a silent node goes unanswered logs node.unreachable and tells the primary, which declares the node failed once its own probe went unanswered too', () => {
    const c = makeCluster(1);
    c.run(200);
    const inc = c.replicas[0]?.state().nodes.get('a1')?.inc as number;
    // a1's node falls silent: no heartbeat, no probe reply reaches a replica.
    c.filters.push((from, to, i) => (from === 'a1' && (i.type === 'hb' || i.type === 'probe.reply') ? null : i));
    c.run(2_000);
    for (const b of ['r2', 'r3']) {
      expect(c.effects('log', b).filter((o) => o.effect.event === 'node.unreachable').map((o) => o.effect.fields)[0]).toEqual({ agent: 'a1', inc });
    }
    expect(c.effects('deliver.input', 'r1').filter((o) => o.effect.input.type === 'node.failed').map((o) => o.effect.input)).toEqual([{ type: 'node.failed', agent: 'a1', inc }]);
  });

  it('§8.4: a probe is of one incarnation: a backup\'s word about the agent\'s next incarnation starts a probe of that one, and its failure is declared for it', () => {
    const c = makeCluster(1);
    c.run(200);
    const probeTimeout = c.membership.timing.probeTimeoutMs;
    c.filters.push((from, to, i) => (from === 'a1' && i.type === 'probe.reply' ? null : i));
    inject(c, 'r2', 'r1', { type: 'node.suspect', agent: 'a1', inc: 1, unreachable: false });
    c.run(probeTimeout + 10);
    // a1 restarts as incarnation 2, which joins; r3 then finds it unreachable.
    c.restartAgent('a1', 2);
    while (c.replicas[0]?.state().nodes.get('a1')?.inc !== 2 && c.now() < 2_000) c.run(1);
    expect(c.replicas[0]?.state().nodes.get('a1')?.inc).toBe(2);
    inject(c, 'r3', 'r1', { type: 'node.suspect', agent: 'a1', inc: 2, unreachable: true });
    c.run(probeTimeout + 50);
    expect(c.effects('log', 'r1').filter((o) => o.effect.event === 'node.probe').map((o) => o.effect.fields['inc'])).toEqual([1, 2]);
    expect(c.effects('deliver.input', 'r1').filter((o) => o.effect.input.type === 'node.failed').map((o) => o.effect.input)).toEqual([{ type: 'node.failed', agent: 'a1', inc: 2 }]);
  });

  it('§8.4: a probe the node left unanswered long ago is stale: a backup\'s later word that the node is unreachable makes the primary probe again, and a node that answers is not declared failed', () => {
    const c = makeCluster(1);
    c.run(200);
    const inc = c.replicas[0]?.state().nodes.get('a1')?.inc as number;
    const probeTimeout = c.membership.timing.probeTimeoutMs;
    // r2 asks the primary to probe a1; a1's reply is lost, and the probe expires.
    let lose = true;
    c.filters.push((from, to, i) => (lose && from === 'a1' && to === 'r1' && i.type === 'probe.reply' ? null : i));
    inject(c, 'r2', 'r1', { type: 'node.suspect', agent: 'a1', inc, unreachable: false });
    c.run(probeTimeout + 20);
    lose = false;
    // Long after, r3 says a1 is unreachable: the old probe says nothing about now.
    c.run(probeTimeout + 50);
    inject(c, 'r3', 'r1', { type: 'node.suspect', agent: 'a1', inc, unreachable: true });
    c.run(probeTimeout + 50);
    const probes = c.effects('log', 'r1').filter((o) => o.effect.event === 'node.probe').map((o) => o.effect.fields);
    expect(probes).toHaveLength(2);
    expect(probes.map((f) => [f['agent'], f['inc']])).toEqual([['a1', inc], ['a1', inc]]);
    expect(probes[1]?.['nonce']).not.toBe(probes[0]?.['nonce']);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toEqual([]);
    expect(c.replicas[0]?.state().nodes.get('a1')?.failed).toBe(false);
  });
});

describe('only the other backup confirms (PROTOCOL §5.8)', () => {
  it('§5.8: a confirmation the primary sends a backup is none: the backup still waits orderConfirmMs for the other backup before it executes unconfirmed', () => {
    const c = makeCluster(1);
    c.run(200);
    // r3's confirmations to r2 are lost; r1 (faulty) confirms its own order to r2 instead, with
    // r2's own digest, signed.
    const digests = new Map<number, Uint8Array>();
    c.filters.push((from, to, i): Item => {
      if (from === 'r2' && to === 'r3' && i.type === 'ptp' && i.body?.type === 'order') digests.set(i.body.rsn, i.body.digest);
      return from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order' ? { ...i, body: { type: 'notice', text: 'lost' } } : i;
    });
    const orderedAt = c.now();
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'self-confirmed' } });
    c.run(5);
    const rsn = c.replicas[0]?.rsn() as number;
    const digest = digests.get(rsn) as Uint8Array;
    expect(digest).toBeDefined();
    const view = c.replicas[0]?.status(c.now()).view as number;
    inject(c, 'r1', 'r2', { type: 'order', rsn, digest, view, sig: hmacSigner('r1').sign(pack(orderClaim('r1', view, rsn, digest))) });
    c.run(50);
    expect(c.replicas[1]?.rsn()).toBe(rsn - 1);
    c.run(c.membership.timing.orderConfirmMs);
    expect(c.replicas[1]?.rsn()).toBe(rsn);
    const unconfirmed = c.effects('log', 'r2').filter((o) => o.effect.event === 'order.unconfirmed');
    expect(unconfirmed.map((o) => o.effect.fields['rsn'])).toEqual([rsn]);
    expect(unconfirmed[0]?.at).toBeGreaterThanOrEqual(orderedAt + c.membership.timing.orderConfirmMs);
  });
});

describe('a backup waits for no silent backup (PROTOCOL §5.8, §10.5)', () => {
  it('§5.8: once the other backup is silent (two missed checks), a backup executes the primary\'s orders as they come, before the group has condemned it', () => {
    const c = makeCluster(1);
    c.run(200);
    c.down.add('r3');
    const r2 = c.replicas[1];
    until(c, () => r2?.status(c.now()).replicas.find((p) => p.id === 'r3')?.health === 'silent', 1_000);
    expect(r2?.status(c.now()).replicas.find((p) => p.id === 'r3')?.health).toBe('silent');
    expect(r2?.state().replicas).toEqual(['r1', 'r2', 'r3']);
    const sentAt = c.now();
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'alone' } });
    c.run(20);
    const done = c.effects('deliver.request', 'r2').filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'alone');
    expect(done).toHaveLength(1);
    expect((done[0]?.at as number) - sentAt).toBeLessThan(20);
    expect(r2?.state().replicas).toEqual(['r1', 'r2', 'r3']);
  });
});

describe('a point-to-point error report is only logged (spec §2.1 (e))', () => {
  it('an error report an agent sends one replica point to point is logged with its sender, GSSN and kind, and suspects nobody', () => {
    const c = makeCluster(1);
    c.run(200);
    const rsn = c.replicas[1]?.rsn();
    inject(c, 'a1', 'r2', { type: 'error.report', gssn: 7, kind: 'mismatch', suspects: ['r1'] });
    c.run(20);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'error.report.ptp').map((o) => o.effect.fields)).toEqual([{ from: 'a1', gssn: 7, kind: 'mismatch' }]);
    expect(c.effects('suspect')).toEqual([]);
    expect(c.replicas[1]?.rsn()).toBe(rsn);
  });
});

describe('a withheld order is relayed (PROTOCOL §5.8)', () => {
  type Withheld = { rsn: number; signed: SignedCG };
  /** r1 (faulty) never gives r3 its order of a1's 'withheld' request (a notice in its place keeps
   *  the lane's sequence); r2 has it, r3 lacks that RSN. */
  function withholding() {
    const c = makeCluster(1);
    c.run(200);
    let withheld: Withheld | null = null;
    c.filters.push((from, to, i): Item => {
      if (from !== 'r1' || to !== 'r3' || i.type !== 'ptp' || i.body?.type !== 'wrapper' || tagOf(i.body.signed) !== 'withheld') return i;
      withheld = { rsn: i.body.rsn, signed: i.body.signed };
      return { ...i, body: { type: 'notice', text: 'withheld' } };
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'withheld' } });
    c.run(5);
    const w = withheld as Withheld | null;
    if (w === null) throw new Error('r1 ordered no withheld request');
    expect(c.replicas[2]?.rsn()).toBe(w.rsn - 1);
    return { c, w };
  }
  /** A frame `signer` signed to r2 with `body` in it: what r2 shows r3 as evidence. */
  const frameTo2 = (signer: ProcessId, body: PtpPayload): Uint8Array =>
    encodeFrame({ from: signer, to: 'r2', items: [{ type: 'ptp', srcInc: 1, destInc: 1, seq: 1, ackSeq: 0, body }] }, { cluster: 'test', signer: hmacSigner(signer) });
  const relayed = (c: Cluster) => c.effects('log', 'r3').filter((o) => o.effect.event === 'order.relayed').map((o) => o.effect.fields);

  it('§5.8: a primary that withholds an order from one backup cannot stall it: shown the primary\'s signed frame by the other backup, it executes the order as the primary\'s own', () => {
    const { c, w } = withholding();
    const [r1, r2, r3] = c.replicas;
    // r2 shows r3 the frame in which r1 gave it that order, signed by r1 (as r2 does once it
    // executed it unconfirmed, PROTOCOL §5.8).
    inject(c, 'r2', 'r3', { type: 'order.evidence', rsn: w.rsn, frame: frameTo2('r1', { type: 'wrapper', rsn: w.rsn, signed: w.signed }) });
    c.run(20);
    expect(relayed(c)).toEqual([{ rsn: w.rsn, from: 'r2' }]);
    expect(c.effects('deliver.request', 'r3').filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'withheld')).toHaveLength(1);
    expect([r2?.rsn(), r3?.rsn()]).toEqual([w.rsn, w.rsn]);
    expect(r3?.digestHex()).toBe(r1?.digestHex());
  });

  it('§5.8: a frame that proves nothing is no order: one the other backup signed itself, one whose wrapper names another RSN, one carrying a request no agent or operator signed', () => {
    const { c, w } = withholding();
    const stranger = signCG({ csn: 1, gssnAck: 0, payload: { ...echo(1), tag: 'stranger' }, client: 'r2', inc: 1 }, hmacSigner('r2'));
    for (const frame of [
      frameTo2('r2', { type: 'wrapper', rsn: w.rsn, signed: w.signed }),
      frameTo2('r1', { type: 'wrapper', rsn: w.rsn + 1, signed: w.signed }),
      frameTo2('r1', { type: 'wrapper', rsn: w.rsn, signed: stranger }),
    ]) inject(c, 'r2', 'r3', { type: 'order.evidence', rsn: w.rsn, frame });
    c.run(20);
    expect(relayed(c)).toEqual([]);
    expect(c.replicas[2]?.rsn()).toBe(w.rsn - 1);
  });

  it('§10.2: evidence for an RSN a backup executed holds only if the primary\'s frame names that RSN: a wrapper of another RSN in it accuses nobody', () => {
    const c = makeCluster(1);
    c.run(200);
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'done' } });
    c.run(20);
    const rsn = c.replicas[2]?.rsn() as number;
    // r2 shows r3 a frame r1 signed (the test signs as r1) with another request, at another RSN.
    const other = signCG({ csn: 99, gssnAck: 0, payload: { ...echo(1), tag: 'other' }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    inject(c, 'r2', 'r3', { type: 'order.evidence', rsn, frame: frameTo2('r1', { type: 'wrapper', rsn: rsn + 1, signed: other }) });
    c.run(20);
    expect(accusations(c, 'r3')).toHaveLength(0);
    // The same frame naming the RSN r3 executed is the proof of an equivocation.
    inject(c, 'r2', 'r3', { type: 'order.evidence', rsn, frame: frameTo2('r1', { type: 'wrapper', rsn, signed: other }) });
    c.run(20);
    expect(accusations(c, 'r3').map((o) => [o.effect.fields['target'], o.effect.fields['reason']])).toEqual([['r1', 'equivocation']]);
  });

  it('§5.8, §10.2: evidence for an RSN a backup has not reached waits for it: when the primary\'s own order for that RSN comes and differs from the frame, the backup accuses the primary of equivocation', () => {
    const c = makeCluster(1);
    c.run(200);
    const base = c.replicas[2]?.rsn() as number;
    // r2 shows r3 a frame in which r1 (the test signs as r1) ordered, two RSNs ahead, a request
    // of a1's that r1 will not order there.
    const other = signCG({ csn: 99, gssnAck: 0, payload: { ...echo(1), tag: 'other' }, client: 'a1', inc: 1 }, hmacSigner('a1'));
    inject(c, 'r2', 'r3', { type: 'order.evidence', rsn: base + 2, frame: frameTo2('r1', { type: 'wrapper', rsn: base + 2, signed: other }) });
    c.run(5);
    expect(accusations(c, 'r3')).toHaveLength(0);
    for (const tag of ['one', 'two']) c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag } });
    c.run(20);
    expect(accusations(c, 'r3').map((o) => [o.effect.fields['target'], o.effect.fields['reason']])).toEqual([['r1', 'equivocation']]);
  });

  it('§5.8, §10.6: a withheld group input is relayed the same way, a replica.add only with the replacement\'s own signature on its port', () => {
    const { c, w } = withholding();
    const view = c.replicas[0]?.status(c.now()).view as number;
    // Group inputs r1 signed at that RSN (the test signs as r1): a replica.add whose port claim
    // r4 never signed is not relayed; a tick is.
    inject(c, 'r2', 'r3', { type: 'order.evidence', rsn: w.rsn, frame: frameTo2('r1', { type: 'wrapper.input', rsn: w.rsn, input: { type: 'replica.add', id: 'r4', port: 41000, sig: new Uint8Array(64) } }) });
    c.run(5);
    expect(relayed(c)).toEqual([]);
    expect(view).toBe(0);
    inject(c, 'r2', 'r3', { type: 'order.evidence', rsn: w.rsn, frame: frameTo2('r1', { type: 'wrapper.input', rsn: w.rsn, input: { type: 'tick' } }) });
    c.run(5);
    expect(relayed(c)).toEqual([{ rsn: w.rsn, from: 'r2' }]);
    // r2 confirmed the request there, not a tick: r1 signed two orders for one RSN, and r3
    // disputes it instead of executing either.
    expect(c.effects('suspect', 'r3').map((o) => [o.effect.target, o.effect.reason])).toEqual([['r1', 'digest.mismatch']]);
    expect(c.replicas[2]?.rsn()).toBe(w.rsn - 1);
  });
});

describe('a condemned backup hands nothing over (PROTOCOL §10.3, §10.5)', () => {
  it('§10.3: a backup that executes its own removal while it watches a request it forwarded sends it nowhere; the backup that stays forwards it to the primary of the new view, which orders it once', () => {
    const c = makeCluster(2);
    c.run(200);
    const [r1, r2, r3] = c.replicas;
    const member = (id: ProcessId) => r1?.state().replicas.includes(id) ?? false;
    // a1 never reaches r1 and falls back to the backups; while r3 is a member, r1 hears neither
    // backup's forward, so both watch the request, unordered.
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r1' && i.type === 'grp' ? null : i));
    // r3 misses the accusations against it: it learns of its removal by executing it.
    c.filters.push((from, to, i): Item => (to === 'r3' && i.type === 'ptp' && i.body?.type === 'accuse' ? { ...i, body: { type: 'notice', text: 'missed' } } : i));
    // (Each forward, and each accusation r3 misses, becomes a notice, so the lane it travels on
    // keeps its sequence.)
    c.filters.push((from, to, i): Item => (to === 'r1' && (from === 'r2' || from === 'r3') && member('r3') && i.type === 'ptp' && i.body?.type === 'wrapper' && i.body.rsn === 0
      ? { ...i, body: { type: 'notice', text: 'swallowed' } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'watched' } });
    until(c, () => c.effects('log', 'r3').some((o) => o.effect.event === 'agent.fallback'), 2_000);
    // Then r3's memory flips, and a2's request moves the RSN: the digest comparison at it
    // condemns r3, within its progress timeout.
    const s = r3?.state() as ReplicatedState;
    s.outcomes.set('flipped', { nonce: 'flipped', rsn: 1, ok: true, text: '' });
    s.outcomeOrder.push('flipped');
    c.input('a2', { type: 'request', nowMs: c.now(), request: echo(1) });
    const before = drops(c, 0, 'NOT_A_MEMBER');
    until(c, () => !member('r3'), 1_000);
    c.run(300);
    expect(r1?.state().replicas).toEqual(['r1', 'r2']);
    expect(c.effects('log', 'r3').filter((o) => o.effect.event === 'replica.retired').map((o) => o.effect.fields['why'] ?? 'removed')).toEqual(['removed']);
    expect(drops(c, 0, 'NOT_A_MEMBER')).toBe(before);
    for (const r of ['r1', 'r2']) {
      expect(c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'watched')).toHaveLength(1);
    }
    expect(r2?.rsn()).toBe(r1?.rsn());
    expect(c.effects('suspect').filter((o) => o.effect.reason === 'primary.progress')).toEqual([]);
  });
});

describe('only the replacement under way is let in (PROTOCOL §10.6)', () => {
  it('§10.6: a member that asks the primary for the state, its port claim signed, gets no replica.add ordered: the RSN does not move', () => {
    const c = makeCluster(1);
    c.run(200);
    const view = c.replicas[0]?.status(c.now()).view as number;
    const rsn = c.replicas[0]?.rsn();
    inject(c, 'r2', 'r1', { type: 'state.request', view, port: 0, sig: hmacSigner('r2').sign(pack(portClaim('r2', view, 0))) });
    c.run(300);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'replica.add')).toEqual([]);
    expect(c.replicas.map((r) => r.rsn())).toEqual([rsn, rsn, rsn]);
  });
});

describe('PrimaryProgressTimeout is about ordering (PROTOCOL §5.6, spec §3.6 G8)', () => {
  it('G8: a request the primary ordered is not held against it while the backups wait for each other\'s confirmation: no primary.progress suspicion, and every replica executes it', () => {
    const c = makeCluster(1);
    c.run(200);
    // a1 never reaches r1 and falls back to the backups, which forward; r1 orders the request,
    // but r3's confirmations to r2 are lost, so r2 waits orderConfirmMs (1000 ms), past
    // primaryProgressMs (500 ms), before it executes unconfirmed.
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r1' && i.type === 'grp' ? null : i));
    c.filters.push((from, to, i) => (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order' ? null : i));
    expect(c.membership.timing.orderConfirmMs).toBeGreaterThan(c.membership.timing.primaryProgressMs);
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'slow' } });
    c.run(2500);
    expect(c.effects('suspect').filter((o) => o.effect.reason === 'primary.progress')).toEqual([]);
    for (const r of ['r1', 'r2', 'r3']) {
      expect(c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'slow')).toHaveLength(1);
    }
  });

  it('G8, §5.8: confirmations that do not come cannot make a correct primary look as if it never ordered: the agent\'s fallback of a request a backup holds, ordered and awaiting confirmation, starts no PrimaryProgressTimeout', () => {
    const c = makeCluster(1);
    c.run(200);
    // The backups' confirmations to each other are lost (notices in their place keep the lanes'
    // sequence), but both heartbeat: each waits orderConfirmMs for the other, and a1, short of
    // f+1 copies, falls back to them long before.
    c.filters.push((from, to, i): Item => (from !== 'r1' && to !== 'r1' && from !== 'a1' && to !== 'a1' && i.type === 'ptp' && i.body?.type === 'order' ? { ...i, body: { type: 'notice', text: 'lost' } } : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'awaited' } });
    c.run(c.membership.timing.orderConfirmMs + 500);
    expect(c.effects('log', 'r2').some((o) => o.effect.event === 'agent.fallback')).toBe(true);
    expect(c.effects('suspect', 'r2').filter((o) => o.effect.reason === 'primary.progress')).toEqual([]);
    expect(c.effects('suspect', 'r3').filter((o) => o.effect.reason === 'primary.progress')).toEqual([]);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'order.unconfirmed')).toHaveLength(1);
    for (const r of ['r1', 'r2', 'r3']) {
      expect(c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'awaited')).toHaveLength(1);
    }
    expect(c.replicas[1]?.state().replicas).toEqual(['r1', 'r2', 'r3']);
  });

  it('G8, §5.8: only the very request the primary ordered is spared: a backup holding another order for confirmation still forwards a request the primary never ordered, and times it', () => {
    const c = makeCluster(1);
    c.run(200);
    // As above, the backups wait orderConfirmMs for each other. r1 (faulty) orders a1's 'held'
    // request but never 'censored': it reads a1's copy as a resend of 'held', and the backups'
    // forwards as notices.
    c.filters.push((from, to, i): Item => (from !== 'r1' && to !== 'r1' && from !== 'a1' && to !== 'a1' && i.type === 'ptp' && i.body?.type === 'order' ? { ...i, body: { type: 'notice', text: 'lost' } } : i));
    let held: SignedCG | null = null;
    c.filters.push((from, to, i): Item => {
      if (to !== 'r1') return i;
      if (from === 'a1' && i.type === 'grp' && i.body.type === 'cg') {
        if (tagOf(i.body.signed) === 'held') held = i.body.signed;
        if (tagOf(i.body.signed) === 'censored' && held !== null) return { ...i, body: { ...i.body, signed: held } };
      }
      return i.type === 'ptp' && i.body?.type === 'wrapper' && tagOf(i.body.signed) === 'censored' ? { ...i, body: { type: 'notice', text: 'censored' } } : i;
    });
    const csn = (c.replicas[0]?.state().csnReceived.get('a1') ?? 0) + 2;
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'held' } });
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'censored' } });
    c.run(c.membership.timing.orderConfirmMs);
    for (const b of ['r2', 'r3']) {
      expect(c.effects('suspect', b).filter((o) => o.effect.reason === 'primary.progress').map((o) => [o.effect.target, o.effect.detail])).toContainEqual(['r1', `echo csn ${csn} of a1 not ordered by r1`]);
    }
  });
});

describe('acknowledgements name the incarnation they are for (PROTOCOL §5.7)', () => {
  it('§5.7: a backup acknowledges a restarted agent\'s requests with the new incarnation\'s CSNs, never its predecessor\'s, which would tell it that requests it still has to send were received', () => {
    const c = makeCluster(1);
    c.run(200);
    for (let k = 0; k < 4; k++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    const before = c.replicas[1]?.state().csnReceived.get('a1') ?? 0;
    expect(before).toBeGreaterThanOrEqual(5); // node.join and the four echoes
    // a1 restarts; the primary hears nothing of the new incarnation, neither from it nor from
    // the backups it falls back to (G7), which acknowledge its requests all the same.
    c.filters.push((from, to, i) => (to === 'r1' && ((from === 'a1' && i.type === 'grp') || (i.type === 'ptp' && i.body?.type === 'wrapper' && i.body.signed.cg.inc === 2)) ? null : i));
    const marks = c.sent((from, to, i) => ((from === 'r2' || from === 'r3') && to === 'a1' && i.type === 'gack' && i.destInc === 2 ? `${from}:${i.ack}` : null));
    c.restartAgent('a1', 2);
    c.run(400); // its fallback and the backups' acknowledgements; no primary.progress yet
    expect(c.replicas[1]?.state().clientInc.get('a1')).toBe(1);
    expect(new Set(marks.map((m) => m.split(':')[0]))).toEqual(new Set(['r2', 'r3']));
    expect(new Set(marks.map((m) => m.split(':')[1]))).toEqual(new Set(['0']));
  });
});

describe('the task clock runs only while something counts its ticks (PROTOCOL §8.3, §10.6)', () => {
  it('§8.3, §10.6: a replacement that waits for a node to host it orders no ticks: no node can start it, so no start timeout runs', () => {
    // Three replicas on n1..n3, agents on n1 and n2 only: once r3 is removed, no live node
    // without a member can host the spare r4.
    const c = makeCluster(2, { spares: ['r4'] });
    c.run(300);
    c.down.add('r3');
    c.run(3000);
    const r1 = c.replicas[0];
    expect(r1?.state().replicas).toEqual(['r1', 'r2']);
    expect(r1?.state().group.recovery).toMatchObject({ id: 'r4', node: null });
    const ticks = () => c.effects('deliver.input', 'r1').filter((o) => o.effect.input.type === 'tick').length;
    const rsn = r1?.rsn();
    const before = ticks();
    c.run(5000);
    expect(ticks()).toBe(before);
    expect(r1?.rsn()).toBe(rsn);
  });
});

describe('an agent\'s error report accuses members only (PROTOCOL §10.2)', () => {
  it('§10.2: a report naming a member and a process that is none suspects the member alone, and the operator reads every name the agent gave', () => {
    const c = makeCluster(2);
    c.run(200);
    c.input('a1', { type: 'request', nowMs: c.now(), request: { type: 'error.report', gssn: 3, count: 2, kind: 'mismatch', suspects: ['r3', 'r9'] } });
    c.run(200);
    for (const r of ['r1', 'r2', 'r3']) {
      expect(c.effects('log', r).filter((o) => o.effect.event === 'replica.suspect').map((o) => o.effect.fields)).toEqual(
        [expect.objectContaining({ target: 'r3', reason: 'error.report', detail: 'a1 reports mismatch for 2 gssn from 3 (suspects r3,r9)' })],
      );
    }
    expect(c.effects('suspect').filter((o) => o.effect.target === 'r9')).toEqual([]);
  });
});

describe('the journal `trine ps` shows is bounded (PROTOCOL §10.9)', () => {
  it(`the last MAX_JOURNAL_EVENTS (${MAX_JOURNAL_EVENTS}) task events, oldest first, and no more`, () => {
    const c = makeCluster(1);
    c.run(200);
    const nonce = (n: number) => n.toString(16).padStart(32, '0');
    let n = 0;
    let tasks = 0;
    // Four events a task: submitted, waiting (9 slots on a node of 4), kill requested, finished.
    const submitAndKill = (count: number) => {
      const first = tasks + 1;
      for (let k = 0; k < count; k++) {
        tasks++;
        c.operate({ type: 'task.submit', nonce: nonce(++n), name: `job${tasks}`, size: 9, file: '/bin/true', args: [], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(tasks & 0xff) });
      }
      c.run(10);
      for (let k = first; k <= tasks; k++) c.operate({ type: 'task.kill', nonce: nonce(++n), task: `t${k}` });
      c.run(10);
    };
    const journal = () => (c.replicas[0]?.clusterView().events ?? []).map((e) => e.text);
    const logged = () => c.effects('log', 'r1').filter((o) => o.effect.event === 'task.event').map((o) => String(o.effect.fields['text']));
    while (logged().length + 64 <= MAX_JOURNAL_EVENTS) submitAndKill(16);
    while (logged().length + 4 <= MAX_JOURNAL_EVENTS) submitAndKill(1);
    expect(journal()).toEqual(logged());
    for (let k = 0; k < 3; k++) {
      submitAndKill(1);
      expect(journal()).toEqual(logged().slice(-MAX_JOURNAL_EVENTS));
    }
    expect(logged().length).toBeGreaterThan(MAX_JOURNAL_EVENTS);
    expect(journal().at(-1)).toBe(`t${tasks} finished abnormally: killed by operator`);
  });
});

describe('a failed node is reset until it is back (PROTOCOL §8.4)', () => {
  it('§8.4: each replica asks the watchdog to reset a failed node with its heartbeats until the node\'s agent joins again, and not after', () => {
    const c = makeCluster(2);
    c.run(200);
    const asked = c.sent((from, to, i) => (to === 'scc' && i.type === 'reset.node' && i.node === 'n2' ? from : null));
    c.down.add('a2');
    c.run(2000);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.node === 'n2')?.state).toBe('failed');
    // Again and again: a lost request would leave the node dead.
    for (const r of ['r1', 'r2', 'r3']) expect(asked.filter((x) => x === r).length).toBeGreaterThan(3);
    c.down.delete('a2');
    c.restartAgent('a2', 2);
    c.run(500);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.node === 'n2')?.state).not.toBe('failed');
    const before = asked.length;
    c.run(1000);
    expect(asked.length).toBe(before);
  });
});

describe('a node declared failed stays failed until a new incarnation joins (PROTOCOL §8.4)', () => {
  it('§8.4: an agent cut off from the replicas\' checks but whose requests still get through is reset all the same: only a node.join of a new incarnation ends the resets', () => {
    const c = makeCluster(2);
    c.run(200);
    const asked = c.sent((from, to, i) => (to === 'scc' && i.type === 'reset.node' && i.node === 'n2' ? from : null));
    // a2's heartbeats and probe replies are lost; its group requests are not.
    c.filters.push((from, _to, i) => (from === 'a2' && (i.type === 'hb' || i.type === 'probe.reply') ? null : i));
    c.run(1500);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.node === 'n2')?.state).toBe('failed');
    c.input('a2', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300);
    expect(c.effects('deliver.request', 'r1').filter((o) => o.effect.client === 'a2' && o.effect.request.type === 'echo')).toHaveLength(1);
    const before = asked.length;
    c.run(1000);
    for (const r of ['r1', 'r2', 'r3']) expect(asked.slice(before).filter((x) => x === r).length).toBeGreaterThan(3);
  });
});

describe('a backup names what the primary ordered wrongly (PROTOCOL §5.7, §8.1)', () => {
  it('§5.7, §8.1: an RSN carrying a CSN other than the agent\'s next, or an operator\'s client with a request no operator may make, is suspected as rsn.gap, with what it carried', () => {
    const c = makeCluster(1);
    c.run(200);
    const r2 = c.replicas[1];
    const rsn = r2?.rsn() as number;
    const next = (c.replicas[1]?.state().csnReceived.get('a1') ?? 0) + 1;
    const skipped = signCG({ csn: next + 4, gssnAck: 0, payload: echo(1), client: 'a1', inc: 1 }, hmacSigner('a1'));
    const asOperator = signCG({ csn: 0, gssnAck: 0, payload: echo(1), client: 'op', inc: 0 }, hmacSigner('op'));
    inject(c, 'r1', 'r2', { type: 'wrapper', rsn: rsn + 1, signed: skipped });
    inject(c, 'r1', 'r2', { type: 'wrapper', rsn: rsn + 2, signed: asOperator });
    c.run(c.membership.timing.orderConfirmMs + 100);
    const gaps = c.effects('suspect', 'r2').filter((o) => o.effect.reason === 'rsn.gap').map((o) => [o.effect.target, o.effect.detail]);
    expect(gaps).toEqual([['r1', `rsn ${rsn + 1} carries csn ${next + 4}/1 echo of a1, expected ${next}`], ['r1', `rsn ${rsn + 2} carries a echo from op`]]);
  });
});

describe('a member removed while it did not run (PROTOCOL §10.3)', () => {
  /** r3's host starves it while the group condemns it; then it runs again. */
  function starved(c: Cluster): void {
    c.run(200);
    c.paused.add('r3');
    c.run(2000);
    expect(c.replicas[0]?.state().replicas).toEqual(['r1', 'r2']);
    expect(c.effects('deliver.input', 'r1').filter((o) => o.effect.input.type === 'replica.condemn')).toHaveLength(1);
    c.resume('r3');
    c.run(200);
  }
  const retired = (c: Cluster) => c.effects('log', 'r3').filter((o) => o.effect.event === 'replica.retired').map((o) => o.effect.fields);

  it('§10.3: running again, a backup the group condemned meanwhile reads the two accusations and retires, condemned in the view they name', () => {
    const c = makeCluster(1);
    starved(c);
    expect(c.replicas[2]?.phase()).toBe('retired');
    expect(retired(c)).toEqual([{ view: 0, why: 'condemned' }]);
  });

  it('§10.3: running again, a backup that missed the accusations executes its own removal and retires in the view that no longer has it', () => {
    const c = makeCluster(1);
    c.filters.push((_from, to, i) => (to === 'r3' && i.type === 'ptp' && i.body?.type === 'accuse' ? { ...i, body: { type: 'notice', text: 'lost' } } : i));
    starved(c);
    expect(c.replicas[2]?.phase()).toBe('retired');
    expect(retired(c)).toEqual([{ view: 1 }]);
  });
});

describe('a backup takes the primary\'s order in RSN sequence only (spec §3.6 G7)', () => {
  it('G7: a primary that sends a backup again an RSN it already executed is suspected of rsn.gap, with the RSN it expected', () => {
    const c = makeCluster(1);
    c.run(200);
    const rsn = c.replicas[1]?.rsn() as number;
    const again = signCG({ csn: 1, gssnAck: 0, payload: echo(1), client: 'a1', inc: 1 }, hmacSigner('a1'));
    inject(c, 'r1', 'r2', { type: 'wrapper', rsn, signed: again });
    c.run(50);
    expect(c.effects('suspect', 'r2').map((o) => [o.effect.target, o.effect.reason, o.effect.detail])).toEqual([['r1', 'rsn.gap', `wrapper rsn ${rsn}, expected ${rsn + 1}`]]);
  });
});

describe('an agent may not make an operator\'s request (PROTOCOL §8.1)', () => {
  const kill = { type: 'task.kill' as const, nonce: 'e'.repeat(32), task: 't1' };

  it('§8.1: the primary drops an agent\'s task.kill as NOT_A_MEMBER and orders nothing: nobody is suspected', () => {
    const c = makeCluster(1);
    c.run(200);
    const before = [0, 1, 2].map((k) => drops(c, k, 'NOT_A_MEMBER'));
    c.input('a1', { type: 'request', nowMs: c.now(), request: kill as unknown as AgentRequest });
    c.run(100);
    expect([0, 1, 2].map((k) => drops(c, k, 'NOT_A_MEMBER'))).toEqual([before[0] as number + 1, before[1], before[2]]);
    expect(c.effects('deliver.request').filter((o) => o.effect.request.type === 'task.kill')).toEqual([]);
    expect(c.effects('suspect')).toEqual([]);
  });

  it('§8.1: one that the agent gives the backups instead is dropped by each of them, not forwarded', () => {
    const c = makeCluster(1);
    c.run(200);
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r1' && i.type === 'grp' ? null : i));
    const before = [0, 1, 2].map((k) => drops(c, k, 'NOT_A_MEMBER'));
    c.input('a1', { type: 'request', nowMs: c.now(), request: kill as unknown as AgentRequest });
    c.run(400);
    const after = [0, 1, 2].map((k) => drops(c, k, 'NOT_A_MEMBER'));
    expect(after[0]).toBe(before[0]);
    for (const k of [1, 2]) expect(after[k]).toBeGreaterThan(before[k] as number);
    expect(c.effects('log').filter((o) => o.effect.event === 'agent.fallback' && o.proc !== 'a1')).toEqual([]);
  });
});

describe('a backup acknowledges what the group already delivered (spec §3.6 G9)', () => {
  it('G9: an agent that missed every acknowledgement and falls back to the backups with a request the group delivered is acknowledged by them, and nobody forwards it again', () => {
    const c = makeCluster(1);
    c.run(200);
    let block = true;
    c.filters.push((_from, to, i) => (block && to === 'a1' && i.type === 'gack' ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
    const end = c.now() + 2000;
    while (c.effects('log', 'a1').filter((o) => o.effect.event === 'agent.fallback').length === 0 && c.now() < end) c.run(5);
    expect(c.effects('log', 'a1').filter((o) => o.effect.event === 'agent.fallback')).toHaveLength(1);
    block = false;
    c.run(500);
    expect(c.agents[0]?.status(c.now()).pendingRequests).toBe(0);
    expect(c.effects('log').filter((o) => o.proc !== 'a1' && o.effect.event === 'agent.fallback')).toEqual([]);
  });
});

describe('checkpoint digests are what replicas compare under load (PROTOCOL §10.4)', () => {
  it('§10.4: a backup whose state went wrong while requests stream in is condemned during the stream: the primary, too far ahead to share a heartbeat RSN with it, compares checkpoints', () => {
    const c = makeCluster(1);
    c.run(200);
    const every = c.membership.timing.digestEveryRsn;
    // r3's memory flips: an operator outcome nobody ordered (it enters the digest, not the work).
    const s = c.replicas[2]?.state() as ReplicatedState;
    s.outcomes.set('flipped', { nonce: 'flipped', rsn: 1, ok: true, text: '' });
    s.outcomeOrder.push('flipped');
    // 100 requests a millisecond: the primary runs about a hundred RSNs ahead of the backups, so
    // no heartbeat of theirs names an RSN it took a heartbeat digest at. (r2 and r3, in step,
    // accuse each other; only the primary's word settles it.)
    const start = c.now();
    for (let ms = 0; ms < 40; ms++) {
      for (let k = 0; k < 100; k++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
      c.run(1);
    }
    const byPrimary = accusations(c, 'r1').filter((o) => o.at >= start).map((o) => o.effect.fields);
    expect(byPrimary).toEqual([expect.objectContaining({ target: 'r3', reason: 'digest', detail: expect.stringMatching(/^state digest at rsn \d+:/) })]);
    expect(Number(/rsn (\d+)/.exec(String(byPrimary[0]?.['detail']))?.[1]) % every).toBe(0);
    const condemned = c.effects('log', 'r1').filter((o) => o.effect.event === 'replica.condemned');
    expect(condemned.map((o) => [o.effect.fields['target'], o.effect.fields['by'], o.effect.fields['reason']])).toEqual([['r3', 'r1,r2', 'digest']]);
    expect(c.replicas[0]?.state().replicas).toEqual(['r1', 'r2']);
    // The stream goes on across the view change: r2 keeps the orders it held for confirmation
    // by r3, and follows r1 without a gap.
    c.run(100);
    const [r1, r2] = c.replicas;
    expect(r2?.rsn()).toBe(r1?.rsn());
    expect(r2?.digestHex()).toBe(r1?.digestHex());
    expect(c.effects('suspect', 'r2').filter((o) => o.effect.target === 'r1')).toEqual([]);
  });
});

describe('a forward is timed from when the primary can receive it, and from nothing else (PROTOCOL §5.6)', () => {
  it('§5.6 G8: another peer\'s session, established while a forward waits for the primary\'s order, does not put off the PrimaryProgressTimeout', () => {
    const c = makeCluster(2);
    c.run(200);
    const { primaryProgressMs } = c.membership.timing;
    // r1 (faulty) swallows a1's requests and the backups' forwards of them (as in A18).
    c.filters.push((from, to, i) => (to === 'r1' && ((from === 'a1' && i.type === 'grp') || (from !== 'a1' && i.type === 'ptp' && i.body?.type === 'wrapper')) ? null : i));
    const start = c.now();
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    c.run(300); // a1 falls back at about 160 ms; the backups forward and time r1
    c.restartAgent('a2', 2); // a2's new sessions with every replica: 'reset', then 'established'
    c.run(primaryProgressMs + 100);
    for (const b of ['r2', 'r3']) {
      const forwarded = c.effects('log', b).find((o) => o.at >= start && o.effect.event === 'agent.fallback')?.at ?? NaN;
      const a2Session = c.effects('log', b).find((o) => o.at > forwarded && o.effect.event === 'link.established' && o.effect.fields['peer'] === 'a2')?.at ?? NaN;
      const progress = c.effects('suspect', b).find((o) => o.at >= start && o.effect.reason === 'primary.progress' && o.effect.target === 'r1')?.at ?? NaN;
      expect(a2Session).toBeLessThan(progress);
      expect(progress - forwarded).toBe(primaryProgressMs);
    }
  });

  it('§5.6 G8: a forward that waited for a session with the primary is timed from the session\'s establishment: the primary is suspected of primary.progress primaryProgressMs after it could first receive the forward, not sooner', () => {
    const c = makeCluster(1);
    const { primaryProgressMs, startGraceMs } = c.membership.timing;
    // r1 (faulty) is not up yet, and once up it swallows a1's requests and the backups' forwards
    // of them: a1 falls back to r2 and r3, whose forwards wait for a session with r1.
    c.down.add('r1');
    c.filters.push((from, to, i) => (to === 'r1' && ((from === 'a1' && i.type === 'grp') || (from !== 'a1' && i.type === 'ptp' && i.body?.type === 'wrapper')) ? null : i));
    c.run(1_200); // within the start grace a primary never met is not judged: r2's timer waits
    const progress = () => c.effects('suspect', 'r2').filter((o) => o.effect.reason === 'primary.progress' && o.effect.target === 'r1');
    expect(c.effects('log', 'r2').some((o) => o.effect.event === 'agent.fallback')).toBe(true);
    expect(progress()).toEqual([]);
    c.down.delete('r1');
    c.run(2 * primaryProgressMs + 500);
    const established = c.effects('log', 'r2').find((o) => o.effect.event === 'link.established' && o.effect.fields['peer'] === 'r1')?.at ?? NaN;
    expect(established).toBeLessThan(startGraceMs);
    expect(Math.min(...progress().map((o) => o.at)) - established).toBe(primaryProgressMs);
  });
});

describe('a backup\'s orders waiting for confirmation are bounded (PROTOCOL §5.8)', () => {
  it(`§5.8: a backup holds at most MAX_ORDER_AHEAD (${MAX_ORDER_AHEAD}) orders waiting for the other backup's confirmation; the next is refused and logged as order.backlog-full`, () => {
    const c = makeCluster(1);
    c.run(200);
    // r3's confirmations never reach r2: r2 executes nothing and holds every order of r1's.
    c.filters.push((from, to, i): Item => (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order' ? { ...i, body: { type: 'notice', text: 'lost' } } : i));
    const base = c.replicas[1]?.rsn() ?? NaN;
    const start = c.now();
    for (let ms = 0; ms < 45; ms++) {
      for (let k = 0; k < 100; k++) c.input('a1', { type: 'request', nowMs: c.now(), request: echo(0) });
      c.run(1);
    }
    c.run(20);
    expect(c.replicas[0]?.rsn()).toBeGreaterThan(base + MAX_ORDER_AHEAD + 1);
    expect(c.replicas[1]?.rsn()).toBe(base);
    const full = c.effects('log', 'r2').filter((o) => o.at >= start && o.effect.event === 'order.backlog-full');
    expect(full[0]?.effect.fields).toEqual({ rsn: base + MAX_ORDER_AHEAD + 1 });
  });
});

describe('a backup runs when its order deadlines fall, and still for its heartbeat (PROTOCOL §5.8, §10.2)', () => {
  const ORDER_CONFIRM_MS = 1000;
  /** Every millisecond for `ms`, replica `k` asks to run again within a heartbeat period. */
  function wakesForHeartbeats(c: Cluster, k: number, ms: number): void {
    for (let n = 0; n < ms; n++) {
      expect(c.replicas[k]?.nextWakeMs(), `at ${c.now()}`).toBeLessThanOrEqual(c.now() + c.membership.timing.replicaHeartbeatMs);
      c.run(1);
    }
  }

  it('§5.8: an order whose confirmation never comes is executed unconfirmed orderConfirmMs after it reached the backup, to the millisecond; meanwhile the backup still wakes for its heartbeat', () => {
    const c = makeCluster(1);
    expect(c.membership.timing.orderConfirmMs).toBe(ORDER_CONFIRM_MS);
    c.run(100);
    let rsn = -1;
    let arrivesAt = -1;
    c.filters.push((from, to, i): Item => {
      if (rsn < 0 && from === 'r1' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'wrapper') {
        rsn = i.body.rsn;
        arrivesAt = c.now() + 1; // the harness's latency
      }
      // r3's confirmations and evidence never reach r2 (notices in their place keep the lane's sequence).
      const lost = from === 'r3' && to === 'r2' && i.type === 'ptp' && (i.body?.type === 'order' || i.body?.type === 'order.evidence');
      return lost ? { ...i, body: { type: 'notice', text: 'lost' } } : i;
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    until(c, () => rsn > 0 && c.now() > arrivesAt, 50);
    wakesForHeartbeats(c, 1, 300);
    until(c, () => c.effects('log', 'r2').some((o) => o.effect.event === 'order.unconfirmed'), ORDER_CONFIRM_MS);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'order.unconfirmed').map((o) => [o.at, o.effect.fields['rsn']])).toEqual([[arrivesAt + ORDER_CONFIRM_MS, rsn]]);
  });

  it('§10.2: a backup holding a dispute still wakes for its heartbeat, and accuses the other backup of order.lie orderConfirmMs after the dispute, to the millisecond, when it shows no frame of the primary\'s', () => {
    const c = makeCluster(1);
    c.run(100);
    const view = c.replicas[1]?.status(c.now()).view as number;
    const bogus = new Uint8Array(32).fill(9);
    // r3 (faulty) confirms to r2, signed, a digest of no order of the primary's, and never shows a frame.
    c.filters.push((from, to, i): Item => {
      if (from !== 'r3' || to !== 'r2' || i.type !== 'ptp') return i;
      if (i.body?.type === 'order') return { ...i, body: { ...i.body, digest: bogus, sig: hmacSigner('r3').sign(pack(orderClaim('r3', view, i.body.rsn, bogus))) } };
      return i.body?.type === 'order.evidence' ? { ...i, body: { type: 'notice', text: 'withheld' } } : i;
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo(1) });
    const disputedAt = () => c.effects('suspect', 'r2').find((o) => o.effect.reason === 'digest.mismatch')?.at;
    until(c, () => disputedAt() !== undefined, 50);
    wakesForHeartbeats(c, 1, 300);
    until(c, () => accusations(c, 'r2').length > 0, ORDER_CONFIRM_MS);
    expect(accusations(c, 'r2').map((o) => [o.at, o.effect.fields['target'], o.effect.fields['reason']])).toContainEqual([(disputedAt() as number) + ORDER_CONFIRM_MS, 'r3', 'order.lie']);
  });
});

describe('a forward the group no longer owes accuses nobody (spec §3.6 G8, PROTOCOL §5.6)', () => {
  it('G8: a request of an agent incarnation that has since been replaced is not held against the primary that never ordered it: no primary.progress', () => {
    const c = makeCluster(1);
    c.run(200);
    // r1 never orders a1's 'lost' request: it swallows a1's copies, and the backups' forwards arrive as notices.
    c.filters.push((from, to, i): Item | null => {
      if (to !== 'r1') return i;
      if (from === 'a1' && i.type === 'grp' && i.body.type === 'cg' && tagOf(i.body.signed) === 'lost') return null;
      return i.type === 'ptp' && i.body?.type === 'wrapper' && tagOf(i.body.signed) === 'lost' ? { ...i, body: { type: 'notice', text: 'swallowed' } } : i;
    });
    c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), tag: 'lost' } });
    const fellBack = () => ['r2', 'r3'].every((b) => c.effects('log', b).some((o) => o.effect.event === 'agent.fallback'));
    until(c, fellBack, 400);
    expect(fellBack()).toBe(true);
    // a1's process dies and a new incarnation joins, well before the backups' PrimaryProgressTimeouts.
    c.restartAgent('a1', 2);
    until(c, () => c.replicas.every((r) => r.state().nodes.get('a1')?.inc === 2), 300);
    expect(c.replicas.map((r) => r.state().nodes.get('a1')?.inc)).toEqual([2, 2, 2]);
    c.run(c.membership.timing.primaryProgressMs + 200);
    expect(c.effects('suspect').filter((o) => o.effect.reason === 'primary.progress')).toEqual([]);
  });
});

describe('a probe that expired before a backup\'s pause is stale on the backup\'s own clock (PROTOCOL §6.1, §8.4)', () => {
  it('§6.1, §8.4: a pause puts off only probes still running: an agent that stays silent to a backup is probed again at the first check probeTimeoutMs after the last probe expired, pause or not', () => {
    const c = makeCluster(1);
    c.run(300);
    // a1 is cut off from r2 alone: r1 and r3 still hear it, so nobody declares its node failed.
    c.filters.push((from, to, i) => (from === 'a1' && to === 'r2' ? null : i));
    const probes = () => c.effects('log', 'r2').filter((o) => o.effect.event === 'node.probe' && o.effect.fields['agent'] === 'a1').map((o) => o.at);
    const expired = () => c.effects('log', 'r2').filter((o) => o.effect.event === 'node.unreachable').map((o) => o.at);
    until(c, () => expired().length > 0, 1_000);
    const deadline = expired()[0] as number;
    expect(probes()).toHaveLength(1);
    c.runUntil(deadline + 5);
    c.paused.add('r2');
    c.runUntil(deadline + 114);
    c.resume('r2'); // at deadline + 115: a pause of 110 ms
    until(c, () => probes().length > 1, 400);
    const again = probes()[1] as number;
    expect(again).toBeGreaterThan(deadline + c.membership.timing.probeTimeoutMs);
    expect(again).toBeLessThanOrEqual(deadline + c.membership.timing.probeTimeoutMs + c.membership.timing.agentCheckMs + 1);
  });
});

describe('the evidence a backup shows has a size bound (PROTOCOL §10.2)', () => {
  it(`§10.2: a backup shows the other backup the primary's frame as evidence up to MAX_EVIDENCE_FRAME_BYTES (${MAX_EVIDENCE_FRAME_BYTES}) bytes, and not a byte more`, () => {
    /** The sizes of the evidence r2 shows r3 after it executed, unconfirmed, a1's request
     *  carrying `bytes` of data. */
    const evidenceFor = (bytes: number): number[] => {
      const c = makeCluster(1);
      c.run(100);
      const shown = c.sent((from, to, i) => (from === 'r2' && to === 'r3' && i.type === 'ptp' && i.body?.type === 'order.evidence' ? String(i.body.frame.length) : null));
      c.filters.push((from, to, i): Item => (from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'order' ? { ...i, body: { type: 'notice', text: 'lost' } } : i));
      c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(1), data: new Uint8Array(bytes) } });
      c.run(c.membership.timing.orderConfirmMs + 200);
      expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'order.unconfirmed')).toHaveLength(1);
      return shown.map(Number);
    };
    const below = evidenceFor(MAX_PAYLOAD_BYTES - 4096);
    expect(below).toHaveLength(1);
    const exact = MAX_PAYLOAD_BYTES - 4096 + MAX_EVIDENCE_FRAME_BYTES - (below[0] as number);
    expect(evidenceFor(exact)).toEqual([MAX_EVIDENCE_FRAME_BYTES]);
    expect(evidenceFor(exact + 1)).toEqual([]);
  });
});
