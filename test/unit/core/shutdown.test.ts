// `trine shutdown` in the cores (docs/PROTOCOL.md §10.11): the group orders the operator's
// `cluster.shutdown` like any request, kills every task, tells every node to stop and the watchdog
// to stand down; the replicas exit once the watchdog and the agents have acknowledged (or after
// SHUTDOWN_LINGER_MAX_MS); nobody is suspected, condemned or reset for stopping on purpose. The
// watchdog stands down only on two replicas' matching notices. The daemons' side (exit codes,
// keeper, `node run`, systemd) is test/e2e/hosts-shutdown.test.ts.
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING, SHUTDOWN_LINGER_MAX_MS, SHUTDOWN_NOTICE_MS } from '../../../src/core/constants.ts';
import type { CoreEffect, WatchdogInput, Membership } from '../../../src/core/node.ts';
import { decodeState } from '../../../src/core/state-codec.ts';
import { encodeState } from '../../../src/core/replicated-state.ts';
import { createWatchdog } from '../../../src/core/watchdog.ts';
import { SCC_SHUTDOWN_LINGER_MS } from '../../../src/core/watchdog-state.ts';
import type { Item, OperatorRequest } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier, makeCluster } from './harness.ts';

const nonce = (n: number) => n.toString(16).padStart(32, '0');
const submit = (n: number, size: number): OperatorRequest => ({
  type: 'task.submit', nonce: nonce(n), name: `job${n}`, size, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(n),
});
const SHUTDOWN: OperatorRequest = { type: 'cluster.shutdown', nonce: nonce(99) };

/** A cluster of two nodes running one task of two processes, with every notice to the watchdog
 *  recorded. */
function running() {
  const c = makeCluster(2);
  const notices: { from: string; rsn: number; atMs: number }[] = [];
  c.filters.push((from, to, item) => {
    if (to === 'scc' && item.type === 'shutdown.notice') notices.push({ from, rsn: item.rsn, atMs: c.now() });
    return item;
  });
  c.run(100);
  c.operate(submit(1, 2));
  c.run(300);
  // The agents report their processes running, as their drivers would.
  for (const [i, a] of c.agents.entries()) {
    const spawned = c.effects('deliver.command', a.id).filter((o) => o.effect.command.type === 'proc.spawn');
    for (const o of spawned) {
      if (o.effect.command.type !== 'proc.spawn') continue;
      c.input(a.id, {
        type: 'request', nowMs: c.now(),
        request: { type: 'proc.report', reports: [{ task: o.effect.command.task, vpid: o.effect.command.vpid, kind: 'spawnSucceeded', pid: 100 + i, exitCode: null, signal: null, reason: 'running', endpoint: '' }] },
      });
    }
  }
  c.run(300);
  return { c, notices };
}

const reply = (c: ReturnType<typeof makeCluster>, n: string) => c.opReplies.filter((r) => r.nonce === n);
const commands = (c: ReturnType<typeof makeCluster>, agent: string) => c.effects('deliver.command', agent).map((o) => o.effect.command.type);

/** a1 and a2 die as the shutdown comes: they never acknowledge the group's copies of it. The
 *  shutdown's RSN. */
function shutDownWithoutAgents(c: ReturnType<typeof makeCluster>): number {
  c.down.add('a1');
  c.down.add('a2');
  c.operate(SHUTDOWN);
  c.run(120);
  return reply(c, SHUTDOWN.nonce)[0]?.rsn ?? NaN;
}

describe('trine shutdown in the group (PROTOCOL §10.11)', () => {
  it('the group kills every task and tells every node to stop, after the terminates; every replica answers the operator alike', () => {
    const { c } = running();
    expect(c.replicas.every((r) => r.clusterView().tasks[0]?.state === 'running')).toBe(true);
    c.operate(SHUTDOWN);
    c.run(200);
    const replies = reply(c, SHUTDOWN.nonce);
    expect(replies.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(new Set(replies.map((r) => `${r.ok} ${r.rsn} ${r.text}`)).size).toBe(1);
    expect(replies[0]?.text).toBe('cluster shutting down: n1, n2 told to stop; killed t1');
    for (const a of ['a1', 'a2']) {
      const got = commands(c, a);
      expect(got).toContain('node.shutdown');
      // Its process's terminate comes first: the task ends by the FSM's own path.
      expect(got.indexOf('proc.terminate')).toBeGreaterThan(-1);
      expect(got.indexOf('proc.terminate')).toBeLessThan(got.indexOf('node.shutdown'));
    }
    expect(c.replicas.every((r) => r.state().shutdownAt === replies[0]?.rsn)).toBe(true);
    expect(new Set(c.replicas.map((r) => r.digestHex())).size).toBe(1);
  });

  it('nothing new is accepted after it; a second shutdown is answered, not applied again', () => {
    const { c } = running();
    c.operate(SHUTDOWN);
    c.run(200);
    c.operate(submit(2, 1));
    c.operate({ type: 'cluster.shutdown', nonce: nonce(98) });
    c.run(200);
    const refused = reply(c, nonce(2));
    expect(refused).toHaveLength(3);
    expect(refused.every((r) => !r.ok && /the cluster is shutting down \(ordered at RSN \d+\): nothing new is accepted/.test(r.text))).toBe(true);
    expect(reply(c, nonce(98)).every((r) => r.ok && /already shutting down/.test(r.text))).toBe(true);
    expect(c.replicas[0]?.clusterView().tasks.map((t) => t.id)).toEqual(['t1']);
    expect(commands(c, 'a1').filter((t) => t === 'node.shutdown')).toHaveLength(1);
    // Every replica logs the shutdown once, with the RSN that ordered it.
    const rsn = reply(c, SHUTDOWN.nonce)[0]?.rsn;
    for (const r of ['r1', 'r2', 'r3']) {
      expect(c.effects('log', r).filter((o) => o.effect.event === 'shutdown.ordered').map((o) => o.effect.fields)).toEqual([{ rsn }]);
    }
  });

  it('the replicas tell the watchdog at once and again every 250 ms until it acknowledges; then they exit once every agent has its copies', () => {
    const { c, notices } = running();
    c.operate(SHUTDOWN);
    c.run(100);
    const rsn = reply(c, SHUTDOWN.nonce)[0]?.rsn ?? NaN;
    expect(new Set(notices.map((n) => n.from))).toEqual(new Set(['r1', 'r2', 'r3']));
    expect(notices.every((n) => n.rsn === rsn)).toBe(true);
    c.run(600);
    const byR1 = notices.filter((n) => n.from === 'r1').map((n) => n.atMs);
    expect(byR1.length).toBeGreaterThanOrEqual(3);
    expect(byR1.slice(1).map((at, k) => at - (byR1[k] as number))).toEqual(byR1.slice(1).map(() => SHUTDOWN_NOTICE_MS));
    expect(c.effects('shutdown')).toEqual([]);
    const ackedAt = c.now();
    for (const r of ['r1', 'r2', 'r3']) c.sendAs('scc', r, [{ type: 'shutdown.ack', rsn }]);
    c.run(200);
    const exits = c.effects('shutdown');
    expect(exits.map((e) => e.proc).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(exits.every((e) => e.at >= ackedAt && e.at <= ackedAt + 50)).toBe(true);
    expect(exits[0]?.effect.reason).toMatch(/the watchdog and every agent acknowledged/);
    const sentAfter = notices.filter((n) => n.atMs > ackedAt + 10);
    expect(sentAfter).toEqual([]);
  });

  it('an ack for another RSN, or from someone not the watchdog, changes nothing; without the watchdog\'s word they exit after SHUTDOWN_LINGER_MAX_MS', () => {
    const { c } = running();
    c.operate(SHUTDOWN);
    c.run(50);
    const orderedAt = c.now();
    const rsn = reply(c, SHUTDOWN.nonce)[0]?.rsn ?? NaN;
    for (const r of ['r1', 'r2', 'r3']) {
      c.sendAs('scc', r, [{ type: 'shutdown.ack', rsn: rsn + 1 }]);
      c.sendAs('a1', r, [{ type: 'shutdown.ack', rsn }]);
    }
    c.run(SHUTDOWN_LINGER_MAX_MS - 200);
    expect(c.effects('shutdown')).toEqual([]);
    c.run(400);
    const exits = c.effects('shutdown');
    expect(exits.map((e) => e.proc).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(exits.every((e) => e.at >= orderedAt + SHUTDOWN_LINGER_MAX_MS - 100)).toBe(true);
    expect(new Set(exits.map((e) => e.effect.reason))).toEqual(new Set([`shutdown at RSN ${rsn}; stopped waiting after ${SHUTDOWN_LINGER_MAX_MS} ms (the watchdog never acknowledged; every agent acknowledged)`]));
  });

  it('agents that never acknowledge their copies keep the replicas until SHUTDOWN_LINGER_MAX_MS, and their exit names them', () => {
    const { c } = running();
    const rsn = shutDownWithoutAgents(c);
    const ackedAt = c.now();
    for (const r of ['r1', 'r2', 'r3']) c.sendAs('scc', r, [{ type: 'shutdown.ack', rsn }]);
    c.run(SHUTDOWN_LINGER_MAX_MS - 500);
    expect(c.effects('shutdown')).toEqual([]);
    c.run(600);
    const exits = c.effects('shutdown');
    expect(exits.map((e) => e.proc).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(exits.every((e) => e.at > ackedAt + SHUTDOWN_LINGER_MAX_MS - 500)).toBe(true);
    expect(new Set(exits.map((e) => e.effect.reason))).toEqual(new Set([`shutdown at RSN ${rsn}; stopped waiting after ${SHUTDOWN_LINGER_MAX_MS} ms (copies unacknowledged by a1, a2)`]));
  });

  it('an agent whose every connection is down owes nothing; one whose connection came back owes its copies again', () => {
    const { c } = running();
    const rsn = shutDownWithoutAgents(c);
    // Each replica's driver saw both agents' connections drop, and a1's come back (a hint the
    // replica takes as it is: a1 may still acknowledge).
    for (const r of ['r1', 'r2', 'r3']) {
      for (const peer of ['a1', 'a2']) c.input(r, { type: 'transport.down', nowMs: c.now(), peer });
      c.input(r, { type: 'transport.up', nowMs: c.now(), peer: 'a1' });
      c.sendAs('scc', r, [{ type: 'shutdown.ack', rsn }]);
    }
    c.run(SHUTDOWN_LINGER_MAX_MS - 500);
    expect(c.effects('shutdown')).toEqual([]);
    c.run(600);
    expect(new Set(c.effects('shutdown').map((e) => `${e.proc} ${e.effect.reason}`))).toEqual(new Set(['r1', 'r2', 'r3'].map((r) =>
      `${r} shutdown at RSN ${rsn}; stopped waiting after ${SHUTDOWN_LINGER_MAX_MS} ms (copies unacknowledged by a1)`)));
  });

  it('a replica shutting down still wakes for its next heartbeat, not only for the watchdog\'s deadline', () => {
    const { c } = running();
    c.operate(SHUTDOWN);
    c.run(50);
    expect(reply(c, SHUTDOWN.nonce)).toHaveLength(3);
    for (let k = 0; k < 2 * SHUTDOWN_NOTICE_MS; k++) {
      c.run(1);
      for (const r of c.replicas) expect(r.nextWakeMs(), `${r.id} at ${c.now()}`).toBeLessThanOrEqual(c.now() + DEFAULT_TIMING.replicaHeartbeatMs);
    }
    expect(c.effects('shutdown')).toEqual([]);
  });

  it('a node declared failed before the shutdown owes nothing: once the watchdog acknowledged, the replicas exit without waiting for its agent', () => {
    const { c } = running();
    // a2 dies as the group sends it the task's kill: those copies stay unacknowledged.
    c.down.add('a2');
    c.operate({ type: 'task.kill', nonce: nonce(98), task: 't1' });
    c.run(1_000);
    expect(c.replicas.map((r) => r.clusterView().nodes.find((n) => n.agent === 'a2')?.state)).toEqual(['failed', 'failed', 'failed']);
    c.operate(SHUTDOWN);
    c.run(120);
    const rsn = reply(c, SHUTDOWN.nonce)[0]?.rsn ?? NaN;
    for (const r of ['r1', 'r2', 'r3']) c.sendAs('scc', r, [{ type: 'shutdown.ack', rsn }]);
    c.run(1_000);
    const exits = c.effects('shutdown');
    expect(exits.map((e) => e.proc).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(new Set(exits.map((e) => e.effect.reason))).toEqual(new Set([`shutdown at RSN ${rsn}: the watchdog and every agent acknowledged`]));
  });

  it('nodes that stop are not declared failed, replicas are not suspected, nothing is reset or replaced', () => {
    const { c } = running();
    c.operate(SHUTDOWN);
    c.run(100);
    const orderedAt = c.now();
    // Every agent stops, and one replica (as if it exited first).
    c.down.add('a1');
    c.down.add('a2');
    c.down.add('r3');
    c.run(3_000);
    const after = <T extends { at: number }>(xs: T[]) => xs.filter((x) => x.at > orderedAt);
    expect(after(c.effects('suspect'))).toEqual([]);
    expect(after(c.effects('deliver.input')).map((o) => o.effect.input.type).filter((t) => t !== 'tick')).toEqual([]);
    expect(c.replicas.slice(0, 2).every((r) => r.state().replicas.join() === 'r1,r2,r3')).toBe(true);
  });

  it('an agent that joins after the shutdown is told to stop too', () => {
    const { c } = running();
    c.operate(SHUTDOWN);
    c.run(200);
    c.restartAgent('a1', 2);
    c.run(500);
    const fresh = c.effects('deliver.command', 'a1').filter((o) => o.at > 0).map((o) => o.effect.command);
    expect(fresh.filter((x) => x.type === 'node.shutdown')).toHaveLength(2); // the old incarnation's and the new one's
  });

  it('the state of a cluster shutting down transfers to a replacement byte for byte', () => {
    const { c } = running();
    c.operate(SHUTDOWN);
    c.run(200);
    const s = c.replicas[0]?.state();
    if (s === undefined) throw new Error('no replica');
    const decoded = decodeState(encodeState(s), { timers: s.timers, pool: s.pool });
    if (!decoded.ok) throw new Error(decoded.detail);
    expect(decoded.value.shutdownAt).toBe(s.shutdownAt);
    expect(Buffer.from(encodeState(decoded.value)).equals(Buffer.from(encodeState(s)))).toBe(true);
  });
});

describe('the watchdog stands down on two replicas\' notices (PROTOCOL §10.11)', () => {
  const membership: Membership = {
    cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [{ id: 'a1', node: 'n1' }],
    scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
  };
  const keys = { signer: hmacSigner('scc'), verifier: hmacVerifier(['scc', 'op', 'r1', 'r2', 'r3', 'a1']) };
  const frame = (from: string, nowMs: number, ...items: Item[]): WatchdogInput => ({ type: 'frame', nowMs, frame: { from, to: 'scc', items } });
  const hb = (counter: number): Item => ({
    type: 'hb', inc: 10, counter, info: { type: 'replica', role: 'backup', rsn: 1, gssn: 2, digest: new Uint8Array(32), view: 0, ckptRsn: 0, ckptDigest: new Uint8Array(32) },
  });
  const acks = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'send' && e.item.type === 'shutdown.ack' ? [`${e.to}:${e.item.rsn}`] : []));

  /** A watchdog armed by three replicas heartbeating until 1000 ms. */
  function armed() {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    let n = 0;
    for (let t = 0; t < 1000; t += 75) for (const r of ['r1', 'r2', 'r3']) w.step(frame(r, t, hb(++n)));
    expect(w.status(1000).armed).toBe(true);
    return w;
  }

  it('one replica\'s notice, an agent\'s, or two for different RSNs change nothing: the group\'s silence still resets the cluster', () => {
    const w = armed();
    const out = [...w.step(frame('r1', 1000, { type: 'shutdown.notice', rsn: 40 })), ...w.step(frame('a1', 1001, { type: 'shutdown.notice', rsn: 40 })),
      ...w.step(frame('r2', 1002, { type: 'shutdown.notice', rsn: 41 }))];
    expect(acks(out)).toEqual([]);
    expect(w.status(1002).shutdown).toBeNull();
    const later: CoreEffect[] = [];
    for (let t = 1100; t <= 6000; t += 100) later.push(...w.step({ type: 'tick', nowMs: t }));
    expect(later.filter((e) => e.type === 'reset.cluster')).toHaveLength(1);
  });

  it('two matching notices: acknowledged, disarmed for good (no reset when the group goes silent, no node reset), later notices acknowledged, exit after SCC_SHUTDOWN_LINGER_MS', () => {
    const w = armed();
    expect(acks(w.step(frame('r1', 1000, { type: 'shutdown.notice', rsn: 40 })))).toEqual([]);
    const two = w.step(frame('r3', 1010, { type: 'shutdown.notice', rsn: 40 }));
    expect(acks(two).sort()).toEqual(['r1:40', 'r3:40']);
    expect(w.status(1010)).toMatchObject({ armed: false, shutdown: { rsn: 40, by: ['r1', 'r3'], atMs: 1010 } });
    expect(acks(w.step(frame('r2', 1100, { type: 'shutdown.notice', rsn: 40 })))).toEqual(['r2:40']);
    expect(w.nextWakeMs()).toBe(1010 + SCC_SHUTDOWN_LINGER_MS);
    const out: CoreEffect[] = [...w.step(frame('r1', 1200, { type: 'reset.node', node: 'n2', rsn: 9, address: '' })), ...w.step(frame('r2', 1201, { type: 'reset.node', node: 'n2', rsn: 9, address: '' }))];
    for (let t = 1300; t <= 8000; t += 100) out.push(...w.step({ type: 'tick', nowMs: t }));
    expect(out.filter((e) => e.type === 'reset.cluster' || e.type === 'reset.node')).toEqual([]);
    const exits = out.filter((e) => e.type === 'shutdown');
    expect(exits).toEqual([{ type: 'shutdown', reason: 'shutdown at RSN 40, noticed by r1, r3' }]);
  });
});
