// `trine shutdown` on a one-host cluster (docs/PROTOCOL.md §10.11), as an operator sees it: the
// group kills the running task and every daemon exits with EXIT_SHUTDOWN (4), which nothing
// restarts — the keepers give up instead of replacing their agents, and the watchdog stands down
// instead of resetting the cluster it no longer hears. The same on namespace hosts, with
// `trine node run` and the systemd units: test/e2e/hosts-shutdown.test.ts.
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_SHUTDOWN } from '../../src/core/constants.ts';
import { downCluster, processesMentioning, trine, waitFor } from './helpers.ts';

let root = '';
let dir = '';

const events = (id: string): Record<string, unknown>[] =>
  readFileSync(join(dir, 'logs', `${id}.log`), 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>);

describe('trine shutdown (one host)', () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'trine-shutdown-'));
    dir = join(root, '.trine');
    const up = await trine(['up', '--nodes', '3', '--dir', dir]);
    expect(up.code, up.stderr).toBe(0);
  });

  afterAll(async () => {
    await downCluster(root, dir);
  });

  it('kills the running task, stops every daemon with exit code 4, and nothing restarts or resets anything', { timeout: 60_000 }, async () => {
    const submit = await trine(['submit', '-n', '3', '--dir', dir, '--', '/bin/sh', '-c', `exec sleep 600 # ${root}`]);
    expect(submit.code, submit.stderr).toBe(0);
    const task = submit.stdout.trim();
    await waitFor(`${task} running`, 15_000, async () => {
      const ps = await trine(['ps', task, '--json', '--dir', dir]);
      return ps.code === 0 && (JSON.parse(ps.stdout) as { tasks: { state: string }[] }).tasks[0]?.state === 'running' ? true : undefined;
    });
    const down = await trine(['shutdown', '--dir', dir]);
    expect(down.stderr).toBe('');
    expect(down.code).toBe(0);
    expect(down.stdout).toMatch(new RegExp(`cluster shutting down: n1, n2, n3 told to stop; killed ${task} \\(ordered at RSN \\d+\\)`));
    expect(down.stdout).toMatch(/^stopped: no replica and no watchdog answers/m);
    // Every process of the cluster is gone: daemons, keepers, standbys and the task's sleeps.
    await waitFor('no process of the cluster left', 15_000, async () => (processesMentioning(root).length === 0 ? true : undefined));
    const exits = readdirSync(join(dir, 'logs')).filter((f) => f.endsWith('.log')).map((f) => f.slice(0, -4)).sort()
      .map((id) => [id, events(id).filter((e) => e['event'] === 'exit').map((e) => e['code'])]);
    expect(exits).toEqual([
      ['a1', [EXIT_SHUTDOWN]], ['a1-keeper', [EXIT_SHUTDOWN]], ['a2', [EXIT_SHUTDOWN]], ['a2-keeper', [EXIT_SHUTDOWN]], ['a3', [EXIT_SHUTDOWN]], ['a3-keeper', [EXIT_SHUTDOWN]],
      ['r1', [EXIT_SHUTDOWN]], ['r2', [EXIT_SHUTDOWN]], ['r3', [EXIT_SHUTDOWN]], ['scc', [EXIT_SHUTDOWN]], ['scc-supervisor', [EXIT_SHUTDOWN]],
    ]);
    // No keeper started another agent; the watchdog stood down and reset nothing.
    for (const k of ['a1-keeper', 'a2-keeper', 'a3-keeper']) expect(events(k).filter((e) => e['event'] === 'agent.restart')).toEqual([]);
    const scc = events('scc');
    expect(scc.filter((e) => e['event'] === 'shutdown')).toHaveLength(1);
    expect(scc.filter((e) => /^(reset\.(node|done|command|cluster)|node\.reset|cluster\.reset)/.test(String(e['event'])))).toEqual([]);
    // The task's processes ended by the group's terminate, before their agents exited.
    const killed = ['a1', 'a2', 'a3'].flatMap((a) => events(a).filter((e) => e['event'] === 'proc.kill').map((e) => e['signal']));
    expect(killed).toContain('SIGTERM');
  });
});
