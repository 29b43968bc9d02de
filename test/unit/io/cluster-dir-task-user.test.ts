// cluster.json's optional `taskUser` (issue 13 item 6; docs/OPERATIONS.md §2, FAULT-MODEL "Tasks
// and Trine's secrets"): absent for `trine up` unless asked for, read back when present, anything
// but a user name refused; and the cluster dir, logs/ and run/ closed to everyone but its owner.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterDirError, clusterIds, loadCluster, paths, planCluster, restrictClusterDir, writeClusterConfig } from '../../../src/io/cluster-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'trine-task-user-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ids = clusterIds(3).all;
const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
const modeOf = (path: string): number => statSync(path).mode & 0o777;

function clusterIn(name: string, taskUser?: string): string {
  const dir = join(root, name);
  const plan = { nodes: 3, ports: clusterIds(3).listeners.map((_, i) => 7201 + i), ...(taskUser === undefined ? {} : { taskUser }) };
  writeClusterConfig(dir, planCluster(plan, keys));
  return dir;
}

const rawConfig = (dir: string) => JSON.parse(readFileSync(paths.config(dir), 'utf8')) as Record<string, unknown>;

describe('cluster.json taskUser', () => {
  it('absent unless asked for (trine up without TRINE_TASK_USER): tasks run as the daemons\' user', () => {
    const dir = clusterIn('plain');
    expect('taskUser' in rawConfig(dir)).toBe(false);
    expect(loadCluster(dir).config.taskUser).toBeUndefined();
  });

  it('written when given and read back', () => {
    const dir = clusterIn('nobody', 'nobody');
    expect(rawConfig(dir)['taskUser']).toBe('nobody');
    expect(loadCluster(dir).config.taskUser).toBe('nobody');
  });

  it('anything but a user name is refused, saying what the field is for', () => {
    const dir = clusterIn('edited');
    for (const bad of ['', 'Root', 'a b', 'x/../y', 7]) {
      writeFileSync(paths.config(dir), JSON.stringify({ ...rawConfig(dir), taskUser: bad }));
      expect(() => loadCluster(dir)).toThrow(ClusterDirError);
      expect(() => loadCluster(dir)).toThrow(/"taskUser" must be a user name/);
    }
  });
});

describe('the cluster dir is closed to the task user', () => {
  it('writeClusterConfig makes the dir, logs/ and run/ 0700', () => {
    const dir = clusterIn('modes');
    for (const p of [dir, paths.logs(dir), paths.run(dir)]) expect(modeOf(p), p).toBe(0o700);
  });

  it('restrictClusterDir tightens a dir made before the rule, and says what it changed', () => {
    const dir = join(root, 'older');
    for (const p of [dir, paths.logs(dir), paths.run(dir), paths.keys(dir)]) mkdirSync(p, { recursive: true });
    for (const p of [dir, paths.logs(dir), paths.run(dir)]) chmodSync(p, 0o755);
    chmodSync(paths.keys(dir), 0o700);
    expect(restrictClusterDir(dir).sort()).toEqual([dir, paths.logs(dir), paths.run(dir)].sort());
    for (const p of [dir, paths.logs(dir), paths.run(dir), paths.keys(dir)]) expect(modeOf(p), p).toBe(0o700);
    expect(restrictClusterDir(dir)).toEqual([]);
  });
});
