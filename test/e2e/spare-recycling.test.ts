// More replacements than spare ids (PROTOCOL §10.6, issue 13 item 5: "a cluster can replace
// replicas for as long as it has healthy nodes"): on a local cluster of four nodes, whose pool
// holds six spare ids (r4–r9), a backup is killed with SIGKILL eight times in a row. The first six
// replacements take the fresh spares; after that the group starts a retired spare id again, as a
// new incarnation of the same key, and the group is healthy each time: three serving members that
// agree, the new one among them. A task submitted at the end runs. Timing is printed, not
// asserted (STYLE.md 17).
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';
import { clusterStatus, downCluster, livePid, trine, waitForReplacement } from './helpers.ts';

const KILLS = 8;
const RECOVERY_MS = 20_000;

let root = '';
let dir = '';

const status = async (): Promise<StatusDocument> => (await clusterStatus(dir)).doc;

const pidOf = (id: string): number => livePid(dir, id);

describe('replacements beyond the spare ids (one host)', () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'trine-recycle-'));
    dir = join(root, '.trine');
    const up = await trine(['up', '--nodes', '4', '--dir', dir]);
    expect(up.code, up.stderr).toBe(0);
  });

  afterAll(async () => {
    await downCluster(root, dir !== '' && existsSync(dir) ? dir : '');
  });

  it('eight backups killed one after another: six fresh spares, then retired spare ids again, the group healthy every time', { timeout: 240_000 }, async () => {
    const started: string[] = [];
    let doc = await status();
    expect(doc.healthy).toBe(true);
    for (let k = 0; k < KILLS; k++) {
      const view = doc.group.view ?? -1;
      const before = [...doc.group.members];
      const victim = before.filter((r) => r !== doc.group.primary).at(-1) as string;
      const killedAt = Date.now();
      process.kill(pidOf(victim), 'SIGKILL');
      doc = await waitForReplacement(dir, victim, view, RECOVERY_MS, ` (kill ${k + 1})`);
      const newcomer = doc.group.members.find((r) => !before.includes(r)) as string;
      const again = started.includes(newcomer);
      started.push(newcomer);
      console.log(`kill ${k + 1}: ${victim} → ${newcomer}${again ? ' (a retired id again)' : ''} joined; group ${doc.group.members.join(',')}, view ${doc.group.view}, healthy after ${Date.now() - killedAt} ms`);
    }
    // Six fresh spares first, each once; then ids that had retired, again.
    expect(started.slice(0, 6).sort()).toEqual(['r4', 'r5', 'r6', 'r7', 'r8', 'r9']);
    for (const again of started.slice(6)) expect(started.slice(0, 6)).toContain(again);
    // The journal says so.
    const ps = await trine(['ps', '--json', '--dir', dir]);
    const events = (JSON.parse(ps.stdout) as { events: { text: string }[] }).events.map((e) => e.text);
    expect(events.filter((t) => t.endsWith('(a new incarnation of a retired spare id)')).length).toBeGreaterThanOrEqual(KILLS - 6);
    // And the group still orders: a task runs.
    const run = await trine(['submit', '--wait', '-n', '2', '--dir', dir, '--', '/bin/true']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });
});
