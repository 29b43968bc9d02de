// `trine node add` and `trine node remove`: membership changes of a running cluster of several
// hosts (PROTOCOL §10.12, docs/OPERATIONS.md §8.7), from the operator's bundle. Both are signed
// operator requests the group orders like a submit (cli/op-client.ts requestOp: believed when
// two replicas agree).
//
// `add` checks everything it can locally first (the host's id and address, that neither is in
// the cluster yet, that its bundle can be written), draws the new agent's key pair, stages the
// host's bundle next to where it goes, and only then sends `node.add` with the public key. If two
// replicas agree the node is added, the staged bundle is moved into place and the operator's
// cluster.json learns the agent (so `trine logs` can read from it); otherwise the staged bundle
// is deleted and nothing is left behind. The new host holds spare replica ids too (--spares, by
// default as many as each host of `trine init`): their keys go into its bundle and their public
// keys into the request, so the group can start a replacement replica there (PROTOCOL §10.6).
//
// `remove` sends `node.remove`; the group drains the node (nothing new is placed there, with
// --kill its tasks are killed) and tells its agent to stop once no live task has a process there.
// Unless --no-wait, the command follows the agreed view until the node has left it.
//
// With --json each prints one object once done (`trine.node-add/1`, `trine.node-remove/1`,
// cli/json-out.ts) instead of its lines.
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { ProcessId } from '../src/core/ports.ts';
import type { ClusterView } from '../src/core/status.ts';
import { hostAddress } from '../src/core/wire/messages.ts';
import { DEFAULT_CLUSTER_DIR, isHostAddress, loadCluster, paths, writeClusterConfig, type Cluster, type ClusterConfig } from '../src/io/cluster-dir.ts';
import {
  addedNodeBundle, addNodeToConfig, agentListenPort, loadBundle, nextAgentId, nextSpareIds, NODE_UNIT, removeNodeFromConfig, sparesPerHost, writeBundle,
  type AddedNode, type BundleInfo,
} from '../src/io/deploy.ts';
import { isLoopback, MAX_HOST_ID_CHARS } from '../src/io/hosts-file.ts';
import { generateKeyPair, readPublicKeys, writePublicKeys } from '../src/io/keys.ts';
import { metricsForAddedHost, writeMetricsPorts } from '../src/io/metrics-ports.ts';
import { assert } from '../src/base/result.ts';
import { CliError, EXIT_FAILED, EXIT_OK, quoted } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';
import { newNonce, OP_TIMEOUT_MS, readClusterView, requestOp, VIEW_TIMEOUT_MS } from './op-client.ts';
import { OperatorClient } from './status-client.ts';

/** How long `trine node remove` waits for the node to leave the group's node list: draining
 *  waits for the node's tasks to end (or, with --kill, for their processes to be terminated,
 *  seconds), then the agent's stop is ordered and acknowledged within a heartbeat or two. A
 *  task that runs on is the operator's call, not a reason to wait forever. */
export const NODE_REMOVE_WAIT_MS = 60_000;
/** The lowest port a spare of an added host may listen on: a hosts file's lowest base port. */
const MIN_SPARE_PORT = 1024;
/** Between two reads of the agreed view while waiting: each read asks every replica. */
const REMOVE_POLL_MS = 500;

/** Process states that hold a node's slot (fsm/fsm-proc.ts): a task with one of these there keeps
 *  the node draining. */
const LIVE_PROC_STATES: readonly string[] = ['allocated', 'spawning', 'running', 'terminating'];

// ---- trine node add ----------------------------------------------------------------------------

export type NodeAddOptions = {
  dir?: string | undefined;
  id: string;
  address: string;
  slots: number;
  /** Spare replica ids for the host (default sparesPerHost of the cluster). */
  spares?: number | undefined;
  out?: string | undefined;
  timeoutMs?: number | undefined;
  json?: boolean | undefined;
};

/** The host id as a hosts file would accept it (src/io/hosts-file.ts): it becomes the node's
 *  name and its bundle's directory name. */
function checkHostId(id: string): string {
  if (id.length > MAX_HOST_ID_CHARS || !/^[a-z][a-z0-9-]*$/.test(id)) {
    throw new CliError(`--id ${quoted(id)} is not a host id: use lower-case letters, digits and "-", starting with a letter (at most ${MAX_HOST_ID_CHARS})`);
  }
  return id;
}

/** An address the other hosts can dial, short enough for the wire (PROTOCOL §10.12). */
function checkAddress(address: string): string {
  if (!isHostAddress(address) || !hostAddress.dec(address, 'address').ok) {
    throw new CliError(`--address ${quoted(address)} is not an IP address or a DNS name of at most 64 characters: give the new host's network address`);
  }
  if (['0.0.0.0', '::'].includes(address) || isLoopback(address)) {
    throw new CliError(`--address ${address} is not one the other hosts can dial: give the new host's own network address`);
  }
  return address;
}

/** The operator bundle in `dir`, checked (its operator key matches cluster.json). */
function operatorBundle(dirArg: string | undefined): { bundle: BundleInfo; cluster: Cluster } {
  const dir = resolve(dirArg ?? DEFAULT_CLUSTER_DIR);
  if (!existsSync(join(dir, 'bundle.json'))) {
    throw new CliError(`${dir} is not a bundle from \`trine init\` (no bundle.json): \`trine node add\` adds a host to a cluster of several hosts; pass the operator bundle with --dir`);
  }
  const loaded = loadBundle(dir);
  if (!loaded.bundle.roles.includes('operator')) {
    throw new CliError(`the bundle in ${dir} is host ${loaded.bundle.host}'s (${loaded.bundle.roles.join(', ')}), not the operator's: pass the operator bundle with --dir`);
  }
  return loaded;
}

/** Who in the cluster already has host id `id`, or null. */
function hostOwner(config: ClusterConfig, ops: BundleInfo, id: string): string | null {
  if (ops.host === id) return 'the operator host';
  const agent = config.membership.agents.find((a) => a.node === id);
  if (agent !== undefined) return `agent ${agent.id}'s node`;
  const p = config.processes.find((e) => e.node === id);
  if (p !== undefined) return `the node of ${p.id}`;
  if (config.nodeAddresses?.[id] !== undefined) return 'a node';
  return null;
}

/** Who in the cluster already has `address`, or null. */
function addressOwner(config: ClusterConfig, ops: BundleInfo, address: string): string | null {
  const same = (a: string) => a.toLowerCase() === address.toLowerCase();
  if (same(ops.address)) return `the operator host ${ops.host}`;
  for (const [node, a] of Object.entries(config.nodeAddresses ?? {})) if (same(a)) return `node ${node}`;
  for (const p of config.processes) {
    if (p.listen === null || !same(p.listen.host)) continue;
    return p.node !== null ? `node ${p.node}` : p.kind === 'watchdog' ? `the watchdog host (${p.id})` : p.id;
  }
  return null;
}

export async function nodeAdd(opts: NodeAddOptions): Promise<number> {
  const host = checkHostId(opts.id);
  const address = checkAddress(opts.address);
  const ops = operatorBundle(opts.dir);
  const config = ops.cluster.config;
  const usedBy = hostOwner(config, ops.bundle, host);
  if (usedBy !== null) throw new CliError(`host ${host} is already in cluster ${config.cluster} (${usedBy}): give the new host an id of its own`);
  const addressUsedBy = addressOwner(config, ops.bundle, address);
  if (addressUsedBy !== null) throw new CliError(`address ${address} is already used by ${addressUsedBy}: every host needs its own`);
  const port = agentListenPort(config);
  if (port === null) {
    throw new CliError(`no agent of cluster ${config.cluster} listens on the network (a one-host \`trine up\` cluster): \`trine node add\` adds a host to a cluster made by \`trine init\``);
  }
  const out = resolve(opts.out ?? dirname(ops.cluster.dir));
  const dest = join(out, host);
  if (existsSync(dest)) throw new CliError(`${dest} exists: pass another --out for ${host}'s bundle, or remove it if it is left from an earlier try`);
  if (existsSync(out) && !statSync(out).isDirectory()) throw new CliError(`--out ${out} is a file: pass a directory`);

  const spareCount = opts.spares ?? sparesPerHost(config);
  if (port - spareCount < MIN_SPARE_PORT) throw new CliError(`--spares ${spareCount} would listen below port ${MIN_SPARE_PORT} (spares take the ports below the agent's ${port}): give fewer`);
  const agent = nextAgentId(config);
  const pair = generateKeyPair();
  const pairs = new Map([[agent, pair]]);
  const spares = nextSpareIds(config, spareCount).map((id, k) => {
    const p = generateKeyPair();
    pairs.set(id, p);
    return { id, port: port - k - 1, publicKey: p.publicKey };
  });
  const node: AddedNode = { host, address, agent, port, slots: opts.slots, publicKey: pair.publicKey, spares };
  const added = addNodeToConfig(config, node);
  const bundle = addedNodeBundle(ops.bundle, node);
  const metrics = metricsForAddedHost(ops.cluster.dir, config, [{ id: agent, port }, ...spares.map((x) => ({ id: x.id, port: x.port }))]);
  // Staged beside its place, so a disk problem shows before the group holds a key nobody has,
  // and the rename into place cannot fail for want of space.
  const staging = join(out, `.${host}.${process.pid}.staging`);
  // What a failure removes: the staged bundle, or the first directory this command made for it.
  let madeOut: string | undefined;
  const discard = () => rmSync(madeOut ?? staging, { recursive: true, force: true });
  try {
    madeOut = mkdirSync(out, { recursive: true, mode: 0o755 });
    writeBundle(staging, added, bundle, pairs);
    if (metrics.ports !== null) writeMetricsPorts(staging, metrics.ports);
  } catch (e) {
    discard();
    throw new CliError(`cannot write ${host}'s bundle under ${out} (${(e as Error).message}): pass a writable --out`);
  }

  let outcome;
  try {
    const client = await OperatorClient.open(ops.cluster);
    try {
      outcome = await requestOp(client, { type: 'node.add', nonce: newNonce(), agent, node: host, address, port, publicKey: pair.publicKey, spares }, opts.timeoutMs ?? OP_TIMEOUT_MS);
    } finally {
      await client.close();
    }
  } catch (e) {
    discard();
    if (e instanceof CliError && e.exitCode === EXIT_FAILED) {
      throw new CliError(
        `${e.message}; no bundle was written: if \`trine nodes\` lists ${host}, the group added it with a key nobody holds: remove it (\`trine node remove ${host}\`) and add the host under another id`,
        EXIT_FAILED,
        e.code,
      );
    }
    throw e;
  }
  if (!outcome.ok) {
    discard();
    throw new CliError(`the group refused to add ${host}: ${outcome.text}: nothing was written; see \`trine nodes\``, EXIT_FAILED, 'REFUSED');
  }
  renameSync(staging, dest);
  updateOperatorKeys(ops.cluster.dir, added, pairs);
  // The group has added the node: a failure to update the operator's file is only a warning.
  let metricsWarning = metrics.warning;
  if (metrics.ports !== null) {
    try {
      writeMetricsPorts(ops.cluster.dir, metrics.ports);
    } catch (e) {
      metricsWarning = `the node is added and its bundle has its metrics.json, but ${ops.cluster.dir}/metrics.json could not be updated (${(e as Error).message}): \`trine status\` will not list the new endpoints until it is`;
    }
  }
  const ports = metrics.ports;
  const metricsPorts = ports === null ? null : Object.fromEntries([agent, ...spares.map((x) => x.id)].map((id) => {
    const p = ports.get(id);
    assert(p !== undefined, `node add: no metrics port for ${id}`);
    return [id, p] as const;
  }));
  if (opts.json === true) {
    emitJson(SCHEMAS.nodeAdd, {
      host, address, agent, port, slots: opts.slots, spares: spares.map((x) => ({ id: x.id, port: x.port })), bundle: dest,
      installDir: bundle.install.dir, unit: NODE_UNIT, clusterJson: paths.config(ops.cluster.dir), rsn: outcome.rsn, agreedBy: outcome.agreedBy, answer: outcome.text,
      metricsPorts, ...(metricsWarning === null ? {} : { metricsWarning }),
    });
    return EXIT_OK;
  }
  const spareText = spares.length === 0 ? 'no spare replica ids' : `spare replica${spares.length === 1 ? '' : 's'} ${spares.map((x) => `${x.id} on port ${x.port}`).join(', ')}`;
  process.stdout.write(
    `${outcome.text} (RSN ${outcome.rsn}): bundle in ${dest} (${opts.slots} slots, agent ${agent} listening on port ${port}, ${spareText}), and ` +
      `${paths.config(ops.cluster.dir)} lists it; copy the bundle to ${bundle.install.dir} on ${host} and start ${NODE_UNIT} there (docs/OPERATIONS.md §8.7)\n`,
  );
  if (metricsPorts !== null) process.stdout.write(`metrics: ${Object.entries(metricsPorts).map(([id, p]) => `${id} on port ${p}`).join(', ')} (metrics.json in the bundle)\n`);
  if (metricsWarning !== null) process.stderr.write(`trine: warning: ${metricsWarning}\n`);
  return EXIT_OK;
}

/** The operator bundle's cluster.json (and keys/public.json, where a bundle has one) with the
 *  new agent and spares: `trine logs` reads a task's output from the agent of the node it ran
 *  on, and `trine status` asks every replica of the pool. */
function updateOperatorKeys(dir: string, config: ClusterConfig, pairs: ReadonlyMap<ProcessId, { publicKey: Uint8Array }>): void {
  writeClusterConfig(dir, config);
  if (existsSync(paths.publicKeys(dir))) {
    const table = readPublicKeys(paths.publicKeys(dir));
    for (const [id, p] of pairs) table.set(id, p.publicKey);
    writePublicKeys(paths.publicKeys(dir), table);
  }
}

// ---- trine node remove -------------------------------------------------------------------------

export type NodeRemoveOptions = {
  dir?: string | undefined;
  host: string;
  kill: boolean;
  wait: boolean;
  /** How long to wait for the node to leave the group (default NODE_REMOVE_WAIT_MS). */
  timeoutMs?: number | undefined;
  json?: boolean | undefined;
};

/** Tasks that still have a live process on `node`, as "t3 (2 processes)". */
export function tasksOn(view: ClusterView, node: string): string[] {
  return view.tasks.flatMap((t) => {
    const n = t.procs.filter((p) => p.node === node && LIVE_PROC_STATES.includes(p.state)).length;
    return n === 0 ? [] : [`${t.id} (${n} process${n === 1 ? '' : 'es'})`];
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function nodeRemove(opts: NodeRemoveOptions): Promise<number> {
  const cluster = loadCluster(opts.dir);
  const nodes = cluster.config.membership.agents.map((a) => a.node);
  if (!nodes.includes(opts.host)) {
    throw new CliError(`no node ${opts.host} in ${paths.config(cluster.dir)}: use one of ${nodes.join(', ')} (see \`trine nodes\`)`);
  }
  const host = opts.host;
  const waitMs = opts.timeoutMs ?? NODE_REMOVE_WAIT_MS;
  const client = await OperatorClient.open(cluster);
  try {
    const startedAt = Date.now();
    const outcome = await requestOp(client, { type: 'node.remove', nonce: newNonce(), node: host, kill: opts.kill }, OP_TIMEOUT_MS);
    if (!outcome.ok) throw new CliError(`the group refused to remove ${host}: ${outcome.text}: see \`trine nodes\` and \`trine status\``, EXIT_FAILED, 'REFUSED');
    const json = opts.json === true;
    const agreed = { host, kill: opts.kill, rsn: outcome.rsn, agreedBy: outcome.agreedBy, answer: outcome.text };
    if (!json) process.stdout.write(`${outcome.text} (RSN ${outcome.rsn})\n`);
    if (!opts.wait) {
      if (json) emitJson(SCHEMAS.nodeRemove, { ...agreed, waited: false, removed: false, elapsedMs: null, clusterJsonUpdated: false });
      return EXIT_OK;
    }
    const deadline = Date.now() + waitMs;
    let last: ClusterView | null = null;
    for (;;) {
      try {
        last = (await readClusterView(client, VIEW_TIMEOUT_MS)).view;
      } catch (e) {
        if (!(e instanceof CliError)) throw e; // no view this round: ask again until the deadline
      }
      const still = last?.nodes.find((n) => n.node === host);
      if (last !== null && still === undefined) break;
      if (Date.now() >= deadline) throw stillThere(host, waitMs, last, opts.kill);
      await sleep(REMOVE_POLL_MS);
    }
    const forgotten = forgetNode(cluster, host);
    if (json) {
      emitJson(SCHEMAS.nodeRemove, { ...agreed, waited: true, removed: true, elapsedMs: Date.now() - startedAt, clusterJsonUpdated: forgotten });
      return EXIT_OK;
    }
    process.stdout.write(
      `${host} removed: gone from the group's node list after ${((Date.now() - startedAt) / 1000).toFixed(1)} s; its agent was told to stop ` +
        `(its \`trine node run\` exits 4, which its unit does not restart)${forgotten ? `; ${paths.config(cluster.dir)} no longer lists it` : ''}\n`,
    );
    return EXIT_OK;
  } finally {
    await client.close();
  }
}

/** The error for a node still listed when the wait ends: what keeps it, and what to do. */
function stillThere(host: string, waitMs: number, view: ClusterView | null, killed: boolean): CliError {
  const after = `${host} is still in the group's node list after ${waitMs / 1000} s`;
  if (view === null) return new CliError(`${after} (no two replicas agreed on a view): check \`trine status\`, then \`trine nodes\``, EXIT_FAILED, 'STILL_THERE');
  const state = view.nodes.find((n) => n.node === host)?.state ?? 'listed';
  const tasks = tasksOn(view, host);
  if (tasks.length > 0) {
    const advice = killed ? 'they are being killed; check `trine ps`' : `wait for them, kill them (\`trine kill TASK\`) or run \`trine node remove ${host} --kill\``;
    return new CliError(`${after} (${state}): ${tasks.join(', ')} still run there: ${advice}`, EXIT_FAILED, 'STILL_THERE');
  }
  return new CliError(`${after} (${state}), with no task there: its agent has not stopped yet; check \`trine status\` and ${host}'s \`trine node run\``, EXIT_FAILED, 'STILL_THERE');
}

/** Drops a removed node's agent from the operator bundle's cluster.json (keeping its public key,
 *  so its agent id is never given to another host), so its host id and address can be added
 *  again. Only in a bundle from `trine init`: a `trine up` cluster dir is shared by every daemon
 *  of the cluster, whose cluster.json is left as `trine up` wrote it. */
function forgetNode(cluster: Cluster, host: string): boolean {
  if (!existsSync(join(cluster.dir, 'bundle.json'))) return false;
  writeClusterConfig(cluster.dir, removeNodeFromConfig(cluster.config, host));
  return true;
}
