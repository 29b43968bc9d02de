// The cluster directory (default `./.trine`, docs/OPERATIONS.md §2): its layout, the typed
// `cluster.json` (cluster id, membership with timing, process → node map, listen addresses,
// public keys), key generation for every process, pid files, and port allocation for
// `trine up`. Every failure is a ClusterDirError whose message says what is wrong and what to do.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, isIP } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { DEFAULT_TIMING, LOOPBACK_HOST, MAX_LIST_ENTRIES, PUBLIC_KEY_BYTES, REPLICA_COUNT, type Timing } from '../core/constants.ts';
import type { Membership } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import { quoted } from '../core/quoted.ts';
import { processId } from '../core/wire/messages.ts';
import { generateKeyPair, readPublicKeys, writeKeyFile, writePublicKeys } from './keys.ts';
import { mkdirPrivate, writeFilePrivate } from './private-files.ts';
import type { Endpoint } from './ws-transport.ts';

export const DEFAULT_CLUSTER_DIR = '.trine';
/** The `format` field of cluster.json: a file without it was not written by this Trine. */
export const CLUSTER_FORMAT = 'trine-cluster/1';
// The one-host default address and the group size, from the core's constants (re-exported for
// the io and CLI code that reads them here).
export { LOOPBACK_HOST, REPLICA_COUNT };
/** Spare replica ids (r4, r5, …) a local cluster holds for replacements (PROTOCOL §10.6): each
 *  has its key and port from the start, and is started only when the group commands it. Six
 *  replacements before `trine up` has to be run again. */
export const SPARE_REPLICA_COUNT = 6;
/** Nodes of a local cluster: three host the replicas, so fewer cannot place them apart. The
 *  upper bound keeps `trine up` to a cluster one machine can run. */
export const MIN_NODES = 3;
export const MAX_NODES = 64;
export const DEFAULT_NODES = 4;
/** Process slots an agent offers the scheduler (`node.join`): one per core of a small node. */
export const DEFAULT_AGENT_SLOTS = 4;
/** cluster.json lists a few dozen processes; a file far larger is not ours. */
const MAX_CONFIG_BYTES = 1024 * 1024;

export const WATCHDOG_ID = 'scc';
export const OPERATOR_ID = 'op';

export type ProcessKind = 'replica' | 'agent' | 'watchdog' | 'operator';

export type ProcessEntry = {
  id: ProcessId;
  kind: ProcessKind;
  /** The node it runs on; null for the watchdog (its own trusted computer) and the operator. */
  node: string | null;
  /** Where it listens (replicas and the watchdog); dialers find it here. */
  listen: Endpoint | null;
  /** Agents: slots announced in `node.join`. */
  slots: number | null;
};

export type ClusterConfig = {
  format: typeof CLUSTER_FORMAT;
  cluster: string;
  createdAt: string;
  membership: Membership;
  processes: ProcessEntry[];
  /** Ed25519 public key of every process, base64. */
  publicKeys: Record<ProcessId, string>;
  /** `trine up --allow-inject`: the daemons install their fault-injection hooks at start and
   *  `trine inject` may act on the cluster (docs/OPERATIONS.md §7). Absent means false, so files
   *  written before the field existed stay valid; `trine up` writes it only when true. */
  allowInject?: boolean;
  /** A cluster of several hosts (`trine init`, docs/OPERATIONS.md §8): each node's network
   *  address, which its agent hands to its task processes (G-MPI binds it) and the `command`
   *  reset driver passes to the reset command. Absent on a one-host `trine up` cluster. */
  nodeAddresses?: Record<string, string>;
  /** How the watchdog resets a node (src/io/reset-driver.ts): absent means `local`. */
  resetDriver?: 'local' | 'log' | 'command';
  /** The `command` driver's command line, `{node}` and `{address}` replaced in each argument. */
  resetCommand?: string[];
  /** The unprivileged user every task process runs as (src/io/spawner.ts; FAULT-MODEL "Tasks and
   *  Trine's secrets"). `trine init` writes it (hosts file `task-user:`, default `nobody`);
   *  absent on a `trine up` cluster unless TRINE_TASK_USER was set: tasks then run as the
   *  daemons' own user. */
  taskUser?: string;
};

/** A loaded cluster: the config, its absolute dir and the decoded public keys. */
export type Cluster = { dir: string; config: ClusterConfig; publicKeys: Map<ProcessId, Uint8Array> };

export type ClusterDirErrorCode = 'NO_CLUSTER' | 'FOREIGN_DIR' | 'INVALID_CONFIG' | 'PORT_IN_USE' | 'CLUSTER_RUNNING' | 'BAD_ARGUMENT';

export class ClusterDirError extends Error {
  override readonly name = 'ClusterDirError';
  constructor(readonly code: ClusterDirErrorCode, message: string) {
    super(message);
  }
}

// ---- layout -----------------------------------------------------------------------------------

export function resolveClusterDir(dir: string | undefined): string {
  return resolve(dir ?? DEFAULT_CLUSTER_DIR);
}

export const paths = {
  config: (dir: string) => join(dir, 'cluster.json'),
  keys: (dir: string) => join(dir, 'keys'),
  keyFile: (dir: string, id: ProcessId) => join(dir, 'keys', `${id}.json`),
  publicKeys: (dir: string) => join(dir, 'keys', 'public.json'),
  logs: (dir: string) => join(dir, 'logs'),
  /** The daemon's stdout and stderr: anything printed before its logger is up, and crashes. */
  output: (dir: string, id: ProcessId) => join(dir, 'logs', `${id}.out`),
  /** Task process output: `<taskLogs>/<task>/<vpid>.out` and `.err` (src/io/spawner.ts). On a
   *  local cluster every node shares it, so `trine logs` reads it directly. */
  taskLogs: (dir: string) => join(dir, 'logs', 'tasks'),
  /** An agent's record of the processes it started, read by its next incarnation to adopt the
   *  survivors and kill orphans (PROTOCOL §8.6). */
  procsFile: (dir: string, id: ProcessId) => join(dir, 'run', `${id}.procs.json`),
  run: (dir: string) => join(dir, 'run'),
  // The agent's socket for linked task processes is abstract, not in this dir (PROTOCOL §9.4,
  // src/daemon/app-socket.ts agentSocketName).
  pidFile: (dir: string, id: ProcessId) => join(dir, 'run', `${id}.pid`),
  incFile: (dir: string, id: ProcessId) => join(dir, 'run', `${id}.inc`),
  /** A replica's task journal: the accepted, unfinished tasks a cluster reset restores
   *  (src/core/task-journal.ts, PROTOCOL §10.9). */
  taskJournal: (dir: string, id: ProcessId) => join(dir, 'run', `${id}${TASK_JOURNAL_SUFFIX}`),
  /** Written by an agent that stops because the operator shut the cluster down (PROTOCOL
   *  §10.11): `trine node run` then exits with EXIT_SHUTDOWN instead of asking to be restarted. */
  shutdownFile: (dir: string, id: ProcessId) => join(dir, 'run', `${id}.shutdown`),
};
export const TASK_JOURNAL_SUFFIX = '.tasks';

// ---- planning a local cluster -------------------------------------------------------------------

export type ClusterPlan = { nodes: number; ports: readonly number[]; timing?: Partial<Timing>; allowInject?: boolean; taskUser?: string };

/** The process ids of a local cluster of `nodes` nodes, listeners first (they get the ports). */
export function clusterIds(nodes: number): { listeners: ProcessId[]; agents: ProcessId[]; spares: ProcessId[]; all: ProcessId[] } {
  const replicas = Array.from({ length: REPLICA_COUNT }, (_, i) => `r${i + 1}`);
  const spares = Array.from({ length: SPARE_REPLICA_COUNT }, (_, i) => `r${REPLICA_COUNT + i + 1}`);
  const agents = Array.from({ length: nodes }, (_, i) => `a${i + 1}`);
  const listeners = [...replicas, WATCHDOG_ID, ...spares];
  return { listeners, agents, spares, all: [...listeners, ...agents, OPERATOR_ID] };
}

/** The replica ids of a cluster: the initial three, then the spares in the order used. */
export const replicaPool = (m: Membership): ProcessId[] => [...m.replicas, ...m.spareReplicas];

/** Replicas r1..r3 on nodes n1..n3, an agent aK on every node nK, the watchdog and operator. */
export function planCluster(plan: ClusterPlan, publicKeys: ReadonlyMap<ProcessId, Uint8Array>): ClusterConfig {
  const { nodes, ports } = plan;
  if (!Number.isInteger(nodes) || nodes < MIN_NODES || nodes > MAX_NODES) {
    throw new ClusterDirError('BAD_ARGUMENT', `--nodes must be an integer from ${MIN_NODES} to ${MAX_NODES}, got ${nodes}`);
  }
  const ids = clusterIds(nodes);
  if (ports.length !== ids.listeners.length) throw new TypeError(`planCluster needs ${ids.listeners.length} ports`);
  const cluster = randomBytes(16).toString('hex');
  const processes: ProcessEntry[] = [];
  ids.listeners.forEach((id, i) => {
    const replica = id !== WATCHDOG_ID;
    // A spare has no node until the group starts it on one (PROTOCOL §10.6).
    const spare = ids.spares.includes(id);
    processes.push({
      id, kind: replica ? 'replica' : 'watchdog', node: replica && !spare ? `n${i + 1}` : null,
      listen: { host: LOOPBACK_HOST, port: ports[i] as number }, slots: null,
    });
  });
  ids.agents.forEach((id, i) => processes.push({ id, kind: 'agent', node: `n${i + 1}`, listen: null, slots: DEFAULT_AGENT_SLOTS }));
  processes.push({ id: OPERATOR_ID, kind: 'operator', node: null, listen: null, slots: null });
  const keys: Record<ProcessId, string> = {};
  for (const p of processes) {
    const k = publicKeys.get(p.id);
    if (k === undefined) throw new TypeError(`no public key for ${p.id}`);
    keys[p.id] = Buffer.from(k).toString('base64');
  }
  return {
    format: CLUSTER_FORMAT,
    cluster,
    createdAt: new Date().toISOString(),
    membership: {
      cluster,
      replicas: processes.filter((p) => p.kind === 'replica' && !ids.spares.includes(p.id)).map((p) => p.id),
      replicaNodes: processes.filter((p) => p.kind === 'replica' && !ids.spares.includes(p.id)).map((p) => p.node as string),
      spareReplicas: ids.spares,
      agents: processes.filter((p) => p.kind === 'agent').map((p) => ({ id: p.id, node: p.node as string })),
      scc: WATCHDOG_ID,
      operators: [OPERATOR_ID],
      timing: { ...DEFAULT_TIMING, ...plan.timing },
    },
    processes,
    publicKeys: keys,
    ...(plan.allowInject === true ? { allowInject: true } : {}),
    ...(plan.taskUser === undefined ? {} : { taskUser: plan.taskUser }),
  };
}

/** Generate a key pair per id: `keys/<id>.json` (mode 0600) and the table `keys/public.json`.
 *  With `merge`, keys of other ids already in the table are kept. Returns the new keys. */
export function generateClusterKeys(dir: string, ids: readonly ProcessId[], merge = false): Map<ProcessId, Uint8Array> {
  mkdirPrivate(paths.keys(dir));
  const table = new Map<ProcessId, Uint8Array>();
  const kept = merge && existsSync(paths.publicKeys(dir)) ? readPublicKeys(paths.publicKeys(dir)) : new Map<ProcessId, Uint8Array>();
  for (const id of ids) {
    if (!processId.dec(id, 'id').ok) {
      throw new ClusterDirError('BAD_ARGUMENT', `bad process id ${quoted(id)}: use lower-case letters, digits and '-', starting with a letter`);
    }
    if (table.has(id)) throw new ClusterDirError('BAD_ARGUMENT', `process id ${id} is listed twice`);
    const pair = generateKeyPair();
    writeKeyFile(paths.keyFile(dir, id), id, pair);
    table.set(id, pair.publicKey);
  }
  for (const id of table.keys()) kept.delete(id);
  writePublicKeys(paths.publicKeys(dir), new Map([...kept, ...table]));
  return table;
}

export function writeClusterConfig(dir: string, config: ClusterConfig): void {
  mkdirPrivate(dir);
  for (const sub of [paths.logs(dir), paths.run(dir)]) mkdirPrivate(sub);
  restrictClusterDir(dir);
  const path = paths.config(dir);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`);
  renameSync(tmp, path);
}

/** Makes the cluster dir and its logs/, logs/tasks/ and run/ 0700 (keys/ already is): nothing in
 *  them is a task's business — keys, task journals (which hold task keys, PROTOCOL §9.5),
 *  records, the daemons' logs and other tasks' output. Task processes reach their agent through its abstract
 *  socket (src/daemon/app-socket.ts), not through this dir. Returns the paths it changed. */
export function restrictClusterDir(dir: string): string[] {
  const changed: string[] = [];
  for (const path of [dir, paths.logs(dir), paths.taskLogs(dir), paths.run(dir), paths.keys(dir)]) {
    let mode: number;
    try {
      mode = statSync(path).mode & 0o7777;
    } catch {
      continue; // not made yet: made 0700 by whoever makes it, or not needed
    }
    if ((mode & 0o077) === 0) continue;
    chmodSync(path, mode & 0o700);
    changed.push(path);
  }
  return changed;
}

// ---- loading ------------------------------------------------------------------------------------

/** Entries a cluster dir may hold; anything else makes a dir without cluster.json foreign. */
const CLUSTER_DIR_ENTRIES = new Set(['cluster.json', 'keys', 'logs', 'run']);

/** Whether `dir` exists and holds something other than a Trine cluster (refuse to touch it).
 *  A dir with only our subdirectories (an interrupted `trine up`) is ours. */
export function isForeignDir(dir: string): boolean {
  if (!existsSync(dir)) return false;
  if (!statSync(dir).isDirectory()) return true;
  if (existsSync(paths.config(dir))) return false;
  return readdirSync(dir).some((name) => !CLUSTER_DIR_ENTRIES.has(name));
}

export function loadCluster(dirArg: string | undefined): Cluster {
  const dir = resolveClusterDir(dirArg);
  if (!existsSync(dir)) throw new ClusterDirError('NO_CLUSTER', `no cluster at ${dir}: run \`trine up --dir ${dir}\` first, or pass --dir`);
  if (!statSync(dir).isDirectory()) throw new ClusterDirError('FOREIGN_DIR', `${dir} is a file, not a cluster dir: pass the cluster's --dir`);
  const path = paths.config(dir);
  if (!existsSync(path)) {
    throw new ClusterDirError('FOREIGN_DIR', `${dir} is not a trine cluster dir (no cluster.json): pass the cluster's --dir, or run \`trine up\``);
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ClusterDirError('INVALID_CONFIG', `cannot read ${path} (${(e as Error).message}): check its permissions`);
  }
  if (text.length > MAX_CONFIG_BYTES) throw new ClusterDirError('FOREIGN_DIR', `${path} is ${text.length} bytes, not a trine cluster.json`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ClusterDirError('INVALID_CONFIG', `${path} is not valid JSON (${(e as Error).message}): restore it or recreate the cluster with \`trine up\``);
  }
  const config = checkConfig(json, path);
  const publicKeys = new Map<ProcessId, Uint8Array>();
  const owners = new Map<string, ProcessId>();
  for (const p of config.processes) {
    const b64 = config.publicKeys[p.id];
    const key = b64 === undefined ? null : decodeKey(b64);
    if (key === null) throw invalid(path, `publicKeys.${p.id} must be a ${PUBLIC_KEY_BYTES}-byte key in base64`);
    const other = owners.get(b64 as string);
    if (other !== undefined) throw invalid(path, `${other} and ${p.id} share a public key`);
    owners.set(b64 as string, p.id);
    publicKeys.set(p.id, key);
  }
  return { dir, config, publicKeys };
}

export function processEntry(cluster: Cluster, id: ProcessId): ProcessEntry {
  const p = cluster.config.processes.find((e) => e.id === id);
  if (p === undefined) {
    const ids = cluster.config.processes.map((e) => e.id).join(', ');
    throw new ClusterDirError('BAD_ARGUMENT', `no process ${id} in ${paths.config(cluster.dir)}: use one of ${ids}`);
  }
  return p;
}

function decodeKey(b64: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) return null;
  const b = Buffer.from(b64, 'base64');
  return b.length === PUBLIC_KEY_BYTES && b.toString('base64') === b64 ? new Uint8Array(b) : null;
}

const invalid = (path: string, what: string) =>
  new ClusterDirError('INVALID_CONFIG', `${path}: ${what}; restore it or recreate the cluster with \`trine up\``);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is ProcessId => processId.dec(v, 'id').ok;
const isPort = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0 && v < 65536;

function checkConfig(json: unknown, path: string): ClusterConfig {
  if (!isObject(json) || json['format'] !== CLUSTER_FORMAT) {
    throw new ClusterDirError('FOREIGN_DIR', `${path} is not a ${CLUSTER_FORMAT} file (written by another program or Trine version): pass the right --dir, or recreate the cluster`);
  }
  const { cluster, createdAt, membership: m, processes, publicKeys, allowInject, nodeAddresses, resetDriver, resetCommand, taskUser } = json;
  if (taskUser !== undefined && !(typeof taskUser === 'string' && isUserName(taskUser))) throw invalid(path, '"taskUser" must be a user name (or absent: tasks run as the daemons\' user)');
  if (allowInject !== undefined && typeof allowInject !== 'boolean') throw invalid(path, '"allowInject" must be true or false (or absent: false)');
  if (nodeAddresses !== undefined && !(isObject(nodeAddresses) && Object.entries(nodeAddresses).every(([k, v]) => isId(k) && typeof v === 'string' && isHostAddress(v)))) {
    throw invalid(path, '"nodeAddresses" must map node names to addresses');
  }
  if (resetDriver !== undefined && resetDriver !== 'local' && resetDriver !== 'log' && resetDriver !== 'command') throw invalid(path, '"resetDriver" must be "local", "log" or "command"');
  if (resetCommand !== undefined && !isCommandLine(resetCommand)) throw invalid(path, `"resetCommand" must be a list of 1 to ${MAX_COMMAND_ARGS} strings, the first a program`);
  if (resetDriver === 'command' && resetCommand === undefined) throw invalid(path, '"resetDriver": "command" needs a "resetCommand"');
  if (typeof cluster !== 'string' || !/^[a-z0-9-]{1,64}$/.test(cluster)) throw invalid(path, '"cluster" must be a cluster id');
  if (typeof createdAt !== 'string') throw invalid(path, '"createdAt" must be a string');
  if (!Array.isArray(processes) || processes.length === 0 || processes.length > MAX_LIST_ENTRIES) throw invalid(path, '"processes" must be a list');
  const entries: ProcessEntry[] = [];
  for (const [i, p] of processes.entries()) {
    const at = `processes[${i}]`;
    if (!isObject(p) || !isId(p['id'])) throw invalid(path, `${at}.id must be a process id`);
    const kind = p['kind'];
    if (kind !== 'replica' && kind !== 'agent' && kind !== 'watchdog' && kind !== 'operator') throw invalid(path, `${at}.kind is unknown`);
    const node = p['node'];
    if (node !== null && (typeof node !== 'string' || !isId(node))) throw invalid(path, `${at}.node must be a node name or null`);
    const listen = p['listen'];
    let ep: Endpoint | null = null;
    if (listen !== null) {
      if (!isObject(listen) || typeof listen['host'] !== 'string' || !isPort(listen['port'])) throw invalid(path, `${at}.listen must be { host, port } or null`);
      ep = { host: listen['host'], port: listen['port'] };
    }
    if ((kind === 'replica' || kind === 'watchdog') && ep === null) throw invalid(path, `${at} (${kind}) needs a listen address`);
    const slots = p['slots'];
    if (slots !== null && !(typeof slots === 'number' && Number.isInteger(slots) && slots >= 0)) throw invalid(path, `${at}.slots must be a count or null`);
    if (kind === 'agent' && slots === null) throw invalid(path, `${at} (agent) needs slots`);
    if (entries.some((e) => e.id === p['id'])) throw invalid(path, `${at}.id ${String(p['id'])} is listed twice`);
    entries.push({ id: p['id'], kind, node, listen: ep, slots });
  }
  if (!isObject(publicKeys)) throw invalid(path, '"publicKeys" must be an object');
  const keys: Record<ProcessId, string> = {};
  for (const [id, v] of Object.entries(publicKeys)) if (typeof v === 'string') keys[id] = v;

  if (!isObject(m)) throw invalid(path, '"membership" must be an object');
  if (m['cluster'] !== cluster) throw invalid(path, 'membership.cluster differs from "cluster"');
  const byKind = (k: ProcessKind) => entries.filter((e) => e.kind === k);
  const replicas = m['replicas'];
  if (!Array.isArray(replicas) || replicas.length !== REPLICA_COUNT || !replicas.every((r) => byKind('replica').some((e) => e.id === r))) {
    throw invalid(path, `membership.replicas must list the ${REPLICA_COUNT} replica processes`);
  }
  // Optional (files written before issue 5 have none): spare ids must be listening replicas.
  const spareReplicas = m['spareReplicas'] ?? [];
  if (!Array.isArray(spareReplicas) || !spareReplicas.every((r) => typeof r === 'string' && !replicas.includes(r) && byKind('replica').some((e) => e.id === r && e.listen !== null))) {
    throw invalid(path, 'membership.spareReplicas must list replica processes (with listen addresses) not in membership.replicas');
  }
  if (new Set(spareReplicas).size !== spareReplicas.length) throw invalid(path, 'membership.spareReplicas lists an id twice');
  const agents = m['agents'];
  if (!Array.isArray(agents) || !agents.every((a) => isObject(a) && byKind('agent').some((e) => e.id === a['id'] && e.node === a['node']))) {
    throw invalid(path, 'membership.agents must list the agent processes with their nodes');
  }
  if (agents.length !== byKind('agent').length) throw invalid(path, 'membership.agents must list every agent process');
  // The group counts slots and places processes per node name (PROTOCOL §8.2), as a node added at
  // run time is refused a name in use (§10.12): two agents on one name would share one count.
  const twice = (agents as { node: string }[]).map((a) => a.node).find((n, i, all) => all.indexOf(n) !== i);
  if (twice !== undefined) throw invalid(path, `membership.agents puts two agents on node ${twice}: give each agent a node of its own`);
  const scc = m['scc'];
  if (typeof scc !== 'string' || !byKind('watchdog').some((e) => e.id === scc)) throw invalid(path, 'membership.scc must name the watchdog process');
  const operators = m['operators'];
  if (!Array.isArray(operators) || !operators.every((o) => byKind('operator').some((e) => e.id === o))) {
    throw invalid(path, 'membership.operators must list operator processes');
  }
  // A spare with a node is bound to it: only that node's agent holds its key (`trine init`).
  const boundSpares = entries.filter((e) => spareReplicas.includes(e.id) && e.node !== null);
  const timingJson = m['timing'];
  if (!isObject(timingJson)) throw invalid(path, 'membership.timing must be an object');
  const timing: { -readonly [K in keyof Timing]: number } = { ...DEFAULT_TIMING };
  for (const key of Object.keys(DEFAULT_TIMING) as (keyof Timing)[]) {
    const v = timingJson[key];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw invalid(path, `membership.timing.${key} must be a positive number of ms`);
    timing[key] = v;
  }
  return {
    format: CLUSTER_FORMAT,
    cluster,
    createdAt,
    membership: {
      cluster,
      replicas: replicas as ProcessId[],
      replicaNodes: (replicas as ProcessId[]).map((r) => byKind('replica').find((e) => e.id === r)?.node ?? ''),
      spareReplicas: spareReplicas as ProcessId[],
      agents: (agents as { id: ProcessId; node: string }[]).map((a) => ({ id: a.id, node: a.node })),
      scc,
      operators: operators as ProcessId[],
      timing,
      ...(boundSpares.length > 0 ? { spareNodes: Object.fromEntries(boundSpares.map((e) => [e.id, e.node as string])) } : {}),
    },
    processes: entries,
    publicKeys: keys,
    ...(allowInject === true ? { allowInject: true } : {}),
    ...(nodeAddresses !== undefined ? { nodeAddresses: { ...(nodeAddresses as Record<string, string>) } } : {}),
    ...(resetDriver !== undefined ? { resetDriver } : {}),
    ...(resetCommand !== undefined ? { resetCommand: [...(resetCommand as string[])] } : {}),
    ...(taskUser !== undefined ? { taskUser: taskUser as string } : {}),
  };
}

/** A user name as useradd accepts it: cluster.json `taskUser`, hosts file `task-user:`. */
export function isUserName(v: string): boolean {
  return /^[a-z_][a-z0-9_-]{0,31}\$?$/.test(v);
}

/** Most arguments a reset command may have: a program and a few options. */
const MAX_COMMAND_ARGS = 64;
const isCommandLine = (v: unknown): v is string[] =>
  Array.isArray(v) && v.length >= 1 && v.length <= MAX_COMMAND_ARGS && v.every((a) => typeof a === 'string' && a.length <= 4096) && (v[0] as string).length > 0;

/** An IPv4 or IPv6 address, or a DNS name: what a host's `address` may be. */
export function isHostAddress(v: string): boolean {
  if (isIP(v) !== 0) return true;
  return v.length <= 253 && /^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/.test(v);
}

// ---- pid files ----------------------------------------------------------------------------------

export function writePidFile(dir: string, id: ProcessId, pid: number): void {
  mkdirPrivate(paths.run(dir));
  writeFilePrivate(paths.pidFile(dir, id), `${pid}\n`);
}

export function removePidFile(dir: string, id: ProcessId): void {
  rmSync(paths.pidFile(dir, id), { force: true });
}

/** Every pid file in `<dir>/run`, with its pid (or null if the file is not a pid). */
export function readPidFiles(dir: string): { id: ProcessId; pid: number | null }[] {
  const run = paths.run(dir);
  if (!existsSync(run)) return [];
  const out: { id: ProcessId; pid: number | null }[] = [];
  for (const name of readdirSync(run).sort()) {
    if (!name.endsWith('.pid')) continue;
    const text = readFileSync(join(run, name), 'utf8').trim();
    const pid = /^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : null;
    out.push({ id: name.slice(0, -4), pid });
  }
  return out;
}

/** Whether `pid` is a live (not zombie) process. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name (which may itself contain spaces or ')').
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' && existsSync('/proc/self/stat')) return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether the live process `pid` is the daemon `id` of the cluster in `dir` (and not an
 *  unrelated process that reused the pid). Without /proc we cannot tell and trust the file. */
export function isClusterProcess(pid: number, dir: string, id: ProcessId): boolean {
  if (!isAlive(pid)) return false;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return !existsSync('/proc/self/cmdline');
  }
  const args = cmdline.split('\0');
  return args.includes(dir) && (args.includes(id) || (id === WATCHDOG_ID && args.includes('scc')));
}

/** Cluster processes of `dir` still running, from its pid files. */
export function runningProcesses(dir: string): { id: ProcessId; pid: number }[] {
  const out: { id: ProcessId; pid: number }[] = [];
  for (const { id, pid } of readPidFiles(dir)) if (pid !== null && isClusterProcess(pid, dir, id)) out.push({ id, pid });
  return out;
}

// ---- ports --------------------------------------------------------------------------------------

function bindProbe(host: string, port: number): Promise<{ port: number; close: () => Promise<void> } | null> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE' || e.code === 'EACCES') resolvePromise(null);
      else reject(e);
    });
    server.listen({ host, port, exclusive: true }, () => {
      const a = server.address();
      const bound = a !== null && typeof a === 'object' ? a.port : port;
      resolvePromise({ port: bound, close: () => new Promise<void>((r) => server.close(() => r())) });
    });
  });
}

/** `count` ports on loopback: `basePort`, `basePort+1`, … (each checked free), or free ports
 *  the kernel picks. A taken port is a PORT_IN_USE error naming it. */
export async function allocatePorts(count: number, basePort?: number, host = LOOPBACK_HOST): Promise<number[]> {
  if (basePort !== undefined && (!Number.isInteger(basePort) || basePort < 1024 || basePort + count - 1 > 65535)) {
    throw new ClusterDirError('BAD_ARGUMENT', `--base-port must be an integer from 1024 to ${65536 - count} (the cluster uses ${count} ports from it), got ${basePort}`);
  }
  const held: { port: number; close: () => Promise<void> }[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const want = basePort === undefined ? 0 : basePort + i;
      const probe = await bindProbe(host, want);
      if (probe === null) {
        throw new ClusterDirError('PORT_IN_USE', `port ${want} on ${host} is in use: pick another --base-port (the cluster needs ${count} ports from it), or stop what holds the port`);
      }
      held.push(probe);
    }
    return held.map((h) => h.port);
  } finally {
    // Every probe stays open until all are found, so the ports are distinct; then free them.
    await Promise.all(held.map((h) => h.close()));
  }
}

/** The next incarnation of `id` (docs/PROTOCOL.md §3.1): the start time in ms, but always above
 *  the last one this cluster dir recorded, so a wall clock stepped back cannot make a restarted
 *  process look like a replay of its predecessor. */
export function nextIncarnation(dir: string, id: ProcessId, nowMs: number): number {
  const file = paths.incFile(dir, id);
  let last = 0;
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    if (Number.isSafeInteger(n) && n > 0) last = n;
  } catch {
    // first start: nothing recorded
  }
  const inc = Math.max(nowMs, last + 1);
  mkdirPrivate(dirname(file));
  writeFilePrivate(file, `${inc}\n`);
  return inc;
}
