// cluster.json's optional `allowInject` (`trine up --allow-inject`, docs/OPERATIONS.md §2, §7):
// written only when true, absent in older files (which stay valid, meaning false), and anything
// but a boolean refused.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterDirError, clusterIds, loadCluster, paths, planCluster, writeClusterConfig } from '../../../src/io/cluster-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'trine-allow-inject-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ids = clusterIds(3).all;
const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));

function clusterIn(name: string, allowInject?: boolean): string {
  const dir = join(root, name);
  const plan = { nodes: 3, ports: clusterIds(3).listeners.map((_, i) => 7101 + i), ...(allowInject === undefined ? {} : { allowInject }) };
  writeClusterConfig(dir, planCluster(plan, keys));
  return dir;
}

const rawConfig = (dir: string) => JSON.parse(readFileSync(paths.config(dir), 'utf8')) as Record<string, unknown>;

describe('cluster.json allowInject', () => {
  it('trine up --allow-inject records allowInject: true, and loading reads it back', () => {
    const dir = clusterIn('allowed', true);
    expect(rawConfig(dir)['allowInject']).toBe(true);
    expect(loadCluster(dir).config.allowInject).toBe(true);
  });

  it('without the flag the field is not written, and a file without it loads with injection off', () => {
    for (const dir of [clusterIn('default'), clusterIn('off', false)]) {
      expect('allowInject' in rawConfig(dir)).toBe(false);
      expect(loadCluster(dir).config.allowInject).toBeUndefined();
    }
  });

  it('an explicit false loads as off; a value that is not a boolean is refused with what to do', () => {
    const dir = clusterIn('edited');
    writeFileSync(paths.config(dir), JSON.stringify({ ...rawConfig(dir), allowInject: false }));
    expect(loadCluster(dir).config.allowInject).toBeUndefined();
    writeFileSync(paths.config(dir), JSON.stringify({ ...rawConfig(dir), allowInject: 'yes' }));
    expect(() => loadCluster(dir)).toThrow(ClusterDirError);
    expect(() => loadCluster(dir)).toThrow(/"allowInject" must be true or false \(or absent: false\); restore it or recreate the cluster/);
  });
});
