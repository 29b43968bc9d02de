// cli/daemon-report.ts and the `warnings` of the `trine status` document (issue 14 item 4;
// docs/OPERATIONS.md §3.4): log lines and records a daemon could not write, and the watchdog's
// restarts, are shown as warnings — never problems, so a full log disk does not make a serving
// cluster unhealthy. A report from a faulty replica is checked and bounded.
import { describe, expect, it } from 'vitest';
import { daemonWarnings, MAX_REPORT_KEYS, readDaemonReport } from '../../../cli/daemon-report.ts';
import { buildStatusDocument, formatStatus } from '../../../cli/status-report.ts';
import type { DaemonReport } from '../../../src/core/status.ts';
import { answers, config, ok, replica, watchdog, watchdogReplica } from './status-fixtures.ts';

const g = { view: 0, members: ['r1', 'r2', 'r3'], primary: 'r1' };
const quiet: DaemonReport = { logDrops: {}, records: {}, supervisor: null };

describe('issue 14 item 4: what the daemons say of their disks in trine status', () => {
  it('drops, an unwritten journal and watchdog restarts are warnings, shown as lines and in the JSON; the cluster stays healthy', () => {
    const full: DaemonReport = {
      logDrops: { ENOSPC: 1200, EIO: 3 },
      records: { tasks: { failures: { ENOSPC: 4 }, pending: true, lastError: 'ENOSPC: no space left on device, write', superseded: 1 } },
      supervisor: null,
    };
    const wd = watchdog(['r1', 'r2', 'r3'].map((r) => watchdogReplica(r, { role: r === 'r1' ? 'primary' : 'backup' })));
    if (wd.ok) wd.status.daemon = { logDrops: { ENOSPC: 7 }, records: {}, supervisor: { restarts: 2, lastExit: 'killed by SIGKILL' } };
    const doc = buildStatusDocument(config(), '/x/.trine', answers([
      ['r1', ok(replica('r1', g, { daemon: quiet }))], ['r2', ok(replica('r2', g, { daemon: full }))], ['r3', ok(replica('r3', g))],
    ], wd), new Date(0));
    expect(doc.problems).toEqual([]);
    expect(doc.healthy).toBe(true);
    expect(doc.warnings).toEqual([
      'replica r2 could not write 1203 log lines (ENOSPC 1200, EIO 3): its disk is full or failing',
      'replica r2 has not written its task journal (PROTOCOL §10.9): 4 failed writes (ENOSPC 4), retrying; last: ENOSPC: no space left on device, write',
      'watchdog scc could not write 7 log lines (ENOSPC 7): its disk is full or failing',
      'watchdog scc was restarted 2 times by its supervisor (last: killed by SIGKILL)',
    ]);
    expect(doc.replicas.map((r) => r.daemon)).toEqual([quiet, full, null]);
    expect(doc.watchdog.daemon?.supervisor).toEqual({ restarts: 2, lastExit: 'killed by SIGKILL' });
    expect(formatStatus(doc)).toContain('\nwarnings:\n  - replica r2 could not write 1203 log lines');
    expect(formatStatus(doc)).not.toContain('problems:');
  });

  it('a journal written after failures is still reported, as history', () => {
    expect(daemonWarnings('replica r1', { logDrops: {}, records: { tasks: { failures: { EISDIR: 1 }, pending: false, lastError: 'x', superseded: 0 } }, supervisor: null }))
      .toEqual(['replica r1 wrote its task journal (PROTOCOL §10.9) after 1 failed write (EISDIR 1)']);
    expect(daemonWarnings('watchdog scc', { ...quiet, supervisor: { restarts: 0, lastExit: null } })).toEqual([]);
  });

  it('a report is read only when well-formed and bounded: anything else is null (a faulty replica, an older release)', () => {
    expect(readDaemonReport(undefined)).toBeNull();
    expect(readDaemonReport(quiet)).toEqual(quiet);
    expect(readDaemonReport({ ...quiet, logDrops: { ENOSPC: -1 } })).toBeNull();
    expect(readDaemonReport({ ...quiet, logDrops: { ENOSPC: 'many' } })).toBeNull();
    expect(readDaemonReport({ ...quiet, logDrops: Object.fromEntries(Array.from({ length: MAX_REPORT_KEYS + 1 }, (_, i) => [`E${i}`, 1])) })).toBeNull();
    expect(readDaemonReport({ ...quiet, records: { tasks: { failures: {}, pending: 'yes', lastError: null, superseded: 0 } } })).toBeNull();
    expect(readDaemonReport({ ...quiet, supervisor: { restarts: 1.5 } })).toBeNull();
    const long = readDaemonReport({ logDrops: {}, records: { tasks: { failures: {}, pending: true, lastError: 'e'.repeat(10_000), superseded: 0 } }, supervisor: { restarts: 1, lastExit: 7 } });
    expect(long?.records['tasks']?.lastError).toHaveLength(200);
    expect(long?.supervisor).toEqual({ restarts: 1, lastExit: null });
  });
});
