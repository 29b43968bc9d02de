// The `trine status` document and table (cli/status-report.ts, docs/OPERATIONS.md §3): the rows
// are the members of the current group, health is judged against that group, and retired ids,
// the replacement and condemnations are shown beside it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeMetricsPort, writeMetricsPorts } from '../../../src/io/metrics-ports.ts';
import { buildStatusDocument, formatStatus } from '../../../cli/status-report.ts';
import { parseReplicaStatus } from '../../../cli/status-client.ts';
import { answers, condemned, config, journal, missing, ok, replica, watchdog, watchdogReplica } from './status-fixtures.ts';

const cfg = config();
const at = new Date('2026-01-01T00:00:00Z');
const build = (a: ReturnType<typeof answers>) => buildStatusDocument(cfg, '/x/.trine', a, at);

const v0 = { view: 0, members: ['r1', 'r2', 'r3'], primary: 'r1' };
const v1 = { view: 1, members: ['r1', 'r2'], primary: 'r1' };
const v2 = { view: 2, members: ['r1', 'r2', 'r4'], primary: 'r1' };
const v4 = { view: 4, members: ['r2', 'r4', 'r5'], primary: 'r2' };

const events1 = journal([10, 'replica r3 condemned (silent); group r1,r2, primary r1, view 1'], [10, 'replica r4 to start on n4']);
const events2 = journal(
  [10, 'replica r3 condemned (silent); group r1,r2, primary r1, view 1'], [10, 'replica r4 to start on n4'], [23, 'replica r4 joined; group r1,r2,r4, view 2'],
  [30, 'replica r1 condemned (silent); group r2,r4, primary r2, view 3'], [30, 'replica r5 to start on n3'], [37, 'replica r5 joined; group r2,r4,r5, view 4'],
);
const history2 = [condemned('r3', 'r1,r2', 0, 1_000), condemned('r1', 'r2,r4', 2, 5_000)];

/** After r3 (a backup) and then r1 (the primary) were killed and replaced by r4 and r5. */
function twiceReplaced(over: { r5?: Parameters<typeof ok>[0] | null } = {}) {
  const r5 = over.r5 === undefined ? replica('r5', v4) : over.r5;
  return answers(
    [
      ['r1', missing()], ['r2', ok(replica('r2', v4, { diagnosis: history2, cluster: events2 }))], ['r3', missing()],
      ['r4', ok(replica('r4', v4, { diagnosis: [condemned('r1', 'r2,r4', 2, 5_010)], cluster: events2 }))],
      ...(r5 === null ? [] : [['r5', ok(r5)] as [string, ReturnType<typeof ok>]]),
    ],
    watchdog([
      watchdogReplica('r1', { health: 'silent', lastHeartbeatAgeMs: 9_000, view: 2 }), watchdogReplica('r2', { role: 'primary', view: 4 }),
      watchdogReplica('r3', { health: 'silent', lastHeartbeatAgeMs: 20_000 }), watchdogReplica('r4', { view: 4 }), watchdogReplica('r5', { view: 4 }),
    ]),
    ['r2', 'r4', 'r5'],
  );
}

describe('buildStatusDocument follows the group', () => {
  it('the initial group: as before, plus the group fields', () => {
    const doc = build(answers(
      [['r1', ok(replica('r1', v0))], ['r2', ok(replica('r2', v0))], ['r3', ok(replica('r3', v0))]],
      watchdog(['r1', 'r2', 'r3'].map((r) => watchdogReplica(r))),
    ));
    expect(doc.problems).toEqual([]);
    expect(doc).toMatchObject({ version: 1, healthy: true, converged: true, primary: 'r1', retired: [], replacement: null, condemnations: [] });
    expect(doc.group).toEqual({ view: 0, members: ['r1', 'r2', 'r3'], primary: 'r1', confirmedBy: ['r1', 'r2', 'r3'], basis: 'agreed', unconfirmedViews: [] });
    expect(doc.replicas.map((r) => [r.id, r.node, r.role, r.phase, r.view])).toEqual([
      ['r1', 'n1', 'primary', 'serving', 0], ['r2', 'n2', 'backup', 'serving', 0], ['r3', 'n3', 'backup', 'serving', 0],
    ]);
    expect(doc.nodes.map((n) => n.replica)).toEqual(['r1', 'r2', 'r3', null]);
  });

  it('the nodes are the group\'s, not cluster.json\'s: an added node is a row, a removed one is no problem (PROTOCOL §10.12)', () => {
    const agents = [['a1', 'n1'], ['a2', 'n2'], ['a3', 'n3'], ['a5', 'n5']].map(([id, node]) => ({
      id: id as string, node: node as string, connected: true, joined: true, lastHeartbeatAgeMs: 20, health: 'healthy' as const,
    }));
    const doc = build(answers(
      [['r1', ok(replica('r1', v0, { agents }))], ['r2', ok(replica('r2', v0, { agents }))], ['r3', ok(replica('r3', v0, { agents }))]],
      watchdog(['r1', 'r2', 'r3'].map((r) => watchdogReplica(r))),
    ));
    expect(doc.problems).toEqual([]);
    expect(doc.nodes.map((x) => [x.id, x.agent])).toEqual([['n1', 'a1'], ['n2', 'a2'], ['n3', 'a3'], ['n5', 'a5']]);
  });

  it('after two replacements: the members are the rows, healthy; the killed ones are retired, not problems', () => {
    const doc = build(twiceReplaced());
    expect(doc.problems).toEqual([]);
    expect(doc.healthy).toBe(true);
    expect(doc.converged).toBe(true);
    expect(doc.primary).toBe('r2');
    expect(doc.group).toMatchObject({ view: 4, members: ['r2', 'r4', 'r5'], primary: 'r2', basis: 'agreed' });
    expect(doc.replicas.map((r) => [r.id, r.node, r.role])).toEqual([['r2', 'n2', 'primary'], ['r4', 'n4', 'backup'], ['r5', 'n3', 'backup']]);
    expect(doc.retired).toEqual([
      { id: 'r3', node: 'n3', how: 'condemned', reason: 'silent', by: ['r1', 'r2'], view: 0, answered: false },
      { id: 'r1', node: 'n1', how: 'condemned', reason: 'silent', by: ['r2', 'r4'], view: 2, answered: false },
    ]);
    expect(doc.condemnations.map((c) => [c.view, c.target, c.recordedBy])).toEqual([[0, 'r3', ['r2']], [2, 'r1', ['r2', 'r4']]]);
    expect(doc.nodes.map((n) => [n.id, n.replica])).toEqual([['n1', null], ['n2', 'r2'], ['n3', 'r5'], ['n4', 'r4']]);
    expect(doc.watchdog.replicas.filter((r) => r.member).map((r) => r.id)).toEqual(['r2', 'r4', 'r5']);
  });

  it('a member that does not answer is a problem (and its row says why)', () => {
    const doc = build(twiceReplaced({ r5: null }));
    expect(doc.healthy).toBe(false);
    expect(doc.replicas.find((r) => r.id === 'r5')).toMatchObject({ answered: false, health: 'unreachable', error: 'not running (no live daemon behind run/r5.pid)' });
    expect(doc.problems).toContain('replica r5 did not answer (not running (no live daemon behind run/r5.pid))');
    expect(doc.converged).toBe(false);
  });

  it('two members and a replacement installing: not healthy, and says what is under way', () => {
    const doc = build(answers(
      [
        ['r1', ok(replica('r1', v1, { diagnosis: [condemned('r3', 'r1,r2', 0)], cluster: events1 }))],
        ['r2', ok(replica('r2', v1, { cluster: events1 }))], ['r3', missing()], ['r4', ok(replica('r4', v1, { phase: 'installing', rsn: 0 }))],
      ],
      watchdog(['r1', 'r2'].map((r) => watchdogReplica(r, { view: 1 }))),
      ['r1', 'r2', 'r4'],
    ));
    expect(doc.replicas.map((r) => r.id)).toEqual(['r1', 'r2']);
    expect(doc.replacement).toEqual({ id: 'r4', node: 'n4', member: false, phase: 'installing' });
    expect(doc.problems).toEqual(['the group has 2 replicas (r1, r2), not 3: replacement r4 installing on n4']);
  });

  it('a member added but still installing the state is a problem until it serves', () => {
    const doc = build(answers(
      [['r1', ok(replica('r1', v2, { cluster: events2 }))], ['r2', ok(replica('r2', v2))], ['r4', ok(replica('r4', v2, { phase: 'installing' }))]],
      watchdog(['r1', 'r2', 'r4'].map((r) => watchdogReplica(r, { view: 2 }))),
      ['r1', 'r2', 'r4'],
    ));
    expect(doc.replacement).toMatchObject({ id: 'r4', member: true, phase: 'installing' });
    expect(doc.problems).toContain('replica r4 is still installing the state (a replacement, PROTOCOL §10.6)');
  });

  it('one replica claiming a higher view alone does not move the group; it is a problem', () => {
    const lie = { view: 7, members: ['r5', 'r6', 'r7'], primary: 'r5' };
    const a = twiceReplaced({ r5: replica('r5', lie, { role: 'backup' }) });
    const doc = build(a);
    expect(doc.group).toMatchObject({ view: 4, members: ['r2', 'r4', 'r5'], basis: 'agreed', unconfirmedViews: [{ id: 'r5', ...lie }] });
    expect(doc.problems).toContain("r5 reports view 7 (r5, r6, r7, primary r5), above the group's view 4, and no second replica confirms it");
  });

  it('a member a view behind, and a view only one replica reports, are problems', () => {
    const doc = build(answers(
      [['r1', ok(replica('r1', v1))], ['r2', ok(replica('r2', v2))], ['r3', missing()]],
      watchdog(['r1', 'r2'].map((r) => watchdogReplica(r))),
      ['r1', 'r2'],
    ));
    expect(doc.group).toMatchObject({ view: 2, basis: 'unconfirmed', confirmedBy: ['r2'] });
    expect(doc.problems).toContain('view 2 (r1, r2, r4, primary r1) is reported by r2 alone: no second replica in service confirms it');
    expect(doc.problems).toContain("replica r1 is at view 1, behind the group's view 2");
  });

  it('a stopped cluster: the initial replicas, unreachable, and the group unknown', () => {
    const doc = build(answers([['r1', missing()], ['r2', missing()], ['r3', missing()]], { ok: false, error: 'not reachable within 300 ms' }));
    expect(doc.group.basis).toBe('assumed');
    expect(doc.replicas.map((r) => [r.id, r.health])).toEqual([['r1', 'unreachable'], ['r2', 'unreachable'], ['r3', 'unreachable']]);
    expect(doc.retired).toEqual([]);
  });

  it('the watchdog not hearing a member is a problem; a retired id it still lists is not', () => {
    const a = twiceReplaced();
    if (a.watchdog.ok) a.watchdog.status.replicas = a.watchdog.status.replicas.filter((r) => r.id !== 'r5');
    expect(build(a).problems).toEqual(['watchdog scc has not heard replica r5 yet']);
  });
});

describe('formatStatus', () => {
  it('shows the group, the phase and view of each member, retired ids with why, and the condemnations', () => {
    const text = formatStatus(build(twiceReplaced()));
    expect(text).toContain('cluster ');
    expect(text).toMatch(/: healthy\n/);
    expect(text).toContain('group: view 4, primary r2, members r2, r4, r5 (confirmed by r2, r4, r5)');
    expect(text).toMatch(/REPLICA\s+NODE\s+ROLE\s+RSN\s+GSSN\s+DIGEST\s+HEALTH\s+PHASE\s+VIEW/);
    expect(text).toMatch(/\nr5\s+n3\s+backup\s+20\s+10\s+abababababab\s+healthy\s+serving\s+4\n/);
    expect(text).toContain('retired: r3 (condemned: silent, by r1,r2), r1 (condemned: silent, by r2,r4)');
    expect(text).toContain('watchdog scc: r2 healthy (40 ms), r4 healthy (40 ms), r5 healthy (40 ms)');
    expect(text).toContain('condemnations:\n  1970-01-01T00:00:01.000Z  view 0: r3 condemned (silent) by r1,r2\n  1970-01-01T00:00:05.000Z  view 2: r1 condemned (silent) by r2,r4');
  });

  it('a replacement under way has its own line', () => {
    const text = formatStatus(build(answers(
      [['r1', ok(replica('r1', v1, { cluster: events1 }))], ['r2', ok(replica('r2', v1, { cluster: events1 }))], ['r3', missing()]],
      watchdog(['r1', 'r2'].map((r) => watchdogReplica(r))),
      ['r1', 'r2'],
    )));
    expect(text).toContain('replacement: r4 commanded to start on n4, not answering yet');
    expect(text).toContain('retired: r3 (condemned: silent)');
    expect(text).toMatch(/NOT HEALTHY \(1 problem\)/);
  });
});

describe('restores after a cluster reset (PROTOCOL §10.9)', () => {
  const fresh = () => answers(
    [['r1', ok(replica('r1', v0))], ['r2', ok(replica('r2', v0))], ['r3', ok(replica('r3', v0))]],
    watchdog(['r1', 'r2', 'r3'].map((r) => watchdogReplica(r, { inc: 2 }))),
  );
  const withWatchdog = (over: { restoresPending?: { task: string; nonce: string }[]; restores?: unknown[] }) => {
    const a = fresh();
    if (a.watchdog.ok) Object.assign(a.watchdog.status, { clusterResets: [{ atMs: 1_000, rule: 'heartbeats', reason: 'no consistent heartbeats' }], ...over });
    return a;
  };

  it('a restore still pending is a problem and has its own line', () => {
    const doc = build(withWatchdog({ restoresPending: [{ task: 't1', nonce: 'ab'.repeat(16) }, { task: 't3', nonce: 'cd'.repeat(16) }] }));
    expect(doc.healthy).toBe(false);
    expect(doc.problems).toEqual(['watchdog scc is still restoring t1, t3 after a cluster reset (until two replicas of the restarted group confirm each)']);
    expect(doc.watchdog.restoresPending.map((r) => r.task)).toEqual(['t1', 't3']);
    expect(formatStatus(doc)).toContain('\nrestores pending: t1, t3 (until two replicas of the restarted group confirm each)');
  });

  it('restores done and journal entries refused are shown (not problems), with the journal path relative to the cluster dir', () => {
    const restores = [
      { atMs: 2_000, kind: 'refused', source: '/x/.trine/run/r2.tasks', task: 't2', code: 'SIG_INVALID', detail: 'bad signature' },
      { atMs: 3_000, kind: 'restored', task: 't1', ok: true, text: 't1' },
      { atMs: 3_000, kind: 'restored', task: 't4', ok: false, text: 'size must be 1 to 64 processes, got 99' },
      // A membership change (PROTOCOL §10.12), restored before the tasks.
      { atMs: 3_000, kind: 'restored', task: 'node.add n5', ok: true, text: 'node n5 added (agent a5 at 10.0.0.15)' },
    ];
    const doc = build(withWatchdog({ restores }));
    expect(doc.problems).toEqual([]);
    expect(doc.watchdog.restores).toEqual(restores);
    expect(formatStatus(doc)).toContain([
      'cluster resets:',
      '  1970-01-01T00:00:01.000Z  no consistent heartbeats',
      'restored after cluster reset:',
      '  1970-01-01T00:00:02.000Z  refused: run/r2.tasks, t2: SIG_INVALID (bad signature)',
      '  1970-01-01T00:00:03.000Z  t1 → t1 (restarted)',
      '  1970-01-01T00:00:03.000Z  t4 not restored: size must be 1 to 64 processes, got 99',
      '  1970-01-01T00:00:03.000Z  node.add n5: node n5 added (agent a5 at 10.0.0.15)',
    ].join('\n'));
  });

  it('a watchdog that does not send the fields (an older release) reads as none', () => {
    const a = fresh();
    if (a.watchdog.ok) {
      const { restoresPending: _p, restores: _r, ...older } = a.watchdog.status;
      a.watchdog.status = older as typeof a.watchdog.status;
    }
    const doc = build(a);
    expect(doc.watchdog).toMatchObject({ restoresPending: [], restores: [] });
    expect(doc.healthy).toBe(true);
  });
});

describe('parseReplicaStatus', () => {
  const good = replica('r4', v2);
  it('takes a reply with the group fields', () => {
    expect(parseReplicaStatus(JSON.stringify(good), 'r4')?.members).toEqual(['r1', 'r2', 'r4']);
  });
  it('refuses a reply without a view, with an unknown phase, or with members that are not ids', () => {
    const { view: _view, ...noView } = good;
    expect(parseReplicaStatus(JSON.stringify(noView), 'r4')).toBeNull();
    expect(parseReplicaStatus(JSON.stringify({ ...good, phase: 'dancing' }), 'r4')).toBeNull();
    expect(parseReplicaStatus(JSON.stringify({ ...good, members: [1, 2] }), 'r4')).toBeNull();
    expect(parseReplicaStatus(JSON.stringify({ ...good, diagnosis: [{ kind: 'condemned' }] }), 'r4')).toBeNull();
    expect(parseReplicaStatus(JSON.stringify(good), 'r2')).toBeNull();
  });
});

describe('the metrics endpoints (OPERATIONS §3, §9)', () => {
  it('with metrics on: every daemon of metrics.json in cluster.json order, a recorded port over the file\'s, one table line; an unusable file is a warning; none without the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'trine-status-metrics-'));
    try {
      const a = twiceReplaced();
      expect(buildStatusDocument(cfg, dir, a, at).metrics).toBeNull();
      const ids = cfg.processes.filter((p) => p.kind !== 'operator').map((p) => p.id);
      writeMetricsPorts(dir, new Map(ids.map((id, i) => [id, 9400 + i])));
      writeMetricsPort(dir, 'r2', 9999); // r2 runs here and could not have its own port
      const doc = buildStatusDocument(cfg, dir, a, at);
      expect(doc.metrics?.map((m) => m.id)).toEqual(ids);
      const r2 = doc.metrics?.find((m) => m.id === 'r2');
      expect(r2).toMatchObject({ port: 9999 });
      expect(r2?.url).toMatch(/^http:\/\/[^/]+:9999\/metrics$/);
      expect(formatStatus(doc)).toContain(`metrics: ${ids.length} endpoints on ports 9400-9999 (r1: `);
      writeFileSync(join(dir, 'metrics.json'), '{"format": "something else"}');
      const bad = buildStatusDocument(cfg, dir, a, at);
      expect(bad.metrics).toBeNull();
      expect(bad.warnings.some((w) => w.startsWith(`${dir}/metrics.json is not usable (`) && w.includes('fix or remove it'))).toBe(true);
      expect(formatStatus(bad)).not.toContain('metrics:');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
