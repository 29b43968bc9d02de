// cluster.json's membership as loadCluster checks it: one agent per node name, since the group
// counts slots and places processes per node (PROTOCOL §8.2), and a node added at run time is
// refused a name already in use (§10.12).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterDirError, clusterIds, loadCluster, paths, planCluster, writeClusterConfig } from '../../../src/io/cluster-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'trine-membership-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ids = clusterIds(3);
const keys = new Map(ids.all.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));

describe('cluster.json membership.agents', () => {
  it('a cluster of trine up loads with one agent per node', () => {
    const dir = join(root, 'plain');
    writeClusterConfig(dir, planCluster({ nodes: 3, ports: ids.listeners.map((_, i) => 7301 + i) }, keys));
    expect(loadCluster(dir).config.membership.agents.map((a) => a.node)).toEqual(['n1', 'n2', 'n3']);
  });

  it('two agents on one node name are refused, naming the node and what to do', () => {
    const dir = join(root, 'edited');
    writeClusterConfig(dir, planCluster({ nodes: 3, ports: ids.listeners.map((_, i) => 7311 + i) }, keys));
    const raw = JSON.parse(readFileSync(paths.config(dir), 'utf8')) as {
      processes: { id: string; node?: string }[]; membership: { agents: { id: string; node: string }[] };
    };
    const second = raw.membership.agents[1] as { id: string; node: string };
    second.node = 'n1';
    for (const p of raw.processes) if (p.id === second.id) p.node = 'n1';
    writeFileSync(paths.config(dir), JSON.stringify(raw));
    expect(() => loadCluster(dir)).toThrow(ClusterDirError);
    expect(() => loadCluster(dir)).toThrow(/membership\.agents puts two agents on node n1: give each agent a node of its own/);
  });
});
