// Membership at run time in the cores (docs/PROTOCOL.md §10.12): an operator's `node.add` gives
// the group a new node and its agent's key, and the agent then joins and takes tasks like any
// other; `node.remove` drains a node (nothing new is placed there; with `kill` its tasks are
// killed) and, once no live task holds a slot on it, tells its agent to stop and forgets it. The
// CLI and a real added host: test/integration/node-admin.test.ts, test/e2e/hosts-nodes.test.ts.
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, WatchdogInput, Membership } from '../../../src/core/node.ts';
import { decodeState } from '../../../src/core/state-codec.ts';
import { createWatchdog } from '../../../src/core/watchdog.ts';
import { MAX_ADDED_NODE_VOTES } from '../../../src/core/watchdog-state.ts';
import { encodeState } from '../../../src/core/replicated-state.ts';
import type { OperatorRequest } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier, makeCluster } from './harness.ts';

let n = 0;
const nonce = () => (++n).toString(16).padStart(32, '0');
const submit = (size: number): OperatorRequest & { type: 'task.submit' } => ({
  type: 'task.submit', nonce: nonce(), name: 'job', size, file: '/bin/sleep', args: ['600'], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(1),
});
const KEY = new Uint8Array(32).fill(9);
const add = (agent: string, node: string, address = '10.0.0.9'): OperatorRequest => ({ type: 'node.add', nonce: nonce(), agent, node, address, port: 7403, publicKey: KEY, spares: [] });
const remove = (node: string, kill = false): OperatorRequest => ({ type: 'node.remove', nonce: nonce(), node, kill });

type Cluster = ReturnType<typeof makeCluster>;
/** The outcome every replica gave the request, which must be the same. */
function outcome(c: Cluster, q: OperatorRequest): { ok: boolean; text: string } {
  const replies = c.opReplies.filter((r) => r.nonce === q.nonce);
  expect(replies.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
  expect(new Set(replies.map((r) => `${r.ok}|${r.text}`)).size).toBe(1);
  return { ok: replies[0]?.ok ?? false, text: replies[0]?.text ?? '' };
}
function operate(c: Cluster, q: OperatorRequest, ms = 300): { ok: boolean; text: string } {
  c.operate(q);
  c.run(ms);
  return outcome(c, q);
}
/** Every spawn delivered so far is reported running, as the agents' drivers would. */
function reportSpawns(c: Cluster, done = new Set<string>()): Set<string> {
  for (const a of c.agents) {
    for (const o of c.effects('deliver.command', a.id)) {
      const cmd = o.effect.command;
      if (cmd.type !== 'proc.spawn' || done.has(`${cmd.task}/${cmd.vpid}`)) continue;
      done.add(`${cmd.task}/${cmd.vpid}`);
      c.input(a.id, { type: 'request', nowMs: c.now(), request: { type: 'proc.report', reports: [{ task: cmd.task, vpid: cmd.vpid, kind: 'spawnSucceeded', pid: 1000 + cmd.vpid, exitCode: null, signal: null, reason: 'running', endpoint: '' }] } });
    }
  }
  c.run(300);
  return done;
}
const view = (c: Cluster) => c.replicas[0]?.clusterView() ?? { nodes: [], tasks: [] };
const nodesOf = (c: Cluster, task: string) => [...new Set(view(c).tasks.find((t) => t.id === task)?.procs.map((p) => p.node) ?? [])].sort();
const sameDigest = (c: Cluster) => new Set(c.replicas.map((r) => r.digestHex())).size === 1;

describe('node.add (PROTOCOL §10.12)', () => {
  it('the group takes the new node and its key; its agent joins and a task that needs its slots runs there', () => {
    const c = makeCluster(2);
    c.run(200);
    expect(operate(c, add('a3', 'n3x'))).toEqual({ ok: true, text: 'node n3x added (agent a3 at 10.0.0.9); it joins when its agent starts' });
    expect(view(c).nodes.map((x) => `${x.node}:${x.state}`)).toEqual(['n1:up', 'n2:up', 'n3x:joining']);
    // Every replica handed the key to its driver, once.
    expect(c.effects('keys').map((o) => o.proc).sort()).toEqual(['r1', 'r2', 'r3']);
    c.addAgent('a3');
    c.run(500);
    expect(view(c).nodes.find((x) => x.node === 'n3x')).toMatchObject({ agent: 'a3', state: 'up', slots: 4 });
    const t = submit(12);
    expect(operate(c, t).ok).toBe(true);
    reportSpawns(c);
    expect(nodesOf(c, 't1')).toEqual(['n1', 'n2', 'n3x']);
    expect(view(c).tasks[0]?.state).toBe('running');
    expect(sameDigest(c)).toBe(true);
  });

  it('refused: an id or node name already in the cluster, a replica id, the same address twice, a cluster shutting down', () => {
    const c = makeCluster(2);
    c.run(200);
    expect(operate(c, add('a1', 'n9')).text).toBe('cannot add n9: a1 is already a process of this cluster');
    expect(operate(c, add('r2', 'n9')).text).toBe('cannot add n9: r2 is already a process of this cluster');
    expect(operate(c, add('a9', 'n2')).text).toBe('cannot add n2: a node n2 is already in this cluster');
    expect(operate(c, add('a9', 'n3')).text).toBe('cannot add n3: a node n3 is already in this cluster'); // r3's node
    expect(operate(c, add('a9', 'n9', '10.0.0.7')).ok).toBe(true);
    expect(operate(c, add('a8', 'n8', '10.0.0.7')).text).toBe('cannot add n8: address 10.0.0.7 is already an added node\'s');
    operate(c, { type: 'cluster.shutdown', nonce: nonce() });
    expect(operate(c, add('a7', 'n7', '10.0.0.6')).text).toBe('cannot add n7: the cluster is shutting down');
    expect(view(c).nodes.map((x) => x.node)).toEqual(['n1', 'n2', 'n9']);
  });

  it('a removed added node\'s address is free again; its name and agent id never are', () => {
    const c = makeCluster(2);
    c.run(200);
    operate(c, add('a3', 'n3x', '10.0.0.33'));
    expect(operate(c, remove('n3x')).ok).toBe(true);
    expect(operate(c, add('a3', 'n3y', '10.0.0.33')).text).toBe('cannot add n3y: a3 is already a process of this cluster');
    expect(operate(c, add('a4', 'n3x', '10.0.0.34')).text).toBe('cannot add n3x: a node n3x is already in this cluster');
    expect(operate(c, add('a4', 'n4x', '10.0.0.33')).ok).toBe(true);
  });

  it('an added node that fails is reset like the others, with its address: the watchdog\'s cluster.json does not list it', () => {
    const c = makeCluster(2);
    const resets: { from: string; node: string; address: string }[] = [];
    c.filters.push((from, to, item) => {
      if (to === 'scc' && item.type === 'reset.node') resets.push({ from, node: item.node, address: item.address });
      return item;
    });
    c.run(200);
    operate(c, add('a3', 'n3x', '10.0.0.33'));
    c.addAgent('a3');
    c.run(500);
    c.down.add('a3');
    c.run(2_000);
    expect(view(c).nodes.find((x) => x.node === 'n3x')?.state).toBe('failed');
    expect(new Set(resets.map((r) => `${r.node}@${r.address}`))).toEqual(new Set(['n3x@10.0.0.33']));
    expect(new Set(resets.map((r) => r.from)).size).toBeGreaterThanOrEqual(2);
  });
});

describe('what a replica learns from a node.add (PROTOCOL §10.12)', () => {
  const spare = (id: string, port: number, b: number) => ({ id, port, publicKey: new Uint8Array(32).fill(b) });
  const addWith = (agent: string, node: string, address: string, spares: ReturnType<typeof spare>[]): OperatorRequest =>
    ({ type: 'node.add', nonce: nonce(), agent, node, address, port: 7403, publicKey: KEY, spares });
  /** The first replica.spawn the group sends `agent`, within `withinMs`. */
  function replicaSpawnTo(c: Cluster, agent: string, withinMs: number) {
    const end = c.now() + withinMs;
    const spawnOf = () => c.effects('deliver.command', agent).map((o) => o.effect.command).find((x) => x.type === 'replica.spawn');
    while (spawnOf() === undefined && c.now() < end) c.run(10);
    const spawn = spawnOf();
    if (spawn?.type !== 'replica.spawn') throw new Error(`no replica.spawn to ${agent} within ${withinMs} ms`);
    return spawn;
  }

  it('§10.12: each replica hands its driver the keys a node.add brings, once: the agent\'s, and its spare replicas\' with where they listen; the agents it knew keep their heartbeat record', () => {
    const c = makeCluster(2);
    c.run(200);
    const health = () => c.replicas.map((r) => r.status(c.now()).agents.filter((a) => a.id === 'a1' || a.id === 'a2').map((a) => a.health));
    // (Agents heartbeat the backups, which check them: PROTOCOL §8.4.)
    expect(health()).toEqual([['unknown', 'unknown'], ['healthy', 'healthy'], ['healthy', 'healthy']]);
    c.operate(addWith('a3', 'n3x', '10.0.0.9', [spare('r4', 7402, 4)]));
    for (let k = 0; k < 100; k++) {
      c.run(1);
      expect(health()).toEqual([['unknown', 'unknown'], ['healthy', 'healthy'], ['healthy', 'healthy']]);
    }
    expect(operate(c, addWith('a4', 'n4x', '10.0.0.10', [spare('r5', 7402, 5), spare('r6', 7401, 6)])).ok).toBe(true);
    for (const r of ['r1', 'r2', 'r3']) {
      expect(c.effects('keys', r).map((o) => o.effect.keys)).toEqual([
        [{ id: 'a3', publicKey: KEY }, { id: 'r4', publicKey: spare('r4', 0, 4).publicKey, replica: { node: 'n3x', address: '10.0.0.9', port: 7402 } }],
        [
          { id: 'a4', publicKey: KEY },
          { id: 'r5', publicKey: spare('r5', 0, 5).publicKey, replica: { node: 'n4x', address: '10.0.0.10', port: 7402 } },
          { id: 'r6', publicKey: spare('r6', 0, 6).publicKey, replica: { node: 'n4x', address: '10.0.0.10', port: 7401 } },
        ],
      ]);
    }
  });

  it('§10.12, §10.6: a replacement started from an added node\'s spare is heard like any member: healthy in status, and suspected when it falls silent', () => {
    const c = makeCluster(2);
    c.run(200);
    // Two nodes added one after the other; only the second one's agent starts, so the
    // replacement for r3 starts there, from its spare r5.
    expect(operate(c, addWith('a3', 'n3x', '10.0.0.9', [spare('r4', 7402, 4)])).ok).toBe(true);
    expect(operate(c, addWith('a4', 'n4x', '10.0.0.10', [spare('r5', 7402, 5)])).ok).toBe(true);
    c.addAgent('a4');
    c.run(500);
    c.down.add('r3');
    const spawn = replicaSpawnTo(c, 'a4', 5_000);
    const r5 = c.startReplica('r5', 1, { view: spawn.view, primary: spawn.primary, replicas: spawn.replicas });
    c.run(1_000);
    expect(r5.phase()).toBe('serving');
    for (const r of [c.replicas[0], c.replicas[1], r5]) {
      const st = r?.status(c.now());
      // `trine status` names the member an added node brought, with where it listens.
      expect(st?.added).toEqual([{ id: 'r5', node: 'n4x', address: '10.0.0.10', port: 7402, publicKey: '05'.repeat(32) }]);
      if (r !== r5) expect(st?.replicas.find((x) => x.id === 'r5')?.health).toBe('healthy');
    }
    c.down.add('r5');
    c.run(500);
    for (const r of ['r1', 'r2']) expect(c.effects('suspect', r).filter((o) => o.effect.target === 'r5' && o.effect.reason === 'heartbeat.missed')).toHaveLength(1);
  });
  it('§10.12: status lists the agents by id, those of added nodes among them wherever their ids sort', () => {
    const c = makeCluster(2);
    c.run(200);
    expect(operate(c, add('a0', 'n0x', '10.0.0.7')).ok).toBe(true);
    expect(operate(c, add('a3', 'n3x', '10.0.0.8')).ok).toBe(true);
    for (const r of c.replicas) {
      // The added nodes' agents are not started: known, not connected, never heard.
      const agents = r.status(c.now()).agents;
      expect(agents.map((a) => `${a.id}@${a.node} ${a.connected ? 'connected' : 'not connected'}`)).toEqual(['a0@n0x not connected', 'a1@n1 connected', 'a2@n2 connected', 'a3@n3x not connected']);
      expect(agents.filter((a) => a.health === 'unknown' && a.lastHeartbeatAgeMs === null).map((a) => a.id)).toEqual(expect.arrayContaining(['a0', 'a3']));
    }
  });

  it('§10.12, §10.6: the watchdog learns an added spare\'s key from the replicas once a replacement starts from it, and while it installs; with no added member, nothing', () => {
    const c = makeCluster(2);
    const keys = c.sent((from, to, i) => (to === 'scc' && i.type === 'replica.keys' ? `${from}:${i.replicas.map((x) => x.id).join(',')}` : null));
    c.run(200);
    expect(operate(c, addWith('a4', 'n4x', '10.0.0.10', [spare('r5', 7402, 5)])).ok).toBe(true);
    c.addAgent('a4');
    c.run(500);
    // r5 is not a member yet: cluster.json's members are all the watchdog needs to know.
    expect(keys).toEqual([]);
    c.down.add('r3');
    const spawn = replicaSpawnTo(c, 'a4', 5_000);
    // The replacement is under way and not started yet: the members already name it.
    c.run(2 * c.membership.timing.replicaHeartbeatMs);
    expect(new Set(keys)).toEqual(new Set(['r1:r5', 'r2:r5']));
    c.startReplica('r5', 1, { view: spawn.view, primary: spawn.primary, replicas: spawn.replicas });
    c.run(1_000);
    expect(new Set(keys)).toEqual(new Set(['r1:r5', 'r2:r5', 'r5:r5']));
  });
});

describe('node.remove (PROTOCOL §10.12)', () => {
  it('an idle node leaves at once: its agent is told to stop, the group forgets it, and a task no longer fits on it', () => {
    const c = makeCluster(4);
    c.run(200);
    expect(operate(c, remove('n4'))).toEqual({ ok: true, text: 'n4 removed' });
    expect(c.effects('deliver.command', 'a4').map((o) => o.effect.command).filter((x) => x.type === 'node.shutdown')).toEqual([{ type: 'node.shutdown', rsn: expect.any(Number), removed: true }]);
    expect(view(c).nodes.map((x) => x.node)).toEqual(['n1', 'n2', 'n3']);
    operate(c, submit(12));
    reportSpawns(c);
    expect(nodesOf(c, 't1')).toEqual(['n1', 'n2', 'n3']);
    // Its agent's later requests change nothing; its events name the removal.
    expect(c.replicas[0]?.status(c.now()).cluster.events.some((e) => e.text === 'node n4 removed (agent a4)')).toBe(true);
    expect(sameDigest(c)).toBe(true);
  });

  it('a busy node drains: nothing new is placed there, and it leaves once its task ends', () => {
    const c = makeCluster(4);
    c.run(200);
    operate(c, submit(16));
    const done = reportSpawns(c);
    expect(nodesOf(c, 't1')).toEqual(['n1', 'n2', 'n3', 'n4']);
    expect(operate(c, remove('n4'))).toEqual({ ok: true, text: 'n4 draining: waiting for t1 to finish' });
    expect(view(c).nodes.find((x) => x.node === 'n4')?.state).toBe('draining');
    expect(c.effects('deliver.command', 'a4').map((o) => o.effect.command.type)).not.toContain('node.shutdown');
    // The task ends: every process exits 0.
    for (const a of c.agents) {
      for (const key of done) {
        const [task, vpid] = key.split('/') as [string, string];
        const proc = view(c).tasks.find((t) => t.id === task)?.procs.find((p) => p.vpid === Number(vpid));
        if (proc?.node !== `n${a.id.slice(1)}`) continue;
        c.input(a.id, { type: 'request', nowMs: c.now(), request: { type: 'proc.report', reports: [{ task, vpid: Number(vpid), kind: 'terminatedNormally', pid: 1000 + Number(vpid), exitCode: 0, signal: null, reason: 'exited with code 0', endpoint: '' }] } });
      }
    }
    c.run(500);
    expect(view(c).tasks[0]?.state).toBe('terminatedNormally');
    expect(view(c).nodes.map((x) => x.node)).toEqual(['n1', 'n2', 'n3']);
    expect(c.effects('deliver.command', 'a4').map((o) => o.effect.command.type)).toContain('node.shutdown');
    operate(c, submit(13));
    expect(view(c).tasks.find((t) => t.id === 't2')?.state).toBe('waitForResource');
    expect(sameDigest(c)).toBe(true);
  });

  it('with kill, the tasks holding slots there are killed; refused: an unknown node, a node hosting a member of the group', () => {
    const c = makeCluster(4);
    c.run(200);
    operate(c, submit(16));
    reportSpawns(c);
    expect(operate(c, remove('n9')).text).toBe('cannot remove n9: no such node in the cluster (see `trine nodes`)');
    expect(operate(c, remove('n2')).text).toBe('cannot remove n2: it hosts replica r2 of the manager group');
    expect(operate(c, remove('n4', true))).toEqual({ ok: true, text: 'n4 draining: killing t1' });
    const terminates = c.effects('deliver.command').filter((o) => o.effect.command.type === 'proc.terminate').map((o) => o.proc);
    expect(new Set(terminates)).toEqual(new Set(['a1', 'a2', 'a3', 'a4']));
  });

  it('the state of a cluster with added and draining nodes transfers to a replacement byte for byte', () => {
    const c = makeCluster(4);
    c.run(200);
    operate(c, add('a5', 'n5'));
    operate(c, submit(16));
    reportSpawns(c);
    operate(c, remove('n4'));
    const s = c.replicas[0]?.state();
    if (s === undefined) throw new Error('no replica');
    expect(s.nodes.get('a4')?.draining).toBe(true);
    const decoded = decodeState(encodeState(s), { timers: s.timers, pool: s.pool });
    if (!decoded.ok) throw new Error(decoded.detail);
    expect(decoded.value.added).toEqual(s.added);
    expect(decoded.value.nodes).toEqual(s.nodes);
    expect(Buffer.from(encodeState(decoded.value)).equals(Buffer.from(encodeState(s)))).toBe(true);
  });
});

describe('the watchdog resets an added node at the address two replicas give (PROTOCOL §10.12)', () => {
  const membership: Membership = {
    cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [], agents: [{ id: 'a1', node: 'n1' }],
    scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
  };
  const keys = { signer: hmacSigner('scc'), verifier: hmacVerifier(['scc', 'op', 'r1', 'r2', 'r3', 'a1']) };
  const reset = (from: string, node: string, rsn: number, address: string): WatchdogInput =>
    ({ type: 'frame', nowMs: 1000, frame: { from, to: 'scc', items: [{ type: 'reset.node', node, rsn, address }] } });
  const orders = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'reset.node' ? [`${e.node}@${e.rsn}@${e.address}`] : []));

  it('two matching requests with its address reset it there; a listed node\'s address never comes from the request', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    expect(orders([...w.step(reset('r1', 'n5', 7, '10.0.0.5')), ...w.step(reset('r2', 'n5', 7, '10.0.0.5'))])).toEqual(['n5@7@10.0.0.5']);
    expect(orders([...w.step(reset('r1', 'n1', 8, '10.6.6.6')), ...w.step(reset('r2', 'n1', 8, '10.6.6.6'))])).toEqual(['n1@8@']);
  });

  it('no address, or two replicas that disagree on it, reset nothing; one replica\'s invented nodes hold at most MAX_ADDED_NODE_VOTES votes', () => {
    const w = createWatchdog({ id: 'scc', membership, inc: 1, ...keys });
    expect(orders([...w.step(reset('r1', 'n6', 7, '')), ...w.step(reset('r2', 'n6', 7, ''))])).toEqual([]);
    expect(orders([...w.step(reset('r1', 'n7', 7, '10.0.0.7')), ...w.step(reset('r2', 'n7', 7, '10.0.0.8'))])).toEqual([]);
    for (let i = 0; i < MAX_ADDED_NODE_VOTES + 10; i++) w.step(reset('r3', `x${i}`, 1, '10.1.1.1'));
    const ignored = w.status(1000).ignored;
    w.step(reset('r3', 'x99', 1, '10.1.1.1'));
    expect(w.status(1000).ignored).toBe(ignored + 1);
  });
});
