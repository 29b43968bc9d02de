// The watchdog's orders (src/core/watchdog-resets.ts; spec §1.6 rule 1, PROTOCOL §8.4, §10.11):
// the node resets two replicas command, and the operator's shutdown two replicas notice.
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect } from '../../../src/core/node.ts';
import { endShutdown, onResetRequest, onShutdownNotice, resetCluster } from '../../../src/core/watchdog-resets.ts';
import { createWatchdogState, MAX_ADDED_NODE_VOTES, MAX_RESET_HISTORY, SCC_SHUTDOWN_LINGER_MS } from '../../../src/core/watchdog-state.ts';
import type { Item } from '../../../src/core/wire/messages.ts';
import { FRESH, keys, membership, SILENCE, setup } from './watchdog-harness.ts';

describe('watchdog rule 1: node resets the group commands (spec §1.6, PROTOCOL §8.4)', () => {
  const ask = (node: string, rsn: number, address = ''): Item => ({ type: 'reset.node', node, rsn, address });
  const orders = (effects: CoreEffect[]) => effects.flatMap((e) => (e.type === 'reset.node' ? [`${e.node}@${e.rsn}`] : []));

  it('two distinct replicas asking for the same (node, RSN) reset the node, once; one replica asking twice, or re-sent requests, do not', () => {
    const g = setup();
    expect(orders(g.send('r4', 1000, ask('n1', 5)))).toEqual([]); // a spare votes like the initial three
    expect(orders(g.send('r4', 1010, ask('n1', 5)))).toEqual([]);
    const out = g.send('r2', 1020, ask('n1', 5));
    expect(out.filter((e) => e.type === 'reset.node')).toEqual([{ type: 'reset.node', node: 'n1', rsn: 5, address: '' }]);
    expect(out).toContainEqual({ type: 'log', level: 'warn', event: 'node.reset', fields: { node: 'n1', rsn: 5, requestedBy: ['r4', 'r2'] } });
    for (const r of ['r1', 'r2', 'r3', 'r4']) expect(orders(g.send(r, 1100, ask('n1', 5)))).toEqual([]); // re-sent with each heartbeat
    g.send('a1', 1200, ask('n1', 6));
    const s = g.w.status(1200);
    expect(s.resets).toEqual([{ node: 'n1', rsn: 5, requestedBy: ['r2', 'r4'], atMs: 1020 }]);
    expect(s.drops).toEqual({ NOT_A_MEMBER: 1 });
  });

  it('a replica\'s request at another RSN replaces its pending vote for that node: one replica holds one vote per node', () => {
    const g = setup();
    g.send('r1', 1000, ask('n1', 5));
    g.send('r1', 1010, ask('n1', 6));
    expect(orders(g.send('r2', 1020, ask('n1', 5)))).toEqual([]);
    expect(orders(g.send('r2', 1030, ask('n1', 6)))).toEqual(['n1@6']);
  });

  it('after a cluster reset only the restarted group orders node resets; its RSNs start again, and the old group\'s pending votes are gone', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    expect(orders([...g.send('r1', 500, ask('n1', 4)), ...g.send('r2', 500, ask('n1', 4))])).toEqual(['n1@4']);
    g.send('r1', 500, ask('n1', 7)); // pending when the cluster is reset
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    expect(orders([...g.send('r1', 3000, ask('n1', 8)), ...g.send('r2', 3000, ask('n1', 8))])).toEqual([]); // the old processes
    expect(g.w.status(3000).drops).toEqual({ UNEXPECTED: 2 });
    g.run(['r1', 'r2'], 4000, 4100, 0, 11); // restarted
    expect(orders(g.send('r2', 4100, ask('n1', 7)))).toEqual([]); // r1's vote was the old group's
    expect(orders([...g.send('r1', 4100, ask('n1', 4)), ...g.send('r2', 4100, ask('n1', 4))])).toEqual(['n1@4']); // a new reset at an old RSN
  });

  it('remembers the last MAX_RESET_HISTORY node resets: re-sent requests for them are ignored, and the status lists them', () => {
    const g = setup();
    const order = (rsn: number) => orders([...g.send('r1', 1000, ask('n1', rsn)), ...g.send('r2', 1000, ask('n1', rsn))]);
    for (let rsn = 1; rsn <= MAX_RESET_HISTORY; rsn++) order(rsn);
    expect(order(1)).toEqual([]); // still remembered
    expect(order(MAX_RESET_HISTORY + 1)).toEqual([`n1@${MAX_RESET_HISTORY + 1}`]);
    const resets = g.w.status(1000).resets;
    expect([resets.length, resets[0]?.rsn, resets.at(-1)?.rsn]).toEqual([MAX_RESET_HISTORY, 2, MAX_RESET_HISTORY + 1]);
    expect(order(1)).toEqual(['n1@1']); // forgotten: the bound is the bound
  });

  it('one replica holds at most MAX_ADDED_NODE_VOTES votes for nodes cluster.json lacks; the others\' votes do not count against it (PROTOCOL §10.12)', () => {
    const g = setup();
    for (let i = 1; i <= MAX_ADDED_NODE_VOTES; i++) g.send('r3', 1000, ask(`x${i}`, 1, '10.1.1.1'));
    expect(g.w.status(1000).ignored).toBe(0);
    const over = `x${MAX_ADDED_NODE_VOTES + 1}`;
    g.send('r3', 1000, ask(over, 1, '10.1.1.1'));
    expect(g.w.status(1000).drops).toEqual({ UNEXPECTED: 1 });
    expect(orders(g.send('r2', 1000, ask(over, 1, '10.1.1.1')))).toEqual([]); // r3's vote was not held
    expect(orders(g.send('r1', 1000, ask(over, 1, '10.1.1.1')))).toEqual([`${over}@1`]);
    expect(orders(g.send('r2', 1000, ask(`x${MAX_ADDED_NODE_VOTES}`, 1, '10.1.1.1')))).toEqual([`x${MAX_ADDED_NODE_VOTES}@1`]); // r3's last one was
  });

  it('a replica at MAX_ADDED_NODE_VOTES may still move its vote for one of those nodes to another RSN: that holds no more votes (PROTOCOL §10.12)', () => {
    const g = setup();
    for (let i = 1; i <= MAX_ADDED_NODE_VOTES; i++) g.send('r3', 1000, ask(`x${i}`, 1, '10.1.1.1'));
    g.send('r3', 1000, ask('x1', 2, '10.1.1.1'));
    expect(g.w.status(1000).drops).toEqual({});
    expect(orders(g.send('r1', 1000, ask('x1', 1, '10.1.1.1')))).toEqual([]); // r3's vote moved to RSN 2
    expect(orders(g.send('r1', 1000, ask('x1', 2, '10.1.1.1')))).toEqual(['x1@2']);
  });
});

describe('watchdog: the operator\'s shutdown (PROTOCOL §10.11)', () => {
  const notice = (rsn: number): Item => ({ type: 'shutdown.notice', rsn });
  const acks = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'send' && e.item.type === 'shutdown.ack' ? [`${e.to}:${e.item.rsn}`] : []));

  it('taken, it resets nothing even when self-diagnosis crosses the threshold, acknowledges only notices of its RSN, and exits SCC_SHUTDOWN_LINGER_MS later', () => {
    const g = setup();
    const { diagnosisThreshold: threshold, diagnosisTimeoutMs: timeout } = DEFAULT_TIMING;
    for (let k = 0; k < threshold / 2; k++) { // exactly the threshold: not more
      g.report('r1', k * timeout);
      g.report('r2', k * timeout + 1);
    }
    const at = (threshold / 2) * timeout;
    g.send('r1', at, notice(40));
    expect(acks(g.send('r2', at, notice(40)))).toEqual(['r1:40', 'r2:40']);
    g.report('r1', at + 1); // one more initiation: over the threshold, from two replicas
    expect(g.w.status(at + 1).diagnosisInWindow).toBe(threshold + 1);
    expect(g.clusterResets()).toEqual([]);
    expect(acks(g.send('r3', at + 2, notice(41)))).toEqual([]);
    expect(g.w.nextWakeMs()).toBe(at + SCC_SHUTDOWN_LINGER_MS);
    expect(g.stallUntil(at + SCC_SHUTDOWN_LINGER_MS - 1).filter((e) => e.type === 'shutdown')).toEqual([]);
    expect(g.stallUntil(at + SCC_SHUTDOWN_LINGER_MS).filter((e) => e.type === 'shutdown')).toEqual([{ type: 'shutdown', reason: 'shutdown at RSN 40, noticed by r1, r2' }]);
  });

  it('after a cluster reset only the restarted group\'s notices count', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    g.tick(g.deadline());
    expect(acks([...g.send('r1', 3000, notice(40)), ...g.send('r2', 3000, notice(40))])).toEqual([]); // the old processes
    expect(g.w.status(3000)).toMatchObject({ shutdown: null, drops: { UNEXPECTED: 2 } });
    g.run(['r1', 'r2'], 4000, 4100, 0, 11);
    expect(acks([...g.send('r1', 4100, notice(3)), ...g.send('r2', 4100, notice(3))])).toEqual(['r1:3', 'r2:3']);
  });

  it('a notice of the old group, sent before a cluster reset, is no vote after it: one restarted replica of the same RSN is not enough', () => {
    const g = setup();
    g.run(['r1', 'r2'], 0, 500);
    expect(acks(g.send('r2', 500, notice(40)))).toEqual([]); // one vote: not yet
    g.tick(g.deadline());
    expect(g.clusterResets()).toHaveLength(1);
    g.run(['r1', 'r2'], 4000, 4100, 0, 11);
    expect(acks(g.send('r1', 4100, notice(40)))).toEqual([]);
    expect(g.w.status(4100).shutdown).toBeNull();
    expect(acks(g.send('r2', 4100, notice(40)))).toEqual(['r1:40', 'r2:40']);
  });

  it('taken, it disarms rule 2: no silence deadline, and a heartbeat that makes no fresh pair does not arm it again', () => {
    const g = setup();
    g.beat('r1', 0);
    g.beat('r2', 0);
    expect(g.w.status(0)).toMatchObject({ armed: true, silenceDeadlineMs: FRESH + SILENCE });
    g.send('r1', 50, notice(40));
    g.send('r2', 50, notice(40));
    expect(g.w.status(50)).toMatchObject({ armed: false, silenceDeadlineMs: null });
    const late = g.beat('r3', 400); // r1 and r2 were fresh together only until FRESH
    expect(late.filter((e) => e.type === 'log' && e.event === 'watchdog.armed')).toEqual([]);
    expect(g.w.status(400)).toMatchObject({ armed: false, silenceDeadlineMs: null });
  });

  it('PROTOCOL §10.11: taken, nothing arms rule 2 again: two consistent heartbeats of the group winding down leave it disarmed, with no silence deadline', () => {
    const g = setup();
    g.beat('r1', 0);
    g.beat('r2', 0);
    g.send('r1', 50, notice(40));
    g.send('r2', 50, notice(40));
    const again = [...g.beat('r1', 100), ...g.beat('r2', 100)]; // both fresh and alike again
    expect(again.filter((e) => e.type === 'log' && e.event === 'watchdog.armed')).toEqual([]);
    expect(g.w.status(100)).toMatchObject({ armed: false, silenceDeadlineMs: null });
    expect(g.w.nextWakeMs()).toBe(50 + SCC_SHUTDOWN_LINGER_MS);
  });
});

describe('watchdog-resets stepped by hand over one WatchdogState', () => {
  const fresh = () => createWatchdogState({ id: 'scc', membership, inc: 1, ...keys });

  it('rule 1: a vote is held per (node, RSN); the second replica\'s orders the reset and the key is remembered', () => {
    const s = fresh();
    const out: CoreEffect[] = [];
    onResetRequest(s, 'r1', 100, { type: 'reset.node', node: 'n1', rsn: 5, address: '' }, out);
    expect([...s.resetVotes]).toEqual([['n1@5@', new Set(['r1'])]]);
    expect(out).toEqual([]);
    onResetRequest(s, 'r2', 110, { type: 'reset.node', node: 'n1', rsn: 5, address: '' }, out);
    expect(s.resetVotes.size).toBe(0);
    expect([...s.ordered]).toEqual(['n1@5@']);
    expect(out[0]).toEqual({ type: 'reset.node', node: 'n1', rsn: 5, address: '' });
    expect(s.resets).toEqual([{ node: 'n1', rsn: 5, requestedBy: ['r1', 'r2'], atMs: 110 }]);
  });

  it('the shutdown: two matching notices take it and disarm rule 2; it exits once, SCC_SHUTDOWN_LINGER_MS later; no cluster reset after it', () => {
    const s = fresh();
    const out: CoreEffect[] = [];
    s.armed = true;
    onShutdownNotice(s, 'r1', 100, { type: 'shutdown.notice', rsn: 7 }, out);
    expect(s.shutDown).toBeNull();
    onShutdownNotice(s, 'r2', 120, { type: 'shutdown.notice', rsn: 7 }, out);
    expect(s.shutDown).toEqual({ rsn: 7, by: ['r1', 'r2'], atMs: 120, exited: false });
    expect(s.armed).toBe(false);
    resetCluster(s, 130, 'heartbeats', 'test', out);
    expect(s.clusterResetCount).toBe(0);
    endShutdown(s, 120 + SCC_SHUTDOWN_LINGER_MS - 1, out);
    expect(s.shutDown?.exited).toBe(false);
    endShutdown(s, 120 + SCC_SHUTDOWN_LINGER_MS, out);
    endShutdown(s, 120 + SCC_SHUTDOWN_LINGER_MS + 1, out);
    expect(out.filter((e) => e.type === 'shutdown')).toHaveLength(1);
  });

  it('a cluster reset clears the votes, the rule-3 count and the kept journals, and hands the journals over', () => {
    const s = fresh();
    const out: CoreEffect[] = [];
    onResetRequest(s, 'r1', 100, { type: 'reset.node', node: 'n1', rsn: 5, address: '' }, out);
    s.counted.push({ atMs: 100, from: 'r1' });
    s.journalsKept.set('r1', { inc: 10, rsn: 3, tasks: 0, data: new Uint8Array() });
    resetCluster(s, 200, 'diagnosis', 'test', out);
    expect(s.resetVotes.size).toBe(0);
    expect(s.counted).toEqual([]);
    expect(s.journalsKept.size).toBe(0);
    expect(s.clusterResets).toEqual([{ atMs: 200, rule: 'diagnosis', reason: 'test' }]);
    const order = out.find((e) => e.type === 'reset.cluster');
    expect(order?.type === 'reset.cluster' && order.journals.map((j) => j.source)).toEqual(["r1's journal kept by the watchdog (inc 10, rsn 3)"]);
  });
});
