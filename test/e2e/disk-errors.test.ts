// Degrade, never crash, on disk errors (issue 14 item 4), on a one-host cluster of real daemons:
//   - replica r2's and the watchdog's logs are full devices from their start (a device node of
//     /dev/full's device in place of logs/<id>.log: ENOSPC for real, and nothing of the host's
//     /dev/full is touched). Both keep running, the cluster stays healthy, and `trine status`
//     shows the lines they dropped, as warnings; once r2's log can be written again it resumes
//     with a `log.dropped` line;
//   - replica r1's task journal (PROTOCOL §10.9) cannot be written: a directory stands where
//     run/r1.tasks goes, so the rename fails with EISDIR (root ignores permission bits, not
//     that). The write is retried and reported, and goes through, task included, once the
//     directory is gone.
// Making a device node needs root (CAP_MKNOD): without it the file is skipped.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';
import { readSupervisedPid } from '../../src/io/run-records.ts';
import { alive, downCluster, logEvents, trine, waitFor } from './helpers.ts';

const isRoot = process.getuid?.() === 0;
let root = '';
let dir = '';

async function status(): Promise<StatusDocument> {
  const r = await trine(['status', '--json', '--dir', dir]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as StatusDocument;
}

const pidOf = (id: string): number => Number(readFileSync(join(dir, 'run', `${id}.pid`), 'utf8').trim());

describe.skipIf(!isRoot)('issue 14 item 4: disk errors degrade, never crash', () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'trine-disk-'));
    dir = join(root, 'cluster');
    mkdirSync(join(dir, 'logs'), { recursive: true });
    // /dev/full is character device 1,7 on Linux.
    for (const id of ['r2', 'scc']) execFileSync('mknod', [join(dir, 'logs', `${id}.log`), 'c', '1', '7']);
    const up = await trine(['up', '--nodes', '3', '--dir', dir], 90_000);
    expect(up.code, up.stderr).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await downCluster(root, dir);
  });

  it('a replica and the watchdog whose logs are full keep running; the cluster stays healthy and trine status shows the drop counts; the log resumes once it can be written', { timeout: 90_000 }, async () => {
    const doc = await waitFor('drop counts in trine status', 30_000, async () => {
      const d = await status();
      const r2 = d.replicas.find((r) => r.id === 'r2');
      return d.healthy && (r2?.daemon?.logDrops['ENOSPC'] ?? 0) > 0 && (d.watchdog.daemon?.logDrops['ENOSPC'] ?? 0) > 0 ? d : undefined;
    }, 250);
    expect(doc.problems).toEqual([]);
    expect(doc.warnings).toEqual(expect.arrayContaining([
      expect.stringMatching(/^replica r2 could not write \d+ log lines? \(ENOSPC \d+\): its disk is full or failing$/),
      expect.stringMatching(/^watchdog scc could not write \d+ log lines? \(ENOSPC \d+\): its disk is full or failing$/),
    ]));
    expect(doc.replicas.find((r) => r.id === 'r1')?.daemon).toEqual({ logDrops: {}, records: {}, supervisor: null });
    const text = await trine(['status', '--dir', dir]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/\nwarnings:\n {2}- replica r2 could not write \d+ log lines? \(ENOSPC/);
    // The same processes as at the start: nothing crashed, nothing was restarted.
    const watchdog = readSupervisedPid(dir, 'scc');
    expect(alive(pidOf('r2'))).toBe(true);
    expect(watchdog !== null && alive(watchdog)).toBe(true);
    expect(logEvents(dir, 'scc-supervisor').filter((e) => e['event'] === 'child.restart')).toEqual([]);

    // The disk has room again: r2 opens its log anew within a second, and its next line (the
    // counters, every 10 s) goes through, followed by how many were lost.
    rmSync(join(dir, 'logs', 'r2.log'));
    const resumed = await waitFor('r2 logging again', 30_000, () =>
      logEvents(dir, 'r2').find((e) => e['event'] === 'log.dropped'), 250);
    expect(statSync(join(dir, 'logs', 'r2.log')).isFile()).toBe(true);
    expect(resumed['code']).toBe('ENOSPC');
    expect(resumed['dropped']).toBeGreaterThan(0);
    expect(alive(pidOf('r2'))).toBe(true);
  });

  it('a task journal write that fails is retried and reported, and succeeds, task included, once the cause is removed', { timeout: 90_000 }, async () => {
    const journal = join(dir, 'run', 'r1.tasks');
    rmSync(journal, { force: true });
    mkdirSync(journal);
    const marker = `journal-${root}`;
    const submit = await trine(['submit', '-n', '1', '--dir', dir, '--', '/bin/sh', '-c', `exec sleep 600 # ${marker}`]);
    expect(submit.code, submit.stderr).toBe(0);

    const failing = await waitFor('r1 reporting its journal unwritten', 30_000, async () => {
      const d = await status();
      const tasks = d.replicas.find((r) => r.id === 'r1')?.daemon?.records['tasks'];
      return tasks?.pending === true && (tasks.failures['EISDIR'] ?? 0) > 0 ? d : undefined;
    }, 250);
    expect(failing.problems).toEqual([]);
    expect(failing.warnings).toEqual(expect.arrayContaining([
      expect.stringMatching(/^replica r1 has not written its task journal \(PROTOCOL §10\.9\): \d+ failed writes? \(EISDIR \d+\), retrying; last: EISDIR/),
    ]));
    expect(logEvents(dir, 'r1').some((e) => e['event'] === 'tasks.journal.write-failed' && e['code'] === 'EISDIR')).toBe(true);
    expect(alive(pidOf('r1'))).toBe(true);

    rmdirSync(journal);
    const written = await waitFor('r1 reporting its journal written', 30_000, async () => {
      const d = await status();
      const tasks = d.replicas.find((r) => r.id === 'r1')?.daemon?.records['tasks'];
      return tasks?.pending === false ? d : undefined;
    }, 250);
    expect(written.warnings).toEqual(expect.arrayContaining([expect.stringMatching(/^replica r1 wrote its task journal \(PROTOCOL §10\.9\) after \d+ failed writes? \(EISDIR \d+\)$/)]));
    expect(statSync(journal).isFile()).toBe(true);
    expect(readFileSync(journal).includes(marker)).toBe(true);
    expect(logEvents(dir, 'r1').some((e) => e['event'] === 'tasks.journal.written')).toBe(true);
  });
});
