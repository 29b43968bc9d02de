// The replicas a node's agent learnt at run time, kept on the node's disk (src/io/added-replicas.ts,
// PROTOCOL §10.12): what the daemons it starts later, and its next incarnation, know from the
// start. The file is the agent's; a bad one counts as empty and says why.
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AddedReplica } from '../../../src/core/wire/messages.ts';
import {
  addedReplicasFile, keepAddedReplicas, MAX_ADDED_REPLICAS_KEPT, readAddedReplicas, withAddedReplicas,
} from '../../../src/io/added-replicas.ts';
import { clusterIds, planCluster, paths, type Cluster } from '../../../src/io/cluster-dir.ts';

let root = '';
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-added-replicas-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const r = (id: string, b: number, port = 7402): AddedReplica => ({ id, node: 'n5', address: '10.0.0.15', port, publicKey: new Uint8Array(32).fill(b) });

describe('run/added-replicas.json', () => {
  it('keeps what the agent learnt, private, in order; an id keeps its first key; the oldest go beyond the bound', () => {
    const dir = join(root, 'node');
    mkdirSync(paths.run(dir), { recursive: true });
    expect(readAddedReplicas(dir)).toEqual({ replicas: [], error: null });
    keepAddedReplicas(dir, [r('r12', 1)]);
    keepAddedReplicas(dir, [r('r13', 2, 7401), r('r12', 9)]);
    expect(readAddedReplicas(dir)).toEqual({ replicas: [r('r12', 1), r('r13', 2, 7401)], error: null });
    expect(statSync(addedReplicasFile(dir)).mode & 0o777).toBe(0o600);
    keepAddedReplicas(dir, Array.from({ length: MAX_ADDED_REPLICAS_KEPT - 1 }, (_, i) => r(`r${100 + i}`, 3)));
    const kept = readAddedReplicas(dir).replicas.map((x) => x.id);
    expect(kept).toHaveLength(MAX_ADDED_REPLICAS_KEPT);
    expect(kept[0]).toBe('r13');
  });

  it('a file that is not one counts as empty, and says why', () => {
    const dir = join(root, 'node');
    mkdirSync(paths.run(dir), { recursive: true });
    for (const text of ['{', '[]', JSON.stringify({ format: 'x', replicas: [] }), JSON.stringify({ format: 'trine-added-replicas/1', replicas: [{ id: 'r1' }] }),
      JSON.stringify({ format: 'trine-added-replicas/1', replicas: [{ ...r('r12', 1), publicKey: 'ab' }] }), 'x'.repeat(70_000)]) {
      writeFileSync(addedReplicasFile(dir), text);
      const got = readAddedReplicas(dir);
      expect(got.replicas, text.slice(0, 40)).toEqual([]);
      expect(got.error).toContain(addedReplicasFile(dir));
    }
  });
});

describe('withAddedReplicas', () => {
  it('adds the learnt replicas as spares bound to their nodes, with keys and listen addresses; a known id keeps cluster.json\'s', () => {
    const ids = clusterIds(4);
    const keys = new Map(ids.all.map((id, i) => [id, new Uint8Array(32).fill(100 + i)]));
    const cluster: Cluster = { dir: root, config: planCluster({ nodes: 4, ports: ids.listeners.map((_, i) => 47_100 + i) }, keys), publicKeys: keys };
    const r2 = cluster.publicKeys.get('r2') as Uint8Array;
    const c = withAddedReplicas(cluster, [r('r12', 1), { ...r('r2', 7), node: 'n9' }]);
    expect(c.config.membership.spareReplicas.at(-1)).toBe('r12');
    expect(c.config.membership.spareNodes?.['r12']).toBe('n5');
    expect(c.config.processes.find((p) => p.id === 'r12')).toEqual({ id: 'r12', kind: 'replica', node: 'n5', listen: { host: '10.0.0.15', port: 7402 }, slots: null });
    expect(c.publicKeys.get('r12')).toEqual(new Uint8Array(32).fill(1));
    expect(c.publicKeys.get('r2')).toEqual(r2);
    expect(c.config.processes.filter((p) => p.id === 'r2')).toHaveLength(1);
    expect(withAddedReplicas(c, [r('r12', 1)])).toBe(c);
  });
});
