// The cluster's event log as the operator reads it (cli/timeline.ts; `trine events`, `trine
// dashboard`): the replicas' journals merged into one log, and the episodes of faults paired
// from the events' kinds — a replica's last heartbeat → suspicion → condemnation → replacement
// installed, a process's death → a replacement running (or its task ended), a node lost → back
// — with their latencies; and a follower that shows each item once across looks.
import { describe, expect, it } from 'vitest';
import type { ClusterEvent } from '../../../src/core/status.ts';
import {
  collectDiagnosis, episodes, formatEpisode, LogFollower, mergeEvents, OPEN_SUSPICION_MS, SUSPICION_WINDOW_MS,
  type DiagnosisEntry, type ReplicaJournal,
} from '../../../cli/timeline.ts';

const T = 1_800_000_000_000;
const ev = (atMs: number, rsn: number, text: string, more: Partial<ClusterEvent> = {}): ClusterEvent =>
  ({ atMs: T + atMs, rsn, task: null, vpid: null, text, ...more });
const diag = (atMs: number, kind: DiagnosisEntry['kind'], target: string, by: string, detail = ''): DiagnosisEntry =>
  ({ atMs: T + atMs, view: 0, kind, target, by, reason: 'silent', detail });

// A backup r3 killed at ~+1000: r1 and r2 miss its heartbeats, accuse it, and the group condemns
// it; r4 is started on n4 and joins. A task process t1/2 dies at +100 and t1/3 replaces it.
const r1Events: ClusterEvent[] = [
  ev(0, 5, 't1 running: 3 processes', { task: 't1' }),
  ev(1, 4, 't1/2 running pid 40 on n3', { task: 't1', vpid: 2, kind: 'proc.running', subject: 'n3' }),
  ev(100, 9, 't1/2 terminated abnormally: SIGKILL', { task: 't1', vpid: 2, kind: 'proc.died', subject: 'n3' }),
  ev(100, 9, 't1 GSIG_NTF_DIED(2)', { task: 't1', vpid: 2 }),
  ev(1700, 20, 'replica r3 condemned (silent); group r1,r2, primary r1, view 1', { kind: 'replica.condemned', subject: 'r3' }),
  ev(1700, 20, 'replica r4 to start on n4', { kind: 'replica.starting', subject: 'r4' }),
  ev(2100, 24, 't1/3 running pid 77 on n3', { task: 't1', vpid: 3, kind: 'proc.running', subject: 'n3' }),
  ev(3200, 30, 'replica r4 joined; group r1,r2,r4, view 2', { kind: 'replica.joined', subject: 'r4' }),
];
/** r2's journal: the same events stamped by its own clock (a few ms later), less the oldest. */
const r2Events = r1Events.slice(1).map((e) => ({ ...e, atMs: e.atMs + 3 }));
const r1Diag = [
  diag(-20_000, 'initiated', 'r3', 'r1', 'no heartbeat for 150 ms'), // at start-up, cleared: not this fault's
  diag(1250, 'initiated', 'r3', 'r1', 'no heartbeat for 240 ms'),
  diag(1650, 'accused', 'r3', 'r1'),
  diag(1690, 'condemned', 'r3', 'r1,r2'),
];
const r2Diag = [diag(1260, 'initiated', 'r3', 'r2', 'no heartbeat for 230 ms'), diag(1660, 'accused', 'r3', 'r2')];
const journals: ReplicaJournal[] = [
  { id: 'r1', events: r1Events, diagnosis: r1Diag },
  { id: 'r2', events: r2Events, diagnosis: r2Diag },
];

describe('mergeEvents: one log from every replica\'s journal', () => {
  it('keeps each event once, by RSN then journal order, stamped with the earliest clock and naming its journals', () => {
    const log = mergeEvents(journals);
    expect(log.map((e) => e.rsn)).toEqual([4, 5, 9, 9, 20, 20, 24, 30]);
    expect(log.map((e) => e.text)).toContain('t1 GSIG_NTF_DIED(2)');
    expect(new Set(log.map((e) => `${e.rsn} ${e.text}`)).size).toBe(log.length);
    const died = log.find((e) => e.kind === 'proc.died');
    expect(died?.atMs).toBe(T + 100);
    expect(died?.from).toEqual(['r1', 'r2']);
    expect(log.find((e) => e.rsn === 5)?.from).toEqual(['r1']);
  });

  it('a replica that died takes nothing away: the others hold the events', () => {
    expect(mergeEvents([journals[1] as ReplicaJournal]).map((e) => e.rsn)).toEqual([4, 9, 9, 20, 20, 24, 30]);
  });
});

describe('episodes: faults, detections and recoveries with their latencies', () => {
  const log = mergeEvents(journals);
  const diagnosis = collectDiagnosis(journals);

  it('a killed replica: last heartbeat → first suspicion → condemned → replacement commanded → joined', () => {
    const ep = episodes(log, diagnosis).find((e) => e.what === 'replica');
    // The last heartbeat any replica received: r2's +1260 − 230 = +1030 (r1's +1010 is older).
    expect(ep).toMatchObject({ id: 'replica:r3:20', subject: 'r3', cause: 'silent', state: 'recovered', detectionMs: 1700 - 1030, recoveryMs: 3200 - 1700 });
    expect(ep?.steps.map((s) => [s.label, s.atMs - T])).toEqual([
      ['r3: last heartbeat', 1030],
      ['r1 suspects r3 (silent)', 1250],
      ['r3 condemned (silent)', 1700],
      ['replica r4 to start on n4', 1700],
      ['r4 joined (installed)', 3200],
    ]);
  });

  it('the start-up suspicion long before is not this fault\'s', () => {
    expect(SUSPICION_WINDOW_MS).toBeLessThan(20_000);
    const ep = episodes(log, diagnosis).find((e) => e.what === 'replica');
    expect(ep?.steps.every((s) => s.atMs - T > 0)).toBe(true);
  });

  it('a replacement not joined yet: recovering, no recovery time; abandoned then started elsewhere: the second one counts', () => {
    const until = log.filter((e) => e.kind !== 'replica.joined');
    expect(episodes(until, diagnosis).find((e) => e.what === 'replica')).toMatchObject({ state: 'recovering', recoveryMs: null, detectionMs: 670 });
    const again = [
      ...until,
      ev(2900, 26, 'replica r4 did not start on n4: abandoned', { kind: 'replica.abandoned', subject: 'r4' }),
      ev(2900, 26, 'replica r5 to start on n2', { kind: 'replica.starting', subject: 'r5' }),
      ev(4000, 33, 'replica r5 joined; group r1,r2,r5, view 2', { kind: 'replica.joined', subject: 'r5' }),
    ].map((e) => ({ ...e, from: ['r1'] }));
    const ep = episodes(again, diagnosis).find((e) => e.what === 'replica');
    expect(ep).toMatchObject({ state: 'recovered', recoveryMs: 4000 - 1700 });
    expect(ep?.steps.map((s) => s.label).slice(3)).toEqual(['replica r4 to start on n4', 'replica r4 did not start on n4: abandoned', 'replica r5 to start on n2', 'r5 joined (installed)']);
  });

  it('a killed process: died → a new process of the same task running', () => {
    const ep = episodes(log, diagnosis).find((e) => e.what === 'process');
    expect(ep).toMatchObject({ id: 'proc:t1/2:9', subject: 't1/2', cause: 'SIGKILL', state: 'recovered', detectionMs: null, recoveryMs: 2000 });
    expect(ep?.steps.map((s) => s.label)).toEqual(['t1/2 died (SIGKILL) on n3', 'replacement t1/3 running on n3']);
  });

  it('a process whose task ends instead: ended, not recovered; a process still running before the death is no replacement', () => {
    const plain = [
      ev(0, 3, 't2/0 running pid 5 on n1', { task: 't2', vpid: 0, kind: 'proc.running' }),
      ev(10, 4, 't2/1 terminated abnormally: SIGKILL', { task: 't2', vpid: 1, kind: 'proc.died' }),
      ev(20, 5, 't2/0 running pid 5 on n1', { task: 't2', vpid: 0, kind: 'proc.running' }),
      ev(30, 6, 't2 finished abnormally: processes terminated abnormally (VPIDs 1)', { task: 't2', kind: 'task.finished' }),
    ].map((e) => ({ ...e, from: ['r1'] }));
    expect(episodes(plain, [])).toMatchObject([{ what: 'process', subject: 't2/1', state: 'ended', recoveryMs: null }]);
    expect(formatEpisode(episodes(plain, [])[0] as never)).toContain('not replaced');
  });

  it('a node lost and back: its recovery time', () => {
    const node = [
      ev(0, 3, 'node n2 lost: no processes', { kind: 'node.lost', subject: 'n2' }),
      ev(5, 4, 'node n3 joined: 4 slots, adopting 0 processes', { kind: 'node.joined', subject: 'n3' }),
      ev(900, 7, 'node n2 joined: 4 slots, adopting 0 processes', { kind: 'node.joined', subject: 'n2' }),
    ].map((e) => ({ ...e, from: ['r1'] }));
    expect(episodes(node, [])).toMatchObject([{ id: 'node:n2:3', what: 'node', state: 'recovered', recoveryMs: 900 }]);
  });

  it('an accusation of a current member with no condemnation yet is under way; an old, a non-member or a bare suspicion is not', () => {
    const d = collectDiagnosis([{ id: 'r1', events: [], diagnosis: [
      diag(4600, 'initiated', 'r4', 'r1', 'no heartbeat for 300 ms'), diag(5000, 'accused', 'r2', 'r1'), diag(5000, 'accused', 'r9', 'r1'),
    ] }]);
    expect(episodes([], d, { members: ['r1', 'r2', 'r4'], nowMs: T + 5100 })).toMatchObject([{ what: 'replica', subject: 'r2', state: 'detecting' }]);
    expect(episodes([], d, { members: ['r1', 'r2', 'r4'], nowMs: T + 5000 + OPEN_SUSPICION_MS + 1 })).toEqual([]);
    // After the condemnation of r3 its suspicions are its episode's, not open ones.
    expect(episodes(log, diagnosis, { members: ['r1', 'r2', 'r3'], nowMs: T + 3300 }).filter((e) => e.state === 'detecting')).toEqual([]);
  });
});

describe('LogFollower: each item once, in order, across looks and replicas', () => {
  it('a second look with the same journals shows nothing; new events and the settled episodes show once', () => {
    const f = new LogFollower();
    const firstLook: ReplicaJournal[] = [{ id: 'r1', events: r1Events.slice(0, 5), diagnosis: r1Diag.slice(0, 3) }];
    const first = f.take(firstLook);
    expect(first.filter((i) => i.type === 'event').map((i) => (i.type === 'event' ? i.event.rsn : 0))).toEqual([4, 5, 9, 9, 20]);
    // Diagnosis records go among the events by time: the suspicion at +1250 before the condemnation at +1700.
    const order = first.map((i) => (i.type === 'event' ? i.event.text : i.type === 'diagnosis' ? `${i.diagnosis.kind} ${i.diagnosis.atMs - T}` : i.episode.id));
    expect(order.indexOf('initiated 1250')).toBeLessThan(order.indexOf('replica r3 condemned (silent); group r1,r2, primary r1, view 1'));
    expect(order.indexOf('initiated 1250')).toBeGreaterThan(order.indexOf('t1 GSIG_NTF_DIED(2)'));
    // Nothing settled yet: the process has no replacement, the replica none either.
    expect(first.some((i) => i.type === 'episode')).toBe(false);
    expect(f.take(firstLook)).toEqual([]);
    // r1 died; r2 answers with everything: only what is new, then both episodes once.
    const second = f.take([journals[1] as ReplicaJournal]);
    expect(second.filter((i) => i.type === 'event').map((i) => (i.type === 'event' ? i.event.rsn : 0))).toEqual([20, 24, 30]);
    expect(second.filter((i) => i.type === 'episode').map((i) => (i.type === 'episode' ? i.episode.id : ''))).toEqual(['proc:t1/2:9', 'replica:r3:20']);
    expect(f.take(journals)).toEqual(r1Diag.slice(3).map((d) => ({ type: 'diagnosis', diagnosis: { ...d, replica: 'r1' } })));
    expect(f.take(journals)).toEqual([]);
  });
});

describe('the journal event decoder (cli/replies.ts): kind and subject optional, checked when present', () => {
  const view = (e: Record<string, unknown>) => ({ tick: 0, nodes: [], tasks: [], omittedTasks: 0, events: [{ atMs: 1, rsn: 1, task: null, vpid: null, text: 'x', ...e }] });
  it('an event of an older replica (no kind) and a tagged one are read; a newer replica\'s unknown kind reads as untagged; a malformed kind or an oversized subject refuses the view', async () => {
    const { parseClusterView } = await import('../../../cli/replies.ts');
    expect(parseClusterView(view({}))).not.toBeNull();
    expect(parseClusterView(view({ kind: 'replica.joined', subject: 'r4' }))?.events[0]?.kind).toBe('replica.joined');
    expect(parseClusterView(view({ kind: 'replica.exploded' }))?.events[0]).not.toHaveProperty('kind');
    expect(parseClusterView(view({ kind: 'node.lost', subject: 'n'.repeat(65) }))).toBeNull();
    expect(parseClusterView(view({ kind: 7 }))).toBeNull();
  });
});

describe('trine dashboard --listen', () => {
  it('HOST:PORT, HOST, PORT, [V6]:PORT; loopback by default; anything else refused with what to pass', async () => {
    const { parseListen, isLoopback, DASHBOARD_DEFAULT_PORT } = await import('../../../cli/dashboard.ts');
    expect(parseListen(undefined)).toEqual({ host: '127.0.0.1', port: DASHBOARD_DEFAULT_PORT });
    expect(parseListen('0.0.0.0:9000')).toEqual({ host: '0.0.0.0', port: 9000 });
    expect(parseListen('9001')).toEqual({ host: '127.0.0.1', port: 9001 });
    expect(parseListen('example.org')).toEqual({ host: 'example.org', port: DASHBOARD_DEFAULT_PORT });
    expect(parseListen('[::1]:0')).toEqual({ host: '::1', port: 0 });
    for (const bad of ['', ':', 'a b', 'host:99999', 'host:-1', 'host:12x', 'http://x']) expect(() => parseListen(bad)).toThrow(/expected HOST:PORT, HOST or PORT/);
    expect([isLoopback('127.0.0.1'), isLoopback('::1'), isLoopback('localhost'), isLoopback('0.0.0.0'), isLoopback('10.0.0.1')]).toEqual([true, true, true, false, false]);
  });
});
