// The real CLI and daemons as processes (issue 2, "Done when"): `trine up --nodes 4` starts a
// healthy cluster, `trine status --json` shows one primary, two backups, four healthy nodes and
// equal digests, `trine down` leaves no process alive (checked in /proc). Plus the CLI's bad
// input: an unknown command or flag, a missing dir, a port in use → one line, non-zero exit.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { alive, pidsIn, trine } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';






let root = '';
/** Every pid a test saw, killed after all tests whatever happened. */
const seen = new Set<number>();
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-e2e-'));
});
afterAll(() => {
  killAll([...seen]);
  for (const d of existsSync(root) ? readdirSync(root) : []) killAll(pidsIn(join(root, d)));
  rmSync(root, { recursive: true, force: true });
});

const oneLine = (s: string) => s.trim().split('\n').length === 1;

describe('trine up / status / down', () => {
  it('starts a healthy 4-node cluster, reports it, and stops it leaving no process', { timeout: 120_000 }, async () => {
    const dir = join(root, 'cluster');
    const upRun = await trine(['up', '--nodes', '4', '--dir', dir]);
    for (const p of pidsIn(dir)) seen.add(p);
    expect(upRun.stderr).toBe('');
    expect(upRun.code).toBe(0);
    expect(upRun.stdout).toMatch(/healthy in [0-9.]+ s.*dir /);
    const pids = pidsIn(dir);
    expect(pids).toHaveLength(8); // 3 replicas, 4 agents, the watchdog
    expect(pids.every(alive)).toBe(true);

    const statusRun = await trine(['status', '--json', '--dir', dir]);
    expect(statusRun.code).toBe(0);
    const doc = JSON.parse(statusRun.stdout) as StatusDocument;
    expect(doc.version).toBe(1);
    expect(doc.problems).toEqual([]);
    expect(doc.healthy).toBe(true);
    expect(doc.replicas.map((r) => r.role).sort()).toEqual(['backup', 'backup', 'primary']);
    expect(doc.replicas.every((r) => r.answered && r.health === 'healthy' && r.primary === doc.primary)).toBe(true);
    expect(doc.nodes).toHaveLength(4);
    expect(doc.nodes.every((n) => n.health === 'healthy' && n.joined && n.lastHeartbeatAgeMs !== null)).toBe(true);
    const atRsn = new Map<number, Set<string>>();
    for (const r of doc.replicas) atRsn.set(r.rsn ?? -1, (atRsn.get(r.rsn ?? -1) ?? new Set()).add(r.digest ?? ''));
    for (const digests of atRsn.values()) expect(digests.size).toBe(1);
    // An idle cluster: every replica at the same RSN, so one digest in all (the Done-when line).
    expect(doc.converged).toBe(true);
    expect(new Set(doc.replicas.map((r) => r.digest)).size).toBe(1);
    expect(doc.watchdog.answered).toBe(true);
    expect(doc.watchdog.replicas.map((r) => r.health)).toEqual(['healthy', 'healthy', 'healthy']);

    const table = await trine(['status', '--dir', dir]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/REPLICA\s+NODE\s+ROLE\s+RSN\s+GSSN\s+DIGEST\s+HEALTH/);

    // A second `up` on a running cluster refuses and touches nothing.
    const again = await trine(['up', '--dir', dir]);
    expect(again.code).not.toBe(0);
    expect(oneLine(again.stderr)).toBe(true);
    expect(again.stderr).toMatch(/already running.*trine down/);
    expect(pidsIn(dir).sort()).toEqual([...pids].sort());

    const downRun = await trine(['down', '--dir', dir]);
    expect(downRun.code).toBe(0);
    expect(downRun.stdout).toMatch(/stopped 8 processes/);
    expect(pids.filter(alive)).toEqual([]);
    expect(pidsIn(dir)).toEqual([]);

    // Idempotent.
    const downAgain = await trine(['down', '--dir', dir]);
    expect(downAgain.code).toBe(0);
    expect(downAgain.stdout).toMatch(/nothing running/);

    // Status of a stopped cluster: every replica missing, still a document, non-zero exit.
    const stopped = await trine(['status', '--json', '--timeout', '300', '--dir', dir]);
    expect(stopped.code).toBe(1);
    const stoppedDoc = JSON.parse(stopped.stdout) as StatusDocument;
    expect(stoppedDoc.replicas.every((r) => !r.answered && r.health === 'unreachable')).toBe(true);
  });
});

describe('trine bad input', () => {
  let blocker: Server | null = null;
  afterEach(async () => {
    const b = blocker;
    blocker = null;
    if (b !== null) await new Promise<void>((r) => b.close(() => r()));
  });

  it('an unknown command: one line, exit 2', async () => {
    const r = await trine(['frobnicate']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(true);
    expect(r.stderr).toMatch(/unknown command 'frobnicate'.*trine --help/);
  });

  it('an unknown flag: one line, exit 2', async () => {
    const r = await trine(['status', '--bogus']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(true);
    expect(r.stderr).toMatch(/unknown option '--bogus'.*trine status --help/);
  });

  it('a bad value: one line, exit 2', async () => {
    const r = await trine(['up', '--nodes', '2', '--dir', join(root, 'never')]);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(true);
    expect(r.stderr).toMatch(/--nodes must be an integer from 3/);
    expect(existsSync(join(root, 'never'))).toBe(false);
  });

  it('status on a missing dir: one line, exit 2', async () => {
    const dir = join(root, 'missing');
    const r = await trine(['status', '--dir', dir]);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(true);
    expect(r.stderr).toContain(`no cluster at ${dir}: run \`trine up`);
  });

  it('status on a foreign dir: one line, exit 2', async () => {
    const r = await trine(['status', '--dir', tmpdir()]);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(true);
    expect(r.stderr).toMatch(/is not a trine cluster dir/);
  });

  it('up on a port in use: one line naming the port, exit 2, nothing started', async () => {
    const server = createServer();
    blocker = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const address = server.address();
    const port = address !== null && typeof address === 'object' ? address.port : 0;
    const dir = join(root, 'busy');
    const r = await trine(['up', '--dir', dir, '--base-port', String(port)]);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(true);
    expect(r.stderr).toContain(`port ${port}`);
    expect(r.stderr).toMatch(/in use.*--base-port/);
    expect(pidsIn(dir)).toEqual([]);
  });
});
