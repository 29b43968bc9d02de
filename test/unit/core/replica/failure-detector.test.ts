// Unit tests of a replica's failure detector (src/core/replica/failure-detector.ts; spec §1.3,
// docs/PROTOCOL.md §6, §6.1, §8.3, §8.4). One replica's record, its verbs called by hand at exact
// times; each row asserts what a peer or an operator would observe: the sends, the suspicions,
// the logs, and the health `trine status` reports.
import { describe, expect, it } from 'vitest';
import { TICK_RATE_WINDOW_MS } from '../../../../src/core/constants.ts';
import type { CoreEffect } from '../../../../src/core/node.ts';
import {
  afterLocalPause, checkTickRate, detectorNextWakeMs, detectorTimers, onHeartbeat, onNodeSuspect, onProbeReply, probeTimers,
} from '../../../../src/core/replica/failure-detector.ts';
import { status } from '../../../../src/core/replica/report.ts';
import type { Replica } from '../../../../src/core/replica/record.ts';
import { heartbeat, items, joined, logs, ptps, started, suspicions, T } from './fixtures.ts';

/** Health as `trine status` shows it, of a replica or an agent. */
const healthOf = (r: Replica, id: string, nowMs = 0) =>
  [...status(r, nowMs).replicas, ...status(r, nowMs).agents].find((p) => p.id === id)?.health;
/** The detector's periodic work at `nowMs`, its effects. */
function timersAt(r: Replica, nowMs: number): CoreEffect[] {
  const out: CoreEffect[] = [];
  detectorTimers(r, nowMs, out);
  return out;
}
const probesSent = (out: CoreEffect[]) => items(out, 'probe').map((p) => [p.to, p.item.nonce]);
/** The primary's order of a4's failure at RSN 2, as a backup receives it (PROTOCOL §8.4). */
const failedOrder = { type: 'wrapper.input', rsn: 2, input: { type: 'node.failed', agent: 'a4', inc: 1 } };

describe('heartbeats (PROTOCOL §6)', () => {
  it('§6: a heartbeat whose (inc, counter) does not exceed the last accepted is refused (REPLAYED) and refreshes nothing', () => {
    const r = started('r2');
    expect(heartbeat(r, 'r1', 5, 10)).toBe(true);
    expect(heartbeat(r, 'r1', 5, 40)).toBe(false); // replayed
    expect(heartbeat(r, 'r1', 4, 40)).toBe(false); // stale counter
    expect(heartbeat(r, 'r1', 9, 40, [], 0)).toBe(false); // an older incarnation, whatever its counter
    expect(status(r, 50).replicas.find((p) => p.id === 'r1')?.lastHeartbeatAgeMs).toBe(40);
    expect(heartbeat(r, 'r1', 1, 45, [], 2)).toBe(true); // a new incarnation counts from 1
    expect(status(r, 50).replicas.find((p) => p.id === 'r1')?.lastHeartbeatAgeMs).toBe(5);
  });

  it('§6: a heartbeat from nobody who heartbeats this replica, or of the wrong kind, is refused and heard from nobody', () => {
    const r = started('r2');
    expect(heartbeat(r, 'zz', 1, 10)).toBe(false); // unknown
    expect(heartbeat(r, 'r2', 1, 10)).toBe(false); // itself
    const replicaInfo = { type: 'replica' as const, role: 'backup' as const, rsn: 0, gssn: 0, digest: new Uint8Array(32), view: 0, ckptRsn: 0, ckptDigest: new Uint8Array(32) };
    expect(onHeartbeat(r, 'a1', { type: 'hb', inc: 1, counter: 1, info: replicaInfo }, 10, [])).toBe(false);
    expect(onHeartbeat(r, 'r1', { type: 'hb', inc: 1, counter: 1, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } }, 10, [])).toBe(false);
    expect(healthOf(r, 'a1')).toBe('unknown');
    expect(healthOf(r, 'r1')).toBe('unknown');
  });

  it('§6, spec §1.3: health goes healthy → late → silent across replica checks, one suspicion per silence, healthy again on the next heartbeat', () => {
    const r = started('r2');
    expect(healthOf(r, 'r1')).toBe('unknown');
    heartbeat(r, 'r1', 1, 10);
    expect(healthOf(r, 'r1')).toBe('healthy');
    expect(suspicions(timersAt(r, T.replicaCheckMs))).toEqual([]);
    expect(healthOf(r, 'r1')).toBe('healthy');
    const late = timersAt(r, 2 * T.replicaCheckMs);
    expect(healthOf(r, 'r1')).toBe('late');
    expect(suspicions(late)).toEqual([['r1', 'heartbeat.missed', 'no heartbeat from r1 for 290 ms']]);
    expect(logs(late, 'replica.suspect')).toEqual([{ target: 'r1', reason: 'heartbeat.missed', detail: 'no heartbeat from r1 for 290 ms', rsn: 0 }]);
    // Self-diagnosis starts (PROTOCOL §10.2 silent): the watchdog is told, the replica probed.
    expect(items(late, 'diag.report').map((d) => [d.to, d.item.reason, d.item.target])).toEqual([['scc', 'silent', 'r1']]);
    expect(probesSent(late)).toEqual([['r1', 0]]);
    expect(suspicions(timersAt(r, 3 * T.replicaCheckMs))).toEqual([]);
    expect(healthOf(r, 'r1')).toBe('silent');
    expect(suspicions(timersAt(r, 4 * T.replicaCheckMs))).toEqual([]);
    expect(r.suspicions).toBe(1);
    heartbeat(r, 'r1', 2, 610);
    expect(healthOf(r, 'r1')).toBe('healthy');
    expect(suspicions(timersAt(r, 5 * T.replicaCheckMs))).toEqual([]);
    // A new silence is a new suspicion.
    expect(suspicions(timersAt(r, 6 * T.replicaCheckMs))).toEqual([['r1', 'heartbeat.missed', 'no heartbeat from r1 for 290 ms']]);
  });

  it('§6: a replica never heard is still starting: it is not suspected, and its health stays unknown', () => {
    const r = started('r2');
    const out: CoreEffect[] = [];
    for (let t = T.replicaCheckMs; t <= 10 * T.replicaCheckMs; t += T.replicaCheckMs) out.push(...timersAt(r, t));
    expect(suspicions(out)).toEqual([]);
    expect(healthOf(r, 'r1')).toBe('unknown');
    expect(healthOf(r, 'r3')).toBe('unknown');
  });

  it('§6: the replica heartbeats every other member and the watchdog every replicaHeartbeatMs, counter rising', () => {
    const r = started('r2');
    const hbs = (out: CoreEffect[]) => items(out, 'hb').map((h) => [h.to, h.item.counter]);
    expect(hbs(timersAt(r, 0))).toEqual([['r1', 1], ['r3', 1], ['scc', 1]]);
    expect(hbs(timersAt(r, T.replicaHeartbeatMs - 1))).toEqual([]);
    expect(hbs(timersAt(r, T.replicaHeartbeatMs))).toEqual([['r1', 2], ['r3', 2], ['scc', 2]]);
    expect(detectorNextWakeMs(r.detector)).toBe(T.agentCheckMs); // a backup's first agent check
  });
});

describe('agent checks and node suspicion, a backup\'s side (spec §1.3, PROTOCOL §8.4)', () => {
  /** Backup r2 with sessions to the primary and the other backup, a1 and a4 joined at 0. */
  function backup(): Replica {
    const r = started('r2', ['r1', 'r3']);
    joined(r, 'a1', 0);
    joined(r, 'a4', 0);
    return r;
  }

  it('§8.4 (1): an agent silent two checks running is probed, and the primary told node.suspect; health late, then silent', () => {
    const r = backup();
    heartbeat(r, 'a4', 1, 10);
    expect(timersAt(r, T.agentCheckMs).filter((e) => e.type !== 'send')).toEqual([]);
    expect(healthOf(r, 'a4')).toBe('healthy');
    const once = timersAt(r, 2 * T.agentCheckMs);
    expect(healthOf(r, 'a4')).toBe('late');
    expect(probesSent(once)).toEqual([]);
    const twice = timersAt(r, 3 * T.agentCheckMs);
    expect(healthOf(r, 'a4')).toBe('silent');
    expect(logs(twice, 'agent.silent')).toEqual([{ agent: 'a4', missedChecks: 2 }]);
    expect(probesSent(twice)).toEqual([['a4', 1]]);
    expect(logs(twice, 'node.probe')).toEqual([{ agent: 'a4', inc: 1, nonce: 1 }]);
    expect(ptps(twice)).toEqual([{ to: 'r1', body: { type: 'node.suspect', agent: 'a4', inc: 1, unreachable: false } }]);
  });

  it('§8.4 (2): the backup\'s probe unanswered for probeTimeoutMs: node.unreachable, and node.suspect unreachable to the primary', () => {
    const r = backup();
    heartbeat(r, 'a4', 1, 10);
    for (const t of [1, 2, 3]) timersAt(r, t * T.agentCheckMs);
    const deadline = 3 * T.agentCheckMs + T.probeTimeoutMs;
    const before: CoreEffect[] = [];
    probeTimers(r, deadline - 1, before);
    expect(before).toEqual([]);
    const out: CoreEffect[] = [];
    probeTimers(r, deadline, out);
    expect(logs(out, 'node.unreachable')).toEqual([{ agent: 'a4', inc: 1 }]);
    expect(ptps(out)).toEqual([{ to: 'r1', body: { type: 'node.suspect', agent: 'a4', inc: 1, unreachable: true } }]);
  });

  it('§8.4 (2): while the silence lasts, the backup probes again at the first check after its last probe went stale', () => {
    const r = backup();
    heartbeat(r, 'a4', 1, 10);
    for (const t of [1, 2, 3]) timersAt(r, t * T.agentCheckMs); // probe 1 at 330
    const expiredAt = 3 * T.agentCheckMs + T.probeTimeoutMs;
    probeTimers(r, expiredAt, []);
    expect(probesSent(timersAt(r, 4 * T.agentCheckMs))).toEqual([]); // running
    expect(probesSent(timersAt(r, 5 * T.agentCheckMs))).toEqual([]); // expired 100 ms ago: not stale yet
    const again = timersAt(r, 6 * T.agentCheckMs); // expired 210 ms ago
    expect(probesSent(again)).toEqual([['a4', 2]]);
    expect(ptps(again)).toEqual([{ to: 'r1', body: { type: 'node.suspect', agent: 'a4', inc: 1, unreachable: false } }]);
  });

  it('spec §1.3: the probe of an agent whose node\'s replica is overdue is held back until that replica is heard again', () => {
    const r = backup();
    heartbeat(r, 'a1', 1, 5); // a1 shares n1 with r1
    heartbeat(r, 'a4', 1, 5);
    for (const t of [1, 2]) timersAt(r, t * T.agentCheckMs);
    heartbeat(r, 'r1', 1, 240); // heard by the 300 ms check; overdue (> 75 ms) at the 330 ms agent check
    expect(suspicions(timersAt(r, 2 * T.replicaCheckMs))).toEqual([]);
    const held = timersAt(r, 3 * T.agentCheckMs);
    expect(probesSent(held)).toEqual([['a4', 1]]);
    expect(healthOf(r, 'a1')).toBe('silent'); // its checks still count
    heartbeat(r, 'r1', 2, 4 * T.agentCheckMs - 40);
    const after = timersAt(r, 4 * T.agentCheckMs);
    expect(probesSent(after)).toEqual([['a1', 2]]);
    expect(ptps(after)).toEqual([{ to: 'r1', body: { type: 'node.suspect', agent: 'a1', inc: 1, unreachable: false } }]);
  });

  it('§6, spec §1.3: while self-diagnosis of a silent replica runs, agent checks are ignored: no probe', () => {
    const r = backup();
    heartbeat(r, 'r3', 1, 5);
    heartbeat(r, 'a4', 1, 5);
    const out: CoreEffect[] = [];
    for (let t = 10; t <= 10 * T.agentCheckMs; t += 10) out.push(...timersAt(r, t));
    expect(suspicions(out)).toEqual([['r3', 'heartbeat.missed', 'no heartbeat from r3 for 295 ms']]);
    expect(probesSent(out)).toEqual([['r3', 0]]); // the silence diagnosis's probe, none of a4
    expect(healthOf(r, 'a4')).toBe('late'); // one check missed before the diagnosis began; no more counted
  });
});

describe('declaring a node failed, the primary\'s side (PROTOCOL §8.4)', () => {
  /** Primary r1 with sessions to both backups, a4 joined at RSN 1. */
  function primary(): { r: Replica; suspect: (from: string, unreachable: boolean, nowMs: number) => CoreEffect[] } {
    const r = started('r1', ['r2', 'r3']);
    joined(r, 'a4', 0);
    const suspect = (from: string, unreachable: boolean, nowMs: number) => {
      const out: CoreEffect[] = [];
      onNodeSuspect(r, from, 'a4', 1, unreachable, nowMs, out);
      return out;
    };
    return { r, suspect };
  }
  const probeAt = (r: Replica, nowMs: number) => {
    const out: CoreEffect[] = [];
    probeTimers(r, nowMs, out);
    return out;
  };

  it('§8.4 (3): node.failed is ordered only when the primary\'s own probe expired AND a backup found the node unreachable', () => {
    const { r, suspect } = primary();
    const first = suspect('r2', false, 100);
    expect(probesSent(first)).toEqual([['a4', 1]]);
    expect(logs(first, 'node.probe')).toEqual([{ agent: 'a4', inc: 1, nonce: 1 }]);
    expect(probeAt(r, 100 + T.probeTimeoutMs)).toEqual([]); // its own probe alone: nothing
    expect(r.state.rsn).toBe(1);
    const declared = suspect('r2', true, 100 + T.probeTimeoutMs + 10);
    expect(ptps(declared)).toEqual([{ to: 'r2', body: failedOrder }, { to: 'r3', body: failedOrder }]);
    expect(declared.filter((e) => e.type === 'deliver.input')).toEqual([{ type: 'deliver.input', rsn: 2, input: failedOrder.input }]);
    expect(items(declared, 'reset.node').map((x) => [x.to, x.item.node, x.item.rsn])).toEqual([['scc', 'n4', 2]]);
    expect(r.state.nodes.get('a4')?.failed).toBe(true);
    expect(ptps(suspect('r3', true, 300))).toEqual([]); // once
  });

  it('§8.4 (3): one replica alone cannot declare: a backup\'s "unreachable" while the primary\'s probe still runs orders nothing', () => {
    const { r, suspect } = primary();
    expect(probesSent(suspect('r2', true, 100))).toEqual([['a4', 1]]);
    expect(ptps(suspect('r3', true, 150))).toEqual([]);
    expect(r.state.rsn).toBe(1);
    expect(ptps(probeAt(r, 100 + T.probeTimeoutMs))).toEqual([{ to: 'r2', body: failedOrder }, { to: 'r3', body: failedOrder }]);
  });

  it('§8.4: node.suspect from anyone but a backup, or to a backup, is dropped NOT_A_MEMBER; one of another incarnation is ignored', () => {
    const { r, suspect } = primary();
    expect(suspect('r1', true, 100)).toEqual([]);
    expect(suspect('a1', true, 100)).toEqual([]);
    expect(status(r, 100).drops).toEqual({ NOT_A_MEMBER: 2 });
    const out: CoreEffect[] = [];
    onNodeSuspect(r, 'r2', 'a4', 2, true, 100, out);
    expect(out).toEqual([]);
    const b = started('r2', ['r1', 'r3']);
    onNodeSuspect(b, 'r3', 'a4', 0, true, 100, out);
    expect(out).toEqual([]);
    expect(status(b, 100).drops).toEqual({ NOT_A_MEMBER: 1 });
  });

  it('§8.4 (2): a probe reply with the probe\'s nonce ends the suspicion; one with another nonce does not', () => {
    const answered = (nonce: number) => {
      const { r, suspect } = primary();
      suspect('r2', false, 100);
      onProbeReply(r, 'a4', nonce);
      probeAt(r, 100 + T.probeTimeoutMs);
      return suspect('r2', true, 230);
    };
    expect(ptps(answered(7))).toEqual([{ to: 'r2', body: failedOrder }, { to: 'r3', body: failedOrder }]);
    const again = answered(1);
    expect(ptps(again)).toEqual([]);
    expect(probesSent(again)).toEqual([['a4', 2]]); // a new probe, which must expire first
  });

  it('§8.4 (2): an agent heartbeat ends the suspicion as a probe reply does', () => {
    const { r, suspect } = primary();
    suspect('r2', false, 100);
    heartbeat(r, 'a4', 1, 150);
    expect(probeAt(r, 100 + T.probeTimeoutMs)).toEqual([]);
    expect(ptps(suspect('r2', true, 230))).toEqual([]);
    expect(r.state.rsn).toBe(1);
  });

  it('§8.4 (3): the primary\'s probe expired more than probeTimeoutMs ago is stale: re-armed, not counted', () => {
    const expired = 100 + T.probeTimeoutMs;
    const fresh = primary();
    fresh.suspect('r2', false, 100);
    probeAt(fresh.r, expired);
    expect(ptps(fresh.suspect('r2', true, expired + T.probeTimeoutMs))).toEqual([{ to: 'r2', body: failedOrder }, { to: 'r3', body: failedOrder }]);
    const stale = primary();
    stale.suspect('r2', false, 100);
    probeAt(stale.r, expired);
    const rearmed = stale.suspect('r2', true, expired + T.probeTimeoutMs + 1);
    expect(ptps(rearmed)).toEqual([]);
    expect(probesSent(rearmed)).toEqual([['a4', 2]]);
    expect(ptps(probeAt(stale.r, expired + 2 * T.probeTimeoutMs + 1))).toEqual([{ to: 'r2', body: failedOrder }, { to: 'r3', body: failedOrder }]);
  });
});

describe('the task clock\'s rate (PROTOCOL §8.3)', () => {
  const limit = 2 * Math.ceil(TICK_RATE_WINDOW_MS / T.taskTickMs) + 10;

  it('§8.3: more than twice the nominal ticks plus 10 in a second is suspected (clock.rate, accusing the primary) once per window', () => {
    const r = started('r2', ['r1', 'r3']);
    const at: number[] = [];
    for (let t = 0; t <= 3 * TICK_RATE_WINDOW_MS; t += 10) {
      const out: CoreEffect[] = [];
      checkTickRate(r, t, out);
      if (suspicions(out).length > 0) at.push(t);
      if (t === 10 * limit) {
        expect(suspicions(out)).toEqual([['r1', 'clock.rate', `${limit + 1} ticks in 1000 ms (taskTickMs 50)`]]);
        expect(logs(out, 'replica.accuse')).toEqual([{ target: 'r1', reason: 'clock.rate', detail: `${limit + 1} ticks in 1000 ms (taskTickMs 50)`, view: r.state.group.view }]);
      }
    }
    expect(at).toEqual([10 * limit, 10 * limit + 1000, 10 * limit + 2000]);
  });

  it('§8.3: exactly the limit in every window is never suspected', () => {
    const r = started('r2');
    const out: CoreEffect[] = [];
    const period = TICK_RATE_WINDOW_MS / limit;
    for (let t = 0; t <= 5 * TICK_RATE_WINDOW_MS; t += period) checkTickRate(r, t, out);
    expect(suspicions(out)).toEqual([]);
  });
});

describe('a replica\'s own pause (PROTOCOL §6.1)', () => {
  it('§6.1: a check due during the pause waits 1 ms, so a heartbeat read in that step counts; without the pause it would suspect', () => {
    const run = (paused: boolean) => {
      const r = started('r2');
      heartbeat(r, 'r1', 1, 10);
      timersAt(r, T.replicaCheckMs);
      const out: CoreEffect[] = [];
      if (paused) afterLocalPause(r, 150, 310, out);
      expect(out).toEqual([]); // 150 ms is no longer than a check: not logged
      out.push(...timersAt(r, 310));
      heartbeat(r, 'r1', 2, 310);
      out.push(...timersAt(r, 311));
      return { r, out };
    };
    expect(suspicions(run(false).out)).toEqual([['r1', 'heartbeat.missed', 'no heartbeat from r1 for 300 ms']]);
    const { r, out } = run(true);
    expect(suspicions(out)).toEqual([]);
    expect(healthOf(r, 'r1')).toBe('healthy');
  });

  it('§6.1: only a pause longer than replicaCheckMs is logged, as replica.paused with its length', () => {
    const r = started('r2');
    const out: CoreEffect[] = [];
    afterLocalPause(r, T.replicaCheckMs, 150, out);
    expect(out).toEqual([]);
    afterLocalPause(r, T.replicaCheckMs + 1, 301, out);
    expect(out).toEqual([{ type: 'log', level: 'warn', event: 'replica.paused', fields: { pausedMs: 151 } }]);
  });

  it('§6.1: a pause that no check fell in leaves the checks where they were', () => {
    const r = started('r2');
    timersAt(r, 0);
    afterLocalPause(r, 80, 80, []);
    timersAt(r, 80); // the heartbeat due at 75
    expect(detectorNextWakeMs(r.detector)).toBe(T.agentCheckMs); // 110, not 81
  });

  it('§6.1, §8.4: a probe deadline that fell in the pause waits 1 ms too: a reply read then ends the suspicion', () => {
    const run = (paused: boolean) => {
      const r = started('r1', ['r2', 'r3']);
      joined(r, 'a4', 0);
      onNodeSuspect(r, 'r2', 'a4', 1, true, 100, []);
      const out: CoreEffect[] = [];
      if (paused) afterLocalPause(r, T.replicaCheckMs, 300, out);
      probeTimers(r, 300, out);
      onProbeReply(r, 'a4', 1);
      probeTimers(r, 301, out);
      return { r, out };
    };
    expect(ptps(run(false).out)).toEqual([{ to: 'r2', body: failedOrder }, { to: 'r3', body: failedOrder }]);
    const { r, out } = run(true);
    expect(out).toEqual([]);
    expect(r.state.rsn).toBe(1);
  });
});
