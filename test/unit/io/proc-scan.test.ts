// Finding task processes from the OS by their environment mark (issue 14 item 6,
// src/io/proc-scan.ts): real processes, spawned with and without the mark.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { OWNER_ENV, ownerMark, scanMarked, scanOwned } from '../../../src/io/proc-scan.ts';
import { procStartTime } from '../../../src/io/run-records.ts';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.kill('SIGKILL');
});

/** `sh -c 'sleep 30 & wait'` with `env` added: a task process and a child it started. */
function marked(env: Record<string, string>): ChildProcess {
  const c = spawn('/bin/sh', ['-c', 'sleep 30 & wait'], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env }, stdio: 'ignore', detached: true });
  started.push(c);
  return c;
}

/** Polls `cond` every 10 ms, up to 15 s: under the full suite on 2 cores a shell can take over
 *  2 s to fork its child (CI run of f193fde). The assertions after it say what was missing. */
const until = async (cond: () => boolean): Promise<void> => {
  for (let i = 0; i < 1_500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe('scanning /proc for marked task processes (issue 14 item 6)', () => {
  const cluster = `scan-${process.pid}`;

  it('finds an agent\'s processes and the children they started by the mark, with task, VPID and start time; not another agent\'s or cluster\'s, nor unmarked ones', async () => {
    const mine = marked({ [OWNER_ENV]: ownerMark(cluster, 'a1'), TRINE_TASK: 't3', TRINE_VPID: '2' });
    marked({ [OWNER_ENV]: ownerMark(cluster, 'a2'), TRINE_TASK: 't3', TRINE_VPID: '3' });
    marked({ [OWNER_ENV]: ownerMark(`${cluster}-other`, 'a1'), TRINE_TASK: 't1', TRINE_VPID: '0' });
    marked({ TRINE_TASK: 't3', TRINE_VPID: '4' });
    await until(() => scanOwned(cluster, 'a1').length === 2);
    const found = scanOwned(cluster, 'a1');
    expect(found.map((p) => [p.task, p.vpid, p.owner])).toEqual([['t3', 2, `${cluster}/a1`], ['t3', 2, `${cluster}/a1`]]);
    expect(found[0]?.pid).toBe(mine.pid);
    expect(found[0]?.startTime).toBe(procStartTime(mine.pid as number));
    // The child (sleep) carries the mark too: killing by mark leaves nothing behind.
    expect(found[1]?.pid).not.toBe(mine.pid);
    expect(scanMarked((o) => o.startsWith(`${cluster}/`)).map((p) => p.owner).sort()).toEqual([`${cluster}/a1`, `${cluster}/a1`, `${cluster}/a2`, `${cluster}/a2`]);
  });

  it('a mark without a readable VPID gives null, not a guess; a dead process is not found', async () => {
    const c = marked({ [OWNER_ENV]: ownerMark(cluster, 'a9'), TRINE_VPID: 'x' });
    await until(() => scanOwned(cluster, 'a9').length === 2);
    expect(scanOwned(cluster, 'a9').map((p) => [p.task, p.vpid])).toEqual([[null, null], [null, null]]);
    process.kill(-(c.pid as number), 'SIGKILL');
    await until(() => scanOwned(cluster, 'a9').length === 0);
    expect(scanOwned(cluster, 'a9')).toEqual([]);
  });
});
