// Tasks through the whole group layer on the in-memory cluster (docs/PROTOCOL.md §8): operator
// requests ordered and answered by f+1 replicas (§8.1), commands delivered on 2 matching copies,
// the ordered task clock (§8.3), and node failure by probe from two replicas (§8.4; spec §1.3,
// §1.7 items 19–20, §9.2 A11).
import { describe, expect, it } from 'vitest';
import type { ProcessId } from '../../../src/core/ports.ts';
import type { OperatorRequest, ProcReport } from '../../../src/core/wire/messages.ts';
import { makeCluster } from './harness.ts';

const nonce = (n: number) => n.toString(16).padStart(32, '0');
const submit = (n: number, size: number, file = '/bin/true'): OperatorRequest => ({
  type: 'task.submit', nonce: nonce(n), name: `job${n}`, size, file, args: [], cwd: '/', env: [], mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(n & 0xff),
});

function report(c: ReturnType<typeof makeCluster>, agent: ProcessId, r: Omit<ProcReport, 'exitCode' | 'signal' | 'pid' | 'reason' | 'endpoint'> & Partial<ProcReport>): void {
  c.input(agent, {
    type: 'request', nowMs: c.now(),
    request: { type: 'proc.report', reports: [{ pid: 0, exitCode: null, signal: null, reason: '', endpoint: '', ...r }] },
  });
}

const spawns = (c: ReturnType<typeof makeCluster>, agent: ProcessId) =>
  c.effects('deliver.command', agent).map((o) => o.effect.command).filter((x) => x.type === 'proc.spawn');

/** Distinct digests among replicas at the same RSN: 1 when they agree. Ticks may be in flight
 *  at the moment of the check, so replicas at different RSNs are compared separately. */
function digests(c: ReturnType<typeof makeCluster>): Set<string> {
  const byRsn = new Map<number, Set<string>>();
  for (const r of c.replicas) byRsn.set(r.rsn(), (byRsn.get(r.rsn()) ?? new Set()).add(r.digestHex()));
  return new Set([...byRsn.values()].map((d) => (d.size === 1 ? 'agree' : [...d].join(','))));
}

describe('operator requests in the total order (PROTOCOL §8.1)', () => {
  it('a submit is ordered once, answered identically by all three replicas, and its spawns reach the agents on 2 matching copies', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(1, 2));
    c.run(100);
    expect(c.opReplies.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(new Set(c.opReplies.map((r) => `${r.rsn}|${r.ok}|${r.text}`)).size).toBe(1);
    expect(c.opReplies[0]).toMatchObject({ ok: true, text: 't1' });
    const all = [...spawns(c, 'a1'), ...spawns(c, 'a2')];
    expect(all.map((s) => (s.type === 'proc.spawn' ? s.vpid : -1)).sort()).toEqual([0, 1]);
    expect(digests(c).size).toBe(1);
  });

  it('a retried nonce is answered again and never applied twice', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(7, 1));
    c.run(50);
    c.operate(submit(7, 1));
    c.run(50);
    expect(c.opReplies).toHaveLength(6);
    expect(new Set(c.opReplies.map((r) => `${r.rsn}|${r.text}`)).size).toBe(1);
    expect(c.replicas[0]?.clusterView().tasks).toHaveLength(1);
  });

  it('a request that reaches only the backups is forwarded to the primary and ordered', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(2, 1), ['r2', 'r3']);
    c.run(100);
    expect(c.opReplies.filter((r) => r.ok && r.text === 't1').map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
  });

  it('an agent may not submit tasks: its request is dropped before ordering', () => {
    const c = makeCluster(2);
    c.run(100);
    c.input('a1', { type: 'request', nowMs: c.now(), request: submit(3, 1) });
    c.run(200);
    for (const r of c.replicas) expect(r.clusterView().tasks).toHaveLength(0);
  });

  it('kill of an unknown task is refused with a reason; of a running one, ends it "killed by operator"', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate({ type: 'task.kill', nonce: nonce(9), task: 't9' });
    c.run(50);
    expect(c.opReplies[0]).toMatchObject({ ok: false });
    expect(c.opReplies[0]?.text).toMatch(/t9/);
    c.operate(submit(10, 1));
    c.run(50);
    const [s] = [...spawns(c, 'a1'), ...spawns(c, 'a2')];
    const agent = spawns(c, 'a1').length > 0 ? 'a1' : 'a2';
    report(c, agent, { task: 't1', vpid: 0, kind: 'spawnSucceeded', pid: 4242 });
    c.run(50);
    expect(s).toBeDefined();
    c.operate({ type: 'task.kill', nonce: nonce(11), task: 't1' });
    c.run(50);
    const terminate = c.effects('deliver.command', agent).map((o) => o.effect.command).find((x) => x.type === 'proc.terminate');
    expect(terminate).toMatchObject({ task: 't1', vpid: 0 });
    report(c, agent, { task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 4242, signal: 'SIGTERM', reason: 'killed' });
    c.run(50);
    const t1 = c.replicas[1]?.clusterView().tasks[0];
    expect(t1).toMatchObject({ id: 't1', state: 'terminatedAbnormally', outcome: 'abnormal', reason: 'killed by operator' });
    expect(digests(c).size).toBe(1);
  });
});

describe('the ordered task clock (PROTOCOL §8.3)', () => {
  it('Start-TO counts ordered ticks: a process that never reports is retried, and an idle cluster orders no ticks', () => {
    const c = makeCluster(2);
    c.run(100);
    const idle = c.replicas[0]?.rsn() ?? 0;
    c.run(500);
    expect(c.replicas[0]?.rsn()).toBe(idle);
    c.operate(submit(1, 1));
    // Start-TO is 20 s by default: the first attempt times out, the process is terminated (the
    // agent answers as FsmAgentProc does for one that never started: spawn failed), and a
    // second spawn is sent.
    c.run(20_200);
    const agent = spawns(c, 'a1').length > 0 ? 'a1' : 'a2';
    expect(c.effects('deliver.command', agent).map((o) => o.effect.command.type)).toContain('proc.terminate');
    report(c, agent, { task: 't1', vpid: 0, kind: 'spawnFailed', reason: 'spawn failed: terminated before it started' });
    c.run(200);
    const sent = [...spawns(c, 'a1'), ...spawns(c, 'a2')];
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(c.replicas[0]?.clusterView().tick).toBeGreaterThan(390);
    expect(digests(c).size).toBe(1);
  });
});

describe('node failure (spec §1.3, PROTOCOL §8.4)', () => {
  it('A11: an agent that goes silent is probed and declared failed; its processes die once; each replica asks the watchdog to reset the node', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(1, 2));
    c.run(50);
    for (const a of ['a1', 'a2']) for (const s of spawns(c, a)) if (s.type === 'proc.spawn') report(c, a, { task: 't1', vpid: s.vpid, kind: 'spawnSucceeded', pid: 100 + s.vpid });
    c.run(50);
    expect(c.replicas[0]?.clusterView().tasks[0]?.state).toBe('running');
    const deadAgent = spawns(c, 'a2').length > 0 ? 'a2' : 'a1';
    const node = deadAgent === 'a1' ? 'n1' : 'n2';
    const resets: ProcessId[] = [];
    c.filters.push((from, to, item) => {
      if (to === 'scc' && item.type === 'reset.node' && item.node === node && !resets.includes(from)) resets.push(from);
      return item;
    });
    const at = c.now();
    c.down.add(deadAgent);
    c.run(1_000);
    const failed = c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed');
    expect(failed.map((o) => o.proc).sort()).toEqual(['r1', 'r2', 'r3']);
    const declaredAfter = Math.max(...failed.map((o) => o.at)) - at;
    // Two missed checks (≤ 3 × 110 ms after the last heartbeat) plus the 120 ms probe.
    expect(declaredAfter).toBeLessThan(600);
    const view = c.replicas[2]?.clusterView();
    expect(view?.nodes.find((n) => n.node === node)?.state).toBe('failed');
    const procs = view?.tasks[0]?.procs.filter((p) => p.node === node) ?? [];
    expect(procs.length).toBeGreaterThan(0);
    for (const p of procs) expect(p).toMatchObject({ state: 'terminatedAbnormally', reason: 'node lost' });
    // The task stays running (T7) and its GSIG_NTF_DIED is in the journal exactly once per process.
    expect(view?.tasks[0]?.state).toBe('running');
    for (const p of procs) expect(view?.events.filter((e) => e.text === `t1 GSIG_NTF_DIED(${p.vpid})`)).toHaveLength(1);
    expect(resets.sort()).toEqual(['r1', 'r2', 'r3']);
    expect(digests(c).size).toBe(1);
  });

  it('an agent whose heartbeats are lost but who answers the probe is not declared failed', () => {
    const c = makeCluster(2);
    c.run(100);
    c.filters.push((from, _to, item) => (from === 'a1' && item.type === 'hb' ? null : item));
    c.run(1_500);
    expect(c.effects('log').some((o) => o.effect.event === 'node.probe')).toBe(true);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toHaveLength(0);
  });

  it('one backup alone cannot have a node declared failed: the primary probes and gets an answer', () => {
    const c = makeCluster(2);
    c.run(100);
    // r2 cannot hear a1 at all (a one-replica view of a failure).
    c.filters.push((from, to, item) => (from === 'a1' && to === 'r2' ? null : item));
    c.run(1_500);
    expect(c.effects('log', 'r1').some((o) => o.effect.event === 'node.probe')).toBe(true);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toHaveLength(0);
  });

  it('an old unanswered probe at the primary does not stand as a vote: one backup later alone cannot get a healthy node declared failed', () => {
    const c = makeCluster(2);
    c.run(100);
    // a1's heartbeats to r2 are lost for a while, and the primary's first probe of a1 is lost.
    let dropProbe = true;
    let hbToR2 = false;
    c.filters.push((from, to, item) => {
      if (from === 'a1' && to === 'r2' && item.type === 'hb' && !hbToR2) return null;
      if (from === 'r1' && to === 'a1' && item.type === 'probe' && dropProbe) {
        dropProbe = false;
        return null;
      }
      return item;
    });
    c.run(600);
    hbToR2 = true;
    c.run(5_000);
    // Long after, r3 alone stops hearing a1, which answers every probe.
    const later = c.now();
    c.filters.push((from, to, item) => (from === 'a1' && to === 'r3' ? null : item));
    c.run(1_500);
    expect(c.effects('log', 'r1').filter((o) => o.effect.event === 'node.probe' && o.at > later).length).toBeGreaterThan(0);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toHaveLength(0);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.agent === 'a1')?.state).toBe('up');
  });

  it('a node that dies after answering an earlier probe (its heartbeats already lost) is still declared failed', () => {
    const c = makeCluster(2);
    c.run(100);
    c.filters.push((from, _to, item) => (from === 'a1' && item.type === 'hb' ? null : item));
    c.run(1_500);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed')).toHaveLength(0);
    c.down.add('a1');
    c.run(2_000);
    expect(c.effects('deliver.input').filter((o) => o.effect.input.type === 'node.failed').map((o) => o.proc).sort()).toEqual(['r1', 'r2', 'r3']);
  });

  it('a failed node comes back with a new agent incarnation and takes work again', () => {
    const c = makeCluster(2);
    c.run(100);
    c.down.add('a2');
    c.run(1_000);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.agent === 'a2')?.state).toBe('failed');
    c.down.delete('a2');
    c.restartAgent('a2', 2);
    c.run(300);
    expect(c.replicas[0]?.clusterView().nodes.find((n) => n.agent === 'a2')).toMatchObject({ state: 'up', inc: 2 });
    c.operate(submit(5, 8));
    c.run(100);
    expect(spawns(c, 'a2').length).toBe(4);
  });
});
