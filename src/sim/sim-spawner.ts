// The simulated operating system of one node: the twin of src/io/spawner.ts's ChildProcessSpawner
// (the Spawner port), on the simulated clock. Task processes are tiny programs named by their
// executable, so a seed decides what every process does and a fault plan can crash any of them:
//
//   sim-work  [ms] [code]   runs `ms` (default 50) then exits with `code` (default 0)
//   sim-forever              runs until killed
//   sim-stubborn             ignores SIGTERM; only SIGKILL ends it
//   sim-linked [stubborn]    runs until killed; links the application library (the task sim
//                            connects it to its agent and scripts its signals, src/sim/tasks.ts);
//                            `stubborn`: ignores SIGTERM
//   anything else            does not exist: the spawn fails with ENOENT, like a missing file
//
// It keeps a record of every process it ever ran, so the task invariants (src/sim/tasks.ts) can
// compare what the manager believes with what really ran. Deterministic: no clock or randomness
// of its own; delays come from the seeded stream it is given.
import type { KillSignal, SpawnSpec, Spawner, SpawnerEvent } from '../core/ports.ts';
import type { SeededRandom } from './random.ts';
import type { Scheduler } from './scheduler.ts';

/** fork + exec on a simulated node: well under the real ~1 ms of a small binary. */
const SPAWN_DELAY_MS = 0.5;
/** How long a process takes to die once signalled. */
const KILL_DELAY_MS = 0.2;

export type SimOsProcess = {
  pid: number;
  node: string;
  task: string;
  vpid: number;
  program: string;
  startedAtMs: number;
  /** Null while it runs. */
  exitedAtMs: number | null;
  code: number | null;
  signal: string | null;
  /** Whoever is told when it ends: null once the observer is gone (its agent crashed). */
  on: ((e: SpawnerEvent) => void) | null;
  /** A process killed by a node power-off ends without anyone observing it. */
  ignoresTerm: boolean;
};

/** Pids are unique across the whole simulated cluster (one counter per world), so a record
 *  names one process and a seed replays with the same pids. */
export type PidCounter = { next: number };

export class SimSpawner implements Spawner {
  readonly processes = new Map<number, SimOsProcess>();
  /** Bumped when the observing agent dies: forks scheduled before that are cancelled. */
  private generation = 0;

  constructor(
    readonly node: string,
    private readonly scheduler: Scheduler,
    private readonly rng: SeededRandom,
    private readonly pids: PidCounter,
  ) {}

  /** The simulated fork happens later, on the simulated clock: no pid yet. */
  spawnProcess(spec: SpawnSpec, on: (event: SpawnerEvent) => void): null {
    const program = spec.file;
    const delay = SPAWN_DELAY_MS * (0.5 + this.rng.next());
    if (program !== 'sim-work' && program !== 'sim-forever' && program !== 'sim-stubborn' && program !== 'sim-linked') {
      this.scheduler.after(delay, () => on({ type: 'os.forkFailed', error: `spawn failed: ENOENT ${program}` }));
      return null;
    }
    const generation = this.generation;
    this.scheduler.after(delay, () => {
      if (generation !== this.generation) return; // its agent died before the fork
      const pid = this.pids.next++;
      const p: SimOsProcess = {
        pid, node: this.node, task: spec.taskId, vpid: spec.vpid, program, startedAtMs: this.scheduler.nowMs,
        exitedAtMs: null, code: null, signal: null, on, ignoresTerm: program === 'sim-stubborn' || (program === 'sim-linked' && spec.args[0] === 'stubborn'),
      };
      this.processes.set(pid, p);
      on({ type: 'os.spawned', pid });
      if (program === 'sim-work') {
        const ms = Number(spec.args[0] ?? 50);
        const code = Number(spec.args[1] ?? 0);
        this.scheduler.after(Number.isFinite(ms) ? ms : 50, () => this.exit(p, Number.isInteger(code) ? code : 1, null));
      }
    });
    return null;
  }

  killProcess(pid: number, signal: KillSignal): void {
    const p = this.processes.get(pid);
    if (p === undefined || p.exitedAtMs !== null) return;
    if (signal === 'SIGTERM' && p.ignoresTerm) return;
    this.scheduler.after(KILL_DELAY_MS, () => this.exit(p, null, signal));
  }

  /** The process ends by itself with exit code `code` (a linked process after its finalize). */
  finish(pid: number, code: number): void {
    const p = this.processes.get(pid);
    if (p !== undefined && p.exitedAtMs === null) this.exit(p, code, null);
  }

  /** Fault injection: the process crashes (as with `kill -9`). */
  crash(pid: number): void {
    const p = this.processes.get(pid);
    if (p !== undefined && p.exitedAtMs === null) this.exit(p, null, 'SIGKILL');
  }

  /** The agent that observes these processes died: they keep running, unobserved. A fork it
   *  asked for that has not happened yet never happens: a real agent forks synchronously within
   *  the turn that handles the command (src/io/spawner.ts), so no child outlives a parent that
   *  died before forking it. */
  detachObservers(): void {
    this.generation++;
    for (const p of this.processes.values()) p.on = null;
  }

  /** A power reset of the node: every process is gone, and nobody is told. */
  powerOff(): void {
    this.generation++;
    for (const p of this.processes.values()) {
      p.on = null;
      if (p.exitedAtMs === null) this.exit(p, null, 'SIGKILL');
    }
  }

  /** Liveness as a restarted agent checks it (pid and start time match). */
  alive(pid: number): boolean {
    const p = this.processes.get(pid);
    return p !== undefined && p.exitedAtMs === null;
  }

  /** An adopted process is watched by polling, not by an exit event: stop being told. */
  observe(pid: number, on: ((e: SpawnerEvent) => void) | null): void {
    const p = this.processes.get(pid);
    if (p !== undefined) p.on = on;
  }

  running(): SimOsProcess[] {
    return [...this.processes.values()].filter((p) => p.exitedAtMs === null);
  }

  private exit(p: SimOsProcess, code: number | null, signal: string | null): void {
    if (p.exitedAtMs !== null) return;
    p.exitedAtMs = this.scheduler.nowMs;
    p.code = code;
    p.signal = signal;
    p.on?.({ type: 'os.exited', code, signal });
    p.on = null;
  }
}
