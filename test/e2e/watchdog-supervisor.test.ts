// The watchdog survives (issue 14 item 4), on a `trine up` cluster of real daemons: `trine up`
// starts it under its supervisor (src/daemon/supervisor.ts), which
//   - restarts it after `kill -9`: `trine status` shows it back, restarted once;
//   - does not restart it after `trine shutdown` (exit 4): nothing of the cluster is left;
// and `trine down` stops it even when its supervisor was killed first.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';
import { EXIT_SHUTDOWN } from '../../src/core/constants.ts';
import { readSupervisedPid, supervisedPidFile } from '../../src/io/run-records.ts';
import { alive, logEvents, processesMentioning, trine, upCluster, waitFor } from './helpers.ts';

async function status(dir: string): Promise<StatusDocument | undefined> {
  const r = await trine(['status', '--json', '--dir', dir]);
  return r.code === 0 ? JSON.parse(r.stdout) as StatusDocument : undefined;
}

const supervisorPid = (dir: string): number => Number(readFileSync(join(dir, 'run', 'scc.pid'), 'utf8').trim());

/** The cluster of one describe block, always torn down. */
function cluster(prefix: string): { root: string; dir: string } {
  const c = { root: '', dir: '' };
  beforeAll(async () => {
    Object.assign(c, await upCluster(prefix, 3));
  }, 120_000);
  afterAll(async () => {
    try {
      if (c.dir !== '') await trine(['down', '--dir', c.dir]);
    } finally {
      for (const pid of c.root === '' ? [] : processesMentioning(c.root)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      if (c.root !== '') rmSync(c.root, { recursive: true, force: true });
    }
  });
  return c;
}

describe('issue 14 item 4: the watchdog of a trine up cluster has a supervisor', () => {
  const c = cluster('trine-wd-');

  it('kill -9 the watchdog: its supervisor restarts it, and trine status shows it back, restarted once', { timeout: 90_000 }, async () => {
    const supervisor = supervisorPid(c.dir);
    const first = readSupervisedPid(c.dir, 'scc');
    expect(first).not.toBeNull();
    const before = await status(c.dir);
    process.kill(first as number, 'SIGKILL');
    const doc = await waitFor('the watchdog back in trine status', 60_000, async () => {
      const d = await status(c.dir);
      return d !== undefined && d.healthy && d.watchdog.daemon?.supervisor?.restarts === 1 ? d : undefined;
    }, 250);
    expect(doc.watchdog.answered).toBe(true);
    expect(doc.watchdog.daemon?.supervisor).toEqual({ restarts: 1, lastExit: 'killed by SIGKILL' });
    expect(doc.warnings).toContain('watchdog scc was restarted 1 time by its supervisor (last: killed by SIGKILL)');
    expect(before?.watchdog.daemon?.supervisor).toEqual({ restarts: 0, lastExit: null });
    // The same supervisor, a new watchdog.
    const second = readSupervisedPid(c.dir, 'scc');
    expect(alive(supervisor)).toBe(true);
    expect(second).not.toBe(first);
    expect(alive(second as number)).toBe(true);
  });

  it('after trine shutdown (exit 4) the watchdog is not restarted, and nothing of the cluster is left', { timeout: 90_000 }, async () => {
    const down = await trine(['shutdown', '--dir', c.dir]);
    expect(down.code, down.stderr).toBe(0);
    await waitFor('no process of the cluster left', 30_000, () => (processesMentioning(c.root).length === 0 ? true : undefined), 100);
    const supervisor = logEvents(c.dir, 'scc-supervisor');
    expect(supervisor.filter((e) => e['event'] === 'exit').map((e) => e['code'])).toEqual([EXIT_SHUTDOWN]);
    // The one restart is the kill -9 above; none after the shutdown.
    expect(supervisor.filter((e) => e['event'] === 'child.restart').map((e) => e['reason'])).toEqual(['killed by SIGKILL']);
    expect(logEvents(c.dir, 'scc').filter((e) => e['event'] === 'exit').map((e) => e['code']).at(-1)).toBe(EXIT_SHUTDOWN);
    expect(existsSync(supervisedPidFile(c.dir, 'scc'))).toBe(false);
  });
});

describe('issue 14 item 4: trine down stops the watchdog, supervised or orphaned', () => {
  const c = cluster('trine-wd-down-');

  it('kill -9 the supervisor: the watchdog runs on and answers; trine down stops it and leaves nothing running', { timeout: 90_000 }, async () => {
    const watchdog = readSupervisedPid(c.dir, 'scc') as number;
    process.kill(supervisorPid(c.dir), 'SIGKILL');
    await waitFor('the supervisor gone', 10_000, () => (alive(supervisorPid(c.dir)) ? undefined : true));
    const doc = await status(c.dir);
    expect(doc?.healthy).toBe(true);
    expect(alive(watchdog)).toBe(true);

    const down = await trine(['down', '--dir', c.dir]);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toContain('scc supervised');
    expect(alive(watchdog)).toBe(false);
    expect(processesMentioning(c.root)).toEqual([]);
    expect(existsSync(supervisedPidFile(c.dir, 'scc'))).toBe(false);
  });
});
