// `trine inject slow T --share P [--for MS] [--period MS]` and `trine inject heal T`
// (docs/OPERATIONS.md §7), carried out by the agent of T's node, on its own host: a real
// cluster's nodes are other machines, so the CLI cannot signal their processes; the agent can,
// and it knows their pids from its own records (src/daemon/proc-driver.ts liveProcesses).
//
// T is a task process `t3/0` or the node itself (`n2`, or its agent `a2`). Slowing is a duty
// cycle over a period of --period ms, DEFAULT_SLOW_PERIOD_MS if none (src/io/duty-cycle.ts): the
// target runs P % of each period, then is stopped (SIGSTOP) for the rest and continued (SIGCONT).
// The arguments arrive as [T, P], [T, P, FOR] or [T, P, FOR|'', PERIOD] (cli/inject-args.ts).
// Each task process leads its own process group (src/io/spawner.ts), and the signals go to the
// group, so what a process started is slowed with it. A node's slowness covers every task
// process of the node at each period, those started later included, except one slowed by name
// (its own cycle rules it); the agent and the node's other daemons are never slowed: they are
// the cluster's trusted parts, and a slow node means slow applications.
//
// Never leave a process stopped: a cycle ends with SIGCONT to everything it stopped — at heal,
// when --for runs out (a phase is cut short there, however long the period), when a process
// slowed by name exits (the cycle then just ends), when the same target is slowed again (the new
// cycle replaces the old), and when the agent stops (InjectContext.atClose: SIGTERM from `trine
// down`, a shutdown). Only an agent killed with SIGKILL in a stop phase leaves its target
// stopped: `trine inject resume t3/0` continues it.
import {
  DEFAULT_SLOW_PERIOD_MS, dutyCycle, MAX_SLOW_PERIOD_MS, MAX_SLOW_TARGETS, MIN_SLOW_PERIOD_MS, parseSharePercent, parseSlowForMs,
  parseSlowPeriodMs,
} from '../io/duty-cycle.ts';
import { isSameProcess } from '../io/run-records.ts';
import { registerInjectHandler, type InjectContext, type InjectOutcome, type LiveTaskProcess, type TaskProcesses } from './inject.ts';

/** A task process as typed: `t3/0` (the CLI's TASK_PROC_PATTERN). */
const TASK_PROC = /^(t[1-9][0-9]{0,9})\/(0|[1-9][0-9]{0,5})$/;

type Signal = 'SIGSTOP' | 'SIGCONT';

/** What a cycle needs from the host; tests pass fakes. */
export type SlowHost = {
  /** Signals a task process's group (or the process if it leads none); false if it is gone. */
  signal(pid: number, signal: Signal): boolean;
  /** Whether `pid` still names the process that started at `startTime`. */
  isSame(pid: number, startTime: string): boolean;
  nowMs(): number;
  log(level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>): void;
};

function signalGroupOrProcess(pid: number, signal: Signal): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 1) throw new RangeError(`not a task process pid: ${pid}`);
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return true;
    } catch {
      // not a group leader, or gone
    }
  }
  return false;
}

export const realSlowHost = (log: SlowHost['log']): SlowHost => ({ signal: signalGroupOrProcess, isSame: isSameProcess, nowMs: () => Date.now(), log });

/** Why a cycle ended. */
export type SlowEnd = 'healed' | 'expired' | 'exited' | 'replaced' | 'agent stopping' | 'failed';

/** One target's duty cycle: run `runMs`, stop `stopMs` (together `periodMs`), until `untilMs` or
 *  end(). */
export class SlowCycle {
  /** What this cycle stopped and has not continued yet, by pid: the start time it had. */
  private readonly stopped = new Map<number, string>();
  private timer: NodeJS.Timeout | null = null;
  private ended = false;
  readonly runMs: number;
  readonly stopMs: number;

  constructor(
    readonly key: string,
    readonly sharePercent: number,
    readonly periodMs: number,
    readonly untilMs: number | null,
    /** The processes to stop this period; for a process slowed by name, [] once it is gone. */
    private readonly pick: () => LiveTaskProcess[],
    /** A process slowed by name ends its cycle once it is gone; a node's never does. */
    private readonly single: boolean,
    private readonly host: SlowHost,
    private readonly onEnd: (cycle: SlowCycle, why: SlowEnd) => void,
  ) {
    ({ runMs: this.runMs, stopMs: this.stopMs } = dutyCycle(sharePercent, periodMs));
    this.arm(this.runMs, () => this.stopPhase());
  }

  /** The next phase in `ms`, or sooner at `untilMs`: with a long period, --for must not run a
   *  whole stop phase past its end. A phase that throws (a bug here) ends the cycle, continuing
   *  what it stopped, instead of taking the agent down with an uncaught exception. */
  private arm(ms: number, fn: () => void): void {
    if (!(ms >= 1 && ms < this.periodMs)) throw new Error(`slow ${this.key}: a phase of ${ms} ms in a period of ${this.periodMs}`);
    const leftMs = this.untilMs === null ? ms : Math.max(0, this.untilMs - this.host.nowMs());
    this.timer = setTimeout(() => {
      try {
        fn();
      } catch (e) {
        this.host.log('error', 'inject.slow.failed', { target: this.key, error: (e as Error).message });
        this.end('failed');
      }
    }, Math.min(ms, leftMs));
    this.timer.unref();
  }

  private expired(): boolean {
    return this.untilMs !== null && this.host.nowMs() >= this.untilMs;
  }

  private stopPhase(): void {
    this.timer = null;
    if (this.expired()) return this.end('expired');
    const procs = this.pick();
    if (this.single && procs.length === 0) return this.end('exited');
    for (const p of procs) {
      if (this.host.signal(p.pid, 'SIGSTOP')) this.stopped.set(p.pid, p.startTime);
      else if (this.single) return this.end('exited');
    }
    this.arm(this.stopMs, () => this.runPhase());
  }

  private runPhase(): void {
    this.timer = null;
    this.continueAll();
    if (this.expired()) return this.end('expired');
    this.arm(this.runMs, () => this.stopPhase());
  }

  /** SIGCONT to everything this cycle stopped that is still the process it stopped. Each
   *  signal is tried even if another one throws. */
  private continueAll(): void {
    const stopped = [...this.stopped];
    this.stopped.clear();
    for (const [pid, startTime] of stopped) {
      try {
        if (this.host.isSame(pid, startTime)) this.host.signal(pid, 'SIGCONT');
      } catch (e) {
        this.host.log('error', 'inject.slow.continue-failed', { target: this.key, pid, error: (e as Error).message });
      }
    }
  }

  /** Ends the cycle: nothing it stopped stays stopped. Idempotent. */
  end(why: SlowEnd): void {
    if (this.ended) return;
    this.ended = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.continueAll();
    if (this.stopped.size !== 0) throw new Error(`slow ${this.key} ended with processes still stopped`);
    this.onEnd(this, why);
  }

  /** Processes this cycle holds stopped right now (tests, and the invariant at end). */
  stoppedNow(): number[] {
    return [...this.stopped.keys()];
  }
}

/** One agent's cycles, by target (`t3/0`, or the node's name). */
export class SlowCycles {
  readonly cycles = new Map<string, SlowCycle>();

  constructor(private readonly tasks: TaskProcesses, private readonly host: SlowHost) {}

  /** Slows `key` (a task process of `live`, or the node `node`); replaces a cycle of the same
   *  key. Returns the new cycle and what it replaced, or a refusal. */
  start(
    target: { proc: LiveTaskProcess } | { node: string }, sharePercent: number, forMs: number | null,
    periodMs: number = DEFAULT_SLOW_PERIOD_MS,
  ): { cycle: SlowCycle; replaced: SlowCycle | null } | string {
    const key = 'proc' in target ? `${target.proc.task}/${target.proc.vpid}` : target.node;
    const replaced = this.cycles.get(key) ?? null;
    if (replaced === null && this.cycles.size >= MAX_SLOW_TARGETS) return `${MAX_SLOW_TARGETS} targets are slowed already: heal some first`;
    replaced?.end('replaced');
    const untilMs = forMs === null ? null : this.host.nowMs() + forMs;
    let pick: () => LiveTaskProcess[];
    if ('proc' in target) {
      const { pid, startTime } = target.proc;
      pick = () => this.tasks.live().filter((p) => p.pid === pid && p.startTime === startTime);
    } else {
      // Every task process of the node but those slowed by name, whose own cycle rules them.
      pick = () => this.tasks.live().filter((p) => !this.cycles.has(`${p.task}/${p.vpid}`));
    }
    const cycle = new SlowCycle(key, sharePercent, periodMs, untilMs, pick, 'proc' in target, this.host, (c, why) => {
      if (this.cycles.get(c.key) === c) this.cycles.delete(c.key);
      this.host.log(why === 'healed' || why === 'replaced' ? 'info' : 'warn', 'inject.slow.end', { target: c.key, why });
    });
    if (this.cycles.has(key)) throw new Error(`slow ${key}: the cycle it replaced is still registered`);
    this.cycles.set(key, cycle);
    this.host.log('warn', 'inject.slow.start', { target: key, sharePercent, forMs, periodMs, runMs: cycle.runMs, stopMs: cycle.stopMs });
    return { cycle, replaced };
  }

  /** Ends `key`'s cycle; what it was, or null if it had none. */
  heal(key: string): SlowCycle | null {
    const c = this.cycles.get(key) ?? null;
    c?.end('healed');
    return c;
  }

  endAll(why: SlowEnd): void {
    for (const c of [...this.cycles.values()]) c.end(why);
  }
}

// ---- the handlers ---------------------------------------------------------------------------------

/** Per agent (its task processes): the cycles it runs. */
const registries = new WeakMap<TaskProcesses, SlowCycles>();

function cyclesOf(ctx: InjectContext): SlowCycles | string {
  if (ctx.tasks === null) return `${ctx.self} is a ${ctx.kind}, not an agent: slow and heal T go to the agent of T's node`;
  let r = registries.get(ctx.tasks);
  if (r === undefined) {
    r = new SlowCycles(ctx.tasks, realSlowHost((level, event, fields) => ctx.log(level, event, fields)));
    registries.set(ctx.tasks, r);
    const all = r;
    ctx.atClose('slow', () => all.endAll('agent stopping'));
  }
  return r;
}

/** This agent's node (cluster.json's process entry). */
function ownNode(ctx: InjectContext): string {
  return ctx.cluster.config.processes.find((p) => p.id === ctx.self)?.node ?? ctx.self;
}

type Target = { key: string; proc: { task: string; vpid: number } | null } | string;

/** `t3/0`, or this agent's node (`n2` or `a2`); anything else is refused with why. */
function targetOf(ctx: InjectContext, text: string | undefined): Target {
  const node = ownNode(ctx);
  if (text === undefined) return `${ctx.self}: needs a target, a task process (t3/0) or this node (${node})`;
  const m = TASK_PROC.exec(text);
  if (m !== null) return { key: text, proc: { task: m[1] as string, vpid: Number(m[2]) } };
  if (text === node || text === ctx.self) return { key: node, proc: null };
  return `${ctx.self}: ${JSON.stringify(text.slice(0, 64))} is neither a task process (t3/0) nor this agent's node ${node}`;
}

const pct = (c: SlowCycle) => `${c.sharePercent} % CPU`;

function slow(args: readonly string[], ctx: InjectContext): InjectOutcome {
  const cycles = cyclesOf(ctx);
  if (typeof cycles === 'string') return { ok: false, text: cycles };
  const target = targetOf(ctx, args[0]);
  if (typeof target === 'string') return { ok: false, text: target };
  const share = parseSharePercent(args[1] ?? '');
  if (share === null) return { ok: false, text: `${ctx.self}: slow needs a share of CPU from 1 to 99 %, got ${JSON.stringify((args[1] ?? '').slice(0, 64))}` };
  if (args.length > 4) return { ok: false, text: `${ctx.self}: slow takes T, P, and at most FOR and PERIOD, got ${args.length} arguments` };
  const periodText = args[3];
  const periodMs = periodText === undefined ? DEFAULT_SLOW_PERIOD_MS : parseSlowPeriodMs(periodText);
  if (periodMs === null) {
    return { ok: false, text: `${ctx.self}: slow got a bad period ${JSON.stringify((periodText ?? '').slice(0, 64))} (ms, ${MIN_SLOW_PERIOD_MS} to ${MAX_SLOW_PERIOD_MS})` };
  }
  // FOR is '' when a PERIOD follows without one.
  const forText = args[2] === '' ? undefined : args[2];
  const forMs = forText === undefined ? null : parseSlowForMs(forText, periodMs);
  if (forText !== undefined && forMs === null) {
    return { ok: false, text: `${ctx.self}: slow got a bad duration ${JSON.stringify(forText.slice(0, 64))} (ms, at least the period, ${periodMs})` };
  }
  const node = ownNode(ctx);
  let what: string;
  let started: ReturnType<SlowCycles['start']>;
  if (target.proc !== null) {
    const { task, vpid } = target.proc;
    const proc = ctx.tasks?.live().find((p) => p.task === task && p.vpid === vpid);
    if (proc === undefined) return { ok: false, text: `${ctx.self}: no task process ${target.key} runs on ${node} now (it ended, or runs elsewhere: see \`trine ps\`)` };
    started = cycles.start({ proc }, share, forMs, periodMs);
    what = `${target.key} (pid ${proc.pid} on ${node}) runs`;
  } else {
    started = cycles.start({ node }, share, forMs, periodMs);
    const now = ctx.tasks?.live().length ?? 0;
    what = `every task process of ${node} (${now} now, and any it starts) runs`;
  }
  if (typeof started === 'string') return { ok: false, text: `${ctx.self}: ${started}` };
  const { cycle, replaced } = started;
  const until = `\`trine inject heal ${target.key}\``;
  const how = `(stopped ${cycle.stopMs} ms of every ${cycle.periodMs})`;
  const was = replaced === null ? '' : ` (was ${pct(replaced)})`;
  const span = forMs === null ? `until ${until}` : `for ${forMs} ms, or until ${until}`;
  return { ok: true, text: `${what} at ${pct(cycle)} ${how} ${span}${was}` };
}

/** `heal T` with one argument (inject-link.ts sends it here): ends T's slowness. */
export function healSlow(args: readonly string[], ctx: InjectContext): InjectOutcome {
  const cycles = cyclesOf(ctx);
  if (typeof cycles === 'string') return { ok: false, text: cycles };
  const target = targetOf(ctx, args[0]);
  if (typeof target === 'string') return { ok: false, text: target };
  const node = ownNode(ctx);
  const was = cycles.heal(target.key);
  if (was === null) return { ok: true, text: `${target.key} healed on ${node} (was: not slowed)` };
  return { ok: true, text: `${target.key} healed on ${node}: runs at full speed again (was: ${pct(was)})` };
}

registerInjectHandler('slow', slow);
