// The replicas a node's agent learnt at run time (PROTOCOL §10.12): spares of nodes added after
// this node's bundle was written, whose keys and addresses its cluster.json lacks. The agent
// learns each from two replicas that agree (a `replicas` or `replica.spawn` command, or two
// status replies) and keeps them in `run/added-replicas.json`, so that the daemons it starts
// later on this node — a replacement replica above all, which must verify the members it joins
// before any state reaches it — and its own next incarnation know them from the start. Only the
// agent writes the file; a file that cannot be read is reported and counts as empty (the agent
// learns the members again from the group).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { toHex } from '../base/hex.ts';
import type { ProcessId } from '../core/ports.ts';
import { addedReplica, type AddedReplica } from '../core/wire/messages.ts';
import { paths, type Cluster, type ProcessEntry } from './cluster-dir.ts';
import { writeFileAtomic } from './private-files.ts';

export const ADDED_REPLICAS_FORMAT = 'trine-added-replicas/1';
/** Replicas the file keeps, newest last: enough for every member a group could have had over
 *  many replacements; older entries are the least likely to be members still. */
export const MAX_ADDED_REPLICAS_KEPT = 64;
/** A file of MAX_ADDED_REPLICAS_KEPT entries takes about 12 KiB; a larger one is not ours. */
const MAX_FILE_BYTES = 64 * 1024;

const fail = (why: string): never => {
  throw new Error(why);
};

export const addedReplicasFile = (dir: string): string => join(paths.run(dir), 'added-replicas.json');

/** An added replica as JSON carries it (this file, a replica's status reply): its key in hex. */
export type AddedReplicaJson = { id: ProcessId; node: string; address: string; port: number; publicKey: string };

export const addedReplicaToJson = (x: AddedReplica): AddedReplicaJson =>
  ({ id: x.id, node: x.node, address: x.address, port: x.port, publicKey: toHex(x.publicKey) });

/** The inverse, checked as the wire checks an AddedReplica; null if `v` is not one. */
export function addedReplicaFromJson(v: unknown): AddedReplica | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const x = v as Record<string, unknown>;
  const hex = x['publicKey'];
  if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/.test(hex)) return null;
  const r = addedReplica.dec([x['id'], x['node'], x['address'], x['port'], new Uint8Array(Buffer.from(hex, 'hex'))], 'added');
  return r.ok ? r.value : null;
}

/** The learnt replicas on this node's disk, or why the file was not read (then none). */
export function readAddedReplicas(dir: string): { replicas: AddedReplica[]; error: string | null } {
  const path = addedReplicasFile(dir);
  if (!existsSync(path)) return { replicas: [], error: null };
  try {
    if (statSync(path).size > MAX_FILE_BYTES) throw new Error(`larger than ${MAX_FILE_BYTES} bytes`);
    const json = JSON.parse(readFileSync(path, 'utf8')) as { format?: unknown; replicas?: unknown };
    if (json.format !== ADDED_REPLICAS_FORMAT || !Array.isArray(json.replicas) || json.replicas.length > MAX_ADDED_REPLICAS_KEPT) {
      throw new Error(`not a ${ADDED_REPLICAS_FORMAT} file`);
    }
    const replicas = json.replicas.map((e: unknown, i) => addedReplicaFromJson(e) ?? fail(`replicas[${i}] is not a replica's id, node, address, port and key`));
    return { replicas, error: null };
  } catch (e) {
    return { replicas: [], error: `${path}: ${(e as Error).message}` };
  }
}

/** Keeps `learnt` with what the file has: ids already there keep their first entry (a key never
 *  changes), new ones go last, the oldest beyond MAX_ADDED_REPLICAS_KEPT go. */
export function keepAddedReplicas(dir: string, learnt: readonly AddedReplica[]): void {
  const had = readAddedReplicas(dir).replicas;
  const known = new Set(had.map((x) => x.id));
  const all = [...had, ...learnt.filter((x) => !known.has(x.id))].slice(-MAX_ADDED_REPLICAS_KEPT);
  const replicas = all.map(addedReplicaToJson);
  writeFileAtomic(addedReplicasFile(dir), `${JSON.stringify({ format: ADDED_REPLICAS_FORMAT, replicas }, null, 2)}\n`);
}

/** `cluster` with the replicas `added` that its cluster.json does not list, as spares bound to
 *  their nodes: what the daemons of this node dial, verify and count in the pool. An id
 *  cluster.json has keeps cluster.json's entry and key. */
export function withAddedReplicas(cluster: Cluster, added: readonly AddedReplica[]): Cluster {
  const c = cluster.config;
  const fresh = added.filter((x) => !cluster.publicKeys.has(x.id) && !c.processes.some((p) => p.id === x.id));
  if (fresh.length === 0) return cluster;
  const entries: ProcessEntry[] = fresh.map((x) => ({ id: x.id, kind: 'replica', node: x.node, listen: { host: x.address, port: x.port }, slots: null }));
  const publicKeys = new Map(cluster.publicKeys);
  for (const x of fresh) publicKeys.set(x.id, x.publicKey);
  return {
    ...cluster,
    publicKeys,
    config: {
      ...c,
      processes: [...c.processes, ...entries],
      publicKeys: { ...c.publicKeys, ...Object.fromEntries(fresh.map((x) => [x.id, Buffer.from(x.publicKey).toString('base64')])) },
      membership: {
        ...c.membership,
        spareReplicas: [...c.membership.spareReplicas, ...fresh.map((x) => x.id)],
        spareNodes: { ...c.membership.spareNodes, ...Object.fromEntries(fresh.map((x): [ProcessId, string] => [x.id, x.node])) },
      },
    },
  };
}
