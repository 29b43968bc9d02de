// A multi-host test bed made of Linux network namespaces: each host is a namespace with one veth
// (`eth0`, 10.77.<subnet>.<i+1>/24) plugged into a bridge that lives in a "switch" namespace of
// its own, so the root namespace is never attached to the test network and nothing a test sends
// can leave the bed (a host has no route but its /24 and loopback). This file owns creating a bed,
// running processes inside its hosts, the faults it offers (a pulled cable, a powered-off host)
// and removing every namespace it made, including those of an earlier run that crashed.
//
// Ownership: each bed claims its tag by creating /run/trtb/<tag> (owner pid and start time), so
// removeStaleTestBeds() removes only beds whose owner is gone, never those of a test file running
// beside it in another worker.
import { execFile, execFileSync, spawn as spawnProcess, type ChildProcess, type StdioOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants as fsConstants, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { delimiter, join } from 'node:path';

/** Every namespace the harness makes starts with this, so a later run can find the leftovers. */
export const NAMESPACE_PREFIX = 'trtb-';
/** First two octets of every bed's /24: private space no real network here uses. */
const NETWORK_PREFIX = '10.77';
/** One /24 per bed: .0 is the network and .255 the broadcast, so .1–.254 are hosts. */
const MAX_HOSTS = 254;
/** Host names appear in namespace names, logs and errors; longer than this is a mistake. */
const MAX_HOST_NAME_CHARS = 32;
/** Lower-case letters, digits and '-', not leading '-' (it would read as an option to `ip`). */
const HOST_NAME_PATTERN = /^[a-z0-9][a-z0-9-]*$/;
/** 'tb' and 6 hex digits: short enough that `v` + 6 + a 3-digit index fits IFNAMSIZ (15). */
const TAG_PATTERN = /^tb[0-9a-f]{6}$/;
/** Random subnets are drawn from 1..this; explicit ones may use up to 254. */
const MAX_RANDOM_SUBNET = 250;
/** Draws before giving up on finding a free tag or subnet (both spaces are nearly empty). */
const MAX_DRAWS = 1000;
/** One `ip` command; they finish in milliseconds, so this only stops a wedged one. */
const IP_COMMAND_TIMEOUT_MS = 10_000;
/** killHost: how long processes get to vanish after SIGKILL before it is an error. */
const KILL_WAIT_MS = 5_000;
/** Poll period while waiting for killed processes to leave `ip netns pids`. */
const KILL_POLL_MS = 25;
/** run(): default bound on one command. */
const RUN_TIMEOUT_MS = 60_000;
/** run(): output kept per stream; beyond it the text is cut, so a runaway command costs bounded memory. */
const RUN_OUTPUT_MAX_BYTES = 16 * 1024 * 1024;
/** Owner records of live beds; /run is a tmpfs, cleared on reboot like /run/netns itself. */
const OWNER_DIR = '/run/trtb';

export type HostSpec = { name: string };
export type TestHost = { name: string; ns: string; address: string };
export type RunResult = { code: number; stdout: string; stderr: string };
export type SpawnOptions = { env?: NodeJS.ProcessEnv; cwd?: string; logFile?: string };
export type RunOptions = { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number };

/** One bed: the hosts a test talks to and the faults it can inject. Every method refers to a host by
 *  its spec name. */
export type TestBed = {
  /** The root namespace's own address on the bed (created with `rootPort`), else null. */
  rootAddress: string | null;
  /** Unique per bed; every namespace name contains it, so a listing shows what belongs to whom. */
  tag: string;
  hosts: ReadonlyMap<string, TestHost>;
  /** The host named `name`; throws naming the known hosts, so a typo is obvious. */
  host(name: string): TestHost;
  /** Start a long-running process inside the host (`ip netns exec NS file args…`, which execs, so
   *  the child's pid is the process itself), detached in its own process group, stdout+stderr
   *  appended to `logFile` when given and discarded otherwise (a chatty daemon never blocks on a
   *  pipe nobody reads). Tracked and unref'd: destroy() kills it, it never holds the test open. */
  spawn(host: string, file: string, args: readonly string[], opts?: SpawnOptions): ChildProcess;
  /** Run to completion inside the host; never rejects. `code` is the exit code, 128 + signal
   *  number when killed (as a shell reports it), 1 with `exec of "file" failed` on stderr when
   *  `ip` cannot exec the file, -1 when `ip` itself could not start. Its process group is
   *  SIGKILLed after timeoutMs (default 60 s). */
  run(host: string, file: string, args: readonly string[], opts?: RunOptions): Promise<RunResult>;
  /** A pulled cable: both ends of the host's veth down. Its address stays; its connected route
   *  goes until restore(). */
  cut(host: string): Promise<void>;
  /** The cable plugged back: both ends up; the kernel re-adds the connected route from the kept
   *  address. */
  restore(host: string): Promise<void>;
  /** Power-off: SIGKILL every process in the host's namespace until `ip netns pids` is empty
   *  (bounded, 5 s, then TESTBED_KILL_TIMEOUT). The namespace and its link stay. */
  killHost(host: string): Promise<void>;
  /** Kill every process of every namespace and delete them, the switch last. Idempotent, never
   *  throws (logs and continues), safe after a half-made bed. */
  destroy(): Promise<void>;
};

export type TestBedErrorCode =
  /** A host spec or option is invalid; nothing was created. */
  | 'TESTBED_BAD_SPEC'
  /** host() or a method named a host the bed does not have. */
  | 'TESTBED_UNKNOWN_HOST'
  /** An `ip` command failed; the message names it and carries its stderr. */
  | 'TESTBED_IP_FAILED'
  /** Processes were still in a namespace after KILL_WAIT_MS. */
  | 'TESTBED_KILL_TIMEOUT'
  /** A method was called after destroy(). */
  | 'TESTBED_DESTROYED';

export class TestBedError extends Error {
  constructor(readonly code: TestBedErrorCode, message: string) {
    super(message);
    this.name = 'TestBedError';
  }
}

/** What a bed made so far, in order; destroy and the exit hook remove exactly this. */
type BedState = {
  tag: string;
  subnet: number;
  switchNs: string;
  /** Host namespaces actually created (a failed `ip netns add` is not in here). */
  hostNamespaces: string[];
  switchCreated: boolean;
  children: Set<ChildProcess>;
  destroying: Promise<void> | undefined;
};
type HostRecord = { host: TestHost; switchPort: string };

const liveBeds = new Set<BedState>();
let exitHookInstalled = false;
let supportAnswer: { ok: true } | { ok: false; why: string } | undefined;
let ipBinary: string | undefined;

/** Root, `ip` and a namespace that can really be made and deleted; asked once per process. */
export function testBedSupported(): { ok: true } | { ok: false; why: string } {
  supportAnswer ??= probeSupport();
  return supportAnswer;
}

function probeSupport(): { ok: true } | { ok: false; why: string } {
  if (process.platform !== 'linux') return { ok: false, why: `network namespaces need Linux, not ${process.platform}` };
  if (process.getuid?.() !== 0) return { ok: false, why: 'network namespaces need root' };
  const ip = findIpBinary();
  if (ip === undefined) return { ok: false, why: '`ip` (iproute2) is not on PATH, /usr/sbin or /sbin' };
  let tag: string;
  try {
    tag = claimTag(undefined);
  } catch (error) {
    return { ok: false, why: `cannot write an owner record in ${OWNER_DIR}: ${String(error)}` };
  }
  const ns = namespaceName(tag, 'probe');
  try {
    execFileSync(ip, ['netns', 'add', ns], { stdio: ['ignore', 'ignore', 'pipe'], timeout: IP_COMMAND_TIMEOUT_MS });
    execFileSync(ip, ['netns', 'del', ns], { stdio: ['ignore', 'ignore', 'pipe'], timeout: IP_COMMAND_TIMEOUT_MS });
    return { ok: true };
  } catch (error) {
    return { ok: false, why: `\`ip netns add ${ns}\` failed: ${stderrOf(error)}` };
  } finally {
    releaseTag(tag);
  }
}

/** Make a bed of `specs` hosts, .1, .2, … in spec order. Validates everything before the first
 *  `ip` command; if a later step fails it removes what it made and throws TESTBED_IP_FAILED. */
export async function createTestBed(
  specs: readonly HostSpec[],
  opts: { subnet?: number; tag?: string; rootPort?: boolean } = {},
): Promise<TestBed> {
  validateSpecs(specs);
  const subnet = chooseSubnet(opts.subnet);
  if (opts.tag !== undefined && !TAG_PATTERN.test(opts.tag)) {
    throw new TestBedError('TESTBED_BAD_SPEC', `tag ${JSON.stringify(opts.tag)} must match ${String(TAG_PATTERN)}`);
  }
  const tag = claimTag(opts.tag);
  const state: BedState = {
    tag, subnet, switchNs: namespaceName(tag, 'sw'), hostNamespaces: [], switchCreated: false, children: new Set(), destroying: undefined,
  };
  liveBeds.add(state);
  installExitHook();
  const records = new Map<string, HostRecord>();
  try {
    await buildSwitch(state);
    for (const [index, spec] of specs.entries()) {
      records.set(spec.name, await buildHost(state, spec.name, index));
    }
    if (opts.rootPort === true) await buildRootPort(state);
  } catch (error) {
    await destroyBed(state);
    throw error;
  }
  return makeBed(state, records, opts.rootPort === true ? rootAddressOf(state) : null);
}

function validateSpecs(specs: readonly HostSpec[]): void {
  if (specs.length === 0 || specs.length > MAX_HOSTS) {
    throw new TestBedError('TESTBED_BAD_SPEC', `a bed has 1..${MAX_HOSTS} hosts, not ${specs.length}`);
  }
  const seen = new Set<string>();
  for (const { name } of specs) {
    if (name.length > MAX_HOST_NAME_CHARS || !HOST_NAME_PATTERN.test(name)) {
      throw new TestBedError('TESTBED_BAD_SPEC',
        `host name ${JSON.stringify(name)} must be 1..${MAX_HOST_NAME_CHARS} lower-case letters, digits or '-', not starting with '-'`);
    }
    if (name === 'sw') throw new TestBedError('TESTBED_BAD_SPEC', `host name 'sw' is the switch namespace's; choose another`);
    if (seen.has(name)) throw new TestBedError('TESTBED_BAD_SPEC', `host name ${JSON.stringify(name)} appears twice`);
    seen.add(name);
  }
}

/** A /24 no other live bed of this process uses. Beds are isolated from each other anyway (each
 *  has its own switch); distinct subnets keep a misrouted connect from ever reaching the wrong bed
 *  and make logs unambiguous. */
function chooseSubnet(wanted: number | undefined): number {
  const inUse = new Set([...liveBeds].map((bed) => bed.subnet));
  if (wanted !== undefined) {
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > 254) {
      throw new TestBedError('TESTBED_BAD_SPEC', `subnet must be an integer 1..254, not ${wanted}`);
    }
    if (inUse.has(wanted)) throw new TestBedError('TESTBED_BAD_SPEC', `subnet ${wanted} is used by another live bed`);
    return wanted;
  }
  for (let draw = 0; draw < MAX_DRAWS; draw += 1) {
    const subnet = 1 + (randomBytes(1).readUInt8(0) % MAX_RANDOM_SUBNET);
    if (!inUse.has(subnet)) return subnet;
  }
  throw new TestBedError('TESTBED_BAD_SPEC', `no free subnet among 1..${MAX_RANDOM_SUBNET}`);
}

async function buildSwitch(state: BedState): Promise<void> {
  await ipOrThrow(['netns', 'add', state.switchNs]);
  state.switchCreated = true;
  // STP off and no forward delay: a port forwards the moment it is up, so restore() is immediate.
  await ipOrThrow(['-n', state.switchNs, 'link', 'add', 'br0', 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0']);
  await ipOrThrow(['-n', state.switchNs, 'link', 'set', 'br0', 'up']);
}

/** One host: its namespace, lo up, a veth made straight into the switch and host namespaces (the
 *  root namespace never holds either end), address, link up. */
async function buildHost(state: BedState, name: string, index: number): Promise<HostRecord> {
  const ns = namespaceName(state.tag, name);
  const switchPort = `v${state.tag.slice(2)}${index}`;
  const address = `${NETWORK_PREFIX}.${state.subnet}.${index + 1}`;
  await ipOrThrow(['netns', 'add', ns]);
  state.hostNamespaces.push(ns);
  await ipOrThrow(['-n', ns, 'link', 'set', 'lo', 'up']);
  await ipOrThrow(['-n', state.switchNs, 'link', 'add', switchPort, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
  await ipOrThrow(['-n', state.switchNs, 'link', 'set', switchPort, 'master', 'br0', 'up']);
  await ipOrThrow(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
  await ipOrThrow(['-n', ns, 'link', 'set', 'eth0', 'up']);
  return { host: { name, ns, address }, switchPort };
}

/** The root namespace's address on a bed made with `rootPort`: the last of the /24. */
const rootAddressOf = (state: BedState): string => `${NETWORK_PREFIX}.${state.subnet}.254`;

/** `rootPort`: a port on the switch for the root namespace itself, for a benchmark that drives a
 *  bed's cluster from outside it (bench/signals.ts --hosts). Its veth pair lives in the switch
 *  namespace, so deleting that namespace removes both ends. The root namespace then reaches the
 *  bed's addresses, and only those (one /24 route on this link). */
async function buildRootPort(state: BedState): Promise<void> {
  const rootEnd = `t${state.tag.slice(2)}`;
  const switchEnd = `r${state.tag.slice(2)}`;
  await ipOrThrow(['-n', state.switchNs, 'link', 'add', switchEnd, 'type', 'veth', 'peer', 'name', rootEnd, 'netns', '1']);
  await ipOrThrow(['-n', state.switchNs, 'link', 'set', switchEnd, 'master', 'br0', 'up']);
  await ipOrThrow(['addr', 'add', `${rootAddressOf(state)}/24`, 'dev', rootEnd]);
  await ipOrThrow(['link', 'set', rootEnd, 'up']);
}

function makeBed(state: BedState, records: ReadonlyMap<string, HostRecord>, rootAddress: string | null = null): TestBed {
  const record = (name: string): HostRecord => {
    if (state.destroying !== undefined) throw new TestBedError('TESTBED_DESTROYED', `bed ${state.tag} was destroyed`);
    const found = records.get(name);
    if (found === undefined) {
      throw new TestBedError('TESTBED_UNKNOWN_HOST', `no host ${JSON.stringify(name)} in bed ${state.tag}; hosts: ${[...records.keys()].join(', ')}`);
    }
    return found;
  };
  const setLink = async (name: string, updown: 'up' | 'down'): Promise<void> => {
    const { host, switchPort } = record(name);
    await ipOrThrow(['-n', host.ns, 'link', 'set', 'eth0', updown]);
    await ipOrThrow(['-n', state.switchNs, 'link', 'set', switchPort, updown]);
  };
  return {
    tag: state.tag,
    rootAddress,
    hosts: new Map([...records].map(([name, { host }]) => [name, host])),
    host: (name) => record(name).host,
    spawn: (name, file, args, opts = {}) => spawnIn(state, record(name).host.ns, file, args, opts),
    run: (name, file, args, opts = {}) => runIn(state, record(name).host.ns, file, args, opts),
    cut: (name) => setLink(name, 'down'),
    restore: (name) => setLink(name, 'up'),
    killHost: (name) => killNamespace(record(name).host.ns),
    destroy: () => destroyBed(state),
  };
}

function spawnIn(state: BedState, ns: string, file: string, args: readonly string[], opts: SpawnOptions): ChildProcess {
  const logFd = opts.logFile === undefined ? undefined : openSync(opts.logFile, 'a');
  const stdio: StdioOptions = logFd === undefined ? 'ignore' : ['ignore', logFd, logFd];
  try {
    const child = spawnProcess(ipPath(), ['netns', 'exec', ns, file, ...args], {
      detached: true, stdio, env: opts.env ?? process.env, ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    });
    state.children.add(child);
    // Our own 'error' listener keeps a failed spawn from crashing the test process; the caller
    // still sees the event on the returned child.
    child.on('error', () => state.children.delete(child));
    child.once('exit', () => state.children.delete(child));
    child.unref();
    return child;
  } finally {
    if (logFd !== undefined) closeSync(logFd);
  }
}

function runIn(state: BedState, ns: string, file: string, args: readonly string[], opts: RunOptions): Promise<RunResult> {
  return new Promise((resolve) => {
    const out = { stdout: '', stderr: '' };
    let child: ChildProcess;
    try {
      child = spawnProcess(ipPath(), ['netns', 'exec', ns, file, ...args], {
        detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env, ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      });
    } catch (error) {
      resolve({ code: -1, stdout: '', stderr: String(error) });
      return;
    }
    state.children.add(child);
    const timer = setTimeout(() => killGroup(child), opts.timeoutMs ?? RUN_TIMEOUT_MS);
    let settled = false;
    const settle = (code: number, extra = ''): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      state.children.delete(child);
      resolve({ code, stdout: out.stdout, stderr: out.stderr + extra });
    };
    for (const stream of ['stdout', 'stderr'] as const) {
      child[stream]?.setEncoding('utf8');
      child[stream]?.on('data', (text: string) => {
        if (out[stream].length < RUN_OUTPUT_MAX_BYTES) out[stream] += text.slice(0, RUN_OUTPUT_MAX_BYTES - out[stream].length);
      });
    }
    child.on('error', (error) => settle(-1, `${error.message}\n`));
    child.on('close', (code, signal) => {
      settle(code ?? (signal === null ? -1 : 128 + (osConstants.signals[signal] ?? 0)));
    });
  });
}

/** SIGKILL until `ip netns pids` lists nothing; the pids come from the namespace itself, so
 *  daemons that left our process groups are caught too. */
async function killNamespace(ns: string): Promise<void> {
  const deadline = Date.now() + KILL_WAIT_MS;
  for (;;) {
    const pids = parsePids((await ipOrThrow(['netns', 'pids', ns])));
    if (pids.length === 0) return;
    if (Date.now() >= deadline) {
      throw new TestBedError('TESTBED_KILL_TIMEOUT', `processes ${pids.join(', ')} still in ${ns} after ${KILL_WAIT_MS} ms of SIGKILL`);
    }
    for (const pid of pids) killPid(pid);
    await new Promise((resolve) => setTimeout(resolve, KILL_POLL_MS));
  }
}

function destroyBed(state: BedState): Promise<void> {
  state.destroying ??= (async () => {
    for (const child of state.children) killGroup(child);
    const namespaces = [...state.hostNamespaces, ...(state.switchCreated ? [state.switchNs] : [])];
    for (const ns of namespaces) {
      await killNamespace(ns).catch((error: unknown) => warn(`could not empty ${ns}: ${String(error)}`));
    }
    // Hosts first: deleting the switch would take their veth ends with it, and is the last step.
    for (const ns of namespaces) {
      const result = await runIp(['netns', 'del', ns]);
      if (result.code !== 0) warn(`\`ip netns del ${ns}\` failed: ${result.stderr.trim()}`);
    }
    liveBeds.delete(state);
    releaseTag(state.tag);
  })().catch((error: unknown) => warn(`destroy of bed ${state.tag} failed: ${String(error)}`));
  return state.destroying;
}

/** The namespaces of the bed tagged `tag` that still exist: none, once it is destroyed. */
export async function namespacesOf(tag: string): Promise<string[]> {
  const listing = await ipOrThrow(['netns', 'list']);
  return listing.split('\n').map((line) => line.split(' ')[0] ?? '').filter((ns) => ns.startsWith(`${NAMESPACE_PREFIX}${tag}-`));
}

/** Remove every `trtb-` namespace whose bed has no live owner (an earlier run that crashed or was
 *  SIGKILLed), killing its processes first; returns the namespaces it deleted. */
export async function removeStaleTestBeds(): Promise<string[]> {
  const listing = await ipOrThrow(['netns', 'list']);
  const stale = listing.split('\n').map((line) => line.split(' ')[0] ?? '')
    .filter((ns) => ns.startsWith(NAMESPACE_PREFIX) && !ownerAlive(tagOf(ns)));
  // Switches last, as in destroy().
  stale.sort((a, b) => Number(a.endsWith('-sw')) - Number(b.endsWith('-sw')));
  for (const ns of stale) await killNamespace(ns).catch((error: unknown) => warn(String(error)));
  const removed: string[] = [];
  for (const ns of stale) {
    const result = await runIp(['netns', 'del', ns]);
    if (result.code === 0) removed.push(ns);
    else warn(`\`ip netns del ${ns}\` failed: ${result.stderr.trim()}`);
  }
  for (const tag of ownerTags()) if (!ownerAlive(tag)) releaseTag(tag);
  return removed;
}

/** Last resort when the test process ends without destroy(): synchronous, as 'exit' and a
 *  signal about to terminate require. 'exit' alone is not enough: vitest ends its fork workers
 *  with SIGTERM (then SIGKILL after 500 ms), which fires no 'exit'. So SIGTERM, SIGINT and SIGHUP
 *  clean up too and then, if no one else listens, re-raise the signal so the process still dies
 *  of it. `ip netns del` of a namespace whose processes are still dying only unlinks its name;
 *  the kernel frees it when the last one is gone. SIGKILL leaves the beds to removeStaleTestBeds(). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', destroyAllSync);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      destroyAllSync();
      process.off(signal, onSignal);
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

function destroyAllSync(): void {
  for (const state of liveBeds) {
    state.destroying ??= Promise.resolve();
    for (const child of state.children) killGroup(child);
    const namespaces = [...state.hostNamespaces, ...(state.switchCreated ? [state.switchNs] : [])];
    for (const ns of namespaces) {
      try {
        const listing = execFileSync(ipPath(), ['netns', 'pids', ns], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: IP_COMMAND_TIMEOUT_MS });
        for (const pid of parsePids(listing)) killPid(pid);
        execFileSync(ipPath(), ['netns', 'del', ns], { stdio: 'ignore', timeout: IP_COMMAND_TIMEOUT_MS });
      } catch {
        // nothing more can be done while exiting; removeStaleTestBeds() catches it next run
      }
    }
    releaseTag(state.tag);
    liveBeds.delete(state);
  }
}

// ---- `ip`, processes and owner records ----

function findIpBinary(): string | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), '/usr/sbin', '/sbin'].filter((dir) => dir !== '');
  for (const dir of dirs) {
    try {
      accessSync(join(dir, 'ip'), fsConstants.X_OK);
      return join(dir, 'ip');
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The absolute path, so a caller's env without PATH cannot break spawn() or run(). */
function ipPath(): string {
  ipBinary ??= findIpBinary();
  if (ipBinary === undefined) throw new TestBedError('TESTBED_IP_FAILED', '`ip` (iproute2) not found');
  return ipBinary;
}

function runIp(args: readonly string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(ipPath(), args, { timeout: IP_COMMAND_TIMEOUT_MS, killSignal: 'SIGKILL', encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error === null) resolve({ code: 0, stdout, stderr });
      else resolve({ code: typeof error.code === 'number' ? error.code : -1, stdout, stderr: stderr === '' ? error.message : stderr });
    });
  });
}

async function ipOrThrow(args: readonly string[]): Promise<string> {
  const result = await runIp(args);
  if (result.code !== 0) {
    throw new TestBedError('TESTBED_IP_FAILED', `\`ip ${args.join(' ')}\` failed (exit ${result.code}): ${result.stderr.trim()}`);
  }
  return result.stdout;
}

function parsePids(listing: string): number[] {
  return listing.split('\n').map((line) => Number(line.trim())).filter((pid) => Number.isSafeInteger(pid) && pid > 0);
}

function killPid(pid: number): void {
  // Our own process and init are never inside a bed's namespace; a pid list naming them is a bug.
  if (pid === process.pid || pid === 1) throw new Error(`refusing to kill pid ${pid}: not a test-bed process`);
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // ESRCH: gone already
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  for (const target of [-child.pid, child.pid]) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

function namespaceName(tag: string, suffix: string): string {
  return `${NAMESPACE_PREFIX}${tag}-${suffix}`;
}

function tagOf(ns: string): string {
  return ns.slice(NAMESPACE_PREFIX.length).split('-')[0] ?? '';
}

/** Field 22 of /proc/PID/stat (start time in ticks): with the pid it names one process for good. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Create /run/trtb/<tag> exclusively: the tag is ours, and no other process can pick it. */
function claimTag(wanted: string | undefined): string {
  mkdirSync(OWNER_DIR, { recursive: true });
  for (let draw = 0; draw < MAX_DRAWS; draw += 1) {
    const tag = wanted ?? `tb${randomBytes(3).toString('hex')}`;
    try {
      writeFileSync(join(OWNER_DIR, tag), `${process.pid} ${startTimeOf(process.pid) ?? '?'}\n`, { flag: 'wx' });
      return tag;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (wanted !== undefined) throw new TestBedError('TESTBED_BAD_SPEC', `tag ${wanted} is in use (${join(OWNER_DIR, wanted)} exists)`);
    }
  }
  throw new TestBedError('TESTBED_BAD_SPEC', `no free tag after ${MAX_DRAWS} draws`);
}

function releaseTag(tag: string): void {
  rmSync(join(OWNER_DIR, tag), { force: true });
}

function ownerTags(): string[] {
  try {
    return readdirSync(OWNER_DIR).filter((name) => TAG_PATTERN.test(name));
  } catch {
    return [];
  }
}

/** A tag's owner is alive if its record names a running process with the same start time; in
 *  this process, only while the bed is live (a bed it failed to remove is stale). */
function ownerAlive(tag: string): boolean {
  if (!TAG_PATTERN.test(tag)) return false;
  let record: string;
  try {
    record = readFileSync(join(OWNER_DIR, tag), 'utf8');
  } catch {
    return false;
  }
  const [pidText, startTime] = record.trim().split(' ');
  const pid = Number(pidText);
  if (pid === process.pid) return [...liveBeds].some((bed) => bed.tag === tag);
  return Number.isSafeInteger(pid) && pid > 0 && startTime !== undefined && startTimeOf(pid) === startTime;
}

function stderrOf(error: unknown): string {
  const stderr = (error as { stderr?: unknown }).stderr;
  const text = Buffer.isBuffer(stderr) ? stderr.toString('utf8') : typeof stderr === 'string' ? stderr : '';
  return text.trim() === '' ? String(error) : text.trim();
}

function warn(message: string): void {
  console.warn(`[testbed] ${message}`);
}
