// Squatted ports (issue 14 item 3, PROTOCOL §10.6): cluster.json is world-readable and lists every
// spare replica's port, so a local user can listen on all of them first. On a local cluster of
// four nodes, a stranger holds every spare's port (r4–r9) with a plain TCP listener that accepts
// and never answers, as `nc -l` would. A backup is killed with SIGKILL: the replacement finds its
// port taken, listens on a free one, and says which in its state request; the group adds it with
// that port, and the agents, the other replicas and the CLI dial it there. The group is healthy
// again with three serving members, `trine status` reaches all of them, and a task on every node
// runs. Timing is printed, not asserted (STYLE.md 17).
import { existsSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';
import { loadCluster, replicaPool } from '../../src/io/cluster-dir.ts';
import { clusterStatus, downCluster, livePid, logEvents, trine, upCluster, waitForReplacement } from './helpers.ts';

const RECOVERY_MS = 30_000;

let root = '';
let dir = '';
const squatters: Server[] = [];
const held: Socket[] = [];

const status = async (): Promise<StatusDocument> => (await clusterStatus(dir)).doc;

const pidOf = (id: string): number => livePid(dir, id);

/** Listen on `port` of `host` as a stranger would: accept, hold, never answer. */
function squat(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = createServer((socket) => {
      held.push(socket);
      socket.on('error', () => undefined);
    });
    s.once('error', reject);
    s.listen({ host, port }, () => resolve());
    squatters.push(s);
  });
}

describe('squatted spare ports (issue 14 item 3)', () => {
  beforeAll(async () => {
    ({ root, dir } = await upCluster('trine-squat-'));
  });

  afterAll(async () => {
    for (const s of held.splice(0)) s.destroy();
    await Promise.all(squatters.splice(0).map((s) => new Promise((r) => s.close(r))));
    await downCluster(root, dir !== '' && existsSync(dir) ? dir : '');
  });

  it('§10.6: a replacement whose port a stranger holds listens on another, the group adds it there, and everyone reaches it', { timeout: 120_000 }, async () => {
    const cluster = loadCluster(dir);
    const m = cluster.config.membership;
    const spares = replicaPool(m).filter((r) => !m.replicas.includes(r));
    for (const id of spares) {
      const ep = cluster.config.processes.find((p) => p.id === id)?.listen;
      if (ep === null || ep === undefined) throw new Error(`${id} does not listen`);
      await squat(ep.host, ep.port);
    }
    let doc = await status();
    expect(doc.healthy).toBe(true);
    const before = [...doc.group.members];
    const view = doc.group.view ?? -1;
    const victim = before.filter((r) => r !== doc.group.primary).at(-1) as string;
    const killedAt = Date.now();
    process.kill(pidOf(victim), 'SIGKILL');
    doc = await waitForReplacement(dir, victim, view, RECOVERY_MS);
    const newcomer = doc.group.members.find((r) => !before.includes(r)) as string;
    expect(spares).toContain(newcomer);
    console.log(`${victim} killed: ${newcomer} joined on another port, the group healthy after ${Date.now() - killedAt} ms`);

    // It listens elsewhere, and says so; the group's journal names the port.
    const moved = logEvents(dir, newcomer).find((e) => e['event'] === 'listen.moved');
    expect(moved).toBeDefined();
    const port = Number(moved?.['port']);
    const configured = cluster.config.processes.find((p) => p.id === newcomer)?.listen?.port;
    expect(port).not.toBe(configured);
    const ps = await trine(['ps', '--json', '--dir', dir]);
    const events = (JSON.parse(ps.stdout) as { events: { text: string }[] }).events.map((e) => e.text);
    expect(events).toContain(`replica ${newcomer} joined on port ${port}, its own being taken; group ${doc.group.members.join(',')}, view ${doc.group.view}`);
    // trine status reached it (every replica answered above), and every member sees the others.
    for (const r of doc.replicas.filter((x) => doc.group.members.includes(x.id))) {
      expect(r.replicas.filter((p) => doc.group.members.includes(p.id)).every((p) => p.connected)).toBe(true);
    }
    // The group orders and the agents follow: a task with a process on every node runs.
    const run = await trine(['submit', '--wait', '-n', '4', '--dir', dir, '--', '/bin/true']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });
});
