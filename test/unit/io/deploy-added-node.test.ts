// The bundle of a node added at run time (src/io/deploy.ts, `trine node add`, PROTOCOL §10.12,
// docs/OPERATIONS.md §8.7): the operator's cluster document plus the new agent — its process
// entry listening on the new host's address at the agents' port, its membership entry, node
// address and public key — which `trine node run` loads like any bundle `trine init` wrote; the
// new host holds its agent's key only (no spare replica id). A removed node's agent leaves the
// document but keeps its public key, so its id is never handed out again.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCluster, writeClusterConfig, type ClusterConfig } from '../../../src/io/cluster-dir.ts';
import {
  addedNodeBundle, addNodeToConfig, agentListenPort, loadBundle, nextAgentId, nextSpareIds, removeNodeFromConfig, sparesPerHost, systemdUnit, writeBundle, writeDeployment,
  type AddedNode, type BundleInfo,
} from '../../../src/io/deploy.ts';
import { readHostsFile } from '../../../src/io/hosts-file.ts';
import { generateKeyPair, type KeyPair } from '../../../src/io/keys.ts';

const EXAMPLE = fileURLToPath(new URL('../../../examples/hosts.yaml', import.meta.url));

let root: string;
let config: ClusterConfig;
let ops: BundleInfo;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-added-node-'));
  writeDeployment(readHostsFile(EXAMPLE), join(root, 'bundles'));
  const loaded = loadBundle(join(root, 'bundles', 'ops'));
  config = loaded.cluster.config;
  ops = loaded.bundle;
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const node = (pair: KeyPair, over: Partial<AddedNode> = {}): AddedNode =>
  ({ host: 'n5', address: '10.0.0.15', agent: nextAgentId(config), port: agentListenPort(config) as number, slots: 6, publicKey: pair.publicKey, spares: [], ...over });

describe('a node added at run time', () => {
  it('gets the next agent id and the port every agent host of `trine init` listens on', () => {
    // examples/hosts.yaml: port 7400, two spares per host, so agents listen on 7403; a1…a4 exist.
    expect(agentListenPort(config)).toBe(7403);
    expect(nextAgentId(config)).toBe('a5');
  });

  it('has a bundle `trine node run` loads: the operator\'s document plus its agent, its own key only, an agent unit', () => {
    const pair = generateKeyPair();
    const n = node(pair);
    const added = addNodeToConfig(config, n);
    const bundle = addedNodeBundle(ops, n);
    const dir = join(root, 'n5');
    writeBundle(dir, added, bundle, new Map([[n.agent, pair]]));

    const loaded = loadBundle(dir);
    expect(loaded.bundle).toEqual({ format: 'trine-bundle/1', cluster: config.cluster, host: 'n5', address: '10.0.0.15', roles: ['agent'], ids: ['a5'], install: ops.install });
    const c = loaded.cluster.config;
    expect(c.processes.find((p) => p.id === 'a5')).toEqual({ id: 'a5', kind: 'agent', node: 'n5', listen: { host: '10.0.0.15', port: 7403 }, slots: 6 });
    expect(c.processes.at(-1)?.kind).toBe('operator');
    expect(c.membership.agents.at(-1)).toEqual({ id: 'a5', node: 'n5' });
    expect(c.nodeAddresses?.['n5']).toBe('10.0.0.15');
    expect(Buffer.from(loaded.cluster.publicKeys.get('a5') as Uint8Array)).toEqual(Buffer.from(pair.publicKey));
    // Everything else is the operator's document as it was: replicas, spares and their nodes.
    expect(c.membership.replicas).toEqual(config.membership.replicas);
    expect(c.membership.spareReplicas).toEqual(config.membership.spareReplicas);
    expect(c.membership.spareNodes).toEqual(config.membership.spareNodes);
    expect(Object.values(c.membership.spareNodes ?? {})).not.toContain('n5');
    // Its key only, 0600 in a 0700 dir; the unit runs `trine node run`.
    expect(readdirSync(join(dir, 'keys'))).toEqual(['a5.json']);
    expect(statSync(join(dir, 'keys', 'a5.json')).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir).sort()).toEqual(['bundle.json', 'cluster.json', 'keys', 'logs', 'run', 'trine-node.service']);
    expect(systemdUnit(bundle)?.text).toContain(`ExecStart=${ops.install.trine} node run --bundle ${ops.install.dir}\n`);
  });

  it('once removed leaves the operator\'s document but keeps its key, so its agent id is not reused', () => {
    const n = node(generateKeyPair());
    const added = addNodeToConfig(config, n);
    const removed = removeNodeFromConfig(added, 'n5');
    expect(removed.processes.some((p) => p.node === 'n5')).toBe(false);
    expect(removed.membership.agents.some((a) => a.node === 'n5')).toBe(false);
    expect(removed.nodeAddresses?.['n5']).toBeUndefined();
    expect(removed.publicKeys['a5']).toBe(added.publicKeys['a5']);
    expect(nextAgentId(removed)).toBe('a6');
    // And the document still loads.
    const dir = join(root, 'ops-after-remove');
    writeClusterConfig(dir, removed);
    expect(loadCluster(dir).config.membership.agents.map((a) => a.id)).toEqual(['a1', 'a2', 'a3', 'a4']);
  });

  it('PROTOCOL §10.12: with spares, the next free spare ids on the ports below the agent\'s, bound to the host, whose bundle alone holds their keys', () => {
    // examples/hosts.yaml: two spares per host, r4…r11 on n1…n4, so n5's are r12 and r13.
    expect(sparesPerHost(config)).toBe(2);
    expect(nextSpareIds(config, 2)).toEqual(['r12', 'r13']);
    const pair = generateKeyPair();
    const sparePairs = [generateKeyPair(), generateKeyPair()];
    const n = node(pair, { spares: [{ id: 'r12', port: 7402, publicKey: sparePairs[0]!.publicKey }, { id: 'r13', port: 7401, publicKey: sparePairs[1]!.publicKey }] });
    const added = addNodeToConfig(config, n);
    const dir = join(root, 'n5-spares');
    writeBundle(dir, added, addedNodeBundle(ops, n), new Map([[n.agent, pair], ['r12', sparePairs[0]!], ['r13', sparePairs[1]!]]));
    const loaded = loadBundle(dir);
    expect(loaded.bundle.ids).toEqual(['a5', 'r12', 'r13']);
    expect(readdirSync(join(dir, 'keys')).sort()).toEqual(['a5.json', 'r12.json', 'r13.json']);
    const c = loaded.cluster.config;
    expect(c.membership.spareReplicas.slice(-2)).toEqual(['r12', 'r13']);
    expect(c.membership.spareNodes?.['r12']).toBe('n5');
    expect(c.processes.find((p) => p.id === 'r13')).toEqual({ id: 'r13', kind: 'replica', node: 'n5', listen: { host: '10.0.0.15', port: 7401 }, slots: null });
    // Replicas stay before agents, and the operator last.
    expect(c.processes.map((p) => p.kind).join(',')).toMatch(/^(replica,)+watchdog,(replica,)+(agent,)+operator$/);
    // The next host gets the next ids; once n5 is removed its spares leave the document, their
    // keys stay, so their ids never return, and the address is free again.
    expect(nextSpareIds(added, 1)).toEqual(['r14']);
    const removed = removeNodeFromConfig(added, 'n5');
    expect(removed.membership.spareReplicas).toEqual(config.membership.spareReplicas);
    expect(removed.membership.spareNodes).toEqual(config.membership.spareNodes);
    expect(removed.processes.some((p) => p.node === 'n5')).toBe(false);
    expect(nextSpareIds(removed, 1)).toEqual(['r14']);
    writeClusterConfig(join(root, 'ops-after-spares'), removed);
    expect(loadCluster(join(root, 'ops-after-spares')).config.membership.spareReplicas).toEqual(config.membership.spareReplicas);
  });

  it('an agent id already taken is a bug of the caller, not a second entry', () => {
    expect(() => addNodeToConfig(config, node(generateKeyPair(), { agent: 'a4' }))).toThrow(/a4 is taken/);
  });
});
