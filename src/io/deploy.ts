// Deployment bundles for a cluster of several hosts (`trine init`, docs/OPERATIONS.md §8). From a
// checked hosts file it plans the cluster document — the same `cluster.json` a one-host cluster
// has, with every listen address on its host's own address, spares bound to the agent hosts that
// hold their keys, the nodes' addresses and the reset driver — and writes one bundle per host:
// that document, the host's own private keys (mode 0600) and nothing of any other host, a
// `bundle.json` that says whose bundle it is, and the host's systemd unit. A bundle is a cluster
// directory: daemons started from it find their key where `trine up`'s find theirs, and write
// their logs and records inside it. `trine node add` (cli/node-admin.ts) writes one more agent
// host's bundle the same way, from the operator's cluster document plus that host's agent and
// spares.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bytesEqual } from '../base/bytes.ts';
import { DEFAULT_TIMING, EXIT_SHUTDOWN, PUBLIC_KEY_BYTES } from '../core/constants.ts';
import type { ProcessId } from '../core/ports.ts';
import {
  CLUSTER_FORMAT, ClusterDirError, loadCluster, OPERATOR_ID, paths, REPLICA_COUNT, WATCHDOG_ID, writeClusterConfig,
  type Cluster, type ClusterConfig, type ProcessEntry,
} from './cluster-dir.ts';
import { HOST_ROLES, type HostEntry, type HostRole, type HostsFile } from './hosts-file.ts';
import { processId } from '../core/wire/messages.ts';
import { generateKeyPair, KeyFileError, readKeyFile, writeKeyFile, type KeyPair } from './keys.ts';
import { mkdirPrivate, PRIVATE_DIR_MODE } from './private-files.ts';
import { writeMetricsPorts } from './metrics-ports.ts';

export const BUNDLE_FORMAT = 'trine-bundle/1';
/** bundle.json names three short lists; a larger file is not one. */
const MAX_BUNDLE_FILE_BYTES = 64 * 1024;

export const NODE_UNIT = 'trine-node.service';
export const SCC_UNIT = 'trine-scc.service';

/** What `bundle.json` records: which host this bundle is for and which keys it holds. */
export type BundleInfo = {
  format: typeof BUNDLE_FORMAT;
  cluster: string;
  host: string;
  address: string;
  roles: HostRole[];
  /** The processes whose private keys are in `keys/`: this host's and no other's. */
  ids: ProcessId[];
  install: HostsFile['install'];
};

export type Plan = { config: ClusterConfig; bundles: BundleInfo[] };

/** The process ids and listen addresses of a hosts file's cluster; keys are filled in by the
 *  caller (planDeployment with generated keys, tests with fixed ones). */
export function planDeployment(file: HostsFile, keyOf: (id: ProcessId) => Uint8Array): Plan {
  const cluster = `${file.name}-${randomBytes(6).toString('hex')}`;
  const agentHosts = file.hosts.filter((h) => h.roles.includes('agent'));
  const replicaHosts = file.hosts.filter((h) => h.roles.includes('replica'));
  const watchdogHost = file.hosts.find((h) => h.roles.includes('watchdog')) as HostEntry;
  const operatorHost = file.hosts.find((h) => h.roles.includes('operator')) as HostEntry;
  const at = (h: HostEntry, offset: number) => ({ host: h.address, port: file.basePort + offset });
  const owner = new Map<ProcessId, string>();
  const processes: ProcessEntry[] = [];
  const add = (e: ProcessEntry, host: HostEntry) => {
    processes.push(e);
    owner.set(e.id, host.id);
  };
  replicaHosts.forEach((h, i) => add({ id: `r${i + 1}`, kind: 'replica', node: h.id, listen: at(h, 0), slots: null }, h));
  add({ id: WATCHDOG_ID, kind: 'watchdog', node: null, listen: at(watchdogHost, 0), slots: null }, watchdogHost);
  // Spares: `sparesPerHost` per agent host, on the ports after the host's replica port.
  const spares: ProcessId[] = [];
  for (let k = 1; k <= file.sparesPerHost; k++) {
    for (const h of agentHosts) {
      const id = `r${REPLICA_COUNT + spares.length + 1}`;
      spares.push(id);
      add({ id, kind: 'replica', node: h.id, listen: at(h, k), slots: null }, h);
    }
  }
  // Agents listen too, on the port after the host's spares (the replica has the base port, the
  // spares the next sparesPerHost): the operator reads a task's output from the agent of the
  // node that ran it, since it lives on that host only (PROTOCOL §7.1). Nobody else dials an
  // agent; agents of a one-host `trine up` cluster keep `listen: null`.
  agentHosts.forEach((h, i) => add({ id: `a${i + 1}`, kind: 'agent', node: h.id, listen: at(h, file.sparesPerHost + 1), slots: h.slots }, h));
  add({ id: OPERATOR_ID, kind: 'operator', node: null, listen: null, slots: null }, operatorHost);

  const publicKeys: Record<ProcessId, string> = {};
  for (const p of processes) {
    const key = keyOf(p.id);
    if (key.length !== PUBLIC_KEY_BYTES) throw new TypeError(`public key of ${p.id} is ${key.length} bytes`);
    publicKeys[p.id] = Buffer.from(key).toString('base64');
  }
  const replicaIds = processes.filter((p) => p.kind === 'replica' && !spares.includes(p.id));
  const config: ClusterConfig = {
    format: CLUSTER_FORMAT,
    cluster,
    createdAt: new Date().toISOString(),
    membership: {
      cluster,
      replicas: replicaIds.map((p) => p.id),
      replicaNodes: replicaIds.map((p) => p.node as string),
      spareReplicas: spares,
      spareNodes: Object.fromEntries(spares.map((id) => [id, owner.get(id) as string])),
      agents: processes.filter((p) => p.kind === 'agent').map((p) => ({ id: p.id, node: p.node as string })),
      scc: WATCHDOG_ID,
      operators: [OPERATOR_ID],
      timing: { ...DEFAULT_TIMING, ...file.timing },
    },
    processes,
    publicKeys,
    nodeAddresses: Object.fromEntries(agentHosts.map((h) => [h.id, h.address])),
    resetDriver: file.reset.driver,
    ...(file.reset.driver === 'command' ? { resetCommand: [...file.reset.command] } : {}),
    taskUser: file.taskUser,
    ...(file.allowInject ? { allowInject: true } : {}),
  };
  const bundles: BundleInfo[] = file.hosts.map((h) => ({
    format: BUNDLE_FORMAT,
    cluster,
    host: h.id,
    address: h.address,
    roles: [...h.roles],
    ids: processes.filter((p) => owner.get(p.id) === h.id).map((p) => p.id),
    install: { ...file.install },
  }));
  return { config, bundles };
}

/** Writes every bundle under `out/<host>/`, and the public cluster document as
 *  `out/cluster.json`. Fresh keys for every process; each private key is written into its own
 *  host's bundle only, then forgotten. `out` must not exist or be empty. */
export function writeDeployment(file: HostsFile, outArg: string): Plan {
  const out = resolve(outArg);
  if (existsSync(out) && (!statSync(out).isDirectory() || readdirSync(out).length > 0)) {
    throw new ClusterDirError('BAD_ARGUMENT', `${out} exists and is not empty: pass a new --out (init makes fresh keys; mixing them with an earlier cluster's would break both)`);
  }
  const pairs = new Map<ProcessId, KeyPair>();
  const plan = planDeployment(file, (id) => {
    const pair = generateKeyPair();
    pairs.set(id, pair);
    return pair.publicKey;
  });
  mkdirSync(out, { recursive: true, mode: 0o755 });
  writeFileSync(join(out, 'cluster.json'), `${JSON.stringify(plan.config, null, 2)}\n`);
  for (const b of plan.bundles) writeBundle(join(out, b.host), plan.config, b, pairs);
  pairs.clear();
  // Metrics (hosts file `metrics-port:`): the same metrics.json beside the operator's cluster
  // document and in every bundle, each daemon shifted from its listen port.
  if (file.metricsPort !== undefined) {
    const ports = hostsMetricsPorts(plan.config, file.basePort, file.metricsPort);
    writeMetricsPorts(out, ports);
    for (const b of plan.bundles) writeMetricsPorts(join(out, b.host), ports);
  }
  return plan;
}

/** A hosts cluster's metrics ports: `metricsPort` + (listen port − `basePort`) for every daemon,
 *  so they never clash on a host where the listen ports do not. */
export function hostsMetricsPorts(config: ClusterConfig, basePort: number, metricsPort: number): Map<ProcessId, number> {
  const ports = new Map<ProcessId, number>();
  for (const p of config.processes) if (p.kind !== 'operator' && p.listen !== null) ports.set(p.id, metricsPort + p.listen.port - basePort);
  return ports;
}

/** Writes one host's bundle into the new directory `dir` (mode 0700): the cluster document, the
 *  private keys of the ids `b` lists (0600, in keys/ 0700), the logs/ and run/ its daemons write
 *  to (0700, src/io/private-files.ts), bundle.json and its systemd unit. */
export function writeBundle(dir: string, config: ClusterConfig, b: BundleInfo, pairs: ReadonlyMap<ProcessId, KeyPair>): void {
  mkdirSync(dir, { mode: PRIVATE_DIR_MODE }); // not recursive: an existing dir is refused
  chmodSync(dir, PRIVATE_DIR_MODE); // the umask may have narrowed it
  writeClusterConfig(dir, config);
  mkdirPrivate(paths.keys(dir));
  for (const id of b.ids) {
    const pair = pairs.get(id);
    if (pair === undefined) throw new TypeError(`no key pair for ${id} of host ${b.host}`);
    writeKeyFile(paths.keyFile(dir, id), id, pair);
  }
  writeFileSync(join(dir, 'bundle.json'), `${JSON.stringify(b, null, 2)}\n`);
  const unit = systemdUnit(b);
  if (unit !== null) writeFileSync(join(dir, unit.name), unit.text);
}

// ---- a node added at run time (`trine node add`, PROTOCOL §10.12) ------------------------------

/** A host added to a running cluster: an agent, and the spare replica ids whose keys its bundle
 *  holds (PROTOCOL §10.12), which the group may start there when it replaces a replica (§10.6).
 *  Spare k listens on the agent's port less k, where a host of `trine init` has its replica
 *  and spare ports. */
export type AddedNode = {
  host: string; address: string; agent: ProcessId; port: number; slots: number; publicKey: Uint8Array;
  spares: { id: ProcessId; port: number; publicKey: Uint8Array }[];
};

/** Spare ids a host of `trine init` holds at most (the hosts file's `spares-per-host`): what
 *  `trine node add` gives a new host unless told otherwise. */
export function sparesPerHost(config: ClusterConfig): number {
  const counts = new Map<string, number>();
  for (const node of Object.values(config.membership.spareNodes ?? {})) counts.set(node, (counts.get(node) ?? 0) + 1);
  return Math.max(0, ...counts.values());
}

/** The `count` lowest ids `r<k>` that no process has and no key was ever recorded for, as
 *  nextAgentId does for agents: a removed node's spares keep their keys, so no id returns. */
export function nextSpareIds(config: ClusterConfig, count: number): ProcessId[] {
  const taken = new Set<string>([...config.processes.map((p) => p.id), ...Object.keys(config.publicKeys)]);
  const out: ProcessId[] = [];
  for (let k = 1; out.length < count; k++) if (!taken.has(`r${k}`)) out.push(`r${k}`);
  return out;
}

/** The lowest agent id `a<k>` that no process of the cluster has and no public key was ever
 *  recorded for: a removed node's agent keeps its key in the operator's cluster.json, so its id
 *  is never handed to another host (the group may still know it, with the old key). */
export function nextAgentId(config: ClusterConfig): ProcessId {
  const taken = new Set<string>([...config.processes.map((p) => p.id), ...Object.keys(config.publicKeys)]);
  for (let k = 1; ; k++) {
    if (!taken.has(`a${k}`)) return `a${k}`;
  }
}

/** The port the cluster's agents listen on (`trine init` gives every agent host the same one,
 *  after its replica and spare ports), or null if no agent listens (a one-host `trine up`
 *  cluster, whose agents nobody dials). */
export function agentListenPort(config: ClusterConfig): number | null {
  const counts = new Map<number, number>();
  for (const p of config.processes) if (p.kind === 'agent' && p.listen !== null) counts.set(p.listen.port, (counts.get(p.listen.port) ?? 0) + 1);
  let best: number | null = null;
  for (const [port, n] of counts) if (best === null || n > (counts.get(best) ?? 0) || (n === counts.get(best) && port < best)) best = port;
  return best;
}

/** The cluster document with node `n` added: its agent's process entry (listening on the
 *  host's address, for the operator's log reads), membership entry, node address and public
 *  key. Everything else is as it was. */
export function addNodeToConfig(config: ClusterConfig, n: AddedNode): ClusterConfig {
  if (config.processes.some((p) => p.id === n.agent) || config.publicKeys[n.agent] !== undefined) throw new TypeError(`agent id ${n.agent} is taken`);
  for (const k of [n, ...n.spares]) if (k.publicKey.length !== PUBLIC_KEY_BYTES) throw new TypeError(`a public key of ${n.host} is ${k.publicKey.length} bytes`);
  for (const x of n.spares) if (config.processes.some((p) => p.id === x.id) || config.publicKeys[x.id] !== undefined) throw new TypeError(`spare id ${x.id} is taken`);
  const spares: ProcessEntry[] = n.spares.map((x) => ({ id: x.id, kind: 'replica', node: n.host, listen: { host: n.address, port: x.port }, slots: null }));
  const entry: ProcessEntry = { id: n.agent, kind: 'agent', node: n.host, listen: { host: n.address, port: n.port }, slots: n.slots };
  // Spares after the other replicas, the agent after the other agents; the operator's entry
  // stays last, as `trine init` writes it.
  const replicasEnd = config.processes.findLastIndex((p) => p.kind === 'replica') + 1;
  const withSpares = [...config.processes.slice(0, replicasEnd), ...spares, ...config.processes.slice(replicasEnd)];
  const at = withSpares.findIndex((p) => p.kind === 'operator');
  const processes = at < 0 ? [...withSpares, entry] : [...withSpares.slice(0, at), entry, ...withSpares.slice(at)];
  const keys = [[n.agent, n.publicKey] as const, ...n.spares.map((x) => [x.id, x.publicKey] as const)];
  return {
    ...config,
    membership: {
      ...config.membership,
      agents: [...config.membership.agents, { id: n.agent, node: n.host }],
      spareReplicas: [...config.membership.spareReplicas, ...n.spares.map((x) => x.id)],
      ...(n.spares.length === 0 && config.membership.spareNodes === undefined ? {} : {
        spareNodes: { ...config.membership.spareNodes, ...Object.fromEntries(n.spares.map((x) => [x.id, n.host])) },
      }),
    },
    processes,
    publicKeys: { ...config.publicKeys, ...Object.fromEntries(keys.map(([id, k]) => [id, Buffer.from(k).toString('base64')])) },
    nodeAddresses: { ...config.nodeAddresses, [n.host]: n.address },
  };
}

/** The cluster document without node `node`'s agent and spares (process entries, membership
 *  entries, node address), once the group has removed the node: the group never starts a spare
 *  on a node it does not have. Their public keys stay, so nextAgentId and nextSpareIds never
 *  give their ids to another host, and the host's address is free for it to be added again. */
export function removeNodeFromConfig(config: ClusterConfig, node: string): ClusterConfig {
  const m = config.membership;
  const spares = new Set(m.spareReplicas.filter((r) => m.spareNodes?.[r] === node));
  const gone = new Set(config.processes.filter((p) => (p.kind === 'agent' && p.node === node) || spares.has(p.id)).map((p) => p.id));
  const nodeAddresses = Object.fromEntries(Object.entries(config.nodeAddresses ?? {}).filter(([n]) => n !== node));
  const spareNodes = Object.fromEntries(Object.entries(m.spareNodes ?? {}).filter(([r]) => !spares.has(r)));
  return {
    ...config,
    membership: {
      ...m,
      agents: m.agents.filter((a) => !gone.has(a.id)),
      spareReplicas: m.spareReplicas.filter((r) => !spares.has(r)),
      ...(m.spareNodes === undefined ? {} : { spareNodes }),
    },
    processes: config.processes.filter((p) => !gone.has(p.id)),
    ...(config.nodeAddresses === undefined ? {} : { nodeAddresses }),
  };
}

/** bundle.json of an added node: an agent host of the operator's cluster, installed where the
 *  operator bundle says the others are. */
export function addedNodeBundle(ops: BundleInfo, n: AddedNode): BundleInfo {
  return { format: BUNDLE_FORMAT, cluster: ops.cluster, host: n.host, address: n.address, roles: ['agent'], ids: [n.agent, ...n.spares.map((x) => x.id)], install: { ...ops.install } };
}

/** The systemd unit a host runs (none for an operator-only host). `KillMode=control-group`: a
 *  stop ends every process of the node, task processes included, as a power-off would. */
export function systemdUnit(b: BundleInfo): { name: string; text: string } | null {
  const scc = b.roles.includes('watchdog');
  if (!scc && !b.roles.includes('agent')) return null;
  const what = scc ? 'watchdog' : `node ${b.host} (${b.roles.filter((r) => r !== 'operator').join(', ')})`;
  const text = [
    '[Unit]',
    `Description=Trine ${what} of cluster ${b.cluster}`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `User=${b.install.user}`,
    `ExecStart=${b.install.trine} ${scc ? 'scc' : 'node'} run --bundle ${b.install.dir}`,
    'Restart=always',
    // `trine shutdown` (PROTOCOL §10.11): the node stops for good, until started again.
    `RestartPreventExitStatus=${EXIT_SHUTDOWN}`,
    'RestartSec=2',
    'KillMode=control-group',
    'TimeoutStopSec=15',
    'LimitNOFILE=65536',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
  return { name: scc ? SCC_UNIT : NODE_UNIT, text };
}

export class BundleError extends Error {
  override readonly name = 'BundleError';
  constructor(readonly code: 'BUNDLE_INVALID' | 'BUNDLE_KEY_MISSING', message: string) {
    super(message);
  }
}

/** A bundle directory, checked: bundle.json, the cluster document, and a key for each id it
 *  lists that matches the document's public key. */
export function loadBundle(dirArg: string): { bundle: BundleInfo; cluster: Cluster } {
  const dir = resolve(dirArg);
  const infoPath = join(dir, 'bundle.json');
  if (!existsSync(infoPath)) {
    throw new BundleError('BUNDLE_INVALID', `${dir} is not a Trine bundle (no bundle.json): pass the directory \`trine init\` wrote for this host`);
  }
  let json: unknown;
  try {
    if (statSync(infoPath).size > MAX_BUNDLE_FILE_BYTES) throw new Error('too large');
    json = JSON.parse(readFileSync(infoPath, 'utf8'));
  } catch (e) {
    throw new BundleError('BUNDLE_INVALID', `${infoPath} is not a bundle file (${(e as Error).message}): copy this host's bundle from \`trine init\`'s output again`);
  }
  const b = json as Partial<BundleInfo>;
  const isId = (v: unknown) => processId.dec(v, 'id').ok;
  if (
    typeof json !== 'object' || json === null || b.format !== BUNDLE_FORMAT || !isId(b.host) || typeof b.address !== 'string' ||
    !Array.isArray(b.ids) || b.ids.length === 0 || !b.ids.every(isId) || !Array.isArray(b.roles) || b.roles.length === 0 ||
    !b.roles.every((r) => (HOST_ROLES as readonly unknown[]).includes(r))
  ) {
    throw new BundleError('BUNDLE_INVALID', `${infoPath} is not a ${BUNDLE_FORMAT} file: copy this host's bundle from \`trine init\`'s output again`);
  }
  const cluster = loadCluster(dir);
  if (b.cluster !== cluster.config.cluster) {
    throw new BundleError('BUNDLE_INVALID', `${infoPath} is for cluster ${String(b.cluster)} but cluster.json is for ${cluster.config.cluster}: the bundle mixes two clusters; copy it again from one \`trine init\` output`);
  }
  for (const id of b.ids) {
    const path = paths.keyFile(dir, id);
    let key;
    try {
      key = readKeyFile(path);
    } catch (e) {
      const missing = e instanceof KeyFileError && e.code === 'KEY_FILE_MISSING';
      throw new BundleError('BUNDLE_KEY_MISSING', `bundle of host ${b.host} ${missing ? `has no key for ${id} (${path})` : `has a bad key for ${id}: ${(e as Error).message}`}: copy the host's keys/ from \`trine init\`'s output again`);
    }
    const expected = cluster.publicKeys.get(id);
    if (expected === undefined || !bytesEqual(expected, key.publicKey)) {
      throw new BundleError('BUNDLE_KEY_MISSING', `${path} is not ${id}'s key in this cluster's cluster.json: the bundle mixes two clusters; copy it again from one \`trine init\` output`);
    }
  }
  return { bundle: b as BundleInfo, cluster };
}
