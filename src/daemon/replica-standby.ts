// Warm standby replicas (PROTOCOL §10.6). When the group replaces a condemned replica, it
// commands one node's agent to start a spare id. A cold `node --import tsx` of the manager takes
// about 1.2 s on this hardware (docs/PERFORMANCE.md §6), most of the time from a failure to three
// serving replicas again. So each agent keeps one `trine manager --standby` loaded and waiting, as
// the keeper keeps a standby agent (src/daemon/keeper.ts): it has no identity until told `go`
// with the id and the group to join, and then it is that replica within milliseconds. The next
// standby is loaded a little later, off the critical path.
//
// The standby's command line names every spare id (`--standby r4 r5 …`), so that once promoted
// to, say, r5 it is recognised as r5's process by the pid-file checks (isClusterProcess), which
// look for the id among the arguments. It stays a child of the agent, over an IPC channel, until
// promoted: an agent that dies takes its unused standby with it (the channel closes and the
// standby exits). A promoted replica is cut loose at once: it runs in its own process group and
// outlives the agent, as a replica started cold does.
import type { ChildProcess } from 'node:child_process';
import type { ProcessId } from '../core/ports.ts';

/** Delay before a standby is loaded after each promotion (the new replica is installing the
 *  state meanwhile), and after the agent starts: longer, so that the four loads of a cluster
 *  (a CPU-second each) do not compete with the cluster's own start, which on a loaded 2-core
 *  host already takes 10–15 s. A replacement commanded before then starts cold. */
export const REPLICA_STANDBY_DELAY_MS = 3_000;
export const REPLICA_STANDBY_FIRST_DELAY_MS = 10_000;
/** Time a standby gets to load and say it is ready; then it is killed and loaded again. */
export const REPLICA_STANDBY_READY_MS = 30_000;

export type JoinTarget = { view: number; primary: ProcessId; replicas: readonly ProcessId[] };

/** Standby → agent, and agent → standby, over the IPC channel. */
export type ReplicaStandbyToAgent = { type: 'standby.ready' };
export type AgentToReplicaStandby = { type: 'go'; id: ProcessId; join: JoinTarget };

export type ReplicaStandbyOptions = {
  /** Starts `trine manager --standby …` detached with an IPC channel (src/daemon/main.ts). */
  spawn: () => ChildProcess;
  /** Records a promoted standby's pid as `id`'s (run/<id>.pid). */
  writePid: (id: ProcessId, pid: number) => void;
  log: (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void;
  delayMs?: number;
  firstDelayMs?: number;
  /** Whether a standby is worth its memory and its CPU-second of loading now: the group starts
   *  a replacement on a node that hosts no replica (PROTOCOL §10.6), so an agent whose node
   *  runs one only looks again every REPLICA_STANDBY_RECHECK_MS. Absent: always. */
  needed?: () => boolean;
};

/** How often an agent whose node runs a replica looks again whether it needs a standby. */
export const REPLICA_STANDBY_RECHECK_MS = 5_000;

/** The agent's side: keeps at most one standby, promotes it on demand. */
export class ReplicaStandby {
  private child: ChildProcess | null = null;
  private ready = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly delayMs: number;
  private readonly firstDelayMs: number;

  constructor(private readonly opts: ReplicaStandbyOptions) {
    this.delayMs = opts.delayMs ?? REPLICA_STANDBY_DELAY_MS;
    this.firstDelayMs = opts.firstDelayMs ?? opts.delayMs ?? REPLICA_STANDBY_FIRST_DELAY_MS;
  }

  /** Load a standby after the delay. An unused standby dies with this process: killed here on
   *  a clean exit (so `trine down` leaves none), and on its own when the channel closes. */
  start(): void {
    process.once('exit', () => this.stop());
    this.schedule(this.firstDelayMs);
  }

  /** Turn the standby into replica `id` joining `join`; its pid, or null if none is ready (the
   *  caller then starts the replica cold). */
  promote(id: ProcessId, join: JoinTarget): number | null {
    const child = this.child;
    if (child === null || !this.ready || child.pid === undefined || !child.connected) return null;
    const pid = child.pid;
    const go: AgentToReplicaStandby = { type: 'go', id, join: { view: join.view, primary: join.primary, replicas: [...join.replicas] } };
    try {
      child.send(go);
    } catch (e) {
      this.opts.log('warn', 'replica.standby.promote-failed', { replica: id, standbyPid: pid, error: (e as Error).message });
      this.discard();
      this.schedule(0);
      return null;
    }
    // Cut loose: the replica outlives this agent (the standby disconnects on `go` as well).
    this.child = null;
    this.ready = false;
    child.removeAllListeners('exit');
    child.unref();
    this.opts.writePid(id, pid);
    this.opts.log('info', 'replica.standby.promoted', { replica: id, replicaPid: pid });
    this.schedule(this.delayMs);
    return pid;
  }

  /** Kill the standby and load no more (the agent is stopping). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.discard();
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.timer !== null || this.child !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.load();
    }, delayMs);
    this.timer.unref();
  }

  private load(): void {
    if (this.stopped || this.child !== null) return;
    if (this.opts.needed !== undefined && !this.opts.needed()) {
      this.schedule(REPLICA_STANDBY_RECHECK_MS);
      return;
    }
    let child: ChildProcess;
    try {
      child = this.opts.spawn();
    } catch (e) {
      this.opts.log('error', 'replica.standby.spawn-failed', { error: (e as Error).message });
      this.schedule(this.delayMs * 10);
      return;
    }
    this.child = child;
    this.ready = false;
    const startedAt = performance.now();
    const deadline = setTimeout(() => {
      if (this.child !== child || this.ready) return;
      this.opts.log('warn', 'replica.standby.slow', { standbyPid: child.pid ?? null, waitedMs: REPLICA_STANDBY_READY_MS });
      this.discard();
      this.schedule(this.delayMs);
    }, REPLICA_STANDBY_READY_MS);
    deadline.unref();
    child.on('message', (m: unknown) => {
      if (this.child !== child || (m as { type?: unknown } | null)?.type !== 'standby.ready') return;
      clearTimeout(deadline);
      this.ready = true;
      this.opts.log('info', 'replica.standby.ready', { standbyPid: child.pid ?? null, loadMs: Math.round(performance.now() - startedAt) });
    });
    child.on('error', (e) => this.opts.log('warn', 'replica.standby.error', { error: e.message }));
    child.on('exit', (code, signal) => {
      clearTimeout(deadline);
      if (this.child !== child) return;
      this.child = null;
      this.ready = false;
      if (this.stopped) return;
      this.opts.log('warn', 'replica.standby.exited', { code, signal });
      this.schedule(this.delayMs * 10);
    });
    // The standby never keeps the agent alive, nor does its channel.
    child.unref();
    child.channel?.unref();
  }

  private discard(): void {
    const child = this.child;
    this.child = null;
    this.ready = false;
    if (child === null) return;
    child.removeAllListeners('exit');
    try {
      child.kill('SIGKILL');
    } catch {
      // Gone already.
    }
  }
}

const isGo = (m: unknown): m is AgentToReplicaStandby => {
  if (typeof m !== 'object' || m === null) return false;
  const g = m as Partial<AgentToReplicaStandby>;
  const j = g.join as Partial<JoinTarget> | undefined;
  return g.type === 'go' && typeof g.id === 'string' && typeof j === 'object' && j !== null && Number.isSafeInteger(j.view) &&
    typeof j.primary === 'string' && Array.isArray(j.replicas) && j.replicas.every((r) => typeof r === 'string');
};

/** The standby's side: say it is loaded, wait for `go`, cut the channel, and return which
 *  replica to be. Exits if the agent goes away first. `spares`: the ids it may become. */
export function waitForReplicaGo(spares: readonly ProcessId[]): Promise<{ id: ProcessId; join: JoinTarget }> {
  return new Promise((resolve, reject) => {
    if (typeof process.send !== 'function' || !process.connected) {
      reject(new Error('--standby needs the IPC channel of the agent that starts it: run `trine manager --id <id>` instead'));
      return;
    }
    const onDisconnect = (): void => process.exit(0);
    const onMessage = (m: unknown): void => {
      if (!isGo(m) || !spares.includes(m.id)) return;
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
      process.disconnect();
      resolve({ id: m.id, join: m.join });
    };
    process.on('message', onMessage);
    process.once('disconnect', onDisconnect);
    const ready: ReplicaStandbyToAgent = { type: 'standby.ready' };
    process.send(ready);
  });
}
