// A Trine cluster of several hosts on the namespace test bed (test/hosts/testbed.ts), built the
// way an operator builds one on real machines (docs/OPERATIONS.md §8): a hosts file with the
// hosts' addresses, `trine init` into bundles, then on each host `trine node run --bundle` (or
// `trine scc run --bundle` on the watchdog host) from that host's own bundle directory, and the
// operator's commands run inside the operator's namespace with the operator bundle alone. The
// watchdog resets a node with the `command` driver, through test/hosts/power-cycle.mjs. Extra
// hosts (on the bed, not in the hosts file) stand for machines added at run time.
// Nothing here reaches a host's processes except through its namespace and the network.
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClusterView } from '../../src/core/status.ts';
import { createTestBed, removeStaleTestBeds, type TestBed } from './testbed.ts';

export const TRINE = fileURLToPath(new URL('../../bin/trine.js', import.meta.url));
export const POWER_CYCLE = fileURLToPath(new URL('./power-cycle.mjs', import.meta.url));
export const REPO = fileURLToPath(new URL('../..', import.meta.url));

export type Run = { code: number; stdout: string; stderr: string };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long start() waits for the operator to see a healthy cluster. */
export const HEALTHY_TIMEOUT_MS = 90_000;

export type HostsClusterOptions = {
  /** Agent hosts n1…nN (the first three host the replicas); default 4. */
  agents?: number;
  /** Extra hosts file lines under `timing:`. */
  timing?: Record<string, number>;
  /** Give the root namespace a port on the bed (a benchmark driving the cluster from outside). */
  rootPort?: boolean;
  /** Hosts on the bed that the hosts file does not list: each has an address on the bridge but
   *  no bundle and runs nothing, until a test adds it (`trine node add`, PROTOCOL §10.12) and
   *  boots it with boot(host, bundle). The power controller knows them, at bundle(host). */
  extraHosts?: string[];
  /** `allow-inject: true` in the hosts file: `trine inject` may act on the cluster. */
  allowInject?: boolean;
  /** `spares-per-host` in the hosts file (default: the hosts file's default). */
  sparesPerHost?: number;
  /** What start() waits for (default: healthy and converged). A cluster without spares cannot
   *  become healthy again if a replica is condemned while it starts, which a loaded machine can
   *  cause: such a test waits for a converged group and heals it itself. */
  ready?: (s: StatusParts) => boolean;
};

/** The parts of `trine status --json` (cli/status-report.ts StatusDocument) the tests read. */
export type StatusParts = {
  healthy: boolean; converged: boolean; primary: string | null; problems: string[]; replicas: { id: string; role?: string }[];
  watchdog?: {
    journalsKept?: { replica: string; rsn: number; tasks: number }[];
    restores?: { kind: 'restored' | 'refused'; task: string | null; ok?: boolean; text?: string; code?: string }[];
  };
};

export class HostsCluster {
  private constructor(
    readonly bed: TestBed, readonly root: string, readonly out: string, readonly nodes: string[],
    /** Hosts on the bed the hosts file does not list (HostsClusterOptions.extraHosts). */
    readonly extraHosts: string[],
  ) {}

  /** Every `trine node run` / `trine scc run` this harness started, by host, oldest first (not
   *  the power controller's boots): their exit codes are what systemd would see. */
  private readonly daemons = new Map<string, ChildProcess[]>();

  daemonsOf(host: string): readonly ChildProcess[] {
    return this.daemons.get(host) ?? [];
  }

  private track(host: string, child: ChildProcess): void {
    this.daemons.set(host, [...this.daemonsOf(host), child]);
  }

  /** The operator's bundle: the only directory the operator's commands are given. */
  get opBundle(): string {
    return join(this.out, 'ops');
  }

  bundle(host: string): string {
    return join(this.out, host);
  }

  static async start(opts: HostsClusterOptions = {}): Promise<HostsCluster> {
    await removeStaleTestBeds();
    const nodes = Array.from({ length: opts.agents ?? 4 }, (_, i) => `n${i + 1}`);
    const extra = opts.extraHosts ?? [];
    // Extra hosts last, so the listed ones keep the addresses they have without them.
    const bed = await createTestBed([...nodes, 'wd', 'ops', ...extra].map((name) => ({ name })), { rootPort: opts.rootPort === true });
    const root = mkdtempSync(join(tmpdir(), 'trine-hosts-'));
    const c = new HostsCluster(bed, root, join(root, 'bundles'), nodes, extra);
    try {
      const timing = Object.entries(opts.timing ?? {}).map(([k, v]) => `  ${k}: ${v}\n`).join('');
      const hosts = [
        ...nodes.map((n, i) => `  - { id: ${n}, address: ${bed.host(n).address}, roles: [${i < 3 ? 'replica, agent' : 'agent'}], slots: 4 }`),
        `  - { id: wd, address: ${bed.host('wd').address}, roles: [watchdog] }`,
        `  - { id: ops, address: ${bed.host('ops').address}, roles: [operator] }`,
      ];
      writeFileSync(join(root, 'hosts.yaml'), [
        'cluster: testbed',
        ...(opts.allowInject === true ? ['allow-inject: true'] : []),
        ...(opts.sparesPerHost === undefined ? [] : [`spares-per-host: ${opts.sparesPerHost}`]),
        'reset:',
        `  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(POWER_CYCLE)}, "{node}", "{address}"]`,
        ...(timing.length > 0 ? ['timing:', timing.trimEnd()] : []),
        'hosts:',
        ...hosts,
        '',
      ].join('\n'));
      const init = await runLocal([TRINE, 'init', '--hosts', join(root, 'hosts.yaml'), '--out', c.out]);
      if (init.code !== 0) throw new Error(`trine init failed: ${init.stderr}`);
      // The power controller's map: node → namespace, bundle, boot log (test/hosts/power-cycle.mjs).
      const map = { trine: TRINE, nodes: Object.fromEntries([...nodes, ...extra].map((n) => [n, { ns: bed.host(n).ns, address: bed.host(n).address, bundle: c.bundle(n), log: c.bootLog(n) }])) };
      writeFileSync(join(root, 'testbed-map.json'), JSON.stringify(map));
      c.track('wd', bed.spawn('wd', process.execPath, [TRINE, 'scc', 'run', '--bundle', c.bundle('wd')], {
        logFile: c.bootLog('wd'), env: { ...process.env, TRINE_TESTBED_MAP: join(root, 'testbed-map.json') },
      }));
      for (const n of nodes) c.boot(n);
      await c.waitHealthy(HEALTHY_TIMEOUT_MS, opts.ready);
      return c;
    } catch (e) {
      await c.destroy();
      throw e;
    }
  }

  /** What `trine node run` of `host` printed (every boot appends). */
  bootLog(host: string): string {
    return join(this.root, `${host}.boot.log`);
  }

  /** Starts `trine node run` on `host` from `bundle` (default: the host's bundle, bundle(host)),
   *  as its systemd unit would; returns the process, which daemonsOf(host) lists too. */
  boot(host: string, bundle = this.bundle(host)): ChildProcess {
    const child = this.bed.spawn(host, process.execPath, [TRINE, 'node', 'run', '--bundle', bundle], { logFile: this.bootLog(host) });
    this.track(host, child);
    return child;
  }

  /** `trine COMMAND --dir <operator bundle> ARGS…` inside the operator's namespace. */
  op(args: readonly string[], timeoutMs = 60_000): Promise<Run> {
    const [command, ...rest] = args;
    return this.bed.run('ops', process.execPath, [TRINE, command as string, '--dir', this.opBundle, ...rest], { timeoutMs });
  }

  /** `trine node ACTION --dir <operator bundle> ARGS…` inside the operator's namespace:
   *  `node add` and `node remove` (PROTOCOL §10.12), whose options follow the subcommand. */
  nodeOp(action: 'add' | 'remove', args: readonly string[], timeoutMs = 90_000): Promise<Run> {
    return this.bed.run('ops', process.execPath, [TRINE, 'node', action, '--dir', this.opBundle, ...args], { timeoutMs });
  }

  /** The cluster view two replicas agree on (`trine ps --json` from the operator's namespace),
   *  asked again for up to ~10 s while no two answer (a replacement under way). */
  async view(): Promise<ClusterView> {
    for (let i = 0; ; i++) {
      const r = await this.op(['ps', '--json']);
      if (r.code === 0) return JSON.parse(r.stdout) as ClusterView;
      if (i >= 20) throw new Error(`trine ps failed: ${r.stderr}`);
      await sleep(500);
    }
  }

  /** `trine status --json` from the operator's namespace, the parts the tests read; null if it
   *  printed no document. */
  async status(): Promise<StatusParts | null> {
    const r = await this.op(['status', '--json', '--timeout', '2000']);
    try {
      return JSON.parse(r.stdout) as never;
    } catch {
      return null;
    }
  }

  async waitHealthy(timeoutMs: number, ready = (s: StatusParts) => s.healthy && s.converged): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown = null;
    while (Date.now() < deadline) {
      const s = await this.status();
      last = s;
      if (s !== null && ready(s)) return;
      await sleep(500);
    }
    throw new Error(`namespace cluster not healthy within ${timeoutMs} ms: ${JSON.stringify(last)?.slice(0, 2000)}\n${this.tails()}`);
  }

  /** The last lines of every boot log, for a failure message. */
  tails(): string {
    return [...this.nodes, ...this.extraHosts, 'wd'].map((h) => {
      try {
        return `${h}: ${readFileSync(this.bootLog(h), 'utf8').trim().split('\n').slice(-3).join(' | ')}`;
      } catch {
        return `${h}: no boot log`;
      }
    }).join('\n');
  }

  /** The bundle whose logs/ holds process `id`'s log: its host's (spares: the host they are
   *  bound to; the watchdog: wd). */
  logDirOf(id: string): string {
    const config = JSON.parse(readFileSync(join(this.opBundle, 'cluster.json'), 'utf8')) as {
      membership: { scc: string; spareNodes?: Record<string, string> }; processes: { id: string; node: string | null }[];
    };
    if (id === config.membership.scc) return this.bundle('wd');
    const node = config.processes.find((e) => e.id === id)?.node ?? config.membership.spareNodes?.[id] ?? null;
    return node === null ? this.opBundle : this.bundle(node);
  }

  /** JSON log events of process `id` on `host` (in its bundle's logs/). */
  logEvents(host: string, id: string): Record<string, unknown>[] {
    let text = '';
    try {
      text = readFileSync(join(this.bundle(host), 'logs', `${id}.log`), 'utf8');
    } catch {
      return [];
    }
    return text.split('\n').flatMap((l) => {
      try {
        return l.length === 0 ? [] : [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  }

  /** The pids inside `host`'s namespace, as the kernel lists them (daemons that left our
   *  process groups and task processes included). */
  async pidsIn(host: string): Promise<number[]> {
    const out = await new Promise<string>((resolve) => {
      execFile('ip', ['netns', 'pids', this.bed.host(host).ns], { env: { ...process.env, PATH: `${process.env['PATH'] ?? ''}:/usr/sbin:/sbin` } },
        (_error, stdout) => resolve(stdout));
    });
    return out.split('\n').map((l) => Number(l.trim())).filter((p) => Number.isSafeInteger(p) && p > 0);
  }

  async destroy(): Promise<void> {
    await this.bed.destroy();
    if (process.env['TRINE_KEEP_HOSTS'] !== undefined) console.log(`kept ${this.root}`);
    else rmSync(this.root, { recursive: true, force: true });
  }
}

/** A spawned daemon's exit code (or signal), or 'running' if it has not exited within `ms`. */
export function exitOf(child: ChildProcess, ms: number): Promise<number | string> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  if (child.signalCode !== null) return Promise.resolve(child.signalCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('running'), ms);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? signal ?? 'unknown');
    });
  });
}

function runLocal(args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

export { REPO as REPO_ROOT };
