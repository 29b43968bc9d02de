// A replacement replica joining the group (docs/PROTOCOL.md §10.6), stepped on the replica and
// agent cores with the in-memory harness: the group commands an agent to start a spare, the test
// starts that core as the agent's driver would, and the members transfer it the state. The case
// here is the one test/e2e/hosts-added-spares.test.ts met on a loaded machine: a spare id that
// starts again as a new incarnation while a backup still holds a session of the dead one.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { GroupCommand, Item, PtpPayload } from '../../../src/core/wire/messages.ts';
import { signCG } from '../../../src/core/wire/frame.ts';
import { decodeJournal } from '../../../src/core/task-journal.ts';
import { hmacSigner, makeCluster } from './harness.ts';

type Spawn = Extract<GroupCommand, { type: 'replica.spawn' }>;
type Cluster = ReturnType<typeof makeCluster>;

/** The `replica.spawn` commands for `id` agents delivered so far (one per agent that got it). */
const spawnsOf = (c: Cluster, id: string): { agent: string; command: Spawn }[] =>
  c.effects('deliver.command').flatMap((o) => (o.effect.command.type === 'replica.spawn' && o.effect.command.id === id ? [{ agent: o.proc, command: o.effect.command }] : []));

/** Run until the `n`-th `replica.spawn` of `id` is delivered, then start that core. */
function startOnCommand(c: Cluster, id: string, n: number, inc: number, withinMs: number) {
  const end = c.now() + withinMs;
  while (spawnsOf(c, id).length < n && c.now() < end) c.run(10);
  const spawn = spawnsOf(c, id)[n - 1];
  expect(spawn, `replica.spawn #${n} of ${id} within ${withinMs} ms`).toBeDefined();
  const { view, primary, replicas } = (spawn as { command: Spawn }).command;
  return { core: c.startReplica(id, inc, { view, primary, replicas }), view };
}

const joinedAt = (c: Cluster, proc: string, id: string) =>
  c.effects('deliver.input', proc).filter((o) => o.effect.input.type === 'replica.add' && o.effect.input.id === id).map((o) => o.at);

describe('a replacement replica (PROTOCOL §10.6)', () => {
  it('§10.6: a spare id started again gets the state from two members, though a backup executed its `replica.add` while it still held a session of the dead incarnation', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    // r2 dies: the group condemns it and starts r4, the one spare, which joins.
    c.down.add('r2');
    const first = startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    expect(first.core.phase()).toBe('serving');
    // r4 dies in turn: no fresh spare is left, so r4 starts again, a new incarnation. Its
    // handshake with r3 is held back until r3 has executed the `replica.add`: r3 sends the state
    // while its only session with r4 is the dead incarnation's.
    c.down.add('r4');
    let held = true;
    c.filters.push((from, to, item) => (held && item.type === 'hello' && [from, to].sort().join() === 'r3,r4' ? null : item));
    const second = startOnCommand(c, 'r4', 2, 2, 5_000);
    const addsBefore = joinedAt(c, 'r3', 'r4').length;
    const end = c.now() + 2_000;
    while (joinedAt(c, 'r3', 'r4').length === addsBefore && c.now() < end) c.run(1);
    expect(joinedAt(c, 'r3', 'r4'), 'r3 executed the second replica.add').toHaveLength(addsBefore + 1);
    held = false;
    c.run(2_000);
    // The new incarnation installed a state two members vouched for, and serves.
    expect(second.core.phase()).toBe('serving');
    const serving = c.replicas.filter((r) => r.id !== 'r2');
    expect(serving.map((r) => r.id).sort()).toEqual(['r1', 'r3', 'r4']);
    expect(new Set(serving.map((r) => r.digestHex())).size).toBe(1);
    expect(new Set(serving.map((r) => r.rsn())).size).toBe(1);
  });

  it('§10.6: a second replacement takes the state from the members the group has when it starts, one of them the first replacement: a replica cluster.json never named as a member', () => {
    const c = makeCluster(5, { spares: ['r4', 'r5'] });
    c.run(300);
    c.down.add('r2');
    const first = startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    expect(first.core.phase()).toBe('serving');
    // r3 dies: r5 starts with the group r1, r4, which only the command names.
    c.down.add('r3');
    const second = startOnCommand(c, 'r5', 1, 1, 5_000);
    expect(spawnsOf(c, 'r5')[0]?.command).toMatchObject({ primary: 'r1', replicas: ['r1', 'r4'] });
    c.run(2_000);
    expect(second.core.phase()).toBe('serving');
    const serving = c.replicas.filter((r) => ['r1', 'r4', 'r5'].includes(r.id));
    expect(serving.map((r) => r.state().replicas)).toEqual([['r1', 'r4', 'r5'], ['r1', 'r4', 'r5'], ['r1', 'r4', 'r5']]);
    expect(new Set(serving.map((r) => r.digestHex())).size).toBe(1);
  });

  it('§10.6: the members keep asking a replacement they wait for at the plain handshake period, so its sessions open within one period of its start even if its own hellos are lost', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.down.add('r2');
    const end = c.now() + 5_000;
    while (spawnsOf(c, 'r4').length === 0 && c.now() < end) c.run(10);
    // r4 starts a second after its command; its own calls are lost (its dials fail): a session
    // opens only when a member calls it, which r4 then answers.
    c.run(1_000);
    const called = new Set<string>();
    c.filters.push((from, to, item) => {
      if (to === 'r4' && item.type === 'hello') called.add(from);
      return from === 'r4' && item.type === 'hello' && !called.has(to) ? null : item;
    });
    const { view, primary, replicas } = (spawnsOf(c, 'r4')[0] as { command: Spawn }).command;
    c.startReplica('r4', 1, { view, primary, replicas });
    const startedAt = c.now();
    const connected = () => ['r1', 'r3'].every((m) => c.replicas.find((r) => r.id === m)?.status(c.now()).replicas.find((x) => x.id === 'r4')?.connected === true);
    while (!connected() && c.now() < startedAt + 1_000) c.run(1);
    expect(c.now() - startedAt).toBeLessThanOrEqual(c.membership.timing.handshakeRetryMs + 5);
  });

  it('§10.6: hellos to a member that does not answer back off: a dead member is asked a few times a second, not at the handshake period', () => {
    const c = makeCluster(2);
    const hellos = c.sent((from, to, item) => (from === 'r1' && (to === 'r3' || to === 'a2') && item.type === 'hello' ? to : null));
    c.down.add('r3');
    c.down.add('a2');
    c.run(3_000);
    // 50, 100, 200, then every 400 ms (MAX_RETRANSMIT_BACKOFF × handshakeRetryMs): about 10 in 3 s.
    for (const to of ['r3', 'a2']) expect(hellos.filter((x) => x === to).length).toBeLessThanOrEqual(12);
  });

  it('§10.6, §5.8: under a stream of requests, the backup that executes a replica.add keeps the orders that followed it: every member ends at the same RSN and state, nobody suspected', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.down.add('r2');
    startOnCommand(c, 'r4', 1, 1, 5_000);
    const since = c.now();
    // a1 asks something every 2 ms while r4 joins.
    for (let k = 0; k < 400; k++) {
      c.input('a1', { type: 'request', nowMs: c.now(), request: { type: 'echo', tag: `s${k}`, fanout: 'self', count: 0, data: new Uint8Array([1]) } });
      c.run(2);
    }
    c.run(1_000);
    expect(joinedAt(c, 'r3', 'r4')).toHaveLength(1);
    const members = c.replicas.filter((r) => r.id !== 'r2');
    expect(members.map((r) => r.phase())).toEqual(['serving', 'serving', 'serving']);
    expect(new Set(members.map((r) => r.rsn())).size).toBe(1);
    expect(new Set(members.map((r) => r.digestHex())).size).toBe(1);
    expect(c.effects('suspect').filter((o) => o.at >= since)).toEqual([]);
    // Its state in, the replacement holds the primary to the RSN sequence like any backup: an
    // RSN it already executed, sent again, is suspected (spec §3.6 G7).
    const r4 = c.replicas.find((r) => r.id === 'r4');
    const rsn = r4?.rsn() as number;
    const last = c.effects('deliver.request', 'r4').at(-1)?.effect;
    c.filters.push((from, to, i) => (from === 'r1' && to === 'r4' && i.type === 'ptp' && i.body?.type === 'notice' && i.body.text === 'again' && last !== undefined
      ? { ...i, body: { type: 'wrapper', rsn, signed: signCG({ csn: last.csn, gssnAck: 0, payload: last.request, client: last.client, inc: last.inc }, hmacSigner(last.client)) } } : i));
    c.input('r1', { type: 'notice', nowMs: c.now(), to: 'r4', text: 'again' });
    c.run(50);
    expect(c.effects('suspect', 'r4').map((o) => [o.effect.target, o.effect.reason, o.effect.detail])).toEqual([['r1', 'rsn.gap', `wrapper rsn ${rsn}, expected ${rsn + 1}`]]);
  });

  it('§10.6: a state that two members vouch for but that does not decode is refused with its reason, and the replacement keeps waiting', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.down.add('r2');
    // The members' copies for r4 are replaced by the same undecodable bytes, and their digests
    // by those bytes' digest (as if both members were faulty in the same way: beyond f = 1, but
    // the only way to reach the decoder through the transfer).
    const junk = new Uint8Array([0xde, 0xad, 0xbe, 0xef]);
    const digest = new Uint8Array(createHash('sha256').update(junk).digest());
    c.filters.push((_from, to, item) => {
      if (to !== 'r4' || item.type !== 'ptp' || item.body === null) return item;
      if (item.body.type === 'state.digest') return { ...item, body: { ...item.body, digest } };
      if (item.body.type === 'state.chunk') return item.body.index === 0 ? { ...item, body: { ...item.body, count: 1, data: junk } } : { ...item, body: { type: 'notice', text: 'dropped' } };
      return item;
    });
    const r4 = startOnCommand(c, 'r4', 1, 1, 5_000).core;
    c.run(1_000);
    expect(r4.phase()).toBe('installing');
    const refused = c.effects('log', 'r4').filter((o) => o.effect.event === 'state.refused').map((o) => o.effect.fields);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]).toEqual({ rsn: expect.any(Number), code: expect.any(String), detail: expect.any(String) });
    expect(refused[0]?.['rsn']).toBeGreaterThan(0);
  });

  it('§10.3: a condemned member is let go: once removed, nothing more is sent to it, not even a hello', () => {
    const c = makeCluster(2);
    c.run(300);
    c.down.add('r3');
    const end = c.now() + 3_000;
    while (c.replicas[0]?.state().replicas.includes('r3') && c.now() < end) c.run(10);
    expect(c.replicas[0]?.state().replicas).toEqual(['r1', 'r2']);
    c.run(10);
    const sent = c.sent((from, to) => ((from === 'r1' || from === 'r2') && to === 'r3' ? from : null));
    c.run(3_000);
    expect(sent).toEqual([]);
  });

  it('§10.6, §10.2: a member does not hold the dead incarnation\'s silence against the new one: no diagnosis of r4 at the first check after it joined, though its predecessor was silent for long', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.down.add('r2');
    startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    c.down.add('r4');
    // As on a loaded host, where the new r4's connection to r3 is slow to come up: r3 hears
    // nothing from it until one check period after r3 executed its replica.add.
    let held = true;
    c.filters.push((from, to, item) => (held && from === 'r4' && to === 'r3' ? null : item));
    startOnCommand(c, 'r4', 2, 2, 5_000);
    const addsBefore = joinedAt(c, 'r3', 'r4').length;
    const end = c.now() + 2_000;
    while (joinedAt(c, 'r3', 'r4').length === addsBefore && c.now() < end) c.run(1);
    const addedAt = joinedAt(c, 'r3', 'r4')[addsBefore] as number;
    c.runUntil(addedAt + c.membership.timing.replicaCheckMs);
    held = false;
    const silentAfter = c.effects('log', 'r3').filter((o) => o.at >= addedAt && o.effect.event === 'diagnosis.initiated' && o.effect.fields?.['target'] === 'r4');
    expect(silentAfter.map((o) => o.effect.fields), 'r3 diagnosing the new r4 within one check of its replica.add').toEqual([]);
    c.run(2_000);
    expect(c.replicas.find((r) => r.id === 'r4')?.phase()).toBe('serving');
  });
});

describe('a member\'s status while the group replaces a replica (PROTOCOL §10.6, `trine status`)', () => {
  it('§10.6: the status names the replacement under way among the replicas, with the nodes tried (the condemned replica\'s first), and the condemned replica as retired', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.down.add('r2');
    const end = c.now() + 5_000;
    while (spawnsOf(c, 'r4').length === 0 && c.now() < end) c.run(10);
    const spawn = spawnsOf(c, 'r4')[0];
    expect(spawn, 'the group started r4').toBeDefined();
    const node = c.replicas[0]?.state().nodes.get(spawn?.agent ?? '')?.node;
    const s = c.replicas[0]?.status(c.now());
    expect(s?.role).toBe('primary');
    expect(s?.members).toEqual(['r1', 'r3']);
    expect(s?.replicas.map((r) => `${r.id}:${r.connected ? 'connected' : 'not connected'}`)).toEqual(['r3:connected', 'r4:not connected']); // r4 is not started yet
    expect(s?.retired).toEqual(['r2']);
    // The condemned replica's node counts as tried: it may be the faulty part (spec §2.1 (ii)).
    expect(s?.replacement).toEqual({ id: 'r4', node, tried: ['n2', node] });
  });
});

describe('a replacement serves agents only once its state is in (PROTOCOL §10.6, §10.5)', () => {
  it('§10.6: an agent\'s fallback that reaches a replacement still installing waits for the state: the replacement forwards it to the primary only after it installed', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    // r4's request for the state reaches r1 (which lets it in) but not r3, until the test sends
    // it on: r4 installs only on two members' matching digests, so it stays installing.
    let request: PtpPayload | null = null;
    c.filters.push((from, to, i): Item => {
      if (from !== 'r4' || to !== 'r3' || i.type !== 'ptp') return i;
      if (i.body?.type === 'state.request') {
        request = i.body;
        return { ...i, body: { type: 'notice', text: 'held' } };
      }
      return i.body?.type === 'notice' && i.body.text === 'send it' && request !== null ? { ...i, body: request } : i;
    });
    c.down.add('r2');
    const r4 = startOnCommand(c, 'r4', 1, 1, 5_000);
    const end = c.now() + 2_000;
    while (joinedAt(c, 'r3', 'r4').length === 0 && c.now() < end) c.run(1);
    expect(joinedAt(c, 'r3', 'r4')).toHaveLength(1);
    c.run(50); // a1 learns the group r1, r3, r4
    // r1 (faulty) swallows a1's request and the backups' forwards of it: a1 falls back to r3
    // and r4 (spec §3.6 G7, as in A18).
    c.filters.push((from, to, i) => (to === 'r1' && ((from === 'a1' && i.type === 'grp') || (from !== 'a1' && i.type === 'ptp' && i.body?.type === 'wrapper')) ? null : i));
    const toR4 = c.sent((from, to, i) => (from === 'a1' && to === 'r4' && i.type === 'grp' ? String(c.now()) : null));
    const since = c.now();
    c.input('a1', { type: 'request', nowMs: c.now(), request: { type: 'echo', tag: 'x', fanout: 'self', count: 0, data: new Uint8Array([1]) } });
    c.run(400);
    expect(toR4.length, 'a1 fell back to r4').toBeGreaterThan(0);
    expect(r4.core.phase()).toBe('installing');
    const fallbacks = () => c.effects('log', 'r4').filter((o) => o.at >= since && o.effect.event === 'agent.fallback');
    expect(fallbacks()).toEqual([]);
    c.input('r4', { type: 'notice', nowMs: c.now(), to: 'r3', text: 'send it' });
    c.run(300);
    expect(r4.core.phase()).toBe('serving');
    const installedAt = c.effects('log', 'r4').find((o) => o.effect.event === 'state.installed')?.at ?? NaN;
    expect(fallbacks().length, 'r4 forwarded the held request').toBeGreaterThan(0);
    expect(fallbacks().filter((o) => o.at < installedAt)).toEqual([]);
  });
});

describe('a replacement diagnoses nobody before its state is in (PROTOCOL §10.6, §6)', () => {
  it('§10.6: a member that falls silent while the replacement still installs is not reported by the replacement: no silence diagnosis, no probe', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    // r4's request for the state never reaches r3: r4 installs only on two members' matching
    // digests, so it stays installing.
    c.filters.push((from, to, i) => (from === 'r4' && to === 'r3' && i.type === 'ptp' && i.body?.type === 'state.request' ? null : i));
    const fromR4 = c.sent((from, to, i) => (from === 'r4' && ((to === 'scc' && i.type === 'diag.report') || (i.type === 'probe')) ? `${i.type} to ${to}` : null));
    c.down.add('r2');
    const r4 = startOnCommand(c, 'r4', 1, 1, 5_000);
    const end = c.now() + 2_000;
    while (joinedAt(c, 'r3', 'r4').length === 0 && c.now() < end) c.run(1);
    c.run(200); // r3 heartbeats r4, a member now
    expect(r4.core.status(c.now()).replicas.find((x) => x.id === 'r3')?.health).toBe('healthy');
    c.down.add('r3');
    c.run(4 * c.membership.timing.replicaCheckMs);
    expect(r4.core.phase()).toBe('installing');
    expect(r4.core.status(c.now()).replicas.find((x) => x.id === 'r3')?.health).toBe('silent');
    expect(fromR4).toEqual([]);
  });
});

describe('a replacement journals the tasks only once its state is in (PROTOCOL §10.6, §10.9)', () => {
  it('§10.6, §10.9: a replacement writes and sends no task journal while it installs (it would overwrite its node\'s with an empty one); once installed, its journal lists the members\' tasks', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    c.operate({ type: 'task.submit', nonce: '1'.padStart(32, '0'), name: 'job', size: 1, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(1) });
    c.run(200);
    const sentByR4 = c.sent((from, to, i) => (from === 'r4' && to === 'scc' && i.type === 'tasks.journal' ? String(c.now()) : null));
    c.down.add('r2');
    const { core } = startOnCommand(c, 'r4', 1, 1, 5_000);
    c.run(1_000);
    expect(core.phase()).toBe('serving');
    const installedAt = c.effects('log', 'r4').find((o) => o.effect.event === 'state.installed')?.at as number;
    expect(installedAt).toBeGreaterThan(0);
    const written = c.effects('persist.tasks', 'r4');
    expect(written.filter((o) => o.at < installedAt)).toEqual([]);
    expect(sentByR4.filter((at) => Number(at) < installedAt)).toEqual([]);
    const last = decodeJournal(written.at(-1)?.effect.journal as Uint8Array);
    expect(last.ok && last.value.tasks.map((t) => t.task)).toEqual(['t1']);
    expect(sentByR4.length).toBeGreaterThan(0);
  });
});

describe('a replacement\'s port is its own signed word (PROTOCOL §10.6)', () => {
  it('§10.6: a replacement whose port claim does not verify is not let in: the primary orders no replica.add, so the backups, which would refuse it, never part from the primary; nobody is accused', () => {
    const c = makeCluster(4, { spares: ['r4'] });
    c.run(300);
    // r4 (faulty) asks for the state with a signature on its port that is not its own.
    c.filters.push((from, to, item) => (from === 'r4' && item.type === 'ptp' && item.body?.type === 'state.request' ? { ...item, body: { ...item.body, sig: new Uint8Array(64) } } : item));
    c.down.add('r2');
    const r4 = startOnCommand(c, 'r4', 1, 1, 5_000);
    const since = c.now();
    const before = (c.replicas[0]?.status(c.now()).drops as Record<string, number>)['SIG_INVALID'] ?? 0;
    c.run(1_000);
    expect(r4.core.phase()).toBe('installing');
    const [r1, , r3] = c.replicas;
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'replica.add')).toEqual([]);
    expect(r1?.state().replicas).toEqual(['r1', 'r3']);
    expect(r3?.rsn()).toBe(r1?.rsn());
    expect(r3?.digestHex()).toBe(r1?.digestHex());
    expect(c.effects('log').filter((o) => o.at >= since && o.effect.event === 'replica.accuse')).toEqual([]);
    expect((r1?.status(c.now()).drops as Record<string, number>)['SIG_INVALID']).toBe(before + 1);
  });
});
