// The hosts file of a cluster of several machines (`trine init --hosts FILE`, docs/OPERATIONS.md
// §9): YAML, because that is what operators write for Ansible inventories, Nomad and Kubernetes.
// It names each host (id, network address, roles) and a few cluster-wide settings. The parser is
// total: every problem is a HostsFileError whose message names the file, the entry and what to
// do, so `trine init` prints one line and exits non-zero. Unknown keys are errors, not ignored:
// a misspelt `slot:` must not silently give a node the default.
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { parseDocument as ParseDocument } from 'yaml';
import { DEFAULT_TIMING, type Timing } from '../core/constants.ts';
import { processId } from '../core/wire/messages.ts';
import { DEFAULT_AGENT_SLOTS, isHostAddress, isUserName, MAX_NODES, MIN_NODES, REPLICA_COUNT } from './cluster-dir.ts';

export const HOST_ROLES = ['replica', 'agent', 'watchdog', 'operator'] as const;
export type HostRole = (typeof HOST_ROLES)[number];

/** A hosts file lists at most a few hundred short entries; a larger file is not one. */
export const MAX_HOSTS_FILE_BYTES = 256 * 1024;
/** Hosts in one file: the agents a cluster may have, plus the watchdog and operator hosts. */
export const MAX_HOSTS = MAX_NODES + 2;
/** Replicas and the watchdog listen from this port unless the file says otherwise: outside the
 *  kernel's ephemeral range (32768–60999 on Linux), so an outgoing connection never holds it. */
export const DEFAULT_BASE_PORT = 7400;
/** Spare replica ids per agent host (PROTOCOL §10.6): each lives on its host, with its key in
 *  that host's bundle only, so any host can take over a replica this many times. */
export const DEFAULT_SPARES_PER_HOST = 2;
export const MAX_SPARES_PER_HOST = 8;
/** Slots a single agent may offer: a large node's cores, with room to spare. */
export const MAX_SLOTS = 1024;
/** Host ids become node names and bundle directory names; agent ids derive from them. */
export const MAX_HOST_ID_CHARS = 24;

/** The daemons run as root by default: an agent starts task processes as the unprivileged task
 *  user, which takes root (as slurmd does); a capability set for a non-root agent would pass to
 *  the tasks through execve. */
export const DEFAULT_INSTALL = { dir: '/var/lib/trine', trine: '/usr/local/bin/trine', user: 'root' } as const;

/** The user task processes run as unless the file says `task-user:` (FAULT-MODEL "Tasks and
 *  Trine's secrets"): every Linux system has it, and it owns nothing. */
export const DEFAULT_TASK_USER = 'nobody';

export type HostEntry = { id: string; address: string; roles: HostRole[]; slots: number };

export type HostsFile = {
  /** A label for the cluster (the cluster id is this plus random hex). */
  name: string;
  basePort: number;
  sparesPerHost: number;
  install: { dir: string; trine: string; user: string };
  /** The unprivileged user every task process runs as (cluster.json `taskUser`). */
  taskUser: string;
  reset: { driver: 'log' } | { driver: 'command'; command: string[] };
  timing: Partial<Timing>;
  /** `allow-inject: true`: cluster.json `allowInject`, so `trine inject` can act on the cluster
   *  (a test or demo cluster, never a production one; docs/OPERATIONS.md §7). Default false. */
  allowInject: boolean;
  /** `metrics-port: M`: every daemon serves Prometheus metrics on M + (its listen port − `port`),
   *  on its host's address (metrics.json in every bundle, docs/OPERATIONS.md "Metrics"). Absent:
   *  no metrics. */
  metricsPort?: number;
  hosts: HostEntry[];
};

export class HostsFileError extends Error {
  override readonly name = 'HostsFileError';
  readonly code = 'HOSTS_FILE_INVALID';
}

/** 127.0.0.0/8, ::1 and `localhost`: reachable from the host itself only. */
export const isLoopback = (a: string): boolean => /^127\./.test(a) || a === '::1' || a.toLowerCase() === 'localhost' || a.toLowerCase().endsWith('.localhost');

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads and checks a hosts file. */
export function readHostsFile(path: string): HostsFile {
  let text: string;
  try {
    if (statSync(path).size > MAX_HOSTS_FILE_BYTES) throw new HostsFileError(`${path} is larger than ${MAX_HOSTS_FILE_BYTES} bytes: is it the hosts file?`);
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (e instanceof HostsFileError) throw e;
    throw new HostsFileError(`cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): pass the hosts file with --hosts`);
  }
  return parseHostsFile(text, path);
}

/** Checks the text of a hosts file; `path` names it in errors. */
export function parseHostsFile(text: string, path: string): HostsFile {
  const fail = (what: string): never => {
    throw new HostsFileError(`${path}: ${what}`);
  };
  // Loaded here, not with this module: only --hosts reads YAML, and it costs ~30 ms of CPU at
  // every `trine` start (each command and daemon) otherwise.
  const { parseDocument } = createRequire(import.meta.url)('yaml') as { parseDocument: typeof ParseDocument };
  const doc = parseDocument(text, { uniqueKeys: true });
  const first = doc.errors[0];
  if (first !== undefined) fail(`not valid YAML (${first.message.split('\n')[0] ?? ''}); see examples/hosts.yaml`);
  const json: unknown = doc.toJS({ maxAliasCount: 16 });
  if (!isObject(json)) return fail('must be a mapping with a "hosts" list; see examples/hosts.yaml');
  const known = ['cluster', 'port', 'spares-per-host', 'install', 'task-user', 'reset', 'timing', 'allow-inject', 'hosts', 'metrics-port'];
  for (const k of Object.keys(json)) if (!known.includes(k)) fail(`unknown setting "${k}": use ${known.join(', ')}`);

  const name = json['cluster'] ?? 'trine';
  if (typeof name !== 'string' || !/^[a-z][a-z0-9-]{0,23}$/.test(name)) fail('"cluster" must be a name of lower-case letters, digits and "-" (at most 24)');
  const basePort = json['port'] ?? DEFAULT_BASE_PORT;
  const sparesPerHost = json['spares-per-host'] ?? DEFAULT_SPARES_PER_HOST;
  if (!Number.isInteger(sparesPerHost) || (sparesPerHost as number) < 0 || (sparesPerHost as number) > MAX_SPARES_PER_HOST) {
    fail(`"spares-per-host" must be an integer from 0 to ${MAX_SPARES_PER_HOST}`);
  }
  // A host listens on the base port (its replica), the next sparesPerHost (its spares) and the
  // one after (its agent, src/io/deploy.ts).
  if (!Number.isInteger(basePort) || (basePort as number) < 1024 || (basePort as number) + (sparesPerHost as number) + 1 > 65535) {
    fail(`"port" must be an integer from 1024 to ${65534 - (sparesPerHost as number)} (a host listens on it and the next ${(sparesPerHost as number) + 1})`);
  }
  const metricsPort = json['metrics-port'];
  if (metricsPort !== undefined) {
    // The daemons of a host serve metrics on as many ports as they listen on, shifted.
    const span = (sparesPerHost as number) + 1;
    if (!Number.isInteger(metricsPort) || (metricsPort as number) < 1024 || (metricsPort as number) + span > 65535) {
      fail(`"metrics-port" must be an integer from 1024 to ${65535 - span} (a host serves metrics on it and the next ${span})`);
    }
    if (Math.abs((metricsPort as number) - (basePort as number)) <= span) {
      fail(`"metrics-port" ${metricsPort as number} overlaps the ports the daemons listen on (${basePort as number} to ${(basePort as number) + span}): move it at least ${span + 1} away`);
    }
  }
  const install = parseInstall(json['install'], fail);
  const taskUser = json['task-user'] ?? DEFAULT_TASK_USER;
  if (typeof taskUser !== 'string' || !isUserName(taskUser)) fail('"task-user" must be a user name (the unprivileged user tasks run as; default nobody)');
  // Only root can start a process as another user; a non-root agent would fail every spawn.
  if (install.user !== 'root' && install.user !== taskUser) {
    fail(`install.user ${install.user} cannot start tasks as task-user ${taskUser as string}: run the node daemons as root (install.user: root), or set task-user: ${install.user} (tasks then run as the daemons' user)`);
  }
  const reset = parseReset(json['reset'], fail);
  const timing = parseTiming(json['timing'], fail);
  const hosts = parseHosts(json['hosts'], fail);
  const allowInject = json['allow-inject'] ?? false;
  if (typeof allowInject !== 'boolean') fail('"allow-inject" must be true or false (true lets `trine inject` act on the cluster: tests and demos only)');
  return {
    name: name as string, basePort: basePort as number, sparesPerHost: sparesPerHost as number, install, taskUser: taskUser as string, reset, timing,
    allowInject: allowInject as boolean, ...(metricsPort === undefined ? {} : { metricsPort: metricsPort as number }), hosts,
  };
}

function parseInstall(v: unknown, fail: (what: string) => never): HostsFile['install'] {
  if (v === undefined) return { ...DEFAULT_INSTALL };
  if (!isObject(v)) return fail('"install" must be a mapping of dir, trine, user');
  for (const k of Object.keys(v)) if (!['dir', 'trine', 'user'].includes(k)) fail(`install: unknown setting "${k}": use dir, trine, user`);
  const out = { ...DEFAULT_INSTALL, ...v } as Record<string, unknown>;
  for (const k of ['dir', 'trine'] as const) {
    const p = out[k];
    if (typeof p !== 'string' || !p.startsWith('/') || /\s/.test(p)) fail(`install.${k} must be an absolute path without spaces`);
  }
  if (typeof out['user'] !== 'string' || !/^[a-z_][a-z0-9_-]{0,31}$/.test(out['user'])) fail('install.user must be a user name');
  return { dir: out['dir'] as string, trine: out['trine'] as string, user: out['user'] as string };
}

function parseReset(v: unknown, fail: (what: string) => never): HostsFile['reset'] {
  if (v === undefined) return { driver: 'log' };
  if (!isObject(v)) return fail('"reset" must be a mapping: { driver: log } or { command: [program, args…] }');
  for (const k of Object.keys(v)) if (!['driver', 'command'].includes(k)) fail(`reset: unknown setting "${k}": use driver, command`);
  const driver = v['driver'] ?? (v['command'] === undefined ? 'log' : 'command');
  if (driver === 'log') {
    if (v['command'] !== undefined) fail('reset: the "log" driver takes no command; remove it or use driver: command');
    return { driver: 'log' };
  }
  if (driver !== 'command') return fail(`reset.driver must be "log" or "command", got ${JSON.stringify(driver)}`);
  const command = v['command'];
  if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string' || typeof a === 'number')) {
    return fail('reset.command must be a list: the program, then its arguments ("{node}" and "{address}" are replaced)');
  }
  const argv = command.map(String);
  if (!(argv[0] as string).startsWith('/')) fail('reset.command must start with an absolute path to the program (the watchdog runs it without a shell)');
  return { driver: 'command', command: argv };
}

function parseTiming(v: unknown, fail: (what: string) => never): Partial<Timing> {
  if (v === undefined) return {};
  if (!isObject(v)) return fail('"timing" must be a mapping of timer names to milliseconds');
  const out: Partial<Record<keyof Timing, number>> = {};
  const names = Object.keys(DEFAULT_TIMING) as (keyof Timing)[];
  for (const [k, ms] of Object.entries(v)) {
    if (!(names as string[]).includes(k)) fail(`timing: unknown timer "${k}": use ${names.join(', ')}`);
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) fail(`timing.${k} must be a positive number of ms`);
    out[k as keyof Timing] = ms as number;
  }
  return out;
}

function parseHosts(v: unknown, fail: (what: string) => never): HostEntry[] {
  if (!Array.isArray(v) || v.length === 0) return fail('"hosts" must be a list of hosts, each with id, address and roles');
  if (v.length > MAX_HOSTS) fail(`"hosts" lists ${v.length} hosts; at most ${MAX_HOSTS}`);
  const hosts: HostEntry[] = [];
  for (const [i, h] of v.entries()) {
    const at = isObject(h) && typeof h['id'] === 'string' ? `hosts[${i}] (${h['id']})` : `hosts[${i}]`;
    if (!isObject(h)) return fail(`${at} must be a mapping with id, address and roles`);
    for (const k of Object.keys(h)) if (!['id', 'address', 'roles', 'slots'].includes(k)) fail(`${at}: unknown setting "${k}": use id, address, roles, slots`);
    const id = h['id'];
    if (typeof id !== 'string' || id.length > MAX_HOST_ID_CHARS || !processId.dec(id, 'id').ok) {
      fail(`${at}: id must be lower-case letters, digits and "-", starting with a letter (at most ${MAX_HOST_ID_CHARS})`);
    }
    const address = h['address'];
    if (typeof address !== 'string' || !isHostAddress(address)) fail(`${at}: address must be an IP address or a DNS name`);
    if (['0.0.0.0', '::'].includes(address as string) || isLoopback(address as string)) {
      fail(`${at}: address ${address as string} is not one other hosts can dial: give the host's own network address (a one-host cluster is \`trine up\`)`);
    }
    const roles = h['roles'];
    if (!Array.isArray(roles) || roles.length === 0) fail(`${at}: roles must be a list of ${HOST_ROLES.join(', ')}`);
    for (const r of roles as unknown[]) {
      if (!(HOST_ROLES as readonly unknown[]).includes(r)) fail(`${at}: unknown role ${JSON.stringify(r)}: use ${HOST_ROLES.join(', ')}`);
    }
    const set = new Set(roles as HostRole[]);
    if (set.size !== (roles as unknown[]).length) fail(`${at}: a role is listed twice`);
    if (set.has('replica') && !set.has('agent')) fail(`${at}: a replica host runs an agent too (it starts and stops the replica): add "agent" to its roles`);
    if (set.has('watchdog') && (set.has('agent') || set.has('replica'))) {
      fail(`${at}: the watchdog needs a host of its own (a fault of a shared host would take the last resort down with it): remove agent and replica from its roles`);
    }
    const slots = h['slots'];
    if (slots !== undefined && !set.has('agent')) fail(`${at}: slots are for agent hosts only`);
    if (slots !== undefined && (!Number.isInteger(slots) || (slots as number) < 1 || (slots as number) > MAX_SLOTS)) fail(`${at}: slots must be an integer from 1 to ${MAX_SLOTS}`);
    const dupId = hosts.find((o) => o.id === id);
    if (dupId !== undefined) fail(`${at}: id ${id as string} is already used by hosts[${hosts.indexOf(dupId)}]: give every host its own id`);
    const dupAddress = hosts.find((o) => o.address.toLowerCase() === (address as string).toLowerCase());
    if (dupAddress !== undefined) fail(`${at}: address ${address as string} is already used by ${dupAddress.id}: every host needs its own`);
    hosts.push({ id: id as string, address: address as string, roles: [...set], slots: (slots as number | undefined) ?? DEFAULT_AGENT_SLOTS });
  }
  const having = (r: HostRole) => hosts.filter((h) => h.roles.includes(r));
  if (having('replica').length !== REPLICA_COUNT) {
    fail(`${having('replica').length} hosts have the replica role (${having('replica').map((h) => h.id).join(', ') || 'none'}); a manager group needs exactly ${REPLICA_COUNT}, on distinct hosts`);
  }
  if (having('agent').length < MIN_NODES) fail(`${having('agent').length} hosts have the agent role; a cluster needs at least ${MIN_NODES}`);
  if (having('agent').length > MAX_NODES) fail(`${having('agent').length} hosts have the agent role; at most ${MAX_NODES}`);
  const exactlyOne = (role: HostRole, why: string) => {
    const n = having(role);
    if (n.length !== 1) fail(`${n.length === 0 ? 'no host has' : `${n.length} hosts have (${n.map((h) => h.id).join(', ')})`} the ${role} role; ${why}`);
  };
  exactlyOne('watchdog', 'a cluster needs exactly one');
  exactlyOne('operator', 'give it to exactly one (the operator bundle is written for it)');
  return hosts;
}
